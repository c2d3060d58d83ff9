/* SPDX-License-Identifier: MIT */
/*
 * A key-value server that speaks the Redis protocol (RESP2): redis-cli and
 * redis-benchmark talk to it unchanged.
 *
 *   kv_server [--port P] [--threads N] [--bind ADDR] [--idle-timeout MS]
 *             [--max-bulk BYTES] [--max-request BYTES] [--stop-grace MS]
 *
 * Commands: PING, ECHO, SET (EX, PX, NX, XX, KEEPTTL), GET, DEL, EXISTS,
 * INCR, INCRBY, DECR, DECRBY, MGET, MSET, EXPIRE (NX, XX, GT, LT), TTL,
 * QUIT; CONFIG GET and COMMAND (next to empty answers), which the Redis
 * tools ask at start. Both request forms: arrays of bulk strings, and inline commands (a line of
 * words, quotes as Redis takes them). Pipelined requests are answered in
 * order, with one send for all the answers a read brought.
 *
 * Shared-nothing over a scheduler's contexts (--threads, default 1): the
 * key space is split into one shard per context, and only that context's
 * thread touches it. A connection lives on the context that accepted it
 * (one SO_REUSEPORT listener per context); a command whose key another
 * context owns moves there (co_transfer_to), runs, and comes back, key by
 * key for MGET, MSET, DEL and EXISTS (so those are not atomic across
 * shards, as they would be in Redis).
 *
 * Limits: a request line (an inline command, a count) of at most 64 KiB,
 * at most INT_MAX arguments, a bulk string of at most --max-bulk bytes
 * (default 1 MiB): past those the answer is Redis's protocol error and the
 * connection closes. A request of more than --max-request bytes (default
 * 16 MiB) closes the connection without an answer, as Redis does when a
 * client's query buffer passes its limit. --idle-timeout MS (default
 * 300000; 0: never): a connection on which no command completes and no
 * answer is sent for that long is closed, so a request that trickles in
 * is bounded too. A connection's activity is a stamp of its context's
 * tick, which a sweeper compares every 100 ms: no timer per request (a
 * time limit on each read would add a kernel timeout to every recv).
 *
 * SIGTERM or SIGINT: the listeners stop, every connection answers the
 * commands it has received and closes; after --stop-grace MS (default
 * 5000) whatever is left is cancelled, a send to a client that never
 * reads its answers too, and the server exits within the engines' cancel
 * grace (1 s) after that (test_kv_server sigterm_clients_never_read). The
 * exit status is 0.
 *
 * SIGUSR1: every coroutine of every context, what it waits on and since
 * when, is written to stderr (coring/view.h), and the server goes on.
 *
 * The reading is coring/reader.h over co_recv; the listening sockets are
 * coring/net.h's co_listen.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <coring/coring.h>

#define LINE_MAX_BYTES (64 * 1024)    /* a request line, as Redis */
#define ARGS_MAX INT_MAX              /* arguments of one command, as Redis */
#define OUT_FLUSH (64 * 1024)         /* answers buffered before a send */

static struct {
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
} srv = { .threads = 1, .bind = "127.0.0.1", .idle_ns = 300 * CO_S, .grace_ns = 5 * CO_S,
	  .max_bulk = 1 << 20, .max_request = 16 << 20 };

/* ---- the store: one shard per context, touched only by its thread ------------------ */

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

static uint64_t hash_key(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325u; /* FNV-1a, then a final mix */

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3u;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdu;
	return h ^ (h >> 33);
}

/* The context that owns a key's shard. */
static unsigned owner_of(uint64_t h)
{
	return (unsigned)((h >> 40) % srv.threads);
}

static int shard_init(struct shard *sh)
{
	sh->mask = 1023;
	sh->count = sh->cursor = 0;
	sh->tab = calloc(sh->mask + 1, sizeof *sh->tab);
	return sh->tab ? 0 : -ENOMEM;
}

static void shard_free(struct shard *sh)
{
	for (size_t i = 0; sh->tab && i <= sh->mask; i++) {
		struct entry *e = sh->tab[i], *n;

		for (; e; e = n) {
			n = e->next;
			free(e);
		}
	}
	free(sh->tab);
}

static int64_t now_ms(void)
{
	return (int64_t)(co_now_ns() / CO_MS);
}

/* Unlink *pe (an entry of its bucket's chain) and free it. */
static void shard_unlink(struct shard *sh, struct entry **pe)
{
	struct entry *e = *pe;

	*pe = e->next;
	free(e);
	sh->count--;
}

/* Where the entry of key is linked (or where it would be: *pe NULL). An
 * entry whose time is up is removed on the way. */
static struct entry **shard_slot(struct shard *sh, const char *k, size_t n, uint64_t h)
{
	struct entry **pe = &sh->tab[h & sh->mask];

	for (; *pe; pe = &(*pe)->next) {
		struct entry *e = *pe;

		if (e->hash != h || e->klen != n || memcmp(e->kv, k, n) != 0)
			continue;
		if (e->expire_ms && e->expire_ms <= now_ms()) {
			shard_unlink(sh, pe);
			break; /* (*pe is the next entry, not ours) */
		}
		return pe;
	}
	for (; *pe; pe = &(*pe)->next)
		;
	return pe;
}

static struct entry *shard_get(struct shard *sh, const char *k, size_t n, uint64_t h)
{
	return *shard_slot(sh, k, n, h);
}

/* Double the table once it holds more entries than buckets. */
static void shard_grow(struct shard *sh)
{
	size_t mask = sh->mask * 2 + 1;
	struct entry **tab = calloc(mask + 1, sizeof *tab);

	if (tab == NULL)
		return; /* longer chains, nothing worse */
	for (size_t i = 0; i <= sh->mask; i++) {
		struct entry *e = sh->tab[i], *n;

		for (; e; e = n) {
			n = e->next;
			e->next = tab[e->hash & mask];
			tab[e->hash & mask] = e;
		}
	}
	free(sh->tab);
	sh->tab = tab;
	sh->mask = mask;
	sh->cursor = 0;
}

