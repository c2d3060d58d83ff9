/* SPDX-License-Identifier: MIT */
/*
 * The cancel stop's list of parked waits (co_parking): a wait that can
 * end itself (a sync waiter, a pool job) links itself on its engine's
 * thread when it starts and unlinks itself from any thread when it ends;
 * a cancel stop ends every wait still listed. Under the engine's park
 * spinlock.
 */
#include <sched.h>

#include "engine_impl.h"
#include "common/spin.h"

/* co_parking.linked: which list holds it */
enum { PARK_NONE = 0, PARK_LISTED = 1, PARK_LINGER = 2 };

static co_parking **park_list(co_engine *e, unsigned which)
{
	return which == PARK_LINGER ? &e->linger_head : &e->park_head;
}

static void park_add(co_engine *e, co_parking *p, unsigned which)
{
	co_parking **head = park_list(e, which);

	co__spin_lock(&e->park_lock);
	p->prev = NULL;
	p->next = *head;
	if (*head)
		(*head)->prev = p;
	*head = p;
	p->linked = (unsigned char)which;
	co__spin_unlock(&e->park_lock);
}

void co__engine_park_link(co_engine *e, co_parking *p)
{
	park_add(e, p, PARK_LISTED);
}

void co__engine_park_linger(co_engine *e, co_parking *p)
{
	park_add(e, p, PARK_LINGER);
}

static void park_remove(co_engine *e, co_parking *p)
{
	co__dlist_unlink(park_list(e, p->linked), (co_parking **)NULL, p);
	p->linked = PARK_NONE;
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
 * until p->cancel is done before it lets the frame go (lib/waiter/waiter.c), so
 * the primitive behind the wait outlives the visit.
 */
static void park_visit_all(co_engine *e, unsigned which)
{
	co_parking *p;

	co__spin_lock(&e->park_lock);
	while ((p = *park_list(e, which)) != NULL) {
		park_remove(e, p);
		atomic_store_explicit(&p->visit, 1, memory_order_seq_cst);
		co__spin_unlock(&e->park_lock);
		if (which == PARK_LINGER)
			p->give_up(p);
		else
			p->cancel(p); /* may put p on the linger list */
		co__spin_lock(&e->park_lock);
	}
	co__spin_unlock(&e->park_lock);
}

void co__engine_park_cancel_all(co_engine *e)
{
	park_visit_all(e, PARK_LISTED);
}

/*
 * Waits a cancel stop could not end (a pool job that has started cannot
 * be interrupted) linger until the stop's grace runs out: meanwhile the
 * owner's turn sleeps no longer than that (lib/engine/engine_stop.c, co__engine_stop_turn_slow); then
 * each is given up, its frame woken to be finished for it (run_ready:
 * past the grace), while the work goes on elsewhere, held
 * (co__engine_hold).
 */
int co__engine_park_lingering(co_engine *e)
{
	int any;

	co__spin_lock(&e->park_lock);
	any = e->linger_head != NULL;
	co__spin_unlock(&e->park_lock);
	return any;
}

void co__engine_park_give_up_all(co_engine *e)
{
	park_visit_all(e, PARK_LINGER);
}

void co__engine_hold(co_engine *e)
{
	atomic_fetch_add_explicit(&e->held, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&e->parked, 1, memory_order_release);
}

/* Never refused: a held engine cannot be destroyed, so it is there; a
 * destroy in progress gives up (-EBUSY), and the visit is tried again. */
void co__engine_unhold(co_engine *e)
{
	int visit;

	for (;;) {
		visit = co__engine_visit_begin(e);
		if (co__engine_alive(e))
			break;
		co__engine_visit_end(e, visit);
		sched_yield();
	}
	atomic_fetch_sub_explicit(&e->held, 1, memory_order_release);
	co__engine_visit_end(e, visit);
}

int co__engine_held(co_engine *e)
{
	return atomic_load_explicit(&e->bufrings, memory_order_acquire) != 0 ||
	       atomic_load_explicit(&e->held, memory_order_acquire) != 0;
}
