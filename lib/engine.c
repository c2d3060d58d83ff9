/* SPDX-License-Identifier: MIT */
/*
 * The per-thread engine: the ready queue, the io_uring, wake-ups, the
 * loop, and the engine's lifecycle (docs/design.md: states, stop modes,
 * what each call gets in each state). docs/engine.md explains the loop
 * and the threading rule.
 */
#include <errno.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "engine_impl.h"
#include "spin.h"
#include "tsan.h"

/* The engine running on this thread; lib/io.c reads it directly (engine_internal.h)
 * rather than through co_engine_current's PLT call. */
_Thread_local co_engine *co__tls_engine __attribute__((tls_model("initial-exec")));

co_engine *co_engine_current(void)
{
	return co__tls_engine;
}

/* ------------------------------------------------------------------------ */
/* The lifecycle                                                            */
/* ------------------------------------------------------------------------ */

/* Every state change of the engine, in one table: the new state, or -1 if
 * the call is not legal in that state (the caller says why). */
static int next_state(int s, enum co__transition t)
{
	switch (t) {
	case CO__T_RUN:
		return s == CO_ENGINE_READY ? CO_ENGINE_RUNNING
		     : s == CO_ENGINE_STOPPED ? CO_ENGINE_STOPPING : -1;
	case CO__T_RUN_END:
		return s == CO_ENGINE_RUNNING ? CO_ENGINE_READY
		     : s == CO_ENGINE_STOPPING ? CO_ENGINE_STOPPED : -1;
	case CO__T_STOP:
		return s == CO_ENGINE_READY || s == CO_ENGINE_STOPPED ? CO_ENGINE_STOPPED
		     : s == CO_ENGINE_RUNNING || s == CO_ENGINE_STOPPING ? CO_ENGINE_STOPPING : -1;
	case CO__T_DESTROY:
		return s == CO_ENGINE_READY || s == CO_ENGINE_STOPPED ? CO_ENGINE_DYING : -1;
	}
	return -1;
}

int co__engine_transition(co_engine *e, enum co__transition t)
{
	int s = atomic_load_explicit(&e->state, memory_order_acquire), n;

	do {
		n = next_state(s, t);
		if (n < 0)
			return -1;
	} while (!atomic_compare_exchange_weak_explicit(&e->state, &s, n, memory_order_acq_rel,
							memory_order_acquire));
	return s;
}

int co_engine_state(co_engine *e)
{
	return e ? atomic_load_explicit(&e->state, memory_order_acquire) : -EINVAL;
}

/* ------------------------------------------------------------------------ */
/* Ready queue                                                              */
/* ------------------------------------------------------------------------ */

CO_NO_TSAN static int ring_push(co_engine *e, co_frame *f)
{
	int ok;

	co__hb_release(f); /* pairs with ring_pop's acquire of the same frame */
	co__tsan_ignore_begin();
	ok = ck_ring_enqueue_spmc(&e->ready->ring, e->ready->buf, f); /* the owner only */
	co__tsan_ignore_end();
	return ok;
}

CO_NO_TSAN static co_frame *ring_pop(co_engine *e)
{
	void *p;
	int ok;

	co__tsan_ignore_begin();
	ok = ck_ring_dequeue_spmc(&e->ready->ring, e->ready->buf, &p); /* owner and thieves */
	co__tsan_ignore_end();
	if (!ok)
		return NULL;
	co__hb_acquire(p);
	return p;
}

CO_NO_TSAN static unsigned ring_size(co_engine *e)
{
	unsigned n;

	co__tsan_ignore_begin();
	n = ck_ring_size(&e->ready->ring);
	co__tsan_ignore_end();
	return n;
}

/*
 * The ready queue has three parts, so that no producer ever waits for
 * another (ck_ring's multi-producer enqueue makes a producer wait for every
 * earlier one to publish its slot; with more producers than CPUs one
 * preempted producer stalls the rest):
 *
 *   inbox  frames pushed by other threads: a lock-free stack through
 *          co_frame.next, one CAS per push; the owner takes it whole at
 *          the start of each turn and queues it oldest first;
 *   ring   the ck_ring, with the owner as its only producer (SPMC) and
 *          the owner and thieves as consumers; used when this engine may
 *          be stolen from, so that thieves see its ready frames;
 *   local  a plain FIFO through co_frame.next, owner only, no atomics: all
 *          of the queue when nobody steals, and the overflow of a full
 *          ring otherwise (never a drop: invariant 3 of docs/design.md).
 *          While it holds overflow, pushes go behind it.
 */
static co_frame *local_pop(co_engine *e)
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

static int stealable(co_engine *e)
{
	return e->stealing;
}

/* A frame made ready on the owner thread while thieves may look: into the
 * ring, or behind the overflow. (Without stealing, co__engine_push_owner
 * in engine_internal.h queues it locally and never comes here.) */
void co__engine_push_ring(co_engine *e, co_frame *f)
{
	if (co__likely(e->local_n == 0) && co__likely(ring_push(e, f)))
		return;
	co__engine_local_push(e, f); /* the ring is full, or overflow is ahead of us */
	e->stats.spilled++;
}

static void owner_push(co_engine *e, co_frame *f)
{
	co__engine_push_owner(e, f);
}

/* Move overflow into the ring as it has room, oldest first (the ring's
 * frames are older still), so that thieves can reach it. */
static void ring_refill(co_engine *e)
{
	while (e->local_head && ring_push(e, e->local_head))
		local_pop(e);
}

