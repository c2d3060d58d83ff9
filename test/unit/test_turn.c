/* SPDX-License-Identifier: MIT */
/*
 * Turns and ticks (lib/engine/engine_turn.c, the loop in lib/engine/engine_loop.c): a frame
 * that yields, awaits co_next_turn or transfers to its own context runs at
 * the next turn, never the one that is running; a tick runs every frame
 * ready when it began once, then the frames those wake, up to opts.batch;
 * co_after_turns counts turns; a threaded loop's next turn comes after the
 * completions of the turn before. Each step records the tick it ran in.
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
#include <stdatomic.h>
#include <unistd.h>
#include <cmocka.h>

#include <coring/coring.h>
#include <coring/scheduler.h>
#include "helpers.h"

static long tick_now; /* the tick the test's loop is in (1, 2, ...) */

enum { BY_YIELD, BY_NEXT_TURN, BY_TRANSFER };

#define STEPS 8

struct stepper {
	co_frame co;
	co_turn turn;
	co_transfer tr;
	co_context *home;         /* BY_TRANSFER: the context it is on */
	int how, steps, k, res;
	long at[STEPS + 1];       /* the tick each step ran in */
};

static int stepper_fn(co_frame *f)
{
	struct stepper *s = (struct stepper *)f;
	CO_BEGIN(f);
	for (s->k = 0; s->k < s->steps; s->k++) {
		s->at[s->k] = tick_now;
		if (s->how == BY_YIELD) {
			CO_YIELD(f);
		} else if (s->how == BY_NEXT_TURN) {
			CO_AWAIT(f, co_next_turn(&s->turn));
			if (co_result(f) != 0)
				s->res = co_result(f);
		} else {
			CO_AWAIT(f, co_transfer_to(&s->tr, s->home));
			if (co_result(f) != 0)
				s->res = co_result(f);
		}
	}
	s->at[s->k] = tick_now;
	CO_END(f);
}

static void stepper_init(struct stepper *s, int how, int steps)
{
	memset(s, 0, sizeof *s);
	s->how = how;
	s->steps = steps;
	co_init(&s->co, stepper_fn);
}

/* Tick until every frame finished; each tick's resumes in per_tick[]. */
static long tick_all(int (*tick)(void *arg), void *arg, struct stepper *s, int n, int *per_tick,
		     long max_ticks)
{
	long t;

	for (t = 1; t <= max_ticks; t++) {
		int done = 1, r;

		tick_now = t;
		r = tick(arg);
		assert_true(r >= 0);
		if (per_tick)
			per_tick[t] = r;
		for (int i = 0; i < n; i++)
			done &= co_done(&s[i].co);
		if (done)
			return t;
	}
	fail_msg("not finished after %ld ticks", max_ticks);
	return -1;
}

static int engine_tick_fn(void *arg)
{
	return co_engine_tick(arg);
}

static int context_tick_fn(void *arg)
{
	return co_context_tick(arg);
}

/* Step k of every frame ran in tick k + 1: one step per frame per tick. */
static void check_one_step_per_tick(struct stepper *s, int n, int steps)
{
	for (int i = 0; i < n; i++) {
		assert_int_equal(s[i].res, 0);
		for (int k = 0; k <= steps; k++)
			if (s[i].at[k] != k + 1)
				fail_msg("frame %d: step %d ran in tick %ld, not %d", i, k, s[i].at[k],
					 k + 1);
	}
}

/* Two frames, eight next-frame waits each, by CO_YIELD and by
 * co_next_turn, on an engine ticked by hand: tick 1 resumes 2 frames (not
 * 18), and every later tick 2. */
