/* SPDX-License-Identifier: MIT */
/*
 * The waiter core: parking a frame on a primitive, claiming it, waking it
 * on its own engine, and timed waits. The protocol is explained in
 * docs/sync.md ("Waking across contexts", "The timeout race").
 */
#include <errno.h>
#include <sched.h>
#include <unistd.h>

#include <coring/io.h>
#include "wait.h"
#include "internal.h"

/* The timer's tag in its user_data (see co_engine_sqe). */
enum { TAG_TIMER = 1 };

/* ---- the spinlock ---------------------------------------------------------- */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Held for a few dozen instructions (a list operation, a copy of one
 * channel item): spin briefly, then yield the CPU, since on a loaded
 * machine the holder may have been preempted. */
void co__spin_lock(atomic_uint *l)
{
	unsigned spins = 0;

	for (;;) {
		/* acquire: pairs with the release in co__spin_unlock */
		if (!atomic_exchange_explicit(l, 1, memory_order_acquire))
			return;
		while (atomic_load_explicit(l, memory_order_relaxed)) {
			if (++spins < 128)
				cpu_relax();
			else
				sched_yield();
		}
	}
}

void co__spin_unlock(atomic_uint *l)
{
	atomic_store_explicit(l, 0, memory_order_release); /* pairs with co__spin_lock */
}

/* ---- queues ------------------------------------------------------------------ */

void co__waitq_push(co_waitq *q, co_waiter *w)
{
	w->q = q;
	w->next = NULL;
	w->prev = q->tail;
	if (q->tail)
		q->tail->next = w;
	else
		q->head = w;
	q->tail = w;
}

static void waitq_remove(co_waitq *q, co_waiter *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		q->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		q->tail = w->prev;
	w->next = w->prev = NULL;
}

/* ---- awaiters that fail at once ---------------------------------------------- */

static int fail_suspend(co_awaiter *a, co_frame *f)
{
	(void)a;
	(void)f;
	return 0;
}

static int einval_resume(co_awaiter *a, co_frame *f)
{
	(void)a;
	(void)f;
	return -EINVAL;
}

/* Stateless, so one instance serves every thread (a NULL co_waiter). */
static const co_awaiter_ops einval_ops = { NULL, fail_suspend, einval_resume, NULL };
static co_awaiter einval_aw = { &einval_ops };

co_awaiter *co__wait_einval(void)
{
	return &einval_aw;
}

/* A prep with a NULL object: the value is w->res (-EINVAL). */
static const co_awaiter_ops fail_ops = { NULL, fail_suspend, co__wait_resume, NULL };

/* ---- timed waits ---------------------------------------------------------------- */

/*
 * A timed wait is an io_uring timeout (absolute, CLOCK_MONOTONIC) on the
 * waiting frame's own engine. Whoever claims the waiter first decides its
 * result, under the primitive's lock: a releaser or a cancel (on any
 * thread), or the timer's CQE (on the engine). A claimer cannot touch the
 * engine's ring, so it posts "remove the timer" to the engine. The frame
 * is woken only once the timer's CQE has come and, if a removal was
 * posted, once that post has run: then neither the kernel nor the post
 * list holds a pointer into the waiter. Both happen on the engine thread.
 */
static void timed_arm(co_waiter *w, co_engine *e)
{
	struct io_uring_sqe *sqe = co_engine_sqe(e, &w->info, TAG_TIMER);
	struct __kernel_timespec *ts = co_engine_sqe_ts(e, sqe);

	ts->tv_sec = (long long)(w->deadline / CO_S);
	ts->tv_nsec = (long long)(w->deadline % CO_S);
	io_uring_prep_timeout(sqe, ts, 0, IORING_TIMEOUT_ABS);
}

/* Take w off its queue without waking anyone (the lock is held). */
static void leave(co_waiter *w, int res)
{
	waitq_remove(w->q, w);
	w->res = res;
	atomic_store_explicit(&w->state, CO__W_CLAIMED, memory_order_relaxed);
}

static void deliver(co_waiter *w)
{
	const co__wait_ops *ops = (const co__wait_ops *)(const void *)w->aw.ops;

	if (ops->deliver)
		ops->deliver(w);
	else
		co__wait_wake_frame(w);
}

/* On the engine thread, after the timer's CQE or the removal post: wake the
 * frame if that was the last thing outstanding. */
static void timed_finish(co_waiter *w)
{
	int go;

	co__spin_lock(w->lk); /* posted is written by claimers under it */
	go = w->timer_done && (!w->posted || w->post_done);
	co__spin_unlock(w->lk);
	if (go) {
		w->timed = 0;
		deliver(w);
	}
}

/* The timer's CQE: -ETIME (it fired), or -ECANCELED (removed after a claim,
 * or the engine cancelled all its I/O). If nobody claimed the waiter, the
 * timer decides the result. */
static void timer_cqe(co_io_info *info, int res, unsigned cqe_flags, unsigned tag)
{
	co_waiter *w = co__container_of(info, co_waiter, info);

	(void)cqe_flags;
	(void)tag;
	co__spin_lock(w->lk);
	if (atomic_load_explicit(&w->state, memory_order_relaxed) == CO__W_WAITING)
		leave(w, res == -ECANCELED ? -ECANCELED : -ETIME);
	w->timer_done = 1;
	co__spin_unlock(w->lk);
	timed_finish(w);
}

