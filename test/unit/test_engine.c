/* SPDX-License-Identifier: MIT */
/* Tests of the engine (lib/engine/) as a caller meets it: init and spawn
 * errors, misuse, deadlock reports, parked frames, stop cancelling I/O,
 * nested runs, posts from other threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>
#include <sys/socket.h>
#include <cmocka.h>

#include <coring/channel.h>
#include <coring/engine.h>
#include <coring/io.h>

#include "common/base.h"
#include "common/fault.h"
#include "helpers.h"

/* ---- setup errors ---------------------------------------------------------- */

static void test_init_errors(void **state)
{
	co_engine e;
	co_engine_opts o;
	(void)state;
	assert_int_equal(co_engine_init(NULL, NULL), -EINVAL);
	o = (co_engine_opts){ .ready_size = 3 };
	/* refused, whatever the memory held: not set up (a destroy of it hung
	 * on borrowers of garbage) */
	memset(&e, 0xff, sizeof e);
	assert_int_equal(co_engine_init(&e, &o), -EINVAL);
	assert_int_equal(co_engine_state(&e), CO_ENGINE_DEAD);
	assert_int_equal(co_engine_destroy(&e), -EINVAL);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), -EINVAL);
	for (unsigned i = 0; i < 4; i++) { /* a later version's option: refused */
		o = (co_engine_opts){ 0 };
		o.reserved[i] = 1;
		assert_int_equal(co_engine_init(&e, &o), -EINVAL);
	}
	o = (co_engine_opts){ .ready_size = 1 };
	assert_int_equal(co_engine_init(&e, &o), -EINVAL);
	o = (co_engine_opts){ .sq_entries = 64, .cq_entries = 32 };
	assert_int_equal(co_engine_init(&e, &o), -EINVAL);
	o = (co_engine_opts){ .sq_entries = 1 };
	assert_int_equal(co_engine_init(&e, &o), -EINVAL);
	o = (co_engine_opts){ .sq_entries = 2 }; /* the smallest accepted */
	assert_int_equal(co_engine_init(&e, &o), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_engine_destroy(NULL), -EINVAL);
	assert_int_equal(co_engine_run(NULL, CO_RUN_UNTIL_IDLE), -EINVAL);
	assert_int_equal(co_engine_stop(NULL, 0), -EINVAL);

	o = (co_engine_opts){ .batch = 0, .sq_entries = 0 }; /* zero: the defaults */
	assert_int_equal(co_engine_init(&e, &o), 0);
	assert_int_equal(e.batch, 256);
	assert_int_equal(co_engine_destroy(&e), 0);

	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_engine_run(&e, 7), -EINVAL);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_engine_destroy(&e), -EINVAL); /* twice */
}

/* opts.cq_entries 0 is four times the SQ: for an SQ past a quarter of
 * UINT_MAX too, where the product would wrap below the SQ (and the init
 * answered -EINVAL, as for cq_entries < sq_entries); IORING_SETUP_CLAMP
 * takes such sizes down to the kernel's largest. */
static void test_default_cq_for_any_sq(void **state)
{
	co_engine e;
	co_engine_opts o = { .sq_entries = 1u << 30, .setup_flags = IORING_SETUP_CLAMP };
	int err;
	(void)state;
	err = co_engine_init(&e, &o);
	if (err == -ENOMEM) {
		print_message("      no memory for the kernel's largest ring: skipped\n");
		return;
	}
	assert_int_equal(err, 0);
	assert_true(e.ring.cq.ring_entries >= e.ring.sq.ring_entries);
	assert_int_equal(co_engine_destroy(&e), 0);
	o.sq_entries = UINT_MAX;
	assert_int_equal(co_engine_init(&e, &o), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* The owner thread ends; a thread made after it (which glibc often gives
 * the same pthread_t) is not the owner: -EPERM. */
struct owner_try {
	co_engine *e;
	pthread_t self;
	int run, tick;
};

static void *owner_first(void *arg)
{
	struct owner_try *t = arg;

	t->self = pthread_self();
	t->tick = co_engine_tick(t->e);
	return NULL;
}

static void *owner_after(void *arg)
{
	struct owner_try *t = arg;

	t->self = pthread_self();
	t->run = co_engine_run(t->e, CO_RUN_UNTIL_IDLE);
	t->tick = co_engine_tick(t->e);
	return NULL;
}

static void test_owner_ended_next_thread_refused(void **state)
{
	co_engine e;
	struct owner_try a = { .e = &e }, b = { .e = &e };
	pthread_t th;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(pthread_create(&th, NULL, owner_first, &a), 0);
	pthread_join(th, NULL);
	assert_int_equal(a.tick, 0); /* the owner now, and gone */
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_create(&th, NULL, owner_after, &b), 0);
		pthread_join(th, NULL);
		assert_int_equal(b.run, -EPERM);
		assert_int_equal(b.tick, -EPERM);
		if (pthread_equal(a.self, b.self))
			print_message("      thread %d had the owner's pthread_t\n", i);
	}
	assert_int_equal(co_engine_destroy(&e), 0); /* from any thread */
}

static void test_uring_unavailable(void **state)
{
	/* io_uring_setup refused (no kernel support, or disabled by policy):
	 * a clear error, nothing leaked (ASan checks), nothing crashes. */
	co_engine e;
	(void)state;
	co__fault_arm(CO__FAULT_RING, 1, ENOSYS);
	assert_int_equal(co_engine_init(&e, NULL), -ENOSYS);
	co__fault_arm(CO__FAULT_RING, 1, EPERM);
	assert_int_equal(co_engine_init(&e, NULL), -EPERM);
	co__fault_arm_range(CO__FAULT_RING, 1, 3, EINVAL); /* every mode refused */
	assert_int_equal(co_engine_init(&e, NULL), -EINVAL);
	assert_int_equal(co__fault_calls(CO__FAULT_RING), 3);
	co__fault_arm(CO__FAULT_RING, 0, 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* A frame that awaits a nop: the engine's ring works. */
struct nopper {
	co_frame co;
	co_io io;
	int res;
};

static int nopper_fn(co_frame *f)
{
	struct nopper *n = (struct nopper *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&n->io));
	n->res = co_result(f);
	CO_END(f);
}

/* io_uring_register refused for good (a sandbox's seccomp filter): the
 * probe at set-up finds it so, and the ring is made enabled at once,
 * without SINGLE_ISSUER (whose enable at the first run would be refused
 * too): the frames run. */
static void test_register_refused(void **state)
{
	co_engine e;
	struct nopper n = { .res = 1 };
	(void)state;
	co__fault_arm_range(CO__FAULT_REGISTER, 1, ~0ul, EPERM);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(e.features & CO_ENGINE_F_SINGLE_ISSUER, 0);
	co_init(&n.co, nopper_fn);
	assert_int_equal(co_engine_spawn(&e, &n.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_true(co_done(&n.co));
	assert_int_equal(n.res, 0);
	assert_true(co__fault_calls(CO__FAULT_REGISTER) >= 1); /* the probe asked */
	co__fault_arm(CO__FAULT_REGISTER, 0, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* The enable at the first run refused once (-ENOMEM): that run answers it
 * and changes nothing; the next run enables the ring and runs the frame
 * (it ran a disabled ring before: -EBADFD for good, the frame stuck). */
static void test_first_enable_refused(void **state)
{
	co_engine e;
	struct nopper n = { .res = 1 };
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&n.co, nopper_fn);
	assert_int_equal(co_engine_spawn(&e, &n.co), 0);
	co__fault_arm(CO__FAULT_REGISTER, 1, ENOMEM);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), -ENOMEM);
	co__fault_arm(CO__FAULT_REGISTER, 0, 0);
	assert_false(co_done(&n.co));
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_true(co_done(&n.co));
	assert_int_equal(n.res, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* co_engine_tick (engine.md): a run or a tick from a thread
 * other than the owner answers -EBUSY while the owner runs the engine
 * (it runs already) and -EPERM once it does not. */
static void test_other_thread_while_owner_runs(void **state)
{
	co_engine e;
	co_test_runner r;
	(void)state;
	alarm(30);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_STOP);
	WAIT_UNTIL(co_engine_state(&e) == CO_ENGINE_RUNNING);
	assert_int_equal(co_engine_tick(&e), -EBUSY);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), -EBUSY);
	assert_int_equal(co_engine_destroy(&e), -EBUSY);
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_test_runner_join(&r), 0);
	assert_int_equal(co_engine_tick(&e), -EPERM);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), -EPERM);
	assert_int_equal(co_engine_destroy(&e), 0);
	alarm(0);
}

/* engine.md, "The threading rule": a refused tick changes nothing, so
 * the owner's own tick is never refused for it. Another thread's tick is
 * held just after its take (CO__POINT_RUN_TAKEN) while the owner ticks:
 * the owner's tick runs its frame, the other answers -EPERM. Taking the
 * engine before looking at its owner, the other thread held it there and
 * the owner's tick answered -EBUSY. */
