/* SPDX-License-Identifier: MIT */
/*
 * coring/engine.h - one engine per thread: a ready queue, an io_uring, and
 * the loop that resumes coroutines when their I/O completes.
 *
 *     co_engine e;
 *     int err = co_engine_init(&e, NULL);        // defaults
 *     co_engine_spawn(&e, &server.co);           // from any thread
 *     err = co_engine_run(&e, CO_RUN_UNTIL_IDLE);
 *     co_engine_destroy(&e);
 *
 * Threading rule: the io_uring is driven only by the thread that runs the
 * engine (the first thread to call co_engine_run owns it for life). Other
 * threads reach it through co_engine_spawn, co_wake and co_engine_stop,
 * which go through the ready queue (a lock-free inbox the
 * engine drains; see docs/engine.md) and wake
 * the engine if it sleeps.
 */
#ifndef CORING_ENGINE_H
#define CORING_ENGINE_H

#include <signal.h>
/* liburing.h needs POSIX.1-2008 declarations (sigset_t, AT_FDCWD), which a
 * strict -std=c11 or -std=c99 hides unless a feature macro asks for them.
 * Too late to define one here if a libc header came first: say so instead
 * of letting liburing.h fail on sigset_t. */
#if defined(__GLIBC__) && (!defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L)
#error "coring: liburing needs POSIX.1-2008: compile with -D_POSIX_C_SOURCE=200809L, -D_GNU_SOURCE or -std=gnu11"
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <liburing.h>
#include <ck_ring.h>

#include <coring/co.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CO_CACHELINE 64

/* What every SQE that coring submits carries as user_data: the CQE goes to
 * cb. Lives inside the awaiting frame (tinyCoro's io_info). The two low
 * bits of user_data are a tag passed to cb (e.g. "the linked timeout"). */
typedef struct co_io_info co_io_info;
struct co_io_info {
	void (*cb)(co_io_info *info, int res, unsigned cqe_flags, unsigned tag);
};

/*
 * A callback to run on an engine's own thread, asked for from any thread
 * with co_engine_post: how another thread gets done what only the owner
 * may do (touch its ring: remove a timer, submit a cancel). The node lives
 * in the caller's memory and must stay valid until fn has been called; fn
 * may free it.
 */
typedef struct co_post co_post;
struct co_post {
	void (*fn)(co_post *p);       /* public: set before posting */
	co_post *next;                /* private: the engine's post list */
};

typedef struct co_engine_opts {
	unsigned ready_size;   /* ready ring slots, a power of two >= 2 (capacity
	                          is one less); default 4096 */
	unsigned sq_entries;   /* io_uring SQ size, default 256 */
	unsigned cq_entries;   /* io_uring CQ size, >= sq_entries; default 4x SQ */
	unsigned batch;        /* frames resumed per loop turn before I/O is
	                          checked again; default 256 */
	unsigned setup_flags;  /* extra IORING_SETUP_* flags for io_uring */
	int no_fast_flags;     /* nonzero: do not try SINGLE_ISSUER/DEFER_TASKRUN */
} co_engine_opts;

/* Counters, owned by the engine thread (read them from it, or after run). */
typedef struct co_engine_stats {
	uint64_t turns;        /* loop turns */
	uint64_t waits;        /* turns that slept in io_uring_submit_and_wait */
	uint64_t cqes;         /* completions handled */
	uint64_t resumed;      /* frames resumed */
	uint64_t ops;          /* operations submitted whose CQE is awaited */
	uint64_t spilled;      /* frames that found the ring full (stealing on)
	                          and waited in the owner's overflow list */
	uint64_t wake_writes;  /* eventfd writes by other threads (wake-ups) */
	uint64_t sq_full;      /* times the SQ was full and was submitted early */
	uint64_t cq_overflow;  /* times completions that did not fit in the CQ
	                          were flushed back in (none are lost) */
} co_engine_stats;

typedef struct co_engine co_engine;
struct co_engine {
	co_runner runner;                 /* private: must stay first */