/* Queue what other threads pushed, oldest first. */
static void inbox_drain(co_engine *e)
{
	co_frame *f = co__lifo_take(&e->inbox, offsetof(co_frame, next)), *next;

	for (; f; f = next) {
		next = f->next; /* owner_push reuses the link */
		if (f->view_slot == 0) /* a spawn or a transfer: now ours */
			co__view_add(e, f);
		owner_push(e, f);
	}
}

/* The next frame to resume, on the owner thread. */
static co_frame *ready_pop(co_engine *e)
{
	co_frame *f;

	if (!stealable(e))
		return local_pop(e);
	f = ring_pop(e); /* older than any overflow */
	return f ? f : local_pop(e);
}

/* Work the loop can do without waiting: frames to resume, posts to run,
 * cancel requests to handle. Other threads' pushes are seen through the
 * inbox, the post and the cancel lists. */
static co__inline int ready_nonempty(co_engine *e)
{
	return e->local_n != 0 || ((uintptr_t)e->later_head | (uintptr_t)e->turns_head) != 0 ||
	       (stealable(e) && ring_size(e) != 0) ||
	       !co__lifo_empty(&e->inbox) || !co__lifo_empty(&e->posts) ||
	       !co__lifo_empty(&e->cancels);
}

int co__engine_busy(co_engine *e)
{
	return ready_nonempty(e);
}

/* ------------------------------------------------------------------------ */
/* Other threads: visits and wake-ups                                       */
/* ------------------------------------------------------------------------ */

/*
 * Another thread is about to change something the engine looks at (push a
 * frame, a post or a cancel request, stop it, unpark). The visit brackets
 * the change:
 *   - visitors counts it, so that destroy waits for the thread to leave
 *     (once its frame is pushed, that frame may run and finish and the
 *     engine be destroyed while the thread is still waking it), and so
 *     that the engine does not take a frame whose push is on its way for
 *     one that nothing will wake;
 *   - the quiet flag is cleared first, so a scheduler never counts the
 *     engine as idle while the change is in progress;
 *   - at the end, epoch is bumped and the engine woken if it sleeps.
 */
/* co_engine.quiet: NO; MAYBE while the engine checks, after raising it,
 * that no visitor came (quiet_set); YES once that held, counted by the
 * scheduler. Whoever takes it down from YES uncounts it. */
enum { QUIET_NO = 0, QUIET_MAYBE = 1, QUIET_YES = 2 };

static void quiet_clear(co_engine *e)
{
	/* seq_cst: pairs with quiet_set (we count ourselves in visitors, then
	 * look at the flag; it raises the flag, then looks at visitors) */
	if (co__unlikely(atomic_load_explicit(&e->quiet, memory_order_seq_cst)) &&
	    atomic_exchange_explicit(&e->quiet, QUIET_NO, memory_order_seq_cst) == QUIET_YES)
		e->hooks->quiet(e, e->hook_arg, 0);
}

static int remote_begin(co_engine *e)
{
	if (co__tls_engine == e)
		return 0; /* the owner: it sees its own changes */
	atomic_fetch_add_explicit(&e->visitors, 1, memory_order_seq_cst);
	quiet_clear(e);
	return 1;
}

/*
 * Pairs with engine_wait: the engine stores sleeping = 1 and then reads
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

static void remote_end(co_engine *e, int remote)
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
static void remote_push(co_engine *e, int remote, _Atomic(void *) *list, void *node, size_t link)
{
	co__lifo_push(list, node, link);
	if (!remote) /* the owner's own post: epoch tells its next turn to look */
		atomic_fetch_add_explicit(&e->epoch, 1, memory_order_relaxed);
	remote_end(e, remote);
}

/* Begin a call that may come from another thread: the visit, then the
 * check that the engine is set up (inside the visit, so that destroy,
 * which waits for visitors after it marked the engine DYING, never frees
 * it under a call that passed the check). 0, or -EINVAL (no visit left). */
static int call_begin(co_engine *e, int *remote)
{
	*remote = remote_begin(e);
	if (co__likely(co__engine_alive(e)))
		return 0;
	if (*remote)
		atomic_fetch_sub_explicit(&e->visitors, 1, memory_order_release);
	return -EINVAL;
}

/* co_runner.wake: a frame of this engine is runnable again. */
static void engine_wake(co_runner *r, co_frame *f)
{
	co_engine *e = co__container_of(r, co_engine, runner);
	int remote = remote_begin(e);

	CO__TRACE_WAKE(e, f);
	if (!remote) {
		owner_push(e, f); /* the hot path: no fence, no syscall */
		return;
	}
	remote_push(e, remote, &e->inbox, f, offsetof(co_frame, next));
}

void co__engine_wake_parked(co_engine *e, co_frame *f)
{
	co_frame *r = co__wake_root(f);
	int remote;

	if (r == NULL) { /* release builds: a frame woken twice is not queued */
		co_engine_unpark(e);
		return;
	}
	remote = remote_begin(e);
	CO__TRACE_WAKE(e, r);
	if (!remote) {
		owner_push(e, r);
		atomic_fetch_sub_explicit(&e->parked, 1, memory_order_release);
		return;
	}
	co__lifo_push(&e->inbox, r, offsetof(co_frame, next));
	/* release: after the push, so the engine that sees the count drop
	 * sees the frame (as in co_engine_unpark after co_wake) */
	atomic_fetch_sub_explicit(&e->parked, 1, memory_order_release);
	remote_end(e, remote);
}

void co__engine_wake_parked_chain(co_engine *e, co_frame *first, co_frame *last, unsigned parked)
{
	int remote = remote_begin(e);

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
			owner_push(e, r);
		}
	} else if (first) {
		for (co_frame *r = first; r; r = r->next)
			CO__TRACE_WAKE(e, r);
		co__lifo_push_chain(&e->inbox, first, last, offsetof(co_frame, next));
	}
	/* release: after the pushes (see co__engine_wake_parked) */
	atomic_fetch_sub_explicit(&e->parked, parked, memory_order_release);
	remote_end(e, remote);
}