static atomic_int intruder_held, intruder_go;
static _Thread_local int am_intruder;

static void hold_intruder(void *arg)
{
	(void)arg;
	if (!am_intruder)
		return;
	atomic_store(&intruder_held, 1);
	while (!atomic_load(&intruder_go))
		sched_yield();
}

static atomic_int intruder_res = 1;

static void *intruder_tick(void *arg)
{
	am_intruder = 1;
	atomic_store(&intruder_res, co_engine_tick(arg));
	return NULL;
}

static void test_refused_tick_leaves_owner_alone(void **state)
{
	co_engine e;
	struct co_test_idler d;
	co_event ev;
	pthread_t intruder;
	(void)state;
	alarm(30);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_engine_tick(&e), 0); /* this thread owns it */
	co_event_init(&ev, 0);
	co_test_idler_init(&d, &ev);
	assert_int_equal(co_engine_spawn(&e, &d.co), 0);
	atomic_store(&intruder_held, 0);
	atomic_store(&intruder_go, 0);
	co__fault_on_point(CO__POINT_RUN_TAKEN, hold_intruder, NULL);
	assert_int_equal(pthread_create(&intruder, NULL, intruder_tick, &e), 0);
	/* the intruder is refused at once, or holds the engine at the point */
	WAIT_UNTIL(atomic_load(&intruder_held) || atomic_load(&intruder_res) != 1);
	assert_int_equal(co_engine_tick(&e), 1); /* runs the idler to its wait */
	atomic_store(&intruder_go, 1);
	assert_int_equal(pthread_join(intruder, NULL), 0);
	co__fault_on_point(CO__POINT_RUN_TAKEN, NULL, NULL);
	assert_int_equal(atomic_load(&intruder_res), -EPERM);
	assert_int_equal(atomic_load(&intruder_held), 0); /* it never took it */
	co_event_set(&ev);
	while (!co_done(&d.co))
		assert_true(co_engine_tick(&e) >= 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	co_event_destroy(&ev);
	alarm(0);
}

/* engine.md, "The threading rule": a register from another
 * thread that comes as the engine's first run starts holds the engine
 * from its check to the kernel's answer, and the run waits for it. Held
 * at CO__POINT_REGISTER (checks passed, the kernel not asked yet) until
 * the run has come: the run is refused once (it waits), the register
 * answers 0 as before a first run, and the table is the run's thread's
 * afterwards. Without the hold, the run enabled the ring for its thread
 * meanwhile and the kernel refused the register (-EEXIST, a
 * SINGLE_ISSUER ring), or the register went through on a ring another
 * thread had run. */
static atomic_int reg_held, reg_run_refused, reg_run_returned;

static void reg_waits_for_run(void *arg)
{
	(void)arg;
	atomic_store(&reg_held, 1);
	while (!atomic_load(&reg_run_refused) && !atomic_load(&reg_run_returned))
		sched_yield();
}

static void reg_note_refused(void *arg)
{
	(void)arg;
	atomic_store(&reg_run_refused, 1);
}

struct reg_race {
	co_engine e;
	int fds[2];
	atomic_int rc;
};

static void *reg_race_register(void *arg)
{
	struct reg_race *r = arg;

	atomic_store(&r->rc, co_engine_register_files(&r->e, r->fds, 2));
	return NULL;
}

