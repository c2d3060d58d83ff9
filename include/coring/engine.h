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
 * threads reach it through co_engine_spawn, co_wake, co_cancel,
 * co_engine_stop and co_engine_post, which queue their request on lock-free
 * lists the engine drains at every turn, and wake it if it sleeps.
 *
 * Lifecycle (docs/design.md has the diagram):
 *
 *   READY --run--> RUNNING --run returns--> READY
 *     |               |
 *   stop            stop
 *     v               v
 *   STOPPED <--run returns-- STOPPING   (STOPPED --run--> STOPPING)
 *
 *   destroy: READY or STOPPED --> DEAD (refused while frames are live)
 *
 * A spawn is accepted in READY and RUNNING and refused (-ESHUTDOWN) from
 * the moment a stop is asked: an accepted frame runs to its end, or, under
 * a cancel stop, is cancelled and its on_done sees status -ECANCELED.
 */
#ifndef CORING_ENGINE_H
#define CORING_ENGINE_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <coring/engine_types.h>
#include <pthread.h>
#include <stdint.h>
#include <liburing.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct co_engine_opts {
	unsigned ready_size;   /* ready ring slots, a power of two >= 2 (capacity
	                          is one less); default 4096 */
	unsigned sq_entries;   /* io_uring SQ size, default 256 */
	unsigned cq_entries;   /* io_uring CQ size, >= sq_entries; default 4x SQ */
	unsigned batch;        /* frames resumed per loop turn before I/O is
	                          checked again; default 256 */
	unsigned setup_flags;  /* extra IORING_SETUP_* flags (see
	                          co_engine_init for those it takes) */
	int no_fast_flags;     /* nonzero: a plain ring: do not try
	                          SINGLE_ISSUER/DEFER_TASKRUN nor COOP_TASKRUN
	                          (setup_flags still taken) */
	uint64_t cancel_grace_ns; /* cancel stop: frames still running this long
	                          after it are finished for them (status
	                          -ECANCELED); default 1 s; near UINT64_MAX:
	                          never (the stop waits for their end) */
	unsigned submit_batch; /* 0 (the default): a read or write (the
	                          read/write family, fsync) goes to the kernel as
	                          soon as its frame suspends, so a disk starts it
	                          at once; every other SQE of a loop turn goes at
	                          the turn's end, together (one syscall for a
	                          server's sockets). N: any SQEs, as soon as N of
	                          them wait when a frame's resume returns (the SQ
	                          size or more: all at the turn's end); see
	                          docs/engine.md, "The loop" */
	uint64_t spin_ns;      /* with nothing to run and no I/O in flight, poll
	                          for work other threads hand over at most this
	                          long before sleeping (an adaptive budget, only
	                          after such hand-offs: docs/engine.md, "Staying
	                          awake"); 0: the default, 50 us */
	int no_spin;           /* nonzero: never poll, sleep at once */
	unsigned reserved[4];  /* zero: room for options of later versions
	                          (docs/abi.md); co_engine_init refuses others */
} co_engine_opts;

/* Counters, owned by the engine thread (read them from it, or after run). */
typedef struct co_engine_stats {
	uint64_t turns;        /* loop turns */
	uint64_t waits;        /* turns that slept (io_uring_enter, submit and wait) */
	uint64_t cqes;         /* completions handled */
	uint64_t resumed;      /* frames resumed */
	uint64_t ops;          /* operations submitted whose CQE is awaited */
	uint64_t spilled;      /* frames that found the ring full (stealing on)
	                          and waited in the owner's overflow list */
	uint64_t wake_writes;  /* eventfd writes by other threads (wake-ups) */
	uint64_t sq_full;      /* times the SQ was full and was submitted early */
	uint64_t cq_overflow;  /* times completions that did not fit in the CQ
	                          were flushed back in (none are lost) */
	uint64_t cancelled;    /* frames a cancel stop finished without running
	                          them (never started, or past the grace) */
	uint64_t spins;        /* times it polled for work before sleeping */
	uint64_t spin_hits;    /* ... and work came while it polled */
	uint64_t polls;        /* times a frame polled before parking: a channel
	                          end waiting for the other end's thread */
	uint64_t poll_hits;    /* ... and what it waited for came (these four
	                          may be read from any thread, with a relaxed
	                          atomic load) */
} co_engine_stats;

