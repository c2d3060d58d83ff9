/* SPDX-License-Identifier: MIT */
/*
 * Hostile peers against an echo server built on coring (a context running
 * an accept loop and one coroutine per connection): peers that reset,
 * half-close or die, and accept failing with EMFILE. The server must keep
 * serving, end every connection coroutine, and leak no descriptor.
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
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <cmocka.h>

#include <coring/context.h>
#include <coring/io.h>
#include "helpers.h"

/* ---- the server under test --------------------------------------------- */

struct server;

/* A connection: the tests' echo coroutine (helpers.h), and its server. */
struct conn {
	struct co_test_echo echo;
	struct server *srv;
};

struct server {
	co_frame co;
	co_io io;
	int lfd;
	uint16_t port;
	atomic_int accepted, finished, emfile;
	co_context ctx;
};

static void conn_done(co_frame *f)
{
	struct conn *c = (struct conn *)f;
	atomic_fetch_add(&c->srv->finished, 1);
	free(c);
}

static int server_fn(co_frame *f)
{
	struct server *s = (struct server *)f;
	struct conn *c;
	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_accept(&s->io, s->lfd, NULL, NULL, SOCK_CLOEXEC));
		if (co_result(f) == -ECANCELED)
			break;
		if (co_result(f) == -EMFILE || co_result(f) == -ENFILE) {
			/* out of descriptors: back off, then try again */
			atomic_fetch_add(&s->emfile, 1);
			CO_AWAIT(f, co_sleep(&s->io, 5 * CO_MS));
			if (co_result(f) == -ECANCELED)
				break;
			continue;
		}
		if (co_result(f) < 0)
			continue;
		c = calloc(1, sizeof *c);
		c->echo.fd = co_result(f);
		c->srv = s;
		atomic_fetch_add(&s->accepted, 1);
		co_init(&c->echo.co, co_test_echo_fn);
		c->echo.co.on_done = conn_done;
		co_engine_spawn(co_engine_current(), &c->echo.co);
	}
	CO_END(f);
}

static void server_start(struct server *s)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;

	memset(s, 0, sizeof *s);
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->lfd >= 0);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(s->lfd, 1024), 0);
	assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &len), 0);
	s->port = ntohs(a.sin_port);
	assert_int_equal(co_context_init(&s->ctx, NULL), 0);
	co_init(&s->co, server_fn);
	assert_int_equal(co_context_spawn(&s->ctx, &s->co), 0);
	assert_int_equal(co_context_start(&s->ctx, CO_RUN_UNTIL_STOP), 0);
}

/* Stop: cancel the accept and whatever is still pending; join. */
static void server_stop(struct server *s)
{
	assert_int_equal(co_context_stop(&s->ctx, 1), 0);
	assert_int_equal(co_context_join(&s->ctx), 0);
	assert_int_equal(co_context_destroy(&s->ctx), 0);
	close(s->lfd);
}

/* ---- clients ------------------------------------------------------------ */

