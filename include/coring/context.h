/* SPDX-License-Identifier: MIT */
/*
 * coring/context.h - a context is a thread that runs one engine.
 *
 *     co_context c;
 *     co_context_init(&c, NULL);
 *     co_context_spawn(&c, &task.co);       // before or after start, any thread
 *     co_context_start(&c, CO_RUN_UNTIL_IDLE); // stops by itself when idle
 *     int err = co_context_join(&c);
 *     co_context_destroy(&c);
 *
 * With CO_RUN_UNTIL_IDLE the context stops by itself once it has no ready
 * frame, no pending or in-flight I/O and no parked frame; with
 * CO_RUN_UNTIL_STOP it waits for work until co_context_stop. A context runs
 * once: to run again, destroy and init it (its io_uring belongs to its
 * thread).
 */
#ifndef CORING_CONTEXT_H
#define CORING_CONTEXT_H

#include <pthread.h>
#include <coring/engine.h>

#ifdef __cplusplus
extern "C" {
#endif

struct co_sched;

typedef struct co_context {
	co_engine engine;            /* public: its engine (first member) */
	pthread_t thread;            /* private */
	int mode;                    /* private */
	int state;                   /* private: 0 set up, 1 started, 2 joined */
	int ret;                     /* read-only: the engine's result, after join */
	unsigned index;              /* read-only: position in its scheduler */
	struct co_sched *sched;  /* read-only: NULL for a lone context */
} co_context;

/* Errors: as co_engine_init. */
int co_context_init(co_context *c, const co_engine_opts *opts);

/* Start the thread. -EINVAL (NULL, bad mode), -EALREADY (started before),
 * or pthread_create's error, negated. */
int co_context_start(co_context *c, int mode);

/* Hand it a root frame, from any thread: as co_engine_spawn. */
int co_context_spawn(co_context *c, co_frame *f);

/* Ask it to stop (it drains first); cancel_io as co_engine_stop. */
int co_context_stop(co_context *c, int cancel_io);

/* Wait for the thread; returns the engine's result (0, -EDEADLK, ...),
 * or -EINVAL if it was never started. */
int co_context_join(co_context *c);

/* Release it; -EBUSY while its thread runs or frames are live. */
int co_context_destroy(co_context *c);

/* The context whose thread is calling, or NULL. */
co_context *co_context_current(void);

/*
 * CO_AWAIT(f, co_transfer_to(&s->tr, ctx)): continue on ctx's thread. The
 * value is 0 once there; -ESHUTDOWN (ctx stopped: the frame stays where it
 * was), -EINVAL (NULL, or the frame does not run on an engine), -ENXIO (no
 * engine on this thread). Transferring to the current context is a yield.
 */
typedef struct co_transfer {
	co_awaiter aw;               /* private: first */
	co_context *target;          /* private */
	int res;                     /* private */
} co_transfer;

co_awaiter *co_transfer_to(co_transfer *t, co_context *target);

#ifdef __cplusplus
}
#endif

#endif /* CORING_CONTEXT_H */