/* co_engine_state() */
enum co_engine_state {
	CO_ENGINE_DEAD = 0,     /* not set up, or destroyed */
	CO_ENGINE_READY = 1,    /* set up; accepts spawns; no run in progress */
	CO_ENGINE_RUNNING = 2,  /* co_engine_run in progress */
	CO_ENGINE_STOPPING = 3, /* stop asked while running: spawns refused,
	                           the run ends once no frame is live */
	CO_ENGINE_STOPPED = 4,  /* stop asked, no run in progress: spawns
	                           refused; a run drains what is live */
	CO_ENGINE_DYING = 5,    /* private: co_engine_destroy in progress */
};

/* co_engine_stop() modes */
enum co_stop_mode {
	CO_STOP_DRAIN = 0,      /* no new work; live frames finish */
	CO_STOP_CANCEL = 1,     /* also end the library's waits with -ECANCELED
	                           (co_engine_stop says which) */
};

/* co_engine_run() modes */
enum co_run_mode {
	CO_RUN_UNTIL_IDLE = 0,   /* return when nothing can make progress */
	CO_RUN_UNTIL_STOP = 1,   /* also sleep while idle, until co_engine_stop */
};

/* co_engine.features */
enum {
	CO_ENGINE_F_SINGLE_ISSUER = 1u << 0,  /* SINGLE_ISSUER|DEFER_TASKRUN on */
	CO_ENGINE_F_NODROP = 1u << 1,         /* kernel keeps overflowed CQEs */
};

struct co__engine_hooks;
struct co__ready_ring;
struct co__view_slot;

/* The reserved room at the end of the engine's own fields: four pointers'
 * worth, less cancel_again, viewers, posts_closed and io_due (on a 64-bit
 * target one pointer, which keeps co_engine's size; at least one). */
#define CO__ENGINE_RESERVED_N                                                      \
	(((int)(4 * sizeof(void *)) - (int)(sizeof(uint64_t) + 3 * sizeof(unsigned))) / \
	 (int)sizeof(void *))
#define CO__ENGINE_RESERVED (CO__ENGINE_RESERVED_N > 0 ? CO__ENGINE_RESERVED_N : 1)

/*
 * The engine's own fields (not API: docs/design.md, "Who may touch what",
 * says who touches which; their order and sizes may change in any minor version,
 * docs/abi.md). The owner thread's first; then, a cache line apart, those
 * other threads write.
 */
