/* SPDX-License-Identifier: MIT */
/*
 * commands.c - the command table and how a command runs: looked up by
 * name, its arity checked, begun at the connection's home; then server.c
 * visits its keys, each on the context that owns it (command_key,
 * command_run_key), and command_finish ends it back home.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

static void unknown_command(struct conn *c)
{
	char args[160];
	size_t n = 0;

	args[0] = 0;
	for (unsigned i = 1; i < c->argc && n < 128; i++) {
		int w = snprintf(args + n, sizeof args - n, "'%.*s' ",
				 (int)(arg_n(c, i) < 128 - n ? arg_n(c, i) : 128 - n), arg_p(c, i));

		if (w < 0 || (size_t)w >= sizeof args - n)
			break;
		n += (size_t)w;
	}
	reply_error(c, "ERR unknown command '%.*s', with args beginning with: %s",
		    arg_n(c, 0) < 128 ? (int)arg_n(c, 0) : 128, arg_p(c, 0), args);
}

static const struct command *const families[] = {
	string_commands, expiry_commands, keyspace_commands, server_commands,
};

/* Look the command up and begin it: 1 when it has keys to visit. */
int command_start(struct conn *c)
{
	const struct command *cmd = NULL;

	c->cmd = NULL;
	for (size_t f = 0; cmd == NULL && f < sizeof families / sizeof families[0]; f++)
		for (const struct command *t = families[f]; t->name && cmd == NULL; t++)
			if (arg_n(c, 0) > 0 && (arg_p(c, 0)[0] | 0x20) == t->name[0] &&
			    arg_is(c, 0, t->name))
				cmd = t;
	if (cmd == NULL) {
		unknown_command(c);
		return 0;
	}
	if ((cmd->arity > 0 && c->argc != (unsigned)cmd->arity) ||
	    (cmd->arity < 0 && c->argc < (unsigned)-cmd->arity)) {
		reply_error(c, "ERR wrong number of arguments for '%s' command", cmd->name);
		return 0;
	}
	if (cmd->begin && cmd->begin(c))
		return 0;
	c->cmd = cmd;
	c->ki = (unsigned)cmd->first;
	return cmd->first != 0;
}

/* The next key's argument, or 0 when every key was visited. */
unsigned command_key(struct conn *c)
{
	unsigned last = c->cmd->last < 0 ? c->argc - 1 : (unsigned)c->cmd->last;

	return c->ki <= last && c->ki < c->argc ? c->ki : 0;
}

/* Run the key part for argument i on this context's shard. */
void command_run_key(struct conn *c, unsigned i, uint64_t h)
{
	c->cmd->key(c, &srv.ctx[c->where].sh, i, h);
	c->ki = i + (unsigned)c->cmd->step;
}

void command_finish(struct conn *c)
{
	if (c->cmd && c->cmd->end)
		c->cmd->end(c);
	c->cmd = NULL;
	c->argc = 0;
	c->alen = 0;
}

