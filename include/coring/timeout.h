/* SPDX-License-Identifier: MIT */
/*
 * coring/timeout.h - one time limit for any await.
 *
 *     struct req { co_frame co; co_limit lim; co_io io; co_waiter w; ... };
 *
 *     CO_AWAIT(f, co_timeout(&s->lim, co_recv(&s->io, fd, buf, n, 0), 500 * CO_MS));
 *     CO_AWAIT(f, co_timeout(&s->lim, co_mutex_lock(&s->w, &m), 10 * CO_MS));
 *     CO_AWAIT(f, co_timeout(&s->lim, co_send_all(&s->x, fd, p, len, 0), CO_S));
 *     if (co_result(f) == -ETIME) ...   // the limit ran out first
 *
 * A whole request under one deadline: compute it once, pass it to each
 * await (the *_at forms take an absolute CLOCK_MONOTONIC time):
 *
 *     s->end = co_now_ns() + 200 * CO_MS;
 *     CO_AWAIT(f, co_timeout_at(&s->lim, co_recv(...), s->end));
 *     CO_AWAIT(f, co_timeout_at(&s->lim, co_event_wait(...), s->end));
 *
 * The rule, for every await: if the awaited thing completes first, the
 * await has its own value; if the time runs out first, the await is
 * cancelled and its value is -ETIME once it has ended (an operation's
 * buffer, a child's frame are free to reuse after the await, as always).
 * When both come at once (a completion and the timer in one batch, a
 * release on another thread), the await ends once and loses nothing:
 * what completed keeps its value (bytes read, a descriptor, a lock, an
 * item, a child's status), and -ETIME replaces only -ECANCELED, the value
 * of an await the limit cut short, which took nothing. A child of yours
 * says "cut short" by ending with -ECANCELED; any other status reaches
 * the caller.
 * What is limited, and how:
 *   - I/O (io.h): a kernel timeout linked to the operation, when applied
 *     right after the prep; otherwise (a sleep, an SQE already submitted)
 *     a timer that cancels the operation;
 *   - every wait of sync.h and channel.h: the wait's own timer;
 *   - co_when_all / co_when_any / co_spawn_on, a user's awaiter with a
 *     cancel op, a child coroutine (co_timeout_task: the whole child chain
 *     is cancelled, and the await ends once the child has unwound): a
 *     timer on the frame's engine that cancels the await when it fires.
 *     For these the frame does not move to another engine while the await
 *     lasts (no steal; a co_transfer inside a limited child ends with
 *     -EBUSY). Nested limits work; each ends its own await with -ETIME.
 * What cannot be limited ends the await at once with -EINVAL, in every
 * build, and is never started: an awaiter without a cancel op (or without
 * ops), a child without a body (co_init given NULL, or zeroed), a
 * co_transfer (it ends by itself, in one turn of the target's loop), the
 * limit's own awaiter or frame (a fresh limit too; one co_limit for two
 * nested limits: what the inner one was around, a sleep or an operation
 * its prep queued, is cancelled first, and the await ends once it was),
 * a limit that holds this one. A NULL limit, awaiter or child returns NULL
 * (CO_AWAIT: -EINVAL; a debug build traps, as for any CO_AWAIT of NULL).
 * A frame that does not run on an engine gets -ENXIO; a limit whose timer
 * cannot be allocated, -ENOMEM (the await is not started either; a child
 * that finished before the await, such as a reader's read completed in
 * the call, has its status as the value and needs no timer). A
 * duration whose sum with the clock would wrap (near UINT64_MAX), or a
 * deadline of UINT64_MAX, never runs out.
 *
 * A limit is not a cancellation: once its await has ended the chain runs
 * on as before (co_cancelled() is true only while a limit that ran out is
 * ending its await). A time limit also applies under co_shield.
 * One co_limit serves one await at a time; it may be reused for the next.
 */
#ifndef CORING_TIMEOUT_H
#define CORING_TIMEOUT_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <stdint.h>

#include <coring/engine.h>

#ifdef __cplusplus
extern "C" {
#endif

struct co__limit_timer;

/* All fields are private. */
typedef struct co_limit {
	co_awaiter aw;                /* the limited await (a timer's kind) */
	co_frame co;                  /* co_timeout_task: awaits the child */
	co_awaiter *inner;            /* the awaiter limited */
	co_frame *child;              /* the child limited */
	struct co__limit_timer *timer; /* the armed timer (engine memory) */
	uint64_t deadline;            /* CLOCK_MONOTONIC ns */
	int err;                      /* an error found before the await began */
	unsigned char fired;          /* the timer ran out during the await */
	unsigned char counted;        /* ... and counts in the chain's LIMITS */
	unsigned char pinned;         /* this limit pinned the frame */
} co_limit;

/* Limit the await of aw to ns nanoseconds from now (0: a try: -ETIME
 * unless aw completes at once), or until deadline on CLOCK_MONOTONIC
 * (co_now_ns()). Returns what CO_AWAIT takes. */
CO_API co_awaiter *co_timeout(co_limit *l, co_awaiter *aw, uint64_t ns);
CO_API co_awaiter *co_timeout_at(co_limit *l, co_awaiter *aw, uint64_t deadline);

/* The same for a child coroutine: returns the co_frame * to await. The
 * await's value is the child's status, or -ETIME if the limit ran out and
 * the child, cancelled, ended with -ECANCELED (it has finished either
 * way). */
CO_API co_frame *co_timeout_task(co_limit *l, co_frame *child, uint64_t ns);
CO_API co_frame *co_timeout_task_at(co_limit *l, co_frame *child, uint64_t deadline);

#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
/* In C11 co_timeout and co_timeout_at take either: an awaiter or a child
 * frame (another pointer type does not compile). */
#define co_timeout(l, x, ns)                                               \
	_Generic((x), co_awaiter *: co_timeout, void *: co_timeout,        \
		 co_frame *: co_timeout_task)((l), (x), (ns))
#define co_timeout_at(l, x, deadline)                                      \
	_Generic((x), co_awaiter *: co_timeout_at, void *: co_timeout_at,  \
		 co_frame *: co_timeout_task_at)((l), (x), (deadline))
#endif

#ifdef __cplusplus
}
#endif

#endif /* CORING_TIMEOUT_H */
