/* SPDX-License-Identifier: MIT */
/*
 * The scheduler: dispatch, waiting for the end of the work (and noticing
 * when it cannot end), stop, work stealing. The protocol and its memory
 * orders are explained in docs/scheduler.md; the lifecycle in
 * docs/design.md.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <coring/scheduler.h>
#include "context/context_internal.h"
#include "engine/engine_internal.h"
#include "common/clock.h"
#include "common/fault.h"
#include "scheduler_internal.h"

/* The word: spawns accepted, a destroy looking whether anything is live
 * (spawns wait for its answer), and the task count above them. */
#define ACCEPTING 1ul
#define CLOSING 2ul
#define TASK 4ul /* one task in the word */
#define TASKS(w) ((w) >> 2)
#define GONE 0x80000000u /* in visitors: destroyed */

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

/*
 * Every call that may race co_sched_destroy (a spawn from any thread, a
 * stop from a signal thread, a run) is a visit: counted in visitors
 * before it reads anything of s, so that destroy, which marks s GONE in
 * the same word, frees the contexts only once the calls inside have left.
 * A call that comes after the mark answers -EINVAL and touches nothing
 * but the word (the co_sched itself must outlive every call on it, as any
 * object). 0, or -EINVAL (NULL, destroyed or never set up: no visit left).
 */
static int visit(co_sched *s)
{
	if (s == NULL)
		return -EINVAL;
	if (atomic_fetch_add_explicit(&s->visitors, 1, memory_order_acq_rel) & GONE) {
		atomic_fetch_sub_explicit(&s->visitors, 1, memory_order_release);
		return -EINVAL;
	}
	if (s->ctx == NULL) { /* zeroed, or an init that failed */
		atomic_fetch_sub_explicit(&s->visitors, 1, memory_order_release);
		return -EINVAL;
	}
	return 0;
}

/* The visit's end; returns ret. */
static int leave(co_sched *s, int ret)
{
	/* release: the call's last touch of s happens before destroy frees */
	atomic_fetch_sub_explicit(&s->visitors, 1, memory_order_release);
	return ret;
}

int co__sched_contexts(co_sched *s, int (*fn)(co_context *ctx, unsigned n, void *arg), void *arg)
{
	int err = visit(s);

	if (err < 0)
		return err;
	return leave(s, fn(s->ctx, s->n, arg));
}

/* Wake the threads in co_sched_run and co_sched_destroy. */
static void signal_waiters(co_sched *s)
{
	lock(s);
	pthread_cond_broadcast(&s->cond);
	unlock(s);
}

/*
 * A manual context that no thread has ticked yet: nothing runs its frames
 * until a thread does, and the scheduler does not know which thread will
 * (it may be one that waits in co_sched_run). co_sched_run counts it as
 * idle, and answers -EBUSY rather than wait while it holds live frames.
 * Once a tick returned, its engine reports quiet like any other.
 */
static int unticked(co_context *c)
{
	return c->manual && !atomic_load_explicit(&c->ticked, memory_order_acquire) &&
	       co_context_state(c) == CO_CONTEXT_RUNNING;
}

/* c holds work: live frames, posts not run yet (co_engine_post: a post
 * counts as pending work), or I/O its last tick left in flight (its next
 * ticks reap it; only a manual context is ticked, so only its count is
 * ever set). */
static int has_work(co_context *c)
{
	return co__engine_live(&c->engine) != 0 || co__engine_posts_pending(&c->engine) ||
	       co__engine_io_due(&c->engine) != 0;
}

/* How many of s's contexts are unticked (a manual group has one context);
 * *live (if given) set when one of them holds work (has_work). */
