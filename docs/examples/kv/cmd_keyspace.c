/* SPDX-License-Identifier: MIT */
/*
 * cmd_keyspace.c - commands on keys whatever their values: DEL, UNLINK,
 * EXISTS, TYPE, RENAME, RENAMENX, COPY (key by key, each on its owner;
 * a renamed or copied key travels with the connection from the source's
 * shard to the destination's), and the commands that visit every shard in
 * turn: KEYS, SCAN (one shard per call: its cursor holds the shard in its
 * low 8 bits), DBSIZE, RANDOMKEY, FLUSHDB, FLUSHALL. A command over
 * several shards is not atomic, as it would be in Redis.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

static const char *const type_names[] = { "string", "list", "set", "hash", "zset" };

static int count_begin(struct conn *c)
{
	c->num = 0;
	return 0;
}

static void del_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	c->num += db_del(sh, arg_p(c, i), arg_n(c, i), h);
}

static void exists_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	c->num += db_get(sh, arg_p(c, i), arg_n(c, i), h) != NULL;
}

static void count_end(struct conn *c)
{
	out_num(c, ':', c->num);
}

static void type_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct item *e = db_get(sh, arg_p(c, i), arg_n(c, i), h);

	out_add(c, "+", 1);
	if (e)
		out_add(c, type_names[e->type], strlen(type_names[e->type]));
	else
		out_add(c, "none", 4);
	out_add(c, "\r\n", 2);
}

/* ---- RENAME, RENAMENX, COPY: the source's part, then the destination's ------------------ */

enum { MV_SAME = 1, MV_REPLACE = 2, MV_BACK = 4 };

/* RENAME src dst, RENAMENX src dst, COPY src dst [DB 0] [REPLACE] */
static int move_begin(struct conn *c)
{
	int copy = arg_is(c, 0, "copy");

	c->flags = arg_n(c, 1) == arg_n(c, 2) && memcmp(arg_p(c, 1), arg_p(c, 2), arg_n(c, 1)) == 0
		 ? MV_SAME : 0;
	for (unsigned i = 3; i < c->argc; i++) {
		long long db;

		if (arg_is(c, i, "REPLACE")) {
			c->flags |= MV_REPLACE;
		} else if (arg_is(c, i, "DB") && i + 1 < c->argc) {
			if (!arg_ll(c, ++i, &db)) {
				reply_not_int(c);
				return 1;
			}
			if (db != 0) {
				reply_error(c, "ERR DB index is out of range");
				return 1;
			}
		} else {
			reply_syntax(c);
			return 1;
		}
	}
	if (copy && c->flags & MV_SAME) {
		reply_error(c, "ERR source and destination objects are the same");
		return 1;
	}
	return 0;
}

/* A list key arrived: connections waiting on it are served (blocking.c). */
static void put_key(struct shard *sh, struct item *it)
{
	struct item *old = dict_put(&sh->keys, db_slot(sh, it->kv, it->klen, it->hash), it);

	if (old)
		item_free(old);
	if (it->type == T_LIST)
		serve_blocked(sh, it);
}

static void move_src(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct item **pe = db_slot(sh, arg_p(c, i), arg_n(c, i), h);
	int copy = arg_is(c, 0, "copy"), nx = arg_is(c, 0, "renamenx");

	if (c->flags & MV_BACK) { /* RENAMENX found its destination taken */
		c->ki = 0;
		if (*pe == NULL) /* (else a newer key took the name: it stays) */
			put_key(sh, c->held);
		else
			item_free(c->held);
		c->held = NULL;
		out_add(c, ":0\r\n", 4);
		return;
	}
	if (*pe == NULL) {
		c->ki = 0;
		if (copy)
			out_add(c, ":0\r\n", 4);
		else
			reply_error(c, "ERR no such key");
		return;
	}
	if (c->flags & MV_SAME) { /* RENAME k k: nothing moves */
		c->ki = 0;
		if (nx)
			out_add(c, ":0\r\n", 4);
		else
			reply_ok(c);
		return;
	}
	if (copy) {
		if ((c->held = item_copy(*pe, (*pe)->kv, (*pe)->klen, 1)) == NULL) {
			c->ki = 0;
			reply_oom(c);
		}
		return;
	}
	c->held = dict_take(&sh->keys, pe);
}

