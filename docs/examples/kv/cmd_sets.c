/* SPDX-License-Identifier: MIT */
/*
 * cmd_sets.c - sets, hashes and sorted sets, the commands redis-benchmark
 * runs and their neighbours: SADD, SREM, SPOP, SMEMBERS, SCARD, SISMEMBER;
 * HSET, HGET, HGETALL, HDEL, HLEN; ZADD (NX, XX, GT, LT, CH, INCR),
 * ZPOPMIN, ZRANGE (by index, BYSCORE, BYLEX, REV, LIMIT, WITHSCORES), ZCARD,
 * ZSCORE. A set or a hash is a dict of members (a field's value after its
 * name); a sorted set is a dict plus its members in order (zset.c). A
 * key whose set, hash or sorted set becomes empty is removed, as in Redis.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

/* The members' table of a set, a hash or a sorted set key. */
static struct dict *members(struct item *e)
{
	return e->type == T_ZSET ? &((struct zset *)e->obj)->d : e->obj;
}

/* Key i of the command's type (its table's type: sets, hashes, sorted
 * sets), created when create is set; NULL: none (or WRONGTYPE answered,
 * *wrong; or no memory, answered). */
static struct item *get_agg(struct conn *c, struct shard *sh, unsigned i, uint64_t h, int type,
			    int create, int *wrong)
{
	struct item *e = lookup_typed(c, sh, i, h, type, wrong);

	if (e == NULL && !*wrong && create &&
	    (e = db_add_obj(sh, arg_p(c, i), arg_n(c, i), h, type)) == NULL) {
		reply_oom(c);
		*wrong = 1;
	}
	return e;
}

static void drop_if_empty(struct shard *sh, struct item *e)
{
	if (members(e)->count == 0)
		db_delete(sh, db_slot(sh, e->kv, e->klen, e->hash));
}

static struct item **member_slot(struct item *e, const char *p, size_t n)
{
	return dict_find(members(e), p, n, hash_key(p, n));
}

/* Add member (and a value) to a set's or a hash's table: 1 if it is new,
 * 0 if it was there (a hash's value replaced), -1 no memory. */
static int member_put(struct item *e, const char *p, size_t n, const char *v, size_t vn)
{
	struct item **pe = member_slot(e, p, n), *m;

	if (*pe && e->type == T_SET)
		return 0;
	if ((m = item_new(p, n, v, vn)) == NULL)
		return -1;
	if ((m = dict_put(members(e), pe, m)) != NULL) {
		free(m);
		return 0;
	}
	return 1;
}

/* ---- sets ------------------------------------------------------------------------------------- */

/* SADD key member [member ...]; HSET key field value [field value ...] */
static void add_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong, hash = c->cmd->step == 2, r;
	struct item *e = get_agg(c, sh, i, h, hash ? T_HASH : T_SET, 1, &wrong);
	long long added = 0;

	if (wrong)
		return;
	for (unsigned k = 2; k < c->argc; k += hash ? 2 : 1) {
		if ((r = member_put(e, arg_p(c, k), arg_n(c, k), hash ? arg_p(c, k + 1) : NULL,
				    hash ? arg_n(c, k + 1) : 0)) < 0) {
			reply_oom(c);
			drop_if_empty(sh, e);
			return;
		}
		added += r;
	}
	out_num(c, ':', added);
}

/* SREM key member [member ...]; HDEL key field [field ...] */
static void rem_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *e = get_agg(c, sh, i, h, arg_is(c, 0, "hdel") ? T_HASH : T_SET, 0, &wrong);
	long long removed = 0;

	if (wrong)
		return;
	for (unsigned k = 2; e && k < c->argc; k++) {
		struct item **pe = member_slot(e, arg_p(c, k), arg_n(c, k));

		if (*pe) {
			free(dict_take(members(e), pe));
			removed++;
		}
	}
	out_num(c, ':', removed);
	if (e)
		drop_if_empty(sh, e);
}

/* SCARD, HLEN, ZCARD */
static void card_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong, type = c->cmd->name[0] == 's' ? T_SET : c->cmd->name[0] == 'h' ? T_HASH : T_ZSET;
	struct item *e = get_agg(c, sh, i, h, type, 0, &wrong);

	if (!wrong)
		out_num(c, ':', e ? (long long)members(e)->count : 0);
}

