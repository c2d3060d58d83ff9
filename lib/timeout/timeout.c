/* SPDX-License-Identifier: MIT */
/*
 * One time limit for any await (coring/timeout.h). I/O gets a linked
 * kernel timeout and a co_waiter its own timer (their files); everything
 * else gets a timer here, on the frame's engine, that cancels the await
 * when it fires. docs/timeout.md explains the rule; docs/design.md
 * (invariant 10) why the frame is pinned meanwhile.
 *
 * Everything of such a limit happens on one thread: the frame is pinned to
 * the engine that armed the timer (CO__CX_PINNED: no steal, no transfer),
 * so the timer's CQE, the await's end and any co_cancel all run on that
 * engine's thread, one after the other. The timer lives in engine-side
 * memory (malloc) because its CQE may come after the await has ended and
 * the co_limit has been reused or freed: the await's end detaches it
 * (owner = NULL) and asks the kernel to remove it; the CQE frees it.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include <coring/io.h>
#include <coring/timeout.h>
#include "common/awaiter.h"
#include "common/clock.h"
#include "engine/engine_internal.h"
#include "common/fault.h"
#include "io/io_internal.h"
#include "waiter/waiter_internal.h"

struct co__limit_timer {
	co_io_info info;              /* the timeout SQE's user_data (tag 0) */
	co_limit *owner;              /* NULL once the await has ended */
	co_frame *root;               /* the frame it limits (pinned) */
};

/* A limit ran out while root (pinned here, on this thread) is inside its
 * await: count it in the chain's LIMITS (co_cancelled() is true, every
 * await of the chain ends with -ECANCELED, a shield notwithstanding) and
 * end the wait the chain is in, if any. */
