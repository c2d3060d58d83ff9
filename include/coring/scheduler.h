/* SPDX-License-Identifier: MIT */
/*
 * coring/scheduler.h - N contexts behind one spawn/run API.
 *
 *     co_sched s;
 *     co_sched_init(&s, NULL);               // one context per online CPU
 *     co_sched_spawn(&s, &task.co);          // any thread, also from a coroutine
 *     int err = co_sched_run(&s);            // until all work is done
 *     co_sched_destroy(&s);
 *
 * A spawned frame (a "task") is owned by the scheduler until it finishes;
 * its on_done, if set, then runs once on the context that finished it and
 * may free it.
 *
 * Lifecycle (docs/design.md):
 *
 *   init --> RUNNING --stop--> STOPPING --every context ended--> (destroy)
 *
 * The contexts start in co_sched_init and run until the scheduler is
 * stopped or destroyed: a task spawned at any time while RUNNING runs at
 * once, whether or not a co_sched_run is waiting. co_sched_run waits until
 * nothing is left to do (every task and every frame the tasks spawned has
 * finished), or until nothing can make progress (-EDEADLK). A stop is
 * final: spawns are refused (-ESHUTDOWN) from the moment it is asked, and
 * every context ends once its frames have finished (a drain) or been
 * cancelled (a cancel stop: every wait ends with -ECANCELED, bounded).
 * A spawn is either accepted and run (or, under a cancel stop, cancelled
 * with its on_done seeing -ECANCELED), or refused with an error: never
 * accepted and dropped.
 */
#ifndef CORING_SCHEDULER_H
#define CORING_SCHEDULER_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <pthread.h>
#include <coring/context.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum co_dispatch {
	CO_DISPATCH_ROUND_ROBIN = 0,  /* contexts in turn */
	CO_DISPATCH_LEAST_LOADED = 1, /* the context with the fewest live frames */
} co_dispatch;

/*
 * One kind of work (a "job type": I/O, CPU, slow jobs, a game's logic): a
 * group of contexts that serve it. Work is spawned or transferred to a
 * kind; stealing stays inside the group. A manual group has one context
 * and no thread: the program drives it with co_context_tick from a loop of
 * its own (a game's main thread), and frames transferred to it run there.
 */
typedef struct co_sched_group {
	unsigned contexts;       /* how many (0: one) */
	co_dispatch dispatch;    /* among them */
	int steal;               /* nonzero: idle ones take ready frames from
	                            busy ones of the same group */
	int manual;              /* nonzero: driven by co_context_tick (then
	                            contexts must be 0 or 1, steal 0) */
	co_engine_opts engine;   /* its engines (zeros: defaults) */
} co_sched_group;

typedef struct co_sched_opts {
	/* One group (kind 0), when groups is NULL: */
	unsigned contexts;       /* 0: the number of online CPUs */
	co_dispatch dispatch;
	int steal;               /* nonzero: idle contexts take ready frames from
	                            busy ones */
	co_engine_opts engine;   /* for every context (zeros: defaults) */
	/* Or groups: kind i is groups[i], i < ngroups. */
	const co_sched_group *groups;
	unsigned ngroups;
	unsigned spinners;       /* how many contexts may poll for work at once
	                            before they sleep (docs/engine.md, "Staying
	                            awake"); 0: as many as the CPUs the process
	                            may use */
} co_sched_opts;

/* A group as the scheduler keeps it (private). */
struct co__sched_group {
	unsigned first, n;             /* its contexts: ctx[first .. first+n) */
	co_dispatch dispatch;
	CO__ATOMIC(unsigned) rr;       /* round-robin cursor */
};

/* co_sched_state() */
enum co_sched_state {
	CO_SCHED_DEAD = 0,       /* not set up, or destroyed */
	CO_SCHED_RUNNING = 1,    /* contexts run; spawns accepted */
	CO_SCHED_STOPPING = 2,   /* a stop was asked: spawns refused; contexts
	                            end once their frames are done */
	CO_SCHED_ENDED = 3,      /* stopped, and every context has ended */
};

