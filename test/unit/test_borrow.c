/* SPDX-License-Identifier: MIT */
/*
 * Borrowing an engine (lib/engine/engine_state.c): a thread that takes an
 * engine that runs nowhere, as a run would, for a moment (a view reading
 * its frames, the cancel of a co_spawn_on child that has not started, the
 * cancel stop of a context that never started). A run, a destroy or
 * another borrower that comes meanwhile waits the borrow out and is never
 * refused for it. Each window of that race is held open with the
 * library's test points (fault injection).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <cmocka.h>

#include <coring/coring.h>
#include "common/fault.h"
#include "helpers.h"

/* A library built without the view (meson -Dview=false) has no view to
 * borrow with: the cases that use one skip. */
#define NEED_VIEW()                          \
	do {                                 \
		if (!co_view_available())    \
			skip();              \
	} while (0)

/* ---- a view borrows an engine that runs nowhere: a run or a destroy waits ---------- */

/* A view of an engine that runs nowhere takes the engine as a run would
 * (a borrow). A run or a destroy that finds it taken must wait the borrow
 * out, not give up as if a run held the engine. Three windows, each held
 * open with the library's test points: */
enum borrow_window {
	LEFT_BEFORE_LOOK, /* the borrow came first, and left between the taker's refused
	                     take and its look at the borrowers (CO__POINT_TAKE_REFUSED) */
	CAME_AFTER_LOOK,  /* the borrow came between the taker's look and its take
	                     (CO__POINT_TAKE), and left before it looked again */
	INSIDE_AT_LOOK,   /* the borrow still holds the engine when the taker looks:
	                     it leaves once the taker has tried again */
};

struct borrow_race {
	co_engine e;
	co_view v;
	pthread_t tv;
	enum borrow_window w;
	int view_ret, view_started;
	atomic_int borrowed, refused, borrow_done, takes, retried;
};

static struct borrow_race *race;

/* Bounded: a hook that waits forever would hang the test, not fail it. */
static void wait_flag(atomic_int *flag)
{
	for (int i = 0; i < 100000 && !atomic_load(flag); i++)
		usleep(100);
}

static void *view_thread(void *arg)
{
	struct borrow_race *b = arg;

	b->view_ret = co_view_engine(&b->v, &b->e, CO_VIEW_WAIT);
	atomic_store(&b->borrow_done, 1);
	return NULL;
}

static void start_view(struct borrow_race *b)
{
	assert_int_equal(pthread_create(&b->tv, NULL, view_thread, b), 0);
	b->view_started = 1;
	wait_flag(&b->borrowed);
}

static void hold_borrow(void *arg) /* the borrower, holding the engine */
{
	(void)arg;
	atomic_store(&race->borrowed, 1);
	wait_flag(race->w == INSIDE_AT_LOOK ? &race->retried : &race->refused);
}

static void at_take(void *arg) /* the taker, its look done */
{
	int n = atomic_fetch_add(&race->takes, 1);

	(void)arg;
	if (race->w == CAME_AFTER_LOOK && n == 0)
		start_view(race); /* the borrow comes now */
	if (race->w == INSIDE_AT_LOOK && n == 1)
		atomic_store(&race->retried, 1); /* the borrow may leave now */
}

static void at_refused(void *arg) /* the taker, refused */
{
	(void)arg;
	if (atomic_exchange(&race->refused, 1) == 0 && race->w != INSIDE_AT_LOOK)
		wait_flag(&race->borrow_done); /* the borrow leaves now */
}

/* Who takes the engine while the view borrows it. */
enum taker { BY_RUN, BY_TICK, BY_DESTROY };

static void *destroy_thread(void *arg)
{
	return (void *)(intptr_t)co_engine_destroy(arg);
}

static void *tick_thread(void *arg)
{
	return (void *)(intptr_t)co_engine_tick(arg);
}

