/* SPDX-License-Identifier: MIT */
/*
 * What the scheduler offers the layers below it (not installed): a walk
 * over its contexts that destroy waits for, and which context an engine
 * belongs to (lib/view/view.c), whether a run would wait for the calling
 * thread (lib/graph/graph.c).
 */
#ifndef CORING_LIB_SCHEDULER_INTERNAL_H
#define CORING_LIB_SCHEDULER_INTERNAL_H

#include <coring/scheduler.h>

/* fn(s->ctx, s->n, arg) inside a visit of s (a co_sched_destroy that
 * comes meanwhile frees nothing until it returns). fn's value, or -EINVAL
 * (NULL, not set up, destroyed). */
int co__sched_contexts(co_sched *s, int (*fn)(co_context *ctx, unsigned n, void *arg), void *arg);

/* If e is the engine of a scheduler's context: that context's index and
 * kind, and 1; else 0 (a lone engine or a lone context). Read with e to
 * oneself (its owner's thread, or while it runs nowhere): a scheduler
 * hooks its contexts' engines before they first run. */
int co__sched_context_of(const co_engine *e, int *index, int *kind);

/* Would co_sched_run(s) answer -EBUSY at once on the calling thread (it
 * runs one of s's contexts, or ticks a manual one that may need more
 * ticks)? 1 or 0; -EINVAL (NULL, not set up, destroyed). */
int co__sched_runs_here(co_sched *s);

#endif
