/* SPDX-License-Identifier: MIT */
/*
 * The cancel stop's list of parked waits (co_parking): a wait that can
 * end itself (a sync waiter, a pool job) links itself on its engine's
 * thread when it starts and unlinks itself from any thread when it ends;
 * a cancel stop ends every wait still listed. Under the engine's park
 * spinlock.
 */
#include "engine_impl.h"
#include "spin.h"

void co__engine_park_link(co_engine *e, co_parking *p)
{
	co__spin_lock(&e->park_lock);
	p->prev = NULL;
	p->next = e->park_head;
	if (e->park_head)
		e->park_head->prev = p;
	e->park_head = p;
	p->linked = 1;
	co__spin_unlock(&e->park_lock);
}

static void park_remove(co_engine *e, co_parking *p)
{
	co__dlist_unlink(&e->park_head, (co_parking **)NULL, p);
	p->linked = 0;
}

int co__engine_park_unlink(co_engine *e, co_parking *p)
{
	int took;

	co__spin_lock(&e->park_lock);
	took = p->linked;
	if (took)
		park_remove(e, p);
	co__spin_unlock(&e->park_lock);
	return took;
}

/*
 * The cancel stop, on the owner thread: end every listed wait. Each one is
 * taken off the list and marked as visited under the park lock; whoever
 * ends a wait first (a release on another thread, or p->cancel here)
 * decides its result, and a releaser that finds the wait visited waits
 * until p->cancel is done before it lets the frame go (lib/waiter.c), so
 * the primitive behind the wait outlives the visit.
 */
void co__engine_park_cancel_all(co_engine *e)
{
	co_parking *p;

	co__spin_lock(&e->park_lock);
	while ((p = e->park_head) != NULL) {
		park_remove(e, p);
		atomic_store_explicit(&p->visit, 1, memory_order_seq_cst);
		co__spin_unlock(&e->park_lock);
		p->cancel(p);
		co__spin_lock(&e->park_lock);
	}
	co__spin_unlock(&e->park_lock);
}