static void borrow_race(enum taker by, enum borrow_window w)
{
	int destroy = by == BY_DESTROY;
	static struct borrow_race b;
	struct co_test_idler d;
	co_event ev;
	co_test_runner r;
	pthread_t td;
	void *dret;
	int ret;

	memset(&b, 0, sizeof b);
	race = &b;
	b.w = w;
	co_event_init(&ev, 1); /* set: the idler passes its wait at once */
	assert_int_equal(co_engine_init(&b.e, NULL), 0);
	if (!destroy) { /* a destroy refuses an engine with a live frame */
		co_test_idler_init(&d, &ev);
		assert_int_equal(co_engine_spawn(&b.e, &d.co), 0);
	}
	co__fault_on_point(CO__POINT_BORROWED, hold_borrow, NULL);
	co__fault_on_point(CO__POINT_TAKE, at_take, NULL);
	co__fault_on_point(CO__POINT_TAKE_REFUSED, at_refused, NULL);
	if (w != CAME_AFTER_LOOK)
		start_view(&b);
	if (by == BY_RUN) {
		co_test_runner_start(&r, &b.e, CO_RUN_UNTIL_IDLE);
		ret = co_test_runner_join(&r);
	} else {
		assert_int_equal(pthread_create(&td, NULL, destroy ? destroy_thread : tick_thread,
						&b.e), 0);
		assert_int_equal(pthread_join(td, &dret), 0);
		ret = (int)(intptr_t)dret;
	}
	co__fault_on_point(CO__POINT_TAKE, NULL, NULL);
	co__fault_on_point(CO__POINT_BORROWED, NULL, NULL);
	co__fault_on_point(CO__POINT_TAKE_REFUSED, NULL, NULL);
	assert_int_equal(b.view_started, 1);
	assert_int_equal(pthread_join(b.tv, NULL), 0);
	assert_int_equal(atomic_load(&b.borrowed), 1);
	assert_int_equal(atomic_load(&b.refused), 1); /* the window was held open */
	assert_true(atomic_load(&b.takes) >= 2);      /* and the taker tried again */
	/* waited the borrow out, then ran (a tick: the idler, once), or destroyed */
	assert_int_equal(ret, by == BY_TICK ? 1 : 0);
	assert_int_equal(b.view_ret, 0);
	assert_int_equal(b.v.n, destroy ? 0 : 1); /* the idler, listed before it ran */
	co_view_free(&b.v);
	if (!destroy)
		assert_int_equal(co_engine_destroy(&b.e), 0);
	co_event_destroy(&ev);
}

#define BORROW_CASE(by, window, name)                       \
	static void test_##name(void **state)               \
	{                                                   \
		(void)state;                                \
		NEED_VIEW();                                \
		borrow_race(by, window);                    \
	}
