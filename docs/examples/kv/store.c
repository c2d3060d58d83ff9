/* SPDX-License-Identifier: MIT */
/*
 * store.c - the data: a chained hash table of items (struct dict) that
 * holds a shard's keys and, inside a key, a set's members, a hash's fields
 * and a sorted set's members (their order: zset.c); a list; a key's time
 * to live (Unix time in ms, as EXPIREAT takes it). A shard belongs to one
 * context and only that context's thread touches it (server.c moves a
 * command to the owner of each of its keys). A key whose time is up is
 * removed by the first lookup that finds it, or by the sweeper's slice of
 * buckets every 100 ms (shard_sweep).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv.h"

uint64_t hash_key(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325u; /* FNV-1a, then a final mix */

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3u;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdu;
	return h ^ (h >> 33);
}

int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- items and the hash table --------------------------------------------------------- */

struct item *item_new(const char *k, size_t kn, const char *v, size_t vn)
{
	struct item *it = malloc(sizeof *it + kn + vn);

	if (it == NULL)
		return NULL;
	memset(it, 0, sizeof *it);
	it->hash = hash_key(k, kn);
	it->klen = (uint32_t)kn;
	it->vlen = (uint32_t)vn;
	memcpy(it->kv, k, kn);
	if (vn)
		memcpy(it->kv + kn, v, vn);
	return it;
}

void item_free(struct item *it)
{
	switch (it->obj ? it->type : T_STRING) {
	case T_LIST:
		list_free(it->obj);
		break;
	case T_SET:
	case T_HASH:
		dict_free(it->obj);
		free(it->obj);
		break;
	case T_ZSET:
		zset_free(it->obj);
		break;
	}
	free(it);
}

static void copy_member(void *arg, struct item *m);

/*
 * A key named k with it's value and time: its list, set, hash or sorted
 * set copied (deep), or moved (it keeps no value: free it with free()).
 * NULL: no memory.
 */
struct item *item_copy(struct item *it, const char *k, size_t kn, int deep)
{
	struct item *n = item_new(k, kn, item_val(it), it->vlen);
	uint64_t v = 0;

	if (n == NULL)
		return NULL;
	n->expire_ms = it->expire_ms;
	n->type = it->type;
	n->score = it->score;
	if (!deep || it->type == T_STRING) {
		n->obj = it->obj;
		it->obj = NULL;
		it->type = T_STRING;
		return n;
	}
	if (it->type == T_LIST) {
		struct list *l = it->obj;

		if ((n->obj = list_new()) == NULL)
			goto fail;
		for (size_t i = 0; i < l->len; i++) {
			struct str *e = *list_at(l, (long long)i), *c = str_new(e->p, e->n);

			if (c == NULL || list_push(n->obj, RIGHT, c) < 0) {
				free(c);
				goto fail;
			}
		}
		return n;
	}
	if ((n->obj = it->type == T_ZSET ? (void *)zset_new() : (void *)dict_new()) == NULL)
		goto fail;
	do /* every member, into n (a member that found no memory is left out) */
		v = dict_scan(it->type == T_ZSET ? &((struct zset *)it->obj)->d : it->obj, v,
			      copy_member, n);
	while (v != 0);
	return n;
fail:
	item_free(n);
	return NULL;
}

static void copy_member(void *arg, struct item *m)
{
	struct item *key = arg, *c = item_new(m->kv, m->klen, item_val(m), m->vlen);

	if (c == NULL)
		return;
	c->score = m->score;
	if (key->type == T_ZSET) {
		if (zset_insert(key->obj, c) < 0)
			free(c);
	} else {
		struct dict *d = key->obj;

		dict_put(d, dict_find(d, c->kv, c->klen, c->hash), c);
	}
}

int dict_init(struct dict *d, size_t buckets)
{
	d->mask = buckets - 1;
	d->count = 0;
	d->tab = calloc(buckets, sizeof *d->tab);
	return d->tab ? 0 : -ENOMEM;
}

struct dict *dict_new(void)
{
	struct dict *d = malloc(sizeof *d);

	if (d && dict_init(d, 8) < 0) {
		free(d);
		return NULL;
	}
	return d;
}

