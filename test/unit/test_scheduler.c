/* SPDX-License-Identifier: MIT */
/* Tests of contexts and the scheduler (lib/context/context.c, lib/scheduler/scheduler.c). */
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
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <coring/scheduler.h>
#include <coring/sync.h>
#include <coring/io.h>
#include <coring/view.h>
#include <coring/timeout.h>
#include "common/fault.h"
#include "helpers.h"

/* ---- 1,000,000 tiny coroutines over 2 contexts ---------------------------- */

#define MILLION 1000000

struct tiny {
	co_frame co;
	atomic_uchar *ran;
	unsigned id;
};

static int tiny_fn(co_frame *f)
{
	struct tiny *t = (struct tiny *)f;
	CO_BEGIN(f);
	atomic_fetch_add_explicit(&t->ran[t->id], 1, memory_order_relaxed);
	CO_END(f);
}

static void test_million_tasks(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2, .steal = 1 };
	struct tiny *t = calloc(MILLION, sizeof *t);
	atomic_uchar *ran = calloc(MILLION, 1);
	(void)state;
	assert_non_null(t);
	assert_non_null(ran);
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (unsigned i = 0; i < MILLION; i++) {
		t[i].ran = ran;
		t[i].id = i;
		co_init(&t[i].co, tiny_fn);
		assert_int_equal(co_sched_spawn(&s, &t[i].co), 0);
	}
	/* the contexts run them as they come: some may have finished */
	assert_true(co_sched_tasks(&s) <= MILLION);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_tasks(&s), 0);
	for (unsigned i = 0; i < MILLION; i++)
		if (atomic_load(&ran[i]) != 1)
			fail_msg("task %u ran %d times", i, atomic_load(&ran[i]));
	assert_int_equal(co_sched_destroy(&s), 0);
	free(t);
	free(ran);
}

/* ---- submits racing with the end of a run -------------------------------- */

/* Under a sanitizer, which makes each thread start far slower, 300 rounds
 * (its job there is the accesses, which every round makes alike). */
#define RACE_ROUNDS (CO_TEST_SANITIZED ? 300 : 1500)
#define RACERS 3
#define PER_RACER 4

struct racer_task {
	co_frame co;
	atomic_int ran;
};

static int racer_task_fn(co_frame *f)
{
	struct racer_task *t = (struct racer_task *)f;
	CO_BEGIN(f);
	atomic_fetch_add(&t->ran, 1);
	CO_END(f);
}

struct racer {
	co_sched *s;
	struct racer_task tasks[PER_RACER];
	int ret[PER_RACER];
	unsigned seed;
	atomic_int *go;
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	while (!atomic_load(r->go))
		;
	for (int i = 0; i < PER_RACER; i++) {
		for (unsigned spin = rand_r(&r->seed) % 2000; spin; spin--)
			atomic_signal_fence(memory_order_seq_cst);
		r->ret[i] = co_sched_spawn(r->s, &r->tasks[i].co);
	}
	return NULL;
}

static void test_spawns_race_end_of_run(void **state)
{
	/* Each round: one quick task, and 3 threads spawning 4 tasks each
	 * while the run ends. The contexts outlive every run, so every spawn
	 * is accepted and runs exactly once (in this run or the next). The
	 * same scheduler serves every round. */
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	static struct racer r[RACERS];
	struct racer_task first;
	long accepted = 0;
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int round = 0; round < RACE_ROUNDS; round++) {
		pthread_t th[RACERS];
		atomic_int go = 0;
		memset(&first, 0, sizeof first);
		co_init(&first.co, racer_task_fn);
		assert_int_equal(co_sched_spawn(&s, &first.co), 0);
		for (int k = 0; k < RACERS; k++) {
			memset(&r[k], 0, sizeof r[k]);
			r[k].s = &s;
			r[k].go = &go;
			r[k].seed = (unsigned)(round * RACERS + k);
			for (int i = 0; i < PER_RACER; i++)
				co_init(&r[k].tasks[i].co, racer_task_fn);
			assert_int_equal(pthread_create(&th[k], NULL, racer_main, &r[k]), 0);
		}
		atomic_store(&go, 1);
		assert_int_equal(co_sched_run(&s), 0);
		for (int k = 0; k < RACERS; k++)
			pthread_join(th[k], NULL);
		/* whatever was accepted after the run ended runs now */
		assert_int_equal(co_sched_run(&s), 0);
		assert_int_equal(atomic_load(&first.ran), 1);
		for (int k = 0; k < RACERS; k++)
			for (int i = 0; i < PER_RACER; i++) {
				int ran = atomic_load(&r[k].tasks[i].ran);
				assert_int_equal(r[k].ret[i], 0);
				assert_int_equal(ran, 1);
				accepted++;
			}
	}
	assert_int_equal(accepted, (long)RACE_ROUNDS * RACERS * PER_RACER);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- transfer ---------------------------------------------------------------- */

#define HOPPERS 200

struct hopper {
	co_frame co;
	co_transfer tr;
	co_context *to;
	int id, ok;
	int *arrivals;
	int *narrivals;
};

static int hopper_fn(co_frame *f)
{
	struct hopper *h = (struct hopper *)f;
	CO_BEGIN(f);
	if (co_context_current() == h->to)
		CO_RETURN(f, -1); /* must start on the other context */
	CO_AWAIT(f, co_transfer_to(&h->tr, h->to));
	if (co_result(f) != 0 || co_context_current() != h->to)
		CO_RETURN(f, -2);
	/* on the target's thread: the arrival log needs no lock */
	h->arrivals[(*h->narrivals)++] = h->id;
	CO_AWAIT(f, co_transfer_to(&h->tr, h->to)); /* to itself: a yield */
	if (co_result(f) != 0 || co_context_current() != h->to)
		CO_RETURN(f, -3);
	h->ok = 1;
	CO_END(f);
}

