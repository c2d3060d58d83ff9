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

	if (co__engine_transition(e, CO__T_RUN) < 0)
		return -EBUSY;
	if (e->has_owner) {
		co__engine_transition(e, CO__T_RUN_END);
		return -EBUSY;
	}
	/* Spawns are refused (a stop was asked); let those counted before it
	 * finish their push. */
	while (atomic_load_explicit(&e->visitors, memory_order_acquire) != 0)
		sched_yield();
	for (f = co__lifo_take(&e->inbox, offsetof(co_frame, next)); f; f = next) {
		next = f->next;
		co__engine_abandon(e, f);
	}
	co__engine_run_cancels(e); /* requests for them: each finishes its frame */
	co__engine_transition(e, CO__T_RUN_END);
	return 0;
}
