/* SPDX-License-Identifier: MIT */
/*
 * Destroying the sync primitives: refused (-EBUSY) while a frame waits on
 * one (or a mutex is held), or while a release waits for an engine's look
 * at a frame it released, nothing changed by the refusal; afterwards
 * every call answers -EINVAL, and destroying twice too.
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
#include <cmocka.h>

#include <coring/loop.h>
#include <coring/sync.h>
#include <coring/channel.h>
#include "helpers.h"
#include "common/fault.h"

enum prim { P_MUTEX, P_EVENT, P_LATCH, P_WAITGROUP, P_SEM, P_COND, P_CHAN, P_PRIMS };

static const char *const names[P_PRIMS] = { "mutex", "event", "latch", "wait group",
					     "semaphore", "condvar", "channel" };

struct objs {
	co_mutex m, cm;
	co_event ev;
	co_latch l;
	co_waitgroup wg;
	co_sem s;
	co_cond c;
	co_chan ch;
};

struct waiter {
	co_frame co;
	co_waiter w;
	struct objs *o;
	enum prim p;
	int item, res;
};

static int waiter_fn(co_frame *f)
{
	struct waiter *t = (struct waiter *)f;
	struct objs *o = t->o;
	CO_BEGIN(f);
	if (t->p == P_MUTEX) {
		CO_AWAIT(f, co_mutex_lock(&t->w, &o->m));
	} else if (t->p == P_EVENT) {
		CO_AWAIT(f, co_event_wait(&t->w, &o->ev));
	} else if (t->p == P_LATCH) {
		CO_AWAIT(f, co_latch_wait(&t->w, &o->l));
	} else if (t->p == P_WAITGROUP) {
		CO_AWAIT(f, co_waitgroup_wait(&t->w, &o->wg));
	} else if (t->p == P_SEM) {
		CO_AWAIT(f, co_sem_acquire(&t->w, &o->s));
	} else if (t->p == P_COND) {
		CO_AWAIT(f, co_mutex_lock(&t->w, &o->cm));
		CO_AWAIT(f, co_cond_wait(&t->w, &o->c, &o->cm));
		t->res = co_result(f);
		co_mutex_unlock(&o->cm);
		CO_RETURN(f, 0);
	} else {
		CO_AWAIT(f, co_chan_recv(&t->w, &o->ch, &t->item));
	}
	t->res = co_result(f);
	CO_END(f);
}

static void objs_init(struct objs *o)
{
	assert_int_equal(co_mutex_init(&o->m), 0);
	assert_int_equal(co_mutex_init(&o->cm), 0);
	assert_int_equal(co_event_init(&o->ev, 0), 0);
	assert_int_equal(co_latch_init(&o->l, 1), 0);
	assert_int_equal(co_waitgroup_init(&o->wg), 0);
	assert_int_equal(co_waitgroup_add(&o->wg, 1), 0);
	assert_int_equal(co_sem_init(&o->s, 0), 0);
	assert_int_equal(co_cond_init(&o->c), 0);
	assert_int_equal(co_chan_init(&o->ch, sizeof(int), 1, NULL), 0);
	assert_int_equal(co_mutex_trylock(&o->m), 0); /* so that a lock waits */
}

static int destroy(struct objs *o, enum prim p)
{
	switch (p) {
	case P_MUTEX: return co_mutex_destroy(&o->m);
	case P_EVENT: return co_event_destroy(&o->ev);
	case P_LATCH: return co_latch_destroy(&o->l);
	case P_WAITGROUP: return co_waitgroup_destroy(&o->wg);
	case P_SEM: return co_sem_destroy(&o->s);
	case P_COND: return co_cond_destroy(&o->c);
	default: return co_chan_destroy(&o->ch);
	}
}

/* Let the waiter of p go (the mutex: hand it over). */
static void release(struct objs *o, enum prim p)
{
	int one = 1;
	switch (p) {
	case P_MUTEX: assert_int_equal(co_mutex_unlock(&o->m), 0); break;
	case P_EVENT: assert_int_equal(co_event_set(&o->ev), 0); break;
	case P_LATCH: assert_int_equal(co_latch_count_down(&o->l, 1), 0); break;
	case P_WAITGROUP: assert_int_equal(co_waitgroup_done(&o->wg), 0); break;
	case P_SEM: assert_int_equal(co_sem_release(&o->s, 1), 0); break;
	case P_COND: assert_int_equal(co_cond_signal(&o->c), 0); break;
	default: assert_int_equal(co_chan_try_send(&o->ch, &one), 0); break;
	}
}

