/* SPDX-License-Identifier: MIT */
/*
 * kv_server: a key-value server that speaks the Redis protocol (RESP2):
 * redis-cli and redis-benchmark talk to it unchanged.
 *
 *   kv_server [--port P] [--threads N] [--bind ADDR] [--idle-timeout MS]
 *             [--max-bulk BYTES] [--max-request BYTES] [--max-reply-buffer BYTES]
 *             [--stop-grace MS]
 *
 * Commands, answered as Redis 7.0 answers them (replies, errors, options):
 *   strings   GET, SET (NX, XX, GET, EX, PX, EXAT, PXAT, KEEPTTL), GETEX,
 *             GETDEL, GETSET, SETEX, PSETEX, SETNX, MGET, MSET, MSETNX,
 *             APPEND, STRLEN, GETRANGE, SETRANGE, INCR, DECR, INCRBY,
 *             DECRBY, INCRBYFLOAT
 *   expiry    EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT (NX, XX, GT, LT), TTL,
 *             PTTL, EXPIRETIME, PEXPIRETIME, PERSIST
 *   keyspace  DEL, UNLINK, EXISTS, TYPE, RENAME, RENAMENX, COPY, KEYS, SCAN,
 *             DBSIZE, RANDOMKEY, FLUSHDB, FLUSHALL, SELECT 0
 *   lists     LPUSH, RPUSH, LPOP, RPOP, LLEN, LRANGE, LINDEX, LSET, LREM,
 *             LTRIM, LMOVE; BLPOP, BRPOP, BLMOVE (blocking.c)
 *   sets      SADD, SREM, SPOP, SMEMBERS, SCARD, SISMEMBER
 *   hashes    HSET, HGET, HGETALL, HDEL, HLEN
 *   zsets     ZADD (NX, XX, GT, LT, CH, INCR), ZPOPMIN, ZRANGE (by index,
 *             BYSCORE, BYLEX, REV, LIMIT, WITHSCORES), ZCARD, ZSCORE: a
 *             skip list, O(log n) an insert, a pop, a rank (zset.c)
 *   server    PING, ECHO, QUIT, HELLO (2), INFO (server, clients, memory,
 *             keyspace), TIME; CONFIG GET and COMMAND (next to empty
 *             answers), which the Redis tools ask at start.
 * Not here, answered with Redis's unknown-command error: persistence
 * (SAVE, BGSAVE, ...), replication, scripting (EVAL, FUNCTION), MULTI/EXEC
 * and WATCH, pub/sub, streams, and every command not listed above; of the
 * families above, those Redis's own tests use: SETBIT, GETBIT, LCS; LINSERT,
 * LPOS, LPUSHX, RPUSHX, RPOPLPUSH, BRPOPLPUSH, LMPOP, BLMPOP; SMOVE,
 * SRANDMEMBER, SMISMEMBER, SINTER, SUNION, SDIFF (and their STORE forms),
 * SINTERCARD, SSCAN; HMSET, HMGET, HSETNX, HEXISTS, HINCRBY, HINCRBYFLOAT,
 * HKEYS, HVALS, HSTRLEN, HRANDFIELD; ZREM, ZRANK, ZINCRBY, ZPOPMAX,
 * BZPOPMIN, BZPOPMAX, ZMPOP, BZMPOP, ZRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGE
 * (and the REV forms), ZRANGESTORE, ZCOUNT, ZLEXCOUNT, ZMSCORE,
 * ZRANDMEMBER, ZREMRANGEBY..., ZUNION, ZINTER, ZDIFF (and STORE), ZSCAN;
 * OBJECT, DUMP, SORT, CLIENT, MEMORY, DEBUG. CONFIG has GET alone (SET ...:
 * Redis's unknown-subcommand error); INFO answers an empty text for its
 * other sections (cpu, commandstats, replication ..., as Redis for a
 * section it does not know). HELLO 3 answers NOPROTO (RESP2
 * only); there is one database (SELECT 0, COPY's DB 0). Redis 7.0.15's own
 * test files for these families, run against this server: see
 * docs/reliability.md ("Notes on the method").
 *
 * Both request forms: arrays of bulk strings, and inline commands (a line
 * of words, quotes as Redis takes them). Pipelined requests are answered
 * in order, with one send for all the answers a read brought.
 *
 * Shared-nothing over a scheduler's contexts (--threads, default 1): the
 * key space is split into one shard per context, and only that context's
 * thread touches it. A connection lives on the context that accepted it
 * (one SO_REUSEPORT listener per context); a command whose key another
 * context owns moves there (co_transfer_to), runs, and comes back, key by
 * key for the commands with several keys (MGET, MSET, MSETNX, DEL, EXISTS,
 * RENAME, COPY, LMOVE ...; so those are not atomic across shards, as they
 * would be in Redis), shard by shard for KEYS, SCAN, DBSIZE, FLUSHALL,
 * INFO's keyspace. A blocked BLPOP waits on its keys' shards and is served
 * by a push on any of them (blocking.c).
 *
 * Limits, each connection's, as Redis bounds a client (its query buffer
 * limit, its output buffer limit), so that a client that sends too much,
 * or asks for much and never reads, costs the server at most these:
 *   - a request line (an inline command, a count) of at most 64 KiB;
 *   - a bulk string of at most --max-bulk bytes (default 1 MiB), and no
 *     more than --max-request: a longer length is refused as it is read,
 *     before any of its bytes are, with Redis's "ERR Protocol error:
 *     invalid bulk length", and the connection closes;
 *   - an array of at most --max-request / 16 elements (each takes 16 bytes
 *     of the request's accounting; and never more than INT_MAX): a larger
 *     count is refused at once with "invalid multibulk length";
 *   - a request of at most --max-request bytes (default 16 MiB): a bulk
 *     length that would take it past that closes the connection without
 *     an answer (as Redis does when a client's query buffer passes its
 *     limit), checked when the length is read, so a client that sends a
 *     large string slowly never has more than --max-request buffered;
 *   - answers built and not sent yet of at most --max-reply-buffer bytes
 *     (default 64 MiB), checked as each answer is built: an answer that
 *     would pass it drops them all, frees their memory, and closes the
 *     connection (as Redis does past client-output-buffer-limit), so an
 *     MGET of many large values from a client that never reads cannot
 *     grow the server past it;
 *   - --idle-timeout MS (default 300000; 0: never): a connection on which
 *     no command completes and no answer is sent for that long is closed,
 *     so a request that trickles in is bounded too. A connection's
 *     activity is a stamp of its context's tick, which a sweeper compares
 *     every 100 ms: no timer per request (a time limit on each read would
 *     add a kernel timeout to every recv).
 * Large buffers are mapped apart (a fixed mmap threshold), so what a
 * closed connection held goes back to the system, not only to the heap.
 *
 * SIGTERM or SIGINT: the listeners stop, every connection answers the
 * commands it has received and closes; after --stop-grace MS (default
 * 5000) whatever is left is cancelled, a send to a client that never
 * reads its answers too, and the server exits within the engines' cancel
 * grace (1 s) after that (test_kv_server sigterm_clients_never_read). The
 * exit status is 0.
 *
 * SIGUSR1: every coroutine of every context, what it waits on and since
 * when, is written to stderr (coring/view.h), and the server goes on.
 *
 * The files: main.c (this: the options), server.c (the coring side:
 * listeners, connections, the hand-off between shards, the stop),
 * protocol.c (RESP: requests and replies), store.c (a shard's keys, their
 * expiry, the values' structures), commands.c (the command table, how a
 * command runs, helpers), blocking.c (BLPOP's wait), cmd_strings.c,
 * cmd_expiry.c, cmd_keyspace.c, cmd_lists.c, cmd_sets.c (sets, hashes,
 * sorted sets), cmd_server.c (the commands, by family); kv.h declares
 * what they share. The reading is
 * coring/reader.h over co_recv; the listening sockets are coring/net.h's
 * co_listen.
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv.h"

struct server srv = { .threads = 1, .bind = "127.0.0.1", .idle_ns = 300 * CO_S,
		      .grace_ns = 5 * CO_S, .max_bulk = 1 << 20, .max_request = 16 << 20,
		      .max_reply = 64 << 20 };

static void usage(void)
{
	fprintf(stderr, "usage: kv_server [--port P] [--threads N] [--bind ADDR] [--idle-timeout MS]"
			" [--max-bulk BYTES] [--max-request BYTES] [--max-reply-buffer BYTES]"
			" [--stop-grace MS]\n");
	exit(2);
}

static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i += 2) {
		long long v;

		if (i + 1 >= argc)
			usage();
		if (!strcmp(argv[i], "--bind")) {
			srv.bind = argv[i + 1];
			continue;
		}
		if (!parse_ll(argv[i + 1], strlen(argv[i + 1]), &v) || v < 0 ||
		    (uint64_t)v > UINT64_MAX / CO_MS)
			usage();
		if (!strcmp(argv[i], "--port") && v <= 65535)
			srv.port = (int)v;
		else if (!strcmp(argv[i], "--threads") && v >= 1 && v <= 256)
			srv.threads = (unsigned)v;
		else if (!strcmp(argv[i], "--idle-timeout"))
			srv.idle_ns = (uint64_t)v * CO_MS;
		else if (!strcmp(argv[i], "--stop-grace"))
			srv.grace_ns = (uint64_t)v * CO_MS;
		else if (!strcmp(argv[i], "--max-bulk") && v >= 1 && v <= INT_MAX - 2)
			srv.max_bulk = (size_t)v;
		else if (!strcmp(argv[i], "--max-request") && v >= 1)
			srv.max_request = (size_t)v;
		else if (!strcmp(argv[i], "--max-reply-buffer") && v >= 1)
			srv.max_reply = (size_t)v;
		else
			usage();
	}
}

int main(int argc, char **argv)
{
	sigset_t set;
	int err;

	parse_args(argc, argv);
	/* a fixed threshold: buffers of 128 KiB and more are mapped apart and
	 * unmapped when freed (glibc would raise it to the largest freed, and
	 * keep what a closed connection held in the heap) */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGUSR1);
	/* before the contexts start: their threads inherit the blocked set */
	if ((err = co_signals_open(&srv.sigs, &set)) < 0 || (err = co_trace_env()) < 0) {
		fprintf(stderr, "kv_server: start: %s\n", strerror(-err));
		return 1;
	}
	err = server_run();
	co_signals_close(&srv.sigs);
	return err < 0 ? 1 : 0;
}
