/* SPDX-License-Identifier: MIT */
/*
 * cmd_expiry.c - a key's time to live: EXPIRE (NX, XX, GT, LT) and TTL.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

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

const struct command expiry_commands[] = {
	{ "expire", -3, 1, 1, 1, expire_begin, expire_key, NULL },
	{ "ttl", 2, 1, 1, 1, NULL, ttl_key, NULL },
	{ NULL, 0, 0, 0, 0, NULL, NULL, NULL },
};
