/* SPDX-License-Identifier: MIT */
/*
 * Groups and dispatch: groups of contexts per kind of work, spawn and
 * transfer by kind, dispatch by key and by explicit affinity, a manually
 * driven context ticked from the test's own loop, co_engine_tick, and
 * co_spawn_on (run a child elsewhere and await it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>
#include <cmocka.h>

#include <coring/coring.h>
#include "helpers.h"

/* ---- dispatch by key ---------------------------------------------------------------- */

#define KEYED 2000
#define KEYS 16

struct keyed {
	co_frame co;
	co_context *ran_on;
};

static int keyed_fn(co_frame *f)
{
	struct keyed *k = (struct keyed *)f;
	CO_BEGIN(f);
	k->ran_on = co_context_current();
	CO_END(f);
}

static void test_dispatch_by_key(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 4 };
	static struct keyed t[KEYED];
	co_context *home[KEYS] = { NULL };
	int used[4] = { 0 }, spread = 0;
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < KEYED; i++) {
		co_init(&t[i].co, keyed_fn);
		assert_int_equal(co_sched_spawn_key(&s, 0, (uint64_t)(i % KEYS), &t[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < KEYED; i++) {
		co_context *c = t[i].ran_on;
		if (home[i % KEYS] == NULL)
			home[i % KEYS] = c;
		assert_ptr_equal(c, home[i % KEYS]); /* one key, one context */
	}
	for (int k = 0; k < KEYS; k++)
		used[home[k]->index]++;
	for (int i = 0; i < 4; i++)
		spread += used[i] > 0;
	assert_true(spread >= 2); /* the keys spread (the hash, not timing) */
	assert_int_equal(co_sched_spawn_key(&s, 1, 0, &t[0].co), -EINVAL); /* no kind 1 */
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- groups: transfer by kind, a manual logic context ---------------------------- */

enum { K_IO, K_CPU, K_LOGIC, KINDS };

struct journey {
	co_frame co;
	co_transfer tr;
	co_sched *s;
	unsigned kind_at[3];
	pthread_t logic_thread;
	int res[2];
};

static int journey_fn(co_frame *f)
{
	struct journey *j = (struct journey *)f;
	CO_BEGIN(f);
	j->kind_at[0] = co_context_current()->kind;
	CO_AWAIT(f, co_transfer_to(&j->tr, co_sched_pick(j->s, K_CPU)));
	j->res[0] = co_result(f);
	j->kind_at[1] = co_context_current()->kind;
	CO_AWAIT(f, co_transfer_to(&j->tr, co_sched_pick(j->s, K_LOGIC)));
	j->res[1] = co_result(f);
	j->kind_at[2] = co_context_current()->kind;
	j->logic_thread = pthread_self();
	CO_END(f);
}

static const co_sched_group job_groups[KINDS] = {
	[K_IO] = { .contexts = 2 },
	[K_CPU] = { .contexts = 2, .steal = 1 },
	[K_LOGIC] = { .manual = 1 },
};

static void test_job_types(void **state)
{
	co_sched s;
	co_sched_opts o = { .groups = job_groups, .ngroups = KINDS };
	static struct journey j[64];
	co_context *logic;
	long ticks = 0;
	int ret;
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	assert_int_equal(s.n, 5);
	assert_int_equal(s.ngroups, KINDS);
	logic = co_sched_pick(&s, K_LOGIC);
	assert_non_null(logic);
	assert_true(logic->manual);
	assert_null(co_sched_pick(&s, KINDS));
	for (int i = 0; i < 64; i++) {
		memset(&j[i], 0, sizeof j[i]);
		j[i].s = &s;
		co_init(&j[i].co, journey_fn);
		assert_int_equal(co_sched_spawn_kind(&s, K_IO, &j[i].co), 0);
	}
	/* this thread is the logic thread: it ticks, and polls instead of
	 * blocking in co_sched_run */
	while ((ret = co_sched_poll(&s)) == -EAGAIN) {
		assert_true(co_context_tick(logic) >= 0);
		ticks++;
		if (ticks % 64 == 0)
			sched_yield();
	}
	assert_int_equal(ret, 0);
	for (int i = 0; i < 64; i++) {
		assert_int_equal(j[i].kind_at[0], K_IO);
		assert_int_equal(j[i].kind_at[1], K_CPU);
		assert_int_equal(j[i].kind_at[2], K_LOGIC);
		assert_int_equal(j[i].res[0], 0);
		assert_int_equal(j[i].res[1], 0);
		assert_true(pthread_equal(j[i].logic_thread, pthread_self()));
	}
	print_message("      64 journeys IO -> CPU -> logic in %ld ticks of the logic context\n", ticks);
	/* a stop: the manual context ends (its tick says so), destroy works */
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	assert_int_equal(co_sched_run(&s), 0); /* ends the idle manual context */
	assert_int_equal(co_context_tick(logic), -ESHUTDOWN);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* Stealing stays inside a group: tasks of group A never run on B. */
struct stayer {
	co_frame co;
	co_context *a1;
	atomic_int *seen, *naps;
	unsigned kind;
};

/* Until group 0's other context stole some, and group 1's contexts have
 * been idle (looking for frames to steal) 200 times meanwhile. */
static int stayer_fn(co_frame *f)
{
	struct stayer *t = (struct stayer *)f;
	CO_BEGIN(f);
	while (!atomic_load(t->seen) || atomic_load(t->naps) < 200) {
		if (co_context_current() == t->a1)
			atomic_store(t->seen, 1); /* stolen inside A */
		t->kind = co_context_current()->kind;
		if (t->kind != 0)
			CO_RETURN(f, -1);
		CO_YIELD(f);
	}
	CO_END(f);
}

/* Keeps a context of group 1 awake and idle (it looks for frames to steal
 * whenever its own queue is empty) until group 0's steal happened. */
struct napper {
	co_frame co;
	co_io io;
	atomic_int *naps;
};

static int napper_fn(co_frame *f)
{
	struct napper *n = (struct napper *)f;
	CO_BEGIN(f);
	while (atomic_load(n->naps) < 200) {
		CO_AWAIT(f, co_sleep(&n->io, 20 * CO_US));
		atomic_fetch_add(n->naps, 1);
	}
	CO_END(f);
}

static void test_stealing_stays_in_group(void **state)
{
	static const co_sched_group g[2] = { { .contexts = 2, .steal = 1 },
					     { .contexts = 2, .steal = 1 } };
	co_sched s;
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	static struct stayer t[300];
	atomic_int seen = 0, naps = 0;
	(void)state;
	static struct napper nap[2];
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < 2; i++) {
		nap[i] = (struct napper){ .naps = &naps };
		co_init(&nap[i].co, napper_fn);
		assert_int_equal(co_sched_spawn_to(&s, 2 + (unsigned)i, &nap[i].co), 0);
	}
	for (int i = 0; i < 300; i++) {
		t[i] = (struct stayer){ .a1 = &s.ctx[1], .seen = &seen, .naps = &naps };
		co_init(&t[i].co, stayer_fn);
		assert_int_equal(co_sched_spawn_to(&s, 0, &t[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < 300; i++)
		assert_int_equal(co_status(&t[i].co), 0); /* never ran on group 1 */
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- co_spawn_on ---------------------------------------------------------------------- */

struct child {
	co_frame co;
	co_io io;
	unsigned kind;
	uint64_t sleep_ns;
	int slept;
};

static int child_fn(co_frame *f)
{
	struct child *c = (struct child *)f;
	CO_BEGIN(f);
	/* read by the test's thread while the child sleeps */
	__atomic_store_n(&c->kind, co_context_current() ? co_context_current()->kind : 99,
			 __ATOMIC_RELEASE);
	if (c->sleep_ns) {
		CO_AWAIT(f, co_sleep(&c->io, c->sleep_ns));
		c->slept = co_result(f);
		CO_RETURN(f, c->slept);
	}
	CO_RETURN(f, 42);
	CO_END(f);
}

struct parent {
	co_frame co;
	co_when w;
	struct child kid;
	co_engine *on;
	unsigned kind;
	int res;
	atomic_int waiting;
};

static int parent_fn(co_frame *f)
{
	struct parent *p = (struct parent *)f;
	CO_BEGIN(f);
	p->kind = co_context_current()->kind;
	atomic_store(&p->waiting, 1);
	CO_AWAIT(f, co_spawn_on(&p->w, p->on, &p->kid.co));
	p->res = co_result(f);
	CO_END(f);
}

static void test_spawn_on(void **state)
{
	static const co_sched_group g[2] = { { .contexts = 1 }, { .contexts = 2 } };
	co_sched s;
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	struct parent p, q;
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);

	/* runs over there; its status comes back */
	memset(&p, 0, sizeof p);
	p.on = &co_sched_pick(&s, 1)->engine;
	co_init(&p.kid.co, child_fn);
	co_init(&p.co, parent_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 0, &p.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(p.kind, 0);
	assert_int_equal(p.kid.kind, 1);
	assert_int_equal(p.res, 42);

	/* the awaiting frame cancelled from another thread: the child (an
	 * hour's sleep, on another context) is cancelled, and it finished */
	memset(&q, 0, sizeof q);
	q.on = &co_sched_pick(&s, 1)->engine;
	q.kid.sleep_ns = 3600 * CO_S;
	co_init(&q.kid.co, child_fn);
	co_init(&q.co, parent_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 0, &q.co), 0);
	WAIT_UNTIL(atomic_load(&q.waiting));
	WAIT_UNTIL(__atomic_load_n(&q.kid.kind, __ATOMIC_ACQUIRE) == 1); /* asleep over there */
	assert_int_equal(co_cancel(&q.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(q.res, -ECANCELED);
	assert_int_equal(q.kid.slept, -ECANCELED);
	assert_true(co_done(&q.kid.co));

	/* errors: no engine; a child not fresh */
	memset(&p, 0, sizeof p);
	co_init(&p.kid.co, child_fn);
	co_init(&p.co, parent_fn);
	p.on = NULL;
	assert_int_equal(co_sched_spawn(&s, &p.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(p.res, -EINVAL);
	assert_false(co_done(&p.kid.co)); /* nothing was spawned */

	/* an engine that refuses spawns: -ESHUTDOWN */
	{
		co_engine stopped;
		assert_int_equal(co_engine_init(&stopped, NULL), 0);
		assert_int_equal(co_engine_stop(&stopped, CO_STOP_DRAIN), 0);
		memset(&p, 0, sizeof p);
		co_init(&p.kid.co, child_fn);
		co_init(&p.co, parent_fn);
		p.on = &stopped;
		assert_int_equal(co_sched_spawn(&s, &p.co), 0);
		assert_int_equal(co_sched_run(&s), 0);
		assert_int_equal(p.res, -ESHUTDOWN);
		assert_int_equal(co_engine_destroy(&stopped), 0);
	}
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* co_spawn_on under a time limit (or cancelled) aimed at an engine that
 * does not run: a lone engine never run, a context not started, a manual
 * context nobody ticks. The child has not started, so it is finished for
 * it (-ECANCELED, it never runs) and the await ends: -ETIME, -ECANCELED. */
/* An awaiter around another that raises a flag once the inner one's
 * suspend has returned 1: the awaiting frame is parked by then, so a
 * co_cancel from another thread reaches the await's cancel op, not the
 * cancel byte that a suspend still to run would read ("cancelled before
 * the await": nothing spawned). */
struct signal_after {
	co_awaiter aw;
	co_awaiter *inner;
	atomic_int *flag;
};

static int signal_after_ready(co_awaiter *a, co_frame *f)
{
	co_awaiter *in = ((struct signal_after *)a)->inner;

	return in->ops->ready ? in->ops->ready(in, f) : 0;
}

static int signal_after_suspend(co_awaiter *a, co_frame *f)
{
	struct signal_after *s = (struct signal_after *)a;
	int r = s->inner->ops->suspend(s->inner, f);

	if (r)
		atomic_store(s->flag, 1);
	return r;
}

static int signal_after_resume(co_awaiter *a, co_frame *f)
{
	co_awaiter *in = ((struct signal_after *)a)->inner;

	return in->ops->resume ? in->ops->resume(in, f) : 0;
}

static int signal_after_cancel(co_awaiter *a, co_frame *f)
{
	co_awaiter *in = ((struct signal_after *)a)->inner;

	return in->ops->cancel(in, f);
}

static const co_awaiter_ops signal_after_ops = { signal_after_ready, signal_after_suspend,
						 signal_after_resume, signal_after_cancel, 0,
						 "signal_after" };

static co_awaiter *signal_after(struct signal_after *s, co_awaiter *inner, atomic_int *flag)
{
	s->aw.ops = &signal_after_ops;
	s->inner = inner;
	s->flag = flag;
	return &s->aw;
}

struct limited_parent {
	co_frame co;
	co_when w;
	co_limit lim;
	struct signal_after sig;
	struct child kid;
	co_engine *on;
	uint64_t limit_ns;
	int res;
	atomic_int waiting;
};

static int limited_parent_fn(co_frame *f)
{
	struct limited_parent *p = (struct limited_parent *)f;
	CO_BEGIN(f);
	if (p->limit_ns)
		CO_AWAIT(f, co_timeout(&p->lim, co_spawn_on(&p->w, p->on, &p->kid.co), p->limit_ns));
	else
		CO_AWAIT(f, signal_after(&p->sig, co_spawn_on(&p->w, p->on, &p->kid.co), &p->waiting));
	p->res = co_result(f);
	CO_END(f);
}

/* Await a child on `on` (which never runs meanwhile) from a frame run on a
 * fresh engine here, limited or cancelled from a thread of its own. */
static void spawn_on_idle(co_engine *on, uint64_t limit_ns)
{
	struct limited_parent p;
	co_engine e;
	co_test_runner r;

	memset(&p, 0, sizeof p);
	p.on = on;
	p.limit_ns = limit_ns;
	p.kid.kind = 1234;
	co_init(&p.kid.co, child_fn);
	co_init(&p.co, limited_parent_fn);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_engine_spawn(&e, &p.co), 0);
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_IDLE);
	if (!limit_ns) {
		/* the child spawned and the parent parked: the cancel
		 * reaches the await (see signal_after) */
		WAIT_UNTIL(atomic_load(&p.waiting));
		assert_int_equal(co_cancel(&p.co), 0);
	}
	assert_int_equal(co_test_runner_join(&r), 0);
	assert_int_equal(p.res, limit_ns ? -ETIME : -ECANCELED);
	assert_true(co_done(&p.kid.co));
	assert_int_equal(co_status(&p.kid.co), -ECANCELED);
	assert_int_equal(p.kid.kind, 1234); /* it never ran */
	assert_int_equal(co_engine_destroy(&e), 0);
}

static void test_spawn_on_engine_not_running(void **state)
{
	static const co_sched_group g[2] = { { .contexts = 1 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	co_sched s;
	co_engine idle;
	co_context c;
	int r;
	(void)state;

	assert_int_equal(co_engine_init(&idle, NULL), 0); /* never run */
	spawn_on_idle(&idle, 20 * CO_MS);
	spawn_on_idle(&idle, 0);
	/* a frame cancelled before the await: -ECANCELED at once, the
	 * child not spawned */
	{
		struct limited_parent q;

		memset(&q, 0, sizeof q);
		q.on = &idle;
		co_init(&q.kid.co, child_fn);
		co_init(&q.co, limited_parent_fn);
		assert_int_equal(co_cancel(&q.co), 0); /* not run anywhere: at once */
		co_test_run1(&q.co);
		assert_int_equal(q.res, -ECANCELED);
		assert_false(co_done(&q.kid.co));
		assert_int_equal(q.kid.co.state & CO__ST_SPAWNED, 0);
	}
	assert_int_equal(co_engine_state(&idle), CO_ENGINE_READY);
	assert_int_equal(co_engine_destroy(&idle), 0); /* nothing left on it */

	/* a context not started, with a frame queued before: that one stays
	 * queued, and a cancel stop of the context still finishes it */
	assert_int_equal(co_context_init(&c, NULL), 0);
	{
		struct child before;

		memset(&before, 0, sizeof before);
		before.kind = 1234;
		co_init(&before.co, child_fn);
		assert_int_equal(co_context_spawn(&c, &before.co), 0);
		spawn_on_idle(&c.engine, 20 * CO_MS);
		assert_int_equal(co_context_state(&c), CO_CONTEXT_NEW);
		assert_int_equal(co_context_destroy(&c), -EBUSY); /* `before` is queued */
		assert_int_equal(co_context_stop(&c, CO_STOP_CANCEL), 0);
		assert_int_equal(co_status(&before.co), -ECANCELED);
		assert_int_equal(before.kind, 1234); /* never ran */
	}
	assert_int_equal(co_context_destroy(&c), 0);

	/* a manual context not ticked: ticked afterwards, it has nothing left */
	assert_int_equal(co_sched_init(&s, &o), 0);
	spawn_on_idle(&co_sched_pick(&s, 1)->engine, 20 * CO_MS);
	assert_int_equal(co_context_tick(co_sched_pick(&s, 1)), 0);
	while ((r = co_sched_poll(&s)) == -EAGAIN) /* the other context settles */
		assert_int_equal(co_context_tick(co_sched_pick(&s, 1)), 0);
	assert_int_equal(r, 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* An on_done that asks the scheduler its state: it runs on the thread
 * that called the stop, which must not hold the scheduler's lock then. */
static int state_seen = -1;
static pthread_t done_on;

static void state_on_done(co_frame *f)
{
	state_seen = co_sched_state((co_sched *)f->user);
	done_on = pthread_self();
}

/* A cancel stop of a scheduler finishes what waits on a manual context
 * that no thread has ticked (nothing else runs it; its ticks may never
 * come): a task queued there (on_done sees -ECANCELED, it never ran), and
 * a child a frame on a ticked context awaits with co_spawn_on, whose await
 * then ends with -ECANCELED. The poll answers 0 and the destroy succeeds.
 * (Both stayed for good: the poll -EAGAIN, the destroy -EBUSY.) */
static void test_cancel_stop_finishes_unticked(void **state)
{
	static const co_sched_group g[3] = { { .manual = 1 }, { .manual = 1 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 3 };
	co_sched s;
	co_context *logic;
	struct limited_parent p;
	struct child task;
	int r = -EAGAIN;
	(void)state;
	alarm(20); /* an on_done that waits for the lock its stop holds: fail, not hang */
	assert_int_equal(co_sched_init(&s, &o), 0);
	logic = co_sched_pick(&s, 0);
	assert_true(co_context_tick(logic) >= 0);
	memset(&task, 0, sizeof task);
	task.kind = 1234;
	co_init(&task.co, child_fn);
	task.co.on_done = state_on_done; /* asks the scheduler: not under its lock */
	task.co.user = &s;
	assert_int_equal(co_sched_spawn_kind(&s, 2, &task.co), 0);
	memset(&p, 0, sizeof p);
	p.on = &co_sched_pick(&s, 1)->engine;
	p.kid.kind = 1234;
	co_init(&p.kid.co, child_fn);
	co_init(&p.co, limited_parent_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 0, &p.co), 0);
	for (int i = 0; i < 10 && !atomic_load(&p.waiting); i++)
		assert_true(co_context_tick(logic) >= 0);
	assert_true(atomic_load(&p.waiting)); /* the child is queued, the parent parked */
	assert_int_equal(co_sched_stop(&s, CO_STOP_CANCEL), 0);
	assert_true(co_done(&task.co)); /* at once, on this thread */
	assert_int_equal(co_status(&task.co), -ECANCELED);
	assert_int_equal(task.kind, 1234); /* it never ran */
	assert_int_equal(state_seen, CO_SCHED_STOPPING);
	assert_true(pthread_equal(done_on, pthread_self())); /* on the stopping thread */
	for (int i = 0; i < 1000 && (r = co_sched_poll(&s)) == -EAGAIN; i++)
		co_context_tick(logic); /* the parent's end */
	assert_int_equal(r, 0);
	assert_true(co_done(&p.co));
	assert_int_equal(p.res, -ECANCELED);
	assert_int_equal(co_status(&p.kid.co), -ECANCELED);
	assert_int_equal(p.kid.kind, 1234);
	assert_int_equal(co_sched_destroy(&s), 0);
	alarm(0);
}

/* A timed stop whose time has come finishes what waits on a manual
 * context no thread ticks: the drain becomes a cancel in each engine's own
 * turn, and that context has none, so the poll (or a run) does it. Before
 * the time, the task waits. */
static void test_timed_stop_finishes_unticked(void **state)
{
	static const co_sched_group g[2] = { { .manual = 1 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	co_sched s;
	struct child task;
	int r = -EAGAIN;
	(void)state;
	alarm(20);
	assert_int_equal(co_sched_init(&s, &o), 0);
	assert_true(co_context_tick(co_sched_pick(&s, 0)) >= 0);
	memset(&task, 0, sizeof task);
	task.kind = 1234;
	co_init(&task.co, child_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 1, &task.co), 0);
	assert_int_equal(co_sched_stop_timed(&s, 3600 * CO_S), 0); /* not yet */
	assert_int_equal(co_sched_poll(&s), -EAGAIN);
	assert_false(co_done(&task.co));
	assert_int_equal(co_sched_stop_timed(&s, 1 * CO_MS), 0); /* the earliest counts */
	while ((r = co_sched_poll(&s)) == -EAGAIN) {
		usleep(1000);
		co_context_tick(co_sched_pick(&s, 0));
	}
	assert_int_equal(r, 0);
	assert_true(co_done(&task.co));
	assert_int_equal(co_status(&task.co), -ECANCELED);
	assert_int_equal(task.kind, 1234); /* it never ran */
	assert_int_equal(co_sched_destroy(&s), 0);
	alarm(0);
}

/* A cancel request waiting on an engine that does not run survives the
 * borrow that finishes an unstarted co_spawn_on child there: the borrow
 * settles every request it finds, and the one for a frame that has not
 * finished goes back to the engine's list, for its next tick. */
static void test_cancel_request_survives_borrow(void **state)
{
	co_engine m;
	co_context c;
	struct child sleeper;
	struct parent p;
	(void)state;
	if (!co_view_available())
		skip();
	assert_int_equal(co_engine_init(&m, NULL), 0);
	memset(&sleeper, 0, sizeof sleeper);
	sleeper.sleep_ns = 3600 * CO_S;
	co_init(&sleeper.co, child_fn);
	assert_int_equal(co_engine_spawn(&m, &sleeper.co), 0);
	assert_int_equal(co_engine_tick(&m), 1); /* it sleeps; m runs no more */
	assert_false(co_done(&sleeper.co));
	assert_int_equal(co_cancel(&sleeper.co), 0); /* queued for m's next turn */

	/* a frame of context c spawns a child on m and is cancelled: the
	 * child has not started, so c's thread finishes it, borrowing m */
	assert_int_equal(co_context_init(&c, NULL), 0);
	memset(&p, 0, sizeof p);
	p.on = &m;
	co_init(&p.kid.co, child_fn);
	co_init(&p.co, parent_fn);
	assert_int_equal(co_context_spawn(&c, &p.co), 0);
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_STOP), 0);
	for (int waiting = 0; !waiting; usleep(100)) { /* until c lists it waiting */
		co_view v;

		assert_int_equal(co_view_engine(&v, &c.engine, CO_VIEW_WAIT), 0);
		for (size_t k = 0; k < v.n; k++)
			waiting |= v.frames[k].frame == &p.co && v.frames[k].state == CO_VIEW_WAITING;
		co_view_free(&v);
	}
	assert_int_equal(co_cancel(&p.co), 0);
	assert_int_equal(co_context_stop(&c, CO_STOP_DRAIN), 0); /* ends once p has */
	assert_int_equal(co_context_join(&c), 0);
	assert_int_equal(p.res, -ECANCELED);
	assert_int_equal(co_status(&p.kid.co), -ECANCELED);

	/* m's next ticks handle the sleeper's request */
	for (int i = 0; i < 20000 && !co_done(&sleeper.co); i++) {
		assert_true(co_engine_tick(&m) >= 0);
		usleep(100); /* a hang guard: the cancel's CQE may take a moment */
	}
	assert_true(co_done(&sleeper.co));
	assert_int_equal(co_status(&sleeper.co), -ECANCELED);
	assert_int_equal(co_context_destroy(&c), 0);
	assert_int_equal(co_engine_destroy(&m), 0);
}

/* when_any whose losing child moved to another context: the cancel reaches
 * it there, it finishes, and the await completes. */
struct mover {
	co_frame co;
	co_io io;
	co_transfer tr;
	co_context *to;
	atomic_int *moved;
	int slept;
};

static int mover_fn(co_frame *f)
{
	struct mover *m = (struct mover *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_transfer_to(&m->tr, m->to));
	if (co_result(f) == 0 && co_context_current() == m->to)
		atomic_store(m->moved, 1);
	CO_AWAIT(f, co_sleep(&m->io, 3600 * CO_S)); /* loses, and is cancelled */
	m->slept = co_result(f);
	CO_END(f);
}

/* Wins, once the other child has moved. */
static int quick_fn(co_frame *f)
{
	struct mover *m = (struct mover *)f;
	CO_BEGIN(f);
	while (!atomic_load(m->moved))
		CO_YIELD(f);
	CO_END(f);
}

struct racer_parent {
	co_frame co;
	co_when w;
	co_frame *kids[2];
	int res;
};

static int racer_parent_fn(co_frame *f)
{
	struct racer_parent *p = (struct racer_parent *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_when_any(&p->w, p->kids, 2));
	p->res = co_result(f);
	CO_END(f);
}

static void test_when_any_loser_moved(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	struct mover far, near;
	struct racer_parent p = { .res = -1000 };
	atomic_int moved = 0;
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	memset(&far, 0, sizeof far);
	memset(&near, 0, sizeof near);
	far.to = &s.ctx[1];
	far.moved = near.moved = &moved;
	co_init(&far.co, mover_fn);
	co_init(&near.co, quick_fn);
	p.kids[0] = &far.co;
	p.kids[1] = &near.co;
	co_init(&p.co, racer_parent_fn);
	assert_int_equal(co_sched_spawn_to(&s, 0, &p.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(p.res, 1); /* the quick one won */
	assert_int_equal(atomic_load(&moved), 1);
	assert_int_equal(far.slept, -ECANCELED); /* cancelled over there */
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- co_engine_tick: a loop of the program's own ----------------------------------- */

struct reader {
	co_frame co;
	co_io io;
	int fd, res;
	char c;
};

static int reader_fn(co_frame *f)
{
	struct reader *r = (struct reader *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_read(&r->io, r->fd, &r->c, 1, (uint64_t)-1));
	r->res = co_result(f);
	CO_END(f);
}

static void test_engine_tick(void **state)
{
	co_engine e;
	struct reader r = { .res = -1000 }; /* not done yet */
	int p[2], n;
	long ticks = 0;
	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	r.fd = p[0];
	co_init(&r.co, reader_fn);
	assert_int_equal(co_engine_spawn(&e, &r.co), 0);
	assert_int_equal(co_engine_tick(&e), 1); /* it ran, and waits on the pipe */
	/* a thousand frames of the program's loop: the tick never waits for
	 * the read (a tick that slept would hang here) */
	for (int i = 0; i < 1000; i++)
		assert_int_equal(co_engine_tick(&e), 0);
	assert_int_equal(r.res, -1000);
	assert_int_equal(write(p[1], "x", 1), 1);
	while (r.res == -1000) { /* the completion comes in at some tick */
		n = co_engine_tick(&e);
		assert_true(n >= 0);
		ticks++;
	}
	assert_int_equal(r.res, 1); /* one byte */
	assert_int_equal(r.c, 'x');
	assert_int_equal(co_engine_state(&e), CO_ENGINE_READY);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_engine_tick(&e), -EINVAL); /* destroyed */
	assert_int_equal(co_engine_tick(NULL), -EINVAL);
	close(p[0]);
	close(p[1]);
	print_message("      the read completed %ld ticks after the write\n", ticks);
}

static void *tick_elsewhere(void *arg)
{
	return (void *)(intptr_t)co_engine_tick(arg);
}

static void test_tick_errors(void **state)
{
	co_engine e;
	pthread_t th;
	void *tret;
	int ret;
	co_sched s;
	static const co_sched_group two_manual[1] = { { .contexts = 2, .manual = 1 } };
	static const co_sched_group manual_steal[1] = { { .manual = 1, .steal = 1 } };
	co_sched_opts bad1 = { .groups = two_manual, .ngroups = 1 };
	co_sched_opts bad2 = { .groups = manual_steal, .ngroups = 1 };
	co_sched_opts bad3 = { .groups = NULL, .ngroups = 2 };
	co_sched_opts bad4 = { .groups = two_manual, .ngroups = 0 };
	/* counts whose sum wraps: to 1, and to 0 */
	static const co_sched_group wrap1[2] = { { .contexts = UINT_MAX }, { .contexts = 2 } };
	static const co_sched_group wrap0[2] = { { .contexts = 0x80000000u },
						 { .contexts = 0x80000000u } };
	co_sched_opts bad5 = { .groups = wrap1, .ngroups = 2 };
	co_sched_opts bad6 = { .groups = wrap0, .ngroups = 2 };
	co_sched_opts ok = { .contexts = 1 };
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_engine_tick(&e), 0); /* this thread owns it now */
	assert_int_equal(pthread_create(&th, NULL, tick_elsewhere, &e), 0);
	pthread_join(th, &tret);
	assert_int_equal((int)(intptr_t)tret, -EPERM);
	assert_int_equal(co_engine_destroy(&e), 0);

	assert_int_equal(co_sched_init(&s, &bad1), -EINVAL);
	assert_int_equal(co_sched_init(&s, &bad2), -EINVAL);
	assert_int_equal(co_sched_init(&s, &bad3), -EINVAL);
	assert_int_equal(co_sched_init(&s, &bad4), -EINVAL);
	assert_int_equal(co_sched_init(&s, &bad5), -EINVAL);
	assert_int_equal(co_sched_init(&s, &bad6), -EINVAL);
	assert_int_equal(co_sched_init(&s, &ok), 0);
	assert_int_equal(co_context_tick(&s.ctx[0]), -EINVAL); /* has a thread */
	assert_int_equal(co_context_tick(NULL), -EINVAL);
	assert_int_equal(co_sched_spawn_kind(&s, 1, NULL), -EINVAL);
	while ((ret = co_sched_poll(&s)) == -EAGAIN) /* until the contexts settle */
		sched_yield();
	assert_int_equal(ret, 0); /* nothing to do */
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_sched_poll(&s), -EINVAL);
	assert_int_equal(co_sched_poll(NULL), -EINVAL);
}

/* co_sched_destroy from one of the scheduler's own contexts (a post run
 * by a context's thread, a post run inside a manual context's tick):
 * -EBUSY, nothing changed (it would wait for its own context to end);
 * from this thread afterwards, 0. */
struct destroy_post {
	co_post p;
	co_sched *s;
	atomic_int res, ran;
};

static void destroy_post_fn(co_post *p)
{
	struct destroy_post *d = (struct destroy_post *)p;

	atomic_store(&d->res, co_sched_destroy(d->s));
	atomic_store(&d->ran, 1);
}

static void test_destroy_from_own_context(void **state)
{
	static const co_sched_group g[2] = { { .contexts = 1 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	struct destroy_post d[2];
	co_sched s;
	(void)state;

	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < 2; i++) {
		memset(&d[i], 0, sizeof d[i]);
		d[i].p.fn = destroy_post_fn;
		d[i].s = &s;
		assert_int_equal(co_engine_post(&s.ctx[i].engine, &d[i].p), 0);
	}
	WAIT_UNTIL(atomic_load(&d[0].ran)); /* the threaded context's */
	assert_int_equal(atomic_load(&d[0].res), -EBUSY);
	assert_int_equal(co_sched_state(&s), CO_SCHED_RUNNING);
	assert_int_equal(co_context_tick(&s.ctx[1]), 0); /* the manual one's */
	assert_int_equal(atomic_load(&d[1].ran), 1);
	assert_int_equal(atomic_load(&d[1].res), -EBUSY);
	assert_int_equal(co_sched_state(&s), CO_SCHED_RUNNING);
	assert_int_equal(co_sched_destroy(&s), 0);
}


/*
 * scheduler.md: "co_context_current() names the context whose thread is
 * running"; errors: "co_context_tick | -EINVAL ..., -ESHUTDOWN ...,
 * co_engine_tick's" (an error changes nothing). A frame running on a
 * context that calls co_context_tick (of a manual context, or of its own
 * manual context from inside its tick) is refused by co_engine_tick
 * (-EBUSY: an engine runs on this thread), and the thread's current
 * context stays its own: co_context_tick names the manual context only
 * once the engine accepted the tick, and restores the one before after it
 * (lib/context/context.c). Without that, co_context_current() answered
 * NULL there after the refused call: job_system.md's
 * co_context_current()->kind crashed, a co_transfer_to from that frame
 * answered -EXDEV, and a co_sched_run from it waited for itself instead of
 * answering -EBUSY.
 */
struct wrong_ticker {
	co_frame co;
	co_context *target;
	co_context *before, *after;
	int tick;
	atomic_int done;
};

static int wrong_ticker_fn(co_frame *f)
{
	struct wrong_ticker *w = (struct wrong_ticker *)f;
	CO_BEGIN(f);
	w->before = co_context_current();
	w->tick = co_context_tick(w->target);
	w->after = co_context_current();
	atomic_store(&w->done, 1);
	CO_END(f);
}

static void test_refused_tick_keeps_current(void **state)
{
	static const co_sched_group g[2] = { { .contexts = 1 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	struct wrong_ticker w[2];
	co_sched s;
	co_context *logic;
	int r;
	(void)state;

	assert_int_equal(co_sched_init(&s, &o), 0);
	logic = co_sched_pick(&s, 1);
	assert_true(co_context_tick(logic) >= 0); /* this thread ticks it */
	/* a task on the threaded context ticks the manual one */
	memset(w, 0, sizeof w);
	w[0].target = logic;
	co_init(&w[0].co, wrong_ticker_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 0, &w[0].co), 0);
	WAIT_UNTIL(atomic_load(&w[0].done));
	assert_ptr_equal(w[0].before, &s.ctx[0]);
	assert_int_equal(w[0].tick, -EBUSY);
	assert_ptr_equal(w[0].after, &s.ctx[0]); /* NULL */
	/* a task on the manual context ticks it from inside its tick */
	w[1].target = logic;
	co_init(&w[1].co, wrong_ticker_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 1, &w[1].co), 0);
	while (!atomic_load(&w[1].done))
		assert_true(co_context_tick(logic) >= 0);
	assert_ptr_equal(w[1].before, logic);
	assert_int_equal(w[1].tick, -EBUSY);
	assert_ptr_equal(w[1].after, logic);
	while ((r = co_sched_poll(&s)) == -EAGAIN)
		co_context_tick(logic);
	assert_int_equal(r, 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}


/*
 * A post pending on a manual context is work. engine.h, co_engine_post:
 * "A post ... counts as pending work: the engine does not stop, nor
 * co_engine_destroy succeed, before fn has run"; scheduler.md: "Destroy
 * also answers -EBUSY, changing nothing, while ..." and "destroying a
 * running scheduler with nothing live stops and joins it at once";
 * "A stop that has not finished makes destroy answer -EBUSY (wait with
 * co_sched_run)".
 *
 * The scheduler counts a pending post as work (scheduler.c, work_left):
 * destroy answers -EBUSY and changes nothing, a tick runs the post, and
 * destroy then succeeds; with a context ticked before and one never
 * ticked. Without the count, destroy stopped every context and ended the
 * manual one, then answered -EBUSY having changed everything: the tick
 * answered -ESHUTDOWN, the post never ran, and every later destroy
 * answered -EBUSY (the scheduler could never be freed).
 */
struct post_count {
	co_post p;
	atomic_int ran;
};

static void post_count_fn(co_post *p)
{
	atomic_fetch_add(&((struct post_count *)p)->ran, 1);
}

/* A scheduler of one threaded context and one manual (logic) context:
 * the logic context, ticked once by this thread if ticked. */
static co_context *logic_sched(co_sched *s, int ticked)
{
	static const co_sched_group g[2] = { { .contexts = 1 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	co_context *logic;

	assert_int_equal(co_sched_init(s, &o), 0);
	logic = co_sched_pick(s, 1);
	if (ticked)
		assert_true(co_context_tick(logic) >= 0);
	return logic;
}

/* Post a fresh counting post p on c's engine. */
static void post_counted(co_context *c, struct post_count *p)
{
	memset(p, 0, sizeof *p);
	p->p.fn = post_count_fn;
	assert_int_equal(co_engine_post(&c->engine, &p->p), 0);
}

static void test_destroy_with_post_on_manual(void **state)
{
	struct post_count p;
	co_sched s;
	co_context *logic;
	(void)state;

	for (int ticked = 0; ticked < 2; ticked++) {
		logic = logic_sched(&s, ticked);
		post_counted(logic, &p);
		assert_int_equal(co_sched_destroy(&s), -EBUSY); /* the post is pending */
		assert_int_equal(co_sched_state(&s), CO_SCHED_RUNNING);
		assert_true(co_context_tick(logic) >= 0); /* runs the post */
		assert_int_equal(atomic_load(&p.ran), 1);
		assert_int_equal(co_sched_destroy(&s), 0);
	}
}

/* The same through a stop: co_sched_stop (a drain) lets every accepted
 * piece of work finish, so the ticker's co_sched_poll answers -EAGAIN
 * until a tick has run the post (and until the threaded context's thread,
 * which ends on its own time, has ended), then 0, and destroy succeeds.
 * Without the post counted, the poll ended the manual context with the
 * post never run, and destroy answered -EBUSY for good. */
static void test_stop_with_post_on_manual(void **state)
{
	struct post_count p;
	co_sched s;
	co_context *logic;
	int r;
	(void)state;

	logic = logic_sched(&s, 1);
	post_counted(logic, &p);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	for (int i = 0; i < 1000 && (r = co_sched_poll(&s)) == -EAGAIN; i++)
		if (co_context_tick(logic) < 0)
			break;
	assert_int_equal(atomic_load(&p.ran), 1);
	/* the threaded context's thread ends on its own time: -EAGAIN until then */
	WAIT_UNTIL((r = co_sched_poll(&s)) != -EAGAIN);
	assert_int_equal(r, 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* A post on a manual context no thread has ticked yet is work that waits
 * for its first tick, as a frame there does: co_sched_run answers -EBUSY
 * (not -EDEADLK with nothing stuck), co_sched_poll -EAGAIN; a tick runs
 * it, and the poll then answers 0. */
static void test_post_on_unticked_manual(void **state)
{
	struct post_count p;
	co_sched s;
	co_context *logic;
	int r;
	(void)state;

	logic = logic_sched(&s, 0);
	post_counted(logic, &p);
	assert_int_equal(co_sched_run(&s), -EBUSY);
	assert_int_equal(co_sched_poll(&s), -EAGAIN);
	assert_int_equal(atomic_load(&p.ran), 0);
	assert_true(co_context_tick(logic) >= 0);
	assert_int_equal(atomic_load(&p.ran), 1);
	while ((r = co_sched_poll(&s)) == -EAGAIN) /* until the tick's quiet is seen */
		assert_true(co_context_tick(logic) >= 0);
	assert_int_equal(r, 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* After a stop, the ticker of a manual context with a post pending (and
 * nothing live) still has a tick to give it: its co_sched_run answers
 * -EBUSY instead of waiting for itself; once a tick ran the post the
 * context ends, and the ticker's run waits for the rest and answers 0. */
static void test_ticker_run_with_post_after_stop(void **state)
{
	struct post_count p;
	co_sched s;
	co_context *logic;
	(void)state;

	alarm(60); /* a run that waits for its own ticks never returns */
	logic = logic_sched(&s, 1); /* this thread ticks it */
	post_counted(logic, &p);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	assert_int_equal(co_sched_run(&s), -EBUSY);
	assert_int_equal(atomic_load(&p.ran), 0);
	assert_true(co_context_tick(logic) >= 0);
	assert_int_equal(atomic_load(&p.ran), 1);
	assert_int_equal(co_context_state(logic), CO_CONTEXT_ENDED);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	alarm(0);
}


/*
 * scheduler.md, Errors: co_sched_destroy "-EBUSY (..., called on one of
 * its own contexts: a post, a frame, an on_done, a manual context's
 * tick ...); nothing changes". A cancel stop finishes the tasks queued on
 * a manual context no thread has ticked on the stopping thread itself
 * (cancel_stop_finishes_unticked): such a task's on_done that destroys the
 * scheduler is answered -EBUSY (its task is still counted), the stop
 * returns, and the scheduler then ends and is destroyed as usual.
 */
static atomic_int destroy_in_on_done = 1;

static void destroy_on_done(co_frame *f)
{
	atomic_store(&destroy_in_on_done, co_sched_destroy((co_sched *)f->user));
}

static void test_destroy_from_stop_on_done(void **state)
{
	static const co_sched_group g[2] = { { .manual = 1 }, { .contexts = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	co_sched s;
	struct child task;
	int r;
	(void)state;

	assert_int_equal(co_sched_init(&s, &o), 0);
	memset(&task, 0, sizeof task);
	task.kind = 1234;
	co_init(&task.co, child_fn);
	task.co.on_done = destroy_on_done;
	task.co.user = &s;
	assert_int_equal(co_sched_spawn_kind(&s, 0, &task.co), 0);
	assert_int_equal(co_sched_stop(&s, CO_STOP_CANCEL), 0);
	assert_int_equal(atomic_load(&destroy_in_on_done), -EBUSY);
	assert_int_equal(co_status(&task.co), -ECANCELED);
	assert_int_equal(task.kind, 1234); /* it never ran */
	assert_int_equal(co_sched_tasks(&s), 0);
	while ((r = co_sched_poll(&s)) == -EAGAIN)
		sched_yield(); /* the threaded context ends */
	assert_int_equal(r, 0);
	assert_int_equal(co_sched_state(&s), CO_SCHED_ENDED);
	assert_int_equal(co_sched_destroy(&s), 0);
}


/*
 * scheduler.h, co_sched_stop_timed: "drains, and cancels what is still
 * live after ns". With ns 0 the time has come at once: a task waiting for
 * an event that is never set on a threaded context, and one queued on a
 * manual context no thread has ticked, are both cancelled (a task that
 * never started does not start: status -ECANCELED; one that had begun to
 * wait sees its wait end with -ECANCELED), co_sched_run answers 0 and the
 * scheduler is destroyed. (Zero is not "never".)
 */
struct zero_waiter {
	co_frame co;
	co_waiter w;
	co_event *ev;
	int res;
};

static int zero_waiter_fn(co_frame *f)
{
	struct zero_waiter *z = (struct zero_waiter *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_event_wait(&z->w, z->ev));
	z->res = co_result(f);
	CO_END(f);
}

static void test_timed_stop_zero_cancels_now(void **state)
{
	static const co_sched_group g[2] = { { .contexts = 1 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	struct zero_waiter z[2];
	co_event ev;
	co_sched s;
	(void)state;

	assert_int_equal(co_event_init(&ev, 0), 0);
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (unsigned k = 0; k < 2; k++) {
		memset(&z[k], 0, sizeof z[k]);
		z[k].ev = &ev;
		z[k].res = 1; /* not resumed after its wait */
		co_init(&z[k].co, zero_waiter_fn);
		assert_int_equal(co_sched_spawn_kind(&s, k, &z[k].co), 0);
	}
	assert_int_equal(co_sched_stop_timed(&s, 0), 0);
	assert_int_equal(co_sched_run(&s), 0);
	for (unsigned k = 0; k < 2; k++) {
		assert_true(co_done(&z[k].co));
		if (co_status(&z[k].co) == -ECANCELED)
			assert_int_equal(z[k].res, 1); /* never started */
		else
			assert_int_equal(z[k].res, -ECANCELED); /* its wait was cancelled */
	}
	assert_int_equal(co_status(&z[1].co), -ECANCELED); /* the unticked one never ran */
	assert_int_equal(co_sched_tasks(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_event_destroy(&ev), 0);
}


/*
 * scheduler.md, Stopping: "After a stop, tasks found stuck are forgotten
 * by destroy (their on_done never runs; nothing may wake them)"; Running
 * and waiting: -EDEADLK, "wake them and run again, or stop it".
 *
 * Two tasks wait on an awaiter of their own that neither does I/O nor
 * parks (stuck as far as coring can tell), one on a threaded context, one
 * on a manual context this thread ticks. After a drain stop co_sched_poll
 * answers -EDEADLK (s->stuck counts both); the threaded context has ended
 * (its run found its frame stuck), and so does the manual one: a tick of
 * the stopped engine that ends idle with frames nothing can wake records
 * them (e->stuck), and co_context_tick then ends the context. The
 * scheduler ends and destroy forgets both tasks, as it does for a stuck
 * task on a threaded context alone (test_lifecycle sched_deadlock).
 * Without the tick's verdict the manual context never ended: the
 * scheduler stayed STOPPING and destroy answered -EBUSY for good.
 */
struct stuck_gate {
	co_awaiter aw;
	_Atomic(co_frame *) parked;
};

static int stuck_gate_suspend(co_awaiter *a, co_frame *f)
{
	atomic_store(&((struct stuck_gate *)a)->parked, f);
	return 1;
}

static const co_awaiter_ops stuck_gate_ops = { NULL, stuck_gate_suspend, NULL, NULL, 0,
					       "stuck gate" };

struct stuck_task {
	co_frame co;
	struct stuck_gate gate;
	atomic_int passed, done;
};

static int stuck_task_fn(co_frame *f)
{
	struct stuck_task *t = (struct stuck_task *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, &t->gate.aw);
	atomic_store(&t->passed, 1);
	CO_END(f);
}

static void stuck_task_done(co_frame *f)
{
	atomic_fetch_add(&((struct stuck_task *)f)->done, 1);
}

static void test_stuck_on_manual_forgotten_after_stop(void **state)
{
	static const co_sched_group g[2] = { { .contexts = 1 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	struct stuck_task t[2];
	co_context *logic;
	co_sched s;
	int r;
	(void)state;

	assert_int_equal(co_sched_init(&s, &o), 0);
	logic = co_sched_pick(&s, 1);
	for (unsigned k = 0; k < 2; k++) {
		memset(&t[k], 0, sizeof t[k]);
		t[k].gate.aw.ops = &stuck_gate_ops;
		co_init(&t[k].co, stuck_task_fn);
		t[k].co.on_done = stuck_task_done;
		assert_int_equal(co_sched_spawn_kind(&s, k, &t[k].co), 0);
	}
	while ((r = co_sched_poll(&s)) == -EAGAIN)
		assert_true(co_context_tick(logic) >= 0);
	assert_int_equal(r, -EDEADLK);
	assert_int_equal(s.stuck, 2);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	for (int i = 0; i < 100 && (r = co_sched_poll(&s)) == -EAGAIN; i++) {
		if (co_context_tick(logic) < 0)
			break;
		sched_yield();
	}
	while (co_context_state(&s.ctx[0]) != CO_CONTEXT_ENDED) /* its run found it stuck */
		sched_yield();
	assert_true(co_context_tick(logic) >= 0 || co_context_state(logic) == CO_CONTEXT_ENDED);
	/* the threaded context counts itself ended just after its state says so */
	WAIT_UNTIL((r = co_sched_poll(&s)) != -EAGAIN);
	assert_true(r == 0 || r == -EDEADLK);
	assert_int_equal(co_sched_state(&s), CO_SCHED_ENDED);
	assert_int_equal(co_sched_destroy(&s), 0);
	for (unsigned k = 0; k < 2; k++) {
		assert_int_equal(atomic_load(&t[k].passed), 0);
		assert_int_equal(atomic_load(&t[k].done), 0); /* forgotten: no on_done */
	}
}


/*
 * scheduler.md, Groups: "Each group has its own dispatch, engine options
 * and stealing"; Errors: co_sched_init "-EINVAL (...), -ENOMEM, the
 * engines' ...: nothing is left behind". Each group's engine options
 * reach its own contexts only (a batch per group, a manual group's too);
 * a group whose engine options its engines refuse (a reserved field set)
 * fails the init with the engine's -EINVAL, after the contexts of the
 * groups before it were made and started: they are released, and the
 * scheduler reads as never set up.
 */
static void test_group_engine_options(void **state)
{
	static const co_sched_group g[3] = {
		{ .contexts = 2, .engine = { .batch = 7 } },
		{ .contexts = 1, .engine = { .batch = 13 } },
		{ .manual = 1, .engine = { .batch = 3 } },
	};
	static const unsigned batch[4] = { 7, 7, 13, 3 };
	co_sched_group bad[2] = { { .contexts = 2 }, { .contexts = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 3 };
	co_sched_opts ob = { .groups = bad, .ngroups = 2 };
	co_sched s;
	(void)state;

	assert_int_equal(co_sched_init(&s, &o), 0);
	assert_int_equal(s.n, 4);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(s.ctx[i].engine.batch, batch[i]);
	assert_int_equal(co_sched_destroy(&s), 0);

	bad[1].engine.reserved[0] = 1;
	memset(&s, 0xff, sizeof s);
	assert_int_equal(co_sched_init(&s, &ob), -EINVAL);
	assert_int_equal(co_sched_state(&s), CO_SCHED_DEAD);
	assert_null(co_sched_pick(&s, 0));
	assert_int_equal(co_sched_destroy(&s), -EINVAL);
}


/*
 * job_system.md, "What runs in which frame": a coroutine of the logic
 * context "woken by another coroutine of the logic context in this tick
 * (an event set, an unlock, a spawn) | in this tick, after the frames that
 * were ready when it began". test_turn wake_runs_in_same_tick shows the
 * event on a lone engine; here on a scheduler's manual context a waker
 * frame, in one tick, sets an event a logic frame waits for, spawns a task
 * onto the logic kind, and unlocks a mutex a third logic frame waits for.
 */
static atomic_int logic_tick;

struct same_tick {
	co_frame co;
	co_waiter w;
	co_mutex *m;
	co_event *ev;
	int ran_at;
};

static int mutex_waiter_fn(co_frame *f)
{
	struct same_tick *t = (struct same_tick *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&t->w, t->m));
	t->ran_at = atomic_load(&logic_tick);
	co_mutex_unlock(t->m);
	CO_END(f);
}

static int event_waiter_fn(co_frame *f)
{
	struct same_tick *t = (struct same_tick *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_event_wait(&t->w, t->ev));
	t->ran_at = atomic_load(&logic_tick);
	CO_END(f);
}

static int spawned_fn(co_frame *f)
{
	struct same_tick *t = (struct same_tick *)f;
	CO_BEGIN(f);
	t->ran_at = atomic_load(&logic_tick);
	CO_END(f);
}

struct waker {
	co_frame co;
	co_sched *s;
	co_mutex *m;
	co_event *ev;
	struct same_tick *spawn;
	int at, spawned;
};

static int waker_fn(co_frame *f)
{
	struct waker *w = (struct waker *)f;
	CO_BEGIN(f);
	CO_YIELD(f); /* the waiters wait by now */
	w->at = atomic_load(&logic_tick);
	if (w->spawn)
		w->spawned = co_sched_spawn_kind(w->s, 1, &w->spawn->co);
	if (w->ev)
		co_event_set(w->ev);
	if (w->m)
		co_mutex_unlock(w->m);
	CO_END(f);
}

/* The waker and the waiter given (a NULL one is left out) on a fresh
 * scheduler's manual context: tick 1 starts them, tick 2 wakes. */
static void same_tick_round(struct waker *wk, struct same_tick *waiter, co_mutex *m)
{
	static const co_sched_group g[2] = { { .contexts = 1 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	co_context *logic;
	co_sched s;
	int r;

	assert_int_equal(co_sched_init(&s, &o), 0);
	logic = co_sched_pick(&s, 1);
	wk->s = &s;
	if (m)
		assert_int_equal(co_mutex_trylock(m), 0); /* the waker's, from the start */
	co_init(&wk->co, waker_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 1, &wk->co), 0);
	if (waiter)
		assert_int_equal(co_sched_spawn_kind(&s, 1, &waiter->co), 0);
	atomic_store(&logic_tick, 1);
	assert_true(co_context_tick(logic) >= 0); /* they begin; the waiter waits */
	atomic_store(&logic_tick, 2);
	assert_true(co_context_tick(logic) >= 0); /* the waker wakes */
	atomic_store(&logic_tick, 3);
	while ((r = co_sched_poll(&s)) == -EAGAIN)
		assert_true(co_context_tick(logic) >= 0);
	assert_int_equal(r, 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(wk->at, 2);
}

static void test_logic_wakes_run_in_same_tick(void **state)
{
	struct same_tick ew, sp;
	struct waker wk;
	co_event ev;
	(void)state;

	assert_int_equal(co_event_init(&ev, 0), 0);
	memset(&ew, 0, sizeof ew);
	memset(&sp, 0, sizeof sp);
	memset(&wk, 0, sizeof wk);
	ew.ev = &ev;
	wk.ev = &ev;
	wk.spawn = &sp;
	co_init(&ew.co, event_waiter_fn);
	co_init(&sp.co, spawned_fn);
	same_tick_round(&wk, &ew, NULL);
	assert_int_equal(wk.spawned, 0);
	assert_int_equal(ew.ran_at, 2); /* the event's waiter */
	assert_int_equal(sp.ran_at, 2); /* the spawned task */
	assert_int_equal(co_event_destroy(&ev), 0);
}

/*
 * The same for "an unlock" (job_system.md, "What runs in which frame"): a
 * FIFO mutex hands the mutex to its waiter, which runs in the unlock's
 * tick (2). The default (barging) mutex invites its waiter to retry, and
 * the retry runs at its engine's next turn (lib/sync/sync.c,
 * mutex_deliver), so that the frames of this tick may take the free mutex
 * meanwhile: the waiter runs at the next tick (3).
 */
static void test_logic_unlock_wake_tick(void **state)
{
	struct same_tick mw;
	struct waker wk;
	co_mutex m;
	(void)state;

	for (int fifo = 1; fifo >= 0; fifo--) {
		assert_int_equal(fifo ? co_mutex_init_fifo(&m) : co_mutex_init(&m), 0);
		memset(&mw, 0, sizeof mw);
		memset(&wk, 0, sizeof wk);
		mw.m = &m;
		wk.m = &m;
		co_init(&mw.co, mutex_waiter_fn);
		same_tick_round(&wk, &mw, &m);
		assert_int_equal(mw.ran_at, fifo ? 2 : 3);
		assert_int_equal(co_mutex_destroy(&m), 0);
	}
}

/*
 * scheduler.h, co_sched_stop: "Asking again is harmless; a drain may be
 * turned into a cancel". On a manual context no thread has ticked, a
 * drain waits (the run answers -EBUSY: its task waits for a tick) and a
 * second drain changes nothing; the cancel asked after them finishes the
 * task at once on this thread (-ECANCELED, never ran), and the scheduler
 * then ends: run 0, destroy 0. A stop asked after the end is harmless
 * too.
 */
static void test_drain_then_cancel_unticked(void **state)
{
	static const co_sched_group g[2] = { { .contexts = 1 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	struct child task;
	co_sched s;
	(void)state;

	assert_int_equal(co_sched_init(&s, &o), 0);
	memset(&task, 0, sizeof task);
	task.kind = 1234;
	co_init(&task.co, child_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 1, &task.co), 0);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	assert_int_equal(co_sched_run(&s), -EBUSY);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	assert_int_equal(co_sched_run(&s), -EBUSY);
	assert_false(co_done(&task.co));
	assert_int_equal(co_sched_stop(&s, CO_STOP_CANCEL), 0);
	assert_true(co_done(&task.co));
	assert_int_equal(co_status(&task.co), -ECANCELED);
	assert_int_equal(task.kind, 1234); /* it never ran */
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_state(&s), CO_SCHED_ENDED);
	assert_int_equal(co_sched_stop(&s, CO_STOP_CANCEL), 0);
	assert_int_equal(co_sched_stop_timed(&s, 0), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_dispatch_by_key),
	cmocka_unit_test(test_destroy_from_own_context),
	cmocka_unit_test(test_job_types),
	cmocka_unit_test(test_stealing_stays_in_group),
	cmocka_unit_test(test_spawn_on),
	cmocka_unit_test(test_spawn_on_engine_not_running),
	cmocka_unit_test(test_cancel_stop_finishes_unticked),
	cmocka_unit_test(test_timed_stop_finishes_unticked),
	cmocka_unit_test(test_cancel_request_survives_borrow),
	cmocka_unit_test(test_when_any_loser_moved),
	cmocka_unit_test(test_engine_tick),
	cmocka_unit_test(test_tick_errors),
	cmocka_unit_test(test_refused_tick_keeps_current),
	cmocka_unit_test(test_destroy_with_post_on_manual),
	cmocka_unit_test(test_stop_with_post_on_manual),
	cmocka_unit_test(test_post_on_unticked_manual),
	cmocka_unit_test(test_ticker_run_with_post_after_stop),
	cmocka_unit_test(test_destroy_from_stop_on_done),
	cmocka_unit_test(test_timed_stop_zero_cancels_now),
	cmocka_unit_test(test_stuck_on_manual_forgotten_after_stop),
	cmocka_unit_test(test_group_engine_options),
	cmocka_unit_test(test_logic_wakes_run_in_same_tick),
	cmocka_unit_test(test_logic_unlock_wake_tick),
	cmocka_unit_test(test_drain_then_cancel_unticked),
};

CO_TEST_MAIN(tests, 1)
