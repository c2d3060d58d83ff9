/* SPDX-License-Identifier: MIT */
/*
 * The lifecycle of engines, contexts and schedulers (docs/design.md), tried
 * the way a stranger or an attacker would: calls in the wrong state, from
 * another thread, after destroy; stops that must end every wait; stuck
 * frames; cancel from any thread; every setup flag. Each case here failed
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
#include "fault.h"

/* Poll until cond holds. Only a hang guard: a test never decides its
 * verdict by time, and meson's timeout ends one that hangs. */
#define WAIT_UNTIL(cond)                  \
	do {                              \
		while (!(cond))           \
			usleep(100);      \
	} while (0)

/* ---- helpers ------------------------------------------------------------------ */

/* A lone engine run on its own thread. */
struct runner {
	co_engine *e;
	int mode, ret;
	pthread_t th;
};

static void *runner_main(void *arg)
{
	struct runner *r = arg;
	r->ret = co_engine_run(r->e, r->mode);
	return NULL;
}

static void runner_start(struct runner *r, co_engine *e, int mode)
{
	r->e = e;
	r->mode = mode;
	r->ret = 1;
	assert_int_equal(pthread_create(&r->th, NULL, runner_main, r), 0);
}

static int runner_join(struct runner *r)
{
	pthread_join(r->th, NULL);
	return r->ret;
}

/* A task that counts its runs and records its status in on_done. */
struct task {
	co_frame co;
	atomic_int ran, done, status;
};

static int task_fn(co_frame *f)
{
	struct task *t = (struct task *)f;
	CO_BEGIN(f);
	atomic_fetch_add(&t->ran, 1);
	CO_END(f);
}

static void task_done(co_frame *f)
{
	struct task *t = (struct task *)f;
	atomic_store(&t->status, co_status(f));
	atomic_fetch_add(&t->done, 1);
}

static void task_init(struct task *t)
{
	memset(t, 0, sizeof *t);
	co_init(&t->co, task_fn);
	t->co.on_done = task_done;
}

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

static const co_awaiter_ops gate_ops = { NULL, gate_suspend, NULL, NULL };

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
	struct task t;
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
	task_init(&t);
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
	struct runner r;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	runner_start(&r, &e, CO_RUN_UNTIL_STOP);
	WAIT_UNTIL(co_engine_state(&e) == CO_ENGINE_RUNNING);
	assert_int_equal(co_engine_destroy(&e), -EBUSY);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), -EBUSY); /* it runs */
	assert_int_equal(co_engine_state(&e), CO_ENGINE_RUNNING);     /* unchanged */
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(runner_join(&r), 0);
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
		struct runner r;
		struct task t;
		int sv[2], err = co_engine_init(&e, &o);
		if (err != 0)
			fail_msg("setup flags %#x: init %d", taken[i], err);
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		p.fd = sv[0];
		co_init(&p.co, flag_probe_fn);
		assert_int_equal(co_engine_spawn(&e, &p.co), 0);
		/* run on another thread, and wake it from this one */
		runner_start(&r, &e, CO_RUN_UNTIL_STOP);
		task_init(&t);
		assert_int_equal(co_engine_spawn(&e, &t.co), 0);
		WAIT_UNTIL(atomic_load(&t.done) == 1);
		assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
		assert_int_equal(runner_join(&r), 0);
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
	struct task *t;
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
	struct task first, late;
	pthread_t th;
	int accepted = 0, refused = 0;
	(void)state;
	assert_non_null(d);
	d->t = calloc(DOOR_SPAWNS, sizeof *d->t);
	assert_non_null(d->t);
	d->c = &c;
	for (int i = 0; i < DOOR_SPAWNS; i++)
		task_init(&d->t[i]);
	task_init(&first);
	assert_int_equal(co_context_init(&c, NULL), 0);
	assert_int_equal(co_context_state(&c), CO_CONTEXT_NEW);
	assert_int_equal(co_context_spawn(&c, &first.co), 0);
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
	task_init(&late);
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