#define CO__ENGINE_PRIVATE_FIELDS \
	co_runner runner;               /* runs its root frames (co_root(f)->runner) */ \
                                                                                        \
	/* Owner-thread state. */                                                       \
	struct io_uring ring;           /* driven by the owner only */                  \
	struct co__ready_ring *ready;   /* ring of co_frame *, the owner                \
	                                   its only producer, thieves consumers */      \
	uint64_t ops[4];                /* the opcodes the kernel has (probe) */        \
	int wake_fd;                    /* eventfd for wake-ups */                      \
	int wake_armed;                                                                 \
	uint64_t wake_val;              /* the eventfd read's buffer */                 \
	co_io_info wake_info;                                                           \
	uint64_t cancel_since;          /* when the cancel stop began                   \
	                                   (CLOCK_MONOTONIC ns), 0: not cancelling */   \
	uint64_t cancel_grace;                                                          \
	struct __kernel_timespec *ts;   /* a timespec per SQ slot, read by              \
	                                   the kernel when the SQE is submitted */      \
	co_io_info *last_info;          /* whose the last SQE handed out                \
	                                   (the SQ tail's) is, until the next submit */ \
	unsigned sqe_shift;             /* 1 with IORING_SETUP_SQE128 */                \
	unsigned cqe_shift;             /* a CQE's bytes, log2: 4, 5 with CQE32 */      \
	int stealing;                   /* a scheduler may steal frames                 \
	                                   (the ready ring is used) */                  \
	unsigned char submit_soon;      /* look at the SQ after this                    \
	                                   resume (a read or write waits in it,         \
	                                   or submit_batch is set) */                   \
	uint64_t spin_cur;              /* the adaptive poll budget */                  \
	unsigned seen_epoch;            /* epoch when the owner last                    \
	                                   looked at the lists below */                 \
	co_frame *local_head;           /* owner-only FIFO: the whole queue */          \
	co_frame *local_tail;           /* without stealing, the ring's */              \
	unsigned local_n;               /* overflow with it; and runnext */             \
	co_frame *runnext;              /* a frame that followed its waker              \
	                                   here: it runs next (stealing only) */        \
	const void *roam;               /* engines with the same roam group             \
	                                   trade frames that follow their waker         \
	                                   (NULL: none; set before the first run) */    \
	CO__ATOMIC(co_frame *) resuming; /* with roam: the frame inside                 \
	                                   co_resume here (a waker leaves it be) */     \
	co_frame *later_head;           /* owner-only FIFO of frames for                \
	                                   the next turn (yields) */                    \
	co_frame *later_tail;                                                           \
	struct co_turn *turns_head;     /* owner-only FIFO of                           \
	                                   co_next_turn / co_after_turns waits */       \
	struct co_turn *turns_tail;                                                     \
	struct co__view_slot *view;     /* its live frames and when each                \
	                                   last ran; [0] a sink (coring/view.h) */      \
	unsigned view_n;                /* slots in use or free, from 1 */              \
	unsigned view_cap;                                                              \
	unsigned view_free;             /* a free slot (0: none) */                     \
	uint64_t turn_stamp;            /* when the turn began (a                       \
	                                   stamp, lib/common/clock.h) */                \
	co_frame *running;              /* the frame being resumed */                   \
	co_frame *direct;               /* the first frame the loop's CQ                \
	                                   walk woke with nothing queued:               \
	                                   resumed at the walk's end                    \
	                                   (lib/engine/engine_loop.c) */                \
	unsigned deferred;              /* finished frames whose finish                 \
	                                   waits for a cancel request */                \
	uint64_t owner;                 /* the owner thread's number                    \
	                                   (lib/common/thread_id.h) */                  \
	CO__ATOMIC(int) has_owner;      /* set once, after owner (release):             \
	                                   a tick from another thread reads it          \
	                                   without taking the engine */                 \
	const struct co__engine_hooks *hooks; /* set by a scheduler */                  \
	void *hook_arg;                                                                 \
	unsigned short bgid_next;       /* the next buffer group id to try */           \
	int enter_fd;                   /* the loop's own io_uring_enter (-1:           \
	                                   liburing's: SQPOLL, no EXT_ARG) */           \
	unsigned enter_flags;           /* GETEVENTS, REGISTERED_RING ... */            \
	const void *enter_arg;          /* NULL, or under valgrind a slice */           \
	unsigned enter_argsz;                                                           \
                                                                                        \
	/* Written by other threads: one cache line apart from the above. */            \
	CO__ALIGNAS(CO_CACHELINE) CO__ATOMIC(unsigned) live; /* spawned,                \
	                                   not finished; top bit: spawns refused */     \
	CO__ATOMIC(unsigned) parked;    /* frames parked on primitives */               \
	CO__ATOMIC(int) state;          /* enum co_engine_state */                      \
	CO__ATOMIC(int) stop_mode;      /* -1 none, else enum co_stop_mode */           \
	CO__ATOMIC(uint64_t) stop_at;   /* drain until then (CLOCK_MONOTONIC            \
	                                   ns), then cancel; 0: no limit */             \
	CO__ATOMIC(int) sleeping;       /* owner is (about to be) asleep */             \
	CO__ATOMIC(int) wake_pending;   /* an eventfd write is on its way */            \
	CO__ATOMIC(int) quiet;          /* idle with nothing that can                   \
	                                   progress (reported to a scheduler) */        \
	CO__ATOMIC(unsigned) epoch;     /* bumped by every change another               \
	                                   thread makes; the sleep check reads it */    \
	CO__ATOMIC(unsigned) visitors;  /* other threads inside a call on               \
	                                   the engine: destroy waits for them */        \
	CO__ATOMIC(unsigned) wake_writes; /* stats.wake_writes */                       \
	CO__ATOMIC(void *) posts;       /* co_post list, newest first */                \
	CO__ATOMIC(void *) inbox;       /* co_frames other threads made                 \
	                                   ready, newest first */                       \
	CO__ATOMIC(void *) cancels;     /* co_frames other threads asked                \
	                                   to cancel (co_frame.cancel_next) */          \
	CO__ATOMIC(unsigned) stop_lock; /* over stop_head, stop_linger_head */          \
	co_stop_link *stop_head;        /* cancellable parked waits */                  \
	co_stop_link *stop_linger_head; /* waits a cancel stop could not                \
	                                   end (a pool job that has started) */         \
	CO__ATOMIC(unsigned) bufrings;  /* provided buffer rings                        \
	                                   registered (coring/stream.h) */              \
	CO__ATOMIC(unsigned) borrowers; /* threads taking the engine while              \
	                                   it does not run (a run waits for them) */    \
	CO__ATOMIC(unsigned) held;      /* pool jobs still running for                  \
	                                   frames a cancel stop finished */             \
	CO__ATOMIC(unsigned) view_lock; /* over view, when thieves                      \
	                                   may take frames */                           \
	CO__ATOMIC(void *) view_req;    /* a view's request, taken by                   \
	                                   the next turn (lib/engine/engine_view.c) */  \
	uint64_t cancel_again;          /* when a cancel stop next asks                 \
	                                   the kernel to cancel what is in flight       \
	                                   (owner thread; a reserved slot before) */    \
	CO__ATOMIC(unsigned) viewers;   /* other threads' views waiting for             \
	                                   an answer: destroy waits for them */         \
	CO__ATOMIC(int) posts_closed;   /* co_engine_post refused: its                  \
	                                   context's last run is over */                \
	CO__ATOMIC(unsigned) io_due;    /* inflight as the last tick left               \
	                                   it (the end of a manual context              \
	                                   reads it) */                                 \
	void *reserved[CO__ENGINE_RESERVED]; /* room for fields of later                \
	                                   versions (docs/abi.md) */