/* Every call on a destroyed p answers -EINVAL. */
static void check_dead(struct objs *o, enum prim p, co_loop *loop)
{
	struct waiter late = { .o = o, .p = p, .res = 1 };
	int one = 1;

	switch (p) {
	case P_MUTEX:
		assert_int_equal(co_mutex_trylock(&o->m), -EINVAL);
		assert_int_equal(co_mutex_unlock(&o->m), -EINVAL);
		break;
	case P_EVENT:
		assert_int_equal(co_event_set(&o->ev), -EINVAL);
		assert_int_equal(co_event_reset(&o->ev), -EINVAL);
		assert_int_equal(co_event_is_set(&o->ev), -EINVAL);
		break;
	case P_LATCH:
		assert_int_equal(co_latch_count_down(&o->l, 0), -EINVAL);
		assert_int_equal(co_latch_try_wait(&o->l), -EINVAL);
		break;
	case P_WAITGROUP:
		assert_int_equal(co_waitgroup_add(&o->wg, 1), -EINVAL);
		assert_int_equal(co_waitgroup_done(&o->wg), -EINVAL);
		break;
	case P_SEM:
		assert_int_equal(co_sem_try_acquire(&o->s), -EINVAL);
		assert_int_equal(co_sem_release(&o->s, 1), -EINVAL);
		break;
	case P_COND:
		assert_int_equal(co_cond_signal(&o->c), -EINVAL);
		assert_int_equal(co_cond_broadcast(&o->c), -EINVAL);
		break;
	default:
		assert_int_equal(co_chan_try_send(&o->ch, &one), -EINVAL);
		assert_int_equal(co_chan_try_recv(&o->ch, &one), -EINVAL);
		assert_int_equal(co_chan_close(&o->ch), -EINVAL);
		assert_int_equal(co_chan_len(&o->ch), -EINVAL);
		break;
	}
	/* an await on it ends at once with -EINVAL */
	co_init(&late.co, waiter_fn);
	assert_int_equal(co_loop_spawn(loop, &late.co), 0);
	assert_int_equal(co_loop_run(loop), 0);
	assert_int_equal(late.res, -EINVAL);
	assert_int_equal(destroy(o, p), -EINVAL); /* twice */
}

/* After a destroy every call answers -EINVAL (sync.md, "Freeing a
 * primitive"; channel.h); check_dead awaits a receive only. Here every
 * wait of this layer on a destroyed object, plain and under co_wait_for
 * (0 and an hour: -EINVAL, not -ETIME, and at once): a send and a receive
 * of many on a channel, a lock, an event, latch, wait group, semaphore and
 * condition wait (its mutex alive and held: still held after). */
struct dead_waits {
	co_frame co;
	co_waiter w;
	struct objs *o;
	uint64_t limit;           /* 0: no co_wait_for; else ns + 1 */
	int k, item, many[4], res[9], held_after;
};

static co_awaiter *dead_wait(struct dead_waits *t, int k)
{
	struct objs *o = t->o;

	if (k == 0)
		return co_chan_send(&t->w, &o->ch, &t->item);
	if (k == 1)
		return co_chan_recv_many(&t->w, &o->ch, t->many, 4);
	if (k == 2)
		return co_chan_recv(&t->w, &o->ch, &t->item);
	if (k == 3)
		return co_mutex_lock(&t->w, &o->m);
	if (k == 4)
		return co_event_wait(&t->w, &o->ev);
	if (k == 5)
		return co_latch_wait(&t->w, &o->l);
	if (k == 6)
		return co_waitgroup_wait(&t->w, &o->wg);
	if (k == 7)
		return co_sem_acquire(&t->w, &o->s);
	return co_cond_wait(&t->w, &o->c, &o->cm);
}

static int dead_waits_fn(co_frame *f)
{
	struct dead_waits *t = (struct dead_waits *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&t->w, &t->o->cm));
	assert_int_equal(co_result(f), 0);
	for (t->k = 0; t->k < 9; t->k++) {
		if (t->limit)
			CO_AWAIT(f, co_wait_for(dead_wait(t, t->k), t->limit - 1));
		else
			CO_AWAIT(f, dead_wait(t, t->k));
		t->res[t->k] = co_result(f);
	}
	t->held_after = co_mutex_trylock(&t->o->cm) == -EBUSY;
	assert_int_equal(co_mutex_unlock(&t->o->cm), 0);
	CO_END(f);
}

