/* SPDX-License-Identifier: MIT */
/*
 * Cancellation on the engine (docs/design.md, "Cancellation"): a cancel
 * request from any thread carried to the frame's own thread, a frame's
 * finish that waits for a request on its way, the cancel of frames that
 * never started, and finishing a frame for it.
 */

#include <errno.h>
#include <sched.h>

#include "engine_cancel.h"
#include "engine_state.h"
#include "engine_frames.h"
#include "engine_queue.h"
#include "engine_visit.h"
#include "common/spin.h"

void co__engine_finish_now(co_engine *e, co_frame *f)
{
	int task = (f->state & CO__ST_TASK) != 0;

	co__view_del(e, f);
	if (f->on_done)
		f->on_done(f); /* may free f: not touched after this */
	co__live_drop(e);
	/* The last frame of a stopped engine, with I/O still in flight: the
	 * loop's next turn looks at the stop again (a drain then cancels
	 * what no frame waits for), instead of a wait that nothing ends. */
	if (co__unlikely(atomic_load_explicit(&e->live, memory_order_relaxed) == CO__LIVE_STOPPED) &&
	    e->inflight != 0)
		atomic_fetch_add_explicit(&e->epoch, 1, memory_order_relaxed);
	if (task && e->hooks && e->hooks->task_done)
		e->hooks->task_done(e, e->hook_arg);
}

/* A root frame ended. If a cancel request from another thread is on its
 * way, that request finishes it (run_cancels): the requester may still be
 * touching the frame. */
void co__engine_finish_frame(co_engine *e, co_frame *f)
{
	CO__TRACE_DONE(e, f);
	if (__atomic_fetch_or(&f->cancel, (unsigned char)CO__CX_FINISHED, __ATOMIC_SEQ_CST) & CO__CX_QUEUED) {
		e->deferred++; /* the requester is inside co_cancel: it will push */
		return;
	}
	co__engine_finish_now(e, f);
}

/* Cancel stop: finish f for it, without running it: it never started, or
 * it is still running past the grace. It is in no queue and no awaiter
 * holds it (it came off the ready queue). */
void co__engine_abandon(co_engine *e, co_frame *f)
{
	/* Finished in the middle of an await of a child: the children of its
	 * chain end too (-ECANCELED), so that what holds one (a reader's read)
	 * reads as ended in f's on_done, not busy for good. None has I/O in
	 * flight: f came off the ready queue, so the leaf's await is over. */
	if (f->state & CO__ST_NESTED) {
		co_frame *cur = f->top;

		while (cur != f) {
			co_frame *p = CO__PARENT(cur);

			cur->status = -ECANCELED;
			cur->state = (cur->state | CO__ST_DONE) &
				     ~(unsigned)(CO__ST_CHILD | CO__ST_WAITING | CO__ST_DBG_RUNNING);
			cur->parent = NULL;
			cur->top = cur;
			cur = p;
		}
		f->top = f;
	}
	f->status = -ECANCELED;
	f->state = (f->state | CO__ST_DONE) & ~(unsigned)(CO__ST_WAITING | CO__ST_NESTED);
	e->stats.cancelled++;
	co__engine_finish_frame(e, f);
}

/*
 * co_runner.cancel, from any thread. Mark the frame (ASKED | QUEUED)
 * unless it finished. From then on it does not move to another engine: a
 * move marks the frame MOVING in the same byte, and only if no request is
 * there, and publishes the new runner only once it is certain; we wait
 * for a move already under way to be published. So the runner we read is
 * the engine that owns the frame, for good. On that engine's thread, act
 * at once; elsewhere queue the frame for it, and its finish waits for the
 * request (co__engine_finish_frame), so the frame is still there when it arrives.
 */
