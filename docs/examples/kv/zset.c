/* SPDX-License-Identifier: MIT */
/*
 * zset.c - a sorted set: its members by name in a dict (store.c), for
 * ZSCORE and ZADD's lookup, and in order, by score and then by name
 * bytewise, in a skip list, for ranks and ranges (ZRANGE, ZPOPMIN).
 *
 * The skip list is a stack of sorted linked lists. Level 0 links every
 * member's node in order (and back, for REV). A node is also on level 1
 * with chance 1/4, on level 2 with chance 1/16, and so on: each level
 * links some quarter of the nodes of the level below, in the same order.
 * A search starts at the head (a node without a member, on every level)
 * on the top level, goes along each level while the next node comes
 * before what it looks for, then down a level: a few nodes on each of
 * some log4(n) levels. A link holds the score of the node it leads to,
 * so the search reads only the nodes it passes (and a member's name only
 * when the scores are the same). Each link also says how many members it
 * steps over (its span), so the search counts the members it passes: a
 * member's rank, and the member at a rank, are found the same way.
 *
 * Costs for a set of n members (expected: the levels are drawn at
 * random, from a generator of the thread's own, never from the member's
 * name, so no choice of names makes the list degenerate; the test
 * test/examples/test_kv_zset.c checks both):
 *   - insert, remove, a new score, the rank of a member or of a score or
 *     name, the member at a rank: O(log n);
 *   - a range from there: O(1) a member, along level 0, either way;
 *   - memory: the member's item (in the dict) and its node, 16 bytes and
 *     24 for each level it is on (4/3 on average), some 48 bytes.
 * Redis's sorted set is built the same way (its docs describe the skip
 * list with spans); a small one there is a packed list instead.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

#define ZSET_LEVELS 32                /* 4^32 members before it slows down */

struct zset *zset_new(void)
{
	struct zset *z = calloc(1, sizeof *z);

	if (z == NULL)
		return NULL;
	z->head = calloc(1, sizeof *z->head + ZSET_LEVELS * sizeof z->head->lv[0]);
	if (z->head == NULL || dict_init(&z->d, 8) < 0) {
		free(z->head);
		free(z);
		return NULL;
	}
	z->levels = 1;
	return z;
}

/* Free z: its nodes, its members, itself. */
void zset_free(struct zset *z)
{
	struct znode *x = z->head, *next;

	for (; x; x = next) {
		next = x->lv[0].next;
		free(x);
	}
	dict_free(&z->d);
	free(z);
}

/* A new node for member m, its links unset, and in *levels how many
 * levels it goes on: 1, and one more for each pair of zero bits that
 * leads a random number (chance 1/4 each). The number (xorshift64*, a
 * thread's own: a shard is its thread's) is never 0: ZSET_LEVELS at the
 * most. */
static struct znode *znode_new(struct item *m, int *levels)
{
	static _Thread_local uint64_t state = 0x9e3779b97f4a7c15u;
	struct znode *x;
	uint64_t r;
	int n = 1;

	state ^= state >> 12;
	state ^= state << 25;
	state ^= state >> 27;
	for (r = state * 0x2545f4914f6cdd1du; r >> 62 == 0; r <<= 2)
		n++;
	if ((x = malloc(sizeof *x + (size_t)n * sizeof x->lv[0])) != NULL) {
		x->m = m;
		*levels = n;
	}
	return x;
}

/* x's member, of that score, comes before member arg: by score, then by
 * name, bytewise (only then is x read). */
static int zless(const struct znode *x, double score, const void *arg)
{
	const struct item *a, *b = arg;
	int c;

	if (score != b->score)
		return score < b->score;
	a = x->m;
	c = memcmp(a->kv, b->kv, a->klen < b->klen ? a->klen : b->klen);
	return c < 0 || (c == 0 && a->klen < b->klen);
}

/*
 * Go from the top level down, on each along the nodes whose members
 * before() puts before arg (they must come first in the order). On level
 * i, path[i] is the last node passed there (the head if none) and
 * rank[i] its rank (the head's 0, the first member's 1); either may be
 * NULL. The last node passed; *passed: how many members that is.
 */
