/* SPDX-License-Identifier: MIT */
/*
 * engine_setup.c (not installed): set-up, hooks, registration, destroy.
 */
#ifndef CORING_LIB_ENGINE_SETUP_H
#define CORING_LIB_ENGINE_SETUP_H

#include "engine_impl.h"

/* Install hooks (before the engine first runs). */
void co__engine_set_hooks(co_engine *e, const struct co__engine_hooks *h, void *arg);
/* Put a stealing engine in a roam group (before it first runs): frames
 * that may roam follow their waker between the engines of one group. */
static inline void co__engine_set_roam(co_engine *e, const void *group)
{
	e->roam = group;
}

/* e is stopped and its live frames are only those its last run or tick
 * found stuck, nothing changed since (what co_engine_destroy forgets). On
 * the owner thread outside a run or a tick. */
int co__engine_only_stuck(co_engine *e);

/* Register a provided buffer ring of entries (lib/stream/stream.c) under the rule
 * of co_engine_register_buffers, with a buffer group id of its own
 * (*bgid); co_engine_destroy refuses while one is registered. 0 or
 * -errno. */
int co__engine_buf_ring_register(co_engine *e, void *ring, unsigned entries, unsigned short *bgid);
int co__engine_buf_ring_unregister(co_engine *e, unsigned short bgid);

#endif
