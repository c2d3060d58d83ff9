/* SPDX-License-Identifier: MIT */
/*
 * The loop's completion walk (lib/engine/engine_loop.c, reap; docs/engine.md,
 * "The loop"): the first frame a walk's completions wake while nothing is
 * queued is kept aside and resumed at the walk's end. Frames still run in
 * the order they became ready: a frame a callback queued with co_wake
 * runs before a later completion's frame, later completions' frames are
 * queued behind the one kept aside; a stealing context and a tick keep no
 * frame aside; every completion of the walk is in before the frame runs;
 * under a cancel stop every frame is marked before it runs; a waiter woken
 * by a frame the walk resumes, or by one resumed from the queue, is not
 * lost. Each frame notes the order, or the tick, it ran in.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <coring/coring.h>
#include <coring/scheduler.h>
#include <coring/stream.h>

#include "helpers.h"

/* The order frames ran in, a letter each. */
static char order[32];
static atomic_int n_order;

static void ran(char c)
{
	order[atomic_fetch_add(&n_order, 1)] = c;
}

static void order_reset(void)
{
	memset(order, 0, sizeof order);
	atomic_store(&n_order, 0);
}

/* A user's awaiter whose completion callback wakes with co_wake (the
 * generic path: a push onto the queue), for a nop of its own SQE. */
struct unop {
	co_awaiter aw;
	co_io_info info;
	co_frame *frame;
};

static void unop_done(co_engine *e, co_io_info *info, int res, unsigned flags, unsigned tag)
{
	struct unop *u = (struct unop *)((char *)info - offsetof(struct unop, info));

	(void)e, (void)res, (void)flags, (void)tag;
	co_wake(u->frame);
}

static int unop_suspend(co_awaiter *a, co_frame *f)
{
	struct unop *u = (struct unop *)a;
	struct io_uring_sqe *sqe = co_engine_sqe(co_engine_current(), &u->info, 0);

	if (sqe == NULL)
		return 0;
	io_uring_prep_nop(sqe);
	u->frame = f;
	return 1;
}

static const co_awaiter_ops unop_ops = { NULL, unop_suspend, NULL, NULL, 0, "unop" };

static co_awaiter *unop(struct unop *u)
{
	u->aw.ops = &unop_ops;
	u->info.cb = unop_done;
	return &u->aw;
}

/* A gate: waits until a frame opens it with co_wake. */
struct gate {
	co_awaiter aw;
	co_frame *frame;
};

static int gate_suspend(co_awaiter *a, co_frame *f)
{
	((struct gate *)a)->frame = f;
	return 1;
}

static const co_awaiter_ops gate_ops = { NULL, gate_suspend, NULL, NULL, 0, "gate" };

static co_awaiter *gate_wait(struct gate *g)
{
	g->aw.ops = &gate_ops;
	g->frame = NULL;
	return &g->aw;
}

/* ---- a callback's push keeps its place ------------------------------------------ */

struct letter {
	co_frame co;
	co_io io;
	struct unop u;
	struct gate g;
	struct letter *opens;     /* woken (a gate) once this one ran */
	atomic_int *release;      /* set at the end (a held context's spinner) */
	char c;
	int by_callback, by_gate;
};

static int letter_fn(co_frame *f)
{
	struct letter *l = (struct letter *)f;

	CO_BEGIN(f);
	if (l->by_gate)
		CO_AWAIT(f, gate_wait(&l->g));
	else if (l->by_callback)
		CO_AWAIT(f, unop(&l->u));
	else
		CO_AWAIT(f, co_nop(&l->io));
	ran(l->c);
	if (l->opens)
		co_wake(l->opens->g.frame);
	if (l->release)
		atomic_store(l->release, 1);
	CO_END(f);
}

static void letter_init(struct letter *l, char c, int by_callback)
{
	memset(l, 0, sizeof *l);
	l->c = c;
	l->by_callback = by_callback;
	co_init(&l->co, letter_fn);
}

/* X's callback queues X with co_wake; Y's completion, dispatched next in
 * the same walk, finds the queue holding X: Y runs after it. */
static void test_callback_push_keeps_its_place(void **state)
{
	struct letter x, y;
	co_frame *fs[2] = { &x.co, &y.co };

	(void)state;
	order_reset();
	letter_init(&x, 'X', 1);
	letter_init(&y, 'Y', 0);
	co_test_run_frames(fs, 2);
	assert_string_equal(order, "XY");
}

/* A's and C's completions come in one walk: A is kept aside, C queued; A
 * opens B's gate (B queued behind C): A, C, B, the order they became
 * ready. */
static void test_later_completions_queue(void **state)
{
	struct letter a, b, c;
	co_frame *fs[3] = { &b.co, &a.co, &c.co };

	(void)state;
	order_reset();
	alarm(10); /* a frame lost from the walk hangs the run: fail, not wait */
	letter_init(&a, 'A', 0);
	letter_init(&b, 'B', 0);
	letter_init(&c, 'C', 0);
	b.by_gate = 1;
	a.opens = &b;
	co_test_run_frames(fs, 3);
	alarm(0);
	assert_string_equal(order, "ACB");
}

