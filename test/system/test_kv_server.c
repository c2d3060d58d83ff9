/* SPDX-License-Identifier: MIT */
/*
 * The example key-value server (docs/examples/kv/), run as a
 * process (CORING_KV_SERVER names it) and spoken to with a RESP client of
 * this file's own over blocking loopback sockets: every command and its
 * errors as Redis answers them, pipelining, inline commands, bad input,
 * the limits, the idle timeout, the stop on SIGTERM (the commands received
 * are answered, then the connections close, exit status 0), keys sharded
 * over four contexts under concurrent clients (every increment counted),
 * and redis-cli and redis-benchmark where they are installed (skipped, 77,
 * where not). Socket timeouts and waits are hang guards only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "helpers.h"

/* ---- the server process --------------------------------------------------------------- */

struct server {
	pid_t pid;
	int port;
};

/* Where the next server_start sends the server's stderr (NULL: ours). */
static const char *server_stderr;

/* Start kv_server with the given arguments (NULL-terminated) and --port 0;
 * its "port=P" line tells where it listens. */
static struct server server_start(const char *arg, ...)
{
	const char *path = getenv("CORING_KV_SERVER");
	const char *argv[32] = { path, "--port", "0" };
	struct server s = { 0 };
	int n = 3, out[2];
	char line[64];
	FILE *f;
	va_list ap;

