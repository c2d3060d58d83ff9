/* SPDX-License-Identifier: MIT */
/*
 * store.c - the key space of one shard: a hash table of keys, each with
 * its value and its time to live (CLOCK_MONOTONIC ms). A shard belongs to
 * one context and only that context's thread touches it (server.c moves a
 * command to the owner of each of its keys). A key whose time is up is
 * removed by the first lookup that finds it, or by the sweeper's slice of
 * buckets every 100 ms (shard_sweep).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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


int shard_init(struct shard *sh)
{
	sh->mask = 1023;
	sh->count = sh->cursor = 0;
	sh->tab = calloc(sh->mask + 1, sizeof *sh->tab);
	return sh->tab ? 0 : -ENOMEM;
}

void shard_free(struct shard *sh)
{
	for (size_t i = 0; sh->tab && i <= sh->mask; i++) {
		struct entry *e = sh->tab[i], *n;

		for (; e; e = n) {
			n = e->next;
			free(e);
		}
	}
	free(sh->tab);
}

int64_t now_ms(void)
{
	return (int64_t)(co_now_ns() / CO_MS);
}

/* Unlink *pe (an entry of its bucket's chain) and free it. */
void shard_unlink(struct shard *sh, struct entry **pe)
{
	struct entry *e = *pe;

	*pe = e->next;
	free(e);
	sh->count--;
}

/* Where the entry of key is linked (or where it would be: *pe NULL). An
 * entry whose time is up is removed on the way. */
struct entry **shard_slot(struct shard *sh, const char *k, size_t n, uint64_t h)
{
	struct entry **pe = &sh->tab[h & sh->mask];

	for (; *pe; pe = &(*pe)->next) {
		struct entry *e = *pe;

		if (e->hash != h || e->klen != n || memcmp(e->kv, k, n) != 0)
			continue;
		if (e->expire_ms && e->expire_ms <= now_ms()) {
			shard_unlink(sh, pe);
			break; /* (*pe is the next entry, not ours) */
		}
		return pe;
	}
	for (; *pe; pe = &(*pe)->next)
		;
	return pe;
}

struct entry *shard_get(struct shard *sh, const char *k, size_t n, uint64_t h)
{
	return *shard_slot(sh, k, n, h);
}

/* Double the table once it holds more entries than buckets. */
static void shard_grow(struct shard *sh)
{
	size_t mask = sh->mask * 2 + 1;
	struct entry **tab = calloc(mask + 1, sizeof *tab);

	if (tab == NULL)
		return; /* longer chains, nothing worse */
	for (size_t i = 0; i <= sh->mask; i++) {
		struct entry *e = sh->tab[i], *n;

		for (; e; e = n) {
			n = e->next;
			e->next = tab[e->hash & mask];
			tab[e->hash & mask] = e;
		}
	}
	free(sh->tab);
	sh->tab = tab;
	sh->mask = mask;
	sh->cursor = 0;
}

/* Set key to value (replacing an entry, which keeps its place in the
 * chain). 0 or -ENOMEM. */
int shard_set(struct shard *sh, const char *k, size_t kn, uint64_t h, const char *v,
		     size_t vn, int64_t expire_ms)
{
	struct entry **pe = shard_slot(sh, k, kn, h);
	struct entry *e = malloc(sizeof *e + kn + vn);

	if (e == NULL)
		return -ENOMEM;
	e->hash = h;
	e->expire_ms = expire_ms;
	e->klen = (uint32_t)kn;
	e->vlen = (uint32_t)vn;
	memcpy(e->kv, k, kn);
	memcpy(e->kv + kn, v, vn);
	if (*pe) {
		e->next = (*pe)->next;
		free(*pe);
		*pe = e;
		return 0;
	}
	e->next = NULL;
	*pe = e;
	if (++sh->count > sh->mask + 1)
		shard_grow(sh);
	return 0;
}

int shard_del(struct shard *sh, const char *k, size_t n, uint64_t h)
{
	struct entry **pe = shard_slot(sh, k, n, h);

	if (*pe == NULL)
		return 0;
	shard_unlink(sh, pe);
	return 1;
}

/* Remove the expired entries of the next `budget` buckets. */
void shard_sweep(struct shard *sh, size_t budget)
{
	int64_t now = now_ms();

	for (; budget > 0; budget--) {
		struct entry **pe = &sh->tab[sh->cursor];

		while (*pe) {
			if ((*pe)->expire_ms && (*pe)->expire_ms <= now)
				shard_unlink(sh, pe);
			else
				pe = &(*pe)->next;
		}
		sh->cursor = (sh->cursor + 1) & sh->mask;
	}
}