static void test_context_start_failure(void **state)
{
	co_context c;
	struct task t[START_TASKS];
	(void)state;
	/* the start fails: the context stays NEW with its frames, and a
	 * second start runs every one of them */
	assert_int_equal(co_context_init(&c, NULL), 0);
	for (int i = 0; i < START_TASKS; i++) {
		task_init(&t[i]);
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
		task_init(&t[i]);
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
	struct task tb;
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
	task_init(&tb);
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
	struct task other;
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
	task_init(&other);
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

/* ---- a cancel stop ends every wait ------------------------------------------------ */

enum wait_kind {
	W_EVENT, W_CHAN_RECV, W_CHAN_SEND, W_SEM, W_COND, W_MUTEX, W_LATCH, W_WAITGROUP,
	W_WHEN_ALL, W_READ, W_SLEEP, W_EVENT_TIMED, W_KINDS
};

static const char *const wait_names[W_KINDS] = {
	"event", "channel recv", "channel send (full)", "semaphore", "condvar", "mutex",
	"latch", "wait group", "when_all", "read (pipe)", "sleep", "event (timed)",
};

struct world {
	co_event ev;
	co_chan empty, full;
	co_sem sem;
	co_cond cond;
	co_mutex held, cm;
	co_latch latch;
	co_waitgroup wg;
	int pipe[2];
	atomic_int parked; /* waiters that got to their await */
};

/* when_all's child: waits on the event */
struct kid {
	co_frame co;
	co_waiter w;
	co_event *ev;
};

struct blocked {
	co_frame co;
	co_waiter w;
	co_io io;
	co_when when;
	struct kid kid;
	co_frame *kids[1];
	struct world *wd;
	enum wait_kind kind;
	int item, res;
	char c;
	atomic_int done;
};

static int kid_event_fn(co_frame *f)
{
	struct kid *k = (struct kid *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_event_wait(&k->w, k->ev));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static int blocked_fn(co_frame *f)
{
	struct blocked *b = (struct blocked *)f;
	struct world *wd = b->wd;
	CO_BEGIN(f);
	atomic_fetch_add(&wd->parked, 1);
	switch (b->kind) {
	case W_EVENT:
		co_event_wait(&b->w, &wd->ev);
		break;
	case W_CHAN_RECV:
		co_chan_recv(&b->w, &wd->empty, &b->item);
		break;
	case W_CHAN_SEND:
		co_chan_send(&b->w, &wd->full, &b->item);
		break;
	case W_SEM:
		co_sem_acquire(&b->w, &wd->sem);
		break;
	case W_MUTEX:
		co_mutex_lock(&b->w, &wd->held);
		break;
	case W_LATCH:
		co_latch_wait(&b->w, &wd->latch);
		break;
	case W_WAITGROUP:
		co_waitgroup_wait(&b->w, &wd->wg);
		break;
	case W_EVENT_TIMED:
		co_wait_for(co_event_wait(&b->w, &wd->ev), 3600 * CO_S);
		break;
	default:
		break;
	}
	if (b->kind == W_COND) {
		CO_AWAIT(f, co_mutex_lock(&b->w, &wd->cm));
		CO_AWAIT(f, co_cond_wait(&b->w, &wd->cond, &wd->cm));
		b->res = co_result(f);
		co_mutex_unlock(&wd->cm); /* held again, whatever the value */
	} else if (b->kind == W_WHEN_ALL) {
		CO_AWAIT(f, co_when_all(&b->when, b->kids, 1));
		b->res = co_status(&b->kid.co); /* the child's wait was cancelled */
	} else if (b->kind == W_READ) {
		CO_AWAIT(f, co_read(&b->io, wd->pipe[0], &b->c, 1, (uint64_t)-1));
		b->res = co_result(f);
	} else if (b->kind == W_SLEEP) {
		CO_AWAIT(f, co_sleep(&b->io, 3600 * CO_S));
		b->res = co_result(f);
	} else {
		CO_AWAIT(f, &b->w.aw);
		b->res = co_result(f);
	}
	CO_END(f);
}

static void blocked_done(co_frame *f)
{
	atomic_fetch_add(&((struct blocked *)f)->done, 1);
}

static void world_init(struct world *wd)
{
	int one = 1;
	memset(wd, 0, sizeof *wd);
	assert_int_equal(co_event_init(&wd->ev, 0), 0);
	assert_int_equal(co_chan_init(&wd->empty, sizeof(int), 1, NULL), 0);
	assert_int_equal(co_chan_init(&wd->full, sizeof(int), 1, NULL), 0);
	assert_int_equal(co_chan_try_send(&wd->full, &one), 0);
	assert_int_equal(co_sem_init(&wd->sem, 0), 0);
	assert_int_equal(co_cond_init(&wd->cond), 0);
	assert_int_equal(co_mutex_init(&wd->held), 0);
	assert_int_equal(co_mutex_trylock(&wd->held), 0); /* held by nobody who runs */
	assert_int_equal(co_mutex_init(&wd->cm), 0);
	assert_int_equal(co_latch_init(&wd->latch, 1), 0);
	assert_int_equal(co_waitgroup_init(&wd->wg), 0);
	assert_int_equal(co_waitgroup_add(&wd->wg, 1), 0);
	assert_int_equal(pipe(wd->pipe), 0);
}

static void world_free(struct world *wd)
{
	assert_int_equal(co_chan_destroy(&wd->empty), 0);
	assert_int_equal(co_chan_destroy(&wd->full), 0);
	close(wd->pipe[0]);
	close(wd->pipe[1]);
}

static void blocked_init(struct blocked *b, struct world *wd, enum wait_kind k)
{
	memset(b, 0, sizeof *b);
	b->wd = wd;
	b->kind = k;
	b->res = 1;
	co_init(&b->co, blocked_fn);
	b->co.on_done = blocked_done;
	if (k == W_WHEN_ALL) {
		b->kid.ev = &wd->ev;
		co_init(&b->kid.co, kid_event_fn);
		b->kids[0] = &b->kid.co;
	}
}

/* Every kind of wait, none of them with a time limit but one, parked on
 * a 2-context scheduler; a cancel stop from another thread ends each with
 * -ECANCELED and co_sched_run returns. */
static void test_cancel_stop_ends_every_wait(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	struct world wd;
	static struct blocked b[W_KINDS];
	(void)state;
	world_init(&wd);
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int k = 0; k < W_KINDS; k++) {
		blocked_init(&b[k], &wd, (enum wait_kind)k);
		assert_int_equal(co_sched_spawn(&s, &b[k].co), 0);
	}
	WAIT_UNTIL(atomic_load(&wd.parked) == W_KINDS);
	assert_int_equal(co_sched_stop(&s, CO_STOP_CANCEL), 0);
	assert_int_equal(co_sched_run(&s), 0);
	for (int k = 0; k < W_KINDS; k++) {
		if (b[k].res != -ECANCELED || b[k].done != 1)
			fail_msg("%s: result %d, on_done %d", wait_names[k], b[k].res, b[k].done);
	}
	assert_int_equal(co_sched_destroy(&s), 0);
	world_free(&wd);
}

/* A lone engine, stopped from one of its own coroutines: the same. */
struct stopper {
	co_frame co;
	co_io io;
};

static int stopper_fn(co_frame *f)
{
	struct stopper *st = (struct stopper *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&st->io)); /* everyone else is parked by now */
	co_engine_stop(co_engine_current(), CO_STOP_CANCEL);
	CO_END(f);
}

static void test_cancel_stop_from_inside(void **state)
{
	co_engine e;
	struct world wd;
	static struct blocked b[W_KINDS];
	struct stopper st;
	(void)state;
	world_init(&wd);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	for (int k = 0; k < W_KINDS; k++) {
		blocked_init(&b[k], &wd, (enum wait_kind)k);
		assert_int_equal(co_engine_spawn(&e, &b[k].co), 0);
	}
	co_init(&st.co, stopper_fn);
	assert_int_equal(co_engine_spawn(&e, &st.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0);
	for (int k = 0; k < W_KINDS; k++)
		if (b[k].res != -ECANCELED || b[k].done != 1)
			fail_msg("%s: result %d, on_done %d", wait_names[k], b[k].res, b[k].done);
	assert_int_equal(co_engine_destroy(&e), 0);
	world_free(&wd);
}

/* A drain that does not end within its time becomes a cancel. */
static void test_timed_drain_becomes_cancel(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	struct world wd;
	struct blocked b;
	(void)state;
	world_init(&wd);
	assert_int_equal(co_sched_init(&s, &o), 0);
	blocked_init(&b, &wd, W_EVENT);
	assert_int_equal(co_sched_spawn(&s, &b.co), 0);
	WAIT_UNTIL(atomic_load(&wd.parked) == 1);
	assert_int_equal(co_sched_stop_timed(&s, 20 * CO_MS), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(b.res, -ECANCELED);
	assert_int_equal(co_sched_destroy(&s), 0);
	world_free(&wd);
}

/* ---- bounded against coroutines that retry ------------------------------------------ */

enum retry_kind { R_RECV, R_EVENT, R_YIELD, R_SLEEP, R_KINDS };

struct retrier {
	co_frame co;
	co_io io;
	co_waiter w;
	co_event *ev;
	enum retry_kind kind;
	int fd, tries;
	char c;
	atomic_int done, status, started;
};

static int retrier_fn(co_frame *f)
{
	struct retrier *r = (struct retrier *)f;
	CO_BEGIN(f);
	atomic_store(&r->started, 1);
	for (;;) { /* ignores every -ECANCELED it gets */
		r->tries++;
		if (r->kind == R_RECV) {
			CO_AWAIT(f, co_recv(&r->io, r->fd, &r->c, 1, 0));
		} else if (r->kind == R_EVENT) {
			CO_AWAIT(f, co_event_wait(&r->w, r->ev));
		} else if (r->kind == R_SLEEP) {
			CO_AWAIT(f, co_sleep(&r->io, 3600 * CO_S));
		} else {
			CO_YIELD(f);
		}
	}
	CO_END(f);
}

static void retrier_done(co_frame *f)
{
	struct retrier *r = (struct retrier *)f;
	atomic_store(&r->status, co_status(f));
	atomic_fetch_add(&r->done, 1);
}

static void test_cancel_stop_bounded(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2, .engine = { .cancel_grace_ns = 20 * CO_MS } };
	struct retrier r[R_KINDS];
	co_event ev;
	int sv[2];
	uint64_t cancelled = 0;
	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(co_event_init(&ev, 0), 0);
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int k = 0; k < R_KINDS; k++) {
		memset(&r[k], 0, sizeof r[k]);
		r[k].kind = (enum retry_kind)k;
		r[k].fd = sv[0];
		r[k].ev = &ev;
		co_init(&r[k].co, retrier_fn);
		r[k].co.on_done = retrier_done;
		assert_int_equal(co_sched_spawn(&s, &r[k].co), 0);
	}
	for (int k = 0; k < R_KINDS; k++)
		WAIT_UNTIL(atomic_load(&r[k].started));
	assert_int_equal(co_sched_stop(&s, CO_STOP_CANCEL), 0);
	assert_int_equal(co_sched_run(&s), 0); /* returns: the stop is bounded */
	for (int k = 0; k < R_KINDS; k++) {
		assert_int_equal(r[k].done, 1);
		assert_int_equal(r[k].status, -ECANCELED);
		assert_true(r[k].tries > 1); /* it did retry */
	}
	for (unsigned i = 0; i < s.n; i++)
		cancelled += s.ctx[i].engine.stats.cancelled;
	assert_int_equal(cancelled, R_KINDS); /* finished for them, past the grace */
	assert_int_equal(co_sched_destroy(&s), 0);
	close(sv[0]);
	close(sv[1]);
}

/* Frames that never started do not start under a cancel stop. */
static void test_cancel_stop_unstarted(void **state)
{
	co_engine e;
	struct task t[16];
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	for (int i = 0; i < 16; i++) {
		task_init(&t[i]);
		assert_int_equal(co_engine_spawn(&e, &t[i].co), 0);
	}
	assert_int_equal(co_engine_stop(&e, CO_STOP_CANCEL), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0);
	for (int i = 0; i < 16; i++) {
		assert_int_equal(t[i].ran, 0);
		assert_int_equal(t[i].done, 1);
		assert_int_equal(t[i].status, -ECANCELED);
	}
	assert_int_equal(e.stats.cancelled, 16);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* ---- cancel from another thread ------------------------------------------------------ */

static void test_cross_thread_cancel(void **state)
{
	co_context c;
	struct world wd;
	struct blocked rd, evw;
	struct task fin;
	(void)state;
	world_init(&wd);
	assert_int_equal(co_context_init(&c, NULL), 0);
	blocked_init(&rd, &wd, W_READ);
	blocked_init(&evw, &wd, W_EVENT);
	task_init(&fin);
	assert_int_equal(co_context_spawn(&c, &rd.co), 0);
	assert_int_equal(co_context_spawn(&c, &evw.co), 0);
	assert_int_equal(co_context_spawn(&c, &fin.co), 0);
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_STOP), 0);
	WAIT_UNTIL(atomic_load(&wd.parked) == 2 && atomic_load(&fin.done) == 1);
	/* this thread runs no engine: the requests go to the context's thread */
	assert_int_equal(co_cancel(&rd.co), 0);
	assert_int_equal(co_cancel(&evw.co), 0);
	assert_true(co_cancelled(&rd.co));
	WAIT_UNTIL(atomic_load(&rd.done) == 1 && atomic_load(&evw.done) == 1);
	assert_int_equal(rd.res, -ECANCELED);
	assert_int_equal(evw.res, -ECANCELED);
	/* a finished frame: refused, and nothing about it changes */
	assert_int_equal(co_cancel(&fin.co), -EALREADY);
	assert_false(co_cancelled(&fin.co));
	assert_int_equal(co_cancel(&rd.co), -EALREADY);
	assert_int_equal(co_context_stop(&c, CO_STOP_DRAIN), 0);
	assert_int_equal(co_context_join(&c), 0);
	assert_int_equal(co_context_destroy(&c), 0);
	world_free(&wd);
}