struct co_engine {
	/* Read-only for the caller: what it was set up with, what it counts. */
	unsigned batch;                 /* read-only */
	unsigned inflight;              /* read-only: SQEs whose CQE is due */
	unsigned features;              /* read-only: CO_ENGINE_F_* */
	unsigned stuck;                 /* read-only: frames the last run found
	                                   waiting on nothing that can wake them
	                                   (it returned -EDEADLK), or the last
	                                   tick of a stopped engine found so; 0
	                                   again at the next run or tick */
	unsigned submit_batch;          /* read-only: opts.submit_batch */
	uint64_t spin_max;              /* read-only: the longest poll before a
	                                   sleep (0: it never polls) */
	co_engine_stats stats;          /* read-only */

	CO__ENGINE_PRIVATE_FIELDS
};

/*
 * Set up an engine (opts may be NULL for defaults). The io_uring is created
 * disabled and enabled by the first co_engine_run, so the engine may be set
 * up on one thread and run on another.
 * setup_flags may hold IORING_SETUP_SQPOLL, _SQ_AFF, _CLAMP, _SUBMIT_ALL,
 * _SQE128, _CQE32, _COOP_TASKRUN, _TASKRUN_FLAG, _SINGLE_ISSUER and
 * _DEFER_TASKRUN (_CQSIZE and _R_DISABLED are set by the engine anyway).
 * Errors: -EINVAL (NULL e, ready_size not a power of two >= 2,
 * sq_entries 1 (an operation and its linked timeout need two), cq_entries < sq_entries, an unknown setup flag, a reserved field not 0), -EOPNOTSUPP (a setup
 * flag the engine cannot honour: _IOPOLL, _ATTACH_WQ), -ENOMEM, eventfd's
 * errors, or io_uring_setup's (-ENOSYS when the kernel lacks io_uring,
 * -EPERM when it is disabled, -EMFILE ...). Nothing leaks on an error.
 */
