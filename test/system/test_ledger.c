/* SPDX-License-Identifier: MIT */
/*
 * The ledger: random interleavings of everything that can happen to a
 * scheduler's tasks, for a bounded time (CORING_LEDGER_SECONDS, default 2;
 * `FULL=1 make bench` runs it for minutes), recording every answer.
 * Each round: spawns from several threads (some after a stop), tasks that
 * yield, sleep, lock a mutex, wait on an event, transfer to another
 * context or cancel a sibling; a thread cancelling tasks from outside; a
 * stop (drain, cancel, timed, or none) at a random moment; one or two
 * runs; destroy. At the end of each round:
 *   - every accepted spawn finished exactly once (its on_done ran once),
 *     with status 0 or -ECANCELED;
 *   - every refused spawn (-ESHUTDOWN) never started;
 *   - every cancel was answered 0 or -EALREADY;
 *   - runs and destroy returned 0.
 * The verdict never depends on timing; run it under TSan (make test).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <coring/coring.h>
#include "helpers.h"

#define SPAWNERS 3
#define PER_SPAWNER 48
#define TASKS (SPAWNERS * PER_SPAWNER)

enum kind { K_YIELD, K_SLEEP, K_MUTEX, K_EVENT, K_TRANSFER, K_CANCEL_SIBLING, K_KINDS };

struct round;

struct task {
	co_frame co;
	co_io io;
	co_waiter w;
	co_transfer tr;
	struct round *rd;
	enum kind kind;
	int i, k, spawn_ret;
	unsigned seed;
	atomic_int accepted;  /* its spawn returned 0 (set by the spawner) */
	atomic_int started, done, status;
};

struct round {
	co_sched s;
	co_mutex m;
	co_event ev;
	struct task t[TASKS];
	atomic_int go;
	atomic_long cancels_ok, cancels_late;
	int bad_cancel;
};

static int task_fn(co_frame *f)
{
	struct task *t = (struct task *)f;
	struct round *rd = t->rd;
	CO_BEGIN(f);
	atomic_store(&t->started, 1);
	/* an if chain: suspension points inside a switch need the
	 * computed-goto backend */
	if (t->kind == K_YIELD) {
		for (t->k = 0; t->k < 3; t->k++)
			CO_YIELD(f);
	} else if (t->kind == K_SLEEP) {
		CO_AWAIT(f, co_sleep(&t->io, (rand_r(&t->seed) % 50) * CO_US));
	} else if (t->kind == K_MUTEX) {
		CO_AWAIT(f, co_mutex_lock(&t->w, &rd->m));
		if (co_result(f) == 0) {
			CO_YIELD(f); /* hold it across a suspension */
			co_mutex_unlock(&rd->m);
		}
	} else if (t->kind == K_EVENT) {
		if (rand_r(&t->seed) % 2)
			CO_AWAIT(f, co_wait_for(co_event_wait(&t->w, &rd->ev), 5 * CO_S));
		else
			CO_AWAIT(f, co_event_wait(&t->w, &rd->ev));
	} else if (t->kind == K_TRANSFER) {
		CO_AWAIT(f, co_transfer_to(&t->tr, &rd->s.ctx[rand_r(&t->seed) % rd->s.n]));
	} else {
		/* a sibling on any context: the same thread or another */
		struct task *o = &rd->t[rand_r(&t->seed) % TASKS];
		if (atomic_load(&o->accepted)) {
			int r = co_cancel(&o->co);
			if (r == 0)
				atomic_fetch_add(&rd->cancels_ok, 1);
			else if (r == -EALREADY)
				atomic_fetch_add(&rd->cancels_late, 1);
			else
				rd->bad_cancel = r;
		}
	}
	CO_RETURN(f, co_cancelled(f) ? -ECANCELED : 0);
	CO_END(f);
}

static void task_done(co_frame *f)
{
	struct task *t = (struct task *)f;
	atomic_store(&t->status, co_status(f));
	atomic_fetch_add(&t->done, 1);
}

struct spawner {
	struct round *rd;
	int first;
	unsigned seed;
};

static void *spawner_main(void *arg)
{
	struct spawner *sp = arg;
	while (!atomic_load(&sp->rd->go))
		sched_yield();
	for (int i = sp->first; i < sp->first + PER_SPAWNER; i++) {
		struct task *t = &sp->rd->t[i];
		if (rand_r(&sp->seed) % 8 == 0)
			sched_yield();
		t->spawn_ret = co_sched_spawn(&sp->rd->s, &t->co);
		if (t->spawn_ret == 0)
			atomic_store(&t->accepted, 1);
	}
	return NULL;
}

