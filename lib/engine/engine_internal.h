/* SPDX-License-Identifier: MIT */
/*
 * The engine as the layers below it see it (not installed): the headers
 * of the engine's files, one per file (engine_impl.h lists them), for the
 * hooks a scheduler installs, the owner thread's fast paths that
 * lib/io/io.c inlines (engine_sqe.h, engine_queue.h), visits from other
 * threads, parking, stealing and moving frames. The engine's own files
 * include their own headers, never this one.
 */
#ifndef CORING_LIB_ENGINE_INTERNAL_H
#define CORING_LIB_ENGINE_INTERNAL_H

#include "engine_impl.h"
#include "engine_state.h"
#include "engine_frames.h"
#include "engine_queue.h"
#include "engine_sqe.h"
#include "engine_visit.h"
#include "engine_cancel.h"
#include "engine_stop_list.h"
#include "engine_stop.h"
#include "engine_turn.h"
#include "engine_move.h"
#include "engine_view.h"
#include "engine_wait.h"
#include "engine_loop.h"
#include "engine_setup.h"

#endif