/* Set key to value (replacing an entry, which keeps its place in the
 * chain). 0 or -ENOMEM. */
static int shard_set(struct shard *sh, const char *k, size_t kn, uint64_t h, const char *v,
		     size_t vn, int64_t expire_ms)
{
	struct entry **pe = shard_slot(sh, k, kn, h);
	struct entry *e = malloc(sizeof *e + kn + vn);

	if (e == NULL)
		return -ENOMEM;
	e->hash = h;
	e->expire_ms = expire_ms;
	e->klen = (uint32_t)kn;
	e->vlen = (uint32_t)vn;
	memcpy(e->kv, k, kn);
	memcpy(e->kv + kn, v, vn);
	if (*pe) {
		e->next = (*pe)->next;
		free(*pe);
		*pe = e;
		return 0;
	}
	e->next = NULL;
	*pe = e;
	if (++sh->count > sh->mask + 1)
		shard_grow(sh);
	return 0;
}

static int shard_del(struct shard *sh, const char *k, size_t n, uint64_t h)
{
	struct entry **pe = shard_slot(sh, k, n, h);

	if (*pe == NULL)
		return 0;
	shard_unlink(sh, pe);
	return 1;
}

/* Remove the expired entries of the next `budget` buckets. */
static void shard_sweep(struct shard *sh, size_t budget)
{
	int64_t now = now_ms();

	for (; budget > 0; budget--) {
		struct entry **pe = &sh->tab[sh->cursor];

		while (*pe) {
			if ((*pe)->expire_ms && (*pe)->expire_ms <= now)
				shard_unlink(sh, pe);
			else
				pe = &(*pe)->next;
		}
		sh->cursor = (sh->cursor + 1) & sh->mask;
	}
}

/* ---- contexts and connections ------------------------------------------------------------ */

struct conn;

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

static struct conn *conn_of_keys(co_frame *f)
{
	return (struct conn *)(void *)((char *)f - offsetof(struct conn, keys));
}

static const char *arg_p(const struct conn *c, unsigned i)
{
	return c->abuf + c->args[i].off;
}

static size_t arg_n(const struct conn *c, unsigned i)
{
	return c->args[i].len;
}

/* ---- answers ----------------------------------------------------------------------------------- */

/* Room for n more bytes of answers; NULL (and the connection closes) when
 * memory runs out. */
static char *out_room(struct conn *c, size_t n)
{
	if (c->olen + n > c->ocap) {
		size_t cap = c->ocap ? c->ocap : 4096;
		char *p;

		while (cap < c->olen + n)
			cap *= 2;
		if ((p = realloc(c->out, cap)) == NULL) {
			c->closing = 1;
			return NULL;
		}
		c->out = p;
		c->ocap = cap;
	}
	return c->out + c->olen;
}

static void out_add(struct conn *c, const char *p, size_t n)
{
	char *o = out_room(c, n);

	if (o) {
		memcpy(o, p, n);
		c->olen += n;
	}
}

/* v in decimal at p (room for 20 bytes): the length. */
static size_t fmt_ll(char *p, long long v)
{
	unsigned long long u = v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v;
	char tmp[20];
	size_t n = 0, len;

	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*p++ = '-';
	len = n + (v < 0);
	while (n)
		*p++ = tmp[--n];
	return len;
}

/* A prefix character, a number and CRLF: ":42", "$5", "*3". */
static void out_num(struct conn *c, char type, long long v)
{
	char *o = out_room(c, 24);

	if (o) {
		o[0] = type;
		o += 1 + fmt_ll(o + 1, v);
		o[0] = '\r';
		o[1] = '\n';
		c->olen = (size_t)(o + 2 - c->out);
	}
}

static void reply_ok(struct conn *c)
{
	out_add(c, "+OK\r\n", 5);
}

static void reply_nil(struct conn *c)
{
	out_add(c, "$-1\r\n", 5);
}

static void reply_bulk(struct conn *c, const char *p, size_t n)
{
	out_num(c, '$', (long long)n);
	out_add(c, p, n);
	out_add(c, "\r\n", 2);
}

/* An error: "-" and the text, its line breaks made spaces (they would end
 * the answer early), as Redis does. */
static void reply_error(struct conn *c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof msg)
		n = (int)sizeof msg - 1;
	for (int i = 0; i < n; i++)
		if (msg[i] == '\r' || msg[i] == '\n')
			msg[i] = ' ';
	out_add(c, "-", 1);
	out_add(c, msg, (size_t)n);
	out_add(c, "\r\n", 2);
}

/* A protocol error: answered, then the connection closes (as Redis). */
static void protocol_error(struct conn *c, const char *what)
{
	reply_error(c, "ERR Protocol error: %s", what);
	c->closing = 1;
}

/* ---- numbers as Redis reads them ------------------------------------------------------------- */

/* A decimal long long, strictly: an optional '-', no leading zero, no
 * space, no '+', in range. 1 if p[0, n) is one. */
static int parse_ll(const char *p, size_t n, long long *out)
{
	unsigned long long v = 0, lim;
	int neg = 0;
	size_t i = 0;

	if (n == 0 || n > 20)
		return 0;
	if (n == 1 && p[0] == '0') {
		*out = 0;
		return 1;
	}
	if (p[0] == '-') {
		neg = 1;
		if (++i == n)
			return 0;
	}
	if (p[i] < '1' || p[i] > '9')
		return 0;
	lim = neg ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX;
	for (; i < n; i++) {
		if (p[i] < '0' || p[i] > '9' || v > (lim - (unsigned)(p[i] - '0')) / 10)
			return 0;
		v = v * 10 + (unsigned)(p[i] - '0');
	}
	*out = neg ? (long long)(0 - v) : (long long)v;
	return 1;
}

