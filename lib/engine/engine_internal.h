/* SPDX-License-Identifier: MIT */
/*
 * The engine as the layers above it see it (not installed; the engine's
 * files are in lib/engine/, engine_impl.h lists them): the hooks a
 * scheduler installs, the owner thread's fast paths that lib/io/io.c
 * inlines, visits from other threads, parking, stealing and moving frames.
 */
#ifndef CORING_LIB_ENGINE_INTERNAL_H
#define CORING_LIB_ENGINE_INTERNAL_H

#include <stdint.h>

#include <coring/engine.h>
#include "common/base.h"
#include "common/list.h"
#include "trace/trace_hooks.h"

/*
 * What a scheduler hooks into its contexts' engines (one struct, set
 * before the engine first runs; every hook runs on the engine's thread
 * unless said otherwise).
 */
struct co__engine_hooks {
	/* a frame marked CO__ST_TASK finished (after its on_done) */
	void (*task_done)(co_engine *e, void *arg);
	/* idle: take ready frames from elsewhere; returns how many */
	int (*steal)(co_engine *thief, void *arg);
	/* busy: ready frames are waiting */
	void (*backlog)(co_engine *e, void *arg);
	/* the engine became quiet (1: idle with nothing that can progress,
	 * about to sleep) or stopped being so (0; from any thread) */
	void (*quiet)(co_engine *e, void *arg, int quiet);
	/* the engine would poll for work before it sleeps (begin 1): 1 if
	 * it may (the scheduler caps how many poll at once); its poll ended
	 * (begin 0) */
	int (*spin)(co_engine *e, void *arg, int begin);
};

/* A frame a runner may take: co_init'ed with a body, never run, not a
 * child, not spawned, not finished (a spawn, a graph's node, a when's
 * child). NULL: no. */
static inline int co__frame_fresh(const co_frame *f)
{
	return f && f->fn && f->parent == NULL && f->label == 0 &&
	       !(f->state & (CO__ST_SPAWNED | CO__ST_DONE));
}

/* The engine running on the calling thread (co_engine_current without the
 * call): hidden, so the library reads it straight from its TLS block. */
extern _Thread_local co_engine *co__tls_engine
	__attribute__((tls_model("initial-exec"), visibility("hidden")));

/*
 * The owner thread's fast paths, inlined into the layers that take SQEs
 * and wake frames for every operation (lib/io/io.c). e is the engine running
 * on the calling thread (co__tls_engine), never NULL here.
 */

/* Tag sqe with info | tag; an SQE with info counts as in flight until
 * its (last) CQE. */
static inline void co__sqe_tag(co_engine *e, struct io_uring_sqe *sqe, co_io_info *info,
			       unsigned tag)
{
	sqe->user_data = (uint64_t)(uintptr_t)info | (tag & CO_IO_TAG_MASK);
	if (info) {
		e->inflight++;
		e->stats.ops++;
	}
}

/* No room for co__engine_sqe: submit what is queued, then take a slot. */
struct io_uring_sqe *co__engine_sqe_slow(co_engine *e);

/* Room in the SQ for an SQE and a linked timeout after it, so that a
 * deadline never finds its chain cut by an early submit. The acquire load
 * of the head pairs with the kernel's release store after it consumed
 * SQEs. */
static inline int co__engine_sq_room(struct io_uring_sq *sq, unsigned tail)
{
	return tail - io_uring_smp_load_acquire(sq->khead) + 2 <= sq->ring_entries;
}

/* The SQ's slot at tail, taken in place (the caller found room). */
static inline struct io_uring_sqe *co__engine_sq_take(co_engine *e, unsigned tail)
{
	struct io_uring_sq *sq = &e->ring.sq;

	sq->sqe_tail = tail + 1;
	return &sq->sqes[(tail & sq->ring_mask) << e->sqe_shift];
}

/* sqe becomes the last one handed out, tagged with info | tag. */
static inline struct io_uring_sqe *co__engine_sqe_claim(co_engine *e, struct io_uring_sqe *sqe,
							 co_io_info *info, unsigned tag)
{
	e->last_info = info;
	co__sqe_tag(e, sqe, info, tag);
	return sqe;
}