/* F's completion comes first in a walk, a nop G prepared after it second
 * (its callback wakes nothing, it only notes that it ran): when F runs,
 * the walk has dispatched both. */
static atomic_int second_in;
static co_io_info second_info;

static void second_done(co_engine *e, co_io_info *info, int res, unsigned flags, unsigned tag)
{
	(void)e, (void)info, (void)res, (void)flags, (void)tag;
	atomic_store(&second_in, 1);
}

struct first {
	co_frame co;
	co_io io;
	int saw_second;
};

static int first_fn(co_frame *f)
{
	struct first *x = (struct first *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&x->io));
	x->saw_second = atomic_load(&second_in);
	CO_END(f);
}

struct second {
	co_frame co;
};

static int second_fn(co_frame *f)
{
	struct io_uring_sqe *sqe;

	CO_BEGIN(f);
	second_info.cb = second_done;
	sqe = co_engine_sqe(co_engine_current(), &second_info, 0);
	assert_non_null(sqe);
	io_uring_prep_nop(sqe);
	CO_END(f);
}

static void test_all_completions_in_first(void **state)
{
	struct first x = { 0 };
	struct second y;
	co_frame *fs[2] = { &x.co, &y.co };

	(void)state;
	atomic_store(&second_in, 0);
	co_init(&x.co, first_fn);
	co_init(&y.co, second_fn);
	co_test_run_frames(fs, 2);
	assert_int_equal(x.saw_second, 1);
}

/* ---- a stealing context ------------------------------------------------------------ */

/* Keeps context 1's thread inside its resume, so that it steals nothing,
 * until released. */
struct spinner {
	co_frame co;
	atomic_int *spinning, *release;
};

static int spinner_fn(co_frame *f)
{
	struct spinner *s = (struct spinner *)f;

	CO_BEGIN(f);
	atomic_store(s->spinning, 1);
	while (!atomic_load(s->release))
		;
	CO_END(f);
}

/* On a stealing context the queue is the ring thieves see: X's callback
 * pushes X there, and Y's completion is queued behind it, not resumed in
 * the walk. */
static void test_stealing_context_keeps_order(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2, .steal = 1, .engine = { .no_spin = 1 } };
	struct spinner sp = { 0 };
	struct letter x, y;
	atomic_int spinning = 0, release = 0;

	(void)state;
	order_reset();
	assert_int_equal(co_sched_init(&s, &o), 0);
	sp.spinning = &spinning;
	sp.release = &release;
	co_init(&sp.co, spinner_fn);
	assert_int_equal(co_sched_spawn_to(&s, 1, &sp.co), 0);
	WAIT_UNTIL(atomic_load(&spinning));
	letter_init(&x, 'X', 1);
	letter_init(&y, 'Y', 0);
	y.release = &release; /* the last to run lets context 1 go */
	x.release = NULL;
	assert_int_equal(co_sched_spawn_to(&s, 0, &x.co), 0);
	assert_int_equal(co_sched_spawn_to(&s, 0, &y.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_string_equal(order, "XY");
}

/* ---- a tick keeps no frame aside ---------------------------------------------------- */

static long tick_now;

struct ticker {
	co_frame co;
	co_io io;
	int k;
	long done_at[3], yield_at[3]; /* the tick a nop's end and a yield's end ran in */
};

static int ticker_fn(co_frame *f)
{
	struct ticker *t = (struct ticker *)f;

	CO_BEGIN(f);
	for (t->k = 0; t->k < 3; t->k++) {
		CO_AWAIT(f, co_nop(&t->io));
		t->done_at[t->k] = tick_now;
		CO_YIELD(f);
		t->yield_at[t->k] = tick_now;
	}
	CO_END(f);
}

/* A tick takes its completions in first and runs their frames with the
 * others: a frame resumed by a completion that then yields runs again at
 * the next tick, never in the same one (the walk of a tick keeps no frame
 * aside, or its yield would be taken up by the same tick). */
static void test_tick_keeps_no_frame_aside(void **state)
{
	co_engine e;
	struct ticker t = { 0 };

	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&t.co, ticker_fn);
	assert_int_equal(co_engine_spawn(&e, &t.co), 0);
	for (tick_now = 1; tick_now < 100 && !co_done(&t.co); tick_now++)
		assert_true(co_engine_tick(&e) >= 0);
	assert_true(co_done(&t.co));
	for (int k = 0; k < 3; k++)
		assert_true(t.yield_at[k] > t.done_at[k]);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* ---- a cancel stop marks a completion's frame before it runs ----------------------- */

struct stopped {
	co_frame co;
	co_io io;
	int fd, res, cancelled;
};

static int stopped_fn(co_frame *f)
{
	struct stopped *s = (struct stopped *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_read(&s->io, s->fd, &s->res, 1, (uint64_t)-1));
	s->res = co_result(f);
	s->cancelled = co_cancelled(f);
	CO_END(f);
}

struct stopper {
	co_frame co;
	co_io io;
	int res;
};

static int stopper_fn(co_frame *f)
{
	struct stopper *s = (struct stopper *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&s->io)); /* the reader's read is in by now */
	s->res = co_engine_stop(co_engine_current(), CO_STOP_CANCEL);
	CO_END(f);
}

