/* SPDX-License-Identifier: MIT */
/*
 * The trace hooks (internal; docs/tracing.md). Each hook is one line at
 * an obvious spot of the layer it watches. Built without tracing
 * (CO_WITH_TRACE undefined: meson -Dtrace=false) every hook is ((void)0),
 * so the library's code is the same as with no hook at all. Built with it,
 * a hook is one relaxed load of co__trace_on and one branch; the call
 * behind it (lib/trace/trace.c) runs only while a session records.
 *
 * Hooks are expressions, so a macro of io.c can append one to its prep
 * with a comma.
 */
#ifndef CORING_LIB_TRACE_HOOKS_H
#define CORING_LIB_TRACE_HOOKS_H

#include <coring/engine.h>
#include <coring/trace.h>
#include "common/base.h"

/* Tracing is a service every layer may call: this header depends on no
 * layer's private header, so the engine's own (lib/engine/engine_impl.h, which
 * all of the engine's headers include) can include it. A hook that records the calling thread's engine names it with
 * co_engine_current(), evaluated only while a session records. */

#ifdef CO_WITH_TRACE

#include <stdatomic.h>
#include <stdint.h>

/* 1 while a session records (co_trace_start .. co_trace_stop). */
extern atomic_int co__trace_on __attribute__((visibility("hidden")));

/* The recorders behind the hooks (lib/trace/trace.c); e is the engine or 0. */
void co__trace_frame(co_engine *e, co_frame *f, int kind);
void co__trace_ev(int kind, co_engine *e, const void *frame, uint64_t a, uint64_t b);
void co__trace_transfer(co_frame *root, co_engine *from, co_engine *to);
void co__trace_wake(co_engine *e, co_frame *f);
void co__trace_submit(const struct io_uring_sqe *sqe);
void co__trace_complete(co_frame *leaf, const void *info, int res, unsigned tag);
void co__trace_context(const void *c, unsigned index, unsigned kind);
void co__trace_tick_context(const void *c, unsigned index, unsigned kind);

#define CO__TRACE(call) \
	(co__unlikely(atomic_load_explicit(&co__trace_on, memory_order_relaxed)) ? (void)(call) : (void)0)

#define CO__U64(p) ((uint64_t)(uintptr_t)(p))

/* Whether a session records, for a hot path that then takes a traced copy
 * of itself out of line: without a session it costs the load and the
 * branch, and no register kept for a call (stream.c's CQE). 0 in a build
 * without tracing. */
#define CO__TRACING() co__unlikely(atomic_load_explicit(&co__trace_on, memory_order_relaxed))

/* the engine (lib/engine/): e hands f to its queues / resumes it / it came back */
#define CO__TRACE_SPAWN(e, f) CO__TRACE(co__trace_ev(CO_TRACE_SPAWN, co_engine_current(), (f), CO__U64((f)->fn), CO__U64(e)))
#define CO__TRACE_RESUME(e, f) CO__TRACE(co__trace_frame((e), (f), CO_TRACE_RESUME))
#define CO__TRACE_YIELD(e, f) CO__TRACE(co__trace_frame((e), (f), CO_TRACE_YIELD))
#define CO__TRACE_WAIT(e, f) CO__TRACE(co__trace_frame((e), (f), CO_TRACE_WAIT))
#define CO__TRACE_DONE(e, f) CO__TRACE(co__trace_frame((e), (f), CO_TRACE_DONE))
/* the engine: f made ready for engine e, from any thread */
#define CO__TRACE_WAKE(e, f) CO__TRACE(co__trace_wake((e), (f)))
/* the engine: co_cancel asked for f (any thread) */
#define CO__TRACE_CANCEL(f) CO__TRACE(co__trace_ev(CO_TRACE_CANCEL, co_engine_current(), (f), CO__U64((f)->fn), 0))
/* the engine: f taken from victim's ring by thief (thief's thread) */
#define CO__TRACE_STEAL(thief, victim, f) CO__TRACE(co__trace_ev(CO_TRACE_STEAL, (thief), (f), CO__U64(victim), CO__U64(thief)))
#define CO__TRACE_FOLLOW(to, from, f) CO__TRACE(co__trace_ev(CO_TRACE_FOLLOW, (to), (f), CO__U64(from), CO__U64(to)))
/* the engine: root moves from engine `from` to `to` inside its transfer await */
#define CO__TRACE_TRANSFER(root, from, to) CO__TRACE(co__trace_transfer((root), (from), (to)))
/* the engine: a run of e begins (1) or ends (0) on this thread */
#define CO__TRACE_RUN(e, begin) CO__TRACE(co__trace_ev(CO_TRACE_RUN, (e), NULL, CO__U64(e), (uint64_t)(begin)))
/* io.c: an I/O operation was prepared in sqe / its completion for leaf */
#define CO__TRACE_SUBMIT(sqe) CO__TRACE(co__trace_submit(sqe))
#define CO__TRACE_COMPLETE(leaf, info, res, tag) CO__TRACE(co__trace_complete((leaf), (info), (res), (tag)))
/* context.c: a context's thread starts */
#define CO__TRACE_CONTEXT(c) CO__TRACE(co__trace_context((c), (c)->index, (c)->kind))
/* context.c: a manual context is ticked on this thread (recorded as
 * CONTEXT once a session, or when the thread ticks another one) */
#define CO__TRACE_TICK_CONTEXT(c) CO__TRACE(co__trace_tick_context((c), (c)->index, (c)->kind))
/* timeout.c, waiter.c: a time limit ran out for root (sub: 1 co_timeout's
 * timer, 2 a waiter's own timer) */
#define CO__TRACE_TIMEOUT(root, what, sub) CO__TRACE(co__trace_ev(CO_TRACE_TIMEOUT, co_engine_current(), (root), CO__U64(what), (uint64_t)(sub)))
/* waiter.c: a waiter's timer completed with res (-ETIME: it ran out) for
 * the waiting frame */
#define CO__TRACE_TIMER(frame, w, res) \
	CO__TRACE((res) == -ETIME ? co__trace_ev(CO_TRACE_TIMEOUT, co_engine_current(), co_root(frame), CO__U64(w), 2) : (void)0)

#else

#define CO__TRACE_SPAWN(e, f) ((void)0)
#define CO__TRACE_RESUME(e, f) ((void)0)
#define CO__TRACE_YIELD(e, f) ((void)0)
#define CO__TRACE_WAIT(e, f) ((void)0)
#define CO__TRACE_DONE(e, f) ((void)0)
#define CO__TRACE_WAKE(e, f) ((void)0)
#define CO__TRACE_CANCEL(f) ((void)0)
#define CO__TRACE_STEAL(thief, victim, f) ((void)0)
#define CO__TRACE_FOLLOW(to, from, f) ((void)0)
#define CO__TRACE_TRANSFER(root, from, to) ((void)0)
#define CO__TRACE_RUN(e, begin) ((void)0)
#define CO__TRACE_SUBMIT(sqe) ((void)0)
#define CO__TRACE_COMPLETE(leaf, info, res, tag) ((void)0)
#define CO__TRACING() 0
#define CO__TRACE_CONTEXT(c) ((void)0)
#define CO__TRACE_TICK_CONTEXT(c) ((void)0)
#define CO__TRACE_TIMEOUT(root, what, sub) ((void)0)
#define CO__TRACE_TIMER(frame, w, res) ((void)0)

#endif


#endif