CO_API int co_engine_init(co_engine *e, const co_engine_opts *opts);

/*
 * Release the engine's ring and memory; afterwards the library never
 * touches *e again. Refuses (-EBUSY) while a run is in progress, while
 * spawned frames have not finished, posts have not run, an SQE with
 * an info (co_engine_sqe) is in flight (a tick leaves it so: a drain
 * stop's run cancels it and runs its callback), a co_bufring
 * (coring/stream.h) is registered or a pool job whose frame a cancel stop
 * finished still runs (coring/pool.h), so nothing is
 * silently abandoned; the one exception is a stopped engine whose last run
 * returned -EDEADLK, or whose last tick found its frames stuck, with
 * nothing changed since: its stuck frames are forgotten (their on_done
 * never runs; nothing may wake them). -EINVAL for NULL or an engine not
 * set up. From the owner thread or any other; it
 * waits for other threads still returning from a call on e.
 */
CO_API int co_engine_destroy(co_engine *e);

/*
 * Hand a root frame (co_init'ed, not started) to the engine; from any
 * thread. Its on_done, if set, runs on the engine thread when it finishes,
 * after which the engine no longer touches it (on_done may free it).
 * Errors: -EINVAL (NULL, no body, started, already spawned, a child, or
 * an engine not set up), -ESHUTDOWN (a stop was asked).
 */
CO_API int co_engine_spawn(co_engine *e, co_frame *f);

/*
 * Run the loop on the calling thread: resume ready frames, submit their
 * I/O, wait, dispatch completions. CO_RUN_UNTIL_IDLE returns once no frame
 * is ready and no I/O or parked frame is pending; CO_RUN_UNTIL_STOP keeps
 * waiting for spawns until co_engine_stop, then drains the same way.
 * Returns 0 when every spawned frame finished; -EDEADLK when frames remain
 * that nothing can wake (waiting on an awaiter that is neither I/O nor
 * parked with co_engine_park; e->stuck counts them; they stay the
 * engine's: wake them and run again); -EINVAL for NULL, an engine not set
 * up, or a bad mode; -EBUSY if the engine runs already or another engine
 * runs on this thread; -EPERM when called from a thread other than the
 * engine's owner; or io_uring's error.
 */
CO_API int co_engine_run(co_engine *e, int mode);

/*
 * One turn of the loop that never sleeps, for a thread with a loop of its
 * own (a game's frame, a GUI's idle callback). It takes in the completions
 * already there and what other threads sent, then runs every frame ready
 * at that moment once, then the frames those wake (a set event, an unlock,
 * a spawn: up to opts.batch of them; the rest at the next tick); a frame
 * that yields, awaits co_next_turn or transfers to its own context runs at
 * the next tick, never this one. Its I/O is submitted at the end. The
 * calling thread becomes the engine's owner, as with co_engine_run (the two
 * may be mixed on that thread). Returns the number of frames resumed
 * (0: nothing was ready), or the errors of co_engine_run except -EDEADLK:
 * a tick of a stopped engine that ends idle with frames left that nothing
 * can wake sets e->stuck instead, as that run would (co_engine_destroy
 * then forgets them).
 */
CO_API int co_engine_tick(co_engine *e);

/*
 * The next-frame wait of a game loop, on any engine: the frame runs again
 * at the next turn of its engine's loop (on a manual context, the next
 * tick), after the completions that turn takes in; never in the turn or
 * tick that is running. co_after_turns waits n turns (n 0: no wait, 0 at
 * once, on an engine or not).
 *
 *     struct ent { co_frame co; co_turn t; ... };
 *     CO_AWAIT(f, co_next_turn(&e->t));          // one step per frame
 *
 * Value 0; -ECANCELED (co_cancel, a cancel stop: at the next turn);
 * -ENXIO (the frame does not run on an engine on this thread); NULL t
 * returns NULL (CO_AWAIT: -EINVAL). CO_YIELD on an engine, and
 * co_transfer_to the context a frame is on, wait one turn the same way.
 */
