/* SPDX-License-Identifier: MIT */
/*
 * The scheduler: dispatch, waiting for the end of the work (and noticing
 * when it cannot end), stop, work stealing. The protocol and its memory
 * orders are explained in docs/scheduler.md; the lifecycle in
 * docs/design.md.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <coring/scheduler.h>
#include "internal.h"
#include "fault.h"

#define ACCEPTING 1ul
#define TASK 2ul /* one task in the word */

static co_context *ctx_of(co_engine *e)
{
	return co__container_of(e, co_context, engine);
}

static void lock(co_sched *s)
{
	pthread_mutex_lock(&s->lock);
}

static void unlock(co_sched *s)
{
	pthread_mutex_unlock(&s->lock);
}

/* Wake the threads in co_sched_run and co_sched_destroy. */
static void signal_waiters(co_sched *s)
{
	lock(s);
	pthread_cond_broadcast(&s->cond);
	unlock(s);
}

/* ---- engine hooks ---------------------------------------------------------- */

/* A task finished (after its on_done). */
static void sched_task_done(co_engine *e, void *arg)
{
	co_sched *s = arg;

	(void)e;
	atomic_fetch_sub_explicit(&s->word, TASK, memory_order_acq_rel);
}

/* An engine became quiet (idle, nothing can progress) or stopped being
 * so. The count only tells co_sched_run when to look (all_quiet decides);
 * an engine that goes quiet wakes it. */
static void sched_quiet(co_engine *e, void *arg, int quiet)
{
	co_sched *s = arg;

	(void)e;
	atomic_fetch_add_explicit(&s->quiet, quiet ? 1 : -1, memory_order_acq_rel);
	if (quiet)
		signal_waiters(s);
}

/* An idle context takes half the ready frames of the first sibling with a
 * backlog (two or more). */
static int sched_steal(co_engine *thief, void *arg)
{
	co_sched *s = arg;
	co_context *me = ctx_of(thief);

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
	co_context *me = ctx_of(e);

	for (unsigned k = 1; k < s->n; k++) {
		co_context *o = &s->ctx[(me->index + k) % s->n];

		if (co__engine_sleeping(&o->engine)) {
			co__engine_kick(&o->engine);
			return;
		}
	}
}

static const struct co__engine_hooks hooks_plain = {
	.task_done = sched_task_done,
	.quiet = sched_quiet,
};

static const struct co__engine_hooks hooks_stealing = {
	.task_done = sched_task_done,
	.steal = sched_steal,
	.backlog = sched_backlog,
	.quiet = sched_quiet,
};

/* A context's thread returned (lib/context.c). */
void co__sched_context_ended(co_context *c)
{
	co_sched *s = c->sched;

	lock(s);
	s->ended++;
	if (c->ret < 0 && c->ret != -EDEADLK && s->err == 0)
		s->err = c->ret;
	pthread_cond_broadcast(&s->cond);
	unlock(s);
}

/* ---- setup and teardown ----------------------------------------------------- */

/* Stop, join and release contexts [0, n), of which [0, started) run
 * (nothing was spawned on them yet: they end at once). */
static void contexts_release(co_sched *s, unsigned n, unsigned started)
{
	for (unsigned i = 0; i < started; i++)
		co_context_stop(&s->ctx[i], CO_STOP_DRAIN);
	for (unsigned i = 0; i < started; i++)
		co_context_join(&s->ctx[i]);
	for (unsigned i = 0; i < n; i++)
		co_context_destroy(&s->ctx[i]);
}

