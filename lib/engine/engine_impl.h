/* SPDX-License-Identifier: MIT */
/*
 * What the engine's own files share (not installed). The files, from the
 * bottom up (docs/design.md lists them; test/meta/layers.py checks that each
 * calls only those below it):
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
 * The declarations below follow the same order. No other file includes
 * this one: the layers above see the engine through engine_internal.h.
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
#include "common/fault.h"

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

/* The ready ring (ck_ring, kept out of the public header) and its slots. */
struct co__ready_ring {
	ck_ring_t ring;
	ck_ring_buffer_t buf[];
};

/* The calls that change the engine's state (the table is next_state in
 * lib/engine/engine_state.c). */
enum co__transition {
	CO__T_RUN,       /* co_engine_run starts */
	CO__T_RUN_END,   /* co_engine_run returns */
	CO__T_STOP,      /* co_engine_stop */
	CO__T_DESTROY,   /* co_engine_destroy begins (it may give up: -EBUSY) */
};

/* Apply t; returns the state it was applied to, or -1 (nothing changed). */
int co__engine_transition(co_engine *e, enum co__transition t);
/* co__engine_transition(e, t) for a run or a tick (CO__T_RUN) or a
 * destroy (CO__T_DESTROY), waiting out a thread that borrows e and a
 * destroy that decides (co__engine_destroy_answer): the state e was in;
 * -EINVAL if e is not set up or was destroyed meanwhile; -EBUSY if a run
 * holds e, e cannot make t, or the calling thread holds e borrowed. */
int co__engine_take(co_engine *e, enum co__transition t);
/* Take e as a run would while it runs nowhere, for a moment (a view's
 * answer, co__engine_cancel_unstarted, co__engine_cancel_unrun), waiting
 * out other borrowers: 0, or -1 as co__engine_take. A run, a tick, a
 * destroy or another borrow that comes meanwhile waits for
 * co__engine_unborrow(e, prev), prev as the borrow gave it. */
int co__engine_borrow(co_engine *e, co_engine **prev);
void co__engine_unborrow(co_engine *e, co_engine *prev);
/* 1 if the calling thread holds e borrowed (a frame's on_done that a
 * cancel stop of a never-started context runs there, say). */
int co__engine_borrowed_here(const co_engine *e);

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

/* ---- engine_frames.c: the list of live frames ---------------------------------- */

/* Set up with the engine (-ENOMEM), freed with it; view_lock held while it
 * changes (engines that may be stolen from only). fini, at a destroy (e
 * DYING, no visitor left), first waits for the views of other threads
 * still waiting on e (e->viewers, lib/engine/engine_view.c). */
int co__view_init(co_engine *e);
void co__view_fini(co_engine *e);
void co__view_lock(co_engine *e);
void co__view_unlock(co_engine *e);

/* ---- engine_queue.c: the ready queue ------------------------------------------- */

/* The ring, with the owner as its only producer and the owner and thieves
 * as consumers (TSan cannot see its atomics: see lib/common/tsan.h). */
int co__engine_ring_push(co_engine *e, co_frame *f);
co_frame *co__engine_ring_pop(co_engine *e);
/* Move the owner's overflow into the ring as it has room, oldest first. */
void co__engine_ring_refill(co_engine *e);
/* Queue what other threads pushed, oldest first (the owner, or a thread
 * that took e while it does not run); frames new to e are listed. */
void co__engine_inbox_drain(co_engine *e);

static inline int co__engine_stealable(const co_engine *e)
{
	return e->stealing;
}

/* Take the oldest frame of e's own FIFO; NULL if empty. */
static inline co_frame *co__engine_local_pop(co_engine *e)
{
	co_frame *f = e->local_head;

	if (f == NULL)
		return NULL;
	e->local_head = f->next;
	if (e->local_head == NULL)
		e->local_tail = NULL;
	e->local_n--;
	return f;
}

/* The next frame to resume, on the owner thread: a frame that followed
 * its waker here first (runnext, counted in local_n), then the ring's,
 * which are older than any overflow. */
static inline co_frame *co__engine_ready_pop(co_engine *e)
{
	co_frame *f;

	if (!co__engine_stealable(e))
		return co__engine_local_pop(e);
	if (co__unlikely(e->runnext != NULL)) {
		f = e->runnext;
		e->runnext = NULL;
		e->local_n--;
		return f;
	}
	f = co__engine_ring_pop(e);
	return f ? f : co__engine_local_pop(e);
}

/* Work the loop can do without waiting: frames to resume (now or at the
 * next turn), posts to run, cancel requests to handle. Other threads'
 * pushes are seen through the inbox, the post and the cancel lists. */
static inline int co__engine_ready_nonempty(co_engine *e)
{
	return e->local_n != 0 || ((uintptr_t)e->later_head | (uintptr_t)e->turns_head) != 0 ||
	       (co__engine_stealable(e) && co__engine_ring_size(e) != 0) ||
	       !co__lifo_empty(&e->inbox) || !co__lifo_empty(&e->posts) ||
	       !co__lifo_empty(&e->cancels);
}

/* ---- engine_sqe.c --------------------------------------------------------------- */

