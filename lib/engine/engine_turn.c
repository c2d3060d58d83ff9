/* SPDX-License-Identifier: MIT */
/*
 * Waits for the next turn of the loop (a game's "next frame"): a frame
 * that yields or transfers to the context it is on goes onto its engine's
 * later list, a co_next_turn / co_after_turns wait onto its turns list;
 * the next turn makes them ready again, behind the completions the turn
 * before took in. So a turn, and a tick of a manual context, never runs
 * such a frame twice (docs/engine.md, "Turns and ticks").
 */
#include <errno.h>

#include "common/awaiter.h"
#include "engine_turn.h"
#include "engine_state.h"
#include "engine_queue.h"
#include "engine_stop.h"

void co__engine_later(co_engine *e, co_frame *root)
{
	co__fifo_push(&e->later_head, &e->later_tail, root, next);
}

/*
 * The turn begins (owner thread): the turn waits whose last turn has come
 * (or that were cancelled) and every yielded frame join the ready queue;
 * the waits with turns left stay, in order.
 */
void co__engine_later_take(co_engine *e)
{
	co_turn *t = e->turns_head, *tnext, *keep_head = NULL, *keep_tail = NULL;
	co_frame *f = e->later_head, *next;
	int cancelling = co__engine_cancelling(e);

	e->turns_head = e->turns_tail = NULL;
	for (; t; t = tnext) {
		tnext = t->next;
		if (co__unlikely(cancelling))
			t->res = -ECANCELED;
		else if (t->left > 1 && t->res == 0) {
			t->left--;
			co__fifo_push(&keep_head, &keep_tail, t, next);
			continue;
		}
		t->left = 0;
		f = co__wake_root(t->frame); /* t is not touched after this */
		if (f)
			co__engine_push_owner(e, f);
	}
	e->turns_head = keep_head;
	e->turns_tail = keep_tail;
	f = e->later_head;
	e->later_head = e->later_tail = NULL;
	for (; f; f = next) {
		next = f->next;
		co__engine_push_owner(e, f);
	}
}

static int turn_ready(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((co_turn *)a)->left == 0; /* co_after_turns(t, 0): no wait */
}

static int turn_suspend(co_awaiter *a, co_frame *f)
{
	co_turn *t = (co_turn *)a;
	co_engine *e = co__tls_engine;
	co_frame *root = co_root(f);

	if (e == NULL || CO__LOAD_RELAXED(&root->runner) != &e->runner) {
		t->res = -ENXIO; /* not run by an engine on this thread */
		return 0;
	}
	/* Cancelled: still through the list, so that a frame retrying in a
	 * loop gives its engine the next turn. */
	if (co_await_cancelled(f)) {
		t->res = -ECANCELED;
		t->left = 1;
	}
	t->frame = root;
	co__fifo_push(&e->turns_head, &e->turns_tail, t, next);
	return 1;
}

static int turn_resume(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((co_turn *)a)->res;
}

/* co_cancel while it waits (on its engine's thread): it ends at the next
 * turn, with -ECANCELED. */
static int turn_cancel(co_awaiter *a, co_frame *f)
{
	(void)f;
	((co_turn *)a)->res = -ECANCELED;
	return 0;
}

static const co_awaiter_ops turn_ops = { turn_ready, turn_suspend, turn_resume, turn_cancel,
					 CO__AW_TURN, "next turn" };

co_awaiter *co_after_turns(co_turn *t, unsigned n)
{
	if (t == NULL)
		return NULL; /* awaiting NULL: -EINVAL */
	t->aw.ops = &turn_ops;
	t->frame = NULL;
	t->next = NULL;
	t->left = n;
	t->res = 0;
	return &t->aw;
}

co_awaiter *co_next_turn(co_turn *t)
{
	return co_after_turns(t, 1);
}