/* co_engine_sqe without the thread check: with room (co__engine_sq_room)
 * the SQ's next slot in place (liburing's get_sqe with that room test
 * folded in), without it an early submit first. */
static inline struct io_uring_sqe *co__engine_sqe(co_engine *e, co_io_info *info, unsigned tag)
{
	unsigned tail = e->ring.sq.sqe_tail;
	struct io_uring_sqe *sqe;

	if (co__likely(co__engine_sq_room(&e->ring.sq, tail)))
		sqe = co__engine_sq_take(e, tail);
	else
		sqe = co__engine_sqe_slow(e);
	return co__engine_sqe_claim(e, sqe, info, tag);
}

/* Where co__engine_sqe_or_spill puts an SQE it found no room for: the
 * calling thread's (two slots: an SQE128 engine's SQE is two). */
extern _Thread_local struct io_uring_sqe co__sqe_spill[2]
	__attribute__((tls_model("initial-exec"), visibility("hidden")));

/* co__engine_sqe for a prep that calls nothing on its common path, so
 * that it keeps no argument in a saved register across a call (a prep's
 * saves and restores were a fifth of its instructions). With room, the
 * SQ's next slot; without, the thread's spill slot and *spilled set: the
 * caller fills it, then calls co__engine_unspill, which makes room and
 * moves it into the SQ. The SQE never goes out half filled. */
static inline struct io_uring_sqe *co__engine_sqe_or_spill(co_engine *e, co_io_info *info,
							    unsigned tag, int *spilled)
{
	unsigned tail = e->ring.sq.sqe_tail;
	struct io_uring_sqe *sqe;

	*spilled = !co__engine_sq_room(&e->ring.sq, tail);
	if (co__likely(!*spilled))
		sqe = co__engine_sq_take(e, tail);
	else
		sqe = co__sqe_spill;
	return co__engine_sqe_claim(e, sqe, info, tag);
}

/* Submit until the SQ has room, then move the spilled SQE into it. */
void co__engine_unspill(co_engine *e);

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

/* Root f, on e's own thread, runs at e's next turn, not this one: a yield,
 * a transfer to the context it is on (lib/engine/engine_turn.c). f is not
 * waiting (or waits in a co_turn). */
void co__engine_later(co_engine *e, co_frame *root);

/* The engine's list of its live root frames (lib/engine/engine_view.c): an
 * array of slots, slot 0 a sink for frames not listed; a frame holds its
 * slot's index in view_slot. Changed by the owner thread (and, under
 * view_lock, by a thief taking a frame); read by a view with the engine
 * to itself (co__engine_view_visit). */
struct co__view_slot {
	co_frame *f;            /* NULL: free (since: the next free slot) */
	uint64_t since;         /* the stamp of the turn it last ran in */
};

/* List root f on e (e's thread, or a thief for a frame it took); unlist
 * it. A frame the list cannot take (no memory) stays unlisted. Without
 * the view (meson -Dview=false) neither does anything. */
#ifdef CO_WITH_VIEW
void co__view_add(co_engine *e, co_frame *f);
void co__view_del(co_engine *e, co_frame *f);
#else
static inline void co__view_add(co_engine *e, co_frame *f)
{
	(void)e;
	(void)f;
}

static inline void co__view_del(co_engine *e, co_frame *f)
{
	(void)e;
	(void)f;
}
#endif
/* Run fn(e, arg) with e's frames to itself, in two steps so that a view
 * asks every engine before it waits for any. begin: on e's own thread,
 * or one that holds e borrowed, fn runs at once (*r NULL); elsewhere the
 * request is published (*r), for
 * e's next turn or for end, which answers it itself while e runs nowhere.
 * end waits until deadline (CLOCK_MONOTONIC): 0, fn ran; -ETIMEDOUT, no
 * answer in time, and fn will not run; -EINPROGRESS, no answer in time,
 * and e has the request: fn runs later, then drop(arg) frees arg (the
 * caller must not); -EINVAL, e destroyed meanwhile (fn will not run).
 * begin: 0, -EINVAL (not set up, destroyed), -ENOMEM. A destroy of e that
 * decides meanwhile is waited out in either: if e lives on, the view goes
 * on. A destroy of e waits until end returns. */
