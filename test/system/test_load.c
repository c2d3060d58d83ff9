/* SPDX-License-Identifier: MIT */
/*
 * The example echo server (docs/examples/echo_server.c, a separate process)
 * under load: 10,000 concurrent loopback connections driven by coring client
 * coroutines, messages of random sizes from 1 byte to 64 KiB, one exchange in
 * ten cut short by a random disconnect (RST or FIN in mid-message, then a
 * fresh connection). Every byte of every completed exchange is checked; the
 * server must keep serving, end every connection it accepted (its descriptor
 * count returns to where it started), and exit 0 on SIGTERM (on SIGINT too,
 * a connection open: sigint_stops_it).
 *
 *   test_load /path/to/echo_server
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <cmocka.h>

#include <coring/io.h>
#include "helpers.h"

#define CONNS 10000
#define ROUNDS 3
#define MAX_MSG 65536
#define ABORT_ONE_IN 10

static const char *server_path;
static unsigned char pattern[2 * MAX_MSG]; /* message = a slice of it */

struct client {
	co_frame co;
	co_io io;
	co_io_all x;
	int id, fd, round, len, got, cut;
	unsigned seed;
	size_t off;
	unsigned char buf[4096];
};

static struct sockaddr_in server_addr;
static long exchanges, aborted, bad;

/* Log-uniform sizes from 1 byte to MAX_MSG: many small, some large. */
static int message_len(unsigned *seed)
{
	unsigned bits = (unsigned)rand_r(seed) % 17; /* 2^0 .. 2^16 */
	return 1 + (int)((unsigned)rand_r(seed) % (1u << bits));
}

static int client_fn(co_frame *f)
{
	struct client *c = (struct client *)f;

	CO_BEGIN(f);
	for (c->round = 0; c->round < ROUNDS; c->round++) {
		c->len = message_len(&c->seed);
		c->off = (size_t)rand_r(&c->seed) % MAX_MSG;
		if (rand_r(&c->seed) % ABORT_ONE_IN == 0) {
			/* a peer that goes away mid-message, then comes back */
			c->cut = rand_r(&c->seed) % c->len;
			CO_AWAIT(f, co_send_all(&c->x, c->fd, pattern + c->off, (size_t)c->cut,
						     MSG_NOSIGNAL));
			if (rand_r(&c->seed) & 1) {
				struct linger lg = { 1, 0 };
				setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg); /* RST */
			}
			close(c->fd);
			aborted++;
			c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			CO_AWAIT(f, co_connect(&c->io, c->fd, (struct sockaddr *)&server_addr,
					       sizeof server_addr));
			if (co_result(f) < 0)
				goto fail;
			continue;
		}
		CO_AWAIT(f, co_send_all(&c->x, c->fd, pattern + c->off, (size_t)c->len,
					     MSG_NOSIGNAL));
		if (co_result(f) != c->len)
			goto fail;
		for (c->got = 0; c->got < c->len; c->got += co_result(f)) {
			size_t want = (size_t)(c->len - c->got);
			if (want > sizeof c->buf)
				want = sizeof c->buf;
			CO_AWAIT(f, co_recv(&c->io, c->fd, c->buf, want, 0));
			if (co_result(f) <= 0 ||
			    memcmp(c->buf, pattern + c->off + (size_t)c->got, (size_t)co_result(f)))
				goto fail;
		}
		exchanges++;
	}
	goto out;
fail:
	if (bad++ < 5)
		print_error("client %d: round %d failed: %d\n", c->id, c->round, co_result(f));
out:
	close(c->fd);
	CO_END(f);
}

/* ---- the server process --------------------------------------------------- */

static pid_t server_pid;

/* Start the example server on an ephemeral port, with at most max_fds
 * descriptors (0: as ours); read the port it prints. */
