/* SPDX-License-Identifier: MIT */
/*
 * Frames that follow their waker (co_sched_roam, docs/scheduler.md):
 * a frame that may roam, parked on context 1 and woken by a frame on
 * context 0 of the same stealing group, runs next on context 0; one that
 * may not, one in a group that does not steal, one pinned by a time limit,
 * one asked to cancel, one woken inside its own suspend stay. Every
 * primitive's wake takes the same path (channel, event, semaphore, mutex,
 * co_spawn_on, when). A fan-out of roaming frames still spreads by
 * stealing; a stress run counts every item and every frame's end, also
 * with a cancel stop racing.
 *
 * Where a case needs a frame parked before the wake, it waits until a
 * view of the context lists it as waiting (a view is read on the
 * context's thread between two resumes: the frame's suspend has
 * returned), so no case depends on timing.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <coring/channel.h>
#include <coring/scheduler.h>
#include <coring/sync.h>
#include <coring/timeout.h>
#include <coring/view.h>
#include <coring/when.h>

#include "common/fault.h"
#include "helpers.h"

static co_sched s;
static co_engine *engines[2]; /* identities, still compared after destroy */

static void sched_up(unsigned contexts, int steal)
{
	/* no polling before a park: a waiting frame parks at once */
	co_sched_opts o = { .contexts = contexts, .steal = steal, .engine = { .no_spin = 1 } };

	assert_int_equal(co_sched_init(&s, &o), 0);
	for (unsigned i = 0; i < 2; i++)
		engines[i] = &s.ctx[i].engine;
}