static void run_two_frames(int how)
{
	co_engine e;
	struct stepper s[2];
	int per_tick[STEPS + 2] = { 0 };
	long ticks;

	assert_int_equal(co_engine_init(&e, NULL), 0);
	for (int i = 0; i < 2; i++) {
		stepper_init(&s[i], how, STEPS);
		assert_int_equal(co_engine_spawn(&e, &s[i].co), 0);
	}
	ticks = tick_all(engine_tick_fn, &e, s, 2, per_tick, STEPS + 1);
	assert_int_equal(ticks, STEPS + 1);
	for (long t = 1; t <= ticks; t++)
		assert_int_equal(per_tick[t], 2);
	check_one_step_per_tick(s, 2, STEPS);
	assert_int_equal(co_engine_destroy(&e), 0);
}

static void test_yield_waits_for_next_tick(void **state)
{
	(void)state;
	run_two_frames(BY_YIELD);
}

static void test_next_turn_waits_for_next_tick(void **state)
{
	(void)state;
	run_two_frames(BY_NEXT_TURN);
}

/* co_transfer_to the manual context a frame is on: the next tick, too
 * (a scheduler's manual group, ticked with co_context_tick). */
static void test_transfer_to_self_waits_for_next_tick(void **state)
{
	static const co_sched_group groups[1] = { { .manual = 1 } };
	co_sched sch;
	co_context *logic;
	struct stepper s[2];
	int per_tick[STEPS + 2] = { 0 };
	(void)state;
	assert_int_equal(co_sched_init(&sch, &(co_sched_opts){ .groups = groups, .ngroups = 1 }), 0);
	logic = co_sched_pick(&sch, 0);
	for (int i = 0; i < 2; i++) {
		stepper_init(&s[i], BY_TRANSFER, STEPS);
		s[i].home = logic;
		assert_int_equal(co_sched_spawn_kind(&sch, 0, &s[i].co), 0);
	}
	assert_int_equal(tick_all(context_tick_fn, logic, s, 2, per_tick, STEPS + 1), STEPS + 1);
	for (int t = 1; t <= STEPS + 1; t++)
		assert_int_equal(per_tick[t], 2);
	check_one_step_per_tick(s, 2, STEPS);
	assert_int_equal(co_sched_poll(&sch), 0);
	co_sched_stop(&sch, CO_STOP_DRAIN);
	assert_int_equal(co_sched_run(&sch), 0);
	assert_int_equal(co_sched_destroy(&sch), 0);
}

/* More frames than a batch (10,000 against 256): each tick resumes every
 * one of them, once. */
#define MANY 10000