static int client_connect(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* One full echo of n pattern bytes; 0 if every byte came back. */
static int echo_once(int fd, size_t n, unsigned seed)
{
	static _Thread_local unsigned char out[65536], in[65536];
	size_t got = 0;
	for (size_t i = 0; i < n; i++)
		out[i] = (unsigned char)rand_r(&seed);
	if (send(fd, out, n, MSG_NOSIGNAL) != (ssize_t)n)
		return -1;
	while (got < n) {
		ssize_t r = recv(fd, in + got, n - got, 0);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return memcmp(in, out, n) ? -1 : 0;
}

static void reset_close(int fd)
{
	struct linger lg = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	close(fd); /* RST */
}

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

static void wait_finished(struct server *s, int want)
{
	for (int i = 0; i < 5000 && atomic_load(&s->finished) < want; i++)
		usleep(1000); /* hang guard only */
	assert_int_equal(atomic_load(&s->finished), want);
}

/* ---- misbehaving peers ---------------------------------------------------- */

#define GOOD 40

static void test_bad_peers_do_not_hurt_good_ones(void **state)
{
	struct server s;
	int fds0 = count_fds(), good[GOOD], opened = 0;
	pid_t pid;
	(void)state;
	server_start(&s);
	/* well-behaved clients, connected throughout */
	for (int i = 0; i < GOOD; i++) {
		good[i] = client_connect(s.port);
		assert_true(good[i] >= 0);
		assert_int_equal(echo_once(good[i], 100, (unsigned)i), 0);
	}
	opened += GOOD;
	/* 30 peers reset mid-message: half a message, then RST */
	for (int i = 0; i < 30; i++) {
		int fd = client_connect(s.port);
		assert_true(fd >= 0);
		assert_int_equal(send(fd, "partial", 7, MSG_NOSIGNAL), 7);
		reset_close(fd);
	}
	opened += 30;
	/* 30 half-close: send, shut the write side, read the echo and EOF */
	for (int i = 0; i < 30; i++) {
		int fd = client_connect(s.port);
		char buf[16];
		ssize_t got = 0, r;
		assert_true(fd >= 0);
		assert_int_equal(send(fd, "halfclose", 9, MSG_NOSIGNAL), 9);
		shutdown(fd, SHUT_WR);
		while ((r = recv(fd, buf + got, sizeof buf - (size_t)got, 0)) > 0)
			got += r;
		assert_int_equal(got, 9);
		assert_int_equal(r, 0); /* the server closed after our EOF */
		close(fd);
	}
	opened += 30;
	/* a client process with 20 connections killed mid-conversation */
	pid = fork();
	if (pid == 0) {
		for (int i = 0; i < 20; i++) {
			int fd = client_connect(s.port);
			if (fd >= 0)
				send(fd, "dying", 5, MSG_NOSIGNAL);
		}
		pause();
		_exit(0);
	}
	for (int i = 0; i < 5000 && atomic_load(&s.accepted) < opened + 20; i++)
		usleep(1000); /* hang guard only */
	assert_int_equal(atomic_load(&s.accepted), opened + 20);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	opened += 20;
	/* the good clients are still served, every byte intact */
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < GOOD; i++)
			assert_int_equal(echo_once(good[i], 1 + (size_t)(i * 997 + round * 31) % 60000,
						   (unsigned)(i + round)), 0);
	/* every bad peer's coroutine has ended */
	wait_finished(&s, opened - GOOD);
	for (int i = 0; i < GOOD; i++)
		close(good[i]);
	wait_finished(&s, opened);
	assert_int_equal(atomic_load(&s.accepted), opened);
	server_stop(&s);
	assert_int_equal(count_fds(), fds0); /* no descriptor leaked */
}

/* ---- EMFILE on accept ------------------------------------------------------- */

#define EMFILE_CLIENTS 30

static void test_accept_backs_off_on_emfile(void **state)
{
	/* The client process opens 30 connections at once and keeps each until
	 * it is echoed. The server may hold only a few descriptors: accept
	 * fails with EMFILE, backs off, and succeeds as connections finish. */
	struct server s;
	struct rlimit old, low;
	int status, fds0;
	pid_t pid;
	(void)state;
	server_start(&s);
	/* the server's limit: a few descriptors above what is open now (set
	 * before the clients exist, so every accept runs under it) */
	fds0 = count_fds();
	getrlimit(RLIMIT_NOFILE, &old);
	low = old;
	low.rlim_cur = (rlim_t)fds0 + 4;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	pid = fork();
	if (pid == 0) {
		int fd[EMFILE_CLIENTS], bad = 0;
		setrlimit(RLIMIT_NOFILE, &old); /* the clients are not limited */
		for (int i = 0; i < EMFILE_CLIENTS; i++)
			fd[i] = client_connect(s.port);
		for (int i = 0; i < EMFILE_CLIENTS; i++) {
			bad |= fd[i] < 0 || echo_once(fd[i], 64, (unsigned)i) != 0;
			if (fd[i] >= 0)
				close(fd[i]); /* frees a descriptor on the server */
		}
		_exit(bad);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	wait_finished(&s, EMFILE_CLIENTS);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0); /* every client was served */
	assert_int_equal(atomic_load(&s.accepted), EMFILE_CLIENTS);
	print_message("      %d accepts failed with EMFILE and were retried\n",
		      atomic_load(&s.emfile));
	assert_true(atomic_load(&s.emfile) > 0);
	server_stop(&s);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_peers_do_not_hurt_good_ones),
		cmocka_unit_test(test_accept_backs_off_on_emfile),
	};
	signal(SIGPIPE, SIG_IGN);
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
