/* SPDX-License-Identifier: MIT */
/*
 * cmd_strings.c - the string commands: GET, SET (NX, XX, GET, EX, PX,
 * EXAT, PXAT, KEEPTTL), GETEX, GETDEL, GETSET, SETEX, PSETEX, SETNX, MGET,
 * MSET, MSETNX, APPEND, STRLEN, GETRANGE, SETRANGE, INCR, DECR, INCRBY,
 * DECRBY, INCRBYFLOAT. Each key part runs on the context that owns its
 * key's shard. A string is at most 512 MB, as in Redis.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

#define STRING_MAX (512LL << 20)

/* Key i's string (NULL: none); another type answers WRONGTYPE (*wrong). */
static struct item *get_string(struct conn *c, struct shard *sh, unsigned i, uint64_t h,
			       int *wrong)
{
	return lookup_typed(c, sh, i, h, T_STRING, wrong);
}

static void reply_value(struct conn *c, const struct item *e)
{
	if (e)
		reply_bulk(c, item_val(e), e->vlen);
	else
		reply_nil(c);
}

static void get_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *e = get_string(c, sh, i, h, &wrong);

	if (!wrong)
		reply_value(c, e);
}

/* MGET: a key of another type is a nil, not an error */
static void mget_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct item *e = db_get(sh, arg_p(c, i), arg_n(c, i), h);

	reply_value(c, e && e->type == T_STRING ? e : NULL);
}

static int mget_begin(struct conn *c)
{
	out_num(c, '*', (long long)c->argc - 1);
	return 0;
}

enum { SET_NX = 1, SET_XX = 2, SET_GET = 4, SET_TIME = 8, SET_KEEPTTL = 16 };

/* SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL];
 * GETSET key value is SET key value GET; SETNX key value is SET key value
 * NX answering 1 or 0. The options first (a syntax error before any
 * other), then the time. */
static int set_begin(struct conn *c)
{
	static const char *const times[] = { "EX", "PX", "EXAT", "PXAT" };
	unsigned at = 0;
	int how = 0;

	c->flags = arg_is(c, 0, "getset") ? SET_GET : arg_is(c, 0, "setnx") ? SET_NX : 0;
	c->expire_ms = 0;
	for (unsigned i = 3; i < c->argc && c->cmd->arity < 0; i++) {
		int t = -1;

		for (int k = 0; k < 4; k++)
			if (arg_is(c, i, times[k]))
				t = k;
		if (arg_is(c, i, "NX") && !(c->flags & SET_XX)) {
			c->flags |= SET_NX;
		} else if (arg_is(c, i, "XX") && !(c->flags & SET_NX)) {
			c->flags |= SET_XX;
		} else if (arg_is(c, i, "GET")) {
			c->flags |= SET_GET;
		} else if (arg_is(c, i, "KEEPTTL") && !(c->flags & SET_TIME)) {
			c->flags |= SET_KEEPTTL;
		} else if (t >= 0 && !(c->flags & (SET_TIME | SET_KEEPTTL)) && i + 1 < c->argc) {
			c->flags |= SET_TIME;
			how = (t % 2 == 0 ? TIME_S : 0) | (t >= 2 ? TIME_ABS : 0);
			at = ++i;
		} else {
			reply_syntax(c);
			return 1;
		}
	}
	return at && arg_expire(c, at, how, 1, &c->expire_ms) < 0;
}

/* SETEX key seconds value, PSETEX key ms value */
static int setex_begin(struct conn *c)
{
	c->flags = 0;
	return arg_expire(c, 2, arg_is(c, 0, "setex") ? TIME_S : 0, 1, &c->expire_ms) < 0;
}