typedef struct co_turn {
	co_awaiter aw;          /* private: first */
	co_frame *frame;        /* private: the waiting root */
	struct co_turn *next;   /* private: its engine's list of such waits */
	unsigned left;          /* private: turns still to wait */
	int res;                /* private */
} co_turn;

CO_API co_awaiter *co_next_turn(co_turn *t);
CO_API co_awaiter *co_after_turns(co_turn *t, unsigned n);

/*
 * Ask the engine to stop, from any thread (signal handlers excepted): new
 * spawns fail with -ESHUTDOWN at once, and co_engine_run returns once every
 * frame has finished. CO_STOP_DRAIN lets them finish; CO_STOP_CANCEL ends
 * with -ECANCELED all I/O in flight, every wait on a sync primitive, timed
 * or not, and an awaiter of your own under co_timeout (its cancel op is
 * called); a frame parked on an awaiter of your own without a limit (even
 * one counted with co_engine_park) waits until you wake it, for the engine
 * holds no reference to it; from then on each frame's co_cancelled() is
 * true, so later waits end at once; frames that never started do not start
 * (their on_done sees -ECANCELED), and frames still running after the
 * grace (opts.cancel_grace_ns) are finished for them the same way, so the
 * stop is bounded even against a coroutine that retries. The run returns
 * within the grace, plus the time the kernel takes to end an operation a
 * cancel reaches: an operation the kernel's cancel misses (a send handed
 * to an io-wq worker, where it blocks) is asked again, every 10 ms while
 * anything is in flight (docs/engine.md, "A stop ends within its grace";
 * the socket is neither shut down nor closed). A frame waiting
 * for a pool job that has started (coring/pool.h: it cannot be
 * interrupted) is finished for it with -ECANCELED once the grace has run
 * out (its on_done may free it); the job runs on to its end and its
 * result is dropped, and until then co_engine_destroy answers -EBUSY.
 * A close or a file write that completes at once on the way out still
 * completes.
 * A second stop may turn a drain into a cancel, never the reverse.
 * Returns 0, or -EINVAL for NULL, a bad mode or an engine not set up.
 */
CO_API int co_engine_stop(co_engine *e, int mode);

/* A drain stop that becomes a cancel stop if frames are still live ns
 * nanoseconds from now (an ns whose sum with the clock would wrap, near
 * UINT64_MAX: never). Returns 0 or -EINVAL as co_engine_stop. */
CO_API int co_engine_stop_timed(co_engine *e, uint64_t ns);

/* enum co_engine_state of e (a snapshot), or -EINVAL for NULL. */
CO_API int co_engine_state(co_engine *e);

/* The engine running on the calling thread, or NULL. */
CO_API co_engine *co_engine_current(void);

/*
 * Park counts (tinyCoro's register_wait/unregister_wait): a primitive that
 * holds a frame of engine e and will co_wake it later from somewhere else
 * calls co_engine_park(e) when it takes it and co_engine_unpark(e) when it
 * wakes it, so the engine stays alive meanwhile. Safe from any thread.
 * Wake the frame first, then unpark: the engine never sees itself idle
 * with the frame on its way. Returns 0, or -EINVAL for NULL or an engine
 * not set up.
 */
CO_API int co_engine_park(co_engine *e);
CO_API int co_engine_unpark(co_engine *e);

/*
 * Run p->fn on e's thread at its next loop turn; from any thread. A post
 * wakes the engine if it sleeps and counts as pending work: the engine
 * does not stop, nor co_engine_destroy succeed, before fn has run. Each
 * poster's posts run in its order. A post made while no co_engine_run is
 * going runs in the next one. p is a node of the engine's list from the
 * post until fn begins: a second post of a p still queued is undefined,
 * as a node put twice in one list.
 * Errors: -EINVAL (NULL e, p or p->fn, or an engine not set up),
 * -ESHUTDOWN (the engine of a context whose last run is over: its thread
 * returned or is returning, or a manual context ended; no run will come).
 */
