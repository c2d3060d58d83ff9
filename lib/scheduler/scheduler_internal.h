/* SPDX-License-Identifier: MIT */
/*
 * What the scheduler offers the layers below it (not installed): a walk
 * over its contexts that destroy waits for (lib/view/view.c).
 */
#ifndef CORING_LIB_SCHEDULER_INTERNAL_H
#define CORING_LIB_SCHEDULER_INTERNAL_H

#include <coring/scheduler.h>

/* fn(s->ctx, s->n, arg) inside a visit of s (a co_sched_destroy that
 * comes meanwhile frees nothing until it returns). fn's value, or -EINVAL
 * (NULL, not set up, destroyed). */
int co__sched_contexts(co_sched *s, int (*fn)(co_context *ctx, unsigned n, void *arg), void *arg);

#endif