typedef struct co_sched {
	co_context *ctx;               /* read-only: the contexts */
	unsigned n;                    /* read-only: how many */
	unsigned stuck;                /* read-only: tasks left when the last
	                                  co_sched_run returned -EDEADLK */
	co_sched_opts opts;            /* private */
	pthread_mutex_t lock;          /* private: over the fields below */
	pthread_cond_t cond;           /* private: quiet or ended changed */
	int state;                     /* private: enum co_sched_state */
	unsigned waiters;              /* private: threads in co_sched_run */
	unsigned ended;                /* private: contexts whose thread returned */
	int err;                       /* private: first error a context returned */
	unsigned *epochs;              /* private: co_sched_run's two looks */
	struct co__sched_group *groups; /* private: kind -> contexts */
	unsigned ngroups;              /* read-only: kinds */
	int closing;                   /* private: a co_sched_destroy is
	                                  releasing the contexts */
	/* private: threads inside a call on s; top bit: destroyed, calls
	 * that come now answer -EINVAL and touch nothing else of s */
	CO__ATOMIC(unsigned) visitors;
	/* (tasks << 2) | CLOSING | ACCEPTING, in one word: a spawn counts
	 * itself only while the scheduler accepts, and waits while a destroy
	 * looks whether anything is live (docs/scheduler.md). */
	CO__ALIGNAS(CO_CACHELINE) CO__ATOMIC(unsigned long) word;
	CO__ATOMIC(int) quiet;         /* private: engines reporting quiet */
	CO__ALIGNAS(CO_CACHELINE) CO__ATOMIC(unsigned) spinning; /* private:
	                                  contexts polling for work now */
	unsigned spinners;             /* read-only: how many may at once */
	unsigned spin_peak;            /* read-only: the most that polled at
	                                  once (a high-water mark), counted
	                                  only with more contexts with a
	                                  thread (manual ones never poll)
	                                  than spinners (else it stays 0) */
} co_sched;

/* Set up the contexts and start their threads (manual ones have none);
 * opts may be NULL. Errors: -EINVAL (NULL s, bad dispatch, groups NULL
 * with ngroups set or the reverse, a manual group with more than one
 * context or with steal, groups whose contexts add up past UINT_MAX), -ENOMEM, a context's co_engine_init error, or
 * pthread_create's (negated): nothing is left running or allocated after
 * an error. */
CO_API int co_sched_init(co_sched *s, const co_sched_opts *opts);

/*
 * Stop the contexts, join them and release everything. -EINVAL (NULL,
 * destroyed), -EBUSY and nothing changes (a co_sched_run is waiting,
 * tasks or frames are live, a post is pending on a manual context (a post
 * that reaches one after an idle destroy stopped the contexts leaves them
 * stopped: -EBUSY until a tick ran it), a stop was asked and contexts are
 * still finishing their frames: wait with co_sched_run first; a context's
 * engine holds a co_bufring, destroy it first (coring/stream.h), or a
 * pool job given up by a cancel stop that still runs; another destroy is
 * under way; called on one of s's own contexts, from a frame, an on_done
 * or a post, or inside a manual context's tick: it would wait for that
 * context to end). Tasks found stuck (co_sched_run returned -EDEADLK) after a
 * stop are forgotten, as co_engine_destroy says. Calls racing it on other
 * threads (spawns, stops, runs) are safe: each is accepted before destroy
 * closes the door (destroy then answers -EBUSY), refused (-ESHUTDOWN)
 * while it finishes, or answered -EINVAL once it has, and none touches
 * what it freed; the co_sched itself must outlive every call on it.
 */
CO_API int co_sched_destroy(co_sched *s);

/*
 * Hand a task (a co_init'ed root frame) to a context: co_sched_spawn to one
 * of kind 0, by its group's dispatch; _kind to one of that kind; _key to
 * the context of that kind that key hashes to (all the work with one key,
 * a connection or a session, lands on one context); _to to context i (an
 * explicit affinity). Any thread, including a coroutine's.
 * Errors: -EINVAL (NULL, a started/spawned frame, a kind or i out of range,
 * a destroyed scheduler), -ESHUTDOWN (a stop was asked, or a destroy
 * closed the door: not accepted, it will not run). Racing co_sched_destroy
 * is safe (see there).
 */
