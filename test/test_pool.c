/* SPDX-License-Identifier: MIT */
/*
 * Blocking work on a pool (pool.h): every job run exactly once and its
 * result delivered, queued jobs cancelled or limited without running, a
 * running job finishing, destroy refusing while work is in, thread and
 * allocation failures, and a real lookup of localhost.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <dirent.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include <coring/io.h>
#include <coring/pool.h>
#include <coring/timeout.h>
#include "helpers.h"
#include "fault.h"

#define JOBS 400

static atomic_int ran[JOBS];

struct worker_job {
	co_frame co;
	co_pool_job run;
	co_pool *pool;
	int id, res;
};

static int square(void *arg)
{
	struct worker_job *w = arg;
	atomic_fetch_add(&ran[w->id], 1);
	return w->id * w->id;
}

static int worker_job_fn(co_frame *f)
{
	struct worker_job *w = (struct worker_job *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_pool_run(&w->run, w->pool, square, w));
	w->res = co_result(f);
	CO_END(f);
}

/* 400 coroutines on one engine, 4 workers: each job runs once, each
 * coroutine gets its own result. */
static void test_every_job_runs_once(void **state)
{
	static struct worker_job w[JOBS];
	co_frame *frames[JOBS];
	co_pool pool;
	(void)state;

	assert_int_equal(co_pool_init(&pool, 4), 0);
	for (int i = 0; i < JOBS; i++) {
		atomic_store(&ran[i], 0);
		w[i] = (struct worker_job){ .pool = &pool, .id = i, .res = -1 };
		co_init(&w[i].co, worker_job_fn);
		frames[i] = &w[i].co;
	}
	co_test_run_frames(frames, JOBS);
	for (int i = 0; i < JOBS; i++) {
		assert_int_equal(atomic_load(&ran[i]), 1);
		assert_int_equal(w[i].res, i * i);
	}
	assert_int_equal(co_pool_destroy(&pool), 0);
}

/* ---- cancellation, limits, destroy ------------------------------------------ */

static int gate[2];
static atomic_int blocked_ran, never_ran;

static int wait_for_gate(void *arg)
{
	char c;
	(void)arg;
	atomic_fetch_add(&blocked_ran, 1);
	return read(gate[0], &c, 1) == 1 ? 7 : -EIO; /* blocks until written */
}

static int must_not_run(void *arg)
{
	(void)arg;
	atomic_fetch_add(&never_ran, 1);
	return 0;
}


/* b is queued behind a (which blocks its only worker), then cancelled */
struct queued {
	co_frame co;
	co_pool_job job;
	co_pool *pool;
	int res;
};

static int queued_fn(co_frame *f)
{
	struct queued *q = (struct queued *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_pool_run(&q->job, q->pool, must_not_run, NULL));
	q->res = co_result(f);
	CO_END(f);
}

struct blocker {
	co_frame co;
	co_pool_job job;
	co_pool *pool;
	int res;
};

static int blocker_fn(co_frame *f)
{
	struct blocker *b = (struct blocker *)f;
	CO_BEGIN(f);
	/* cancelled while its job runs: the job runs on, and the await ends
	 * when it does, with its result (it won the race) */
	CO_AWAIT(f, co_pool_run(&b->job, b->pool, wait_for_gate, NULL));
	b->res = co_result(f);
	CO_END(f);
}

struct limited {
	co_frame co;
	co_pool_job job;
	co_pool *pool;
	co_limit lim;
	int res;
};

static int limited_fn(co_frame *f)
{
	struct limited *l = (struct limited *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_timeout(&l->lim, co_pool_run(&l->job, l->pool, must_not_run, NULL), CO_MS));
	l->res = co_result(f);
	CO_END(f);
}

struct driver {
	co_frame co;
	co_pool *pool;
	struct queued *q;
	struct blocker *b;
	co_io io;
	int destroy_busy, cancel, cancel_running;
};

static int driver_fn(co_frame *f)
{
	struct driver *d = (struct driver *)f;
	CO_BEGIN(f);
	/* let the blocker's job start and the queued one queue */
	while (atomic_load(&blocked_ran) == 0 || !co_waiting(&d->q->co))
		CO_YIELD(f);
	d->destroy_busy = co_pool_destroy(d->pool);
	d->cancel = co_cancel(&d->q->co);
	d->cancel_running = co_cancel(&d->b->co);
	/* wait past the blocker's limit, then open the gate */
	CO_AWAIT(f, co_sleep(&d->io, 5 * CO_MS));
	if (write(gate[1], "g", 1) != 1)
		CO_RETURN(f, -EIO);
	CO_END(f);
}

