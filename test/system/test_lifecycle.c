/* SPDX-License-Identifier: MIT */
/*
 * The lifecycle of engines, contexts and schedulers (docs/design.md), tried
 * the way a stranger or an attacker would: calls in the wrong state, from
 * another thread, after destroy; contexts that cannot start; transfers
 * that cannot land; stuck frames; primitives freed right after they woke
 * a waiter; every setup flag. Stops are in test_stop.c. Each case here failed
 * (hung, crashed, leaked or answered wrongly) before the lifecycle was
 * written down.
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
#include <unistd.h>
#include <sys/socket.h>
#include <cmocka.h>

#include <coring/coring.h>
#include "common/fault.h"
#include "helpers.h"

/* An awaiter that nothing wakes but an explicit open: it neither does I/O
 * nor parks, so a frame waiting on it is stuck as far as coring can tell. */
struct gate {
	co_awaiter aw;
	_Atomic(co_frame *) parked;
};

static int gate_suspend(co_awaiter *a, co_frame *f)
{
	atomic_store(&((struct gate *)a)->parked, f);
	return 1;
}

static const co_awaiter_ops gate_ops = { NULL, gate_suspend, NULL, NULL, 0, "gate" };

struct gated {
	co_frame co;
	struct gate *g;
	atomic_int passed, done;
};

static int gated_fn(co_frame *f)
{
	struct gated *t = (struct gated *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, &t->g->aw);
	atomic_store(&t->passed, 1);
	CO_END(f);
}

static void gated_done(co_frame *f)
{
	atomic_fetch_add(&((struct gated *)f)->done, 1);
}

/* ---- engine states ------------------------------------------------------------- */

struct peek {
	co_frame co;
	int state;
};

static int peek_fn(co_frame *f)
{
	struct peek *p = (struct peek *)f;
	CO_BEGIN(f);
	p->state = co_engine_state(co_engine_current());
	CO_END(f);
}

static void test_engine_states(void **state)
{
	co_engine e;
	struct peek p;
	struct co_test_counted t;
	co_post post = { .fn = NULL };
	(void)state;
	assert_int_equal(co_engine_state(NULL), -EINVAL);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_engine_state(&e), CO_ENGINE_READY);
	co_init(&p.co, peek_fn);
	assert_int_equal(co_engine_spawn(&e, &p.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(p.state, CO_ENGINE_RUNNING);
	assert_int_equal(co_engine_state(&e), CO_ENGINE_READY); /* run again at will */
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_engine_state(&e), CO_ENGINE_STOPPED);
	co_test_counted_init(&t);
	assert_int_equal(co_engine_spawn(&e, &t.co), -ESHUTDOWN);
	assert_int_equal(co_engine_stop(&e, 7), -EINVAL); /* a bad mode */
	assert_int_equal(co_engine_stop(&e, CO_STOP_CANCEL), 0); /* drain -> cancel */
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0); /* nothing live */
	assert_int_equal(co_engine_state(&e), CO_ENGINE_STOPPED);
	assert_int_equal(co_engine_destroy(&e), 0);
	/* after destroy, every call says so and touches nothing */
	assert_int_equal(co_engine_state(&e), CO_ENGINE_DEAD);
	assert_int_equal(co_engine_spawn(&e, &t.co), -EINVAL);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), -EINVAL);
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), -EINVAL);
	assert_int_equal(co_engine_stop_timed(&e, CO_MS), -EINVAL);
	assert_int_equal(co_engine_park(&e), -EINVAL);
	assert_int_equal(co_engine_unpark(&e), -EINVAL);
	post.fn = (void (*)(co_post *))abort;
	assert_int_equal(co_engine_post(&e, &post), -EINVAL);
	assert_int_equal(co_engine_destroy(&e), -EINVAL);
	assert_int_equal(t.ran, 0);
}

/* destroy of an engine another thread is running: refused, and that
 * thread can still be stopped. */
static void test_engine_destroy_while_running(void **state)
{
	co_engine e;
	co_test_runner r;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_STOP);
	WAIT_UNTIL(co_engine_state(&e) == CO_ENGINE_RUNNING);
	assert_int_equal(co_engine_destroy(&e), -EBUSY);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), -EBUSY); /* it runs */
	assert_int_equal(co_engine_state(&e), CO_ENGINE_RUNNING);     /* unchanged */
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_test_runner_join(&r), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), -EPERM); /* not the owner */
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* ---- setup flags: taken ones work, the rest are refused -------------------------- */