static int arg_ll(const struct conn *c, unsigned i, long long *out)
{
	return parse_ll(arg_p(c, i), arg_n(c, i), out);
}

static int arg_is(const struct conn *c, unsigned i, const char *word)
{
	return arg_n(c, i) == strlen(word) && strncasecmp(arg_p(c, i), word, arg_n(c, i)) == 0;
}

/* The absolute expiry of a relative time in ms; 0 when it is not a
 * positive time that fits. */
static int64_t expire_at(long long ms)
{
	int64_t now = now_ms();

	return ms <= 0 || ms > INT64_MAX - now ? 0 : now + ms;
}

/* ---- commands ------------------------------------------------------------------------------------ */

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

static int ping_begin(struct conn *c)
{
	if (c->argc > 2)
		reply_error(c, "ERR wrong number of arguments for 'ping' command");
	else if (c->argc == 1)
		out_add(c, "+PONG\r\n", 7);
	else
		reply_bulk(c, arg_p(c, 1), arg_n(c, 1));
	return 1;
}

static int echo_begin(struct conn *c)
{
	reply_bulk(c, arg_p(c, 1), arg_n(c, 1));
	return 1;
}

static int quit_begin(struct conn *c)
{
	reply_ok(c);
	c->closing = 1;
	return 1;
}

/* CONFIG GET save / appendonly: what redis-benchmark asks; nothing else. */
static int config_begin(struct conn *c)
{
	if (!arg_is(c, 1, "GET") || c->argc != 3) {
		reply_error(c, "ERR unknown subcommand '%.*s'. Try CONFIG HELP.", (int)arg_n(c, 1),
			    arg_p(c, 1));
		return 1;
	}
	if (arg_is(c, 2, "save") || arg_is(c, 2, "appendonly")) {
		out_num(c, '*', 2);
		reply_bulk(c, arg_p(c, 2), arg_n(c, 2));
		reply_bulk(c, arg_is(c, 2, "save") ? "" : "no", arg_is(c, 2, "save") ? 0 : 2);
	} else {
		out_add(c, "*0\r\n", 4);
	}
	return 1;
}

static int command_begin(struct conn *c)
{
	out_add(c, "*0\r\n", 4); /* no command documentation: redis-cli does without */
	return 1;
}

static void get_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct entry *e = shard_get(sh, arg_p(c, i), arg_n(c, i), h);

	if (e)
		reply_bulk(c, e->kv + e->klen, e->vlen);
	else
		reply_nil(c);
}

enum { SET_NX = 1, SET_XX = 2, SET_EX = 4, SET_KEEPTTL = 8 };

/* SET key value [NX | XX] [EX s | PX ms | KEEPTTL] */
static int set_begin(struct conn *c)
{
	long long t;

	c->flags = 0;
	c->expire_ms = 0;
	for (unsigned i = 3; i < c->argc; i++) {
		int px = arg_is(c, i, "PX");

		if (arg_is(c, i, "NX") && !(c->flags & SET_XX)) {
			c->flags |= SET_NX;
		} else if (arg_is(c, i, "XX") && !(c->flags & SET_NX)) {
			c->flags |= SET_XX;
		} else if (arg_is(c, i, "KEEPTTL") && !(c->flags & SET_EX)) {
			c->flags |= SET_KEEPTTL;
		} else if ((px || arg_is(c, i, "EX")) && !(c->flags & (SET_EX | SET_KEEPTTL)) &&
			   i + 1 < c->argc) {
			c->flags |= SET_EX;
			if (!arg_ll(c, ++i, &t)) {
				reply_error(c, "ERR value is not an integer or out of range");
				return 1;
			}
			if (t <= 0 || (!px && t > LLONG_MAX / 1000) ||
			    (c->expire_ms = expire_at(px ? t : t * 1000)) == 0) {
				reply_error(c, "ERR invalid expire time in 'set' command");
				return 1;
			}
		} else {
			reply_error(c, "ERR syntax error");
			return 1;
		}
	}
	return 0;
}

static void set_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct entry *e = shard_get(sh, arg_p(c, i), arg_n(c, i), h);
	int64_t expire = c->expire_ms;

	if ((c->flags & SET_NX && e) || (c->flags & SET_XX && !e)) {
		reply_nil(c);
		return;
	}
	if (c->flags & SET_KEEPTTL && e)
		expire = e->expire_ms;
	if (shard_set(sh, arg_p(c, i), arg_n(c, i), h, arg_p(c, i + 1), arg_n(c, i + 1), expire))
		reply_error(c, "ERR out of memory");
	else
		reply_ok(c);
}

/* MSET k v [k v ...]: each pair set on its key's owner. */
static int mset_begin(struct conn *c)
{
	if (c->argc % 2 == 0) {
		reply_error(c, "ERR wrong number of arguments for 'mset' command");
		return 1;
	}
	c->num = 0;
	return 0;
}

static void mset_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	if (shard_set(sh, arg_p(c, i), arg_n(c, i), h, arg_p(c, i + 1), arg_n(c, i + 1), 0))
		c->num = -1;
}

static void mset_end(struct conn *c)
{
	if (c->num < 0)
		reply_error(c, "ERR out of memory");
	else
		reply_ok(c);
}

static int count_begin(struct conn *c)
{
	c->num = 0;
	return 0;
}

static void del_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	c->num += shard_del(sh, arg_p(c, i), arg_n(c, i), h);
}

static void exists_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	c->num += shard_get(sh, arg_p(c, i), arg_n(c, i), h) != NULL;
}