static void sched_down(void)
{
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

static co_engine *eng(unsigned i)
{
	return engines[i];
}

static void need_view(void)
{
	if (!co_view_available())
		skip();
}

/* Whether context i lists f as waiting on `what` (NULL: on anything). */
static int parked_on(unsigned i, const co_frame *f, const char *what)
{
	co_view v;
	int found = 0;

	assert_int_equal(co_view_engine(&v, eng(i), CO_VIEW_WAIT), 0);
	for (size_t k = 0; k < v.n; k++)
		if (v.frames[k].frame == f && v.frames[k].state == CO_VIEW_WAITING &&
		    (what == NULL || strcmp(v.frames[k].wait, what) == 0))
			found = 1;
	co_view_free(&v);
	return found;
}

/* Until context i lists f as waiting on `what`. */
static void wait_parked(unsigned i, const co_frame *f, const char *what)
{
	while (!parked_on(i, f, what))
		usleep(100);
}

static void spawn_to(unsigned i, co_frame *f, int (*fn)(co_frame *), int roam)
{
	co_init(f, fn);
	assert_int_equal(co_sched_roam(f, roam), 0);
	assert_int_equal(co_sched_spawn_to(&s, i, f), 0);
}

/* ---- one wake of each primitive ------------------------------------------------- */

enum prim { CHAN, EVENT, SEM, MUTEX };

static co_chan chan;
static co_event event, go;
static co_sem sem;
static co_mutex mutex;

/* Parks on prim, then notes where it runs after the wake. */
struct sleeper {
	co_frame co;
	co_waiter w;
	co_limit lim;
	enum prim prim;
	int limited;              /* 1: the wait under a time limit (its timer
	                             is the waiter's: its engine delivers the
	                             wake); 2: a child that waits, under a
	                             limit (it pins the frame) */
	struct sleeper_kid {
		co_frame co;
		struct sleeper *x;
	} kid;
	int shielded;             /* shielded: a cancel request only marks it */
	uint64_t item;
	int res;
	co_engine *before, *after;
};

static co_awaiter *sleeper_wait(struct sleeper *x)
{
	switch (x->prim) {
	case CHAN:
		return co_chan_recv(&x->w, &chan, &x->item);
	case EVENT:
		return co_event_wait(&x->w, &event);
	case SEM:
		return co_sem_acquire(&x->w, &sem);
	default:
		return co_mutex_lock(&x->w, &mutex);
	}
}

static int sleeper_kid_fn(co_frame *f)
{
	struct sleeper_kid *k = (struct sleeper_kid *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, sleeper_wait(k->x));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static int sleeper_fn(co_frame *f)
{
	struct sleeper *x = (struct sleeper *)f;
	CO_BEGIN(f);
	x->before = co_engine_current();
	if (x->shielded)
		co_shield(f);
	if (x->limited == 1) {
		CO_AWAIT(f, co_timeout(&x->lim, sleeper_wait(x), 60 * CO_S));
	} else if (x->limited == 2) {
		co_init(&x->kid.co, sleeper_kid_fn);
		x->kid.x = x;
		CO_AWAIT_TASK(f, co_timeout_task(&x->lim, &x->kid.co, 60 * CO_S));
	} else {
		CO_AWAIT(f, sleeper_wait(x));
	}
	x->res = co_result(f);
	x->after = co_engine_current();
	if (x->prim == MUTEX && x->res == 0)
		co_mutex_unlock(&mutex);
	CO_END(f);
}

/* Context 0's side: wakes the sleeper (for the mutex: holds the lock
 * until go is set, then unlocks, which hands it to the sleeper). */
struct waker {
	co_frame co;
	co_waiter w;
	enum prim prim;
	uint64_t item;
};

static int waker_fn(co_frame *f)
{
	struct waker *x = (struct waker *)f;
	CO_BEGIN(f);
	if (x->prim == CHAN) {
		x->item = 42;
		CO_AWAIT(f, co_chan_send(&x->w, &chan, &x->item));
		assert_int_equal(co_result(f), 0);
	} else if (x->prim == EVENT) {
		co_event_set(&event);
	} else if (x->prim == SEM) {
		co_sem_release(&sem, 1);
	} else {
		assert_int_equal(co_mutex_trylock(&mutex), 0);
		CO_AWAIT(f, co_event_wait(&x->w, &go));
		co_mutex_unlock(&mutex);
	}
	CO_END(f);
}

static const char *const prim_wait[] = { "channel recv", "event", "semaphore", "mutex" };

static void prims_init(void)
{
	assert_int_equal(co_chan_init(&chan, sizeof(uint64_t), 1, NULL), 0);
	assert_int_equal(co_event_init(&event, 0), 0);
	assert_int_equal(co_event_init(&go, 0), 0);
	assert_int_equal(co_sem_init(&sem, 0), 0);
	assert_int_equal(co_mutex_init(&mutex), 0);
}

static void prims_destroy(void)
{
	assert_int_equal(co_chan_destroy(&chan), 0);
	assert_int_equal(co_event_destroy(&event), 0);
	assert_int_equal(co_event_destroy(&go), 0);
	assert_int_equal(co_sem_destroy(&sem), 0);
	assert_int_equal(co_mutex_destroy(&mutex), 0);
}

/* A sleeper (roaming or not) parked on context 1, woken by a frame of
 * context 0; returns the index of the context it ran on after the wake. */
static unsigned one_wake(enum prim prim, int roam, int steal, struct sleeper *x)
{
	static struct waker wk;
	unsigned after;

	need_view();
	sched_up(2, steal);
	prims_init();
	memset(&wk, 0, sizeof wk);
	wk.prim = prim;
	x->prim = prim;
	if (prim == MUTEX) { /* the lock is held before the sleeper asks */
		spawn_to(0, &wk.co, waker_fn, 0);
		wait_parked(0, &wk.co, "event");
	}
	spawn_to(1, &x->co, sleeper_fn, roam);
	wait_parked(1, &x->co, prim_wait[prim]);
	if (x->shielded) /* the request is marked; the shielded wait goes on */
		assert_int_equal(co_cancel(&x->co), 0);
	if (prim == MUTEX)
		co_event_set(&go); /* from this thread: the holder stays on 0 */
	else
		spawn_to(0, &wk.co, waker_fn, 0);
	sched_down();
	prims_destroy();
	assert_ptr_equal(x->before, eng(1));
	assert_int_equal(x->res, 0);
	if (prim == CHAN)
		assert_int_equal(x->item, 42);
	after = x->after == eng(0) ? 0 : 1;
	assert_ptr_equal(x->after, eng(after));
	return after;
}

#define FOLLOW_CASE(name, prim)                                                 \
	static void test_follows_##name(void **state)                            \
	{                                                                         \
		struct sleeper x = { 0 };                                         \
		(void)state;                                                      \
		assert_int_equal(one_wake(prim, 1, 1, &x), 0);                    \
	}

FOLLOW_CASE(channel, CHAN)
FOLLOW_CASE(event, EVENT)
FOLLOW_CASE(semaphore, SEM)
FOLLOW_CASE(mutex, MUTEX)

/* Without co_sched_roam, or with it turned off again: it stays. */
static void test_stays_without_roam(void **state)
{
	struct sleeper x = { 0 };
	(void)state;
	assert_int_equal(one_wake(CHAN, 0, 1, &x), 1);
	memset(&x, 0, sizeof x);
	assert_int_equal(one_wake(EVENT, 0, 1, &x), 1);
}

static int roam_off_fn(co_frame *f)
{
	struct sleeper *x = (struct sleeper *)f;
	CO_BEGIN(f);
	assert_int_equal(co_sched_roam(f, 0), 0); /* from its own body */
	CO_AWAIT(f, co_event_wait(&x->w, &event));
	x->after = co_engine_current();
	CO_END(f);
}

static void test_roam_turned_off(void **state)
{
	static struct sleeper x;
	static struct waker wk;
	(void)state;
	need_view();
	sched_up(2, 1);
	prims_init();
	memset(&x, 0, sizeof x);
	wk = (struct waker){ .prim = EVENT };
	spawn_to(1, &x.co, roam_off_fn, 1);
	wait_parked(1, &x.co, "event");
	spawn_to(0, &wk.co, waker_fn, 0);
	sched_down();
	prims_destroy();
	assert_ptr_equal(x.after, eng(1));
}

/* A case in which the sleeper stays on context 1: prim, steal, and the
 * sleeper's own settings. */
#define STAY_CASE(name, prim, steal, ...)                                       \
	static void test_##name(void **state)                                    \
	{                                                                         \
		struct sleeper x = { __VA_ARGS__ };                               \
		(void)state;                                                      \
		assert_int_equal(one_wake(prim, 1, steal, &x), 1);                \
	}

/* A group that does not steal trades no frames. */
STAY_CASE(stays_without_steal, CHAN, 0, .limited = 0)
/* A wait with a time limit: its engine delivers the wake (after its timer
 * is removed). */
STAY_CASE(timed_wait_stays, EVENT, 1, .limited = 1)
/* A time limit on a child pins the frame to the engine of its timer: a
 * wake of the child leaves it there. */
STAY_CASE(pinned_stays, EVENT, 1, .limited = 2)
/* Asked to cancel (a shielded wait goes on): its engine handles the
 * request. */
STAY_CASE(cancel_asked_stays, CHAN, 1, .shielded = 1)

/* Two frames follow one waker (co_wake of an awaiter of our own) before
 * it suspends: the second takes the place to run next, the first goes to
 * the queue; both run there. */
static co_frame *_Atomic parked_slot[2];

static int plain_resume(co_awaiter *a, co_frame *f)
{
	(void)a;
	(void)f;
	return 0;
}

static int park_suspend(co_awaiter *a, co_frame *f)
{
	(void)a;
	for (int i = 0; i < 2; i++) {
		co_frame *none = NULL;

		if (atomic_compare_exchange_strong(&parked_slot[i], &none, f))
			break;
	}
	return 1;
}

static const co_awaiter_ops park_ops = { .suspend = park_suspend, .resume = plain_resume,
					 .name = "parked" };

struct pair_sleeper {
	co_frame co;
	co_awaiter aw;
	co_engine *after;
	int order;                /* 1: it ran first after the wake */
};

static atomic_int pair_runs;

static int pair_sleeper_fn(co_frame *f)
{
	struct pair_sleeper *x = (struct pair_sleeper *)f;
	CO_BEGIN(f);
	x->aw.ops = &park_ops;
	CO_AWAIT(f, &x->aw);
	x->after = co_engine_current();
	x->order = atomic_fetch_add(&pair_runs, 1) + 1;
	CO_END(f);
}

static int pair_waker_fn(co_frame *f)
{
	CO_BEGIN(f);
	co_wake(atomic_load(&parked_slot[0]));
	co_wake(atomic_load(&parked_slot[1]));
	CO_END(f);
}

static void test_two_follow_one_waker(void **state)
{
	static struct pair_sleeper x[2];
	static co_frame wk;
	(void)state;
	need_view();
	sched_up(2, 1);
	/* one at a time: a lone ready frame is never stolen, so both wait on 1 */
	for (int i = 0; i < 2; i++)
		atomic_store(&parked_slot[i], NULL);
	atomic_store(&pair_runs, 0);
	for (int i = 0; i < 2; i++) {
		memset(&x[i], 0, sizeof x[i]);
		spawn_to(1, &x[i].co, pair_sleeper_fn, 1);
		wait_parked(1, &x[i].co, "parked");
	}
	spawn_to(0, &wk, pair_waker_fn, 0);
	sched_down();
	for (int i = 0; i < 2; i++) {
		assert_true(co_done(&x[i].co));
		assert_ptr_equal(x[i].after, eng(0));
	}
	/* the one woken last ran next, then the one it pushed to the queue */
	assert_int_equal(x[1].order, 1);
	assert_int_equal(x[0].order, 2);
}

/* A waker's context that refuses spawns (a stop was asked) takes no frame
 * either: the woken frame stays, and the drain runs it where it was. */
struct gated_waker {
	co_frame co;
	co_waiter w;
};

static int gated_waker_fn(co_frame *f)
{
	struct gated_waker *x = (struct gated_waker *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_event_wait(&x->w, &go)); /* set after the stop */
	co_event_set(&event);
	CO_END(f);
}

static void test_stopped_waker_takes_nothing(void **state)
{
	static struct sleeper x;
	static struct gated_waker wk;
	(void)state;
	need_view();
	sched_up(2, 1);
	prims_init();
	memset(&x, 0, sizeof x);
	memset(&wk, 0, sizeof wk);
	x.prim = EVENT;
	spawn_to(0, &wk.co, gated_waker_fn, 0);
	wait_parked(0, &wk.co, "event");
	spawn_to(1, &x.co, sleeper_fn, 1);
	wait_parked(1, &x.co, "event");
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0); /* spawns refused */
	co_event_set(&go);
	sched_down();
	prims_destroy();
	assert_int_equal(x.res, 0);
	assert_ptr_equal(x.after, eng(1));
}

/* ---- a waker outside the frame's group ---------------------------------------------- */

/*
 * scheduler.md: a roaming frame stays where it waits when "the waker is not
 * a frame of a context of the same group". Two stealing groups of two
 * contexts: a roaming frame parked on context 0 (group 0) is woken by a
 * frame of context 2 (group 1), and another by the test's own thread; each
 * resumes on a context of group 0 (stealing stays inside a group), never
 * on the waker's.
 */
struct grouped {
	co_frame co;
	co_waiter w;
	co_event *ev;
	unsigned kind;
};

static int grouped_fn(co_frame *f)
{
	struct grouped *g = (struct grouped *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_event_wait(&g->w, g->ev));
	g->kind = co_context_current()->kind;
	CO_END(f);
}

struct setter {
	co_frame co;
	co_event *ev;
};

static int setter_fn(co_frame *f)
{
	struct setter *x = (struct setter *)f;
	CO_BEGIN(f);
	co_event_set(x->ev);
	CO_END(f);
}

static void test_stays_in_its_group(void **state)
{
	static const co_sched_group g[2] = {
		{ .contexts = 2, .steal = 1, .engine = { .no_spin = 1 } },
		{ .contexts = 2, .steal = 1, .engine = { .no_spin = 1 } },
	};
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	static struct grouped a, b;
	static struct setter x;
	co_event ea, eb;
	(void)state;
	need_view();
	alarm(60);
	assert_int_equal(co_sched_init(&s, &o), 0);
	engines[0] = &s.ctx[0].engine;
	engines[1] = &s.ctx[1].engine;
	assert_int_equal(co_event_init(&ea, 0), 0);
	assert_int_equal(co_event_init(&eb, 0), 0);
	a = (struct grouped){ .ev = &ea, .kind = 99 };
	b = (struct grouped){ .ev = &eb, .kind = 99 };
	spawn_to(0, &a.co, grouped_fn, 1);
	spawn_to(0, &b.co, grouped_fn, 1);
	/* parked on context 0, or on 1 if it stole one */
	while (!parked_on(0, &a.co, "event") && !parked_on(1, &a.co, "event"))
		usleep(100);
	while (!parked_on(0, &b.co, "event") && !parked_on(1, &b.co, "event"))
		usleep(100);
	x = (struct setter){ .ev = &ea };
	spawn_to(2, &x.co, setter_fn, 0); /* a frame of group 1 wakes a */
	assert_int_equal(co_event_set(&eb), 0); /* this thread wakes b */
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(a.kind, 0);
	assert_int_equal(b.kind, 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_event_destroy(&ea), 0);
	assert_int_equal(co_event_destroy(&eb), 0);
	alarm(0);
}

/* ---- co_spawn_on and when: the awaiting frame follows the child's end ---------- */

struct kid {
	co_frame co;
	co_waiter w;
	co_transfer tr;
	int hop;                  /* first move to context 1 (a when's child) */
};

static int kid_fn(co_frame *f)
{
	struct kid *k = (struct kid *)f;
	CO_BEGIN(f);
	if (k->hop)
		CO_AWAIT(f, co_transfer_to(&k->tr, &s.ctx[1]));
	CO_AWAIT(f, co_event_wait(&k->w, &event)); /* on context 1 */
	CO_RETURN(f, 7);
	CO_END(f);
}

struct parent {
	co_frame co;
	co_when when;
	struct kid kid;
	co_frame *kids[1];
	int use_when;
	int res;
	co_engine *after;
};

static int parent_fn(co_frame *f)
{
	struct parent *p = (struct parent *)f;
	CO_BEGIN(f);
	co_init(&p->kid.co, kid_fn);
	if (p->use_when) {
		p->kid.hop = 1;
		p->kids[0] = &p->kid.co;
		CO_AWAIT(f, co_when_all(&p->when, p->kids, 1));
		p->res = co_status(&p->kid.co);
	} else {
		CO_AWAIT(f, co_spawn_on(&p->when, eng(1), &p->kid.co));
		p->res = co_result(f);
	}
	p->after = co_engine_current();
	CO_END(f);
}

static void child_end(int use_when)
{
	static struct parent p;
	need_view();
	sched_up(2, 1);
	prims_init();
	memset(&p, 0, sizeof p);
	p.use_when = use_when;
	spawn_to(0, &p.co, parent_fn, 1);
	wait_parked(0, &p.co, use_when ? "when_all" : "spawn_on");
	wait_parked(1, &p.kid.co, "event");
	co_event_set(&event); /* the child ends on context 1 and wakes p */
	sched_down();
	prims_destroy();
	assert_int_equal(p.res, 7);
	assert_ptr_equal(p.after, eng(1));
}

static void test_follows_spawn_on(void **state)
{
	(void)state;
	child_end(0);
}

static void test_follows_when(void **state)
{
	(void)state;
	child_end(1);
}

/* ---- woken inside its own suspend: it stays ------------------------------------- */

/* An awaiter of our own whose suspend publishes the frame for the waker,
 * then stays inside the suspend until the frame has run elsewhere (which
 * must not happen) or a while has passed: the window in which a waker
 * must leave the frame to its engine, held open. */
static co_frame *_Atomic published;
static atomic_int woken, ran_inside, suspend_over;

static int slow_suspend(co_awaiter *a, co_frame *f)
{
	(void)a;
	atomic_store(&published, f);
	WAIT_UNTIL(atomic_load(&woken));
	for (int i = 0; i < 2000 && !atomic_load(&ran_inside); i++)
		usleep(100); /* 0.2 s at most: the frame must not run meanwhile */
	atomic_store(&suspend_over, 1);
	return 1;
}

static const co_awaiter_ops slow_ops = { .suspend = slow_suspend, .resume = plain_resume,
					 .name = "slow" };

struct slow {
	co_frame co;
	co_awaiter aw;
	co_engine *after;
	int over;
};

static int slow_fn(co_frame *f)
{
	struct slow *x = (struct slow *)f;
	CO_BEGIN(f);
	x->aw.ops = &slow_ops;
	CO_AWAIT(f, &x->aw);
	x->over = atomic_load(&suspend_over);
	if (!x->over)
		atomic_store(&ran_inside, 1);
	x->after = co_engine_current();
	CO_END(f);
}

static int slow_waker_fn(co_frame *f)
{
	CO_BEGIN(f);
	co_wake(atomic_load(&published));
	atomic_store(&woken, 1);
	CO_END(f);
}

static void test_woken_inside_suspend_stays(void **state)
{
	static struct slow x;
	static co_frame wk;
	(void)state;
	sched_up(2, 1);
	memset(&x, 0, sizeof x);
	atomic_store(&published, NULL);
	atomic_store(&woken, 0);
	atomic_store(&ran_inside, 0);
	atomic_store(&suspend_over, 0);
	spawn_to(1, &x.co, slow_fn, 1);
	WAIT_UNTIL(atomic_load(&published) != NULL);
	spawn_to(0, &wk, slow_waker_fn, 0);
	sched_down();
	assert_int_equal(x.over, 1); /* it ran after its suspend returned */
	assert_ptr_equal(x.after, eng(1));
}

/* ---- a mutex waiter parked again, claimed at once on another context ------------ */

static co_mutex rmx;
static co_event unlock_now, timed_ev;
static atomic_int arm_reparked, reparked_done, x_running, retaken;

/* Roams: waits for rmx on context 0; once it holds it, lets it go and
 * waits again with the same waiter, under a time limit (a timed wait:
 * its waiter arms a timer on the engine it runs on). */
struct reparker {
	co_frame co;
	co_waiter w;
	co_limit lim;
	int lock_res, wait_res;
	co_engine *locked_on;
};

static int reparker_fn(co_frame *f)
{
	struct reparker *x = (struct reparker *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&x->w, &rmx));
	x->lock_res = co_result(f);
	x->locked_on = co_engine_current();
	co_mutex_unlock(&rmx);
	CO_AWAIT(f, co_timeout(&x->lim, co_event_wait(&x->w, &timed_ev), 60 * CO_S));
	x->wait_res = co_result(f);
	CO_END(f);
}