struct flag_probe {
	co_frame co;
	co_io io;
	int sleep_res, nop_res, fd;
	char c;
};

static int flag_probe_fn(co_frame *f)
{
	struct flag_probe *p = (struct flag_probe *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&p->io));
	p->nop_res = co_result(f);
	CO_AWAIT(f, co_sleep(&p->io, CO_MS)); /* a timeout: its timespec slot */
	p->sleep_res = co_result(f);
	CO_AWAIT(f, co_deadline(co_recv(&p->io, p->fd, &p->c, 1, 0), CO_MS)); /* a link */
	p->sleep_res += co_result(f) == -ETIME ? 0 : 100;
	CO_END(f);
}

static void test_setup_flags(void **state)
{
	static const unsigned taken[] = {
		0, IORING_SETUP_SQPOLL, IORING_SETUP_CLAMP, IORING_SETUP_SUBMIT_ALL,
		IORING_SETUP_SQE128, IORING_SETUP_CQE32, IORING_SETUP_COOP_TASKRUN,
		IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG, IORING_SETUP_SINGLE_ISSUER,
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_SQE128 | IORING_SETUP_CQE32, IORING_SETUP_CQSIZE, IORING_SETUP_R_DISABLED,
	};
	co_engine e;
	(void)state;
	for (unsigned i = 0; i < sizeof taken / sizeof taken[0]; i++) {
		co_engine_opts o = { .setup_flags = taken[i] };
		struct flag_probe p = { .sleep_res = -1, .nop_res = -1 };
		co_test_runner r;
		struct co_test_counted t;
		int sv[2], err = co_engine_init(&e, &o);
		if (err != 0)
			fail_msg("setup flags %#x: init %d", taken[i], err);
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		p.fd = sv[0];
		co_init(&p.co, flag_probe_fn);
		assert_int_equal(co_engine_spawn(&e, &p.co), 0);
		/* run on another thread, and wake it from this one */
		co_test_runner_start(&r, &e, CO_RUN_UNTIL_STOP);
		co_test_counted_init(&t);
		assert_int_equal(co_engine_spawn(&e, &t.co), 0);
		WAIT_UNTIL(atomic_load(&t.done) == 1);
		assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
		assert_int_equal(co_test_runner_join(&r), 0);
		if (p.nop_res != 0 || p.sleep_res != 0)
			fail_msg("setup flags %#x: nop %d sleep %d", taken[i], p.nop_res, p.sleep_res);
		assert_int_equal(co_engine_destroy(&e), 0);
		close(sv[0]);
		close(sv[1]);
	}
	{
		co_engine_opts iopoll = { .setup_flags = IORING_SETUP_IOPOLL };
		co_engine_opts wq = { .setup_flags = IORING_SETUP_ATTACH_WQ };
		co_engine_opts unknown = { .setup_flags = 1u << 30 };
		assert_int_equal(co_engine_init(&e, &iopoll), -EOPNOTSUPP);
		assert_int_equal(co_engine_init(&e, &wq), -EOPNOTSUPP);
		assert_int_equal(co_engine_init(&e, &unknown), -EINVAL);
	}
}

/* ---- a lone context that ends by itself accepts nothing after -------------------- */

#define DOOR_SPAWNS 4000

struct door {
	co_context *c;
	struct co_test_counted *t;
	int ret[DOOR_SPAWNS];
};

static void *door_spawner(void *arg)
{
	struct door *d = arg;
	for (int i = 0; i < DOOR_SPAWNS; i++) {
		d->ret[i] = co_context_spawn(d->c, &d->t[i].co);
		if (i % 4 == 0)
			sched_yield(); /* let the context find itself idle, and end */
	}
	return NULL;
}