static void test_transfer(void **state)
{
	/* 200 tasks all start on context 0 (FIFO) and hop to context 1: each
	 * lands there, on that thread, in the order it left */
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	static struct hopper h[HOPPERS];
	int arrivals[HOPPERS], n = 0;
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < HOPPERS; i++) {
		h[i] = (struct hopper){ .to = &s.ctx[1], .id = i, .arrivals = arrivals, .narrivals = &n };
		co_init(&h[i].co, hopper_fn);
		assert_int_equal(co_sched_spawn_to(&s, 0, &h[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(n, HOPPERS);
	for (int i = 0; i < HOPPERS; i++) {
		assert_int_equal(co_status(&h[i].co), 0);
		assert_int_equal(h[i].ok, 1);
		assert_int_equal(arrivals[i], i);
	}
	assert_int_equal(co_sched_destroy(&s), 0);
}

struct stranger {
	co_frame co;
	co_transfer tr;
	co_context *to;
};

static int stranger_fn(co_frame *f)
{
	struct stranger *st = (struct stranger *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_transfer_to(&st->tr, st->to));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void test_transfer_errors(void **state)
{
	/* to a context that stopped: -ESHUTDOWN, and the task stays alive */
	co_context a, b;
	struct stranger st;
	(void)state;
	assert_int_equal(co_context_init(&a, NULL), 0);
	assert_int_equal(co_context_init(&b, NULL), 0);
	assert_int_equal(co_context_stop(&b, 0), 0);
	co_init(&st.co, stranger_fn);
	st.to = &b;
	assert_int_equal(co_context_spawn(&a, &st.co), 0);
	assert_int_equal(co_context_start(&a, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_context_start(&a, CO_RUN_UNTIL_IDLE), -EALREADY);
	assert_int_equal(co_context_join(&a), 0);
	assert_int_equal(co_status(&st.co), -ESHUTDOWN);
	/* outside any engine */
	co_init(&st.co, stranger_fn);
	while (co_resume(&st.co) != CO_DONE)
		;
	assert_int_equal(co_status(&st.co), -ENXIO);
	assert_int_equal(co_context_destroy(&a), 0);
	assert_int_equal(co_context_destroy(&b), 0);
	assert_int_equal(co_context_join(&b), -EINVAL); /* never started */
}

/*
 * scheduler.md, Transfer: a frame asked to cancel is refused (-ECANCELED)
 * and continues where it was; a transfer to the current context waits for
 * the next turn as co_next_turn does, whose value is -ECANCELED when the
 * frame is cancelled (co.h: a suspend ends the await with -ECANCELED when
 * co_await_cancelled). A task on context 1 of a worker group asks its own
 * cancel, then transfers to its own context (-ECANCELED) and to context 2
 * (-ECANCELED, it stays on 1). Under co_shield the request is held back
 * for the wait on its own context (0), not for the move: a frame asked to
 * cancel never changes engines (-ECANCELED, it stays). On the manual
 * context 0, a task transfers to it (a wait for the next tick) and the
 * test, between two ticks, asks its cancel: the next tick resumes it with
 * -ECANCELED. Before, both transfers to the current context gave 0.
 */
struct asked {
	co_frame co;
	co_transfer tr;
	co_context *other;
	int shield, self_res, other_res, where;
	atomic_int yielded;
};

static int asked_fn(co_frame *f)
{
	struct asked *a = (struct asked *)f;
	CO_BEGIN(f);
	if (a->other == NULL) { /* on the manual context: cancelled from outside */
		atomic_store(&a->yielded, 1);
		CO_AWAIT(f, co_transfer_to(&a->tr, co_context_current()));
		a->self_res = co_result(f);
		CO_RETURN(f, 0);
	}
	if (a->shield)
		co_shield(f);
	co_cancel(f);
	CO_AWAIT(f, co_transfer_to(&a->tr, co_context_current()));
	a->self_res = co_result(f);
	CO_AWAIT(f, co_transfer_to(&a->tr, a->other));
	a->other_res = co_result(f);
	a->where = (int)co_context_current()->index;
	CO_END(f);
}

static void test_transfer_asked_to_cancel(void **state)
{
	static const co_sched_group g[2] = { { .manual = 1 }, { .contexts = 2 } };
	co_sched s;
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	struct asked a[2], m;
	(void)state;
	alarm(60);
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < 2; i++) {
		memset(&a[i], 0, sizeof a[i]);
		a[i].other = &s.ctx[2];
		a[i].shield = i;
		a[i].self_res = a[i].other_res = 1;
		co_init(&a[i].co, asked_fn);
		assert_int_equal(co_sched_spawn_to(&s, 1, &a[i].co), 0);
	}
	memset(&m, 0, sizeof m);
	m.self_res = 1;
	co_init(&m.co, asked_fn);
	assert_int_equal(co_sched_spawn_to(&s, 0, &m.co), 0);
	assert_true(co_context_tick(&s.ctx[0]) >= 0); /* m runs, waits for the next tick */
	assert_int_equal(atomic_load(&m.yielded), 1);
	assert_false(co_done(&m.co));
	assert_int_equal(co_cancel(&m.co), 0);
	assert_true(co_context_tick(&s.ctx[0]) >= 0);
	assert_true(co_done(&m.co));
	assert_int_equal(m.self_res, -ECANCELED);
	while (co_sched_poll(&s) == -EAGAIN) /* this thread ticks: no co_sched_run */
		usleep(100);
	assert_int_equal(a[0].self_res, -ECANCELED);
	assert_int_equal(a[0].other_res, -ECANCELED);
	assert_int_equal(a[0].where, 1);
	assert_int_equal(a[1].self_res, 0); /* shielded */
	assert_int_equal(a[1].other_res, -ECANCELED);
	assert_int_equal(a[1].where, 1);
	assert_int_equal(co_sched_destroy(&s), 0);
	alarm(0);
}

/* context.h, co_transfer_to: "-EXDEV (ctx belongs to another scheduler
 * than the frame's context, or one of the two is a scheduler's and the
 * other is not) ... the frame stays where it was"; "-EINVAL (NULL ...)".
 * Each case from a frame that then checks it is still on its context. */
struct exdev {
	co_frame co;
	co_transfer tr;
	co_context *to;
	co_context *here; /* where it must still be: NULL, a lone engine */
	co_engine *engine;
	int res, stayed;
};

static int exdev_fn(co_frame *f)
{
	struct exdev *x = (struct exdev *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_transfer_to(&x->tr, x->to));
	x->res = co_result(f);
	x->stayed = co_context_current() == x->here && co_engine_current() == x->engine;
	CO_END(f);
}

static void test_transfer_across_schedulers(void **state)
{
	co_sched s, s2;
	co_sched_opts o = { .contexts = 1 };
	co_context lone, other;
	co_engine e;
	struct exdev x[5];
	(void)state;
	memset(x, 0, sizeof x);
	assert_int_equal(co_sched_init(&s, &o), 0);
	assert_int_equal(co_sched_init(&s2, &o), 0);
	assert_int_equal(co_context_init(&lone, NULL), 0);
	assert_int_equal(co_context_init(&other, NULL), 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	/* a lone context's frame to a scheduler's context */
	x[0].to = &s.ctx[0];
	x[0].here = &lone;
	x[0].engine = &lone.engine;
	/* a scheduler's frame to a lone context */
	x[1].to = &other;
	x[1].here = &s.ctx[0];
	x[1].engine = &s.ctx[0].engine;
	/* a scheduler's frame to another scheduler's context */
	x[2].to = &s2.ctx[0];
	x[2].here = &s.ctx[0];
	x[2].engine = &s.ctx[0].engine;
	/* NULL */
	x[3].to = NULL;
	x[3].here = &lone;
	x[3].engine = &lone.engine;
	/* a lone engine's frame to a scheduler's context */
	x[4].to = &s.ctx[0];
	x[4].here = NULL;
	x[4].engine = &e;
	for (int i = 0; i < 5; i++)
		co_init(&x[i].co, exdev_fn);
	assert_int_equal(co_context_spawn(&lone, &x[0].co), 0);
	assert_int_equal(co_context_spawn(&lone, &x[3].co), 0);
	assert_int_equal(co_sched_spawn_to(&s, 0, &x[1].co), 0);
	assert_int_equal(co_sched_spawn_to(&s, 0, &x[2].co), 0);
	assert_int_equal(co_engine_spawn(&e, &x[4].co), 0);
	assert_int_equal(co_context_start(&lone, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_context_join(&lone), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	for (int i = 0; i < 5; i++) {
		assert_true(co_done(&x[i].co));
		assert_int_equal(x[i].res, i == 3 ? -EINVAL : -EXDEV);
		assert_int_equal(x[i].stayed, 1);
	}
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_context_destroy(&lone), 0);
	assert_int_equal(co_context_destroy(&other), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_sched_destroy(&s2), 0);
}

/* context.h's errors, each row: co_context_init -EINVAL (NULL);
 * co_context_start -EINVAL (NULL, bad mode, not set up); co_context_stop
 * -EINVAL (NULL, bad mode); co_context_join -EDEADLK on its own thread
 * ("as pthread_join, nothing changes and the context runs on") and
 * -EINVAL (joined already); co_context_destroy -EBUSY while its thread
 * runs, -EINVAL (NULL, destroyed); co_context_state -EINVAL for NULL.
 * (Untested rows; they hold.) */
struct self_join {
	co_frame co;
	co_context *c;
	int res, after;
};

static int self_join_fn(co_frame *f)
{
	struct self_join *j = (struct self_join *)f;
	CO_BEGIN(f);
	j->res = co_context_join(j->c);
	CO_YIELD(f); /* the context runs on */
	j->after = co_context_state(j->c);
	CO_END(f);
}

static void test_context_misuse(void **state)
{
	co_context c, zero;
	struct self_join j = { 0 };
	(void)state;
	memset(&zero, 0, sizeof zero);
	assert_int_equal(co_context_init(NULL, NULL), -EINVAL);
	assert_int_equal(co_context_state(NULL), -EINVAL);
	assert_int_equal(co_context_start(NULL, CO_RUN_UNTIL_IDLE), -EINVAL);
	assert_int_equal(co_context_start(&zero, CO_RUN_UNTIL_IDLE), -EINVAL); /* not set up */
	assert_int_equal(co_context_init(&c, NULL), 0);
	assert_int_equal(co_context_start(&c, 7), -EINVAL);
	assert_int_equal(co_context_state(&c), CO_CONTEXT_NEW);
	assert_int_equal(co_context_stop(NULL, CO_STOP_DRAIN), -EINVAL);
	assert_int_equal(co_context_stop(&c, 7), -EINVAL);
	assert_int_equal(co_context_state(&c), CO_CONTEXT_NEW);
	j.c = &c;
	co_init(&j.co, self_join_fn);
	assert_int_equal(co_context_spawn(&c, &j.co), 0);
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_STOP), 0);
	assert_int_equal(co_context_destroy(&c), -EBUSY); /* its thread runs */
	assert_int_equal(co_context_stop(&c, CO_STOP_DRAIN), 0);
	assert_int_equal(co_context_join(&c), 0);
	assert_int_equal(j.res, -EDEADLK);
	assert_int_equal(j.after, CO_CONTEXT_RUNNING);
	assert_int_equal(co_status(&j.co), 0);
	assert_int_equal(co_context_join(&c), -EINVAL); /* joined already */
	assert_int_equal(co_context_state(&c), CO_CONTEXT_JOINED);
	assert_int_equal(co_context_destroy(&c), 0);
	assert_int_equal(co_context_destroy(&c), -EINVAL); /* destroyed */
	assert_int_equal(co_context_destroy(NULL), -EINVAL);
	assert_int_equal(co_context_state(&c), CO_CONTEXT_DEAD);
}

/*
 * context.h, co_context_join: "-EINVAL (... another thread's join has it:
 * one join at a time)". A thread joins a running context (it blocks there
 * until the context is stopped); meanwhile a second join answers -EINVAL,
 * nothing changed (without the claim it would join the same thread twice:
 * it blocks, and the alarm fails the case). Once stopped, the first join
 * returns the engine's result and the destroy goes through.
 */
static void *join_thread(void *arg)
{
	return (void *)(intptr_t)co_context_join(arg);
}

static void test_one_join_at_a_time(void **state)
{
	co_context c;
	pthread_t t;
	void *rc;
	(void)state;
	alarm(60);
	assert_int_equal(co_context_init(&c, NULL), 0);
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_STOP), 0);
	assert_int_equal(pthread_create(&t, NULL, join_thread, &c), 0);
	WAIT_UNTIL(atomic_load(&c.joining)); /* the first join has it */
	assert_int_equal(co_context_join(&c), -EINVAL);
	assert_int_equal(co_context_destroy(&c), -EBUSY);
	assert_int_equal(co_context_state(&c), CO_CONTEXT_RUNNING);
	assert_int_equal(co_context_stop(&c, CO_STOP_DRAIN), 0);
	assert_int_equal(pthread_join(t, &rc), 0);
	assert_int_equal((int)(intptr_t)rc, 0);
	assert_int_equal(co_context_state(&c), CO_CONTEXT_JOINED);
	assert_int_equal(co_context_join(&c), -EINVAL); /* joined already */
	assert_int_equal(co_context_destroy(&c), 0);
	alarm(0);
}

/* A start that comes while a destroy of the never-started context is
 * under way (held at the point before the destroy takes the engine: the
 * hook starts the context from there, and every other round waits there
 * until the new thread has ended). The destroy either wins the engine
 * (0) or finds the new thread running it (-EBUSY). With 0 the thread that
 * the start made is joined before the destroy returns: it has passed its
 * end (counted at the point after ENDED), the context reads DEAD and is
 * freed at once (ASan and TSan would see a later touch); with -EBUSY the
 * thread ends when idle and a second destroy succeeds. Without the join,
 * the destroy returned 0 with the thread still to come, which then wrote
 * ENDED into the freed context and was never joined. */
static co_context *racing_start_of;
static int racing_start_rc;
static atomic_int racing_ends;

static int racing_wait_end; /* the hook returns once the started thread ended */

static void start_during_destroy(void *arg)
{
	(void)arg;
	racing_start_rc = co_context_start(racing_start_of, CO_RUN_UNTIL_IDLE);
	while (racing_wait_end && atomic_load(&racing_ends) == 0)
		sched_yield();
}

static void count_end(void *arg)
{
	(void)arg;
	atomic_fetch_add(&racing_ends, 1);
}

static void test_destroy_racing_start(void **state)
{
	int won = 0, lost = 0;
	(void)state;
	alarm(60);
	co__fault_on_point(CO__POINT_CONTEXT_DESTROY, start_during_destroy, NULL);
	co__fault_on_point(CO__POINT_CONTEXT_ENDING, count_end, NULL);
	for (int round = 0; round < 50; round++) {
		co_context *c = malloc(sizeof *c);
		int r;

		assert_non_null(c);
		assert_int_equal(co_context_init(c, NULL), 0);
		racing_start_of = c;
		racing_start_rc = 1;
		racing_wait_end = round % 2;
		atomic_store(&racing_ends, 0);
		r = co_context_destroy(c);
		assert_int_equal(racing_start_rc, 0);
		if (r == 0) {
			won++;
			assert_int_equal(atomic_load(&racing_ends), 1); /* joined */
			assert_int_equal(co_context_state(c), CO_CONTEXT_DEAD);
			assert_int_equal(co_context_start(c, CO_RUN_UNTIL_IDLE), -EINVAL);
		} else {
			lost++;
			assert_int_equal(r, -EBUSY);
			co__fault_on_point(CO__POINT_CONTEXT_DESTROY, NULL, NULL);
			assert_int_equal(co_context_join(c), 0);
			assert_int_equal(co_context_destroy(c), 0);
			co__fault_on_point(CO__POINT_CONTEXT_DESTROY, start_during_destroy, NULL);
		}
		memset(c, 0x5a, sizeof *c);
		free(c);
	}
	co__fault_on_point(CO__POINT_CONTEXT_DESTROY, NULL, NULL);
	co__fault_on_point(CO__POINT_CONTEXT_ENDING, NULL, NULL);
	print_message("destroy won the engine %d times, the started thread %d\n", won, lost);
	alarm(0);
}

/*
 * context.h: co_context_join waits for the thread; a co_context_start that
 * races a destroy of a never-started context makes a thread that the
 * destroy joins before it returns 0. Here the join, and the destroy, come
 * while the start is held after it claimed the context and before it
 * created the thread (CO__POINT_CONTEXT_STARTING): there is no thread to
 * join yet. The join waits for the start, then joins the thread it made
 * (the engine's result, 0). The destroy (held at CO__POINT_CONTEXT_DESTROY
 * until another thread's start reached the point) destroys the engine,
 * then waits for the start too: it joins the thread, which finds the
 * engine destroyed and ends at once, or, when the thread could not be
 * created (-EAGAIN), marks the context DEAD. The hold lasts until the call
 * returned, or 100 ms: a call that returns during the hold did so with no
 * thread made (the pass does not depend on the time; alarm: a hang guard).
 */
enum { HELD_JOIN, HELD_DESTROY, HELD_DESTROY_FAILED_START, HELD_STOP };

static co_context *held_ctx;
static int held_mode;
static atomic_int held_at_point, held_call_done, held_early;
static int held_start_rc, held_join_rc;
static pthread_t held_thread;

static void *held_join(void *arg)
{
	(void)arg;
	held_join_rc = co_context_join(held_ctx);
	atomic_store(&held_call_done, 1);
	return NULL;
}

static void *held_stop(void *arg)
{
	(void)arg;
	held_join_rc = co_context_stop(held_ctx, CO_STOP_CANCEL);
	atomic_store(&held_call_done, 1);
	return NULL;
}

/* On the starting thread, before its thread is created. */
static void hold_start(void *arg)
{
	(void)arg;
	if (held_mode == HELD_JOIN || held_mode == HELD_STOP)
		assert_int_equal(pthread_create(&held_thread, NULL,
						held_mode == HELD_JOIN ? held_join : held_stop, NULL), 0);
	atomic_store(&held_at_point, 1);
	for (int i = 0; i < 100 && !atomic_load(&held_call_done); i++)
		usleep(1000);
	atomic_store(&held_early, atomic_load(&held_call_done));
}

static void *held_start(void *arg)
{
	(void)arg;
	held_start_rc = co_context_start(held_ctx, CO_RUN_UNTIL_IDLE);
	return NULL;
}

/* Inside the destroy, the context still NEW: another thread starts it. */
static void start_elsewhere(void *arg)
{
	(void)arg;
	assert_int_equal(pthread_create(&held_thread, NULL, held_start, NULL), 0);
	WAIT_UNTIL(atomic_load(&held_at_point));
}

static void test_join_and_destroy_during_start(void **state)
{
	(void)state;
	alarm(60);
	co__fault_on_point(CO__POINT_CONTEXT_STARTING, hold_start, NULL);
	for (held_mode = HELD_JOIN; held_mode <= HELD_DESTROY_FAILED_START; held_mode++) {
		co_context c;
		int rc;

		assert_int_equal(co_context_init(&c, NULL), 0);
		held_ctx = &c;
		held_start_rc = held_join_rc = 1;
		atomic_store(&held_at_point, 0);
		atomic_store(&held_call_done, 0);
		atomic_store(&held_early, 0);
		if (held_mode == HELD_JOIN) {
			assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_IDLE), 0);
			assert_int_equal(pthread_join(held_thread, NULL), 0);
			assert_int_equal(held_join_rc, 0);
			assert_int_equal(co_context_state(&c), CO_CONTEXT_JOINED);
			assert_int_equal(co_context_destroy(&c), 0);
		} else {
			if (held_mode == HELD_DESTROY_FAILED_START)
				co__fault_arm(CO__FAULT_THREAD, 1, EAGAIN);
			co__fault_on_point(CO__POINT_CONTEXT_DESTROY, start_elsewhere, NULL);
			rc = co_context_destroy(&c);
			atomic_store(&held_call_done, 1);
			co__fault_on_point(CO__POINT_CONTEXT_DESTROY, NULL, NULL);
			assert_int_equal(pthread_join(held_thread, NULL), 0);
			assert_int_equal(rc, 0);
			assert_int_equal(held_start_rc,
					 held_mode == HELD_DESTROY ? 0 : -EAGAIN);
			assert_int_equal(co_context_state(&c), CO_CONTEXT_DEAD);
		}
		if (atomic_load(&held_early))
			fail_msg("mode %d: the call returned before the start made its thread", held_mode);
	}
	co__fault_on_point(CO__POINT_CONTEXT_STARTING, NULL, NULL);
	alarm(0);
}

