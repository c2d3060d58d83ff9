/* SPDX-License-Identifier: MIT */
/*
 * What the engine's own files share (not installed): lib/engine.c (the
 * hot path: ready queue, visits and wake-ups, cancel requests, the loop),
 * lib/engine_setup.c (set-up, the probe, registration, destroy),
 * lib/engine_park.c (the cancel stop's list of parked waits),
 * lib/engine_wait.c (polling for work, then sleeping), lib/engine_sqe.c
 * (the SQE calls of engine.h) and
 * lib/engine_move.c (stealing, moving frames, the cancel of frames that
 * never ran). No other file includes it: the layers above see the engine
 * through lib/engine_internal.h.
 */
#ifndef CORING_LIB_ENGINE_IMPL_H
#define CORING_LIB_ENGINE_IMPL_H

#include <ck_ring.h>
#ifdef CO_HAVE_VALGRIND_H
#include <valgrind/valgrind.h>
#define co__under_valgrind() RUNNING_ON_VALGRIND
#else
#define co__under_valgrind() 0
#endif

#include "engine_internal.h"

/* The live count and the "spawns refused" bit share one word, so that a
 * spawn is either counted before a stop (and runs) or refused: never both. */
#define CO__LIVE_STOPPED 0x80000000u
#define CO__LIVE_COUNT(v) ((v) & ~CO__LIVE_STOPPED)

#define CO__STOP_NONE (-1)
#define CO__CANCEL_GRACE_NS 1000000000ull
#define CO__CANCEL_AGAIN_NS 10000000ull /* a cancel stop asks again (engine.c) */
#define CO__SPIN_DEFAULT_NS 50000ull  /* opts.spin_ns 0 */

/* The ready ring (ck_ring, kept out of the public header) and its slots. */
struct co__ready_ring {
	ck_ring_t ring;
	ck_ring_buffer_t buf[];
};

/* The calls that change the engine's state (the table is next_state in
 * lib/engine.c). */
enum co__transition {
	CO__T_RUN,       /* co_engine_run starts */
	CO__T_RUN_END,   /* co_engine_run returns */
	CO__T_STOP,      /* co_engine_stop */
	CO__T_DESTROY,   /* co_engine_destroy begins (it may give up: -EBUSY) */
};

/* Apply t; returns the state it was applied to, or -1 (nothing changed). */
int co__engine_transition(co_engine *e, enum co__transition t);
/* co__engine_transition(e, CO__T_RUN) for a run, a tick or a cancel stop
 * of frames never run, waiting out a thread that borrows e (see
 * co__engine_cancel_unstarted: it is short). */
int co__engine_take(co_engine *e);

static inline int co__engine_alive(co_engine *e)
{
	int s = atomic_load_explicit(&e->state, memory_order_acquire);

	return s != CO_ENGINE_DEAD && s != CO_ENGINE_DYING;
}

/* co_frame.cancel bits of the engine's own (co.h keeps ASKED; 1u << 7 is
 * CO__CX_PINNED, a time limit's, in engine_internal.h). */
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

/* The turn begins: the later list's frames join the ready queue, but for
 * co_after_turns waits with turns left (lib/engine_turn.c). */
void co__engine_later_take(co_engine *e);
/* The list of live frames (lib/engine_view.c): set up with the engine
 * (-ENOMEM), freed with it; view_lock held while it changes (engines that
 * may be stolen from only). */
int co__view_init(co_engine *e);
void co__view_fini(co_engine *e);
void co__view_lock(co_engine *e);
void co__view_unlock(co_engine *e);
/* At a turn whose epoch moved: answer a view's request, if one is there. */
void co__engine_view_answer(co_engine *e);
/* Set e's runner ops and wake-up callback (co_engine_init). */
void co__engine_runner_init(co_engine *e);
/* Work the loop can do without waiting (ready frames, posts, cancels). */
int co__engine_has_work(co_engine *e);
/* Reap the armed eventfd read before the ring goes (invariant 6). */
void co__engine_wake_disarm(co_engine *e);
/* Take the oldest frame of e's local FIFO (its owner, or a thread that
 * took e while it does not run); NULL if empty. */
co_frame *co__engine_local_pop(co_engine *e);
/* Take a frame from e's ready ring (the owner or a thief); NULL if empty. */
co_frame *co__engine_ring_pop(co_engine *e);
/* Queue root f, made ready, on e inside a visit of e (visit: what
 * co__engine_visit_begin returned; 0 on e's own thread). */
void co__engine_enqueue(co_engine *e, int visit, co_frame *f);
/* Begin a call that may come from another thread: the visit, then the
 * check that e is set up (inside the visit). 0 (end it with
 * co__engine_visit_end), or -EINVAL with no visit left. */
int co__engine_call_begin(co_engine *e, int *visit);
/* Count one more frame on e unless spawns are refused: 1, or 0. */
int co__engine_live_get(co_engine *e);
/* Cancel stop: finish f for it without running it (status -ECANCELED). */
void co__engine_abandon(co_engine *e, co_frame *f);
/* Handle the cancel requests other threads queued for e's frames. */
void co__engine_run_cancels(co_engine *e);
/* e's owner, or a thread that took e while it does not run: queue what
 * other threads pushed, then take f out of the queue if it is there and
 * has not started: 1 if it did. */
int co__engine_unqueue_unstarted(co_engine *e, co_frame *f);
/* The same: finish the frames whose finish waits for a cancel request,
 * once their requests are in (their requesters are inside co_cancel);
 * other requests stay for the owner's next turn. */
void co__engine_settle_finishes(co_engine *e);
/* Queue what other threads pushed; finish f now (its on_done, the counts). */
void co__engine_inbox_drain(co_engine *e);
void co__engine_finish_now(co_engine *e, co_frame *f);
/* Waiting with nothing in flight (engine_wait.c): poll for a hand-off,
 * then sleep; the sleep under valgrind. co__engine_sleep is the loop's
 * sleep (engine.c). Each returns 0 or io_uring's error (-ETIME: ns ran
 * out). */
int co__engine_wait_idle(co_engine *e, unsigned snap, uint64_t ns, int idle);
int co__engine_idle_sleep(co_engine *e, uint64_t ns);
int co__engine_sleep(co_engine *e, unsigned snap, uint64_t ns, int idle);
/* Cancel stop, owner thread: end every listed parked wait (engine_park.c). */
void co__engine_park_cancel_all(co_engine *e);
/* Cancel stop, owner thread: whether waits linger that the stop could not
 * end, and, once its grace has run out, give each up (engine_park.c). */
int co__engine_park_lingering(co_engine *e);
void co__engine_park_give_up_all(co_engine *e);

#endif
