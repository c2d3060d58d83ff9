/* SPDX-License-Identifier: MIT */
/*
 * kv.h - what the files of the key-value server share: the server's
 * settings and contexts (server.c), a connection and the command being
 * run on it, the store (store.c; a sorted set's order: zset.c), the
 * replies and numbers (protocol.c), the command table and its families
 * (commands.c, cmd_*.c). main.c says what the server does as a whole.
 */
#ifndef KV_H
#define KV_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <coring/coring.h>

#define LINE_MAX_BYTES (64 * 1024)    /* a request line, as Redis */
#define ARGS_MAX INT_MAX              /* arguments of one command, as Redis */
#define OUT_FLUSH (64 * 1024)         /* answers buffered before a send */

/* ---- the store (store.c) -------------------------------------------------------------- */

enum { T_STRING, T_LIST, T_SET, T_HASH, T_ZSET };
enum { LEFT, RIGHT };

/* A key of a shard, a member of a set or a sorted set, a field of a hash. */
struct item {
	struct item *next;            /* its bucket's chain */
	uint64_t hash;
	int64_t expire_ms;            /* a key's: Unix time in ms; 0: never */
	double score;                 /* a sorted set member's */
	void *obj;                    /* a key's list, set, hash or sorted set */
	uint32_t klen, vlen;
	uint8_t type;                 /* a key's: T_STRING ... */
	char kv[];                    /* the key, then a string's or a field's value */
};

/* A chained hash table of items; it doubles when it has more than buckets. */
struct dict {
	struct item **tab;
	size_t mask, count;
};

/* A list's element, and an element on its way between two lists. */
struct str {
	size_t n;
	char p[];
};

/* A list: a ring of elements (cap a power of two). */
struct list {
	struct str **a;
	size_t head, len, cap;
};

/* A member's node in a sorted set's skip list (zset.c): a link on level
 * 0, the list of every member in order, and on each level above it up to
 * the node's own number of levels (drawn when it was made). */
struct znode {
	struct item *m;               /* the member (the head's: NULL) */
	struct znode *back;           /* the one before it on level 0 (the first's: the head) */
	struct zlink {
		struct znode *next;   /* the next node on this level (NULL: the end) */
		double score;         /* next's member's (a search need not read next) */
		size_t span;          /* how many ranks ahead next is (if any) */
	} lv[];
};

/* A sorted set: its members by name (d) and in order, by score then name,
 * in a skip list (zset.c: O(log n) an insert, a remove, a rank). */
struct zset {
	struct dict d;
	struct znode *head;           /* on every level, no member; lv[0].next: the first */
	int levels;                   /* the most a node has had (1 at least) */
	size_t n;                     /* the members in the list */
};

/* A sorted set's search: node x's member, of that score, comes before
 * what arg stands for. */
typedef int zbefore(const struct znode *x, double score, const void *arg);

struct shard {
	struct dict keys;
	struct dict blocked;          /* keys with connections waiting (blocking.c) */
	size_t cursor;                /* where the sweep goes on */
};

uint64_t hash_key(const char *p, size_t n);
int64_t now_ms(void);
struct item *item_new(const char *k, size_t kn, const char *v, size_t vn);
struct item *item_copy(struct item *it, const char *k, size_t kn, int deep);
void item_free(struct item *it);
int dict_init(struct dict *d, size_t buckets);
struct dict *dict_new(void);
void dict_free(struct dict *d);
struct item **dict_find(struct dict *d, const char *k, size_t n, uint64_t h);
struct item *dict_put(struct dict *d, struct item **pe, struct item *it);
struct item *dict_take(struct dict *d, struct item **pe);
uint64_t dict_scan(struct dict *d, uint64_t v, void (*fn)(void *arg, struct item *it), void *arg);
struct item *dict_random(struct dict *d);
int shard_init(struct shard *sh);
void shard_free(struct shard *sh);
void shard_sweep(struct shard *sh, size_t budget);
struct item **db_slot(struct shard *sh, const char *k, size_t n, uint64_t h);
struct item *db_get(struct shard *sh, const char *k, size_t n, uint64_t h);
void db_delete(struct shard *sh, struct item **pe);
int db_del(struct shard *sh, const char *k, size_t n, uint64_t h);
int db_set_string(struct shard *sh, const char *k, size_t kn, uint64_t h, const char *v,
		  size_t vn, int64_t expire_ms);
