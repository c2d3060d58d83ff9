/* SPDX-License-Identifier: MIT */
/*
 * The part both coring servers (echo_coring, http_coring) share: a
 * scheduler of --threads contexts, a listener coroutine on each (its own
 * SO_REUSEPORT socket) that spawns a connection coroutine per accepted
 * descriptor on its own context, and a clean stop on SIGINT/SIGTERM.
 * A server includes this once and calls coring_server_main with its
 * connection constructor.
 */
#ifndef CORING_BENCH_CORING_SERVER_H
#define CORING_BENCH_CORING_SERVER_H

#include <coring/io.h>
#include <coring/scheduler.h>

#include "bench_util.h"

/* Builds the connection coroutine for fd (co_init'ed, on_done set), or
 * returns NULL (the listener closes fd). */
typedef co_frame *(*coring_new_conn)(int fd);

struct coring_listener {
	co_frame co;
	co_io io;
	int lfd;
	coring_new_conn new_conn;
};

static int coring_listener_fn(co_frame *f)
{
	struct coring_listener *l = (struct coring_listener *)f;
	co_frame *c;
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
		bench_conn_opts(fd);
		if ((c = l->new_conn(fd)) == NULL) {
			close(fd);
			continue;
		}
		co_engine_spawn(co_engine_current(), c);
	}
	CO_END(f);
}

static void coring_free_frame(co_frame *f)
{
	free(f);
}

/* SIGINT/SIGTERM: cancel all I/O; the engines keep cancelling what
 * coroutines start afterwards, so every coroutine ends. */
static void coring_stop(void *arg)
{
	co_sched_stop(arg, CO_STOP_CANCEL);
}

static int coring_server_main(const char *name, struct bench_args a, coring_new_conn new_conn)
{
	co_sched_opts o = { .contexts = (unsigned)a.threads,
			    .engine = { .sq_entries = 1024, .ready_size = 8192 } };
	struct coring_listener *ls = calloc((size_t)a.threads, sizeof *ls);
	co_sched s;
	struct bench_sig sig = { coring_stop, &s };
	pthread_t sig_thread;
	int err;

	bench_block_signals();
	if (ls == NULL || (err = co_sched_init(&s, &o)) < 0) {
		fprintf(stderr, "%s: init failed\n", name);
		return 1;
	}
	for (int i = 0; i < a.threads; i++) {
		ls[i].lfd = bench_listen(&a.port);
		if (ls[i].lfd < 0) {
			fprintf(stderr, "%s: listen: %s\n", name, strerror(errno));
			return 1;
		}
		ls[i].new_conn = new_conn;
		co_init(&ls[i].co, coring_listener_fn);
		co_sched_spawn_to(&s, (unsigned)i, &ls[i].co);
	}
	pthread_create(&sig_thread, NULL, bench_sig_main, &sig);
	bench_ready(name, a.port, a.threads);
	err = co_sched_run(&s);
	pthread_join(sig_thread, NULL);
	for (int i = 0; i < a.threads; i++)
		close(ls[i].lfd);
	free(ls);
	co_sched_destroy(&s);
	if (err < 0) {
		fprintf(stderr, "%s: %s\n", name, strerror(-err));
		return 1;
	}
	return 0;
}

#endif
