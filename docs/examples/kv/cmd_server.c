/* SPDX-License-Identifier: MIT */
/*
 * cmd_server.c - commands about the connection and the server, with no
 * key: PING, ECHO, QUIT, and CONFIG GET and COMMAND (next to empty
 * answers), which the Redis tools ask at start.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

static int ping_begin(struct conn *c)
{
	if (c->argc > 2)
		reply_error(c, "ERR wrong number of arguments for 'ping' command");
	else if (c->argc == 1)
		out_add(c, "+PONG\r\n", 7);
	else
		reply_bulk(c, arg_p(c, 1), arg_n(c, 1));
	return 1;
}

static int echo_begin(struct conn *c)
{
	reply_bulk(c, arg_p(c, 1), arg_n(c, 1));
	return 1;
}

static int quit_begin(struct conn *c)
{
	reply_ok(c);
	c->closing = 1;
	return 1;
}

/* CONFIG GET save / appendonly: what redis-benchmark asks; nothing else. */
static int config_begin(struct conn *c)
{
	if (!arg_is(c, 1, "GET") || c->argc != 3) {
		reply_error(c, "ERR unknown subcommand '%.*s'. Try CONFIG HELP.", (int)arg_n(c, 1),
			    arg_p(c, 1));
		return 1;
	}
	if (arg_is(c, 2, "save") || arg_is(c, 2, "appendonly")) {
		out_num(c, '*', 2);
		reply_bulk(c, arg_p(c, 2), arg_n(c, 2));
		reply_bulk(c, arg_is(c, 2, "save") ? "" : "no", arg_is(c, 2, "save") ? 0 : 2);
	} else {
		out_add(c, "*0\r\n", 4);
	}
	return 1;
}

static int command_begin(struct conn *c)
{
	out_add(c, "*0\r\n", 4); /* no command documentation: redis-cli does without */
	return 1;
}

const struct command server_commands[] = {
	{ "ping", -1, 0, 0, 0, ping_begin, NULL, NULL },
	{ "echo", 2, 0, 0, 0, echo_begin, NULL, NULL },
	{ "quit", -1, 0, 0, 0, quit_begin, NULL, NULL },
	{ "config", -2, 0, 0, 0, config_begin, NULL, NULL },
	{ "command", -1, 0, 0, 0, command_begin, NULL, NULL },
	{ NULL, 0, 0, 0, 0, NULL, NULL, NULL },
};