static unsigned unticked_count(co_sched *s, int *live)
{
	unsigned n = 0;

	for (unsigned k = 0; k < s->ngroups; k++) {
		co_context *c = &s->ctx[s->groups[k].first];

		if (!unticked(c))
			continue;
		n++;
		if (live && has_work(c))
			*live = 1;
	}
	return n;
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
 * so. The count only tells co_sched_run when to look (all_quiet decides,
 * and only once every context is quiet or ended): an engine that goes
 * quiet wakes it when that may be so now. The other way, a context that
 * ends makes its count grow under the lock and wakes it (ended_locked).
 * seq_cst both: of this increment and its read of ended, and of that
 * count's increment and co_sched_run's read of quiet, one sees the other. */
static void sched_quiet(co_engine *e, void *arg, int quiet)
{
	co_sched *s = arg;
	unsigned n;

	(void)e;
	n = (unsigned)atomic_fetch_add_explicit(&s->quiet, quiet ? 1 : -1, memory_order_seq_cst);
	if (!quiet)
		return;
	n += 1 + __atomic_load_n(&s->ended, __ATOMIC_SEQ_CST);
	if (n >= s->n || n + unticked_count(s, NULL) >= s->n) /* unticked: idle */
		signal_waiters(s);
}

/* The k-th sibling of c in its group (k < group size). */
static co_context *sibling(co_sched *s, co_context *c, unsigned k)
{
	const struct co__sched_group *g = &s->groups[c->kind];

	return &s->ctx[g->first + (c->index - g->first + k) % g->n];
}

/* An idle context takes half the ready frames of the first sibling of its
 * group with a backlog (two or more). */
static int sched_steal(co_engine *thief, void *arg)
{
	co_sched *s = arg;
	co_context *me = ctx_of(thief);

	for (unsigned k = 1; k < s->groups[me->kind].n; k++) {
		co_context *v = sibling(s, me, k);
		unsigned avail = co__engine_ring_size(&v->engine);

		if (avail < 2)
			continue; /* its last frame is about to run there */
		return (int)co__engine_steal(thief, &v->engine, avail / 2);
	}
	return 0;
}

/* A busy context has a backlog: wake one sleeping sibling of its group to
 * steal from it. */
static void sched_backlog(co_engine *e, void *arg)
{
	co_sched *s = arg;
	co_context *me = ctx_of(e);

	for (unsigned k = 1; k < s->groups[me->kind].n; k++) {
		co_context *o = sibling(s, me, k);

		if (co__engine_sleeping(&o->engine)) {
			co__engine_kick(&o->engine);
			return;
		}
	}
}

/* Polling for work before a sleep costs a CPU: at most s->spinners of the
 * contexts poll at once. Only a context with a thread of its own polls (a
 * manual one's ticks never sleep, so it never polls): with no more of
 * those than s->spinners the cap cannot bind, and the contexts get hooks
 * without this one (sched_hooks): nothing is counted, as the count is a
 * cache line every context would write twice per hand-off. */
static int sched_spin(co_engine *e, void *arg, int begin)
{
	co_sched *s = arg;
	unsigned n;

	(void)e;
	if (!begin) {
		atomic_fetch_sub_explicit(&s->spinning, 1, memory_order_relaxed);
		return 0;
	}
	n = atomic_fetch_add_explicit(&s->spinning, 1, memory_order_relaxed) + 1;
	if (n > s->spinners) {
		atomic_fetch_sub_explicit(&s->spinning, 1, memory_order_relaxed);
		return 0;
	}
	unsigned peak = __atomic_load_n(&s->spin_peak, __ATOMIC_RELAXED);
	while (n > peak && !__atomic_compare_exchange_n(&s->spin_peak, &peak, n, 1,
							 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return 1;
}

static const struct co__engine_hooks hooks_plain = {
	.task_done = sched_task_done,
	.quiet = sched_quiet,
	.spin = sched_spin,
};

static const struct co__engine_hooks hooks_stealing = {
	.task_done = sched_task_done,
	.steal = sched_steal,
	.backlog = sched_backlog,
	.quiet = sched_quiet,
	.spin = sched_spin,
};

/* The same where the cap on pollers cannot bind: no count. */
static const struct co__engine_hooks hooks_plain_uncapped = {
	.task_done = sched_task_done,
	.quiet = sched_quiet,
};

static const struct co__engine_hooks hooks_stealing_uncapped = {
	.task_done = sched_task_done,
	.steal = sched_steal,
	.backlog = sched_backlog,
	.quiet = sched_quiet,
};

/* The hooks of a context: stealing or not, pollers counted or not. */
static const struct co__engine_hooks *sched_hooks(int stealing, int capped)
{
	if (stealing)
		return capped ? &hooks_stealing : &hooks_stealing_uncapped;
	return capped ? &hooks_plain : &hooks_plain_uncapped;
}

/* Only a scheduler sets these hooks, on its contexts' engines: an engine
 * with one of them is a co_context's (its first member). */
int co__sched_context_of(const co_engine *e, int *index, int *kind)
{
	const co_context *c;

	if (e->hooks != &hooks_plain && e->hooks != &hooks_stealing &&
	    e->hooks != &hooks_plain_uncapped && e->hooks != &hooks_stealing_uncapped)
		return 0;
	c = (const co_context *)(const void *)((const char *)e - offsetof(co_context, engine));
	*index = (int)c->index;
	*kind = (int)c->kind;
	return 1;
}

static void ended_locked(co_sched *s, co_context *c)
{
	__atomic_store_n(&s->ended, s->ended + 1, __ATOMIC_SEQ_CST); /* see sched_quiet */
	if (c->ret < 0 && c->ret != -EDEADLK && s->err == 0)
		s->err = c->ret;
	pthread_cond_broadcast(&s->cond);
}

/* A context's thread returned, or a manual context ended: the notice this
 * scheduler installs on its contexts (co__context_on_end). */
static void context_ended(co_context *c)
{
	co_sched *s = c->sched;

	lock(s);
	ended_locked(s, c);
	unlock(s);
}

/* Under the lock, after a stop: a manual context ends once it is stopped
 * with nothing live on it and no post pending (its ticks may stop
 * coming); ending it here spares its program one more tick. */
static void end_manual(co_sched *s)
{
	for (unsigned i = 0; i < s->n; i++) {
		co_context *c = &s->ctx[i];

		if (c->manual && co__context_end_manual(c, 0))
			ended_locked(s, c);
	}
}

/* ---- setup and teardown ----------------------------------------------------- */

/* Stop, join and release contexts [0, n), of which [0, started) run
 * (nothing was spawned on them yet: they end at once). */
static void contexts_release(co_sched *s, unsigned n, unsigned started)
{
	for (unsigned i = 0; i < started; i++)
		co_context_stop(&s->ctx[i], CO_STOP_DRAIN);
	for (unsigned i = 0; i < started; i++)
		if (!s->ctx[i].manual)
			co_context_join(&s->ctx[i]);
		else
			atomic_store(&s->ctx[i].state, CO_CONTEXT_ENDED);
	for (unsigned i = 0; i < n; i++)
		co_context_destroy(&s->ctx[i]);
}

static int dispatch_ok(co_dispatch d)
{
	return d == CO_DISPATCH_ROUND_ROBIN || d == CO_DISPATCH_LEAST_LOADED;
}

/* The groups asked for (one from the plain fields when groups is NULL),
 * checked; their contexts counted in *n. */
static int groups_check(const co_sched_opts *o, co_sched_group *one, const co_sched_group **gs,
			unsigned *ng, unsigned *n)
{
	if ((o->groups == NULL) != (o->ngroups == 0))
		return -EINVAL;
	if (o->groups == NULL) {
		one->contexts = o->contexts;
		one->dispatch = o->dispatch;
		one->steal = o->steal;
		one->manual = 0;
		one->engine = o->engine;
		if (one->contexts == 0) {
			long cpus = sysconf(_SC_NPROCESSORS_ONLN);
			one->contexts = cpus > 0 ? (unsigned)cpus : 1;
		}
		*gs = one;
		*ng = 1;
	} else {
		*gs = o->groups;
		*ng = o->ngroups;
	}
	*n = 0;
	for (unsigned k = 0; k < *ng; k++) {
		const co_sched_group *g = &(*gs)[k];
		unsigned c = g->contexts ? g->contexts : 1;

		if (!dispatch_ok(g->dispatch) || (g->manual && (c != 1 || g->steal)))
			return -EINVAL;
		if (c > UINT_MAX - *n)
			return -EINVAL; /* the contexts of all groups must add up in an unsigned */
		*n += c;
	}
	return 0;
}

/* As many as the CPUs the process may use: a context polls only while it
 * has nothing to run, so pollers never take a CPU from a context of this
 * scheduler with work, and two contexts that hand work back and forth can
 * both poll (with fewer, every other hand-off finds its target asleep). */
static unsigned default_spinners(void)
{
	cpu_set_t cpus;
	int n = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;

	return n > 1 ? (unsigned)n : 1;
}

int co_sched_init(co_sched *s, const co_sched_opts *opts)
{
	co_sched_opts o = { 0 };
	co_sched_group one;
	const co_sched_group *gs;
	unsigned i = 0, started = 0, ng, n, threads = 0;
	int err = 0, capped;

	if (s == NULL)
		return -EINVAL;
	if (opts)
		o = *opts;
	err = groups_check(&o, &one, &gs, &ng, &n);
	if (err < 0)
		return err;
	memset(s, 0, sizeof *s);
	s->opts = o;
	s->n = n;
	s->spinners = o.spinners ? o.spinners : default_spinners();
	s->ngroups = ng;
	for (unsigned k = 0; k < ng; k++) /* the contexts that may poll */
		if (!gs[k].manual)
			threads += gs[k].contexts ? gs[k].contexts : 1;
	capped = threads > s->spinners;
	/* co_context holds a co_engine, whose words written by other
	 * threads start a cache line of their own: calloc's 16 bytes would
	 * put them across two lines, beside the owner's */
	s->ctx = co__calloc_aligned(_Alignof(co_context), n, sizeof *s->ctx);
	s->groups = co__calloc(ng, sizeof *s->groups);
	s->epochs = co__calloc(2 * (size_t)n, sizeof *s->epochs);
	if (s->ctx == NULL || s->groups == NULL || s->epochs == NULL) {
		free(s->ctx);
		free(s->groups);
		free(s->epochs);
		memset(s, 0, sizeof *s);
		return -ENOMEM;
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	atomic_init(&s->word, ACCEPTING);
	s->state = CO_SCHED_RUNNING;
	for (unsigned k = 0; k < ng && err == 0; k++) {
		const co_sched_group *g = &gs[k];
		struct co__sched_group *sg = &s->groups[k];

		sg->first = i;
		sg->n = g->contexts ? g->contexts : 1;
		sg->dispatch = g->dispatch;
		for (unsigned j = 0; j < sg->n && err == 0; j++, i++) {
			co_context *c = &s->ctx[i];

			err = co_context_init(c, &g->engine);
			if (err < 0)
				break;
			c->index = i;
			c->kind = k;
			c->sched = s;
			co__context_on_end(c, context_ended);
			c->manual = g->manual;
			co__engine_set_hooks(&c->engine, sched_hooks(g->steal && sg->n > 1, capped),
					     s);
			if (g->steal && sg->n > 1) /* frames that roam move within the group */
				co__engine_set_roam(&c->engine, sg);
		}
	}
	for (started = 0; err == 0 && started < n; started++) {
		co_context *c = &s->ctx[started];

		if (c->manual) /* no thread: its ticks run it */
			atomic_store(&c->state, CO_CONTEXT_RUNNING);
		else
			err = co_context_start(c, CO_RUN_UNTIL_STOP);
		if (err < 0)
			break;
	}
	if (err < 0) {
		contexts_release(s, i, started);
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->cond);
		free(s->ctx);
		free(s->groups);
		free(s->epochs);
		memset(s, 0, sizeof *s);
		return err;
	}
	return 0;
}

/* Work on any context of s: live frames or pending posts (has_work). */
static int work_left(co_sched *s)
{
	for (unsigned i = 0; i < s->n; i++)
		if (has_work(&s->ctx[i]))
			return 1;
	return 0;
}

/* Live frames on every engine of s, summed. */
static unsigned long live_sum(co_sched *s)
{
	unsigned long n = 0;

	for (unsigned i = 0; i < s->n; i++)
		n += co__engine_live(&s->ctx[i].engine);
	return n;
}

/* What a context's engine holds that its destroy refuses for, though no
 * frame is live: a co_bufring, or a pool job still running for a frame a
 * cancel stop finished (co__engine_held). */
static int engines_held(co_sched *s)
{
	for (unsigned i = 0; i < s->n; i++)
		if (co__engine_held(&s->ctx[i].engine))
			return 1;
	return 0;
}

/* Under the lock: a manual context that end_manual left running. */
static int manual_left(co_sched *s)
{
	for (unsigned i = 0; i < s->n; i++)
		if (s->ctx[i].manual && co_context_state(&s->ctx[i]) == CO_CONTEXT_RUNNING)
			return 1;
	return 0;
}

/* Under the lock, while RUNNING: refuse spawns and stop every context,
 * if nothing is live, no post pending and no engine holds anything; 0
 * once every context has ended. -EBUSY otherwise, refusing nothing: a
 * spawn that comes while the look is taken (CLOSING) waits for its
 * answer. Nothing else changes the word meanwhile: no task is counted,
 * and a stop takes the lock. A post does not look at the word: one that
 * reaches a manual context after the look keeps it running until a tick
 * ran it (end_manual); then the contexts stay stopped and the answer is
 * -EBUSY (a stop still finishing), not a wait for a tick that may be this
 * thread's. */
static int stop_idle(co_sched *s)
{
	unsigned long w = ACCEPTING;

	if (!atomic_compare_exchange_strong(&s->word, &w, CLOSING))
		return -EBUSY; /* tasks are counted */
	co__fault_point(CO__POINT_SCHED_CLOSING); /* tests: a spawn comes now */
	if (work_left(s) || engines_held(s)) {
		atomic_store(&s->word, ACCEPTING);
		return -EBUSY;
	}
	atomic_store(&s->word, 0);
	s->state = CO_SCHED_STOPPING;
	unlock(s);
	for (unsigned i = 0; i < s->n; i++)
		co_context_stop(&s->ctx[i], CO_STOP_DRAIN);
	co__fault_point(CO__POINT_SCHED_STOPPED); /* tests: the contexts end now */
	lock(s);
	end_manual(s);
	if (manual_left(s))
		return -EBUSY;
	while (s->ended != s->n) /* nothing was live: they end at once */
		pthread_cond_wait(&s->cond, &s->lock);
	return 0;
}

/* Release the contexts not released yet (every one has ended): 0, or the
 * first refusal (the others are released; a later destroy tries again). */
static int contexts_destroy(co_sched *s)
{
	int err = 0;

	for (unsigned i = 0; i < s->n; i++) {
		int e;

		if (co_context_state(&s->ctx[i]) == CO_CONTEXT_DEAD)
			continue;
		e = co_context_destroy(&s->ctx[i]); /* joins; forgets stuck frames */
		if (e < 0 && err == 0)
			err = e;
	}
	return err;
}

/* Every context released: mark s GONE, wait for the calls inside to
 * leave (destroy is one of them), free. */
static void sched_free(co_sched *s)
{
	atomic_fetch_or_explicit(&s->visitors, GONE, memory_order_acq_rel);
	while ((atomic_load_explicit(&s->visitors, memory_order_acquire) & ~GONE) != 1)
		sched_yield();
	free(s->ctx);
	free(s->epochs);
	free(s->groups);
	s->ctx = NULL;
	s->epochs = NULL;
	s->groups = NULL;
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	atomic_fetch_sub_explicit(&s->visitors, 1, memory_order_release);
}

/* The calling thread runs one of s's contexts now (a frame, an on_done,
 * a post; a manual context's tick): a destroy there would wait for its
 * own context to end. */
static int on_own_context(co_sched *s)
{
	co_context *c = co_context_current();

	return c && c->sched == s;
}

int co_sched_destroy(co_sched *s)
{
	int err;

	if (visit(s) < 0)
		return -EINVAL;
	lock(s);
	if (s->state == CO_SCHED_DEAD) {
		unlock(s);
		return leave(s, -EINVAL);
	}
	if (s->waiters || s->closing || on_own_context(s)) {
		err = -EBUSY; /* a run waits, another destroy is stopping or
		                 releasing, or we run on a context it would wait for */
	} else if (s->state == CO_SCHED_RUNNING) {
		/* closing from here: stop_idle waits for the contexts' ends
		 * unlocked, and a destroy that came then would find them ended
		 * and release them too */
		s->closing = 1;
		err = stop_idle(s);
	} else { /* stopped: -EBUSY while contexts finish (co_sched_run waits) */
		err = (end_manual(s), s->ended != s->n) ? -EBUSY : 0;
	}
	if (err == 0 && engines_held(s))
		err = -EBUSY; /* a ring or a pool job holds an engine: release it first */
	if (err < 0) {
		s->closing = 0;
		unlock(s);
		return leave(s, err);
	}
	s->closing = 1;
	unlock(s);
	err = contexts_destroy(s);
	lock(s);
	s->closing = 0;
	if (err == 0)
		s->state = CO_SCHED_DEAD;
	unlock(s);
	if (err < 0)
		return leave(s, err);
	sched_free(s);
	return 0;
}

/* ---- spawn ------------------------------------------------------------------ */

/* A context of group k by its dispatch strategy. */
static co_context *pick(co_sched *s, unsigned k)
{
	struct co__sched_group *g = &s->groups[k];
	unsigned best = 0, best_live = ~0u;

	if (g->dispatch == CO_DISPATCH_ROUND_ROBIN)
		return &s->ctx[g->first +
			       atomic_fetch_add_explicit(&g->rr, 1, memory_order_relaxed) % g->n];
	for (unsigned i = 0; i < g->n; i++) {
		unsigned live = co__engine_live(&s->ctx[g->first + i].engine);
		if (live < best_live) {
			best_live = live;
			best = i;
		}
	}
	return &s->ctx[g->first + best];
}

/* Spread keys that differ in a few bits (connection numbers, ids). */
static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	return k ^ (k >> 33);
}

static int spawn(co_sched *s, co_context *c, co_frame *f)
{
	co_engine *e = &c->engine;
	unsigned long w;
	int err, visit;

	if (f == NULL || f->fn == NULL || f->parent != NULL || f->label != 0 ||
	    (f->state & (CO__ST_SPAWNED | CO__ST_DONE)))
		return -EINVAL;
	/* Visit the engine before the task is counted, so that co_sched_run
	 * never counts the task while the engine still looks quiet. */
	visit = co__engine_visit_begin(e);
	w = atomic_load_explicit(&s->word, memory_order_relaxed);
	do {
		while (co__unlikely(w & CLOSING)) { /* a destroy looks: its answer is short */
			co__fault_point(CO__POINT_SPAWN_WAITS); /* tests: the look ends now */
			sched_yield();
			w = atomic_load_explicit(&s->word, memory_order_relaxed);
		}
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

/* The spawns race co_sched_destroy safely: each is a visit (see visit). */
int co_sched_spawn_kind(co_sched *s, unsigned kind, co_frame *f)
{
	if (visit(s) < 0)
		return -EINVAL;
	if (kind >= s->ngroups)
		return leave(s, -EINVAL);
	return leave(s, spawn(s, pick(s, kind), f));
}

int co_sched_spawn(co_sched *s, co_frame *f)
{
	return co_sched_spawn_kind(s, 0, f);
}

int co_sched_spawn_key(co_sched *s, unsigned kind, uint64_t key, co_frame *f)
{
	const struct co__sched_group *g;

	if (visit(s) < 0)
		return -EINVAL;
	if (kind >= s->ngroups)
		return leave(s, -EINVAL);
	g = &s->groups[kind];
	return leave(s, spawn(s, &s->ctx[g->first + (unsigned)(mix(key) % g->n)], f));
}

int co_sched_spawn_to(co_sched *s, unsigned i, co_frame *f)
{
	if (visit(s) < 0)
		return -EINVAL;
	if (i >= s->n)
		return leave(s, -EINVAL);
	return leave(s, spawn(s, &s->ctx[i], f));
}

int co_sched_roam(co_frame *f, int on)
{
	if (f == NULL || CO__IS_CHILD(f) || (on != 0 && on != 1))
		return -EINVAL;
	if (on)
		f->state |= CO__ST_ROAM;
	else
		f->state &= (uint16_t)~CO__ST_ROAM;
	return 0;
}

co_context *co_sched_pick(co_sched *s, unsigned kind)
{
	co_context *c = NULL;

	if (visit(s) < 0)
		return NULL;
	if (kind < s->ngroups)
		c = pick(s, kind);
	leave(s, 0);
	return c;
}

unsigned long co_sched_tasks(co_sched *s)
{
	return s ? TASKS(atomic_load(&s->word)) : 0;
}

int co_sched_state(co_sched *s)
{
	int st;

	if (s == NULL)
		return -EINVAL;
	if (visit(s) < 0)
		return CO_SCHED_DEAD;
	lock(s);
	st = s->state == CO_SCHED_STOPPING && s->ended == s->n ? CO_SCHED_ENDED : s->state;
	unlock(s);
	return leave(s, st);
}

/* ---- stop --------------------------------------------------------------------- */

static int sched_stop(co_sched *s, int mode, uint64_t ns, int timed)
{
	if ((mode != CO_STOP_DRAIN && mode != CO_STOP_CANCEL) || visit(s) < 0)
		return -EINVAL;
	lock(s);
	if (s->state == CO_SCHED_DEAD) {
		unlock(s);
		return leave(s, -EINVAL);
	}
	s->state = CO_SCHED_STOPPING;
	atomic_fetch_and_explicit(&s->word, ~ACCEPTING, memory_order_acq_rel);
	/* under the lock: destroy cannot free the contexts meanwhile */
	for (unsigned i = 0; i < s->n; i++) {
		if (timed)
			co_engine_stop_timed(&s->ctx[i].engine, ns);
		else
			co_engine_stop(&s->ctx[i].engine, mode);
	}
	unlock(s);
	/* A cancel stop finishes the frames of a manual context no thread has
	 * ticked here (co_context_stop), out of the lock: their on_done may
	 * call the scheduler. The visit keeps the contexts' memory; one that
	 * a destroy released meanwhile answers -EINVAL. */
	if (!timed && mode == CO_STOP_CANCEL)
		for (unsigned i = 0; i < s->n; i++)
			if (s->ctx[i].manual)
				co_context_stop(&s->ctx[i], CO_STOP_CANCEL);
	return leave(s, 0);
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

/* One look at every running context's quiet flag and epoch. An unticked
 * manual context is idle (its live frames are counted as work): a look
 * that finds it ticked since the last one sees its flag, and a different
 * epoch. */
static int collect(co_sched *s, unsigned *epochs)
{
	for (unsigned i = 0; i < s->n; i++) {
		epochs[i] = 0;
		if (co_context_state(&s->ctx[i]) != CO_CONTEXT_RUNNING)
			continue; /* ended (under the lock: s->ended counts it) */
		if (unticked(&s->ctx[i]))
			continue;
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
	*work = TASKS(atomic_load(&s->word)) != 0 || work_left(s);
	if (!collect(s, again))
		return 0;
	return memcmp(epochs, again, s->n * sizeof *epochs) == 0;
}

/* After a stop, with nothing left to run: has every context with a thread
 * of its own been counted ended? One that was quiet before the stop still
 * reads quiet until its thread wakes to it, drains and returns; a run
 * that ended before then would leave a destroy -EBUSY. A manual context
 * is not waited for here (its ticks may be this thread's): end_manual
 * ends one that is stopped with nothing live. A thread ends between its
 * ENDED and its count (context_ended), so those are counted from ended. */
static int threads_ended(co_sched *s)
{
	unsigned threads = 0, manual_ended = 0;

	for (unsigned i = 0; i < s->n; i++) {
		if (!s->ctx[i].manual)
			threads++;
		else if (co_context_state(&s->ctx[i]) == CO_CONTEXT_ENDED)
			manual_ended++;
	}
	return s->ended >= threads + manual_ended;
}

/*
 * Under the lock: is the work over? 1 with *ret set (0; -EBUSY: frames
 * wait for the first tick of a manual context, -EAGAIN for a poll;
 * -EDEADLK; or a context's error), 0 if it goes on. An unticked manual context counts as idle, its
 * live frames as work. A spawn from outside the scheduler onto one does
 * not show in the looks (its flag says nothing): one that has counted its
 * task and not yet made its frame live (more tasks than live frames) is
 * waited for, briefly and without the lock, and the looks taken again;
 * the unticked contexts' live frames are read after the counts.
 */
static int over(co_sched *s, int *ret, int poll)
{
	int work = 0, waiting;
	unsigned idle;

	for (;;) {
		if (s->state == CO_SCHED_STOPPING)
			end_manual(s);
		idle = unticked_count(s, NULL);
		if (s->ended == s->n) /* stopped, and every context ended */
			/* what is left is in an engine: the task count may
			 * still hold a spawn that counted itself before the
			 * stop and is being refused by its stopped engine
			 * (spawn takes it back) */
			work = work_left(s);
		else if ((unsigned)atomic_load(&s->quiet) + s->ended + idle < s->n ||
			 !all_quiet(s, s->epochs, &work))
			return 0;
		waiting = 0;
		if (work && idle)
			unticked_count(s, &waiting);
		if (!work || !idle || waiting || TASKS(atomic_load(&s->word)) <= live_sum(s))
			break;
		unlock(s); /* a spawn onto an unticked context is under way */
		sched_yield();
		lock(s);
	}
	if (s->state == CO_SCHED_STOPPING && !work && !s->err && !threads_ended(s))
		return 0; /* its end wakes the wait (ended_locked) */
	*ret = 0;
	if (s->err) {
		*ret = s->err;
	} else if (work && waiting) {
		/* nothing runs them until a thread ticks it; co_sched_poll's
		 * caller is taken for that thread */
		*ret = poll ? -EAGAIN : -EBUSY;
	} else if (work) {
		s->stuck = (unsigned)TASKS(atomic_load(&s->word));
		*ret = -EDEADLK;
	}
	return 1;
}

/* A timed stop whose time has come becomes a cancel in each engine's own
 * turn; a manual context no thread has ticked has none. Its frames are
 * finished here (co_context_stop), on the polling thread, out of the lock
 * (their on_done may call the scheduler). Inside a visit. */
static void timed_stop_unticked(co_sched *s)
{
	uint64_t now = 0;

	for (unsigned k = 0; k < s->ngroups; k++) {
		co_context *c = &s->ctx[s->groups[k].first];
		uint64_t at;

		if (!unticked(c))
			continue;
		at = atomic_load_explicit(&c->engine.stop_at, memory_order_relaxed);
		if (at == 0 || at == UINT64_MAX || co__engine_live(&c->engine) == 0)
			continue;
		if (now == 0)
			now = co__now_ns();
		if (now >= at)
			co_context_stop(c, CO_STOP_CANCEL);
	}
}

/* A manual context that a wait may need ticks for: it has not ended, and
 * is not stopped with nothing left (a run ends that one: end_manual). */
static int needs_ticks(co_context *c)
{
	return co_context_state(c) == CO_CONTEXT_RUNNING &&
	       (co_engine_state(&c->engine) != CO_ENGINE_STOPPED || has_work(c));
}

/* The calling thread runs one of s's contexts: a task or an on_done on
 * it, or the thread that ticks a manual one that may need more ticks. A
 * wait there would wait for the thread that waits. */
static int runs_here(co_sched *s)
{
	co_context *c;

	if (on_own_context(s))
		return 1;
	for (unsigned i = 0; i < s->n; i++) {
		c = &s->ctx[i];
		if (c->manual && atomic_load_explicit(&c->ticked, memory_order_acquire) &&
		    pthread_equal(c->ticker, pthread_self()) && needs_ticks(c))
			return 1;
	}
	return 0;
}

int co__sched_runs_here(co_sched *s)
{
	if (visit(s) < 0)
		return -EINVAL;
	return leave(s, runs_here(s));
}

int co_sched_run(co_sched *s)
{
	int ret, waiting = 0;

	if (visit(s) < 0)
		return -EINVAL;
	if (runs_here(s))
		return leave(s, -EBUSY);
	timed_stop_unticked(s);
	unticked_count(s, &waiting);
	if (waiting) /* frames nothing runs until a thread ticks: no wait ends */
		return leave(s, -EBUSY);
	lock(s);
	if (s->state == CO_SCHED_DEAD) {
		unlock(s);
		return leave(s, -EINVAL);
	}
	s->waiters++;
	while (!over(s, &ret, 0))
		pthread_cond_wait(&s->cond, &s->lock);
	s->waiters--;
	pthread_cond_broadcast(&s->cond);
	unlock(s);
	return leave(s, ret);
}

int co_sched_poll(co_sched *s)
{
	int ret = -EAGAIN;

	if (visit(s) < 0)
		return -EINVAL;
	timed_stop_unticked(s);
	lock(s);
	if (s->state == CO_SCHED_DEAD)
		ret = -EINVAL;
	else if (!over(s, &ret, 1))
		ret = -EAGAIN;
	unlock(s);
	return leave(s, ret);
}