/* ------------------------------------------------------------------------ */
/* Cancel requests from other threads                                       */
/* ------------------------------------------------------------------------ */

static void finish_now(co_engine *e, co_frame *f);

/*
 * co_runner.cancel, from any thread. Mark the frame (ASKED | QUEUED)
 * unless it finished. From then on it does not move to another engine: a
 * move marks the frame MOVING in the same byte, and only if no request is
 * there, and publishes the new runner only once it is certain; we wait
 * for a move already under way to be published. So the runner we read is
 * the engine that owns the frame, for good. On that engine's thread, act
 * at once; elsewhere queue the frame for it, and its finish waits for the
 * request (finish_frame), so the frame is still there when it arrives.
 */
static int engine_cancel(co_runner *r, co_frame *f)
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
	remote = remote_begin(e);
	remote_push(e, remote, &e->cancels, f, offsetof(co_frame, cancel_next));
	return 0;
}

/* The owner handles the requests other threads queued (each for one of
 * its own frames: see engine_cancel). */
void co__engine_run_cancels(co_engine *e)
{
	co_frame *f = co__lifo_take(&e->cancels, offsetof(co_frame, cancel_next)), *next;

	for (; f; f = next) {
		unsigned char old;

		next = f->cancel_next;
		old = __atomic_fetch_and(&f->cancel, (unsigned char)~CO__CX_QUEUED, __ATOMIC_SEQ_CST);
		if (old & CO__CX_FINISHED) { /* it finished meanwhile: its finish waited */
			e->deferred--;
			finish_now(e, f);
		} else
			co__cancel_here(f);
	}
}

/* ------------------------------------------------------------------------ */
/* Wake-up                                                                  */
/* ------------------------------------------------------------------------ */

static struct io_uring_sqe *sqe_get(co_engine *e)
{
	struct io_uring_sqe *sqe;

	while ((sqe = io_uring_get_sqe(&e->ring)) == NULL) {
		e->stats.sq_full++;
		io_uring_submit(&e->ring);
	}
	return sqe;
}

static void wake_arm(co_engine *e)
{
	struct io_uring_sqe *sqe = sqe_get(e);

	io_uring_prep_read(sqe, e->wake_fd, &e->wake_val, sizeof e->wake_val, 0);
	io_uring_sqe_set_data(sqe, &e->wake_info);
	e->wake_armed = 1;
}

/* The eventfd read completed: a waker wrote, or a cancel-all hit it. */
static void wake_done(co_engine *e, co_io_info *info, int res, unsigned cqe_flags, unsigned tag)
{
	(void)info;
	(void)res;
	(void)cqe_flags;
	(void)tag;
	e->wake_armed = 0;
	e->inflight++; /* reap counted this CQE out; the wake read is not I/O */
	/* Clear before re-arming: a waker that sees 0 writes again, and the
	 * new read will see that write. */
	atomic_store_explicit(&e->wake_pending, 0, memory_order_release);
	if (e->wake_fd >= 0)
		wake_arm(e);
}

/* From the owner thread, reap the armed eventfd read before the ring goes,
 * so the kernel holds no pointer into *e (invariant 6). From another
 * thread, closing the ring cancels it. */
void co__engine_wake_disarm(co_engine *e)
{
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;

	if (!e->wake_armed || !e->has_owner || !pthread_equal(e->owner, pthread_self()))
		return;
	sqe = sqe_get(e);
	io_uring_prep_cancel(sqe, &e->wake_info, 0);
	io_uring_sqe_set_data(sqe, NULL);
	io_uring_submit(&e->ring);
	close(e->wake_fd);
	e->wake_fd = -1; /* wake_done must not re-arm */
	while (e->wake_armed && io_uring_wait_cqe(&e->ring, &cqe) == 0) {
		if (io_uring_cqe_get_data(cqe) == &e->wake_info)
			e->wake_armed = 0;
		io_uring_cqe_seen(&e->ring, cqe);
	}
}

/* ------------------------------------------------------------------------ */
/* Spawn, stop, park, post                                                  */
/* ------------------------------------------------------------------------ */

/* Count one more frame on e unless spawns are refused. */
static int live_get(co_engine *e)
{
	unsigned v = atomic_load_explicit(&e->live, memory_order_relaxed);

	do {
		if (v & CO__LIVE_STOPPED)
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(&e->live, &v, v + 1, memory_order_acq_rel,
							memory_order_relaxed));
	return 1;
}

static int frame_fresh(const co_frame *f)
{
	return f && f->fn && f->parent == NULL && f->label == 0 &&
	       !(f->state & (CO__ST_SPAWNED | CO__ST_DONE));
}

int co_engine_spawn(co_engine *e, co_frame *f)
{
	int remote;

	if (e == NULL || !frame_fresh(f))
		return -EINVAL;
	/* The visit starts before the count, so that the engine never sees
	 * the count without either the frame or the visitor (visitor_inside). */
	if (call_begin(e, &remote) < 0)
		return -EINVAL;
	if (!live_get(e)) {
		remote_end(e, remote);
		return -ESHUTDOWN;
	}
	f->state |= CO__ST_SPAWNED;
	__atomic_store_n(&f->runner, &e->runner, __ATOMIC_RELAXED);
	CO__TRACE_SPAWN(e, f);
	if (!remote) {
		co__view_add(e, f);
		owner_push(e, f);
		return 0;
	}
	remote_push(e, remote, &e->inbox, f, offsetof(co_frame, next));
	return 0;
}