/* Keeps context 0's thread until the test has taken the mutex back (5 s:
 * a hang guard), so that the waiter's retry runs after that. */
static int keeper_fn(co_frame *f)
{
	uint64_t end = co_now_ns() + 5 * CO_S;

	atomic_store(&x_running, 1);
	while (!atomic_load(&retaken) && co_now_ns() < end)
		;
	(void)f;
	return 0;
}

/* Context 1: releases the mutex the test holds once told to. */
struct releaser {
	co_frame co;
	co_waiter w;
	int res;
};

static int releaser_fn(co_frame *f)
{
	struct releaser *r = (struct releaser *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_event_wait(&r->w, &unlock_now));
	r->res = co_mutex_unlock(&rmx);
	CO_END(f);
}

static struct reparker rp;

/* On context 0, in the retry that put the waiter back and released the
 * lock (once): context 1 releases the mutex, which claims the waiter
 * again; its frame follows there and waits, timed, with the same waiter.
 * Only then does the retry go on: what it does now must not depend on the
 * waiter (it is context 1's again). */
static void at_reparked(void *arg)
{
	(void)arg;
	if (!atomic_exchange(&arm_reparked, 0))
		return;
	assert_int_equal(co_event_set(&unlock_now), 0);
	WAIT_UNTIL(parked_on(1, &rp.co, NULL));
	atomic_store(&reparked_done, 1);
}