static struct znode *zwalk(const struct zset *z, zbefore *before, const void *arg,
			   struct znode **path, size_t *rank, size_t *passed)
{
	struct znode *x = z->head;
	size_t r = 0;

	for (int i = z->levels - 1; i >= 0; i--) {
		while (x->lv[i].next && before(x->lv[i].next, x->lv[i].score, arg)) {
			r += x->lv[i].span;
			x = x->lv[i].next;
		}
		if (path)
			path[i] = x;
		if (rank)
			rank[i] = r;
	}
	*passed = r;
	return x;
}

/* Link node x (its member's score set) in its place on levels levels. (A
 * link to the end, NULL, has a span that no walk reads: it is left as it
 * comes.) */
static void zlink(struct zset *z, struct znode *x, int levels)
{
	struct znode *path[ZSET_LEVELS];
	size_t rank[ZSET_LEVELS], passed;
	struct znode *prev = zwalk(z, zless, x->m, path, rank, &passed);
	int i;

	for (; z->levels < levels; z->levels++) { /* new levels: from the head */
		path[z->levels] = z->head;
		rank[z->levels] = 0;
	}
	for (i = 0; i < levels; i++) { /* path[i] -> x -> what path[i] linked to */
		x->lv[i].next = path[i]->lv[i].next;
		x->lv[i].span = path[i]->lv[i].span - (passed - rank[i]);
		x->lv[i].score = path[i]->lv[i].score;
		path[i]->lv[i].score = x->m->score;
		path[i]->lv[i].next = x;
		path[i]->lv[i].span = passed - rank[i] + 1;
	}
	for (; i < z->levels; i++) /* the links above x step over one more */
		path[i]->lv[i].span++;
	x->back = prev;
	if (x->lv[0].next)
		x->lv[0].next->back = x;
	z->n++;
}

/* Take member it's node out of the list (it, its score unchanged since
 * linked, is in z): the node; *levels: how many it was on. */
static struct znode *zunlink(struct zset *z, const struct item *it, int *levels)
{
	struct znode *path[ZSET_LEVELS];
	size_t passed;
	struct znode *x = zwalk(z, zless, it, path, NULL, &passed)->lv[0].next;

	for (int i = 0; i < z->levels; i++) {
		if (path[i]->lv[i].next == x) {
			*levels = i + 1;
			path[i]->lv[i].span += x->lv[i].span - 1;
			path[i]->lv[i].next = x->lv[i].next;
			path[i]->lv[i].score = x->lv[i].score;
		} else {
			path[i]->lv[i].span--;
		}
	}
	if (x->lv[0].next)
		x->lv[0].next->back = x->back;
	z->n--;
	return x;
}

/* Put member it (not in z yet, its score set) in its place. 0, -ENOMEM. */
int zset_insert(struct zset *z, struct item *it)
{
	int levels;
	struct znode *x = znode_new(it, &levels);

	if (x == NULL)
		return -ENOMEM;
	zlink(z, x, levels);
	dict_put(&z->d, dict_find(&z->d, it->kv, it->klen, it->hash), it);
	return 0;
}

/* Take member it out of z's order and its table (it is not freed). */
void zset_remove(struct zset *z, struct item *it)
{
	int levels;

	free(zunlink(z, it, &levels));
	dict_take(&z->d, dict_find(&z->d, it->kv, it->klen, it->hash));
}

/* Give member it of z a new score, and so a new place (its node moved,
 * still on its levels: one walk to take it out, one to put it in). */
void zset_rescore(struct zset *z, struct item *it, double score)
{
	int levels;
	struct znode *x = zunlink(z, it, &levels);

	it->score = score;
	zlink(z, x, levels);
}

/* How many members before() puts before arg (they come first). */
size_t zset_rank(const struct zset *z, zbefore *before, const void *arg)
{
	size_t passed;

	zwalk(z, before, arg, NULL, NULL, &passed);
	return passed;
}

/* The node of the member at index i (0: the first; i < z->n). */
struct znode *zset_at(const struct zset *z, size_t i)
{
	struct znode *x = z->head;
	size_t r = 0;

	for (int l = z->levels - 1; l >= 0; l--)
		while (x->lv[l].next && r + x->lv[l].span <= i + 1) {
			r += x->lv[l].span;
			x = x->lv[l].next;
		}
	return x;
}