int co_engine_park(co_engine *e)
{
	if (e == NULL || !co__engine_alive(e))
		return -EINVAL;
	atomic_fetch_add_explicit(&e->parked, 1, memory_order_relaxed);
	return 0;
}

int co_engine_unpark(co_engine *e)
{
	int remote;

	if (e == NULL || call_begin(e, &remote) < 0)
		return -EINVAL;
	atomic_fetch_sub_explicit(&e->parked, 1, memory_order_release);
	/* The engine may now be idle: let it see that, whichever of unpark and
	 * the wake comes first. */
	remote_end(e, remote);
	return 0;
}

int co_engine_post(co_engine *e, co_post *p)
{
	int remote;

	if (e == NULL || p == NULL || p->fn == NULL)
		return -EINVAL;
	if (call_begin(e, &remote) < 0) /* once pushed, it may run, and e be destroyed */
		return -EINVAL;
	remote_push(e, remote, &e->posts, p, offsetof(co_post, next));
	return 0;
}

/* Run every post queued so far, oldest first. */
static void run_posts(co_engine *e)
{
	co_post *p = co__lifo_take(&e->posts, offsetof(co_post, next)), *next;

	for (; p; p = next) {
		next = p->next; /* before fn, which may free it */
		p->fn(p);
	}
}

/* ------------------------------------------------------------------------ */
/* SQEs                                                                     */
/* ------------------------------------------------------------------------ */

/* co__engine_sqe (engine_internal.h) found the SQ too full to keep room for a
 * linked timeout: submit what is queued, then take a slot. */
struct io_uring_sqe *co__engine_sqe_slow(co_engine *e)
{
	e->stats.sq_full++;
	io_uring_submit(&e->ring);
	return sqe_get(e);
}

/* ------------------------------------------------------------------------ */
/* The loop                                                                 */
/* ------------------------------------------------------------------------ */

static void finish_now(co_engine *e, co_frame *f)
{
	int task = (f->state & CO__ST_TASK) != 0;

	co__view_del(e, f);
	if (f->on_done)
		f->on_done(f); /* may free f: not touched after this */
	atomic_fetch_sub_explicit(&e->live, 1, memory_order_release);
	if (task && e->hooks && e->hooks->task_done)
		e->hooks->task_done(e, e->hook_arg);
}

/* A root frame ended. If a cancel request from another thread is on its
 * way, that request finishes it (run_cancels): the requester may still be
 * touching the frame. */
static void finish_frame(co_engine *e, co_frame *f)
{
	CO__TRACE_DONE(e, f);
	if (__atomic_fetch_or(&f->cancel, (unsigned char)CO__CX_FINISHED, __ATOMIC_SEQ_CST) & CO__CX_QUEUED) {
		e->deferred++; /* the requester is inside co_cancel: it will push */
		return;
	}
	finish_now(e, f);
}

/* Cancel stop: finish f for it, without running it: it never started, or
 * it is still running past the grace. It is in no queue and no awaiter
 * holds it (it came off the ready queue). */
void co__engine_abandon(co_engine *e, co_frame *f)
{
	f->status = -ECANCELED;
	f->state = (f->state | CO__ST_DONE) & ~(unsigned)(CO__ST_WAITING | CO__ST_NESTED);
	e->stats.cancelled++;
	finish_frame(e, f);
}

/* After a frame's resume, with SQEs that should not wait for the turn's
 * end: a read or write prepared (submit_batch 0), or submit_batch of any
 * kind waiting. */
static void submit_soon(co_engine *e)
{
	unsigned want = e->submit_batch ? e->submit_batch : 1;

	e->submit_soon = e->submit_batch != 0; /* with submit_batch, after every resume */
	if (io_uring_sq_ready(&e->ring) >= want) {
		io_uring_submit(&e->ring);
		e->last_info = NULL; /* its SQE is gone: nothing may link to it */
	}
}

/* Resume up to max ready frames; a yield waits for the next turn (the
 * later list). Under a cancel stop, every frame resumed is marked
 * cancelled first. */
static void run_ready(co_engine *e, uint64_t cancel_deadline, unsigned max)
{
	co_frame *f;

	for (unsigned n = 0; n < max && (f = ready_pop(e)) != NULL; n++) {
		if (co__unlikely(cancel_deadline)) {
			if (f->label == 0 || co__now_ns() >= cancel_deadline) {
				co__engine_abandon(e, f);
				continue;
			}
			CO__OR_BYTE(&f->cancel, CO__CANCEL_ASKED);
		}
		e->stats.resumed++;
#ifdef CO_WITH_VIEW
		e->view[f->view_slot].since = e->turn_stamp; /* slot 0, unlisted: the sink */
		e->running = f; /* a view from inside the frame (or its on_done) */
#endif
		CO__TRACE_RESUME(e, f);
		switch (co_resume(f)) {
		case CO_YIELDED:
			CO__TRACE_YIELD(e, f);
			co__engine_later(e, f); /* the next turn runs it */
			break;
		case CO_DONE:
			finish_frame(e, f);
			break;
		default: /* CO_WAITING: its awaiter wakes it */
			CO__TRACE_WAIT(e, f);
			break;
		}
		/* opts.submit_batch: the frame is suspended, so whatever it
		 * prepared (an operation and a timeout linked to it) is whole */
		if (co__unlikely(e->submit_soon))
			submit_soon(e);
	}
#ifdef CO_WITH_VIEW
	e->running = NULL; /* between two resumes it names the frame that ran,
	                      which a view from its on_done no longer lists */
#endif
}