/* Cancels racing the frames' ends, from a thread that runs no engine. Each
 * frame is freed by whichever of its on_done and the canceller lets go of
 * it last, so the canceller's call is always made on live memory, and a
 * touch by the library after on_done would be a use-after-free (ASan). Each
 * frame finishes exactly once; a cancel answered -EALREADY came after the
 * end (the frame slept its full time); one answered 0 may still lose to
 * the end. */
#define RACE_FRAMES 3000

struct racer {
	co_frame co;
	co_io io;
	unsigned us;
	atomic_int refs;
	atomic_int *finished, *slept;
};

static void racer_release(struct racer *r)
{
	if (atomic_fetch_sub(&r->refs, 1) == 1)
		free(r);
}

static int racer_fn(co_frame *f)
{
	struct racer *r = (struct racer *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep(&r->io, r->us * CO_US));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void racer_done(co_frame *f)
{
	struct racer *r = (struct racer *)f;
	atomic_fetch_add(r->finished, 1);
	if (co_status(f) == 0)
		atomic_fetch_add(r->slept, 1);
	racer_release(r);
}

static void test_cross_thread_cancel_races_end(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	atomic_int finished = 0, slept = 0;
	int accepted = 0, too_late = 0;
	unsigned seed = 7;
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < RACE_FRAMES; i++) {
		struct racer *r = calloc(1, sizeof *r);
		int ret;
		assert_non_null(r);
		r->us = rand_r(&seed) % 40;
		r->finished = &finished;
		r->slept = &slept;
		atomic_init(&r->refs, 2);
		co_init(&r->co, racer_fn);
		r->co.on_done = racer_done;
		assert_int_equal(co_sched_spawn(&s, &r->co), 0);
		for (unsigned spin = rand_r(&seed) % 20000; spin; spin--)
			atomic_signal_fence(memory_order_seq_cst);
		ret = co_cancel(&r->co);
		if (ret == 0)
			accepted++;
		else if (ret == -EALREADY)
			too_late++;
		else
			fail_msg("frame %d: co_cancel answered %d", i, ret);
		racer_release(r);
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(atomic_load(&finished), RACE_FRAMES);
	assert_true(atomic_load(&slept) >= too_late);
	print_message("      %d cancels accepted, %d too late; %d frames slept their time\n",
		      accepted, too_late, atomic_load(&slept));
	assert_int_equal(co_sched_destroy(&s), 0);
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

/* ---- more of the tables in docs/design.md ---------------------------------------- */

struct waiter_thread {
	co_sched *s;
	int ret;
};

static void *run_main(void *arg)
{
	struct waiter_thread *w = arg;
	w->ret = co_sched_run(w->s);
	return NULL;
}

/* Several threads may wait in co_sched_run at once; a stop that cannot
 * finish yet makes destroy refuse (-EBUSY) until the work is done; a stop
 * on an ended scheduler is harmless. */
static void test_sched_run_waiters_and_stops(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	struct world wd;
	struct blocked b;
	struct waiter_thread w[3];
	pthread_t th[3];
	(void)state;
	world_init(&wd);
	assert_int_equal(co_sched_init(&s, &o), 0);
	blocked_init(&b, &wd, W_EVENT);
	assert_int_equal(co_sched_spawn(&s, &b.co), 0);
	for (int i = 0; i < 3; i++) {
		w[i] = (struct waiter_thread){ .s = &s, .ret = 1 };
		assert_int_equal(pthread_create(&th[i], NULL, run_main, &w[i]), 0);
	}
	WAIT_UNTIL(atomic_load(&wd.parked) == 1);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	assert_int_equal(co_sched_state(&s), CO_SCHED_STOPPING);
	assert_int_equal(co_sched_destroy(&s), -EBUSY); /* waiters, and a task parked */
	assert_int_equal(co_event_set(&wd.ev), 0);
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].ret, 0);
	}
	assert_int_equal(b.res, 0);
	assert_int_equal(co_sched_state(&s), CO_SCHED_ENDED);
	assert_int_equal(co_sched_stop(&s, CO_STOP_CANCEL), 0); /* harmless */
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	world_free(&wd);
}

