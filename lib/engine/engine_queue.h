/* SPDX-License-Identifier: MIT */
/*
 * engine_queue.c (not installed): the ready queue, with the owner
 * thread's inline halves (queueing a frame woken on it, taking the next
 * frame to resume), which the loop and lib/io/io.c run for every frame.
 */
#ifndef CORING_LIB_ENGINE_QUEUE_H
#define CORING_LIB_ENGINE_QUEUE_H

#include <ck_ring.h>

#include "engine_impl.h"

/* The ready ring (ck_ring, kept out of the public header) and its slots. */
struct co__ready_ring {
	ck_ring_t ring;
	ck_ring_buffer_t buf[];
};

/* Queue root f, made ready on e's own thread. Without stealing the queue
 * is the owner's plain FIFO; with it, the ring thieves can see. */
void co__engine_push_ring(co_engine *e, co_frame *f);

/* Onto the owner's plain FIFO (all of the queue without stealing, the
 * overflow of a full ring with it). */
static inline void co__engine_local_push(co_engine *e, co_frame *f)
{
	co__fifo_push(&e->local_head, &e->local_tail, f, next);
	e->local_n++;
}

static inline void co__engine_push_owner(co_engine *e, co_frame *f)
{
	if (co__likely(!e->stealing)) {
		co__engine_local_push(e, f);
		return;
	}
	co__engine_push_ring(e, f);
}

/* co_engine.direct while the loop's completion walk would keep aside,
 * and resume at its end, the frame a completion wakes (NULL: closed,
 * every wake queues; a frame: kept aside already). */
#define CO__DIRECT_OPEN ((co_frame *)(uintptr_t)1)

/* co_wake for a frame woken on e's own thread (a completion being
 * dispatched): a root that e runs goes straight to its queue, without the
 * runner's indirect call and its thread check; any other (a frame driven
 * by hand) takes co_wake's path. When the loop's completion walk is open
 * for it (an engine thieves do not take from; no frame kept aside yet)
 * and nothing is queued, the root goes to e->direct instead: the walk
 * resumes it at its end (docs/engine.md, "The loop"); once one is kept
 * aside, the others go to the owner's FIFO without the test for thieves. */
static inline void co__engine_wake_here(co_engine *e, co_frame *f)
{
	co_frame *r = co__wake_root(f);
	co_runner *run;

	if (r == NULL)
		return;
	run = CO__LOAD_RELAXED(&r->runner);
	if (co__likely(run == &e->runner)) {
		uintptr_t d = (uintptr_t)e->direct;

		CO__TRACE_WAKE(e, r); /* before the push: a thief may take it */
		if (d > (uintptr_t)CO__DIRECT_OPEN) {
			/* a frame kept aside: thieves do not take from e */
			co__engine_local_push(e, r);
			return;
		}
		if (d == (uintptr_t)CO__DIRECT_OPEN && e->local_n == 0) {
			e->direct = r;
			return;
		}
		co__engine_push_owner(e, r);
	} else if (run) {
		run->wake(run, r);
	}
}

/* The ring, with the owner as its only producer and the owner and thieves
 * as consumers (TSan cannot see its atomics: see lib/common/tsan.h). */
int co__engine_ring_push(co_engine *e, co_frame *f);
co_frame *co__engine_ring_pop(co_engine *e);

/* Frames in e's ready ring (what thieves can take); from another thread, a
 * look that may be stale by the time it returns. */
unsigned co__engine_ring_size(co_engine *e);

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

#endif