/*
 * Dispatch every CQE in the ring, in one batch. The tail is read once per
 * batch (callbacks may add CQEs: an early submit completes inline; the
 * next pass takes them). A CQE without IORING_CQE_F_MORE is an operation's
 * last: it leaves the in-flight count (the wake read, which never entered
 * it, puts it back in wake_done).
 * user_data 0-3 is a fire-and-forget SQE (no info, a tag at most) and
 * LIBURING_UDATA_TIMEOUT (all ones) liburing's own timeout on kernels
 * without EXT_ARG: ud + 1 <= CO_IO_TAG_MASK + 1 tells both in one test.
 */
static unsigned reap(co_engine *e)
{
	struct io_uring_cq *cq = &e->ring.cq;
	unsigned head = *cq->khead, tail, n = 0, mask = cq->ring_mask, shift = e->cqe_shift;

	while ((tail = io_uring_smp_load_acquire(cq->ktail)) != head) {
		n += tail - head;
		do {
			struct io_uring_cqe *cqe = &cq->cqes[(head & mask) << shift];
			uintptr_t ud = (uintptr_t)cqe->user_data;
			co_io_info *info = (co_io_info *)(ud & ~(uintptr_t)CO_IO_TAG_MASK);

			if (co__unlikely(ud + 1 <= CO_IO_TAG_MASK + 1))
				continue;
			if (co__likely(!(cqe->flags & IORING_CQE_F_MORE)))
				e->inflight--;
			info->cb(e, info, cqe->res, cqe->flags, (unsigned)(ud & CO_IO_TAG_MASK));
		} while (++head != tail);
		/* release: the kernel may reuse the slots once it sees the head */
		io_uring_smp_store_release(cq->khead, head);
	}
	e->stats.cqes += n;
	return n;
}

static void reap_all(co_engine *e)
{
	/* With FEAT_NODROP the kernel keeps what did not fit in the CQ; flush
	 * it in as soon as there is room. */
	while (reap(e) && co__unlikely(io_uring_cq_has_overflow(&e->ring))) {
		e->stats.cq_overflow++;
		io_uring_get_events(&e->ring);
	}
}

/* Ask the kernel to cancel every operation in flight (fire and forget). */
static void cancel_all(co_engine *e)
{
	struct io_uring_sqe *sqe = sqe_get(e);

	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
	io_uring_sqe_set_data(sqe, NULL);
}

/*
 * A cancel stop begins (owner thread, once): cancel every operation in
 * flight and every listed parked wait. From then on each frame the loop
 * resumes is marked cancelled, and a cancelled frame's later waits end at
 * once: sync waits refuse to park (lib/waiter.c), and an I/O await asks the
 * kernel to cancel its operation right after it (lib/io.c), behind
 * anything that completes at once, like a close on the way out, and asks
 * again until the kernel ends it.
 */
static void cancel_begin(co_engine *e)
{
	uint64_t now = co__now_ns();

	e->cancel_since = now ? now : 1;
	e->cancel_again = co__time_add(now, CO__CANCEL_AGAIN_NS);
	cancel_all(e);
	co__engine_park_cancel_all(e);
}

/*
 * A cancel stop with operations in flight: every CO__CANCEL_AGAIN_NS, ask
 * the kernel again to cancel them all, and sleep no longer than that
 * (*wait_ns). The first ask reaches every operation the kernel has on a
 * list, but not one between two of its attempts (a retry queued to run,
 * a hand-over to an io-wq worker) nor one that starts after it (behind a
 * hard link): such an operation ends at the next ask, which finds it
 * waiting, or tells the io-wq worker that runs it (a signal, which ends
 * the wait of a socket or a pipe).
 */
static void cancel_again(co_engine *e, uint64_t *wait_ns)
{
	uint64_t now = co__now_ns(), left;

	if (now >= e->cancel_again) {
		cancel_all(e);
		e->cancel_again = co__time_add(now, CO__CANCEL_AGAIN_NS);
	}
	left = e->cancel_again - now;
	if (*wait_ns == 0 || left < *wait_ns)
		*wait_ns = left;
}

static int first_run(co_engine *e)
{
	int ret;

	e->owner = pthread_self();
	e->has_owner = 1;
	/* io_uring_enable_rings is declared but not exported by liburing 2.3 */
	ret = io_uring_register(e->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0);
	if (ret < 0)
		return ret;
	io_uring_register_ring_fd(&e->ring); /* optional: saves an fd lookup per enter */
	wake_arm(e);
	ret = io_uring_submit(&e->ring);
	return ret < 0 ? ret : 0;
}

/* No frame ready and no I/O or parked frame pending. */
static int engine_idle(co_engine *e)
{
	/* SQEs prepared by awaiters are counted in inflight; the rest (the
	 * wake read, cancel requests) need no waiting for. */
	return !ready_nonempty(e) && e->inflight == 0 &&
	       atomic_load_explicit(&e->parked, memory_order_acquire) == 0;
}

/*
 * The engine is idle (nothing ready, no I/O, nothing parked): can anything
 * still come from inside coring? Only from another thread inside a call
 * on the engine (a spawn counts its frame before pushing it; a waker
 * pushes before it unparks): visits are short, so the caller yields until
 * there is none and looks again (the same for a frame whose finish waits
 * for a cancel request: its requester is inside co_cancel). Read after
 * the live count; with no
 * visitor and nothing changed since the turn began (snap), the live frames
 * are stuck for good. No timing is involved.
 */
static int visitor_inside(co_engine *e)
{
	/* a finish waiting for a cancel request is one: its requester has
	 * marked the frame and is about to push the request */
	return atomic_load_explicit(&e->visitors, memory_order_seq_cst) != 0 || e->deferred != 0;
}

static int unchanged(co_engine *e, unsigned snap)
{
	return atomic_load_explicit(&e->epoch, memory_order_seq_cst) == snap && engine_idle(e);
}

