/* SPDX-License-Identifier: MIT */
/*
 * The example key-value server (docs/examples/kv/), run as a process
 * (CORING_KV_SERVER names it) and spoken to with a RESP client of this
 * file's own over blocking loopback sockets: every command and its errors
 * as Redis 7.0 answers them, a case per family (the expected replies of
 * those cases are what redis-server 7.0 answered to the same commands;
 * where the example differs by design, a comment says so), pipelining,
 * inline commands, bad input, the limits, the idle timeout, the stop on
 * SIGTERM (the commands received are answered, then the connections
 * close, exit status 0), keys sharded over four contexts under concurrent
 * clients (every increment counted), blocking pops served across shards
 * in order and raced by pushers and by the stop (every element popped
 * once), and redis-cli and redis-benchmark where they are installed
 * (skipped, 77, where not). Socket timeouts and waits are hang guards
 * only.
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
#include <math.h>
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

/* a string literal's bytes, zero bytes in it included */
#define SEND_LITERAL(c, lit) send_raw((c), (lit), sizeof(lit) - 1)

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
	/* a reply longer than out fails here rather than compare cut short */
	assert_true(strlen(line) < cap);
	memcpy(out, line, strlen(line) + 1);
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
	/* CONFIG GET as Redis 7.0: a pattern at least, several in one, each
	 * parameter answered once, save before appendonly */
	EXPECT(c, "-ERR wrong number of arguments for 'config|get' command", "CONFIG", "GET");
	EXPECT(c, "*4 $save $ $appendonly $no", "CONFIG", "GET", "appendonly", "save");
	EXPECT(c, "*2 $save $", "CONFIG", "GET", "save", "save", "nothing");
	EXPECT(c, "*0", "CONFIG", "GET", "nothing", "else");
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
	static const char nul_name[] = "ping\0x\r\n*1\r\n$6\r\nping\0x\r\nPING\r\n";
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
	/* a name with a NUL in it is not the name before the NUL, inline or
	 * not; the error shows it up to the NUL, as Redis's does */
	send_raw(c, nul_name, sizeof nul_name - 1);
	expect_reply(c, "-ERR unknown command 'ping', with args beginning with: ");
	expect_reply(c, "-ERR unknown command 'ping', with args beginning with: ");
	expect_reply(c, "+PONG");
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

/* 500 ms: the PING right after the connect is answered unless this thread
 * stalls that long (the sweep closes a connection idle for one to two
 * timeouts). */
