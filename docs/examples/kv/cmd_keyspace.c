/* SPDX-License-Identifier: MIT */
/*
 * cmd_keyspace.c - commands on keys whatever their values: DEL, EXISTS
 * (key by key, each on its owner; the count comes home).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

static int count_begin(struct conn *c)
{
	c->num = 0;
	return 0;
}

static void del_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	c->num += shard_del(sh, arg_p(c, i), arg_n(c, i), h);
}

static void exists_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	c->num += shard_get(sh, arg_p(c, i), arg_n(c, i), h) != NULL;
}

static void count_end(struct conn *c)
{
	out_num(c, ':', c->num);
}

const struct command keyspace_commands[] = {
	{ "del", -2, 1, -1, 1, count_begin, del_key, count_end },
	{ "exists", -2, 1, -1, 1, count_begin, exists_key, count_end },
	{ NULL, 0, 0, 0, 0, NULL, NULL, NULL },
};