static void test_mutex_waiter_reparked_then_claimed_elsewhere(void **state)
{
	static struct releaser rl;
	static co_frame keeper;
	(void)state;
	need_view();
	memset(&rp, 0, sizeof rp);
	memset(&rl, 0, sizeof rl);
	atomic_store(&arm_reparked, 0);
	atomic_store(&reparked_done, 0);
	atomic_store(&x_running, 0);
	atomic_store(&retaken, 0);
	assert_int_equal(co_mutex_init(&rmx), 0);
	assert_int_equal(co_event_init(&unlock_now, 0), 0);
	assert_int_equal(co_event_init(&timed_ev, 0), 0);
	co__fault_on_point(CO__POINT_MUTEX_REPARKED, at_reparked, NULL);
	sched_up(2, 1);
	assert_int_equal(co_mutex_trylock(&rmx), 0); /* held by this thread */
	spawn_to(1, &rl.co, releaser_fn, 0);
	spawn_to(0, &rp.co, reparker_fn, 1);
	wait_parked(0, &rp.co, "mutex");
	wait_parked(1, &rl.co, "event");
	spawn_to(0, &keeper, keeper_fn, 0);
	WAIT_UNTIL(atomic_load(&x_running));
	/* the unlock invites the waiter: its retry is posted to context 0,
	 * busy; this thread takes the mutex back before it runs */
	assert_int_equal(co_mutex_unlock(&rmx), 0);
	assert_int_equal(co_mutex_trylock(&rmx), 0);
	atomic_store(&arm_reparked, 1);
	atomic_store(&retaken, 1);
	WAIT_UNTIL(atomic_load(&reparked_done));
	assert_int_equal(co_event_set(&timed_ev), 0);
	sched_down();
	co__fault_on_point(CO__POINT_MUTEX_REPARKED, NULL, NULL);
	assert_int_equal(rp.lock_res, 0);
	assert_ptr_equal(rp.locked_on, eng(1)); /* it followed context 1's unlock */
	assert_int_equal(rp.wait_res, 0);       /* the event, not a timer */
	assert_int_equal(rl.res, 0);
	assert_int_equal(co_mutex_destroy(&rmx), 0);
}

