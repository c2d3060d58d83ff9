/* SPDX-License-Identifier: MIT */
/*
 * cmd_strings.c - the string commands: GET, SET and its options, MGET, MSET,
 * INCR, INCRBY, DECR, DECRBY. Each key part runs on the context that owns
 * its key's shard.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

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

const struct command string_commands[] = {
	{ "get", 2, 1, 1, 1, NULL, get_key, NULL },
	{ "set", -3, 1, 1, 1, set_begin, set_key, NULL },
	{ "incr", 2, 1, 1, 1, incr_begin, incr_key, NULL },
	{ "decr", 2, 1, 1, 1, incr_begin, incr_key, NULL },
	{ "incrby", 3, 1, 1, 1, incr_begin, incr_key, NULL },
	{ "decrby", 3, 1, 1, 1, incr_begin, incr_key, NULL },
	{ "mget", -2, 1, -1, 1, mget_begin, get_key, NULL },
	{ "mset", -3, 1, -1, 2, mset_begin, mset_key, mset_end },
	{ NULL, 0, 0, 0, 0, NULL, NULL, NULL },
};