static void set_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct item *e = db_get(sh, arg_p(c, i), arg_n(c, i), h);
	unsigned v = c->cmd->begin == setex_begin ? 3 : i + 1;
	int64_t expire = c->expire_ms;
	int setnx = arg_is(c, 0, "setnx");

	if (c->flags & SET_GET && e && e->type != T_STRING) {
		reply_wrongtype(c);
		return;
	}
	if ((c->flags & SET_NX && e) || (c->flags & SET_XX && !e)) {
		if (setnx)
			out_add(c, ":0\r\n", 4);
		else if (c->flags & SET_GET)
			reply_value(c, e);
		else
			reply_nil(c);
		return;
	}
	if (c->flags & SET_GET)
		reply_value(c, e); /* (before the set frees it) */
	if (c->flags & SET_KEEPTTL && e)
		expire = e->expire_ms;
	if (db_set_string(sh, arg_p(c, i), arg_n(c, i), h, arg_p(c, v), arg_n(c, v), expire))
		reply_oom(c);
	else if (setnx)
		out_add(c, ":1\r\n", 4);
	else if (!(c->flags & SET_GET))
		reply_ok(c);
}

enum { GETEX_PERSIST = 32, GETEX_DEL = 64 };

/* GETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST]; GETDEL key */
static int getex_begin(struct conn *c)
{
	static const char *const times[] = { "EX", "PX", "EXAT", "PXAT" };
	int t = -1;

	c->flags = arg_is(c, 0, "getdel") ? GETEX_DEL : 0;
	if (c->argc == 2)
		return 0;
	for (int k = 0; k < 4; k++)
		if (arg_is(c, 2, times[k]))
			t = k;
	if (c->argc == 3 && arg_is(c, 2, "PERSIST")) {
		c->flags = GETEX_PERSIST;
		return 0;
	}
	if (c->argc != 4 || t < 0) {
		reply_syntax(c);
		return 1;
	}
	c->flags = SET_TIME;
	return arg_expire(c, 3, (t % 2 == 0 ? TIME_S : 0) | (t >= 2 ? TIME_ABS : 0), 1,
			  &c->expire_ms) < 0;
}

static void getex_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct item **pe = db_slot(sh, arg_p(c, i), arg_n(c, i), h);

	if (*pe && (*pe)->type != T_STRING) {
		reply_wrongtype(c);
		return;
	}
	reply_value(c, *pe);
	if (*pe == NULL)
		return;
	if (c->flags & GETEX_PERSIST)
		(*pe)->expire_ms = 0;
	else if (c->flags & GETEX_DEL || (c->flags & SET_TIME && c->expire_ms <= now_ms()))
		db_delete(sh, pe);
	else if (c->flags & SET_TIME)
		(*pe)->expire_ms = c->expire_ms;
}

/* MSET k v [k v ...], MSETNX: each pair set on its key's owner. MSETNX
 * visits every key first (phase 0: does any exist?), then sets them all
 * (phase 1) if none does: not atomic across shards, as it is in Redis. */
static int mset_begin(struct conn *c)
{
	if (c->argc % 2 == 0) {
		reply_error(c, "ERR wrong number of arguments for '%s' command", c->cmd->name);
		return 1;
	}
	c->num = 0;
	c->phase = arg_is(c, 0, "mset");
	return 0;
}

static void mset_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	if (c->phase == 0) { /* MSETNX's look */
		c->num += db_get(sh, arg_p(c, i), arg_n(c, i), h) != NULL;
		if (c->ki == 0 && c->num == 0) {
			c->phase = 1;
			c->ki = 1;
		}
		return;
	}
	if (db_set_string(sh, arg_p(c, i), arg_n(c, i), h, arg_p(c, i + 1), arg_n(c, i + 1), 0))
		c->num = -1;
}

static void mset_end(struct conn *c)
{
	if (c->num < 0)
		reply_oom(c);
	else if (arg_is(c, 0, "msetnx"))
		out_add(c, c->num == 0 ? ":1\r\n" : ":0\r\n", 4);
	else
		reply_ok(c);
}