static void test_cancel_and_limit(void **state)
{
	co_pool pool;
	struct blocker b = { .res = 99 };
	struct queued q = { .res = 99 };
	struct limited l = { .res = 99 };
	struct driver d = { .q = &q, .b = &b };
	co_frame *frames[4] = { &b.co, &q.co, &l.co, &d.co };
	(void)state;

	assert_int_equal(pipe(gate), 0);
	atomic_store(&blocked_ran, 0);
	atomic_store(&never_ran, 0);
	assert_int_equal(co_pool_init(&pool, 1), 0);
	b.pool = q.pool = l.pool = d.pool = &pool;
	co_init(&b.co, blocker_fn);
	co_init(&q.co, queued_fn);
	co_init(&l.co, limited_fn);
	co_init(&d.co, driver_fn);
	co_test_run_frames(frames, 4);
	assert_int_equal(d.destroy_busy, -EBUSY); /* work was in */
	assert_int_equal(d.cancel, 0);
	assert_int_equal(q.res, -ECANCELED);     /* queued: never ran */
	assert_int_equal(l.res, -ETIME);         /* queued past its limit */
	assert_int_equal(atomic_load(&never_ran), 0);
	assert_int_equal(d.cancel_running, 0);
	assert_int_equal(b.res, 7);              /* ran to its end, cancel or not */
	assert_int_equal(atomic_load(&blocked_ran), 1);
	assert_int_equal(co_pool_destroy(&pool), 0);
	assert_int_equal(co_pool_destroy(&pool), -EINVAL); /* twice */
	close(gate[0]);
	close(gate[1]);
}

/* A cancel stop ends a queued job (it never runs) and waits for a running
 * one, whose frame then finishes. */
struct stopper {
	co_frame co;
	co_io io;
	co_engine *e;
	struct queued *q;
	int stop;
};

static int stopper_fn(co_frame *f)
{
	struct stopper *st = (struct stopper *)f;
	CO_BEGIN(f);
	while (atomic_load(&blocked_ran) == 0 || !co_waiting(&st->q->co))
		CO_YIELD(f);
	st->stop = co_engine_stop(st->e, CO_STOP_CANCEL);
	/* the stop's cancel runs at the start of the next turn: an I/O await
	 * resumes in a later turn than this one (a yield may not) */
	CO_AWAIT(f, co_nop(&st->io));
	if (write(gate[1], "g", 1) != 1)
		CO_RETURN(f, -EIO);
	CO_END(f);
}

static void test_cancel_stop_ends_queued_jobs(void **state)
{
	co_engine e;
	co_pool pool;
	struct blocker b = { .res = 99 };
	struct queued q = { .res = 99 };
	struct stopper st = { .e = &e, .q = &q, .stop = 99 };
	(void)state;

	assert_int_equal(pipe(gate), 0);
	atomic_store(&blocked_ran, 0);
	atomic_store(&never_ran, 0);
	assert_int_equal(co_pool_init(&pool, 1), 0);
	b.pool = q.pool = &pool;
	co_init(&b.co, blocker_fn);
	co_init(&q.co, queued_fn);
	co_init(&st.co, stopper_fn);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_engine_spawn(&e, &b.co), 0);
	assert_int_equal(co_engine_spawn(&e, &q.co), 0);
	assert_int_equal(co_engine_spawn(&e, &st.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0);
	assert_int_equal(st.stop, 0);
	assert_int_equal(q.res, -ECANCELED);
	assert_int_equal(atomic_load(&never_ran), 0);
	assert_int_equal(b.res, 7);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_pool_destroy(&pool), 0);
	close(gate[0]);
	close(gate[1]);
}

struct after {
	co_frame co;
	co_pool_job job;
	co_pool *pool;
	int res;
};

static int after_fn(co_frame *f)
{
	struct after *a = (struct after *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_pool_run(&a->job, a->pool, must_not_run, NULL));
	a->res = co_result(f);
	CO_END(f);
}