static void test_idle_timeout(void **state)
{
	struct server s = server_start("--idle-timeout", "500", NULL);
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

/* --idle-timeout 0: never. A connection idle for five of the sweeper's
 * 100 ms ticks, which any timeout that rounds down to no tick would close
 * at the first, is still served. */
static void test_idle_timeout_never(void **state)
{
	struct server s = server_start("--idle-timeout", "0", NULL);
	struct client *c = client_open(s.port);

	(void)state;
	EXPECT(c, "+PONG", "PING");
	usleep(500 * 1000);
	EXPECT(c, "+PONG", "PING");
	client_close(c);
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

/* ---- bounds on hostile clients ------------------------------------------------------------- */

/* A line of the server's /proc/PID/status, in KiB: "VmRSS" (resident now)
 * or "VmHWM" (the most it has been resident). */
static long server_kb(const struct server *s, const char *field)
{
	char path[64], line[256];
	size_t n = strlen(field);
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/status", (int)s->pid);
	assert_non_null(f = fopen(path, "r"));
	while (fgets(line, sizeof line, f))
		if (strncmp(line, field, n) == 0 && line[n] == ':')
			kb = atol(line + n + 1);
	fclose(f);
	assert_true(kb > 0);
	return kb;
}

#define BIG_BYTES (1 << 20)

/* SET big to BIG_BYTES bytes. */
static void set_big(struct client *c)
{
	static char set[BIG_BYTES + 64];
	size_t n = (size_t)snprintf(set, 64, "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n", BIG_BYTES);

	memset(set + n, 'v', BIG_BYTES);
	memcpy(set + n + BIG_BYTES, "\r\n", 2);
	send_raw(c, set, n + BIG_BYTES + 2);
	expect_reply(c, "+OK");
}

/* An MGET of n times the key big (the request in req, its length). */
static size_t mget_big(char *req, int n)
{
	size_t len = (size_t)sprintf(req, "*%d\r\n$4\r\nMGET\r\n", n + 1);

	for (int i = 0; i < n; i++)
		len += (size_t)sprintf(req + len, "$3\r\nbig\r\n");
	return len;
}

/* How the connection fd ended: 1 if the server closed it (end of file or
 * a reset) before sending anything, 0 if bytes came. */
static int closed_unanswered(int fd)
{
	char b;
	ssize_t r;

	while ((r = recv(fd, &b, 1, 0)) < 0 && errno == EINTR)
		;
	assert_true(r >= 0 || errno == ECONNRESET); /* (not the hang guard's EAGAIN) */
	return r <= 0;
}

/* The number after "connected_clients:" in INFO clients. */
static long connected_clients(struct client *c)
{
	char got[8192], *p;

	send_str(c, "INFO clients\r\n");
	read_reply(c, got, sizeof got);
	assert_non_null(p = strstr(got, "connected_clients:"));
	return atol(p + strlen("connected_clients:"));
}

#define DEAF_MGET_KEYS 300
#define REPLY_LIMIT (8 << 20)

/*
 * A client that never reads asks for 300 MiB of answers in one MGET (300
 * times a 1 MiB value) from a server with --max-reply-buffer 8 MiB: the
 * server closes it without an answer once the answers built pass 8 MiB,
 * a good client's PING is answered, and the server was never resident at
 * more than 8 MiB plus a margin (24 MiB) over what it was before.
 * Without the limit it builds all 300 MiB (and sends them).
 */
static void test_reply_buffer_limit(void **state)
{
	struct server s = server_start("--max-reply-buffer", "8388608", NULL);
	struct client *c = client_open(s.port);
	static char req[DEAF_MGET_KEYS * 9 + 64];
	size_t n = mget_big(req, DEAF_MGET_KEYS);
	long before, peak;
	int deaf, closed;

	(void)state;
	set_big(c);
	before = server_kb(&s, "VmRSS");
	deaf = raw_connect(s.port);
	setsockopt(deaf, SOL_SOCKET, SO_RCVBUF, &(int){ 4096 }, sizeof(int));
	assert_int_equal(send(deaf, req, n, MSG_NOSIGNAL), (ssize_t)n);
	EXPECT(c, "+PONG", "PING"); /* served meanwhile */
	closed = closed_unanswered(deaf); /* (without the limit: its answers come) */
	peak = server_kb(&s, "VmHWM");
	print_message("      VmRSS %ld KiB before, VmHWM %ld KiB after the MGET\n", before, peak);
	assert_true(peak - before < (REPLY_LIMIT >> 10) + 24 * 1024);
	assert_true(closed);
	EXPECT(c, "+PONG", "PING");
	close(deaf);
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

#define SLOW_CHUNKS 64

/*
 * A client declares a bulk string of 1 GiB (--max-bulk allows it,
 * --max-request is 16 MiB) and sends it slowly, 1 MiB at a time: the
 * length is refused as it is read, with Redis's protocol error, and the
 * connection closed; the server was never resident at more than 16 MiB
 * over what it was before (without the check it buffers all it is sent:
 * 64 MiB here). An array count that cannot fit --max-request is refused
 * at once too.
 */
static void test_request_limit_as_bytes_arrive(void **state)
{
	struct server s = server_start("--max-bulk", "1073741824", NULL);
	static char chunk[1 << 20];
	struct client *c = client_open(s.port);
	long before, peak;
	int sent = 0;

	(void)state;
	EXPECT(c, "+PONG", "PING");
	before = server_kb(&s, "VmRSS");
	send_str(c, "*2\r\n$4\r\nECHO\r\n$1073741824\r\n");
	memset(chunk, 'x', sizeof chunk);
	for (; sent < SLOW_CHUNKS; sent++) {
		if (send(c->fd, chunk, sizeof chunk, MSG_NOSIGNAL) < 0)
			break; /* refused and closed: a reset */
		usleep(5000);
	}
	peak = server_kb(&s, "VmHWM");
	print_message("      %d MiB sent; VmRSS %ld KiB before, VmHWM %ld KiB after\n", sent, before,
		      peak);
	assert_true(peak - before < 16 * 1024);
	expect_reply(c, "-ERR Protocol error: invalid bulk length");
	assert_true(at_eof(c));
	client_close(c);
	/* 16 bytes an argument: 1048576 of them fill 16 MiB, one more cannot fit */
	EXPECT_CLOSE(&s, "*1048577\r\n", "-ERR Protocol error: invalid multibulk length");
	c = client_open(s.port);
	send_str(c, "*1048576\r\n$4\r\nPING\r\n");
	shutdown(c->fd, SHUT_WR);
	assert_true(at_eof(c)); /* (taken, then the peer's end) */
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* The server's VmRSS now is less than kb KiB above before, taken before
 * its rounds (both said). */
static void assert_rss_near(const struct server *s, long before, int rounds, long kb)
{
	long after = server_kb(s, "VmRSS");

	print_message("      VmRSS %ld KiB before, %ld KiB after %d rounds\n", before, after, rounds);
	assert_true(after - before < kb);
}

/* A server of threads contexts whose freed memory goes back as it is
 * freed (under ASan: without its quarantine). */
static struct server server_start_releasing(const char *threads)
{
	const char *asan = getenv("ASAN_OPTIONS");
	char opts[512];
	struct server s;

	snprintf(opts, sizeof opts, "%s%squarantine_size_mb=0", asan ? asan : "", asan ? ":" : "");
	setenv("ASAN_OPTIONS", opts, 1);
	s = server_start("--threads", threads, NULL);
	if (asan)
		setenv("ASAN_OPTIONS", asan, 1);
	else
		unsetenv("ASAN_OPTIONS");
	return s;
}

/* Under a sanitizer, whose server copies each answer's 8 MiB many times
 * slower, 50 rounds: a round holds 9 MiB (the 1 MiB argument and the
 * 8 MiB answer), so without the frees they would still leave some
 * 450 MiB, far past the 16 MiB the check allows; and glibc's mmap
 * threshold is not the allocator there. */
#define HOSTILE_ROUNDS (CO_TEST_SANITIZED ? 50 : 200)
#define RESET_KEYS 8

/* One round: a request left malformed after a 1 MiB argument, and an
 * MGET of 8 MiB reset after its first bytes. */
static void hostile_round(int port, const char *mget, size_t mn)
{
	static char bad[BIG_BYTES + 128];
	struct client *c = client_open(port);
	size_t n = (size_t)sprintf(bad, "*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n", BIG_BYTES);
	char b[16];
	ssize_t r;

	memset(bad + n, 'x', BIG_BYTES);
	n += BIG_BYTES;
	n += (size_t)sprintf(bad + n, "\r\n$x\r\n");
	send_raw(c, bad, n);
	expect_reply(c, "-ERR Protocol error: invalid bulk length");
	assert_true(at_eof(c));
	client_close(c);
	c = client_open(port);
	send_raw(c, mget, mn);
	for (size_t got = 0; got < sizeof b; got += r > 0 ? (size_t)r : 0) {
		r = recv(c->fd, b + got, sizeof b - got, 0);
		assert_true(r > 0 || (r < 0 && errno == EINTR));
	}
	setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &(struct linger){ 1, 0 }, sizeof(struct linger));
	client_close(c); /* a reset, mid-answer */
}

/*
 * 200 requests left malformed after a 1 MiB argument and 200 MGETs of
 * 8 MiB reset by the client mid-answer (50 of each under a sanitizer,
 * above), on a server of two contexts:
 * what those connections held is freed and goes back to the system, the
 * server's VmRSS after is within 16 MiB of before. Without the frees it
 * grows by 2 GiB; with glibc's moving mmap threshold (no mallopt in
 * main.c) by some 50 MiB, kept in its heaps.
 */
static void test_memory_released(void **state)
{
	struct server s = server_start_releasing("2");
	struct client *c = client_open(s.port);
	static char mget[RESET_KEYS * 9 + 64];
	size_t mn = mget_big(mget, RESET_KEYS);
	long before;

	(void)state;
	set_big(c);
	before = server_kb(&s, "VmRSS");
	for (int i = 0; i < HOSTILE_ROUNDS; i++)
		hostile_round(s.port, mget, mn);
	WAIT_UNTIL(connected_clients(c) == 1);
	assert_rss_near(&s, before, HOSTILE_ROUNDS, 16 * 1024);
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
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

/* ---- each family as Redis 7.0 answers (the replies: redis-server 7.0's) ------------------ */

/* the string commands (every reply here is redis-server's) */
static void test_strings_redis7(void **state)
{
	struct server s = server_start("--threads", "4", NULL);
	struct client *c = client_open(s.port);

	(void)state;
	/* SET and its options */
	EXPECT(c, "+OK", "SET", "k", "v");
	EXPECT(c, "$-1", "SET", "k", "v", "NX");
	EXPECT(c, "$v", "SET", "k", "v2", "XX", "GET");
	EXPECT(c, "$v2", "SET", "k", "v3", "NX", "GET");
	EXPECT(c, "$-1", "SET", "nk", "v", "XX", "GET");
	EXPECT(c, "$v2", "GET", "k");
	EXPECT(c, "-ERR syntax error", "SET", "k", "v", "EX", "10", "PX", "10");
	EXPECT(c, "-ERR syntax error", "SET", "k", "v", "KEEPTTL", "EX", "10");
	EXPECT(c, "-ERR syntax error", "SET", "k", "v", "EX", "10", "EXAT", "10");
	EXPECT(c, "-ERR invalid expire time in 'set' command", "SET", "k", "v", "EX", "0");
	EXPECT(c, "-ERR invalid expire time in 'set' command", "SET", "k", "v", "PX", "-1");
	EXPECT(c, "-ERR value is not an integer or out of range", "SET", "k", "v", "EX", "foo");
	EXPECT(c, "-ERR syntax error", "SET", "k", "v", "EX", "foo", "NX", "XX");
	EXPECT(c, "-ERR invalid expire time in 'set' command",
	       "SET", "k", "v", "EX", "9223372036854775");
	EXPECT(c, "-ERR invalid expire time in 'set' command",
	       "SET", "k", "v", "EX", "9223372036854776");
	EXPECT(c, "-ERR invalid expire time in 'set' command",
	       "SET", "k", "v", "PX", "9223372036854775807");
	EXPECT(c, "-ERR invalid expire time in 'set' command",
	       "SET", "k", "v", "EXAT", "9223372036854775807");
	EXPECT(c, "-ERR syntax error", "SET", "k", "v", "EX", "100", "NX", "XX");
	EXPECT(c, "$v2", "SET", "k", "v", "GET", "GET");
	EXPECT(c, "-ERR syntax error", "SET", "k", "v", "EX");
	EXPECT(c, "-ERR syntax error", "SET", "k", "v", "FOO");
	EXPECT(c, "+OK", "SET", "k", "v", "EXAT", "1");
	EXPECT(c, "$-1", "GET", "k");
	EXPECT(c, "+OK", "SET", "k", "v", "PXAT", "1");
	EXPECT(c, ":0", "EXISTS", "k");
	EXPECT(c, "+OK", "SET", "k", "v", "PXAT", "99999999999999");
	EXPECT(c, "+OK", "SET", "k", "v2", "KEEPTTL");
	EXPECT(c, ":100000000000", "EXPIRETIME", "k");
	EXPECT(c, "+OK", "SET", "k", "v3");
	EXPECT(c, ":-1", "EXPIRETIME", "k");
	/* GETEX */
	EXPECT(c, "$v3", "GETEX", "k");
	EXPECT(c, "$v3", "GETEX", "k", "EX", "100");
	EXPECT(c, "$v3", "GETEX", "k", "PERSIST");
	EXPECT(c, ":-1", "EXPIRETIME", "k");
	EXPECT(c, "$v3", "GETEX", "k", "EXAT", "99999999999");
	EXPECT(c, ":99999999999", "EXPIRETIME", "k");
	EXPECT(c, "-ERR syntax error", "GETEX", "k", "EX", "10", "PX", "10");
	EXPECT(c, "-ERR syntax error", "GETEX", "k", "PERSIST", "EX", "10");
	EXPECT(c, "-ERR syntax error", "GETEX", "k", "FOO");
	EXPECT(c, "-ERR invalid expire time in 'getex' command", "GETEX", "k", "EX", "0");
	EXPECT(c, "-ERR invalid expire time in 'getex' command", "GETEX", "k", "EX", "-5");
	EXPECT(c, "-ERR value is not an integer or out of range", "GETEX", "k", "EX", "x");
	EXPECT(c, "-ERR invalid expire time in 'getex' command",
	       "GETEX", "k", "EX", "9223372036854776");
	EXPECT(c, "$v3", "GETEX", "k", "PXAT", "1");
	EXPECT(c, "$-1", "GET", "k");
	EXPECT(c, "$-1", "GETEX", "nokey", "EX", "10");
	/* GETDEL, GETSET, SETEX, PSETEX, SETNX */
	EXPECT(c, "+OK", "SET", "k", "hello");
	EXPECT(c, "$hello", "GETDEL", "k");
	EXPECT(c, "$-1", "GETDEL", "k");
	EXPECT(c, "$-1", "GETSET", "k", "a");
	EXPECT(c, "$a", "GETSET", "k", "b");
	EXPECT(c, "+OK", "SETEX", "k", "10", "v");
	EXPECT(c, "-ERR invalid expire time in 'setex' command", "SETEX", "k", "0", "v");
	EXPECT(c, "-ERR invalid expire time in 'setex' command", "SETEX", "k", "-1", "v");
	EXPECT(c, "-ERR value is not an integer or out of range", "SETEX", "k", "x", "v");
	EXPECT(c, "-ERR invalid expire time in 'setex' command",
	       "SETEX", "k", "9223372036854776", "v");
	EXPECT(c, "-ERR invalid expire time in 'psetex' command", "PSETEX", "k", "0", "v");
	EXPECT(c, "-ERR invalid expire time in 'psetex' command",
	       "PSETEX", "k", "9223372036854775807", "v");
	EXPECT(c, ":0", "SETNX", "k", "v");
	EXPECT(c, ":1", "SETNX", "k2", "v");
	EXPECT(c, "$v", "GET", "k2");
	/* MSET, MSETNX, MGET */
	EXPECT(c, "+OK", "MSET", "a", "1", "b", "2");
	EXPECT(c, "-ERR wrong number of arguments for 'mset' command", "MSET", "a", "1", "b");
	EXPECT(c, ":0", "MSETNX", "a", "1", "c", "3");
	EXPECT(c, ":1", "MSETNX", "c", "3", "d", "4");
	EXPECT(c, ":1", "MSETNX", "e", "5", "e", "6");
	EXPECT(c, "*6 $1 $2 $3 $4 $6 $-1", "MGET", "a", "b", "c", "d", "e", "nope");
	/* APPEND, STRLEN, GETRANGE, SETRANGE */
	EXPECT(c, ":5", "APPEND", "ap", "hello");
	EXPECT(c, ":11", "APPEND", "ap", " world");
	EXPECT(c, "$hello world", "GET", "ap");
	EXPECT(c, ":11", "STRLEN", "ap");
	EXPECT(c, ":0", "STRLEN", "nope");
	EXPECT(c, "$hell", "GETRANGE", "ap", "0", "3");
	EXPECT(c, "$rld", "GETRANGE", "ap", "-3", "-1");
	EXPECT(c, "$hello world", "GETRANGE", "ap", "0", "-1");
	EXPECT(c, "$", "GETRANGE", "ap", "5", "2");
	EXPECT(c, "$", "GETRANGE", "ap", "-1", "-5");
	EXPECT(c, "$", "GETRANGE", "ap", "100", "200");
	EXPECT(c, "$h", "GETRANGE", "ap", "-100", "-50");
	EXPECT(c, "$hello world", "GETRANGE", "ap", "0", "9223372036854775807");
	EXPECT(c, "$hello world", "GETRANGE", "ap", "-9223372036854775808", "9223372036854775807");
	EXPECT(c, "$", "GETRANGE", "nope", "0", "1");
	EXPECT(c, "-ERR value is not an integer or out of range", "GETRANGE", "ap", "x", "1");
	EXPECT(c, ":7", "SETRANGE", "sr", "5", "hi");
	EXPECT(c, "$hi", "GETRANGE", "sr", "5", "6"); /* (after 5 zero bytes) */
	EXPECT(c, ":7", "STRLEN", "sr");
	EXPECT(c, ":7", "SETRANGE", "sr", "0", "HELLO");
	EXPECT(c, "-ERR offset is out of range", "SETRANGE", "sr", "-1", "x");
	EXPECT(c, "-ERR value is not an integer or out of range", "SETRANGE", "sr", "x", "x");
	EXPECT(c, "-ERR string exceeds maximum allowed size (proto-max-bulk-len)",
	       "SETRANGE", "sr", "536870912", "x");
	EXPECT(c, "-ERR string exceeds maximum allowed size (proto-max-bulk-len)",
	       "SETRANGE", "sr", "9223372036854775807", "x");
	EXPECT(c, ":0", "SETRANGE", "nope2", "0", "");
	EXPECT(c, ":0", "EXISTS", "nope2");
	EXPECT(c, ":7", "SETRANGE", "sr", "100", "");
	EXPECT(c, ":7", "STRLEN", "sr");
	EXPECT(c, ":7", "APPEND", "sr", "");
	/* counters */
	EXPECT(c, ":1", "INCR", "i");
	EXPECT(c, ":11", "INCRBY", "i", "10");
	EXPECT(c, ":10", "DECR", "i");
	EXPECT(c, ":5", "DECRBY", "i", "5");
	EXPECT(c, "-ERR increment or decrement would overflow", "INCRBY", "i", "9223372036854775807");
	EXPECT(c, ":-9223372036854775803", "INCRBY", "i", "-9223372036854775808");
	EXPECT(c, "-ERR decrement would overflow", "DECRBY", "i", "-9223372036854775808");
	EXPECT(c, "-ERR increment or decrement would overflow", "DECRBY", "i", "9223372036854775807");
	EXPECT(c, "+OK", "SET", "i", "9223372036854775807");
	EXPECT(c, ":9223372036854775807", "INCRBY", "i", "0");
	EXPECT(c, "-ERR increment or decrement would overflow", "INCR", "i");
	EXPECT(c, "+OK", "SET", "i", "-9223372036854775808");
	EXPECT(c, "-ERR increment or decrement would overflow", "DECR", "i");
	EXPECT(c, "-ERR value is not an integer or out of range", "INCRBY", "i", "x");
	EXPECT(c, "-ERR value is not an integer or out of range",
	       "INCRBY", "i", "18446744073709551615");
	EXPECT(c, "+OK", "SET", "i", " 1");
	EXPECT(c, "-ERR value is not an integer or out of range", "INCR", "i");
	EXPECT(c, "+OK", "SET", "i", "01");
	EXPECT(c, "-ERR value is not an integer or out of range", "INCR", "i");
	EXPECT(c, "+OK", "SET", "f", "10.50");
	EXPECT(c, "$10.6", "INCRBYFLOAT", "f", "0.1");
	EXPECT(c, "$-4989.39999999999999991", "INCRBYFLOAT", "f", "-5.0e3");
	EXPECT(c, "$10.60000000000000009", "INCRBYFLOAT", "f", "5.0e3");
	EXPECT(c, "-ERR value is not a valid float", "INCRBYFLOAT", "f", "abc");
	EXPECT(c, "-ERR increment would produce NaN or Infinity", "INCRBYFLOAT", "f", "inf");
	EXPECT(c, "-ERR value is not a valid float", "INCRBYFLOAT", "f", " 1");
	EXPECT(c, "$3", "INCRBYFLOAT", "nf", "3");
	EXPECT(c, "$153", "INCRBYFLOAT", "nf", "1.5e2");
	EXPECT(c, "$0.02439024390243902", "INCRBYFLOAT", "nz", "0.024390243902439025");
	EXPECT(c, "$0", "INCRBYFLOAT", "nz", "-0.024390243902439025"); /* no "-0" */
	EXPECT(c, "$0", "GET", "nz");
	EXPECT(c, "+OK", "SET", "nz", "-1e-30");
	EXPECT(c, "$0", "INCRBYFLOAT", "nz", "0");
	EXPECT(c, "$-0.00000000000000001", "INCRBYFLOAT", "nz", "-0.00000000000000001");
	EXPECT(c, "$0", "INCRBYFLOAT", "nz2", "1e-4940"); /* a subnormal long double */
	EXPECT(c, "-ERR value is not a valid float", "INCRBYFLOAT", "nz2", "1e-5000");
	EXPECT(c, "-ERR value is not a valid float", "INCRBYFLOAT", "nz2", "1e5000");
	EXPECT(c, "-ERR value is not a valid float", "INCRBYFLOAT", "ap", "1");
	EXPECT(c, "-ERR value is not an integer or out of range", "INCR", "ap");
	EXPECT(c, "-ERR value is not an integer or out of range", "INCR", "f");
	/* arity */
	EXPECT(c, "-ERR wrong number of arguments for 'get' command", "GET");
	EXPECT(c, "-ERR wrong number of arguments for 'set' command", "SET", "k");
	EXPECT(c, "-ERR wrong number of arguments for 'getex' command", "GETEX");
	EXPECT(c, "-ERR wrong number of arguments for 'incrby' command", "INCRBY", "k");
	EXPECT(c, "-ERR wrong number of arguments for 'mget' command", "MGET");
	EXPECT(c, "-ERR wrong number of arguments for 'append' command", "APPEND", "k");
	EXPECT(c, "-ERR wrong number of arguments for 'getrange' command", "GETRANGE", "k", "0");
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* times: relative and absolute, NX/XX/GT/LT, and the ones that overflow
 * (refused, the time unchanged) */
static void test_expiry_times(void **state)
{
	struct server s = server_start("--threads", "4", NULL);
	struct client *c = client_open(s.port);

	(void)state;
	/* a time that overflows is refused and changes nothing */
	EXPECT(c, "+OK", "SET", "foo", "bar");
	EXPECT(c, ":1", "PEXPIREAT", "foo", "99999999999999");
	EXPECT(c, "-ERR invalid expire time in 'expire' command", "EXPIRE", "foo", "9223370399119966");
	EXPECT(c, ":99999999999999", "PEXPIRETIME", "foo");
	EXPECT(c, "-ERR invalid expire time in 'expire' command", "EXPIRE", "foo", "9223372036854775");
	EXPECT(c, "-ERR invalid expire time in 'expire' command", "EXPIRE", "foo", "9223372036854776");
	EXPECT(c, "-ERR invalid expire time in 'expire' command",
	       "EXPIRE", "foo", "-9223372036854776");
	EXPECT(c, "-ERR invalid expire time in 'pexpire' command",
	       "PEXPIRE", "foo", "9223372036854775807");
	EXPECT(c, "-ERR invalid expire time in 'expireat' command",
	       "EXPIREAT", "foo", "9223372036854776");
	EXPECT(c, "-ERR invalid expire time in 'expireat' command",
	       "EXPIREAT", "foo", "9223372036854775807");
	EXPECT(c, "-ERR value is not an integer or out of range",
	       "EXPIRE", "foo", "18446744073709551615");
	EXPECT(c, ":99999999999999", "PEXPIRETIME", "foo");
	EXPECT(c, ":1", "EXPIRE", "foo", "-9223372036854775");
	EXPECT(c, ":0", "EXISTS", "foo");
	EXPECT(c, "+OK", "SET", "foo", "bar");
	/* absolute times, and what they answer */
	EXPECT(c, ":1", "PEXPIREAT", "foo", "9223372036854775807");
	EXPECT(c, ":9223372036854775807", "PEXPIRETIME", "foo");
	EXPECT(c, ":1", "EXPIREAT", "foo", "9223372036854775");
	EXPECT(c, ":9223372036854775", "EXPIRETIME", "foo");
	EXPECT(c, ":1", "PERSIST", "foo");
	EXPECT(c, ":0", "PERSIST", "foo");
	EXPECT(c, ":-1", "EXPIRETIME", "foo");
	EXPECT(c, ":-1", "PEXPIRETIME", "foo");
	EXPECT(c, ":-2", "EXPIRETIME", "nokey");
	EXPECT(c, ":-2", "PEXPIRETIME", "nokey");
	EXPECT(c, ":-2", "TTL", "nokey");
	EXPECT(c, ":-2", "PTTL", "nokey");
	EXPECT(c, ":-1", "TTL", "foo");
	EXPECT(c, ":-1", "PTTL", "foo");
	/* NX, XX, GT, LT (no time: GT never passes, LT always) */
	EXPECT(c, ":0", "EXPIREAT", "foo", "100000000000", "XX");
	EXPECT(c, ":0", "EXPIREAT", "foo", "100000000000", "GT");
	EXPECT(c, ":1", "EXPIREAT", "foo", "100000000000", "NX");
	EXPECT(c, ":0", "EXPIREAT", "foo", "100000000000", "NX");
	EXPECT(c, ":1", "EXPIREAT", "foo", "100000000000", "XX");
	EXPECT(c, ":0", "EXPIREAT", "foo", "90000000000", "GT");
	EXPECT(c, ":1", "EXPIREAT", "foo", "110000000000", "GT");
	EXPECT(c, ":0", "EXPIREAT", "foo", "120000000000", "LT");
	EXPECT(c, ":1", "EXPIREAT", "foo", "80000000000", "LT");
	EXPECT(c, ":80000000000", "EXPIRETIME", "foo");
	EXPECT(c, ":0", "PEXPIREAT", "foo", "80000000000000", "LT");
	EXPECT(c, ":0", "PEXPIREAT", "foo", "80000000000000", "GT");
	EXPECT(c, ":80000000000000", "PEXPIRETIME", "foo");
	EXPECT(c, "-ERR NX and XX, GT or LT options at the same time are not compatible",
	       "EXPIREAT", "foo", "10", "NX", "XX");
	EXPECT(c, "-ERR GT and LT options at the same time are not compatible",
	       "EXPIREAT", "foo", "10", "GT", "LT");
	EXPECT(c, "-ERR NX and XX, GT or LT options at the same time are not compatible",
	       "EXPIREAT", "foo", "10", "NX", "GT");
	EXPECT(c, "-ERR NX and XX, GT or LT options at the same time are not compatible",
	       "EXPIREAT", "foo", "10", "NX", "LT");
	EXPECT(c, "-ERR Unsupported option FOO", "EXPIREAT", "foo", "10", "FOO");
	EXPECT(c, "-ERR value is not an integer or out of range", "EXPIRE", "foo", "abc");
	EXPECT(c, "-ERR Unsupported option FOO", "EXPIRE", "foo", "abc", "FOO");
	EXPECT(c, "-ERR value is not an integer or out of range", "EXPIRE", "foo", "1.5");
	EXPECT(c, ":0", "EXPIREAT", "foo", "80000000000", "xx", "lt");
	EXPECT(c, ":80000000000", "EXPIRETIME", "foo");
	EXPECT(c, ":1", "PERSIST", "foo");
	EXPECT(c, ":1", "EXPIRE", "foo", "10", "LT");
	EXPECT(c, ":10", "TTL", "foo");
	EXPECT(c, ":1", "PERSIST", "foo");
	EXPECT(c, ":0", "EXPIRE", "foo", "10", "GT");
	EXPECT(c, ":0", "PEXPIRE", "foo", "10", "GT");
	/* a time gone: the key goes */
	EXPECT(c, ":1", "PEXPIRE", "foo", "0");
	EXPECT(c, ":0", "EXISTS", "foo");
	EXPECT(c, "+OK", "SET", "foo", "bar");
	EXPECT(c, ":1", "EXPIREAT", "foo", "1");
	EXPECT(c, ":0", "EXISTS", "foo");
	EXPECT(c, "+OK", "SET", "foo", "bar");
	EXPECT(c, ":1", "PEXPIREAT", "foo", "1");
	EXPECT(c, ":0", "EXISTS", "foo");
	EXPECT(c, "+OK", "SET", "foo", "bar");
	EXPECT(c, ":1", "EXPIRE", "foo", "-1");
	EXPECT(c, ":0", "EXISTS", "foo");
	EXPECT(c, "+OK", "SET", "foo", "bar");
	EXPECT(c, ":1", "EXPIREAT", "foo", "0");
	EXPECT(c, ":0", "EXISTS", "foo");
	EXPECT(c, ":0", "EXPIRE", "nokey", "10");
	EXPECT(c, ":0", "PEXPIRE", "nokey", "10");
	EXPECT(c, ":0", "EXPIREAT", "nokey", "10");
	EXPECT(c, ":0", "PERSIST", "nokey");
	/* arity */
	EXPECT(c, "-ERR wrong number of arguments for 'expire' command", "EXPIRE", "foo");
	EXPECT(c, "-ERR wrong number of arguments for 'pexpireat' command", "PEXPIREAT", "foo");
	EXPECT(c, "-ERR wrong number of arguments for 'ttl' command", "TTL");
	EXPECT(c, "-ERR wrong number of arguments for 'pttl' command", "PTTL", "a", "b");
	EXPECT(c, "-ERR wrong number of arguments for 'persist' command", "PERSIST");
	EXPECT(c, "-ERR wrong number of arguments for 'expiretime' command", "EXPIRETIME");
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* keys whatever their type, over four shards: RENAME, COPY, KEYS, SCAN ...
 * (two answers differ from a default redis-server's: there is one database) */
static void test_keyspace(void **state)
{
	struct server s = server_start("--threads", "4", NULL);
	struct client *c = client_open(s.port);

	(void)state;
	EXPECT(c, "+OK", "MSET", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5");
	EXPECT(c, ":2", "DEL", "a", "b", "nope");
	EXPECT(c, ":1", "UNLINK", "c", "nope");
	EXPECT(c, ":3", "EXISTS", "a", "b", "c", "d", "e", "d");
	EXPECT(c, "+string", "TYPE", "d");
	EXPECT(c, "+none", "TYPE", "nope");
	EXPECT(c, ":1", "LPUSH", "l", "x");
	EXPECT(c, ":1", "SADD", "s", "x");
	EXPECT(c, ":1", "HSET", "h", "f", "v");
	EXPECT(c, ":1", "ZADD", "z", "1", "m");
	EXPECT(c, "+list", "TYPE", "l");
	EXPECT(c, "+set", "TYPE", "s");
	EXPECT(c, "+hash", "TYPE", "h");
	EXPECT(c, "+zset", "TYPE", "z");
	/* RENAME, RENAMENX (keys on different shards) */
	EXPECT(c, "+OK", "RENAME", "d", "d2");
	EXPECT(c, "$4", "GET", "d2");
	EXPECT(c, "-ERR no such key", "RENAME", "nope", "x");
	EXPECT(c, "+OK", "RENAME", "d2", "d2");
	EXPECT(c, "-ERR no such key", "RENAME", "nope", "nope");
	EXPECT(c, "+OK", "RENAME", "e", "d2");
	EXPECT(c, "$5", "GET", "d2");
	EXPECT(c, ":0", "EXISTS", "e");
	EXPECT(c, ":1", "RENAMENX", "d2", "e");
	EXPECT(c, ":1", "RENAMENX", "e", "d2");
	EXPECT(c, "+OK", "SET", "e", "1");
	EXPECT(c, ":0", "RENAMENX", "e", "d2");
	EXPECT(c, "$1", "GET", "e");
	EXPECT(c, ":0", "RENAMENX", "d2", "d2");
	EXPECT(c, "-ERR no such key", "RENAMENX", "nope", "x");
	EXPECT(c, "+OK", "RENAME", "l", "l2");
	EXPECT(c, "*1 $x", "LRANGE", "l2", "0", "-1");
	EXPECT(c, ":0", "EXISTS", "l");
	EXPECT(c, "+OK", "SET", "t", "v");
	EXPECT(c, ":1", "PEXPIREAT", "t", "99999999999999");
	EXPECT(c, "+OK", "RENAME", "t", "t2");
	EXPECT(c, ":99999999999999", "PEXPIRETIME", "t2");
	/* COPY */
	EXPECT(c, ":1", "COPY", "t2", "t3");
	EXPECT(c, ":99999999999999", "PEXPIRETIME", "t3");
	EXPECT(c, "$v", "GET", "t3");
	EXPECT(c, ":0", "COPY", "t2", "t3");
	EXPECT(c, "+OK", "SET", "t2", "new");
	EXPECT(c, ":1", "COPY", "t2", "t3", "REPLACE");
	EXPECT(c, "$new", "GET", "t3");
	EXPECT(c, "-ERR source and destination objects are the same", "COPY", "t2", "t2");
	EXPECT(c, ":0", "COPY", "nope", "x");
	EXPECT(c, ":1", "COPY", "t2", "t4", "DB", "0");
	EXPECT(c, "-ERR DB index is out of range", "COPY", "t2", "t5", "DB", "1"); /* one database */
	EXPECT(c, "-ERR syntax error", "COPY", "t2", "t6", "FOO");
	EXPECT(c, "-ERR value is not an integer or out of range", "COPY", "t2", "t7", "DB", "x");
	EXPECT(c, "-ERR syntax error", "COPY", "t2", "t8", "DB");
	EXPECT(c, ":1", "COPY", "l2", "l3");
	EXPECT(c, ":2", "LPUSH", "l3", "y");
	EXPECT(c, "*2 $y $x", "LRANGE", "l3", "0", "-1");
	EXPECT(c, "*1 $x", "LRANGE", "l2", "0", "-1");
	EXPECT(c, ":1", "COPY", "s", "s2");
	EXPECT(c, "*1 $x", "SMEMBERS", "s2");
	EXPECT(c, ":1", "COPY", "h", "h2");
	EXPECT(c, "*2 $f $v", "HGETALL", "h2");
	EXPECT(c, ":1", "COPY", "z", "z2");
	EXPECT(c, "*2 $m $1", "ZRANGE", "z2", "0", "-1", "WITHSCORES");
	/* every shard: KEYS, DBSIZE, FLUSHDB, RANDOMKEY, SCAN */
	EXPECT(c, ":13", "DBSIZE");
	EXPECT(c, "*0", "KEYS", "nomatch*");
	EXPECT(c, "*1 $t4", "KEYS", "t[4-4]");
	EXPECT(c, "*1 $l3", "KEYS", "[l]3");
	EXPECT(c, "*1 $l3", "KEYS", "l[^2]");
	EXPECT(c, "*1 $h2", "KEYS", "h2");
	EXPECT(c, "+OK", "SELECT", "0");
	EXPECT(c, "-ERR DB index is out of range", "SELECT", "1"); /* one database */
	EXPECT(c, "-ERR value is not an integer or out of range", "SELECT", "x");
	EXPECT(c, "-ERR syntax error", "FLUSHDB", "FOO");
	EXPECT(c, "+OK", "FLUSHDB");
	EXPECT(c, ":0", "DBSIZE");
	EXPECT(c, "$-1", "RANDOMKEY");
	EXPECT(c, "*0", "KEYS", "*");
	EXPECT(c, "*2 $0 *0", "SCAN", "0");
	EXPECT(c, "+OK", "SET", "only", "1");
	EXPECT(c, "$only", "RANDOMKEY");
	EXPECT(c, "*1 $only", "KEYS", "*");
	EXPECT(c, "*2 $0 *1 $only", "SCAN", "0");
	EXPECT(c, "+OK", "FLUSHALL", "ASYNC");
	EXPECT(c, ":0", "DBSIZE");
	EXPECT(c, "-ERR invalid cursor", "SCAN", "x");
	EXPECT(c, "*2 $0 *0", "SCAN", "-1");
	EXPECT(c, "-ERR syntax error", "SCAN", "0", "COUNT", "0");
	EXPECT(c, "-ERR value is not an integer or out of range", "SCAN", "0", "COUNT", "x");
	EXPECT(c, "-ERR syntax error", "SCAN", "0", "MATCH");
	EXPECT(c, "-ERR syntax error", "SCAN", "0", "FOO", "bar");
	EXPECT(c, "-ERR wrong number of arguments for 'del' command", "DEL");
	EXPECT(c, "-ERR wrong number of arguments for 'rename' command", "RENAME", "a");
	EXPECT(c, "-ERR wrong number of arguments for 'copy' command", "COPY", "a");
	EXPECT(c, "-ERR wrong number of arguments for 'type' command", "TYPE");
	EXPECT(c, "-ERR wrong number of arguments for 'dbsize' command", "DBSIZE", "x");
	EXPECT(c, "-ERR wrong number of arguments for 'keys' command", "KEYS");
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* lists: ranges past the end, negative counts, LMOVE between shards, the
 * blocking pops that need not wait */
static void test_lists(void **state)
{
	struct server s = server_start("--threads", "4", NULL);
	struct client *c = client_open(s.port);

	(void)state;
	EXPECT(c, ":5", "RPUSH", "l", "a", "b", "c", "d", "e");
	EXPECT(c, ":6", "LPUSH", "l", "z");
	EXPECT(c, ":6", "LLEN", "l");
	EXPECT(c, "*6 $z $a $b $c $d $e", "LRANGE", "l", "0", "-1");
	EXPECT(c, "*6 $z $a $b $c $d $e", "LRANGE", "l", "-100", "100");
	EXPECT(c, "*0", "LRANGE", "l", "5", "2");
	EXPECT(c, "*2 $d $e", "LRANGE", "l", "-2", "-1");
	EXPECT(c, "*0", "LRANGE", "l", "10", "20");
	EXPECT(c, "*6 $z $a $b $c $d $e", "LRANGE", "l", "0", "9223372036854775807");
	EXPECT(c, "*1 $z", "LRANGE", "l", "-9223372036854775808", "0");
	EXPECT(c, "-ERR value is not an integer or out of range", "LRANGE", "l", "x", "1");
	EXPECT(c, "-ERR value is not an integer or out of range",
	       "LRANGE", "l", "0", "18446744073709551615");
	EXPECT(c, "*0", "LRANGE", "nope", "0", "-1");
	EXPECT(c, "$z", "LINDEX", "l", "0");
	EXPECT(c, "$e", "LINDEX", "l", "-1");
	EXPECT(c, "$-1", "LINDEX", "l", "100");
	EXPECT(c, "$-1", "LINDEX", "l", "-100");
	EXPECT(c, "$-1", "LINDEX", "l", "-9223372036854775808");
	EXPECT(c, "-ERR value is not an integer or out of range", "LINDEX", "l", "x");
	EXPECT(c, "$-1", "LINDEX", "nope", "0");
	EXPECT(c, "+OK", "LSET", "l", "0", "Z");
	EXPECT(c, "+OK", "LSET", "l", "-1", "E");
	EXPECT(c, "-ERR index out of range", "LSET", "l", "100", "x");
	EXPECT(c, "-ERR index out of range", "LSET", "l", "-9223372036854775808", "x");
	EXPECT(c, "-ERR no such key", "LSET", "nope", "0", "x");
	EXPECT(c, "-ERR value is not an integer or out of range", "LSET", "l", "x", "y");
	EXPECT(c, "*6 $Z $a $b $c $d $E", "LRANGE", "l", "0", "-1");
	/* LPOP, RPOP with counts */
	EXPECT(c, "$Z", "LPOP", "l");
	EXPECT(c, "$E", "RPOP", "l");
	EXPECT(c, "*2 $a $b", "LPOP", "l", "2");
	EXPECT(c, "*0", "RPOP", "l", "0");
	EXPECT(c, "-ERR value is out of range, must be positive", "LPOP", "l", "-1");
	EXPECT(c, "-ERR value is out of range, must be positive", "LPOP", "l", "x");
	EXPECT(c, "-ERR wrong number of arguments for 'lpop' command", "LPOP", "l", "1", "2");
	EXPECT(c, "$-1", "LPOP", "nope");
	EXPECT(c, "*-1", "LPOP", "nope", "2");
	EXPECT(c, "*-1", "RPOP", "nope", "0");
	EXPECT(c, "*2 $c $d", "LPOP", "l", "9223372036854775807");
	EXPECT(c, ":0", "EXISTS", "l");
	/* LREM, LTRIM */
	EXPECT(c, ":7", "RPUSH", "r", "a", "b", "a", "c", "a", "d", "a");
	EXPECT(c, ":2", "LREM", "r", "2", "a");
	EXPECT(c, "*5 $b $c $a $d $a", "LRANGE", "r", "0", "-1");
	EXPECT(c, ":1", "LREM", "r", "-1", "a");
	EXPECT(c, "*4 $b $c $a $d", "LRANGE", "r", "0", "-1");
	EXPECT(c, ":1", "LREM", "r", "0", "a");
	EXPECT(c, "*3 $b $c $d", "LRANGE", "r", "0", "-1");
	EXPECT(c, ":0", "LREM", "r", "0", "zz");
	EXPECT(c, "-ERR value is not an integer or out of range", "LREM", "r", "x", "a");
	EXPECT(c, ":0", "LREM", "nope", "0", "a");
	EXPECT(c, ":1", "LREM", "r", "-9223372036854775808", "b");
	EXPECT(c, "*2 $c $d", "LRANGE", "r", "0", "-1");
	EXPECT(c, ":6", "RPUSH", "t", "1", "2", "3", "4", "5", "6");
	EXPECT(c, "+OK", "LTRIM", "t", "1", "-2");
	EXPECT(c, "*4 $2 $3 $4 $5", "LRANGE", "t", "0", "-1");
	EXPECT(c, "+OK", "LTRIM", "t", "-100", "100");
	EXPECT(c, "*4 $2 $3 $4 $5", "LRANGE", "t", "0", "-1");
	EXPECT(c, "+OK", "LTRIM", "t", "5", "1");
	EXPECT(c, ":0", "EXISTS", "t");
	EXPECT(c, "+OK", "LTRIM", "nope", "0", "1");
	EXPECT(c, "-ERR value is not an integer or out of range", "LTRIM", "t", "x", "1");
	/* LMOVE (src and dst on different shards, and the same key) */
	EXPECT(c, ":3", "RPUSH", "src", "1", "2", "3");
	EXPECT(c, "$1", "LMOVE", "src", "dst", "LEFT", "RIGHT");
	EXPECT(c, "$3", "LMOVE", "src", "dst", "RIGHT", "LEFT");
	EXPECT(c, "*1 $2", "LRANGE", "src", "0", "-1");
	EXPECT(c, "*2 $3 $1", "LRANGE", "dst", "0", "-1");
	EXPECT(c, "$2", "LMOVE", "src", "src", "LEFT", "RIGHT");
	EXPECT(c, "$-1", "LMOVE", "nope", "dst", "LEFT", "LEFT");
	EXPECT(c, "-ERR syntax error", "LMOVE", "src", "dst", "UP", "LEFT");
	EXPECT(c, "$2", "LMOVE", "src", "dst", "left", "right");
	EXPECT(c, "+OK", "SET", "str", "v");
	EXPECT(c, "$-1", "LMOVE", "src", "str", "LEFT", "LEFT");
	EXPECT(c, "*0", "LRANGE", "src", "0", "-1");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "LMOVE", "str", "dst", "LEFT", "LEFT");
	EXPECT(c, "$-1", "LMOVE", "nope", "str", "LEFT", "LEFT");
	EXPECT(c, "*3 $3 $1 $2", "LRANGE", "dst", "0", "-1");
	EXPECT(c, "$2", "LMOVE", "dst", "dst2", "RIGHT", "RIGHT");
	EXPECT(c, "$1", "LMOVE", "dst", "dst2", "RIGHT", "RIGHT");
	EXPECT(c, "$3", "LMOVE", "dst", "dst2", "RIGHT", "RIGHT");
	EXPECT(c, "$-1", "LMOVE", "dst", "dst2", "RIGHT", "RIGHT");
	EXPECT(c, ":0", "EXISTS", "dst");
	EXPECT(c, "*3 $2 $1 $3", "LRANGE", "dst2", "0", "-1");
	/* blocking pops that need not wait, and their errors */
	EXPECT(c, "*-1", "BLPOP", "nope", "0.01");
	EXPECT(c, "*-1", "BRPOP", "nope", "0.001");
	EXPECT(c, "-ERR timeout is negative", "BLPOP", "nope", "-1");
	EXPECT(c, "-ERR timeout is not a float or out of range", "BLPOP", "nope", "x");
	EXPECT(c, "-ERR timeout is negative", "BLPOP", "nope", "inf");
	EXPECT(c, "-ERR timeout is negative", "BLPOP", "nope", "1e100");
	EXPECT(c, "-ERR timeout is not a float or out of range", "BLPOP", "nope", " 1");
	EXPECT(c, "*-1", "BLMOVE", "nope", "dst", "LEFT", "LEFT", "0.01");
	EXPECT(c, "-ERR timeout is negative", "BLMOVE", "src", "dst", "LEFT", "LEFT", "-1");
	EXPECT(c, "-ERR syntax error", "BLMOVE", "src", "dst", "UP", "LEFT", "1");
	EXPECT(c, ":3", "RPUSH", "bl", "x", "y", "z");
	EXPECT(c, "*2 $bl $x", "BLPOP", "nope", "bl", "1");
	EXPECT(c, "*2 $bl $z", "BRPOP", "bl", "1");
	EXPECT(c, "$y", "BLMOVE", "bl", "dst3", "LEFT", "LEFT", "1");
	EXPECT(c, "*1 $y", "LRANGE", "dst3", "0", "-1");
	EXPECT(c, ":0", "EXISTS", "bl");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "BLPOP", "str", "1");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "BLPOP", "nope", "str", "1");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "BLMOVE", "str", "dst", "LEFT", "LEFT", "1");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "BLMOVE", "dst2", "str", "LEFT", "LEFT", "1");
	EXPECT(c, "*3 $2 $1 $3", "LRANGE", "dst2", "0", "-1");
	EXPECT(c, "-ERR wrong number of arguments for 'lpush' command", "LPUSH");
	EXPECT(c, "-ERR wrong number of arguments for 'rpush' command", "RPUSH", "k");
	EXPECT(c, "-ERR wrong number of arguments for 'lpop' command", "LPOP");
	EXPECT(c, "-ERR wrong number of arguments for 'lrange' command", "LRANGE", "k", "0");
	EXPECT(c, "-ERR wrong number of arguments for 'blpop' command", "BLPOP", "k");
	EXPECT(c, "-ERR wrong number of arguments for 'blmove' command",
	       "BLMOVE", "a", "b", "LEFT", "LEFT");
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* sets, hashes and sorted sets */
static void test_sets_hashes_zsets(void **state)
{
	struct server s = server_start("--threads", "4", NULL);
	struct client *c = client_open(s.port);

	(void)state;
	EXPECT(c, ":3", "SADD", "s", "a", "b", "c", "a");
	EXPECT(c, ":1", "SADD", "s", "d");
	EXPECT(c, ":4", "SCARD", "s");
	EXPECT(c, ":1", "SISMEMBER", "s", "a");
	EXPECT(c, ":0", "SISMEMBER", "s", "zz");
	EXPECT(c, ":0", "SISMEMBER", "nope", "a");
	EXPECT(c, ":1", "SREM", "s", "a", "zz");
	EXPECT(c, ":2", "SREM", "s", "b", "c");
	EXPECT(c, "*1 $d", "SMEMBERS", "s");
	EXPECT(c, ":0", "SCARD", "nope");
	EXPECT(c, "*0", "SMEMBERS", "nope");
	EXPECT(c, "$-1", "SPOP", "nope");
	EXPECT(c, "*0", "SPOP", "nope", "2");
	EXPECT(c, "*0", "SPOP", "s", "0");
	EXPECT(c, "-ERR value is out of range, must be positive", "SPOP", "s", "-1");
	EXPECT(c, "-ERR value is out of range, must be positive", "SPOP", "s", "x");
	EXPECT(c, "-ERR syntax error", "SPOP", "s", "1", "2");
	EXPECT(c, "*1 $d", "SPOP", "s", "10");
	EXPECT(c, ":0", "EXISTS", "s");
	EXPECT(c, ":1", "SADD", "s1", "x");
	EXPECT(c, "$x", "SPOP", "s1");
	EXPECT(c, ":0", "EXISTS", "s1");
	EXPECT(c, ":0", "SREM", "nope", "a");
	/* hashes */
	EXPECT(c, ":2", "HSET", "h", "f1", "v1", "f2", "v2");
	EXPECT(c, ":1", "HSET", "h", "f1", "V1", "f3", "v3");
	EXPECT(c, "-ERR wrong number of arguments for 'hset' command", "HSET", "h", "f1");
	EXPECT(c, "-ERR wrong number of arguments for 'hset' command", "HSET", "h", "f1", "v1", "f2");
	EXPECT(c, "$V1", "HGET", "h", "f1");
	EXPECT(c, "$-1", "HGET", "h", "nope");
	EXPECT(c, "$-1", "HGET", "nope", "f");
	EXPECT(c, ":3", "HLEN", "h");
	EXPECT(c, ":0", "HLEN", "nope");
	EXPECT(c, ":1", "HDEL", "h", "f1", "nope");
	EXPECT(c, ":2", "HDEL", "h", "f2", "f3");
	EXPECT(c, ":0", "EXISTS", "h");
	EXPECT(c, ":0", "HDEL", "nope", "f");
	EXPECT(c, "*0", "HGETALL", "nope");
	EXPECT(c, ":1", "HSET", "h2", "a", "1");
	EXPECT(c, "*2 $a $1", "HGETALL", "h2");
	/* sorted sets */
	EXPECT(c, ":3", "ZADD", "z", "1", "a", "2", "b", "3", "c");
	EXPECT(c, ":0", "ZADD", "z", "1.5", "a");
	EXPECT(c, ":1", "ZADD", "z", "NX", "5", "a", "4", "d");
	EXPECT(c, ":0", "ZADD", "z", "XX", "6", "a", "5", "e");
	EXPECT(c, ":2", "ZADD", "z", "CH", "7", "a", "5", "e");
	EXPECT(c, ":0", "ZADD", "z", "GT", "1", "a");
	EXPECT(c, ":1", "ZADD", "z", "GT", "CH", "8", "a");
	EXPECT(c, ":0", "ZADD", "z", "LT", "CH", "9", "a");
	EXPECT(c, "$4", "ZADD", "z", "INCR", "2", "b");
	EXPECT(c, "$-1", "ZADD", "z", "INCR", "NX", "2", "b");
	EXPECT(c, "$-1", "ZADD", "z", "GT", "INCR", "-1", "b");
	EXPECT(c, "$-1", "ZADD", "z", "GT", "INCR", "0", "b");
	EXPECT(c, "$4", "ZADD", "z", "INCR", "0", "b");
	EXPECT(c, "-ERR INCR option supports a single increment-element pair",
	       "ZADD", "z", "INCR", "2", "b", "3", "c");
	EXPECT(c, "-ERR XX and NX options at the same time are not compatible",
	       "ZADD", "z", "NX", "XX", "1", "a");
	EXPECT(c, "-ERR GT, LT, and/or NX options at the same time are not compatible",
	       "ZADD", "z", "NX", "GT", "1", "a");
	EXPECT(c, "-ERR GT, LT, and/or NX options at the same time are not compatible",
	       "ZADD", "z", "GT", "LT", "1", "a");
	EXPECT(c, "-ERR syntax error", "ZADD", "z", "1", "a", "2");
	EXPECT(c, "-ERR wrong number of arguments for 'zadd' command", "ZADD", "z", "NX");
	EXPECT(c, "-ERR value is not a valid float", "ZADD", "z", "x", "a");
	EXPECT(c, "-ERR value is not a valid float", "ZADD", "z", "nan", "a");
	EXPECT(c, ":2", "ZADD", "z", "inf", "i", "-inf", "ni");
	EXPECT(c, ":1", "ZADD", "z", "0.1", "p");
	EXPECT(c, "$0.10000000000000001", "ZSCORE", "z", "p");
	EXPECT(c, "$inf", "ZSCORE", "z", "i");
	EXPECT(c, "$-inf", "ZSCORE", "z", "ni");
	EXPECT(c, "$-1", "ZSCORE", "z", "nope");
	EXPECT(c, "$-1", "ZSCORE", "nope", "a");
	EXPECT(c, "-ERR resulting score is not a number (NaN)", "ZADD", "z", "INCR", "inf", "ni");
	EXPECT(c, ":1", "ZADD", "z", "1e300", "big");
	EXPECT(c, "$1.0000000000000001e+300", "ZSCORE", "z", "big");
	EXPECT(c, ":1", "ZADD", "z", "9223372036854775807", "ll");
	EXPECT(c, "$9.2233720368547758e+18", "ZSCORE", "z", "ll");
	EXPECT(c, ":10", "ZCARD", "z");
	EXPECT(c, ":0", "ZCARD", "nope");
	EXPECT(c, "*10 $ni $p $c $b $d $e $a $ll $big $i", "ZRANGE", "z", "0", "-1");
	EXPECT(c, "*20 $ni $-inf $p $0.10000000000000001 $c $3 $b $4 $d $4 $e $5 $a $8"
		  " $ll $9.2233720368547758e+18 $big $1.0000000000000001e+300 $i $inf",
	       "ZRANGE", "z", "0", "-1", "WITHSCORES");
	EXPECT(c, "*10 $i $big $ll $a $e $d $b $c $p $ni", "ZRANGE", "z", "0", "-1", "REV");
	EXPECT(c, "*4 $p $0.10000000000000001 $ni $-inf",
	       "ZRANGE", "z", "-2", "-1", "WITHSCORES", "REV");
	EXPECT(c, "*0", "ZRANGE", "z", "5", "2");
	EXPECT(c, "*10 $ni $p $c $b $d $e $a $ll $big $i", "ZRANGE", "z", "-100", "100");
	EXPECT(c, "-ERR value is not an integer or out of range", "ZRANGE", "z", "x", "1");
	EXPECT(c, "*0", "ZRANGE", "nope", "0", "-1");
	EXPECT(c, "-ERR syntax error", "ZRANGE", "z", "0", "1", "FOO"); /* (options: zrange_options) */
	EXPECT(c, "*2 $ni $-inf", "ZPOPMIN", "z");
	EXPECT(c, "*4 $p $0.10000000000000001 $c $3", "ZPOPMIN", "z", "2");
	EXPECT(c, "*0", "ZPOPMIN", "z", "0");
	EXPECT(c, "-ERR value is out of range, must be positive", "ZPOPMIN", "z", "-1");
	EXPECT(c, "-ERR syntax error", "ZPOPMIN", "z", "1", "2");
	EXPECT(c, "*0", "ZPOPMIN", "nope");
	EXPECT(c, "*0", "ZPOPMIN", "nope", "2");
	EXPECT(c, "*14 $b $4 $d $4 $e $5 $a $8 $ll $9.2233720368547758e+18 $big"
		  " $1.0000000000000001e+300 $i $inf",
	       "ZPOPMIN", "z", "9223372036854775807");
	EXPECT(c, ":0", "EXISTS", "z");
	EXPECT(c, ":0", "ZADD", "z", "XX", "1", "a");
	EXPECT(c, ":0", "EXISTS", "z");
	EXPECT(c, "$-1", "ZADD", "z", "XX", "INCR", "1", "a");
	/* scores as strtod reads them: a subnormal one kept, one past the range
	 * or that underflows to 0 refused, any length */
	EXPECT(c, ":2", "ZADD", "zf", "9.8813129168249309e-323", "a", "4e-320", "b");
	EXPECT(c, "$9.8813129168249309e-323", "ZSCORE", "zf", "a");
	EXPECT(c, "-ERR value is not a valid float", "ZADD", "zf", "1e400", "c");
	EXPECT(c, "-ERR value is not a valid float", "ZADD", "zf", "-1.8e308", "c");
	EXPECT(c, "-ERR value is not a valid float", "ZADD", "zf", "1e-400", "c");
	EXPECT(c, "-ERR value is not a valid float", "ZADD", "zf", "INCR", "1e400", "a");
	EXPECT(c, ":1", "ZADD", "zf", "1.0000000000000000000000000000000000000000000000000000000000000000"
		  "00000000000000000000000000000000000000000000000000000000000000000000000001", "c");
	EXPECT(c, "$1", "ZSCORE", "zf", "c");
	EXPECT(c, "-ERR value is not a valid float", "ZADD", "zf", "1.000000000000000000000000000000000"
		  "000000000000000000000000000000000000000000000000000000000000000000x", "c");
	EXPECT(c, "-ERR wrong number of arguments for 'sadd' command", "SADD");
	EXPECT(c, "-ERR wrong number of arguments for 'hget' command", "HGET", "h");
	EXPECT(c, "-ERR wrong number of arguments for 'zadd' command", "ZADD", "z");
	EXPECT(c, "-ERR wrong number of arguments for 'zscore' command", "ZSCORE", "z");
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* a pattern of many '*'s against a long key that it does not match:
 * answered at once, as Redis answers it (a matcher that tries every split
 * takes hours, its shard stuck) */
static void test_keys_many_stars(void **state)
{
	static const char pat[] = "a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
	struct server s = server_start("--threads", "2", NULL);
	struct client *c = client_open(s.port);

	(void)state;
	EXPECT(c, "+OK", "SET", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "1");
	EXPECT(c, "*0", "KEYS", pat);
	EXPECT(c, "*2 $0 *0", "SCAN", "0", "MATCH", pat, "COUNT", "100");
	EXPECT(c, "*1 $aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "KEYS", "a*a*a*a*a*a*a*a*a*a*a*a*a");
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* ZRANGE by score and by name, REV, LIMIT, WITHSCORES: every edge of
 * Redis 7.0's ZRANGE (the replies: redis-server 7.0.15's) */
static void test_zrange_options(void **state)
{
	static const char limit_err[] = "-ERR syntax error, LIMIT is only supported in "
					"combination with either BYSCORE or BYLEX";
	static const char lex_scores_err[] = "-ERR syntax error, WITHSCORES not supported in "
					     "combination with BYLEX";
	static const char not_float[] = "-ERR min or max is not a float";
	static const char not_lex[] = "-ERR min or max not valid string range item";
	static const char all[] = "*9 $ni $h $a $b $bb $c $d $e $pi";
	static const char all_lex[] = "*11 $ $a $aa $ab $b $ba $c $d $e $f $g";
	static const struct {
		const char *reply, *min, *max;
	} byscore[] = {
		{ "*4 $a $b $bb $c", "1", "3" },
		{ "*3 $b $bb $c", "(1", "3" },
		{ "*3 $a $b $bb", "1", "(3" },
		{ "*2 $b $bb", "(1", "(3" },
		{ "*2 $b $bb", "2", "2" },
		{ "*0", "(2", "2" },
		{ "*0", "(2", "(2" },
		{ "*0", "3", "1" },
		{ "*9 $ni $h $a $b $bb $c $d $e $pi", "-inf", "+inf" },
		{ "*7 $h $a $b $bb $c $d $e", "(-inf", "(+inf" },
		{ "*5 $h $a $b $bb $c", "(", "3" }, /* (0 */
		{ "*5 $h $a $b $bb $c", "", "3" },
		{ "*4 $a $b $bb $c", " 1", "3" },
		{ "*4 $a $b $bb $c", "0x1", "3" },
		{ "*1 $pi", "1e400", "inf" },
		{ "*1 $ni", "-1e400", "1e-400" },
		{ "-ERR min or max is not a float", "x", "3" },
		{ "-ERR min or max is not a float", "1", "x" },
		{ "-ERR min or max is not a float", "nan", "3" },
		{ "-ERR min or max is not a float", "1 ", "3" },
		{ "-ERR min or max is not a float", "((1", "3" },
	};
	struct server s = server_start("--threads", "4", NULL);
	struct client *c = client_open(s.port);

	(void)state;
	EXPECT(c, ":9", "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "-inf", "ni",
	       "inf", "pi", "2", "bb", "0.5", "h");
	/* BYSCORE: "(" excludes, -inf and +inf, numbers as strtod reads them */
	for (size_t i = 0; i < sizeof byscore / sizeof byscore[0]; i++)
		EXPECT(c, byscore[i].reply, "ZRANGE", "z", byscore[i].min, byscore[i].max, "BYSCORE");
	EXPECT(c, "*18 $ni $-inf $h $0.5 $a $1 $b $2 $bb $2 $c $3 $d $4 $e $5 $pi $inf",
	       "ZRANGE", "z", "-inf", "inf", "BYSCORE", "WITHSCORES");
	/* REV: max first */
	EXPECT(c, "*4 $c $bb $b $a", "ZRANGE", "z", "3", "1", "BYSCORE", "REV");
	EXPECT(c, "*6 $bb $2 $b $2 $a $1",
	       "ZRANGE", "z", "(3", "1", "BYSCORE", "REV", "WITHSCORES");
	EXPECT(c, "*2 $bb $b", "ZRANGE", "z", "(3", "(1", "BYSCORE", "REV");
	EXPECT(c, "*9 $pi $e $d $c $bb $b $a $h $ni",
	       "ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV");
	EXPECT(c, "*0", "ZRANGE", "z", "1", "3", "BYSCORE", "REV");
	EXPECT(c, "*0", "ZRANGE", "z", "-inf", "inf", "BYSCORE", "REV");
	EXPECT(c, "*18 $pi $inf $e $5 $d $4 $c $3 $bb $2 $b $2 $a $1 $h $0.5 $ni $-inf",
	       "ZRANGE", "z", "0", "-1", "REV", "WITHSCORES");
	EXPECT(c, "*2 $h $ni", "ZRANGE", "z", "-2", "-1", "REV");
	EXPECT(c, "*9 $pi $e $d $c $bb $b $a $h $ni",
	       "ZRANGE", "z", "-9223372036854775808", "9223372036854775807", "REV");
	EXPECT(c, "*0", "ZRANGE", "z", "9223372036854775807", "-9223372036854775808");
	/* LIMIT offset count: a negative count is all, a negative offset none */
	EXPECT(c, "*2 $a $b", "ZRANGE", "z", "1", "3", "BYSCORE", "LIMIT", "0", "2");
	EXPECT(c, "*2 $b $bb", "ZRANGE", "z", "1", "3", "BYSCORE", "LIMIT", "1", "2");
	EXPECT(c, "*3 $b $bb $c", "ZRANGE", "z", "1", "3", "BYSCORE", "LIMIT", "1", "-1");
	EXPECT(c, "*3 $b $bb $c", "ZRANGE", "z", "1", "3", "BYSCORE", "LIMIT", "1", "-5");
	EXPECT(c, "*1 $c", "ZRANGE", "z", "1", "3", "BYSCORE", "LIMIT", "3", "2");
	EXPECT(c, "*0", "ZRANGE", "z", "1", "3", "BYSCORE", "LIMIT", "4", "2");
	EXPECT(c, "*0", "ZRANGE", "z", "1", "3", "BYSCORE", "LIMIT", "100", "2");
	EXPECT(c, "*0", "ZRANGE", "z", "1", "3", "BYSCORE", "LIMIT", "0", "0");
	EXPECT(c, "*0", "ZRANGE", "z", "1", "3", "BYSCORE", "LIMIT", "-1", "2");
	EXPECT(c, "*0", "ZRANGE", "z", "1", "3", "BYSCORE", "LIMIT", "-1", "-1");
	EXPECT(c, "*1 $pi", "ZRANGE", "z", "-inf", "inf", "BYSCORE", "LIMIT", "8", "-1");
	EXPECT(c, "*2 $ni $-inf",
	       "ZRANGE", "z", "inf", "-inf", "BYSCORE", "LIMIT", "8", "-1", "REV", "WITHSCORES");
	EXPECT(c, "*4 $bb $2 $b $2",
	       "ZRANGE", "z", "3", "1", "BYSCORE", "REV", "LIMIT", "1", "2", "WITHSCORES");
	EXPECT(c, "*1 $c", "ZRANGE", "z", "3", "1", "BYSCORE", "REV", "LIMIT", "0", "1");
	EXPECT(c, "*6 $c $3 $bb $2 $b $2",
	       "ZRANGE", "z", "5", "-inf", "BYSCORE", "REV", "LIMIT", "2", "3", "WITHSCORES");
	EXPECT(c, "*1 $b",
	       "ZRANGE", "z", "1", "2", "BYSCORE", "LIMIT", "0", "1", "LIMIT", "1", "1");
	EXPECT(c, "*0", "ZRANGE", "z", "1", "3", "BYSCORE", "LIMIT", "9223372036854775807",
	       "9223372036854775807");
	EXPECT(c, "*0", "ZRANGE", "z", "-inf", "inf", "BYSCORE", "LIMIT", "9223372036854775807",
	       "1", "REV");
	EXPECT(c, "*0", "ZRANGE", "z", "-inf", "inf", "BYSCORE", "LIMIT", "-9223372036854775808",
	       "1", "REV");
	EXPECT(c, "*0", "ZRANGE", "z", "1", "3", "BYSCORE", "LIMIT", "-9223372036854775808",
	       "-9223372036854775808");
	EXPECT(c, "-ERR value is not an integer or out of range",
	       "ZRANGE", "z", "1", "3", "BYSCORE", "LIMIT", "9223372036854775808", "1");
	EXPECT(c, "-ERR value is not an integer or out of range",
	       "ZRANGE", "z", "1", "3", "BYSCORE", "LIMIT", "1", "x");
	EXPECT(c, "-ERR syntax error", "ZRANGE", "z", "1", "3", "BYSCORE", "LIMIT", "1");
	EXPECT(c, "-ERR syntax error", "ZRANGE", "z", "1", "2", "LIMIT", "1", "2", "3");
	/* LIMIT by index: refused, but for a count of -1 */
	EXPECT(c, limit_err, "ZRANGE", "z", "0", "-1", "LIMIT", "0", "1");
	EXPECT(c, limit_err, "ZRANGE", "z", "0", "-1", "LIMIT", "0", "-2");
	EXPECT(c, limit_err, "ZRANGE", "z", "0", "-1", "REV", "LIMIT", "0", "1");
	EXPECT(c, limit_err, "ZRANGE", "z", "a", "b", "LIMIT", "0", "1");
	EXPECT(c, all, "ZRANGE", "z", "0", "-1", "LIMIT", "5", "-1");
	/* options twice, and the order of the errors */
	EXPECT(c, "*4 $ni $-inf $h $0.5", "ZRANGE", "z", "0", "1", "WITHSCORES", "WITHSCORES");
	EXPECT(c, "-ERR syntax error", "ZRANGE", "z", "0", "-1", "REV", "REV");
	EXPECT(c, "-ERR syntax error", "ZRANGE", "z", "1", "2", "BYSCORE", "BYSCORE");
	EXPECT(c, "-ERR syntax error", "ZRANGE", "z", "1", "2", "BYLEX", "BYSCORE");
	EXPECT(c, "-ERR value is not an integer or out of range",
	       "ZRANGE", "z", "1", "2", "BYSCORE", "LIMIT", "x", "1", "foo");
	EXPECT(c, "-ERR syntax error",
	       "ZRANGE", "z", "1", "2", "BYSCORE", "foo", "LIMIT", "x", "1");
	EXPECT(c, "-ERR value is not an integer or out of range",
	       "ZRANGE", "z", "x", "2", "BYSCORE", "LIMIT", "x", "1");
	EXPECT(c, "-ERR syntax error", "ZRANGE", "z", "x", "2", "foo");
	EXPECT(c, "*0", "ZRANGE", "nokey", "1", "2", "BYSCORE", "LIMIT", "0", "1", "WITHSCORES");
	EXPECT(c, not_float, "ZRANGE", "nokey", "x", "2", "BYSCORE");
	EXPECT(c, "+OK", "SET", "str", "v");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "ZRANGE", "str", "1", "2", "BYSCORE");
	EXPECT(c, not_float, "ZRANGE", "str", "x", "2", "BYSCORE");
	EXPECT(c, limit_err, "ZRANGE", "str", "0", "1", "LIMIT", "0", "1");
	EXPECT(c, not_lex, "ZRANGE", "str", "a", "b", "BYLEX");
	EXPECT(c, lex_scores_err, "ZRANGE", "str", "[a", "[b", "BYLEX", "WITHSCORES");
	/* BYLEX: "[" includes, "(" excludes, "-" and "+" */
	EXPECT(c, ":11", "ZADD", "l", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e", "0", "f",
	       "0", "g", "0", "", "0", "aa", "0", "ab", "0", "ba");
	EXPECT(c, all_lex, "ZRANGE", "l", "-", "+", "BYLEX");
	EXPECT(c, all_lex, "ZRANGE", "l", "[", "+", "BYLEX");
	EXPECT(c, all_lex, "ZRANGE", "l", "0", "0", "BYSCORE");
	EXPECT(c, "*0", "ZRANGE", "l", "(0", "0", "BYSCORE");
	EXPECT(c, "*10 $a $aa $ab $b $ba $c $d $e $f $g", "ZRANGE", "l", "(", "+", "BYLEX");
	EXPECT(c, "*4 $b $ba $c $d", "ZRANGE", "l", "[b", "[d", "BYLEX");
	EXPECT(c, "*3 $ba $c $d", "ZRANGE", "l", "(b", "[d", "BYLEX");
	EXPECT(c, "*3 $b $ba $c", "ZRANGE", "l", "[b", "(d", "BYLEX");
	EXPECT(c, "*2 $ba $c", "ZRANGE", "l", "(b", "(d", "BYLEX");
	EXPECT(c, "*1 $b", "ZRANGE", "l", "[b", "[b", "BYLEX");
	EXPECT(c, "*0", "ZRANGE", "l", "[b", "(b", "BYLEX");
	EXPECT(c, "*0", "ZRANGE", "l", "(b", "(b", "BYLEX");
	EXPECT(c, "*2 $b $ba", "ZRANGE", "l", "[b", "[ba", "BYLEX");
	EXPECT(c, "*3 $a $aa $ab", "ZRANGE", "l", "[a", "(b", "BYLEX");
	EXPECT(c, "*6 $ $a $aa $ab $b $ba", "ZRANGE", "l", "-", "(c", "BYLEX");
	EXPECT(c, "*5 $c $d $e $f $g", "ZRANGE", "l", "[c", "+", "BYLEX");
	EXPECT(c, "*0", "ZRANGE", "l", "[d", "[b", "BYLEX");
	EXPECT(c, "*0", "ZRANGE", "l", "+", "-", "BYLEX");
	EXPECT(c, "*0", "ZRANGE", "l", "-", "-", "BYLEX");
	EXPECT(c, "*0", "ZRANGE", "l", "+", "+", "BYLEX");
	EXPECT(c, "*0", "ZRANGE", "nokey", "-", "+", "BYLEX");
	EXPECT(c, "*11 $g $f $e $d $c $ba $b $ab $aa $a $",
	       "ZRANGE", "l", "+", "-", "BYLEX", "REV");
	EXPECT(c, "*4 $d $c $ba $b", "ZRANGE", "l", "[d", "[b", "BYLEX", "REV");
	EXPECT(c, "*2 $c $ba", "ZRANGE", "l", "(d", "(b", "BYLEX", "REV");
	EXPECT(c, "*0", "ZRANGE", "l", "[b", "[d", "BYLEX", "REV");
	EXPECT(c, "*3 $f $e $d", "ZRANGE", "l", "+", "-", "BYLEX", "REV", "LIMIT", "1", "3");
	EXPECT(c, "*3 $aa $ab $b", "ZRANGE", "l", "-", "+", "BYLEX", "LIMIT", "2", "3");
	EXPECT(c, "*9 $aa $ab $b $ba $c $d $e $f $g",
	       "ZRANGE", "l", "-", "+", "BYLEX", "LIMIT", "2", "-1");
	EXPECT(c, "*0", "ZRANGE", "l", "-", "+", "BYLEX", "LIMIT", "-2", "3");
	EXPECT(c, "*0", "ZRANGE", "l", "-", "+", "BYLEX", "LIMIT", "20", "3");
	EXPECT(c, not_lex, "ZRANGE", "l", "a", "+", "BYLEX");
	EXPECT(c, not_lex, "ZRANGE", "l", "-", "b", "BYLEX");
	EXPECT(c, not_lex, "ZRANGE", "l", "-a", "+", "BYLEX");
	EXPECT(c, not_lex, "ZRANGE", "l", "-", "+a", "BYLEX");
	EXPECT(c, not_lex, "ZRANGE", "l", "", "+", "BYLEX");
	EXPECT(c, not_lex, "ZRANGE", "nokey", "0", "-1", "BYLEX");
	EXPECT(c, lex_scores_err, "ZRANGE", "l", "-", "+", "WITHSCORES", "BYLEX");
	EXPECT(c, lex_scores_err,
	       "ZRANGE", "l", "-", "+", "BYLEX", "LIMIT", "0", "1", "WITHSCORES");
	/* an argument is read up to a zero byte, as Redis's C strings */
	SEND_LITERAL(c, "*5\r\n$6\r\nZRANGE\r\n$1\r\nz\r\n"
			"$4\r\n(1\0x\r\n$1\r\n3\r\n$7\r\nBYSCORE\r\n");
	expect_reply(c, "*3 $b $bb $c");
	SEND_LITERAL(c, "*5\r\n$6\r\nZRANGE\r\n$1\r\nl\r\n"
			"$1\r\n-\r\n$3\r\n+\0a\r\n$5\r\nBYLEX\r\n");
	expect_reply(c, all_lex);
	SEND_LITERAL(c, "*5\r\n$6\r\nZRANGE\r\n$1\r\nl\r\n"
			"$2\r\n\0a\r\n$1\r\n+\r\n$5\r\nBYLEX\r\n");
	expect_reply(c, not_lex);
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* ---- a sorted set of many members ---------------------------------------------------------- */

#define ZMANY 10000
#define ZBATCH 500                    /* members of one ZADD */
#define ZQUERIES 200                  /* random ZRANGEs of each kind, each time */

/* A member as the test keeps it: a reference array, sorted as the server
 * keeps the set. */
struct zm {
	char name[16];
	double score;
};

/* a sorted set's order: by score, then by name, bytewise */
static int zm_cmp(const void *a, const void *b)
{
	const struct zm *x = a, *y = b;

	if (x->score != y->score)
		return x->score < y->score ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Name i: the words over "abc" counted in order of length, then of their
 * letters (a, b, c, aa, ab ...): many are another's beginning. */
static void zm_name(char *out, unsigned i)
{
	char rev[12];
	int n = 0;

	for (i++; i > 0; i = (i - 1) / 3)
		rev[n++] = "abc"[(i - 1) % 3];
	for (int k = 0; k < n; k++)
		out[k] = rev[n - 1 - k];
	out[n] = 0;
}

/* a score of halves from -21 to 21: many members share one */
static double zm_score(void)
{
	return (rand() % 85 - 42) / 2.0;
}

/* Send a command of argc words (as many as a request of 64 KiB holds). */
static void send_argv(struct client *c, int argc, const char *const *argv)
{
	static char req[1 << 16];
	size_t n = (size_t)snprintf(req, sizeof req, "*%d\r\n", argc);

	for (int i = 0; i < argc; i++)
		n += (size_t)snprintf(req + n, sizeof req - n, "$%zu\r\n%s\r\n", strlen(argv[i]),
				      argv[i]);
	assert_true(n < sizeof req);
	send_raw(c, req, n);
}

/* ZADD key with the members of ref[0..n), ZBATCH a command: each new. */
static void zadd_all(struct client *c, const char *key, const struct zm *ref, size_t n)
{
	static char scores[ZBATCH][32];
	const char *argv[2 + 2 * ZBATCH] = { "ZADD", key };
	char want[16];

	for (size_t i = 0; i < n; i += ZBATCH) {
		size_t k = n - i < ZBATCH ? n - i : ZBATCH;

		for (size_t j = 0; j < k; j++) {
			snprintf(scores[j], sizeof scores[j], "%.17g", ref[i + j].score);
			argv[2 + 2 * j] = scores[j];
			argv[3 + 2 * j] = ref[i + j].name;
		}
		send_argv(c, (int)(2 + 2 * k), argv);
		snprintf(want, sizeof want, ":%zu", k);
		expect_reply(c, want);
	}
}

/* The next reply is the array of ref[first] and the n - 1 members after
 * it (step 1) or before it (step -1), with their scores if scores. */
static void expect_members(struct client *c, const struct zm *ref, long first, long step, long n,
			   int scores)
{
	static char want[1 << 20], got[1 << 20];
	size_t len = (size_t)sprintf(want, "*%ld", scores ? 2 * n : n);

	for (long i = 0; i < n; i++) {
		const struct zm *m = &ref[first + i * step];

		len += (size_t)sprintf(want + len, " $%s", m->name);
		if (scores)
			len += (size_t)sprintf(want + len, " $%.17g", m->score);
	}
	read_reply(c, got, sizeof got);
	assert_string_equal(got, want);
}

/* ZRANGE key start stop [REV] [WITHSCORES] of a random start and stop
 * (past either end too), against ref's n members. */
static void zcheck_index(struct client *c, const char *key, const struct zm *ref, long n)
{
	long start = rand() % (2 * n + 20) - n - 10, stop = rand() % (2 * n + 20) - n - 10;
	int rev = rand() % 2, scores = rand() % 2, argc = 4;
	char a[24], b[24];
	const char *argv[6] = { "ZRANGE", key, a, b };

	if (rand() % 4 == 0) /* a short range */
		stop = start + rand() % 20;
	snprintf(a, sizeof a, "%ld", start);
	snprintf(b, sizeof b, "%ld", stop);
	if (rev)
		argv[argc++] = "REV";
	if (scores)
		argv[argc++] = "WITHSCORES";
	send_argv(c, argc, argv);
	start += start < 0 ? n : 0;
	stop += stop < 0 ? n : 0;
	start = start < 0 ? 0 : start;
	stop = stop >= n ? n - 1 : stop;
	if (start > stop || start >= n)
		expect_members(c, ref, 0, 1, 0, scores);
	else
		expect_members(c, ref, rev ? n - 1 - start : start, rev ? -1 : 1, stop - start + 1,
			       scores);
}

/*
 * ZRANGE key min max BYSCORE or BYLEX [REV] [LIMIT offset count]
 * [WITHSCORES] (max first under REV, LIMIT or not as limit says), the
 * range being ref[lo..hi): its reply checked.
 */
static void zcheck_range(struct client *c, const char *key, const struct zm *ref, long lo, long hi,
			 const char *min, const char *max, const char *by, int limit)
{
	long offset = limit ? rand() % 40 - 2 : 0, count = limit ? rand() % 40 - 3 : -1, n;
	int rev = rand() % 2, scores = by[2] == 'S' && rand() % 2, argc = 5;
	char o[24], k[24];
	const char *argv[10] = { "ZRANGE", key, rev ? max : min, rev ? min : max, by };

	if (limit && rand() % 3 == 0)
		offset = rand() % (hi - lo + 2); /* to the range's end */
	snprintf(o, sizeof o, "%ld", offset);
	snprintf(k, sizeof k, "%ld", count);
	if (rev)
		argv[argc++] = "REV";
	if (limit) {
		argv[argc++] = "LIMIT";
		argv[argc++] = o;
		argv[argc++] = k;
	}
	if (scores)
		argv[argc++] = "WITHSCORES";
	send_argv(c, argc, argv);
	n = offset < 0 || hi - lo <= offset ? 0 : hi - lo - offset;
	n = count >= 0 && count < n ? count : n;
	expect_members(c, ref, rev ? hi - 1 - offset : lo + offset, rev ? -1 : 1, n, scores);
}

/* ref[lo..hi): the members of ref's n for which in() holds (they follow
 * each other in the order) */
static void zblock(const struct zm *ref, long n, int (*in)(const struct zm *m, const void *arg),
		   const void *arg, long *lo, long *hi)
{
	*lo = *hi = 0;
	for (long i = 0; i < n; i++)
		if (in(&ref[i], arg)) {
			*lo = *hi == 0 ? i : *lo;
			*hi = i + 1;
		}
}

/* A BYSCORE end: a score (or an infinity), excluded or not. */
struct zend {
	double v;
	int ex;
	char arg[32];
};

static void zend_pick(struct zend *e, int sign)
{
	int r = rand() % 12;

	e->ex = rand() % 2;
	e->v = r == 0 ? sign * INFINITY : r == 1 ? -sign * INFINITY : zm_score();
	if (isinf(e->v))
		snprintf(e->arg, sizeof e->arg, "%s%s", e->ex ? "(" : "", e->v < 0 ? "-inf" : "+inf");
	else
		snprintf(e->arg, sizeof e->arg, "%s%.17g", e->ex ? "(" : "", e->v);
}

static int in_scores(const struct zm *m, const void *arg)
{
	const struct zend *e = arg;

	return (e[0].ex ? m->score > e[0].v : m->score >= e[0].v) &&
	       (e[1].ex ? m->score < e[1].v : m->score <= e[1].v);
}

static void zcheck_byscore(struct client *c, const char *key, const struct zm *ref, long n)
{
	struct zend e[2];
	long lo, hi;

	zend_pick(&e[0], -1);
	zend_pick(&e[1], 1);
	zblock(ref, n, in_scores, e, &lo, &hi);
	zcheck_range(c, key, ref, lo, hi, e[0].arg, e[1].arg, "BYSCORE", rand() % 2);
}

/* A BYLEX end: "-" (inf -1), "+" (inf 1), or a name included ("[") or
 * excluded ("("), one of the set's or not. */
struct lexend {
	int inf, ex;
	char arg[16];
};

static void lexend_pick(struct lexend *e, int sign, const struct zm *ref, long n)
{
	int r = rand() % 10;

	e->inf = r == 0 ? sign : r == 1 ? -sign : 0;
	e->ex = rand() % 2;
	if (e->inf) {
		strcpy(e->arg, e->inf < 0 ? "-" : "+");
		return;
	}
	e->arg[0] = e->ex ? '(' : '[';
	if (rand() % 2)
		strcpy(e->arg + 1, ref[rand() % n].name);
	else
		for (int i = 0, len = 1 + rand() % 5; i <= len; i++)
			e->arg[1 + i] = i < len ? "abcd"[rand() % 4] : 0;
}

static int in_names(const struct zm *m, const void *arg)
{
	const struct lexend *e = arg;
	int lo = e[0].inf ? -e[0].inf : strcmp(m->name, e[0].arg + 1);
	int hi = e[1].inf ? e[1].inf : strcmp(e[1].arg + 1, m->name);

	return (e[0].ex ? lo > 0 : lo >= 0) && (e[1].ex ? hi > 0 : hi >= 0);
}

static void zcheck_bylex(struct client *c, const char *key, const struct zm *ref, long n)
{
	struct lexend e[2];
	long lo, hi;

	lexend_pick(&e[0], -1, ref, n);
	lexend_pick(&e[1], 1, ref, n);
	zblock(ref, n, in_names, e, &lo, &hi);
	zcheck_range(c, key, ref, lo, hi, e[0].arg, e[1].arg, "BYLEX", rand() % 2);
}

/* The whole set, and ZQUERIES random ranges of each kind, against ref. */
static void zcheck_all(struct client *c, const char *key, const struct zm *ref, long n, int lex)
{
	char want[16];

	snprintf(want, sizeof want, ":%ld", n);
	EXPECT(c, want, "ZCARD", key);
	send_argv(c, 5, (const char *[]){ "ZRANGE", key, "0", "-1", "WITHSCORES" });
	expect_members(c, ref, 0, 1, n, 1);
	for (int q = 0; q < ZQUERIES; q++) {
		zcheck_index(c, key, ref, n);
		if (lex)
			zcheck_bylex(c, key, ref, n);
		else
			zcheck_byscore(c, key, ref, n);
	}
}

/*
 * A sorted set of 10,000 members (names that begin one another, scores
 * shared by a hundred each) and one of the same names all of score 0:
 * ZRANGE by index, BYSCORE and BYLEX, REV, LIMIT, WITHSCORES at random
 * against the order the test keeps, after the members came in shuffled,
 * after 3,000 new scores (ZADD CH and INCR: members move), and between
 * ZPOPMINs of several counts down to none.
 */
static void test_zset_many_members(void **state)
{
	static struct zm ref[ZMANY], lex[ZMANY];
	struct server s = server_start("--threads", "2", NULL);
	struct client *c = client_open(s.port);
	const long counts[] = { 1, 2, 7, 100, 1000, 3333 };
	long n = ZMANY;
	char score[32], want[64];

	(void)state;
	srand(36);
	for (unsigned i = 0; i < ZMANY; i++) {
		zm_name(ref[i].name, i);
		ref[i].score = zm_score();
		lex[i] = ref[i];
		lex[i].score = 0;
	}
	for (long i = ZMANY - 1; i > 0; i--) { /* shuffled */
		long j = rand() % (i + 1);
		struct zm t = ref[i];

		ref[i] = ref[j];
		ref[j] = t;
	}
	zadd_all(c, "z", ref, ZMANY);
	zadd_all(c, "lex", lex, ZMANY);
	qsort(ref, ZMANY, sizeof ref[0], zm_cmp);
	qsort(lex, ZMANY, sizeof lex[0], zm_cmp);
	zcheck_all(c, "z", ref, n, 0);
	zcheck_all(c, "lex", lex, n, 1);
	for (int i = 0; i < 3000; i++) { /* new scores */
		struct zm *m = &ref[rand() % n];
		double v = zm_score();

		snprintf(score, sizeof score, "%.17g", v);
		if (i % 3 == 0) {
			m->score += v;
			snprintf(want, sizeof want, "$%.17g", m->score);
			EXPECT(c, want, "ZADD", "z", "INCR", score, m->name);
		} else {
			EXPECT(c, v == m->score ? ":0" : ":1", "ZADD", "z", "CH", score, m->name);
			m->score = v;
		}
		if (i % 500 == 0) {
			snprintf(want, sizeof want, "$%.17g", m->score);
			EXPECT(c, want, "ZSCORE", "z", m->name);
		}
	}
	qsort(ref, ZMANY, sizeof ref[0], zm_cmp);
	zcheck_all(c, "z", ref, n, 0);
	for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
		snprintf(want, sizeof want, "%ld", counts[i]);
		send_argv(c, 3, (const char *[]){ "ZPOPMIN", "z", want });
		expect_members(c, ref, 0, 1, counts[i], 1);
		memmove(ref, ref + counts[i], (size_t)(n - counts[i]) * sizeof ref[0]);
		n -= counts[i];
		zcheck_all(c, "z", ref, n, 0);
	}
	send_argv(c, 3, (const char *[]){ "ZPOPMIN", "z", "100000" });
	expect_members(c, ref, 0, 1, n, 1);
	EXPECT(c, ":0", "EXISTS", "z");
	EXPECT(c, "*0", "ZRANGE", "z", "0", "-1");
	EXPECT(c, ":1", "DEL", "lex");
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

#define ZMEM_MEMBERS 50000
#define ZMEM_ROUNDS 5
#define ZMEM_POP 10000

/* Sorted sets zp and zd of the members of m (in their order), then zp
 * emptied by ZPOPMINs and zd deleted. */
static void zmem_round(struct client *c, const struct zm *m)
{
	zadd_all(c, "zp", m, ZMEM_MEMBERS);
	zadd_all(c, "zd", m, ZMEM_MEMBERS);
	for (long i = 0; i < ZMEM_MEMBERS; i += ZMEM_POP) {
		send_argv(c, 3, (const char *[]){ "ZPOPMIN", "zp", "10000" });
		expect_members(c, m, i, 1, ZMEM_POP, 1);
	}
	EXPECT(c, ":0", "EXISTS", "zp");
	EXPECT(c, ":1", "DEL", "zd");
}

/*
 * Two sorted sets of 50,000 members filled and emptied five times, one by
 * ZPOPMIN, one by DEL, on a server of one context: what they held is
 * freed, the server's VmRSS after is within 8 MiB of before (taken after
 * a first round: what was freed is used again). Without the frees of the
 * members' nodes it grows by some 3 MiB a round for each set.
 */
static void test_zset_memory_released(void **state)
{
	static struct zm m[ZMEM_MEMBERS];
	struct server s = server_start_releasing("1");
	struct client *c = client_open(s.port);
	long before;

	(void)state;
	for (int i = 0; i < ZMEM_MEMBERS; i++) {
		snprintf(m[i].name, sizeof m[i].name, "m%06d", i);
		m[i].score = i * 7919 % 1000;
	}
	qsort(m, ZMEM_MEMBERS, sizeof m[0], zm_cmp);
	zmem_round(c, m);
	before = server_kb(&s, "VmRSS");
	for (int r = 0; r < ZMEM_ROUNDS; r++)
		zmem_round(c, m);
	assert_rss_near(&s, before, ZMEM_ROUNDS, 8 * 1024);
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* every command on a key of another type: WRONGTYPE, nothing changed */
static void test_wrongtype(void **state)
{
	struct server s = server_start("--threads", "4", NULL);
	struct client *c = client_open(s.port);

	(void)state;
	EXPECT(c, "+OK", "SET", "str", "v");
	EXPECT(c, ":1", "RPUSH", "list", "a");
	EXPECT(c, ":1", "SADD", "set", "a");
	EXPECT(c, ":1", "HSET", "hash", "f", "v");
	EXPECT(c, ":1", "ZADD", "zset", "1", "a");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value", "GET", "list");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "GETEX", "list");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "GETDEL", "list");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "GETSET", "list", "v");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "SET", "list", "v", "GET");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "APPEND", "list", "x");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "STRLEN", "list");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "GETRANGE", "list", "0", "1");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "SETRANGE", "list", "0", "x");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "INCR", "list");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "DECRBY", "list", "1");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "INCRBYFLOAT", "list", "1");
	EXPECT(c, "*2 $-1 $v", "MGET", "list", "str");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "LPUSH", "str", "a");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "RPUSH", "set", "a");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value", "LPOP", "str");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "RPOP", "hash", "2");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "LLEN", "zset");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "LRANGE", "str", "0", "1");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "LINDEX", "str", "0");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "LSET", "str", "0", "a");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "LREM", "str", "0", "a");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "LTRIM", "str", "0", "1");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "LMOVE", "str", "list", "LEFT", "LEFT");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "LMOVE", "list", "str", "LEFT", "LEFT");
	EXPECT(c, "*1 $a", "LRANGE", "list", "0", "-1");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "BLPOP", "str", "1");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "BRPOP", "nope", "set", "1");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "BLMOVE", "str", "list", "LEFT", "LEFT", "1");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "SADD", "str", "a");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "SREM", "list", "a");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "SPOP", "hash");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "SMEMBERS", "zset");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "SCARD", "str");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "SISMEMBER", "list", "a");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "HSET", "str", "f", "v");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "HGET", "list", "f");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "HGETALL", "set");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "HDEL", "zset", "a");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value", "HLEN", "str");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "ZADD", "str", "1", "a");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "ZPOPMIN", "list");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "ZRANGE", "set", "0", "1");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "ZCARD", "hash");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value",
	       "ZSCORE", "str", "a");
	EXPECT(c, "+string", "TYPE", "str");
	EXPECT(c, "+list", "TYPE", "list");
	EXPECT(c, "+set", "TYPE", "set");
	EXPECT(c, "+hash", "TYPE", "hash");
	EXPECT(c, "+zset", "TYPE", "zset");
	EXPECT(c, "+OK", "SET", "list", "v");
	EXPECT(c, "+string", "TYPE", "list");
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* HELLO, TIME, INFO, SELECT, and what is out of scope */
/* --bind ADDR: the listeners take that address alone (127.0.0.2, on
 * loopback too; the default, 127.0.0.1, refuses), on every context. */
