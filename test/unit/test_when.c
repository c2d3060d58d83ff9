/* SPDX-License-Identifier: MIT */
/* Tests of when_all / when_any (lib/sync/when.c): results, the winner, losers
 * cancelled and reaped, cancel of the awaiting frame, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <unistd.h>
#include <cmocka.h>

#include <coring/loop.h>
#include <coring/when.h>
#include <coring/sync.h>
#include <coring/scheduler.h>
#include <coring/io.h>
#include <coring/timeout.h>
#include "helpers.h"
#include "common/fault.h"
#include "engine/engine_internal.h"

#define NEVER (3600 * CO_S) /* a test that ends proves it was cancelled */

enum { K_NOW, K_YIELDS, K_SLEEP, K_EVENT, K_MUTEX, K_POLL, K_NESTED };

struct kid {
	co_frame co;
	co_io io;
	co_waiter w;
	co_when when;
	int mode, ret, k, n;
	uint64_t ns;
	co_event *ev;
	co_mutex *m;
	struct kid *inner;        /* K_NESTED: two children of its own */
	co_frame *inner_kids[2];
	atomic_int *ran;
};

/* Ends with ret once its wait completed normally, or with the wait's error. */
static int kid_fn(co_frame *f)
{
	struct kid *c = (struct kid *)f;
	CO_BEGIN(f);
	if (c->ran)
		atomic_fetch_add(c->ran, 1);
	if (c->mode == K_YIELDS) {
		for (c->k = 0; c->k < c->n; c->k++)
			CO_YIELD(f);
	} else if (c->mode == K_SLEEP) {
		CO_AWAIT(f, co_sleep(&c->io, c->ns));
	} else if (c->mode == K_EVENT) {
		CO_AWAIT(f, co_event_wait(&c->w, c->ev));
	} else if (c->mode == K_MUTEX) {
		CO_AWAIT(f, co_mutex_lock(&c->w, c->m));
	} else if (c->mode == K_POLL) {
		/* busy until cancelled: no iteration cap, which a fast engine
		 * reached before the 5 ms winner (meson's timeout guards) */
		while (!co_cancelled(f))
			CO_YIELD(f);
		CO_RETURN(f, -ECANCELED);
	} else if (c->mode == K_NESTED) {
		c->inner_kids[0] = &c->inner[0].co;
		c->inner_kids[1] = &c->inner[1].co;
		CO_AWAIT(f, co_when_all(&c->when, c->inner_kids, 2));
	}
	if (co_result(f) < 0)
		CO_RETURN(f, co_result(f));
	CO_RETURN(f, c->ret);
	CO_END(f);
}

static void kid_init(struct kid *c, int mode, int ret, uint64_t ns)
{
	memset(c, 0, sizeof *c);
	c->mode = mode;
	c->ret = ret;
	c->ns = ns;
	c->n = (int)ns;
	co_init(&c->co, kid_fn);
	c->co.result = 0;
}

struct parent {
	co_frame co;
	co_when w;
	co_frame **kids;
	unsigned n;
	int any, res;
	int stop_first;           /* co_engine_stop before awaiting */
};

static int parent_fn(co_frame *f)
{
	struct parent *p = (struct parent *)f;
	CO_BEGIN(f);
	if (p->stop_first)
		assert_int_equal(co_engine_stop(co_engine_current(), 0), 0);
	if (p->any)
		CO_AWAIT(f, co_when_any(&p->w, p->kids, p->n));
	else
		CO_AWAIT(f, co_when_all(&p->w, p->kids, p->n));
	p->res = co_result(f);
	CO_END(f);
}

