/* SPDX-License-Identifier: MIT */
/*
 * engine_loop.c (not installed): the loop, a run, a tick.
 */
#ifndef CORING_LIB_ENGINE_LOOP_H
#define CORING_LIB_ENGINE_LOOP_H

#include "engine_impl.h"

/* co_engine_tick that calls entered(arg) (NULL: nothing) on the calling
 * thread once the engine accepted the tick, before any frame runs; a
 * refused tick never calls it (lib/context/context.c: the thread's current
 * context and its trace name). */
int co__engine_tick_as(co_engine *e, void (*entered)(void *arg), void *arg);

/* The SQEs whose CQE was due as e's last tick ended (any thread; read
 * once e's state was seen STOPPED or READY, or its quiet flag raised,
 * which published it): a manual context with I/O in flight has not
 * ended, whatever its frames (lib/context/context.c), and has work. */
static inline unsigned co__engine_io_due(co_engine *e)
{
	return atomic_load_explicit(&e->io_due, memory_order_relaxed);
}

/* The wake-up read's completion (co_engine.wake_info.cb). */
void co__engine_wake_done(co_engine *e, co_io_info *info, int res, unsigned cqe_flags, unsigned tag);
/* Reap the armed eventfd read before the ring goes (invariant 6). */
void co__engine_wake_disarm(co_engine *e);

#endif
