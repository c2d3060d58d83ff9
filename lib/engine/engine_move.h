/* SPDX-License-Identifier: MIT */
/*
 * engine_move.c (not installed): stealing and transfers.
 */
#ifndef CORING_LIB_ENGINE_MOVE_H
#define CORING_LIB_ENGINE_MOVE_H

#include "engine_impl.h"

unsigned co__engine_steal(co_engine *thief, co_engine *victim, unsigned max);
/* Move a waiting root to target and wake it there: 0, -ESHUTDOWN (target
 * refuses), -ECANCELED (asked to cancel), -EBUSY (pinned by a time limit). */
int co__engine_move(co_frame *root, co_engine *from, co_engine *target);

#endif