static void count_end(struct conn *c)
{
	out_num(c, ':', c->num);
}

static int mget_begin(struct conn *c)
{
	out_num(c, '*', (long long)c->argc - 1);
	return 0;
}

/* INCR, DECR (num: +1, -1); INCRBY, DECRBY (num: the argument). */
static int incr_begin(struct conn *c)
{
	int decr = arg_n(c, 0) >= 4 && strncasecmp(arg_p(c, 0), "DECR", 4) == 0;

	if (c->argc == 2) {
		c->num = decr ? -1 : 1;
		return 0;
	}
	if (!arg_ll(c, 2, &c->num) || (decr && c->num == LLONG_MIN)) {
		reply_error(c, decr && c->num == LLONG_MIN ? "ERR decrement would overflow"
							   : "ERR value is not an integer or out of range");
		return 1;
	}
	if (decr)
		c->num = -c->num;
	return 0;
}

static void incr_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct entry *e = shard_get(sh, arg_p(c, i), arg_n(c, i), h);
	long long v = 0;
	char num[24];
	size_t n;

	if (e && !parse_ll(e->kv + e->klen, e->vlen, &v)) {
		reply_error(c, "ERR value is not an integer or out of range");
		return;
	}
	if ((c->num > 0 && v > LLONG_MAX - c->num) || (c->num < 0 && v < LLONG_MIN - c->num)) {
		reply_error(c, "ERR increment or decrement would overflow");
		return;
	}
	v += c->num;
	n = fmt_ll(num, v);
	if (shard_set(sh, arg_p(c, i), arg_n(c, i), h, num, n, e ? e->expire_ms : 0))
		reply_error(c, "ERR out of memory");
	else
		out_num(c, ':', v);
}

enum { EXP_NX = 1, EXP_XX = 2, EXP_GT = 4, EXP_LT = 8 };

/* EXPIRE key seconds [NX | XX | GT | LT] */
static int expire_begin(struct conn *c)
{
	c->flags = 0;
	for (unsigned i = 3; i < c->argc; i++) {
		int fl = arg_is(c, i, "NX") ? EXP_NX : arg_is(c, i, "XX") ? EXP_XX
		       : arg_is(c, i, "GT") ? EXP_GT : arg_is(c, i, "LT") ? EXP_LT : 0;

		if (fl == 0) {
			reply_error(c, "ERR Unsupported option %.*s", (int)arg_n(c, i), arg_p(c, i));
			return 1;
		}
		c->flags |= fl;
	}
	if ((c->flags & EXP_NX) && (c->flags & (EXP_XX | EXP_GT | EXP_LT))) {
		reply_error(c, "ERR NX and XX, GT or LT options at the same time are not compatible");
		return 1;
	}
	if ((c->flags & EXP_GT) && (c->flags & EXP_LT)) {
		reply_error(c, "ERR GT and LT options at the same time are not compatible");
		return 1;
	}
	if (!arg_ll(c, 2, &c->num)) {
		reply_error(c, "ERR value is not an integer or out of range");
		return 1;
	}
	if (c->num > LLONG_MAX / 1000 || c->num < LLONG_MIN / 1000) {
		reply_error(c, "ERR invalid expire time in 'expire' command");
		return 1;
	}
	return 0;
}

/* Whether EXPIRE's condition lets the new time in (a key without one
 * lives for ever: GT never beats it, LT always does). */
static int expire_allowed(int flags, int64_t cur, long long secs)
{
	int64_t when = secs > 0 ? expire_at(secs * 1000) : 0;

	if (when == 0 && secs > 0)
		when = INT64_MAX;
	if ((flags & EXP_NX && cur) || (flags & EXP_XX && !cur))
		return 0;
	if (flags & EXP_GT && (!cur || when <= cur))
		return 0;
	if (flags & EXP_LT && cur && when >= cur)
		return 0;
	return 1;
}

static void expire_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct entry **pe = shard_slot(sh, arg_p(c, i), arg_n(c, i), h);

	if (*pe == NULL || !expire_allowed(c->flags, (*pe)->expire_ms, c->num)) {
		out_add(c, ":0\r\n", 4);
		return;
	}
	if (c->num <= 0)
		shard_unlink(sh, pe); /* a time in the past: the key goes now */
	else if (((*pe)->expire_ms = expire_at(c->num * 1000)) == 0)
		(*pe)->expire_ms = INT64_MAX;
	out_add(c, ":1\r\n", 4);
}

static void ttl_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct entry *e = shard_get(sh, arg_p(c, i), arg_n(c, i), h);
	int64_t left;

	if (e == NULL) {
		out_add(c, ":-2\r\n", 5);
	} else if (e->expire_ms == 0) {
		out_add(c, ":-1\r\n", 5);
	} else {
		left = e->expire_ms - now_ms();
		out_num(c, ':', (left + 500) / 1000);
	}
}

static const struct command commands[] = {
	{ "get", 2, 1, 1, 1, NULL, get_key, NULL },
	{ "set", -3, 1, 1, 1, set_begin, set_key, NULL },
	{ "ping", -1, 0, 0, 0, ping_begin, NULL, NULL },
	{ "incr", 2, 1, 1, 1, incr_begin, incr_key, NULL },
	{ "decr", 2, 1, 1, 1, incr_begin, incr_key, NULL },
	{ "incrby", 3, 1, 1, 1, incr_begin, incr_key, NULL },
	{ "decrby", 3, 1, 1, 1, incr_begin, incr_key, NULL },
	{ "mget", -2, 1, -1, 1, mget_begin, get_key, NULL },
	{ "mset", -3, 1, -1, 2, mset_begin, mset_key, mset_end },
	{ "del", -2, 1, -1, 1, count_begin, del_key, count_end },
	{ "exists", -2, 1, -1, 1, count_begin, exists_key, count_end },
	{ "expire", -3, 1, 1, 1, expire_begin, expire_key, NULL },
	{ "ttl", 2, 1, 1, 1, NULL, ttl_key, NULL },
	{ "echo", 2, 0, 0, 0, echo_begin, NULL, NULL },
	{ "quit", -1, 0, 0, 0, quit_begin, NULL, NULL },
	{ "config", -2, 0, 0, 0, config_begin, NULL, NULL },
	{ "command", -1, 0, 0, 0, command_begin, NULL, NULL },
};

