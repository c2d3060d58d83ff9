/* SPDX-License-Identifier: MIT */
/*
 * The coring echo server for the benchmarks: echo_coring --port P [--threads N]
 * Listens on 127.0.0.1:P (0: a free port, printed as "port=P"), echoes
 * every byte on every connection. Runs on a scheduler of N contexts, each
 * with a listener task on its own SO_REUSEPORT socket; connections are
 * coroutines spawned on the context that accepted them: recv, send, recv.
 * Same buffer size and socket options as echo_epoll and echo_uring
 * (bench_util.h). SIGINT/SIGTERM: co_sched_shutdown cancels all I/O, the
 * coroutines end, co_sched_run returns, exit 0.
 */
#include <stdatomic.h>
#include <coring/io.h>
#include <coring/scheduler.h>

#include "bench_util.h"

/* Set before co_sched_shutdown: a connection that was between two awaits
 * when the shutdown cancelled all I/O must not start a new recv. */
static atomic_int stopping;

struct conn {
	co_frame co;
	co_io io;
	int fd, n, sent;
	char buf[BENCH_BUF_SIZE];
};

static int conn_fn(co_frame *f)
{
	struct conn *c = (struct conn *)f;

	CO_BEGIN(f);
	while (!atomic_load_explicit(&stopping, memory_order_relaxed)) {
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
	while (!atomic_load_explicit(&stopping, memory_order_relaxed)) {
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
		bench_conn_opts(fd);
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

static void stop_all(void *arg)
{
	/* seen by every context before its cancel: the engine reads the stop
	 * request with acquire, after this store */
	atomic_store(&stopping, 1);
	co_sched_shutdown(arg);
}

int main(int argc, char **argv)
{
	struct bench_args a = bench_parse(argc, argv);
	co_sched_opts o = { .contexts = (unsigned)a.threads,
			    .engine = { .sq_entries = 1024, .ready_size = 8192 } };
	struct listener *ls = calloc((size_t)a.threads, sizeof *ls);
	co_scheduler s;
	struct bench_sig sig = { stop_all, &s };
	pthread_t sig_thread;
	int err;

	bench_block_signals();
	if (ls == NULL || (err = co_sched_init(&s, &o)) < 0) {
		fprintf(stderr, "echo_coring: init failed\n");
		return 1;
	}
	for (int i = 0; i < a.threads; i++) {
		ls[i].lfd = bench_listen(&a.port);
		if (ls[i].lfd < 0) {
			perror("echo_coring: listen");
			return 1;
		}
		co_init(&ls[i].co, listener_fn);
		co_sched_submit_to(&s, (unsigned)i, &ls[i].co);
	}
	pthread_create(&sig_thread, NULL, bench_sig_main, &sig);
	bench_ready("echo_coring", a.port, a.threads);
	err = co_sched_run(&s);
	pthread_join(sig_thread, NULL);
	for (int i = 0; i < a.threads; i++)
		close(ls[i].lfd);
	free(ls);
	co_sched_destroy(&s);
	if (err < 0) {
		fprintf(stderr, "echo_coring: %s\n", strerror(-err));
		return 1;
	}
	return 0;
}