void dict_free(struct dict *d)
{
	for (size_t i = 0; d->tab && i <= d->mask; i++) {
		struct item *it = d->tab[i], *n;

		for (; it; it = n) {
			n = it->next;
			item_free(it);
		}
	}
	free(d->tab);
	d->tab = NULL;
	d->count = 0;
}

/* Where the item of k is linked, or the end of its chain (*pe NULL). */
struct item **dict_find(struct dict *d, const char *k, size_t n, uint64_t h)
{
	struct item **pe = &d->tab[h & d->mask];

	for (; *pe; pe = &(*pe)->next)
		if ((*pe)->hash == h && (*pe)->klen == n && memcmp((*pe)->kv, k, n) == 0)
			break;
	return pe;
}

/* Double the table once it holds more items than buckets. */
static void dict_grow(struct dict *d)
{
	size_t mask = d->mask * 2 + 1;
	struct item **tab = calloc(mask + 1, sizeof *tab);

	if (tab == NULL)
		return; /* longer chains, nothing worse */
	for (size_t i = 0; i <= d->mask; i++) {
		struct item *it = d->tab[i], *n;

		for (; it; it = n) { /* (keeps each chain's order: SCAN relies on none) */
			n = it->next;
			it->next = tab[it->hash & mask];
			tab[it->hash & mask] = it;
		}
	}
	free(d->tab);
	d->tab = tab;
	d->mask = mask;
}

/* Link it at pe (from dict_find): in place of the item there (which is
 * returned, unlinked), or at the chain's end (NULL returned). */
struct item *dict_put(struct dict *d, struct item **pe, struct item *it)
{
	struct item *old = *pe;

	it->next = old ? old->next : NULL;
	*pe = it;
	if (old == NULL && ++d->count > d->mask + 1)
		dict_grow(d);
	return old;
}

struct item *dict_take(struct dict *d, struct item **pe)
{
	struct item *it = *pe;

	*pe = it->next;
	d->count--;
	return it;
}

static uint64_t rev64(uint64_t v)
{
	uint64_t r = 0;

	for (int i = 0; i < 64; i++, v >>= 1)
		r = (r << 1) | (v & 1);
	return r;
}

/*
 * Visit the items of the bucket at cursor v and return the next cursor (0
 * once every bucket was visited). The cursor counts in reverse bit order,
 * so a table that doubled between two calls still sees every item that
 * stayed in it exactly once, or at most twice (as SCAN promises).
 */
uint64_t dict_scan(struct dict *d, uint64_t v, void (*fn)(void *arg, struct item *it), void *arg)
{
	uint64_t m = d->mask;

	for (struct item *it = d->tab[v & m], *n; it; it = n) {
		n = it->next; /* (fn may remove it) */
		fn(arg, it);
	}
	v |= ~m;
	v = rev64(rev64(v) + 1);
	return v;
}

/* A random item (NULL when empty): a random non-empty bucket, then a
 * random item of its chain. */
struct item *dict_random(struct dict *d)
{
	struct item *it;
	size_t n = 0;

	if (d->count == 0)
		return NULL;
	while ((it = d->tab[(size_t)random() & d->mask]) == NULL)
		;
	for (struct item *p = it; p; p = p->next)
		n++;
	for (n = (size_t)random() % n; n > 0; n--)
		it = it->next;
	return it;
}

/* ---- the key space ---------------------------------------------------------------------- */

int shard_init(struct shard *sh)
{
	sh->cursor = 0;
	if (dict_init(&sh->keys, 16) < 0)
		return -ENOMEM;
	if (dict_init(&sh->blocked, 64) < 0) {
		dict_free(&sh->keys);
		return -ENOMEM;
	}
	return 0;
}

void shard_free(struct shard *sh)
{
	dict_free(&sh->keys);
	blocked_free(sh);
}

/* The key's slot (*pe NULL: none); a key whose time is up goes first. */
struct item **db_slot(struct shard *sh, const char *k, size_t n, uint64_t h)
{
	struct item **pe = dict_find(&sh->keys, k, n, h);

	if (*pe && (*pe)->expire_ms && (*pe)->expire_ms < now_ms()) {
		item_free(dict_take(&sh->keys, pe));
		pe = dict_find(&sh->keys, k, n, h);
	}
	return pe;
}

struct item *db_get(struct shard *sh, const char *k, size_t n, uint64_t h)
{
	return *db_slot(sh, k, n, h);
}

