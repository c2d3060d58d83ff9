/* SPDX-License-Identifier: MIT */
/*
 * cmd_server.c - commands about the connection and the server, with no
 * key: PING, ECHO, QUIT, and CONFIG GET and COMMAND (next to empty
 * answers), which the Redis tools ask at start.
 */
#include <errno.h>
#include <malloc.h>
#include <time.h>
#include <unistd.h>
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

/* CONFIG GET pattern [pattern ...]: save and appendonly, what
 * redis-benchmark asks, each once and in Redis's order (save first) however
 * they are named; nothing else. */
static int config_begin(struct conn *c)
{
	int save = 0, aof = 0;

	if (!arg_is(c, 1, "GET")) {
		reply_error(c, "ERR unknown subcommand '%.*s'. Try CONFIG HELP.", (int)arg_n(c, 1),
			    arg_p(c, 1));
		return 1;
	}
	if (c->argc < 3) {
		reply_error(c, "ERR wrong number of arguments for 'config|get' command");
		return 1;
	}
	for (unsigned i = 2; i < c->argc; i++) {
		if (!save && arg_is(c, i, "save"))
			save = (int)i;
		else if (!aof && arg_is(c, i, "appendonly"))
			aof = (int)i;
	}
	out_num(c, '*', 2 * ((save != 0) + (aof != 0)));
	if (save) {
		reply_bulk(c, arg_p(c, (unsigned)save), arg_n(c, (unsigned)save));
		reply_bulk(c, "", 0);
	}
	if (aof) {
		reply_bulk(c, arg_p(c, (unsigned)aof), arg_n(c, (unsigned)aof));
		reply_bulk(c, "no", 2);
	}
	return 1;
}

static int command_begin(struct conn *c)
{
	out_add(c, "*0\r\n", 4); /* no command documentation: redis-cli does without */
	return 1;
}

/* SELECT index: there is one database, 0 */
static int select_begin(struct conn *c)
{
	long long db;

	if (!arg_ll(c, 1, &db))
		reply_not_int(c);
	else if (db != 0)
		reply_error(c, "ERR DB index is out of range");
	else
		reply_ok(c);
	return 1;
}

static int time_begin(struct conn *c)
{
	struct timespec ts;
	char s[24], us[24];

	clock_gettime(CLOCK_REALTIME, &ts);
	out_add(c, "*2\r\n", 4);
	reply_bulk(c, s, fmt_ll(s, (long long)ts.tv_sec));
	reply_bulk(c, us, fmt_ll(us, ts.tv_nsec / 1000));
	return 1;
}

/* HELLO [protover [AUTH user pass] [SETNAME name]]: RESP2 only (3 is
 * Redis's NOPROTO); no users but the default one, which takes any
 * password (as Redis without one). */
static int hello_begin(struct conn *c)
{
	static const char *const kv[] = { "server", "redis", "version", "7.0.0", "proto", NULL,
					  "id", NULL, "mode", "standalone", "role", "master" };
	long long ver;

	if (c->argc >= 2 && !arg_ll(c, 1, &ver)) {
		reply_error(c, "ERR Protocol version is not an integer or out of range");
		return 1;
	}
	if (c->argc >= 2 && ver != 2) {
		reply_error(c, "NOPROTO unsupported protocol version");
		return 1;
	}
	for (unsigned i = 2; i < c->argc; i++) {
		if (arg_is(c, i, "AUTH") && i + 2 < c->argc) {
			if (!arg_is(c, i + 1, "default")) {
				reply_error(c, "WRONGPASS invalid username-password pair or user is disabled.");
				return 1;
			}
			i += 2;
		} else if (arg_is(c, i, "SETNAME") && i + 1 < c->argc) {
			i++;
		} else {
			reply_error(c, "ERR Syntax error in HELLO option '%.*s'", (int)arg_n(c, i),
				    arg_p(c, i));
			return 1;
		}
	}
	out_add(c, "*14\r\n", 5);
	for (size_t k = 0; k < sizeof kv / sizeof kv[0]; k++) {
		if (kv[k] == NULL) /* the protocol, the client's id: integers */
			out_num(c, ':', k == 5 ? 2 : (long long)c->id);
		else
			reply_bulk(c, kv[k], strlen(kv[k]));
	}
	reply_bulk(c, "modules", 7);
	out_add(c, "*0\r\n", 4);
	return 1;
}