static void test_lone_context_door(void **state)
{
	co_context c;
	struct door *d = calloc(1, sizeof *d);
	struct co_test_counted first, late;
	pthread_t th;
	int accepted = 0, refused = 0;
	(void)state;
	assert_non_null(d);
	d->t = calloc(DOOR_SPAWNS, sizeof *d->t);
	assert_non_null(d->t);
	d->c = &c;
	for (int i = 0; i < DOOR_SPAWNS; i++)
		co_test_counted_init(&d->t[i]);
	co_test_counted_init(&first);
	assert_int_equal(co_context_init(&c, NULL), 0);
	assert_int_equal(co_context_state(&c), CO_CONTEXT_NEW);
	assert_int_equal(co_context_spawn(&c, &first.co), 0);
	assert_int_equal(co_context_start(&c, 7), -EINVAL); /* a bad mode: not started */
	assert_int_equal(co_context_stop(&c, 7), -EINVAL);
	assert_int_equal(co_context_state(&c), CO_CONTEXT_NEW);
	/* spawns race the context's end (it stops by itself when idle) */
	assert_int_equal(pthread_create(&th, NULL, door_spawner, d), 0);
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_IDLE), -EALREADY);
	pthread_join(th, NULL);
	assert_int_equal(co_context_join(&c), 0);
	assert_int_equal(co_context_state(&c), CO_CONTEXT_JOINED);
	assert_int_equal(first.done, 1);
	for (int i = 0; i < DOOR_SPAWNS; i++) {
		if (d->ret[i] == 0) {
			accepted++;
			assert_int_equal(atomic_load(&d->t[i].ran), 1); /* accepted: ran */
		} else {
			refused++;
			assert_int_equal(d->ret[i], -ESHUTDOWN);
			assert_int_equal(atomic_load(&d->t[i].ran), 0); /* refused: never */
		}
	}
	print_message("      %d accepted, %d refused after the context ended\n", accepted, refused);
	co_test_counted_init(&late);
	assert_int_equal(co_context_spawn(&c, &late.co), -ESHUTDOWN);
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_IDLE), -EALREADY);
	assert_int_equal(co_context_destroy(&c), 0);
	assert_int_equal(co_context_destroy(&c), -EINVAL);
	assert_int_equal(co_context_state(&c), CO_CONTEXT_DEAD);
	free(d->t);
	free(d);
}

/* ---- a context whose thread cannot be created ------------------------------------ */

#define START_TASKS 8

/* co_context_join (and destroy) from the context's own thread, here a
 * frame it runs: -EDEADLK (-EBUSY), and nothing changes: the context still
 * runs, and the real join from outside joins its thread. Two joins at
 * once: one joins, the other answers -EINVAL. */
struct self_joiner {
	co_frame co;
	int join, destroy;
	atomic_int done;
};

static int self_joiner_fn(co_frame *f)
{
	struct self_joiner *j = (struct self_joiner *)f;
	CO_BEGIN(f);
	j->join = co_context_join(co_context_current());
	j->destroy = co_context_destroy(co_context_current());
	atomic_store(&j->done, 1);
	CO_END(f);
}

static void *join_main(void *arg)
{
	co_context *c = arg;

	return (void *)(intptr_t)co_context_join(c);
}

static void test_context_join_from_its_own_frame(void **state)
{
	co_context c;
	struct self_joiner j = { .join = 1, .destroy = 1 };
	pthread_t th[2];
	void *ret[2];
	(void)state;
	assert_int_equal(co_context_init(&c, NULL), 0);
	co_init(&j.co, self_joiner_fn);
	assert_int_equal(co_context_spawn(&c, &j.co), 0);
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_STOP), 0);
	WAIT_UNTIL(atomic_load(&j.done));
	assert_int_equal(j.join, -EDEADLK);
	assert_int_equal(j.destroy, -EBUSY);
	assert_int_equal(co_context_state(&c), CO_CONTEXT_RUNNING);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, join_main, &c), 0);
	assert_int_equal(co_context_stop(&c, CO_STOP_DRAIN), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], &ret[i]);
	assert_true(((intptr_t)ret[0] == 0 && (intptr_t)ret[1] == -EINVAL) ||
		    ((intptr_t)ret[1] == 0 && (intptr_t)ret[0] == -EINVAL));
	assert_int_equal(co_context_state(&c), CO_CONTEXT_JOINED);
	assert_int_equal(co_context_join(&c), -EINVAL);
	assert_int_equal(co_context_destroy(&c), 0);
}