static void unknown_command(struct conn *c)
{
	char args[160];
	size_t n = 0;

	args[0] = 0;
	for (unsigned i = 1; i < c->argc && n < 128; i++) {
		int w = snprintf(args + n, sizeof args - n, "'%.*s' ",
				 (int)(arg_n(c, i) < 128 - n ? arg_n(c, i) : 128 - n), arg_p(c, i));

		if (w < 0 || (size_t)w >= sizeof args - n)
			break;
		n += (size_t)w;
	}
	reply_error(c, "ERR unknown command '%.*s', with args beginning with: %s",
		    arg_n(c, 0) < 128 ? (int)arg_n(c, 0) : 128, arg_p(c, 0), args);
}

/* Look the command up and begin it: 1 when it has keys to visit. */
static int command_start(struct conn *c)
{
	const struct command *cmd = NULL;

	c->cmd = NULL;
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
		if (arg_n(c, 0) > 0 && (arg_p(c, 0)[0] | 0x20) == commands[i].name[0] &&
		    arg_is(c, 0, commands[i].name)) {
			cmd = &commands[i];
			break;
		}
	}
	if (cmd == NULL) {
		unknown_command(c);
		return 0;
	}
	if ((cmd->arity > 0 && c->argc != (unsigned)cmd->arity) ||
	    (cmd->arity < 0 && c->argc < (unsigned)-cmd->arity)) {
		reply_error(c, "ERR wrong number of arguments for '%s' command", cmd->name);
		return 0;
	}
	if (cmd->begin && cmd->begin(c))
		return 0;
	c->cmd = cmd;
	c->ki = (unsigned)cmd->first;
	return cmd->first != 0;
}

/* The next key's argument, or 0 when every key was visited. */
static unsigned command_key(struct conn *c)
{
	unsigned last = c->cmd->last < 0 ? c->argc - 1 : (unsigned)c->cmd->last;

	return c->ki <= last && c->ki < c->argc ? c->ki : 0;
}

/* Run the key part for argument i on this context's shard. */
static void command_run_key(struct conn *c, unsigned i, uint64_t h)
{
	c->cmd->key(c, &srv.ctx[c->where].sh, i, h);
	c->ki = i + (unsigned)c->cmd->step;
}

static void command_finish(struct conn *c)
{
	if (c->cmd && c->cmd->end)
		c->cmd->end(c);
	c->cmd = NULL;
	c->argc = 0;
	c->alen = 0;
}

/* ---- reading requests ----------------------------------------------------------------------------- */

/* Keep n bytes at p as the next argument. 0, or -1 when the request is
 * over --max-request (or memory ran out): the connection closes. */
static int arg_add(struct conn *c, const char *p, size_t n)
{
	if (c->alen + n + (c->argc + 1) * sizeof(struct arg) > srv.max_request)
		return -1;
	if (c->argc == c->argcap) {
		unsigned cap = c->argcap ? c->argcap * 2 : 8;
		struct arg *a = realloc(c->args, cap * sizeof *a);

		if (a == NULL)
			return -1;
		c->args = a;
		c->argcap = cap;
	}
	if (c->abuf == NULL || c->alen + n > c->acap) {
		size_t cap = c->acap ? c->acap : 256;
		char *b;

		while (cap < c->alen + n)
			cap *= 2;
		if ((b = realloc(c->abuf, cap)) == NULL)
			return -1;
		c->abuf = b;
		c->acap = cap;
	}
	memcpy(c->abuf + c->alen, p, n);
	c->args[c->argc++] = (struct arg){ c->alen, n };
	c->alen += n;
	return 0;
}

static int is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