static void sismember_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *e = get_agg(c, sh, i, h, T_SET, 0, &wrong);

	if (!wrong)
		out_add(c, e && *member_slot(e, arg_p(c, 2), arg_n(c, 2)) ? ":1\r\n" : ":0\r\n", 4);
}

struct walk {
	struct conn *c;
	int values;                   /* HGETALL: each field's value after it */
};

static void reply_member(void *arg, struct item *m)
{
	struct walk *w = arg;

	reply_bulk(w->c, m->kv, m->klen);
	if (w->values)
		reply_bulk(w->c, item_val(m), m->vlen);
}

/* SMEMBERS key, HGETALL key: every member (field and value) */
static void members_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong, hash = arg_is(c, 0, "hgetall");
	struct item *e = get_agg(c, sh, i, h, hash ? T_HASH : T_SET, 0, &wrong);
	struct walk w = { c, hash };
	uint64_t v = 0;

	if (wrong)
		return;
	out_num(c, '*', e ? (long long)members(e)->count * (hash ? 2 : 1) : 0);
	if (e == NULL)
		return;
	do
		v = dict_scan(members(e), v, reply_member, &w);
	while (v != 0);
}

/* SPOP key [count]; ZPOPMIN key [count] */
static int count_begin(struct conn *c)
{
	if (c->argc > 3) {
		reply_syntax(c);
		return 1;
	}
	return arg_count(c) < 0;
}

static void spop_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *e = get_agg(c, sh, i, h, T_SET, 0, &wrong);
	long long n = c->num < 0 ? 1 : c->num;

	if (wrong)
		return;
	if (e == NULL) {
		out_add(c, c->num < 0 ? "$-1\r\n" : "*0\r\n", c->num < 0 ? 5 : 4);
		return;
	}
	if (n > (long long)members(e)->count)
		n = (long long)members(e)->count;
	if (c->num >= 0)
		out_num(c, '*', n);
	for (; n > 0; n--) {
		struct item *m = dict_random(members(e));

		reply_bulk(c, m->kv, m->klen);
		free(dict_take(members(e), member_slot(e, m->kv, m->klen)));
	}
	drop_if_empty(sh, e);
}

/* ---- hashes ----------------------------------------------------------------------------------- */

static int hset_begin(struct conn *c)
{
	if (c->argc % 2 != 0) {
		reply_error(c, "ERR wrong number of arguments for 'hset' command");
		return 1;
	}
	return 0;
}

/* HGET key field, ZSCORE key member: the member of argument 2 (NULL:
 * none), *wrong after a WRONGTYPE */
static struct item *member_arg(struct conn *c, struct shard *sh, unsigned i, uint64_t h,
			       int type, int *wrong)
{
	struct item *e = get_agg(c, sh, i, h, type, 0, wrong);

	return e ? *member_slot(e, arg_p(c, 2), arg_n(c, 2)) : NULL;
}

static void hget_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *m = member_arg(c, sh, i, h, T_HASH, &wrong);

	if (m)
		reply_bulk(c, item_val(m), m->vlen);
	else if (!wrong)
		reply_nil(c);
}

/* ---- sorted sets ------------------------------------------------------------------------------ */

static void reply_score(struct conn *c, double v)
{
	char num[40];

	reply_bulk(c, num, fmt_double(num, v));
}

enum { Z_NX = 1, Z_XX = 2, Z_GT = 4, Z_LT = 8, Z_CH = 16, Z_INCR = 32 };

/* ZADD key [NX | XX] [GT | LT] [CH] [INCR] score member [score member ...] */
static int zadd_begin(struct conn *c)
{
	static const char *const opts[] = { "NX", "XX", "GT", "LT", "CH", "INCR" };
	unsigned i = 2;
	double d;

	c->flags = 0;
	for (; i < c->argc; i++) {
		int k = 0;

		while (k < 6 && !arg_is(c, i, opts[k]))
			k++;
		if (k == 6)
			break;
		c->flags |= 1 << k;
	}
	c->num = i; /* the first score */
	if (i == c->argc || (c->argc - i) % 2 != 0) {
		reply_syntax(c);
		return 1;
	}
	if ((c->flags & Z_NX) && (c->flags & Z_XX)) {
		reply_error(c, "ERR XX and NX options at the same time are not compatible");
		return 1;
	}
	if (((c->flags & Z_GT) && (c->flags & (Z_LT | Z_NX))) || ((c->flags & Z_LT) && (c->flags & Z_NX))) {
		reply_error(c, "ERR GT, LT, and/or NX options at the same time are not compatible");
		return 1;
	}
	if ((c->flags & Z_INCR) && c->argc - i != 2) {
		reply_error(c, "ERR INCR option supports a single increment-element pair");
		return 1;
	}
	for (; i < c->argc; i += 2) {
		int r = arg_double(c, i, &d);

		if (r < 0)
			reply_oom(c);
		else if (r == 0)
			reply_error(c, "ERR value is not a valid float");
		if (r <= 0)
			return 1;
	}
	return 0;
}

