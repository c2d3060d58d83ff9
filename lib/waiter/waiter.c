/* SPDX-License-Identifier: MIT */
/*
 * The waiter core: parking a frame on a primitive, claiming it, waking it
 * on its own engine, timed waits, and the engine's looks at a parked
 * waiter (its timer, co_cancel, a cancel stop). The protocol is explained
 * in docs/sync.md ("Waking across contexts", "The timeout race",
 * "Freeing a primitive").
 */
#include <errno.h>

#include "common/clock.h"
#include "common/fault.h"
#include "io/io_internal.h"
#include "waiter_internal.h"

/* The timer's tag in its user_data (see co_engine_sqe). */
enum { TAG_TIMER = 1 };

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

static void timer_remove_post(co_post *p);

int co__wait_repark(co_waiter *w)
{
	co_engine *e = w->engine;
	co_waitq *q = w->q;

	if (co_await_cancelled(w->frame) || (e && co__engine_cancelling(e))) {
		w->res = -ECANCELED;
		return 0;
	}
	w->prev = NULL; /* at the head: it is the oldest */
	w->next = q->head;
	if (q->head)
		q->head->prev = w;
	else
		q->tail = w;
	q->head = w;
	if (w->deadline) {
		w->timed = 1;
		w->timer_done = 0;
		w->post.fn = timer_remove_post;
		atomic_store_explicit(&w->pend, 1, memory_order_relaxed); /* the timer's CQE */
	}
	atomic_store_explicit(&w->state, CO__W_WAITING, memory_order_relaxed);
	if (e)
		co__engine_stop_list_add(e, &w->stop_link);
	return 1;
}

/* ---- awaiters that fail at once ---------------------------------------------- */

static int fail_suspend(co_awaiter *a, co_frame *f)
{
	(void)a;
	(void)f;
	return 0;
}

/* A prep with a NULL object: the value is w->res (-EINVAL). */
static const co_awaiter_ops fail_ops = { NULL, fail_suspend, co__wait_resume, NULL,
						 CO__AW_FAILED, "failed" };

/* ---- claiming and waking -------------------------------------------------------- */

static void deliver(co_waiter *w)
{
	const co__wait_ops *ops = (const co__wait_ops *)(const void *)w->aw.ops;

	if (ops->deliver)
		ops->deliver(w);
	else
		co__wait_wake_frame(w);
}

/* Take w off its queue with result res (its queue's lock is held). The
 * state is stored last, seq_cst: an engine that reads CLAIMED without the
 * lock (visit) sees everything before it. */
static void leave(co_waiter *w, int res)
{
	co__dlist_unlink(&w->q->head, &w->q->tail, w);
	w->res = res;
	if (w->engine)
		co__engine_stop_list_remove(w->engine, &w->stop_link);
	atomic_store_explicit(&w->state, CO__W_CLAIMED, memory_order_seq_cst);
}

void co__wait_claim(co_waiter *w, int res, co__wake_list *l)
{
	if (w->timed) /* its frame now also waits for the removal post */
		atomic_fetch_add_explicit(&w->pend, 1, memory_order_relaxed);
	leave(w, res);
	co__fifo_push(&l->head, &l->tail, w, next);
}

/* Frames of plain waiters parked on one engine, woken together: their
 * roots linked newest first, and the park counts to drop. */
struct wake_batch {
	co_engine *e;
	co_frame *first;
	unsigned parked;
};

static void batch_add(struct wake_batch *b, co_waiter *w)
{
	co_frame *r = co__wake_root(w->frame); /* NULL: woken twice (release builds) */

	b->e = w->engine;
	b->parked++;
	if (r == NULL)
		return;
	r->next = b->first;
	b->first = r;
}

static void batch_flush(struct wake_batch *b)
{
	if (b->parked)
		co__engine_wake_parked_chain(b->e, b->first, b->parked);
	b->first = NULL;
	b->parked = 0;
}

/* A plain waiter: woken by a wake of its frame, nothing before it. */
static int plain(const co_waiter *w)
{
	return !w->timed && w->engine &&
	       ((const co__wait_ops *)(const void *)w->aw.ops)->deliver == NULL;
}

/* The waiter's engine may be looking at it under the primitive's lock
 * (visit): wait for that look to end. Pairs with the seq_cst store of
 * visit in visit_claim (Dekker: our CLAIMED store came first); a look
 * that begins later sees CLAIMED and does not touch the primitive. */
static void wait_look(co_waiter *w)
{
	if (!atomic_load_explicit(&w->stop_link.visit, memory_order_seq_cst))
		return;
	co__fault_point(CO__POINT_WAKE_LOOK); /* tests: the look is held open */
	while (atomic_load_explicit(&w->stop_link.visit, memory_order_seq_cst))
		co__cpu_relax();
}