/* A cancel request for a frame of an engine that is not running waits for
 * its next run; and a cancel stop stays one when a drain is asked after. */
static void test_cancel_while_not_running(void **state)
{
	co_engine e;
	struct world wd;
	struct blocked b;
	struct task t;
	(void)state;
	world_init(&wd);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	blocked_init(&b, &wd, W_SLEEP); /* an hour */
	assert_int_equal(co_engine_spawn(&e, &b.co), 0);
	assert_int_equal(co_cancel(&b.co), 0); /* no run: queued */
	assert_true(co_cancelled(&b.co));
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(b.res, -ECANCELED); /* its sleep was cut short */

	task_init(&t);
	assert_int_equal(co_engine_stop(&e, CO_STOP_CANCEL), 0);
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0); /* no way back */
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	world_free(&wd);

	/* the same with a frame that never started: under the cancel stop
	 * it never does, even after the drain was asked */
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_engine_spawn(&e, &t.co), 0);
	assert_int_equal(co_engine_stop(&e, CO_STOP_CANCEL), 0);
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0);
	assert_int_equal(t.ran, 0);
	assert_int_equal(t.status, -ECANCELED);
	assert_int_equal(co_engine_destroy(&e), 0);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_engine_states),
		cmocka_unit_test(test_engine_destroy_while_running),
		cmocka_unit_test(test_setup_flags),
		cmocka_unit_test(test_lone_context_door),
		cmocka_unit_test(test_context_start_failure),
		cmocka_unit_test(test_transfer_exdev),
		cmocka_unit_test(test_sched_deadlock),
		cmocka_unit_test(test_engine_deadlock_then_destroy),
		cmocka_unit_test(test_cancel_stop_ends_every_wait),
		cmocka_unit_test(test_cancel_stop_from_inside),
		cmocka_unit_test(test_timed_drain_becomes_cancel),
		cmocka_unit_test(test_cancel_stop_bounded),
		cmocka_unit_test(test_cancel_stop_unstarted),
		cmocka_unit_test(test_cross_thread_cancel),
		cmocka_unit_test(test_cross_thread_cancel_races_end),
		cmocka_unit_test(test_free_channel_after_timed_claim),
		cmocka_unit_test(test_free_event_after_set),
		cmocka_unit_test(test_sched_run_waiters_and_stops),
		cmocka_unit_test(test_cancel_while_not_running),
		cmocka_unit_test(test_cancelled_frame_does_not_move),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