static void test_every_ready_frame_once_per_tick(void **state)
{
	co_engine e;
	static struct stepper s[MANY];
	int per_tick[6] = { 0 };
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(e.batch, 256);
	for (int i = 0; i < MANY; i++) {
		stepper_init(&s[i], i % 2 ? BY_YIELD : BY_NEXT_TURN, 3);
		assert_int_equal(co_engine_spawn(&e, &s[i].co), 0);
	}
	assert_int_equal(tick_all(engine_tick_fn, &e, s, MANY, per_tick, 4), 4);
	for (int t = 1; t <= 4; t++)
		assert_int_equal(per_tick[t], MANY);
	check_one_step_per_tick(s, MANY, 3);
	assert_int_equal(co_engine_destroy(&e), 0);
	/* a batch near UINT_MAX: the same (ready + batch held at UINT_MAX,
	 * not wrapped to fewer than are ready) */
	memset(per_tick, 0, sizeof per_tick);
	assert_int_equal(co_engine_init(&e, &(co_engine_opts){ .batch = UINT_MAX }), 0);
	for (int i = 0; i < 10; i++) {
		stepper_init(&s[i], BY_YIELD, 3);
		assert_int_equal(co_engine_spawn(&e, &s[i].co), 0);
	}
	assert_int_equal(tick_all(engine_tick_fn, &e, s, 10, per_tick, 4), 4);
	for (int t = 1; t <= 4; t++)
		assert_int_equal(per_tick[t], 10);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* ---- wake-ups during a tick: the same tick, up to opts.batch --------------------------- */

struct setter {
	co_frame co;
	co_event *ev;
	long at;
};

static int setter_fn(co_frame *f)
{
	struct setter *s = (struct setter *)f;
	CO_BEGIN(f);
	s->at = tick_now;
	co_event_set(s->ev);
	CO_END(f);
}

struct waiter {
	co_frame co;
	co_waiter w;
	co_event *ev;
	long woke;
};

static int waiter_fn(co_frame *f)
{
	struct waiter *w = (struct waiter *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_event_wait(&w->w, w->ev));
	w->woke = tick_now;
	CO_END(f);
}

/* A frame that sets an event wakes its waiters into the same tick: the
 * seeds' "immediate" queue. */
static void test_wake_runs_in_same_tick(void **state)
{
	co_engine e;
	co_event ev;
	struct setter st;
	struct waiter w[3];
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_event_init(&ev, 0);
	for (int i = 0; i < 3; i++) {
		w[i].ev = &ev;
		co_init(&w[i].co, waiter_fn);
		assert_int_equal(co_engine_spawn(&e, &w[i].co), 0);
	}
	tick_now = 1;
	assert_int_equal(co_engine_tick(&e), 3); /* all three wait now */
	st.ev = &ev;
	co_init(&st.co, setter_fn);
	assert_int_equal(co_engine_spawn(&e, &st.co), 0);
	tick_now = 2;
	assert_int_equal(co_engine_tick(&e), 4); /* the setter, then its three waiters */
	assert_int_equal(st.at, 2);
	for (int i = 0; i < 3; i++)
		assert_int_equal(w[i].woke, 2);
	assert_int_equal(co_engine_destroy(&e), 0);
	co_event_destroy(&ev);
}

/* Two frames that wake each other back and forth (semaphores): the tick
 * runs them at most (ready at its start) + opts.batch times, then the
 * next tick goes on. */
#define BOUNCES 50

struct bouncer {
	co_frame co;
	co_waiter w;
	co_sem *mine, *other;
	int k, first;
};

static int bouncer_fn(co_frame *f)
{
	struct bouncer *b = (struct bouncer *)f;
	CO_BEGIN(f);
	for (b->k = 0; b->k < BOUNCES; b->k++) {
		if (b->first)
			co_sem_release(b->other, 1);
		CO_AWAIT(f, co_sem_acquire(&b->w, b->mine));
		if (!b->first)
			co_sem_release(b->other, 1);
	}
	CO_END(f);
}

static void test_wakes_in_a_tick_are_bounded(void **state)
{
	co_engine e;
	co_sem sa, sb;
	struct bouncer a = { .mine = &sa, .other = &sb, .first = 1 };
	struct bouncer b = { .mine = &sb, .other = &sa };
	long ticks = 0, resumes = 0;
	int r;
	(void)state;
	assert_int_equal(co_engine_init(&e, &(co_engine_opts){ .batch = 4 }), 0);
	co_sem_init(&sa, 0);
	co_sem_init(&sb, 0);
	co_init(&a.co, bouncer_fn);
	co_init(&b.co, bouncer_fn);
	assert_int_equal(co_engine_spawn(&e, &a.co), 0);
	assert_int_equal(co_engine_spawn(&e, &b.co), 0);
	while (!co_done(&a.co) || !co_done(&b.co)) {
		r = co_engine_tick(&e);
		/* at most 2 ready at a tick's start (the pair), + batch 4 */
		assert_true(r >= 0 && r <= 2 + 4);
		resumes += r;
		assert_true(++ticks < 10 * BOUNCES);
	}
	/* each of the 2 * 50 waits resumed once, and each frame started */
	assert_true(resumes >= 2 * BOUNCES);
	assert_true(ticks >= 2 * BOUNCES / 6);
	print_message("      %ld resumes in %ld ticks\n", resumes, ticks);
	assert_int_equal(co_engine_destroy(&e), 0);
	co_sem_destroy(&sa);
	co_sem_destroy(&sb);
}

/* ---- co_after_turns ------------------------------------------------------------------ */

struct sleeper {
	co_frame co;
	co_turn turn;
	unsigned n;
	long began, woke;
	int res;
};

static int sleeper_fn(co_frame *f)
{
	struct sleeper *s = (struct sleeper *)f;
	CO_BEGIN(f);
	s->began = tick_now;
	CO_AWAIT(f, co_after_turns(&s->turn, s->n));
	s->res = co_result(f);
	s->woke = tick_now;
	CO_END(f);
}

static void sleeper_init(struct sleeper *s, unsigned n)
{
	memset(s, 0, sizeof *s);
	s->n = n;
	s->res = 1;
	co_init(&s->co, sleeper_fn);
}

/* co_after_turns(n) resumes exactly n ticks later; 0 does not wait. */
static void test_after_turns_counts_ticks(void **state)
{
	static const unsigned ns[] = { 0, 1, 2, 5, 17 };
	struct sleeper s[5];
	co_engine e;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	for (int i = 0; i < 5; i++) {
		sleeper_init(&s[i], ns[i]);
		assert_int_equal(co_engine_spawn(&e, &s[i].co), 0);
	}
	for (tick_now = 1; tick_now <= 20; tick_now++)
		assert_true(co_engine_tick(&e) >= 0);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(s[i].res, 0);
		assert_int_equal(s[i].began, 1);
		assert_int_equal(s[i].woke, 1 + (long)ns[i]);
	}
	assert_int_equal(co_engine_destroy(&e), 0);
}

