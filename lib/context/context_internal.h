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

/* End manual context c if it is stopped with nothing left: no live frame
 * (for its ticker, right after a tick: or only frames that tick found
 * stuck, which its destroy forgets) and no post pending. Its door to posts
 * is closed first (co_engine_post then answers -ESHUTDOWN); posts accepted
 * before it closed keep c running until a tick ran them. 1 if this call
 * moved c from RUNNING to ENDED (the caller tells its scheduler), else 0.
 * ticker 1: on c's ticking thread outside a tick, where the engine's stuck
 * count is its own to read; 0: any thread. */
int co__context_end_manual(co_context *c, int ticker);

/* Tell c's scheduler, if one installed a notice, that c ended. */
void co__context_ended(co_context *c);

#endif