static void test_context_start_failure(void **state)
{
	co_context c;
	struct co_test_counted t[START_TASKS];
	(void)state;
	/* the start fails: the context stays NEW with its frames, and a
	 * second start runs every one of them */
	assert_int_equal(co_context_init(&c, NULL), 0);
	for (int i = 0; i < START_TASKS; i++) {
		co_test_counted_init(&t[i]);
		assert_int_equal(co_context_spawn(&c, &t[i].co), 0);
	}
	co__fault_arm(CO__FAULT_THREAD, 1, EAGAIN);
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_IDLE), -EAGAIN);
	assert_int_equal(co_context_state(&c), CO_CONTEXT_NEW);
	assert_int_equal(co_context_destroy(&c), -EBUSY); /* frames queued */
	assert_int_equal(co_context_join(&c), -EINVAL);    /* never started */
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_context_join(&c), 0);
	for (int i = 0; i < START_TASKS; i++) {
		assert_int_equal(t[i].ran, 1);
		assert_int_equal(t[i].done, 1);
		assert_int_equal(t[i].status, 0);
	}
	assert_int_equal(co_context_destroy(&c), 0);

	/* or the caller gives up: a cancel stop finishes them with -ECANCELED,
	 * without running them, and destroy succeeds */
	assert_int_equal(co_context_init(&c, NULL), 0);
	for (int i = 0; i < START_TASKS; i++) {
		co_test_counted_init(&t[i]);
		assert_int_equal(co_context_spawn(&c, &t[i].co), 0);
	}
	co__fault_arm(CO__FAULT_THREAD, 1, EAGAIN);
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_IDLE), -EAGAIN);
	assert_int_equal(co_context_stop(&c, CO_STOP_CANCEL), 0);
	for (int i = 0; i < START_TASKS; i++) {
		assert_int_equal(t[i].ran, 0);
		assert_int_equal(t[i].done, 1);
		assert_int_equal(t[i].status, -ECANCELED);
	}
	assert_int_equal(co_context_destroy(&c), 0);
}

/* ---- transfer stays inside a scheduler -------------------------------------------- */

struct hop {
	co_frame co;
	co_transfer tr;
	co_context *to;
	co_context *before, *after;
	int res;
};

static int hop_fn(co_frame *f)
{
	struct hop *h = (struct hop *)f;
	CO_BEGIN(f);
	h->before = co_context_current();
	CO_AWAIT(f, co_transfer_to(&h->tr, h->to));
	h->res = co_result(f);
	h->after = co_context_current();
	CO_END(f);
}

static void test_transfer_exdev(void **state)
{
	co_sched a, b;
	co_sched_opts o = { .contexts = 2 };
	co_context lone;
	struct hop to_b, to_lone, from_lone;
	struct co_test_counted tb;
	(void)state;
	assert_int_equal(co_sched_init(&a, &o), 0);
	assert_int_equal(co_sched_init(&b, &o), 0);
	assert_int_equal(co_context_init(&lone, NULL), 0);
	assert_int_equal(co_context_start(&lone, CO_RUN_UNTIL_STOP), 0);

	to_b = (struct hop){ .to = &b.ctx[0], .res = 1 };
	to_lone = (struct hop){ .to = &lone, .res = 1 };
	co_init(&to_b.co, hop_fn);
	co_init(&to_lone.co, hop_fn);
	assert_int_equal(co_sched_spawn(&a, &to_b.co), 0);
	assert_int_equal(co_sched_spawn(&a, &to_lone.co), 0);
	assert_int_equal(co_sched_run(&a), 0); /* returns: nothing left behind */
	assert_int_equal(to_b.res, -EXDEV);
	assert_ptr_equal(to_b.after, to_b.before);
	assert_int_equal(to_lone.res, -EXDEV);
	assert_ptr_equal(to_lone.after, to_lone.before);
	assert_int_equal(co_sched_tasks(&a), 0);

	/* b's count was never touched: it takes and runs a task of its own */
	assert_int_equal(co_sched_tasks(&b), 0);
	co_test_counted_init(&tb);
	assert_int_equal(co_sched_spawn(&b, &tb.co), 0);
	assert_int_equal(co_sched_run(&b), 0);
	assert_int_equal(tb.ran, 1);

	/* from a lone context into a scheduler's: refused too */
	from_lone = (struct hop){ .to = &a.ctx[1], .res = 1 };
	co_init(&from_lone.co, hop_fn);
	assert_int_equal(co_context_spawn(&lone, &from_lone.co), 0);
	assert_int_equal(co_context_stop(&lone, CO_STOP_DRAIN), 0);
	assert_int_equal(co_context_join(&lone), 0);
	assert_int_equal(from_lone.res, -EXDEV);
	assert_ptr_equal(from_lone.after, &lone);

	assert_int_equal(co_context_destroy(&lone), 0);
	assert_int_equal(co_sched_destroy(&a), 0);
	assert_int_equal(co_sched_destroy(&b), 0);
}