static void *cancel_from_thread(void *arg)
{
	return (void *)(intptr_t)co_cancel(arg);
}

/* A wait of UINT_MAX turns ends with -ECANCELED at the tick after a
 * co_cancel from another thread, and under a cancel stop. */
static void test_after_turns_cancelled(void **state)
{
	struct sleeper s, t;
	co_engine e;
	pthread_t th;
	void *ret;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	sleeper_init(&s, UINT_MAX);
	sleeper_init(&t, UINT_MAX);
	assert_int_equal(co_engine_spawn(&e, &s.co), 0);
	assert_int_equal(co_engine_spawn(&e, &t.co), 0);
	for (tick_now = 1; tick_now <= 5; tick_now++)
		assert_int_equal(co_engine_tick(&e), tick_now == 1 ? 2 : 0);
	assert_int_equal(pthread_create(&th, NULL, cancel_from_thread, &s.co), 0);
	assert_int_equal(pthread_join(th, &ret), 0);
	assert_int_equal((intptr_t)ret, 0);
	tick_now = 6; /* takes the request, then the turn waits: it ends */
	assert_int_equal(co_engine_tick(&e), 1);
	assert_int_equal(s.res, -ECANCELED);
	assert_int_equal(s.woke, 6);
	assert_false(co_done(&t.co));
	assert_int_equal(co_engine_stop(&e, CO_STOP_CANCEL), 0);
	tick_now = 8; /* the stop begins: the turn wait ends at once */
	assert_int_equal(co_engine_tick(&e), 1);
	assert_int_equal(t.res, -ECANCELED);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* Not on an engine: -ENXIO at once; NULL: no awaiter (CO_AWAIT: -EINVAL). */
static void test_turn_errors(void **state)
{
	struct sleeper s;
	(void)state;
	assert_null(co_next_turn(NULL));
	assert_null(co_after_turns(NULL, 3));
	sleeper_init(&s, 1);
	assert_int_equal(co_resume(&s.co), CO_DONE); /* by hand: no engine */
	assert_int_equal(s.res, -ENXIO);
	sleeper_init(&s, 0);
	assert_int_equal(co_resume(&s.co), CO_DONE); /* n 0: no wait, on no engine either */
	assert_int_equal(s.res, 0);
}

/* ---- a tick takes in the completions that are there when it begins ------------------ */

struct piper {
	co_frame co;
	co_io io;
	int fd, res;
	long woke;
	char c;
};

static int piper_fn(co_frame *f)
{
	struct piper *p = (struct piper *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_read(&p->io, p->fd, &p->c, 1, (uint64_t)-1));
	p->res = co_result(f);
	p->woke = tick_now;
	CO_END(f);
}

/* Data that arrived between two ticks is read by the next tick: its
 * completion is taken in before the frames run. */
static void test_tick_takes_completions_first(void **state)
{
	co_engine e;
	struct piper p = { .res = -1000 };
	int fds[2];
	(void)state;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	p.fd = fds[0];
	co_init(&p.co, piper_fn);
	assert_int_equal(co_engine_spawn(&e, &p.co), 0);
	for (tick_now = 1; tick_now <= 3; tick_now++)
		assert_int_equal(co_engine_tick(&e), tick_now == 1);
	assert_int_equal(write(fds[1], "x", 1), 1);
	tick_now = 4;
	assert_int_equal(co_engine_tick(&e), 1);
	assert_int_equal(p.res, 1);
	assert_int_equal(p.woke, 4);
	assert_int_equal(co_engine_destroy(&e), 0);
	close(fds[0]);
	close(fds[1]);
}

/* ---- a threaded loop: the next turn comes after this turn's completions -------------- */

struct io_first {
	co_frame co;
	co_io io;
	int *order, *n;
};

static int io_first_fn(co_frame *f)
{
	struct io_first *x = (struct io_first *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&x->io));
	x->order[(*x->n)++] = 'I';
	CO_END(f);
}