static int run_parent(struct parent *p, co_frame **kids, unsigned n, int any)
{
	co_engine e;
	p->kids = kids;
	p->n = n;
	p->any = any;
	p->res = 1;
	co_init(&p->co, parent_fn);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_engine_spawn(&e, &p->co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	return p->res;
}

/* ---- when_all --------------------------------------------------------------------- */

static void test_when_all(void **state)
{
	struct kid k[4];
	co_frame *kids[4];
	struct parent p = { .res = 1 };
	(void)state;
	kid_init(&k[0], K_SLEEP, 0, 5 * CO_MS);
	kid_init(&k[1], K_YIELDS, 0, 3);
	kid_init(&k[2], K_NOW, 7, 0);
	kid_init(&k[3], K_YIELDS, 0, 50);
	for (int i = 0; i < 4; i++)
		kids[i] = &k[i].co;
	assert_int_equal(run_parent(&p, kids, 4, 0), 0);
	for (int i = 0; i < 4; i++)
		assert_true(co_done(kids[i]));
	assert_int_equal(co_status(kids[2]), 7);

	/* the value is the first negative status in index order */
	kid_init(&k[0], K_SLEEP, 0, 2 * CO_MS);
	kid_init(&k[1], K_YIELDS, -ENOENT, 5);
	kid_init(&k[2], K_NOW, -EIO, 0);        /* finishes first */
	kid_init(&k[3], K_NOW, 0, 0);
	assert_int_equal(run_parent(&p, kids, 4, 0), -ENOENT);
	assert_int_equal(co_status(kids[2]), -EIO);
	for (int i = 0; i < 4; i++)
		assert_true(co_done(kids[i]));
}

/* ---- when_any: the winner, losers cancelled and reaped ---------------------------- */

static void test_when_any_cancels_losers(void **state)
{
	struct kid k[6], inner[2];
	co_frame *kids[6];
	co_event never;
	co_mutex held;
	struct parent p = { .res = 1 };
	(void)state;
	assert_int_equal(co_event_init(&never, 0), 0);
	assert_int_equal(co_mutex_init(&held), 0);
	assert_int_equal(co_mutex_trylock(&held), 0);
	kid_init(&k[0], K_SLEEP, 0, NEVER);      /* I/O: the kernel cancels it */
	kid_init(&k[1], K_EVENT, 0, 0);          /* parked on an event */
	k[1].ev = &never;
	kid_init(&k[2], K_SLEEP, 42, 5 * CO_MS); /* the winner */
	kid_init(&k[3], K_MUTEX, 0, 0);          /* parked on a mutex */
	k[3].m = &held;
	kid_init(&k[4], K_POLL, 0, 0);           /* running: polls the flag */
	kid_init(&k[5], K_NESTED, 0, 0);         /* a when_all of its own */
	kid_init(&inner[0], K_SLEEP, 0, NEVER);
	kid_init(&inner[1], K_EVENT, 0, 0);
	inner[1].ev = &never;
	k[5].inner = inner;
	for (int i = 0; i < 6; i++)
		kids[i] = &k[i].co;
	assert_int_equal(run_parent(&p, kids, 6, 1), 2);
	assert_int_equal(co_status(kids[2]), 42);
	for (int i = 0; i < 6; i++) {
		assert_true(co_done(kids[i]));
		if (i != 2)
			assert_int_equal(co_status(kids[i]), -ECANCELED);
	}
	assert_true(co_done(&inner[0].co));
	assert_true(co_done(&inner[1].co));
	assert_int_equal(co_status(&inner[0].co), -ECANCELED);
	/* the cancelled mutex waiter left the queue: the unlock frees it */
	assert_int_equal(co_mutex_unlock(&held), 0);
	assert_int_equal(co_mutex_trylock(&held), 0);
	assert_int_equal(co_event_is_set(&never), 0);
}

/* The winner ends on its first run, before the others have started: they
 * start cancelled, and their first wait ends at once. */
static void test_when_any_immediate_winner(void **state)
{
	struct kid k[3];
	co_frame *kids[3];
	co_event never;
	atomic_int ran;
	struct parent p = { .res = 1 };
	(void)state;
	atomic_init(&ran, 0);
	assert_int_equal(co_event_init(&never, 0), 0);
	kid_init(&k[0], K_NOW, 5, 0);
	kid_init(&k[1], K_EVENT, 0, 0);
	k[1].ev = &never;
	kid_init(&k[2], K_EVENT, 0, 0);
	k[2].ev = &never;
	for (int i = 0; i < 3; i++) {
		k[i].ran = &ran;
		kids[i] = &k[i].co;
	}
	assert_int_equal(run_parent(&p, kids, 3, 1), 0);
	assert_int_equal(atomic_load(&ran), 3); /* each started exactly once */
	assert_int_equal(co_status(kids[0]), 5);
	assert_int_equal(co_status(kids[1]), -ECANCELED);
	assert_int_equal(co_status(kids[2]), -ECANCELED);
}

/* ---- co_cancel on the awaiting frame --------------------------------------------- */

struct canceller {
	co_frame co;
	co_io io;
	co_frame *victim;
	int res;
};

static int canceller_fn(co_frame *f)
{
	struct canceller *c = (struct canceller *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep(&c->io, 2 * CO_MS)); /* the children are waiting */
	c->res = co_cancel(c->victim);
	CO_END(f);
}

static void test_cancel_awaiting_frame(void **state)
{
	for (int any = 0; any < 2; any++) {
		co_engine e;
		co_event never;
		struct kid k[2];
		co_frame *kids[2] = { &k[0].co, &k[1].co };
		struct parent p = { .kids = kids, .n = 2, .any = any, .res = 1 };
		struct canceller c = { .victim = &p.co, .res = 1 };
		(void)state;
		assert_int_equal(co_event_init(&never, 0), 0);
		kid_init(&k[0], K_SLEEP, 0, NEVER);
		kid_init(&k[1], K_EVENT, 0, 0);
		k[1].ev = &never;
		co_init(&p.co, parent_fn);
		co_init(&c.co, canceller_fn);
		assert_int_equal(co_engine_init(&e, NULL), 0);
		assert_int_equal(co_engine_spawn(&e, &p.co), 0);
		assert_int_equal(co_engine_spawn(&e, &c.co), 0);
		assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
		assert_int_equal(co_engine_destroy(&e), 0);
		assert_int_equal(c.res, 0);
		assert_int_equal(p.res, -ECANCELED);
		for (int i = 0; i < 2; i++) {
			assert_true(co_done(kids[i]));
			assert_int_equal(co_status(kids[i]), -ECANCELED);
		}
	}
}

/* ---- when_all on a work-stealing scheduler: children may move ---------------------- */

#define STEAL_PARENTS 100
#define STEAL_KIDS 4

struct steal_parent {
	co_frame co;
	co_when w;
	struct kid k[STEAL_KIDS];
	co_frame *kids[STEAL_KIDS];
	int res;
};

static int steal_parent_fn(co_frame *f)
{
	struct steal_parent *p = (struct steal_parent *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_when_all(&p->w, p->kids, STEAL_KIDS));
	p->res = co_result(f);
	CO_END(f);
}

static void test_when_all_with_stealing(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2, .steal = 1 };
	struct steal_parent *p = calloc(STEAL_PARENTS, sizeof *p);
	atomic_int ran;
	(void)state;
	assert_non_null(p);
	atomic_init(&ran, 0);
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < STEAL_PARENTS; i++) {
		for (int j = 0; j < STEAL_KIDS; j++) {
			kid_init(&p[i].k[j], K_YIELDS, j, 20);
			p[i].k[j].ran = &ran;
			p[i].kids[j] = &p[i].k[j].co;
		}
		p[i].res = 1;
		co_init(&p[i].co, steal_parent_fn);
		assert_int_equal(co_sched_spawn_to(&s, 0, &p[i].co), 0); /* all on one */
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(atomic_load(&ran), STEAL_PARENTS * STEAL_KIDS);
	for (int i = 0; i < STEAL_PARENTS; i++) {
		assert_int_equal(p[i].res, 0);
		for (int j = 0; j < STEAL_KIDS; j++)
			assert_int_equal(co_status(p[i].kids[j]), j);
	}
	assert_int_equal(co_sched_destroy(&s), 0);
	free(p);
}

