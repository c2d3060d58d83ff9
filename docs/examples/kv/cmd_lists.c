/* SPDX-License-Identifier: MIT */
/*
 * cmd_lists.c - the list commands: LPUSH, RPUSH, LPOP, RPOP (with a
 * count), LLEN, LRANGE, LINDEX, LSET, LREM, LTRIM, LMOVE, and the blocking
 * BLPOP, BRPOP, BLMOVE (their wait is blocking.c's). A list that becomes
 * empty is removed, as in Redis; a push serves the connections waiting on
 * its key, first come first served.
 *
 * LMOVE (and BLMOVE) pops on the source's shard and pushes on the
 * destination's: the element travels with the connection between the two.
 * A destination that turns out to hold another type sends the element
 * back where it came from, and the answer is WRONGTYPE.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

static struct item *get_list(struct conn *c, struct shard *sh, unsigned i, uint64_t h,
			     int *wrong)
{
	return lookup_typed(c, sh, i, h, T_LIST, wrong);
}

/* The key is gone once its list is empty. */
static void drop_if_empty(struct shard *sh, struct item *e)
{
	if (((struct list *)e->obj)->len == 0)
		db_delete(sh, db_slot(sh, e->kv, e->klen, e->hash));
}

/* Push s at end of key i's list (created if need be): the list's key, or
 * NULL (another type: *wrong, the answer given; no memory). s is the
 * list's or freed. */
static struct item *push_one(struct conn *c, struct shard *sh, unsigned i, uint64_t h, int end,
			     struct str *s, int *wrong)
{
	struct item *e = get_list(c, sh, i, h, wrong);

	if (*wrong || s == NULL || (e == NULL && (e = db_add_obj(sh, arg_p(c, i), arg_n(c, i), h,
								   T_LIST)) == NULL) ||
	    list_push(e->obj, end, s) < 0) {
		free(s);
		if (!*wrong)
			reply_oom(c);
		if (e && ((struct list *)e->obj)->len == 0)
			drop_if_empty(sh, e);
		return NULL;
	}
	return e;
}

/* LPUSH key element [element ...], RPUSH */
static void push_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int end = arg_is(c, 0, "rpush") ? RIGHT : LEFT, wrong = 0;
	struct item *e = NULL;

	for (unsigned k = 2; k < c->argc; k++)
		if ((e = push_one(c, sh, i, h, end, str_new(arg_p(c, k), arg_n(c, k)), &wrong)) == NULL)
			return;
	out_num(c, ':', (long long)((struct list *)e->obj)->len);
	serve_blocked(sh, e);
}

/* LPOP key [count], RPOP: a count answers an array (nil: no key) */
static int pop_begin(struct conn *c)
{
	if (c->argc > 3) {
		reply_error(c, "ERR wrong number of arguments for '%s' command", c->cmd->name);
		return 1;
	}
	return arg_count(c) < 0;
}

static void pop_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong, end = arg_is(c, 0, "rpop") ? RIGHT : LEFT;
	struct item *e = get_list(c, sh, i, h, &wrong);
	struct list *l;
	long long n;

	if (wrong)
		return;
	if (e == NULL) {
		out_add(c, c->num < 0 ? "$-1\r\n" : "*-1\r\n", 5);
		return;
	}
	l = e->obj;
	n = c->num < 0 ? 1 : c->num < (long long)l->len ? c->num : (long long)l->len;
	if (c->num >= 0)
		out_num(c, '*', n);
	for (; n > 0; n--) {
		struct str *s = list_pop(l, end);

		reply_bulk(c, s->p, s->n);
		free(s);
	}
	drop_if_empty(sh, e);
}

static void llen_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *e = get_list(c, sh, i, h, &wrong);

	if (!wrong)
		out_num(c, ':', e ? (long long)((struct list *)e->obj)->len : 0);
}

/* An index or a count (LINDEX, LSET, LREM) */
static int int_begin(struct conn *c)
{
	if (!arg_ll(c, 2, &c->num)) {
		reply_not_int(c);
		return 1;
	}
	return 0;
}