/* Cancels random accepted tasks from a thread that runs no engine, then
 * sets the event (in some rounds it leaves it to the cancel stop). */
struct outsider {
	struct round *rd;
	unsigned seed;
	int set_event;
};

static void *outsider_main(void *arg)
{
	struct outsider *o = arg;
	struct round *rd = o->rd;
	while (!atomic_load(&rd->go))
		sched_yield();
	for (int n = 0; n < TASKS / 4; n++) {
		struct task *t = &rd->t[rand_r(&o->seed) % TASKS];
		if (atomic_load(&t->accepted)) {
			int r = co_cancel(&t->co);
			if (r == 0)
				atomic_fetch_add(&rd->cancels_ok, 1);
			else if (r == -EALREADY)
				atomic_fetch_add(&rd->cancels_late, 1);
			else
				rd->bad_cancel = r;
		}
		if (rand_r(&o->seed) % 4 == 0)
			sched_yield();
	}
	if (o->set_event)
		co_event_set(&rd->ev);
	return NULL;
}

enum stop { S_NONE, S_DRAIN, S_CANCEL, S_TIMED, S_STOPS };

struct stopper {
	struct round *rd;
	enum stop how;
	unsigned seed;
	int ret;
};

static void *stopper_main(void *arg)
{
	struct stopper *st = arg;
	while (!atomic_load(&st->rd->go))
		sched_yield();
	for (unsigned spin = rand_r(&st->seed) % 200; spin; spin--)
		sched_yield();
	if (st->how == S_DRAIN)
		st->ret = co_sched_stop(&st->rd->s, CO_STOP_DRAIN);
	else if (st->how == S_CANCEL)
		st->ret = co_sched_stop(&st->rd->s, CO_STOP_CANCEL);
	else if (st->how == S_TIMED)
		st->ret = co_sched_stop_timed(&st->rd->s, 2 * CO_MS);
	return NULL;
}

struct totals {
	long rounds, accepted, refused, cancelled, finished, cancels_ok, cancels_late;
};

/* co_sched_run must return 0; if not, say what is left before failing. */
static void run_or_explain(struct round *rd, unsigned seed)
{
	int ret = co_sched_run(&rd->s);

	if (ret == 0)
		return;
	print_message("round %u: co_sched_run %d, %lu tasks, state %d\n", seed, ret,
		      co_sched_tasks(&rd->s), co_sched_state(&rd->s));
	for (unsigned i = 0; i < rd->s.n; i++)
		print_message("  context %u: engine state %d, live %u, parked %u, inflight %u\n", i,
			      co_engine_state(&rd->s.ctx[i].engine),
			      atomic_load(&rd->s.ctx[i].engine.live) & 0x7fffffffu,
			      atomic_load(&rd->s.ctx[i].engine.parked),
			      rd->s.ctx[i].engine.inflight);
	for (int i = 0; i < TASKS; i++) {
		struct task *t = &rd->t[i];
		if (t->spawn_ret == 0 && atomic_load(&t->done) == 0)
			print_message("  task %d: kind %d, started %d, state %#x, cancel %#x\n", i,
				      t->kind, atomic_load(&t->started), t->co.state, t->co.cancel);
	}
	fail_msg("round %u: co_sched_run returned %d", seed, ret);
}

