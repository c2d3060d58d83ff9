/* SPDX-License-Identifier: MIT */
/*
 * kv.h - what the files of the key-value server share: the server's
 * settings and contexts (server.c), a connection and the command being
 * run on it, the store (store.c), the replies and numbers (protocol.c),
 * the command table and its families (commands.c, cmd_*.c). main.c says
 * what the server does as a whole.
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

/* ---- the store (store.c): one shard per context, touched only by its thread ---------- */

struct entry {
	struct entry *next;
	uint64_t hash;
	int64_t expire_ms;            /* CLOCK_MONOTONIC ms; 0: never */
	uint32_t klen, vlen;
	char kv[];                    /* the key, then the value */
};

struct shard {
	struct entry **tab;
	size_t mask, count, cursor;   /* cursor: where the sweep goes on */
};

uint64_t hash_key(const char *p, size_t n);
int64_t now_ms(void);
int shard_init(struct shard *sh);
void shard_free(struct shard *sh);
struct entry **shard_slot(struct shard *sh, const char *k, size_t n, uint64_t h);
struct entry *shard_get(struct shard *sh, const char *k, size_t n, uint64_t h);
void shard_unlink(struct shard *sh, struct entry **pe);
int shard_set(struct shard *sh, const char *k, size_t kn, uint64_t h, const char *v, size_t vn,
	      int64_t expire_ms);
int shard_del(struct shard *sh, const char *k, size_t n, uint64_t h);
void shard_sweep(struct shard *sh, size_t budget);

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
	size_t max_bulk, max_request;
	co_sched s;
	struct ctx *ctx;
	co_signals sigs;
	atomic_int stopping;
	atomic_long live;             /* connections open */
	co_event all_closed;          /* set when the last one closes after a stop */
};

extern struct server srv;

/* Serve until SIGTERM or SIGINT (srv set up by main.c): 0 or -errno. */
int server_run(void);

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
	co_frame *rf;                 /* the read being awaited */
	long long nargs;              /* arguments the array announced */
	size_t blen;                  /* the bulk string being read */
	struct arg *args;
	unsigned argc, argcap;
	char *abuf;                   /* the arguments' bytes */
	size_t alen, acap;
	char *out;                    /* answers not sent yet */
	size_t olen, ocap;
	/* the command being run */
	const struct command *cmd;
	co_frame keys;                /* its key parts (keys_fn) */
	unsigned ki;                  /* the next key's argument */
	unsigned cur, owner;          /* the key being run, its context */
	uint64_t h;                   /* its hash */
	long long num;                /* its number argument; DEL, EXISTS: the count */
	int64_t expire_ms;
	int flags;
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
 * last argument).
 */
struct command {
	const char *name;
	int arity;                    /* > 0: exactly; < 0: at least -arity */
	int first, last, step;        /* first 0: no key */
	int (*begin)(struct conn *c); /* 0: go on; 1: answered */
	void (*key)(struct conn *c, struct shard *sh, unsigned i, uint64_t h);
	void (*end)(struct conn *c);
};

/* Each family's table, ended by an entry without a name. */
extern const struct command string_commands[], expiry_commands[], keyspace_commands[],
	server_commands[];

int command_start(struct conn *c);
unsigned command_key(struct conn *c);
void command_run_key(struct conn *c, unsigned i, uint64_t h);
void command_finish(struct conn *c);

/* The absolute expiry of a relative time in ms; 0 when it is not a
 * positive time that fits. */
int64_t expire_at(long long ms);

#endif