/* ---- a roaming mutex waiter's retry that finds the mutex taken ------------------- */

/* The unlock comes from a frame of context 0, so the invited waiter, of
 * context 1, may follow it and retries on context 0's thread; a later
 * arrival (this thread) takes the free mutex first (CO__POINT_MUTEX_INVITED).
 * The waiter goes back to its queue on its own engine's thread only, where
 * a cancel's look at it and a cancel stop run: never between them
 * (CO__POINT_MUTEX_REPARKED names the engine that re-parked it). */
static atomic_int arm_barge, barged;
static co_engine *_Atomic reparked_on;

/* Waits for rmx (a struct releaser: a waiter and a result). */
static int mx_locker_fn(co_frame *f)
{
	struct releaser *x = (struct releaser *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&x->w, &rmx));
	x->res = co_result(f);
	if (x->res == 0)
		co_mutex_unlock(&rmx);
	CO_END(f);
}

static void barge_in(void *arg)
{
	(void)arg;
	if (atomic_exchange(&arm_barge, 0))
		atomic_store(&barged, co_mutex_trylock(&rmx) == 0);
}

static void note_reparked(void *arg)
{
	(void)arg;
	atomic_store(&reparked_on, co_engine_current());
}

static void test_mutex_retry_elsewhere_reparks_at_home(void **state)
{
	static struct releaser waiter;
	static struct releaser unlocker; /* context 0: the test's lock, let go */
	(void)state;
	need_view();
	memset(&waiter, 0, sizeof waiter);
	memset(&unlocker, 0, sizeof unlocker);
	atomic_store(&barged, 0);
	atomic_store(&reparked_on, NULL);
	assert_int_equal(co_mutex_init(&rmx), 0);
	assert_int_equal(co_event_init(&unlock_now, 0), 0);
	co__fault_on_point(CO__POINT_MUTEX_INVITED, barge_in, NULL);
	co__fault_on_point(CO__POINT_MUTEX_REPARKED, note_reparked, NULL);
	sched_up(2, 1);
	assert_int_equal(co_mutex_trylock(&rmx), 0); /* held by this thread */
	spawn_to(1, &waiter.co, mx_locker_fn, 1);
	spawn_to(0, &unlocker.co, releaser_fn, 0);
	wait_parked(1, &waiter.co, "mutex");
	wait_parked(0, &unlocker.co, "event");
	atomic_store(&arm_barge, 1);
	assert_int_equal(co_event_set(&unlock_now), 0);
	WAIT_UNTIL(atomic_load(&reparked_on) != NULL);
	assert_true(atomic_load(&barged)); /* the retry found the mutex taken */
	assert_ptr_equal(atomic_load(&reparked_on), eng(1)); /* at home */
	wait_parked(1, &waiter.co, "mutex");
	assert_int_equal(co_mutex_unlock(&rmx), 0); /* now it takes it */
	sched_down();
	co__fault_on_point(CO__POINT_MUTEX_INVITED, NULL, NULL);
	co__fault_on_point(CO__POINT_MUTEX_REPARKED, NULL, NULL);
	assert_int_equal(unlocker.res, 0);
	assert_int_equal(waiter.res, 0);
	assert_int_equal(co_mutex_destroy(&rmx), 0);
	assert_int_equal(co_event_destroy(&unlock_now), 0);
}

