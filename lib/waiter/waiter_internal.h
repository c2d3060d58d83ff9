/* SPDX-License-Identifier: MIT */
/*
 * The waiter core shared by the primitives (lib/sync/sync.c, lib/sync/channel.c):
 * FIFO wait queues, parking, claiming and waking, timed waits. Not
 * installed. See docs/sync.md for the protocol.
 */
#ifndef CORING_LIB_WAITER_INTERNAL_H
#define CORING_LIB_WAITER_INTERNAL_H

#include <stddef.h>

#include <coring/waiter.h>
#include "common/awaiter.h"
#include "engine/engine_internal.h"
#include "common/spin.h"

/* Every primitive's fields are read and written under its spinlock only. */
#define co__lock(p) co__spin_lock(&(p)->lock)
#define co__unlock(p) co__spin_unlock(&(p)->lock)

/* co_waiter.state. Written under the lock of the queue the waiter is on;
 * read without it by the waiter's engine before it takes that lock
 * (lib/waiter/waiter.c: the visit). */
enum {
	CO__W_IDLE = 0,     /* not waiting */
	CO__W_WAITING = 1,  /* linked on its primitive's queue */
	CO__W_CLAIMED = 2,  /* removed with a result; its wake is on its way */
	CO__W_MUTEX = 3,    /* condition variable: waiting to re-lock the mutex */
};

/*
 * The awaiter ops of one operation, plus what happens once a waiter has
 * been claimed: deliver() (NULL: wake the frame). A condition variable
 * re-locks its mutex there before the frame wakes.
 */
typedef struct co__wait_ops {
	co_awaiter_ops ops;           /* first: co_waiter.aw.ops points here */
	void (*deliver)(co_waiter *w);
} co__wait_ops;

/* Waiters claimed under a lock, woken after it is released. */
typedef struct co__wake_list {
	co_waiter *head, *tail;
} co__wake_list;

#define CO__WAKE_LIST_INIT { NULL, NULL }

/* The kind of a waiter's ops: a wait (timeout.c and view.c tell it by
 * that), whose value CO_AWAIT reads from res itself (co.h's short path),
 * as co__wait_resume, which wrappers call, returns it. */
#define CO__AW_WAITER (CO__AW_WAIT | CO__AW_VALUE)
_Static_assert(offsetof(co_waiter, res) == offsetof(co__parking, value), "co_waiter: res");

/* The shared ops every waiter uses for resume and cancel. */
int co__wait_resume(co_awaiter *a, co_frame *f);
int co__wait_cancel(co_awaiter *a, co_frame *f);


/* Set up w for one wait on obj (whose lock is lk); returns its awaiter,
 * or the shared -EINVAL awaiter when w or obj is NULL. */
co_awaiter *co__wait_prep(co_waiter *w, const co__wait_ops *ops, atomic_uint *lk, void *obj);

/*
 * Called from a suspend op with *w->lk held, once the operation found it
 * must wait: park f on q, or finish with -ENXIO, -ECANCELED or -ETIME in
 * w->res. Releases the lock in every case. Returns what suspend returns:
 * 1 parked, 2 cancelled on an engine (not parked: the frame went through
 * its ready queue with -ECANCELED, so that a coroutine retrying in a loop
 * gives its engine control at every try), 0 finished at once.
 */
int co__wait_park(co_waiter *w, co_frame *f, co_waitq *q);

/* Under the lock of w's queue: take w off it with result res, onto l;
 * co__wake_all, once the lock is released, wakes it (or, for a timed
 * waiter, posts the removal of its timer to its engine, which wakes it).
 * Nothing touches the primitive after co__wake_all returns. */
void co__wait_claim(co_waiter *w, int res, co__wake_list *l);
void co__wake_all(co__wake_list *l);
/* What co__wake_all does first, for a caller that must be seen inside its
 * primitive until then (a channel's close, by destroy): once the lock is
 * released, wait until no engine's look at a waiter of l can still take
 * the primitive's lock. */
void co__wake_wait_looks(co__wake_list *l);

/* Wake w's frame and drop its park count (w is not touched after). */
void co__wait_wake_frame(co_waiter *w);

/* Queue operations, under the owning lock. */
void co__waitq_push(co_waitq *q, co_waiter *w);

/*
 * Put w, claimed but not woken (its frame is still counted as parked),
 * back at the head of its queue: a mutex waiter that was invited to take
 * the lock found it taken again. On w's engine's thread (with no engine,
 * the thread that runs its frame), with *w->lk held. Returns 1 (waiting
 * again: once the lock is released, co__wait_rearm arms a timed wait's
 * timer again), or 0 with w->res = -ECANCELED when its frame was cancelled
 * or its engine is in a cancel stop: the caller wakes it. Whether w is
 * timed is to be read before the lock is released: from then on an untimed
 * w may be claimed again and reused by its frame on another thread.
 */
int co__wait_repark(co_waiter *w);
/* Arm a reparked timed w's timer again (after the lock's release). */
void co__wait_rearm(co_waiter *w);

/* Limit the co_waiter awaiter aw to an absolute CLOCK_MONOTONIC deadline
 * (what a time limit, lib/timeout/timeout.c, asks of a wait); an earlier limit
 * already set holds. */
void co__wait_limit(co_awaiter *aw, uint64_t deadline);

#endif