static void lrange_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *e = get_list(c, sh, i, h, &wrong);
	long long start = c->num, stop = c->num2;

	if (wrong)
		return;
	if (e == NULL || !clamp_range((long long)((struct list *)e->obj)->len, &start, &stop)) {
		out_add(c, "*0\r\n", 4);
		return;
	}
	out_num(c, '*', stop - start + 1);
	for (; start <= stop; start++) {
		struct str *s = *list_at(e->obj, start);

		reply_bulk(c, s->p, s->n);
	}
}

static void ltrim_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *e = get_list(c, sh, i, h, &wrong);
	long long start = c->num, stop = c->num2;
	struct list *l;

	if (wrong)
		return;
	reply_ok(c);
	if (e == NULL)
		return;
	l = e->obj;
	if (!clamp_range((long long)l->len, &start, &stop))
		start = (long long)l->len, stop = start - 1;
	while ((long long)l->len > stop + 1)
		free(list_pop(l, RIGHT));
	for (; start > 0; start--)
		free(list_pop(l, LEFT));
	drop_if_empty(sh, e);
}

/* The list's element at a Redis index (negative: from the end), or NULL. */
static struct str **list_index(struct list *l, long long idx)
{
	if (idx < 0)
		idx += (long long)l->len;
	return idx < 0 || idx >= (long long)l->len ? NULL : list_at(l, idx);
}

static void lindex_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *e = get_list(c, sh, i, h, &wrong);
	struct str **s = e ? list_index(e->obj, c->num) : NULL;

	if (wrong)
		return;
	if (s)
		reply_bulk(c, (*s)->p, (*s)->n);
	else
		reply_nil(c);
}

static void lset_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *e = get_list(c, sh, i, h, &wrong);
	struct str **s = e ? list_index(e->obj, c->num) : NULL, *n;

	if (wrong)
		return;
	if (e == NULL)
		reply_error(c, "ERR no such key");
	else if (s == NULL)
		reply_error(c, "ERR index out of range");
	else if ((n = str_new(arg_p(c, 3), arg_n(c, 3))) == NULL)
		reply_oom(c);
	else {
		free(*s);
		*s = n;
		reply_ok(c);
	}
}

/* LREM key count element: count > 0 from the head, < 0 from the tail,
 * 0 all of them */
static void lrem_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong;
	struct item *e = get_list(c, sh, i, h, &wrong);
	unsigned long long removed = 0, want = (unsigned long long)c->num;
	struct list *l;

	if (c->num < 0)
		want = 0 - want; /* (LLONG_MIN too) */
	if (wrong)
		return;
	if (e == NULL) {
		out_add(c, ":0\r\n", 4);
		return;
	}
	l = e->obj;
	for (size_t k = 0; k < l->len && (want == 0 || removed < want);) {
		size_t at = c->num < 0 ? l->len - 1 - k : k;
		struct str *s = *list_at(l, (long long)at);

		if (s->n == arg_n(c, 3) && memcmp(s->p, arg_p(c, 3), s->n) == 0) {
			list_remove(l, at);
			removed++;
		} else {
			k++;
		}
	}
	out_num(c, ':', (long long)removed);
	drop_if_empty(sh, e);
}

/* ---- LMOVE and BLMOVE; BLPOP and BRPOP ------------------------------------------------------ */

static int end_of(const struct conn *c, unsigned i)
{
	return arg_is(c, i, "LEFT") ? LEFT : arg_is(c, i, "RIGHT") ? RIGHT : -1;
}

/* LMOVE src dst LEFT|RIGHT LEFT|RIGHT; BLMOVE src dst from to timeout */
static int lmove_begin(struct conn *c)
{
	if (end_of(c, 3) < 0 || end_of(c, 4) < 0) {
		reply_syntax(c);
		return 1;
	}
	c->bend = end_of(c, 3);
	c->blocked = 0;
	return c->argc == 6 && parse_timeout(c, 5) < 0;
}

/* Whether the command answers by itself: LMOVE always; a blocking
 * command unless a push on another shard served it first. */
static int may_answer(struct conn *c)
{
	int mine = !c->blocked || block_claim(c);

	if (mine)
		c->answered = 1;
	return mine;
}