/* ---- a fan-out still spreads ---------------------------------------------------- */

#define FAN 64

struct fan {
	co_frame co;
	co_waiter w;
	co_engine *woke_on;
};

static atomic_int fan_on_1, fan_done;

static int fan_fn(co_frame *f)
{
	struct fan *x = (struct fan *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_event_wait(&x->w, &event));
	x->woke_on = co_engine_current();
	if (co_engine_current() == eng(1)) {
		atomic_store(&fan_on_1, 1);
	} else {
		/* Hold context 0's thread, the others of the fan-out in its
		 * queue, until one of them runs on context 1: only a steal
		 * takes one there (5 s: a hang guard). */
		uint64_t end = co_now_ns() + 5 * CO_S;

		while (!atomic_load(&fan_on_1) && co_now_ns() < end)
			;
	}
	atomic_fetch_add(&fan_done, 1);
	CO_END(f);
}

static void test_fan_out_spreads(void **state)
{
	static struct fan x[FAN];
	static struct waker wk;
	(void)state;
	need_view();
	sched_up(2, 1);
	prims_init();
	atomic_store(&fan_on_1, 0);
	atomic_store(&fan_done, 0);
	/* one at a time: a lone ready frame is never stolen, so all wait on 1 */
	for (int i = 0; i < FAN; i++) {
		memset(&x[i], 0, sizeof x[i]);
		spawn_to(1, &x[i].co, fan_fn, 1);
		wait_parked(1, &x[i].co, "event");
	}
	wk = (struct waker){ .prim = EVENT };
	spawn_to(0, &wk.co, waker_fn, 0);
	sched_down();
	prims_destroy();
	assert_int_equal(atomic_load(&fan_done), FAN);
	/* those that followed the waker to context 0 (follows_event shows
	 * the move), stealing spread again */
	assert_int_equal(atomic_load(&fan_on_1), 1);
}

