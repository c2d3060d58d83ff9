/* SPDX-License-Identifier: MIT */
/*
 * The benchmark servers as a client sees them:
 *   - echo servers: a client that sends and never reads blocks only its own
 *     connection; another client keeps getting every byte back;
 *   - HTTP servers: keep-alive, pipelining, Connection: close, HTTP/1.0,
 *     400 and 431 then close; a slowloris client (a header trickled forever)
 *     does not hold up other clients and is closed after the header
 *     deadline (--header-timeout); an idle keep-alive connection is closed
 *     after the idle timeout (--idle-timeout) while a busy one is not;
 *   - the HTTP peers (servers not ours, bench/peers/: nginx) answer
 *     other bytes than ours: they get the checks that apply to any HTTP
 *     server (a 200 with our body, keep-alive, pipelining,
 *     Connection: close, HTTP/1.0, 404, the header deadline and the idle
 *     timeout);
 *   - every server exits 0 on SIGTERM with clients still connected.
 * Usage: test_bench_servers ECHO_SERVER... -- HTTP_SERVER... -- HTTP_PEER...
 * Durations are hang guards only: nothing here asserts a time.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "http_parse.h"

#define GUARD_MS 5000

static char **echo_servers, **http_servers, **http_peers;
static pid_t running = -1; /* killed by the teardown if a test failed */
static int n_echo, n_http, n_peer;
/* 1 while the HTTP server under test is ours: its answer is byte for byte
 * HTTP_HELLO_RESPONSE; 0 for a peer: any 200 with the body will do */
static int exact = 1;

/* HTTP server i of ours and the peers together (sets exact). */
static const char *http_server(int i)
{
	exact = i < n_http;
	return exact ? http_servers[i] : http_peers[i - n_http];
}

struct server {
	pid_t pid;
	int port;
};

/* Start path --port 0 with the NULL-terminated extra arguments (or none). */
static void server_start(struct server *s, const char *path, const char *const *extra)
{
	int fds[2];
	char line[64];
	ssize_t n;
	size_t have = 0;

	assert_int_equal(pipe(fds), 0);
	s->pid = fork();
	assert_true(s->pid >= 0);
	if (s->pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		const char *argv[16] = { path, "--port", "0" };
		for (int i = 0; extra && extra[i] && i < 12; i++)
			argv[3 + i] = extra[i];
		execv(path, (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	running = s->pid;
	/* the first line is "port=P" */
	while (have < sizeof line - 1 && (n = read(fds[0], line + have, 1)) == 1 && line[have] != '\n')
		have++;
	line[have] = 0;
	close(fds[0]);
	assert_int_equal(sscanf(line, "port=%d", &s->port), 1);
}

/* SIGTERM: the server must exit with status 0. */
static void server_stop(struct server *s)
{
	int status = 0;

	assert_int_equal(kill(s->pid, SIGTERM), 0);
	for (int i = 0; i < GUARD_MS / 10; i++) {
		if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
			running = -1;
			assert_true(WIFEXITED(status));
			assert_int_equal(WEXITSTATUS(status), 0);
			return;
		}
		usleep(10000);
	}
	kill(s->pid, SIGKILL);
	waitpid(s->pid, &status, 0);
	fail_msg("server did not exit on SIGTERM");
}

static int dial(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		assert_true(k > 0);
		p = (const char *)p + k;
		n -= (size_t)k;
	}
}

/* Read exactly n bytes (hang guard). */
static void recv_exact(int fd, void *p, size_t n)
{
	while (n) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		assert_int_equal(poll(&pf, 1, GUARD_MS), 1);
		ssize_t k = recv(fd, p, n, 0);
		assert_true(k > 0);
		p = (char *)p + k;
		n -= (size_t)k;
	}
}

/* 1 if the peer closed the connection (EOF or reset) within the guard. */
static int closed_by_peer(int fd, int guard_ms)
{
	char c;
	struct pollfd pf = { .fd = fd, .events = POLLIN };

	if (poll(&pf, 1, guard_ms) != 1)
		return 0;
	ssize_t k = recv(fd, &c, 1, MSG_DONTWAIT);
	return k == 0 || (k < 0 && errno == ECONNRESET);
}