/* Replace key i's string by p[0, n) (keeping its time), or say why not. */
static void set_value(struct conn *c, struct shard *sh, unsigned i, uint64_t h, const char *p,
		      long long n, int64_t expire)
{
	if (n > STRING_MAX)
		reply_error(c, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
	else if (db_set_string(sh, arg_p(c, i), arg_n(c, i), h, p, (size_t)n, expire))
		reply_oom(c);
	else
		out_num(c, ':', n);
}

/* APPEND key value; SETRANGE key offset value: the new length */
static void append_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong, range = arg_is(c, 0, "setrange");
	struct item *e = get_string(c, sh, i, h, &wrong);
	unsigned v = range ? 3 : 2;
	long long off = range ? c->num : e ? e->vlen : 0, len = e ? e->vlen : 0;
	char *buf;

	if (wrong)
		return;
	if (range && arg_n(c, v) == 0) { /* nothing to write: nothing is created */
		out_num(c, ':', len);
		return;
	}
	if (off > STRING_MAX - (long long)arg_n(c, v)) { /* (off + n could overflow) */
		reply_error(c, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
		return;
	}
	if (off + (long long)arg_n(c, v) > len)
		len = off + (long long)arg_n(c, v);
	if ((buf = calloc(1, (size_t)len + 1)) == NULL) {
		reply_oom(c);
		return;
	}
	if (e)
		memcpy(buf, item_val(e), e->vlen);
	memcpy(buf + off, arg_p(c, v), arg_n(c, v));
	set_value(c, sh, i, h, buf, len, e ? e->expire_ms : 0);
	free(buf);
}

static int setrange_begin(struct conn *c)
{
	if (!arg_ll(c, 2, &c->num)) {
		reply_not_int(c);
		return 1;
	}
	if (c->num < 0) {
		reply_error(c, "ERR offset is out of range");
		return 1;
	}
	return 0;
}

static void strlen_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *e = get_string(c, sh, i, h, &wrong);

	if (!wrong)
		out_num(c, ':', e ? e->vlen : 0);
}

/* GETRANGE key start end: Redis's clamping, negative from the end */
static void getrange_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *e = get_string(c, sh, i, h, &wrong);
	long long start = c->num, end = c->num2, len = e ? e->vlen : 0;

	if (wrong)
		return;
	if (start < 0 && end < 0 && start > end) {
		reply_bulk(c, "", 0);
		return;
	}
	if (start < 0)
		start += len;
	if (end < 0)
		end += len;
	if (start < 0)
		start = 0;
	if (end < 0)
		end = 0;
	if (end >= len)
		end = len - 1;
	if (len == 0 || start > end)
		reply_bulk(c, "", 0);
	else
		reply_bulk(c, item_val(e) + start, (size_t)(end - start + 1));
}

/* INCR, DECR (num: +1, -1); INCRBY, DECRBY (num: the argument). */
static int incr_begin(struct conn *c)
{
	int decr = arg_n(c, 0) >= 4 && strncasecmp(arg_p(c, 0), "DECR", 4) == 0;

	if (c->argc == 2) {
		c->num = decr ? -1 : 1;
		return 0;
	}
	if (!arg_ll(c, 2, &c->num)) {
		reply_not_int(c);
		return 1;
	}
	if (decr && c->num == LLONG_MIN) {
		reply_error(c, "ERR decrement would overflow");
		return 1;
	}
	if (decr)
		c->num = -c->num;
	return 0;
}

static void incr_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *e = get_string(c, sh, i, h, &wrong);
	long long v = 0;
	char num[24];

	if (wrong)
		return;
	if (e && !parse_ll(item_val(e), e->vlen, &v)) {
		reply_not_int(c);
		return;
	}
	if ((c->num > 0 && v > LLONG_MAX - c->num) || (c->num < 0 && v < LLONG_MIN - c->num)) {
		reply_error(c, "ERR increment or decrement would overflow");
		return;
	}
	v += c->num;
	if (db_set_string(sh, arg_p(c, i), arg_n(c, i), h, num, fmt_ll(num, v),
			  e ? e->expire_ms : 0))
		reply_oom(c);
	else
		out_num(c, ':', v);
}