static void test_every_wait_on_destroyed(void **state)
{
	static const uint64_t limits[] = { 0, 1, 3600 * CO_S + 1 };

	(void)state;
	for (unsigned l = 0; l < sizeof limits / sizeof limits[0]; l++) {
		struct objs o;
		struct dead_waits t;

		objs_init(&o);
		assert_int_equal(co_mutex_unlock(&o.m), 0); /* objs_init held it */
		for (int p = 0; p < P_PRIMS; p++)
			assert_int_equal(destroy(&o, (enum prim)p), 0);
		memset(&t, 0, sizeof t);
		t.o = &o;
		t.limit = limits[l];
		for (int k = 0; k < 9; k++)
			t.res[k] = 1;
		co_init(&t.co, dead_waits_fn);
		if (limits[l] == 0) {
			co_loop loop;
			co_loop_init(&loop);
			assert_int_equal(co_loop_spawn(&loop, &t.co), 0);
			assert_int_equal(co_loop_run(&loop), 0);
		} else {
			co_test_run1(&t.co); /* an hour's limit: ends at once or hangs */
		}
		for (int k = 0; k < 9; k++)
			if (t.res[k] != -EINVAL)
				fail_msg("limit %u, wait %d: %d", l, k, t.res[k]);
		assert_int_equal(t.held_after, 1);
		assert_int_equal(co_mutex_destroy(&o.cm), 0);
	}
}

static void test_destroy_rules(void **state)
{
	(void)state;
	for (int p = 0; p < P_PRIMS; p++) {
		struct objs o;
		struct waiter w = { .o = &o, .p = (enum prim)p, .res = 1 };
		co_loop loop;
		objs_init(&o);
		co_loop_init(&loop);
		co_init(&w.co, waiter_fn);
		assert_int_equal(co_loop_spawn(&loop, &w.co), 0);
		assert_int_equal(co_loop_run(&loop), 1); /* it waits */
		if (destroy(&o, (enum prim)p) != -EBUSY)
			fail_msg("%s: destroyed with a frame waiting", names[p]);
		release(&o, (enum prim)p); /* the refusal changed nothing */
		assert_int_equal(co_loop_run(&loop), 0);
		if (w.res != 0)
			fail_msg("%s: the waiter got %d", names[p], w.res);
		if (p == P_MUTEX) { /* held (handed over): still in use */
			assert_int_equal(destroy(&o, P_MUTEX), -EBUSY);
			assert_int_equal(co_mutex_unlock(&o.m), 0);
		}
		assert_int_equal(destroy(&o, (enum prim)p), 0);
		check_dead(&o, (enum prim)p, &loop);
		assert_int_equal(co_mutex_destroy(NULL), -EINVAL);
		if (p != P_CHAN)
			assert_int_equal(co_chan_destroy(&o.ch), 0);
	}
	assert_int_equal(co_event_destroy(NULL), -EINVAL);
	assert_int_equal(co_latch_destroy(NULL), -EINVAL);
	assert_int_equal(co_waitgroup_destroy(NULL), -EINVAL);
	assert_int_equal(co_sem_destroy(NULL), -EINVAL);
	assert_int_equal(co_cond_destroy(NULL), -EINVAL);
}

/* The mutex of a condition wait destroyed while a frame waits (which the
 * rules forbid): the destroy goes through (the wait released it), and the
 * wait, notified, ends with -EINVAL, the mutex not held. */
struct cond_waiter {
	co_frame co;
	co_waiter w;
	co_mutex m;
	co_cond c;
	int res;
};

static int cond_waiter_fn(co_frame *f)
{
	struct cond_waiter *t = (struct cond_waiter *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&t->w, &t->m));
	CO_AWAIT(f, co_cond_wait(&t->w, &t->c, &t->m));
	t->res = co_result(f);
	CO_END(f);
}

static void test_cond_mutex_destroyed_under_wait(void **state)
{
	co_loop loop;
	struct cond_waiter t = { .res = 1 };
	(void)state;
	co_loop_init(&loop);
	assert_int_equal(co_mutex_init(&t.m), 0);
	assert_int_equal(co_cond_init(&t.c), 0);
	co_init(&t.co, cond_waiter_fn);
	assert_int_equal(co_loop_spawn(&loop, &t.co), 0);
	assert_int_equal(co_loop_run(&loop), 1); /* parked on the condition */
	assert_int_equal(co_mutex_destroy(&t.m), 0);
	assert_int_equal(co_cond_signal(&t.c), 0);
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(t.res, -EINVAL);
	assert_int_equal(co_mutex_unlock(&t.m), -EINVAL); /* destroyed, not held */
	assert_int_equal(co_cond_destroy(&t.c), 0);
}