/* The claimer's post, run on the engine: remove the timer unless it has
 * already completed (its -ECANCELED CQE then follows). */
static void timer_remove_post(co_post *p)
{
	co_waiter *w = co__container_of(p, co_waiter, post);

	if (!w->timer_done) {
		struct io_uring_sqe *sqe = co_engine_sqe(w->engine, NULL, 0);

		io_uring_prep_timeout_remove(sqe, (uint64_t)(uintptr_t)&w->info | TAG_TIMER, 0);
	}
	w->post_done = 1;
	timed_finish(w);
}

/* ---- the protocol ---------------------------------------------------------------- */

co_awaiter *co__wait_prep(co_waiter *w, const co__wait_ops *ops, atomic_uint *lk, void *obj)
{
	if (w == NULL)
		return &einval_aw;
	w->deadline = 0;
	w->timed = 0;
	w->next = w->prev = NULL;
	w->q = NULL;
	w->frame = NULL;
	w->engine = NULL;
	w->res = 0;
	atomic_store_explicit(&w->state, CO__W_IDLE, memory_order_relaxed);
	if (obj == NULL) {
		w->aw.ops = &fail_ops;
		w->res = -EINVAL;
		return &w->aw;
	}
	w->aw.ops = &ops->ops;
	w->info.cb = timer_cqe;
	w->post.fn = timer_remove_post;
	w->lk = lk;
	w->obj = obj;
	return &w->aw;
}

co_awaiter *co_wait_for(co_awaiter *aw, uint64_t ns)
{
	co_waiter *w = (co_waiter *)aw;
	uint64_t now;

	if (aw == NULL || aw->ops->resume != co__wait_resume || aw->ops->cancel != co__wait_cancel)
		return aw;
	now = co_now_ns();
	w->deadline = ns > UINT64_MAX - now ? UINT64_MAX : now + ns;
	return aw;
}

int co__wait_park(co_waiter *w, co_frame *f, co_waitq *q)
{
	co_engine *e = co_engine_current();
	int err = 0, timed;

	/* Parked on the engine that runs the frame; a frame resumed by hand
	 * or by a co_loop has none. */
	if (e && co_root(f)->runner != &e->runner)
		e = NULL;
	if (co_cancelled(f))
		err = -ECANCELED;
	else if (w->deadline && co_now_ns() >= w->deadline)
		err = -ETIME;
	else if (w->deadline && e == NULL)
		err = -ENXIO;
	if (err) {
		co__spin_unlock(w->lk);
		w->res = err;
		return 0;
	}
	w->frame = f;
	w->engine = e;
	timed = w->deadline != 0;
	w->timed = (unsigned char)timed;
	if (timed)
		w->posted = w->timer_done = w->post_done = 0;
	atomic_store_explicit(&w->state, CO__W_WAITING, memory_order_relaxed);
	co__waitq_push(q, w);
	/* Counted before anyone can see the waiter, so the matching unpark
	 * never comes first. */
	if (e)
		co_engine_park(e);
	co__spin_unlock(w->lk);
	/* From here a releaser may claim w. An untimed waiter may then run on
	 * another thread: touch nothing. A timed one only runs after its
	 * timer's CQE, so arming it here is safe. */
	if (timed)
		timed_arm(w, e);
	return 1;
}

void co__wait_claim(co_waiter *w, int res, co__wake_list *l)
{
	leave(w, res);
	if (w->timed)
		w->posted = 1; /* its frame now also waits for the removal post */
	w->next = NULL;
	if (l->tail)
		l->tail->next = w;
	else
		l->head = w;
	l->tail = w;
}

void co__wake_all(co__wake_list *l)
{
	co_waiter *w = l->head, *next;

	for (; w; w = next) {
		next = w->next; /* before the wake: then w may be gone */
		if (w->timed) /* its engine removes the timer, then wakes it */
			co_engine_post(w->engine, &w->post);
		else
			deliver(w);
	}
	l->head = l->tail = NULL;
}

/*
 * Wake first, unpark second. Between the two the engine sees a parked
 * frame, so it cannot find itself idle and stop with the frame about to
 * be pushed (the push may come from another thread). After the unpark it
 * may stop and be destroyed: co_engine_unpark counts itself as a visitor
 * so destroy waits for it to return, and nothing is touched after.
 */
void co__wait_wake_frame(co_waiter *w)
{
	co_engine *e = w->engine;
	co_frame *f = w->frame;

	co_wake(f); /* w may be gone from here on */
	if (e)
		co_engine_unpark(e);
}

int co__wait_resume(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((co_waiter *)a)->res;
}

/* co_cancel on a parked frame (from its engine's thread): take it off the
 * queue with -ECANCELED, unless a release claimed it first (that result
 * stands). A timed waiter's timer is removed first, like on any claim. */
int co__wait_cancel(co_awaiter *a, co_frame *f)
{
	co_waiter *w = (co_waiter *)a;
	co__wake_list l = CO__WAKE_LIST_INIT;

	(void)f;
	co__spin_lock(w->lk);
	if (atomic_load_explicit(&w->state, memory_order_relaxed) == CO__W_WAITING)
		co__wait_claim(w, -ECANCELED, &l);
	co__spin_unlock(w->lk);
	co__wake_all(&l);
	return 0;
}