/*
 * design.md, Context: a failed start leaves the frames queued, "start
 * again, or a cancel stop finishes them with -ECANCELED on the calling
 * thread". Here the cancel stop comes (from another thread) while the
 * start is held before it creates the thread (CO__POINT_CONTEXT_STARTING),
 * and the creation then fails (-EAGAIN): the stop waits for the start,
 * finds the context NEW and finishes the queued frame (-ECANCELED, never
 * run); the destroy then goes through. Before, the stop saw the start
 * under way, left the frame to a thread that never came, and the context
 * kept it (destroy -EBUSY) although it had been cancel-stopped.
 */
struct never_runs {
	co_frame co;
	int ran;
};

static int never_runs_fn(co_frame *f)
{
	struct never_runs *n = (struct never_runs *)f;
	CO_BEGIN(f);
	n->ran = 1;
	CO_END(f);
}

static void test_cancel_stop_during_failing_start(void **state)
{
	co_context c;
	struct never_runs n = { .ran = 0 };
	(void)state;
	alarm(60);
	assert_int_equal(co_context_init(&c, NULL), 0);
	co_init(&n.co, never_runs_fn);
	assert_int_equal(co_context_spawn(&c, &n.co), 0);
	held_ctx = &c;
	held_mode = HELD_STOP;
	held_join_rc = 1;
	atomic_store(&held_at_point, 0);
	atomic_store(&held_call_done, 0);
	atomic_store(&held_early, 0);
	co__fault_on_point(CO__POINT_CONTEXT_STARTING, hold_start, NULL);
	co__fault_arm(CO__FAULT_THREAD, 1, EAGAIN);
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_IDLE), -EAGAIN);
	co__fault_on_point(CO__POINT_CONTEXT_STARTING, NULL, NULL);
	assert_int_equal(pthread_join(held_thread, NULL), 0);
	assert_int_equal(held_join_rc, 0);
	if (atomic_load(&held_early))
		fail_msg("the stop returned before the start ended");
	assert_int_equal(co_context_state(&c), CO_CONTEXT_NEW);
	assert_true(co_done(&n.co));
	assert_int_equal(co_status(&n.co), -ECANCELED);
	assert_int_equal(n.ran, 0);
	assert_int_equal(co_context_destroy(&c), 0);
	alarm(0);
}

/* Moves to a context that refuses it, then waits on an event. */
struct refused {
	co_frame co;
	co_transfer tr;
	co_waiter w;
	co_event *ev;
	co_context *to;
	int moved, waited;
	atomic_int after;
};

static int refused_fn(co_frame *f)
{
	struct refused *r = (struct refused *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_transfer_to(&r->tr, r->to));
	r->moved = co_result(f);
	atomic_store(&r->after, 1);
	CO_AWAIT(f, co_event_wait(&r->w, r->ev));
	r->waited = co_result(f);
	atomic_store(&r->after, 2);
	CO_END(f);
}

static void *cancel_thread(void *arg)
{
	struct refused *r = arg;

	co_cancel(&r->co); /* waits while a move it raced is under way */
	return NULL;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * A transfer the target refuses (it stopped) leaves the frame as it was:
 * still listed by its engine's view (the move takes it out of the list
 * before it asks the target, and puts it back), and still cancellable
 * from another thread (the move marks the frame before it asks, and a
 * cancel waits for the mark to go: a mark left behind would hold that
 * cancel for good), the request reaching it on its own context (the
 * runner is left as it was). The cancel runs on a thread of its own and
 * the frame is given 5 s to end, so either fault fails the case instead of
 * hanging it.
 */
static void test_transfer_refused_leaves_frame_as_it_was(void **state)
{
	co_context a, b;
	co_event ev;
	struct refused r = { .ev = &ev };
	pthread_t t;
	uint64_t t0;
	(void)state;
	assert_int_equal(co_event_init(&ev, 0), 0);
	assert_int_equal(co_context_init(&a, NULL), 0);
	assert_int_equal(co_context_init(&b, NULL), 0);
	assert_int_equal(co_context_stop(&b, 0), 0);
	r.to = &b;
	co_init(&r.co, refused_fn);
	assert_int_equal(co_context_spawn(&a, &r.co), 0);
	assert_int_equal(co_context_start(&a, CO_RUN_UNTIL_STOP), 0);
	/* waiting on the event once listed so (the view answers on a's
	 * thread, after the await suspended) */
	for (t0 = mono_ms();; usleep(1000)) {
		co_view v;
		int waiting = 0;

		assert_true(mono_ms() - t0 < 5000);
		if (atomic_load(&r.after) == 0)
			continue;
		if (!co_view_available())
			break;
		assert_int_equal(co_view_engine(&v, &a.engine, CO_VIEW_WAIT), 0);
		assert_int_equal(v.unanswered, 0);
		assert_int_equal(v.n, 1); /* listed after the refusal */
		assert_ptr_equal(v.frames[0].frame, &r.co);
		waiting = v.frames[0].state == CO_VIEW_WAITING && v.frames[0].wait &&
			  strcmp(v.frames[0].wait, "event") == 0;
		co_view_free(&v);
		if (waiting)
			break;
	}
	assert_int_equal(r.moved, -ESHUTDOWN);
	assert_int_equal(pthread_create(&t, NULL, cancel_thread, &r), 0);
	/* the cancel reached the frame where it is, the runner the refusal
	 * left (a request sent to the stopped context is never handled) */
	for (t0 = mono_ms(); atomic_load(&r.after) != 2; usleep(1000))
		assert_true(mono_ms() - t0 < 5000);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(co_context_stop(&a, CO_STOP_DRAIN), 0);
	assert_int_equal(co_context_join(&a), 0);
	assert_true(co_done(&r.co));
	assert_int_equal(r.waited, -ECANCELED);
	assert_int_equal(co_context_destroy(&a), 0);
	assert_int_equal(co_context_destroy(&b), 0);
}

/* ---- work stealing ------------------------------------------------------------ */

#define STEAL_TASKS 400

struct worker {
	co_frame co;
	int k;
	co_context *ran_on;
};

static int worker_fn(co_frame *f)
{
	struct worker *w = (struct worker *)f;
	CO_BEGIN(f);
	for (w->k = 0; w->k < 20; w->k++) {
		for (volatile int spin = 0; spin < 2000; spin++)
			;
		CO_YIELD(f); /* back in the ready ring: stealable */
	}
	w->ran_on = co_context_current();
	CO_END(f);
}

/* Yields (staying in context 0's ready ring, where a thief can take it)
 * until some task has run on context 1: only stealing gets one there. */
struct stealee {
	co_frame co;
	co_context *ctx1, *ran_on;
	atomic_int *seen_on_1;
};

static int stealee_fn(co_frame *f)
{
	struct stealee *w = (struct stealee *)f;
	CO_BEGIN(f);
	while (!atomic_load(w->seen_on_1)) {
		if (co_context_current() == w->ctx1)
			atomic_store(w->seen_on_1, 1);
		CO_YIELD(f);
	}
	w->ran_on = co_context_current();
	CO_END(f);
}

