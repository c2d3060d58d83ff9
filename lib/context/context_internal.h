/* SPDX-License-Identifier: MIT */
/*
 * The context as the scheduler sees it (not installed; lib/context/context.c):
 * the notice a scheduler installs to learn that a context's thread
 * returned, as the engine's hooks do for its engine (a lower layer never
 * calls up).
 */
#ifndef CORING_LIB_CONTEXT_INTERNAL_H
#define CORING_LIB_CONTEXT_INTERNAL_H

#include <coring/context.h>

/* Install on_end (before the context starts): called on the context's
 * thread once it returned and c is ENDED, or by whoever ends a manual
 * context. NULL: no notice. */
void co__context_on_end(co_context *c, void (*on_end)(co_context *c));

/* Tell c's scheduler, if one installed a notice, that c ended. */
void co__context_ended(co_context *c);

#endif
