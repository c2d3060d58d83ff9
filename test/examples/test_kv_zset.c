/* SPDX-License-Identifier: MIT */
/*
 * The key-value example's sorted set (docs/examples/kv/zset.c): "the
 * levels are drawn at random, from a generator of the thread's own, never
 * from the member's name, so no choice of names makes the list
 * degenerate". Each run fills a new sorted set on a new thread (so the
 * generator starts where a shard's thread starts it) with the same number
 * of members, all of score 0 (their order is their names'), named in
 * ascending, descending or scattered order, and notes how many levels the
 * node of each member inserted gets: the same for every order of names, and
 * spread as the docs say (a node is on level 1 with chance 1/4, on level 2
 * with 1/16 ...). A level drawn from the name (its hash, its rank) makes
 * the orders differ; one that is not random, or a wrong chance, leaves the
 * spread's bounds.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "helpers.h"
#include "kv.h"

/* main.c's settings: the sorted set reads none of them */
struct server srv;

#define MEMBERS 20000

struct fill {
	unsigned (*name_of)(unsigned i); /* the i-th inserted member's number */
	unsigned char levels[MEMBERS];   /* by insertion: the levels its node is on */
	unsigned inserted_as[MEMBERS];   /* by member number: its insertion */
	int err;
};

static unsigned ascending(unsigned i)
{
	return i;
}

static unsigned descending(unsigned i)
{
	return MEMBERS - 1 - i;
}

static unsigned scattered(unsigned i) /* 7919 is prime: every number once */
{
	return (unsigned)(((uint64_t)i * 7919u) % MEMBERS);
}

/* The number in a member's name ("m" and 8 digits, below MEMBERS: the
 * names are this test's; the name is not a C string, no NUL follows it) */
static unsigned member_number(const struct item *m)
{
	unsigned k = 0;

	for (uint32_t i = 1; i < m->klen; i++)
		k = k * 10 + (unsigned)(m->kv[i] - '0');
	return k;
}

static void *fill_fn(void *arg)
{
	struct fill *r = arg;
	struct zset *z = zset_new();
	char name[16];

	if (z == NULL) {
		r->err = 1;
		return NULL;
	}
	for (unsigned i = 0; i < MEMBERS; i++) {
		unsigned k = r->name_of(i);
		int n = snprintf(name, sizeof name, "m%08u", k);
		struct item *m = item_new(name, (size_t)n, NULL, 0);

		if (m == NULL || zset_insert(z, m) < 0) {
			free(m);
			r->err = 1;
			break;
		}
		r->inserted_as[k] = i;
	}
	/* a node is on every level from 0 to its own number - 1 */
	for (int lv = 0; lv < z->levels; lv++)
		for (struct znode *x = z->head->lv[lv].next; x; x = x->lv[lv].next)
			r->levels[r->inserted_as[member_number(x->m)]]++;
	zset_free(z);
	return NULL;
}

static void fill_on_new_thread(struct fill *r)
{
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, fill_fn, r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(r->err, 0);
}

static void test_levels_ignore_names(void **state)
{
	static struct fill runs[3] = { { .name_of = ascending }, { .name_of = descending },
				       { .name_of = scattered } };
	unsigned at_least[8] = { 0 };
	unsigned top = 0;

	(void)state;
	for (int i = 0; i < 3; i++)
		fill_on_new_thread(&runs[i]);
	assert_memory_equal(runs[0].levels, runs[1].levels, sizeof runs[0].levels);
	assert_memory_equal(runs[0].levels, runs[2].levels, sizeof runs[0].levels);
	for (unsigned i = 0; i < MEMBERS; i++) {
		unsigned n = runs[0].levels[i];

		assert_true(n >= 1);
		top = n > top ? n : top;
		for (unsigned l = 1; l < 8 && l <= n; l++)
			at_least[l]++;
	}
	/* on level l with chance 4^-(l-1): 20,000, 5,000, 1,250, 312 expected;
	 * the bounds are some 10 standard deviations wide, and a list whose
	 * levels grow past log4(20,000) + 5 has degenerated */
	assert_int_equal(at_least[1], MEMBERS);
	assert_in_range(at_least[2], 4400, 5600);
	assert_in_range(at_least[3], 1000, 1500);
	assert_in_range(at_least[4], 200, 430);
	assert_in_range(top, 5, 12);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_levels_ignore_names),
};

CO_TEST_MAIN(tests, 0)
