/* SPDX-License-Identifier: MIT */
/*
 * The engine's state word (docs/design.md, "Engine"): every transition in
 * one table, the calls that take the engine as a run does, the wait of a
 * call that finds a destroy deciding, and which engine runs on the calling
 * thread. The bottom of the engine's files: it calls none of the others.
 */

#include <errno.h>
#include <sched.h>

#include "common/fault.h"
#include "engine_state.h"

/* The engine running on this thread; the layers above read it directly
 * (engine_state.h) rather than through co_engine_current's PLT call. */
_Thread_local co_engine *co__tls_engine __attribute__((tls_model("initial-exec")));

co_engine *co_engine_current(void)
{
	return co__tls_engine;
}

/* Every state change of the engine, in one table: the new state, or -1 if
 * the call is not legal in that state (the caller says why). */
static int next_state(int s, enum co__transition t)
{
	switch (t) {
	case CO__T_RUN:
		return s == CO_ENGINE_READY ? CO_ENGINE_RUNNING
		     : s == CO_ENGINE_STOPPED ? CO_ENGINE_STOPPING : -1;
	case CO__T_RUN_END:
		return s == CO_ENGINE_RUNNING ? CO_ENGINE_READY
		     : s == CO_ENGINE_STOPPING ? CO_ENGINE_STOPPED : -1;
	case CO__T_STOP:
		return s == CO_ENGINE_READY || s == CO_ENGINE_STOPPED ? CO_ENGINE_STOPPED
		     : s == CO_ENGINE_RUNNING || s == CO_ENGINE_STOPPING ? CO_ENGINE_STOPPING : -1;
	case CO__T_DESTROY:
		return s == CO_ENGINE_READY || s == CO_ENGINE_STOPPED ? CO_ENGINE_DYING : -1;
	}
	return -1;
}

int co__engine_transition(co_engine *e, enum co__transition t)
{
	int s = atomic_load_explicit(&e->state, memory_order_acquire), n;

	do {
		n = next_state(s, t);
		if (n < 0)
			return -1;
	} while (!atomic_compare_exchange_weak_explicit(&e->state, &s, n, memory_order_acq_rel,
							memory_order_acquire));
	return s;
}

int co_engine_state(co_engine *e)
{
	return e ? atomic_load_explicit(&e->state, memory_order_acquire) : -EINVAL;
}

/* The borrowers word: how many are inside (the low bits) and, above them,
 * how many have left. A taker refused while the word stayed the same with
 * no borrower inside but itself was refused by a run or a destroy, not by
 * a borrow: one that held the engine then is either still inside or has
 * left since. */
#define BORROW_LEFT (1u << 16)
#define BORROW_INSIDE(w) ((w) & (BORROW_LEFT - 1))

/* The engine this thread holds borrowed. A take of it from inside the
 * borrow (the on_done of a frame a cancel stop finishes there) would wait
 * for itself: it is refused instead. */
static _Thread_local co_engine *borrowed_here __attribute__((tls_model("initial-exec")));

int co__engine_borrowed_here(const co_engine *e)
{
	return borrowed_here == e;
}

/* Make t, waiting out the borrowers but mine (1: the caller is one). */
static int take(co_engine *e, enum co__transition t, unsigned mine)
{
	if (borrowed_here == e)
		return -1;
	for (;;) {
		unsigned w = atomic_load_explicit(&e->borrowers, memory_order_seq_cst);
		int s;

		co__fault_point(CO__POINT_TAKE); /* tests: a borrower comes now */
		s = co__engine_transition(e, t);
		if (s >= 0)
			return s;
		co__fault_point(CO__POINT_TAKE_REFUSED); /* tests: the borrower leaves now */
		if (BORROW_INSIDE(w) <= mine &&
		    atomic_load_explicit(&e->borrowers, memory_order_seq_cst) == w)
			return -1;
		sched_yield(); /* a borrow is short */
	}
}

/* A call found e DYING: a destroy decides, once the visitors inside have
 * left, whether it frees e or finds it busy (and e goes on as before).
 * Wait for the answer in the waiting part of the word (a visitor leaves
 * its visit for it in one add: the word never reads 0 meanwhile); a
 * destroy that frees e waits for the word to read 0 before it returns,
 * so e outlives the wait. */
int co__engine_destroy_answer(co_engine *e, int inside)
{
	int s;

	atomic_fetch_add_explicit(&e->visitors, CO__VISIT_WAITING - (unsigned)inside, memory_order_seq_cst);
	while ((s = atomic_load_explicit(&e->state, memory_order_seq_cst)) == CO_ENGINE_DYING) {
		co__fault_point(CO__POINT_DESTROY_WAITS); /* tests: the destroy answers now */
		sched_yield(); /* the answer is short */
	}
	if (s == CO_ENGINE_DEAD) {
		/* release: the last touch of e */
		atomic_fetch_sub_explicit(&e->visitors, CO__VISIT_WAITING, memory_order_release);
		return 0;
	}
	atomic_fetch_add_explicit(&e->visitors, (unsigned)inside - CO__VISIT_WAITING, memory_order_seq_cst);
	if (inside)
		co__engine_quiet_clear(e); /* as co__engine_visit_begin */
	return 1;
}

int co__engine_take(co_engine *e, enum co__transition t)
{
	for (;;) {
		int s = take(e, t, 0);

		if (s >= 0)
			return s;
		s = atomic_load_explicit(&e->state, memory_order_seq_cst);
		/* a destroy deciding: its answer (0: e is gone, not touched
		 * again), then the take again */
		if (s == CO_ENGINE_DYING && co__engine_destroy_answer(e, 0))
			continue;
		return s == CO_ENGINE_DEAD || s == CO_ENGINE_DYING ? -EINVAL : -EBUSY;
	}
}

/* One borrower fewer inside, one more left: a single add. */
static void borrow_leave(co_engine *e)
{
	atomic_fetch_add_explicit(&e->borrowers, BORROW_LEFT - 1, memory_order_seq_cst);
}

int co__engine_borrow(co_engine *e, co_engine **prev)
{
	atomic_fetch_add_explicit(&e->borrowers, 1, memory_order_seq_cst);
	if (take(e, CO__T_RUN, 1) >= 0) {
		*prev = borrowed_here;
		borrowed_here = e;
		co__fault_point(CO__POINT_BORROWED); /* tests: a run, a destroy or a borrow comes now */
		return 0;
	}
	borrow_leave(e);
	return -1;
}

void co__engine_unborrow(co_engine *e, co_engine *prev)
{
	borrowed_here = prev;
	co__engine_transition(e, CO__T_RUN_END);
	borrow_leave(e);
}
