/* SPDX-License-Identifier: MIT */
/*
 * engine_view.c (not installed): a view's request.
 */
#ifndef CORING_LIB_ENGINE_VIEW_H
#define CORING_LIB_ENGINE_VIEW_H

#include "engine_impl.h"

/* Run fn(e, arg) with e's frames to itself, in two steps so that a view
 * asks every engine before it waits for any. begin: on e's own thread,
 * or one that holds e borrowed, fn runs at once (*r NULL); elsewhere the
 * request is published (*r), for
 * e's next turn or for end, which answers it itself while e runs nowhere.
 * end waits until deadline (CLOCK_MONOTONIC): 0, fn ran; -ETIMEDOUT, no
 * answer in time, and fn will not run; -EINPROGRESS, no answer in time,
 * and e has the request: fn runs later, then drop(arg) frees arg (the
 * caller must not); -EINVAL, e destroyed meanwhile (fn will not run).
 * begin: 0, -EINVAL (not set up, destroyed), -ENOMEM. A destroy of e that
 * decides meanwhile is waited out in either: if e lives on, the view goes
 * on. A destroy of e waits until end returns. */
struct co__view_req;
int co__engine_view_begin(co_engine *e, void (*fn)(co_engine *e, void *arg), void (*drop)(void *arg),
			  void *arg, struct co__view_req **r);
int co__engine_view_end(struct co__view_req *r, uint64_t deadline);

/* At a turn whose epoch moved, and as a run or a tick returns: answer a
 * view's request, if one is there. */
void co__engine_view_answer(co_engine *e);

#endif