#define BORROW_CASES(window, name)                                            \
	BORROW_CASE(BY_RUN, window, run_waits_out_a_view_##name)              \
	BORROW_CASE(BY_TICK, window, tick_waits_out_a_view_##name)            \
	BORROW_CASE(BY_DESTROY, window, destroy_waits_out_a_view_##name)
BORROW_CASES(LEFT_BEFORE_LOOK, left_before_look)
BORROW_CASES(CAME_AFTER_LOOK, came_after_look)
BORROW_CASES(INSIDE_AT_LOOK, inside_at_look)

/* ---- a cancel's borrow meets a view's ------------------------------------------------ */

/* A frame awaits co_spawn_on of a child on an engine that runs nowhere and
 * is cancelled: its engine finishes the unstarted child for it, borrowing
 * that engine (else the await would wait for a turn that never comes). A
 * view holding the same engine borrowed then is waited out, in both of the
 * windows the borrow race above holds open. */
struct spawner {
	co_frame co;
	co_when w;
	co_frame kid;
	co_engine *on;
	int res;
	atomic_int waiting, kid_ran;
};

static struct spawner *spawner_now;

static int unstarted_kid_fn(co_frame *f)
{
	atomic_store(&spawner_now->kid_ran, 1);
	CO_BEGIN(f);
	CO_END(f);
}

static int spawner_fn(co_frame *f)
{
	struct spawner *p = (struct spawner *)f;
	CO_BEGIN(f);
	atomic_store(&p->waiting, 1);
	CO_AWAIT(f, co_spawn_on(&p->w, p->on, &p->kid));
	p->res = co_result(f);
	CO_END(f);
}

/* The view's borrow holds the engine when the cancel's comes, and leaves
 * in window (LEFT_BEFORE_LOOK or INSIDE_AT_LOOK). */
static void cancel_borrow(enum borrow_window window)
{
	static struct borrow_race b;
	static struct spawner p;
	co_engine e;
	co_test_runner r;

	memset(&b, 0, sizeof b);
	memset(&p, 0, sizeof p);
	race = &b;
	spawner_now = &p;
	b.w = window;
	assert_int_equal(co_engine_init(&b.e, NULL), 0); /* never run */
	assert_int_equal(co_engine_init(&e, NULL), 0);
	p.on = &b.e;
	co_init(&p.kid, unstarted_kid_fn);
	co_init(&p.co, spawner_fn);
	assert_int_equal(co_engine_spawn(&e, &p.co), 0);
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_IDLE);
	WAIT_UNTIL(atomic_load(&p.waiting));
	co__fault_on_point(CO__POINT_BORROWED, hold_borrow, NULL);
	co__fault_on_point(CO__POINT_TAKE, at_take, NULL);
	co__fault_on_point(CO__POINT_TAKE_REFUSED, at_refused, NULL);
	start_view(&b);
	assert_int_equal(atomic_load(&b.borrowed), 1);
	alarm(20); /* a child left queued hangs the await: fail, not wait */
	assert_int_equal(co_cancel(&p.co), 0); /* e's next turn takes it */
	assert_int_equal(co_test_runner_join(&r), 0);
	alarm(0);
	co__fault_on_point(CO__POINT_TAKE, NULL, NULL);
	co__fault_on_point(CO__POINT_BORROWED, NULL, NULL);
	co__fault_on_point(CO__POINT_TAKE_REFUSED, NULL, NULL);
	assert_int_equal(p.res, -ECANCELED);
	assert_true(co_done(&p.kid));
	assert_int_equal(co_status(&p.kid), -ECANCELED);
	assert_int_equal(atomic_load(&p.kid_ran), 0); /* finished for it, never run */
	assert_int_equal(pthread_join(b.tv, NULL), 0);
	assert_int_equal(atomic_load(&b.refused), 1); /* the window was held open */
	assert_true(atomic_load(&b.takes) >= 2);      /* and the cancel tried again */
	assert_int_equal(b.view_ret, 0);
	assert_int_equal(b.v.n, 1); /* the child, listed before the cancel */
	co_view_free(&b.v);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_engine_destroy(&b.e), 0); /* nothing left on it */
}

static void test_cancel_waits_out_a_view_left_before_look(void **state)
{
	(void)state;
	NEED_VIEW();
	cancel_borrow(LEFT_BEFORE_LOOK);
}

static void test_cancel_waits_out_a_view_inside_at_look(void **state)
{
	(void)state;
	NEED_VIEW();
	cancel_borrow(INSIDE_AT_LOOK);
}

/* ---- a cancel stop of a context that never started: its start waits -------------- */

/* co_context_stop(c, CO_STOP_CANCEL) on a context not started finishes its
 * queued frames on the calling thread, borrowing its engine. A
 * co_context_start that comes then runs the engine on its new thread once
 * the borrow has left: its run is not refused (the context's join would
 * answer -EBUSY), and the frame, finished by the stop, never runs. */
struct stopper {
	co_context *c;
	int ret;
};

static void *stop_thread(void *arg)
{
	struct stopper *st = arg;

	st->ret = co_context_stop(st->c, CO_STOP_CANCEL);
	atomic_store(&race->borrow_done, 1);
	return NULL;
}

static atomic_int never_ran;

static int never_fn(co_frame *f)
{
	CO_BEGIN(f);
	atomic_fetch_add(&never_ran, 1);
	CO_END(f);
}

static void test_start_waits_out_a_cancel_stop(void **state)
{
	static struct borrow_race b;
	co_context c;
	co_frame queued;
	struct stopper st;
	pthread_t ts;
	(void)state;

	memset(&b, 0, sizeof b);
	race = &b;
	b.w = LEFT_BEFORE_LOOK;
	assert_int_equal(co_context_init(&c, NULL), 0);
	co_init(&queued, never_fn);
	assert_int_equal(co_context_spawn(&c, &queued), 0);
	co__fault_on_point(CO__POINT_BORROWED, hold_borrow, NULL);
	co__fault_on_point(CO__POINT_TAKE, at_take, NULL);
	co__fault_on_point(CO__POINT_TAKE_REFUSED, at_refused, NULL);
	st.c = &c;
	st.ret = 1;
	assert_int_equal(pthread_create(&ts, NULL, stop_thread, &st), 0);
	wait_flag(&b.borrowed);
	assert_int_equal(atomic_load(&b.borrowed), 1); /* the stop holds the engine */
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_STOP), 0);
	assert_int_equal(pthread_join(ts, NULL), 0);
	assert_int_equal(co_context_join(&c), 0); /* its run waited, then ran */
	co__fault_on_point(CO__POINT_TAKE, NULL, NULL);
	co__fault_on_point(CO__POINT_BORROWED, NULL, NULL);
	co__fault_on_point(CO__POINT_TAKE_REFUSED, NULL, NULL);
	assert_int_equal(st.ret, 0);
	assert_int_equal(atomic_load(&b.refused), 1); /* the window was held open */
	assert_true(atomic_load(&b.takes) >= 2);      /* and the run tried again */
	assert_true(co_done(&queued));
	assert_int_equal(co_status(&queued), -ECANCELED); /* finished by the stop */
	assert_int_equal(atomic_load(&never_ran), 0);
	assert_int_equal(co_context_destroy(&c), 0);
}