/* One score and member into z: 1 added, 2 changed, 3 the same score, 0
 * left out (NX, XX, GT, LT), -1 no memory, -2 NaN (INCR). *score: the
 * member's score after. */
static int zadd_one(struct conn *c, struct zset *z, unsigned k, double *score)
{
	struct item **pe = dict_find(&z->d, arg_p(c, k + 1), arg_n(c, k + 1),
				     hash_key(arg_p(c, k + 1), arg_n(c, k + 1)));
	struct item *m = *pe;
	double s;

	if (arg_double(c, k, &s) <= 0) /* (it was one in zadd_begin: no memory now) */
		return -1;
	if ((m && c->flags & Z_NX) || (!m && c->flags & Z_XX))
		return 0;
	if (m && c->flags & Z_INCR)
		s += m->score;
	if (isnan(s))
		return -2;
	*score = s;
	if (m && ((c->flags & Z_GT && s <= m->score) || (c->flags & Z_LT && s >= m->score)))
		return 0;
	if (m && s == m->score)
		return 3;
	if (m) { /* a new score: a new place */
		zset_rescore(z, m, s);
		return 2;
	}
	if ((m = item_new(arg_p(c, k + 1), arg_n(c, k + 1), NULL, 0)) == NULL)
		return -1;
	m->score = s;
	return zset_insert(z, m) < 0 ? (free(m), -1) : 1;
}

static void zadd_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong, r = 0;
	struct item *e = get_agg(c, sh, i, h, T_ZSET, !(c->flags & Z_XX), &wrong);
	long long added = 0, changed = 0;
	double score = 0;

	if (wrong)
		return;
	for (unsigned k = (unsigned)c->num; e && k < c->argc && r >= 0; k += 2) {
		r = zadd_one(c, e->obj, k, &score);
		added += r == 1;
		changed += r == 1 || r == 2;
	}
	if (r == -2)
		reply_error(c, "ERR resulting score is not a number (NaN)");
	else if (r == -1)
		reply_oom(c);
	else if (c->flags & Z_INCR && r == 0)
		reply_nil(c);
	else if (c->flags & Z_INCR)
		reply_score(c, score);
	else
		out_num(c, ':', c->flags & Z_CH ? changed : added);
	if (e)
		drop_if_empty(sh, e);
}

static void zpopmin_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *e = get_agg(c, sh, i, h, T_ZSET, 0, &wrong);
	struct zset *z;
	long long n = c->num < 0 ? 1 : c->num;

	if (wrong)
		return;
	if (e == NULL) {
		out_add(c, "*0\r\n", 4);
		return;
	}
	z = e->obj;
	if (n > (long long)z->n)
		n = (long long)z->n;
	out_num(c, '*', n * 2);
	for (; n > 0; n--) {
		struct item *m = z->head->lv[0].next->m;

		reply_bulk(c, m->kv, m->klen);
		reply_score(c, m->score);
		zset_remove(z, m);
		free(m);
	}
	drop_if_empty(sh, e);
}

/*
 * ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count]
 * [WITHSCORES]. By index (the default), by score (min and max: a number,
 * -inf, +inf, "(" before one excludes it) or by name (BYLEX, for members
 * of one score: "[name", "(name" excluding it, "-" and "+" for the ends).
 * REV reverses the order, and BYSCORE's and BYLEX's range is then given
 * max first. LIMIT skips offset members of the range (a negative offset:
 * none is left) and answers count of the rest (negative: all).
 */
enum { ZR_SCORES = 1, ZR_REV = 2, ZR_BYSCORE = 4, ZR_BYLEX = 8 };

