/* SPDX-License-Identifier: MIT */
/* when_all / when_any: children spawned on the awaiting frame's engine; co_spawn_on:
 * one child on another engine. */
#include <errno.h>

#include <coring/when.h>
#include "common/fault.h"
#include "waiter/waiter_internal.h"

/* Children spawned so far. A child that finishes on another context (a
 * thief took it) may look while the awaiting frame's suspend still spawns
 * the others: seq_cst, against that suspend's look at the winner after
 * its last spawn (when_suspend), so that a child spawned after the look
 * here is cancelled there. */
static unsigned spawned(const co_when *w)
{
	return atomic_load_explicit(&w->spawned, memory_order_seq_cst);
}

/* Cancel every spawned child but one. A child may run on another context
 * and be finishing right now: co_cancel, which looks at it atomically,
 * answers -EALREADY for one that finished and touches nothing else. */
static void cancel_others(co_when *w, const co_frame *except)
{
	unsigned n = spawned(w);

	for (unsigned i = 0; i < n; i++)
		if (w->kids[i] != except)
			co_cancel(w->kids[i]);
}

/* The last count of left dropped (the last child finished, or the look of
 * a cancel stop ended): wake the awaiting frame, then drop its park count
 * (the order is explained in lib/waiter/waiter.c, co__wait_wake_frame).
 * w stays on the engine's stop list until the frame's resume takes it off
 * (when_unlist): on the engine's thread, so that the lock's line stays
 * there (a child on another context finishes here). */
static void finish(co_when *w)
{
	co_engine *e = w->engine;
	co_frame *p = w->frame;

	co_wake(p);
	co_engine_unpark(e);
}

/* Off the stop list, at the await's end (on the frame's engine, or the
 * context it followed its waker to). A stop that took w off the list
 * first may be looking at left (when_stop_cancel): wait for that look to
 * end, a few instructions, before w may go. */
static void when_unlist(co_when *w)
{
	if (!co__engine_stop_list_remove(w->engine, &w->stop_link))
		while (atomic_load_explicit(&w->stop_link.visit, memory_order_seq_cst))
			co__cpu_relax();
}

/* A child's on_done, on the engine thread that finished it. */
static void kid_done(co_frame *kid)
{
	co_when *w = kid->user;

	if (w->any) {
		unsigned i = 0;
		int none = -1;

		while (w->kids[i] != kid)
			i++;
		/* The first to finish wins and cancels the others; they finish
		 * in turn, and the last one wakes the awaiting frame. */
		if (atomic_compare_exchange_strong_explicit(&w->winner, &none, (int)i,
							    memory_order_seq_cst, memory_order_relaxed))
			cancel_others(w, kid);
	}
	/* acq_rel: the last decrement sees every child's end; the awaiting
	 * frame then reads their statuses after its wake (the ready ring
	 * orders that). */
	if (atomic_fetch_sub_explicit(&w->left, 1, memory_order_acq_rel) == 1)
		finish(w);
}

static int when_suspend(co_awaiter *a, co_frame *f)
{
	co_when *w = (co_when *)a;
	co_engine *e = co_engine_current();
	unsigned i, missing;

	if (w->err || w->n == 0)
		return 0;
	if (co_await_cancelled(f)) {
		w->cancelled = 1; /* -ECANCELED at once, nothing spawned (co.h's rule) */
		return 0;
	}
	if (e == NULL || co_root(f)->runner != &e->runner) {
		w->err = -ENXIO;
		return 0;
	}
	/* The same under a cancel stop of e, shield or not, as a sync wait:
	 * the stop looked at its list of waits already, and children
	 * spawned now, on another engine, would hold it. */
	if (co__engine_cancelling(e)) {
		w->cancelled = 1;
		return 0;
	}
	/* Each child must be fresh, and there once: mark them as we go (they
	 * are nobody else's yet), then take the marks off. */
	for (i = 0; i < w->n; i++) {
		if (!co__frame_fresh(w->kids[i]))
			break;
		w->kids[i]->state |= CO__ST_SPAWNED;
	}
	missing = i;
	while (missing--)
		w->kids[missing]->state &= ~(unsigned)CO__ST_SPAWNED;
	if (i < w->n) {
		w->err = -EINVAL; /* not fresh, or the same child twice */
		return 0;
	}
	w->frame = f;
	w->engine = e;
	/* a count for each child and one for this suspend, which w outlives
	 * however fast the children end */
	atomic_store_explicit(&w->left, w->n + 1, memory_order_relaxed);
	atomic_store_explicit(&w->winner, -1, memory_order_relaxed);
	/* parked, and listed for a cancel stop of e, which cancels the
	 * children wherever they run (when_stop_cancel): before any child
	 * can finish */
	co__engine_park_wait(e, &w->stop_link);
	for (i = 0; i < w->n; i++) {
		co_frame *k = w->kids[i];
		int err;

		k->on_done = kid_done;
		k->user = w;
		/* before the spawn publishes k */
		atomic_store_explicit(&w->spawned, i + 1, memory_order_seq_cst);
		err = co_engine_spawn(w->target ? w->target : e, k);
		if (err < 0) {
			atomic_store_explicit(&w->spawned, i, memory_order_relaxed);
			k->on_done = NULL;
			k->user = NULL;
			w->err = err;
			break;
		}
		co__fault_point(CO__POINT_WHEN_SPAWNED); /* tests: a thief ends k now */
	}
	/* when_any: a child that won while the others were being spawned
	 * cancelled those spawned before its look (cancel_others); these are
	 * the ones after (a second co_cancel of the first ones changes
	 * nothing) */
	if (w->any) {
		int won = atomic_load_explicit(&w->winner, memory_order_seq_cst);

		if (won >= 0)
			cancel_others(w, w->kids[won]);
	}
	/* The children never spawned count as finished, and so does this
	 * suspend; if that was the last count, every spawned one has
	 * finished already. */
	missing = w->n - i + 1;
	if (atomic_fetch_sub_explicit(&w->left, missing, memory_order_acq_rel) == missing) {
		co_engine_unpark(e); /* the resume takes w off the stop list */
		return 0;
	}
	return 1;
}