static void test_bind_address(void **state)
{
	struct server s = server_start("--threads", "2", "--bind", "127.0.0.2", NULL);
	struct sockaddr_in a = co_test_loopback((uint16_t)s.port);
	struct client *c;
	int fd;

	(void)state;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), -1);
	assert_int_equal(errno, ECONNREFUSED);
	close(fd);
	for (int i = 0; i < 4; i++) { /* whichever context's listener takes each */
		c = calloc(1, sizeof *c);
		assert_non_null(c);
		a.sin_addr.s_addr = htonl(0x7f000002);
		c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(c->fd >= 0);
		assert_int_equal(connect(c->fd, (struct sockaddr *)&a, sizeof a), 0);
		EXPECT(c, "+PONG", "PING");
		client_close(c);
	}
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

static void test_server_commands(void **state)
{
	struct server s = server_start("--threads", "2", NULL);
	struct client *c = client_open(s.port), *d;
	char got[4096];
	long long t;

	(void)state;
	send_str(c, "*2\r\n$5\r\nHELLO\r\n$1\r\n2\r\n");
	read_reply(c, got, sizeof got);
	assert_true(strncmp(got, "*14 $server $redis $version $7.0.0 $proto :2 $id :", 50) == 0);
	assert_non_null(strstr(got, " $mode $standalone $role $master $modules *0"));
	send_str(c, "*1\r\n$5\r\nHELLO\r\n");
	read_reply(c, got, sizeof got);
	assert_true(strncmp(got, "*14 $server $redis", 18) == 0);
	EXPECT(c, "-NOPROTO unsupported protocol version", "HELLO", "3");
	EXPECT(c, "-NOPROTO unsupported protocol version", "HELLO", "1");
	EXPECT(c, "-ERR Protocol version is not an integer or out of range", "HELLO", "x");
	EXPECT(c, "-ERR Syntax error in HELLO option 'FOO'", "HELLO", "2", "FOO");
	EXPECT(c, "-WRONGPASS invalid username-password pair or user is disabled.", "HELLO", "2",
	       "AUTH", "bob", "pw");
	send_str(c, "*1\r\n$4\r\nTIME\r\n");
	read_reply(c, got, sizeof got);
	assert_int_equal(sscanf(got, "*2 $%lld", &t), 1);
	assert_true(t > 1700000000 && llabs(t - (long long)time(NULL)) <= 2);
	EXPECT(c, "-ERR wrong number of arguments for 'time' command", "TIME", "x");
	EXPECT(c, "+OK", "SELECT", "0");
	EXPECT(c, "-ERR value is not an integer or out of range", "SELECT", "x");
	/* INFO: its sections; the keyspace counted over both shards */
	EXPECT(c, "$# Keyspace\r\n", "INFO", "keyspace");
	EXPECT(c, "+OK", "MSET", "a", "1", "b", "2", "c", "3", "d", "4");
	EXPECT(c, ":1", "EXPIRE", "a", "100");
	EXPECT(c, "$# Keyspace\r\ndb0:keys=4,expires=1,avg_ttl=0\r\n", "INFO", "KEYSPACE");
	EXPECT(c, "$", "INFO", "nosuchsection");
	send_str(c, "*1\r\n$4\r\nINFO\r\n");
	read_reply(c, got, sizeof got);
	assert_non_null(strstr(got, "# Server\r\nredis_version:7.0.0\r\n"));
	assert_non_null(strstr(got, "\r\n# Clients\r\nconnected_clients:1\r\nblocked_clients:0\r\n"));
	assert_non_null(strstr(got, "\r\n# Memory\r\nused_memory:"));
	assert_non_null(strstr(got, "\r\n# Keyspace\r\ndb0:keys=4,expires=1"));
	/* a waiting BLPOP counts as a blocked client */
	d = client_open(s.port);
	send_str(d, "*3\r\n$5\r\nBLPOP\r\n$5\r\nqueue\r\n$1\r\n0\r\n");
	for (;;) { /* (a hang guard, no verdict by time) */
		send_str(c, "*2\r\n$4\r\nINFO\r\n$7\r\nclients\r\n");
		read_reply(c, got, sizeof got);
		if (strstr(got, "blocked_clients:1\r\n"))
			break;
		usleep(1000);
	}
	assert_non_null(strstr(got, "connected_clients:2\r\n"));
	EXPECT(c, ":1", "RPUSH", "queue", "x");
	expect_reply(d, "*2 $queue $x");
	client_close(d);
	/* persistence, transactions, scripting, pub/sub: Redis's unknown command */
	EXPECT(c, "-ERR unknown command 'MULTI', with args beginning with: ", "MULTI");
	EXPECT(c, "-ERR unknown command 'EVAL', with args beginning with: 'return 1' '0' ", "EVAL",
	       "return 1", "0");
	EXPECT(c, "-ERR unknown command 'SUBSCRIBE', with args beginning with: 'ch' ", "SUBSCRIBE",
	       "ch");
	EXPECT(c, "-ERR unknown command 'BGSAVE', with args beginning with: ", "BGSAVE");
	EXPECT(c, "-ERR unknown command 'REPLICAOF', with args beginning with: 'no' 'one' ",
	       "REPLICAOF", "no", "one");
	/* SIGINT stops it as SIGTERM does: the open connection closes, exit 0 */
	assert_int_equal(server_stop(&s, SIGINT), 0);
	assert_true(at_eof(c));
	client_close(c);
}