/* One end of a BYSCORE or BYLEX range. */
struct zbound {
	double score;
	const char *p;                /* BYLEX: the name after its "[" or "(" */
	size_t n;
	int inf;                      /* BYLEX: -1 "-", 1 "+", 0 a name */
	int ex;                       /* excluded: "(" (and "-", "+") */
};

struct zrange {
	int flags;
	long long offset, count;      /* LIMIT's; count -1: no LIMIT */
	struct zbound min, max;
};

/* A BYSCORE end as Redis reads it: strtod over the whole argument (up to
 * a zero byte), so "(" alone is 0 excluded, a space may lead, "1e400" is
 * inf; NaN is refused. 1, 0 when it is no number, -1 no memory. */
static int zbound_score(const struct conn *c, unsigned i, struct zbound *b)
{
	char *s, *end;
	int ok;

	b->ex = arg_n(c, i) > 0 && arg_p(c, i)[0] == '(';
	if ((s = strndup(arg_p(c, i) + b->ex, arg_n(c, i) - (size_t)b->ex)) == NULL)
		return -1;
	b->score = strtod(s, &end);
	ok = *end == 0 && !isnan(b->score);
	free(s);
	return ok;
}

/* A BYLEX end: "-", "+", "[name" or "(name". 1, or 0 when it is none. */
static int zbound_lex(const struct conn *c, unsigned i, struct zbound *b)
{
	const char *p = arg_p(c, i);
	size_t n = arg_n(c, i);

	if (n == 0 || !memchr("-+[(", p[0], 4))
		return 0;
	b->inf = p[0] == '-' ? -1 : p[0] == '+';
	b->ex = p[0] != '[';
	b->p = p + 1;
	b->n = n - 1;
	return !b->inf || n == 1 || p[1] == 0;
}

/* Parse ZRANGE's arguments into r (a range by index into c->num, c->num2)
 * in Redis's order: the options, their conflicts, then the range. 0, or 1
 * after the error reply. */
static int zrange_parse(struct conn *c, struct zrange *r)
{
	static const char *const words[] = { "WITHSCORES", "REV", "BYSCORE", "BYLEX" };
	unsigned lo = 2, hi = 3, k;
	int ok;

	*r = (struct zrange){ .count = -1 };
	for (unsigned i = 4; i < c->argc; i++) {
		if (arg_is(c, i, "LIMIT") && i + 2 < c->argc) {
			if (!arg_ll(c, i + 1, &r->offset) || !arg_ll(c, i + 2, &r->count)) {
				reply_not_int(c);
				return 1;
			}
			i += 2;
			continue;
		}
		for (k = 0; k < 4 && !arg_is(c, i, words[k]); k++)
			;
		/* WITHSCORES may repeat; REV may not, nor a second BY... */
		if (k == 4 || (k > 0 && r->flags & (1 << k)) ||
		    (k > 1 && r->flags & (ZR_BYSCORE | ZR_BYLEX))) {
			reply_syntax(c);
			return 1;
		}
		r->flags |= 1 << k;
	}
	if (r->count != -1 && !(r->flags & (ZR_BYSCORE | ZR_BYLEX))) {
		reply_error(c, "ERR syntax error, LIMIT is only supported in combination with "
			       "either BYSCORE or BYLEX");
		return 1;
	}
	if ((r->flags & ZR_SCORES) && (r->flags & ZR_BYLEX)) {
		reply_error(c, "ERR syntax error, WITHSCORES not supported in combination with BYLEX");
		return 1;
	}
	if (!(r->flags & (ZR_BYSCORE | ZR_BYLEX)))
		return range_begin(c);
	if (r->flags & ZR_REV) { /* max first */
		lo = 3;
		hi = 2;
	}
	if (r->flags & ZR_BYLEX) {
		if (!zbound_lex(c, lo, &r->min) || !zbound_lex(c, hi, &r->max)) {
			reply_error(c, "ERR min or max not valid string range item");
			return 1;
		}
		return 0;
	}
	if ((ok = zbound_score(c, lo, &r->min)) > 0 && (ok = zbound_score(c, hi, &r->max)) > 0)
		return 0;
	if (ok < 0)
		reply_oom(c);
	else
		reply_error(c, "ERR min or max is not a float");
	return 1;
}

/* A search of zfind's: the members whose comparison with bound b (by
 * score, or by name bytewise: < 0, 0, > 0) is less than t. */
struct zsearch {
	const struct zbound *b;
	int lex, t;
};