int co_sched_init(co_sched *s, const co_sched_opts *opts)
{
	co_sched_opts o = { 0 };
	unsigned i, started = 0;
	int err = 0;

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
	s->ctx = co__calloc(s->n, sizeof *s->ctx);
	if (s->ctx == NULL)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	atomic_init(&s->word, ACCEPTING);
	for (i = 0; i < s->n; i++) {
		co_context *c = &s->ctx[i];

		err = co_context_init(c, &s->opts.engine);
		if (err < 0)
			break;
		c->index = i;
		c->sched = s;
		co__engine_set_hooks(&c->engine, s->opts.steal && s->n > 1 ? &hooks_stealing
									    : &hooks_plain, s);
	}
	s->state = CO_SCHED_RUNNING;
	s->epochs = err == 0 ? co__calloc(2 * (size_t)s->n, sizeof *s->epochs) : NULL;
	if (err == 0 && s->epochs == NULL)
		err = -ENOMEM;
	for (started = 0; err == 0 && started < s->n; started++) {
		err = co_context_start(&s->ctx[started], CO_RUN_UNTIL_STOP);
		if (err < 0)
			break;
	}
	if (err < 0) {
		contexts_release(s, i, started);
		free(s->epochs);
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->cond);
		free(s->ctx);
		memset(s, 0, sizeof *s);
		return err;
	}
	return 0;
}

static int live_frames(co_sched *s)
{
	for (unsigned i = 0; i < s->n; i++)
		if (co__engine_live(&s->ctx[i].engine))
			return 1;
	return 0;
}

int co_sched_destroy(co_sched *s)
{
	if (s == NULL || s->ctx == NULL)
		return -EINVAL;
	lock(s);
	if (s->state == CO_SCHED_DEAD || s->waiters) {
		int busy = s->waiters != 0;
		unlock(s);
		return busy ? -EBUSY : -EINVAL;
	}
	if (s->state == CO_SCHED_RUNNING) {
		/* Refuse spawns, then make sure nothing was live: if something
		 * is, take the refusal back (a spawn that saw it was refused
		 * with -ESHUTDOWN and kept nothing). */
		unsigned long w = ACCEPTING;
		if (!atomic_compare_exchange_strong(&s->word, &w, 0) || live_frames(s)) {
			if (w == ACCEPTING)
				atomic_fetch_or(&s->word, ACCEPTING);
			unlock(s);
			return -EBUSY;
		}
		s->state = CO_SCHED_STOPPING;
		unlock(s);
		for (unsigned i = 0; i < s->n; i++)
			co_context_stop(&s->ctx[i], CO_STOP_DRAIN);
		lock(s);
		while (s->ended != s->n) /* nothing was live: they end at once */
			pthread_cond_wait(&s->cond, &s->lock);
	} else if (s->ended != s->n) {
		unlock(s);
		return -EBUSY; /* stopped, still finishing: co_sched_run waits */
	}
	s->state = CO_SCHED_DEAD;
	unlock(s);
	for (unsigned i = 0; i < s->n; i++)
		co_context_destroy(&s->ctx[i]); /* joins; forgets stuck frames */
	free(s->ctx);
	free(s->epochs);
	s->ctx = NULL;
	s->epochs = NULL;
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	return 0;
}

/* ---- spawn ------------------------------------------------------------------ */

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
static int spawn(co_sched *s, unsigned i, co_frame *f)
{
	co_engine *e;
	unsigned long w;
	int err, visit;

	if (s == NULL || s->ctx == NULL || f == NULL || f->fn == NULL || f->parent != NULL ||
	    f->label != 0 || (f->state & (CO__ST_SPAWNED | CO__ST_DONE)) || i > s->n)
		return -EINVAL;
	e = &s->ctx[i == s->n ? pick(s) : i].engine;
	/* Visit the engine before the task is counted, so that co_sched_run
	 * never counts the task while the engine still looks quiet. */
	visit = co__engine_visit_begin(e);
	w = atomic_load_explicit(&s->word, memory_order_relaxed);
	do {
		if (!(w & ACCEPTING)) {
			co__engine_visit_end(e, visit);
			return -ESHUTDOWN;
		}
	} while (!atomic_compare_exchange_weak_explicit(&s->word, &w, w + TASK, memory_order_acq_rel,
							memory_order_relaxed));
	f->state |= CO__ST_TASK;
	err = co_engine_spawn(e, f);
	if (err < 0) { /* its context was stopped: refused, uncounted */
		f->state &= ~(unsigned)CO__ST_TASK;
		atomic_fetch_sub_explicit(&s->word, TASK, memory_order_acq_rel);
	}
	co__engine_visit_end(e, visit);
	return err;
}

int co_sched_spawn(co_sched *s, co_frame *f)
{
	return spawn(s, s ? s->n : 0, f);
}