void co__wake_wait_looks(co__wake_list *l)
{
	for (co_waiter *w = l->head; w; w = w->next)
		wait_look(w);
}

void co__wake_all(co__wake_list *l)
{
	co_waiter *w, *next;
	struct wake_batch b = { NULL, NULL, 0 };

	/* Every look at these waiters ends before the first frame wakes: a
	 * woken frame may destroy the primitive at once (no frame waits on
	 * it any more) and free it, which a look still to come would lock. */
	co__wake_wait_looks(l);
	for (w = l->head; w; w = next) {
		next = w->next; /* before the wake: then w may be gone */
		if (plain(w)) {
			/* consecutive plain waiters of one engine: one visit,
			 * one kick (their frames in claim order) */
			if (b.parked && b.e != w->engine)
				batch_flush(&b);
			batch_add(&b, w);
			continue;
		}
		batch_flush(&b);
		if (w->timed) /* its engine removes the timer, then wakes it */
			co_engine_post(w->engine, &w->post);
		else
			deliver(w);
	}
	batch_flush(&b);
	l->head = l->tail = NULL;
}

/*
 * Wake first, unpark second, in one visit of the engine
 * (co__engine_wake_parked): the engine never finds itself idle with the
 * frame about to be pushed, and destroy waits for the visit to end;
 * nothing is touched after. w may be gone once the frame is pushed.
 */
void co__wait_wake_frame(co_waiter *w)
{
	co_engine *e = w->engine;
	co_frame *f = w->frame;

	if (e)
		co__engine_wake_parked(e, f);
	else
		co_wake(f);
}

/*
 * The engine's look at a parked waiter, on its thread (the timer's CQE,
 * co_cancel, a cancel stop): if it still waits, claim it with res under
 * its primitive's lock. The look is announced first (stop_link.visit) and the
 * state read after (seq_cst both); a releaser stores CLAIMED and then
 * reads visit. So either we see CLAIMED and never touch the primitive
 * (which may be gone), or the releaser sees our visit and waits for it to
 * end before it returns (co__wake_all). by_timer: the timer's own claim,
 * which needs no removal post. Returns 1 if this look claimed it.
 */
static int visit_claim(co_waiter *w, int res, co__wake_list *l)
{
	int claimed = 0;

	atomic_store_explicit(&w->stop_link.visit, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&w->state, memory_order_seq_cst) == CO__W_WAITING) {
		co__fault_point(CO__POINT_WAIT_VISIT); /* tests: a release comes first */
		co__spin_lock(w->lk);
		if (atomic_load_explicit(&w->state, memory_order_relaxed) == CO__W_WAITING) {
			if (l)
				co__wait_claim(w, res, l);
			else
				leave(w, res);
			claimed = 1;
		}
		co__spin_unlock(w->lk);
	}
	atomic_store_explicit(&w->stop_link.visit, 0, memory_order_release);
	return claimed;
}

/* ---- timed waits ---------------------------------------------------------------- */

/*
 * A timed wait is an io_uring timeout (absolute, CLOCK_MONOTONIC) on the
 * waiting frame's own engine. Whoever claims the waiter first decides its
 * result: a releaser or a cancel (on any thread), or the timer's CQE (on
 * the engine). A releaser cannot touch the engine's ring, so it posts
 * "remove the timer" to the engine. The frame is woken only once the
 * timer's CQE has come and, if a removal was posted, once that post has
 * run (pend counts what is still due): then neither the kernel nor the
 * post list holds a pointer into the waiter. Both happen on the engine's
 * thread, and neither touches the primitive after the claim.
 */
static void timed_arm(co_waiter *w, co_engine *e)
{
	struct io_uring_sqe *sqe = co_engine_sqe(e, &w->info, TAG_TIMER);
	struct __kernel_timespec *ts = co_engine_sqe_ts(e, sqe);

	co__ns_to_ts(ts, w->deadline);
	io_uring_prep_timeout(sqe, ts, 0, IORING_TIMEOUT_ABS);
}

void co__wait_rearm(co_waiter *w)
{
	timed_arm(w, w->engine);
}

/* One engine-side event of a timed wait is done; the last one wakes. */
static void timed_done(co_waiter *w)
{
	if (atomic_fetch_sub_explicit(&w->pend, 1, memory_order_acq_rel) == 1) {
		w->timed = 0;
		deliver(w);
	}
}

/* The timer's CQE: -ETIME (it fired), or -ECANCELED (removed after a claim,
 * or the engine cancelled all its I/O). If nobody claimed the waiter, the
 * timer decides the result. */