	assert_non_null(path);
	va_start(ap, arg);
	for (; arg && n < 30; arg = va_arg(ap, const char *))
		argv[n++] = arg;
	va_end(ap);
	argv[n] = NULL;
	assert_int_equal(pipe(out), 0);
	s.pid = fork();
	assert_true(s.pid >= 0);
	if (s.pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
		dup2(out[1], 1);
		if (server_stderr) {
			int fd = open(server_stderr, O_WRONLY | O_CREAT | O_TRUNC, 0600);

			if (fd >= 0)
				dup2(fd, 2);
		}
		close(out[0]);
		execv(path, (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	f = fdopen(out[0], "r");
	assert_non_null(fgets(line, sizeof line, f));
	assert_int_equal(sscanf(line, "port=%d", &s.port), 1);
	fclose(f);
	return s;
}

/* Send sig and wait for the exit: its status (-1: killed by a signal). */
static int server_stop(struct server *s, int sig)
{
	int st;

	kill(s->pid, sig);
	assert_int_equal(waitpid(s->pid, &st, 0), s->pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- a RESP client --------------------------------------------------------------------- */

struct client {
	int fd;
	size_t head, tail;
	char buf[1 << 16];
};

static struct client *client_open(int port)
{
	struct client *c = calloc(1, sizeof *c);
	struct sockaddr_in a = co_test_loopback((uint16_t)port);
	struct timeval tv = { .tv_sec = 30 }; /* a hang guard */

	assert_non_null(c);
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c->fd >= 0);
	assert_int_equal(connect(c->fd, (struct sockaddr *)&a, sizeof a), 0);
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	return c;
}

static void client_close(struct client *c)
{
	close(c->fd);
	free(c);
}

static void send_raw(struct client *c, const void *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		assert_true(w > 0);
		p = (const char *)p + w;
		n -= (size_t)w;
	}
}

static void send_str(struct client *c, const char *s)
{
	send_raw(c, s, strlen(s));
}

/* One more byte from the server; -1 at its end of file. */
static int next_byte(struct client *c)
{
	if (c->head == c->tail) {
		ssize_t r;

		while ((r = recv(c->fd, c->buf, sizeof c->buf, 0)) < 0 && errno == EINTR)
			;
		assert_true(r >= 0 || errno == ECONNRESET); /* (not the hang guard's EAGAIN) */
		if (r <= 0)
			return -1;
		c->head = 0;
		c->tail = (size_t)r;
	}
	return (unsigned char)c->buf[c->head++];
}

/* The server closed the connection (after everything it sent was read). */
static int at_eof(struct client *c)
{
	return next_byte(c) < 0;
}

static void read_line(struct client *c, char *out, size_t cap)
{
	size_t n = 0;
	int ch;

	while ((ch = next_byte(c)) >= 0 && ch != '\n') {
		assert_true(n + 1 < cap);
		out[n++] = (char)ch;
	}
	assert_true(ch == '\n' && n > 0 && out[n - 1] == '\r');
	out[n - 1] = 0;
}

/* One reply, written as text: "+OK", "-ERR ...", ":5", "$abc", "$-1",
 * "*2 $a $-1" (an array's elements after a space each). */
static void read_reply(struct client *c, char *out, size_t cap)
{
	char line[256];
	long n;

	read_line(c, line, sizeof line);
	if (line[0] == '$' && (n = atol(line + 1)) >= 0) {
		assert_true((size_t)n + 2 < cap);
		out[0] = '$';
		for (long i = 0; i < n + 2; i++)
			out[1 + i] = (char)next_byte(c);
		out[1 + n] = 0;
		return;
	}
	snprintf(out, cap, "%s", line);
	if (line[0] == '*' && (n = atol(line + 1)) > 0) {
		size_t len = strlen(out);

		for (long i = 0; i < n; i++) {
			out[len++] = ' ';
			read_reply(c, out + len, cap - len);
			len += strlen(out + len);
		}
	}
}

/* Send a command (its words as a RESP array) and check the reply. */
static void expect(struct client *c, const char *reply, int argc, ...)
{
	char req[4096], got[8192];
	size_t n = (size_t)snprintf(req, sizeof req, "*%d\r\n", argc);
	va_list ap;

	va_start(ap, argc);
	for (int i = 0; i < argc; i++) {
		const char *a = va_arg(ap, const char *);

		n += (size_t)snprintf(req + n, sizeof req - n, "$%zu\r\n%s\r\n", strlen(a), a);
	}
	va_end(ap);
	send_raw(c, req, n);
	read_reply(c, got, sizeof got);
	assert_string_equal(got, reply);
}

#define EXPECT(c, reply, ...) \
	expect((c), (reply), (int)(sizeof((const char *[]){ __VA_ARGS__ }) / sizeof(const char *)), \
	       __VA_ARGS__)

static void expect_reply(struct client *c, const char *reply)
{
	char got[8192];

	read_reply(c, got, sizeof got);
	assert_string_equal(got, reply);
}

/* ---- every command ---------------------------------------------------------------------- */

static void test_strings_and_counters(void **state)
{
	struct server s = server_start(NULL);
	struct client *c = client_open(s.port);

	(void)state;
	EXPECT(c, "+PONG", "PING");
	EXPECT(c, "$hi", "ping", "hi");
	EXPECT(c, "-ERR wrong number of arguments for 'ping' command", "PING", "a", "b");
	EXPECT(c, "$hello world", "ECHO", "hello world");
	EXPECT(c, "$-1", "GET", "k");
	EXPECT(c, "+OK", "SET", "k", "v1");
	EXPECT(c, "$v1", "GET", "k");
	EXPECT(c, "+OK", "sEt", "k", "v2");
	EXPECT(c, "$v2", "get", "k");
	EXPECT(c, "$-1", "SET", "k", "v3", "NX");
	EXPECT(c, "+OK", "SET", "new", "n", "NX");
	EXPECT(c, "$-1", "SET", "absent", "x", "XX");
	EXPECT(c, "+OK", "SET", "k", "v4", "XX");
	EXPECT(c, "$v4", "GET", "k");
	EXPECT(c, "$-1", "GET", "absent");
	EXPECT(c, "-ERR syntax error", "SET", "k", "v", "NX", "XX");
	EXPECT(c, "-ERR syntax error", "SET", "k", "v", "EX");
	EXPECT(c, "-ERR syntax error", "SET", "k", "v", "EX", "5", "PX", "5");
	EXPECT(c, "-ERR syntax error", "SET", "k", "v", "FOO");
	EXPECT(c, "-ERR value is not an integer or out of range", "SET", "k", "v", "EX", "x");
	EXPECT(c, "-ERR invalid expire time in 'set' command", "SET", "k", "v", "EX", "0");
	EXPECT(c, "-ERR invalid expire time in 'set' command", "SET", "k", "v", "PX", "-5");
	EXPECT(c, "-ERR invalid expire time in 'set' command", "SET", "k", "v", "EX",
	       "9223372036854775807");
	EXPECT(c, "-ERR wrong number of arguments for 'set' command", "SET", "k");
	EXPECT(c, "-ERR wrong number of arguments for 'get' command", "GET");
	EXPECT(c, "-ERR wrong number of arguments for 'get' command", "GET", "a", "b");
	/* counters */
	EXPECT(c, ":1", "INCR", "n");
	EXPECT(c, ":11", "INCRBY", "n", "10");
	EXPECT(c, ":10", "DECR", "n");
	EXPECT(c, ":-5", "DECRBY", "n", "15");
	EXPECT(c, "$-5", "GET", "n");
	EXPECT(c, "-ERR value is not an integer or out of range", "INCR", "k");
	EXPECT(c, "-ERR value is not an integer or out of range", "INCRBY", "n", "1x");
	EXPECT(c, "-ERR value is not an integer or out of range", "INCRBY", "n", " 1");
	EXPECT(c, "-ERR value is not an integer or out of range", "INCRBY", "n", "01");
	EXPECT(c, "-ERR value is not an integer or out of range", "INCRBY", "n",
	       "9223372036854775808");
	EXPECT(c, "+OK", "SET", "big", "9223372036854775807");
	EXPECT(c, "-ERR increment or decrement would overflow", "INCR", "big");
	EXPECT(c, "-ERR decrement would overflow", "DECRBY", "big", "-9223372036854775808");
	EXPECT(c, "+OK", "SET", "small", "-9223372036854775808");
	EXPECT(c, "-ERR increment or decrement would overflow", "DECR", "small");
	/* several keys */
	EXPECT(c, "+OK", "MSET", "a", "1", "b", "2", "c", "3");
	EXPECT(c, "*4 $1 $2 $-1 $3", "MGET", "a", "b", "nope", "c");
	EXPECT(c, "-ERR wrong number of arguments for 'mset' command", "MSET", "a", "1", "b");
	EXPECT(c, ":3", "EXISTS", "a", "b", "nope", "a");
	EXPECT(c, ":2", "DEL", "a", "b", "nope");
	EXPECT(c, ":0", "EXISTS", "a", "b");
	EXPECT(c, "*1 $3", "MGET", "c");
	/* what the Redis tools ask at start */
	EXPECT(c, "*2 $save $", "CONFIG", "GET", "save");
	EXPECT(c, "*2 $appendonly $no", "CONFIG", "GET", "appendonly");
	EXPECT(c, "-ERR unknown subcommand 'FOO'. Try CONFIG HELP.", "CONFIG", "FOO");
	EXPECT(c, "*0", "COMMAND", "DOCS");
	EXPECT(c, "-ERR unknown command 'FOO', with args beginning with: 'bar' 'baz' ", "FOO",
	       "bar", "baz");
	EXPECT(c, "-ERR unknown command 'NOPE', with args beginning with: ", "NOPE");
	/* an error's line breaks would end it early: they become spaces */
	EXPECT(c, "-ERR unknown command 'a  b', with args beginning with: ", "a\r\nb");
	EXPECT(c, "+OK", "QUIT");
	assert_true(at_eof(c));
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

static void test_expiry(void **state)
{
	struct server s = server_start(NULL);
	struct client *c = client_open(s.port);
	char got[64];

	(void)state;
	EXPECT(c, ":-2", "TTL", "k");
	EXPECT(c, "+OK", "SET", "k", "v");
	EXPECT(c, ":-1", "TTL", "k");
	EXPECT(c, ":1", "EXPIRE", "k", "100");
	send_str(c, "*2\r\n$3\r\nTTL\r\n$1\r\nk\r\n");
	read_reply(c, got, sizeof got);
	assert_true(atoi(got + 1) >= 1 && atoi(got + 1) <= 100);
	EXPECT(c, ":0", "EXPIRE", "nokey", "100");
	EXPECT(c, "-ERR value is not an integer or out of range", "EXPIRE", "k", "soon");
	EXPECT(c, "-ERR invalid expire time in 'expire' command", "EXPIRE", "k",
	       "9223372036854775807");
	EXPECT(c, "-ERR Unsupported option FOO", "EXPIRE", "k", "10", "FOO");
	EXPECT(c, "-ERR NX and XX, GT or LT options at the same time are not compatible",
	       "EXPIRE", "k", "10", "NX", "GT");
	EXPECT(c, "-ERR GT and LT options at the same time are not compatible", "EXPIRE", "k",
	       "10", "GT", "LT");
	EXPECT(c, ":0", "EXPIRE", "k", "10", "NX"); /* it has a time */
	EXPECT(c, ":0", "EXPIRE", "k", "200", "LT");
	EXPECT(c, ":0", "EXPIRE", "k", "50", "GT");
	EXPECT(c, ":1", "EXPIRE", "k", "50", "LT");
	EXPECT(c, ":1", "EXPIRE", "k", "60", "gt");
	EXPECT(c, "+OK", "SET", "p", "v");
	EXPECT(c, ":0", "EXPIRE", "p", "10", "XX"); /* it has none */
	EXPECT(c, ":0", "EXPIRE", "p", "10", "GT"); /* none is for ever */
	EXPECT(c, ":1", "EXPIRE", "p", "10", "LT");
	EXPECT(c, "+OK", "SET", "p", "v");
	EXPECT(c, ":1", "EXPIRE", "p", "10", "NX");
	EXPECT(c, ":1", "EXPIRE", "k", "0"); /* a time gone: the key goes */
	EXPECT(c, "$-1", "GET", "k");
	EXPECT(c, ":-2", "TTL", "k");
	/* INCR keeps the time; KEEPTTL too; a plain SET drops it */
	EXPECT(c, "+OK", "SET", "n", "1", "EX", "1000");
	EXPECT(c, ":2", "INCR", "n");
	send_str(c, "*2\r\n$3\r\nTTL\r\n$1\r\nn\r\n");
	read_reply(c, got, sizeof got);
	assert_true(atoi(got + 1) > 0);
	EXPECT(c, "+OK", "SET", "n", "5", "KEEPTTL");
	send_str(c, "*2\r\n$3\r\nTTL\r\n$1\r\nn\r\n");
	read_reply(c, got, sizeof got);
	assert_true(atoi(got + 1) > 0);
	EXPECT(c, "+OK", "SET", "n", "6");
	EXPECT(c, ":-1", "TTL", "n");
	/* a key whose time has passed is gone for its next reader, whether
	 * or not the sweeper came by */
	EXPECT(c, "+OK", "SET", "gone", "v", "PX", "1");
	usleep(5000);
	EXPECT(c, "$-1", "GET", "gone");
	EXPECT(c, ":0", "EXISTS", "gone");
	/* and one nobody asks for goes too */
	EXPECT(c, "+OK", "SET", "short", "v", "PX", "1");
	for (;;) { /* (a hang guard, no verdict by time) */
		send_str(c, "*2\r\n$3\r\nGET\r\n$5\r\nshort\r\n");
		read_reply(c, got, sizeof got);
		if (strcmp(got, "$-1") == 0)
			break;
		assert_string_equal(got, "$v");
		usleep(1000);
	}
	EXPECT(c, ":0", "EXISTS", "short");
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* ---- pipelining, inline commands, binary data ---------------------------------------------- */

/* 3,000 commands in one write: the answers come in order. */
static void test_pipelining(void **state)
{
	struct server s = server_start(NULL);
	struct client *c = client_open(s.port);
	size_t cap = 3000 * 64, n = 0;
	char *req = malloc(cap), got[64], want[64];

	(void)state;
	assert_non_null(req);
	for (int i = 0; i < 1000; i++) {
		n += (size_t)snprintf(req + n, cap - n,
				      "*3\r\n$3\r\nSET\r\n$%d\r\nk%d\r\n$%d\r\nv%d\r\n", i < 10 ? 2 : i < 100 ? 3 : 4,
				      i, i < 10 ? 2 : i < 100 ? 3 : 4, i);
		n += (size_t)snprintf(req + n, cap - n, "INCR counter\r\n");
		n += (size_t)snprintf(req + n, cap - n, "*2\r\n$3\r\nGET\r\n$%d\r\nk%d\r\n",
				      i < 10 ? 2 : i < 100 ? 3 : 4, i);
	}
	send_raw(c, req, n);
	for (int i = 0; i < 1000; i++) {
		expect_reply(c, "+OK");
		read_reply(c, got, sizeof got);
		snprintf(want, sizeof want, ":%d", i + 1);
		assert_string_equal(got, want);
		read_reply(c, got, sizeof got);
		snprintf(want, sizeof want, "$v%d", i);
		assert_string_equal(got, want);
	}
	/* a pipeline cut anywhere still works: one byte per write */
	n = (size_t)snprintf(req, cap, "*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\nPING\r\n*1\r\n$4\r\nPING\r\n");
	for (size_t i = 0; i < n; i++)
		send_raw(c, req + i, 1);
	expect_reply(c, "$abc");
	expect_reply(c, "+PONG");
	expect_reply(c, "+PONG");
	free(req);
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

static void test_inline_commands(void **state)
{
	struct server s = server_start(NULL);
	struct client *c = client_open(s.port);

	(void)state;
	send_str(c, "PING\r\n");
	expect_reply(c, "+PONG");
	send_str(c, "PING\n"); /* a bare line feed ends a line too */
	expect_reply(c, "+PONG");
	send_str(c, "\r\n   \r\n"); /* empty lines: nothing to answer */
	send_str(c, "SET   a   \"b c\"  \r\nGET a\r\n");
	expect_reply(c, "+OK");
	expect_reply(c, "$b c");
	send_str(c, "ECHO \"x\\x41\\n\\\"y\"\r\n");
	expect_reply(c, "$xA\n\"y");
	send_str(c, "ECHO 'it\\'s \"raw\\n\"'\r\n");
	expect_reply(c, "$it's \"raw\\n\"");
	send_str(c, "ECHO \"\"\r\n");
	expect_reply(c, "$");
	send_str(c, "ECHO \"a\"b\r\n"); /* a closing quote must end the word */
	expect_reply(c, "-ERR Protocol error: unbalanced quotes in request");
	assert_true(at_eof(c));
	client_close(c);
	c = client_open(s.port);
	send_str(c, "ECHO \"never closed\r\n");
	expect_reply(c, "-ERR Protocol error: unbalanced quotes in request");
	assert_true(at_eof(c));
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* Values with every byte, CR LF and NUL included, go in and out intact. */
static void test_binary_values(void **state)
{
	struct server s = server_start(NULL);
	struct client *c = client_open(s.port);
	char req[600], got[600];
	size_t n;

	(void)state;
	n = (size_t)sprintf(req, "*3\r\n$3\r\nSET\r\n$3\r\nb\r\n\r\n$256\r\n");
	for (int i = 0; i < 256; i++)
		req[n++] = (char)i;
	memcpy(req + n, "\r\n", 2);
	send_raw(c, req, n + 2);
	expect_reply(c, "+OK");
	send_str(c, "*2\r\n$3\r\nGET\r\n$3\r\nb\r\n\r\n");
	read_line(c, got, sizeof got);
	assert_string_equal(got, "$256");
	for (int i = 0; i < 256; i++)
		assert_int_equal(next_byte(c), i);
	assert_int_equal(next_byte(c), '\r');
	assert_int_equal(next_byte(c), '\n');
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* ---- bad input and the limits ------------------------------------------------------------------ */

/* Send req on a new connection: the answer is reply, then the server
 * closes the connection (reply NULL: it closes without one). */
static void expect_close(struct server *s, const void *req, size_t n, const char *reply)
{
	struct client *c = client_open(s->port);

	send_raw(c, req, n);
	if (reply)
		expect_reply(c, reply);
	assert_true(at_eof(c));
	client_close(c);
}

#define EXPECT_CLOSE(s, req, reply) expect_close((s), (req), sizeof(req) - 1, (reply))

static void test_bad_input(void **state)
{
	struct server s = server_start(NULL);
	struct client *c;

	(void)state;
	EXPECT_CLOSE(&s, "*abc\r\n", "-ERR Protocol error: invalid multibulk length");
	EXPECT_CLOSE(&s, "*2147483648\r\n", "-ERR Protocol error: invalid multibulk length");
	EXPECT_CLOSE(&s, "*99999999999999999999\r\n", "-ERR Protocol error: invalid multibulk length");
	EXPECT_CLOSE(&s, "*1\r\nPING\r\n", "-ERR Protocol error: expected '$', got 'P'");
	EXPECT_CLOSE(&s, "*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length");
	EXPECT_CLOSE(&s, "*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length");
	EXPECT_CLOSE(&s, "*1\r\n$\r\n", "-ERR Protocol error: invalid bulk length");
	/* the commands before the bad one are answered first */
	c = client_open(s.port);
	send_str(c, "PING\r\n*1\r\n:1\r\n");
	expect_reply(c, "+PONG");
	expect_reply(c, "-ERR Protocol error: expected '$', got ':'");
	assert_true(at_eof(c));
	client_close(c);
	/* an empty command name is a command nobody knows */
	c = client_open(s.port);
	send_str(c, "*1\r\n$0\r\n\r\n*2\r\n$4\r\nECHO\r\n$0\r\n\r\n");
	expect_reply(c, "-ERR unknown command '', with args beginning with: ");
	expect_reply(c, "$");
	client_close(c);
	/* empty and negative arrays are nothing to do; the connection goes on */
	c = client_open(s.port);
	send_str(c, "*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n");
	expect_reply(c, "+PONG");
	/* a peer that closes inside a command: the server closes too */
	send_str(c, "*2\r\n$3\r\nGET\r\n$5\r\nab");
	shutdown(c->fd, SHUT_WR);
	assert_true(at_eof(c));
	client_close(c);
	/* still serving */
	c = client_open(s.port);
	EXPECT(c, "+PONG", "PING");
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

static void test_request_limits(void **state)
{
	struct server s = server_start("--max-bulk", "1000", "--max-request", "5000", NULL);
	static char big[80000];
	size_t n;
	struct client *c;

	(void)state;
	EXPECT_CLOSE(&s, "*2\r\n$4\r\nECHO\r\n$1001\r\n", "-ERR Protocol error: invalid bulk length");
	/* 1000 bytes pass */
	c = client_open(s.port);
	n = (size_t)sprintf(big, "*2\r\n$4\r\nECHO\r\n$1000\r\n");
	memset(big + n, 'x', 1000);
	memcpy(big + n + 1000, "\r\n", 2);
	send_raw(c, big, n + 1002);
	read_line(c, big, 64);
	assert_string_equal(big, "$1000");
	for (int i = 0; i < 1002; i++)
		assert_true(next_byte(c) >= 0);
	client_close(c);
	/* lines longer than 64 KiB without their end */
	memset(big, 'a', 70000);
	expect_close(&s, big, 70000, "-ERR Protocol error: too big inline request");
	big[0] = '*';
	memset(big + 1, '1', 69999);
	expect_close(&s, big, 70000, "-ERR Protocol error: too big mbulk count string");
	n = (size_t)sprintf(big, "*1\r\n$");
	memset(big + n, '1', 70000 - n);
	expect_close(&s, big, 70000, "-ERR Protocol error: too big bulk count string");
	/* more than --max-request in one command: closed, no answer (as Redis
	 * does past its query buffer limit) */
	n = (size_t)sprintf(big, "*13\r\n$4\r\nMSET\r\n");
	for (int i = 0; i < 6; i++) /* 6 x 950 bytes: each bulk passes, not all */
		n += (size_t)sprintf(big + n, "$1\r\nk\r\n$950\r\n%0950d\r\n", i);
	expect_close(&s, big, n, NULL);
	c = client_open(s.port); /* and every other connection goes on */
	EXPECT(c, "+PONG", "PING");
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* ---- idle connections, the stop ------------------------------------------------------------------ */

static void test_idle_timeout(void **state)
{
	struct server s = server_start("--idle-timeout", "100", NULL);
	struct client *c = client_open(s.port), *d;

	(void)state;
	EXPECT(c, "+PONG", "PING");
	assert_true(at_eof(c)); /* nothing more sent: closed by the server */
	client_close(c);
	/* one that stops in the middle of a command too */
	d = client_open(s.port);
	send_str(d, "*2\r\n$4\r\nECHO\r\n$5\r\nab");
	assert_true(at_eof(d));
	client_close(d);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* A client that pipelines 2,000 INCR in one write. */
static void *flood(void *arg)
{
	struct client *c = arg;
	static const char cmd[] = "*2\r\n$4\r\nINCR\r\n$1\r\nf\r\n";
	char *req = malloc(2000 * (sizeof cmd - 1));

	for (int i = 0; i < 2000; i++)
		memcpy(req + i * (sizeof cmd - 1), cmd, sizeof cmd - 1);
	send(c->fd, req, 2000 * (sizeof cmd - 1), MSG_NOSIGNAL); /* (may be cut by the stop) */
	free(req);
	return NULL;
}

/* SIGTERM: an idle connection is closed; one inside a command is closed
 * without an answer to it, after the answers to the commands before it;
 * one flooding the server gets whole answers, in order, for what the
 * server received, then the end; the exit status is 0. */
static void test_sigterm_stop(void **state)
{
	/* a grace far longer than the test's timeout: the connections must
	 * close because of the stop itself, not of the cancel after it */
	struct server s = server_start("--threads", "2", "--stop-grace", "3600000", NULL);
	struct client *idle = client_open(s.port), *part = client_open(s.port);
	struct client *fl = client_open(s.port);
	pthread_t th;
	char got[64], want[64];
	int i;

	(void)state;
	EXPECT(idle, "+OK", "SET", "k", "v");
	send_str(part, "PING\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\n");
	expect_reply(part, "+PONG");
	expect_reply(part, "+PONG");
	assert_int_equal(pthread_create(&th, NULL, flood, fl), 0);
	expect_reply(fl, ":1"); /* the flood has begun */
	kill(s.pid, SIGTERM);
	for (i = 2;; i++) {
		int ch = next_byte(fl);

		if (ch < 0)
			break;
		fl->head--;
		read_reply(fl, got, sizeof got);
		snprintf(want, sizeof want, ":%d", i);
		assert_string_equal(got, want);
	}
	assert_true(i - 1 <= 2000);
	pthread_join(th, NULL);
	assert_true(at_eof(idle));
	assert_true(at_eof(part));
	assert_int_equal(server_stop(&s, 0), 0);
	client_close(idle);
	client_close(part);
	client_close(fl);
}

/* ---- SIGTERM with clients that never read ------------------------------------------------ */

/* A connected socket to the server, nothing more (30 s timeouts: hang
 * guards). */
static int raw_connect(int port)
{
	struct sockaddr_in a = co_test_loopback((uint16_t)port);
	struct timeval tv = { .tv_sec = 30 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	return fd;
}

/* CLOCK_MONOTONIC in ms. */
static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Bytes waiting in fd's receive queue. */
static int queued_bytes(int fd)
{
	int n = 0;

	assert_int_equal(ioctl(fd, FIONREAD, &n), 0);
	return n;
}

/* The flooding client: PINGs, pipelined, until the server is gone; its
 * answers are read (by flood_drain) until the end. */
static void *flood_pings(void *arg)
{
	static char req[6 * 1000];
	int fd = *(int *)arg;

	for (int i = 0; i < 1000; i++)
		memcpy(req + 6 * i, "PING\r\n", 6);
	while (send(fd, req, sizeof req, MSG_NOSIGNAL) > 0)
		;
	return NULL;
}

static atomic_long flood_read;

static void *flood_drain(void *arg)
{
	static char buf[1 << 16];
	int fd = *(int *)arg;
	ssize_t r;

	while ((r = recv(fd, buf, sizeof buf, 0)) > 0)
		atomic_fetch_add(&flood_read, r);
	return NULL;
}

#define IDLE_CONNS 2000
#define DEAF_CONNS 50
#define STOP_GRACE_MS 200
#define VALUE_BYTES (512 * 1024)
#define DEAF_GETS 128

/*
 * SIGTERM on a server of two contexts with 2,000 idle connections, 50
 * clients that send 128 GETs of a 512 KiB value and never read (64 MiB of
 * answers each, more than a connection's buffers may grow to: the
 * server's sends to them block) and one that
 * floods it with PINGs: the server exits 0 within --stop-grace
 * (200 ms) and the engine's cancel grace (1 s), which a watchdog checks
 * with a margin of 30 s; a server that exits at once passes at once. It
 * did not exit at all before a stop asked the kernel again to cancel the
 * sends (docs/engine.md, "A stop ends within its grace").
 */
static void test_sigterm_clients_never_read(void **state)
{
	static int idle[IDLE_CONNS], deaf[DEAF_CONNS];
	struct rlimit rl;
	struct server s;
	struct client *c;
	static char set[VALUE_BYTES + 64];
	char get[DEAF_GETS * 9];
	size_t n;
	pthread_t th[2];
	int flood, st = 0, exited = 0;
	long long t0, deadline;

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 2 * (IDLE_CONNS + DEAF_CONNS) + 64) { /* the server inherits it */
		rl.rlim_cur = rl.rlim_max;
		if (rl.rlim_cur < 2 * (IDLE_CONNS + DEAF_CONNS) + 64)
			skip();
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	s = server_start("--threads", "2", "--stop-grace", "200", NULL);
	c = client_open(s.port);
	n = (size_t)snprintf(set, 64, "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n", VALUE_BYTES);
	memset(set + n, 'v', VALUE_BYTES);
	memcpy(set + n + VALUE_BYTES, "\r\n", 2);
	send_raw(c, set, n + VALUE_BYTES + 2);
	expect_reply(c, "+OK");
	for (int i = 0; i < IDLE_CONNS; i++) { /* each served once, then idle */
		char pong[7];

		idle[i] = raw_connect(s.port);
		assert_int_equal(send(idle[i], "PING\r\n", 6, MSG_NOSIGNAL), 6);
		for (size_t got = 0; got < sizeof pong;) {
			ssize_t r = recv(idle[i], pong + got, sizeof pong - got, 0);

			assert_true(r > 0 || (r < 0 && errno == EINTR));
			got += r > 0 ? (size_t)r : 0;
		}
		assert_memory_equal(pong, "+PONG\r\n", 7);
	}
	for (int i = 0; i < DEAF_GETS; i++)
		memcpy(get + 9 * i, "GET big\r\n", 9);
	for (int i = 0; i < DEAF_CONNS; i++) {
		deaf[i] = raw_connect(s.port);
		assert_int_equal(send(deaf[i], get, sizeof get, MSG_NOSIGNAL), (ssize_t)sizeof get);
	}
	for (int i = 0; i < DEAF_CONNS; i++)
		WAIT_UNTIL(queued_bytes(deaf[i]) > 0); /* the server is sending to each */
	flood = raw_connect(s.port);
	assert_int_equal(pthread_create(&th[0], NULL, flood_pings, &flood), 0);
	assert_int_equal(pthread_create(&th[1], NULL, flood_drain, &flood), 0);
	WAIT_UNTIL(atomic_load(&flood_read) > 0); /* the flood is answered */

	kill(s.pid, SIGTERM);
	t0 = now_ms();
	deadline = t0 + STOP_GRACE_MS + 1000 + 30000;
	while (!(exited = waitpid(s.pid, &st, WNOHANG) == s.pid) && now_ms() < deadline)
		usleep(1000);
	if (!exited) {
		kill(s.pid, SIGKILL);
		waitpid(s.pid, &st, 0);
		fail_msg("no exit %d ms after SIGTERM (--stop-grace %d)", STOP_GRACE_MS + 1000 + 30000,
			 STOP_GRACE_MS);
	}
	print_message("      exit %lld ms after SIGTERM\n", now_ms() - t0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	for (int i = 0; i < IDLE_CONNS; i++)
		close(idle[i]);
	for (int i = 0; i < DEAF_CONNS; i++)
		close(deaf[i]);
	close(flood);
	client_close(c);
}

/* ---- SIGUSR1: the view of its coroutines ------------------------------------------------- */

static char *slurp(const char *path)
{
	static char buf[1 << 16];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	return buf;
}

/* Three idle clients on a server of two contexts: SIGUSR1 writes the view
 * to stderr (every context, the connections waiting in their reads), and
 * the server goes on serving. */
static void test_view_on_sigusr1(void **state)
{
	const char *path = co_test_tmp_path("kv", "stderr");
	struct server s;
	struct client *c[3];
	char *text;

	(void)state;
	server_stderr = path;
	s = server_start("--threads", "2", NULL);
	server_stderr = NULL;
	for (int i = 0; i < 3; i++) {
		c[i] = client_open(s.port);
		EXPECT(c[i], "+PONG", "PING"); /* accepted, served, waiting again */
	}
	kill(s.pid, SIGUSR1);
	while (strstr(text = slurp(path), "\n    on ") == NULL) /* a hang guard only */
		usleep(1000);
	print_message("%s", text);
	assert_non_null(strstr(text, "coring view: "));
	assert_non_null(strstr(text, " on 2 contexts"));
	assert_non_null(strstr(text, "  context 0 (kind 0): "));
	assert_non_null(strstr(text, "  context 1 (kind 0): "));
	assert_non_null(strstr(text, " waiting on recv"));
	assert_non_null(strstr(text, " waiting on accept"));
	assert_non_null(strstr(text, " running"));  /* the frame that took the view */
	EXPECT(c[0], "+PONG", "PING");          /* and it goes on */
	for (int i = 0; i < 3; i++)
		client_close(c[i]);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
	unlink(path);
}

/* ---- four shards, concurrent clients ----------------------------------------------------------- */

#define SHARD_CLIENTS 4
#define SHARD_ROUNDS 500
#define SHARD_KEYS 40

static int shard_port;

/* Each client: INCR every key in turn, pipelined 40 at a time, and an
 * MSET / MGET of keys of its own across every shard. */
static void *shard_client(void *arg)
{
	struct client *c = client_open(shard_port);
	long id = (long)arg;
	char req[SHARD_KEYS * 64], got[4096], want[4096];
	size_t n, w;

	for (int r = 0; r < SHARD_ROUNDS; r++) {
		n = 0;
		for (int k = 0; k < SHARD_KEYS; k++)
			n += (size_t)sprintf(req + n, "INCR key:%d\r\n", k);
		send_raw(c, req, n);
		for (int k = 0; k < SHARD_KEYS; k++) {
			read_reply(c, got, sizeof got);
			assert_int_equal(got[0], ':');
		}
	}
	n = (size_t)sprintf(req, "MSET");
	for (int k = 0; k < SHARD_KEYS; k++)
		n += (size_t)sprintf(req + n, " own:%ld:%d v%ld.%d", id, k, id, k);
	n += (size_t)sprintf(req + n, "\r\nMGET");
	w = (size_t)sprintf(want, "*%d", SHARD_KEYS);
	for (int k = 0; k < SHARD_KEYS; k++) {
		n += (size_t)sprintf(req + n, " own:%ld:%d", id, k);
		w += (size_t)sprintf(want + w, " $v%ld.%d", id, k);
	}
	memcpy(req + n, "\r\n", 2);
	send_raw(c, req, n + 2);
	expect_reply(c, "+OK");
	read_reply(c, got, sizeof got);
	assert_string_equal(got, want);
	client_close(c);
	return NULL;
}

static void test_sharded_over_contexts(void **state)
{
	struct server s = server_start("--threads", "4", NULL);
	pthread_t th[SHARD_CLIENTS];
	struct client *c;
	char req[4096], got[4096];
	size_t n;

	(void)state;
	shard_port = s.port;
	for (long i = 0; i < SHARD_CLIENTS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, shard_client, (void *)i), 0);
	for (int i = 0; i < SHARD_CLIENTS; i++)
		pthread_join(th[i], NULL);
	/* every increment counted, on whichever shard its key lives */
	c = client_open(s.port);
	for (int k = 0; k < SHARD_KEYS; k++) {
		n = (size_t)sprintf(req, "GET key:%d\r\n", k);
		send_raw(c, req, n);
		read_reply(c, got, sizeof got);
		assert_int_equal(atoi(got + 1), SHARD_CLIENTS * SHARD_ROUNDS);
	}
	n = (size_t)sprintf(req, "EXISTS");
	for (int k = 0; k < SHARD_KEYS; k++)
		n += (size_t)sprintf(req + n, " key:%d own:0:%d nope:%d", k, k, k);
	memcpy(req + n, "\r\n", 2);
	send_raw(c, req, n + 2);
	expect_reply(c, ":80");
	n = (size_t)sprintf(req, "DEL");
	for (int k = 0; k < SHARD_KEYS; k++)
		n += (size_t)sprintf(req + n, " key:%d", k);
	memcpy(req + n, "\r\n", 2);
	send_raw(c, req, n + 2);
	expect_reply(c, ":40");
	send_str(c, "EXISTS key:0 key:1 key:39\r\n");
	expect_reply(c, ":0");
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* ---- redis-cli and redis-benchmark ---------------------------------------------------------------- */

/* Run a shell command; its output (its last line's end removed) in out. */
static int run(char *out, size_t cap, const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	FILE *p;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(out, 1, cap - 1, p);
	out[n] = 0;
	if (n > 0 && out[n - 1] == '\n')
		out[--n] = 0;
	return pclose(p);
}

static void test_redis_tools(void **state)
{
	struct server s;
	char out[8192];

	(void)state;
	if (system("command -v redis-cli >/dev/null 2>&1 && "
		   "command -v redis-benchmark >/dev/null 2>&1") != 0) {
		printf("skipped: redis-cli and redis-benchmark are not installed (redis-tools)\n");
		exit(77);
	}
	s = server_start("--threads", "2", NULL);
	assert_int_equal(run(out, sizeof out, "redis-cli -p %d PING", s.port), 0);
	assert_string_equal(out, "PONG");
	assert_int_equal(run(out, sizeof out, "redis-cli -p %d SET greeting 'hello world'", s.port), 0);
	assert_string_equal(out, "OK");
	assert_int_equal(run(out, sizeof out, "redis-cli -p %d GET greeting", s.port), 0);
	assert_string_equal(out, "hello world");
	assert_int_equal(run(out, sizeof out, "redis-cli -p %d MSET a 1 b 2", s.port), 0);
	assert_int_equal(run(out, sizeof out, "redis-cli -p %d MGET a b c", s.port), 0);
	assert_string_equal(out, "1\n2\n"); /* (the nil: an empty line) */
	assert_int_equal(run(out, sizeof out, "redis-cli -p %d INCRBY a 41", s.port), 0);
	assert_string_equal(out, "42");
	assert_int_equal(run(out, sizeof out, "redis-cli -p %d EXPIRE a 60", s.port), 0);
	assert_string_equal(out, "1");
	assert_int_equal(run(out, sizeof out, "redis-cli -p %d FOO 2>&1", s.port), 0);
	assert_string_equal(out, "ERR unknown command 'FOO', with args beginning with: \n");
	/* commands on its standard input, one per line */
	assert_int_equal(run(out, sizeof out, "printf 'SET x 5\\nINCR x\\nDEL x a\\nTTL x\\n' | "
				"redis-cli -p %d", s.port), 0);
	assert_string_equal(out, "OK\n6\n2\n-2");
	/* redis-benchmark: every test it runs here, plain and pipelined; it
	 * exits at the first error answer */
	assert_int_equal(run(out, sizeof out, "redis-benchmark -p %d -c 20 -n 4000 -r 1000 -q "
				"-t ping,set,get,incr,mset 2>&1", s.port), 0);
	assert_null(strstr(out, "rror"));
	assert_null(strstr(out, "WARNING"));
	assert_int_equal(run(out, sizeof out, "redis-benchmark -p %d -c 50 -n 20000 -P 16 -q "
				"-t set,get 2>&1", s.port), 0);
	assert_null(strstr(out, "rror"));
	assert_non_null(strstr(out, "GET:"));
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_strings_and_counters),
	cmocka_unit_test(test_expiry),
	cmocka_unit_test(test_pipelining),
	cmocka_unit_test(test_inline_commands),
	cmocka_unit_test(test_binary_values),
	cmocka_unit_test(test_bad_input),
	cmocka_unit_test(test_request_limits),
	cmocka_unit_test(test_idle_timeout),
	cmocka_unit_test(test_sigterm_stop),
	cmocka_unit_test(test_sigterm_clients_never_read),
	cmocka_unit_test(test_view_on_sigusr1),
	cmocka_unit_test(test_sharded_over_contexts),
	cmocka_unit_test(test_redis_tools),
};

CO_TEST_MAIN(tests, 1)
