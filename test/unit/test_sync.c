/* SPDX-License-Identifier: MIT */
/* Tests of the synchronisation primitives (lib/sync/sync.c, lib/waiter/waiter.c): mutex,
 * latch, wait group, semaphore, condition variable across contexts, and
 * misuse. Timed waits and cancellation are in test_sync_timed.c. */
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

/* The sizes the docs give (io.md, benchmarks.md), on LP64: a co_waiter
 * is 160 bytes, so a coroutine waiting on an event with a bare co_frame
 * holds 96 + 160 = 256 bytes; with a co_io instead, 96 + 40 = 136. */
static void test_sizes(void **state)
{
	(void)state;
	if (sizeof(void *) != 8)
		skip();
	assert_int_equal(sizeof(co_frame), 96);
	assert_int_equal(sizeof(co_waiter), 160);
	assert_int_equal(sizeof(co_io), 40);
	assert_int_equal(sizeof(co_frame) + sizeof(co_waiter), 256);
	assert_int_equal(sizeof(co_frame) + sizeof(co_io), 136);
}

/* ---- the counter under the mutex, 2 contexts, thousands of coroutines ---------- */

#define COUNTER_TASKS 2000
#define COUNTER_ITERS 10

struct counter_shared {
	co_mutex m;
	long counter;            /* plain: only touched under m */
	atomic_int holders, overlaps;
};

struct counter_task {
	co_frame co;
	co_waiter w;
	struct counter_shared *sh;
	int i;
	long v;
};

static int counter_fn(co_frame *f)
{
	struct counter_task *t = (struct counter_task *)f;
	CO_BEGIN(f);
	for (t->i = 0; t->i < COUNTER_ITERS; t->i++) {
		CO_AWAIT(f, co_mutex_lock(&t->w, &t->sh->m));
		if (co_result(f) != 0)
			CO_RETURN(f, co_result(f));
		if (atomic_fetch_add(&t->sh->holders, 1) != 0)
			atomic_fetch_add(&t->sh->overlaps, 1);
		t->v = t->sh->counter;
		CO_YIELD(f); /* hold it across a suspension: the others queue up */
		t->sh->counter = t->v + 1;
		atomic_fetch_sub(&t->sh->holders, 1);
		assert_int_equal(co_mutex_unlock(&t->sh->m), 0);
	}
	CO_END(f);
}

