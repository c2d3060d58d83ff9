/* SPDX-License-Identifier: MIT */
/*
 * engine_visit.c (not installed): calls from other threads (visits,
 * kicks, spawns, wake-ups, posts, park counts).
 */
#ifndef CORING_LIB_ENGINE_VISIT_H
#define CORING_LIB_ENGINE_VISIT_H

#include "engine_state.h"

/* Bracket a change made to e from any thread (docs/design.md, "Who may
 * touch what"): begin returns what end needs. */
int co__engine_visit_begin(co_engine *e);
void co__engine_visit_end(co_engine *e, int visit);
/* co_wake(f), then co_engine_unpark(e), in one visit: f waits parked on
 * e (co_engine_park), so e runs it (any thread). */
void co__engine_wake_parked(co_engine *e, co_frame *f);
/* The same for frames parked on e, in one visit (one kick of e for all):
 * the roots from first on, already taken with co__wake_root and linked
 * through ->next newest first (NULL: none), and parked counts to drop. */
void co__engine_wake_parked_chain(co_engine *e, co_frame *first, unsigned parked);
/* Wake e if it sleeps (any thread). */
void co__engine_kick(co_engine *e);

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

/* Count one more frame on e unless spawns are refused: 1, or 0. */
int co__engine_live_get(co_engine *e);

/* Would root f, waiting on engine `from`, follow a wake from this thread
 * (co_sched_roam)? A hint for a primitive that would otherwise finish the
 * wake on `from` first (the mutex's retry); the wake decides for itself. */
static inline int co__engine_may_follow(const co_engine *from, const co_frame *f)
{
	const co_engine *me = co__tls_engine;

	return (f->state & CO__ST_ROAM) && me != NULL && me != from && from->roam != NULL &&
	       me->roam == from->roam;
}

/* Live frames of e (spawned, not finished). */
unsigned co__engine_live(co_engine *e);
/* The engine's quiet flag and epoch, for a scheduler's consistent look at
 * all of its engines (see scheduler.c). */
int co__engine_quiet(co_engine *e, unsigned *epoch);

/* Posts accepted and not run yet (any thread; a snapshot): work, as a
 * live frame is, for whoever waits for the engine to have nothing left. */
int co__engine_posts_pending(co_engine *e);
/* Close e's door to posts for good (co_engine_post answers -ESHUTDOWN from
 * now on), for the context whose last run is over or that ends, and wait
 * out the calls inside a visit of e (a post that passed the door pushes
 * before it leaves). Any thread. 1 if posts accepted before are pending
 * (the caller runs them, or does not end), else 0. */
int co__engine_posts_close(co_engine *e);

#endif