/* when_any's first child to finish cancels the others (when.h). On a
 * stealing scheduler a thief may take and finish the first child while
 * the awaiting frame's suspend is still spawning the rest: the window held
 * open after kid 0's spawn (CO__POINT_WHEN_SPAWNED) until a thief has run
 * kid 0 to its end, then kid 1, which waits on an event nobody sets, is
 * spawned. The suspend cancels it (its look at the winner after its
 * spawns): the await ends with 0 (kid 0 won), kid 1 with -ECANCELED.
 * Without that look kid 1 waited for good (the watchdog sets its event
 * after 10 s, and the case fails). */
static co_sched *spawning_sched;
static co_when *spawning_when;
static co_frame spawning_fillers[64];
static atomic_int spawning_window;

static int filler_fn(co_frame *f)
{
	CO_BEGIN(f);
	CO_END(f);
}

static void thief_ends_first(void *arg)
{
	co_engine *e = co_engine_current();
	unsigned n = 0;
	(void)arg;
	if (atomic_fetch_add(&spawning_window, 1) != 0)
		return; /* after kid 0's spawn only */
	/* kid 0 is in this engine's ring; a filler after it makes the ring
	 * worth a steal (two frames), and the kick wakes the other context,
	 * which takes the older half: kid 0 */
	for (int ms = 0; atomic_load(&spawning_when->winner) != 0 && ms < 10000; ms++) {
		if (n < 64) {
			co_init(&spawning_fillers[n], filler_fn);
			assert_int_equal(co_engine_spawn(e, &spawning_fillers[n]), 0);
			n++;
		}
		co__engine_kick(&spawning_sched->ctx[1].engine);
		usleep(1000);
	}
	assert_int_equal(atomic_load(&spawning_when->winner), 0); /* a thief ended kid 0 */
}