/* ---- echo -------------------------------------------------------------------- */

static void echo_round_trips(int fd, int n)
{
	char out[700], in[700];

	for (int i = 0; i < n; i++) {
		for (size_t j = 0; j < sizeof out; j++)
			out[j] = (char)(i * 31 + j * 7);
		send_all(fd, out, sizeof out);
		recv_exact(fd, in, sizeof in);
		assert_memory_equal(in, out, sizeof out);
	}
}

static void test_echo_reader_that_never_reads(void **state)
{
	(void)state;
	for (int i = 0; i < n_echo; i++) {
		struct server s;
		static char junk[65536];
		size_t pushed = 0;
		int hog, good;

		server_start(&s, echo_servers[i], NULL);
		hog = dial(s.port);
		fcntl(hog, F_SETFL, O_NONBLOCK);
		/* Send until our socket is full: the server's send to us is
		 * blocked then, and it stopped reading us. */
		for (int idle = 0; idle < 20;) {
			ssize_t k = send(hog, junk, sizeof junk, MSG_NOSIGNAL);
			if (k > 0) {
				pushed += (size_t)k;
				idle = 0;
				/* far more than the sockets' buffers hold: the
				 * server keeps reading a client that does not read */
				assert_true(pushed < (size_t)64 << 20);
			} else {
				assert_int_equal(errno, EAGAIN);
				idle++;
				usleep(5000);
			}
		}
		assert_true(pushed > 0);
		good = dial(s.port);
		echo_round_trips(good, 200); /* served while the hog is stuck */
		close(good);
		/* the stuck connection still gets its bytes once it reads */
		char buf[4096];
		size_t got = 0;
		fcntl(hog, F_SETFL, 0);
		while (got < 65536) {
			ssize_t k = recv(hog, buf, sizeof buf, 0);
			assert_true(k > 0);
			got += (size_t)k;
		}
		/* SIGTERM with a client still connected */
		server_stop(&s);
		close(hog);
	}
}

/* ---- HTTP ---------------------------------------------------------------------- */

static const char get_root[] = "GET / HTTP/1.1\r\nHost: t\r\n\r\n";

/* One whole response (its header read byte by byte, so that a pipelined
 * next one stays in the socket): the status code; its body in body. */
static int read_response(int fd, char *body, size_t size)
{
	char head[2048];
	size_t have = 0;
	unsigned long len = 0;
	int status = 0;

	while (have < 4 || memcmp(head + have - 4, "\r\n\r\n", 4)) {
		assert_true(have < sizeof head - 1);
		recv_exact(fd, head + have++, 1);
	}
	head[have] = 0;
	assert_int_equal(sscanf(head, "HTTP/1.%*d %d ", &status), 1);
	for (char *h = strstr(head, "\r\n"); h && h[2] != '\r'; h = strstr(h + 2, "\r\n"))
		if (!strncasecmp(h + 2, "Content-Length:", 15))
			len = strtoul(h + 17, NULL, 10);
	assert_true(len < size);
	recv_exact(fd, body, len);
	body[len] = 0;
	return status;
}

static void expect_hello(int fd)
{
	char buf[sizeof HTTP_HELLO_RESPONSE];

	if (!exact) {
		assert_int_equal(read_response(fd, buf, sizeof buf), 200);
		assert_string_equal(buf, "Hello, World!");
		return;
	}
	recv_exact(fd, buf, sizeof buf - 1);
	assert_memory_equal(buf, HTTP_HELLO_RESPONSE, sizeof buf - 1);
}

/* Read the answer up to the peer's close; it must start with prefix and
 * hold needle (if any). */