/*
 * Tell the scheduler (if any) that this engine is idle with nothing that
 * can progress; cleared by the next visitor or by the owner's next turn.
 * The flag goes up first and the engine looks for visitors after: a
 * visitor that came in between sees the flag and takes it down, or we see
 * the visitor; either way the scheduler never counts the engine quiet
 * while a change is on its way.
 */
static void quiet_set(co_engine *e, unsigned snap)
{
	int want = QUIET_NO;

	if (!e->hooks || !e->hooks->quiet ||
	    !atomic_compare_exchange_strong_explicit(&e->quiet, &want, QUIET_MAYBE,
						    memory_order_seq_cst, memory_order_relaxed))
		return;
	want = QUIET_MAYBE;
	if (visitor_inside(e) || !unchanged(e, snap)) {
		atomic_compare_exchange_strong(&e->quiet, &want, QUIET_NO);
		return;
	}
	if (atomic_compare_exchange_strong(&e->quiet, &want, QUIET_YES))
		e->hooks->quiet(e, e->hook_arg, 1);
}

/* Under valgrind, the longest wait in io_uring_enter (engine_sleep) */
#define VALGRIND_SLICE_NS (10 * 1000000ull)

static int engine_slept(co_engine *e, int ret)
{
	atomic_store_explicit(&e->sleeping, 0, memory_order_relaxed);
	return ret;
}

/* valgrind 3.19 holds its lock through io_uring_enter: no other thread of
 * the process runs while this one waits there, not even the one that
 * would stop or wake it. With nothing in flight the engine waits in ppoll
 * instead, which valgrind knows (lib/engine_wait.c); with I/O in flight it
 * waits in io_uring_enter as natively (so callgrind counts the native
 * path) but for a slice at most, and yields valgrind's lock when a slice
 * ends with nothing. */
static int valgrind_sleep(co_engine *e, uint64_t ns, int idle)
{
	static const struct __kernel_timespec slice = { 0, VALGRIND_SLICE_NS };
	struct __kernel_timespec ts = slice;
	struct io_uring_cqe *cqe;
	int sliced = ns == 0 || ns > VALGRIND_SLICE_NS, ret;

	if (idle)
		return co__engine_idle_sleep(e, ns);
	if (!sliced)
		co__ns_to_ts(&ts, ns);
	ret = io_uring_submit_and_wait_timeout(&e->ring, &cqe, 1, &ts, NULL);
	if (sliced && ret == -ETIME) {
		sched_yield(); /* valgrind hands its lock on here */
		ret = 0;
	}
	return ret;
}

/*
 * Sleep in the kernel until a completion arrives (submitting what is
 * queued in the same call), unless another thread changed something since
 * the turn began (snap) or work is queued. With ns > 0 it returns -ETIME
 * when nothing came in time (under valgrind, 0 after a slice: the loop
 * then turns again).
 */
static int engine_sleep(co_engine *e, unsigned snap, uint64_t ns, int idle)
{
	int ret;

	/* Idle: the scheduler may count it quiet (quiet_set looks again that
	 * nothing changed since snap). Only now, after any poll: a hand-off
	 * that a poll catches costs no write to the scheduler's count. */
	if (idle)
		quiet_set(e, snap);
	atomic_store_explicit(&e->sleeping, 1, memory_order_seq_cst); /* pairs with engine_kick */
	if (atomic_load_explicit(&e->epoch, memory_order_seq_cst) != snap || ready_nonempty(e)) {
		atomic_store_explicit(&e->sleeping, 0, memory_order_relaxed);
		return 0;
	}
	e->stats.waits++;
	if (co__unlikely(co__under_valgrind()))
		return engine_slept(e, valgrind_sleep(e, ns, idle));
	if (ns) {
		struct __kernel_timespec ts;
		struct io_uring_cqe *cqe;
		co__ns_to_ts(&ts, ns);
		ret = io_uring_submit_and_wait_timeout(&e->ring, &cqe, 1, &ts, NULL);
	} else {
		ret = io_uring_submit_and_wait(&e->ring, 1);
	}
	return engine_slept(e, ret);
}

int co__engine_sleep(co_engine *e, unsigned snap, uint64_t ns, int idle)
{
	return engine_sleep(e, snap, ns, idle);
}

/* Wait for work. With nothing in flight the engine can only be waiting for
 * another thread: it polls for that first (lib/engine_wait.c); with I/O in
 * flight, a server's every turn, it sleeps at once. */
static int engine_wait(co_engine *e, unsigned snap, uint64_t ns, int idle)
{
	if (co__unlikely(e->inflight == 0) && e->spin_max != 0)
		return co__engine_wait_idle(e, snap, ns, idle);
	return engine_sleep(e, snap, ns, idle);
}

/* The stop state at the start of a turn: escalates a timed drain to a
 * cancel when its time came, begins the cancel once, and returns the
 * time after which frames still running are finished for them (0: no
 * cancel stop), and in *wait_ns how long a drain may still sleep. */
static __attribute__((noinline)) uint64_t stop_turn_slow(co_engine *e, int mode, uint64_t *wait_ns)
{
	uint64_t at;

	if (mode == CO_STOP_DRAIN) {
		at = atomic_load_explicit(&e->stop_at, memory_order_relaxed);
		if (at == 0)
			return 0;
		uint64_t now = co__now_ns();
		if (now < at) {
			*wait_ns = at - now;
			return 0;
		}
		int drain = CO_STOP_DRAIN;
		atomic_compare_exchange_strong(&e->stop_mode, &drain, CO_STOP_CANCEL);
	}
	if (e->cancel_since == 0)
		cancel_begin(e);
	at = co__time_add(e->cancel_since, e->cancel_grace); /* UINT64_MAX: no end */
	if (co__unlikely(co__engine_park_lingering(e)) && at != UINT64_MAX) {
		uint64_t now = co__now_ns();

		if (now < at)
			*wait_ns = at - now; /* wake when the grace runs out */
		else
			co__engine_park_give_up_all(e);
	}
	if (e->inflight != 0)
		cancel_again(e, wait_ns);
	return at;
}

