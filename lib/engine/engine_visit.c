/* SPDX-License-Identifier: MIT */
/*
 * Calls from other threads (docs/engine.md, "The threading rule"): the
 * visit that brackets each change another thread makes to an engine, the
 * kick that wakes it, and what goes through a visit: spawns, wake-ups,
 * posts, the park counts, the quiet flag a scheduler reads.
 */

#include <errno.h>
#include <sched.h>
#include <unistd.h>

#include "engine_visit.h"
#include "engine_state.h"
#include "engine_frames.h"
#include "engine_queue.h"

int co__engine_visit_begin(co_engine *e)
{
	if (co__tls_engine == e)
		return 0; /* the owner: it sees its own changes */
	atomic_fetch_add_explicit(&e->visitors, 1, memory_order_seq_cst);
	co__engine_quiet_clear(e);
	return 1;
}

/*
 * Pairs with co__engine_wait: the engine stores sleeping = 1 and then reads
 * epoch; we bump epoch and then read sleeping (all seq_cst). One of the
 * two sees the other's store (Dekker), so the engine never sleeps through
 * a change (invariant 1). At most one eventfd write is on its way at a
 * time (wake_pending).
 */
static void engine_kick(co_engine *e)
{
	uint64_t one = 1;

	atomic_fetch_add_explicit(&e->epoch, 1, memory_order_seq_cst);
	if (!atomic_load_explicit(&e->sleeping, memory_order_seq_cst))
		return;
	if (atomic_exchange_explicit(&e->wake_pending, 1, memory_order_acq_rel))
		return;
	atomic_fetch_add_explicit(&e->wake_writes, 1, memory_order_relaxed);
	while (write(e->wake_fd, &one, sizeof one) < 0 && errno == EINTR)
		;
}

void co__engine_visit_end(co_engine *e, int remote)
{
	if (remote) {
		engine_kick(e);
		/* release: the thread's last touch of e happens before
		 * destroy's acquire load sees the count drop */
		atomic_fetch_sub_explicit(&e->visitors, 1, memory_order_release);
	}
}

/* Push node on one of e's lock-free lists (inbox, posts, cancels) and end
 * the visit: from here the engine may take it, and e be destroyed. */
void co__engine_visit_push(co_engine *e, int remote, _Atomic(void *) *list, void *node, size_t link)
{
	if (remote)
		co__fault_point(CO__POINT_VISIT_PUSH); /* tests: a destroy meanwhile */
	co__lifo_push(list, node, link);
	if (!remote) /* the owner's own post: epoch tells its next turn to look */
		atomic_fetch_add_explicit(&e->epoch, 1, memory_order_relaxed);
	co__engine_visit_end(e, remote);
}

/* Begin a call that may come from another thread: the visit, then the
 * check that the engine is set up (inside the visit, so that destroy,
 * which waits for visitors after it marked the engine DYING, never frees
 * it under a call that passed the check). A destroy deciding meanwhile
 * is waited out: the call goes on if the engine lives on. 0, or -EINVAL
 * (no visit left). */
int co__engine_call_begin(co_engine *e, int *remote)
{
	*remote = co__engine_visit_begin(e);
	while (co__unlikely(!co__engine_alive(e))) {
		int s = atomic_load_explicit(&e->state, memory_order_seq_cst);

		if (s == CO_ENGINE_DYING && *remote) {
			if (co__engine_destroy_answer(e, 1))
				continue;
			return -EINVAL;
		}
		if (s != CO_ENGINE_DEAD && s != CO_ENGINE_DYING)
			break; /* the destroy answered meanwhile: busy */
		if (*remote)
			atomic_fetch_sub_explicit(&e->visitors, 1, memory_order_release);
		return -EINVAL;
	}
	return 0;
}

