/* SPDX-License-Identifier: MIT */
/*
 * engine_cancel.c (not installed): cancel requests, finishing frames,
 * frames that never ran.
 */
#ifndef CORING_LIB_ENGINE_CANCEL_H
#define CORING_LIB_ENGINE_CANCEL_H

#include "engine_impl.h"

/* co_runner.cancel of every engine (any thread). */
int co__engine_cancel_op(co_runner *r, co_frame *f);
/* A root frame ended: finish it (its on_done, the counts), unless a cancel
 * request from another thread is on its way, which then finishes it. */
void co__engine_finish_frame(co_engine *e, co_frame *f);
/* Finish f now: its on_done, the counts. */
void co__engine_finish_now(co_engine *e, co_frame *f);
/* Cancel stop: finish f for it without running it (status -ECANCELED). */
void co__engine_abandon(co_engine *e, co_frame *f);
/* Handle the cancel requests other threads queued for e's frames. */
void co__engine_run_cancels(co_engine *e);
/* e's owner, or a thread that took e while it does not run: queue what
 * other threads pushed, then take f out of the queue if it is there and
 * has not started: 1 if it did. */
int co__engine_unqueue_unstarted(co_engine *e, co_frame *f);
/* The same: finish the frames whose finish waits for a cancel request,
 * once their requests are in (their requesters are inside co_cancel);
 * other requests stay for the owner's next turn. */
void co__engine_settle_finishes(co_engine *e);

/* A cancel stop's work on an engine that never ran (lib/context/context.c). */
int co__engine_cancel_unrun(co_engine *e);
/* A cancel was asked for f, a frame of e that may not have started, and e
 * may not run (lib/sync/when.c: co_spawn_on's child, whose await must end): if
 * e does not run and f has not started, finish f for it now, on the
 * calling thread (status -ECANCELED, its on_done runs here), rather than
 * at e's next turn, which may never come. 0 if it did; -EBUSY if e runs
 * (its next turn handles the request), steals, or f has started. */
int co__engine_cancel_unstarted(co_engine *e, co_frame *f);

#endif