/* ---- stuck frames: the scheduler says so, stays usable, destroy leaks nothing ---- */

static void test_sched_deadlock(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	struct gate g = { .aw = { &gate_ops } };
	struct gated stuck = { .g = &g };
	struct co_test_counted other;
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	co_init(&stuck.co, gated_fn);
	stuck.co.on_done = gated_done;
	assert_int_equal(co_sched_spawn(&s, &stuck.co), 0);
	assert_int_equal(co_sched_run(&s), -EDEADLK); /* no time limit involved */
	assert_int_equal(s.stuck, 1);
	assert_int_equal(co_sched_tasks(&s), 1);
	assert_int_equal(co_sched_destroy(&s), -EBUSY); /* it is still the scheduler's */

	/* still usable: a new task runs, the stuck one is still reported */
	co_test_counted_init(&other);
	assert_int_equal(co_sched_spawn(&s, &other.co), 0);
	assert_int_equal(co_sched_run(&s), -EDEADLK);
	assert_int_equal(other.done, 1);

	/* woken, it finishes, and the scheduler ends cleanly */
	co_wake(atomic_load(&g.parked));
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(stuck.passed, 1);
	assert_int_equal(stuck.done, 1);
	assert_int_equal(co_sched_destroy(&s), 0);

	/* or it is never woken: stop, and destroy forgets it (LeakSanitizer
	 * checks that no engine, ring or descriptor is left behind) */
	assert_int_equal(co_sched_init(&s, &o), 0);
	atomic_store(&g.parked, NULL);
	atomic_store(&stuck.passed, 0);
	co_init(&stuck.co, gated_fn);
	assert_int_equal(co_sched_spawn(&s, &stuck.co), 0);
	assert_int_equal(co_sched_run(&s), -EDEADLK);
	assert_int_equal(co_sched_stop(&s, CO_STOP_CANCEL), 0);
	assert_int_equal(co_sched_run(&s), -EDEADLK); /* every context ended */
	assert_int_equal(co_sched_state(&s), CO_SCHED_ENDED);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(stuck.passed, 0);
}

/* A lone engine: the same verdict, and after a stop destroy forgets the
 * stuck frame instead of refusing forever. */
static void test_engine_deadlock_then_destroy(void **state)
{
	co_engine e;
	struct gate g = { .aw = { &gate_ops } };
	struct gated stuck = { .g = &g };
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&stuck.co, gated_fn);
	assert_int_equal(co_engine_spawn(&e, &stuck.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), -EDEADLK);
	assert_int_equal(e.stuck, 1);
	assert_int_equal(co_engine_destroy(&e), -EBUSY); /* not stopped: wake it and run */
	assert_int_equal(co_engine_stop(&e, CO_STOP_CANCEL), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), -EDEADLK);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(stuck.passed, 0);
}

/* A frame parked on an awaiter of one's own, counted with co_engine_park:
 * a cancel stop does not end it (the engine holds no reference to it), the
 * engine waits for it; woken and unparked, it ends and the run returns. */
