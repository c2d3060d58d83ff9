/* SPDX-License-Identifier: MIT */
/* Contexts: a thread per engine; and moving a coroutine between them. */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include <coring/context.h>
#include "common/awaiter.h"
#include "context_internal.h"
#include "engine/engine_internal.h"
#include "common/fault.h"

/* initial-exec, as co__tls_engine: a transfer reads it twice a round trip,
 * and the default model for a shared object is a call to __tls_get_addr */
static _Thread_local co_context *co__ctx_current __attribute__((tls_model("initial-exec")));

void co__context_on_end(co_context *c, void (*on_end)(co_context *c))
{
	c->on_end = on_end;
}

void co__context_ended(co_context *c)
{
	if (c->on_end)
		c->on_end(c);
}

co_context *co_context_current(void)
{
	return co__ctx_current;
}

/* Move c from state `from` to `to`; 1 if it was in `from`. */
static int context_move(co_context *c, int from, int to)
{
	return atomic_compare_exchange_strong_explicit(&c->state, &from, to, memory_order_acq_rel,
						       memory_order_acquire);
}

int co_context_state(co_context *c)
{
	return c ? atomic_load_explicit(&c->state, memory_order_acquire) : -EINVAL;
}

int co_context_init(co_context *c, const co_engine_opts *opts)
{
	int err;

	if (c == NULL)
		return -EINVAL;
	memset(c, 0, sizeof *c);
	err = co_engine_init(&c->engine, opts);
	if (err == 0)
		atomic_store_explicit(&c->state, CO_CONTEXT_NEW, memory_order_release);
	return err;
}

/*
 * The thread. When the run returns, the engine is stopped (new spawns are
 * refused from then on) and run once more, to drain frames that were
 * accepted between the end of the first run and the stop. Then its door to
 * posts closes (co_engine_post answers -ESHUTDOWN), and a post accepted
 * after that last run looked gets one more run: once the thread returns,
 * no accepted frame or post is left behind.
 */
static void *context_main(void *arg)
{
	co_context *c = arg;
	int ret, drain;

	co__ctx_current = c;
	CO__TRACE_CONTEXT(c);
	ret = co_engine_run(&c->engine, c->mode);
	co_engine_stop(&c->engine, CO_STOP_DRAIN);
	drain = co_engine_run(&c->engine, CO_RUN_UNTIL_STOP);
	if (co__engine_posts_close(&c->engine))
		drain = co_engine_run(&c->engine, CO_RUN_UNTIL_STOP);
	c->ret = ret < 0 ? ret : drain;
	co__ctx_current = NULL;
	/* ENDED only once the start that made this thread has marked it
	 * RUNNING (it is STARTING until pthread_create returned there) */
	while (!context_move(c, CO_CONTEXT_RUNNING, CO_CONTEXT_ENDED))
		sched_yield();
	co__fault_point(CO__POINT_CONTEXT_ENDING);
	co__context_ended(c);
	return NULL;
}

int co_context_start(co_context *c, int mode)
{
	int err, s;

	if (c == NULL || (mode != CO_RUN_UNTIL_IDLE && mode != CO_RUN_UNTIL_STOP))
		return -EINVAL;
	if (!context_move(c, CO_CONTEXT_NEW, CO_CONTEXT_STARTING)) {
		s = co_context_state(c);
		return s == CO_CONTEXT_DEAD ? -EINVAL : -EALREADY;
	}
	c->mode = mode;
	/* STARTING until c->thread is set: a join or a destroy that comes
	 * meanwhile waits for the start (there is no thread to join yet). */
	co__fault_point(CO__POINT_CONTEXT_STARTING); /* tests: a join or a destroy comes now */
	err = co__thread_create(&c->thread, context_main, c);
	if (err) {
		atomic_store_explicit(&c->state, CO_CONTEXT_NEW, memory_order_release);
		return -err;
	}
	/* release: c->thread; the thread sets ENDED only after this store */
	atomic_store_explicit(&c->state, CO_CONTEXT_RUNNING, memory_order_release);
	return 0;
}

/* The engine accepted the tick: from here to its end the calling thread
 * runs c, and in a trace it is c's track. */
static void tick_entered(void *arg)
{
	co_context *c = arg;

	co__ctx_current = c;
	CO__TRACE_TICK_CONTEXT(c);
}