static void server_start_limited(rlim_t max_fds)
{
	int pfd[2], port = 0;
	char line[256];
	size_t len = 0;
	ssize_t n;

	assert_int_equal(pipe(pfd), 0);
	server_pid = fork();
	assert_true(server_pid >= 0);
	if (server_pid == 0) {
		dup2(pfd[1], 2);
		close(pfd[0]);
		close(pfd[1]);
		if (max_fds > 0 && setrlimit(RLIMIT_NOFILE, &(struct rlimit){ max_fds, max_fds }) != 0)
			_exit(126);
		execl(server_path, server_path, "--port", "0", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while (len + 1 < sizeof line && (n = read(pfd[0], line + len, 1)) == 1 && line[len] != '\n')
		len++;
	line[len] = 0;
	close(pfd[0]); /* the server writes nothing more unless it fails */
	assert_true(sscanf(line, "echo_server: listening on 127.0.0.1:%d", &port) == 1);
	server_addr = (struct sockaddr_in){ .sin_family = AF_INET,
					    .sin_port = htons((uint16_t)port),
					    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
}

static void server_start(void)
{
	server_start_limited(0);
}

static int server_fds(void)
{
	char path[64];
	int n = 0;
	DIR *d;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)server_pid);
	d = opendir(path);
	if (d == NULL)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 2; /* . and .. */
}

/* ---- the test --------------------------------------------------------------- */

static int raise_fd_limit(rlim_t want)
{
	struct rlimit rl;

	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur >= want)
		return 1;
	if (rl.rlim_max < want)
		rl.rlim_max = want; /* allowed as root (CAP_SYS_RESOURCE) */
	rl.rlim_cur = want;
	return setrlimit(RLIMIT_NOFILE, &rl) == 0;
}

static void test_10000_connections(void **state)
{
	co_engine_opts o = { .ready_size = 16384, .sq_entries = 2048 };
	struct client *cl;
	co_engine e;
	int fds0, status, n;
	(void)state;

	if (!raise_fd_limit(CONNS + 1000)) {
		print_message("      RLIMIT_NOFILE cannot reach %d here: not run\n", CONNS + 1000);
		skip();
	}
	server_start();
	fds0 = server_fds(); /* its engine is up: it printed its port after */
	cl = calloc(CONNS, sizeof *cl);
	assert_non_null(cl);

	/* All 10,000 connected before any exchange starts: they are concurrent. */
	for (int i = 0; i < CONNS; i++) {
		cl[i].fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(cl[i].fd >= 0);
		assert_int_equal(connect(cl[i].fd, (struct sockaddr *)&server_addr, sizeof server_addr), 0);
		cl[i].id = i;
		cl[i].seed = (unsigned)i * 2654435761u + 1;
	}
	/* it holds all of them at once: it accepts them all (no verdict by
	 * time: the test's timeout is the hang guard) */
	while ((n = server_fds()) >= 0 && n < fds0 + CONNS) /* (-1: it died) */
		usleep(10000);
	assert_int_equal(n, fds0 + CONNS);

	assert_int_equal(co_engine_init(&e, &o), 0);
	for (int i = 0; i < CONNS; i++) {
		co_init(&cl[i].co, client_fn);
		assert_int_equal(co_engine_spawn(&e, &cl[i].co), 0);
	}
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(bad, 0);
	assert_int_equal(exchanges + aborted, (long)CONNS * ROUNDS);
	assert_true(aborted > 0);
	print_message("      %ld exchanges verified, %ld cut short by a disconnect\n", exchanges,
		      aborted);

	/* every connection the server accepted has ended: no descriptor kept */
	while ((n = server_fds()) > fds0) /* (the timeout is the hang guard) */
		usleep(10000);
	assert_int_equal(n, fds0);
	assert_int_equal(kill(server_pid, SIGTERM), 0);
	assert_int_equal(waitpid(server_pid, &status, 0), server_pid);
	server_pid = 0;
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	free(cl);
}

/* echo_server.c's header: SIGINT stops it cleanly too, with a connection
 * open: the connection ends (the client reads its end) and the exit status
 * is 0. */