struct turn_second {
	co_frame co;
	co_turn turn;
	int *order, *n, yield;
};

static int turn_second_fn(co_frame *f)
{
	struct turn_second *x = (struct turn_second *)f;
	CO_BEGIN(f);
	if (x->yield)
		CO_YIELD(f);
	else
		CO_AWAIT(f, co_next_turn(&x->turn));
	x->order[(*x->n)++] = 'T';
	CO_END(f);
}

/* Frame I awaits a nop, frame T (queued after it) the next turn: T runs
 * after I's completion, in the next turn of co_engine_run. A yield that
 * went to the back of the queue would run T first. */
static void test_next_turn_after_completions(void **state)
{
	(void)state;
	for (int yield = 0; yield < 2; yield++) {
		co_engine e;
		struct io_first a;
		struct turn_second b;
		int order[2], n = 0;

		assert_int_equal(co_engine_init(&e, NULL), 0);
		a.order = b.order = order;
		a.n = b.n = &n;
		b.yield = yield;
		co_init(&a.co, io_first_fn);
		co_init(&b.co, turn_second_fn);
		assert_int_equal(co_engine_spawn(&e, &a.co), 0);
		assert_int_equal(co_engine_spawn(&e, &b.co), 0);
		assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
		assert_int_equal(n, 2);
		assert_int_equal(order[0], 'I');
		assert_int_equal(order[1], 'T');
		assert_int_equal(co_engine_destroy(&e), 0);
	}
}

/* A frame that yields STEPS times on a threaded loop takes a turn for
 * each (a yield to the back of the queue would take one turn in all). */