static void test_stealing_spreads_work(void **state)
{
	/* every task spawned on context 0: the idle context 1 steals some.
	 * The tasks wait for that (the hang guard is the test's timeout), so
	 * the outcome does not depend on how the threads are scheduled. */
	co_sched s;
	co_sched_opts o = { .contexts = 2, .steal = 1 };
	static struct stealee w[STEAL_TASKS];
	atomic_int seen_on_1 = 0;
	int on[2] = { 0, 0 };
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < STEAL_TASKS; i++) {
		w[i] = (struct stealee){ .ctx1 = &s.ctx[1], .seen_on_1 = &seen_on_1 };
		co_init(&w[i].co, stealee_fn);
		assert_int_equal(co_sched_spawn_to(&s, 0, &w[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < STEAL_TASKS; i++) {
		assert_non_null(w[i].ran_on);
		on[w[i].ran_on == &s.ctx[1]]++;
	}
	print_message("      context 0 finished %d, context 1 finished %d\n", on[0], on[1]);
	assert_int_equal(atomic_load(&seen_on_1), 1);
	assert_int_equal(on[0] + on[1], STEAL_TASKS);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* Waits on I/O (a nop) instead of yielding, until some task has come
 * back from a completion on another context than the one it waited on,
 * or 20 s have passed: the completion's wake is what puts the frame in
 * its context's ready ring, where a thief can take it. */
struct io_stealee {
	co_frame co;
	co_io io;
	co_context *before, *ran_on;
	atomic_int *moved;
	uint64_t deadline;
};

static int io_stealee_fn(co_frame *f)
{
	struct io_stealee *w = (struct io_stealee *)f;
	CO_BEGIN(f);
	while (!atomic_load(w->moved) && co_now_ns() < w->deadline) {
		for (volatile int spin = 0; spin < 20000; spin++)
			;
		w->before = co_context_current();
		CO_AWAIT(f, co_nop(&w->io));
		assert_int_equal(co_result(f), 0);
		if (co_context_current() != w->before)
			atomic_store(w->moved, 1);
	}
	w->ran_on = co_context_current();
	CO_END(f);
}

/* Keeps its context turning (a context with work of its own steals at
 * every turn that finds nothing ready; an idle one sleeps until kicked). */
static int io_poller_fn(co_frame *f)
{
	struct io_stealee *w = (struct io_stealee *)f;
	CO_BEGIN(f);
	while (!atomic_load(w->moved) && co_now_ns() < w->deadline) {
		CO_AWAIT(f, co_nop(&w->io));
		assert_int_equal(co_result(f), 0);
	}
	CO_END(f);
}

static void test_stealing_takes_io_woken_frames(void **state)
{
	/* every task on context 0, busy between its completions, and a
	 * poller that keeps context 1 turning: a thief takes some woken by a
	 * completion (which, on an engine thieves take from, goes to the ring
	 * they see, never to the owner's own FIFO) */
	co_sched s;
	co_sched_opts o = { .contexts = 2, .steal = 1 };
	static struct io_stealee w[64], poller;
	atomic_int moved = 0;
	uint64_t deadline = co_now_ns() + 20 * CO_S;
	int on[2] = { 0, 0 };
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	poller = (struct io_stealee){ .moved = &moved, .deadline = deadline };
	co_init(&poller.co, io_poller_fn);
	assert_int_equal(co_sched_spawn_to(&s, 1, &poller.co), 0);
	for (int i = 0; i < 64; i++) {
		w[i] = (struct io_stealee){ .moved = &moved, .deadline = deadline };
		co_init(&w[i].co, io_stealee_fn);
		assert_int_equal(co_sched_spawn_to(&s, 0, &w[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < 64; i++) {
		assert_non_null(w[i].ran_on);
		on[w[i].ran_on == &s.ctx[1]]++;
	}
	print_message("      context 0 finished %d, context 1 finished %d\n", on[0], on[1]);
	assert_int_equal(atomic_load(&moved), 1);
	assert_int_equal(on[0] + on[1], 64);
	assert_int_equal(co_sched_destroy(&s), 0);
}

static void test_no_stealing_keeps_work(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2, .steal = 0 };
	static struct worker w[50];
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < 50; i++) {
		co_init(&w[i].co, worker_fn);
		assert_int_equal(co_sched_spawn_to(&s, 0, &w[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < 50; i++)
		assert_ptr_equal(w[i].ran_on, &s.ctx[0]);
	assert_int_equal(co_sched_destroy(&s), 0);
}

struct gated {
	co_frame co;
	co_waiter w;
	co_event *ev;
};

static int gated_fn(co_frame *f)
{
	struct gated *g = (struct gated *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_event_wait(&g->w, g->ev));
	CO_END(f);
}

/* ---- dispatch ---------------------------------------------------------------- */

static void test_dispatch_strategies(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2, .dispatch = CO_DISPATCH_ROUND_ROBIN };
	static struct worker w[100];
	static struct gated gates[30];
	co_event ev;
	int on[2] = { 0, 0 };
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < 100; i++) {
		co_init(&w[i].co, worker_fn);
		assert_int_equal(co_sched_spawn(&s, &w[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < 100; i++)
		on[w[i].ran_on == &s.ctx[1]]++;
	assert_int_equal(on[0], 50); /* in turn, and nothing stolen */
	assert_int_equal(on[1], 50);
	assert_int_equal(co_sched_destroy(&s), 0);

	/* least loaded: context 0 holds 30 tasks (parked until the event is
	 * set, so they cannot finish meanwhile), so the next 20 all go to
	 * context 1 */
	o.dispatch = CO_DISPATCH_LEAST_LOADED;
	assert_int_equal(co_sched_init(&s, &o), 0);
	assert_int_equal(co_event_init(&ev, 0), 0);
	for (int i = 0; i < 30; i++) {
		gates[i] = (struct gated){ .ev = &ev };
		co_init(&gates[i].co, gated_fn);
		assert_int_equal(co_sched_spawn_to(&s, 0, &gates[i].co), 0);
	}
	for (int i = 30; i < 50; i++) {
		co_init(&w[i].co, worker_fn);
		assert_int_equal(co_sched_spawn(&s, &w[i].co), 0);
	}
	assert_int_equal(co_event_set(&ev), 0);
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 30; i < 50; i++)
		assert_ptr_equal(w[i].ran_on, &s.ctx[1]);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- stop waits for I/O; parked frames keep their context alive -------------- */

struct napper {
	co_frame co;
	co_io io;
	int res;
};

static int napper_fn(co_frame *f)
{
	struct napper *n = (struct napper *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep(&n->io, 30 * CO_MS));
	n->res = co_result(f);
	CO_END(f);
}

static void test_run_waits_for_io(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	struct napper n[4];
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < 4; i++) {
		n[i].res = 1;
		co_init(&n[i].co, napper_fn);
		assert_int_equal(co_sched_spawn(&s, &n[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(n[i].res, 0); /* slept in full, not cancelled */
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* A one-shot event between contexts, using the park counts. */
struct event {
	co_awaiter aw;
	pthread_mutex_t lock;
	int set;
	co_frame *waiter;
	co_engine *waiter_engine;
};

static int event_suspend(co_awaiter *a, co_frame *f)
{
	struct event *ev = (struct event *)a;
	int parked = 0;
	pthread_mutex_lock(&ev->lock);
	if (!ev->set) {
		__atomic_store_n(&ev->waiter, f, __ATOMIC_RELEASE); /* the test polls it */
		ev->waiter_engine = co_engine_current();
		co_engine_park(ev->waiter_engine);
		parked = 1;
	}
	pthread_mutex_unlock(&ev->lock);
	return parked;
}

static const co_awaiter_ops event_ops = { NULL, event_suspend, NULL, NULL, 0, "event" };

static void event_set(struct event *ev)
{
	co_frame *w;
	co_engine *e;
	pthread_mutex_lock(&ev->lock);
	ev->set = 1;
	w = ev->waiter;
	e = ev->waiter_engine;
	__atomic_store_n(&ev->waiter, NULL, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&ev->lock);
	if (w) {
		co_wake(w);           /* first: the engine still counts it parked */
		co_engine_unpark(e);  /* then it may find itself idle */
	}
}

struct event_waiter {
	co_frame co;
	struct event *ev;
	int woke;
};

static int event_waiter_fn(co_frame *f)
{
	struct event_waiter *w = (struct event_waiter *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, &w->ev->aw);
	w->woke = 1;
	CO_END(f);
}

struct event_setter {
	co_frame co;
	co_io io;
	struct event *ev;
};

static int event_setter_fn(co_frame *f)
{
	struct event_setter *st = (struct event_setter *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep(&st->io, 80 * CO_MS)); /* longer than the deadlock grace */
	event_set(st->ev);
	CO_END(f);
}

static void test_parked_frame_keeps_context_alive(void **state)
{
	/* two lone contexts that stop by themselves when idle: A's frame waits
	 * on an event that B sets 80 ms later; A must not stop meanwhile */
	co_context a, b;
	struct event ev = { .aw = { &event_ops } };
	struct event_waiter w = { .ev = &ev };
	struct event_setter st = { .ev = &ev };
	(void)state;
	pthread_mutex_init(&ev.lock, NULL);
	assert_int_equal(co_context_init(&a, NULL), 0);
	assert_int_equal(co_context_init(&b, NULL), 0);
	co_init(&w.co, event_waiter_fn);
	co_init(&st.co, event_setter_fn);
	assert_int_equal(co_context_spawn(&a, &w.co), 0);
	assert_int_equal(co_context_start(&a, CO_RUN_UNTIL_IDLE), 0);
	while (__atomic_load_n(&ev.waiter, __ATOMIC_ACQUIRE) == NULL)
		usleep(100); /* A has parked it */
	assert_int_equal(co_context_spawn(&b, &st.co), 0);
	assert_int_equal(co_context_start(&b, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_context_join(&a), 0);
	assert_int_equal(co_context_join(&b), 0);
	assert_int_equal(w.woke, 1);
	assert_int_equal(co_context_destroy(&a), 0);
	assert_int_equal(co_context_destroy(&b), 0);
	pthread_mutex_destroy(&ev.lock);
}

/* ---- ownership, shutdown, errors ------------------------------------------- */

static atomic_int freed;

static void free_task(co_frame *f)
{
	free(f);
	atomic_fetch_add(&freed, 1);
}

struct spawner {
	co_frame co;
	co_sched *s;
	int rets[10];
};

static int spawner_fn(co_frame *f)
{
	struct spawner *sp = (struct spawner *)f;
	CO_BEGIN(f);
	/* tasks submitted from inside a task, freed by their on_done */
	for (int i = 0; i < 10; i++) {
		struct tiny *t = calloc(1, sizeof *t);
		static atomic_uchar sink[1];
		t->ran = sink;
		co_init(&t->co, tiny_fn);
		t->co.on_done = free_task;
		sp->rets[i] = co_sched_spawn(sp->s, &t->co);
	}
	CO_END(f);
}

static void test_submit_from_task_and_ownership(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	struct spawner sp = { .s = &s };
	(void)state;
	atomic_store(&freed, 0);
	assert_int_equal(co_sched_init(&s, &o), 0);
	co_init(&sp.co, spawner_fn);
	assert_int_equal(co_sched_spawn(&s, &sp.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(sp.rets[i], 0);
	assert_int_equal(atomic_load(&freed), 10); /* each exactly once (ASan) */
	assert_int_equal(co_sched_destroy(&s), 0);
}

struct server_task {
	co_frame co;
	co_io io;
	int p[2];
	char c;
	int res;
	atomic_int started;
};

static int server_task_fn(co_frame *f)
{
	struct server_task *t = (struct server_task *)f;
	CO_BEGIN(f);
	atomic_store(&t->started, 1);
	CO_AWAIT(f, co_read(&t->io, t->p[0], &t->c, 1, (uint64_t)-1)); /* never comes */
	t->res = co_result(f);
	CO_END(f);
}

struct shutter {
	co_frame co;
	co_io io;
	co_sched *s;
	struct server_task *t;
};

static int shutter_fn(co_frame *f)
{
	struct shutter *sh = (struct shutter *)f;
	CO_BEGIN(f);
	/* the stop must find both blocked in their reads (a task that never
	 * started would be finished without running: its value untouched) */
	while (!atomic_load(&sh->t[0].started) || !atomic_load(&sh->t[1].started))
		CO_AWAIT(f, co_sleep(&sh->io, CO_MS));
	CO_AWAIT(f, co_sleep(&sh->io, 10 * CO_MS));
	co_sched_stop(sh->s, CO_STOP_CANCEL);
	CO_END(f);
}

static void test_shutdown_cancels_blocked_tasks(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	struct server_task t[2];
	struct shutter sh = { .s = &s, .t = t };
	struct tiny late;
	atomic_uchar ran[1] = { 0 };
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pipe(t[i].p), 0);
		t[i].res = 1;
		atomic_init(&t[i].started, 0);
		co_init(&t[i].co, server_task_fn);
		assert_int_equal(co_sched_spawn_to(&s, (unsigned)i, &t[i].co), 0);
	}
	co_init(&sh.co, shutter_fn);
	assert_int_equal(co_sched_spawn(&s, &sh.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(t[i].res, -ECANCELED);
		close(t[i].p[0]);
		close(t[i].p[1]);
	}
	/* a stop is for good: later spawns are refused and never run */
	assert_int_equal(co_sched_state(&s), CO_SCHED_ENDED);
	late.ran = ran;
	late.id = 0;
	co_init(&late.co, tiny_fn);
	assert_int_equal(co_sched_spawn(&s, &late.co), -ESHUTDOWN);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(atomic_load(&ran[0]), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- spawns racing the stop and the destroy ----------------------------- */

#define DOOR_ROUNDS 100 /* destroy races */
#define STOP_ROUNDS 50
#define DOOR_PACED 2   /* spawners racing destroy, paced */
#define DOOR_UNPACED 4 /* spawners racing a stop */

/* A task the spawners hand in. In the destroy race only co_sched_destroy
 * stops the scheduler, and it stops it only when no task is live: a task
 * that finds it no longer RUNNING was accepted after destroy closed the
 * door (late). */
struct door_task {
	co_frame co;
	co_sched *s;
	atomic_long *finished, *late;
	atomic_int *idle; /* its spawner's: the task has finished */
};

static int door_task_fn(co_frame *f)
{
	struct door_task *t = (struct door_task *)f;
	CO_BEGIN(f);
	if (co_sched_state(t->s) != CO_SCHED_RUNNING)
		atomic_fetch_add(t->late, 1);
	CO_END(f);
}

static void door_task_done(co_frame *f)
{
	struct door_task *t = (struct door_task *)f;
	atomic_int *idle = t->idle;
	atomic_fetch_add(t->finished, 1);
	free(t);
	atomic_store(idle, 1);
}

struct door_spawner {
	co_sched *s;
	atomic_int *stop;
	atomic_long *finished, *late;
	unsigned seed;
	int pace;        /* 1: the next spawn once the last task finished */
	atomic_int idle;
	atomic_long accepted, refused, destroyed, other;
};

/* Spawn until told to stop. Paced: one task at a time, the next one a
 * random few microseconds after the last finished, so that the task count
 * drops to zero (a destroy can then go through) just before a spawn
 * comes. Unpaced: as fast as it can (with more spawners than CPUs, some
 * are preempted in the middle of a spawn when the stop comes). */
static void *door_spawner_main(void *arg)
{
	struct door_spawner *d = arg;

	while (!atomic_load(d->stop)) {
		struct door_task *t = malloc(sizeof *t);
		int r;

		assert_non_null(t);
		*t = (struct door_task){ .s = d->s, .finished = d->finished, .late = d->late,
					 .idle = &d->idle };
		co_init(&t->co, door_task_fn);
		t->co.on_done = door_task_done;
		atomic_store(&d->idle, 0);
		r = co_sched_spawn(d->s, &t->co);
		if (r != 0)
			free(t);
		else
			while (d->pace && !atomic_load(&d->idle)) /* accepted: it finishes */
				sched_yield();
		atomic_fetch_add(r == 0 ? &d->accepted : r == -ESHUTDOWN ? &d->refused
				 : r == -EINVAL ? &d->destroyed : &d->other, 1);
		for (unsigned spin = d->pace ? rand_r(&d->seed) % 3000 : 0; spin; spin--)
			atomic_signal_fence(memory_order_seq_cst);
	}
	return NULL;
}

static void door_start(struct door_spawner *d, pthread_t *th, int n, co_sched *s,
		       atomic_int *stop, atomic_long *finished, atomic_long *late, int round)
{
	for (int k = 0; k < n; k++) {
		memset(&d[k], 0, sizeof d[k]);
		d[k].s = s;
		d[k].stop = stop;
		d[k].finished = finished;
		d[k].late = late;
		d[k].seed = (unsigned)(round * 7 + k);
		d[k].pace = n == DOOR_PACED;
		assert_int_equal(pthread_create(&th[k], NULL, door_spawner_main, &d[k]), 0);
	}
}

/* Stop the spawners; the totals of their answers. */
static long door_join(struct door_spawner *d, pthread_t *th, int n, atomic_int *stop,
		      long *refused, long *destroyed)
{
	long accepted = 0;

	atomic_store(stop, 1);
	for (int k = 0; k < n; k++) {
		pthread_join(th[k], NULL);
		assert_int_equal(atomic_load(&d[k].other), 0);
		accepted += atomic_load(&d[k].accepted);
		*refused += atomic_load(&d[k].refused);
		*destroyed += atomic_load(&d[k].destroyed);
	}
	return accepted;
}

/* Spawns from two threads race co_sched_destroy, and go on after it: each
 * is accepted before destroy closes the door (destroy then answers
 * -EBUSY and is asked again), refused with -ESHUTDOWN while it finishes,
 * or answered -EINVAL once it has; none reads freed memory (ASan), none
 * is accepted after the door closed (no task runs while the scheduler is
 * stopping), and every accepted task finished before destroy returned. */
static void test_spawns_race_destroy(void **state)
{
	long accepted = 0, refused = 0, destroyed = 0, busy = 0;
	atomic_long finished = 0, late = 0;
	(void)state;
	for (int round = 0; round < DOOR_ROUNDS; round++) {
		co_sched s;
		co_sched_opts o = { .contexts = 2 };
		struct door_spawner d[DOOR_PACED];
		pthread_t th[DOOR_PACED];
		atomic_int stop = 0;
		long before = atomic_load(&finished), n;
		int r;

		assert_int_equal(co_sched_init(&s, &o), 0);
		door_start(d, th, DOOR_PACED, &s, &stop, &finished, &late, round);
		WAIT_UNTIL(atomic_load(&finished) > before);
		while ((r = co_sched_destroy(&s)) == -EBUSY)
			busy++;
		assert_int_equal(r, 0);
		n = atomic_load(&finished) - before;
		/* spawns after it, then the count: every accepted task had
		 * finished when destroy returned */
		WAIT_UNTIL(atomic_load(&d[0].destroyed) > 0 && atomic_load(&d[1].destroyed) > 0);
		assert_int_equal(door_join(d, th, DOOR_PACED, &stop, &refused, &destroyed), n);
		assert_int_equal(atomic_load(&late), 0); /* none accepted after the door closed */
		accepted += n;
	}
	print_message("      %ld accepted, %ld refused while destroying, %ld after destroy, "
		      "%ld destroys refused\n", accepted, refused, destroyed, busy);
	assert_true(destroyed >= DOOR_ROUNDS);
}

/* A destroy that finds work left (-EBUSY) refuses no spawn. It closes the
 * door while it looks whether anything is live; a spawn that comes then
 * (the window held open at CO__POINT_SCHED_CLOSING until the spawn waits,
 * CO__POINT_SPAWN_WAITS) waits for the answer, and is accepted once the
 * destroy has found the frame left on a context and given up. */
struct closing_race {
	co_sched *s;
	co_frame task;
	pthread_t t;
	int started, ret;
	atomic_int waits, ran;
};

static struct closing_race *closing;

static int closing_task_fn(co_frame *f)
{
	CO_BEGIN(f);
	atomic_fetch_add(&closing->ran, 1);
	CO_END(f);
}

static void *closing_spawner(void *arg)
{
	struct closing_race *c = arg;

	c->ret = co_sched_spawn(c->s, &c->task);
	return NULL;
}

static void spawn_while_closing(void *arg) /* the destroy, about to look */
{
	(void)arg;
	if (closing->started++)
		return;
	assert_int_equal(pthread_create(&closing->t, NULL, closing_spawner, closing), 0);
	for (int i = 0; i < 100000 && !atomic_load(&closing->waits); i++) /* bounded */
		usleep(100);
}

static void spawn_waits(void *arg)
{
	(void)arg;
	atomic_store(&closing->waits, 1);
}

static void test_busy_destroy_refuses_no_spawn(void **state)
{
	static struct closing_race c;
	co_sched s;
	co_event ev;
	struct co_test_idler d;
	(void)state;

	memset(&c, 0, sizeof c);
	closing = &c;
	c.s = &s;
	c.ret = 1;
	co_event_init(&ev, 0);
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 1 }), 0);
	co_test_idler_init(&d, &ev); /* live on the context, not a task */
	assert_int_equal(co_context_spawn(&s.ctx[0], &d.co), 0);
	co_init(&c.task, closing_task_fn);
	co__fault_on_point(CO__POINT_SCHED_CLOSING, spawn_while_closing, NULL);
	co__fault_on_point(CO__POINT_SPAWN_WAITS, spawn_waits, NULL);
	assert_int_equal(co_sched_destroy(&s), -EBUSY); /* the idler is live */
	co__fault_on_point(CO__POINT_SCHED_CLOSING, NULL, NULL);
	assert_int_equal(c.started, 1);
	assert_int_equal(pthread_join(c.t, NULL), 0);
	co__fault_on_point(CO__POINT_SPAWN_WAITS, NULL, NULL);
	assert_int_equal(atomic_load(&c.waits), 1); /* the window was held open */
	assert_int_equal(c.ret, 0);                  /* and the spawn accepted */
	co_event_set(&ev);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(atomic_load(&c.ran), 1);
	assert_int_equal(co_sched_destroy(&s), 0);
	co_event_destroy(&ev);
}

/* Spawns from two threads race a stop (drain or cancel, in turn): each is
 * accepted and finishes, or is refused; co_sched_run then returns 0 (a
 * spawn refused by its stopped context while the run looks is no work
 * left), and destroy frees everything. */
static void test_spawns_race_stop(void **state)
{
	long accepted = 0, refused = 0, destroyed = 0;
	atomic_long finished = 0, late = 0;
	(void)state;
	for (int round = 0; round < STOP_ROUNDS; round++) {
		co_sched s;
		co_sched_opts o = { .contexts = 2 };
		struct door_spawner d[DOOR_UNPACED];
		pthread_t th[DOOR_UNPACED];
		atomic_int stop = 0;
		long before = atomic_load(&finished);

		assert_int_equal(co_sched_init(&s, &o), 0);
		door_start(d, th, DOOR_UNPACED, &s, &stop, &finished, &late, round);
		WAIT_UNTIL(atomic_load(&finished) > before);
		assert_int_equal(co_sched_stop(&s, round % 2 ? CO_STOP_CANCEL : CO_STOP_DRAIN), 0);
		assert_int_equal(co_sched_run(&s), 0);
		WAIT_UNTIL(atomic_load(&d[0].refused) > 0 && atomic_load(&d[1].refused) > 0);
		accepted += door_join(d, th, DOOR_UNPACED, &stop, &refused, &destroyed);
		assert_int_equal(atomic_load(&finished), accepted);
		assert_int_equal(co_sched_destroy(&s), 0);
	}
	print_message("      %ld accepted, %ld refused\n", accepted, refused);
	assert_int_equal(destroyed, 0);
}

/* ---- calls that would wait for themselves, and destroy while stopping ---- */

struct self_runner {
	co_frame co;
	co_sched *s;
	atomic_int ret;
};

static int self_runner_fn(co_frame *f)
{
	struct self_runner *r = (struct self_runner *)f;
	CO_BEGIN(f);
	atomic_store(&r->ret, co_sched_run(r->s)); /* it would wait for itself */
	CO_END(f);
}

/* co_sched_run from one of the scheduler's own tasks (on a thread of its
 * own or on a manual context), and from the thread that ticks a manual
 * context that still needs ticks: -EBUSY at once, nothing changed. Once
 * the manual context is stopped with nothing live, its ticker may wait:
 * the run ends it. */
static void test_run_from_inside_is_refused(void **state)
{
	static const co_sched_group g[2] = { { .contexts = 1 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	co_sched s;
	struct self_runner a = { .s = &s, .ret = 1 }, b = { .s = &s, .ret = 1 };
	co_context *manual;
	int r;
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	manual = co_sched_pick(&s, 1);
	co_init(&a.co, self_runner_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 0, &a.co), 0);
	WAIT_UNTIL(atomic_load(&a.ret) != 1);
	assert_int_equal(atomic_load(&a.ret), -EBUSY);
	/* the thread that ticks the manual context: refused while it has
	 * work (or is not stopped), whoever's frame it is */
	co_init(&b.co, self_runner_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 1, &b.co), 0);
	assert_int_equal(co_context_tick(manual), 1);
	assert_int_equal(atomic_load(&b.ret), -EBUSY); /* on the manual context */
	assert_int_equal(co_sched_run(&s), -EBUSY); /* its ticker: idle, not stopped */
	assert_int_equal(co_sched_state(&s), CO_SCHED_RUNNING);
	/* the ticker polls instead (a's context may still be finishing it) */
	while ((r = co_sched_poll(&s)) == -EAGAIN)
		assert_true(co_context_tick(manual) >= 0);
	assert_int_equal(r, 0);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	assert_int_equal(co_sched_run(&s), 0); /* stopped and idle: the run ends it */
	assert_int_equal(co_context_tick(manual), -ESHUTDOWN);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- a manual context that no thread has ticked yet ---------------------------------- */

/* co_sched_run on a thread of its own. */
struct run_thread {
	pthread_t th;
	co_sched *s;
	atomic_int ret;           /* 1 until the run returned */
};

static void *run_thread_fn(void *arg)
{
	struct run_thread *r = arg;

	atomic_store(&r->ret, co_sched_run(r->s));
	return NULL;
}

static void run_thread_start(struct run_thread *r, co_sched *s)
{
	r->s = s;
	atomic_store(&r->ret, 1);
	assert_int_equal(pthread_create(&r->th, NULL, run_thread_fn, r), 0);
}

static int run_thread_join(struct run_thread *r)
{
	assert_int_equal(pthread_join(r->th, NULL), 0);
	return atomic_load(&r->ret);
}

/* Threads waiting in co_sched_run (read under the scheduler's lock). */
static unsigned run_waiters(co_sched *s)
{
	unsigned n;

	pthread_mutex_lock(&s->lock);
	n = s->waiters;
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* A task that waits for an event (parked: its context is not quiet), then
 * moves to a context of another kind and counts its steps there. */
struct mover_task {
	co_frame co;
	co_waiter w;
	co_transfer tr;
	co_event *ev;
	co_context *to;
	atomic_int step;
};

static int mover_task_fn(co_frame *f)
{
	struct mover_task *t = (struct mover_task *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_event_wait(&t->w, t->ev));
	atomic_store(&t->step, 1);
	CO_AWAIT(f, co_transfer_to(&t->tr, t->to));
	assert_int_equal(co_result(f), 0);
	atomic_store(&t->step, 2); /* on the manual context: at a tick */
	CO_END(f);
}

static const co_sched_group with_manual[2] = { { .contexts = 1 }, { .manual = 1 } };

/*
 * No thread has ticked the manual context yet, so nothing runs its frames
 * and the scheduler does not know which thread will (perhaps the one that
 * would wait). co_sched_run does not wait for it: idle, it is not waited
 * for (0); holding frames, the run answers -EBUSY at once from any thread,
 * nothing changed (co_sched_poll: -EAGAIN, its caller is taken for the
 * ticker); a frame that moves there while a run waits ends that wait with
 * -EBUSY once the other context is quiet. The verdicts are counts, never
 * times: every call returns. Once a thread has ticked it, a run from
 * another thread waits for its ticks (next test).
 */
static void test_run_with_unticked_manual(void **state)
{
	co_sched_opts o = { .groups = with_manual, .ngroups = 2 };
	co_sched s;
	co_context *manual;
	co_event ev, gate;
	struct co_test_counted t;
	struct gated g = { .ev = &gate };
	struct mover_task m = { .ev = &ev };
	struct run_thread r;
	(void)state;
	assert_int_equal(co_event_init(&ev, 0), 0);
	assert_int_equal(co_sched_init(&s, &o), 0);
	manual = co_sched_pick(&s, 1);
	assert_int_equal(co_sched_run(&s), 0); /* idle, never ticked: not waited for */
	assert_int_equal(co_sched_poll(&s), 0);

	/* a task on it: -EBUSY at once, from this thread and from another,
	 * even while the other context has work (a task parked on gate) */
	assert_int_equal(co_event_init(&gate, 0), 0);
	co_init(&g.co, gated_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 0, &g.co), 0);
	co_test_counted_init(&t);
	assert_int_equal(co_sched_spawn_kind(&s, 1, &t.co), 0);
	assert_int_equal(co_sched_run(&s), -EBUSY);
	run_thread_start(&r, &s);
	assert_int_equal(run_thread_join(&r), -EBUSY);
	assert_int_equal(co_sched_poll(&s), -EAGAIN);
	assert_int_equal(atomic_load(&t.ran), 0); /* nothing changed */
	assert_int_equal(co_sched_tasks(&s), 2);
	assert_int_equal(co_event_set(&gate), 0);
	assert_int_equal(co_sched_state(&s), CO_SCHED_RUNNING);
	assert_int_equal(co_context_tick(manual), 1); /* this thread is its ticker now */
	assert_int_equal(atomic_load(&t.done), 1);
	assert_int_equal(co_sched_run(&s), -EBUSY); /* its ticker: idle, not stopped */
	run_thread_start(&r, &s);
	assert_int_equal(run_thread_join(&r), 0); /* another thread: nothing left */
	assert_int_equal(co_sched_destroy(&s), 0);

	/* a frame moves onto the unticked context while a run waits */
	assert_int_equal(co_sched_init(&s, &o), 0);
	manual = co_sched_pick(&s, 1);
	m.to = manual;
	co_init(&m.co, mover_task_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 0, &m.co), 0); /* parks on ev */
	run_thread_start(&r, &s);
	WAIT_UNTIL(run_waiters(&s) == 1); /* the run waits for the parked task */
	assert_int_equal(co_event_set(&ev), 0);
	assert_int_equal(run_thread_join(&r), -EBUSY); /* not a wait for ever */
	assert_int_equal(atomic_load(&m.step), 1); /* moved, not run there yet */
	assert_int_equal(co_sched_poll(&s), -EAGAIN);
	assert_int_equal(co_context_tick(manual), 1);
	assert_int_equal(atomic_load(&m.step), 2);
	run_thread_start(&r, &s);
	assert_int_equal(run_thread_join(&r), 0);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	assert_int_equal(co_sched_run(&s), 0); /* stopped and idle: the run ends it */
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_event_destroy(&ev), 0);
	assert_int_equal(co_event_destroy(&gate), 0);
}

/* Ticked by another thread: co_sched_run from this one waits for that
 * thread's ticks to run the work, and returns 0. */
struct ticker {
	pthread_t th;
	co_context *c;
	atomic_int ticked, stop, bad;
};

static void *ticker_fn(void *arg)
{
	struct ticker *k = arg;

	if (co_context_tick(k->c) < 0) /* the first tick: this thread is its ticker */
		atomic_store(&k->bad, 1);
	atomic_store(&k->ticked, 1);
	while (!atomic_load(&k->stop))
		if (co_context_tick(k->c) < 0)
			atomic_store(&k->bad, 1);
	return NULL;
}

static void test_run_waits_for_another_ticker(void **state)
{
	co_sched_opts o = { .groups = with_manual, .ngroups = 2 };
	co_sched s;
	struct ticker k = { .ticked = 0 };
	struct co_test_counted t[8];
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	k.c = co_sched_pick(&s, 1);
	assert_int_equal(pthread_create(&k.th, NULL, ticker_fn, &k), 0);
	WAIT_UNTIL(atomic_load(&k.ticked)); /* it has a ticker now */
	for (int i = 0; i < 8; i++) {
		co_test_counted_init(&t[i]);
		assert_int_equal(co_sched_spawn_kind(&s, (unsigned)i % 2, &t[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(atomic_load(&t[i].done), 1);
	atomic_store(&k.stop, 1);
	assert_int_equal(pthread_join(k.th, NULL), 0);
	assert_int_equal(atomic_load(&k.bad), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* A stop asked, a task still parked: destroy answers -EBUSY and changes
 * nothing (spawns still refused, the task still runs to its end, the run
 * then returns 0); once every context ended, destroy frees. */
static void test_destroy_while_stopping(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	co_event ev;
	struct gated g = { .ev = &ev }, late = { .ev = &ev };
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	assert_int_equal(co_event_init(&ev, 0), 0);
	co_init(&g.co, gated_fn);
	assert_int_equal(co_sched_spawn(&s, &g.co), 0); /* live until the event is set */
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	assert_int_equal(co_sched_destroy(&s), -EBUSY);
	assert_int_equal(co_sched_state(&s), CO_SCHED_STOPPING);
	assert_int_equal(co_sched_destroy(&s), -EBUSY); /* again: still nothing changes */
	co_init(&late.co, gated_fn);
	assert_int_equal(co_sched_spawn(&s, &late.co), -ESHUTDOWN);
	assert_int_equal(co_event_set(&ev), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_true(co_done(&g.co));
	assert_int_equal(co_status(&g.co), 0);
	assert_int_equal(co_sched_state(&s), CO_SCHED_ENDED);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_sched_destroy(&s), -EINVAL);
}

/* A context's thread marks it ENDED before it tells its scheduler, which
 * counts it then: held in between (a fault point), with a manual context
 * that its last tick ended and left quiet, a poll after the stop must
 * answer -EAGAIN, not 0 (everything it looks at reads quiet or ended),
 * or the destroy that follows answers -EBUSY. */
static atomic_int in_window, window_release;

static void hold_ending_context(void *arg)
{
	(void)arg;
	atomic_store(&in_window, 1);
	while (!atomic_load(&window_release))
		usleep(1000);
}

static void test_poll_after_stop_waits_for_threads(void **state)
{
	co_sched s;
	co_sched_group gs[2] = { { .manual = 1 }, { .contexts = 1 } };
	co_sched_opts o = { .groups = gs, .ngroups = 2 };
	co_context *logic;
	int r;
	(void)state;
	alarm(20); /* the poll loop below must end */
	assert_int_equal(co_sched_init(&s, &o), 0);
	logic = co_sched_pick(&s, 0);
	assert_true(co_context_tick(logic) >= 0);
	atomic_store(&in_window, 0);
	atomic_store(&window_release, 0);
	co__fault_on_point(CO__POINT_CONTEXT_ENDING, hold_ending_context, NULL);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	while (co_context_state(logic) != CO_CONTEXT_ENDED)
		assert_true(co_context_tick(logic) >= 0);
	WAIT_UNTIL(atomic_load(&in_window)); /* the worker's thread: ENDED, not counted */
	r = co_sched_poll(&s);
	atomic_store(&window_release, 1);
	assert_int_equal(r, -EAGAIN);
	while ((r = co_sched_poll(&s)) == -EAGAIN)
		usleep(1000);
	assert_int_equal(r, 0);
	assert_int_equal(co_sched_state(&s), CO_SCHED_ENDED);
	assert_int_equal(co_sched_destroy(&s), 0);
	co__fault_on_point(CO__POINT_CONTEXT_ENDING, NULL, NULL);
	alarm(0);
}

/* Two destroys of an idle scheduler at once: the first stops the
 * contexts and waits for their ends unlocked; a second that comes once
 * they ended (held there: the point after the stops) answers -EBUSY, and
 * the first releases everything. Without that the second released it too
 * and the first then locked a freed scheduler, or both waited for each
 * other's visit to leave. */
static co_sched *second_of;
static int second_ret = 1;

static int second_destroy(void *arg)
{
	return co_sched_destroy(arg);
}

static void destroy_in_window(void *arg)
{
	co_sched *s = second_of;

	(void)arg;
	for (unsigned i = 0; i < s->n; i++) /* every context ended and counted */
		WAIT_UNTIL(co_context_state(&s->ctx[i]) == CO_CONTEXT_ENDED);
	WAIT_UNTIL(__atomic_load_n(&s->ended, __ATOMIC_SEQ_CST) == s->n);
	second_ret = co_test_on_thread(second_destroy, s);
}

static void test_two_destroys_at_once(void **state)
{
	co_sched s;
	(void)state;
	alarm(20); /* two destroys waiting on each other: fail, not hang */
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 2 }), 0);
	second_of = &s;
	co__fault_on_point(CO__POINT_SCHED_STOPPED, destroy_in_window, NULL);
	assert_int_equal(co_sched_destroy(&s), 0);
	co__fault_on_point(CO__POINT_SCHED_STOPPED, NULL, NULL);
	assert_int_equal(second_ret, -EBUSY);
	assert_int_equal(co_sched_destroy(&s), -EINVAL);
	alarm(0);
}

static void test_errors(void **state)
{
	co_sched s;
	co_sched_opts bad = { .dispatch = (co_dispatch)9 };
	co_event ev;
	struct gated g = { .ev = &ev };
	(void)state;
	assert_int_equal(co_sched_init(NULL, NULL), -EINVAL);
	assert_int_equal(co_sched_init(&s, &bad), -EINVAL);
	assert_int_equal(co_sched_init(&s, NULL), 0);
	assert_true(s.n >= 1); /* one per online CPU */
	assert_int_equal(co_sched_state(&s), CO_SCHED_RUNNING);
	assert_int_equal(co_event_init(&ev, 0), 0);
	co_init(&g.co, gated_fn);
	assert_int_equal(co_sched_spawn(NULL, &g.co), -EINVAL);
	assert_int_equal(co_sched_spawn(&s, NULL), -EINVAL);
	assert_int_equal(co_sched_spawn_to(&s, s.n, &g.co), -EINVAL);
	assert_null(co_sched_pick(NULL, 0));
	assert_null(co_sched_pick(&s, 1)); /* one group: kind 0 only */
	assert_null(co_sched_pick(&s, UINT_MAX));
	assert_non_null(co_sched_pick(&s, 0));
	assert_int_equal(co_sched_stop(&s, 7), -EINVAL);
	assert_int_equal(co_sched_stop(&s, -1), -EINVAL);
	assert_int_equal(co_sched_tasks(NULL), 0);
	assert_int_equal(co_sched_state(&s), CO_SCHED_RUNNING); /* the bad stops changed nothing */
	assert_int_equal(co_sched_spawn(&s, &g.co), 0);
	assert_int_equal(co_sched_destroy(&s), -EBUSY); /* a task is live */
	assert_int_equal(co_event_set(&ev), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_spawn(&s, &g.co), -EINVAL); /* finished: not again */
	assert_int_equal(co_sched_run(&s), 0); /* nothing to do: returns at once */
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_sched_destroy(&s), -EINVAL);
	assert_int_equal(co_sched_state(&s), CO_SCHED_DEAD);
	assert_int_equal(co_sched_run(&s), -EINVAL);
	assert_int_equal(co_sched_spawn(&s, &g.co), -EINVAL);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), -EINVAL);
	assert_int_equal(co_sched_stop_timed(&s, CO_MS), -EINVAL);
	assert_null(co_sched_pick(&s, 0));
	assert_int_equal(co_sched_stop_timed(NULL, CO_MS), -EINVAL);
	assert_int_equal(co_sched_run(NULL), -EINVAL);
	assert_int_equal(co_sched_stop(NULL, CO_STOP_CANCEL), -EINVAL);
	assert_int_equal(co_sched_state(NULL), -EINVAL);
	/* never set up (zeroed) */
	memset(&s, 0, sizeof s);
	assert_int_equal(co_sched_run(&s), -EINVAL);
	assert_int_equal(co_sched_poll(&s), -EINVAL);
	assert_int_equal(co_sched_spawn(&s, &g.co), -EINVAL);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), -EINVAL);
	assert_int_equal(co_sched_destroy(&s), -EINVAL);
	assert_null(co_sched_pick(&s, 0));
	assert_int_equal(co_event_destroy(&ev), 0);
}

/* ---- a timed stop whose time cannot be reached is a drain for good ------------------- */

/* Waits for an event; its on_done notes the status and that it ended. */
struct parked {
	co_frame co;
	co_waiter w;
	co_event *ev;
	int res;
	atomic_int arrived, done, status;
};

static int parked_fn(co_frame *f)
{
	struct parked *p = (struct parked *)f;
	CO_BEGIN(f);
	atomic_store(&p->arrived, 1);
	CO_AWAIT(f, co_event_wait(&p->w, p->ev));
	p->res = co_result(f);
	CO_END(f);
}

static void parked_done(co_frame *f)
{
	struct parked *p = (struct parked *)f;
	atomic_store(&p->status, co_status(f));
	atomic_store(&p->done, 1);
}

/*
 * scheduler.h, co_sched_stop_timed: "drains, and cancels what is still
 * live after ns (near UINT64_MAX: never)". For UINT64_MAX, UINT64_MAX - 5
 * and the other durations whose sum with the clock wraps
 * (co_test_huge_ns), a task parked on an event (one per context) is not
 * cancelled after the stop: it is still waiting, the scheduler STOPPING,
 * and once the test sets the event it ends with 0 and co_sched_run
 * answers 0. test_stop's timed_stop_saturates uses sleepers, which an
 * I/O completion wakes anyway; here nothing but the stop itself could
 * wake the contexts. The 50 ms look only gives a wrong stop the time to
 * cancel; the pass does not depend on it.
 */
static void test_timed_stop_never_cancels_parked(void **state)
{
	(void)state;
	for (int k = 0; k < CO_TEST_HUGE_KINDS; k++) {
		co_sched s;
		co_sched_opts o = { .contexts = 2 };
		co_event ev;
		struct parked p[2];
		assert_int_equal(co_sched_init(&s, &o), 0);
		assert_int_equal(co_event_init(&ev, 0), 0);
		for (unsigned i = 0; i < 2; i++) {
			memset(&p[i], 0, sizeof p[i]);
			p[i].ev = &ev;
			p[i].res = 1;
			co_init(&p[i].co, parked_fn);
			p[i].co.on_done = parked_done;
			assert_int_equal(co_sched_spawn_to(&s, i, &p[i].co), 0);
		}
		for (unsigned i = 0; i < 2; i++)
			WAIT_UNTIL(atomic_load(&p[i].arrived));
		assert_int_equal(co_sched_stop_timed(&s, co_test_huge_ns(k)), 0);
		for (int t = 0; t < 50 && !atomic_load(&p[0].done) && !atomic_load(&p[1].done); t++)
			usleep(1000);
		for (unsigned i = 0; i < 2; i++)
			if (atomic_load(&p[i].done))
				fail_msg("ns kind %d: task %u ended after the stop: wait %d, status %d",
					 k, i, p[i].res, atomic_load(&p[i].status));
		assert_int_equal(co_sched_state(&s), CO_SCHED_STOPPING);
		assert_int_equal(co_sched_poll(&s), -EAGAIN);
		assert_int_equal(co_sched_tasks(&s), 2);
		assert_int_equal(co_event_set(&ev), 0);
		assert_int_equal(co_sched_run(&s), 0);
		for (unsigned i = 0; i < 2; i++) {
			assert_int_equal(atomic_load(&p[i].done), 1);
			assert_int_equal(p[i].res, 0);
			assert_int_equal(atomic_load(&p[i].status), 0);
		}
		assert_int_equal(co_sched_state(&s), CO_SCHED_ENDED);
		assert_int_equal(co_sched_destroy(&s), 0);
		assert_int_equal(co_event_destroy(&ev), 0);
	}
}


/* ---- a post to a context whose thread is gone ----------------------------------------- */

/*
 * scheduler.md, Contexts: "When the run returns, the thread stops its
 * engine ... and drains what was accepted in between: nothing accepted is
 * left in a context whose thread is gone"; engine.md: a post "counts as
 * pending work, so the engine neither sleeps through it nor stops or is
 * destroyed before it ran"; scheduler.md, Stopping: "co_sched_run then
 * returns once every context has ended, and co_sched_destroy joins them
 * and frees everything".
 *
 * co_engine_post to the engine of a context whose thread has ended (a
 * scheduler stopped and run to its end; a lone context joined) is refused
 * with -ESHUTDOWN (the engine's door to posts, closed after its last run),
 * and the destroys succeed. Without the door it answered 0, nothing ever
 * ran the post, and co_sched_destroy and co_context_destroy answered
 * -EBUSY for good.
 */
struct late_post {
	co_post p;
	atomic_int ran;
};

static void late_post_fn(co_post *p)
{
	atomic_fetch_add(&((struct late_post *)p)->ran, 1);
}

static void test_post_after_context_ended(void **state)
{
	co_sched_opts o = { .contexts = 1 };
	struct late_post p;
	co_sched s;
	co_context c;
	int r;
	(void)state;

	assert_int_equal(co_sched_init(&s, &o), 0);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	assert_int_equal(co_sched_run(&s), 0); /* every context has ended */
	assert_int_equal(co_sched_state(&s), CO_SCHED_ENDED);
	memset(&p, 0, sizeof p);
	p.p.fn = late_post_fn;
	r = co_engine_post(&s.ctx[0].engine, &p.p);
	assert_int_equal(r, -ESHUTDOWN); /* no run will come */
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(atomic_load(&p.ran), 0);

	assert_int_equal(co_context_init(&c, NULL), 0);
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_context_join(&c), 0); /* its thread is gone */
	memset(&p, 0, sizeof p);
	p.p.fn = late_post_fn;
	r = co_engine_post(&c.engine, &p.p);
	assert_int_equal(r, -ESHUTDOWN);
	assert_int_equal(co_context_destroy(&c), 0);
	assert_int_equal(atomic_load(&p.ran), 0);
}

/*
 * A post that comes after a context's last run looked at its posts, and
 * before its door to posts closed (the fault point holds that window: the
 * post is made there, on the context's thread, which has left its run): the
 * thread runs once more for it, so it runs before the thread returns and
 * nothing is left for the destroy to refuse.
 */
static struct late_post closing_post;
static atomic_int closing_posted;

static void post_while_closing(void *arg)
{
	co_engine *e = arg;

	if (atomic_exchange(&closing_posted, 1))
		return;
	closing_post.p.fn = late_post_fn;
	assert_int_equal(co_engine_post(e, &closing_post.p), 0);
}

static void test_post_while_door_closes(void **state)
{
	co_context c;
	(void)state;

	memset(&closing_post, 0, sizeof closing_post);
	atomic_store(&closing_posted, 0);
	assert_int_equal(co_context_init(&c, NULL), 0);
	co__fault_on_point(CO__POINT_POSTS_CLOSING, post_while_closing, &c.engine);
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_context_join(&c), 0);
	co__fault_on_point(CO__POINT_POSTS_CLOSING, NULL, NULL);
	assert_int_equal(atomic_load(&closing_posted), 1);
	assert_int_equal(atomic_load(&closing_post.ran), 1);
	assert_int_equal(co_context_destroy(&c), 0); /* -EBUSY: the post left behind */
}


/*
 * A post that reaches a manual context after an idle scheduler's destroy
 * looked (found nothing) and stopped its contexts (the fault point holds
 * that window; the post is made there): the manual context cannot end
 * before a tick ran it, and the ticker may be the destroying thread. The
 * destroy answers -EBUSY (a stop still finishing) instead of waiting for
 * that tick; the tick runs the post and ends the context, and a destroy
 * then frees everything.
 */
static struct late_post stopped_post;
static atomic_int stopped_posted;

static void post_when_stopped(void *arg)
{
	co_engine *e = arg;

	if (atomic_exchange(&stopped_posted, 1))
		return;
	stopped_post.p.fn = late_post_fn;
	assert_int_equal(co_engine_post(e, &stopped_post.p), 0);
}

static void test_post_during_idle_destroy(void **state)
{
	static const co_sched_group g[2] = { { .contexts = 1 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	co_context *logic;
	co_sched s;
	int r;
	(void)state;

	alarm(60); /* a destroy that waits for this thread's tick never returns */
	for (int ticked = 0; ticked < 2; ticked++) {
		memset(&stopped_post, 0, sizeof stopped_post);
		atomic_store(&stopped_posted, 0);
		assert_int_equal(co_sched_init(&s, &o), 0);
		logic = co_sched_pick(&s, 1);
		if (ticked)
			assert_true(co_context_tick(logic) >= 0);
		co__fault_on_point(CO__POINT_SCHED_STOPPED, post_when_stopped, &logic->engine);
		r = co_sched_destroy(&s);
		co__fault_on_point(CO__POINT_SCHED_STOPPED, NULL, NULL);
		assert_int_equal(r, -EBUSY);
		assert_int_equal(atomic_load(&stopped_posted), 1);
		assert_int_equal(atomic_load(&stopped_post.ran), 0);
		assert_int_equal(co_context_state(logic), CO_CONTEXT_RUNNING);
		assert_true(co_context_tick(logic) >= 0);
		assert_int_equal(atomic_load(&stopped_post.ran), 1);
		assert_int_equal(co_context_state(logic), CO_CONTEXT_ENDED);
		while ((r = co_sched_destroy(&s)) == -EBUSY) /* the threaded context ends */
			usleep(100);
		assert_int_equal(r, 0);
	}
	alarm(0);
}

/*
 * A manual context is ended by another thread (co_sched_poll's end_manual)
 * while its ticker's tick runs the post that was pending: the poll looked
 * (stopped, nothing live, a post pending), then the tick took the post
 * (the fault point, on the polling thread, holds that window until the
 * post runs). The context must not be ended while its post still runs: the
 * poll leaves it to the tick, whose own end ends it once the post ran.
 */
struct racing_tick {
	co_context *c;
	pthread_t poller;
	struct late_post p;
	atomic_int go, post_running, polled, state_in_post, armed;
};

static struct racing_tick rt;

static void racing_post_fn(co_post *p)
{
	atomic_store(&rt.post_running, 1);
	WAIT_UNTIL(atomic_load(&rt.polled));
	atomic_store(&rt.state_in_post, co_context_state(rt.c));
	late_post_fn(p);
}

static void *racing_ticker(void *arg)
{
	(void)arg;
	assert_true(co_context_tick(rt.c) >= 0); /* the ticker */
	WAIT_UNTIL(atomic_load(&rt.go));
	assert_true(co_context_tick(rt.c) >= 0); /* runs the post */
	return NULL;
}

/* The poller's end_manual is closing the door: let the ticker take the
 * post and start it first. */
static void tick_while_closing(void *arg)
{
	(void)arg;
	if (!pthread_equal(pthread_self(), rt.poller) || !atomic_exchange(&rt.armed, 0))
		return;
	atomic_store(&rt.go, 1);
	WAIT_UNTIL(atomic_load(&rt.post_running));
}

static void test_manual_not_ended_under_its_post(void **state)
{
	static const co_sched_group g[2] = { { .contexts = 1 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	pthread_t th;
	co_sched s;
	int r;
	(void)state;

	alarm(60);
	memset(&rt, 0, sizeof rt);
	assert_int_equal(co_sched_init(&s, &o), 0);
	rt.c = co_sched_pick(&s, 1);
	rt.poller = pthread_self();
	rt.p.p.fn = racing_post_fn;
	assert_int_equal(pthread_create(&th, NULL, racing_ticker, NULL), 0);
	WAIT_UNTIL(atomic_load(&rt.c->ticked));
	assert_int_equal(co_engine_post(&rt.c->engine, &rt.p.p), 0);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	atomic_store(&rt.armed, 1);
	co__fault_on_point(CO__POINT_POSTS_CLOSING, tick_while_closing, NULL);
	r = co_sched_poll(&s); /* its end_manual meets the tick */
	co__fault_on_point(CO__POINT_POSTS_CLOSING, NULL, NULL);
	atomic_store(&rt.polled, 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(atomic_load(&rt.go), 1); /* the window was held */
	assert_int_equal(atomic_load(&rt.p.ran), 1);
	assert_int_equal(atomic_load(&rt.state_in_post), CO_CONTEXT_RUNNING); /* ENDED */
	assert_int_equal(co_context_state(rt.c), CO_CONTEXT_ENDED); /* the tick's end */
	(void)r;
	WAIT_UNTIL((r = co_sched_poll(&s)) != -EAGAIN);
	assert_int_equal(r, 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	alarm(0);
}

/* ---- a task spawned twice while it lives ----------------------------------------------- */

/*
 * scheduler.md, Errors: "co_sched_spawn, _kind, _key, _to | -EINVAL (...,
 * started or spawned frame, ...)". test_errors spawns a finished frame
 * again; here the task is live: queued on a manual context this thread
 * ticks (so no other thread runs it while it is spawned again), then
 * parked on an event. Each spawn call, into this scheduler and into
 * another, answers -EINVAL, nothing is counted (co_sched_tasks stays 1),
 * and the task runs once.
 */
static void test_spawn_live_task_refused(void **state)
{
	static const co_sched_group g2[2] = { { .contexts = 2 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g2, .ngroups = 2 }, ot = { .contexts = 1 };
	co_sched s, t;
	co_event ev;
	struct gated g = { .ev = &ev };
	co_context *logic;
	int r;
	(void)state;

	assert_int_equal(co_sched_init(&s, &o), 0);
	assert_int_equal(co_sched_init(&t, &ot), 0);
	assert_int_equal(co_event_init(&ev, 0), 0);
	logic = co_sched_pick(&s, 1);
	co_init(&g.co, gated_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 1, &g.co), 0);
	for (int round = 0; round < 2; round++) { /* queued; then parked */
		assert_int_equal(co_sched_spawn(&s, &g.co), -EINVAL);
		assert_int_equal(co_sched_spawn_kind(&s, 1, &g.co), -EINVAL);
		assert_int_equal(co_sched_spawn_key(&s, 0, UINT64_MAX, &g.co), -EINVAL);
		assert_int_equal(co_sched_spawn_to(&s, 1, &g.co), -EINVAL);
		assert_int_equal(co_sched_spawn(&t, &g.co), -EINVAL);
		assert_int_equal(co_sched_tasks(&s), 1);
		assert_int_equal(co_sched_tasks(&t), 0);
		assert_true(co_context_tick(logic) >= 0);
	}
	assert_false(co_done(&g.co));
	assert_int_equal(co_event_set(&ev), 0);
	while ((r = co_sched_poll(&s)) == -EAGAIN)
		assert_true(co_context_tick(logic) >= 0);
	assert_int_equal(r, 0);
	assert_int_equal(co_status(&g.co), 0);
	assert_int_equal(co_sched_tasks(&s), 0);
	assert_int_equal(co_sched_run(&t), 0);
	assert_int_equal(co_sched_destroy(&t), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_event_destroy(&ev), 0);
}

/* engine.md: a scheduler's contexts are allocated on cache lines, so
 * each engine's words written by other threads (from `live` on) start a
 * line of their own. A plain calloc answers 16-byte multiples; several
 * schedulers, with allocations of other sizes between them, are all
 * aligned. */
static void test_contexts_on_their_own_lines(void **state)
{
	enum { N = 4 };
	co_sched s[N];
	void *noise[N];
	(void)state;
	/* the types themselves: what aligned_alloc must be given on the heap */
	assert_int_equal(_Alignof(co_sched), CO_CACHELINE);
	assert_int_equal(_Alignof(co_context), CO_CACHELINE);
	assert_int_equal(_Alignof(co_engine), CO_CACHELINE);
	for (int i = 0; i < N; i++) {
		noise[i] = malloc(24 + 16 * (size_t)i);
		assert_non_null(noise[i]);
		assert_int_equal(co_sched_init(&s[i], &(co_sched_opts){ .contexts = 2 + (unsigned)i }), 0);
		for (unsigned k = 0; k < s[i].n; k++) {
			assert_int_equal((uintptr_t)&s[i].ctx[k] % CO_CACHELINE, 0);
			assert_int_equal((uintptr_t)&s[i].ctx[k].engine.live % CO_CACHELINE, 0);
		}
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(co_sched_destroy(&s[i]), 0);
		free(noise[i]);
	}
	/* the allocation under it: zeroed, aligned, and NULL for a count
	 * whose bytes overflow a size_t */
	unsigned char *p = co__calloc_aligned(CO_CACHELINE, 3, 40);
	assert_non_null(p);
	assert_int_equal((uintptr_t)p % CO_CACHELINE, 0);
	for (int i = 0; i < 120; i++)
		assert_int_equal(p[i], 0);
	free(p);
	assert_null(co__calloc_aligned(CO_CACHELINE, SIZE_MAX / 4 + 2, 4)); /* 4 B, wrapped */
}

/*
 * context.h: a stopped manual context ends (its tick answers -ESHUTDOWN)
 * once nothing is left on it, its I/O included. A frame's turn wait under
 * a co_timeout: the tick that ends the frame sends the limit's kernel
 * timer a remove, and the next ticks reap their completions. Ended at
 * that tick, no tick would come to reap them: co_sched_destroy answered
 * -EBUSY for good, and the timer's record leaked. In between, the
 * ticker's co_sched_run answers -EBUSY (it has ticks to do) rather than
 * wait for itself, and another thread's run waits for those ticks; it
 * looks while the last of them holds its quiet engine
 * (CO__POINT_TICK_QUIET), and answers 0.
 */
struct limited_turn {
	co_frame co;
	co_turn t;
	co_limit lim;
	int res;
};

static int limited_turn_fn(co_frame *f)
{
	struct limited_turn *x = (struct limited_turn *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_timeout(&x->lim, co_next_turn(&x->t), 10 * CO_S));
	x->res = co_result(f);
	CO_END(f);
}

static atomic_int run_returned, hold_quiet_tick;

static void *run_sched(void *arg)
{
	void *ret = (void *)(intptr_t)co_sched_run((co_sched *)arg);

	atomic_store(&run_returned, 1);
	return ret;
}

/* The tick that reaped the last completions has raised its engine's quiet
 * flag: the other thread's run looks at the scheduler now, the context
 * not ended yet (its I/O done, io_due 0 already: a look that read the
 * flag with the last tick's count would say -EDEADLK). */
static void quiet_tick_held(void *arg)
{
	(void)arg;
	if (!atomic_load(&hold_quiet_tick))
		return;
	while (!atomic_load(&run_returned))
		sched_yield();
}

static void test_manual_ends_after_its_io(void **state)
{
	co_sched s;
	co_context *logic;
	struct limited_turn x;
	pthread_t runner;
	void *ret;
	int r, ticks = 0;
	(void)state;

	alarm(10); /* a run that waits for its own ticks never returns */
	{
		static const co_sched_group g[2] = { { .contexts = 1 }, { .manual = 1 } };
		co_sched_opts o = { .groups = g, .ngroups = 2 };

		assert_int_equal(co_sched_init(&s, &o), 0);
	}
	logic = co_sched_pick(&s, 1);
	assert_true(co_context_tick(logic) >= 0); /* this thread ticks it */
	memset(&x, 0, sizeof x);
	x.res = 1;
	co_init(&x.co, limited_turn_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 1, &x.co), 0);
	assert_true(co_context_tick(logic) >= 0); /* x waits for the next turn */
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	assert_true(co_context_tick(logic) >= 0); /* x ends: its timer is removed */
	assert_true(co_done(&x.co));
	assert_int_equal(x.res, 0);
	assert_int_equal(co_status(&x.co), 0);
	/* the remove went in at that tick's end: its CQEs are due */
	assert_int_equal(co_context_state(logic), CO_CONTEXT_RUNNING);
	assert_int_equal(co_sched_run(&s), -EBUSY);
	atomic_store(&run_returned, 0);
	atomic_store(&hold_quiet_tick, 1);
	co__fault_on_point(CO__POINT_TICK_QUIET, quiet_tick_held, NULL);
	assert_int_equal(pthread_create(&runner, NULL, run_sched, &s), 0);
	while ((r = co_context_tick(logic)) >= 0)
		assert_true(++ticks < 1000000);
	co__fault_on_point(CO__POINT_TICK_QUIET, NULL, NULL);
	atomic_store(&hold_quiet_tick, 0);
	assert_int_equal(r, -ESHUTDOWN);
	assert_int_equal(pthread_join(runner, &ret), 0);
	assert_int_equal((intptr_t)ret, 0);
	assert_int_equal(co_context_state(logic), CO_CONTEXT_ENDED);
	assert_int_equal(logic->engine.inflight, 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	alarm(0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_contexts_on_their_own_lines),
		cmocka_unit_test(test_million_tasks),
		cmocka_unit_test(test_spawns_race_end_of_run),
		cmocka_unit_test(test_transfer),
		cmocka_unit_test(test_transfer_errors),
		cmocka_unit_test(test_transfer_asked_to_cancel),
		cmocka_unit_test(test_transfer_across_schedulers),
		cmocka_unit_test(test_context_misuse),
		cmocka_unit_test(test_one_join_at_a_time),
		cmocka_unit_test(test_destroy_racing_start),
		cmocka_unit_test(test_join_and_destroy_during_start),
		cmocka_unit_test(test_cancel_stop_during_failing_start),
		cmocka_unit_test(test_transfer_refused_leaves_frame_as_it_was),
		cmocka_unit_test(test_stealing_spreads_work),
		cmocka_unit_test(test_stealing_takes_io_woken_frames),
		cmocka_unit_test(test_no_stealing_keeps_work),
		cmocka_unit_test(test_dispatch_strategies),
		cmocka_unit_test(test_run_waits_for_io),
		cmocka_unit_test(test_parked_frame_keeps_context_alive),
		cmocka_unit_test(test_submit_from_task_and_ownership),
		cmocka_unit_test(test_shutdown_cancels_blocked_tasks),
		cmocka_unit_test(test_spawns_race_destroy),
		cmocka_unit_test(test_busy_destroy_refuses_no_spawn),
		cmocka_unit_test(test_spawns_race_stop),
		cmocka_unit_test(test_run_from_inside_is_refused),
		cmocka_unit_test(test_run_with_unticked_manual),
		cmocka_unit_test(test_run_waits_for_another_ticker),
		cmocka_unit_test(test_destroy_while_stopping),
		cmocka_unit_test(test_poll_after_stop_waits_for_threads),
		cmocka_unit_test(test_two_destroys_at_once),
		cmocka_unit_test(test_timed_stop_never_cancels_parked),
		cmocka_unit_test(test_post_after_context_ended),
		cmocka_unit_test(test_post_while_door_closes),
		cmocka_unit_test(test_post_during_idle_destroy),
		cmocka_unit_test(test_manual_not_ended_under_its_post),
		cmocka_unit_test(test_manual_ends_after_its_io),
		cmocka_unit_test(test_spawn_live_task_refused),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
