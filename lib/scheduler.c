/* SPDX-License-Identifier: MIT */
/* The scheduler: dispatch, the race-free end of a run, work stealing.
 * The protocol and its memory orders are explained in docs/scheduler.md. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <coring/scheduler.h>
#include "internal.h"

#define ACCEPTING 1ul
#define TASK 2ul /* one task in the word */

/* ---- engine hooks ---------------------------------------------------------- */

/* A task finished (after its on_done). The last one wakes co_sched_run. */
static void sched_task_done(void *arg)
{
	co_sched *s = arg;
	unsigned long old = atomic_fetch_sub_explicit(&s->word, TASK, memory_order_acq_rel);

	if ((old >> 1) == 1) {
		pthread_mutex_lock(&s->lock);
		pthread_cond_broadcast(&s->idle);
		pthread_mutex_unlock(&s->lock);
	}
}

/* An idle context takes half the ready frames of the first sibling with a
 * backlog (two or more). */
static int sched_steal(co_engine *thief, void *arg)
{
	co_sched *s = arg;
	co_context *me = (co_context *)thief;

	for (unsigned k = 1; k < s->n; k++) {
		co_context *v = &s->ctx[(me->index + k) % s->n];
		unsigned avail = co__engine_ready(&v->engine);

		if (avail < 2)
			continue; /* its last frame is about to run there */
		return (int)co__engine_steal(thief, &v->engine, avail / 2);
	}
	return 0;
}

/* A busy context has a backlog: wake one sleeping sibling to steal from it. */
static void sched_backlog(co_engine *e, void *arg)
{
	co_sched *s = arg;
	co_context *me = (co_context *)e;

	for (unsigned k = 1; k < s->n; k++) {
		co_context *o = &s->ctx[(me->index + k) % s->n];

		if (co__engine_sleeping(&o->engine)) {
			co__engine_kick(&o->engine);
			return;
		}
	}
}

/* ---- setup ------------------------------------------------------------------ */

static int context_setup(co_sched *s, unsigned i)
{
	co_context *c = &s->ctx[i];
	int err = co_context_init(c, &s->opts.engine);

	if (err < 0)
		return err;
	c->index = i;
	c->sched = s;
	c->engine.task_done = sched_task_done;
	if (s->opts.steal && s->n > 1) {
		c->engine.steal = sched_steal;
		c->engine.backlog = sched_backlog;
	}
	c->engine.hook_arg = s;
	return 0;
}

int co_sched_init(co_sched *s, const co_sched_opts *opts)
{
	co_sched_opts o = { 0 };
	int err;

	if (s == NULL)
		return -EINVAL;
	if (opts)
		o = *opts;
	if (o.dispatch != CO_DISPATCH_ROUND_ROBIN && o.dispatch != CO_DISPATCH_LEAST_LOADED)
		return -EINVAL;
	if (o.contexts == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		o.contexts = n > 0 ? (unsigned)n : 1;
	}
	memset(s, 0, sizeof *s);
	s->opts = o;
	s->n = o.contexts;
	s->ctx = calloc(s->n, sizeof *s->ctx);
	if (s->ctx == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < s->n; i++) {
		err = context_setup(s, i);
		if (err < 0) {
			while (i--)
				co_context_destroy(&s->ctx[i]);
			free(s->ctx);
			s->ctx = NULL;
			return err;
		}
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->idle, NULL);
	atomic_store(&s->word, ACCEPTING);
	return 0;
}

int co_sched_destroy(co_sched *s)
{
	if (s == NULL || s->ctx == NULL)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (s->running || (atomic_load(&s->word) >> 1) != 0) {
		pthread_mutex_unlock(&s->lock);
		return -EBUSY;
	}
	pthread_mutex_unlock(&s->lock);
	for (unsigned i = 0; i < s->n; i++)
		co_context_destroy(&s->ctx[i]);
	free(s->ctx);
	s->ctx = NULL;
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->idle);
	return 0;
}

/* ---- submit ------------------------------------------------------------------ */

static unsigned pick(co_sched *s)
{
	unsigned best = 0, best_live = ~0u;

	if (s->opts.dispatch == CO_DISPATCH_ROUND_ROBIN)
		return atomic_fetch_add_explicit(&s->rr, 1, memory_order_relaxed) % s->n;
	for (unsigned i = 0; i < s->n; i++) {
		unsigned live = co__engine_live(&s->ctx[i].engine);
		if (live < best_live) {
			best_live = live;
			best = i;
		}
	}
	return best;
}