struct item *db_add_obj(struct shard *sh, const char *k, size_t kn, uint64_t h, int type);
struct str *str_new(const char *p, size_t n);
struct list *list_new(void);
void list_free(struct list *l);
struct str **list_at(struct list *l, long long i);
int list_push(struct list *l, int end, struct str *s);
struct str *list_pop(struct list *l, int end);
void list_remove(struct list *l, size_t i);
struct zset *zset_new(void);
void zset_free(struct zset *z);
int zset_insert(struct zset *z, struct item *it);
void zset_remove(struct zset *z, struct item *it);
void zset_rescore(struct zset *z, struct item *it, double score);
size_t zset_rank(const struct zset *z, zbefore *before, const void *arg);
struct znode *zset_at(const struct zset *z, size_t i);

static inline const char *item_val(const struct item *it)
{
	return it->kv + it->klen;
}

/* ---- contexts and connections (server.c) ---------------------------------------------- */

struct listener {
	co_frame co;
	co_io io;
	int lfd;
	struct ctx *x;
};

struct sweeper {
	co_frame co;
	co_io io;
	struct ctx *x;
};

struct quiesce {
	co_frame co;
	struct ctx *x;
};

struct ctx {
	unsigned idx;
	atomic_uint tick;             /* the sweeper's: one per 100 ms */
	struct shard sh;
	pthread_mutex_t lock;         /* over conns: walked by a stop, from here */
	struct conn *conns;
	struct listener lis;
	struct sweeper sw;
	struct quiesce q;
};

struct server {
	unsigned threads;
	int port;
	const char *bind;
	uint64_t idle_ns, grace_ns;
	size_t max_bulk, max_request, max_reply;
	co_sched s;
	struct ctx *ctx;
	co_signals sigs;
	atomic_int stopping;
	atomic_long live;             /* connections open */
	atomic_long nblocked;         /* connections waiting (BLPOP ...) */
	atomic_ullong next_id;        /* HELLO's client id */
	int64_t start_ms;
	co_event all_closed;          /* set when the last one closes after a stop */
};

extern struct server srv;

/* Serve until SIGTERM or SIGINT (srv set up by main.c): 0 or -errno. */
int server_run(void);
void conn_free(struct conn *c);

struct arg {
	size_t off, len;
};

struct flusher {
	co_frame co;
	co_io io;
	struct conn *c;
	size_t done;
};

enum { ST_HEAD, ST_BULKLEN, ST_BULK };

struct command;

struct conn {
	co_frame co;
	co_reader rd;
	co_transfer tr;
	struct flusher fl;
	co_io io;
	struct ctx *home;
	struct conn *prev, *next;     /* home's list, while linked */
	int linked;
	atomic_uint seen;             /* home's tick at its last activity */
	unsigned where;               /* the context it runs on now */
	int fd, state, closing;
	unsigned long long id;
	co_frame *rf;                 /* the read being awaited */
	long long nargs;              /* arguments the array announced */
	size_t blen;                  /* the bulk string being read */
	struct arg *args;
	unsigned argc, argcap;
	char *abuf;                   /* the arguments' bytes */
	size_t alen, acap;
	char *out;                    /* answers not sent yet */
	size_t olen, ocap;
	int dropped;                  /* its answers passed --max-reply-buffer */
	/* the command being run */
	const struct command *cmd;
	co_frame keys;                /* its key parts (keys_fn) */
	unsigned ki;                  /* the next key's argument */
	unsigned cur, owner;          /* the key being run, its context */
	uint64_t h;                   /* its hash */
	long long num, num2;          /* its numbers (a count, a time, an index) */
	int64_t expire_ms;
	int flags, phase;
	size_t mark;                  /* where its array's elements begin in out */
	struct item *held;            /* a key on its way (RENAME, COPY) */
	struct str *elem;             /* an element on its way (LMOVE; a blocking pop's) */
	/* a blocking command's wait (blocking.c) */
	int blocked;                  /* it waits (once its keys were visited) */
	atomic_int claimed;           /* 0 while waiting; 1 once served, stopped or timed out */
	co_event wake;
	co_frame bf;                  /* the wait (block_fn) */
	struct waitkid {              /* its two sides: served or timed out; the peer gone */
		co_frame co;
		co_waiter w;
		co_limit lim;
		co_io io;
		struct conn *c;
		char byte;
	} wk[2];
	co_frame *kids[2];
	co_when when;
	struct bwait *bw;             /* a node per key it waits on */
	unsigned nbw, bwcap, bi;
	int bend;                     /* the end it pops from */
	int answered;                 /* it answered by itself (no wait) */
	atomic_int nlinked;           /* its nodes in queues (shards unlink them) */
	int orphan;                   /* 1: nodes it could not take out; 2: and it ended */
	unsigned served;              /* the argument of the key that served it (0: none) */
	uint64_t block_ns;            /* its time limit (0: none) */
};