int co_sched_spawn_to(co_sched *s, unsigned i, co_frame *f)
{
	if (s && i >= s->n)
		return -EINVAL;
	return spawn(s, i, f);
}

unsigned long co_sched_tasks(co_sched *s)
{
	return s ? atomic_load(&s->word) >> 1 : 0;
}

int co_sched_state(co_sched *s)
{
	int st;

	if (s == NULL)
		return -EINVAL;
	if (s->ctx == NULL)
		return CO_SCHED_DEAD;
	lock(s);
	st = s->state == CO_SCHED_STOPPING && s->ended == s->n ? CO_SCHED_ENDED : s->state;
	unlock(s);
	return st;
}

/* ---- stop --------------------------------------------------------------------- */

static int sched_stop(co_sched *s, int mode, uint64_t ns, int timed)
{
	if (s == NULL || s->ctx == NULL || (mode != CO_STOP_DRAIN && mode != CO_STOP_CANCEL))
		return -EINVAL;
	lock(s);
	if (s->state == CO_SCHED_DEAD) {
		unlock(s);
		return -EINVAL;
	}
	s->state = CO_SCHED_STOPPING;
	atomic_fetch_and_explicit(&s->word, ~ACCEPTING, memory_order_acq_rel);
	/* under the lock: destroy cannot free the contexts meanwhile */
	for (unsigned i = 0; i < s->n; i++) {
		if (timed)
			co_engine_stop_timed(&s->ctx[i].engine, ns);
		else
			co_context_stop(&s->ctx[i], mode);
	}
	unlock(s);
	return 0;
}

int co_sched_stop(co_sched *s, int mode)
{
	return sched_stop(s, mode, 0, 0);
}

int co_sched_stop_timed(co_sched *s, uint64_t ns)
{
	return sched_stop(s, CO_STOP_DRAIN, ns, 1);
}

/* ---- run ---------------------------------------------------------------------- */

/* One look at every running context's quiet flag and epoch. */
static int collect(co_sched *s, unsigned *epochs)
{
	for (unsigned i = 0; i < s->n; i++) {
		if (co_context_state(&s->ctx[i]) != CO_CONTEXT_RUNNING)
			continue; /* ended (under the lock: s->ended counts it) */
		if (!co__engine_quiet(&s->ctx[i].engine, &epochs[i]))
			return 0;
	}
	return 1;
}

/*
 * Is every context quiet at one instant? A context that is quiet and
 * whose epoch (bumped by every change another thread makes to it) is the
 * same in two looks stayed quiet in between: it sleeps with nothing that
 * can progress, and nothing came. The tasks and frames are counted
 * between the two looks: a spawn makes its context not quiet before it
 * counts its task (spawn), so a count that includes it fails the second
 * look. Returns 1 with *work set when there is work left, 0 otherwise.
 */
static int all_quiet(co_sched *s, unsigned *epochs, int *work)
{
	unsigned *again = epochs + s->n;

	if (!collect(s, epochs))
		return 0;
	*work = (atomic_load(&s->word) >> 1) != 0 || live_frames(s);
	if (!collect(s, again))
		return 0;
	return memcmp(epochs, again, s->n * sizeof *epochs) == 0;
}

int co_sched_run(co_sched *s)
{
	int ret = 0, work = 0;

	if (s == NULL || s->ctx == NULL)
		return -EINVAL;
	lock(s);
	if (s->state == CO_SCHED_DEAD) {
		unlock(s);
		return -EINVAL;
	}
	s->waiters++;
	for (;;) {
		if (s->ended == s->n) { /* stopped, and every context ended */
			work = (atomic_load(&s->word) >> 1) != 0 || live_frames(s);
			break;
		}
		if ((unsigned)atomic_load(&s->quiet) + s->ended >= s->n &&
		    all_quiet(s, s->epochs, &work))
			break;
		pthread_cond_wait(&s->cond, &s->lock);
	}
	if (s->err)
		ret = s->err;
	else if (work) {
		s->stuck = (unsigned)(atomic_load(&s->word) >> 1);
		ret = -EDEADLK;
	}
	s->waiters--;
	pthread_cond_broadcast(&s->cond);
	unlock(s);
	return ret;
}