static void test_cancel_stop_leaves_own_parked_wait(void **state)
{
	co_engine e;
	struct gate g = { .aw = { &gate_ops } };
	struct gated t = { .g = &g };
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&t.co, gated_fn);
	t.co.on_done = gated_done;
	assert_int_equal(co_engine_spawn(&e, &t.co), 0);
	assert_int_equal(co_engine_park(&e), 0);
	assert_int_equal(co_engine_tick(&e), 1); /* parks on the gate */
	assert_int_equal(co_engine_stop(&e, CO_STOP_CANCEL), 0);
	for (int i = 0; i < 3; i++)
		assert_true(co_engine_tick(&e) >= 0);
	assert_int_equal(atomic_load(&t.done), 0); /* still waiting */
	assert_int_equal(co_engine_destroy(&e), -EBUSY);
	co_wake(atomic_load(&g.parked));
	assert_int_equal(co_engine_unpark(&e), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0);
	assert_int_equal(atomic_load(&t.done), 1);
	assert_int_equal(atomic_load(&t.passed), 1);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* A stuck frame woken and ticked is no longer stuck: it waits on a read
 * now, and destroy refuses while it does (the count of a run that found
 * it stuck stood until the next run, and destroy forgot a frame with I/O
 * in flight); once the read completes, it ends and destroy succeeds. */
struct gated_read {
	co_frame co;
	co_io io;
	struct gate *g;
	int fd;
	char c;
	atomic_int done;
};

static int gated_read_fn(co_frame *f)
{
	struct gated_read *t = (struct gated_read *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, &t->g->aw);
	CO_AWAIT(f, co_read(&t->io, t->fd, &t->c, 1, (uint64_t)-1));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void gated_read_done(co_frame *f)
{
	atomic_fetch_add(&((struct gated_read *)f)->done, 1);
}

static void test_engine_stuck_then_woken_by_tick(void **state)
{
	co_engine e;
	struct gate g = { .aw = { &gate_ops } };
	struct gated_read t = { .g = &g };
	int p[2];
	(void)state;
	assert_int_equal(pipe(p), 0);
	t.fd = p[0];
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&t.co, gated_read_fn);
	t.co.on_done = gated_read_done;
	assert_int_equal(co_engine_spawn(&e, &t.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), -EDEADLK);
	assert_int_equal(e.stuck, 1);
	co_wake(atomic_load(&g.parked));
	assert_int_equal(co_engine_tick(&e), 1); /* it runs, and waits on the read */
	assert_int_equal(e.stuck, 0);
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_engine_destroy(&e), -EBUSY); /* live, with I/O in flight */
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0);
	assert_int_equal(atomic_load(&t.done), 1);
	assert_int_equal(co_status(&t.co), 1);
	assert_int_equal(co_engine_destroy(&e), 0);
	close(p[0]);
	close(p[1]);
}

/* ---- freeing a primitive right after the call that released its waiter ------------- */

struct chan_rx {
	co_frame co;
	co_waiter w;
	co_chan *ch;
	int item, res;
};

static int chan_rx_fn(co_frame *f)
{
	struct chan_rx *r = (struct chan_rx *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_wait_for(co_chan_recv(&r->w, r->ch, &r->item), 3600 * CO_S));
	r->res = co_result(f);
	CO_END(f);
}

struct chan_tx {
	co_frame co;
	co_waiter w;
	co_chan *ch;
	int item, res, destroyed;
};

static int chan_tx_fn(co_frame *f)
{
	struct chan_tx *t = (struct chan_tx *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_chan_send(&t->w, t->ch, &t->item));
	t->res = co_result(f);
	/* the receiver (time-limited) is claimed: nobody is blocked */
	t->destroyed = co_chan_destroy(t->ch);
	free(t->ch); /* the receiver's engine must never touch it again */
	CO_END(f);
}