static void one_round(struct round *rd, unsigned seed, struct totals *tot)
{
	co_sched_opts o = { .contexts = 2 + seed % 2, .steal = (int)(seed / 2 % 2),
			    .engine = { .cancel_grace_ns = 50 * CO_MS } };
	struct spawner sp[SPAWNERS];
	struct outsider out = { .rd = rd, .seed = seed * 7 + 1 };
	struct stopper st = { .rd = rd, .how = (enum stop)(seed / 4 % S_STOPS), .seed = seed * 13 };
	pthread_t th[SPAWNERS + 2];

	memset(rd, 0, sizeof *rd);
	/* the event is set unless a cancel stop will end its waits */
	out.set_event = st.how != S_CANCEL || seed % 3 != 0;
	assert_int_equal(co_sched_init(&rd->s, &o), 0);
	assert_int_equal(co_mutex_init(&rd->m), 0);
	assert_int_equal(co_event_init(&rd->ev, 0), 0);
	for (int i = 0; i < TASKS; i++) {
		struct task *t = &rd->t[i];
		t->rd = rd;
		t->i = i;
		t->seed = seed * 31 + (unsigned)i;
		t->kind = (enum kind)(rand_r(&t->seed) % K_KINDS);
		t->spawn_ret = 1;
		co_init(&t->co, task_fn);
		t->co.on_done = task_done;
	}
	for (int k = 0; k < SPAWNERS; k++) {
		sp[k] = (struct spawner){ .rd = rd, .first = k * PER_SPAWNER, .seed = seed + (unsigned)k };
		assert_int_equal(pthread_create(&th[k], NULL, spawner_main, &sp[k]), 0);
	}
	assert_int_equal(pthread_create(&th[SPAWNERS], NULL, outsider_main, &out), 0);
	assert_int_equal(pthread_create(&th[SPAWNERS + 1], NULL, stopper_main, &st), 0);
	atomic_store(&rd->go, 1);
	for (int k = 0; k < SPAWNERS + 2; k++)
		pthread_join(th[k], NULL);
	assert_int_equal(st.ret, 0);
	if (st.how != S_NONE) { /* after a stop returned: refused, never run */
		struct task late;
		memset(&late, 0, sizeof late);
		co_init(&late.co, task_fn);
		assert_int_equal(co_sched_spawn(&rd->s, &late.co), -ESHUTDOWN);
		assert_int_equal(atomic_load(&late.started), 0);
		tot->refused++;
	}
	run_or_explain(rd, seed);
	if (seed % 5 == 0) /* a second run: nothing left to do */
		assert_int_equal(co_sched_run(&rd->s), 0);
	if (st.how == S_NONE && seed % 2) { /* a late stop: destroy waits for it */
		assert_int_equal(co_sched_stop(&rd->s, CO_STOP_CANCEL), 0);
		while (co_sched_destroy(&rd->s) == -EBUSY)
			assert_int_equal(co_sched_run(&rd->s), 0);
	} else {
		assert_int_equal(co_sched_destroy(&rd->s), 0);
	}
	if (rd->bad_cancel)
		fail_msg("round %u: co_cancel answered %d", seed, rd->bad_cancel);
	for (int i = 0; i < TASKS; i++) {
		struct task *t = &rd->t[i];
		if (t->spawn_ret == 0) {
			int status = atomic_load(&t->status);
			if (atomic_load(&t->done) != 1 || (status != 0 && status != -ECANCELED))
				fail_msg("round %u task %d (kind %d): on_done %d times, status %d", seed,
					 i, t->kind, atomic_load(&t->done), status);
			tot->accepted++;
			tot->finished += status == 0;
			tot->cancelled += status == -ECANCELED;
		} else {
			if (t->spawn_ret != -ESHUTDOWN || atomic_load(&t->started) ||
			    atomic_load(&t->done))
				fail_msg("round %u task %d: refused with %d, started %d, done %d", seed,
					 i, t->spawn_ret, atomic_load(&t->started),
					 atomic_load(&t->done));
			tot->refused++;
		}
	}
	tot->cancels_ok += atomic_load(&rd->cancels_ok);
	tot->cancels_late += atomic_load(&rd->cancels_late);
	tot->rounds++;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_ledger(void **state)
{
	static struct round rd;
	struct totals tot = { 0 };
	const char *env = getenv("CORING_LEDGER_SECONDS");
	double seconds = env ? atof(env) : 2.0, end = now_s() + seconds;
	unsigned seed = 1;
	(void)state;
	/* at least one round of every stop kind, then as many as time allows */
	while (seed <= 4 * S_STOPS || now_s() < end)
		one_round(&rd, seed++, &tot);
	print_message("      %ld rounds: %ld accepted (%ld finished, %ld cancelled), %ld refused; "
		      "cancels: %ld accepted, %ld too late\n",
		      tot.rounds, tot.accepted, tot.finished, tot.cancelled, tot.refused,
		      tot.cancels_ok, tot.cancels_late);
	/* rounds 9 (a cancel stop, the event never set) and the late spawns
	 * make these hold whatever the timing */
	assert_true(tot.refused > 0);
	assert_true(tot.cancelled > 0);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_ledger),
};

CO_TEST_MAIN(tests, 1)