static void test_sigint_stops_it(void **state)
{
	char buf[8];
	int fd, status;

	(void)state;
	server_start();
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&server_addr, sizeof server_addr), 0);
	assert_int_equal(send(fd, "ping", 4, MSG_NOSIGNAL), 4);
	assert_int_equal(recv(fd, buf, 4, MSG_WAITALL), 4); /* served: the connection is up */
	assert_memory_equal(buf, "ping", 4);
	assert_int_equal(kill(server_pid, SIGINT), 0);
	assert_int_equal(waitpid(server_pid, &status, 0), server_pid);
	server_pid = 0;
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(recv(fd, buf, sizeof buf, 0), 0); /* its end, not a reset */
	close(fd);
}

/* The server's CPU time so far (user and system), in clock ticks. */
static long server_cpu_ticks(void)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)server_pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = 0;
	p = strrchr(buf, ')'); /* after the command's name, which may hold spaces */
	assert_non_null(p);
	/* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
	assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st),
			 2);
	return (long)(ut + st);
}

static void echo_once(int fd)
{
	char buf[4];

	assert_int_equal(send(fd, "ping", 4, MSG_NOSIGNAL), 4);
	assert_int_equal(recv(fd, buf, 4, MSG_WAITALL), 4);
	assert_memory_equal(buf, "ping", 4);
}

/* echo_server.c's accept loop: out of descriptors (EMFILE), it waits for
 * connections to end rather than retrying at once. With 32 descriptors and
 * 48 clients, it holds all it can and uses under a tenth of a CPU for a
 * second (a retry at once spins one); the connections it holds are
 * served; once they close, the ones left waiting are accepted and served. */
static void test_out_of_descriptors_waits(void **state)
{
	enum { LIMIT = 32, CLIENTS = 48 };
	int fd[CLIENTS], n, status;
	long cpu;
	(void)state;

	server_start_limited(LIMIT);
	for (int i = 0; i < CLIENTS; i++) {
		fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(fd[i] >= 0);
		assert_int_equal(connect(fd[i], (struct sockaddr *)&server_addr, sizeof server_addr), 0);
	}
	/* every descriptor taken (the test's timeout is the hang guard) */
	while ((n = server_fds()) >= 0 && n < LIMIT)
		usleep(10000);
	assert_int_equal(n, LIMIT);
	cpu = server_cpu_ticks();
	usleep(1000 * 1000);
	cpu = server_cpu_ticks() - cpu;
	print_message("      out of descriptors: %ld ticks of CPU in 1 s (%ld a second)\n", cpu,
		      sysconf(_SC_CLK_TCK));
	assert_true(cpu * 10 < sysconf(_SC_CLK_TCK)); /* under 0.1 s */
	echo_once(fd[0]); /* the first was accepted: it is served */
	for (int i = 0; i < CLIENTS / 2; i++)
		close(fd[i]);
	for (int i = CLIENTS / 2; i < CLIENTS; i++)
		echo_once(fd[i]); /* the last were waiting: accepted now */
	for (int i = CLIENTS / 2; i < CLIENTS; i++)
		close(fd[i]);
	assert_int_equal(kill(server_pid, SIGTERM), 0);
	assert_int_equal(waitpid(server_pid, &status, 0), server_pid);
	server_pid = 0;
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* After a failed assertion too: the server must not outlive the test (it
 * holds the test runner's output pipe). */
static int server_kill(void **state)
{
	(void)state;
	if (server_pid > 0) {
		kill(server_pid, SIGKILL);
		waitpid(server_pid, NULL, 0);
		server_pid = 0;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_10000_connections, server_kill),
		cmocka_unit_test_teardown(test_sigint_stops_it, server_kill),
		cmocka_unit_test_teardown(test_out_of_descriptors_waits, server_kill),
	};
	server_path = getenv("CORING_ECHO_SERVER");
	if (server_path == NULL) {
		fprintf(stderr, "usage: CORING_ECHO_SERVER=/path/to/echo_server %s [case]\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < sizeof pattern; i++)
		pattern[i] = (unsigned char)(i * 2654435761u >> 13);
	signal(SIGPIPE, SIG_IGN);
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