void db_delete(struct shard *sh, struct item **pe)
{
	item_free(dict_take(&sh->keys, pe));
}

int db_del(struct shard *sh, const char *k, size_t n, uint64_t h)
{
	struct item **pe = db_slot(sh, k, n, h);

	if (*pe == NULL)
		return 0;
	db_delete(sh, pe);
	return 1;
}

/* Set key to a string value: a new item in place of the old one (whatever
 * its type). 0 or -ENOMEM. */
int db_set_string(struct shard *sh, const char *k, size_t kn, uint64_t h, const char *v,
		  size_t vn, int64_t expire_ms)
{
	struct item **pe = db_slot(sh, k, kn, h);
	struct item *it = item_new(k, kn, v, vn), *old;

	if (it == NULL)
		return -ENOMEM;
	it->expire_ms = expire_ms;
	if ((old = dict_put(&sh->keys, pe, it)) != NULL)
		item_free(old);
	return 0;
}

/* A new key of an aggregate type, with its empty value; NULL: no memory. */
struct item *db_add_obj(struct shard *sh, const char *k, size_t kn, uint64_t h, int type)
{
	struct item *it = item_new(k, kn, NULL, 0);
	void *obj = type == T_LIST ? (void *)list_new() : type == T_ZSET ? (void *)zset_new()
		  : (void *)dict_new();

	if (it == NULL || obj == NULL) {
		free(it);
		free(obj);
		return NULL;
	}
	it->type = (uint8_t)type;
	it->obj = obj;
	dict_put(&sh->keys, db_slot(sh, k, kn, h), it);
	return it;
}

/* Remove the expired keys of the next `budget` buckets. */
void shard_sweep(struct shard *sh, size_t budget)
{
	int64_t now = now_ms();

	for (; budget > 0; budget--) {
		struct item **pe = &sh->keys.tab[sh->cursor & sh->keys.mask];

		while (*pe) {
			if ((*pe)->expire_ms && (*pe)->expire_ms < now)
				db_delete(sh, pe);
			else
				pe = &(*pe)->next;
		}
		sh->cursor = (sh->cursor + 1) & sh->keys.mask;
	}
}

/* ---- lists: a ring of strings --------------------------------------------------------------- */

struct str *str_new(const char *p, size_t n)
{
	struct str *s = malloc(sizeof *s + n);

	if (s) {
		s->n = n;
		memcpy(s->p, p, n);
	}
	return s;
}

struct list *list_new(void)
{
	return calloc(1, sizeof(struct list));
}

void list_free(struct list *l)
{
	for (size_t i = 0; i < l->len; i++)
		free(*list_at(l, (long long)i));
	free(l->a);
	free(l);
}

struct str **list_at(struct list *l, long long i)
{
	return &l->a[(l->head + (size_t)i) & (l->cap - 1)];
}

/* Room for one more: the ring doubles, its elements in order from 0. */
static int list_room(struct list *l)
{
	size_t cap = l->cap ? l->cap * 2 : 8;
	struct str **a;

	if (l->len < l->cap)
		return 0;
	if ((a = malloc(cap * sizeof *a)) == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < l->len; i++)
		a[i] = *list_at(l, (long long)i);
	free(l->a);
	l->a = a;
	l->cap = cap;
	l->head = 0;
	return 0;
}

int list_push(struct list *l, int end, struct str *s)
{
	if (list_room(l) < 0)
		return -ENOMEM;
	if (end == LEFT)
		l->head = (l->head - 1) & (l->cap - 1);
	l->len++;
	*list_at(l, end == LEFT ? 0 : (long long)l->len - 1) = s;
	return 0;
}

struct str *list_pop(struct list *l, int end)
{
	struct str *s;

	if (l->len == 0)
		return NULL;
	s = *list_at(l, end == LEFT ? 0 : (long long)l->len - 1);
	if (end == LEFT)
		l->head = (l->head + 1) & (l->cap - 1);
	l->len--;
	return s;
}

/* Remove element i (0 <= i < len), keeping the others in order. */
void list_remove(struct list *l, size_t i)
{
	free(*list_at(l, (long long)i));
	for (; i + 1 < l->len; i++)
		*list_at(l, (long long)i) = *list_at(l, (long long)i + 1);
	l->len--;
}
