/* SPDX-License-Identifier: MIT */
/*
 * engine_stop.c (not installed): the stop, with the inline look at it
 * that every turn begins with.
 */
#ifndef CORING_LIB_ENGINE_STOP_H
#define CORING_LIB_ENGINE_STOP_H

#include "engine_impl.h"

/* A cancel stop has begun on e (its owner thread reads it). */
static inline int co__engine_cancelling(const co_engine *e)
{
	return e->cancel_since != 0;
}

uint64_t co__engine_stop_turn_slow(co_engine *e, int mode, uint64_t *wait_ns);

/* The stop state at the start of a turn: escalates a timed drain to a
 * cancel when its time came, begins the cancel once (and asks again while
 * anything is in flight), and returns the time after which frames still
 * running are finished for them (0: no cancel stop), and in *wait_ns how
 * long the turn may sleep. Inline: no stop asked is the common case. */
static co__inline uint64_t co__engine_stop_turn(co_engine *e, uint64_t *wait_ns)
{
	int mode = atomic_load_explicit(&e->stop_mode, memory_order_acquire);

	*wait_ns = 0;
	if (co__likely(mode == CO__STOP_NONE))
		return 0;
	return co__engine_stop_turn_slow(e, mode, wait_ns);
}

#endif