/*
 * sync.h, co_cond_wait / co_cond_destroy: a frame notified out of a timed
 * condition wait re-locks its mutex on its own engine, after its timer is
 * removed; until it has, it is still in its wait on c, and c's destroy
 * answers -EBUSY (the caller's destroy of m comes after c's). The engine's
 * thread is held by another frame meanwhile, so the re-lock waits: the
 * notify has returned, c's queue is empty, and the destroy must still
 * refuse. Answered 0 there, the caller went on to destroy m (free, no
 * waiter) and free both, and the re-lock wrote into the freed mutex.
 */
struct timed_cond {
	co_frame co;
	co_waiter w;
	co_mutex *m;
	co_cond *c;
	int res, unlock_res;
};

static int timed_cond_fn(co_frame *f)
{
	struct timed_cond *t = (struct timed_cond *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&t->w, t->m));
	CO_AWAIT(f, co_wait_for(co_cond_wait(&t->w, t->c, t->m), 3600 * CO_S));
	t->res = co_result(f);
	t->unlock_res = co_mutex_unlock(t->m);
	CO_END(f);
}

struct thread_holder {
	co_frame co;
	atomic_int hold, holding, release;
};

static int thread_holder_fn(co_frame *f)
{
	struct thread_holder *h = (struct thread_holder *)f;
	CO_BEGIN(f);
	while (!atomic_load(&h->hold))
		CO_YIELD(f);
	atomic_store(&h->holding, 1); /* keeps the engine's thread */
	WAIT_UNTIL(atomic_load(&h->release));
	CO_END(f);
}