static void test_mutex_counter_two_contexts(void **state)
{
	co_sched s;
	struct counter_shared sh = { .counter = 0 };
	struct counter_task *t = calloc(COUNTER_TASKS, sizeof *t);
	(void)state;
	assert_non_null(t);
	assert_int_equal(co_mutex_init(&sh.m), 0);
	sched_start(&s);
	for (int i = 0; i < COUNTER_TASKS; i++) {
		t[i].sh = &sh;
		co_init(&t[i].co, counter_fn);
		assert_int_equal(co_sched_spawn_to(&s, (unsigned)i % 2, &t[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < COUNTER_TASKS; i++)
		assert_int_equal(co_status(&t[i].co), 0);
	assert_int_equal(sh.counter, (long)COUNTER_TASKS * COUNTER_ITERS);
	assert_int_equal(atomic_load(&sh.overlaps), 0);
	assert_int_equal(co_mutex_trylock(&sh.m), 0); /* left unlocked */
	assert_int_equal(co_sched_destroy(&s), 0);
	free(t);
}

/* ---- FIFO hand-off and try-lock (on a bare co_loop: no engine needed) ----------- */

#define FIFO_WAITERS 16

struct fifo_task {
	co_frame co;
	co_waiter w;
	co_mutex *m;
	int id, k, barged;
	int *order, *n;
};

static int fifo_holder_fn(co_frame *f)
{
	struct fifo_task *t = (struct fifo_task *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&t->w, t->m));
	assert_int_equal(co_result(f), 0);
	for (t->k = 0; t->k < 3; t->k++)
		CO_YIELD(f); /* meanwhile every waiter queues, in spawn order */
	assert_int_equal(co_mutex_unlock(t->m), 0);
	/* Ownership went to the oldest waiter: a newcomer cannot take it. */
	t->barged = co_mutex_trylock(t->m) == 0;
	CO_END(f);
}

static int fifo_waiter_fn(co_frame *f)
{
	struct fifo_task *t = (struct fifo_task *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&t->w, t->m));
	assert_int_equal(co_result(f), 0);
	t->order[(*t->n)++] = t->id;
	CO_YIELD(f); /* still held: the next waiter must not run meanwhile */
	assert_int_equal(co_mutex_unlock(t->m), 0);
	CO_END(f);
}

static void test_mutex_fifo_handoff(void **state)
{
	co_loop loop;
	co_mutex m;
	struct fifo_task holder = { .id = -1 }, w[FIFO_WAITERS];
	int order[FIFO_WAITERS], n = 0;
	(void)state;
	co_loop_init(&loop);
	assert_int_equal(co_mutex_init_fifo(&m), 0);
	holder.m = &m;
	co_init(&holder.co, fifo_holder_fn);
	assert_int_equal(co_loop_spawn(&loop, &holder.co), 0);
	for (int i = 0; i < FIFO_WAITERS; i++) {
		w[i] = (struct fifo_task){ .m = &m, .id = i, .order = order, .n = &n };
		co_init(&w[i].co, fifo_waiter_fn);
		assert_int_equal(co_loop_spawn(&loop, &w[i].co), 0);
	}
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(holder.barged, 0);
	assert_int_equal(n, FIFO_WAITERS);
	for (int i = 0; i < FIFO_WAITERS; i++)
		assert_int_equal(order[i], i);
	/* try-lock */
	assert_int_equal(co_mutex_trylock(&m), 0);
	assert_int_equal(co_mutex_trylock(&m), -EBUSY);
	assert_int_equal(co_mutex_unlock(&m), 0);
	assert_int_equal(co_mutex_unlock(&m), -EPERM);
}

/* ---- latch and wait group -------------------------------------------------------- */

#define LATCH_WORKERS 100
#define LATCH_WAITERS 10

struct latch_shared {
	co_latch latch;
	atomic_int counted;
};

struct latch_task {
	co_frame co;
	co_waiter w;
	struct latch_shared *sh;
	int k, seen;
};

static int latch_worker_fn(co_frame *f)
{
	struct latch_task *t = (struct latch_task *)f;
	CO_BEGIN(f);
	for (t->k = 0; t->k < 3; t->k++)
		CO_YIELD(f);
	atomic_fetch_add(&t->sh->counted, 1);
	assert_int_equal(co_latch_count_down(&t->sh->latch, 1), 0);
	CO_END(f);
}

static int latch_waiter_fn(co_frame *f)
{
	struct latch_task *t = (struct latch_task *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_latch_wait(&t->w, &t->sh->latch));
	assert_int_equal(co_result(f), 0);
	t->seen = atomic_load(&t->sh->counted); /* every count-down came first */
	CO_END(f);
}

static void test_latch(void **state)
{
	co_sched s;
	struct latch_shared sh;
	struct latch_task wk[LATCH_WORKERS], wt[LATCH_WAITERS];
	(void)state;
	atomic_init(&sh.counted, 0);
	assert_int_equal(co_latch_init(&sh.latch, LATCH_WORKERS), 0);
	assert_int_equal(co_latch_try_wait(&sh.latch), -EAGAIN);
	sched_start(&s);
	for (int i = 0; i < LATCH_WAITERS; i++) {
		wt[i] = (struct latch_task){ .sh = &sh, .seen = -1 };
		co_init(&wt[i].co, latch_waiter_fn);
		assert_int_equal(co_sched_spawn_to(&s, (unsigned)i % 2, &wt[i].co), 0);
	}
	for (int i = 0; i < LATCH_WORKERS; i++) {
		wk[i] = (struct latch_task){ .sh = &sh };
		co_init(&wk[i].co, latch_worker_fn);
		assert_int_equal(co_sched_spawn_to(&s, (unsigned)i % 2, &wk[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < LATCH_WAITERS; i++)
		assert_int_equal(wt[i].seen, LATCH_WORKERS);
	assert_int_equal(co_latch_try_wait(&sh.latch), 0);
	assert_int_equal(co_latch_count_down(&sh.latch, 1), -EINVAL); /* single use */
	assert_int_equal(co_latch_init(&sh.latch, 2), 0);
	assert_int_equal(co_latch_count_down(&sh.latch, 3), -EINVAL);
	assert_int_equal(co_latch_count_down(&sh.latch, 2), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

#define WG_ROUNDS 3
#define WG_WORKERS 40

struct wg_shared {
	co_waitgroup wg;
	co_sched *s;
	atomic_int done;
};

struct wg_worker {
	co_frame co;
	struct wg_shared *sh;
};

static int wg_worker_fn(co_frame *f)
{
	struct wg_worker *t = (struct wg_worker *)f;
	CO_BEGIN(f);
	CO_YIELD(f);
	atomic_fetch_add(&t->sh->done, 1);
	assert_int_equal(co_waitgroup_done(&t->sh->wg), 0);
	CO_END(f);
}

struct wg_coord {
	co_frame co;
	co_waiter w;
	struct wg_shared *sh;
	struct wg_worker (*workers)[WG_WORKERS];
	int round, i, seen[WG_ROUNDS];
};

/* Round after round: add, start the workers on any context, wait. */
static int wg_coord_fn(co_frame *f)
{
	struct wg_coord *c = (struct wg_coord *)f;
	CO_BEGIN(f);
	for (c->round = 0; c->round < WG_ROUNDS; c->round++) {
		assert_int_equal(co_waitgroup_add(&c->sh->wg, WG_WORKERS), 0);
		for (c->i = 0; c->i < WG_WORKERS; c->i++) {
			struct wg_worker *w = &c->workers[c->round][c->i];
			w->sh = c->sh;
			co_init(&w->co, wg_worker_fn);
			assert_int_equal(co_sched_spawn(c->sh->s, &w->co), 0);
		}
		CO_AWAIT(f, co_waitgroup_wait(&c->w, &c->sh->wg));
		assert_int_equal(co_result(f), 0);
		c->seen[c->round] = atomic_load(&c->sh->done);
	}
	CO_END(f);
}

static void test_wait_group(void **state)
{
	co_sched s;
	struct wg_shared sh = { .s = &s };
	static struct wg_worker workers[WG_ROUNDS][WG_WORKERS];
	struct wg_coord c = { .sh = &sh, .workers = workers };
	(void)state;
	atomic_init(&sh.done, 0);
	assert_int_equal(co_waitgroup_init(&sh.wg), 0);
	assert_int_equal(co_waitgroup_done(&sh.wg), -EINVAL); /* nothing added */
	sched_start(&s);
	co_init(&c.co, wg_coord_fn);
	assert_int_equal(co_sched_spawn(&s, &c.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	for (int r = 0; r < WG_ROUNDS; r++)
		assert_int_equal(c.seen[r], (r + 1) * WG_WORKERS);
	assert_int_equal(co_waitgroup_add(&sh.wg, UINT_MAX), 0);
	assert_int_equal(co_waitgroup_add(&sh.wg, 1), -EOVERFLOW);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- semaphore: never more than N holders ------------------------------------------ */

#define SEM_PERMITS 3
#define SEM_TASKS 300

struct sem_shared {
	co_sem sem;
	atomic_int holders, max, total;
};

struct sem_task {
	co_frame co;
	co_waiter w;
	struct sem_shared *sh;
	int k;
};

static int sem_task_fn(co_frame *f)
{
	struct sem_task *t = (struct sem_task *)f;
	int h, m;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sem_acquire(&t->w, &t->sh->sem));
	assert_int_equal(co_result(f), 0);
	h = atomic_fetch_add(&t->sh->holders, 1) + 1;
	m = atomic_load(&t->sh->max);
	while (h > m && !atomic_compare_exchange_weak(&t->sh->max, &m, h))
		;
	atomic_fetch_add(&t->sh->total, 1);
	for (t->k = 0; t->k < 2; t->k++)
		CO_YIELD(f);
	atomic_fetch_sub(&t->sh->holders, 1);
	assert_int_equal(co_sem_release(&t->sh->sem, 1), 0);
	CO_END(f);
}

static void test_semaphore(void **state)
{
	co_sched s;
	struct sem_shared sh;
	struct sem_task *t = calloc(SEM_TASKS, sizeof *t);
	(void)state;
	assert_non_null(t);
	atomic_init(&sh.holders, 0);
	atomic_init(&sh.max, 0);
	atomic_init(&sh.total, 0);
	assert_int_equal(co_sem_init(&sh.sem, SEM_PERMITS), 0);
	sched_start(&s);
	for (int i = 0; i < SEM_TASKS; i++) {
		t[i].sh = &sh;
		co_init(&t[i].co, sem_task_fn);
		assert_int_equal(co_sched_spawn_to(&s, (unsigned)i % 2, &t[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(atomic_load(&sh.total), SEM_TASKS);
	assert_true(atomic_load(&sh.max) <= SEM_PERMITS);
	assert_true(atomic_load(&sh.max) >= 1);
	/* every permit came back */
	for (int i = 0; i < SEM_PERMITS; i++)
		assert_int_equal(co_sem_try_acquire(&sh.sem), 0);
	assert_int_equal(co_sem_try_acquire(&sh.sem), -EAGAIN);
	assert_int_equal(co_sem_release(&sh.sem, UINT_MAX), 0);
	assert_int_equal(co_sem_release(&sh.sem, 1), -EOVERFLOW);
	assert_int_equal(co_sched_destroy(&s), 0);
	free(t);
}

/* co_sem_release(s, n) serves the oldest waiters first and keeps only what
 * is left in the count; -EOVERFLOW changes nothing (nor does it for a wait
 * group). */
struct sem_order {
	co_frame co;
	co_waiter w;
	co_sem *sem;
	int id, *order, *n;
};

static int sem_order_fn(co_frame *f)
{
	struct sem_order *t = (struct sem_order *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sem_acquire(&t->w, t->sem));
	assert_int_equal(co_result(f), 0);
	t->order[(*t->n)++] = t->id;
	CO_END(f);
}

struct sem_releaser {
	co_frame co;
	co_sem *sem;
	int res;
};

static int sem_releaser_fn(co_frame *f)
{
	struct sem_releaser *r = (struct sem_releaser *)f;
	CO_BEGIN(f);
	CO_YIELD(f); /* the waiters parked, in order */
	r->res = co_sem_release(r->sem, 5);
	CO_END(f);
}

static void test_sem_release_order_and_overflow(void **state)
{
	co_sem sem;
	co_waitgroup wg;
	struct sem_order t[4];
	struct sem_releaser r = { .res = 1 };
	co_frame *fs[5];
	int order[4], n = 0;
	(void)state;
	assert_int_equal(co_sem_init(&sem, 0), 0);
	for (int i = 0; i < 4; i++) {
		t[i] = (struct sem_order){ .sem = &sem, .id = i, .order = order, .n = &n };
		co_init(&t[i].co, sem_order_fn);
		fs[i] = &t[i].co;
	}
	r.sem = &sem;
	co_init(&r.co, sem_releaser_fn);
	fs[4] = &r.co;
	co_test_run_frames(fs, 5);
	assert_int_equal(r.res, 0);
	assert_int_equal(n, 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(order[i], i);
	assert_int_equal(co_sem_try_acquire(&sem), 0); /* 5 - 4: one left */
	assert_int_equal(co_sem_try_acquire(&sem), -EAGAIN);
	assert_int_equal(co_sem_destroy(&sem), 0);

	assert_int_equal(co_sem_init(&sem, 5), 0);
	assert_int_equal(co_sem_release(&sem, UINT_MAX), -EOVERFLOW);
	for (int i = 0; i < 5; i++) /* still 5 */
		assert_int_equal(co_sem_try_acquire(&sem), 0);
	assert_int_equal(co_sem_try_acquire(&sem), -EAGAIN);
	assert_int_equal(co_sem_destroy(&sem), 0);

	assert_int_equal(co_waitgroup_init(&wg), 0);
	assert_int_equal(co_waitgroup_add(&wg, 3), 0);
	assert_int_equal(co_waitgroup_add(&wg, UINT_MAX), -EOVERFLOW);
	for (int i = 0; i < 3; i++) /* still 3 */
		assert_int_equal(co_waitgroup_done(&wg), 0);
	assert_int_equal(co_waitgroup_done(&wg), -EINVAL);
	assert_int_equal(co_waitgroup_destroy(&wg), 0);
}

/* ---- condition variable: producers and consumers across contexts ------------------- */

#define CV_PRODUCERS 3
#define CV_CONSUMERS 3
#define CV_ITEMS 400   /* per producer */
#define CV_QCAP 4

struct cv_shared {
	co_mutex m;
	co_cond not_empty, not_full;
	int q[CV_QCAP], head, count;   /* under m */
	int producers_left;            /* under m */
	long sum;                      /* under m */
	int consumed;                  /* under m */
};

struct cv_task {
	co_frame co;
	co_waiter w;
	struct cv_shared *sh;
	int id, i;
};

static int cv_producer_fn(co_frame *f)
{
	struct cv_task *t = (struct cv_task *)f;
	struct cv_shared *sh = t->sh;
	CO_BEGIN(f);
	for (t->i = 1; t->i <= CV_ITEMS; t->i++) {
		CO_AWAIT(f, co_mutex_lock(&t->w, &sh->m));
		while (sh->count == CV_QCAP) {
			CO_AWAIT(f, co_cond_wait(&t->w, &sh->not_full, &sh->m));
			assert_int_equal(co_result(f), 0);
		}
		sh->q[(sh->head + sh->count++) % CV_QCAP] = t->id * 100000 + t->i;
		assert_int_equal(co_cond_signal(&sh->not_empty), 0);
		assert_int_equal(co_mutex_unlock(&sh->m), 0);
	}
	CO_AWAIT(f, co_mutex_lock(&t->w, &sh->m));
	if (--sh->producers_left == 0)
		assert_int_equal(co_cond_broadcast(&sh->not_empty), 0);
	assert_int_equal(co_mutex_unlock(&sh->m), 0);
	CO_END(f);
}

static int cv_consumer_fn(co_frame *f)
{
	struct cv_task *t = (struct cv_task *)f;
	struct cv_shared *sh = t->sh;
	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_mutex_lock(&t->w, &sh->m));
		while (sh->count == 0 && sh->producers_left > 0) {
			CO_AWAIT(f, co_cond_wait(&t->w, &sh->not_empty, &sh->m));
			assert_int_equal(co_result(f), 0);
		}
		if (sh->count == 0) {
			assert_int_equal(co_mutex_unlock(&sh->m), 0);
			break;
		}
		sh->sum += sh->q[sh->head];
		sh->head = (sh->head + 1) % CV_QCAP;
		sh->count--;
		sh->consumed++;
		assert_int_equal(co_cond_signal(&sh->not_full), 0);
		assert_int_equal(co_mutex_unlock(&sh->m), 0);
	}
	CO_END(f);
}

static void test_condvar_producer_consumer(void **state)
{
	co_sched s;
	struct cv_shared sh = { .producers_left = CV_PRODUCERS };
	struct cv_task p[CV_PRODUCERS], c[CV_CONSUMERS];
	long want = 0;
	(void)state;
	assert_int_equal(co_mutex_init(&sh.m), 0);
	assert_int_equal(co_cond_init(&sh.not_empty), 0);
	assert_int_equal(co_cond_init(&sh.not_full), 0);
	sched_start(&s);
	for (int i = 0; i < CV_PRODUCERS; i++) {
		p[i] = (struct cv_task){ .sh = &sh, .id = i + 1 };
		co_init(&p[i].co, cv_producer_fn);
		assert_int_equal(co_sched_spawn_to(&s, 0, &p[i].co), 0);
		for (int k = 1; k <= CV_ITEMS; k++)
			want += (i + 1) * 100000 + k;
	}
	for (int i = 0; i < CV_CONSUMERS; i++) {
		c[i] = (struct cv_task){ .sh = &sh, .id = i };
		co_init(&c[i].co, cv_consumer_fn);
		assert_int_equal(co_sched_spawn_to(&s, 1, &c[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(sh.consumed, CV_PRODUCERS * CV_ITEMS);
	assert_int_equal(sh.sum, want);
	assert_int_equal(co_mutex_trylock(&sh.m), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* A condition wait that times out or is cancelled still re-locks. */
struct cv_one {
	co_frame co;
	co_waiter w;
	co_mutex *m;
	co_cond *c;
	uint64_t ns;
	int lock_res, res, held_after, unlock_res;
};

static int cv_one_fn(co_frame *f)
{
	struct cv_one *t = (struct cv_one *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&t->w, t->m));
	t->lock_res = co_result(f);
	if (t->ns)
		CO_AWAIT(f, co_wait_for(co_cond_wait(&t->w, t->c, t->m), t->ns));
	else
		CO_AWAIT(f, co_cond_wait(&t->w, t->c, t->m));
	t->res = co_result(f);
	t->held_after = co_mutex_trylock(t->m) == -EBUSY;
	t->unlock_res = co_mutex_unlock(t->m);
	CO_END(f);
}

/* Holds the mutex while the waiter's wait ends, so its re-lock queues. */
struct cv_holder {
	co_frame co;
	co_waiter w;
	co_io io;
	co_mutex *m;
	co_frame *victim;
};

static int cv_holder_fn(co_frame *f)
{
	struct cv_holder *h = (struct cv_holder *)f;
	CO_BEGIN(f);
	CO_YIELD(f); /* the waiter locks and starts its wait first */
	CO_AWAIT(f, co_mutex_lock(&h->w, h->m));
	assert_int_equal(co_result(f), 0);
	if (h->victim)
		assert_int_equal(co_cancel(h->victim), 0);
	CO_AWAIT(f, co_sleep(&h->io, 20 * CO_MS)); /* past the waiter's limit */
	assert_int_equal(co_mutex_unlock(h->m), 0);
	CO_END(f);
}

static void test_condvar_timeout_cancel_relock(void **state)
{
	co_engine e;
	co_mutex m;
	co_cond c;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_mutex_init(&m), 0);
	assert_int_equal(co_cond_init(&c), 0);
	for (int cancel = 0; cancel < 2; cancel++) {
		struct cv_one t = { .m = &m, .c = &c, .ns = cancel ? 0 : 5 * CO_MS, .res = 1 };
		struct cv_holder h = { .m = &m };
		co_init(&t.co, cv_one_fn);
		co_init(&h.co, cv_holder_fn);
		h.victim = cancel ? &t.co : NULL;
		assert_int_equal(co_engine_spawn(&e, &t.co), 0);
		assert_int_equal(co_engine_spawn(&e, &h.co), 0);
		assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
		assert_int_equal(t.lock_res, 0);
		assert_int_equal(t.res, cancel ? -ECANCELED : -ETIME);
		assert_int_equal(t.held_after, 1);
		assert_int_equal(t.unlock_res, 0);
	}
	assert_int_equal(co_mutex_trylock(&m), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* ---- condition variable: notifies are not remembered; re-lock order ------------- */

/* sync.md, "Condition variable": "Wake-ups are never spurious". A signal
 * or a broadcast with nobody waiting is not kept for a later wait: that
 * wait runs to its limit (-ETIME), and holds the mutex again. */
struct cv_late {
	co_frame co;
	co_waiter w;
	co_mutex m;
	co_cond c;
	int res, held_after;
};

static int cv_late_fn(co_frame *f)
{
	struct cv_late *t = (struct cv_late *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&t->w, &t->m));
	assert_int_equal(co_result(f), 0);
	assert_int_equal(co_cond_signal(&t->c), 0);    /* nobody waits */
	assert_int_equal(co_cond_broadcast(&t->c), 0);
	CO_AWAIT(f, co_wait_for(co_cond_wait(&t->w, &t->c, &t->m), 2 * CO_MS));
	t->res = co_result(f);
	t->held_after = co_mutex_trylock(&t->m) == -EBUSY;
	assert_int_equal(co_mutex_unlock(&t->m), 0);
	CO_END(f);
}

static void test_cond_notify_not_remembered(void **state)
{
	struct cv_late t;
	(void)state;
	memset(&t, 0, sizeof t);
	assert_int_equal(co_mutex_init(&t.m), 0);
	assert_int_equal(co_cond_init(&t.c), 0);
	t.res = 1;
	co_init(&t.co, cv_late_fn);
	co_test_run1(&t.co);
	assert_int_equal(t.res, -ETIME);
	assert_int_equal(t.held_after, 1);
	assert_int_equal(co_cond_destroy(&t.c), 0);
	assert_int_equal(co_mutex_destroy(&t.m), 0);
}

/* sync.md: "If the mutex is held, it joins the mutex's queue and a later
 * unlock hands the mutex to it" and "A condition variable's waiter
 * re-locking its mutex is handed it too, in FIFO order, as before its
 * wait." Three condition waiters; a notifier holds the mutex while a
 * plain locker queues on it, then broadcasts and unlocks: the mutex goes
 * to the locker (it queued first), then to the three waiters in the order
 * they waited, with either policy. */
#define CV_ORDER_WAITERS 3

struct cv_order {
	co_mutex m;
	co_cond c;
	int order[CV_ORDER_WAITERS + 1], n;
};

struct cv_order_one {
	co_frame co;
	co_waiter w;
	struct cv_order *o;
	int id, notifier, res;
};

static int cv_order_fn(co_frame *f)
{
	struct cv_order_one *t = (struct cv_order_one *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&t->w, &t->o->m));
	assert_int_equal(co_result(f), 0);
	if (t->notifier) {
		CO_YIELD(f); /* the locker queues on the mutex meanwhile */
		assert_int_equal(co_cond_broadcast(&t->o->c), 0);
		assert_int_equal(co_mutex_unlock(&t->o->m), 0);
		CO_RETURN(f, 0);
	}
	if (t->id < CV_ORDER_WAITERS) {
		CO_AWAIT(f, co_cond_wait(&t->w, &t->o->c, &t->o->m));
		t->res = co_result(f);
	}
	t->o->order[t->o->n++] = t->id; /* under the mutex */
	assert_int_equal(co_mutex_unlock(&t->o->m), 0);
	CO_END(f);
}

static void test_cond_relock_order(void **state)
{
	(void)state;
	for (int fifo = 0; fifo < 2; fifo++) {
		struct cv_order o;
		struct cv_order_one t[CV_ORDER_WAITERS + 2];
		co_frame *fs[CV_ORDER_WAITERS + 2];

		memset(&o, 0, sizeof o);
		memset(t, 0, sizeof t);
		assert_int_equal(fifo ? co_mutex_init_fifo(&o.m) : co_mutex_init(&o.m), 0);
		assert_int_equal(co_cond_init(&o.c), 0);
		/* waiters 0..2, the notifier, then the locker (id 3) */
		for (int i = 0; i < CV_ORDER_WAITERS + 2; i++) {
			int k = i < CV_ORDER_WAITERS ? i : i == CV_ORDER_WAITERS ? -1 : CV_ORDER_WAITERS;
			t[i].o = &o;
			t[i].id = k;
			t[i].notifier = k == -1;
			t[i].res = 1;
			co_init(&t[i].co, cv_order_fn);
			fs[i] = &t[i].co;
		}
		co_test_run_frames(fs, CV_ORDER_WAITERS + 2);
		assert_int_equal(o.n, CV_ORDER_WAITERS + 1);
		assert_int_equal(o.order[0], CV_ORDER_WAITERS); /* the locker */
		for (int i = 0; i < CV_ORDER_WAITERS; i++) {
			assert_int_equal(o.order[i + 1], i);
			assert_int_equal(t[i].res, 0);
		}
		assert_int_equal(co_cond_destroy(&o.c), 0);
		assert_int_equal(co_mutex_destroy(&o.m), 0);
	}
}

/* ---- semaphore: timed and cancelled acquires keep the count exact ------------------ */

/* sync.md, "Counting semaphore": permits go to the oldest waiters first,
 * only what is left over goes back into the count; a timed-out or
 * cancelled acquire took nothing, a released one (0) holds one permit.
 * 32 coroutines on 4 contexts take one of 3 permits by try, by a wait
 * limited to 0..19 us or by a plain wait, hold it a moment and give it
 * back; a canceller cancels 6 of them at random. Never more than 3
 * holders, only 0, -ETIME and -ECANCELED, and at the end exactly 3 permits. */
#define SEM_MIX_TASKS 32
#define SEM_MIX_ITERS 2000
#define SEM_MIX_PERMITS 3

struct sem_mix_shared {
	co_sem sem;
	atomic_int holders, over, bad;
	struct sem_mix *tasks;
};

struct sem_mix {
	co_frame co;
	co_waiter w;
	struct sem_mix_shared *sh;
	unsigned seed;
	int i, op, got;
};

static unsigned sem_mix_rand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 16;
}

static int sem_mix_fn(co_frame *f)
{
	struct sem_mix *t = (struct sem_mix *)f;
	CO_BEGIN(f);
	for (t->i = 0; t->i < SEM_MIX_ITERS; t->i++) {
		t->op = (int)(sem_mix_rand(&t->seed) % 3);
		t->got = 0;
		if (t->op == 0) {
			t->got = co_sem_try_acquire(&t->sh->sem) == 0;
		} else {
			if (t->op == 1)
				CO_AWAIT(f, co_wait_for(co_sem_acquire(&t->w, &t->sh->sem),
							(sem_mix_rand(&t->seed) % 20) * 1000));
			else
				CO_AWAIT(f, co_sem_acquire(&t->w, &t->sh->sem));
			if (co_result(f) == 0)
				t->got = 1;
			else if (co_result(f) == -ECANCELED)
				CO_RETURN(f, 0);
			else if (co_result(f) != -ETIME)
				atomic_fetch_add(&t->sh->bad, 1);
		}
		if (t->got) {
			if (atomic_fetch_add(&t->sh->holders, 1) >= SEM_MIX_PERMITS)
				atomic_fetch_add(&t->sh->over, 1);
			CO_YIELD(f);
			atomic_fetch_sub(&t->sh->holders, 1);
			if (co_sem_release(&t->sh->sem, 1) != 0)
				atomic_fetch_add(&t->sh->bad, 1);
		}
		CO_YIELD(f);
	}
	CO_END(f);
}

struct sem_mix_canceller {
	co_frame co;
	struct sem_mix_shared *sh;
	unsigned seed;
	int i, k;
};

static int sem_mix_canceller_fn(co_frame *f)
{
	struct sem_mix_canceller *c = (struct sem_mix_canceller *)f;
	CO_BEGIN(f);
	for (c->i = 0; c->i < 6; c->i++) {
		for (c->k = 0; c->k < 300; c->k++)
			CO_YIELD(f);
		co_cancel(&c->sh->tasks[sem_mix_rand(&c->seed) % SEM_MIX_TASKS].co);
	}
	CO_END(f);
}

static void test_sem_timed_cancelled_exact(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 4 };
	struct sem_mix_shared sh;
	struct sem_mix *t = calloc(SEM_MIX_TASKS, sizeof *t);
	struct sem_mix_canceller c;
	(void)state;
	assert_non_null(t);
	memset(&sh, 0, sizeof sh);
	memset(&c, 0, sizeof c);
	sh.tasks = t;
	assert_int_equal(co_sem_init(&sh.sem, SEM_MIX_PERMITS), 0);
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < SEM_MIX_TASKS; i++) {
		t[i].sh = &sh;
		t[i].seed = 3u + (unsigned)i * 6007u;
		co_init(&t[i].co, sem_mix_fn);
		assert_int_equal(co_sched_spawn_to(&s, (unsigned)i % 4, &t[i].co), 0);
	}
	c.sh = &sh;
	c.seed = 11;
	co_init(&c.co, sem_mix_canceller_fn);
	assert_int_equal(co_sched_spawn_to(&s, 2, &c.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	print_message("over %d bad %d\n", atomic_load(&sh.over), atomic_load(&sh.bad));
	assert_int_equal(atomic_load(&sh.over), 0);
	assert_int_equal(atomic_load(&sh.bad), 0);
	for (int i = 0; i < SEM_MIX_PERMITS; i++)
		assert_int_equal(co_sem_try_acquire(&sh.sem), 0);
	assert_int_equal(co_sem_try_acquire(&sh.sem), -EAGAIN);
	assert_int_equal(co_sem_destroy(&sh.sem), 0);
	free(t);
}

/* ---- misuse ------------------------------------------------------------------------- */

struct misuse {
	co_frame co;
	co_waiter w;
	co_mutex m;
	co_cond c;
	int r[8];
};

static int misuse_fn(co_frame *f)
{
	struct misuse *t = (struct misuse *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&t->w, NULL));
	t->r[0] = co_result(f);
	CO_AWAIT(f, co_mutex_lock(NULL, &t->m));
	t->r[1] = co_result(f);
	CO_AWAIT(f, co_event_wait(&t->w, NULL));
	t->r[2] = co_result(f);
	CO_AWAIT(f, co_wait_for(co_sem_acquire(&t->w, NULL), CO_MS));
	t->r[3] = co_result(f);
	CO_AWAIT(f, co_cond_wait(&t->w, &t->c, NULL));
	t->r[4] = co_result(f);
	CO_AWAIT(f, co_cond_wait(&t->w, &t->c, &t->m)); /* m not locked */
	t->r[5] = co_result(f);
	CO_AWAIT(f, co_latch_wait(&t->w, NULL));
	t->r[6] = co_result(f);
	CO_AWAIT(f, co_waitgroup_wait(NULL, NULL));
	t->r[7] = co_result(f);
	CO_END(f);
}

static co_mutex static_mutex = CO_MUTEX_INIT;

static void test_misuse(void **state)
{
	co_loop loop;
	struct misuse t;
	(void)state;
	assert_int_equal(co_mutex_trylock(&static_mutex), 0); /* CO_MUTEX_INIT: unlocked */
	assert_int_equal(co_mutex_unlock(&static_mutex), 0);
	assert_int_equal(co_mutex_init(NULL), -EINVAL);
	assert_int_equal(co_mutex_trylock(NULL), -EINVAL);
	assert_int_equal(co_mutex_unlock(NULL), -EINVAL);
	assert_int_equal(co_event_init(NULL, 0), -EINVAL);
	assert_int_equal(co_event_set(NULL), -EINVAL);
	assert_int_equal(co_event_reset(NULL), -EINVAL);
	assert_int_equal(co_event_is_set(NULL), -EINVAL);
	assert_int_equal(co_latch_init(NULL, 1), -EINVAL);
	assert_int_equal(co_latch_count_down(NULL, 1), -EINVAL);
	assert_int_equal(co_latch_try_wait(NULL), -EINVAL);
	assert_int_equal(co_waitgroup_init(NULL), -EINVAL);
	assert_int_equal(co_waitgroup_add(NULL, 1), -EINVAL);
	assert_int_equal(co_waitgroup_done(NULL), -EINVAL);
	assert_int_equal(co_sem_init(NULL, 1), -EINVAL);
	assert_int_equal(co_sem_try_acquire(NULL), -EINVAL);
	assert_int_equal(co_sem_release(NULL, 1), -EINVAL);
	assert_int_equal(co_cond_init(NULL), -EINVAL);
	assert_int_equal(co_cond_signal(NULL), -EINVAL);
	assert_int_equal(co_cond_broadcast(NULL), -EINVAL);
	assert_null(co_wait_for(NULL, 1));

	memset(&t, 0, sizeof t);
	assert_int_equal(co_mutex_init(&t.m), 0);
	assert_int_equal(co_cond_init(&t.c), 0);
	co_loop_init(&loop);
	co_init(&t.co, misuse_fn);
	assert_int_equal(co_loop_spawn(&loop, &t.co), 0);
	assert_int_equal(co_loop_run(&loop), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(t.r[i], i == 5 ? -EPERM : -EINVAL);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_mutex_counter_two_contexts),
		cmocka_unit_test(test_mutex_fifo_handoff),
		cmocka_unit_test(test_latch),
		cmocka_unit_test(test_wait_group),
		cmocka_unit_test(test_semaphore),
		cmocka_unit_test(test_sem_release_order_and_overflow),
		cmocka_unit_test(test_condvar_producer_consumer),
		cmocka_unit_test(test_condvar_timeout_cancel_relock),
		cmocka_unit_test(test_misuse),
		cmocka_unit_test(test_cond_notify_not_remembered),
		cmocka_unit_test(test_cond_relock_order),
		cmocka_unit_test(test_sem_timed_cancelled_exact),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
