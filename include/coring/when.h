/* SPDX-License-Identifier: MIT */
/*
 * coring/when.h - await several child coroutines at once.
 *
 *     struct fetch { co_frame co; co_when w; struct get a, b; co_frame *kids[2]; };
 *
 *     co_init(&s->a.co, get_fn);  co_init(&s->b.co, get_fn);
 *     s->kids[0] = &s->a.co;      s->kids[1] = &s->b.co;
 *     CO_AWAIT(f, co_when_all(&s->w, s->kids, 2));   // both finished
 *     CO_AWAIT(f, co_when_any(&s->w, s->kids, 2));   // value: the winner's index
 *
 * The children are root frames the caller set up with co_init (not started,
 * not spawned) and keeps alive until the await completes. They are spawned
 * on the awaiting frame's engine and run concurrently with each other; the
 * awaiting frame parks meanwhile. Each child's status stays readable with
 * co_status afterwards. While it runs, a child's on_done and user fields
 * belong to the combinator (user points to the co_when afterwards).
 *
 * when_any: the first child to finish wins; every other child is then
 * cancelled with co_cancel and the await completes only once all of them
 * have finished (none is left running). A cancelled child's waits end with
 * -ECANCELED, the ones it is in and the ones it starts later. Children may
 * move (co_transfer_to, stealing): a cancel reaches them on any context.
 *
 * co_cancel on the awaiting frame cancels every unfinished child, waits
 * for all of them, and the await's value is -ECANCELED, unless no child
 * was cut short: when the children the value rests on (every one for
 * when_all, the winner for when_any, the child of co_spawn_on) finished
 * with statuses other than -ECANCELED, their work is done and the value
 * is what it would have been without the cancel. For when_any, a winner
 * the cancel cut short (-ECANCELED) gives way to a child that finished
 * with its work done (the lowest index): the value is that child's index.
 * The same under a time limit (co_timeout): its -ETIME replaces only
 * that -ECANCELED. A cancel stop of the awaiting frame's engine cancels
 * the children wherever they run, the same way.
 *
 * co_spawn_on runs one child on another engine (a context of another kind,
 * say) and waits for it: "do this over there, and tell me".
 *     CO_AWAIT(f, co_spawn_on(&s->w, &co_sched_pick(sched, CPU)->engine, &s->job.co));
 *     use(co_result(f), s->job.output);   // the child's status, its fields
 */
#ifndef CORING_WHEN_H
#define CORING_WHEN_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <coring/engine_types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct co_when {
	co_awaiter aw;                /* private: first, returned by the preps */
	co_frame *const *kids;        /* private */
	co_frame *one;                /* private: co_spawn_on's child */
	co_engine *target;            /* private: where the children run (NULL:
	                                 the awaiting frame's engine) */
	unsigned n;                   /* private: children */
	CO__ATOMIC(unsigned) spawned; /* private: children spawned */
	int any;                      /* private: when_any */
	int err;                      /* private: a spawn failed */
	int cancelled;                /* private: the awaiting frame was cancelled */
	co_frame *frame;              /* private: the awaiting frame */
	co_engine *engine;            /* private: its engine */
	CO__ATOMIC(unsigned) left;             /* private: children not finished */
	CO__ATOMIC(int) winner;            /* private: when_any: first finished, or -1 */
	co_stop_link stop_link;       /* private: on its engine's list while it
	                                 waits: a cancel stop cancels the children */
} co_when;

/*
 * Await every child. Value: 0 if every child's status is >= 0, else the
 * first negative status in index order; -ECANCELED (the awaiting frame was
 * cancelled); -EINVAL (NULL, a child NULL, without a body, started,
 * spawned or awaited, or the same child twice; nothing was spawned); -ENXIO (the frame does not run
 * on an engine); -ESHUTDOWN (the engine refused a spawn: the children
 * already spawned are still awaited). n == 0 completes at once with 0.
 */
CO_API co_awaiter *co_when_all(co_when *w, co_frame *const *kids, unsigned n);

/*
 * Await the first child to finish, cancel the others and wait for them.
 * Value: the winner's index (its status: co_status(kids[i])), or the
 * errors of co_when_all; n == 0 is -EINVAL.
 */
CO_API co_awaiter *co_when_any(co_when *w, co_frame *const *kids, unsigned n);

/*
 * Await one child spawned on engine e (any engine, from any context; a
 * scheduler's contexts: &co_sched_pick(s, kind)->engine or &s->ctx[i].engine).
 * Value: the child's status (co_status), also when the awaiting frame was
 * cancelled as the child finished (it is cancelled, and has finished;
 * -ECANCELED if it was cut short or never spawned), -ESHUTDOWN (e
 * refuses spawns), -EINVAL (NULL w or e, a child not fresh), -ENXIO (the
 * awaiting frame does not run on an engine). Cancelled or limited while
 * the child has not started on an engine that does not run (never run, a
 * context not started, a manual one not ticked), the child is finished
 * for it at once (-ECANCELED, it never runs) and the await ends; one that
 * started there finishes at that engine's next turn.
 */
CO_API co_awaiter *co_spawn_on(co_when *w, co_engine *e, co_frame *child);

#ifdef __cplusplus
}
#endif

#endif /* CORING_WHEN_H */