/* A free SQE, submitting what is queued first if there is none. */
struct io_uring_sqe *co__engine_sqe_get(co_engine *e);

/* ---- engine_visit.c: calls from other threads ----------------------------------- */

/* co_engine.quiet: NO; MAYBE while the engine checks, after raising it,
 * that no visitor came (co__engine_quiet_set); YES once that held, counted
 * by the scheduler. Whoever takes it down from YES uncounts it. */
enum { CO__QUIET_NO = 0, CO__QUIET_MAYBE = 1, CO__QUIET_YES = 2 };

/* Take the quiet flag down (a visit begins; the owner's turn begins).
 * seq_cst: pairs with co__engine_quiet_set (a visitor counts itself in
 * visitors, then looks at the flag; the engine raises the flag, then
 * looks at visitors). Inline: the loop does it every turn. */
static inline void co__engine_quiet_clear(co_engine *e)
{
	if (co__unlikely(atomic_load_explicit(&e->quiet, memory_order_seq_cst)) &&
	    atomic_exchange_explicit(&e->quiet, CO__QUIET_NO, memory_order_seq_cst) == CO__QUIET_YES)
		e->hooks->quiet(e, e->hook_arg, 0);
}
/* Push node on one of e's lock-free lists (inbox, posts, cancels) and end
 * the visit (visit: what co__engine_visit_begin returned). */
void co__engine_visit_push(co_engine *e, int visit, _Atomic(void *) *list, void *node, size_t link);
/* co_runner.wake of every engine: a frame of e is runnable again (on
 * another engine's thread, a frame that may roam follows its waker:
 * docs/scheduler.md, "Frames that follow their waker"). */
void co__engine_wake_op(co_runner *r, co_frame *f);
/* Give f to engine `to`, unless it was asked to cancel or is pinned by a
 * time limit (the MOVING mark, then the runner): 0, or -ECANCELED or
 * -EBUSY (pinned) with nothing published. */
int co__engine_runner_move(co_frame *f, co_engine *to);
/* runner_move in two halves, for a caller with more to decide between
 * them: the mark (0, -ECANCELED, -EBUSY; a cancel asked after it waits
 * for the unmark), then the unmark, publishing `to` as the runner (NULL:
 * the runner stays, the move is given up). */
int co__engine_runner_mark(co_frame *f);
void co__engine_runner_unmark(co_frame *f, co_engine *to);
/* f, counted on from and moved to `to` (runner and count), leaves from's
 * count and list for to's list (inside a visit of from). */
void co__engine_rehome(co_engine *from, co_engine *to, co_frame *f);
/* Run every post queued so far, oldest first (the owner). */
void co__engine_run_posts(co_engine *e);
/* Queue root f, made ready, on e inside a visit of e (visit: what
 * co__engine_visit_begin returned; 0 on e's own thread). */
void co__engine_enqueue(co_engine *e, int visit, co_frame *f);
/* Begin a call that may come from another thread: the visit, then the
 * check that e is set up (inside the visit). 0 (end it with
 * co__engine_visit_end), or -EINVAL with no visit left. */
int co__engine_call_begin(co_engine *e, int *visit);
/* e is DYING: wait, outside any visit, for the destroy's answer (inside:
 * the caller is a visitor, and is one again when e lives on). 1: e lives
 * on; 0: destroyed, and e is not touched again. */
int co__engine_destroy_answer(co_engine *e, int inside);
/* Count one more frame on e unless spawns are refused: 1, or 0. */
int co__engine_live_get(co_engine *e);

/* ---- engine_cancel.c ------------------------------------------------------------- */

/* co_runner.cancel of every engine (any thread). */
int co__engine_cancel_op(co_runner *r, co_frame *f);
/* A root frame ended: finish it (its on_done, the counts), unless a cancel
 * request from another thread is on its way, which then finishes it. */
void co__engine_finish_frame(co_engine *e, co_frame *f);
/* Finish f now: its on_done, the counts. */
void co__engine_finish_now(co_engine *e, co_frame *f);
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

/* ---- engine_stop_list.c: the cancel stop's list of parked waits ----------------------- */

/* Cancel stop, owner thread: end every listed parked wait. */
void co__engine_stop_list_cancel_all(co_engine *e);
/* Cancel stop, owner thread: whether waits linger that the stop could not
 * end, and, once its grace has run out, give each up. */
int co__engine_stop_list_lingering(co_engine *e);
void co__engine_stop_list_give_up_all(co_engine *e);

/* ---- engine_stop.c --------------------------------------------------------------- */

uint64_t co__engine_stop_turn_slow(co_engine *e, int mode, uint64_t *wait_ns);

/* The stop state at the start of a turn: escalates a timed drain to a
 * cancel when its time came, begins the cancel once (and asks again while
 * anything is in flight), and returns the time after which frames still
 * running are finished for them (0: no cancel stop), and in *wait_ns how
 * long the turn may sleep. Inline: no stop asked is the common case. */