/* when_any's value: the winner's index. Under the awaiting frame's cancel
 * (or a limit), a winner the cancel cut short (-ECANCELED: it took
 * nothing) gives way to a child that finished with its work done, if any
 * did (the lowest index): that work is never reported as not done. */
static int any_winner(const co_when *w)
{
	int winner = atomic_load_explicit(&w->winner, memory_order_relaxed);

	if (w->cancelled && winner >= 0 && co_status(w->kids[winner]) == -ECANCELED)
		for (unsigned i = 0; i < spawned(w); i++)
			if (co_status(w->kids[i]) != -ECANCELED)
				return (int)i;
	return winner;
}

/* A cancel (or a limit) of the awaiting frame cut the await short: no child
 * was spawned, or one the value rests on ended with -ECANCELED. Children
 * that finished on their own first keep their statuses, and the await its
 * value: a child's work is never reported as not done. */
static int when_cut_short(const co_when *w)
{
	int winner;

	if (spawned(w) == 0)
		return 1;
	if (w->any) {
		winner = any_winner(w);
		return winner < 0 || co_status(w->kids[winner]) == -ECANCELED;
	}
	for (unsigned i = 0; i < spawned(w); i++)
		if (co_status(w->kids[i]) == -ECANCELED)
			return 1;
	return 0;
}

static int when_resume(co_awaiter *a, co_frame *f)
{
	co_when *w = (co_when *)a;

	(void)f;
	if (w->engine) /* it waited: listed */
		when_unlist(w);
	if (w->cancelled && when_cut_short(w))
		return -ECANCELED;
	if (w->err)
		return w->err;
	if (w->any)
		return any_winner(w);
	if (w->target) /* co_spawn_on: the child's own status */
		return co_status(w->kids[0]);
	for (unsigned i = 0; i < w->n; i++)
		if (co_status(w->kids[i]) < 0)
			return co_status(w->kids[i]);
	return 0;
}

/* co_cancel on the awaiting frame: cancel the children, still wait. */
static int when_cancel(co_awaiter *a, co_frame *f)
{
	co_when *w = (co_when *)a;

	(void)f;
	w->cancelled = 1;
	cancel_others(w, NULL);
	/* co_spawn_on's child on an engine that does not run (a context not
	 * started, a manual one not ticked) would wait for that engine's next
	 * turn, and the await with it: if it has not started, it is finished
	 * for it now (-ECANCELED, never run; kid_done wakes us) */
	if (w->target && spawned(w) == 1)
		co__engine_cancel_unstarted(w->target, w->kids[0]);
	return 0;
}

static const co_awaiter_ops when_ops = { NULL, when_suspend, when_resume, when_cancel,
					     CO__AW_WHEN, "when" };

/*
 * A cancel stop of the awaiting frame's engine, on its thread, w taken off
 * the stop list (visit set): the children are cancelled wherever they run
 * (another context, an engine that does not run: when_cancel), as
 * co_cancel of the frame would, shield or not, as the stop ends every
 * wait. Unless the last child has finished already (left 0: the frame is
 * woken, and its resume waits for this look to end), the look takes a count of left
 * first, as the suspend does, so that w outlives the cancel however fast
 * the children end (a child that never started is finished inside it);
 * the last count, this one or a child's, finishes the await.
 */
static void when_stop_cancel(co_stop_link *link)
{
	co_when *w = co__container_of(link, co_when, stop_link);
	unsigned left = atomic_load_explicit(&w->left, memory_order_acquire);

	while (left != 0 && !atomic_compare_exchange_weak_explicit(&w->left, &left, left + 1,
								   memory_order_acq_rel,
								   memory_order_acquire))
		;
	atomic_store_explicit(&w->stop_link.visit, 0, memory_order_seq_cst);
	if (left == 0)
		return;
	when_cancel(&w->aw, w->frame);
	if (atomic_fetch_sub_explicit(&w->left, 1, memory_order_acq_rel) == 1)
		finish(w);
}

static co_awaiter *when_prep(co_when *w, co_frame *const *kids, unsigned n, int any)
{
	if (w == NULL)
		return co__einval_awaiter();
	w->target = NULL;
	w->aw.ops = &when_ops;
	w->kids = kids;
	w->n = n;
	atomic_init(&w->spawned, 0);
	w->any = any;
	w->cancelled = 0;
	w->err = (kids == NULL && n) || (any && n == 0) ? -EINVAL : 0;
	w->frame = NULL;
	w->engine = NULL;
	atomic_init(&w->left, 0);
	atomic_init(&w->winner, -1);
	co__stop_link_init(&w->stop_link, when_stop_cancel);
	return &w->aw;
}

co_awaiter *co_when_all(co_when *w, co_frame *const *kids, unsigned n)
{
	return when_prep(w, kids, n, 0);
}

co_awaiter *co_when_any(co_when *w, co_frame *const *kids, unsigned n)
{
	return when_prep(w, kids, n, 1);
}

co_awaiter *co_spawn_on(co_when *w, co_engine *e, co_frame *child)
{
	co_awaiter *a;

	if (w == NULL)
		return co__einval_awaiter();
	w->one = child;
	a = when_prep(w, &w->one, 1, 0);
	w->target = e;
	if (e == NULL)
		w->err = -EINVAL;
	return a;
}
