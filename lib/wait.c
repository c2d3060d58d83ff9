/* SPDX-License-Identifier: MIT */
/*
 * The waiter core: parking a frame on a primitive, claiming it, waking it
 * on its own engine, and timed waits. The protocol is explained in
 * docs/sync.md ("Waking across contexts", "The timeout race").
 */
#include <errno.h>
#include <sched.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#include <coring/io.h>
#include "wait.h"
#include "internal.h"

/* Not in the uapi headers liburing 2.3 ships (Linux 6.7 values). */
#ifndef IORING_OP_FUTEX_WAIT
#define IORING_OP_FUTEX_WAIT 51
#endif
#ifndef FUTEX2_SIZE_U32
#define FUTEX2_SIZE_U32 0x02
#endif
#ifndef FUTEX2_PRIVATE
#define FUTEX2_PRIVATE 128
#endif

enum { TAG_FUTEX = 0, TAG_TIMER = 1 };

/* Test hook: 1 or -1 forces the FUTEX_WAIT probe's answer; 0 probes. */
int co__wait_futex_override;

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

static int futex_wait_supported(void)
{
	static atomic_int cached; /* 0 unknown, 1 yes, -1 no; a benign recompute race */
	int v = co__wait_futex_override;

	if (v)
		return v > 0;
	v = atomic_load_explicit(&cached, memory_order_relaxed);
	if (v == 0) {
		struct io_uring_probe *p = io_uring_get_probe();

		v = p && io_uring_opcode_supported(p, IORING_OP_FUTEX_WAIT) ? 1 : -1;
		if (p)
			io_uring_free_probe(p);
		atomic_store_explicit(&cached, v, memory_order_relaxed);
	}
	return v > 0;
}

/*
 * On the waiting frame's engine thread: an io_uring FUTEX_WAIT on w->word
 * (asleep while it is 0) with a linked absolute timeout. Whoever claims
 * the waiter sets the word to 1 and wakes the futex; the timer cancels the
 * wait. Either way both CQEs come back to this engine, which then resumes
 * the frame: the frame never runs while the kernel still holds w.
 */
static void timed_arm(co_waiter *w, co_engine *e)
{
	struct io_uring_sqe *sqe = co_engine_sqe(e, &w->info, TAG_FUTEX);
	struct __kernel_timespec *ts;

	io_uring_prep_rw(IORING_OP_FUTEX_WAIT, sqe, FUTEX2_SIZE_U32 | FUTEX2_PRIVATE,
			 (const void *)&w->word, 0, 0);
	sqe->addr3 = FUTEX_BITSET_MATCH_ANY;
	sqe->flags |= IOSQE_IO_LINK;
	sqe = co_engine_sqe_link(e, &w->info, TAG_TIMER); /* room kept by co_engine_sqe */
	ts = co_engine_sqe_ts(e, sqe);
	ts->tv_sec = (long long)(w->deadline / CO_S);
	ts->tv_nsec = (long long)(w->deadline % CO_S);
	io_uring_prep_link_timeout(sqe, ts, IORING_TIMEOUT_ABS);
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

/*
 * Both CQEs of a timed wait arrived (on the frame's engine). If nobody
 * claimed the waiter, the timer decides: it fired (its result is anything
 * but -ECANCELED: -ETIME, or the count of requests it cancelled), or the
 * engine cancelled everything (-ECANCELED), or the futex woke spuriously
 * (sleep again).
 */
static void timed_cqe(co_io_info *info, int res, unsigned cqe_flags, unsigned tag)
{
	co_waiter *w = co__container_of(info, co_waiter, info);

	(void)cqe_flags;
	if (tag == TAG_TIMER)
		w->tres = res;
	else
		w->fres = res;
	if (--w->pending)
		return;
	co__spin_lock(w->lk); /* acquire: sees what a claimer wrote (res, item) */
	if (atomic_load_explicit(&w->state, memory_order_relaxed) == CO__W_WAITING) {
		if (w->tres != -ECANCELED) {
			leave(w, -ETIME);
		} else if (w->fres == 0 || w->fres == -EAGAIN) {
			w->pending = 2; /* a spurious wake: the word is still 0 */
			co__spin_unlock(w->lk);
			timed_arm(w, w->engine);
			return;
		} else {
			leave(w, w->fres < 0 ? w->fres : -ECANCELED); /* -ECANCELED: cancel-all */
		}
	}
	co__spin_unlock(w->lk);
	w->timed = 0;
	deliver(w);
}

/* ---- the protocol ---------------------------------------------------------------- */

co_awaiter *co__wait_prep(co_waiter *w, const co__wait_ops *ops, atomic_uint *lk, void *obj)
{
	if (w == NULL)
		return &einval_aw;
	w->deadline = 0;
	w->timed = 0;
	w->pending = 0;
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
	w->info.cb = timed_cqe;
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
	(void)futex_wait_supported(); /* probe now, not under a primitive's lock */
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
	if (e && co_root(f)->sched != &e->sched)
		e = NULL;
	if (co_cancelled(f))
		err = -ECANCELED;
	else if (w->deadline && co_now_ns() >= w->deadline)
		err = -ETIME;
	else if (w->deadline && e == NULL)
		err = -ENXIO;
	else if (w->deadline && !futex_wait_supported())
		err = -EOPNOTSUPP;
	if (err) {
		co__spin_unlock(w->lk);
		w->res = err;
		return 0;
	}
	w->frame = f;
	w->engine = e;
	timed = w->deadline != 0;
	w->timed = (unsigned char)timed;
	if (timed) {
		atomic_store_explicit(&w->word, 0, memory_order_relaxed); /* read by the kernel */
		w->pending = 2;
	}
	atomic_store_explicit(&w->state, CO__W_WAITING, memory_order_relaxed);
	co__waitq_push(q, w);
	/* Counted before anyone can see the waiter, so the matching unpark
	 * never comes first. */
	if (e)
		co_engine_park(e);
	co__spin_unlock(w->lk);
	/* From here a releaser may claim w. An untimed waiter may then run on
	 * another thread: touch nothing. A timed one only runs after both of
	 * its CQEs, so arming it here is safe. */
	if (timed)
		timed_arm(w, e);
	return 1;
}

void co__wait_claim(co_waiter *w, int res, co__wake_list *l)
{
	leave(w, res);
	if (w->timed) {
		/* The kernel compares the word when it issues the FUTEX_WAIT: one
		 * not yet issued fails with -EAGAIN, one asleep is woken here.
		 * Both under the lock: once it is released the engine may
		 * complete the wait, and the frame may end and free w. (A wake
		 * of a private futex only hashes the address.) */
		atomic_store_explicit(&w->word, 1, memory_order_relaxed);
		syscall(SYS_futex, (void *)&w->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		return;
	}
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
 * stands). A timed waiter wakes through its futex, like any claim. */
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