/* ---- stress: pairs that ping-pong, a shared mutex, stops racing ------------------- */

#define PAIRS 24
#define ROUNDS 400

struct player {
	co_frame co;
	co_waiter w;
	co_chan *in, *out;
	uint64_t i, v;
	long got;                 /* items received, each the one expected */
	int first;                /* sends first */
	int bad;
	int status;
};

static co_chan lanes[PAIRS][2];
static long counter; /* under mutex */
static atomic_int players_done, rounds_begun;

static void player_done(co_frame *f)
{
	((struct player *)f)->status = f->status;
	atomic_fetch_add(&players_done, 1);
}

static int player_fn(co_frame *f)
{
	struct player *p = (struct player *)f;
	CO_BEGIN(f);
	for (p->i = 0; p->i < ROUNDS; p->i++) {
		atomic_fetch_add(&rounds_begun, 1);
		if (p->first) {
			p->v = p->i;
			CO_AWAIT(f, co_chan_send(&p->w, p->out, &p->v));
			if (co_result(f) < 0)
				CO_RETURN(f, co_result(f));
		}
		CO_AWAIT(f, co_chan_recv(&p->w, p->in, &p->v));
		if (co_result(f) < 0)
			CO_RETURN(f, co_result(f));
		p->bad |= p->v != p->i;
		p->got++;
		if (!p->first) {
			CO_AWAIT(f, co_chan_send(&p->w, p->out, &p->v));
			if (co_result(f) < 0)
				CO_RETURN(f, co_result(f));
		}
		CO_AWAIT(f, co_mutex_lock(&p->w, &mutex));
		if (co_result(f) < 0)
			CO_RETURN(f, co_result(f));
		counter++;
		co_mutex_unlock(&mutex);
	}
	CO_END(f);
}