/* ---- blocking pops ------------------------------------------------------------------------------ */

/* Send a command without waiting for its answer. */
static void send_cmd(struct client *c, int argc, ...)
{
	char req[1024];
	size_t n = (size_t)snprintf(req, sizeof req, "*%d\r\n", argc);
	va_list ap;

	va_start(ap, argc);
	for (int i = 0; i < argc; i++) {
		const char *a = va_arg(ap, const char *);

		n += (size_t)snprintf(req + n, sizeof req - n, "$%zu\r\n%s\r\n", strlen(a), a);
	}
	va_end(ap);
	send_raw(c, req, n);
}

#define SEND(c, ...) \
	send_cmd((c), (int)(sizeof((const char *[]){ __VA_ARGS__ }) / sizeof(const char *)), \
		 __VA_ARGS__)

/* Wait until the server counts n connections blocked (INFO clients). */
static void wait_blocked(struct client *c, int n)
{
	char got[4096], want[64];

	snprintf(want, sizeof want, "blocked_clients:%d\r\n", n);
	for (;;) { /* (a hang guard, no verdict by time) */
		send_str(c, "*2\r\n$4\r\nINFO\r\n$7\r\nclients\r\n");
		read_reply(c, got, sizeof got);
		if (strstr(got, want))
			return;
		usleep(1000);
	}
}