static void test_register_while_first_run_starts(void **state)
{
	struct reg_race r;
	pthread_t t;
	(void)state;
	alarm(30);
	atomic_store(&reg_held, 0);
	atomic_store(&reg_run_refused, 0);
	atomic_store(&reg_run_returned, 0);
	atomic_init(&r.rc, INT_MIN);
	assert_int_equal(pipe(r.fds), 0);
	assert_int_equal(co_engine_init(&r.e, NULL), 0);
	co__fault_on_point(CO__POINT_REGISTER, reg_waits_for_run, NULL);
	co__fault_on_point(CO__POINT_TAKE_REFUSED, reg_note_refused, NULL);
	assert_int_equal(pthread_create(&t, NULL, reg_race_register, &r), 0);
	WAIT_UNTIL(atomic_load(&reg_held) || atomic_load(&r.rc) != INT_MIN);
	assert_int_equal(co_engine_run(&r.e, CO_RUN_UNTIL_IDLE), 0); /* the first */
	atomic_store(&reg_run_returned, 1);
	assert_int_equal(pthread_join(t, NULL), 0);
	co__fault_on_point(CO__POINT_REGISTER, NULL, NULL);
	co__fault_on_point(CO__POINT_TAKE_REFUSED, NULL, NULL);
	assert_int_equal(atomic_load(&reg_held), 1);
	assert_int_equal(atomic_load(&r.rc), 0);
	assert_int_equal(atomic_load(&reg_run_refused), 1); /* the run waited for it */
	/* another thread now: -EPERM; the owner: the table is there */
	assert_int_equal(pthread_create(&t, NULL, reg_race_register, &r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(atomic_load(&r.rc), -EPERM);
	assert_int_equal(co_engine_unregister_files(&r.e), 0);
	assert_int_equal(co_engine_unregister_files(&r.e), -ENXIO);
	assert_int_equal(co_engine_destroy(&r.e), 0);
	close(r.fds[0]);
	close(r.fds[1]);
	alarm(0);
}

/* opts.no_fast_flags: a plain ring, with none of the task-run modes the
 * engine would try (SINGLE_ISSUER | DEFER_TASKRUN, COOP_TASKRUN, and
 * TASKRUN_FLAG with either), that runs frames all the same. Flags the
 * caller asks for in setup_flags are still taken. */
static void test_no_fast_flags_plain_ring(void **state)
{
	const unsigned modes = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
			       IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
	co_engine e;
	co_engine_opts o = { .no_fast_flags = 1 };
	struct co_test_task t = { 0 };
	atomic_int runs[1] = { 0 };
	(void)state;
	assert_int_equal(co_engine_init(&e, &o), 0);
	assert_int_equal(e.ring.flags & modes, 0);
	assert_int_equal(e.features & CO_ENGINE_F_SINGLE_ISSUER, 0);
	t.runs = runs;
	co_init(&t.co, co_test_task_fn);
	assert_int_equal(co_engine_spawn(&e, &t.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(atomic_load(&runs[0]), 1);
	assert_int_equal(co_engine_destroy(&e), 0);
	o.setup_flags = IORING_SETUP_COOP_TASKRUN;
	assert_int_equal(co_engine_init(&e, &o), 0);
	assert_int_equal(e.ring.flags & modes, IORING_SETUP_COOP_TASKRUN);
	assert_int_equal(co_engine_destroy(&e), 0);
}

static void test_spawn_errors(void **state)
{
	co_engine e;
	struct co_test_task t = { 0 };
	atomic_int runs[1] = { 0 };
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	t.runs = runs;
	co_init(&t.co, co_test_task_fn);
	assert_int_equal(co_engine_spawn(NULL, &t.co), -EINVAL);
	assert_int_equal(co_engine_spawn(&e, NULL), -EINVAL);
	assert_int_equal(co_engine_spawn(&e, &t.co), 0);
	assert_int_equal(co_engine_spawn(&e, &t.co), -EINVAL); /* twice */
	assert_int_equal(co_engine_destroy(&e), -EBUSY);        /* not finished */
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(atomic_load(&runs[0]), 1);
	assert_int_equal(co_engine_spawn(&e, &t.co), -EINVAL); /* finished */
	co_init(&t.co, co_test_task_fn);
	assert_int_equal(co_engine_stop(&e, 0), 0);
	assert_int_equal(co_engine_spawn(&e, &t.co), -ESHUTDOWN);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0); /* stopped: returns */
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* co_engine_last_sqe names an SQE only until it is submitted: after a
 * turn's submit (a yield keeps the loop busy) and after the wait whose
 * completion resumes the frame (from the completion walk), the SQE a
 * frame took before is gone, so nothing links to it. */
static void own_done(co_engine *e, co_io_info *info, int res, unsigned flags, unsigned tag)
{
	(void)e, (void)info, (void)res, (void)flags, (void)tag;
}

struct linker {
	co_frame co;
	co_io io;
	co_io_info own;
	int before, after_yield, after_wait;
};

static int linker_fn(co_frame *f)
{
	struct linker *l = (struct linker *)f;
	struct io_uring_sqe *sqe;

	CO_BEGIN(f);
	l->own.cb = own_done;
	sqe = co_engine_sqe(co_engine_current(), &l->own, 0);
	assert_non_null(sqe);
	io_uring_prep_nop(sqe);
	l->before = co_engine_last_sqe(co_engine_current(), &l->own) == sqe;
	CO_YIELD(f);
	l->after_yield = co_engine_last_sqe(co_engine_current(), &l->own) != NULL;
	CO_AWAIT(f, co_nop(&l->io));
	l->after_wait = co_engine_last_sqe(co_engine_current(), &l->io.info) != NULL;
	CO_END(f);
}

static void test_last_sqe_gone_after_submit(void **state)
{
	struct linker l = { 0 };

	(void)state;
	co_init(&l.co, linker_fn);
	co_test_run1(&l.co);
	assert_int_equal(l.before, 1);
	assert_int_equal(l.after_yield, 0);
	assert_int_equal(l.after_wait, 0);
}

/* co_engine_destroy abandons nothing silently: an SQE of the caller's own
 * with a callback (co_engine_sqe with an info), still in flight after its
 * frame finished, keeps the engine (-EBUSY) until its callback ran, as a
 * frame does. A drain stop cancels it (nothing waits for it), the
 * callback sees -ECANCELED, and the destroy succeeds. */
struct orphan {
	co_frame co;
	co_io_info info;
	int fd;
	char buf[8];
	atomic_int res, calls;
};

static void orphan_done(co_engine *e, co_io_info *info, int res, unsigned flags, unsigned tag)
{
	struct orphan *o = co__container_of(info, struct orphan, info);
	(void)e, (void)flags, (void)tag;
	atomic_store(&o->res, res);
	atomic_fetch_add(&o->calls, 1);
}

static int orphan_fn(co_frame *f)
{
	struct orphan *o = (struct orphan *)f;
	struct io_uring_sqe *sqe;

	CO_BEGIN(f);
	o->info.cb = orphan_done;
	sqe = co_engine_sqe(co_engine_current(), &o->info, 0);
	assert_non_null(sqe);
	io_uring_prep_read(sqe, o->fd, o->buf, sizeof o->buf, 0);
	CO_END(f); /* without waiting for it */
}

static void test_destroy_keeps_sqe_in_flight(void **state)
{
	co_engine e;
	struct orphan o = { 0 };
	int p[2];
	(void)state;
	alarm(30);
	assert_int_equal(pipe(p), 0);
	o.fd = p[0]; /* nobody writes */
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&o.co, orphan_fn);
	assert_int_equal(co_engine_spawn(&e, &o.co), 0);
	assert_int_equal(co_engine_tick(&e), 1);
	assert_true(co_done(&o.co));
	assert_int_equal(e.inflight, 1);
	assert_int_equal(co_engine_destroy(&e), -EBUSY); /* its callback has not run */
	assert_int_equal(co_engine_state(&e), CO_ENGINE_READY);
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(atomic_load(&o.calls), 1);
	assert_int_equal(atomic_load(&o.res), -ECANCELED);
	assert_int_equal(co_engine_destroy(&e), 0);
	close(p[0]);
	close(p[1]);
	alarm(0);
}

/* ---- the SQE helpers belong to the engine's own thread ------------------------- */

/* Invariant 2: co_engine_sqe, co_engine_sqe_link and co_engine_last_sqe
 * answer NULL for an engine that runs on another thread: asked from a
 * thread that runs no engine and from a frame of another engine, while a
 * frame of the target holds its thread with an SQE of its own taken and
 * not yet submitted. Without the owner check (e == the calling thread's
 * engine) the outsiders get SQEs of a ring another thread drives, and
 * last_sqe hands out the holder's unsubmitted SQE. */
struct sqe_holder {
	co_frame co;
	co_io_info own;
	atomic_int in, release, done_cqes;
};

static void holder_done(co_engine *e, co_io_info *info, int res, unsigned flags, unsigned tag)
{
	struct sqe_holder *h = (struct sqe_holder *)(void *)((char *)info -
							     offsetof(struct sqe_holder, own));
	(void)e, (void)res, (void)flags, (void)tag;
	atomic_fetch_add(&h->done_cqes, 1);
}

static int sqe_holder_fn(co_frame *f)
{
	struct sqe_holder *h = (struct sqe_holder *)f;
	struct io_uring_sqe *sqe;

	CO_BEGIN(f);
	h->own.cb = holder_done;
	sqe = co_engine_sqe(co_engine_current(), &h->own, 0);
	assert_non_null(sqe);
	io_uring_prep_nop(sqe);
	assert_ptr_equal(co_engine_last_sqe(co_engine_current(), &h->own), sqe);
	atomic_store(&h->in, 1);
	while (!atomic_load(&h->release)) /* keeps the engine's thread */
		sched_yield();
	CO_END(f);
}

struct sqe_asker {
	co_frame co;
	co_engine *target;
	co_io_info *their;
	co_io_info mine;
	int sqe, link, last, own;
};

static int sqe_asker_fn(co_frame *f)
{
	struct sqe_asker *a = (struct sqe_asker *)f;
	struct io_uring_sqe *sqe;

	CO_BEGIN(f);
	a->sqe = co_engine_sqe(a->target, NULL, 0) != NULL;
	a->link = co_engine_sqe_link(a->target, NULL, 0) != NULL;
	a->last = co_engine_last_sqe(a->target, a->their) != NULL;
	sqe = co_engine_sqe(co_engine_current(), NULL, 0); /* its own: given */
	a->own = sqe != NULL;
	if (sqe != NULL)
		io_uring_prep_nop(sqe);
	CO_END(f);
}

static void test_sqe_helpers_refuse_other_threads(void **state)
{
	co_engine b;
	co_test_runner r;
	struct sqe_holder h = { 0 };
	struct sqe_asker a = { 0 };
	(void)state;
	assert_int_equal(co_engine_init(&b, NULL), 0);
	co_init(&h.co, sqe_holder_fn);
	assert_int_equal(co_engine_spawn(&b, &h.co), 0);
	co_test_runner_start(&r, &b, CO_RUN_UNTIL_IDLE);
	WAIT_UNTIL(atomic_load(&h.in));
	/* a thread that runs no engine */
	assert_null(co_engine_sqe(&b, NULL, 0));
	assert_null(co_engine_sqe_link(&b, NULL, 0));
	assert_null(co_engine_last_sqe(&b, &h.own));
	/* a frame of another engine, on this thread */
	a.target = &b;
	a.their = &h.own;
	co_init(&a.co, sqe_asker_fn);
	co_test_run1(&a.co);
	assert_int_equal(a.sqe, 0);
	assert_int_equal(a.link, 0);
	assert_int_equal(a.last, 0);
	assert_int_equal(a.own, 1);
	atomic_store(&h.release, 1);
	assert_int_equal(co_test_runner_join(&r), 0);
	assert_int_equal(atomic_load(&h.done_cqes), 1); /* the holder's nop, once */
	assert_int_equal(co_engine_destroy(&b), 0);
}

static void test_misuse_errors(void **state)
{
	co_engine e;
	struct co_test_task t = { 0 };
	atomic_int runs[1] = { 0 };
	(void)state;
	t.runs = runs;
	co_init(&t.co, co_test_task_fn);
	assert_int_equal(co_engine_park(NULL), -EINVAL);
	assert_int_equal(co_engine_unpark(NULL), -EINVAL);
	assert_null(co_engine_sqe(NULL, NULL, 0));
	assert_null(co_engine_sqe_link(NULL, NULL, 0));
	assert_null(co_engine_last_sqe(NULL, NULL));
	assert_null(co_engine_sqe_ts(NULL, NULL));
	assert_int_equal(co_engine_init(&e, NULL), 0);
	/* the SQE helpers belong to the engine's own thread, while it runs */
	assert_null(co_engine_sqe(&e, NULL, 0));
	assert_null(co_engine_sqe_ts(&e, NULL));
	assert_int_equal(co_engine_park(&e), 0);
	assert_int_equal(co_engine_unpark(&e), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	/* every call on a destroyed engine is refused, none crashes */
	assert_int_equal(co_engine_spawn(&e, &t.co), -EINVAL);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), -EINVAL);
	assert_int_equal(co_engine_stop(&e, 1), -EINVAL);
	assert_int_equal(co_engine_park(&e), -EINVAL);
	assert_int_equal(co_engine_unpark(&e), -EINVAL);
	assert_int_equal(co_engine_destroy(&e), -EINVAL);
	assert_int_equal(atomic_load(&runs[0]), 0);
}

/* ---- deadlock, park, stop -------------------------------------------------- */

struct gate {
	co_awaiter aw;
	co_frame *parked;
	co_engine *engine;
	int use_park;
};

static int gate_suspend(co_awaiter *a, co_frame *f)
{
	struct gate *g = (struct gate *)a;
	g->engine = co_engine_current();
	if (g->use_park)
		co_engine_park(g->engine);
	__atomic_store_n(&g->parked, f, __ATOMIC_RELEASE); /* the opener polls it */
	return 1;
}

static const co_awaiter_ops gate_ops = { NULL, gate_suspend, NULL, NULL, 0, "gate" };

struct waiter {
	co_frame co;
	struct gate *g;
	int passed;
};

static int waiter_fn(co_frame *f)
{
	struct waiter *w = (struct waiter *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, &w->g->aw);
	w->passed = 1;
	CO_END(f);
}

static void test_deadlock_reported(void **state)
{
	co_engine e;
	struct gate g = { .aw = { &gate_ops } };
	struct waiter w = { .g = &g };
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&w.co, waiter_fn);
	assert_int_equal(co_engine_spawn(&e, &w.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), -EDEADLK);
	assert_ptr_equal(g.parked, &w.co);
	assert_int_equal(co_engine_destroy(&e), -EBUSY); /* nothing abandoned */
	co_wake(g.parked); /* from the engine's thread: queued for the next run */
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(w.passed, 1);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* engine.md, "Turns and ticks": a tick never returns -EDEADLK, but a tick
 * on a stopped engine that ends idle with frames nothing can wake records
 * them (e->stuck), as the run's -EDEADLK would, and co_engine_destroy then
 * forgets them. Before the stop such a tick records nothing: the frame
 * may yet be woken, and destroy refuses. */
static void test_stopped_tick_forgets_stuck(void **state)
{
	co_engine e;
	struct gate g = { .aw = { &gate_ops } };
	struct waiter w = { .g = &g };
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&w.co, waiter_fn);
	assert_int_equal(co_engine_spawn(&e, &w.co), 0);
	assert_int_equal(co_engine_tick(&e), 1); /* it waits at the gate */
	assert_ptr_equal(g.parked, &w.co);
	assert_int_equal(co_engine_tick(&e), 0);
	assert_int_equal(e.stuck, 0); /* not stopped: it may yet be woken */
	assert_int_equal(co_engine_destroy(&e), -EBUSY);
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_engine_tick(&e), 0); /* not -EDEADLK */
	assert_int_equal(e.stuck, 1);
	assert_int_equal(co_engine_destroy(&e), 0); /* forgotten */
	assert_int_equal(w.passed, 0);
}

