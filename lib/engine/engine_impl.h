/* SPDX-License-Identifier: MIT */
/*
 * What the engine's files share (not installed), calling nothing: the
 * hooks a scheduler installs, the counts and their checked drops, the
 * engine's constants and co_frame.cancel bits. The files, from the
 * bottom up (docs/design.md lists them; test/meta/layers.py checks that
 * each calls only those below it), each with a header of its own that
 * includes only the headers of files below it:
 *   engine_state.c   the state word, which engine runs on this thread
 *   engine_frames.c  the list of live frames a view reads
 *   engine_queue.c   the ready queue: inbox, ring, the owner's FIFO
 *   engine_sqe.c     SQEs
 *   engine_visit.c   calls from other threads: visits, kicks, spawns,
 *                    wake-ups, posts, park counts
 *   engine_cancel.c  cancel requests, finishing frames
 *   engine_stop_list.c    the cancel stop's list of parked waits
 *   engine_stop.c    the stop
 *   engine_turn.c    waits for the next turn
 *   engine_move.c    stealing and transfers
 *   engine_view.c    a view's request
 *   engine_wait.c    waiting for work: polling, sleeping
 *   engine_loop.c    the loop, a run, a tick
 *   engine_setup.c   set-up, registration, destroy
 * The other layers see the engine through engine_internal.h, which includes
 * them all.
 */
#ifndef CORING_LIB_ENGINE_IMPL_H
#define CORING_LIB_ENGINE_IMPL_H

#include <stdint.h>

#include <coring/engine.h>
#include "common/base.h"
#include "common/fault.h"
#include "common/list.h"
#include "trace/trace_hooks.h"

/*
 * What a scheduler hooks into its contexts' engines (one struct, set
 * before the engine first runs; every hook runs on the engine's thread
 * unless said otherwise).
 */
struct co__engine_hooks {
	/* a frame marked CO__ST_TASK finished (after its on_done) */
	void (*task_done)(co_engine *e, void *arg);
	/* idle: take ready frames from elsewhere; returns how many */
	int (*steal)(co_engine *thief, void *arg);
	/* busy: ready frames are waiting */
	void (*backlog)(co_engine *e, void *arg);
	/* the engine became quiet (1: idle with nothing that can progress,
	 * about to sleep) or stopped being so (0; from any thread) */
	void (*quiet)(co_engine *e, void *arg, int quiet);
	/* the engine would poll for work before it sleeps (begin 1): 1 if
	 * it may (the scheduler caps how many poll at once); its poll ended
	 * (begin 0) */
	int (*spin)(co_engine *e, void *arg, int begin);
};

/* A frame a runner may take: co_init'ed with a body, never run, not a
 * child, not spawned, not finished (a spawn, a graph's node, a when's
 * child). NULL: no. */
static inline int co__frame_fresh(const co_frame *f)
{
	return f && f->fn && f->parent == NULL && f->label == 0 &&
	       !(f->state & (CO__ST_SPAWNED | CO__ST_DONE));
}

/* The live count and the "spawns refused" bit share one word, so that a
 * spawn is either counted before a stop (and runs) or refused: never both. */
#define CO__LIVE_STOPPED 0x80000000u
#define CO__LIVE_COUNT(v) ((v) & ~CO__LIVE_STOPPED)

/* The visitors word: the other threads inside a call on the engine (the
 * low bits: a destroy waits for them before it decides) and, above them,
 * those that found a destroy deciding and wait for its answer outside
 * their visit (a destroy that frees the engine waits for them before it
 * returns: co__engine_destroy_answer). */
#define CO__VISIT_WAITING (1u << 16)
#define CO__VISIT_INSIDE(v) ((v) & (CO__VISIT_WAITING - 1))

/*
 * The counted invariants' drops (docs/design.md, "The rules (invariants)"): a count
 * never drops below what it holds. In a debug build (CO_DEBUG) a drop that
 * would wrap traps, naming the count and its rule, where the count first
 * went wrong, instead of showing later as an engine that never idles or
 * never ends. A release build does the plain decrement.
 */
#define CO__DROP(word, n, mask, msg)                                                   \
	do {                                                                           \
		unsigned co__old = atomic_fetch_sub_explicit(&(word), (n), memory_order_release); \
		CO__CHECK((co__old & (mask)) >= (unsigned)(n), msg);                   \
		(void)co__old;                                                         \
	} while (0)

/* One frame fewer on e (invariant 3: each accepted frame ends once). */
#define co__live_drop(e) \
	CO__DROP((e)->live, 1, ~CO__LIVE_STOPPED, "invariant 3: an engine's live count dropped below zero (a frame ended twice, or was never counted)")
/* n parked frames fewer (invariant 4: an unpark follows its park). */
#define co__parked_drop(e, n) \
	CO__DROP((e)->parked, (n), ~0u, "invariant 4: an engine's parked count dropped below zero (an unpark without its park)")
/* One given-up wait fewer (invariant 8: the engine stays held until it ends). */
#define co__held_drop(e) \
	CO__DROP((e)->held, 1, ~0u, "invariant 8: an engine's held count dropped below zero (a given-up wait ended twice)")

/* io_uring_register on e's ring, or the error a test arms for it. */
static inline int co__engine_register(co_engine *e, unsigned op, void *arg, unsigned n)
{
	int err = co__fault_hit(CO__FAULT_REGISTER);

	return err ? -err : io_uring_register(e->ring.ring_fd, op, arg, n);
}

/* One operation fewer in flight (invariant 6: a CQE ends only what an SQE
 * counted). The owner's plain count. The wake-up read is not counted: its
 * CQE takes the count below zero for a moment and co__engine_wake_done
 * gives it back, so the check lets that one CQE through. */
static inline void co__inflight_drop(co_engine *e, const co_io_info *info)
{
	CO__CHECK(e->inflight != 0 || info == &e->wake_info,
		  "invariant 6: an engine's I/O in flight dropped below zero (a CQE for an SQE never counted)");
	(void)info;
	e->inflight--;
}

/* One deferred finish fewer (invariant 8: a frame is finished once, by
 * the cancel request that was touching it). The owner's plain count. */
static inline void co__deferred_drop(co_engine *e)
{
	CO__CHECK(e->deferred != 0,
		  "invariant 8: an engine's deferred finishes dropped below zero (a finish taken twice)");
	e->deferred--;
}

#define CO__STOP_NONE (-1)
#define CO__CANCEL_GRACE_NS 1000000000ull
#define CO__CANCEL_AGAIN_NS 10000000ull /* a cancel stop asks again (engine_stop.c) */
#define CO__SPIN_DEFAULT_NS 50000ull  /* opts.spin_ns 0 */

/* co_frame.cancel bits of the engine's own (co.h keeps ASKED; 1u << 7 is
 * CO__CX_PINNED, a time limit's, below). */
enum {
	CO__CX_QUEUED = 1u << 4,    /* on the engine's cancel list, not handled yet */
	CO__CX_FINISHED = 1u << 5,  /* the frame finished (its on_done may wait for a
	                               queued request) */
	CO__CX_MOVING = 1u << 6,    /* another engine is taking it (runner_move) */
};

static inline unsigned char co__cx_load(co_frame *f)
{
	return __atomic_load_n(&f->cancel, __ATOMIC_ACQUIRE);
}

/* co_frame.cancel bit (a runner bit, see co.h): the frame does not move to
 * another engine (no steal, no transfer) while set. A time limit that is
 * not a kernel link sets it for its await (lib/timeout/timeout.c): its timer and
 * the frame then live on one engine, whose thread does everything. */
#define CO__CX_PINNED (1u << 7)

#endif
