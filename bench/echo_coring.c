/* SPDX-License-Identifier: MIT */
/*
 * The coring echo server for the benchmarks: echo_coring --port P [--threads N]
 * Listens on 127.0.0.1:P, echoes every byte on every connection
 * (TCP_NODELAY). Runs on a scheduler of N contexts, each with a listener
 * task on its own SO_REUSEPORT socket; connections are coroutines spawned
 * on the context that accepted them. SIGINT/SIGTERM: co_sched_shutdown
 * cancels all I/O, the listeners end, co_sched_run returns, exit 0.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <coring/io.h>
#include <coring/scheduler.h>

#define BUF_SIZE 16384

struct conn {
	co_frame co;
	co_io io;
	int fd, n, sent;
	char buf[BUF_SIZE];
};

static int conn_fn(co_frame *f)
{
	struct conn *c = (struct conn *)f;

	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_recv(&c->io, c->fd, c->buf, sizeof c->buf, 0));
		c->n = co_result(f);
		if (c->n <= 0)
			break;
		for (c->sent = 0; c->sent < c->n; c->sent += co_result(f)) {
			CO_AWAIT(f, co_send(&c->io, c->fd, c->buf + c->sent,
					    (size_t)(c->n - c->sent), MSG_NOSIGNAL));
			if (co_result(f) <= 0)
				goto out;
		}
	}
out:
	CO_AWAIT(f, co_close(&c->io, c->fd));
	CO_END(f);
}

static void free_frame(co_frame *f)
{
	free(f);
}

struct listener {
	co_frame co;
	co_io io;
	int lfd;
};

static int listener_fn(co_frame *f)
{
	struct listener *l = (struct listener *)f;
	struct conn *c;
	int fd;

	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_accept(&l->io, l->lfd, NULL, NULL, SOCK_CLOEXEC));
		fd = co_result(f);
		if (fd == -ECANCELED)
			break;
		if (fd < 0) { /* EMFILE and friends: back off, keep serving */
			CO_AWAIT(f, co_sleep(&l->io, 10 * CO_MS));
			if (co_result(f) == -ECANCELED)
				break;
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
		c = malloc(sizeof *c);
		if (c == NULL) {
			close(fd);
			continue;
		}
		c->fd = fd;
		co_init(&c->co, conn_fn);
		c->co.on_done = free_frame;
		co_engine_spawn(co_engine_current(), &c->co);
	}
	CO_END(f);
}

static int listen_on(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 4096) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void *signal_main(void *arg)
{
	co_scheduler *s = arg;
	sigset_t sigs;
	int sig;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigwait(&sigs, &sig);
	co_sched_shutdown(s);
	return NULL;
}

int main(int argc, char **argv)
{
	int port = 0, threads = 1, err;
	co_sched_opts o = { .engine = { .sq_entries = 1024, .ready_size = 8192 } };
	struct listener *ls;
	co_scheduler s;
	pthread_t sig_thread;
	sigset_t sigs;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--port"))
			port = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--threads"))
			threads = atoi(argv[i + 1]);
	}
	if (port <= 0 || port > 65535 || threads < 1 || threads > 256) {
		fprintf(stderr, "usage: echo_coring --port P [--threads N]\n");
		return 2;
	}
	/* Signals go to one thread, which shuts the scheduler down. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	o.contexts = (unsigned)threads;
	if ((err = co_sched_init(&s, &o)) < 0) {
		fprintf(stderr, "echo_coring: %s\n", strerror(-err));
		return 1;
	}
	ls = calloc((size_t)threads, sizeof *ls);
	for (int i = 0; i < threads; i++) {
		ls[i].lfd = listen_on(port);
		if (ls[i].lfd < 0) {
			fprintf(stderr, "echo_coring: listen: %s\n", strerror(errno));
			return 1;
		}
		co_init(&ls[i].co, listener_fn);
		co_sched_submit_to(&s, (unsigned)i, &ls[i].co);
	}
	pthread_create(&sig_thread, NULL, signal_main, &s);
	fprintf(stderr, "echo_coring: listening on 127.0.0.1:%d, %d context(s)\n", port, threads);
	err = co_sched_run(&s);
	pthread_join(sig_thread, NULL);
	for (int i = 0; i < threads; i++)
		close(ls[i].lfd);
	free(ls);
	co_sched_destroy(&s);
	if (err < 0) {
		fprintf(stderr, "echo_coring: %s\n", strerror(-err));
		return 1;
	}
	return 0;
}