static void move_dst(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct item *e = db_get(sh, arg_p(c, i), arg_n(c, i), h), *it;
	int copy = arg_is(c, 0, "copy");

	if (e && (copy ? !(c->flags & MV_REPLACE) : arg_is(c, 0, "renamenx"))) {
		if (copy) {
			item_free(c->held);
			c->held = NULL;
			out_add(c, ":0\r\n", 4);
		} else { /* back to the source */
			c->flags |= MV_BACK;
			c->ki = 1;
		}
		return;
	}
	if ((it = item_copy(c->held, arg_p(c, i), arg_n(c, i), 0)) == NULL) {
		reply_oom(c); /* (the key is lost: no memory to keep it either) */
		return;
	}
	item_free(c->held);
	c->held = NULL;
	put_key(sh, it);
	if (copy || arg_is(c, 0, "renamenx"))
		out_add(c, ":1\r\n", 4);
	else
		reply_ok(c);
}

static void move_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	if (i == 1)
		move_src(c, sh, i, h);
	else
		move_dst(c, sh, i, h);
}

/* ---- every shard: KEYS, SCAN, DBSIZE, RANDOMKEY, FLUSHDB, FLUSHALL ------------------------ */

static int all_begin(struct conn *c)
{
	c->num = 0;
	array_begin(c);
	return 0;
}

struct keys_walk {
	struct conn *c;
	const char *pat;
	size_t pn;
	int type;                     /* -1: any */
	int64_t now;
};

static void keys_one(void *arg, struct item *it)
{
	struct keys_walk *w = arg;

	if ((it->expire_ms && it->expire_ms < w->now) || (w->type >= 0 && it->type != w->type) ||
	    (w->pat && !glob_match(w->pat, w->pn, it->kv, it->klen, 0)))
		return;
	reply_bulk(w->c, it->kv, it->klen);
	w->c->num++;
}

static void keys_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct keys_walk w = { c, arg_p(c, 1), arg_n(c, 1), -1, now_ms() };
	uint64_t v = 0;

	(void)i, (void)h;
	if (w.pn == 1 && w.pat[0] == '*')
		w.pat = NULL;
	do
		v = dict_scan(&sh->keys, v, keys_one, &w);
	while (v != 0);
}

static void keys_end(struct conn *c)
{
	array_end(c, c->num);
}

/* SCAN cursor [MATCH pattern] [COUNT n] [TYPE type] */
static int scan_begin(struct conn *c)
{
	unsigned long long cur;
	char buf[32], *end;

	c->num2 = 10; /* COUNT */
	c->flags = -1; /* TYPE */
	c->phase = 0; /* MATCH's argument */
	/* the cursor as Redis reads it: strtoull's, whole (so "-1" wraps) */
	if (arg_n(c, 1) >= sizeof buf) {
		reply_error(c, "ERR invalid cursor");
		return 1;
	}
	memcpy(buf, arg_p(c, 1), arg_n(c, 1));
	buf[arg_n(c, 1)] = 0;
	errno = 0;
	cur = strtoull(buf, &end, 10);
	if (isspace((unsigned char)buf[0]) || *end || errno == ERANGE) {
		reply_error(c, "ERR invalid cursor");
		return 1;
	}
	for (unsigned i = 2; i < c->argc; i += 2) {
		if (i + 1 >= c->argc) {
			reply_syntax(c);
			return 1;
		}
		if (arg_is(c, i, "COUNT")) {
			if (!arg_ll(c, i + 1, &c->num2)) {
				reply_not_int(c);
				return 1;
			}
			if (c->num2 < 1) {
				reply_syntax(c);
				return 1;
			}
		} else if (arg_is(c, i, "MATCH")) {
			c->phase = (int)i + 1;
		} else if (arg_is(c, i, "TYPE")) {
			c->flags = -2;
			for (int t = 0; t < 5; t++)
				if (arg_is(c, i + 1, type_names[t]))
					c->flags = t;
		} else {
			reply_syntax(c);
			return 1;
		}
	}
	c->num = 0; /* the keys found */
	c->expire_ms = (int64_t)(cur >> 8); /* the bucket; at the end, the next cursor */
	c->ki = (unsigned)(cur & 255) + 1; /* the shard */
	if (c->ki > srv.threads)
		c->ki = 0, c->expire_ms = 0;
	array_begin(c);
	return 0;
}

/* A slice of the shard's buckets; a shard done with fewer keys than
 * COUNT goes on with the next shard. */