static void stress(int stop)
{
	static struct player pl[PAIRS][2];
	co_sched_opts o = { .contexts = 4, .steal = 1 };

	assert_int_equal(co_sched_init(&s, &o), 0);
	assert_int_equal(co_mutex_init(&mutex), 0);
	counter = 0;
	atomic_store(&players_done, 0);
	atomic_store(&rounds_begun, 0);
	for (int i = 0; i < PAIRS; i++) {
		for (int k = 0; k < 2; k++) {
			assert_int_equal(co_chan_init(&lanes[i][k], sizeof(uint64_t), 1, NULL), 0);
			memset(&pl[i][k], 0, sizeof pl[i][k]);
		}
		for (int k = 0; k < 2; k++) {
			struct player *p = &pl[i][k];

			p->first = k == 0;
			p->out = &lanes[i][k];
			p->in = &lanes[i][1 - k];
			co_init(&p->co, player_fn);
			p->co.on_done = player_done;
			/* half the pairs roam, half stay: both kinds share the
			 * channels and the mutex */
			assert_int_equal(co_sched_roam(&p->co, i % 2 == 0), 0);
			assert_int_equal(co_sched_spawn_to(&s, (unsigned)(i + k) % 4, &p->co), 0);
		}
	}
	if (stop) {
		WAIT_UNTIL(atomic_load(&rounds_begun) > PAIRS * 8); /* under way */
		assert_int_equal(co_sched_stop(&s, CO_STOP_CANCEL), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(atomic_load(&players_done), 2 * PAIRS); /* each ended once */
	assert_int_equal(co_sched_destroy(&s), 0);
	long sum = 0;
	for (int i = 0; i < PAIRS; i++) {
		for (int k = 0; k < 2; k++) {
			struct player *p = &pl[i][k];

			assert_int_equal(p->bad, 0); /* no item lost, doubled or reordered */
			if (!stop) {
				assert_int_equal(p->status, 0);
				assert_int_equal(p->got, ROUNDS);
			} else {
				assert_true(p->status == 0 || p->status == -ECANCELED ||
					    p->status == -EPIPE);
			}
			sum += p->status == 0 ? ROUNDS : 0;
			assert_int_equal(co_chan_destroy(&lanes[i][k]), 0);
		}
	}
	if (!stop)
		assert_int_equal(counter, 2L * PAIRS * ROUNDS);
	else
		assert_true(counter >= sum);
	assert_int_equal(co_mutex_destroy(&mutex), 0);
}

static void test_stress(void **state)
{
	(void)state;
	stress(0);
}

static void test_stress_cancel_stop(void **state)
{
	(void)state;
	stress(1);
}

/* ---- the API as a stranger uses it ------------------------------------------------ */

static atomic_int child_answer;

static int roam_child_fn(co_frame *f)
{
	CO_BEGIN(f);
	atomic_store(&child_answer, co_sched_roam(f, 1)); /* a child: refused */
	CO_END(f);
}

struct roam_parent {
	co_frame co;
	co_frame kid;
};

static int roam_parent_fn(co_frame *f)
{
	struct roam_parent *p = (struct roam_parent *)f;
	CO_BEGIN(f);
	co_init(&p->kid, roam_child_fn);
	CO_AWAIT_TASK(f, &p->kid);
	CO_END(f);
}

static void test_errors(void **state)
{
	struct roam_parent p;
	co_frame f;
	(void)state;
	co_init(&f, roam_child_fn);
	assert_int_equal(co_sched_roam(NULL, 1), -EINVAL);
	assert_int_equal(co_sched_roam(&f, 2), -EINVAL);
	assert_int_equal(co_sched_roam(&f, -1), -EINVAL);
	assert_int_equal(co_sched_roam(&f, 1), 0);
	assert_int_equal(co_sched_roam(&f, 1), 0); /* twice: the same */
	assert_int_equal(co_sched_roam(&f, 0), 0);
	co_init(&p.co, roam_parent_fn);
	atomic_store(&child_answer, 1);
	co_test_run1(&p.co);
	assert_int_equal(atomic_load(&child_answer), -EINVAL);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_follows_channel),
	cmocka_unit_test(test_follows_event),
	cmocka_unit_test(test_follows_semaphore),
	cmocka_unit_test(test_follows_mutex),
	cmocka_unit_test(test_two_follow_one_waker),
	cmocka_unit_test(test_follows_spawn_on),
	cmocka_unit_test(test_follows_when),
	cmocka_unit_test(test_stays_without_roam),
	cmocka_unit_test(test_roam_turned_off),
	cmocka_unit_test(test_stays_without_steal),
	cmocka_unit_test(test_stays_in_its_group),
	cmocka_unit_test(test_timed_wait_stays),
	cmocka_unit_test(test_pinned_stays),
	cmocka_unit_test(test_cancel_asked_stays),
	cmocka_unit_test(test_stopped_waker_takes_nothing),
	cmocka_unit_test(test_woken_inside_suspend_stays),
	cmocka_unit_test(test_mutex_waiter_reparked_then_claimed_elsewhere),
	cmocka_unit_test(test_mutex_retry_elsewhere_reparks_at_home),
	cmocka_unit_test(test_fan_out_spreads),
	cmocka_unit_test(test_stress),
	cmocka_unit_test(test_stress_cancel_stop),
	cmocka_unit_test(test_errors),
};

CO_TEST_MAIN(tests, 1)