static int hex(char ch)
{
	return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
		: ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* One quoted word of an inline command, from p[*i] (the quote): its bytes
 * into w (*wn), escapes as Redis reads them ("\n", "\x41"; '\'' only in
 * single quotes). 0, or -1 for unbalanced quotes. */
static int quoted_word(const char *p, size_t n, size_t *i, char *w, size_t *wn)
{
	char q = p[(*i)++];

	for (; *i < n; (*i)++) {
		char ch = p[*i];

		if (ch == q) { /* the closing quote must end the word */
			(*i)++;
			return *i < n && !is_space(p[*i]) ? -1 : 0;
		}
		if (ch == '\\' && *i + 1 < n) {
			char e = p[++*i];

			if (q == '\'') {
				if (e != '\'')
					w[(*wn)++] = '\\';
				ch = e;
			} else if (e == 'x' && *i + 2 < n && hex(p[*i + 1]) >= 0 && hex(p[*i + 2]) >= 0) {
				ch = (char)(hex(p[*i + 1]) * 16 + hex(p[*i + 2]));
				*i += 2;
			} else {
				ch = e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e == 'b' ? '\b'
				     : e == 'a' ? '\a' : e;
			}
		}
		w[(*wn)++] = ch;
	}
	return -1;
}

/* An inline command: words separated by spaces, quotes as above. */
static int parse_inline(struct conn *c, const char *p, size_t n)
{
	char *w = malloc(n + 1);
	size_t i = 0;
	int err = 0;

	if (w == NULL)
		return -1;
	while (err == 0) {
		size_t wn = 0;

		while (i < n && is_space(p[i]))
			i++;
		if (i == n)
			break;
		if (p[i] == '"' || p[i] == '\'') {
			if (quoted_word(p, n, &i, w, &wn) < 0) {
				protocol_error(c, "unbalanced quotes in request");
				err = 1;
				break;
			}
		} else {
			while (i < n && !is_space(p[i]))
				w[wn++] = p[i++];
		}
		if (arg_add(c, w, wn) < 0)
			err = -1;
	}
	free(w);
	return err;
}

/*
 * Take one read's bytes (line or bulk string) into the request: 1 when a
 * command is complete, 0 when more is to be read, -1 to close (a protocol
 * error answered, or a request too large).
 */
static int request_take(struct conn *c, const char *p, size_t n)
{
	long long v;

	if (c->state == ST_BULK) {
		if (arg_add(c, p, c->blen) < 0)
			return -1;
		c->state = (long long)c->argc == c->nargs ? ST_HEAD : ST_BULKLEN;
		return c->state == ST_HEAD;
	}
	n -= n >= 2 && p[n - 2] == '\r' ? 2 : 1; /* the line without its end */
	if (c->state == ST_BULKLEN) {
		if (p[0] != '$') {
			reply_error(c, "ERR Protocol error: expected '$', got '%c'", n ? p[0] : ' ');
			c->closing = 1;
			return -1;
		}
		if (!parse_ll(p + 1, n - 1, &v) || v < 0 || (size_t)v > srv.max_bulk) {
			protocol_error(c, "invalid bulk length");
			return -1;
		}
		c->blen = (size_t)v;
		c->state = ST_BULK;
		return 0;
	}
	if (n > 0 && p[0] == '*') {
		if (!parse_ll(p + 1, n - 1, &v) || v > ARGS_MAX) {
			protocol_error(c, "invalid multibulk length");
			return -1;
		}
		c->nargs = v;
		c->state = v > 0 ? ST_BULKLEN : ST_HEAD; /* *0, *-1: nothing to do */
		return 0;
	}
	if (parse_inline(c, p, n))
		return -1;
	return c->argc > 0; /* an empty line: nothing to do */
}

/* The next read of the request. */
static co_frame *request_read(struct conn *c)
{
	if (c->state == ST_BULK) {
		c->rd.max = c->blen + 2;
		return co_reader_exact(&c->rd, c->blen + 2);
	}
	c->rd.max = LINE_MAX_BYTES + 2;
	return co_reader_until(&c->rd, "\n", 1);
}

/* A read failed: answer a line too long as Redis does; the connection
 * closes in every case (0, -EPROTO: the peer is gone, or the sweeper or
 * the stop shut the connection). */
static void request_failed(struct conn *c, int err)
{
	size_t n;
	const char *p = co_reader_peek(&c->rd, &n);

	if (err != -EMSGSIZE)
		return;
	if (c->state == ST_BULKLEN)
		protocol_error(c, "too big bulk count string");
	else if (n > 0 && p[0] == '*')
		protocol_error(c, "too big mbulk count string");
	else
		protocol_error(c, "too big inline request");
}

/* ---- sending answers ---------------------------------------------------------------------------- */

/* The connection did something: stamp it with its home's tick. */
static void conn_active(struct conn *c)
{
	atomic_store_explicit(&c->seen, atomic_load_explicit(&c->home->tick, memory_order_relaxed),
			      memory_order_relaxed);
}

/* Send every answer buffered. A peer that does not read stops the sends:
 * the sweeper ends such a connection once it has been idle too long. */
static int flush_fn(co_frame *f)
{
	struct flusher *fl = (struct flusher *)f;
	struct conn *c = fl->c;

	CO_BEGIN(f);
	for (fl->done = 0; fl->done < fl->c->olen;) {
		CO_AWAIT(f, co_send(&fl->io, c->fd, c->out + fl->done, c->olen - fl->done, MSG_NOSIGNAL));
		if (co_result(f) <= 0)
			CO_RETURN(f, co_result(f) < 0 ? co_result(f) : -EPIPE);
		fl->done += (size_t)co_result(f);
		conn_active(c);
	}
	fl->c->olen = 0;
	CO_END(f);
}

static co_frame *flush(struct conn *c)
{
	co_init(&c->fl.co, flush_fn);
	c->fl.c = c;
	return &c->fl.co;
}

/* ---- a connection ------------------------------------------------------------------------------- */

static void conn_free(struct conn *c)
{
	co_reader_destroy(&c->rd);
	free(c->args);
	free(c->abuf);
	free(c->out);
	free(c);
}

/* Off its home's list, before its descriptor is closed: the sweeper and
 * the stop shut down the descriptors of the listed connections, and a
 * closed one's number may be a new connection's already. */
static void conn_unlink(struct conn *c)
{
	struct ctx *x = c->home;

	pthread_mutex_lock(&x->lock);
	if (c->linked) {
		if (c->prev)
			c->prev->next = c->next;
		else
			x->conns = c->next;
		if (c->next)
			c->next->prev = c->prev;
		c->linked = 0;
	}
	pthread_mutex_unlock(&x->lock);
}

static void conn_done(co_frame *f)
{
	struct conn *c = (struct conn *)f;

	conn_unlink(c); /* (a frame the cancel stop finished before it ran) */
	conn_free(c);
	if (atomic_fetch_sub(&srv.live, 1) == 1 && atomic_load(&srv.stopping))
		co_event_set(&srv.all_closed);
}

/* Run the command's key parts, each on the context that owns its key,
 * and come home: a child of the connection (its awaits are transfers). */
static int keys_fn(co_frame *f)
{
	struct conn *c = conn_of_keys(f);

	CO_BEGIN(f);
	while ((c->cur = command_key(c)) != 0) {
		c->owner = owner_of(c->h = hash_key(arg_p(c, c->cur), arg_n(c, c->cur)));
		if (c->owner != c->where) {
			CO_AWAIT(f, co_transfer_to(&c->tr, &srv.s.ctx[c->owner]));
			if (co_result(f) < 0) { /* the stop was faster: the command ends here */
				reply_error(c, "ERR server is stopping");
				c->cmd = NULL;
				c->closing = 1;
				break;
			}
			c->where = c->owner;
		}
		command_run_key(c, c->cur, c->h);
	}
	if (c->where != c->home->idx) {
		CO_AWAIT(f, co_transfer_to(&c->tr, &srv.s.ctx[c->home->idx]));
		if (co_result(f) == 0) /* (else it goes on where it is) */
			c->where = c->home->idx;
	}
	CO_END(f);
}

static int conn_fn(co_frame *f)
{
	struct conn *c = (struct conn *)f;
	int took;

	CO_BEGIN(f);
	while (!c->closing) {
		c->rf = request_read(c);
		if (!co_done(c->rf) && c->olen > 0) { /* about to wait: answer first */
			CO_AWAIT(f, flush(c));
			if (co_result(f) < 0)
				break;
		}
		CO_AWAIT(f, c->rf);
		if (co_result(f) <= 0) {
			request_failed(c, co_result(f));
			break;
		}
		if ((took = request_take(c, c->rd.data, c->rd.len)) < 0)
			break;
		if (took == 0)
			continue;
		conn_active(c);
		if (command_start(c) && srv.threads == 1) {
			while ((c->cur = command_key(c)) != 0) /* one shard: no moves */
				command_run_key(c, c->cur, hash_key(arg_p(c, c->cur), arg_n(c, c->cur)));
		} else if (c->cmd) { /* keys to visit, on several shards */
			co_init(&c->keys, keys_fn);
			CO_AWAIT(f, &c->keys);
		}
		command_finish(c);
		if (c->olen >= OUT_FLUSH) {
			CO_AWAIT(f, flush(c));
			if (co_result(f) < 0)
				break;
		}
	}
	if (c->olen > 0)
		CO_AWAIT(f, flush(c));
	/* the end of the answers first: a close with bytes unread (a request
	 * cut short) sends a reset, which may come after it but not before */
	shutdown(c->fd, SHUT_WR);
	conn_unlink(c);
	CO_AWAIT(f, co_close(&c->io, c->fd));
	CO_END(f);
}

/* A connection on context x for fd: linked in x's list, spawned there. */
static void conn_start(struct ctx *x, int fd)
{
	struct conn *c = calloc(1, sizeof *c);

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	if (c == NULL ||
	    co_reader_init(&c->rd, fd, &(co_reader_opts){ .size = 4096, .max = LINE_MAX_BYTES + 2 }) < 0) {
		free(c);
		close(fd);
		return;
	}
	c->fd = fd;
	c->home = x;
	c->where = x->idx;
	conn_active(c);
	co_init(&c->co, conn_fn);
	c->co.on_done = conn_done;
	atomic_fetch_add(&srv.live, 1);
	pthread_mutex_lock(&x->lock);
	c->next = x->conns;
	if (x->conns)
		x->conns->prev = c;
	x->conns = c;
	c->linked = 1;
	pthread_mutex_unlock(&x->lock);
	if (co_engine_spawn(co_engine_current(), &c->co) < 0) { /* the stop came first */
		close(fd);
		conn_done(&c->co);
	}
}

/* ---- per context: listener, sweeper; the stop ---------------------------------------------------- */

static int listener_fn(co_frame *f)
{
	struct listener *l = (struct listener *)f;

	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_accept(&l->io, l->lfd, NULL, NULL, SOCK_CLOEXEC));
		if (co_result(f) == -ECANCELED)
			break;
		if (co_result(f) >= 0 && atomic_load(&srv.stopping)) {
			close(co_result(f)); /* accepted as the stop began */
		} else if (co_result(f) >= 0) {
			conn_start(l->x, co_result(f));
		} else { /* out of descriptors or memory: back off, keep serving */
			CO_AWAIT(f, co_sleep(&l->io, 10 * CO_MS));
			if (co_result(f) == -ECANCELED)
				break;
		}
	}
	CO_END(f);
}