struct co__view_req;
int co__engine_view_begin(co_engine *e, void (*fn)(co_engine *e, void *arg), void (*drop)(void *arg),
			  void *arg, struct co__view_req **r);
int co__engine_view_end(struct co__view_req *r, uint64_t deadline);

/* A cancel stop has begun on e (its owner thread reads it). */
static inline int co__engine_cancelling(const co_engine *e)
{
	return e->cancel_since != 0;
}

/* Would root f, waiting on engine `from`, follow a wake from this thread
 * (co_sched_roam)? A hint for a primitive that would otherwise finish the
 * wake on `from` first (the mutex's retry); the wake decides for itself. */
static inline int co__engine_may_follow(const co_engine *from, const co_frame *f)
{
	const co_engine *me = co__tls_engine;

	return (f->state & CO__ST_ROAM) && me != NULL && me != from && from->roam != NULL &&
	       me->roam == from->roam;
}

/* Install hooks (before the engine first runs). */
void co__engine_set_hooks(co_engine *e, const struct co__engine_hooks *h, void *arg);
/* Put a stealing engine in a roam group (before it first runs): frames
 * that may roam follow their waker between the engines of one group. */
static inline void co__engine_set_roam(co_engine *e, const void *group)
{
	e->roam = group;
}
/* Bracket a change made to e from any thread (see remote_begin in
 * engine.c): begin returns what end needs. */
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
int co__engine_sleeping(co_engine *e);
/* On the calling thread's engine e (or NULL): 0 if co__engine_poll would
 * return 0 at once (no engine, no poll budget, I/O in flight, frames
 * queued): the inline half of its checks. */
static inline int co__engine_may_poll(const co_engine *e)
{
	return e != NULL && e->spin_cur != 0 && e->inflight == 0 && e->local_n == 0;
}
/*
 * On the calling thread's engine e (NULL: no engine), a frame that would
 * park until another thread changes something polls ready(arg) instead,
 * while e has nothing else to do (no I/O in flight, nothing ready), for at
 * most e's poll budget (lib/engine/engine_wait.c) and never past deadline
 * (CLOCK_MONOTONIC ns; 0: none): first after slip pauses, then at every
 * pause. Returns 0 if ready() did not become true (or e does not poll:
 * opts.no_spin, one CPU, a scheduler's spinners all busy, other work, a
 * deadline passed), else 1 + the pauses it waited.
 */
unsigned co__engine_poll(co_engine *e, int (*ready)(void *arg), void *arg, unsigned slip,
			 uint64_t deadline);
/* Frames in e's ready ring (what thieves can take); from another thread, a
 * look that may be stale by the time it returns. */
unsigned co__engine_ring_size(co_engine *e);
/* Live frames of e (spawned, not finished). */
unsigned co__engine_live(co_engine *e);
/* The engine's quiet flag and epoch, for a scheduler's consistent look at
 * all of its engines (see scheduler.c). */
int co__engine_quiet(co_engine *e, unsigned *epoch);
/* e is stopped and its live frames are only those its last run or tick
 * found stuck, nothing changed since (what co_engine_destroy forgets). On
 * the owner thread outside a run or a tick. */
int co__engine_only_stuck(co_engine *e);
/* Posts accepted and not run yet (any thread; a snapshot): work, as a
 * live frame is, for whoever waits for the engine to have nothing left. */
int co__engine_posts_pending(co_engine *e);
/* Close e's door to posts for good (co_engine_post answers -ESHUTDOWN from
 * now on), for the context whose last run is over or that ends, and wait
 * out the calls inside a visit of e (a post that passed the door pushes
 * before it leaves). Any thread. 1 if posts accepted before are pending
 * (the caller runs them, or does not end), else 0. */