CO_API int co_sched_spawn(co_sched *s, co_frame *f);
CO_API int co_sched_spawn_kind(co_sched *s, unsigned kind, co_frame *f);
CO_API int co_sched_spawn_key(co_sched *s, unsigned kind, uint64_t key, co_frame *f);
CO_API int co_sched_spawn_to(co_sched *s, unsigned i, co_frame *f);

/*
 * Let root frame f follow the frame that wakes it (on: 1) or keep it on
 * its context (on: 0, the default; docs/scheduler.md, "Frames that follow
 * their waker"). A frame that may roam, woken by a frame running on
 * another context of its stealing group (a channel's send, an event, a
 * semaphore, the mutex's unlock, the end of a co_spawn_on child or of
 * when's last child), moves to the waker's context and runs there next;
 * idle contexts steal from there as from any queue. Frames that hold per-
 * context state (a stream's buffer ring, registered files, a shard's
 * data) must not roam. Call it after co_init, before the frame is spawned
 * or from its own body. Errors: -EINVAL (NULL, a child frame, on neither
 * 0 nor 1).
 */
CO_API int co_sched_roam(co_frame *f, int on);

/* A context of that kind, chosen by its group's dispatch: where to
 * co_transfer_to, to move work to that kind. NULL for a bad kind or s.
 * It is s's memory: not to be used once co_sched_destroy(s) returned 0
 * (a manual context's ticker stops at its tick's -ESHUTDOWN, before). */
CO_API co_context *co_sched_pick(co_sched *s, unsigned kind);

/*
 * Wait until nothing is left to do: every task has finished, and so has
 * every frame spawned on the contexts' engines. Returns 0; -EDEADLK when
 * every context is idle and frames remain that nothing in coring can wake
 * (waiting on awaiters that neither do I/O nor park; s->stuck and
 * co_sched_tasks() count the tasks among them; the scheduler stays usable:
 * wake them, or stop it); a context's own error (io_uring's) if one ended
 * with one; -EINVAL (NULL, destroyed); -EBUSY at once, nothing changed,
 * when the calling thread runs one of s's contexts (from a task or an
 * on_done on them, or on the thread that ticks a manual context that may
 * need more ticks): it would wait for itself (co_sched_poll is for that
 * thread). A manual context that no thread has ticked yet is never waited
 * for (nothing runs it, and the thread that will may be this one): idle,
 * it counts as quiet; with live frames or a post pending on it, -EBUSY,
 * nothing changed, at once or once every other context is quiet (tick it
 * once first from its ticker, then a run elsewhere waits for its ticks).
 * After a stop it returns once every context has ended (a stopped manual
 * context with nothing live and no post pending is ended by it, so its
 * ticker may wait then). Several threads may wait at once.
 */
CO_API int co_sched_run(co_sched *s);

/* co_sched_run without waiting, for a thread that drives a manual context
 * (it must not block in co_sched_run): 0 (nothing left), -EAGAIN (work left
 * or still moving, also on a manual context not ticked yet), -EDEADLK, a
 * context's error, -EINVAL. */
CO_API int co_sched_poll(co_sched *s);

/*
 * Stop the scheduler, from any thread (a signal-handling thread, a task):
 * spawns are refused from now on, for good. CO_STOP_DRAIN lets every
 * frame finish; CO_STOP_CANCEL ends every wait with -ECANCELED (see
 * co_engine_stop: bounded even against a coroutine that retries).
 * co_sched_stop_timed drains, and cancels what is still live after ns
 * (near UINT64_MAX: never).
 * 0, or -EINVAL (NULL, bad mode, destroyed). Asking again is harmless; a
 * drain may be turned into a cancel.
 */
CO_API int co_sched_stop(co_sched *s, int mode);
CO_API int co_sched_stop_timed(co_sched *s, uint64_t ns);

/* The number of tasks accepted and not finished (0 for NULL). A task
 * counts until its on_done has returned. */
CO_API unsigned long co_sched_tasks(co_sched *s);

/* enum co_sched_state of s (a snapshot), or -EINVAL for NULL. */
CO_API int co_sched_state(co_sched *s);

#ifdef __cplusplus
}
#endif

#endif /* CORING_SCHEDULER_H */