int co_context_tick(co_context *c)
{
	int ret;
	co_context *prev = co__ctx_current;

	if (c == NULL || !c->manual)
		return -EINVAL;
	if (co_context_state(c) != CO_CONTEXT_RUNNING)
		return co_context_state(c) == CO_CONTEXT_DEAD ? -EINVAL : -ESHUTDOWN;
	/* A refused tick (-EBUSY: a frame of a context calls it; -EPERM:
	 * not the ticker) changes neither the thread's current context nor
	 * its name in a trace. */
	ret = co__engine_tick_as(&c->engine, tick_entered, c);
	co__ctx_current = prev;
	/* Only the engine's owner gets past co_engine_tick's thread check:
	 * remember it, so that co_sched_run can refuse to block it. */
	if (ret >= 0 && !atomic_load_explicit(&c->ticked, memory_order_relaxed)) {
		c->ticker = pthread_self();
		atomic_store_explicit(&c->ticked, 1, memory_order_release);
	}
	/* Stopped with nothing left: it has ended (its scheduler may end it
	 * too, if the ticks stop coming). */
	if (ret >= 0 && co__context_end_manual(c, 1))
		co__context_ended(c);
	return ret;
}

int co__context_end_manual(co_context *c, int ticker)
{
	co_engine *e = &c->engine;
	int running = CO_CONTEXT_RUNNING;

	/* I/O in flight (a time limit's timer on its way out, an acceptor's
	 * cancel): the next ticks reap it; ended now, nothing would */
	if (co_engine_state(e) != CO_ENGINE_STOPPED || co__engine_io_due(e) != 0 ||
	    (co__engine_live(e) != 0 && !(ticker && co__engine_only_stuck(e))))
		return 0;
	/* Posts that came before the door closed wait for the next tick. */
	if (co__engine_posts_close(e))
		return 0;
	/* A tick that began meanwhile may be running a post it took: its
	 * own end ends c. */
	if (co_engine_state(e) != CO_ENGINE_STOPPED)
		return 0;
	return atomic_compare_exchange_strong(&c->state, &running, CO_CONTEXT_ENDED);
}

int co_context_spawn(co_context *c, co_frame *f)
{
	if (c == NULL)
		return -EINVAL;
	return co_engine_spawn(&c->engine, f);
}

int co_context_stop(co_context *c, int mode)
{
	int err;

	if (c == NULL)
		return -EINVAL;
	err = co_engine_stop(&c->engine, mode);
	/* A start making the thread now: whether it exists decides who
	 * finishes the frames (a start that fails leaves them queued). */
	while (err == 0 && mode == CO_STOP_CANCEL && co_context_state(c) == CO_CONTEXT_STARTING)
		sched_yield();
	/* Nothing runs the frames of a context whose thread never started, or
	 * of a manual one never ticked (its ticks may never come): finish them
	 * here. -EBUSY: a start or a first tick raced us; it runs them. */
	if (err == 0 && mode == CO_STOP_CANCEL &&
	    (co_context_state(c) == CO_CONTEXT_NEW ||
	     (c->manual && !atomic_load_explicit(&c->ticked, memory_order_acquire))))
		co__engine_cancel_unrun(&c->engine);
	return err;
}

int co_context_join(co_context *c)
{
	int s;

	if (c == NULL)
		return -EINVAL;
	while ((s = co_context_state(c)) == CO_CONTEXT_STARTING)
		sched_yield(); /* a start is making the thread: wait for its handle */
	if (c->manual || (s != CO_CONTEXT_RUNNING && s != CO_CONTEXT_ENDED))
		return -EINVAL;
	if (co__ctx_current == c)
		return -EDEADLK; /* its own thread (a frame, an on_done): as pthread_join */
	if (atomic_exchange_explicit(&c->joining, 1, memory_order_acq_rel))
		return -EINVAL; /* another join has it */
	pthread_join(c->thread, NULL);
	atomic_store_explicit(&c->state, CO_CONTEXT_JOINED, memory_order_release);
	return c->ret;
}

/*
 * The engine is destroyed: mark c DEAD. A start that raced the destroy
 * (it found NEW after destroy looked) may have a thread on the destroyed
 * engine, whose run returns at once: join it first, so that nothing
 * touches c once destroy returned. STARTING lasts until the start made
 * the thread (RUNNING) or failed (NEW).
 */
