/* SPDX-License-Identifier: MIT */
/*
 * coring/waiter.h - the waiter every wait of sync.h and channel.h takes:
 * the awaiter and the wait-queue node in one, kept in the coroutine's
 * struct (nothing is allocated to wait or to wake). The primitives' preps
 * (co_mutex_lock, co_event_wait, co_chan_recv ...) fill it and return its
 * awaiter for CO_AWAIT; one co_waiter serves one await at a time.
 */
#ifndef CORING_WAITER_H
#define CORING_WAITER_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <stdint.h>

#include <coring/engine_types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct co_waiter co_waiter;

/* A FIFO of waiters (private: under the owning primitive's lock). */
typedef struct co_waitq {
	co_waiter *head, *tail;
} co_waitq;

/* All fields are private. 160 bytes on LP64. */
struct co_waiter {
	co_awaiter aw;                /* first, returned by the preps */
	co_io_info info;              /* a timed wait's timer CQE */
	co_frame *frame;              /* the waiting frame */
	int res;                      /* the await's value (where co.h's
	                                 co__parking has its value) */
	unsigned char timed;          /* a timer is armed for this wait */
	unsigned char timer_done;     /* the timer's CQE came (engine) */
	unsigned short many;          /* channel receive: at most this many
	                                 items (co_chan_recv_many); 0: one */
	co_post post;                 /* a timed wait's "remove the timer",
	                                 posted to its engine by the claimer */
	co_stop_link stop_link;       /* on its engine's list of parked waits */
	co_waiter *next, *prev;       /* links, under *lk */
	co_waitq *q;                  /* the queue it is linked on */
	CO__ATOMIC(unsigned) *lk;     /* its primitive's lock */
	void *obj;                    /* the primitive */
	union {
		void *item;           /* channel: the item to copy */
		struct co_mutex *mutex; /* condition variable: its mutex */
		unsigned long mark;   /* mutex lock: its barges when it parked */
	} u;
	co_engine *engine;            /* the engine it is parked on */
	uint64_t deadline;            /* CLOCK_MONOTONIC ns; 0: none */
	CO__ATOMIC(unsigned) state;   /* lib/waiter/waiter_internal.h: CO__W_* */
	CO__ATOMIC(unsigned) pend;    /* timed: the timer's CQE and the removal
	                                 post still due before the frame wakes */
};

/*
 * Limit a wait to ns nanoseconds (relative, CLOCK_MONOTONIC):
 *
 *     CO_AWAIT(f, co_wait_for(co_event_wait(&s->w, &ev), 50 * CO_MS));
 *     if (co_result(f) == -ETIME) ...
 *
 * Works on every wait of sync.h and of channel.h. The value is -ETIME if
 * the time ran out first; exactly one of "released" and "timed out" wins,
 * and a released wait that beat its timer keeps its result. ns == 0 makes
 * it a try: -ETIME at once unless the wait completes at once. The timer is
 * an io_uring timeout on the waiting frame's own engine; error -ENXIO when
 * the frame does not run on an engine. Apply it right after the prep. An
 * ns whose sum with the clock would wrap (near UINT64_MAX) never runs out.
 * Given another kind of awaiter (I/O, your own), the await ends with
 * -EINVAL in every build, nothing started (a failed prep keeps its own
 * error; an I/O prep has queued its operation: the await cancels it and
 * ends once the kernel has answered, so an operation that would wait
 * takes nothing, and one that completed at once ends with its result);
 * given NULL it returns NULL (CO_AWAIT: -EINVAL, a debug trap).
 */
CO_API co_awaiter *co_wait_for(co_awaiter *aw, uint64_t ns);

#ifdef __cplusplus
}
#endif

#endif /* CORING_WAITER_H */