static void expect_answer_then_close(int fd, const char *prefix, const char *needle)
{
	char buf[1024];
	size_t have = 0;

	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		assert_int_equal(poll(&pf, 1, GUARD_MS), 1);
		ssize_t k = recv(fd, buf + have, sizeof buf - 1 - have, 0);
		if (k == 0 || (k < 0 && errno == ECONNRESET))
			break;
		assert_true(k > 0);
		have += (size_t)k;
	}
	buf[have] = 0;
	assert_true(have >= strlen(prefix));
	assert_memory_equal(buf, prefix, strlen(prefix));
	if (needle)
		assert_non_null(strstr(buf, needle));
}

/* A connection that got one answer, then two for two requests pipelined
 * in one write (keep-alive and pipelining). */
static int dial_keepalive_pipelined(int port)
{
	int fd = dial(port);

	send_all(fd, get_root, sizeof get_root - 1);
	expect_hello(fd);
	send_all(fd, "GET / HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n", 54);
	expect_hello(fd);
	expect_hello(fd);
	return fd;
}

static void test_http_protocol(void **state)
{
	(void)state;
	for (int i = 0; i < n_http; i++) {
		struct server s;
		int fd;

		server_start(&s, http_server(i), NULL);
		fd = dial_keepalive_pipelined(s.port);
		/* Connection: close is honoured */
		send_all(fd, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 46);
		expect_answer_then_close(fd, "HTTP/1.1 200 OK", "Connection: close\r\n");
		close(fd);
		/* HTTP/1.0: closed unless keep-alive was asked for */
		fd = dial(s.port);
		const char *ka10 = "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
		struct http_parser p;
		struct http_req req;
		char buf[512];
		size_t n;
		http_parser_init(&p);
		assert_int_equal(http_parse(&p, ka10, strlen(ka10), &req), HTTP_DONE);
		const char *want = http_response(&req, &n);
		assert_non_null(strstr(want, "Connection: keep-alive\r\n"));
		send_all(fd, ka10, strlen(ka10));
		recv_exact(fd, buf, n);
		assert_memory_equal(buf, want, n);
		send_all(fd, "GET /x HTTP/1.0\r\n\r\n", 19);
		expect_answer_then_close(fd, "HTTP/1.1 404 Not Found", "Connection: close\r\n");
		close(fd);
		/* malformed: 400 and close; too large: 431 and close */
		fd = dial(s.port);
		send_all(fd, "GARBAGE\r\n\r\n", 11);
		expect_answer_then_close(fd, "HTTP/1.1 400 Bad Request", "Connection: close");
		close(fd);
		fd = dial(s.port);
		static char big[HTTP_MAX_REQUEST + 16];
		memcpy(big, "GET / HTTP/1.1\r\nHost: t\r\nX: ", 28);
		memset(big + 28, 'a', sizeof big - 28);
		send_all(fd, big, sizeof big);
		expect_answer_then_close(fd, "HTTP/1.1 431 ", NULL);
		close(fd);
		server_stop(&s);
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_http_slowloris(void **state)
{
	(void)state;
	for (int i = 0; i < n_http + n_peer; i++) {
		struct server s;
		const char *trickle = "GET / HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
		int slow, good, served = 0, closed = 0;
		uint64_t t0;

		static const char *const deadline[] = { "--header-timeout", "300", NULL };
		server_start(&s, http_server(i), deadline);
		slow = dial(s.port);
		good = dial(s.port);
		t0 = now_ms();
		/* one header byte every 10 ms, forever (until the server closes
		 * the connection); meanwhile the other client is served */
		for (size_t k = 0; now_ms() - t0 < GUARD_MS; k++) {
			if (send(slow, trickle + k % strlen(trickle), 1, MSG_NOSIGNAL) != 1 ||
			    closed_by_peer(slow, 0)) {
				closed = 1;
				break;
			}
			send_all(good, get_root, sizeof get_root - 1);
			expect_hello(good);
			served++;
			usleep(10000);
		}
		assert_true(closed);   /* the deadline closed it (no answer) */
		assert_true(served > 0);
		/* a client that sends nothing at all is timed the same way */
		int mute = dial(s.port);
		assert_true(closed_by_peer(mute, GUARD_MS));
		close(mute);
		/* and the server still serves */
		send_all(good, get_root, sizeof get_root - 1);
		expect_hello(good);
		close(slow);
		server_stop(&s); /* with a client still connected */
		close(good);
	}
}

/* An idle keep-alive connection is closed after --idle-timeout; one with
 * a request in progress is not (it is under the header deadline, set far
 * longer than the test): the quiet client is closed, then the busy one
 * finishes its request and is answered. No verdict depends on how fast
 * the test runs: the busy connection is never idle while it waits. */
static void test_http_idle_timeout(void **state)
{
	(void)state;
	for (int i = 0; i < n_http + n_peer; i++) {
		static const char *const idle[] = { "--idle-timeout", "300", "--header-timeout",
						    "600000", NULL };
		static const char head[] = "GET / HTTP/1.1\r\nHost: t\r\n";
		struct server s;
		int quiet, busy;

		server_start(&s, http_server(i), idle);
		quiet = dial(s.port);
		busy = dial(s.port);
		/* one request each: both are idle keep-alive connections then */
		send_all(quiet, get_root, sizeof get_root - 1);
		expect_hello(quiet);
		send_all(busy, get_root, sizeof get_root - 1);
		expect_hello(busy);
		/* busy begins a request and stops half-way: no longer idle */
		send_all(busy, head, sizeof head - 1);
		/* the quiet one says nothing and is closed by the idle timeout */
		assert_true(closed_by_peer(quiet, GUARD_MS));
		/* the busy one's request, finished now, is answered */
		send_all(busy, "\r\n", 2);
		expect_hello(busy);
		close(quiet);
		close(busy);
		server_stop(&s);
	}
}

/* What any HTTP/1.1 server does, for the peers: keep-alive, pipelining,
 * Connection: close, HTTP/1.0 closed after its answer, 404 for another
 * path; SIGTERM with a client connected. */
static void test_http_peer_basics(void **state)
{
	(void)state;
	for (int i = n_http; i < n_http + n_peer; i++) {
		struct server s;
		char body[1024];
		int fd;

		server_start(&s, http_server(i), NULL);
		fd = dial_keepalive_pipelined(s.port);
		const char *other = "GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
		send_all(fd, other, strlen(other));
		assert_int_equal(read_response(fd, body, sizeof body), 404);
		send_all(fd, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 46);
		expect_hello(fd);
		assert_true(closed_by_peer(fd, GUARD_MS));
		close(fd);
		fd = dial(s.port);
		const char *get10 = "GET / HTTP/1.0\r\n\r\n";
		send_all(fd, get10, strlen(get10));
		expect_hello(fd);
		assert_true(closed_by_peer(fd, GUARD_MS));
		close(fd);
		fd = dial(s.port);
		send_all(fd, get_root, sizeof get_root - 1);
		expect_hello(fd);
		server_stop(&s); /* with a client still connected */
		close(fd);
	}
}

/* A failed assertion leaves its server running: kill it, or it would keep
 * the test's output open. */
static int kill_running(void **state)
{
	(void)state;
	if (running > 0) {
		kill(running, SIGKILL);
		waitpid(running, NULL, 0);
		running = -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_echo_reader_that_never_reads, kill_running),
		cmocka_unit_test_teardown(test_http_protocol, kill_running),
		cmocka_unit_test_teardown(test_http_slowloris, kill_running),
		cmocka_unit_test_teardown(test_http_idle_timeout, kill_running),
		cmocka_unit_test_teardown(test_http_peer_basics, kill_running),
	};
	int i = 1;

	signal(SIGPIPE, SIG_IGN);
	echo_servers = argv + i;
	while (i < argc && strcmp(argv[i], "--"))
		i++;
	n_echo = (int)(argv + i - echo_servers);
	http_servers = argv + i + (i < argc);
	i += i < argc;
	while (i < argc && strcmp(argv[i], "--"))
		i++;
	n_http = (int)(argv + i - http_servers);
	http_peers = argv + i + (i < argc);
	n_peer = argc - i - (i < argc);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
