/* SPDX-License-Identifier: MIT */
/*
 * The engine's state word (docs/design.md, "Engine"): every transition in
 * one table, the calls that take the engine as a run does, and which
 * engine runs on the calling thread. The bottom of the engine's files:
 * it calls none of the others.
 */

#include <errno.h>
#include <sched.h>

#include "engine_impl.h"

/* The engine running on this thread; the layers above read it directly
 * (engine_internal.h) rather than through co_engine_current's PLT call. */
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

int co__engine_take(co_engine *e)
{
	while (co__engine_transition(e, CO__T_RUN) < 0) {
		if (!atomic_load_explicit(&e->borrowers, memory_order_acquire))
			return -1;
		sched_yield();
	}
	return 0;
}