static void scan_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct keys_walk w = { c, c->phase ? arg_p(c, (unsigned)c->phase) : NULL,
			       c->phase ? arg_n(c, (unsigned)c->phase) : 0, c->flags, now_ms() };
	uint64_t v = (uint64_t)c->expire_ms;
	long long rounds = c->num2 * 10;

	(void)h;
	c->ki = 0;
	if (w.type == -2) /* a type nobody has */
		w.type = 99;
	if (sh->keys.count == 0)
		v = 0;
	else
		do
			v = dict_scan(&sh->keys, v, keys_one, &w);
		while (v != 0 && c->num < c->num2 && --rounds > 0);
	if (v != 0) {
		c->expire_ms = (int64_t)(v << 8 | (i - 1));
	} else if (i < srv.threads && c->num < c->num2) {
		c->ki = i + 1;
		c->expire_ms = 0;
	} else {
		c->expire_ms = i < srv.threads ? i : 0;
	}
}

static void scan_end(struct conn *c)
{
	char head[64];
	int n;

	array_end(c, c->num);
	n = snprintf(head, sizeof head, "*2\r\n$%d\r\n%llu\r\n",
		     snprintf(NULL, 0, "%llu", (unsigned long long)c->expire_ms),
		     (unsigned long long)c->expire_ms);
	out_insert(c, c->mark, head, (size_t)n);
}

static void dbsize_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	(void)i, (void)h;
	c->num += (long long)sh->keys.count;
}

/* FLUSHDB, FLUSHALL [ASYNC | SYNC] */
static int flush_begin(struct conn *c)
{
	if (c->argc > 2 || (c->argc == 2 && !arg_is(c, 1, "ASYNC") && !arg_is(c, 1, "SYNC"))) {
		reply_syntax(c);
		return 1;
	}
	return 0;
}

static void flush_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	(void)c, (void)i, (void)h;
	dict_free(&sh->keys);
	if (dict_init(&sh->keys, 16) < 0)
		dict_init(&sh->keys, 1); /* (one bucket is never refused for long) */
}

static void flush_end(struct conn *c)
{
	reply_ok(c);
}

/* RANDOMKEY: each shard offers one of its keys, in proportion to its size */
static void randomkey_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct item *it = NULL;
	int64_t now = now_ms();

	(void)i, (void)h;
	if (sh->keys.count == 0)
		return;
	c->num += (long long)sh->keys.count;
	if ((long long)((unsigned long long)random() % (unsigned long long)c->num) >=
	    (long long)sh->keys.count)
		return;
	for (int tries = 0; tries < 100 && (it == NULL || (it->expire_ms && it->expire_ms < now));
	     tries++)
		it = dict_random(&sh->keys);
	if (it == NULL || (it->expire_ms && it->expire_ms < now))
		return;
	if (c->held)
		item_free(c->held);
	c->held = item_new(it->kv, it->klen, NULL, 0);
}

static void randomkey_end(struct conn *c)
{
	if (c->held)
		reply_bulk(c, c->held->kv, c->held->klen);
	else
		reply_nil(c);
}

const struct command keyspace_commands[] = {
	{ "del", -2, 1, -1, 1, 0, count_begin, del_key, count_end },
	{ "unlink", -2, 1, -1, 1, 0, count_begin, del_key, count_end },
	{ "exists", -2, 1, -1, 1, 0, count_begin, exists_key, count_end },
	{ "type", 2, 1, 1, 1, 0, NULL, type_key, NULL },
	{ "rename", 3, 1, 2, 1, 0, move_begin, move_key, NULL },
	{ "renamenx", 3, 1, 2, 1, 0, move_begin, move_key, NULL },
	{ "copy", -3, 1, 2, 1, 0, move_begin, move_key, NULL },
	{ "keys", 2, 1, 0, 1, CMD_ALL_SHARDS, all_begin, keys_key, keys_end },
	{ "scan", -2, 1, 0, 1, CMD_ALL_SHARDS, scan_begin, scan_key, scan_end },
	{ "dbsize", 1, 1, 0, 1, CMD_ALL_SHARDS, count_begin, dbsize_key, count_end },
	{ "randomkey", 1, 1, 0, 1, CMD_ALL_SHARDS, count_begin, randomkey_key, randomkey_end },
	{ "flushdb", -1, 1, 0, 1, CMD_ALL_SHARDS, flush_begin, flush_key, flush_end },
	{ "flushall", -1, 1, 0, 1, CMD_ALL_SHARDS, flush_begin, flush_key, flush_end },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL },
};