/* The common case inline: no stop asked. */
static co__inline uint64_t stop_turn(co_engine *e, uint64_t *wait_ns)
{
	int mode = atomic_load_explicit(&e->stop_mode, memory_order_acquire);

	*wait_ns = 0;
	if (co__likely(mode == CO__STOP_NONE))
		return 0;
	return stop_turn_slow(e, mode, wait_ns);
}

/* The first half of every turn, looping or ticking: take in what other
 * threads sent (posts, submits, cancels) and advance a stop. Returns the
 * time after which frames still running under a cancel stop are finished
 * for them (0: no cancel stop); *wait_ns: how long the turn may then wait. */
/* snap: the epoch read when the turn began. Every push onto the lists
 * other threads fill (inbox, posts, cancels) is followed by a bump of
 * epoch, so the lists need a look only when it moved since the last look;
 * a push whose bump comes after snap is seen by engine_wait, which then
 * does not sleep, and by the next turn. */
static co__inline uint64_t turn_begin(co_engine *e, unsigned snap, uint64_t *wait_ns)
{
	quiet_clear(e);
	e->stats.turns++;
#ifdef CO_WITH_VIEW
	e->turn_stamp = co__stamp(); /* when its frames last ran, for a view */
#endif
	e->last_info = NULL; /* SQEs of earlier turns are submitted */
	if (co__unlikely(snap != e->seen_epoch)) {
		e->seen_epoch = snap;
#ifdef CO_WITH_VIEW
		if (atomic_load_explicit(&e->view_req, memory_order_relaxed) != NULL)
			co__engine_view_answer(e);
#endif
		if (!co__lifo_empty(&e->posts))
			run_posts(e);
		if (!co__lifo_empty(&e->inbox))
			inbox_drain(e);
		if (!co__lifo_empty(&e->cancels))
			co__engine_run_cancels(e);
	}
	return stop_turn(e, wait_ns);
}

/* The second half's start: the frames the last turn left for this one
 * (yields, co_next_turn) join the ready queue, behind what is there. */
static co__inline void turn_ready(co_engine *e)
{
	if (co__unlikely(((uintptr_t)e->later_head | (uintptr_t)e->turns_head) != 0))
		co__engine_later_take(e);
	if (co__unlikely(e->local_n != 0) && stealable(e))
		ring_refill(e);
}

static int loop(co_engine *e, int mode)
{
	int ret = 0;

	for (;;) {
		unsigned snap = atomic_load_explicit(&e->epoch, memory_order_seq_cst);
		uint64_t wait_ns, cancel_deadline = turn_begin(e, snap, &wait_ns);

		turn_ready(e);
		run_ready(e, cancel_deadline, e->batch);
		if (e->local_n != 0 || ((uintptr_t)e->later_head | (uintptr_t)e->turns_head) != 0 ||
		    (stealable(e) && ring_size(e) != 0)) {
			/* Busy: flush SQEs and pick up completions without
			 * waiting; liburing enters the kernel only if there is
			 * something to submit or completions to run. */
			if (e->hooks && e->hooks->backlog && ring_size(e) > 1)
				e->hooks->backlog(e, e->hook_arg);
			ret = io_uring_submit(&e->ring);
		} else if (!stealable(e) && (e->inflight != 0 ||
					     atomic_load_explicit(&e->parked, memory_order_acquire) != 0)) {
			/* The common wait, one syscall: submit + wait. What other
			 * threads sent meanwhile (inbox, posts, cancels) is seen
			 * by engine_wait, which then does not sleep. */
			ret = engine_wait(e, snap, wait_ns, 0);
		} else if (ready_nonempty(e)) {
			ret = io_uring_submit(&e->ring); /* other threads sent work */
		} else if (stealable(e) && e->hooks->steal(e, e->hook_arg) > 0) {
			ret = io_uring_submit(&e->ring); /* run the stolen frames next */
		} else if (!engine_idle(e)) {
			ret = engine_wait(e, snap, wait_ns, 0);
		} else {
			unsigned live = atomic_load_explicit(&e->live, memory_order_seq_cst);
			int stopping = (live & CO__LIVE_STOPPED) || mode == CO_RUN_UNTIL_IDLE;

			if (CO__LIVE_COUNT(live) == 0 && stopping)
				break; /* every frame finished */
			if (visitor_inside(e)) {
				sched_yield(); /* its change is about to land */
				continue;
			}
			if (unchanged(e, snap) && CO__LIVE_COUNT(live) != 0 && stopping) {
				e->stuck = CO__LIVE_COUNT(live);
				ret = -EDEADLK;
				break;
			}
			/* a visitor wakes us; quiet once it goes to sleep */
			ret = engine_wait(e, snap, wait_ns, 1);
		}
		if (co__unlikely(ret < 0) && ret != -EINTR && ret != -ETIME && ret != -EAGAIN &&
		    ret != -EBUSY)
			break;
		ret = 0;
		reap_all(e);
	}
	return ret;
}

/* Frames in the ready queue (owner thread). */
static unsigned ready_count(co_engine *e)
{
	return e->local_n + (stealable(e) ? ring_size(e) : 0);
}