int co__engine_runner_mark(co_frame *f)
{
	unsigned char old = co__cx_load(f);

	do {
		if (old & CO__CX_PINNED)
			return -EBUSY;
		if (old & (CO__CX_QUEUED | CO__CANCEL_ASKED))
			return -ECANCELED;
	} while (!__atomic_compare_exchange_n(&f->cancel, &old, (unsigned char)(old | CO__CX_MOVING), 1,
					      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	return 0;
}

void co__engine_runner_unmark(co_frame *f, co_engine *to)
{
	if (to)
		__atomic_store_n(&f->runner, &to->runner, __ATOMIC_RELEASE);
	__atomic_fetch_and(&f->cancel, (unsigned char)~CO__CX_MOVING, __ATOMIC_RELEASE);
}

int co__engine_runner_move(co_frame *f, co_engine *to)
{
	int err = co__engine_runner_mark(f);

	if (err == 0)
		co__engine_runner_unmark(f, to);
	return err;
}

void co__engine_rehome(co_engine *from, co_engine *to, co_frame *f)
{
	co__live_drop(from);
	co__view_del(from, f); /* under from's view_lock */
	co__view_add(to, f);
}

/*
 * Follow the waker (docs/scheduler.md, "Frames that follow their waker"):
 * root r of engine e, just woken (co__wake_root) inside a visit of e from
 * the thread of another engine me of the same roam group, moves to me if
 * it may roam, unless e's thread is still inside its resume, me refuses
 * spawns, or r is pinned by a time limit or asked to cancel. 1: it moved, counted and listed on me (the caller
 * queues it there); 0: it stays with e.
 */
static int follow(co_engine *e, co_frame *r, co_engine *me)
{
	if (co__likely(!co__engine_may_follow(e, r)))
		return 0;
	/* Woken inside its own suspend: e's thread is still in its resume
	 * (the awaiter, the trace may read it); e runs it, as without roam.
	 * acquire: pairs with the release store after that resume, so a
	 * frame taken saw its resume end. */
	if (atomic_load_explicit(&e->resuming, memory_order_acquire) == r || !co__engine_live_get(me))
		return 0;
	if (co__engine_runner_move(r, me) < 0) {
		co__live_drop(me);
		return 0;
	}
	co__engine_rehome(e, me, r);
	CO__TRACE_FOLLOW(me, e, r);
	return 1;
}

/* r followed its waker to me, the engine of this thread: it runs next
 * there (a frame that had that place goes to the queue, where idle
 * contexts may steal it). */
static void run_next(co_engine *me, co_frame *r)
{
	if (me->runnext) {
		co_frame *old = me->runnext;

		me->runnext = NULL;
		me->local_n--;
		co__engine_push_owner(me, old);
	}
	me->runnext = r;
	me->local_n++;
}

/* co_runner.wake: a frame of this engine is runnable again. */
void co__engine_wake_op(co_runner *r, co_frame *f)
{
	co_engine *e = co__container_of(r, co_engine, runner);
	int remote = co__engine_visit_begin(e);

	CO__TRACE_WAKE(e, f);
	if (!remote) {
		co__engine_push_owner(e, f); /* the hot path: no fence, no syscall */
		return;
	}
	if (follow(e, f, co__tls_engine)) {
		run_next(co__tls_engine, f);
		co__engine_visit_end(e, remote); /* e may be idle now */
		return;
	}
	co__engine_visit_push(e, remote, &e->inbox, f, offsetof(co_frame, next));
}

void co__engine_wake_parked(co_engine *e, co_frame *f)
{
	co_frame *r = co__wake_root(f);
	int remote;

	if (r == NULL) { /* release builds: a frame woken twice is not queued */
		co_engine_unpark(e);
		return;
	}
	remote = co__engine_visit_begin(e);
	CO__TRACE_WAKE(e, r);
	if (!remote) {
		co__engine_push_owner(e, r);
		co__parked_drop(e, 1);
		return;
	}
	if (follow(e, r, co__tls_engine))
		run_next(co__tls_engine, r);
	else
		co__lifo_push(&e->inbox, r, offsetof(co_frame, next));
	/* release: after the push, so the engine that sees the count drop
	 * sees the frame (as in co_engine_unpark after co_wake) */
	co__parked_drop(e, 1);
	co__engine_visit_end(e, remote);
}

void co__engine_wake_parked_chain(co_engine *e, co_frame *first, unsigned parked)
{
	int remote = co__engine_visit_begin(e);

	if (first && !remote) {
		/* the owner: its own queue, oldest first (the chain is newest first) */
		co_frame *fifo = NULL, *next;

		for (co_frame *r = first; r; r = next) {
			next = r->next;
			r->next = fifo;
			fifo = r;
		}
		for (co_frame *r = fifo; r; r = next) {
			next = r->next;
			CO__TRACE_WAKE(e, r);
			co__engine_push_owner(e, r);
		}
	} else if (first) {
		co_frame *stay = NULL, *stay_last = NULL, *moved = NULL, *next;

		/* Those that follow the waker join its queue, oldest first (not
		 * its runnext: idle contexts may steal them from there, so a
		 * fan-out spreads); the rest go to e's inbox, in the chain's
		 * order. */
		for (co_frame *r = first; r; r = next) {
			next = r->next;
			CO__TRACE_WAKE(e, r);
			if (follow(e, r, co__tls_engine)) {
				r->next = moved; /* newest first, reversed */
				moved = r;
				continue;
			}
			r->next = NULL;
			if (stay_last)
				stay_last->next = r;
			else
				stay = r;
			stay_last = r;
		}
		if (stay)
			co__lifo_push_chain(&e->inbox, stay, stay_last, offsetof(co_frame, next));
		/* e, whose parked count drops below, is kicked at the visit's
		 * end: idle, it steals from this queue as from any */
		for (co_frame *r = moved; r; r = next) {
			next = r->next;
			co__engine_push_owner(co__tls_engine, r);
		}
	}
	/* release: after the pushes (see co__engine_wake_parked) */
	co__parked_drop(e, parked);
	co__engine_visit_end(e, remote);
}

/* Count one more frame on e unless spawns are refused. */
int co__engine_live_get(co_engine *e)
{
	unsigned v = atomic_load_explicit(&e->live, memory_order_relaxed);

	do {
		if (v & CO__LIVE_STOPPED)
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(&e->live, &v, v + 1, memory_order_acq_rel,
							memory_order_relaxed));
	return 1;
}

int co_engine_spawn(co_engine *e, co_frame *f)
{
	int remote;

	if (e == NULL || !co__frame_fresh(f))
		return -EINVAL;
	/* The visit starts before the count, so that the engine never sees
	 * the count without either the frame or the visitor (co__engine_visitor_inside). */
	if (co__engine_call_begin(e, &remote) < 0)
		return -EINVAL;
	if (!co__engine_live_get(e)) {
		co__engine_visit_end(e, remote);
		return -ESHUTDOWN;
	}
	f->state |= CO__ST_SPAWNED;
	__atomic_store_n(&f->runner, &e->runner, __ATOMIC_RELAXED);
	CO__TRACE_SPAWN(e, f);
	if (!remote) {
		co__view_add(e, f);
		co__engine_push_owner(e, f);
		return 0;
	}
	co__engine_visit_push(e, remote, &e->inbox, f, offsetof(co_frame, next));
	return 0;
}

int co_engine_park(co_engine *e)
{
	int remote;

	if (e == NULL || co__engine_call_begin(e, &remote) < 0)
		return -EINVAL;
	atomic_fetch_add_explicit(&e->parked, 1, memory_order_relaxed);
	co__engine_visit_end(e, remote);
	return 0;
}

int co_engine_unpark(co_engine *e)
{
	int remote;

	if (e == NULL || co__engine_call_begin(e, &remote) < 0)
		return -EINVAL;
	co__parked_drop(e, 1);
	/* The engine may now be idle: let it see that, whichever of unpark and
	 * the wake comes first. */
	co__engine_visit_end(e, remote);
	return 0;
}

int co_engine_post(co_engine *e, co_post *p)
{
	int remote;

	if (e == NULL || p == NULL || p->fn == NULL)
		return -EINVAL;
	if (co__engine_call_begin(e, &remote) < 0) /* once pushed, it may run, and e be destroyed */
		return -EINVAL;
	/* seq_cst: pairs with co__engine_posts_close (we counted ourselves
	 * in visitors, then look at the door; it closes the door, then waits
	 * for the visitors): a post is refused, or the closer sees it. */
	if (atomic_load_explicit(&e->posts_closed, memory_order_seq_cst)) {
		co__engine_visit_end(e, remote);
		return -ESHUTDOWN;
	}
	co__engine_visit_push(e, remote, &e->posts, p, offsetof(co_post, next));
	return 0;
}

int co__engine_posts_close(co_engine *e)
{
	co__fault_point(CO__POINT_POSTS_CLOSING); /* tests: a post comes now */
	atomic_store_explicit(&e->posts_closed, 1, memory_order_seq_cst);
	/* a poster inside its visit may still push: let it leave */
	while (atomic_load_explicit(&e->visitors, memory_order_seq_cst) != 0)
		sched_yield();
	return co__engine_posts_pending(e);
}

int co__engine_posts_pending(co_engine *e)
{
	return !co__lifo_empty(&e->posts);
}

/* Run every post queued so far, oldest first. */
void co__engine_run_posts(co_engine *e)
{
	co_post *p = co__lifo_take(&e->posts, offsetof(co_post, next)), *next;

	for (; p; p = next) {
		next = p->next; /* before fn, which may free it */
		p->fn(p);
	}
}

void co__engine_kick(co_engine *e)
{
	co__engine_visit_end(e, co__engine_visit_begin(e));
}

void co__engine_enqueue(co_engine *e, int visit, co_frame *f)
{
	CO__TRACE_WAKE(e, f);
	if (!visit)
		co__engine_push_owner(e, f);
	else
		co__lifo_push(&e->inbox, f, offsetof(co_frame, next));
}

unsigned co__engine_live(co_engine *e)
{
	return CO__LIVE_COUNT(atomic_load_explicit(&e->live, memory_order_acquire));
}

int co__engine_quiet(co_engine *e, unsigned *epoch)
{
	*epoch = atomic_load_explicit(&e->epoch, memory_order_seq_cst);
	return atomic_load_explicit(&e->quiet, memory_order_seq_cst) == CO__QUIET_YES;
}