int co__engine_cancel_op(co_runner *r, co_frame *f)
{
	co_engine *e;
	unsigned char old = co__cx_load(f), want;
	int remote;

	CO__TRACE_CANCEL(f);
	do {
		if (old & CO__CX_FINISHED)
			return -EALREADY; /* changes nothing */
		want = (unsigned char)(old | CO__CANCEL_ASKED | CO__CX_QUEUED);
	} while (!__atomic_compare_exchange_n(&f->cancel, &old, want, 1, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	if (old & CO__CX_QUEUED)
		return 0; /* a request is on its way already */
	while (co__cx_load(f) & CO__CX_MOVING)
		co__cpu_relax(); /* a move decided before us: a few instructions */
	r = __atomic_load_n(&f->runner, __ATOMIC_ACQUIRE);
	e = co__container_of(r, co_engine, runner);
	if (co__tls_engine == e) {
		/* Its own thread: at once. Only this thread finishes it, so
		 * it has not finished since the CAS. */
		__atomic_fetch_and(&f->cancel, (unsigned char)~CO__CX_QUEUED, __ATOMIC_ACQ_REL);
		return co__cancel_here(f);
	}
	remote = co__engine_visit_begin(e);
	co__engine_visit_push(e, remote, &e->cancels, f, offsetof(co_frame, cancel_next));
	return 0;
}

/* The owner handles the requests other threads queued (each for one of
 * its own frames: see co__engine_cancel_op). */
void co__engine_run_cancels(co_engine *e)
{
	co_frame *f = co__lifo_take(&e->cancels, offsetof(co_frame, cancel_next)), *next;

	for (; f; f = next) {
		unsigned char old;

		next = f->cancel_next;
		old = __atomic_fetch_and(&f->cancel, (unsigned char)~CO__CX_QUEUED, __ATOMIC_SEQ_CST);
		if (old & CO__CX_FINISHED) { /* it finished meanwhile: its finish waited */
			co__deferred_drop(e);
			co__engine_finish_now(e, f);
		} else
			co__cancel_here(f);
	}
}

int co__engine_unqueue_unstarted(co_engine *e, co_frame *f)
{
	co_frame **p = &e->local_head, *prev = NULL;

	co__engine_inbox_drain(e);
	for (; *p; prev = *p, p = &(*p)->next) {
		if (*p != f)
			continue;
		if (f->label != 0)
			return 0; /* started: its engine's next turn */
		*p = f->next;
		if (e->local_tail == f)
			e->local_tail = prev;
		e->local_n--;
		return 1;
	}
	return 0;
}

void co__engine_settle_finishes(co_engine *e)
{
	while (e->deferred) {
		co_frame *f = co__lifo_take(&e->cancels, offsetof(co_frame, cancel_next)), *next;

		for (; f; f = next) {
			next = f->cancel_next;
			if (!(co__cx_load(f) & CO__CX_FINISHED)) {
				/* for e's next run or tick, whose first turn looks at
				 * the lists whatever epoch says (enter in
				 * engine_loop.c): a settle runs only in a borrow,
				 * while e runs nowhere, so no bump of epoch is
				 * needed (test_groups cancel_request_survives_borrow) */
				co__lifo_push(&e->cancels, f, offsetof(co_frame, cancel_next));
				continue;
			}
			__atomic_fetch_and(&f->cancel, (unsigned char)~CO__CX_QUEUED, __ATOMIC_SEQ_CST);
			co__deferred_drop(e);
			co__engine_finish_now(e, f);
		}
		if (e->deferred)
			sched_yield(); /* a requester is about to push */
	}
}

/*
 * A cancel stop on an engine that has never run (a context whose thread
 * never started): finish its queued frames for them, on the calling
 * thread (on_done sees -ECANCELED). -EBUSY if the engine ran or runs.
 */
int co__engine_cancel_unrun(co_engine *e)
{
	co_frame *f, *next;
	co_engine *prev;

	if (co__engine_borrow(e, &prev) < 0)
		return -EBUSY;
	if (e->has_owner) {
		co__engine_unborrow(e, prev);
		return -EBUSY;
	}
	/* Spawns are refused (a stop was asked); let those counted before it
	 * finish their push. */
	while (atomic_load_explicit(&e->visitors, memory_order_acquire) != 0)
		sched_yield();
	/* the local FIFO holds what a borrower queued (co__engine_cancel_unstarted) */
	while ((f = co__engine_local_pop(e)) != NULL)
		co__engine_abandon(e, f);
	for (f = co__lifo_take(&e->inbox, offsetof(co_frame, next)); f; f = next) {
		next = f->next;
		co__engine_abandon(e, f);
	}
	co__engine_run_cancels(e); /* requests for them: each finishes its frame */
	co__engine_unborrow(e, prev);
	return 0;
}

int co__engine_cancel_unstarted(co_engine *e, co_frame *f)
{
	int visit = co__engine_visit_begin(e), err = -EBUSY;
	co_engine *prev;

	/* A visit: e outlives the call. Borrowed (a view's borrow is waited
	 * out; a run or a tick that comes meanwhile waits); while e does not
	 * run, its queues are the borrower's. */
	if (co__engine_alive(e) && !e->stealing && co__engine_borrow(e, &prev) == 0) {
		if (co__engine_unqueue_unstarted(e, f)) {
			co__engine_abandon(e, f); /* its finish waits for the request... */
			co__engine_settle_finishes(e); /* ...which is in (or on its way) */
			err = 0;
		}
		co__engine_unborrow(e, prev);
	}
	co__engine_visit_end(e, visit);
	return err;
}