/* ---- from inside a borrow -------------------------------------------------------------- */

/* The cancel stop of a context that never started runs its queued frames'
 * on_done on the stopping thread, inside its borrow of the engine. There a
 * destroy of that engine and a registration on it are refused (-EBUSY, as
 * while a run holds it) and a view of it reads it at once (the thread holds it): neither waits for
 * the borrow it runs in, also after a cancel stop of another such context
 * (a borrow inside the borrow) has come and gone. */
struct inside {
	co_frame co;
	co_context *c, *other;
	int destroy_ret, view_ret, other_ret, register_ret;
	size_t unanswered;
};

static void inside_done(co_frame *f)
{
	struct inside *in = (struct inside *)f;
	co_view v;

	in->other_ret = co_context_stop(in->other, CO_STOP_CANCEL);
	in->destroy_ret = co_context_destroy(in->c);
	in->register_ret = co_engine_register_files(&in->c->engine, (int[]){ 0 }, 1);
	if (co_view_available()) {
		in->view_ret = co_view_engine(&v, &in->c->engine, 20 * 1000000ull);
		if (in->view_ret == 0) {
			in->unanswered = v.unanswered;
			co_view_free(&v);
		}
	}
}

static void test_take_inside_own_borrow_refused(void **state)
{
	co_context c, other;
	struct inside in;
	co_frame queued;
	(void)state;

	memset(&in, 0, sizeof in);
	in.c = &c;
	in.other = &other;
	in.destroy_ret = in.view_ret = in.other_ret = in.register_ret = 1;
	assert_int_equal(co_context_init(&c, NULL), 0);
	assert_int_equal(co_context_init(&other, NULL), 0);
	co_init(&in.co, never_fn);
	in.co.on_done = inside_done;
	assert_int_equal(co_context_spawn(&c, &in.co), 0);
	co_init(&queued, never_fn);
	assert_int_equal(co_context_spawn(&other, &queued), 0);
	alarm(20); /* a take that waits for its own borrow hangs: fail, not wait */
	assert_int_equal(co_context_stop(&c, CO_STOP_CANCEL), 0);
	alarm(0);
	assert_int_equal(co_status(&in.co), -ECANCELED);
	assert_int_equal(atomic_load(&never_ran), 0);
	assert_int_equal(in.other_ret, 0);
	assert_int_equal(co_status(&queued), -ECANCELED); /* finished by the inner stop */
	assert_int_equal(in.destroy_ret, -EBUSY);
	assert_int_equal(in.register_ret, -EBUSY);
	if (co_view_available()) {
		assert_int_equal(in.view_ret, 0);
		assert_int_equal(in.unanswered, 0);
	}
	assert_int_equal(co_context_destroy(&c), 0);
	assert_int_equal(co_context_destroy(&other), 0);
}