int co__engine_posts_close(co_engine *e);
/* co_engine_tick that calls entered(arg) (NULL: nothing) on the calling
 * thread once the engine accepted the tick, before any frame runs; a
 * refused tick never calls it (lib/context/context.c: the thread's current
 * context and its trace name). */
int co__engine_tick_as(co_engine *e, void (*entered)(void *arg), void *arg);
/* A cancel stop's work on an engine that never ran (lib/context/context.c). */
int co__engine_cancel_unrun(co_engine *e);
/* A cancel was asked for f, a frame of e that may not have started, and e
 * may not run (lib/sync/when.c: co_spawn_on's child, whose await must end): if
 * e does not run and f has not started, finish f for it now, on the
 * calling thread (status -ECANCELED, its on_done runs here), rather than
 * at e's next turn, which may never come. 0 if it did; -EBUSY if e runs
 * (its next turn handles the request), steals, or f has started. */
int co__engine_cancel_unstarted(co_engine *e, co_frame *f);
unsigned co__engine_steal(co_engine *thief, co_engine *victim, unsigned max);
/* Move a waiting root to target and wake it there: 0, -ESHUTDOWN (target
 * refuses), -ECANCELED (asked to cancel), -EBUSY (pinned by a time limit). */
int co__engine_move(co_frame *root, co_engine *from, co_engine *target);

/* co_frame.cancel bit (a runner bit, see co.h): the frame does not move to
 * another engine (no steal, no transfer) while set. A time limit that is
 * not a kernel link sets it for its await (lib/timeout/timeout.c): its timer and
 * the frame then live on one engine, whose thread does everything. */
#define CO__CX_PINNED (1u << 7)

/* Register a provided buffer ring of entries (lib/stream/stream.c) under the rule
 * of co_engine_register_buffers, with a buffer group id of its own
 * (*bgid); co_engine_destroy refuses while one is registered. 0 or
 * -errno. */
int co__engine_buf_ring_register(co_engine *e, void *ring, unsigned entries, unsigned short *bgid);
int co__engine_buf_ring_unregister(co_engine *e, unsigned short bgid);

/* The cancel stop's list of parked waits (co_stop_link): link on e's thread
 * while the wait starts, unlink from any thread when it ends. unlink
 * returns 1 if it took p off the list, 0 if the engine had taken it. */
void co__engine_stop_list_add(co_engine *e, co_stop_link *p);
int co__engine_stop_list_remove(co_engine *e, co_stop_link *p);

/* A wait the cancel stop's p->cancel could not end (a pool job that has
 * started), on e's thread from inside p->cancel: the engine keeps it on a
 * second list (unlink takes it off as from the first), and once the
 * stop's grace has run out calls p->give_up on its thread, which ends the
 * wait: the frame is then finished for it (-ECANCELED). */
void co__engine_stop_list_linger(co_engine *e, co_stop_link *p);
/* From p->give_up, on e's thread: the frame's wait is given up while
 * what it waited for goes on elsewhere; e no longer counts it as parked
 * but as held (co_engine_destroy refuses) until co__engine_unhold, from
 * any thread, once that work has ended. */
void co__engine_hold(co_engine *e);
void co__engine_unhold(co_engine *e);
/* e holds what its destroy refuses for though no frame may be live: a
 * co_bufring, or a hold (any thread; a snapshot). */
int co__engine_held(co_engine *e);

/* A stop link not on any list yet, whose cancel stop call is cancel. */
static inline void co__stop_link_init(co_stop_link *p, void (*cancel)(co_stop_link *p))
{
	p->next = p->prev = NULL;
	p->linked = 0;
	p->cancel = cancel;
	p->give_up = NULL;
	atomic_store_explicit(&p->visit, 0, memory_order_relaxed);
}

/* A wait begins on e's thread: counted as parked (e is not idle while it
 * lasts) and listed for a cancel stop. */
static inline void co__engine_park_wait(co_engine *e, co_stop_link *p)
{
	co_engine_park(e);
	co__engine_stop_list_add(e, p);
}

#endif