	/* Owner-thread state. */
	struct io_uring ring;           /* private: driven by the owner only */
	ck_ring_t ready;                /* private: ring of co_frame *, the owner
	                                   its only producer, thieves consumers */
	ck_ring_buffer_t *ready_buf;    /* private */
	unsigned batch;                 /* read-only */
	unsigned inflight;              /* read-only: SQEs whose CQE is due */
	unsigned features;              /* read-only: CO_ENGINE_F_* */
	int wake_fd;                    /* private: eventfd for wake-ups */
	uint64_t wake_val;              /* private: the eventfd read's buffer */
	co_io_info wake_info;           /* private */
	int wake_armed;                 /* private */
	uint64_t cancel_mark;           /* private: stats.ops at the last cancel-all
	                                   of a co_engine_stop(e, 1); ~0: none yet */
	struct __kernel_timespec *ts;   /* private: a timespec per SQ slot, read by
	                                   the kernel when the SQE is submitted */
	co_io_info *last_info;          /* private: the last SQE handed out ... */
	struct io_uring_sqe *last_sqe;  /* private: ... before the next submit */
	co_frame *local_head;           /* private: owner-only FIFO: the whole queue */
	co_frame *local_tail;           /* private: without stealing, the ring's */
	unsigned local_n;               /* private: overflow with it */
	pthread_t owner;                /* private */
	int has_owner;                  /* private */
	co_engine_stats stats;          /* read-only */

	/* Hooks for a scheduler (private; set before the engine runs). */
	void (*task_done)(void *arg);   /* a frame marked as a task finished */
	int (*steal)(co_engine *e, void *arg);   /* idle: take frames, return count */
	void (*backlog)(co_engine *e, void *arg); /* busy: frames are waiting */
	void *hook_arg;

	/* Written by other threads: one cache line apart from the above. */
	_Alignas(CO_CACHELINE) atomic_uint live;  /* spawned, not finished */
	atomic_uint parked;             /* frames parked on sync primitives */
	atomic_int sleeping;            /* owner is (about to be) in the wait */
	atomic_int wake_pending;        /* an eventfd write is on its way */
	atomic_int stop;                /* 0, 1: drain and stop, 2: also cancel */
	atomic_uint wake_writes;        /* stats.wake_writes, counted by wakers */
	atomic_uint visitors;           /* other threads inside spawn/wake/stop:
	                                   destroy waits for them to leave */
	_Atomic(void *) posts;          /* private: co_post list, newest first */

	_Atomic(void *) inbox;          /* private: co_frames other threads made
	                                   ready, newest first (lib/engine.c) */
};

/* co_engine.features */
enum {
	CO_ENGINE_F_SINGLE_ISSUER = 1u << 0,  /* SINGLE_ISSUER|DEFER_TASKRUN on */
	CO_ENGINE_F_NODROP = 1u << 1,         /* kernel keeps overflowed CQEs */
};

/* co_engine_run modes */
enum co_run_mode {
	CO_RUN_UNTIL_IDLE = 0,   /* return when nothing can make progress */
	CO_RUN_UNTIL_STOP = 1,   /* also sleep while idle, until co_engine_stop */
};

/*
 * Set up an engine (opts may be NULL for defaults). The io_uring is created
 * disabled and enabled by the first co_engine_run, so the engine may be set
 * up on one thread and run on another.
 * Errors: -EINVAL (NULL e, ready_size not a power of two >= 2, zero batch,
 * cq_entries < sq_entries), -ENOMEM, or io_uring_setup's error (-ENOSYS
 * when the kernel lacks io_uring, -EPERM when it is disabled, -EMFILE ...).
 */
int co_engine_init(co_engine *e, const co_engine_opts *opts);

/*
 * Release the engine's ring and memory. Refuses (-EBUSY) while spawned
 * frames have not finished or posts have not run, so nothing is silently
 * abandoned; -EINVAL
 * for NULL. Call it from the owner thread or after that thread ended; it
 * waits for other threads still returning from co_engine_spawn, co_wake,
 * co_engine_stop or co_engine_unpark on it.
 */
int co_engine_destroy(co_engine *e);