/* co_engine_stop: a second stop may turn a drain into a cancel, never the
 * reverse, and a timed stop keeps the earliest time asked for. A frame
 * sleeps an hour: a cancel stop followed by a drain and a later timed
 * stop, and a timed stop of 0 followed by one of an hour and a drain,
 * each end its sleep at the run's first turn (a stop that went back to a
 * drain, or to the later time, would wait the hour: the alarm). */
static void test_stop_never_relaxes(void **state)
{
	(void)state;
	alarm(30);
	for (int k = 0; k < 2; k++) {
		co_engine e;
		struct co_test_sleeper sl;

		assert_int_equal(co_engine_init(&e, NULL), 0);
		co_test_sleeper_init(&sl, 3600 * CO_S);
		assert_int_equal(co_engine_spawn(&e, &sl.co), 0);
		assert_int_equal(co_engine_tick(&e), 1); /* asleep */
		if (k == 0) {
			assert_int_equal(co_engine_stop(&e, CO_STOP_CANCEL), 0);
			assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
			assert_int_equal(co_engine_stop_timed(&e, 3600 * CO_S), 0);
		} else {
			assert_int_equal(co_engine_stop_timed(&e, 0), 0);
			assert_int_equal(co_engine_stop_timed(&e, 3600 * CO_S), 0);
			assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
		}
		assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
		assert_int_equal(sl.res, -ECANCELED);
		assert_int_equal(co_engine_destroy(&e), 0);
	}
	alarm(0);
}

/* Waits until the engine, with the frame parked, has gone to sleep instead
 * of returning (an engine that ignored park counts would find itself idle
 * and return), then wakes the frame and drops the park count, in that
 * order (co_engine_park). No timing: it watches the engine's state. */
struct opener_arg {
	struct gate *g;
	co_engine *e;
	atomic_int run_returned;
};

static void *opener(void *arg)
{
	struct opener_arg *o = arg;
	co_frame *f;
	while ((f = __atomic_load_n(&o->g->parked, __ATOMIC_ACQUIRE)) == NULL)
		usleep(100);
	while (!atomic_load(&o->e->sleeping)) {
		if (atomic_load(&o->run_returned))
			return NULL; /* it returned with the frame parked: the test fails */
		sched_yield();
	}
	co_wake(f);
	co_engine_unpark(o->e);
	return NULL;
}

static void test_parked_frame_keeps_engine_alive(void **state)
{
	co_engine e;
	struct gate g = { .aw = { &gate_ops }, .use_park = 1 };
	struct waiter w = { .g = &g };
	struct opener_arg o = { .g = &g, .e = &e };
	pthread_t th;
	int ret;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&w.co, waiter_fn);
	assert_int_equal(co_engine_spawn(&e, &w.co), 0);
	assert_int_equal(pthread_create(&th, NULL, opener, &o), 0);
	ret = co_engine_run(&e, CO_RUN_UNTIL_IDLE);
	atomic_store(&o.run_returned, 1);
	pthread_join(th, NULL);
	assert_int_equal(ret, 0);
	assert_int_equal(w.passed, 1);
	if (ret == 0)
		assert_int_equal(co_engine_destroy(&e), 0);
}

struct killer {
	co_frame co;
	co_io io;
};

static int killer_fn(co_frame *f)
{
	struct killer *k = (struct killer *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&k->io));
	co_engine_stop(co_engine_current(), 1);
	CO_END(f);
}

static void test_stop_cancels_io(void **state)
{
	/* a 30 s sleep, then a stop with cancel_io: the sleep ends with
	 * -ECANCELED and the run returns (the hang guard is meson's timeout) */
	co_engine e;
	struct co_test_sleeper s;
	struct killer k;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_test_sleeper_init(&s, 30 * CO_S);
	co_init(&k.co, killer_fn);
	assert_int_equal(co_engine_spawn(&e, &s.co), 0);
	assert_int_equal(co_engine_spawn(&e, &k.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0);
	assert_int_equal(s.res, -ECANCELED);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* A coroutine that keeps starting I/O after a cancel-stop: one that was
 * between two awaits when the stop came (it yields first), and one whose
 * recv was cancelled and which tries again. Every blocking operation ends
 * with -ECANCELED instead of waiting forever; the close on the way out
 * still completes. */
struct retrier {
	co_frame co;
	co_io io;
	int fd, yields, k;
	int r[4];
	char c;
};

static int retrier_fn(co_frame *f)
{
	struct retrier *s = (struct retrier *)f;
	CO_BEGIN(f);
	for (s->k = 0; s->k < s->yields; s->k++)
		CO_YIELD(f);
	CO_AWAIT(f, co_recv(&s->io, s->fd, &s->c, 1, 0));
	s->r[0] = co_result(f);
	CO_AWAIT(f, co_recv(&s->io, s->fd, &s->c, 1, 0)); /* started after the stop */
	s->r[1] = co_result(f);
	CO_AWAIT(f, co_sleep(&s->io, 30 * CO_S));
	s->r[2] = co_result(f);
	CO_AWAIT(f, co_close(&s->io, s->fd));
	s->r[3] = co_result(f);
	CO_END(f);
}

struct stopper_after {
	co_frame co;
	co_engine *e;
	int yields, k;
};

static int stopper_after_fn(co_frame *f)
{
	struct stopper_after *s = (struct stopper_after *)f;
	CO_BEGIN(f);
	for (s->k = 0; s->k < s->yields; s->k++)
		CO_YIELD(f);
	co_engine_stop(s->e, 1);
	CO_END(f);
}

static void test_stop_cancels_io_started_later(void **state)
{
	int sp[2][2];
	struct retrier a = { .yields = 0 }, b = { .yields = 5 };
	struct stopper_after k = { .yields = 2 };
	co_engine e;
	(void)state;
	alarm(20); /* hang guard: before the fix the run never returned */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp[0]), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp[1]), 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	a.fd = sp[0][0];
	b.fd = sp[1][0];
	k.e = &e;
	co_init(&a.co, retrier_fn);
	co_init(&b.co, retrier_fn);
	co_init(&k.co, stopper_after_fn);
	assert_int_equal(co_engine_spawn(&e, &a.co), 0);
	assert_int_equal(co_engine_spawn(&e, &k.co), 0);
	assert_int_equal(co_engine_spawn(&e, &b.co), 0); /* still yielding at the stop */
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0);
	alarm(0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(a.r[i], -ECANCELED);
		assert_int_equal(b.r[i], -ECANCELED);
	}
	assert_int_equal(a.r[3], 0); /* the closes completed */
	assert_int_equal(b.r[3], 0);
	assert_int_equal(fcntl(sp[0][0], F_GETFD), -1);
	assert_int_equal(fcntl(sp[1][0], F_GETFD), -1);
	assert_int_equal(co_engine_destroy(&e), 0);
	close(sp[0][1]);
	close(sp[1][1]);
}

/* Sleeps (the loop waits untimed: its fast sleep), then stops its engine
 * with a limit and waits on a recv that gets nothing (the loop waits with
 * a time limit, then the cancel ends the recv). */
struct ring_fd_user {
	co_frame co;
	co_io io;
	int fd, slept, got;
	char c;
};

static int ring_fd_user_fn(co_frame *f)
{
	struct ring_fd_user *u = (struct ring_fd_user *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep(&u->io, CO_MS));
	u->slept = co_result(f);
	co_engine_stop_timed(co_engine_current(), 5 * CO_MS);
	CO_AWAIT(f, co_recv(&u->io, u->fd, &u->c, 1, 0));
	u->got = co_result(f);
	CO_END(f);
}