/* The stop cancels the read; its completion comes in a walk under the
 * stop, so the frame runs from the queue, marked: co_cancelled() is true
 * at once, as the stop promises. */
static void test_cancel_stop_marks_completion_frame(void **state)
{
	struct stopped a = { 0 };
	struct stopper b = { 0 };
	co_frame *fs[2] = { &a.co, &b.co };
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	a.fd = p[0];
	co_init(&a.co, stopped_fn);
	co_init(&b.co, stopper_fn);
	co_test_run_frames(fs, 2);
	assert_int_equal(b.res, 0);
	assert_int_equal(a.res, -ECANCELED);
	assert_int_equal(a.cancelled, 1);
	close(p[0]);
	close(p[1]);
}

/* ---- a waiter woken by a frame the walk resumes ------------------------------------- */

struct victim {
	co_frame co;
	co_stream s;
	co_bufring *ring;
	int fd, res, close_res;
};

static int victim_fn(co_frame *f)
{
	struct victim *v = (struct victim *)f;

	CO_BEGIN(f);
	if (co_stream_open(&v->s, v->ring, v->fd) != 0)
		CO_RETURN(f, -1);
	CO_AWAIT(f, co_stream_recv(&v->s)); /* nothing comes: cancelled */
	v->res = co_result(f);
	CO_AWAIT(f, co_stream_close(&v->s));
	v->close_res = co_result(f);
	CO_END(f);
}

/* Resumed by its nops' completions (kept aside by the walk), or by
 * yields (from the queue), until the victim waits, then cancels it: the
 * stream's cancel wakes it on this thread. */
struct canceller {
	co_frame co;
	co_io io;
	struct victim *v;
	int by_yield, res, rounds;
};

static int canceller_fn(co_frame *f)
{
	struct canceller *c = (struct canceller *)f;

	CO_BEGIN(f);
	if (c->by_yield) {
		/* a completion that wakes no frame: its walk keeps none aside */
		struct io_uring_sqe *sqe = co_engine_sqe(co_engine_current(), &second_info, 0);

		second_info.cb = second_done;
		assert_non_null(sqe);
		io_uring_prep_nop(sqe);
	}
	do {
		if (c->by_yield)
			CO_YIELD(f);
		else
			CO_AWAIT(f, co_nop(&c->io));
	} while (!co_waiting(&c->v->co) && ++c->rounds < 1000);
	c->res = co_cancel(&c->v->co);
	CO_END(f);
}

static void cancel_stream_waiter(int by_yield)
{
	co_engine e;
	co_bufring ring;
	struct victim v = { 0 };
	struct canceller c = { 0 };
	int sv[2];

	alarm(10); /* a lost wake hangs the run: fail, not wait */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_bufring_init(&ring, &e, 4, 64), 0);
	v.ring = &ring;
	v.fd = sv[0];
	c.v = &v;
	c.by_yield = by_yield;
	co_init(&v.co, victim_fn);
	co_init(&c.co, canceller_fn);
	assert_int_equal(co_engine_spawn(&e, &v.co), 0);
	assert_int_equal(co_engine_spawn(&e, &c.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	alarm(0);
	assert_true(c.rounds < 1000);
	assert_int_equal(c.res, 0);
	assert_int_equal(v.res, -ECANCELED);
	assert_int_equal(v.close_res, 0);
	assert_int_equal(co_bufring_destroy(&ring), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	close(sv[0]);
	close(sv[1]);
}

static void test_waiter_woken_inside_walk_resume(void **state)
{
	(void)state;
	cancel_stream_waiter(0);
}

/* The same from a frame resumed from the queue, after a walk whose
 * completion woke no frame: that walk left nothing open. */
static void test_waiter_woken_outside_walk(void **state)
{
	(void)state;
	cancel_stream_waiter(1);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_callback_push_keeps_its_place),
	cmocka_unit_test(test_later_completions_queue),
	cmocka_unit_test(test_all_completions_in_first),
	cmocka_unit_test(test_stealing_context_keeps_order),
	cmocka_unit_test(test_tick_keeps_no_frame_aside),
	cmocka_unit_test(test_cancel_stop_marks_completion_frame),
	cmocka_unit_test(test_waiter_woken_inside_walk_resume),
	cmocka_unit_test(test_waiter_woken_outside_walk),
};

CO_TEST_MAIN(tests, 1)
