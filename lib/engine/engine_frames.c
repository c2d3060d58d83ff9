/* SPDX-License-Identifier: MIT */
/*
 * The engine's list of its live root frames, for a view of the coroutines
 * (coring/view.h): a frame is listed when its engine takes it (a spawn, a
 * transfer or a steal that brings it) and unlisted when it finishes or
 * leaves; the loop notes in its slot the turn it last ran in. Slots never
 * move, so a frame's index stays valid while it is listed; freed slots
 * are reused first. Only a thief, which takes frames from another engine's
 * ready ring on its own thread, changes a list not its own: engines that
 * may be stolen from take view_lock for every change, and a view of them
 * holds it while it reads (the loop's note of a turn is the owner's alone,
 * in a slot no thief touches). lib/engine/engine_view.c reads it.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>

#include "common/clock.h"
#include "engine_frames.h"
#include "common/fault.h"
#include "common/spin.h"

#ifdef CO_WITH_VIEW

#define VIEW_FIRST_SLOTS 16u

int co__view_init(co_engine *e)
{
	co__stamp_init();
	e->view = co__calloc(VIEW_FIRST_SLOTS, sizeof *e->view);
	if (e->view == NULL)
		return -ENOMEM;
	e->view_cap = VIEW_FIRST_SLOTS;
	e->view_n = 1; /* slot 0: the sink */
	e->view_free = 0;
	return 0;
}

void co__view_fini(co_engine *e)
{
	/* Views of other threads still waiting on e see it dying within a
	 * slice, take their requests back and leave: then none touches e. */
	while (atomic_load_explicit(&e->viewers, memory_order_acquire) != 0)
		sched_yield();
	free(e->view);
	e->view = NULL;
	e->view_cap = e->view_n = 0;
}

void co__view_lock(co_engine *e)
{
	if (e->stealing)
		co__spin_lock(&e->view_lock);
}

void co__view_unlock(co_engine *e)
{
	if (e->stealing)
		co__spin_unlock(&e->view_lock);
}

/* Room for one more slot: 1, or 0 (no memory: the frame stays unlisted). */
static int view_grow(co_engine *e)
{
	unsigned cap = e->view_cap * 2;
	struct co__view_slot *v;

	if (cap <= e->view_cap)
		return 0;
	v = co__realloc(e->view, cap * sizeof *v);
	if (v == NULL)
		return 0;
	e->view = v;
	e->view_cap = cap;
	return 1;
}

void co__view_add(co_engine *e, co_frame *f)
{
	unsigned i;

	if (f->view_slot != 0)
		return;
	co__view_lock(e);
	if (e->view_free != 0) {
		i = e->view_free;
		e->view_free = (unsigned)e->view[i].since;
	} else if (e->view_n < e->view_cap || view_grow(e)) {
		i = e->view_n++;
	} else {
		co__view_unlock(e);
		return;
	}
	e->view[i].f = f;
	e->view[i].since = e->turn_stamp ? e->turn_stamp : co__stamp();
	f->view_slot = i;
	co__view_unlock(e);
}

void co__view_del(co_engine *e, co_frame *f)
{
	unsigned i = f->view_slot;

	if (i == 0)
		return;
	co__view_lock(e);
	e->view[i].f = NULL;
	e->view[i].since = e->view_free;
	e->view_free = i;
	f->view_slot = 0;
	co__view_unlock(e);
}

#else /* without the view (meson -Dview=false): no list, no request */

int co__view_init(co_engine *e)
{
	(void)e;
	return 0;
}

void co__view_fini(co_engine *e)
{
	(void)e;
}

void co__view_lock(co_engine *e)
{
	(void)e;
}

void co__view_unlock(co_engine *e)
{
	(void)e;
}

#endif
