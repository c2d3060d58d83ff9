/* SPDX-License-Identifier: MIT */
/*
 * engine_stop_list.c (not installed): the cancel stop's list of parked
 * waits, the waits that linger, the engine's holds.
 */
#ifndef CORING_LIB_ENGINE_STOP_LIST_H
#define CORING_LIB_ENGINE_STOP_LIST_H

#include "engine_impl.h"

/* The cancel stop's list of parked waits (co_stop_link): link on e's thread
 * while the wait starts, unlink from any thread when it ends. unlink
 * returns 1 if it took p off the list, 0 if the engine had taken it. */
void co__engine_stop_list_add(co_engine *e, co_stop_link *p);
int co__engine_stop_list_remove(co_engine *e, co_stop_link *p);

/* A wait the cancel stop's p->cancel could not end (a pool job that has
 * started), on e's thread from inside p->cancel: the engine keeps it on a
 * second list (unlink takes it off as from the first), and once the
 * stop's grace has run out calls p->give_up on its thread, which ends the
 * wait: the frame is then finished for it (-ECANCELED). */
void co__engine_stop_list_linger(co_engine *e, co_stop_link *p);
/* From p->give_up, on e's thread: the frame's wait is given up while
 * what it waited for goes on elsewhere; e no longer counts it as parked
 * but as held (co_engine_destroy refuses) until co__engine_unhold, from
 * any thread, once that work has ended. */
void co__engine_hold(co_engine *e);
void co__engine_unhold(co_engine *e);
/* e holds what its destroy refuses for though no frame may be live: a
 * co_bufring, or a hold (any thread; a snapshot). */
int co__engine_held(co_engine *e);

/* Cancel stop, owner thread: end every listed parked wait. */
void co__engine_stop_list_cancel_all(co_engine *e);
/* Cancel stop, owner thread: whether waits linger that the stop could not
 * end, and, once its grace has run out, give each up. */
int co__engine_stop_list_lingering(co_engine *e);
void co__engine_stop_list_give_up_all(co_engine *e);

/* A stop link not on any list yet, whose cancel stop call is cancel. */
static inline void co__stop_link_init(co_stop_link *p, void (*cancel)(co_stop_link *p))
{
	p->next = p->prev = NULL;
	p->linked = 0;
	p->cancel = cancel;
	p->give_up = NULL;
	atomic_store_explicit(&p->visit, 0, memory_order_relaxed);
}

/* A wait begins on e's thread: counted as parked (e is not idle while it
 * lasts) and listed for a cancel stop. */
static inline void co__engine_park_wait(co_engine *e, co_stop_link *p)
{
	co_engine_park(e);
	co__engine_stop_list_add(e, p);
}

#endif