/*
 * Hand a root frame (co_init'ed, not started) to the engine; from any
 * thread. Its on_done, if set, runs on the engine thread when it finishes,
 * after which the engine no longer touches it (on_done may free it).
 * Errors: -EINVAL (NULL, no body, started, already spawned, or a child),
 * -ESHUTDOWN (co_engine_stop was called).
 */
int co_engine_spawn(co_engine *e, co_frame *f);

/*
 * Run the loop on the calling thread: resume ready frames, submit their
 * I/O, wait, dispatch completions. CO_RUN_UNTIL_IDLE returns once no frame
 * is ready and no I/O or parked frame is pending; CO_RUN_UNTIL_STOP keeps
 * waiting for spawns until co_engine_stop, then drains the same way.
 * Returns 0 when every spawned frame finished; -EDEADLK when frames remain
 * that nothing can wake (waiting on an awaiter that is neither I/O nor
 * registered with co_engine_park); -EINVAL for NULL or a bad mode; -EBUSY
 * if another engine already runs on this thread; -EPERM when called from a
 * thread other than the engine's owner; or io_uring's error.
 */
int co_engine_run(co_engine *e, int mode);

/*
 * Ask the engine to stop, from any thread (signal handlers excepted): new
 * spawns fail with -ESHUTDOWN and co_engine_run returns once every frame
 * has finished. With cancel_io nonzero, all in-flight I/O is cancelled
 * (awaits end with -ECANCELED), and so is every operation started after
 * it that does not complete at once: a server between two awaits when the
 * stop came cannot block it, while a close or a file write on the way out
 * still completes.
 * Returns 0, or -EINVAL for NULL or a destroyed engine.
 */
int co_engine_stop(co_engine *e, int cancel_io);

/* The engine running on the calling thread, or NULL. */
co_engine *co_engine_current(void);

/*
 * Park counts (tinyCoro's register_wait/unregister_wait): a primitive that
 * holds a frame of engine e and will co_wake it later from somewhere else
 * calls co_engine_park(e) when it takes it and co_engine_unpark(e) when it
 * wakes it, so the engine stays alive meanwhile. Safe from any thread.
 * Wake the frame first, then unpark: the engine never sees itself idle
 * with the frame on its way. Returns 0, or -EINVAL for NULL or a destroyed
 * engine.
 */
int co_engine_park(co_engine *e);
int co_engine_unpark(co_engine *e);

/*
 * Run p->fn on e's thread at its next loop turn; from any thread. A post
 * wakes the engine if it sleeps and counts as pending work: the engine
 * does not stop, nor co_engine_destroy succeed, before fn has run. Each
 * poster's posts run in its order. A post made while no co_engine_run is
 * going runs in the next one.
 * Errors: -EINVAL (NULL e, p or p->fn, or a destroyed engine).
 */
int co_engine_post(co_engine *e, co_post *p);

/*
 * An SQE on e's ring, tagged with info (user_data = info | tag, tag < 4):
 * the building block of every awaiter. Submits early when the SQ is full
 * (never fails for that). NULL unless e runs on the calling thread. With
 * info set, the CQE is counted as in flight until it arrives (a multishot
 * until its last CQE); info NULL means fire-and-forget.
 */
struct io_uring_sqe *co_engine_sqe(co_engine *e, co_io_info *info, unsigned tag);

/* The next SQE of a link chain started by co_engine_sqe (which keeps room
 * for it): never submits early, so the chain is not cut. */
struct io_uring_sqe *co_engine_sqe_link(co_engine *e, co_io_info *info, unsigned tag);

/* The SQE last handed out for info, if it has not been submitted yet (to
 * add a link after it); NULL otherwise. */
struct io_uring_sqe *co_engine_last_sqe(co_engine *e, co_io_info *info);

/* Storage for a timeout's timespec that lives as long as sqe is queued
 * (the kernel copies it at submission): awaiters need not keep one. NULL
 * unless sqe is an SQE of e's ring. */
struct __kernel_timespec *co_engine_sqe_ts(co_engine *e, struct io_uring_sqe *sqe);

#ifdef __cplusplus
}
#endif

#endif /* CORING_ENGINE_H */