static void test_free_channel_after_timed_claim(void **state)
{
	co_engine e;
	struct chan_rx rx = { .res = 1 };
	struct chan_tx tx = { .item = 42, .res = 1 };
	co_chan *ch = malloc(sizeof *ch);
	(void)state;
	assert_non_null(ch);
	assert_int_equal(co_chan_init(ch, sizeof(int), 1, NULL), 0);
	rx.ch = tx.ch = ch;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&rx.co, chan_rx_fn);
	co_init(&tx.co, chan_tx_fn);
	assert_int_equal(co_engine_spawn(&e, &rx.co), 0);
	assert_int_equal(co_engine_spawn(&e, &tx.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(tx.res, 0);
	assert_int_equal(tx.destroyed, 0);
	assert_int_equal(rx.res, 0);
	assert_int_equal(rx.item, 42);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* The same from another thread, with an event: set, then free at once,
 * while the waiters' engine removes their timers (or cancels them). */
#define FREE_ROUNDS 300

struct ev_waiter {
	co_frame co;
	co_waiter w;
	co_event *ev;
	int timed, res;
	atomic_int released; /* on_done ran: the engine is done with it */
};

static void ev_waiter_done(co_frame *f)
{
	atomic_store(&((struct ev_waiter *)f)->released, 1);
}

static int ev_waiter_fn(co_frame *f)
{
	struct ev_waiter *t = (struct ev_waiter *)f;
	CO_BEGIN(f);
	if (t->timed)
		CO_AWAIT(f, co_wait_for(co_event_wait(&t->w, t->ev), 3600 * CO_S));
	else
		CO_AWAIT(f, co_event_wait(&t->w, t->ev));
	t->res = co_result(f);
	CO_END(f);
}

static void test_free_event_after_set(void **state)
{
	co_context c;
	(void)state;
	assert_int_equal(co_context_init(&c, NULL), 0);
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_STOP), 0);
	for (int round = 0; round < FREE_ROUNDS; round++) {
		co_event *ev = malloc(sizeof *ev);
		struct ev_waiter w[2];
		assert_non_null(ev);
		assert_int_equal(co_event_init(ev, 0), 0);
		for (int i = 0; i < 2; i++) {
			memset(&w[i], 0, sizeof w[i]);
			w[i].ev = ev;
			w[i].timed = i;
			w[i].res = 1;
			co_init(&w[i].co, ev_waiter_fn);
			w[i].co.on_done = ev_waiter_done;
			assert_int_equal(co_context_spawn(&c, &w[i].co), 0);
		}
		/* both linked on the event (each counted as parked under its
		 * lock): from here the event may go as soon as it is set */
		WAIT_UNTIL(atomic_load(&c.engine.parked) == 2);
		/* a cancel from this thread races the set: whichever wins, the
		 * event is never touched once co_event_set returned */
		if (round % 2)
			co_cancel(&w[0].co);
		assert_int_equal(co_event_set(ev), 0);
		free(ev);
		WAIT_UNTIL(atomic_load(&w[0].released) && atomic_load(&w[1].released));
		assert_true(w[0].res == 0 || w[0].res == -ECANCELED);
		assert_int_equal(w[1].res, 0);
	}
	assert_int_equal(co_context_stop(&c, CO_STOP_DRAIN), 0);
	assert_int_equal(co_context_join(&c), 0);
	assert_int_equal(co_context_destroy(&c), 0);
}

/* A frame asked to cancel does not move: its transfer ends -ECANCELED. */
static int self_cancel_hop_fn(co_frame *f)
{
	struct hop *h = (struct hop *)f;
	CO_BEGIN(f);
	h->before = co_context_current();
	co_cancel(f);
	CO_AWAIT(f, co_transfer_to(&h->tr, h->to));
	h->res = co_result(f);
	h->after = co_context_current();
	CO_END(f);
}

static void test_cancelled_frame_does_not_move(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	struct hop h = { .res = 1 };
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	h.to = &s.ctx[1];
	co_init(&h.co, self_cancel_hop_fn);
	assert_int_equal(co_sched_spawn_to(&s, 0, &h.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(h.res, -ECANCELED);
	assert_ptr_equal(h.before, &s.ctx[0]);
	assert_ptr_equal(h.after, &s.ctx[0]);
	assert_int_equal(co_sched_destroy(&s), 0);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_engine_states),
	cmocka_unit_test(test_engine_destroy_while_running),
	cmocka_unit_test(test_setup_flags),
	cmocka_unit_test(test_lone_context_door),
	cmocka_unit_test(test_context_start_failure),
	cmocka_unit_test(test_context_join_from_its_own_frame),
	cmocka_unit_test(test_transfer_exdev),
	cmocka_unit_test(test_sched_deadlock),
	cmocka_unit_test(test_engine_deadlock_then_destroy),
	cmocka_unit_test(test_engine_stuck_then_woken_by_tick),
	cmocka_unit_test(test_cancel_stop_leaves_own_parked_wait),
	cmocka_unit_test(test_cancelled_frame_does_not_move),
	cmocka_unit_test(test_free_channel_after_timed_claim),
	cmocka_unit_test(test_free_event_after_set),
};

CO_TEST_MAIN(tests, 1)