/* i == s->n: pick one by the dispatch strategy. */
static int submit(co_sched *s, unsigned i, co_frame *f)
{
	unsigned long w;
	int err;

	if (s == NULL || s->ctx == NULL || f == NULL || f->fn == NULL || f->parent != NULL ||
	    f->label != 0 || (f->state & (CO__ST_SPAWNED | CO__ST_DONE)) || i > s->n)
		return -EINVAL;
	/* Count the task, unless the run is ending (ACCEPTING cleared). This
	 * CAS and the one in co_sched_run are the two sides of the protocol. */
	w = atomic_load_explicit(&s->word, memory_order_relaxed);
	do {
		if (!(w & ACCEPTING))
			return -ESHUTDOWN;
	} while (!atomic_compare_exchange_weak_explicit(&s->word, &w, w + TASK, memory_order_acq_rel,
							memory_order_relaxed));
	f->state |= CO__ST_TASK;
	err = co_engine_spawn(&s->ctx[i == s->n ? pick(s) : i].engine, f);
	if (err < 0) { /* its context was shut down: refused, uncounted */
		f->state &= ~(unsigned)CO__ST_TASK;
		sched_task_done(s);
	}
	return err;
}

int co_sched_spawn(co_sched *s, co_frame *f)
{
	return submit(s, s ? s->n : 0, f);
}

int co_sched_spawn_to(co_sched *s, unsigned i, co_frame *f)
{
	if (s && i >= s->n)
		return -EINVAL;
	return submit(s, i, f);
}

unsigned long co_sched_tasks(co_sched *s)
{
	return s ? atomic_load(&s->word) >> 1 : 0;
}

int co_sched_shutdown(co_sched *s)
{
	if (s == NULL || s->ctx == NULL)
		return -EINVAL;
	for (unsigned i = 0; i < s->n; i++)
		co_engine_stop(&s->ctx[i].engine, 1);
	return 0;
}

/* ---- run -------------------------------------------------------------------- */

int co_sched_run(co_sched *s)
{
	int err = 0, e;
	unsigned started = 0;

	if (s == NULL || s->ctx == NULL)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (s->running) {
		pthread_mutex_unlock(&s->lock);
		return -EBUSY;
	}
	s->running = 1;
	pthread_mutex_unlock(&s->lock);

	for (; started < s->n; started++) {
		err = co_context_start(&s->ctx[started], CO_RUN_UNTIL_STOP);
		if (err < 0)
			break;
	}
	/* Wait for zero tasks, then close the door with one CAS that succeeds
	 * only if the word is exactly "accepting, no task": a submit that
	 * counted itself first makes it fail, and we wait again. */
	while (err == 0) {
		unsigned long w = ACCEPTING;

		pthread_mutex_lock(&s->lock);
		while ((atomic_load_explicit(&s->word, memory_order_acquire) >> 1) != 0)
			pthread_cond_wait(&s->idle, &s->lock);
		pthread_mutex_unlock(&s->lock);
		if (atomic_compare_exchange_strong_explicit(&s->word, &w, 0, memory_order_acq_rel,
							    memory_order_acquire))
			break;
	}
	if (err < 0) /* a context could not start: refuse new tasks */
		atomic_fetch_and_explicit(&s->word, ~ACCEPTING, memory_order_acq_rel);
	/* No task is left and none can be accepted: stop (each engine drains
	 * what remains, e.g. frames spawned by tasks), join, and set up fresh
	 * engines for the next run (an io_uring belongs to its thread). */
	for (unsigned i = 0; i < s->n; i++)
		co_context_stop(&s->ctx[i], 0);
	for (unsigned i = 0; i < started; i++) {
		e = co_context_join(&s->ctx[i]);
		if (e < 0 && err == 0)
			err = e;
	}
	for (unsigned i = 0; i < s->n && err == 0; i++) {
		e = co_context_destroy(&s->ctx[i]);
		if (e == 0)
			e = context_setup(s, i);
		if (e < 0)
			err = e;
	}
	if (err == 0)
		atomic_store_explicit(&s->word, ACCEPTING, memory_order_release);
	pthread_mutex_lock(&s->lock);
	s->running = 0;
	pthread_mutex_unlock(&s->lock);
	return err;
}
