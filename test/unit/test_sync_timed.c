/* SPDX-License-Identifier: MIT */
/* Timed waits and cancellation of the synchronisation primitives
 * (lib/sync/sync.c, lib/waiter/waiter.c): the event across threads, timeouts racing a
 * set, mutex hand-off with a time limit, cancel of a parked frame from
 * any thread, an engine stop ending a timed wait. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <cmocka.h>

#include <coring/loop.h>
#include <coring/sync.h>
#include <coring/scheduler.h>
#include <coring/context.h>
#include <coring/io.h>
#include "helpers.h"


/* Effectively "never": a timer that fired would hang the test (the meson
 * timeout is the guard), so a test that ends proves it was removed. */
#define NEVER (3600 * CO_S)

static void sched_start(co_sched *s)
{
	co_sched_opts o = { .contexts = 2 };
	assert_int_equal(co_sched_init(s, &o), 0);
}

/* ---- event: wakes every waiter, across threads, keeps contexts alive ------------ */

struct ev_task {
	co_frame co;
	co_waiter w;
	co_event *ev;
	uint64_t ns;              /* 0: no time limit */
	int res;
	atomic_int resumed;
};

static int ev_wait_fn(co_frame *f)
{
	struct ev_task *t = (struct ev_task *)f;
	CO_BEGIN(f);
	if (t->ns)
		CO_AWAIT(f, co_wait_for(co_event_wait(&t->w, t->ev), t->ns));
	else
		CO_AWAIT(f, co_event_wait(&t->w, t->ev));
	t->res = co_result(f);
	atomic_fetch_add(&t->resumed, 1);
	CO_END(f);
}

static void ev_task_init(struct ev_task *t, co_event *ev, uint64_t ns)
{
	t->ev = ev;
	t->ns = ns;
	t->res = 1;
	atomic_init(&t->resumed, 0);
	co_init(&t->co, ev_wait_fn);
}

static void *set_later(void *arg)
{
	usleep(100000); /* longer than the engine's 50 ms deadlock grace */
	assert_int_equal(co_event_set(arg), 0);
	return NULL;
}

#define EV_WAITERS 50