/* Blocked clients served by pushes from other connections, first blocked
 * first served; BLMOVE; the time limit; several keys on several shards. */
static void test_blocking_pops_served(void **state)
{
	struct server s = server_start("--threads", "4", NULL);
	struct client *c = client_open(s.port), *w[4];
	long long t0;

	(void)state;
	for (int i = 0; i < 4; i++)
		w[i] = client_open(s.port);
	/* first blocked, first served, whichever shard each lives on */
	for (int i = 0; i < 3; i++) {
		SEND(w[i], i == 1 ? "BRPOP" : "BLPOP", "q", "0");
		wait_blocked(c, i + 1);
	}
	EXPECT(c, ":1", "RPUSH", "q", "one");
	expect_reply(w[0], "*2 $q $one");
	EXPECT(c, ":2", "RPUSH", "q", "two", "three"); /* (the length before it serves) */
	expect_reply(w[1], "*2 $q $three");            /* BRPOP: from the right */
	expect_reply(w[2], "*2 $q $two");
	EXPECT(c, ":0", "EXISTS", "q");
	/* several keys (on several shards): the first with an element */
	SEND(w[0], "BLPOP", "k1", "k2", "k3", "k4", "k5", "k6", "0");
	wait_blocked(c, 1);
	EXPECT(c, ":1", "LPUSH", "k5", "five");
	expect_reply(w[0], "*2 $k5 $five");
	EXPECT(c, ":1", "LPUSH", "k6", "six"); /* nobody waits on k6 any more */
	wait_blocked(c, 0);
	EXPECT(c, ":1", "LLEN", "k6");
	EXPECT(c, "*2 $k6 $six", "BLPOP", "k1", "k6", "0"); /* (no wait) */
	/* BLMOVE: served, then pushed on its destination's shard */
	SEND(w[1], "BLMOVE", "from", "to", "RIGHT", "LEFT", "0");
	wait_blocked(c, 1);
	EXPECT(c, ":1", "RPUSH", "from", "x");
	expect_reply(w[1], "$x");
	EXPECT(c, "*1 $x", "LRANGE", "to", "0", "-1");
	EXPECT(c, ":0", "EXISTS", "from");
	/* LMOVE and RENAME serve waiting clients too */
	SEND(w[2], "BLPOP", "dst", "0");
	wait_blocked(c, 1);
	EXPECT(c, "$x", "LMOVE", "to", "dst", "LEFT", "LEFT");
	expect_reply(w[2], "*2 $dst $x");
	SEND(w[3], "BRPOP", "renamed", "0");
	wait_blocked(c, 1);
	EXPECT(c, ":2", "RPUSH", "orig", "a", "b");
	EXPECT(c, "+OK", "RENAME", "orig", "renamed");
	expect_reply(w[3], "*2 $renamed $b");
	EXPECT(c, "*1 $a", "LRANGE", "renamed", "0", "-1");
	/* a client that leaves while it waits is given nothing */
	SEND(w[0], "BLPOP", "left", "0");
	wait_blocked(c, 1);
	client_close(w[0]);
	wait_blocked(c, 0);
	EXPECT(c, ":1", "RPUSH", "left", "kept");
	EXPECT(c, "*1 $kept", "LRANGE", "left", "0", "-1");
	w[0] = client_open(s.port);
	/* the time limit: nil, no sooner */
	t0 = now_ms();
	EXPECT(c, "*-1", "BLPOP", "none1", "none2", "0.2");
	assert_true(now_ms() - t0 >= 190);
	EXPECT(c, "*-1", "BLMOVE", "none1", "to", "LEFT", "LEFT", "0.05");
	wait_blocked(c, 0);
	/* a WRONGTYPE among the keys ends the wait before it begins */
	EXPECT(c, "+OK", "SET", "str", "v");
	EXPECT(c, "-WRONGTYPE Operation against a key holding the wrong kind of value", "BLPOP",
	       "none1", "str", "0");
	wait_blocked(c, 0);
	for (int i = 0; i < 4; i++)
		client_close(w[i]);
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

#define RACE_KEYS 6
#define RACE_PUSHERS 4
#define RACE_POPPERS 6
#define RACE_EACH 400

static int race_port;
static atomic_int race_got[RACE_PUSHERS * RACE_EACH];
static atomic_int race_total;
static atomic_int race_pushers_done;
static atomic_int race_stop_sent;
static atomic_int race_connected; /* threads whose connection is open */

/* Send, as send_raw, but a connection the stop closed is not an error:
 * 0, or -1 once it is closed. */
static int send_or_closed(struct client *c, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Push RACE_EACH elements "P.N", each to a key of its own choice, from a
 * connection of its own. */
static void *race_pusher(void *arg)
{
	struct client *c = client_open(race_port);
	long id = (long)arg;
	char key[16], el[32];

	atomic_fetch_add(&race_connected, 1);

	for (int n = 0; n < RACE_EACH; n++) {
		char req[128], got[64];
		int len;

		snprintf(key, sizeof key, "rk%d", (int)((id * 7 + n) % RACE_KEYS));
		snprintf(el, sizeof el, "%ld.%d", id, n);
		len = snprintf(req, sizeof req, "%s %s %s\r\n", n % 2 ? "RPUSH" : "LPUSH", key, el);
		if (send_or_closed(c, req, (size_t)len) < 0 || next_byte(c) < 0)
			break; /* (the stop closed it) */
		c->head--;
		read_reply(c, got, sizeof got);
		assert_int_equal(got[0], ':');
	}
	atomic_fetch_add(&race_pushers_done, 1);
	client_close(c);
	return NULL;
}

/* BLPOP or BRPOP over every key until the pushers are done and a wait
 * times out, or the connection ends (the stop); each element counted. */
static void *race_popper(void *arg)
{
	struct client *c = client_open(race_port);
	long id = (long)arg;
	char req[512], got[256];
	size_t n;
	long p, e;

	atomic_fetch_add(&race_connected, 1);
	for (;;) {
		n = (size_t)sprintf(req, "%s", id % 2 ? "BRPOP" : "BLPOP");
		for (int k = 0; k < RACE_KEYS; k++)
			n += (size_t)sprintf(req + n, " rk%d", (int)((id + k) % RACE_KEYS));
		n += (size_t)sprintf(req + n, " %s\r\n", atomic_load(&race_stop_sent) ? "0" : "0.2");
		if (send_or_closed(c, req, n) < 0 || next_byte(c) < 0) /* the stop closed it */
			break;
		c->head--;
		read_reply(c, got, sizeof got);
		if (strcmp(got, "*-1") == 0) {
			if (atomic_load(&race_pushers_done) == RACE_PUSHERS || atomic_load(&race_stop_sent))
				break;
			continue;
		}
		assert_int_equal(sscanf(got, "*2 $rk%*d $%ld.%ld", &p, &e), 2);
		assert_true(p >= 0 && p < RACE_PUSHERS && e >= 0 && e < RACE_EACH);
		assert_int_equal(atomic_fetch_add(&race_got[p * RACE_EACH + e], 1), 0); /* not twice */
		atomic_fetch_add(&race_total, 1);
	}
	client_close(c);
	return NULL;
}

static void race_start(pthread_t *th)
{
	memset(race_got, 0, sizeof race_got);
	atomic_store(&race_total, 0);
	atomic_store(&race_pushers_done, 0);
	atomic_store(&race_connected, 0);
	for (long i = 0; i < RACE_POPPERS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, race_popper, (void *)i), 0);
	for (long i = 0; i < RACE_PUSHERS; i++)
		assert_int_equal(pthread_create(&th[RACE_POPPERS + i], NULL, race_pusher, (void *)i), 0);
	/* every connection open before a stop may come: a thread that
	 * started late would find the listener closed (its connect fails) */
	WAIT_UNTIL(atomic_load(&race_connected) == RACE_POPPERS + RACE_PUSHERS);
}

/* Poppers blocked on six keys over four shards, raced by pushers on other
 * connections: every element popped once, none lost (the lists end
 * empty). */
static void test_blocking_pops_raced(void **state)
{
	struct server s = server_start("--threads", "4", NULL);
	pthread_t th[RACE_POPPERS + RACE_PUSHERS];
	struct client *c;
	char key[16];

	(void)state;
	race_port = s.port;
	atomic_store(&race_stop_sent, 0);
	race_start(th);
	for (int i = 0; i < RACE_POPPERS + RACE_PUSHERS; i++)
		pthread_join(th[i], NULL);
	c = client_open(s.port);
	for (int k = 0; k < RACE_KEYS; k++) { /* what no popper took is still there */
		char got[64];

		snprintf(key, sizeof key, "rk%d", k);
		for (;;) {
			SEND(c, "LPOP", key);
			read_reply(c, got, sizeof got);
			if (strcmp(got, "$-1") == 0)
				break;
			atomic_fetch_add(&race_total, 1);
		}
	}
	assert_int_equal(atomic_load(&race_total), RACE_PUSHERS * RACE_EACH);
	wait_blocked(c, 0);
	client_close(c);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
}

/* The same race, cut by SIGTERM: the poppers that wait answer a nil and
 * close, no element is given twice, the server exits 0. */
static void test_blocking_pops_and_stop(void **state)
{
	struct server s = server_start("--threads", "4", NULL);
	pthread_t th[RACE_POPPERS + RACE_PUSHERS];

	(void)state;
	race_port = s.port;
	atomic_store(&race_stop_sent, 0);
	race_start(th);
	usleep(20000);
	atomic_store(&race_stop_sent, 1);
	kill(s.pid, SIGTERM);
	for (int i = 0; i < RACE_POPPERS + RACE_PUSHERS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(server_stop(&s, SIGTERM), 0);
	assert_true(atomic_load(&race_total) <= RACE_PUSHERS * RACE_EACH);
}

/* ---- redis-benchmark's default tests -------------------------------------------------------------- */

static void test_redis_benchmark_defaults(void **state)
{
	static const char *const tests[] = {
		"PING_INLINE:", "PING_MBULK:", "SET:", "GET:", "INCR:", "LPUSH:", "RPUSH:", "LPOP:",
		"RPOP:", "SADD:", "HSET:", "SPOP:", "ZADD:", "ZPOPMIN:",
		"LPUSH (needed to benchmark LRANGE):", "LRANGE_100 (first 100 elements):",
		"LRANGE_300 (first 300 elements):", "LRANGE_500 (first 500 elements):",
		"LRANGE_600 (first 600 elements):", "MSET (10 keys):",
	};
	struct server s;
	static char out[1 << 16];

	(void)state;
	if (system("command -v redis-benchmark >/dev/null 2>&1") != 0) {
		printf("skipped: redis-benchmark is not installed (redis-tools)\n");
		exit(77); /* (as redis_tools: meson's skip) */
	}
	s = server_start("--threads", "2", NULL);
	assert_int_equal(run(out, sizeof out, "redis-benchmark -p %d -n 2000 -c 10 -q 2>&1 | "
				"tr '\\r' '\\n'", s.port), 0);
	print_message("%s\n", out);
	assert_null(strstr(out, "ERR"));
	assert_null(strstr(out, "rror"));
	for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
		assert_non_null(strstr(out, tests[i]));
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
	cmocka_unit_test(test_idle_timeout_never),
	cmocka_unit_test(test_sigterm_stop),
	cmocka_unit_test(test_sigterm_clients_never_read),
	cmocka_unit_test(test_reply_buffer_limit),
	cmocka_unit_test(test_request_limit_as_bytes_arrive),
	cmocka_unit_test(test_memory_released),
	cmocka_unit_test(test_view_on_sigusr1),
	cmocka_unit_test(test_sharded_over_contexts),
	cmocka_unit_test(test_redis_tools),
	cmocka_unit_test(test_strings_redis7),
	cmocka_unit_test(test_expiry_times),
	cmocka_unit_test(test_keyspace),
	cmocka_unit_test(test_lists),
	cmocka_unit_test(test_sets_hashes_zsets),
	cmocka_unit_test(test_zrange_options),
	cmocka_unit_test(test_zset_many_members),
	cmocka_unit_test(test_zset_memory_released),
	cmocka_unit_test(test_keys_many_stars),
	cmocka_unit_test(test_wrongtype),
	cmocka_unit_test(test_server_commands),
	cmocka_unit_test(test_bind_address),
	cmocka_unit_test(test_blocking_pops_served),
	cmocka_unit_test(test_blocking_pops_raced),
	cmocka_unit_test(test_blocking_pops_and_stop),
	cmocka_unit_test(test_redis_benchmark_defaults),
};

CO_TEST_MAIN(tests, 1)