struct watchdog {
	pthread_t t;
	co_event *ev;
	atomic_int fired;
};

static atomic_int spawning_parent_done;

static void spawning_parent_ended(co_frame *f)
{
	(void)f;
	atomic_store(&spawning_parent_done, 1);
}

static void *watchdog_fn(void *arg)
{
	struct watchdog *d = arg;

	for (int ms = 0; !atomic_load(&spawning_parent_done) && ms < 10000; ms++)
		usleep(1000);
	if (!atomic_load(&spawning_parent_done)) {
		atomic_store(&d->fired, 1);
		co_event_set(d->ev); /* let kid 1 end: the case fails below */
	}
	return NULL;
}

static void test_when_any_winner_while_spawning(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2, .steal = 1 };
	co_event ev;
	struct kid k[2];
	co_frame *kids[2] = { &k[0].co, &k[1].co };
	struct parent p;
	struct watchdog d = { .ev = &ev };
	(void)state;

	assert_int_equal(co_event_init(&ev, 0), 0);
	kid_init(&k[0], K_NOW, 5, 0);
	kid_init(&k[1], K_EVENT, 7, 0);
	k[1].ev = &ev;
	memset(&p, 0, sizeof p);
	p.kids = kids;
	p.n = 2;
	p.any = 1;
	p.res = 1;
	co_init(&p.co, parent_fn);
	p.co.on_done = spawning_parent_ended;
	atomic_store(&spawning_parent_done, 0);
	assert_int_equal(co_sched_init(&s, &o), 0);
	spawning_sched = &s;
	spawning_when = &p.w;
	atomic_store(&spawning_window, 0);
	co__fault_on_point(CO__POINT_WHEN_SPAWNED, thief_ends_first, NULL);
	assert_int_equal(co_sched_spawn_to(&s, 0, &p.co), 0);
	assert_int_equal(pthread_create(&d.t, NULL, watchdog_fn, &d), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(pthread_join(d.t, NULL), 0);
	co__fault_on_point(CO__POINT_WHEN_SPAWNED, NULL, NULL);
	assert_int_equal(atomic_load(&d.fired), 0);
	assert_int_equal(p.res, 0); /* kid 0 won */
	assert_int_equal(co_status(&k[0].co), 5);
	assert_int_equal(co_status(&k[1].co), -ECANCELED);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_event_destroy(&ev), 0);
}

/* ---- errors ------------------------------------------------------------------------- */

struct misuse {
	co_frame co;
	co_when w;
	co_frame **kids;
	int r[4];
};

static int misuse_fn(co_frame *f)
{
	struct misuse *t = (struct misuse *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_when_all(NULL, t->kids, 1));
	t->r[0] = co_result(f);
	CO_AWAIT(f, co_when_any(&t->w, t->kids, 0));
	t->r[1] = co_result(f);
	CO_AWAIT(f, co_when_all(&t->w, NULL, 2));
	t->r[2] = co_result(f);
	CO_AWAIT(f, co_when_all(&t->w, t->kids, 0));
	t->r[3] = co_result(f);
	CO_END(f);
}