/* End the connections of x idle for longer than the timeout: a shutdown
 * ends their wait for a request (0) or for a send (-EPIPE). */
static void sweep_idle(struct ctx *x, unsigned tick)
{
	unsigned limit = (unsigned)(srv.idle_ns / (100 * CO_MS));
	struct conn *c;

	if (srv.idle_ns == 0)
		return;
	pthread_mutex_lock(&x->lock);
	for (c = x->conns; c; c = c->next)
		if (tick - atomic_load_explicit(&c->seen, memory_order_relaxed) > limit)
			shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&x->lock);
}

/* Every 100 ms: the tick, idle connections, and a slice of the table's
 * expired keys (those nobody asks for go too). */
static int sweeper_fn(co_frame *f)
{
	struct sweeper *w = (struct sweeper *)f;

	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_sleep(&w->io, 100 * CO_MS));
		if (co_result(f) == -ECANCELED)
			break;
		sweep_idle(w->x, atomic_fetch_add(&w->x->tick, 1) + 1);
		shard_sweep(&w->x->sh, 256);
	}
	CO_END(f);
}

/* On each context once the stop began: no more accepts, no more sweeps,
 * and every connection reads to the end of what it has received (a
 * shutdown of the reading side: its next wait for bytes ends with 0). */
static int quiesce_fn(co_frame *f)
{
	struct quiesce *q = (struct quiesce *)f;
	struct conn *c;

	CO_BEGIN(f);
	co_cancel(&q->x->lis.co);
	co_cancel(&q->x->sw.co);
	pthread_mutex_lock(&q->x->lock);
	for (c = q->x->conns; c; c = c->next)
		shutdown(c->fd, SHUT_RD);
	pthread_mutex_unlock(&q->x->lock);
	CO_END(f);
}