/* Phase 1, at dst: push the element in flight there; unless dst holds
 * another type: then phase 2, back at src where it came from. */
static void lmove_push(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	int wrong = 0, end = c->phase == 1 ? end_of(c, 4) : c->bend;
	struct item *e;

	if (c->phase == 1 && (e = db_get(sh, arg_p(c, i), arg_n(c, i), h)) && e->type != T_LIST) {
		reply_wrongtype(c);
		c->phase = 2;
		c->ki = 1;
		return;
	}
	if (c->phase == 1)
		reply_bulk(c, c->elem->p, c->elem->n);
	/* (phase 2 and a new key of another type at src: the element is dropped) */
	e = push_one(c, sh, i, h, end, c->elem, &wrong);
	c->elem = NULL;
	c->ki = 0;
	if (e)
		serve_blocked(sh, e);
}

/* Phase 0, at src: pop, or wait (BLMOVE), or answer nil */
static void lmove_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct item *e;

	if (i == 2 || c->phase == 2) {
		lmove_push(c, sh, i, h);
		return;
	}
	c->ki = 0;
	e = db_get(sh, arg_p(c, i), arg_n(c, i), h);
	if (e && e->type != T_LIST) {
		if (may_answer(c))
			reply_wrongtype(c);
	} else if (e) {
		if (may_answer(c)) {
			c->elem = list_pop(e->obj, c->bend);
			drop_if_empty(sh, e);
			c->phase = 1;
			c->ki = 2;
		}
	} else if (!c->blocked) {
		reply_nil(c);
	} else {
		block_on(c, sh, i, h); /* blocking.c comes back to dst with the element */
	}
}

/* BLPOP key [key ...] timeout, BRPOP */
static int bpop_begin(struct conn *c)
{
	c->bend = arg_is(c, 0, "brpop") ? RIGHT : LEFT;
	return parse_timeout(c, c->argc - 1) < 0;
}

static void bpop_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	struct item *e = db_get(sh, arg_p(c, i), arg_n(c, i), h);
	struct str *s;

	if (e && e->type != T_LIST) {
		c->ki = 0;
		if (may_answer(c))
			reply_wrongtype(c);
	} else if (e) {
		c->ki = 0;
		if (may_answer(c)) {
			s = list_pop(e->obj, c->bend);
			out_add(c, "*2\r\n", 4);
			reply_bulk(c, arg_p(c, i), arg_n(c, i));
			reply_bulk(c, s->p, s->n);
			free(s);
			drop_if_empty(sh, e);
		}
	} else if (block_on(c, sh, i, h) < 0) {
		c->ki = 0;
	}
}

const struct command list_commands[] = {
	{ "lpush", -3, 1, 1, 1, 0, NULL, push_key, NULL },
	{ "rpush", -3, 1, 1, 1, 0, NULL, push_key, NULL },
	{ "lpop", -2, 1, 1, 1, 0, pop_begin, pop_key, NULL },
	{ "rpop", -2, 1, 1, 1, 0, pop_begin, pop_key, NULL },
	{ "llen", 2, 1, 1, 1, 0, NULL, llen_key, NULL },
	{ "lrange", 4, 1, 1, 1, 0, range_begin, lrange_key, NULL },
	{ "lindex", 3, 1, 1, 1, 0, int_begin, lindex_key, NULL },
	{ "lset", 4, 1, 1, 1, 0, int_begin, lset_key, NULL },
	{ "lrem", 4, 1, 1, 1, 0, int_begin, lrem_key, NULL },
	{ "ltrim", 4, 1, 1, 1, 0, range_begin, ltrim_key, NULL },
	{ "lmove", 5, 1, 2, 1, 0, lmove_begin, lmove_key, NULL },
	{ "blmove", 6, 1, 2, 1, 0, lmove_begin, lmove_key, NULL },
	{ "blpop", -3, 1, -2, 1, 0, bpop_begin, bpop_key, NULL },
	{ "brpop", -3, 1, -2, 1, 0, bpop_begin, bpop_key, NULL },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL },
};
