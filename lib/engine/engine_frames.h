/* SPDX-License-Identifier: MIT */
/*
 * engine_frames.c (not installed): the engine's list of its live root
 * frames, which a view reads.
 */
#ifndef CORING_LIB_ENGINE_FRAMES_H
#define CORING_LIB_ENGINE_FRAMES_H

#include "engine_impl.h"

/* The engine's list of its live root frames (lib/engine/engine_frames.c): an
 * array of slots, slot 0 a sink for frames not listed; a frame holds its
 * slot's index in view_slot. Changed by the owner thread (and, under
 * view_lock, by a thief taking a frame); read by a view with the engine
 * to itself (co__engine_view_visit). */
struct co__view_slot {
	co_frame *f;            /* NULL: free (since: the next free slot) */
	uint64_t since;         /* the stamp of the turn it last ran in */
};

/* List root f on e (e's thread, or a thief for a frame it took); unlist
 * it. A frame the list cannot take (no memory) stays unlisted. Without
 * the view (meson -Dview=false) neither does anything. */
#ifdef CO_WITH_VIEW
void co__view_add(co_engine *e, co_frame *f);
void co__view_del(co_engine *e, co_frame *f);
#else
static inline void co__view_add(co_engine *e, co_frame *f)
{
	(void)e;
	(void)f;
}

static inline void co__view_del(co_engine *e, co_frame *f)
{
	(void)e;
	(void)f;
}
#endif

/* Set up with the engine (-ENOMEM), freed with it; view_lock held while it
 * changes (engines that may be stolen from only). fini, at a destroy (e
 * DYING, no visitor left), first waits for the views of other threads
 * still waiting on e (e->viewers, lib/engine/engine_view.c). */
int co__view_init(co_engine *e);
void co__view_fini(co_engine *e);
void co__view_lock(co_engine *e);
void co__view_unlock(co_engine *e);

#endif