/* ---- a context never started whose engine was ticked by hand ------------------ */

/* Its engine has an owner (the thread that ticked it) and may hold frames
 * that started: the cancel stop leaves its queued frames to the owner's
 * next tick or run, which finishes the unstarted ones unrun and resumes
 * the started ones with the cancel asked, as on any engine. */
struct yielder {
	co_frame co;
	int started, saw_cancel;
};

static int yielder_fn(co_frame *f)
{
	struct yielder *y = (struct yielder *)f;
	CO_BEGIN(f);
	y->started = 1;
	while (!co_cancelled(f))
		CO_YIELD(f);
	y->saw_cancel = 1;
	CO_END(f);
}

static void test_cancel_stop_leaves_a_hand_ticked_engine_to_its_owner(void **state)
{
	co_context c;
	struct yielder y;
	co_frame queued;
	(void)state;

	memset(&y, 0, sizeof y);
	atomic_store(&never_ran, 0);
	assert_int_equal(co_context_init(&c, NULL), 0);
	co_init(&y.co, yielder_fn);
	assert_int_equal(co_engine_spawn(&c.engine, &y.co), 0);
	assert_true(co_engine_tick(&c.engine) >= 0); /* this thread owns it now */
	assert_int_equal(y.started, 1);
	co_init(&queued, never_fn);
	assert_int_equal(co_context_spawn(&c, &queued), 0);
	assert_int_equal(co_context_state(&c), CO_CONTEXT_NEW);
	assert_int_equal(co_context_stop(&c, CO_STOP_CANCEL), 0);
	assert_false(co_done(&queued)); /* not finished by the stop... */
	assert_false(co_done(&y.co));
	for (int i = 0; i < 100 && !(co_done(&queued) && co_done(&y.co)); i++)
		assert_true(co_engine_tick(&c.engine) >= 0); /* ...but by its owner's ticks */
	assert_int_equal(co_status(&queued), -ECANCELED);
	assert_int_equal(atomic_load(&never_ran), 0);
	assert_true(co_done(&y.co));
	assert_int_equal(y.saw_cancel, 1);
	assert_int_equal(co_context_destroy(&c), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_run_waits_out_a_view_left_before_look),
		cmocka_unit_test(test_tick_waits_out_a_view_left_before_look),
		cmocka_unit_test(test_run_waits_out_a_view_came_after_look),
		cmocka_unit_test(test_tick_waits_out_a_view_came_after_look),
		cmocka_unit_test(test_run_waits_out_a_view_inside_at_look),
		cmocka_unit_test(test_tick_waits_out_a_view_inside_at_look),
		cmocka_unit_test(test_destroy_waits_out_a_view_left_before_look),
		cmocka_unit_test(test_destroy_waits_out_a_view_came_after_look),
		cmocka_unit_test(test_destroy_waits_out_a_view_inside_at_look),
		cmocka_unit_test(test_cancel_waits_out_a_view_left_before_look),
		cmocka_unit_test(test_cancel_waits_out_a_view_inside_at_look),
		cmocka_unit_test(test_start_waits_out_a_cancel_stop),
		cmocka_unit_test(test_take_inside_own_borrow_refused),
		cmocka_unit_test(test_cancel_stop_leaves_a_hand_ticked_engine_to_its_owner),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
