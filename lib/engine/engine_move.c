/* SPDX-License-Identifier: MIT */
/*
 * Frames that change engines: a thief takes ready frames from another
 * engine's ring (stealing), and a transfer moves a waiting frame to
 * another engine. lib/scheduler/scheduler.c and lib/context/context.c call these.
 */

#include <errno.h>

#include "engine_move.h"
#include "engine_frames.h"
#include "engine_queue.h"
#include "engine_visit.h"

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
	 * that nothing will wake (co__engine_visitor_inside). */
	int visit = co__engine_visit_begin(victim);
	unsigned n = 0;
	co_frame *f;

	while (n < max && (f = co__engine_ring_pop(victim)) != NULL) {
		if (co__engine_runner_move(f, thief) < 0) {
			victim->runner.wake(&victim->runner, f); /* back to the victim */
			continue;
		}
		atomic_fetch_add_explicit(&thief->live, 1, memory_order_relaxed);
		co__engine_rehome(victim, thief, f);
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
 *
 * What touches target (the visit, the count, the push, the kick: one cache
 * line that target's thread may be polling) comes together: the frame is
 * marked and leaves from's list before, from's count drops after. Each
 * look of target's poller between two of those writes takes the line back
 * and costs the next one a transfer.
 */
int co__engine_move(co_frame *root, co_engine *from, co_engine *target)
{
	int visit, err = co__engine_runner_mark(root);
	co_frame *r;

	if (err < 0)
		return err;
	co__view_del(from, root); /* target lists it when it takes it */
	/* Counted inside a visit, as a spawn is: target never sees the count
	 * without the visitor or the frame (co__engine_visitor_inside). */
	visit = co__engine_visit_begin(target);
	if (!co__engine_live_get(target)) {
		co__engine_visit_end(target, visit);
		co__engine_runner_unmark(root, NULL);
		co__view_add(from, root); /* a free slot: the one it left at least */
		return -ESHUTDOWN;
	}
	co__engine_runner_unmark(root, target);
	CO__TRACE_TRANSFER(root, from, target);
	r = co__wake_root(root); /* co_wake, inside this visit */
	if (r)
		co__engine_enqueue(target, visit, r);
	co__engine_visit_end(target, visit);
	co__live_drop(from); /* ours: nothing of the frame is read */
	return 0;
}