struct stopper {
	co_frame co;
	co_waiter w;
	co_limit lim;
	co_view view;
};

static int stopper_fn(co_frame *f)
{
	struct stopper *st = (struct stopper *)f;

	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_signals_wait(&srv.sigs));
		if (co_result(f) != SIGUSR1)
			break;
		if (co_view_sched(&st->view, &srv.s, CO_VIEW_WAIT) == 0) { /* SIGUSR1: a look */
			co_view_print(&st->view, STDERR_FILENO, 0);
			co_view_free(&st->view);
		}
	}
	atomic_store(&srv.stopping, 1);
	for (unsigned i = 0; i < srv.threads; i++) {
		co_init(&srv.ctx[i].q.co, quiesce_fn);
		co_sched_spawn_to(&srv.s, i, &srv.ctx[i].q.co);
	}
	if (atomic_load(&srv.live) > 0) {
		CO_AWAIT(f, co_timeout(&st->lim, co_event_wait(&st->w, &srv.all_closed), srv.grace_ns));
		if (co_result(f) < 0)
			co_sched_stop(&srv.s, CO_STOP_CANCEL); /* the grace is over */
	}
	CO_END(f);
}

/* ---- main ------------------------------------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr, "usage: kv_server [--port P] [--threads N] [--bind ADDR] [--idle-timeout MS]"
			" [--max-bulk BYTES] [--max-request BYTES] [--stop-grace MS]\n");
	exit(2);
}

static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i += 2) {
		long long v;

		if (i + 1 >= argc)
			usage();
		if (!strcmp(argv[i], "--bind")) {
			srv.bind = argv[i + 1];
			continue;
		}
		if (!parse_ll(argv[i + 1], strlen(argv[i + 1]), &v) || v < 0 ||
		    (uint64_t)v > UINT64_MAX / CO_MS)
			usage();
		if (!strcmp(argv[i], "--port") && v <= 65535)
			srv.port = (int)v;
		else if (!strcmp(argv[i], "--threads") && v >= 1 && v <= 256)
			srv.threads = (unsigned)v;
		else if (!strcmp(argv[i], "--idle-timeout"))
			srv.idle_ns = (uint64_t)v * CO_MS;
		else if (!strcmp(argv[i], "--stop-grace"))
			srv.grace_ns = (uint64_t)v * CO_MS;
		else if (!strcmp(argv[i], "--max-bulk") && v >= 1 && v <= INT_MAX - 2)
			srv.max_bulk = (size_t)v;
		else if (!strcmp(argv[i], "--max-request") && v >= 1)
			srv.max_request = (size_t)v;
		else
			usage();
	}
}

/* The contexts' listeners (one port, SO_REUSEPORT), shards, sweepers. */
static int setup_contexts(void)
{
	int port = srv.port;

	srv.ctx = calloc(srv.threads, sizeof *srv.ctx);
	if (srv.ctx == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < srv.threads; i++) {
		struct ctx *x = &srv.ctx[i];
		int fd = co_listen(srv.bind, port, 0, CO_LISTEN_REUSEPORT);

		if (fd < 0)
			return fd;
		port = co_local_port(fd);
		x->idx = i;
		x->lis.lfd = fd;
		x->lis.x = x;
		x->sw.x = x;
		x->q.x = x;
		pthread_mutex_init(&x->lock, NULL);
		if (shard_init(&x->sh) < 0)
			return -ENOMEM;
	}
	srv.port = port;
	return 0;
}

int main(int argc, char **argv)
{
	co_sched_opts o = { .engine = { .sq_entries = 1024 } };
	struct stopper st = { 0 };
	sigset_t set;
	int err;

	parse_args(argc, argv);
	o.contexts = srv.threads;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGUSR1);
	/* before the contexts start: their threads inherit the blocked set */
	if ((err = co_signals_open(&srv.sigs, &set)) < 0 || (err = co_trace_env()) < 0 ||
	    (err = co_event_init(&srv.all_closed, 0)) < 0 || (err = setup_contexts()) < 0 ||
	    (err = co_sched_init(&srv.s, &o)) < 0) {
		fprintf(stderr, "kv_server: start: %s\n", strerror(-err));
		return 1;
	}
	for (unsigned i = 0; i < srv.threads; i++) {
		co_init(&srv.ctx[i].lis.co, listener_fn);
		co_init(&srv.ctx[i].sw.co, sweeper_fn);
		co_sched_spawn_to(&srv.s, i, &srv.ctx[i].lis.co);
		co_sched_spawn_to(&srv.s, i, &srv.ctx[i].sw.co);
	}
	co_init(&st.co, stopper_fn);
	co_sched_spawn_to(&srv.s, 0, &st.co);
	printf("port=%d\n", srv.port);
	fflush(stdout);
	fprintf(stderr, "kv_server: listening on %s:%d, %u thread(s)\n", srv.bind, srv.port,
		srv.threads);
	err = co_sched_run(&srv.s);
	co_sched_destroy(&srv.s);
	for (unsigned i = 0; i < srv.threads; i++) {
		close(srv.ctx[i].lis.lfd);
		shard_free(&srv.ctx[i].sh);
		pthread_mutex_destroy(&srv.ctx[i].lock);
	}
	free(srv.ctx);
	co_event_destroy(&srv.all_closed);
	co_signals_close(&srv.sigs);
	if (err < 0) {
		fprintf(stderr, "kv_server: %s\n", strerror(-err));
		return 1;
	}
	return 0;
}