/* The ring fd's registration at the first run (io_uring_register_ring_fd)
 * refused, then granted: the engine enters with the plain fd, or with the
 * registered index and IORING_ENTER_REGISTERED_RING, as the registration
 * answered (not as liburing's private flags say), and both its waits (the
 * untimed fast sleep, the timed one) work either way. */
static void test_ring_fd_refused(void **state)
{
	struct io_uring probe;
	int can_register, sp[2];
	(void)state;
	/* whether this kernel registers ring fds at all (5.18 on) */
	assert_int_equal(io_uring_queue_init(4, &probe, 0), 0);
	can_register = io_uring_register_ring_fd(&probe) == 1;
	io_uring_queue_exit(&probe);
	alarm(10); /* a wait that never ends fails here instead of hanging */
	for (int refuse = 1; refuse >= 0; refuse--) {
		struct ring_fd_user u = { 0 };
		co_engine e;

		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
		assert_int_equal(co_engine_init(&e, NULL), 0);
		co__fault_arm(CO__FAULT_RING_FD, refuse, EBUSY);
		u.fd = sp[0];
		co_init(&u.co, ring_fd_user_fn);
		assert_int_equal(co_engine_spawn(&e, &u.co), 0);
		assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
		assert_int_equal(co__fault_calls(CO__FAULT_RING_FD), 1);
		co__fault_arm(CO__FAULT_RING_FD, 0, 0);
		assert_int_equal(u.slept, 0);
		assert_int_equal(u.got, -ECANCELED);
		assert_int_equal(co_status(&u.co), 0);
		if (refuse || !can_register) {
			assert_int_equal(e.enter_flags & IORING_ENTER_REGISTERED_RING, 0);
			assert_int_equal(e.ring.enter_ring_fd, e.ring.ring_fd);
		} else {
			assert_int_not_equal(e.enter_flags & IORING_ENTER_REGISTERED_RING, 0);
			assert_int_not_equal(e.ring.enter_ring_fd, e.ring.ring_fd);
		}
		assert_int_equal(co_engine_destroy(&e), 0);
		close(sp[0]);
		close(sp[1]);
	}
	alarm(0);
}

struct nester {
	co_frame co;
	co_engine *other;
	int ret;
};

static int nester_fn(co_frame *f)
{
	struct nester *n = (struct nester *)f;
	CO_BEGIN(f);
	n->ret = co_engine_run(n->other, CO_RUN_UNTIL_IDLE);
	CO_END(f);
}

static void test_nested_run_refused(void **state)
{
	co_engine e, other;
	struct nester n;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_engine_init(&other, NULL), 0);
	co_init(&n.co, nester_fn);
	n.other = &other;
	assert_int_equal(co_engine_spawn(&e, &n.co), 0);
	assert_null(co_engine_current());
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(n.ret, -EBUSY);
	assert_null(co_engine_current());
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_engine_destroy(&other), 0);
}

/* ---- posts: a callback on the engine's thread, from any thread -------------- */

#define POSTERS 4
#define POSTS_EACH 2000

struct post_rec {
	co_post p;
	co_engine *e;
	int poster, seq;
};

static atomic_int posts_ran, posts_off_thread, posts_out_of_order;
static int post_last[POSTERS]; /* engine thread only */

static void post_fn(co_post *p)
{
	struct post_rec *r = (struct post_rec *)p;
	if (co_engine_current() != r->e)
		atomic_fetch_add(&posts_off_thread, 1);
	if (r->seq != post_last[r->poster] + 1)
		atomic_fetch_add(&posts_out_of_order, 1);
	post_last[r->poster] = r->seq;
	atomic_fetch_add(&posts_ran, 1);
}

struct poster {
	co_engine *e;
	int id;
	struct post_rec rec[POSTS_EACH];
};

static void *poster_main(void *arg)
{
	struct poster *ps = arg;
	for (int i = 0; i < POSTS_EACH; i++) {
		ps->rec[i] = (struct post_rec){ .p = { .fn = post_fn }, .e = ps->e, .poster = ps->id,
						.seq = i + 1 };
		if (co_engine_post(ps->e, &ps->rec[i].p) != 0)
			abort();
		if (i % 64 == 0)
			usleep(50); /* let the engine fall asleep now and then */
	}
	return NULL;
}

struct engine_thread {
	co_engine *e;
	int ret;
};

static void *engine_main(void *arg)
{
	struct engine_thread *t = arg;
	t->ret = co_engine_run(t->e, CO_RUN_UNTIL_STOP);
	return NULL;
}

static void test_post_from_other_threads(void **state)
{
	static struct poster ps[POSTERS];
	pthread_t th[POSTERS], eth;
	struct engine_thread et;
	co_engine e;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	atomic_store(&posts_ran, 0);
	memset(post_last, 0, sizeof post_last);
	et.e = &e;
	assert_int_equal(pthread_create(&eth, NULL, engine_main, &et), 0);
	for (int k = 0; k < POSTERS; k++) {
		ps[k].e = &e;
		ps[k].id = k;
		assert_int_equal(pthread_create(&th[k], NULL, poster_main, &ps[k]), 0);
	}
	for (int k = 0; k < POSTERS; k++)
		pthread_join(th[k], NULL);
	/* every post runs although the engine sleeps between them: the hang
	 * guard is the only bound */
	for (int i = 0; i < 10000 && atomic_load(&posts_ran) < POSTERS * POSTS_EACH; i++)
		usleep(1000);
	assert_int_equal(co_engine_stop(&e, 0), 0);
	pthread_join(eth, NULL);
	assert_int_equal(et.ret, 0);
	assert_int_equal(atomic_load(&posts_ran), POSTERS * POSTS_EACH); /* each once */
	assert_int_equal(atomic_load(&posts_off_thread), 0);
	assert_int_equal(atomic_load(&posts_out_of_order), 0);
	assert_true(e.stats.waits > 0); /* it did sleep, and was woken */
	assert_int_equal(co_engine_destroy(&e), 0);
}

static int post_count;
static void count_post(co_post *p)
{
	(void)p;
	post_count++;
}

static void test_post_errors_and_lifetime(void **state)
{
	co_engine e;
	co_post p = { .fn = count_post }, nofn = { 0 };
	(void)state;
	assert_int_equal(co_engine_post(NULL, &p), -EINVAL);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_engine_post(&e, NULL), -EINVAL);
	assert_int_equal(co_engine_post(&e, &nofn), -EINVAL);
	/* queued before any run: the engine may not be destroyed, and the
	 * next run, even one that returns when idle, runs it first */
	post_count = 0;
	assert_int_equal(co_engine_post(&e, &p), 0);
	assert_int_equal(co_engine_destroy(&e), -EBUSY);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(post_count, 1);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_engine_post(&e, &p), -EINVAL); /* destroyed */
}

/* A post made by a frame on the engine's own thread runs at the next
 * turn, even when the frame then waits on I/O that would take an hour:
 * the post cancels that wait. Were the post seen only after the I/O, the
 * test would hang until meson's timeout. */
struct self_post {
	co_frame co;
	co_io io;
	co_post p;
	int ran;
};

static void self_post_fn(co_post *p)
{
	struct self_post *s = co__container_of(p, struct self_post, p);
	s->ran++;
	assert_int_equal(co_cancel(&s->co), 0);
}