static co__inline uint64_t co__engine_stop_turn(co_engine *e, uint64_t *wait_ns)
{
	int mode = atomic_load_explicit(&e->stop_mode, memory_order_acquire);

	*wait_ns = 0;
	if (co__likely(mode == CO__STOP_NONE))
		return 0;
	return co__engine_stop_turn_slow(e, mode, wait_ns);
}

/* ---- engine_turn.c --------------------------------------------------------------- */

/* The turn begins: the later list's frames join the ready queue, but for
 * co_after_turns waits with turns left. */
void co__engine_later_take(co_engine *e);

/* ---- engine_view.c: a view's request --------------------------------------------- */

/* At a turn whose epoch moved, and as a run or a tick returns: answer a
 * view's request, if one is there. */
void co__engine_view_answer(co_engine *e);

/* ---- engine_wait.c: waiting for work --------------------------------------------- */

/* No frame ready and no I/O or parked frame pending. */
int co__engine_idle(co_engine *e);
/* Another thread is inside a call on e (or a finish waits for a cancel
 * request): its change is about to land. */
int co__engine_visitor_inside(co_engine *e);
/* Nothing changed since the turn began (snap) and e is idle. */
int co__engine_unchanged(co_engine *e, unsigned snap);
/* Idle with nothing that can progress: tell the scheduler (if any). */
void co__engine_quiet_set(co_engine *e, unsigned snap);
/* The sleep (in the kernel until a completion, unless something changed
 * since snap), and the wait with nothing in flight (a poll for a hand-off
 * first); each 0 or io_uring's error (-ETIME: ns ran out). */
int co__engine_sleep(co_engine *e, unsigned snap, uint64_t ns, int idle);
int co__engine_wait_idle(co_engine *e, unsigned snap, uint64_t ns, int idle);

/* At the first run: what the fast sleep enters the kernel with. */
void co__engine_enter_setup(co_engine *e, int registered);
/* The fast sleep's enter ended with -ETIME (a valgrind slice): 0. */
int co__engine_slice_end(co_engine *e);

/* Every sleep's check (invariant 1): sleeping goes up, then epoch is
 * looked at; something changed since snap (or a frame is queued, looked at
 * again as a guard unless the caller just looked: looked): no sleep, 0.
 * Else 1, counted in stats.waits. */
static co__inline int co__engine_sleep_begin(co_engine *e, unsigned snap, int looked)
{
	atomic_store_explicit(&e->sleeping, 1, memory_order_seq_cst); /* pairs with engine_kick */
	if (atomic_load_explicit(&e->epoch, memory_order_seq_cst) != snap ||
	    (!looked && e->local_n != 0)) {
		atomic_store_explicit(&e->sleeping, 0, memory_order_relaxed);
		return 0;
	}
	e->stats.waits++;
	return 1;
}

/* liburing's flush: the kernel sees the SQEs handed out up to the tail,
 * which is returned. */
static co__inline unsigned co__engine_sq_flush(co_engine *e)
{
	struct io_uring_sq *sq = &e->ring.sq;
	unsigned tail = sq->sqe_tail;

	if (sq->sqe_head != tail) {
		sq->sqe_head = tail;
		io_uring_smp_store_release(sq->ktail, tail);
	}
	return tail;
}

/*
 * co__engine_sleep with no limit and I/O in flight, a server's every turn:
 * the same check, then one io_uring_enter that submits the SQ and waits
 * for a completion, with the flags the first run worked out (the ring fd
 * registered or not; under valgrind a slice).
 */
static co__inline int co__engine_sleep_now(co_engine *e, unsigned snap, int looked)
{
	unsigned tail;
	int ret;

	if (!co__engine_sleep_begin(e, snap, looked))
		return 0;
	tail = co__engine_sq_flush(e);
	ret = io_uring_enter2((unsigned)e->enter_fd, tail - *e->ring.sq.khead, 1, e->enter_flags,
			      (sigset_t *)(uintptr_t)e->enter_arg, e->enter_argsz);
	atomic_store_explicit(&e->sleeping, 0, memory_order_relaxed);
	if (co__unlikely(ret == -ETIME))
		return co__engine_slice_end(e);
	return ret;
}

/* With nothing in flight the engine can only be waiting for another
 * thread: it polls for that first; with I/O in flight, a server's every
 * turn, it sleeps at once (inline: a few tests in the loop). */
static inline int co__engine_wait(co_engine *e, unsigned snap, uint64_t ns, int idle)
{
	if (co__unlikely(e->inflight == 0) && e->spin_max != 0)
		return co__engine_wait_idle(e, snap, ns, idle);
	if (co__likely((ns | (uint64_t)idle) == 0) && e->enter_fd >= 0)
		return co__engine_sleep_now(e, snap, 0);
	return co__engine_sleep(e, snap, ns, idle);
}
int co__engine_idle_sleep(co_engine *e, uint64_t ns);

/* ---- engine_loop.c ---------------------------------------------------------------- */

/* The wake-up read's completion (co_engine.wake_info.cb). */
void co__engine_wake_done(co_engine *e, co_io_info *info, int res, unsigned cqe_flags, unsigned tag);
/* Reap the armed eventfd read before the ring goes (invariant 6). */
void co__engine_wake_disarm(co_engine *e);

#endif
