/* SPDX-License-Identifier: MIT */
/*
 * The part both coring servers (echo_coring, http_coring) share: a
 * scheduler of --threads contexts, a listener coroutine on each (its own
 * SO_REUSEPORT socket) that spawns a connection coroutine per accepted
 * descriptor on its own context, and a clean stop on SIGINT/SIGTERM (a
 * stopper task per context polls the stop signalfd). A server includes
 * this once and calls coring_server_main with its connection constructor.
 */
#ifndef CORING_BENCH_CORING_SERVER_H
#define CORING_BENCH_CORING_SERVER_H

#include <poll.h>

#include <coring/io.h>
#include <coring/net.h>
#include <coring/scheduler.h>
#include <coring/trace.h>

#include "bench_util.h"

/* Builds the connection coroutine for fd (co_init'ed, on_done set), or
 * returns NULL (the listener closes fd). ctx is the context's own state
 * (see coring_server_main). */
typedef co_frame *(*coring_new_conn)(int fd, void *ctx);

/* Optional: called once per context i before the run; returns a task to
 * run on that context beside its listener (or NULL) and sets *ctx, which
 * the context's listener hands to new_conn. The task must end when the
 * server stops (its awaits then end with -ECANCELED). */
typedef co_frame *(*coring_per_context)(unsigned i, void **ctx);

struct coring_listener {
	co_frame co;
	co_io io;
	int lfd;
	coring_new_conn new_conn;
	void *ctx;
};

/* One per context: waits for the stop signal (bench_stop_fd), then cancels
 * every wait of every context (co_sched_stop with CO_STOP_CANCEL), so
 * every coroutine ends. */
struct coring_stopper {
	co_frame co;
	co_io io;
	int sfd;
	co_sched *s;
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
		if ((c = l->new_conn(fd, l->ctx)) == NULL) {
			close(fd);
			continue;
		}
		co_engine_spawn(co_engine_current(), c);
	}
	CO_END(f);
}

static int coring_stopper_fn(co_frame *f)
{
	struct coring_stopper *st = (struct coring_stopper *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_poll(&st->io, st->sfd, POLLIN));
	if (co_result(f) > 0) /* not -ECANCELED: this context saw the signal first */
		co_sched_stop(st->s, CO_STOP_CANCEL);
	CO_END(f);
}

static void coring_free_frame(co_frame *f)
{
	free(f);
}

static int coring_server_main(const char *name, struct bench_args a, coring_new_conn new_conn,
			      coring_per_context per_context)
{
	co_sched_opts o = { .contexts = (unsigned)a.threads,
			    .engine = { .sq_entries = 1024, .ready_size = 8192 } };
	struct coring_listener *ls = calloc((size_t)a.threads, sizeof *ls);
	struct coring_stopper *sts = calloc((size_t)a.threads, sizeof *sts);
	int sfd = bench_stop_fd(name), err;
	co_sched s;

	if ((err = co_trace_env()) < 0) { /* CORING_TRACE=file (docs/tracing.md) */
		fprintf(stderr, "%s: CORING_TRACE: %s\n", name, strerror(-err));
		return 2;
	}
	if (ls == NULL || sts == NULL || (err = co_sched_init(&s, &o)) < 0) {
		fprintf(stderr, "%s: init failed\n", name);
		return 1;
	}
	for (int i = 0; i < a.threads; i++) {
		co_frame *extra = per_context ? per_context((unsigned)i, &ls[i].ctx) : NULL;

		/* the same socket as the other servers' bench_listen, through the
		 * library's own call */
		ls[i].lfd = co_listen("127.0.0.1", a.port, 4096, CO_LISTEN_REUSEPORT);
		if (ls[i].lfd < 0 || (a.port = co_local_port(ls[i].lfd)) < 0) {
			fprintf(stderr, "%s: listen: %s\n", name,
				strerror(-(ls[i].lfd < 0 ? ls[i].lfd : a.port)));
			return 1;
		}
		ls[i].new_conn = new_conn;
		co_init(&ls[i].co, coring_listener_fn);
		co_sched_spawn_to(&s, (unsigned)i, &ls[i].co);
		sts[i].sfd = sfd;
		sts[i].s = &s;
		co_init(&sts[i].co, coring_stopper_fn);
		co_sched_spawn_to(&s, (unsigned)i, &sts[i].co);
		if (extra)
			co_sched_spawn_to(&s, (unsigned)i, extra);
	}
	bench_ready(name, a.port, a.threads);
	err = co_sched_run(&s);
	for (int i = 0; i < a.threads; i++)
		close(ls[i].lfd);
	close(sfd);
	free(ls);
	free(sts);
	co_sched_destroy(&s);
	if (err < 0) {
		fprintf(stderr, "%s: %s\n", name, strerror(-err));
		return 1;
	}
	return 0;
}

#endif