static void test_cond_counts_frame_until_relocked(void **state)
{
	co_engine e;
	co_test_runner r;
	co_mutex *m = malloc(sizeof *m);
	co_cond *c = malloc(sizeof *c);
	struct timed_cond t;
	struct thread_holder h;
	(void)state;
	assert_non_null(m);
	assert_non_null(c);
	assert_int_equal(co_mutex_init(m), 0);
	assert_int_equal(co_cond_init(c), 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	memset(&t, 0, sizeof t);
	t.m = m;
	t.c = c;
	t.res = t.unlock_res = 1;
	co_init(&t.co, timed_cond_fn);
	memset(&h, 0, sizeof h);
	co_init(&h.co, thread_holder_fn);
	assert_int_equal(co_engine_spawn(&e, &t.co), 0);
	assert_int_equal(co_engine_spawn(&e, &h.co), 0);
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_STOP);
	/* m free again: t parked on c (it queues itself before unlocking) */
	WAIT_UNTIL(co_mutex_trylock(m) == 0);
	assert_int_equal(co_mutex_unlock(m), 0);
	atomic_store(&h.hold, 1);
	WAIT_UNTIL(atomic_load(&h.holding));
	assert_int_equal(co_cond_signal(c), 0);
	assert_int_equal(co_cond_destroy(c), -EBUSY); /* t has not re-locked m */
	atomic_store(&h.release, 1);
	WAIT_UNTIL(co_done(&t.co));
	assert_int_equal(t.res, 0);
	assert_int_equal(t.unlock_res, 0); /* it held m */
	assert_int_equal(co_cond_destroy(c), 0);
	assert_int_equal(co_mutex_destroy(m), 0);
	memset(m, 0x5a, sizeof *m); /* nothing may touch them now */
	memset(c, 0x5a, sizeof *c);
	free(m);
	free(c);
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_test_runner_join(&r), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/*
 * sync.md, "Freeing a primitive": a release (an unlock, a set, a count
 * down, a semaphore's release, a notify) claimed a frame parked on e while
 * e's look at that frame (a cancel, held open at CO__POINT_WAIT_VISIT) may
 * still take the primitive's lock; the release waits for that look before
 * it wakes anything (CO__POINT_WAKE_LOOK). A destroy from a third thread
 * meanwhile answers -EBUSY and changes nothing (after a 0 the primitive
 * could be freed under the look). Once the release returned, the frame
 * has its result from the release (claimed before the cancel's look) and
 * destroy answers 0. The channel's close has its own (test_channel
 * destroy_while_close_waits_for_look).
 */
struct look_hold {
	struct objs *o;
	enum prim p;
	atomic_int go, point_done, release_res;
	atomic_int destroy_res;
};

/* On e's thread: its look at the parked frame saw it waiting. */
static void look_hold_visit(void *arg)
{
	struct look_hold *k = arg;

	co__fault_on_point(CO__POINT_WAIT_VISIT, NULL, NULL); /* once */
	atomic_store(&k->go, 1);
	WAIT_UNTIL(atomic_load(&k->point_done)); /* the release waits for this look */
}

/* On the releasing thread: the release found the look open. The destroy
 * stands for a third thread's: this thread is inside the release. */
static void look_hold_point(void *arg)
{
	struct look_hold *k = arg;

	co__fault_on_point(CO__POINT_WAKE_LOOK, NULL, NULL); /* once */
	atomic_store(&k->destroy_res, destroy(k->o, k->p));
	atomic_store(&k->point_done, 1);
}

static void *look_hold_release(void *arg)
{
	struct look_hold *k = arg;
	struct objs *o = k->o;
	int r;

	WAIT_UNTIL(atomic_load(&k->go));
	switch (k->p) {
	case P_MUTEX: r = co_mutex_unlock(&o->m); break;
	case P_EVENT: r = co_event_set(&o->ev); break;
	case P_LATCH: r = co_latch_count_down(&o->l, 1); break;
	case P_WAITGROUP: r = co_waitgroup_done(&o->wg); break;
	case P_SEM: r = co_sem_release(&o->s, 1); break;
	default: r = co_cond_signal(&o->c); break;
	}
	atomic_store(&k->release_res, r);
	return NULL;
}

struct look_canceller {
	co_frame co;
	co_frame *target;
};

static int look_canceller_fn(co_frame *f)
{
	struct look_canceller *c = (struct look_canceller *)f;
	CO_BEGIN(f);
	co_cancel(c->target);
	CO_END(f);
}

static void test_destroy_while_release_waits_for_look(void **state)
{
	(void)state;
	for (int p = 0; p < P_CHAN; p++) {
		struct objs o;
		struct look_hold k = { .o = &o, .p = (enum prim)p, .release_res = 1,
				       .destroy_res = 1 };
		struct waiter w = { .o = &o, .p = (enum prim)p, .res = 1 };
		struct look_canceller c = { .target = &w.co };
		co_engine e;
		co_loop loop;
		pthread_t th;

		objs_init(&o);
		assert_int_equal(co_engine_init(&e, NULL), 0);
		e.spin_max = e.spin_cur = 0; /* it parks at once */
		co_init(&w.co, waiter_fn);
		assert_int_equal(co_engine_spawn(&e, &w.co), 0);
		assert_int_equal(co_engine_tick(&e), 1); /* parked; this thread owns e */
		assert_int_equal(w.res, 1);
		assert_int_equal(pthread_create(&th, NULL, look_hold_release, &k), 0);
		co__fault_on_point(CO__POINT_WAIT_VISIT, look_hold_visit, &k);
		co__fault_on_point(CO__POINT_WAKE_LOOK, look_hold_point, &k);
		co_init(&c.co, look_canceller_fn);
		assert_int_equal(co_engine_spawn(&e, &c.co), 0);
		assert_true(co_engine_tick(&e) >= 1); /* the look held open */
		assert_int_equal(pthread_join(th, NULL), 0);
		co__fault_on_point(CO__POINT_WAIT_VISIT, NULL, NULL);
		co__fault_on_point(CO__POINT_WAKE_LOOK, NULL, NULL);
		assert_int_equal(atomic_load(&k.release_res), 0);
		assert_int_equal(atomic_load(&k.point_done), 1); /* the window was held */
		if (atomic_load(&k.destroy_res) != -EBUSY)
			fail_msg("%s: destroy answered %d while its release waited for a look",
				 names[p], atomic_load(&k.destroy_res));
		while (w.res == 1)
			assert_true(co_engine_tick(&e) >= 0);
		if (w.res != 0) /* claimed by the release before the cancel's look */
			fail_msg("%s: the waiter got %d", names[p], w.res);
		if (p == P_MUTEX) /* the waiter took it */
			assert_int_equal(co_mutex_unlock(&o.m), 0);
		assert_int_equal(destroy(&o, (enum prim)p), 0);
		assert_int_equal(co_engine_destroy(&e), 0);
		co_loop_init(&loop);
		check_dead(&o, (enum prim)p, &loop);
		if (p != P_MUTEX)
			assert_int_equal(co_mutex_unlock(&o.m), 0); /* objs_init held it */
		for (int q = 0; q < P_PRIMS; q++)
			if (q != p)
				assert_int_equal(destroy(&o, (enum prim)q), 0);
		assert_int_equal(co_mutex_destroy(&o.cm), 0);
	}
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_destroy_rules),
	cmocka_unit_test(test_cond_mutex_destroyed_under_wait),
	cmocka_unit_test(test_cond_counts_frame_until_relocked),
	cmocka_unit_test(test_every_wait_on_destroyed),
	cmocka_unit_test(test_destroy_while_release_waits_for_look),
};

CO_TEST_MAIN(tests, 1)