static void test_errors(void **state)
{
	struct kid k[2];
	co_frame *kids[2] = { &k[0].co, &k[1].co };
	co_frame *with_null[2] = { &k[0].co, NULL };
	struct parent p = { .res = 1 };
	struct misuse t = { .kids = kids };
	co_loop loop;
	co_engine e;
	(void)state;
	co_loop_init(&loop);
	co_init(&t.co, misuse_fn);
	assert_int_equal(co_loop_spawn(&loop, &t.co), 0);
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(t.r[0], -EINVAL);
	assert_int_equal(t.r[1], -EINVAL);
	assert_int_equal(t.r[2], -EINVAL);
	assert_int_equal(t.r[3], 0);

	/* not on an engine */
	kid_init(&k[0], K_NOW, 0, 0);
	kid_init(&k[1], K_NOW, 0, 0);
	p = (struct parent){ .kids = kids, .n = 2, .res = 1 };
	co_init(&p.co, parent_fn);
	assert_int_equal(co_loop_spawn(&loop, &p.co), 0);
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(p.res, -ENXIO);
	assert_false(co_done(kids[0])); /* nothing was spawned */

	/* a NULL child, a child already spawned */
	assert_int_equal(run_parent(&p, with_null, 2, 0), -EINVAL);
	assert_false(co_done(kids[0]));
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_engine_spawn(&e, kids[1]), 0);
	assert_int_equal(run_parent(&p, kids, 2, 1), -EINVAL);
	assert_false(co_done(kids[0]));
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_engine_destroy(&e), 0);

	/* the same child twice: -EINVAL, nothing spawned */
	{
		co_frame *twice[2] = { &k[0].co, &k[0].co };
		kid_init(&k[0], K_NOW, 0, 0);
		assert_int_equal(run_parent(&p, twice, 2, 0), -EINVAL);
		assert_false(co_done(kids[0]));
		assert_int_equal(kids[0]->state & CO__ST_SPAWNED, 0); /* no mark left */
		assert_int_equal(run_parent(&p, twice, 2, 1), -EINVAL); /* when_any */
		assert_false(co_done(kids[0]));
	}

	/* the engine refuses spawns (stopped): -ESHUTDOWN, nothing waits */
	kid_init(&k[0], K_NOW, 0, 0);
	kid_init(&k[1], K_NOW, 0, 0);
	p = (struct parent){ .stop_first = 1 };
	assert_int_equal(run_parent(&p, kids, 2, 0), -ESHUTDOWN);
	assert_false(co_done(kids[0]));
	assert_null(kids[0]->on_done);
}

/* ---- a cancel or a limit racing the end of co_spawn_on's child --------------------------- */

/* The child, on another context, does its work (took), then finishes
 * with 7 only once the cancel has reached it (the window: the awaiting
 * frame's cancel or limit came, the child's result not yet): the await's
 * value is 7, the work is not reported as undone. A child that is cut
 * short (an hour's sleep) makes it -ECANCELED, or -ETIME for a limit. */
struct far_kid {
	co_frame co;
	co_io io;
	int sleep;
	atomic_int took, running;
};

static int far_kid_fn(co_frame *f)
{
	struct far_kid *k = (struct far_kid *)f;
	CO_BEGIN(f);
	atomic_fetch_add(&k->took, 1);
	atomic_store(&k->running, 1);
	if (k->sleep) {
		CO_AWAIT(f, co_sleep(&k->io, NEVER));
		CO_RETURN(f, co_result(f));
	}
	while (!co_cancelled(f))
		CO_YIELD(f);
	CO_RETURN(f, 7);
	CO_END(f);
}

struct near {
	co_frame co;
	co_when w;
	co_limit lim;
	struct far_kid kid;
	co_engine *on;
	int limit, res;
};