/* INFO [section ...]: server, clients, memory, keyspace (the default,
 * "all" and "everything" give the four). The keyspace's counts come from
 * every shard. */
static int info_begin(struct conn *c)
{
	static const char *const names[] = { "server", "clients", "memory", "keyspace" };

	c->flags = c->argc == 1 ? 15 : 0;
	for (unsigned i = 1; i < c->argc; i++) {
		if (arg_is(c, i, "all") || arg_is(c, i, "everything") || arg_is(c, i, "default"))
			c->flags = 15;
		for (int k = 0; k < 4; k++)
			if (arg_is(c, i, names[k]))
				c->flags |= 1 << k;
	}
	c->num = c->num2 = 0;
	if (!(c->flags & 8))
		c->ki = 0; /* no keyspace: no need to visit the shards */
	return 0;
}

static void info_count(void *arg, struct item *it)
{
	((struct conn *)arg)->num2 += it->expire_ms != 0;
}

static void info_key(struct conn *c, struct shard *sh, unsigned i, uint64_t h)
{
	uint64_t v = 0;

	(void)i, (void)h;
	c->num += (long long)sh->keys.count;
	do
		v = dict_scan(&sh->keys, v, info_count, c);
	while (v != 0);
}

static void info_end(struct conn *c)
{
	char text[2048];
	size_t n = 0;
	struct mallinfo2 mi = mallinfo2();

#define INFO(...) (n += (size_t)snprintf(text + n, n < sizeof text ? sizeof text - n : 0, __VA_ARGS__))
	if (c->flags & 1)
		INFO("# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\nos:Linux\r\n"
		     "arch_bits:%d\r\nmultiplexing_api:io_uring\r\nprocess_id:%ld\r\ntcp_port:%d\r\n"
		     "uptime_in_seconds:%lld\r\nuptime_in_days:%lld\r\nio_threads_active:%u\r\n",
		     (int)sizeof(void *) * 8, (long)getpid(), srv.port,
		     (long long)(now_ms() - srv.start_ms) / 1000,
		     (long long)(now_ms() - srv.start_ms) / 86400000,
		     srv.threads > 1);
	if (c->flags & 2)
		INFO("%s# Clients\r\nconnected_clients:%ld\r\nblocked_clients:%ld\r\n",
		     n ? "\r\n" : "", atomic_load(&srv.live), atomic_load(&srv.nblocked));
	if (c->flags & 4)
		INFO("%s# Memory\r\nused_memory:%zu\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n",
		     n ? "\r\n" : "", mi.uordblks);
	if (c->flags & 8) {
		INFO("%s# Keyspace\r\n", n ? "\r\n" : "");
		if (c->num > 0)
			INFO("db0:keys=%lld,expires=%lld,avg_ttl=0\r\n", c->num, c->num2);
	}
#undef INFO
	reply_bulk(c, text, n < sizeof text ? n : sizeof text - 1);
}

const struct command server_commands[] = {
	{ "ping", -1, 0, 0, 0, 0, ping_begin, NULL, NULL },
	{ "echo", 2, 0, 0, 0, 0, echo_begin, NULL, NULL },
	{ "quit", -1, 0, 0, 0, 0, quit_begin, NULL, NULL },
	{ "config", -2, 0, 0, 0, 0, config_begin, NULL, NULL },
	{ "command", -1, 0, 0, 0, 0, command_begin, NULL, NULL },
	{ "select", 2, 0, 0, 0, 0, select_begin, NULL, NULL },
	{ "time", 1, 0, 0, 0, 0, time_begin, NULL, NULL },
	{ "hello", -1, 0, 0, 0, 0, hello_begin, NULL, NULL },
	{ "info", -1, 1, 0, 1, CMD_ALL_SHARDS, info_begin, info_key, info_end },
	{ NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL },
};