static int count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	struct dirent *e;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void test_errors(void **state)
{
	co_pool pool;
	co_pool_job j;
	struct after a = { .res = 99 };
	int threads = count_threads();
	(void)state;

	assert_int_equal(co_pool_init(NULL, 1), -EINVAL);
	assert_int_equal(co_pool_init(&pool, 0), -EINVAL);
	assert_int_equal(co_pool_init(&pool, 1025), -EINVAL);
	assert_int_equal(co_pool_destroy(NULL), -EINVAL);
	/* the third thread cannot be created: none is left running */
	co__fault_arm(CO__FAULT_THREAD, 3, EAGAIN);
	assert_int_equal(co_pool_init(&pool, 4), -EAGAIN);
	co__fault_arm(CO__FAULT_THREAD, 0, 0);
	assert_int_equal(count_threads(), threads);
	co__fault_arm(CO__FAULT_ALLOC, 1, ENOMEM);
	assert_int_equal(co_pool_init(&pool, 4), -ENOMEM);
	co__fault_arm(CO__FAULT_ALLOC, 0, 0);
	/* NULL arguments, and a run after destroy */
	assert_int_equal(co_pool_init(&pool, 2), 0);
	assert_null(co_pool_run(NULL, &pool, must_not_run, NULL));
	assert_null(co_pool_run(&j, NULL, must_not_run, NULL));
	assert_null(co_pool_run(&j, &pool, NULL, NULL));
	assert_int_equal(co_pool_destroy(&pool), 0);
	assert_int_equal(count_threads(), threads);
	a.pool = &pool;
	co_init(&a.co, after_fn);
	co_test_run1(&a.co);
	assert_int_equal(a.res, -ESHUTDOWN);
}

/* ---- getaddrinfo ---------------------------------------------------------- */

struct resolve {
	co_frame co;
	co_lookup dns, bad;
	co_pool *pool;
	struct addrinfo hints, numeric;
	int res, bad_res;
};

static int resolve_fn(co_frame *f)
{
	struct resolve *r = (struct resolve *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_getaddrinfo(&r->dns, r->pool, "localhost", "80", &r->hints));
	r->res = co_result(f);
	CO_AWAIT(f, co_getaddrinfo(&r->bad, r->pool, "not an address", NULL, &r->numeric));
	r->bad_res = co_result(f);
	CO_END(f);
}

static void test_getaddrinfo_localhost(void **state)
{
	co_pool pool;
	struct resolve r = { .res = 99, .bad_res = 99 };
	int loopback = 0;
	(void)state;

	assert_int_equal(co_pool_init(&pool, 2), 0);
	r.pool = &pool;
	r.hints.ai_socktype = SOCK_STREAM;
	r.numeric.ai_flags = AI_NUMERICHOST;
	co_init(&r.co, resolve_fn);
	co_test_run1(&r.co);
	assert_int_equal(r.res, 0);
	assert_int_equal(r.dns.eai, 0);
	assert_non_null(r.dns.result);
	for (struct addrinfo *ai = r.dns.result; ai; ai = ai->ai_next) {
		if (ai->ai_family == AF_INET) {
			struct sockaddr_in *sa = (struct sockaddr_in *)ai->ai_addr;
			loopback |= sa->sin_addr.s_addr == htonl(INADDR_LOOPBACK) && sa->sin_port == htons(80);
		} else if (ai->ai_family == AF_INET6) {
			struct sockaddr_in6 *sa = (struct sockaddr_in6 *)ai->ai_addr;
			loopback |= IN6_IS_ADDR_LOOPBACK(&sa->sin6_addr) && sa->sin6_port == htons(80);
		}
	}
	assert_true(loopback);
	freeaddrinfo(r.dns.result);
	assert_int_equal(r.bad_res, -ENOENT);
	assert_int_equal(r.bad.eai, EAI_NONAME);
	assert_null(r.bad.result);
	assert_null(co_getaddrinfo(NULL, &pool, "localhost", NULL, NULL));
	assert_int_equal(co_pool_destroy(&pool), 0);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_every_job_runs_once),
	cmocka_unit_test(test_cancel_and_limit),
	cmocka_unit_test(test_cancel_stop_ends_queued_jobs),
	cmocka_unit_test(test_errors),
	cmocka_unit_test(test_getaddrinfo_localhost),
};

CO_TEST_MAIN(tests, 1)