CO_API int co_engine_post(co_engine *e, co_post *p);

/*
 * Cancel from any thread: co_cancel (co.h) on a root frame this engine runs
 * may be called on any thread. On the engine's thread it acts at once;
 * from another it marks the frame cancelled (co_cancelled() is true from
 * then on) and carries the request to the engine's thread, which acts at
 * its next turn, and returns 0. The frame's memory must be valid when
 * co_cancel is called. A request that races the frame's end is harmless:
 * the frame's on_done waits until the request has been handled, and a
 * request for a frame that has finished returns -EALREADY and changes
 * nothing. A frame with a cancel request does not move to another engine
 * (co_transfer_to ends with -ECANCELED; stealing leaves it where it is).
 */

/* 1 if the running kernel has io_uring operation `opcode` (an
 * IORING_OP_* value), from a probe made once when the engine was set up;
 * 0 if not (a kernel too old for the probe counts as having every
 * operation the library knows). The preps of io.h check it: a missing
 * operation ends the await with -EOPNOTSUPP, before anything is queued. */
CO_API int co_engine_supports(const co_engine *e, unsigned opcode);

/*
 * Registered (fixed) files and buffers: the kernel takes a reference once,
 * not per operation. Files: index i of fds is then usable by any I/O of
 * io.h through co_fixed_file(aw), with i in place of the descriptor.
 * Buffers: co_read_fixed / co_write_fixed move data within registered
 * buffer buf_index. Call these from a frame of the engine, or while it
 * does not run from the thread that runs it (any thread before its first
 * run). Returns 0, -EINVAL (NULL, n 0, a dead engine), -EBUSY (the engine
 * runs on another thread or is held by a call under way on this one, such
 * as the on_done of a frame that the cancel stop of a context that never
 * started finishes; or a table is registered already), -EPERM
 * (another thread owns the ring), -ENXIO (unregister with nothing
 * registered), or the kernel's error (-ENOMEM over RLIMIT_MEMLOCK ...).
 */
CO_API int co_engine_register_files(co_engine *e, const int *fds, unsigned n);
CO_API int co_engine_unregister_files(co_engine *e);
CO_API int co_engine_register_buffers(co_engine *e, const struct iovec *iov, unsigned n);
CO_API int co_engine_unregister_buffers(co_engine *e);

/*
 * An SQE on e's ring, tagged with info (user_data = info | tag, tag <=
 * CO_IO_TAG_MASK): the building block of every awaiter. Submits early
 * when the SQ is full (never fails for that). NULL unless e runs on the
 * calling thread. With info set, the CQE is counted as in flight until it
 * arrives (a multishot until its last CQE); info NULL means
 * fire-and-forget. Never set IOSQE_IO_DRAIN: the engine keeps its own
 * wake-up read in flight, so a drained SQE would never start.
 */
CO_API struct io_uring_sqe *co_engine_sqe(co_engine *e, co_io_info *info, unsigned tag);

/* The next SQE of a link chain started by co_engine_sqe (which keeps room
 * for it): never submits early, so the chain is not cut. */
CO_API struct io_uring_sqe *co_engine_sqe_link(co_engine *e, co_io_info *info, unsigned tag);

/* The SQE last handed out for info, if it has not been submitted yet (to
 * add a link after it); NULL otherwise. */
CO_API struct io_uring_sqe *co_engine_last_sqe(co_engine *e, co_io_info *info);

/* Storage for a timeout's timespec that lives as long as sqe is queued
 * (the kernel copies it at submission): awaiters need not keep one. NULL
 * unless sqe is an SQE of e's ring. */
CO_API struct __kernel_timespec *co_engine_sqe_ts(co_engine *e, struct io_uring_sqe *sqe);

#ifdef __cplusplus
}
#endif

#endif /* CORING_ENGINE_H */