static int near_fn(co_frame *f)
{
	struct near *n = (struct near *)f;
	CO_BEGIN(f);
	if (n->limit)
		CO_AWAIT(f, co_timeout(&n->lim, co_spawn_on(&n->w, n->on, &n->kid.co), 2 * CO_MS));
	else
		CO_AWAIT(f, co_spawn_on(&n->w, n->on, &n->kid.co));
	n->res = co_result(f);
	CO_END(f);
}

static void test_spawn_on_result_kept(void **state)
{
	static const co_sched_group g[2] = { { .contexts = 1 }, { .contexts = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	co_sched s;

	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int limit = 0; limit < 2; limit++) {
		for (int sleep = 0; sleep < 2; sleep++) {
			struct near n;

			memset(&n, 0, sizeof n);
			n.limit = limit;
			n.kid.sleep = sleep;
			n.on = &co_sched_pick(&s, 1)->engine;
			co_init(&n.kid.co, far_kid_fn);
			co_init(&n.co, near_fn);
			assert_int_equal(co_sched_spawn_kind(&s, 0, &n.co), 0);
			if (!limit) {
				WAIT_UNTIL(atomic_load(&n.kid.running));
				assert_int_equal(co_cancel(&n.co), 0);
			}
			assert_int_equal(co_sched_run(&s), 0);
			assert_true(co_done(&n.kid.co));
			assert_int_equal(atomic_load(&n.kid.took), 1);
			if (sleep) {
				assert_int_equal(co_status(&n.kid.co), -ECANCELED);
				assert_int_equal(n.res, limit ? -ETIME : -ECANCELED);
			} else {
				assert_int_equal(co_status(&n.kid.co), 7);
				assert_int_equal(n.res, 7);
			}
		}
	}
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- when_any: a winner cut short does not hide a child's work -------------------------- */

/* when.h: under the awaiting frame's cancel or a limit, "a child's work is
 * never reported as not done". when_any(a, b) under a limit of 2 ms (or a
 * cancel): b sleeps an hour and ends first, with -ECANCELED (the first to
 * finish: the winner); a goes on past the cancel until b has ended, then
 * returns 7, its work done. The value is a's index, not -ETIME (or
 * -ECANCELED) on b's account. With a's sleep cut short too, nothing was
 * done: -ETIME or -ECANCELED. */
struct any_kid {
	co_frame co;
	co_io io;
	co_frame *after;  /* work: finish once it has ended; NULL: sleep */
	atomic_int running;
};

static int any_kid_fn(co_frame *f)
{
	struct any_kid *k = (struct any_kid *)f;
	CO_BEGIN(f);
	atomic_store(&k->running, 1);
	if (k->after == NULL) {
		CO_AWAIT(f, co_sleep(&k->io, NEVER));
		CO_RETURN(f, co_result(f));
	}
	while (!co_done(k->after))
		CO_YIELD(f);
	CO_RETURN(f, 7);
	CO_END(f);
}

struct any_parent {
	co_frame co;
	co_when w;
	co_limit lim;
	struct any_kid a, b;
	co_frame *kids[2];
	int limit, res;
};

static int any_parent_fn(co_frame *f)
{
	struct any_parent *p = (struct any_parent *)f;
	CO_BEGIN(f);
	if (p->limit)
		CO_AWAIT(f, co_timeout(&p->lim, co_when_any(&p->w, p->kids, 2), 2 * CO_MS));
	else
		CO_AWAIT(f, co_when_any(&p->w, p->kids, 2));
	p->res = co_result(f);
	CO_END(f);
}

static void test_when_any_cut_short_winner_gives_way(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 1 };

	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int limit = 0; limit < 2; limit++) {
		for (int work = 0; work < 2; work++) {
			struct any_parent p;

			memset(&p, 0, sizeof p);
			p.limit = limit;
			p.a.after = work ? &p.b.co : NULL;
			co_init(&p.a.co, any_kid_fn);
			co_init(&p.b.co, any_kid_fn);
			p.kids[0] = &p.a.co;
			p.kids[1] = &p.b.co;
			co_init(&p.co, any_parent_fn);
			assert_int_equal(co_sched_spawn(&s, &p.co), 0);
			if (!limit) {
				WAIT_UNTIL(atomic_load(&p.a.running) && atomic_load(&p.b.running));
				assert_int_equal(co_cancel(&p.co), 0);
			}
			assert_int_equal(co_sched_run(&s), 0);
			assert_int_equal(co_status(&p.b.co), -ECANCELED);
			if (work) {
				assert_int_equal(co_status(&p.a.co), 7);
				assert_int_equal(p.res, 0); /* a's index */
			} else {
				assert_int_equal(co_status(&p.a.co), -ECANCELED);
				assert_int_equal(p.res, limit ? -ETIME : -ECANCELED);
			}
		}
	}
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- a frame cancelled before its await; a child without a body ------------------ */

/* sync.md, when_all / when_any: "A frame already asked to cancel spawns
 * none: its await ends at once with -ECANCELED". The parent is cancelled
 * (by another frame, while it is ready, not parked) before it awaits:
 * -ECANCELED, with either combinator and co_spawn_on, and its children
 * are left fresh (never spawned, no on_done taken). when.h: a child
 * "without a body" is -EINVAL, nothing spawned. */
struct pre_cancelled {
	co_frame co;
	co_when w;
	co_frame **kids;
	int how, res;
};

static int pre_cancelled_fn(co_frame *f)
{
	struct pre_cancelled *p = (struct pre_cancelled *)f;
	CO_BEGIN(f);
	CO_YIELD(f); /* the canceller runs meanwhile */
	if (p->how == 0)
		CO_AWAIT(f, co_when_all(&p->w, p->kids, 2));
	else if (p->how == 1)
		CO_AWAIT(f, co_when_any(&p->w, p->kids, 2));
	else
		CO_AWAIT(f, co_spawn_on(&p->w, co_engine_current(), p->kids[0]));
	p->res = co_result(f);
	CO_END(f);
}

struct pre_canceller {
	co_frame co;
	co_frame *victim;
	int res;
};

static int pre_canceller_fn(co_frame *f)
{
	struct pre_canceller *c = (struct pre_canceller *)f;
	CO_BEGIN(f);
	c->res = co_cancel(c->victim);
	CO_END(f);
}

static void test_cancelled_before_spawns_none(void **state)
{
	(void)state;
	for (int how = 0; how < 3; how++) {
		struct kid k[2];
		co_frame *kids[2] = { &k[0].co, &k[1].co };
		struct pre_cancelled p = { .kids = kids, .how = how, .res = 1 };
		struct pre_canceller c = { .victim = &p.co, .res = 1 };
		co_frame *fs[2] = { &p.co, &c.co };

		kid_init(&k[0], K_NOW, 3, 0);
		kid_init(&k[1], K_NOW, 4, 0);
		co_init(&p.co, pre_cancelled_fn);
		co_init(&c.co, pre_canceller_fn);
		co_test_run_frames(fs, 2);
		assert_int_equal(c.res, 0);
		assert_int_equal(p.res, -ECANCELED);
		for (int i = 0; i < 2; i++) {
			assert_false(co_done(kids[i]));
			assert_int_equal(kids[i]->state & CO__ST_SPAWNED, 0);
			assert_null(kids[i]->on_done);
		}
	}
	{ /* a child without a body */
		struct kid k[2];
		co_frame *kids[2] = { &k[0].co, &k[1].co };
		struct parent p = { .res = 1 };

		kid_init(&k[0], K_NOW, 0, 0);
		kid_init(&k[1], K_NOW, 0, 0);
		k[1].co.fn = NULL;
		assert_int_equal(run_parent(&p, kids, 2, 0), -EINVAL);
		assert_false(co_done(kids[0]));
		assert_int_equal(run_parent(&p, kids, 2, 1), -EINVAL);
		assert_false(co_done(kids[0]));
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_when_all),
		cmocka_unit_test(test_when_any_cancels_losers),
		cmocka_unit_test(test_when_any_immediate_winner),
		cmocka_unit_test(test_cancel_awaiting_frame),
		cmocka_unit_test(test_when_all_with_stealing),
		cmocka_unit_test(test_when_any_winner_while_spawning),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_spawn_on_result_kept),
		cmocka_unit_test(test_when_any_cut_short_winner_gives_way),
		cmocka_unit_test(test_cancelled_before_spawns_none),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