static void context_dead(co_context *c)
{
	for (;;) {
		int s = co_context_state(c);

		if (c->manual) { /* no thread of its own */
			atomic_store_explicit(&c->state, CO_CONTEXT_DEAD, memory_order_release);
			return;
		}
		if (s == CO_CONTEXT_STARTING) {
			sched_yield();
		} else if (s == CO_CONTEXT_RUNNING || s == CO_CONTEXT_ENDED) {
			if (co_context_join(c) == -EINVAL) /* another join has it */
				sched_yield();
		} else if (context_move(c, s, CO_CONTEXT_DEAD)) {
			return;
		}
	}
}

int co_context_destroy(co_context *c)
{
	int s, err;

	if (c == NULL)
		return -EINVAL;
	s = co_context_state(c);
	if (s == CO_CONTEXT_DEAD)
		return -EINVAL;
	if (s == CO_CONTEXT_RUNNING || s == CO_CONTEXT_STARTING)
		return -EBUSY; /* a manual one too: its scheduler has not ended it */
	if (s == CO_CONTEXT_ENDED && !c->manual && co_context_join(c) == -EINVAL &&
	    co_context_state(c) != CO_CONTEXT_JOINED)
		return -EBUSY; /* another thread's join has not returned yet */
	co__fault_point(CO__POINT_CONTEXT_DESTROY);
	err = co_engine_destroy(&c->engine);
	if (err == 0)
		context_dead(c);
	return err;
}

/* ---- transfer ------------------------------------------------------------ */

/* co_transfer.res while a transfer to the frame's own context waits */
#define TRANSFER_YIELD 1

static int transfer_suspend(co_awaiter *a, co_frame *f)
{
	co_transfer *t = (co_transfer *)a;
	co_engine *from = co_engine_current();
	co_context *here = co_context_current();
	co_frame *root = co_root(f);
	int err;

	if (from == NULL) {
		t->res = -ENXIO;
		return 0;
	}
	if (t->target == NULL || root->runner != &from->runner) {
		t->res = -EINVAL;
		return 0;
	}
	/* To the engine it is on: a yield, for its next turn, whose value is
	 * -ECANCELED if a cancel was asked by then (transfer_resume). */
	if (&t->target->engine == from) {
		t->res = TRANSFER_YIELD;
		if (co__wake_root(root))
			co__engine_later(from, root);
		return 1;
	}
	/* A scheduler counts its tasks: they stay among its contexts. (A
	 * frame on a lone engine has no context here.) */
	if ((here ? here->sched : NULL) != t->target->sched) {
		t->res = -EXDEV;
		return 0;
	}
	/* Its live count moves with it. After a successful move the target's
	 * thread may already run it: the result is written before, and
	 * nothing of the frame is touched after. */
	t->res = 0;
	err = co__engine_move(root, from, &t->target->engine);
	if (err == 0)
		return 1;
	t->res = err; /* not moved: still ours */
	return 0;
}

/* A transfer to the context the frame is on: as co_next_turn, it ends
 * with -ECANCELED when the frame was asked to cancel before or while it
 * waited (a cancel stop included: the engine marks what it resumes). */
static int transfer_resume(co_awaiter *a, co_frame *f)
{
	int res = ((co_transfer *)a)->res;

	if (res == TRANSFER_YIELD)
		return co_await_cancelled(f) ? -ECANCELED : 0;
	return res;
}

/* co_cancel during the hop: nothing to cut short (the frame is already
 * queued on the target, or is about to run again here); a move sees
 * co_cancelled() once it resumes, a yield ends with -ECANCELED. */
static int transfer_cancel(co_awaiter *a, co_frame *f)
{
	(void)a;
	(void)f;
	return 0;
}

static const co_awaiter_ops transfer_ops = { NULL, transfer_suspend, transfer_resume,
					     transfer_cancel, CO__AW_TRANSFER, "transfer" };

co_awaiter *co_transfer_to(co_transfer *t, co_context *target)
{
	if (t == NULL)
		return NULL; /* awaiting NULL: -EINVAL */
	t->aw.ops = &transfer_ops;
	t->target = target;
	t->res = 0;
	return &t->aw;
}