static void test_yield_takes_a_turn(void **state)
{
	co_engine e;
	struct stepper s;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	stepper_init(&s, BY_YIELD, STEPS);
	assert_int_equal(co_engine_spawn(&e, &s.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_true(e.stats.turns >= STEPS + 1);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* While a turn wait is pending the threaded loop turns without sleeping:
 * 1,000 turns, and not one sleep. */
static void test_turn_wait_keeps_loop_awake(void **state)
{
	co_engine e;
	struct sleeper s;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	sleeper_init(&s, 1000);
	assert_int_equal(co_engine_spawn(&e, &s.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(s.res, 0);
	assert_true(e.stats.turns >= 1000);
	assert_int_equal(e.stats.waits, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* A turn wait beside a frame whose I/O is in flight (a sleep of an hour):
 * the loop still turns without sleeping until the wait is over, then the
 * waiter cancels the sleep. A loop that went to sleep on the I/O instead
 * (as a turn with nothing to do but wait may) would hang here: the alarm
 * fails it. */
struct turn_counter {
	co_frame co;
	co_turn turn;
	co_frame *nap;
	int res;
};

static int turn_counter_fn(co_frame *f)
{
	struct turn_counter *c = (struct turn_counter *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_after_turns(&c->turn, 1000));
	c->res = co_result(f);
	co_cancel(c->nap);
	CO_END(f);
}

static void test_turn_wait_beside_io(void **state)
{
	co_engine e;
	struct co_test_sleeper n;
	struct turn_counter c = { .res = 1, .nap = &n.co };
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_test_sleeper_init(&n, 3600 * CO_S);
	co_init(&c.co, turn_counter_fn);
	assert_int_equal(co_engine_spawn(&e, &n.co), 0);
	assert_int_equal(co_engine_spawn(&e, &c.co), 0);
	alarm(10);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	alarm(0);
	assert_int_equal(c.res, 0);
	assert_int_equal(n.res, -ECANCELED);
	assert_true(e.stats.turns >= 1000);
	assert_true(e.stats.waits < 10); /* the cancel's; none during the 1,000 */
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* The same on an engine thieves take from (context 0 of a stealing pair,
 * context 1 held inside a frame, so it steals nothing): the frame its
 * nop's completion wakes goes to the ring thieves see, not the owner's
 * FIFO, and the loop runs it rather than sleeping on the other frame's
 * hour-long sleep (the quick turn, which looks at the FIFO only, is for
 * engines without thieves). */
struct holder {
	co_frame co;
	atomic_int *held, *release;
};

static int holder_fn(co_frame *f)
{
	struct holder *h = (struct holder *)f;
	CO_BEGIN(f);
	atomic_store(h->held, 1);
	while (!atomic_load(h->release))
		;
	CO_END(f);
}

struct nop_canceller {
	co_frame co;
	co_io io;
	co_frame *nap;
	atomic_int *release;
};

static int nop_canceller_fn(co_frame *f)
{
	struct nop_canceller *c = (struct nop_canceller *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&c->io));
	co_cancel(c->nap);
	atomic_store(c->release, 1);
	CO_END(f);
}

static void test_stealing_engine_runs_its_ring_beside_io(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2, .steal = 1, .engine = { .no_spin = 1 } };
	atomic_int held = 0, release = 0;
	struct holder h = { .held = &held, .release = &release };
	struct co_test_sleeper n;
	struct nop_canceller c = { .nap = &n.co, .release = &release };
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	co_init(&h.co, holder_fn);
	assert_int_equal(co_sched_spawn_to(&s, 1, &h.co), 0);
	alarm(10); /* context 0 asleep on the sleep hangs the run: fail, not wait */
	WAIT_UNTIL(atomic_load(&held));
	co_test_sleeper_init(&n, 3600 * CO_S);
	co_init(&c.co, nop_canceller_fn);
	assert_int_equal(co_sched_spawn_to(&s, 0, &n.co), 0);
	assert_int_equal(co_sched_spawn_to(&s, 0, &c.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	alarm(0);
	assert_int_equal(n.res, -ECANCELED);
	assert_int_equal(co_sched_destroy(&s), 0);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_yield_waits_for_next_tick),
		cmocka_unit_test(test_next_turn_waits_for_next_tick),
		cmocka_unit_test(test_transfer_to_self_waits_for_next_tick),
		cmocka_unit_test(test_every_ready_frame_once_per_tick),
		cmocka_unit_test(test_wake_runs_in_same_tick),
		cmocka_unit_test(test_wakes_in_a_tick_are_bounded),
		cmocka_unit_test(test_after_turns_counts_ticks),
		cmocka_unit_test(test_after_turns_cancelled),
		cmocka_unit_test(test_turn_errors),
		cmocka_unit_test(test_tick_takes_completions_first),
		cmocka_unit_test(test_next_turn_after_completions),
		cmocka_unit_test(test_yield_takes_a_turn),
		cmocka_unit_test(test_turn_wait_keeps_loop_awake),
		cmocka_unit_test(test_turn_wait_beside_io),
		cmocka_unit_test(test_stealing_engine_runs_its_ring_beside_io),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
