/* SPDX-License-Identifier: MIT */
/*
 * coring/context.h - a context is a thread that runs one engine.
 *
 *     co_context c;
 *     co_context_init(&c, NULL);
 *     co_context_spawn(&c, &task.co);        // before or after start, any thread
 *     co_context_start(&c, CO_RUN_UNTIL_IDLE); // ends by itself when idle
 *     int err = co_context_join(&c);
 *     co_context_destroy(&c);
 *
 * Lifecycle (docs/design.md):
 *
 *   NEW --start--> RUNNING --its thread returns--> ENDED --join--> JOINED
 *
 * NEW: spawns are queued and run once the thread starts; a start that
 * fails leaves it NEW (start again). RUNNING: the thread runs the engine;
 * with CO_RUN_UNTIL_IDLE it ends by itself once nothing can make progress,
 * with CO_RUN_UNTIL_STOP it waits for work until co_context_stop. When the
 * thread ends, its engine refuses spawns (-ESHUTDOWN) before the thread
 * returns, and every frame accepted until then has run: nothing is left
 * in a context whose thread is gone. A context runs once (its io_uring
 * belongs to its thread); destroy it and set it up again to run again.
 */
#ifndef CORING_CONTEXT_H
#define CORING_CONTEXT_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <pthread.h>
#include <coring/engine.h>

#ifdef __cplusplus
extern "C" {
#endif

struct co_sched;

/* co_context_state() */
enum co_context_state {
	CO_CONTEXT_DEAD = 0,     /* not set up, or destroyed */
	CO_CONTEXT_NEW = 1,      /* set up; its thread not started */
	CO_CONTEXT_RUNNING = 2,  /* its thread runs the engine */
	CO_CONTEXT_ENDED = 3,    /* its thread returned; spawns refused */
	CO_CONTEXT_JOINED = 4,   /* co_context_join returned */
	CO_CONTEXT_STARTING = 5, /* private: co_context_start in progress */
};

typedef struct co_context co_context;
struct co_context {
	co_engine engine;            /* public: its engine */
	pthread_t thread;            /* private */
	int mode;                    /* private: enum co_run_mode */
	CO__ATOMIC(int) state;       /* private: enum co_context_state */
	int ret;                     /* read-only: the engine's result, after join */
	unsigned index;              /* read-only: position in its scheduler */
	unsigned kind;               /* read-only: its scheduler's group */
	int manual;                  /* read-only: no thread; co_context_tick */
	struct co_sched *sched;      /* read-only: NULL for a lone context */
	void (*on_end)(co_context *c); /* private: its scheduler's notice
	                                (lib/context/context_internal.h) */
	pthread_t ticker;            /* private: the thread that ticks it (manual) */
	CO__ATOMIC(int) ticked;      /* private: ticker is set */
	CO__ATOMIC(int) joining;     /* private: a join has claimed the thread */
};

/* Errors: -EINVAL (NULL), then as co_engine_init. */
CO_API int co_context_init(co_context *c, const co_engine_opts *opts);

/* Start the thread. -EINVAL (NULL, bad mode, not set up), -EALREADY
 * (started before), or pthread_create's error, negated (-EAGAIN): then the
 * context is still NEW, with its queued frames, and may be started again. */
CO_API int co_context_start(co_context *c, int mode);

/* Hand it a root frame, from any thread: as co_engine_spawn (-ESHUTDOWN
 * once it was stopped or its thread ended). */
CO_API int co_context_spawn(co_context *c, co_frame *f);

/* Ask it to stop: as co_engine_stop (mode CO_STOP_DRAIN or CO_STOP_CANCEL).
 * On a context whose thread never started, or a manual one never ticked,
 * a cancel stop finishes the queued frames at once, on the calling thread (their on_done sees
 * -ECANCELED), unless its engine was run or ticked by hand: then that
 * engine's owner finishes them at its next run or tick, as on any engine
 * (frames it started may be among them). A cancel stop that comes while
 * another thread's co_context_start makes the thread waits for that start:
 * if the thread could not be made, the frames are finished here. -EINVAL
 * for NULL or a bad mode. */
CO_API int co_context_stop(co_context *c, int mode);

/* Wait for the thread; returns the engine's result (0, -EDEADLK, ...).
 * A join that comes while another thread's co_context_start is making the
 * thread waits for that start, then joins the thread it made.
 * -EINVAL (NULL, never started, joined already, or another thread's join
 * has it: one join at a time), -EDEADLK (called on the context's own
 * thread, from one of its frames or an on_done: as pthread_join, nothing
 * changes and the context runs on). */
CO_API int co_context_join(co_context *c);

/* Release it (joining its thread if it ended and was not joined). -EINVAL
 * (NULL, destroyed), -EBUSY (its thread runs, or it never started and
 * frames are queued: start it, or cancel-stop it first; another thread's
 * join has not returned), or co_engine_destroy's -EBUSY (a co_bufring
 * registered, a given-up pool job still running); nothing changes on an
 * error. Frames that the thread found stuck when it ended (join returned
 * -EDEADLK) are forgotten, as co_engine_destroy says. A co_context_start
 * from another thread that races a destroy of a never-started context
 * either makes the destroy answer -EBUSY (its thread took the engine
 * first) or makes a thread that finds the engine destroyed and ends at
 * once: the destroy joins it before it returns 0. */
CO_API int co_context_destroy(co_context *c);

/*
 * Drive a manual context (a scheduler group with .manual set) from the
 * program's own loop: one co_engine_tick of its engine, on the thread that
 * always ticks it. Returns the frames resumed, -EINVAL (NULL, not manual),
 * -ESHUTDOWN (it ended: its scheduler was stopped and nothing was left,
 * no frame, no post, no I/O in flight: until then the ticks go on),
 * or co_engine_tick's errors. A refused tick changes nothing: from a frame
 * running on a context (-EBUSY), co_context_current() still names that
 * context; from a thread that is not the ticker (-EPERM), a trace does not
 * name that thread after c.
 */
CO_API int co_context_tick(co_context *c);

/* enum co_context_state of c (a snapshot), or -EINVAL for NULL. */
CO_API int co_context_state(co_context *c);

/* The context whose thread is calling, or NULL. */
CO_API co_context *co_context_current(void);

/*
 * CO_AWAIT(f, co_transfer_to(&s->tr, ctx)): continue on ctx's thread. The
 * value is 0 once there. Errors (the frame stays where it was): -ESHUTDOWN
 * (ctx refuses spawns: stopped or ended), -EXDEV (ctx belongs to another
 * scheduler than the frame's context, or one of the two is a scheduler's
 * and the other is not), -ECANCELED (the frame was asked to cancel),
 * -EINVAL (NULL, or the frame does not run on an engine), -ENXIO (no
 * engine on this thread), -EBUSY (inside a child awaited under a time
 * limit, which pins the frame to its engine: coring/timeout.h).
 * Transferring to the current context is a yield for its next turn: 0,
 * or -ECANCELED if the frame was asked to cancel by then (unshielded).
 * A frame asked to cancel is refused a move even under co_shield.
 */
typedef struct co_transfer {
	co_awaiter aw;               /* private: first */
	co_context *target;          /* private */
	int res;                     /* private */
} co_transfer;

CO_API co_awaiter *co_transfer_to(co_transfer *t, co_context *target);

#ifdef __cplusplus
}
#endif

#endif /* CORING_CONTEXT_H */
