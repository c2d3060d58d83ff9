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
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/syscall.h>
#include <cmocka.h>

#include <coring/io.h>
#include <coring/pool.h>
#include <coring/scheduler.h>
#include <coring/timeout.h>
#include "helpers.h"
#include "common/fault.h"

#define JOBS 400

static atomic_int ran[JOBS];

struct worker_job {
	co_frame co;
	co_pool_job run;
	co_pool *pool;
	int (*fn)(void *arg);     /* NULL: square */
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
	CO_AWAIT(f, co_pool_run(&w->run, w->pool, w->fn ? w->fn : square, w));
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

/* One worker: the jobs start in the order their frames queued them (the
 * frames run, and queue, in the order spawned). */
static int start_order[64];
static atomic_int started;

static int note_start(void *arg)
{
	struct worker_job *w = arg;

	start_order[atomic_fetch_add(&started, 1)] = w->id;
	return w->id;
}

static void test_jobs_start_in_order(void **state)
{
	static struct worker_job w[64];
	co_frame *frames[64];
	co_pool pool;
	(void)state;

	atomic_store(&started, 0);
	assert_int_equal(co_pool_init(&pool, 1), 0);
	for (int i = 0; i < 64; i++) {
		w[i] = (struct worker_job){ .pool = &pool, .fn = note_start, .id = i, .res = -1 };
		co_init(&w[i].co, worker_job_fn);
		frames[i] = &w[i].co;
	}
	co_test_run_frames(frames, 64);
	assert_int_equal(atomic_load(&started), 64);
	for (int i = 0; i < 64; i++) {
		assert_int_equal(start_order[i], i);
		assert_int_equal(w[i].res, i);
	}
	assert_int_equal(co_pool_destroy(&pool), 0);
}

/* ---- cancellation, limits, destroy ------------------------------------------ */

static int gate[2];
static atomic_int blocked_ran, never_ran;

static atomic_int gate_passed;

static int wait_for_gate(void *arg)
{
	char c;
	int ok;
	(void)arg;
	atomic_fetch_add(&blocked_ran, 1);
	ok = read(gate[0], &c, 1) == 1; /* blocks until written */
	atomic_fetch_add(&gate_passed, 1);
	return ok ? 7 : -EIO;
}

static int must_not_run(void *arg)
{
	(void)arg;
	atomic_fetch_add(&never_ran, 1);
	return 0;
}


/* One coroutine that runs fn on the pool, under a limit if limit_ns. */
struct runner {
	co_frame co;
	co_pool_job job;
	co_pool *pool;
	co_limit lim;
	int (*fn)(void *arg);
	uint64_t limit_ns;
	int res;
};

static int runner_fn(co_frame *f)
{
	struct runner *r = (struct runner *)f;
	CO_BEGIN(f);
	if (r->limit_ns)
		CO_AWAIT(f, co_timeout(&r->lim, co_pool_run(&r->job, r->pool, r->fn, NULL), r->limit_ns));
	else
		CO_AWAIT(f, co_pool_run(&r->job, r->pool, r->fn, NULL));
	r->res = co_result(f);
	CO_END(f);
}

static void runner_init(struct runner *r, co_pool *p, int (*fn)(void *), uint64_t limit_ns)
{
	memset(r, 0, sizeof *r);
	r->pool = p;
	r->fn = fn;
	r->limit_ns = limit_ns;
	r->res = 99;
	co_init(&r->co, runner_fn);
}

/* One worker, b's job blocking it on the gate, q's queued behind. */
static void gate_setup(co_pool *pool, struct runner *b, struct runner *q)
{
	assert_int_equal(pipe(gate), 0);
	atomic_store(&blocked_ran, 0);
	atomic_store(&never_ran, 0);
	atomic_store(&gate_passed, 0);
	assert_int_equal(co_pool_init(pool, 1), 0);
	runner_init(b, pool, wait_for_gate, 0);
	runner_init(q, pool, must_not_run, 0);
}

struct driver {
	co_frame co;
	co_pool *pool;
	struct runner *q, *b; /* b blocks the only worker, q queues behind it */
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
	/* wait past the queued limit's, then open the gate: b, cancelled
	 * while its job runs, has its job's result */
	CO_AWAIT(f, co_sleep(&d->io, 5 * CO_MS));
	if (write(gate[1], "g", 1) != 1)
		CO_RETURN(f, -EIO);
	CO_END(f);
}

static void test_cancel_and_limit(void **state)
{
	co_pool pool;
	struct runner b, q, l;
	struct driver d = { .q = &q, .b = &b };
	co_frame *frames[4] = { &b.co, &q.co, &l.co, &d.co };
	(void)state;

	gate_setup(&pool, &b, &q);
	runner_init(&l, &pool, must_not_run, CO_MS);
	d.pool = &pool;
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
	struct runner *q;
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
	struct runner b, q;
	struct stopper st = { .e = &e, .q = &q, .stop = 99 };
	(void)state;

	gate_setup(&pool, &b, &q);
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

/* A cancel stop whose grace runs out while a job runs: the stop stays
 * bounded. The job's frame (on the heap, freed by its on_done) is
 * finished for it with -ECANCELED after the grace; the job runs on to its
 * end on its worker, which drops its result without touching the freed
 * frame (ASan); pool and engine destroy answer -EBUSY until the job has
 * ended, then succeed. On a lone engine and on a scheduler's context. */
struct owned {
	co_frame co;
	co_pool_job job;
	co_pool *pool;
};

static atomic_int owned_status = 1, owned_done_n;

static int owned_fn(co_frame *f)
{
	struct owned *o = (struct owned *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_pool_run(&o->job, o->pool, wait_for_gate, NULL));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void owned_done(co_frame *f)
{
	atomic_store(&owned_status, co_status(f));
	free(f);
	atomic_fetch_add(&owned_done_n, 1);
}

static struct owned *owned_new(co_pool *pool)
{
	struct owned *o = calloc(1, sizeof *o);

	assert_non_null(o);
	o->pool = pool;
	co_init(&o->co, owned_fn);
	o->co.on_done = owned_done;
	atomic_store(&owned_status, 1);
	atomic_store(&owned_done_n, 0);
	return o;
}

/* The job still blocks: the frame was given up, the destroys wait. Open
 * the gate; once the job ended the pool's destroy succeeds. */
static void gate_open_after_give_up(co_pool *pool)
{
	assert_int_equal(atomic_load(&owned_done_n), 1);
	assert_int_equal(atomic_load(&owned_status), -ECANCELED);
	assert_int_equal(atomic_load(&gate_passed), 0);
	assert_int_equal(co_pool_destroy(pool), -EBUSY);
	assert_int_equal(write(gate[1], "g", 1), 1);
	while (co_pool_destroy(pool) == -EBUSY) /* the job's end lets it go */
		usleep(100);
	assert_int_equal(atomic_load(&gate_passed), 1);
	close(gate[0]);
	close(gate[1]);
}

static void test_cancel_stop_past_grace_gives_up_job(void **state)
{
	co_engine_opts eo = { .cancel_grace_ns = 20 * CO_MS };
	co_sched_opts so = { .contexts = 1, .engine = eo };
	co_pool pool;
	co_engine e;
	co_sched s;
	co_test_runner r;
	struct runner unused_b, unused_q;
	struct owned *o;
	(void)state;

	/* a lone engine, a timed stop (a drain of 10 ms, then the cancel) */
	gate_setup(&pool, &unused_b, &unused_q);
	assert_int_equal(co_engine_init(&e, &eo), 0);
	o = owned_new(&pool);
	assert_int_equal(co_engine_spawn(&e, &o->co), 0);
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_STOP);
	WAIT_UNTIL(atomic_load(&blocked_ran) == 1); /* the job has started */
	assert_int_equal(co_engine_stop_timed(&e, 10 * CO_MS), 0);
	assert_int_equal(co_test_runner_join(&r), 0); /* without the job's end */
	assert_int_equal(co_engine_destroy(&e), -EBUSY); /* the job still runs */
	assert_int_equal(co_engine_state(&e), CO_ENGINE_STOPPED);
	gate_open_after_give_up(&pool);
	assert_int_equal(co_engine_destroy(&e), 0);

	/* a scheduler's context, a cancel stop */
	gate_setup(&pool, &unused_b, &unused_q);
	assert_int_equal(co_sched_init(&s, &so), 0);
	o = owned_new(&pool);
	assert_int_equal(co_sched_spawn(&s, &o->co), 0);
	WAIT_UNTIL(atomic_load(&blocked_ran) == 1);
	assert_int_equal(co_sched_stop(&s, CO_STOP_CANCEL), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_state(&s), CO_SCHED_ENDED);
	assert_int_equal(co_sched_destroy(&s), -EBUSY); /* its engine is held */
	assert_int_equal(co_sched_state(&s), CO_SCHED_ENDED);
	gate_open_after_give_up(&pool);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* A stop gives up a running job (job_give_up) and holds the engine for the
 * worker, whose job_ended lets go of that hold. The hold is taken under
 * the pool's lock, before the worker can take it: here the job ends right
 * as the give-up lets go of the lock (CO__POINT_POOL_GIVEN_UP, the worker
 * through job_ended before the frame is woken). With the hold taken after
 * the unlock, the worker's let-go came first: the engine's held count
 * dropped below zero (a debug build's trap, invariant 8) and a destroy
 * could free the engine the hold was for. */
static co_pool *given_up_pool;

static void job_ends_in_give_up(void *arg)
{
	unsigned busy;
	(void)arg;
	assert_int_equal(write(gate[1], "g", 1), 1);
	do { /* the worker's job_ended has run */
		pthread_mutex_lock(&given_up_pool->lock);
		busy = given_up_pool->busy;
		pthread_mutex_unlock(&given_up_pool->lock);
	} while (busy != 0 && (sched_yield(), 1));
}

static void test_give_up_holds_before_the_job_ends(void **state)
{
	co_engine_opts eo = { .cancel_grace_ns = 20 * CO_MS };
	co_pool pool;
	co_engine e;
	co_test_runner r;
	struct runner unused_b, unused_q;
	struct owned *o;
	(void)state;

	gate_setup(&pool, &unused_b, &unused_q);
	given_up_pool = &pool;
	assert_int_equal(co_engine_init(&e, &eo), 0);
	o = owned_new(&pool);
	assert_int_equal(co_engine_spawn(&e, &o->co), 0);
	co__fault_on_point(CO__POINT_POOL_GIVEN_UP, job_ends_in_give_up, NULL);
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_STOP);
	WAIT_UNTIL(atomic_load(&blocked_ran) == 1); /* the job has started */
	assert_int_equal(co_engine_stop(&e, CO_STOP_CANCEL), 0);
	assert_int_equal(co_test_runner_join(&r), 0);
	co__fault_on_point(CO__POINT_POOL_GIVEN_UP, NULL, NULL);
	assert_int_equal(atomic_load(&owned_done_n), 1);
	assert_int_equal(atomic_load(&owned_status), -ECANCELED); /* given up: its 7 dropped */
	assert_int_equal(atomic_load(&gate_passed), 1);
	assert_int_equal(co_engine_destroy(&e), 0); /* the hold was let go */
	assert_int_equal(co_pool_destroy(&pool), 0);
	close(gate[0]);
	close(gate[1]);
}

/* A frame already cancelled when it awaits a job: the await ends with
 * -ECANCELED at once, and the job is neither queued nor run. */
struct self_cancelled {
	co_frame co;
	co_pool_job job;
	co_pool *pool;
	int res, cancel;
};

static int self_cancelled_fn(co_frame *f)
{
	struct self_cancelled *c = (struct self_cancelled *)f;
	CO_BEGIN(f);
	c->cancel = co_cancel(f); /* its own thread: at once */
	CO_AWAIT(f, co_pool_run(&c->job, c->pool, must_not_run, NULL));
	c->res = co_result(f);
	CO_END(f);
}

static void test_cancelled_frame_queues_no_job(void **state)
{
	co_pool pool;
	struct self_cancelled c = { .res = 1, .cancel = 1 };
	(void)state;
	atomic_store(&never_ran, 0);
	assert_int_equal(co_pool_init(&pool, 1), 0);
	c.pool = &pool;
	co_init(&c.co, self_cancelled_fn);
	co_test_run1(&c.co);
	assert_int_equal(c.cancel, 0);
	assert_int_equal(c.res, -ECANCELED);
	/* had it been queued, its worker would run it: destroy joins it */
	assert_int_equal(co_pool_destroy(&pool), 0);
	assert_int_equal(atomic_load(&never_ran), 0);
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

/* Records its thread id in *arg. */
static void *nothing(void *arg)
{
	*(pid_t *)arg = (pid_t)syscall(SYS_gettid);
	return NULL;
}

/* A joined thread may still be listed in /proc/self/task for a moment
 * (the kernel reaps it after the join returns): wait until tid is gone. */
static int task_listed(pid_t tid)
{
	char path[64];

	snprintf(path, sizeof path, "/proc/self/task/%d", (int)tid);
	return access(path, F_OK) == 0;
}

/* Two destroys at once: the second, while the first joins the workers
 * (held there: a fault point), answers -EBUSY; a third, after, -EINVAL.
 * Without that both joined the same threads and freed the workers twice. */
static co_pool *two_of;
static int second_destroy_ret = 1;

static int second_destroy(void *arg)
{
	return co_pool_destroy(arg);
}

static void destroy_while_stopping(void *arg)
{
	(void)arg;
	second_destroy_ret = co_test_on_thread(second_destroy, two_of);
}

static void test_two_destroys_at_once(void **state)
{
	co_pool pool;
	(void)state;
	alarm(20); /* two joins of the same threads: fail, not hang */
	assert_int_equal(co_pool_init(&pool, 2), 0);
	two_of = &pool;
	co__fault_on_point(CO__POINT_POOL_STOPPING, destroy_while_stopping, NULL);
	assert_int_equal(co_pool_destroy(&pool), 0);
	co__fault_on_point(CO__POINT_POOL_STOPPING, NULL, NULL);
	assert_int_equal(second_destroy_ret, -EBUSY);
	assert_int_equal(co_pool_destroy(&pool), -EINVAL);
	alarm(0);
}

/* A second destroy from another thread that learns of the first only
 * through a relaxed flag (nothing that orders memory, as two threads that
 * race to tear a pool down): -EINVAL, and every look it takes at the pool
 * is ordered after the first destroy's writes by the pool's lock. Without
 * the lock around the destroy's first look at p->workers, that look races
 * with the first destroy's write of it (TSan reports the race). */
static atomic_int late_go;
static int late_ret = 1;

static void *late_destroy(void *arg)
{
	while (!atomic_load_explicit(&late_go, memory_order_relaxed))
		sched_yield();
	late_ret = co_pool_destroy(arg);
	return NULL;
}

static void test_destroy_racing_from_another_thread(void **state)
{
	co_pool pool;
	pthread_t t;
	(void)state;

	assert_int_equal(co_pool_init(&pool, 2), 0);
	atomic_store(&late_go, 0);
	assert_int_equal(pthread_create(&t, NULL, late_destroy, &pool), 0);
	assert_int_equal(co_pool_destroy(&pool), 0);
	atomic_store_explicit(&late_go, 1, memory_order_relaxed);
	pthread_join(t, NULL);
	assert_int_equal(late_ret, -EINVAL);
	/* an init refused for want of a thread leaves a pool whose lock a
	 * destroy may take: -EINVAL */
	co__fault_arm(CO__FAULT_THREAD, 2, EAGAIN);
	assert_int_equal(co_pool_init(&pool, 2), -EAGAIN);
	co__fault_arm(CO__FAULT_THREAD, 0, 0);
	assert_int_equal(co_pool_destroy(&pool), -EINVAL);
}

static void test_errors(void **state)
{
	co_pool pool;
	co_pool_job j;
	struct runner a;
	pthread_t t;
	pid_t tid = 0;
	int threads;
	(void)state;

	/* a first thread, so that a sanitizer's own helper thread is running
	 * before the count is taken; the count once it is reaped */
	assert_int_equal(pthread_create(&t, NULL, nothing, &tid), 0);
	pthread_join(t, NULL);
	WAIT_UNTIL(!task_listed(tid));
	threads = count_threads();

	assert_int_equal(co_pool_init(NULL, 1), -EINVAL);
	/* a refused init leaves the pool not set up, whatever its memory
	 * held: a destroy answers -EINVAL (it took a lock of garbage) */
	memset(&pool, 0xff, sizeof pool);
	assert_int_equal(co_pool_init(&pool, 0), -EINVAL);
	assert_int_equal(co_pool_destroy(&pool), -EINVAL);
	memset(&pool, 0xff, sizeof pool);
	assert_int_equal(co_pool_init(&pool, 1025), -EINVAL);
	assert_int_equal(co_pool_destroy(&pool), -EINVAL);
	assert_int_equal(co_pool_destroy(NULL), -EINVAL);
	/* the third thread cannot be created: none is left running */
	co__fault_arm(CO__FAULT_THREAD, 3, EAGAIN);
	assert_int_equal(co_pool_init(&pool, 4), -EAGAIN);
	co__fault_arm(CO__FAULT_THREAD, 0, 0);
	WAIT_UNTIL(count_threads() == threads); /* a thread left running hangs here */
	co__fault_arm(CO__FAULT_ALLOC, 1, ENOMEM);
	assert_int_equal(co_pool_init(&pool, 4), -ENOMEM);
	co__fault_arm(CO__FAULT_ALLOC, 0, 0);
	/* NULL arguments, and a run after destroy */
	assert_int_equal(co_pool_init(&pool, 2), 0);
	assert_null(co_pool_run(NULL, &pool, must_not_run, NULL));
	assert_null(co_pool_run(&j, NULL, must_not_run, NULL));
	assert_null(co_pool_run(&j, &pool, NULL, NULL));
	assert_int_equal(co_pool_destroy(&pool), 0);
	WAIT_UNTIL(count_threads() == threads);
	runner_init(&a, &pool, must_not_run, 0);
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

/* Hints getaddrinfo refuses (an unknown family, socket type or flag): the
 * await is -EINVAL, getaddrinfo's own code in l->eai, no list
 * (docs/pool.md: "-EINVAL (bad hints)"). */
struct bad_hints {
	co_frame co;
	co_lookup dns[3];
	co_pool *pool;
	struct addrinfo hints[3];
	int res[3], i;
};

static int bad_hints_fn(co_frame *f)
{
	struct bad_hints *b = (struct bad_hints *)f;
	CO_BEGIN(f);
	for (b->i = 0; b->i < 3; b->i++) {
		CO_AWAIT(f, co_getaddrinfo(&b->dns[b->i], b->pool, "127.0.0.1", "80", &b->hints[b->i]));
		b->res[b->i] = co_result(f);
	}
	CO_END(f);
}

static void test_getaddrinfo_bad_hints(void **state)
{
	static const int eai[3] = { EAI_FAMILY, EAI_SOCKTYPE, EAI_BADFLAGS };
	co_pool pool;
	struct bad_hints b;
	(void)state;

	memset(&b, 0, sizeof b);
	assert_int_equal(co_pool_init(&pool, 1), 0);
	b.pool = &pool;
	b.hints[0].ai_family = 12345;
	b.hints[1].ai_socktype = 12345;
	b.hints[2].ai_flags = (int)0x40000000;
	co_init(&b.co, bad_hints_fn);
	co_test_run1(&b.co);
	for (int i = 0; i < 3; i++) {
		if (b.res[i] != -EINVAL || b.dns[i].eai != eai[i])
			fail_msg("hints %d: %d, eai %d (%s)", i, b.res[i], b.dns[i].eai,
				 gai_strerror(b.dns[i].eai));
		assert_null(b.dns[i].result);
	}
	assert_int_equal(co_pool_destroy(&pool), 0);
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

/* ---- a limit that runs out as a job ends -------------------------------------------------- */

/* A job's function returns, and before its worker records the result
 * (CO__POINT_POOL_ENDED) the awaiting frame's limit runs out (its chain
 * counts the limit: co_cancelled) and cancels the await, which finds the
 * job running. The holder keeps the engine's thread from the moment the
 * job is queued until a worker has taken it and the limit's time has
 * passed, so that the limit finds it running, never queued. The job ran,
 * so its result is the value: for co_timeout of the job and for a child
 * that runs it under co_timeout. */
struct ended {
	co_frame co, holder;
	struct ended_kid {
		co_frame co;
		co_pool_job job;
		co_pool *pool;
	} kid;
	co_pool_job job;
	co_pool *pool;
	co_limit lim;
	uint64_t end;
	int child, res;
	atomic_int held;
};

static atomic_int ended_ran;

static int ended_job(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ended_ran, 1);
	return 7;
}

/* On the worker: hold the result back until the limit has run out. */
static void ended_window(void *arg)
{
	struct ended *t = arg;

	while (!co_cancelled(&t->co))
		;
	atomic_store(&t->held, 1);
}

static int ended_kid_fn(co_frame *f)
{
	struct ended_kid *k = (struct ended_kid *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_pool_run(&k->job, k->pool, ended_job, NULL));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static int ended_fn(co_frame *f)
{
	struct ended *t = (struct ended *)f;
	CO_BEGIN(f);
	if (t->child) {
		t->kid.pool = t->pool;
		co_init(&t->kid.co, ended_kid_fn);
		CO_AWAIT(f, co_timeout_at(&t->lim, &t->kid.co, t->end));
	} else {
		CO_AWAIT(f, co_timeout_at(&t->lim, co_pool_run(&t->job, t->pool, ended_job, NULL),
					  t->end));
	}
	t->res = co_result(f);
	CO_END(f);
}

static int ended_holder_fn(co_frame *f)
{
	struct ended *t = (struct ended *)(void *)((char *)f - offsetof(struct ended, holder));
	CO_BEGIN(f);
	while (atomic_load(&ended_ran) == 0 || co_now_ns() < t->end + CO_MS)
		;
	CO_END(f);
}

static void test_job_result_kept(void **state)
{
	co_pool pool;

	(void)state;
	assert_int_equal(co_pool_init(&pool, 1), 0);
	for (int child = 0; child < 2; child++) {
		struct ended t;
		co_frame *frames[2] = { &t.co, &t.holder };

		memset(&t, 0, sizeof t);
		t.pool = &pool;
		t.child = child;
		t.end = co_now_ns() + 2 * CO_MS;
		atomic_store(&ended_ran, 0);
		co__fault_on_point(CO__POINT_POOL_ENDED, ended_window, &t);
		co_init(&t.co, ended_fn);
		co_init(&t.holder, ended_holder_fn);
		co_test_run_frames(frames, 2);
		co__fault_on_point(CO__POINT_POOL_ENDED, NULL, NULL);
		assert_int_equal(atomic_load(&t.held), 1); /* the window was held open */
		assert_int_equal(atomic_load(&ended_ran), 1);
		assert_int_equal(t.res, 7);
	}
	assert_int_equal(co_pool_destroy(&pool), 0);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_every_job_runs_once),
	cmocka_unit_test(test_jobs_start_in_order),
	cmocka_unit_test(test_cancel_and_limit),
	cmocka_unit_test(test_cancel_stop_ends_queued_jobs),
	cmocka_unit_test(test_cancel_stop_past_grace_gives_up_job),
	cmocka_unit_test(test_give_up_holds_before_the_job_ends),
	cmocka_unit_test(test_cancelled_frame_queues_no_job),
	cmocka_unit_test(test_errors),
	cmocka_unit_test(test_two_destroys_at_once),
	cmocka_unit_test(test_destroy_racing_from_another_thread),
	cmocka_unit_test(test_getaddrinfo_localhost),
	cmocka_unit_test(test_getaddrinfo_bad_hints),
	cmocka_unit_test(test_job_result_kept),
};

CO_TEST_MAIN(tests, 1)