static int zbelow(const struct znode *x, double score, const void *arg)
{
	const struct zsearch *q = arg;
	const struct zbound *b = q->b;
	const struct item *m = x->m;
	int d;

	if (!q->lex)
		return ((score > b->score) - (score < b->score)) < q->t;
	if (b->inf)
		return -b->inf < q->t;
	if ((d = memcmp(m->kv, b->p, m->klen < b->n ? m->klen : b->n)) == 0)
		d = (m->klen > b->n) - (m->klen < b->n);
	return d < q->t;
}

/* The index of the first member of z whose comparison with b is at least
 * t (the order is by score, then by name: by name alone when the scores
 * are the same). */
static size_t zfind(const struct zset *z, const struct zbound *b, int lex, int t)
{
	return zset_rank(z, zbelow, &(struct zsearch){ b, lex, t });
}

static void zrange_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct zrange r;
	int wrong, rev, lex;
	struct item *e;
	struct zset *z;
	struct znode *x;
	long long first, n;

	if (zrange_parse(c, &r))
		return;
	if ((e = get_agg(c, sh, i, h, T_ZSET, 0, &wrong)) == NULL) {
		if (!wrong)
			out_add(c, "*0\r\n", 4);
		return;
	}
	z = e->obj;
	rev = r.flags & ZR_REV;
	if (!(r.flags & (ZR_BYSCORE | ZR_BYLEX))) { /* by index */
		long long start = c->num, stop = c->num2, len = (long long)z->n;

		n = clamp_range(len, &start, &stop) ? stop - start + 1 : 0;
		first = rev ? len - 1 - start : start;
	} else { /* the members in [lo, hi), less LIMIT's offset, at most its count */
		long long lo, hi;

		lex = (r.flags & ZR_BYLEX) != 0;
		lo = (long long)zfind(z, &r.min, lex, r.min.ex);
		hi = (long long)zfind(z, &r.max, lex, !r.max.ex);
		n = r.offset < 0 || hi - lo <= r.offset ? 0 : hi - lo - r.offset;
		if (r.count >= 0 && r.count < n)
			n = r.count;
		first = n == 0 ? 0 : rev ? hi - 1 - r.offset : lo + r.offset;
	}
	out_num(c, '*', n * (r.flags & ZR_SCORES ? 2 : 1));
	for (x = NULL; n > 0; n--) { /* the member at first, then those after (before) it */
		x = x == NULL ? zset_at(z, (size_t)first) : rev ? x->back : x->lv[0].next;
		reply_bulk(c, x->m->kv, x->m->klen);
		if (r.flags & ZR_SCORES)
			reply_score(c, x->m->score);
	}
}

static void zscore_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *m = member_arg(c, sh, i, h, T_ZSET, &wrong);

	if (m)
		reply_score(c, m->score);
	else if (!wrong)
		reply_nil(c);
}

const struct command set_commands[] = {
	{ "sadd", -3, 1, 1, 1, 0, NULL, add_key, NULL },
	{ "srem", -3, 1, 1, 1, 0, NULL, rem_key, NULL },
	{ "spop", -2, 1, 1, 1, 0, count_begin, spop_key, NULL },
	{ "smembers", 2, 1, 1, 1, 0, NULL, members_key, NULL },
	{ "scard", 2, 1, 1, 1, 0, NULL, card_key, NULL },
	{ "sismember", 3, 1, 1, 1, 0, NULL, sismember_key, NULL },
	{ "hset", -4, 1, 1, 2, 0, hset_begin, add_key, NULL },
	{ "hget", 3, 1, 1, 1, 0, NULL, hget_key, NULL },
	{ "hgetall", 2, 1, 1, 1, 0, NULL, members_key, NULL },
	{ "hdel", -3, 1, 1, 1, 0, NULL, rem_key, NULL },
	{ "hlen", 2, 1, 1, 1, 0, NULL, card_key, NULL },
	{ "zadd", -4, 1, 1, 1, 0, zadd_begin, zadd_key, NULL },
	{ "zpopmin", -2, 1, 1, 1, 0, count_begin, zpopmin_key, NULL },
	{ "zrange", -4, 1, 1, 1, 0, NULL, zrange_key, NULL },
	{ "zcard", 2, 1, 1, 1, 0, NULL, card_key, NULL },
	{ "zscore", 3, 1, 1, 1, 0, NULL, zscore_key, NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL },
};
