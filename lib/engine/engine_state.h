/* SPDX-License-Identifier: MIT */
/*
 * engine_state.c (not installed): the state word's transitions, taking
 * and borrowing the engine, which engine runs on this thread; the quiet
 * flag's taking down, which a visit and every turn begin with.
 */
#ifndef CORING_LIB_ENGINE_STATE_H
#define CORING_LIB_ENGINE_STATE_H

#include "engine_impl.h"

/* The engine running on the calling thread (co_engine_current without the
 * call): hidden, so the library reads it straight from its TLS block. */
extern _Thread_local co_engine *co__tls_engine
	__attribute__((tls_model("initial-exec"), visibility("hidden")));

/* The calls that change the engine's state (the table is next_state in
 * lib/engine/engine_state.c). */
enum co__transition {
	CO__T_RUN,       /* co_engine_run starts */
	CO__T_RUN_END,   /* co_engine_run returns */
	CO__T_STOP,      /* co_engine_stop */
	CO__T_DESTROY,   /* co_engine_destroy begins (it may give up: -EBUSY) */
};

/* Apply t; returns the state it was applied to, or -1 (nothing changed). */
int co__engine_transition(co_engine *e, enum co__transition t);
/* co__engine_transition(e, t) for a run or a tick (CO__T_RUN) or a
 * destroy (CO__T_DESTROY), waiting out a thread that borrows e and a
 * destroy that decides (co__engine_destroy_answer): the state e was in;
 * -EINVAL if e is not set up or was destroyed meanwhile; -EBUSY if a run
 * holds e, e cannot make t, or the calling thread holds e borrowed. */
int co__engine_take(co_engine *e, enum co__transition t);
/* Take e as a run would while it runs nowhere, for a moment (a view's
 * answer, co__engine_cancel_unstarted, co__engine_cancel_unrun), waiting
 * out other borrowers: 0, or -1 as co__engine_take. A run, a tick, a
 * destroy or another borrow that comes meanwhile waits for
 * co__engine_unborrow(e, prev), prev as the borrow gave it. */
int co__engine_borrow(co_engine *e, co_engine **prev);
void co__engine_unborrow(co_engine *e, co_engine *prev);
/* 1 if the calling thread holds e borrowed (a frame's on_done that a
 * cancel stop of a never-started context runs there, say). */
int co__engine_borrowed_here(const co_engine *e);

static inline int co__engine_alive(co_engine *e)
{
	int s = atomic_load_explicit(&e->state, memory_order_acquire);

	return s != CO_ENGINE_DEAD && s != CO_ENGINE_DYING;
}

/* e is DYING: wait, outside any visit, for the destroy's answer (inside:
 * the caller is a visitor, and is one again when e lives on). 1: e lives
 * on; 0: destroyed, and e is not touched again. */
int co__engine_destroy_answer(co_engine *e, int inside);

/* co_engine.quiet: NO; MAYBE while the engine checks, after raising it,
 * that no visitor came (co__engine_quiet_set); YES once that held, counted
 * by the scheduler. Whoever takes it down from YES uncounts it. */
enum { CO__QUIET_NO = 0, CO__QUIET_MAYBE = 1, CO__QUIET_YES = 2 };

/* Take the quiet flag down (a visit begins; the owner's turn begins).
 * seq_cst: pairs with co__engine_quiet_set (a visitor counts itself in
 * visitors, then looks at the flag; the engine raises the flag, then
 * looks at visitors). Inline: the loop does it every turn. */
static inline void co__engine_quiet_clear(co_engine *e)
{
	if (co__unlikely(atomic_load_explicit(&e->quiet, memory_order_seq_cst)) &&
	    atomic_exchange_explicit(&e->quiet, CO__QUIET_NO, memory_order_seq_cst) == CO__QUIET_YES)
		e->hooks->quiet(e, e->hook_arg, 0);
}

#endif
