/* SPDX-License-Identifier: MIT */
/*
 * The cancel stop's list of parked waits (co_stop_link): a wait that can
 * end itself (a sync waiter, a pool job) links itself on its engine's
 * thread when it starts and unlinks itself from any thread when it ends;
 * a cancel stop ends every wait still listed. Under the engine's stop
 * spinlock.
 */
#include <sched.h>

#include "engine_stop_list.h"
#include "engine_state.h"
#include "engine_visit.h"
#include "common/spin.h"

/* co_stop_link.linked: which list holds it */
enum { STOP_LIST_NONE = 0, STOP_LIST_LISTED = 1, STOP_LIST_LINGER = 2 };

static co_stop_link **stop_list_list(co_engine *e, unsigned which)
{
	return which == STOP_LIST_LINGER ? &e->stop_linger_head : &e->stop_head;
}

static void stop_list_add(co_engine *e, co_stop_link *p, unsigned which)
{
	co_stop_link **head = stop_list_list(e, which);

	co__spin_lock(&e->stop_lock);
	p->prev = NULL;
	p->next = *head;
	if (*head)
		(*head)->prev = p;
	*head = p;
	p->linked = (unsigned char)which;
	co__spin_unlock(&e->stop_lock);
}

void co__engine_stop_list_add(co_engine *e, co_stop_link *p)
{
	stop_list_add(e, p, STOP_LIST_LISTED);
}

void co__engine_stop_list_linger(co_engine *e, co_stop_link *p)
{
	stop_list_add(e, p, STOP_LIST_LINGER);
}

static void stop_list_remove(co_engine *e, co_stop_link *p)
{
	co__dlist_unlink(stop_list_list(e, p->linked), (co_stop_link **)NULL, p);
	p->linked = STOP_LIST_NONE;
}

int co__engine_stop_list_remove(co_engine *e, co_stop_link *p)
{
	int took;

	co__spin_lock(&e->stop_lock);
	took = p->linked;
	if (took)
		stop_list_remove(e, p);
	co__spin_unlock(&e->stop_lock);
	return took;
}

/*
 * The cancel stop, on the owner thread: end every listed wait. Each one is
 * taken off the list and marked as visited under the stop lock; whoever
 * ends a wait first (a release on another thread, or p->cancel here)
 * decides its result, and a releaser that finds the wait visited waits
 * until p->cancel is done before it lets the frame go (lib/waiter/waiter.c), so
 * the primitive behind the wait outlives the visit.
 */
static void stop_list_visit_all(co_engine *e, unsigned which)
{
	co_stop_link *p;

	co__spin_lock(&e->stop_lock);
	while ((p = *stop_list_list(e, which)) != NULL) {
		stop_list_remove(e, p);
		atomic_store_explicit(&p->visit, 1, memory_order_seq_cst);
		co__spin_unlock(&e->stop_lock);
		if (which == STOP_LIST_LINGER)
			p->give_up(p);
		else
			p->cancel(p); /* may put p on the linger list */
		co__spin_lock(&e->stop_lock);
	}
	co__spin_unlock(&e->stop_lock);
}

void co__engine_stop_list_cancel_all(co_engine *e)
{
	stop_list_visit_all(e, STOP_LIST_LISTED);
}

/*
 * Waits a cancel stop could not end (a pool job that has started cannot
 * be interrupted) linger until the stop's grace runs out: meanwhile the
 * owner's turn sleeps no longer than that (lib/engine/engine_stop.c, co__engine_stop_turn_slow); then
 * each is given up, its frame woken to be finished for it (run_ready:
 * past the grace), while the work goes on elsewhere, held
 * (co__engine_hold).
 */
int co__engine_stop_list_lingering(co_engine *e)
{
	int any;

	co__spin_lock(&e->stop_lock);
	any = e->stop_linger_head != NULL;
	co__spin_unlock(&e->stop_lock);
	return any;
}

void co__engine_stop_list_give_up_all(co_engine *e)
{
	stop_list_visit_all(e, STOP_LIST_LINGER);
}

void co__engine_hold(co_engine *e)
{
	atomic_fetch_add_explicit(&e->held, 1, memory_order_relaxed);
	co__parked_drop(e, 1);
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
	co__held_drop(e);
	co__engine_visit_end(e, visit);
}

int co__engine_held(co_engine *e)
{
	return atomic_load_explicit(&e->bufrings, memory_order_acquire) != 0 ||
	       atomic_load_explicit(&e->held, memory_order_acquire) != 0;
}
