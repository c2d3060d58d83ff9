/* SPDX-License-Identifier: MIT */
/*
 * coring/scheduler.h - N contexts behind one submit/run API.
 *
 *     co_sched s;
 *     co_sched_init(&s, NULL);               // one context per online CPU
 *     co_sched_spawn(&s, &task.co);         // any thread, also from a coroutine
 *     int err = co_sched_run(&s);            // until every task finished
 *     co_sched_destroy(&s);
 *
 * A submitted frame (a "task") is owned by the scheduler until it finishes;
 * its on_done, if set, then runs once on the context that finished it and
 * may free it. co_sched_run starts the contexts, returns once every task has
 * finished, after stopping and joining every context, and may be called
 * again. A submit that races with the end of a run is either accepted and
 * run to completion, or refused with -ESHUTDOWN: see docs/scheduler.md.
 */
#ifndef CORING_SCHEDULER_H
#define CORING_SCHEDULER_H

#include <pthread.h>
#include <stdatomic.h>
#include <coring/context.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum co_dispatch {
	CO_DISPATCH_ROUND_ROBIN = 0,  /* contexts in turn */
	CO_DISPATCH_LEAST_LOADED = 1, /* the context with the fewest live frames */
} co_dispatch;

typedef struct co_sched_opts {
	unsigned contexts;       /* 0: the number of online CPUs */
	co_dispatch dispatch;
	int steal;               /* nonzero: idle contexts take ready frames from
	                            busy ones */
	co_engine_opts engine;   /* for every context (zeros: defaults) */
} co_sched_opts;

typedef struct co_sched {
	co_context *ctx;               /* read-only: the contexts */
	unsigned n;                    /* read-only: how many */
	co_sched_opts opts;            /* private */
	int running;                   /* private: under lock */
	pthread_mutex_t lock;          /* private */
	pthread_cond_t idle;           /* private: signalled when tasks hit 0 */
	/* (tasks << 1) | ACCEPTING, in one word so that the end of a run and a
	 * submit are ordered (docs/scheduler.md). */
	_Alignas(CO_CACHELINE) atomic_ulong word;
	atomic_uint rr;                /* private: round-robin cursor */
} co_sched;

/* opts may be NULL. Errors: -EINVAL (NULL s, bad dispatch), -ENOMEM, or a
 * context's co_engine_init error. */
int co_sched_init(co_sched *s, const co_sched_opts *opts);

/* -EINVAL (NULL), -EBUSY (running, or tasks not finished). */
int co_sched_destroy(co_sched *s);

/* Hand a task (a co_init'ed root frame) to a context chosen by the dispatch
 * strategy, or to context i. Any thread, including a coroutine's. Tasks
 * submitted while no run is going wait for the next co_sched_run.
 * Errors: -EINVAL (NULL, a started/spawned frame, i out of range),
 * -ESHUTDOWN (the run is ending, or co_sched_shutdown was called). */
int co_sched_spawn(co_sched *s, co_frame *f);
int co_sched_spawn_to(co_sched *s, unsigned i, co_frame *f);

/* Run until every task has finished; then stop and join the contexts.
 * Returns 0, -EINVAL, -EBUSY (already running on another thread), or the
 * first error a context reported (for example -EDEADLK). */
int co_sched_run(co_sched *s);

/* Cancel all I/O in every context and refuse new tasks until the run ends:
 * servers blocked in accept/recv see -ECANCELED and finish. Any thread. */
int co_sched_shutdown(co_sched *s);

/* The number of tasks accepted and not finished. */
unsigned long co_sched_tasks(co_sched *s);

#ifdef __cplusplus
}
#endif

#endif /* CORING_SCHEDULER_H */
