/* SPDX-License-Identifier: MIT */
/*
 * engine_turn.c (not installed): waits for the next turn.
 */
#ifndef CORING_LIB_ENGINE_TURN_H
#define CORING_LIB_ENGINE_TURN_H

#include "engine_impl.h"

/* Root f, on e's own thread, runs at e's next turn, not this one: a yield,
 * a transfer to the context it is on (lib/engine/engine_turn.c). f is not
 * waiting (or waits in a co_turn). */
void co__engine_later(co_engine *e, co_frame *root);

/* The turn begins: the later list's frames join the ready queue, but for
 * co_after_turns waits with turns left. */
void co__engine_later_take(co_engine *e);

#endif