/* A long double, as INCRBYFLOAT reads one: 1 if p[0, n) is one. */
static int parse_ld(const char *p, size_t n, long double *out)
{
	char buf[5120], *end;

	if (n == 0 || n >= sizeof buf || isspace((unsigned char)p[0]))
		return 0;
	memcpy(buf, p, n);
	buf[n] = 0;
	errno = 0;
	*out = strtold(buf, &end);
	return end == buf + n && float_in_range(*out) && !isnan(*out);
}

static void incrbyfloat_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *e = get_string(c, sh, i, h, &wrong);
	long double v = 0, by;
	char num[5200];
	int n;

	if (wrong)
		return;
	if ((e && !parse_ld(item_val(e), e->vlen, &v)) || !parse_ld(arg_p(c, 2), arg_n(c, 2), &by)) {
		reply_error(c, "ERR value is not a valid float");
		return;
	}
	v += by;
	if (isnan(v) || isinf(v)) {
		reply_error(c, "ERR increment would produce NaN or Infinity");
		return;
	}
	n = snprintf(num, sizeof num, "%.17Lf", v); /* then no trailing zeros, as Redis */
	while (n > 1 && num[n - 1] == '0')
		n--;
	if (num[n - 1] == '.')
		n--;
	if (n == 2 && memcmp(num, "-0", 2) == 0) /* a zero, or less than 1e-17 below one */
		memmove(num, num + 1, (size_t)n--);
	if (db_set_string(sh, arg_p(c, i), arg_n(c, i), h, num, (size_t)n, e ? e->expire_ms : 0))
		reply_oom(c);
	else
		reply_bulk(c, num, (size_t)n);
}

const struct command string_commands[] = {
	{ "get", 2, 1, 1, 1, 0, NULL, get_key, NULL },
	{ "set", -3, 1, 1, 1, 0, set_begin, set_key, NULL },
	{ "incr", 2, 1, 1, 1, 0, incr_begin, incr_key, NULL },
	{ "decr", 2, 1, 1, 1, 0, incr_begin, incr_key, NULL },
	{ "incrby", 3, 1, 1, 1, 0, incr_begin, incr_key, NULL },
	{ "decrby", 3, 1, 1, 1, 0, incr_begin, incr_key, NULL },
	{ "incrbyfloat", 3, 1, 1, 1, 0, NULL, incrbyfloat_key, NULL },
	{ "mget", -2, 1, -1, 1, 0, mget_begin, mget_key, NULL },
	{ "mset", -3, 1, -1, 2, 0, mset_begin, mset_key, mset_end },
	{ "msetnx", -3, 1, -1, 2, 0, mset_begin, mset_key, mset_end },
	{ "getex", -2, 1, 1, 1, 0, getex_begin, getex_key, NULL },
	{ "getdel", 2, 1, 1, 1, 0, getex_begin, getex_key, NULL },
	{ "getset", 3, 1, 1, 1, 0, set_begin, set_key, NULL },
	{ "setex", 4, 1, 1, 1, 0, setex_begin, set_key, NULL },
	{ "psetex", 4, 1, 1, 1, 0, setex_begin, set_key, NULL },
	{ "setnx", 3, 1, 1, 1, 0, set_begin, set_key, NULL },
	{ "append", 3, 1, 1, 1, 0, NULL, append_key, NULL },
	{ "strlen", 2, 1, 1, 1, 0, NULL, strlen_key, NULL },
	{ "getrange", 4, 1, 1, 1, 0, range_begin, getrange_key, NULL },
	{ "setrange", 4, 1, 1, 1, 0, setrange_begin, append_key, NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL },
};