static void test_event_wakes_all_across_threads(void **state)
{
	/* two lone contexts that stop by themselves when idle; their frames
	 * park on an event a plain thread sets 100 ms later: neither context
	 * may stop (or report -EDEADLK) meanwhile */
	co_context c[2];
	co_event ev;
	struct ev_task t[2 * EV_WAITERS];
	pthread_t th;
	(void)state;
	assert_int_equal(co_event_init(&ev, 0), 0);
	for (int k = 0; k < 2; k++)
		assert_int_equal(co_context_init(&c[k], NULL), 0);
	for (int i = 0; i < 2 * EV_WAITERS; i++) {
		ev_task_init(&t[i], &ev, 0);
		assert_int_equal(co_context_spawn(&c[i % 2], &t[i].co), 0);
	}
	for (int k = 0; k < 2; k++)
		assert_int_equal(co_context_start(&c[k], CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(pthread_create(&th, NULL, set_later, &ev), 0);
	for (int k = 0; k < 2; k++)
		assert_int_equal(co_context_join(&c[k]), 0);
	pthread_join(th, NULL);
	for (int i = 0; i < 2 * EV_WAITERS; i++) {
		assert_int_equal(t[i].res, 0);
		assert_int_equal(atomic_load(&t[i].resumed), 1);
	}
	for (int k = 0; k < 2; k++)
		assert_int_equal(co_context_destroy(&c[k]), 0);
	assert_int_equal(co_event_is_set(&ev), 1);
	assert_int_equal(co_event_reset(&ev), 0);
	assert_int_equal(co_event_is_set(&ev), 0);
}

/* A coroutine that sets an event after a sleep. */
struct setter {
	co_frame co;
	co_io io;
	co_event *ev;
	uint64_t ns;
};

static int setter_fn(co_frame *f)
{
	struct setter *s = (struct setter *)f;
	CO_BEGIN(f);
	if (s->ns)
		CO_AWAIT(f, co_sleep(&s->io, s->ns));
	assert_int_equal(co_event_set(s->ev), 0);
	CO_END(f);
}

static void test_event_timeouts(void **state)
{
	co_engine e;
	co_event ev, never;
	struct ev_task fires, wins, set_first, try_unset, try_set;
	struct setter st = { .ev = &ev, .ns = 20 * CO_MS };
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_event_init(&ev, 0), 0);
	assert_int_equal(co_event_init(&never, 0), 0);
	ev_task_init(&fires, &never, 20 * CO_MS);  /* nobody sets it: -ETIME */
	ev_task_init(&wins, &ev, NEVER);           /* set after 20 ms: 0 */
	ev_task_init(&try_unset, &never, 0);
	try_unset.ns = 1;                          /* 1 ns: (almost) a try */
	co_init(&st.co, setter_fn);
	assert_int_equal(co_engine_spawn(&e, &fires.co), 0);
	assert_int_equal(co_engine_spawn(&e, &wins.co), 0);
	assert_int_equal(co_engine_spawn(&e, &try_unset.co), 0);
	assert_int_equal(co_engine_spawn(&e, &st.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(fires.res, -ETIME);
	assert_int_equal(wins.res, 0);
	assert_int_equal(try_unset.res, -ETIME);
	assert_int_equal(atomic_load(&fires.resumed), 1);
	assert_int_equal(atomic_load(&wins.resumed), 1);
	assert_int_equal(e.inflight, 0); /* every futex wait and timer reaped */

	/* already set: a timed wait passes at once */
	ev_task_init(&set_first, &ev, NEVER);
	ev_task_init(&try_set, &ev, 1);
	assert_int_equal(co_engine_spawn(&e, &set_first.co), 0);
	assert_int_equal(co_engine_spawn(&e, &try_set.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(set_first.res, 0);
	assert_int_equal(try_set.res, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* Timed waits racing with the set, on both contexts: each ends exactly
 * once, with 0 or -ETIME, and no timer is left behind. */
#define RACE_ROUNDS 12
#define RACE_WAITERS 64

static void test_event_timeout_races_set(void **state)
{
	(void)state;
	for (int round = 0; round < RACE_ROUNDS; round++) {
		co_sched s;
		co_event ev;
		struct ev_task t[RACE_WAITERS];
		struct setter st = { .ev = &ev, .ns = 1 * CO_MS };
		int woke = 0, timed_out = 0;

		sched_start(&s);
		assert_int_equal(co_event_init(&ev, 0), 0);
		for (int i = 0; i < RACE_WAITERS; i++) {
			/* timeouts spread around the set time (1 ms) */
			ev_task_init(&t[i], &ev, (uint64_t)(i % 16) * 125 * CO_US + 1);
			assert_int_equal(co_sched_spawn_to(&s, (unsigned)i % 2, &t[i].co), 0);
		}
		co_init(&st.co, setter_fn);
		assert_int_equal(co_sched_spawn_to(&s, (unsigned)round % 2, &st.co), 0);
		assert_int_equal(co_sched_run(&s), 0);
		for (int i = 0; i < RACE_WAITERS; i++) {
			assert_int_equal(atomic_load(&t[i].resumed), 1);
			if (t[i].res == 0)
				woke++;
			else if (t[i].res == -ETIME)
				timed_out++;
			else
				fail_msg("waiter %d: result %d", i, t[i].res);
		}
		assert_int_equal(woke + timed_out, RACE_WAITERS);
		assert_int_equal(co_sched_destroy(&s), 0);
	}
}

/* Timed-wait errors: no engine (a co_loop) to arm a timer on: -ENXIO,
 * whatever the limit, even one that has passed already (the answer never
 * depends on how fast the machine is). */
static void test_timed_wait_errors(void **state)
{
	co_loop loop;
	co_event ev;
	struct ev_task a, b;
	(void)state;
	assert_int_equal(co_event_init(&ev, 0), 0);
	co_loop_init(&loop);
	ev_task_init(&a, &ev, NEVER);
	ev_task_init(&b, &ev, 0);
	b.ns = 1; /* expired before the wait starts */
	assert_int_equal(co_loop_spawn(&loop, &a.co), 0);
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(a.res, -ENXIO);
	assert_int_equal(co_loop_spawn(&loop, &b.co), 0);
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(b.res, -ENXIO);

}

/* ---- a timed-out or cancelled waiter leaves the queue cleanly ------------------- */

struct mutex_task {
	co_frame co;
	co_waiter w;
	co_io io;
	co_mutex *m;
	uint64_t ns, hold;
	int res, after;
};

/* Lock (with a time limit if ns), hold for `hold` ns, unlock. */
static int mutex_task_fn(co_frame *f)
{
	struct mutex_task *t = (struct mutex_task *)f;
	CO_BEGIN(f);
	if (t->ns)
		CO_AWAIT(f, co_wait_for(co_mutex_lock(&t->w, t->m), t->ns));
	else
		CO_AWAIT(f, co_mutex_lock(&t->w, t->m));
	t->res = co_result(f);
	if (t->res < 0)
		CO_RETURN(f, t->res);
	if (t->hold)
		CO_AWAIT(f, co_sleep(&t->io, t->hold));
	t->after = co_mutex_unlock(t->m);
	CO_END(f);
}

static void test_mutex_timeout_and_handoff(void **state)
{
	co_engine e;
	co_mutex m;
	struct mutex_task holder = { .hold = 40 * CO_MS }, quick = { .ns = 5 * CO_MS },
			  patient = { .ns = NEVER };
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_mutex_init(&m), 0);
	holder.m = quick.m = patient.m = &m;
	co_init(&holder.co, mutex_task_fn);
	co_init(&quick.co, mutex_task_fn);
	co_init(&patient.co, mutex_task_fn);
	assert_int_equal(co_engine_spawn(&e, &holder.co), 0);
	assert_int_equal(co_engine_spawn(&e, &quick.co), 0);
	assert_int_equal(co_engine_spawn(&e, &patient.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(holder.res, 0);
	assert_int_equal(quick.res, -ETIME);   /* gave up, left the queue ... */
	assert_int_equal(patient.res, 0);      /* ... and the hand-off skipped it */
	assert_int_equal(holder.after, 0);
	assert_int_equal(patient.after, 0);
	assert_int_equal(co_mutex_trylock(&m), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* ---- co_cancel on a parked frame ------------------------------------------------ */

struct canceller {
	co_frame co;
	co_frame *victim;
	co_event *set_first;      /* if set: release the victim, then cancel */
	int res;
};

static int canceller_fn(co_frame *f)
{
	struct canceller *c = (struct canceller *)f;
	CO_BEGIN(f);
	CO_YIELD(f); /* the victim parks first */
	if (c->set_first)
		assert_int_equal(co_event_set(c->set_first), 0);
	c->res = co_cancel(c->victim);
	CO_END(f);
}

struct victim {
	co_frame co;
	co_waiter w;
	co_event *ev, *set_ev;
	co_mutex *m;
	uint64_t ns;
	int res, again, again_set;
};

static int victim_fn(co_frame *f)
{
	struct victim *v = (struct victim *)f;
	CO_BEGIN(f);
	if (v->m)
		CO_AWAIT(f, co_mutex_lock(&v->w, v->m));
	else if (v->ns)
		CO_AWAIT(f, co_wait_for(co_event_wait(&v->w, v->ev), v->ns));
	else
		CO_AWAIT(f, co_event_wait(&v->w, v->ev));
	v->res = co_result(f);
	/* Cancelled: a wait that would park ends at once; one that can
	 * complete at once still does. */
	CO_AWAIT(f, co_event_wait(&v->w, v->ev));
	v->again = co_result(f);
	CO_AWAIT(f, co_event_wait(&v->w, v->set_ev));
	v->again_set = co_result(f);
	CO_END(f);
}

static void run_cancel(co_engine *e, struct victim *v, struct canceller *c)
{
	co_init(&v->co, victim_fn);
	co_init(&c->co, canceller_fn);
	c->victim = &v->co;
	assert_int_equal(co_engine_spawn(e, &v->co), 0);
	assert_int_equal(co_engine_spawn(e, &c->co), 0);
	assert_int_equal(co_engine_run(e, CO_RUN_UNTIL_IDLE), 0);
}

static void test_cancel_parked(void **state)
{
	co_engine e;
	co_event ev, set_ev, other;
	co_mutex m;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_event_init(&ev, 0), 0);
	assert_int_equal(co_event_init(&set_ev, 1), 0);
	assert_int_equal(co_mutex_init(&m), 0);

	/* on an event, untimed and timed */
	for (int timed = 0; timed < 2; timed++) {
		struct victim v = { .ev = &ev, .set_ev = &set_ev, .ns = timed ? NEVER : 0 };
		struct canceller c = { .res = 1 };
		run_cancel(&e, &v, &c);
		assert_int_equal(c.res, 0);
		assert_int_equal(v.res, -ECANCELED);
		assert_int_equal(v.again, -ECANCELED);
		assert_int_equal(v.again_set, 0);
	}
	assert_int_equal(co_event_is_set(&ev), 0);

	/* on a mutex: the cancelled waiter must not receive the hand-off */
	{
		struct victim v = { .ev = &ev, .set_ev = &set_ev, .m = &m };
		struct canceller c = { .res = 1 };
		assert_int_equal(co_mutex_trylock(&m), 0);
		run_cancel(&e, &v, &c);
		assert_int_equal(v.res, -ECANCELED);
		assert_int_equal(co_mutex_unlock(&m), 0);
		assert_int_equal(co_mutex_trylock(&m), 0); /* nobody owns it */
		assert_int_equal(co_mutex_unlock(&m), 0);
	}

	/* the release wins: set, then cancel before the victim runs */
	{
		struct victim v = { .ev = &other, .set_ev = &set_ev };
		struct canceller c = { .res = 1, .set_first = &other };
		assert_int_equal(co_event_init(&other, 0), 0);
		run_cancel(&e, &v, &c);
		assert_int_equal(c.res, 0);
		assert_int_equal(v.res, 0);
		assert_int_equal(v.again, 0);     /* other is set now */
	}
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* co_cancel on the frames' own context racing a co_event_set from another
 * thread, hundreds of times, and for half the waiters a timer too: every
 * waiter ends exactly once, with 0, -ECANCELED or -ETIME, and none is left
 * stuck (a lost update of the frame's state would leave one queued yet
 * marked waiting: -EDEADLK, or a debug trap). */
#define CR_ROUNDS 200
#define CR_WAITERS 16

static atomic_int cr_parked; /* waiters about to park (they park in that turn) */

struct cr_waiter {
	co_frame co;
	co_waiter w;
	co_event *ev;
	uint64_t ns; /* a time limit, or 0 */
	int res, ends;
};

static int cr_waiter_fn(co_frame *f)
{
	struct cr_waiter *v = (struct cr_waiter *)f;
	CO_BEGIN(f);
	atomic_fetch_add(&cr_parked, 1);
	if (v->ns)
		CO_AWAIT(f, co_wait_for(co_event_wait(&v->w, v->ev), v->ns));
	else
		CO_AWAIT(f, co_event_wait(&v->w, v->ev));
	v->res = co_result(f);
	v->ends++;
	CO_END(f);
}

struct cr_canceller {
	co_frame co;
	co_io io;
	struct cr_waiter *v;
	uint64_t delay;
	int i;
};

static int cr_canceller_fn(co_frame *f)
{
	struct cr_canceller *c = (struct cr_canceller *)f;
	CO_BEGIN(f);
	/* real time, not yields: yields run within one batch of the loop,
	 * before the waiters' timers are even submitted */
	CO_AWAIT(f, co_sleep(&c->io, c->delay));
	for (c->i = 0; c->i < CR_WAITERS; c->i++)
		co_cancel(&c->v[c->i].co);
	CO_END(f);
}

static void test_cancel_races_set_from_other_thread(void **state)
{
	static struct cr_waiter v[CR_WAITERS];
	struct cr_canceller c;
	unsigned seed = 7;
	long set_won = 0, timed_out = 0;
	(void)state;
	for (int round = 0; round < CR_ROUNDS; round++) {
		co_context ctx;
		co_event ev;
		assert_int_equal(co_event_init(&ev, 0), 0);
		assert_int_equal(co_context_init(&ctx, NULL), 0);
		for (int i = 0; i < CR_WAITERS; i++) {
			v[i] = (struct cr_waiter){ .ev = &ev };
			if (i & 1)
				v[i].ns = (1 + (uint64_t)(rand_r(&seed) % 20)) * CO_US;
			co_init(&v[i].co, cr_waiter_fn);
			assert_int_equal(co_context_spawn(&ctx, &v[i].co), 0);
		}
		c = (struct cr_canceller){ .v = v,
					   .delay = (uint64_t)(rand_r(&seed) % 30) * CO_US };
		co_init(&c.co, cr_canceller_fn);
		assert_int_equal(co_context_spawn(&ctx, &c.co), 0);
		atomic_store(&cr_parked, 0);
		assert_int_equal(co_context_start(&ctx, CO_RUN_UNTIL_IDLE), 0);
		/* the waiters park, then the canceller sleeps a little and
		 * cancels them one by one: set somewhere in that window */
		while (atomic_load(&cr_parked) < CR_WAITERS)
			;
		for (unsigned spin = rand_r(&seed) % 20000; spin; spin--)
			atomic_signal_fence(memory_order_seq_cst);
		assert_int_equal(co_event_set(&ev), 0);
		assert_int_equal(co_context_join(&ctx), 0);
		assert_int_equal(co_context_destroy(&ctx), 0);
		for (int i = 0; i < CR_WAITERS; i++) {
			assert_int_equal(v[i].ends, 1);
			if (v[i].res == 0)
				set_won++;
			else if (v[i].res == -ETIME && v[i].ns)
				timed_out++;
			else
				assert_int_equal(v[i].res, -ECANCELED);
		}
	}
	print_message("      %ld waits woken by the set, %ld timed out, %ld cancelled\n", set_won,
		      timed_out, (long)CR_ROUNDS * CR_WAITERS - set_won - timed_out);
}

/* The engine is stopped with cancel_io while a timed waiter sleeps. */
struct stopper {
	co_frame co;
	co_engine *e;
};

static int stopper_fn(co_frame *f)
{
	struct stopper *s = (struct stopper *)f;
	CO_BEGIN(f);
	CO_YIELD(f);
	assert_int_equal(co_engine_stop(s->e, 1), 0);
	CO_END(f);
}

static void test_engine_stop_cancels_timed_wait(void **state)
{
	co_engine e;
	co_event ev;
	struct ev_task t;
	struct stopper st = { .e = &e };
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_event_init(&ev, 0), 0);
	ev_task_init(&t, &ev, NEVER);
	co_init(&st.co, stopper_fn);
	assert_int_equal(co_engine_spawn(&e, &t.co), 0);
	assert_int_equal(co_engine_spawn(&e, &st.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0);
	assert_int_equal(t.res, -ECANCELED);
	assert_int_equal(co_engine_destroy(&e), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_event_wakes_all_across_threads),
		cmocka_unit_test(test_event_timeouts),
		cmocka_unit_test(test_event_timeout_races_set),
		cmocka_unit_test(test_timed_wait_errors),
		cmocka_unit_test(test_mutex_timeout_and_handoff),
		cmocka_unit_test(test_cancel_parked),
		cmocka_unit_test(test_cancel_races_set_from_other_thread),
		cmocka_unit_test(test_engine_stop_cancels_timed_wait),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