static void limit_fire(co_limit *l, co_frame *root)
{
	unsigned char old = __atomic_load_n(&root->cancel, __ATOMIC_RELAXED);

	CO__TRACE_TIMEOUT(root, l, 1);
	l->fired = 1;
	do {
		if ((old & CO__CANCEL_LIMITS) == CO__CANCEL_LIMITS)
			break; /* three limits out at once already: this one rides on them */
	} while (!__atomic_compare_exchange_n(&root->cancel, &old,
					      (unsigned char)(old + CO__CANCEL_LIMIT1), 1,
					      __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	l->counted = (old & CO__CANCEL_LIMITS) != CO__CANCEL_LIMITS;
	(void)co__cancel_wait(root); /* no cancel op down there: it ends when it ends */
}

/* The timer's CQE: -ETIME when it ran out, -ECANCELED when removed (the
 * await ended first: owner is NULL then) or when the engine cancelled all
 * its I/O (a cancel stop) while the await goes on: the stop then ends the
 * wait through its cancel op, else the frame, its limit gone, would wait
 * for an awaiter of its own that nothing ends. */
static void timer_cqe(co_engine *e, co_io_info *info, int res, unsigned cqe_flags, unsigned tag)
{
	struct co__limit_timer *t = co__container_of(info, struct co__limit_timer, info);
	co_limit *l = t->owner;

	(void)e;
	(void)cqe_flags;
	(void)tag;
	if (l) {
		l->timer = NULL;
		if (res == -ETIME) {
			co__fault_point(CO__POINT_LIMIT_TIMER); /* tests: the await completes first */
			limit_fire(l, t->root);
		} else if (res == -ECANCELED) {
			(void)co__cancel_wait(t->root);
		}
	}
	free(t);
}

/* Arm l's timer on e for root's await and pin root to e. */
static int limit_arm(co_limit *l, co_engine *e, co_frame *root)
{
	struct co__limit_timer *t = co__malloc(sizeof *t);
	struct io_uring_sqe *sqe;
	struct __kernel_timespec *ts;
	unsigned char old;

	if (t == NULL)
		return -ENOMEM;
	t->info.cb = timer_cqe;
	t->owner = l;
	t->root = root;
	sqe = co_engine_sqe(e, &t->info, 0);
	ts = co_engine_sqe_ts(e, sqe);
	co__ns_to_ts(ts, l->deadline);
	io_uring_prep_timeout(sqe, ts, 0, IORING_TIMEOUT_ABS);
	l->timer = t;
	old = __atomic_fetch_or(&root->cancel, (unsigned char)CO__CX_PINNED, __ATOMIC_ACQ_REL);
	l->pinned = !(old & CO__CX_PINNED); /* an outer limit may hold it */
	return 0;
}

static int limit_task(co_frame *f);
static const co_awaiter_ops limit_ops[2];

/* A limit outside l, in the chain, that ran out while three others were
 * out already and so was not counted (a rider), or NULL. Limits nest, so
 * those outside l are: the awaiter limits around l (from aw, the await's
 * outermost awaiter, inward) and the limits whose frames await f's chain
 * (from f up to the root). All of the chain's limits run on its pinned
 * engine's thread, this one. */
static co_limit *limit_rider(const co_limit *l, co_frame *f, co_awaiter *aw)
{
	for (; aw && aw != &l->aw && aw->ops == &limit_ops[0]; aw = ((co_limit *)aw)->inner)
		if (((co_limit *)aw)->fired && !((co_limit *)aw)->counted)
			return (co_limit *)aw;
	for (; f; f = CO__PARENT(f)) {
		co_limit *o = co__container_of(f, co_limit, co);

		if (f->fn == limit_task && o->fired && !o->counted)
			return o;
	}
	return NULL;
}

/* The limited await ended with res, on root's (pinned) engine: detach and
 * remove the timer, unpin, uncount. The value is res whenever the awaited
 * thing completed (an operation's result, a wait released, a child's
 * status), even if the limit ran out meanwhile: the timer and the
 * completion can come in one batch of CQEs, and a result that carries an
 * effect (bytes consumed, a descriptor opened, a lock taken) must reach
 * the caller. -ETIME replaces only -ECANCELED: the limit's cancel cut the
 * await short, and an await cut short has taken nothing (docs/timeout.md,
 * "The rule"). f and aw say where l sits in the chain (limit_rider).
 *
 * The chain's count of limits out holds three: a fourth rides on them
 * (limit_fire). Limits end innermost first, so a counted limit that ends
 * while a rider outside it still ends its await hands its count to the
 * rider: the chain stays cancelled until the last limit out has ended. */
static int limit_end(co_limit *l, co_frame *root, co_frame *f, co_awaiter *aw, int res)
{
	unsigned char c;

	if (l->timer) {
		struct io_uring_sqe *sqe = co_engine_sqe(co__tls_engine, NULL, 0);

		l->timer->owner = NULL;
		io_uring_prep_timeout_remove(sqe, (uint64_t)(uintptr_t)&l->timer->info, 0);
		l->timer = NULL;
	}
	if (l->pinned)
		__atomic_fetch_and(&root->cancel, (unsigned char)~CO__CX_PINNED, __ATOMIC_ACQ_REL);
	if (l->counted) {
		co_limit *rider = NULL;

		c = __atomic_load_n(&root->cancel, __ATOMIC_RELAXED);
		if ((c & CO__CANCEL_LIMITS) == CO__CANCEL_LIMITS)
			rider = limit_rider(l, f, aw);
		if (rider)
			rider->counted = 1;
		else
			__atomic_fetch_sub(&root->cancel, (unsigned char)CO__CANCEL_LIMIT1,
					   __ATOMIC_ACQ_REL);
	}
	l->pinned = l->counted = 0;
	if (!l->fired)
		return res;
	l->fired = 0;
	if (res != -ECANCELED)
		return res; /* it completed: its own value */
	/* co_cancel's own request (not shielded) keeps its -ECANCELED */
	c = __atomic_load_n(&root->cancel, __ATOMIC_RELAXED);
	if ((c & (CO__CANCEL_ASKED | CO__CANCEL_SHIELD)) == CO__CANCEL_ASKED)
		return res;
	return -ETIME;
}

/* Begin: the frame must run on the current engine. */
static int limit_begin(co_limit *l, co_frame *f)
{
	co_engine *e = co__tls_engine;
	co_frame *root = co_root(f);

	if (e == NULL || root->runner != &e->runner)
		return l->err = -ENXIO;
	return l->err = limit_arm(l, e, root);
}

/* ---- an awaiter with a cancel op -------------------------------------------- */

static int limit_ready(co_awaiter *a, co_frame *f)
{
	co_awaiter *in = ((co_limit *)a)->inner;

	return in->ops->ready ? in->ops->ready(in, f) : 0;
}

static int limit_suspend(co_awaiter *a, co_frame *f)
{
	co_limit *l = (co_limit *)a;

	if (limit_begin(l, f) < 0)
		return 0; /* not started: the value is the error */
	/* Pinned: the frame resumes on this thread, after we return. */
	return l->inner->ops->suspend(l->inner, f);
}

static int limit_resume(co_awaiter *a, co_frame *f)
{
	co_limit *l = (co_limit *)a;
	co_awaiter *in = l->inner;

	if (l->err)
		return l->err;
	return limit_end(l, co_root(f), f, f->u.aw, in->ops->resume ? in->ops->resume(in, f) : 0);
}

static int limit_cancel(co_awaiter *a, co_frame *f)
{
	co_awaiter *in = ((co_limit *)a)->inner;

	return in->ops->cancel(in, f);
}

/* A limit refused as a whole: given to co_deadline, co_fixed_file or
 * co_wait_for (co__wrong_kind), which limit no limit. What it was around
 * may be in the kernel already (a sleep, an operation submitted before
 * the limit: their preps queued them): refused too, it is cancelled and
 * the await ends with -EINVAL once the kernel has answered, having taken
 * nothing if it would wait (if it completed at once, its result is the
 * value). Anything else was not started, and is not. */
static int refused_started(co_awaiter *in)
{
	return CO__AW_KIND(in->ops) == CO__AW_IO || in->ops == &limit_ops[1];
}

static int refused_suspend(co_awaiter *a, co_frame *f)
{
	co_awaiter *in = ((co_limit *)a)->inner;

	if (CO__AW_KIND(in->ops) == CO__AW_IO)
		co__io_refuse(in);
	else if (in->ops == &limit_ops[0])
		in->ops = &limit_ops[1]; /* a limit inside: refused the same way */
	else
		return 0;
	return in->ops->suspend(in, f);
}

static int refused_resume(co_awaiter *a, co_frame *f)
{
	co_awaiter *in = ((co_limit *)a)->inner;
	int res = -EINVAL;

	/* -EINVAL too, unless an operation completed before its cancel:
	 * what it did (bytes taken, a descriptor made) reaches the caller */
	if (refused_started(in) && in->ops->resume)
		res = in->ops->resume(in, f);
	return res >= 0 ? res : -EINVAL;
}

static int refused_cancel(co_awaiter *a, co_frame *f)
{
	co_awaiter *in = ((co_limit *)a)->inner;

	return refused_started(in) ? in->ops->cancel(in, f) : 0;
}

/* [1], the refused form, is of the failed kind: it ends with an error, and
 * nothing refuses or limits it again (co__wrong_kind, co_timeout). */
static const co_awaiter_ops limit_ops[2] = {
	{ limit_ready, limit_suspend, limit_resume, limit_cancel, CO__AW_LIMIT, "limit" },
	{ NULL, refused_suspend, refused_resume, refused_cancel, CO__AW_FAILED, "limit refused" },
};

static void limit_reset(co_limit *l, uint64_t deadline)
{
	l->inner = NULL;
	l->child = NULL;
	l->timer = NULL;
	l->deadline = deadline;
	l->err = 0;
	l->fired = l->counted = l->pinned = 0;
}

/* Is l among the limits aw is (a limit) or holds (its inner ones)? Limits
 * chain through inner only, and no loop is ever made (co_timeout_at
 * refuses the link that would close one). */
static int limit_around(const co_awaiter *aw, const co_limit *l)
{
	for (; aw && (aw->ops == &limit_ops[0] || aw->ops == &limit_ops[1]);
	     aw = ((const co_limit *)aw)->inner)
		if (aw == &l->aw)
			return 1;
	return 0;
}

/* What cannot be limited ends with -EINVAL (never a wait without its
 * limit), in every build: the arguments are not NULL, so no debug trap. */
co_awaiter *(co_timeout_at)(co_limit *l, co_awaiter *aw, uint64_t deadline)
{
	if (l == NULL || aw == NULL)
		return NULL; /* the await ends with -EINVAL (debug: trap) */
	if (aw->ops == NULL)
		return co__einval_awaiter(); /* no ops: zeroed, or a fresh limit given itself */
	/* A limit of itself (one co_limit for two nested limits): refused as
	 * a whole, and what it is around, a sleep or an operation its prep
	 * queued, cancelled first, as co_wait_for refuses a limit. */
	if (aw == &l->aw)
		return co__wrong_kind(aw);
	if (limit_around(aw, l))
		return co__einval_awaiter(); /* l inside aw: a loop of limits */
	switch (CO__AW_KIND(aw->ops)) {
	case CO__AW_FAILED:
		return aw; /* the prep failed: it ends at once with its error */
	case CO__AW_TRANSFER:
		return co__einval_awaiter(); /* ends by itself; nothing to limit */
	case CO__AW_WAIT:
		co__wait_limit(aw, deadline);
		return aw;
	case CO__AW_IO: {
		uint64_t now = co__now_ns();

		if (co__io_link_timeout(aw, deadline > now ? deadline - now : 0) == 0)
			return aw;
		break; /* a sleep, or already submitted: the timer below */
	}
	default:
		break;
	}
	if (aw->ops->cancel == NULL)
		return co__einval_awaiter(); /* nothing could cut it short */
	limit_reset(l, deadline);
	l->aw.ops = &limit_ops[0];
	l->inner = aw;
	return &l->aw;
}

co_awaiter *(co_timeout)(co_limit *l, co_awaiter *aw, uint64_t ns)
{
	return co_timeout_at(l, aw, co__deadline_after(ns));
}

/* ---- a child coroutine -------------------------------------------------------- */

/* The frame co_timeout_task returns: it awaits the child under the limit. */
static int limit_task(co_frame *f)
{
	co_limit *l = co__container_of(f, co_limit, co);

	CO_BEGIN(f);
	/* A child that finished in the call (a reader's buffered read) has
	 * taken its effect: its status, with no timer to set up and so no
	 * -ENOMEM or -ENXIO in its place. */
	if (l->child->state & CO__ST_DONE)
		CO_RETURN(f, l->child->status);
	if (limit_begin(l, f) < 0)
		CO_RETURN(f, l->err); /* the child was not started */
	CO_AWAIT(f, l->child);
	CO_RETURN(f, limit_end(l, co_root(f), CO__PARENT(f), NULL, co_result(f)));
	CO_END(f);
}

/* A limit of a child that cannot be limited: its own frame (one co_limit
 * for two nested limits), or a child without a body (co_init given NULL,
 * or zeroed: awaited, it would trap in a debug build). The frame ends at
 * once with -EINVAL, nothing started, in every build. */
static int limit_refused_task(co_frame *f)
{
	CO_BEGIN(f);
	CO_RETURN(f, -EINVAL);
	CO_END(f);
}

co_frame *co_timeout_task_at(co_limit *l, co_frame *child, uint64_t deadline)
{
	if (l == NULL || child == NULL)
		return NULL; /* the await ends with -EINVAL (debug: trap) */
	limit_reset(l, deadline);
	co_init(&l->co, child == &l->co || child->fn == NULL ? limit_refused_task : limit_task);
	l->child = child;
	return &l->co;
}

co_frame *co_timeout_task(co_limit *l, co_frame *child, uint64_t ns)
{
	return co_timeout_task_at(l, child, co__deadline_after(ns));
}