/*
 * One turn that never sleeps (co_engine_tick). It takes in the completions
 * that are there when it begins, then runs the frames ready at that moment,
 * each once, then the frames those wake (up to opts.batch more); a frame
 * that yields or waits for the next turn is left for the next tick, and
 * the tick's I/O is submitted at its end.
 */
static int tick(co_engine *e)
{
	unsigned snap = atomic_load_explicit(&e->epoch, memory_order_seq_cst);
	uint64_t resumed = e->stats.resumed, wait_ns, cancel_deadline;
	int ret = 0;

	cancel_deadline = turn_begin(e, snap, &wait_ns);
	if (e->inflight)
		ret = io_uring_get_events(&e->ring); /* runs the kernel's completion work */
	reap_all(e);
	turn_ready(e);
	run_ready(e, cancel_deadline, ready_count(e) + e->batch);
	if (ret >= 0 || ret == -EINTR || ret == -EAGAIN || ret == -EBUSY)
		ret = io_uring_submit(&e->ring);
	if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
		return ret;
	if (engine_idle(e) && !visitor_inside(e) && unchanged(e, snap))
		quiet_set(e, snap);
	return (int)(e->stats.resumed - resumed);
}

/* Start a run or a tick on the calling thread: 0, or the call's error. */
static int enter(co_engine *e)
{
	int ret;

	if (!co__engine_alive(e))
		return -EINVAL;
	if (co__tls_engine != NULL)
		return -EBUSY; /* another engine runs on this thread */
	if (co__engine_take(e) < 0)
		return co__engine_alive(e) ? -EBUSY : -EINVAL;
	/* Only one thread gets here at a time: owner is safe to read. */
	if (e->has_owner && !pthread_equal(e->owner, pthread_self())) {
		co__engine_transition(e, CO__T_RUN_END);
		return -EPERM;
	}
	if (!e->has_owner) {
		ret = first_run(e);
		if (ret < 0) {
			co__engine_transition(e, CO__T_RUN_END);
			return ret;
		}
	}
	co__tls_engine = e;
	/* the first turn looks at the lists whatever epoch says */
	e->seen_epoch = atomic_load_explicit(&e->epoch, memory_order_relaxed) - 1;
	return 0;
}

static void leave(co_engine *e)
{
	e->stats.wake_writes = atomic_load_explicit(&e->wake_writes, memory_order_relaxed);
	io_uring_submit(&e->ring); /* nothing prepared stays unsubmitted */
	co__tls_engine = NULL;
	co__engine_transition(e, CO__T_RUN_END);
}

int co_engine_run(co_engine *e, int mode)
{
	int ret;

	if (e == NULL || (mode != CO_RUN_UNTIL_IDLE && mode != CO_RUN_UNTIL_STOP))
		return -EINVAL;
	ret = enter(e);
	if (ret < 0)
		return ret;
	e->stuck = 0;
	CO__TRACE_RUN(e, 1);
	ret = loop(e, mode);
	quiet_clear(e);
	CO__TRACE_RUN(e, 0);
	leave(e);
	return ret;
}

int co_engine_tick(co_engine *e)
{
	int ret;

	if (e == NULL)
		return -EINVAL;
	ret = enter(e);
	if (ret < 0)
		return ret;
	ret = tick(e);
	leave(e);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* For a scheduler (lib/scheduler.c, lib/context.c)                         */
/* ------------------------------------------------------------------------ */

void co__engine_set_hooks(co_engine *e, const struct co__engine_hooks *h, void *arg)
{
	e->hooks = h;
	e->hook_arg = arg;
	e->stealing = h && h->steal;
}

int co__engine_visit_begin(co_engine *e)
{
	return remote_begin(e);
}

void co__engine_visit_end(co_engine *e, int visit)
{
	remote_end(e, visit);
}

void co__engine_kick(co_engine *e)
{
	remote_end(e, remote_begin(e));
}

unsigned co__engine_ready(co_engine *e)
{
	return ring_size(e);
}

unsigned co__engine_live(co_engine *e)
{
	return CO__LIVE_COUNT(atomic_load_explicit(&e->live, memory_order_acquire));
}

int co__engine_sleeping(co_engine *e)
{
	return atomic_load_explicit(&e->sleeping, memory_order_relaxed);
}

int co__engine_quiet(co_engine *e, unsigned *epoch)
{
	*epoch = atomic_load_explicit(&e->epoch, memory_order_seq_cst);
	return atomic_load_explicit(&e->quiet, memory_order_seq_cst) == QUIET_YES;
}

/* ------------------------------------------------------------------------ */
/* For the engine's other files (engine_impl.h)                             */
/* ------------------------------------------------------------------------ */

void co__engine_runner_init(co_engine *e)
{
	e->runner.wake = engine_wake;
	e->runner.cancel = engine_cancel;
	e->wake_info.cb = wake_done;
}

int co__engine_has_work(co_engine *e)
{
	return ready_nonempty(e);
}

co_frame *co__engine_ring_pop(co_engine *e)
{
	return ring_pop(e);
}

co_frame *co__engine_local_pop(co_engine *e)
{
	return local_pop(e);
}

int co__engine_live_get(co_engine *e)
{
	return live_get(e);
}

void co__engine_inbox_drain(co_engine *e)
{
	inbox_drain(e);
}

void co__engine_finish_now(co_engine *e, co_frame *f)
{
	finish_now(e, f);
}

int co__engine_call_begin(co_engine *e, int *visit)
{
	return call_begin(e, visit);
}

void co__engine_enqueue(co_engine *e, int visit, co_frame *f)
{
	CO__TRACE_WAKE(e, f);
	if (!visit)
		owner_push(e, f);
	else
		co__lifo_push(&e->inbox, f, offsetof(co_frame, next));
}
