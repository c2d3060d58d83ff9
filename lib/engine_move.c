/* SPDX-License-Identifier: MIT */
/*
 * Frames that change engines: a thief takes ready frames from another
 * engine's ring (stealing), a transfer moves a waiting frame to another
 * engine, and a cancel stop finishes the frames of an engine that never
 * ran. lib/scheduler.c and lib/context.c call these.
 */
#include <errno.h>
#include <sched.h>

#include "engine_impl.h"

/* Give f to engine `to`, unless it was asked to cancel or is pinned by a
 * time limit: mark it MOVING (in the byte a cancel request marks, so
 * exactly one of the two comes first), publish the new runner, unmark.
 * 0: moved; -ECANCELED or -EBUSY (pinned): f stays where it is, and
 * nothing was published. */
static int runner_move(co_frame *f, co_engine *to)
{
	unsigned char old = co__cx_load(f);

	do {
		if (old & CO__CX_PINNED)
			return -EBUSY;
		if (old & (CO__CX_QUEUED | CO__CANCEL_ASKED))
			return -ECANCELED;
	} while (!__atomic_compare_exchange_n(&f->cancel, &old, (unsigned char)(old | CO__CX_MOVING), 1,
					      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	__atomic_store_n(&f->runner, &to->runner, __ATOMIC_RELEASE);
	__atomic_fetch_and(&f->cancel, (unsigned char)~CO__CX_MOVING, __ATOMIC_RELEASE);
	return 0;
}

/*
 * Take up to max ready frames from victim's ring into thief's. Only frames
 * in a ready ring move: none of them has I/O in flight (their awaits have
 * completed), so no SQE or CQE refers to another ring than the one that
 * will resume them. A frame with a cancel request stays with the victim
 * (back through its inbox). Returns how many moved.
 */
unsigned co__engine_steal(co_engine *thief, co_engine *victim, unsigned max)
{
	/* A visit of the victim: while a frame is in our hands, counted on
	 * it but in none of its queues, it must not take the frame for one
	 * that nothing will wake (visitor_inside). */
	int visit = co__engine_visit_begin(victim);
	unsigned n = 0;
	co_frame *f;

	while (n < max && (f = co__engine_ring_pop(victim)) != NULL) {
		if (runner_move(f, thief) < 0) {
			victim->runner.wake(&victim->runner, f); /* back to the victim */
			continue;
		}
		atomic_fetch_add_explicit(&thief->live, 1, memory_order_relaxed);
		atomic_fetch_sub_explicit(&victim->live, 1, memory_order_release);
		co__view_del(victim, f); /* under the victim's view_lock */
		co__view_add(thief, f);
		CO__TRACE_STEAL(thief, victim, f);
		co__engine_push_owner(thief, f); /* we run on the thief's thread */
		n++;
	}
	co__engine_visit_end(victim, visit);
	return n;
}

/*
 * Move a waiting root frame (it is suspended in an awaiter's suspend) from
 * the engine running it to target, and wake it there. Fails, leaving
 * everything as it was, with -ESHUTDOWN if target refuses spawns, or
 * -ECANCELED if the frame was asked to cancel.
 */
int co__engine_move(co_frame *root, co_engine *from, co_engine *target)
{
	/* Counted inside a visit, as a spawn is: target never sees the count
	 * without the visitor or the frame (visitor_inside). */
	int visit = co__engine_visit_begin(target), err = 0;

	if (!co__engine_live_get(target))
		err = -ESHUTDOWN;
	else if ((err = runner_move(root, target)) < 0)
		atomic_fetch_sub_explicit(&target->live, 1, memory_order_release);
	if (err == 0) {
		co_frame *r;

		atomic_fetch_sub_explicit(&from->live, 1, memory_order_release);
		co__view_del(from, root); /* target lists it when it takes it */
		CO__TRACE_TRANSFER(root, from, target);
		r = co__wake_root(root); /* co_wake, inside this visit */
		if (r)
			co__engine_enqueue(target, visit, r);
	}
	co__engine_visit_end(target, visit);
	return err;
}

/*
 * A cancel stop on an engine that has never run (a context whose thread
 * never started): finish its queued frames for them, on the calling
 * thread (on_done sees -ECANCELED). -EBUSY if the engine ran or runs.
 */
int co__engine_cancel_unrun(co_engine *e)
{
	co_frame *f, *next;

	if (co__engine_take(e) < 0)
		return -EBUSY;
	if (e->has_owner) {
		co__engine_transition(e, CO__T_RUN_END);
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
	co__engine_transition(e, CO__T_RUN_END);
	return 0;
}

int co__engine_cancel_unstarted(co_engine *e, co_frame *f)
{
	int visit = co__engine_visit_begin(e), err = -EBUSY;

	/* A visit: e outlives the call. Borrowed as a run would take it: a
	 * run or a tick that comes meanwhile waits (co__engine_take); while
	 * e does not run, its queues are the borrower's. */
	atomic_fetch_add_explicit(&e->borrowers, 1, memory_order_acq_rel);
	if (co__engine_alive(e) && !e->stealing && co__engine_transition(e, CO__T_RUN) >= 0) {
		if (co__engine_unqueue_unstarted(e, f)) {
			co__engine_abandon(e, f); /* its finish waits for the request... */
			co__engine_settle_finishes(e); /* ...which is in (or on its way) */
			err = 0;
		}
		co__engine_transition(e, CO__T_RUN_END);
	}
	atomic_fetch_sub_explicit(&e->borrowers, 1, memory_order_release);
	co__engine_visit_end(e, visit);
	return err;
}

int co__engine_take(co_engine *e)
{
	while (co__engine_transition(e, CO__T_RUN) < 0) {
		if (!atomic_load_explicit(&e->borrowers, memory_order_acquire))
			return -1;
		sched_yield();
	}
	return 0;
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
			if (!(co__cx_load(f) & CO__CX_FINISHED)) { /* for the owner's next turn */
				co__lifo_push(&e->cancels, f, offsetof(co_frame, cancel_next));
				continue;
			}
			__atomic_fetch_and(&f->cancel, (unsigned char)~CO__CX_QUEUED, __ATOMIC_SEQ_CST);
			e->deferred--;
			co__engine_finish_now(e, f);
		}
		if (e->deferred)
			sched_yield(); /* a requester is about to push */
	}
}