static int self_post_body(co_frame *f)
{
	struct self_post *s = (struct self_post *)f;
	CO_BEGIN(f);
	s->p.fn = self_post_fn;
	assert_int_equal(co_engine_post(co_engine_current(), &s->p), 0);
	CO_AWAIT(f, co_sleep(&s->io, 3600 * CO_S));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void test_post_from_own_frame(void **state)
{
	struct self_post s = { .ran = 0 };
	co_engine e;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&s.co, self_post_body);
	assert_int_equal(co_engine_spawn(&e, &s.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(s.ran, 1);
	assert_int_equal(co_status(&s.co), -ECANCELED);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* ---- the counters readable from any thread -------------------------------------- */

/* spins, spin_hits, polls, poll_hits: docs/engine.md ("Counters", "Staying
 * awake") and engine.h say these four may be read from any thread, with a
 * relaxed atomic load, while the engine runs. */
enum { ST_SPINS, ST_SPIN_HITS, ST_POLLS, ST_POLL_HITS, ST_N };

static void stats_load(co_engine *e, uint64_t v[ST_N])
{
	v[ST_SPINS] = __atomic_load_n(&e->stats.spins, __ATOMIC_RELAXED);
	v[ST_SPIN_HITS] = __atomic_load_n(&e->stats.spin_hits, __ATOMIC_RELAXED);
	v[ST_POLLS] = __atomic_load_n(&e->stats.polls, __ATOMIC_RELAXED);
	v[ST_POLL_HITS] = __atomic_load_n(&e->stats.poll_hits, __ATOMIC_RELAXED);
}

struct stats_reader {
	co_engine *e;
	uint64_t last[ST_N];
	long reads;
	int backwards;      /* a counter read smaller than before */
	atomic_int seen;    /* it read spins and polls above 0 */
	atomic_int finish;  /* the test's thread is done: stop reading */
};

/* Reads the four counters over and over while the engine runs. Until it
 * has read spins and polls above 0 it looks at nothing else, so those reads
 * have no happens-before edge from the engine's stores: were a store plain,
 * TSan would report the pair. */
static void *stats_reader_main(void *arg)
{
	struct stats_reader *r = arg;
	uint64_t v[ST_N];

	for (;;) {
		stats_load(r->e, v);
		r->reads++;
		for (int i = 0; i < ST_N; i++) {
			if (v[i] < r->last[i])
				r->backwards++;
			r->last[i] = v[i];
		}
		if (!atomic_load(&r->seen)) {
			if (v[ST_SPINS] > 0 && v[ST_POLLS] > 0)
				atomic_store(&r->seen, 1);
		} else if (atomic_load(&r->finish)) {
			break;
		}
		sched_yield();
	}
	return NULL;
}

struct stats_taker {
	co_frame co;
	co_waiter w;
	co_chan *ch;
	long v;
	atomic_long got;
	int bad;
};

/* Takes items 0, 1, ... until the channel closes: each receive that finds
 * the channel empty polls first (a frame's poll: stats.polls). */
static int stats_taker_fn(co_frame *f)
{
	struct stats_taker *t = (struct stats_taker *)f;

	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_chan_recv(&t->w, t->ch, &t->v));
		if (co_result(f) != 0)
			break;
		if (t->v != atomic_load(&t->got))
			t->bad++;
		atomic_fetch_add(&t->got, 1);
	}
	CO_END(f);
}

struct stats_fed {
	co_frame co;
	atomic_long *ran;
};

static int stats_fed_fn(co_frame *f)
{
	struct stats_fed *t = (struct stats_fed *)f;

	CO_BEGIN(f);
	atomic_fetch_add(t->ran, 1);
	CO_END(f);
}

#define STATS_ROUNDS_MIN 200
#define STATS_ROUNDS_MAX 100000

/*
 * A busy engine: a taker gets items from this thread one at a time (each
 * receive finds the channel empty: the frame polls, stats.polls), and
 * every other item this thread first spawns a frame and waits until it has
 * run (the engine is idle with nothing in flight: it polls before it
 * sleeps, stats.spins). Meanwhile another thread reads the four counters
 * over and over: under TSan no report, and no counter ever goes back.
 * Rounds go on until the reader has read spins and polls above 0 (the
 * budget of 1 s lets a poll wait out any hand-off), at least
 * STATS_ROUNDS_MIN; alarm() bounds it.
 */
static void test_stats_read_from_other_thread(void **state)
{
	co_engine e;
	co_engine_opts o = { .spin_ns = 1000000000 };
	co_test_runner run;
	co_chan ch;
	struct stats_taker t;
	struct stats_fed *fed;
	struct stats_reader r;
	atomic_long ran = 0;
	pthread_t th;
	uint64_t end[ST_N];
	long i, nfed = 0;

	(void)state;
	assert_int_equal(co_engine_init(&e, &o), 0);
	if (e.spin_max == 0) { /* one CPU (or valgrind): nothing polls */
		assert_int_equal(co_engine_destroy(&e), 0);
		skip();
	}
	fed = calloc(STATS_ROUNDS_MAX, sizeof *fed);
	assert_non_null(fed);
	alarm(120);
	assert_int_equal(co_chan_init(&ch, sizeof(long), 1, NULL), 0);
	memset(&t, 0, sizeof t);
	t.ch = &ch;
	co_init(&t.co, stats_taker_fn);
	assert_int_equal(co_engine_spawn(&e, &t.co), 0);
	memset(&r, 0, sizeof r);
	r.e = &e;
	assert_int_equal(pthread_create(&th, NULL, stats_reader_main, &r), 0);
	co_test_runner_start(&run, &e, CO_RUN_UNTIL_STOP);
	for (i = 0; i < STATS_ROUNDS_MAX && (i < STATS_ROUNDS_MIN || !atomic_load(&r.seen)); i++) {
		WAIT_UNTIL(atomic_load(&t.got) == i); /* the taker waits for item i */
		if (i % 2) {
			fed[nfed].ran = &ran;
			co_init(&fed[nfed].co, stats_fed_fn);
			assert_int_equal(co_engine_spawn(&e, &fed[nfed].co), 0);
			nfed++;
			WAIT_UNTIL(atomic_load(&ran) == nfed);
		}
		assert_int_equal(co_chan_try_send(&ch, &i), 0);
	}
	assert_true(atomic_load(&r.seen)); /* else STATS_ROUNDS_MAX ran out */
	WAIT_UNTIL(atomic_load(&t.got) == i);
	atomic_store(&r.finish, 1);
	pthread_join(th, NULL);
	assert_int_equal(co_chan_close(&ch), 0);
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_test_runner_join(&run), 0);
	alarm(0);
	assert_true(co_done(&t.co));
	assert_int_equal(t.bad, 0);
	assert_int_equal(atomic_load(&ran), nfed);
	assert_int_equal(r.backwards, 0);
	assert_true(r.reads > 0);
	stats_load(&e, end);
	for (int k = 0; k < ST_N; k++)
		assert_true(end[k] >= r.last[k]);
	assert_true(end[ST_SPINS] > 0 && end[ST_POLLS] > 0);
	assert_true(end[ST_SPINS] >= end[ST_SPIN_HITS]);
	assert_true(end[ST_POLLS] >= end[ST_POLL_HITS]);
	assert_int_equal(co_chan_destroy(&ch), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	free(fed);
}

/* ---- destroy from another thread while others spawn, post and stop ---------- */

/*
 * co_engine_destroy "from the owner thread or any other; it waits for
 * other threads still returning from a call on e". Two threads spawn and
 * post without pause (one of them asks a drain stop half way); the owner
 * runs the engine until idle and then hands it to a third thread, which
 * destroys it; -EBUSY sends it back to the owner. The destroyer's take
 * (CO__POINT_TAKE) waits for a moment when another thread is inside a
 * call on e (e->visitors), so that destroy marks the engine DYING under a
 * call that already found it alive. Every spawn and post that returned 0
 * ran exactly once (frames: their on_done too), every other answered
 * -ESHUTDOWN (spawns after the stop) or -EINVAL (after the destroy).
 * No fault point sits inside a call, so the window is not held open:
 * without destroy's wait for visitors this fails in some runs only (a
 * post pushed after the destroy never runs).
 */
#define DR_N 3000
#define DR_ROUNDS 40

struct dr_frame {
	co_frame co;
	atomic_int runs, dones;
};

struct dr_race {
	co_engine *e;
	struct dr_frame f[2][DR_N];
	co_post p[2][DR_N];
	atomic_int post_runs[2][DR_N];
	int spawn_rc[2][DR_N], post_rc[2][DR_N];
	atomic_int go, progress, turn, answer; /* turn: 1 the destroyer's; answer: its result + 1000 */
	atomic_int aligned;
	pthread_t destroyer;
};

static struct dr_race *dr;

static int dr_body(co_frame *f)
{
	struct dr_frame *x = (struct dr_frame *)f;
	CO_BEGIN(f);
	atomic_fetch_add(&x->runs, 1);
	CO_END(f);
}

static void dr_done(co_frame *f)
{
	atomic_fetch_add(&((struct dr_frame *)f)->dones, 1);
}

static void dr_post_fn(co_post *p)
{
	long k = p - &dr->p[0][0];
	atomic_fetch_add(&dr->post_runs[k / DR_N][k % DR_N], 1);
}

/* On the destroyer's take: wait (boundedly) until another thread is
 * inside a call on e while no post is queued, then let the take mark it
 * DYING: a post that found it alive is pushed after the mark. */
static void dr_at_take(void *arg)
{
	(void)arg;
	if (!pthread_equal(pthread_self(), dr->destroyer))
		return;
	for (long i = 0; i < 1000000; i++)
		if (atomic_load(&dr->e->visitors) != 0 && atomic_load(&dr->e->posts) == NULL) {
			atomic_fetch_add(&dr->aligned, 1);
			return;
		}
}

static void *dr_caller(void *arg)
{
	int id = (int)(intptr_t)arg;

	while (!atomic_load(&dr->go))
		;
	for (int i = 0; i < DR_N; i++) {
		co_init(&dr->f[id][i].co, dr_body);
		dr->f[id][i].co.on_done = dr_done;
		dr->spawn_rc[id][i] = co_engine_spawn(dr->e, &dr->f[id][i].co);
		dr->p[id][i].fn = dr_post_fn;
		dr->post_rc[id][i] = co_engine_post(dr->e, &dr->p[id][i]);
		atomic_fetch_add(&dr->progress, 1);
		if (id == 0 && i == DR_N / 2) {
			int r = co_engine_stop(dr->e, CO_STOP_DRAIN);
			assert_true(r == 0 || r == -EINVAL);
		}
		if (dr->spawn_rc[id][i] == -EINVAL && dr->post_rc[id][i] == -EINVAL)
			break; /* destroyed: the rest would say the same */
	}
	return NULL;
}

static void *dr_destroyer(void *arg)
{
	(void)arg;
	for (;;) {
		int r;

		WAIT_UNTIL(atomic_load(&dr->turn) == 1);
		r = co_engine_destroy(dr->e);
		atomic_store(&dr->turn, 0);
		atomic_store(&dr->answer, r + 1000);
		if (r != -EBUSY)
			return NULL;
	}
}

static void test_destroy_from_other_thread_under_calls(void **state)
{
	long aligned = 0;
	(void)state;
	alarm(120);
	dr = calloc(1, sizeof *dr);
	assert_non_null(dr);
	co__fault_on_point(CO__POINT_TAKE, dr_at_take, NULL);
	for (int round = 0; round < DR_ROUNDS; round++) {
		pthread_t t[2];
		int answer, acc = 0, pacc = 0;

		memset(dr, 0, sizeof *dr);
		dr->e = malloc(sizeof *dr->e);
		assert_non_null(dr->e);
		assert_int_equal(co_engine_init(dr->e, NULL), 0);
		assert_int_equal(pthread_create(&dr->destroyer, NULL, dr_destroyer, NULL), 0);
		for (intptr_t i = 0; i < 2; i++)
			assert_int_equal(pthread_create(&t[i], NULL, dr_caller, (void *)i), 0);
		atomic_store(&dr->go, 1);
		WAIT_UNTIL(atomic_load(&dr->progress) >= 200);
		do { /* the owner: run until idle, then the destroyer's turn */
			assert_int_equal(co_engine_run(dr->e, CO_RUN_UNTIL_IDLE), 0);
			atomic_store(&dr->answer, 0);
			atomic_store(&dr->turn, 1);
			WAIT_UNTIL(atomic_load(&dr->answer) != 0);
			answer = atomic_load(&dr->answer) - 1000;
			assert_true(answer == 0 || answer == -EBUSY);
		} while (answer != 0);
		assert_int_equal(pthread_join(dr->destroyer, NULL), 0);
		for (int i = 0; i < 2; i++)
			assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(co_engine_state(dr->e), CO_ENGINE_DEAD);
		free(dr->e); /* the callers are done with it too */
		for (int id = 0; id < 2; id++)
			for (int i = 0; i < DR_N; i++) {
				struct dr_frame *x = &dr->f[id][i];
				int rc = dr->spawn_rc[id][i], pr = dr->post_rc[id][i];

				if (x->co.fn == NULL)
					break; /* not tried: the thread saw the destroy */
				if (rc == 0) {
					acc++;
					assert_int_equal(atomic_load(&x->runs), 1);
					assert_int_equal(atomic_load(&x->dones), 1);
				} else {
					assert_true(rc == -ESHUTDOWN || rc == -EINVAL);
					assert_int_equal(atomic_load(&x->runs), 0);
					assert_int_equal(atomic_load(&x->dones), 0);
				}
				if (pr == 0) {
					pacc++;
					assert_int_equal(atomic_load(&dr->post_runs[id][i]), 1);
				} else {
					assert_int_equal(pr, -EINVAL);
					assert_int_equal(atomic_load(&dr->post_runs[id][i]), 0);
				}
			}
		assert_true(acc > 0 && pacc > 0);
		aligned += atomic_load(&dr->aligned);
	}
	co__fault_on_point(CO__POINT_TAKE, NULL, NULL);
	print_message("destroys taken with a call inside: %ld\n", aligned);
	free(dr);
	alarm(0);
}


/* A destroy from a third thread while another thread's post is inside
 * its visit (held at the point before the push, its checks passed): the
 * destroy marks the engine DYING and waits for the visitor to leave, then
 * finds the post and answers -EBUSY; the owner's next run runs the post
 * once, and the destroy after it succeeds. Without the wait the destroy
 * answered 0 under the held post, which then never ran. */
static atomic_int visit_inside, visit_release;

static void hold_visit(void *arg)
{
	(void)arg;
	atomic_store(&visit_inside, 1);
	while (!atomic_load(&visit_release))
		sched_yield();
}

struct visit_race {
	co_engine e;
	co_post p;
	atomic_int post_rc, destroy_rc; /* INT_MIN: not returned yet */
};

static void *visit_race_post(void *arg)
{
	struct visit_race *v = arg;

	atomic_store(&v->post_rc, co_engine_post(&v->e, &v->p));
	return NULL;
}

static void *visit_race_destroy(void *arg)
{
	struct visit_race *v = arg;

	atomic_store(&v->destroy_rc, co_engine_destroy(&v->e));
	return NULL;
}

static void test_destroy_waits_for_visitor(void **state)
{
	struct visit_race v;
	pthread_t poster, destroyer;
	(void)state;
	alarm(30);
	memset(&v, 0, sizeof v);
	v.p.fn = count_post;
	atomic_init(&v.post_rc, INT_MIN);
	atomic_init(&v.destroy_rc, INT_MIN);
	post_count = 0;
	atomic_store(&visit_inside, 0);
	atomic_store(&visit_release, 0);
	assert_int_equal(co_engine_init(&v.e, NULL), 0);
	co__fault_on_point(CO__POINT_VISIT_PUSH, hold_visit, NULL);
	assert_int_equal(pthread_create(&poster, NULL, visit_race_post, &v), 0);
	WAIT_UNTIL(atomic_load(&visit_inside));
	assert_int_equal(pthread_create(&destroyer, NULL, visit_race_destroy, &v), 0);
	WAIT_UNTIL(co_engine_state(&v.e) == CO_ENGINE_DYING || atomic_load(&v.destroy_rc) != INT_MIN);
	atomic_store(&visit_release, 1);
	assert_int_equal(pthread_join(destroyer, NULL), 0);
	assert_int_equal(pthread_join(poster, NULL), 0);
	co__fault_on_point(CO__POINT_VISIT_PUSH, NULL, NULL);
	assert_int_equal(atomic_load(&v.post_rc), 0);
	assert_int_equal(atomic_load(&v.destroy_rc), -EBUSY); /* the post is pending */
	assert_int_equal(post_count, 0);
	assert_int_equal(co_engine_run(&v.e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(post_count, 1);
	assert_int_equal(co_engine_destroy(&v.e), 0);
	alarm(0);
}

/* engine.md, "The threading rule": a call from another thread that comes
 * while a destroy decides (DYING, waiting for a post held inside its
 * visit) waits for the answer. The destroy finds the engine busy (a frame
 * woken, not yet unparked; the post): a spawn, a stop, an unpark and a
 * park made meanwhile each answer 0 and count, and the run after the
 * destroy drains it all. Without the wait each answered -EINVAL and did
 * nothing, on an engine that lived on: the stop was lost, and the lost
 * unpark left a parked count nothing would drop (the run never ended). */
static _Thread_local int holds_visit, waits_answer;
static atomic_int answer_waiters, first_calls_back;

static void hold_visit_here(void *arg)
{
	if (holds_visit)
		hold_visit(arg);
}

static void count_answer_waiter(void *arg)
{
	(void)arg;
	if (!waits_answer) {
		waits_answer = 1;
		atomic_fetch_add(&answer_waiters, 1);
	}
}

struct busy_destroy {
	struct visit_race v;
	struct co_test_task t;
	atomic_int spawn_rc, stop_rc, unpark_rc, park_rc, unpark2_rc;
};

static void *held_post(void *arg)
{
	holds_visit = 1;
	return visit_race_post(arg);
}

static void *spawn_stop_while_dying(void *arg)
{
	struct busy_destroy *b = arg;

	atomic_store(&b->spawn_rc, co_engine_spawn(&b->v.e, &b->t.co));
	atomic_fetch_add(&first_calls_back, 1);
	atomic_store(&b->stop_rc, co_engine_stop(&b->v.e, CO_STOP_DRAIN));
	return NULL;
}

static void *unpark_while_dying(void *arg)
{
	struct busy_destroy *b = arg;

	atomic_store(&b->unpark_rc, co_engine_unpark(&b->v.e));
	atomic_fetch_add(&first_calls_back, 1);
	return NULL;
}

static void *park_while_dying(void *arg)
{
	struct busy_destroy *b = arg;

	atomic_store(&b->park_rc, co_engine_park(&b->v.e));
	atomic_fetch_add(&first_calls_back, 1);
	atomic_store(&b->unpark2_rc, co_engine_unpark(&b->v.e));
	return NULL;
}

static void test_calls_wait_out_a_busy_destroy(void **state)
{
	struct busy_destroy b;
	struct gate g = { .aw = { &gate_ops }, .use_park = 1 };
	struct waiter w = { .g = &g };
	atomic_int runs[1] = { 0 };
	pthread_t poster, destroyer, th[3];
	void *(*calls[3])(void *) = { spawn_stop_while_dying, unpark_while_dying, park_while_dying };
	(void)state;
	alarm(30);
	memset(&b, 0, sizeof b);
	b.v.p.fn = count_post;
	b.t.runs = runs;
	co_init(&b.t.co, co_test_task_fn);
	atomic_init(&b.v.post_rc, INT_MIN);
	atomic_init(&b.v.destroy_rc, INT_MIN);
	post_count = 0;
	atomic_store(&visit_inside, 0);
	atomic_store(&visit_release, 0);
	atomic_store(&answer_waiters, 0);
	waits_answer = 0; /* this thread's, of an earlier case */
	atomic_store(&first_calls_back, 0);
	assert_int_equal(co_engine_init(&b.v.e, NULL), 0);
	co_init(&w.co, waiter_fn);
	assert_int_equal(co_engine_spawn(&b.v.e, &w.co), 0);
	assert_int_equal(co_engine_tick(&b.v.e), 1); /* parked at the gate */
	assert_ptr_equal(g.parked, &w.co);
	co_wake(&w.co); /* its unpark comes while the destroy decides */
	co__fault_on_point(CO__POINT_VISIT_PUSH, hold_visit_here, NULL);
	co__fault_on_point(CO__POINT_DESTROY_WAITS, count_answer_waiter, NULL);
	assert_int_equal(pthread_create(&poster, NULL, held_post, &b.v), 0);
	WAIT_UNTIL(atomic_load(&visit_inside));
	assert_int_equal(pthread_create(&destroyer, NULL, visit_race_destroy, &b.v), 0);
	WAIT_UNTIL(co_engine_state(&b.v.e) == CO_ENGINE_DYING || atomic_load(&b.v.destroy_rc) != INT_MIN);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&th[i], NULL, calls[i], &b), 0);
	/* each first call waits for the answer (or, refused, came back) */
	WAIT_UNTIL(atomic_load(&answer_waiters) + atomic_load(&first_calls_back) == 3);
	atomic_store(&visit_release, 1);
	assert_int_equal(pthread_join(destroyer, NULL), 0);
	assert_int_equal(pthread_join(poster, NULL), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	co__fault_on_point(CO__POINT_VISIT_PUSH, NULL, NULL);
	co__fault_on_point(CO__POINT_DESTROY_WAITS, NULL, NULL);
	assert_int_equal(atomic_load(&b.v.destroy_rc), -EBUSY);
	assert_int_equal(atomic_load(&b.v.post_rc), 0);
	assert_int_equal(atomic_load(&b.spawn_rc), 0);
	assert_int_equal(atomic_load(&b.stop_rc), 0);
	assert_int_equal(atomic_load(&b.unpark_rc), 0);
	assert_int_equal(atomic_load(&b.park_rc), 0);
	assert_int_equal(atomic_load(&b.unpark2_rc), 0);
	assert_int_equal(atomic_load(&answer_waiters), 3);
	assert_int_equal(co_engine_state(&b.v.e), CO_ENGINE_STOPPED);
	assert_int_equal(co_engine_run(&b.v.e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(post_count, 1);
	assert_int_equal(w.passed, 1);
	assert_int_equal(atomic_load(&runs[0]), 1);
	assert_int_equal(co_engine_destroy(&b.v.e), 0);
	alarm(0);
}

/* The same for the owner's tick and a second destroy, which are no
 * visits: each waits for the answer of the destroy that decides, then
 * takes the engine as it would have (the second destroy finds it busy
 * too, the tick runs the post). Without the wait both answered -EINVAL,
 * the owner's as if its engine were gone. The owner's wait releases the
 * held post once both wait (the hook runs on the waiting thread). */
static atomic_int answer_waiters_release;

static void count_then_release(void *arg)
{
	count_answer_waiter(arg);
	if (atomic_load(&answer_waiters) >= atomic_load(&answer_waiters_release))
		atomic_store(&visit_release, 1);
}

static atomic_int second_destroy_rc;

static void *second_destroy(void *arg)
{
	struct visit_race *v = arg;

	atomic_store(&second_destroy_rc, co_engine_destroy(&v->e));
	return NULL;
}

static void test_owner_and_destroy_wait_out_a_busy_destroy(void **state)
{
	struct visit_race v;
	struct gate g = { .aw = { &gate_ops } };
	struct waiter w = { .g = &g };
	pthread_t poster, destroyer, destroyer2;
	int tick;
	(void)state;
	alarm(30);
	memset(&v, 0, sizeof v);
	v.p.fn = count_post;
	atomic_init(&v.post_rc, INT_MIN);
	atomic_init(&v.destroy_rc, INT_MIN);
	atomic_store(&second_destroy_rc, INT_MIN);
	post_count = 0;
	atomic_store(&visit_inside, 0);
	atomic_store(&visit_release, 0);
	atomic_store(&answer_waiters, 0);
	waits_answer = 0; /* this thread's, of an earlier case */
	atomic_store(&answer_waiters_release, 2);
	assert_int_equal(co_engine_init(&v.e, NULL), 0);
	co_init(&w.co, waiter_fn);
	assert_int_equal(co_engine_spawn(&v.e, &w.co), 0);
	assert_int_equal(co_engine_tick(&v.e), 1); /* this thread owns it; w at the gate */
	co__fault_on_point(CO__POINT_VISIT_PUSH, hold_visit_here, NULL);
	co__fault_on_point(CO__POINT_DESTROY_WAITS, count_then_release, NULL);
	assert_int_equal(pthread_create(&poster, NULL, held_post, &v), 0);
	WAIT_UNTIL(atomic_load(&visit_inside));
	assert_int_equal(pthread_create(&destroyer, NULL, visit_race_destroy, &v), 0);
	WAIT_UNTIL(co_engine_state(&v.e) == CO_ENGINE_DYING || atomic_load(&v.destroy_rc) != INT_MIN);
	assert_int_equal(pthread_create(&destroyer2, NULL, second_destroy, &v), 0);
	WAIT_UNTIL(atomic_load(&answer_waiters) == 1 || atomic_load(&second_destroy_rc) != INT_MIN);
	tick = co_engine_tick(&v.e); /* waits too, and releases the post */
	atomic_store(&visit_release, 1); /* refused at once: release it here */
	assert_int_equal(pthread_join(destroyer, NULL), 0);
	assert_int_equal(pthread_join(destroyer2, NULL), 0);
	assert_int_equal(pthread_join(poster, NULL), 0);
	co__fault_on_point(CO__POINT_VISIT_PUSH, NULL, NULL);
	co__fault_on_point(CO__POINT_DESTROY_WAITS, NULL, NULL);
	assert_int_equal(atomic_load(&v.destroy_rc), -EBUSY);
	assert_int_equal(atomic_load(&second_destroy_rc), -EBUSY);
	assert_int_equal(tick, 0); /* the post ran; w still at the gate */
	assert_int_equal(post_count, 1);
	assert_int_equal(atomic_load(&answer_waiters), 2);
	co_wake(g.parked);
	assert_int_equal(co_engine_run(&v.e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(w.passed, 1);
	assert_int_equal(co_engine_destroy(&v.e), 0);
	alarm(0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_errors),
		cmocka_unit_test(test_default_cq_for_any_sq),
		cmocka_unit_test(test_owner_ended_next_thread_refused),
		cmocka_unit_test(test_uring_unavailable),
		cmocka_unit_test(test_register_refused),
		cmocka_unit_test(test_first_enable_refused),
		cmocka_unit_test(test_spawn_errors),
		cmocka_unit_test(test_no_fast_flags_plain_ring),
		cmocka_unit_test(test_other_thread_while_owner_runs),
		cmocka_unit_test(test_register_while_first_run_starts),
		cmocka_unit_test(test_misuse_errors),
		cmocka_unit_test(test_last_sqe_gone_after_submit),
		cmocka_unit_test(test_destroy_keeps_sqe_in_flight),
		cmocka_unit_test(test_deadlock_reported),
	cmocka_unit_test(test_stopped_tick_forgets_stuck),
		cmocka_unit_test(test_stop_never_relaxes),
		cmocka_unit_test(test_parked_frame_keeps_engine_alive),
		cmocka_unit_test(test_stop_cancels_io),
		cmocka_unit_test(test_stop_cancels_io_started_later),
		cmocka_unit_test(test_ring_fd_refused),
		cmocka_unit_test(test_nested_run_refused),
		cmocka_unit_test(test_post_from_other_threads),
		cmocka_unit_test(test_post_errors_and_lifetime),
		cmocka_unit_test(test_post_from_own_frame),
		cmocka_unit_test(test_stats_read_from_other_thread),
		cmocka_unit_test(test_destroy_from_other_thread_under_calls),
		cmocka_unit_test(test_destroy_waits_for_visitor),
		cmocka_unit_test(test_calls_wait_out_a_busy_destroy),
		cmocka_unit_test(test_owner_and_destroy_wait_out_a_busy_destroy),
		cmocka_unit_test(test_sqe_helpers_refuse_other_threads),
		cmocka_unit_test(test_refused_tick_leaves_owner_alone),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
