/* SPDX-License-Identifier: MIT */
/*
 * cmd_expiry.c - a key's time to live: EXPIRE, PEXPIRE, EXPIREAT,
 * PEXPIREAT (NX, XX, GT, LT), TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST;
 * and arg_expire, the time arguments of SET, GETEX, SETEX and PSETEX. A
 * time is kept as a Unix time in ms; a time that would not fit (seconds
 * times 1000, or now plus the time, past LLONG_MAX) is refused with
 * Redis's "invalid expire time" error and changes nothing.
 */
#include <limits.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

/* The command's name in lower case, for its errors ('expire', 'set'). */
static const char *lower_name(const struct conn *c)
{
	return c->cmd ? c->cmd->name : "";
}

static void reply_invalid_time(struct conn *c, const char *name)
{
	reply_error(c, "ERR invalid expire time in '%s' command", name);
}

/* Argument i as a time: seconds (TIME_S) or ms, relative or absolute
 * (TIME_ABS); positive: 0 and below are refused (SET's and GETEX's
 * times). 0 and the Unix time in ms in *when, or -1 after the error
 * reply. */
int arg_expire(struct conn *c, unsigned i, int how, int positive, int64_t *when)
{
	int64_t now = now_ms();
	long long t;

	if (!arg_ll(c, i, &t)) {
		reply_not_int(c);
		return -1;
	}
	if ((positive && t <= 0) || ((how & TIME_S) && (t > LLONG_MAX / 1000 || t < LLONG_MIN / 1000))) {
		reply_invalid_time(c, c->cmd->name);
		return -1;
	}
	if (how & TIME_S)
		t *= 1000;
	if (!(how & TIME_ABS)) {
		if (t > LLONG_MAX - now) {
			reply_invalid_time(c, c->cmd->name);
			return -1;
		}
		t += now;
	}
	*when = t; /* (a time in the past: the key goes) */
	return 0;
}

enum { EXP_NX = 1, EXP_XX = 2, EXP_GT = 4, EXP_LT = 8 };

/* EXPIRE key seconds [NX | XX | GT | LT], and PEXPIRE, EXPIREAT, PEXPIREAT */
static int expire_begin(struct conn *c)
{
	const char *name = lower_name(c);
	int how = (name[0] == 'e' ? TIME_S : 0) | (strstr(name, "at") ? TIME_ABS : 0);

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
	/* (a relative time is from now; EXPIREAT's is Unix time already) */
	return arg_expire(c, 2, how, 0, &c->expire_ms) < 0;
}

/* Whether the condition lets the new time in (a key without one lives
 * for ever: GT never beats it, LT always does). */
static int expire_allowed(int flags, int64_t cur, int64_t when)
{
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
	struct item **pe = db_slot(sh, arg_p(c, i), arg_n(c, i), h);

	if (*pe == NULL || !expire_allowed(c->flags, (*pe)->expire_ms, c->expire_ms)) {
		out_add(c, ":0\r\n", 4);
		return;
	}
	if (c->expire_ms <= now_ms())
		db_delete(sh, pe); /* a time in the past: the key goes now */
	else
		(*pe)->expire_ms = c->expire_ms;
	out_add(c, ":1\r\n", 4);
}

/* TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 no key, -1 no time. */
static void ttl_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct item *e = db_get(sh, arg_p(c, i), arg_n(c, i), h);
	const char *name = lower_name(c);
	int ms = name[0] == 'p', abs = strstr(name, "time") != NULL;
	int64_t t;

	if (e == NULL) {
		out_add(c, ":-2\r\n", 5);
	} else if (e->expire_ms == 0) {
		out_add(c, ":-1\r\n", 5);
	} else {
		t = abs ? e->expire_ms : e->expire_ms - now_ms();
		if (t < 0)
			t = 0;
		out_num(c, ':', ms ? t : (t + 500) / 1000);
	}
}

static void persist_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct item *e = db_get(sh, arg_p(c, i), arg_n(c, i), h);

	out_add(c, e && e->expire_ms ? ":1\r\n" : ":0\r\n", 4);
	if (e)
		e->expire_ms = 0;
}

const struct command expiry_commands[] = {
	{ "expire", -3, 1, 1, 1, 0, expire_begin, expire_key, NULL },
	{ "pexpire", -3, 1, 1, 1, 0, expire_begin, expire_key, NULL },
	{ "expireat", -3, 1, 1, 1, 0, expire_begin, expire_key, NULL },
	{ "pexpireat", -3, 1, 1, 1, 0, expire_begin, expire_key, NULL },
	{ "ttl", 2, 1, 1, 1, 0, NULL, ttl_key, NULL },
	{ "pttl", 2, 1, 1, 1, 0, NULL, ttl_key, NULL },
	{ "expiretime", 2, 1, 1, 1, 0, NULL, ttl_key, NULL },
	{ "pexpiretime", 2, 1, 1, 1, 0, NULL, ttl_key, NULL },
	{ "persist", 2, 1, 1, 1, 0, NULL, persist_key, NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL },
};