/* A connection waiting on a key: in the shard's queue for that key. */
struct bwait {
	struct bwait *next, *prev;
	struct conn *c;
	struct item *q;               /* the queue's item in shard.blocked; NULL: not linked */
	unsigned arg;                 /* the key's argument */
};

/* The context that owns a key's shard. */
static inline unsigned owner_of(uint64_t h)
{
	return (unsigned)((h >> 40) % srv.threads);
}

static inline const char *arg_p(const struct conn *c, unsigned i)
{
	return c->abuf + c->args[i].off;
}

static inline size_t arg_n(const struct conn *c, unsigned i)
{
	return c->args[i].len;
}

/* ---- replies, numbers, requests (protocol.c) ------------------------------------------- */

char *out_room(struct conn *c, size_t n);
void out_add(struct conn *c, const char *p, size_t n);
size_t fmt_ll(char *p, long long v);
void out_num(struct conn *c, char type, long long v);
void reply_ok(struct conn *c);
void reply_nil(struct conn *c);
void reply_bulk(struct conn *c, const char *p, size_t n);
void reply_error(struct conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int parse_ll(const char *p, size_t n, long long *out);
int arg_ll(const struct conn *c, unsigned i, long long *out);
int arg_is(const struct conn *c, unsigned i, const char *word);
int request_take(struct conn *c, const char *p, size_t n);
co_frame *request_read(struct conn *c);
void request_failed(struct conn *c, int err);

/* ---- commands (commands.c, cmd_*.c) ---------------------------------------------------- */

/*
 * A command runs in three parts: begin at the connection's home (checks
 * its arguments, may answer at once: then nothing else runs), one key
 * part per key on the context that owns the key, and end back home. Keys
 * are argv[first], argv[first + step] ... up to argv[last] (last -1: the
 * last argument); a key part may choose another next key (c->ki: an
 * argument, 0: none), to come back to one (RENAMENX puts its key back).
 * With CMD_ALL_SHARDS the parts run on every shard in turn (i: 1 + the
 * shard's index).
 */
enum { CMD_ALL_SHARDS = 1 };

struct command {
	const char *name;
	int arity;                    /* > 0: exactly; < 0: at least -arity */
	int first, last, step;        /* first 0: no key; last < 0: argc + last */
	int flags;                    /* CMD_ALL_SHARDS: one key part per shard, no keys */
	int (*begin)(struct conn *c); /* 0: go on; 1: answered */
	void (*key)(struct conn *c, struct shard *sh, unsigned i, uint64_t h);
	void (*end)(struct conn *c);
};

/* Each family's table, ended by an entry without a name. */
extern const struct command string_commands[], expiry_commands[], keyspace_commands[],
	list_commands[], set_commands[], server_commands[];

int command_start(struct conn *c);
unsigned command_next(struct conn *c, unsigned *owner);
void command_run_key(struct conn *c, unsigned i);
void command_finish(struct conn *c);

/* Helpers of the commands (commands.c). */
struct item *lookup_typed(struct conn *c, struct shard *sh, unsigned i, uint64_t h, int type,
			  int *wrong);
void reply_wrongtype(struct conn *c);
void reply_syntax(struct conn *c);
void reply_not_int(struct conn *c);
void reply_oom(struct conn *c);
int arg_count(struct conn *c);
int range_begin(struct conn *c);
int clamp_range(long long len, long long *start, long long *stop);
void array_begin(struct conn *c);
void array_end(struct conn *c, long long n);
void out_insert(struct conn *c, size_t at, const char *p, size_t n);
int glob_match(const char *p, size_t pn, const char *s, size_t sn, int nocase);
int float_in_range(long double v);
int arg_double(const struct conn *c, unsigned i, double *out);
size_t fmt_double(char *p, double v);

/* ---- blocking pops (blocking.c) -------------------------------------------------------- */

int block_claim(struct conn *c);
int block_on(struct conn *c, struct shard *sh, unsigned i, uint64_t h);
void serve_blocked(struct shard *sh, struct item *key);
co_frame *block_wait(struct conn *c);
void block_wake_all(struct ctx *x);
void blocked_free(struct shard *sh);
int parse_timeout(struct conn *c, unsigned i);

/* A time argument as Redis takes it (cmd_expiry.c): 0 and the Unix time
 * in ms it names, or -1 after the error reply. */
enum { TIME_S = 1, TIME_ABS = 2 };
int arg_expire(struct conn *c, unsigned i, int how, int positive, int64_t *when);


#endif