static void timer_cqe(co_engine *e, co_io_info *info, int res, unsigned cqe_flags, unsigned tag)
{
	co_waiter *w = co__container_of(info, co_waiter, info);

	(void)e; /* w->engine */
	(void)cqe_flags;
	(void)tag;
	w->timer_done = 1;
	CO__TRACE_TIMER(w->frame, w, res);
	visit_claim(w, res == -ECANCELED ? -ECANCELED : -ETIME, NULL);
	timed_done(w);
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
	timed_done(w);
}

/* ---- cancellation --------------------------------------------------------------- */

/* co_cancel on a parked frame (on its engine's thread): end the wait with
 * -ECANCELED, unless a release claimed it first (that result stands). */
int co__wait_cancel(co_awaiter *a, co_frame *f)
{
	co_waiter *w = (co_waiter *)a;
	co__wake_list l = CO__WAKE_LIST_INIT;

	(void)f;
	visit_claim(w, -ECANCELED, &l);
	co__wake_all(&l);
	return 0;
}

/* The cancel stop's call for a listed wait (lib/engine/engine_stop_list.c; visit is set). */
static void stop_cancel(co_stop_link *p)
{
	co__wait_cancel(&co__container_of(p, co_waiter, stop_link)->aw, NULL);
}

/* ---- the protocol ---------------------------------------------------------------- */

co_awaiter *co__wait_prep(co_waiter *w, const co__wait_ops *ops, atomic_uint *lk, void *obj)
{
	if (w == NULL)
		return co__einval_awaiter();
	w->deadline = 0;
	w->timed = 0;
	w->timer_done = 0;
	w->next = w->prev = NULL;
	w->q = NULL;
	w->frame = NULL;
	w->engine = NULL;
	w->res = 0;
	co__stop_link_init(&w->stop_link, stop_cancel);
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

void co__wait_limit(co_awaiter *aw, uint64_t deadline)
{
	co_waiter *w = (co_waiter *)aw;

	if (w->deadline == 0 || deadline < w->deadline)
		w->deadline = deadline ? deadline : 1; /* the earlier limit holds */
}

co_awaiter *co_wait_for(co_awaiter *aw, uint64_t ns)
{
	if (aw == NULL)
		return NULL; /* the await ends with -EINVAL (debug: trap) */
	if (aw->ops != NULL && CO__AW_KIND(aw->ops) == CO__AW_IO) {
		/* its prep queued the operation: cancelled, it takes nothing */
		co__io_refuse(aw);
		return aw;
	}
	if (aw->ops == NULL || CO__AW_KIND(aw->ops) != CO__AW_WAIT)
		return co__wrong_kind(aw); /* not a wait: -EINVAL (co_timeout limits any) */
	co__wait_limit(aw, co__deadline_after(ns));
	return aw;
}

int co__wait_park(co_waiter *w, co_frame *f, co_waitq *q)
{
	co_engine *e = co__tls_engine;
	int err = 0, timed;

	/* Parked on the engine that runs the frame; a frame resumed by hand
	 * or by a co_loop has none. */
	if (e && co_root(f)->runner != &e->runner)
		e = NULL;
	if (w->deadline && e == NULL)
		err = -ENXIO;
	else if (co_await_cancelled(f))
		err = -ECANCELED;
	else if (w->deadline && co__now_ns() >= w->deadline)
		err = -ETIME;
	if (err) {
		co__spin_unlock(w->lk);
		w->res = err;
		if (err != -ECANCELED || e == NULL)
			return 0;
		/* Cancelled on an engine: end the await through the ready
		 * queue, so that a coroutine retrying in a loop gives its
		 * engine control at every try (a cancel stop stays bounded). */
		co_wake(f);
		return 2;
	}
	w->frame = f;
	w->engine = e;
	timed = w->deadline != 0;
	w->timed = (unsigned char)timed;
	if (timed) {
		w->timer_done = 0;
		atomic_store_explicit(&w->pend, 1, memory_order_relaxed); /* the timer's CQE */
	}
	co__waitq_push(q, w);
	atomic_store_explicit(&w->state, CO__W_WAITING, memory_order_relaxed);
	/* Counted before anyone can see the waiter, so the matching unpark
	 * never comes first; listed for a cancel stop. */
	if (e)
		co__engine_park_wait(e, &w->stop_link);
	co__spin_unlock(w->lk);
	/* From here a releaser may claim w. An untimed waiter may then run on
	 * another thread: touch nothing. A timed one only runs after its
	 * timer's CQE, so arming it here is safe. */
	if (timed)
		timed_arm(w, e);
	return 1;
}

int co__wait_resume(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((co_waiter *)a)->res;
}
