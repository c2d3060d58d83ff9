/* SPDX-License-Identifier: MIT */
/*
 * Stops, tried the way a stranger or an attacker would (docs/design.md,
 * "Stop modes" and "Cancellation"): a cancel stop ends every kind of wait,
 * from inside and from outside, bounded by the grace period; a timed drain
 * turns into a cancel; unstarted frames are abandoned and counted; cancel
 * from another thread, racing the frame's end; several co_sched_run
 * waiters. Each case here failed (hung, crashed, leaked or answered
 * wrongly) before the lifecycle was written down.
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
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <cmocka.h>

#include <coring/coring.h>
#include "helpers.h"

/* ---- a cancel stop ends every wait ------------------------------------------------ */

enum wait_kind {
	W_EVENT, W_CHAN_RECV, W_CHAN_SEND, W_SEM, W_COND, W_MUTEX, W_LATCH, W_WAITGROUP,
	W_WHEN_ALL, W_READ, W_SLEEP, W_EVENT_TIMED, W_OWN_LIMITED, W_KINDS
};

static const char *const wait_names[W_KINDS] = {
	"event", "channel recv", "channel send (full)", "semaphore", "condvar", "mutex",
	"latch", "wait group", "when_all", "read (pipe)", "sleep", "event (timed)",
	"an awaiter of one's own under co_timeout",
};

/* An awaiter of one's own that only its cancel op ends (with -ECANCELED):
 * under co_timeout, the limit's timer is the only I/O of the wait. */
struct own {
	co_awaiter aw;
	co_frame *f;
	int res;
};

static int own_suspend(co_awaiter *a, co_frame *f)
{
	((struct own *)a)->f = f;
	return 1;
}

static int own_resume(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((struct own *)a)->res;
}

static int own_cancel(co_awaiter *a, co_frame *f)
{
	struct own *o = (struct own *)a;

	if (o->f) {
		o->f = NULL;
		o->res = -ECANCELED;
		co_wake(f);
	}
	return 0;
}

static const co_awaiter_ops own_ops = { NULL, own_suspend, own_resume, own_cancel, 0, "own" };

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
	co_limit lim;
	struct own own;
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
	} else if (b->kind == W_OWN_LIMITED) {
		b->own.aw.ops = &own_ops;
		CO_AWAIT(f, co_timeout(&b->lim, &b->own.aw, 3600 * CO_S));
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
		/* started, then retried as often as its engine ran it before the
		 * grace ended (on a loaded machine that may be no time at all) */
		assert_true(r[k].tries >= 1);
	}
	for (unsigned i = 0; i < s.n; i++)
		cancelled += s.ctx[i].engine.stats.cancelled;
	assert_int_equal(cancelled, R_KINDS); /* finished for them, past the grace */
	assert_int_equal(co_sched_destroy(&s), 0);
	close(sv[0]);
	close(sv[1]);
}

/* Frames that never started do not start under a cancel stop. */
/* ---- a drain ends an armed acceptor ------------------------------------------ */

/* A frame arms an acceptor, then waits for its event (with_event) or
 * ends. Once every frame has finished, a drain cancels what no frame
 * waits for: the acceptor's last on_conn sees -ECANCELED and the run
 * returns (it waited for a connection for good). */
struct acc_owner {
	co_frame co;
	co_acceptor acc;
	co_waiter w;
	co_event *ev;
	int lfd, last, started;
	atomic_int armed;
};

static void acc_owner_conn(co_acceptor *a, int fd)
{
	struct acc_owner *o = a->user;

	o->last = fd;
	if (fd >= 0)
		close(fd);
}

static int acc_owner_fn(co_frame *f)
{
	struct acc_owner *o = (struct acc_owner *)f;

	CO_BEGIN(f);
	o->started = co_acceptor_start(&o->acc, o->lfd, 0, acc_owner_conn, o);
	atomic_store(&o->armed, 1);
	if (o->ev)
		CO_AWAIT(f, co_event_wait(&o->w, o->ev));
	CO_END(f);
}

static void drain_with_acceptor(int with_event)
{
	co_engine e;
	co_event ev;
	co_test_runner r;
	struct acc_owner o = { .last = 1 };
	uint16_t port;

	alarm(10); /* a drain that waits for a connection for good: fail, not hang */
	o.lfd = co_test_listen(&port);
	assert_true(o.lfd >= 0);
	assert_int_equal(co_event_init(&ev, 0), 0);
	o.ev = with_event ? &ev : NULL;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&o.co, acc_owner_fn);
	assert_int_equal(co_engine_spawn(&e, &o.co), 0);
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_STOP);
	WAIT_UNTIL(atomic_load(&o.armed));
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	if (with_event)
		assert_int_equal(co_event_set(&ev), 0); /* the last frame ends after the stop */
	assert_int_equal(co_test_runner_join(&r), 0);
	alarm(0);
	assert_int_equal(o.started, 0);
	assert_true(co_done(&o.co));
	assert_int_equal(o.last, -ECANCELED);
	assert_int_equal(o.acc.armed, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_event_destroy(&ev), 0);
	close(o.lfd);
}

static void test_drain_ends_armed_acceptor(void **state)
{
	(void)state;
	drain_with_acceptor(0);
}

static void test_drain_ends_acceptor_after_last_frame(void **state)
{
	(void)state;
	drain_with_acceptor(1);
}

/* ---- a frame finished past the grace in the middle of a child's await --------- */

/* A reads a line through a reader (the reader's read is a child of A)
 * from a peer that never writes; B then asks a cancel stop, with a grace
 * of 1 ns: the read's cancel wakes A after the grace, and A is finished
 * for it from the ready queue, in the middle of its await of the child.
 * The child ends with it (-ECANCELED): in A's on_done the reader is not
 * busy, and co_reader_destroy frees its buffer (it answered -EBUSY for
 * good, and the buffer leaked: the KV example's connections under a
 * SIGTERM on a busy machine). */
struct mid_read {
	co_frame co;
	co_reader rd;
	int destroy_res;
};

static int mid_read_fn(co_frame *f)
{
	struct mid_read *m = (struct mid_read *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_reader_until(&m->rd, "\n", 1)); /* nothing comes */
	CO_END(f);
}

static void mid_read_done(co_frame *f)
{
	struct mid_read *m = (struct mid_read *)f;

	m->destroy_res = co_reader_destroy(&m->rd);
}

struct cancel_stopper {
	co_frame co;
	co_io io;
};

static int cancel_stopper_fn(co_frame *f)
{
	struct cancel_stopper *s = (struct cancel_stopper *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&s->io)); /* the read is in flight by now */
	co_engine_stop(co_engine_current(), CO_STOP_CANCEL);
	CO_END(f);
}

static void test_cancel_stop_past_grace_ends_children(void **state)
{
	co_engine e;
	co_engine_opts o = { .cancel_grace_ns = 1 };
	struct mid_read m = { .destroy_res = 1 };
	struct cancel_stopper st;
	int sv[2];
	(void)state;
	alarm(20);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(co_reader_init(&m.rd, sv[0], NULL), 0);
	assert_int_equal(co_engine_init(&e, &o), 0);
	co_init(&m.co, mid_read_fn);
	m.co.on_done = mid_read_done;
	co_init(&st.co, cancel_stopper_fn);
	assert_int_equal(co_engine_spawn(&e, &m.co), 0);
	assert_int_equal(co_engine_spawn(&e, &st.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0);
	assert_true(co_done(&m.co));
	assert_int_equal(co_status(&m.co), -ECANCELED);
	assert_int_equal(m.destroy_res, 0); /* the reader's read ended with A */
	assert_int_equal(co_engine_destroy(&e), 0);
	close(sv[0]);
	close(sv[1]);
	alarm(0);
}

static void test_cancel_stop_unstarted(void **state)
{
	co_engine e;
	struct co_test_counted t[16];
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	for (int i = 0; i < 16; i++) {
		co_test_counted_init(&t[i]);
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
	struct co_test_counted fin;
	(void)state;
	world_init(&wd);
	assert_int_equal(co_context_init(&c, NULL), 0);
	blocked_init(&rd, &wd, W_READ);
	blocked_init(&evw, &wd, W_EVENT);
	co_test_counted_init(&fin);
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

/* The same end, made to happen every time: a frame (on the heap, freed by
 * its on_done) holds its context's thread until a request from this
 * thread is queued, then returns. Its finish finds the request on its way
 * and waits for it: on_done runs once, after the request was handled, and
 * nothing touches the frame after (ASan). Each round checks, once the
 * next frame runs (the turn that took it handled every request queued
 * before), that the last on_done ran exactly once. */
#define FINISH_ROUNDS 200

static atomic_int fin_running, fin_go, fin_done;

struct finisher {
	co_frame co;
};

static int finisher_fn(co_frame *f)
{
	CO_BEGIN(f);
	atomic_store(&fin_running, 1);
	while (!atomic_load(&fin_go)) /* its engine's thread: no turn meanwhile */
		sched_yield();
	CO_END(f);
}

static void finisher_done(co_frame *f)
{
	free(f);
	atomic_fetch_add(&fin_done, 1);
}

static void test_cross_thread_cancel_at_finish(void **state)
{
	co_context c;
	(void)state;
	atomic_store(&fin_done, 0);
	assert_int_equal(co_context_init(&c, NULL), 0);
	assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_STOP), 0);
	for (int i = 0; i <= FINISH_ROUNDS; i++) {
		struct finisher *x = malloc(sizeof *x);

		assert_non_null(x);
		co_init(&x->co, finisher_fn);
		x->co.on_done = finisher_done;
		atomic_store(&fin_running, 0);
		atomic_store(&fin_go, 0);
		assert_int_equal(co_context_spawn(&c, &x->co), 0);
		WAIT_UNTIL(atomic_load(&fin_running));
		assert_int_equal(atomic_load(&fin_done), i); /* the last one: once */
		if (i == FINISH_ROUNDS) {
			atomic_store(&fin_go, 1);
			break;
		}
		assert_int_equal(co_cancel(&x->co), 0); /* queued: x holds its thread */
		assert_true(co_cancelled(&x->co));
		atomic_store(&fin_go, 1); /* x is not touched from here */
		WAIT_UNTIL(atomic_load(&fin_done) == i + 1);
	}
	assert_int_equal(co_context_stop(&c, CO_STOP_DRAIN), 0);
	assert_int_equal(co_context_join(&c), 0);
	assert_int_equal(atomic_load(&fin_done), FINISH_ROUNDS + 1);
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

/* A drain stop rises to a cancel when one is asked after it, in both
 * states a stop leaves the engine in (docs/design.md, "Engine": "mode may
 * rise"): STOPPING, with a frame asleep for an hour (the cancel ends its
 * sleep and the run), and STOPPED, with a frame that never started (the
 * run finishes it unrun). A drain that stayed a drain would sleep the
 * hour, or run the frame. */
static void test_drain_rises_to_cancel(void **state)
{
	co_engine e;
	co_test_runner r;
	struct world wd;
	struct blocked b;
	(void)state;
	alarm(30);
	world_init(&wd);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	blocked_init(&b, &wd, W_SLEEP); /* an hour */
	assert_int_equal(co_engine_spawn(&e, &b.co), 0);
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_STOP);
	WAIT_UNTIL(atomic_load(&wd.parked) == 1);
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_engine_state(&e), CO_ENGINE_STOPPING);
	assert_int_equal(co_engine_stop(&e, CO_STOP_CANCEL), 0);
	assert_int_equal(co_test_runner_join(&r), 0);
	assert_int_equal(b.res, -ECANCELED);
	assert_int_equal(atomic_load(&b.done), 1);
	assert_int_equal(co_engine_destroy(&e), 0);

	assert_int_equal(co_engine_init(&e, NULL), 0);
	blocked_init(&b, &wd, W_SLEEP);
	assert_int_equal(co_engine_spawn(&e, &b.co), 0);
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_engine_state(&e), CO_ENGINE_STOPPED);
	assert_int_equal(co_engine_stop(&e, CO_STOP_CANCEL), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0);
	assert_int_equal(atomic_load(&wd.parked), 1); /* it never ran */
	assert_int_equal(co_status(&b.co), -ECANCELED);
	assert_int_equal(atomic_load(&b.done), 1);
	assert_int_equal(co_engine_destroy(&e), 0);
	world_free(&wd);
	alarm(0);
}

/* A cancel request for a frame of an engine that is not running waits for
 * its next run; and a cancel stop stays one when a drain is asked after. */
static void test_cancel_while_not_running(void **state)
{
	co_engine e;
	struct world wd;
	struct blocked b;
	struct co_test_counted t;
	(void)state;
	world_init(&wd);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	blocked_init(&b, &wd, W_SLEEP); /* an hour */
	assert_int_equal(co_engine_spawn(&e, &b.co), 0);
	assert_int_equal(co_cancel(&b.co), 0); /* no run: queued */
	assert_true(co_cancelled(&b.co));
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(b.res, -ECANCELED); /* its sleep was cut short */

	co_test_counted_init(&t);
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

/* ---- time sums saturate ------------------------------------------------------------ */

/* A frame that sleeps a little, then ends with 0: a drain lets it. */
struct napper {
	co_frame co;
	co_io io;
	int slept;
	atomic_int done, status;
};

static int napper_fn(co_frame *f)
{
	struct napper *n = (struct napper *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep(&n->io, 5 * CO_MS));
	n->slept = co_result(f);
	CO_END(f);
}

static void napper_done(co_frame *f)
{
	struct napper *n = (struct napper *)f;
	atomic_store(&n->status, co_status(f));
	atomic_fetch_add(&n->done, 1);
}

static void napper_init(struct napper *n)
{
	memset(n, 0, sizeof *n);
	n->slept = 1;
	co_init(&n->co, napper_fn);
	n->co.on_done = napper_done;
}

/* co_engine_stop_timed and co_sched_stop_timed with a time the clock
 * cannot add without wrapping: a drain that never becomes a cancel. */
static void test_timed_stop_saturates(void **state)
{
	(void)state;
	for (int k = 0; k < CO_TEST_HUGE_KINDS; k++) {
		co_engine e;
		struct napper n;
		napper_init(&n);
		assert_int_equal(co_engine_init(&e, NULL), 0);
		assert_int_equal(co_engine_spawn(&e, &n.co), 0);
		assert_int_equal(co_engine_stop_timed(&e, co_test_huge_ns(k)), 0);
		assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0);
		if (n.slept != 0 || n.status != 0 || e.stats.cancelled != 0)
			fail_msg("engine, ns %d: slept %d, status %d", k, n.slept, n.status);
		assert_int_equal(co_engine_destroy(&e), 0);
	}
	for (int k = 0; k < CO_TEST_HUGE_KINDS; k++) {
		co_sched s;
		co_sched_opts o = { .contexts = 2 };
		struct napper n[4];
		assert_int_equal(co_sched_init(&s, &o), 0);
		for (int i = 0; i < 4; i++) {
			napper_init(&n[i]);
			assert_int_equal(co_sched_spawn_to(&s, (unsigned)i % 2, &n[i].co), 0);
		}
		assert_int_equal(co_sched_stop_timed(&s, co_test_huge_ns(k)), 0);
		assert_int_equal(co_sched_run(&s), 0);
		for (int i = 0; i < 4; i++)
			if (n[i].done != 1 || n[i].slept != 0 || n[i].status != 0)
				fail_msg("scheduler, ns %d: frame %d slept %d, status %d", k, i,
					 n[i].slept, n[i].status);
		assert_int_equal(co_sched_destroy(&s), 0);
	}
}

/* A frame that waits, then ignores its cancellation for a while and
 * ends by itself with 7. */
struct holdout {
	co_frame co;
	co_io io;
	int k, slept;
	atomic_int done, status;
};

static int holdout_fn(co_frame *f)
{
	struct holdout *b = (struct holdout *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep(&b->io, 3600 * CO_S));
	b->slept = co_result(f);
	for (b->k = 0; b->k < 200; b->k++)
		CO_YIELD(f);
	CO_RETURN(f, 7);
	CO_END(f);
}

static void holdout_done(co_frame *f)
{
	struct holdout *b = (struct holdout *)f;
	atomic_store(&b->status, co_status(f));
	atomic_fetch_add(&b->done, 1);
}

/* A grace the clock cannot add without wrapping: frames are never
 * finished for them, whatever they do. */
static void test_grace_saturates(void **state)
{
	(void)state;
	for (int k = 0; k < CO_TEST_HUGE_KINDS; k++) {
		co_engine_opts o = { .cancel_grace_ns = co_test_huge_ns(k) };
		co_engine e;
		struct holdout b;
		memset(&b, 0, sizeof b);
		co_init(&b.co, holdout_fn);
		b.co.on_done = holdout_done;
		assert_int_equal(co_engine_init(&e, &o), 0);
		assert_int_equal(co_engine_spawn(&e, &b.co), 0);
		assert_int_equal(co_engine_tick(&e), 1); /* started: it sleeps */
		assert_int_equal(co_engine_stop(&e, CO_STOP_CANCEL), 0);
		assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0);
		if (b.done != 1 || b.slept != -ECANCELED || b.status != 7 || b.k != 200 ||
		    e.stats.cancelled != 0)
			fail_msg("grace %d: status %d after %d turns, %llu abandoned", k, b.status,
				 b.k, (unsigned long long)e.stats.cancelled);
		assert_int_equal(co_engine_destroy(&e), 0);
	}
}

/* ---- a stop ends within its grace, whatever is in flight ------------------------------- */

/*
 * Waits the kernel does not end at the first ask (docs/engine.md, "A stop
 * ends within its grace"), each ended three ways: a cancel stop, a timed
 * stop (a drain that becomes a cancel) and co_cancel of the frame. The
 * engine runs on a thread of its own; a watchdog fails the case if the run
 * has not returned STUCK_MARGIN after the stop's grace, and a run that
 * returns at once passes at once: no pass waits for any time.
 */
#define STUCK_GRACE (50 * CO_MS)
#define STUCK_DRAIN (20 * CO_MS)  /* a timed stop's drain */
#define STUCK_MARGIN (20 * CO_S)  /* the watchdog's: generous */

enum stuck_how { BY_CANCEL_STOP, BY_TIMED_STOP, BY_CO_CANCEL, STUCK_HOWS };

static const char *const how_names[STUCK_HOWS] = { "cancel stop", "timed stop", "co_cancel" };

/* An engine run on a thread of its own, and its watchdog. */
struct watched {
	co_engine e;
	int mode, ret;
	atomic_int returned;
	pthread_t th;
};

static void *watched_main(void *arg)
{
	struct watched *w = arg;

	w->ret = co_engine_run(&w->e, w->mode);
	atomic_store(&w->returned, 1);
	return NULL;
}

static void watched_start(struct watched *w, int mode)
{
	co_engine_opts o = { .cancel_grace_ns = STUCK_GRACE };

	assert_int_equal(co_engine_init(&w->e, &o), 0);
	w->mode = mode;
	w->ret = 1;
	atomic_store(&w->returned, 0);
}

static void watched_run(struct watched *w)
{
	assert_int_equal(pthread_create(&w->th, NULL, watched_main, w), 0);
}

/* End f's wait one of the three ways; the run must return (0) within the
 * grace, the timed stop's drain and the margin. */
static void stop_and_watch(struct watched *w, co_frame *f, enum stuck_how how, const char *what)
{
	uint64_t bound = STUCK_GRACE + STUCK_MARGIN, deadline, t0 = co_now_ns();

	if (how == BY_CANCEL_STOP) {
		assert_int_equal(co_engine_stop(&w->e, CO_STOP_CANCEL), 0);
	} else if (how == BY_TIMED_STOP) {
		assert_int_equal(co_engine_stop_timed(&w->e, STUCK_DRAIN), 0);
		bound += STUCK_DRAIN;
	} else {
		assert_int_equal(co_cancel(f), 0);
	}
	deadline = co_now_ns() + bound;
	while (!atomic_load(&w->returned)) {
		if (co_now_ns() > deadline)
			fail_msg("%s, %s: the run has not returned %llu ms after it", what,
				 how_names[how], (unsigned long long)(bound / CO_MS));
		usleep(1000);
	}
	pthread_join(w->th, NULL);
	print_message("      %s, %s: returned after %.1f ms\n", what, how_names[how],
		      (double)(co_now_ns() - t0) / CO_MS);
	assert_int_equal(w->ret, 0);
}

/* Bytes in fd's receive queue. */
static int queued(int fd)
{
	int n = 0;

	assert_int_equal(ioctl(fd, FIONREAD, &n), 0);
	return n;
}

/* Fill fd's send buffer and its peer's receive buffer (a peer that never
 * reads), then shut fd for reading, as the KV example's stop does. On
 * Linux 6.18 a send on such a socket is handed to an io-wq worker that
 * blocks in it (poll says there is room, the send finds none), and a
 * cancel asked right after the send's submission finds it nowhere. */
static void fill_and_shut(int fd)
{
	static char chunk[65536];
	int fl = fcntl(fd, F_GETFL);

	assert_int_equal(fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
	while (send(fd, chunk, sizeof chunk, MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
		;
	assert_int_equal(fcntl(fd, F_SETFL, fl), 0);
	assert_int_equal(shutdown(fd, SHUT_RD), 0);
}

/* An io-wq worker of this process waits in the kernel (a splice's pipe,
 * a send's socket), not for work: its wchan says where. Where wchans
 * cannot be read, 1 (the case then runs without waiting for it). */
static int worker_blocked(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *t;
	int found = 0, workers = 0, readable = 0;

	assert_non_null(d);
	while (!found && (t = readdir(d)) != NULL) {
		char path[300], comm[32] = "", wchan[64] = "";
		FILE *f;

		snprintf(path, sizeof path, "/proc/self/task/%s/comm", t->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (!fgets(comm, sizeof comm, f))
			comm[0] = 0;
		fclose(f);
		if (strncmp(comm, "iou-wrk", 7) != 0)
			continue;
		workers++;
		snprintf(path, sizeof path, "/proc/self/task/%s/wchan", t->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(wchan, sizeof wchan, f) && strcmp(wchan, "0") != 0) {
			readable = 1;
			found = strcmp(wchan, "io_wq_worker") != 0;
		}
		fclose(f);
	}
	closedir(d);
	return found || (workers && !readable);
}

/* A connected stream pair: TCP over loopback, blocking or not, or Unix. */
enum pair_kind { PAIR_TCP, PAIR_TCP_NONBLOCK, PAIR_UNIX, PAIRS };

static const char *const pair_names[PAIRS] = { "tcp", "tcp, O_NONBLOCK", "unix" };

static void pair_open(enum pair_kind k, int sv[2])
{
	if (k == PAIR_UNIX)
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	else
		co_test_tcp_pair(sv);
	if (k == PAIR_TCP_NONBLOCK)
		assert_int_equal(fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK), 0);
}

/* A pool job that blocks until the gate (a pipe) is written. */
static int gate[2];
static atomic_int gate_entered, gate_passed;

static int wait_for_gate(void *arg)
{
	char c;
	int ok;

	(void)arg;
	atomic_store(&gate_entered, 1);
	ok = read(gate[0], &c, 1) == 1; /* blocks until written */
	atomic_store(&gate_passed, 1);
	return ok ? 7 : -EIO;
}

/* What a stuck frame waits on. */
enum stuck_kind { ST_SEND, ST_RECV, ST_SPLICE_OUT, ST_SPLICE_IN, ST_POOL };

struct stuck {
	co_frame co;
	co_io io;
	co_io_all x;
	co_pool_job job;
	co_pool *pool;
	enum stuck_kind kind;
	int later;             /* first a sleep, the wait after its cancel */
	int fd, pipe_fd;
	char *buf;
	size_t len;
	int res;
	atomic_int waiting, done, status;
};

static int stuck_fn(co_frame *f)
{
	struct stuck *s = (struct stuck *)f;
	CO_BEGIN(f);
	if (s->later) { /* a wait begun after the cancel: on the way out */
		atomic_store(&s->waiting, 1);
		CO_AWAIT(f, co_sleep(&s->io, 3600 * CO_S));
	}
	atomic_store(&s->waiting, 1);
	if (s->kind == ST_SEND) {
		CO_AWAIT(f, co_send_all(&s->x, s->fd, s->buf, s->len, MSG_NOSIGNAL));
	} else if (s->kind == ST_RECV) {
		CO_AWAIT(f, co_recv_all(&s->x, s->fd, s->buf, s->len, 0));
	} else if (s->kind == ST_SPLICE_OUT || s->kind == ST_SPLICE_IN) {
		do { /* until a splice waits: the socket may still find room for some */
			CO_AWAIT(f, co_splice(&s->io, s->pipe_fd, -1, s->fd, -1, 1 << 20, 0));
		} while (co_result(f) > 0);
	} else {
		CO_AWAIT(f, co_pool_run(&s->job, s->pool, wait_for_gate, NULL));
	}
	s->res = co_result(f);
	CO_RETURN(f, s->res < 0 ? s->res : 0);
	CO_END(f);
}

static void stuck_done(co_frame *f)
{
	struct stuck *s = (struct stuck *)f;

	atomic_store(&s->status, co_status(f));
	atomic_fetch_add(&s->done, 1);
}

static void stuck_init(struct stuck *s, enum stuck_kind kind, int later, int fd)
{
	memset(s, 0, sizeof *s);
	s->kind = kind;
	s->later = later;
	s->fd = fd;
	s->pipe_fd = -1;
	s->len = kind == ST_SEND ? 64u << 20 : 100; /* past what the socket's buffers may grow to */
	s->buf = calloc(1, s->len);
	assert_non_null(s->buf);
	co_init(&s->co, stuck_fn);
	s->co.on_done = stuck_done;
}

/* Run s on a watched engine until it waits, end the wait the given way
 * and check the run returned in time and s finished once, cancelled. */
static void stuck_run(struct stuck *s, enum stuck_how how, const char *what)
{
	struct watched w;
	int st, eintr;

	watched_start(&w, how == BY_CO_CANCEL ? CO_RUN_UNTIL_IDLE : CO_RUN_UNTIL_STOP);
	assert_int_equal(co_engine_spawn(&w.e, &s->co), 0);
	watched_run(&w);
	WAIT_UNTIL(atomic_load(&s->waiting));
	if (!s->later && s->kind != ST_RECV)
		WAIT_UNTIL(worker_blocked()); /* a send or a splice: on an io-wq worker */
	stop_and_watch(&w, &s->co, how, what);
	/* The value: -ECANCELED, but for a splice that the stop's ask found
	 * on its worker: the worker was told by a signal, -EINTR (never the
	 * kernel's own -ERESTARTSYS, 512; a worker slow to take the splice
	 * up lets the ask cancel it: -ECANCELED). The *_all loops go on after
	 * -EINTR: their next operation's cancel, the frame's own, ends them
	 * with -ECANCELED, as it does an operation begun after the cancel.
	 * An -EINTR after a cancel of the library's own is -ECANCELED. */
	st = atomic_load(&s->status);
	eintr = s->kind >= ST_SPLICE_OUT && !s->later && how != BY_CO_CANCEL;
	if (atomic_load(&s->done) != 1 || (st != -ECANCELED && !(eintr && st == -EINTR)))
		fail_msg("%s, %s: on_done %d, status %d", what, how_names[how],
			 atomic_load(&s->done), st);
	assert_int_equal(co_engine_destroy(&w.e), 0);
	free(s->buf);
}

/* A send_all to a peer that never reads, its socket full and shut for
 * reading: in its send when the stop comes, or sending after its sleep
 * was cancelled (the send's own cancel, asked right behind it, finds it
 * nowhere: the library asks again). Blocking and non-blocking TCP, Unix. */
static void test_blocked_send_ends_in_grace(void **state)
{
	(void)state;
	for (int k = 0; k < PAIRS; k++)
		for (int later = 0; later < 2; later++)
			for (int how = 0; how < STUCK_HOWS; how++) {
				struct stuck s;
				char what[64];
				int sv[2];

				pair_open((enum pair_kind)k, sv);
				fill_and_shut(sv[0]);
				snprintf(what, sizeof what, "send (%s%s)", pair_names[k],
					 later ? ", after a sleep" : "");
				stuck_init(&s, ST_SEND, later, sv[0]);
				stuck_run(&s, (enum stuck_how)how, what);
				assert_true(queued(sv[1]) > 0); /* never read */
				close(sv[0]);
				close(sv[1]);
			}
}

/* A recv_all from a peer that never writes: the same ways. */
static void test_blocked_recv_ends_in_grace(void **state)
{
	(void)state;
	for (int k = 0; k < PAIRS; k++)
		for (int later = 0; later < 2; later++)
			for (int how = 0; how < STUCK_HOWS; how++) {
				struct stuck s;
				char what[64];
				int sv[2];

				pair_open((enum pair_kind)k, sv);
				snprintf(what, sizeof what, "recv (%s%s)", pair_names[k],
					 later ? ", after a sleep" : "");
				stuck_init(&s, ST_RECV, later, sv[0]);
				stuck_run(&s, (enum stuck_how)how, what);
				close(sv[0]);
				close(sv[1]);
			}
}

/* A splice (always run by an io-wq worker): from a full pipe into a
 * socket whose peer never reads (full and shut for reading), and from an
 * empty pipe nobody writes into a socket. */
static void test_blocked_splice_ends_in_grace(void **state)
{
	static char chunk[65536];
	(void)state;
	for (int out = 0; out < 2; out++)
		for (int later = 0; later < 2; later++)
			for (int how = 0; how < STUCK_HOWS; how++) {
				struct stuck s;
				char what[64];
				int sv[2], p[2];

				co_test_tcp_pair(sv);
				assert_int_equal(pipe(p), 0);
				if (out) {
					fill_and_shut(sv[0]);
					assert_int_equal(write(p[1], chunk, sizeof chunk), (ssize_t)sizeof chunk);
				}
				snprintf(what, sizeof what, "splice %s%s",
					 out ? "to a socket never read" : "from a pipe never written",
					 later ? ", after a sleep" : "");
				stuck_init(&s, out ? ST_SPLICE_OUT : ST_SPLICE_IN, later, sv[0]);
				s.pipe_fd = p[0];
				stuck_run(&s, (enum stuck_how)how, what);
				close(p[0]);
				close(p[1]);
				close(sv[0]);
				close(sv[1]);
			}
}

/* A pool job that blocks (a pipe nobody writes) cannot be interrupted: a
 * stop gives its frame up when the grace runs out; the job ends once the
 * pipe is written, and the engine's destroy waits for that. */
static void test_pool_job_ends_in_grace(void **state)
{
	(void)state;
	for (int how = BY_CANCEL_STOP; how <= BY_TIMED_STOP; how++) {
		struct stuck s;
		co_pool pool;
		struct watched w;

		assert_int_equal(pipe(gate), 0);
		atomic_store(&gate_entered, 0);
		atomic_store(&gate_passed, 0);
		assert_int_equal(co_pool_init(&pool, 1), 0);
		stuck_init(&s, ST_POOL, 0, -1);
		s.pool = &pool;
		watched_start(&w, CO_RUN_UNTIL_STOP);
		assert_int_equal(co_engine_spawn(&w.e, &s.co), 0);
		watched_run(&w);
		WAIT_UNTIL(atomic_load(&gate_entered)); /* the job runs */
		stop_and_watch(&w, &s.co, (enum stuck_how)how, "pool job");
		assert_int_equal(atomic_load(&s.done), 1);
		assert_int_equal(atomic_load(&s.status), -ECANCELED);
		assert_int_equal(co_engine_destroy(&w.e), -EBUSY); /* the job still runs */
		assert_int_equal(write(gate[1], "g", 1), 1);
		while (co_engine_destroy(&w.e) == -EBUSY)
			usleep(100);
		while (co_pool_destroy(&pool) == -EBUSY)
			usleep(100);
		assert_int_equal(atomic_load(&gate_passed), 1);
		close(gate[0]);
		close(gate[1]);
		free(s.buf);
	}
}

/* A wait of two hard-linked operations, made with co_engine_sqe: a long
 * timeout, then a recv from a peer that never writes. The cancel stop's
 * first ask ends the timeout; the recv starts only after that ask (a hard
 * link goes on after a failure), so it is on no list the ask searched:
 * only an ask that comes later ends it. */
struct linked {
	co_frame co;
	co_awaiter aw;
	co_io_info info;      /* both SQEs: tag 1 the timeout, 2 the recv */
	co_frame *frame;
	int fd, due, res;
	char c;
	atomic_int waiting, done, status;
};

static void linked_cqe(co_engine *e, co_io_info *info, int res, unsigned cqe_flags, unsigned tag)
{
	struct linked *l = (struct linked *)((char *)info - offsetof(struct linked, info));

	(void)e;
	(void)cqe_flags;
	if (tag == 2)
		l->res = res;
	if (--l->due == 0)
		co_wake(l->frame);
}

static int linked_suspend(co_awaiter *a, co_frame *f)
{
	struct linked *l = (struct linked *)((char *)a - offsetof(struct linked, aw));
	co_engine *e = co_engine_current();
	struct io_uring_sqe *t = co_engine_sqe(e, &l->info, 1), *r;
	struct __kernel_timespec *ts = co_engine_sqe_ts(e, t);

	ts->tv_sec = 3600;
	ts->tv_nsec = 0;
	io_uring_prep_timeout(t, ts, 0, 0);
	t->flags |= IOSQE_IO_HARDLINK;
	r = co_engine_sqe_link(e, &l->info, 2);
	io_uring_prep_recv(r, l->fd, &l->c, 1, 0);
	l->frame = f;
	l->due = 2;
	return 1;
}

static int linked_resume(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((struct linked *)((char *)a - offsetof(struct linked, aw)))->res;
}

static const co_awaiter_ops linked_ops = { NULL, linked_suspend, linked_resume, NULL, 0,
					   "linked" };

static int linked_fn(co_frame *f)
{
	struct linked *l = (struct linked *)f;
	CO_BEGIN(f);
	l->aw.ops = &linked_ops;
	l->info.cb = linked_cqe;
	atomic_store(&l->waiting, 1);
	CO_AWAIT(f, &l->aw);
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void linked_done(co_frame *f)
{
	struct linked *l = (struct linked *)f;

	atomic_store(&l->status, co_status(f));
	atomic_fetch_add(&l->done, 1);
}

static void test_hard_linked_op_ends_in_grace(void **state)
{
	(void)state;
	for (int how = BY_CANCEL_STOP; how <= BY_TIMED_STOP; how++) {
		struct linked l;
		struct watched w;
		int sv[2];

		co_test_tcp_pair(sv);
		memset(&l, 0, sizeof l);
		l.fd = sv[0];
		co_init(&l.co, linked_fn);
		l.co.on_done = linked_done;
		watched_start(&w, CO_RUN_UNTIL_STOP);
		assert_int_equal(co_engine_spawn(&w.e, &l.co), 0);
		watched_run(&w);
		WAIT_UNTIL(atomic_load(&l.waiting));
		stop_and_watch(&w, &l.co, (enum stuck_how)how, "hard-linked recv");
		assert_int_equal(atomic_load(&l.done), 1);
		assert_int_equal(atomic_load(&l.status), -ECANCELED);
		assert_int_equal(co_engine_destroy(&w.e), 0);
		close(sv[0]);
		close(sv[1]);
	}
}

/* A frame awaiting a child that runs on another engine: co_spawn_on to an
 * engine that runs (the child waits on an event nobody sets) or to one
 * that never runs (the child never starts), and a when_all child that
 * moved to another context (co_transfer_to). Each way of ending the wait
 * reaches the child where it is: its wait ends with -ECANCELED (or it is
 * finished unstarted), and so does the await. */
static co_event elsewhere_ev;

struct elsewhere_kid {
	co_frame co;
	co_waiter w;
	co_transfer tr;
	co_context *to; /* a context to move to first, or NULL */
	int shielded;   /* holds the cancel off while it waits */
	atomic_int waiting;
};

static int elsewhere_kid_fn(co_frame *f)
{
	struct elsewhere_kid *k = (struct elsewhere_kid *)f;
	CO_BEGIN(f);
	if (k->to) {
		CO_AWAIT(f, co_transfer_to(&k->tr, k->to));
		if (co_result(f) != 0)
			CO_RETURN(f, co_result(f));
	}
	if (k->shielded)
		co_shield(f);
	atomic_store(&k->waiting, 1);
	CO_AWAIT(f, co_event_wait(&k->w, &elsewhere_ev));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

struct elsewhere {
	co_frame co;
	co_when w;
	co_frame *kids[1];
	co_engine *on; /* co_spawn_on's engine, or NULL: when_all */
	struct elsewhere_kid kid;
	co_io io;
	int shielded, slept; /* shielded: begins the await after a long sleep */
	atomic_int waiting, done, status;
};

static int elsewhere_fn(co_frame *f)
{
	struct elsewhere *x = (struct elsewhere *)f;
	CO_BEGIN(f);
	if (x->shielded) {
		co_shield(f);
		atomic_store(&x->waiting, 1);
		CO_AWAIT(f, co_sleep(&x->io, 3600 * CO_S));
		x->slept = co_result(f);
	}
	atomic_store(&x->waiting, 1);
	if (x->on) {
		CO_AWAIT(f, co_spawn_on(&x->w, x->on, &x->kid.co));
	} else {
		x->kids[0] = &x->kid.co;
		CO_AWAIT(f, co_when_all(&x->w, x->kids, 1));
	}
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void elsewhere_done(co_frame *f)
{
	struct elsewhere *x = (struct elsewhere *)f;

	atomic_store(&x->status, co_status(f));
	atomic_fetch_add(&x->done, 1);
}

static void elsewhere_init(struct elsewhere *x, co_engine *on, co_context *to)
{
	memset(x, 0, sizeof *x);
	x->on = on;
	x->kid.to = to;
	co_init(&x->kid.co, elsewhere_kid_fn);
	co_init(&x->co, elsewhere_fn);
	x->co.on_done = elsewhere_done;
}

static void *run_until_stop(void *arg)
{
	co_engine_run(arg, CO_RUN_UNTIL_STOP);
	return NULL;
}

/* A watched engine whose frame awaits a child on another engine, which
 * runs on a thread of its own (runs) or never runs. */
struct elsewhere_rig {
	struct watched w;
	struct elsewhere x;
	co_engine other;
	int runs;
	pthread_t th;
};

static void rig_init(struct elsewhere_rig *r, int runs)
{
	r->runs = runs;
	assert_int_equal(co_engine_init(&r->other, NULL), 0);
	if (runs)
		assert_int_equal(pthread_create(&r->th, NULL, run_until_stop, &r->other), 0);
	elsewhere_init(&r->x, &r->other, NULL);
}

static void rig_run(struct elsewhere_rig *r, int mode)
{
	watched_start(&r->w, mode);
	assert_int_equal(co_engine_spawn(&r->w.e, &r->x.co), 0);
	watched_run(&r->w);
}

static void rig_down(struct elsewhere_rig *r)
{
	assert_int_equal(co_engine_destroy(&r->w.e), 0);
	if (r->runs) {
		assert_int_equal(co_engine_stop(&r->other, CO_STOP_DRAIN), 0);
		assert_int_equal(pthread_join(r->th, NULL), 0);
	}
	assert_int_equal(co_engine_destroy(&r->other), 0);
}

static void test_child_elsewhere_ends_in_grace(void **state)
{
	struct elsewhere_rig r;
	(void)state;
	assert_int_equal(co_event_init(&elsewhere_ev, 0), 0);
	for (int runs = 0; runs < 2; runs++)
		for (int how = 0; how < STUCK_HOWS; how++) {
			rig_init(&r, runs);
			rig_run(&r, how == BY_CO_CANCEL ? CO_RUN_UNTIL_IDLE : CO_RUN_UNTIL_STOP);
			if (runs)
				WAIT_UNTIL(atomic_load(&r.x.kid.waiting));
			else
				WAIT_UNTIL(atomic_load(&r.w.e.parked) == 1); /* its await began */
			stop_and_watch(&r.w, &r.x.co, (enum stuck_how)how,
				       runs ? "co_spawn_on, child waits on another engine"
					    : "co_spawn_on, child on an engine that never runs");
			assert_int_equal(atomic_load(&r.x.done), 1);
			assert_int_equal(atomic_load(&r.x.status), -ECANCELED);
			assert_int_equal(co_status(&r.x.kid.co), -ECANCELED);
			assert_int_equal(atomic_load(&r.x.kid.waiting), runs); /* unstarted: never ran */
			rig_down(&r);
		}
	/* a shielded frame that begins such an await once a cancel stop has
	 * begun: -ECANCELED at once, nothing spawned (the stop has looked at
	 * its waits already: a child spawned now would hold it) */
	rig_init(&r, 1);
	r.x.shielded = 1;
	rig_run(&r, CO_RUN_UNTIL_STOP);
	WAIT_UNTIL(atomic_load(&r.x.waiting));
	stop_and_watch(&r.w, &r.x.co, BY_CANCEL_STOP, "shielded, awaits a child elsewhere in the stop");
	assert_int_equal(r.x.slept, -ECANCELED);
	assert_int_equal(atomic_load(&r.x.status), -ECANCELED);
	assert_int_equal(atomic_load(&r.x.kid.waiting), 0); /* never spawned */
	rig_down(&r);
	/* a child that holds the cancel off (co_shield) holds the stop: the
	 * await is not given up past the grace (the child is the caller's, and
	 * runs on); it ends, and the run returns, once the child finished (its
	 * status stays readable; the frame, woken past the grace, is finished
	 * for it) */
	rig_init(&r, 1);
	r.x.kid.shielded = 1;
	rig_run(&r, CO_RUN_UNTIL_STOP);
	WAIT_UNTIL(atomic_load(&r.x.kid.waiting));
	assert_int_equal(co_engine_stop(&r.w.e, CO_STOP_CANCEL), 0);
	WAIT_UNTIL(co_cancelled(&r.x.kid.co)); /* the stop reached it */
	usleep(4 * STUCK_GRACE / CO_US);
	assert_false(atomic_load(&r.w.returned));
	assert_int_equal(atomic_load(&r.x.done), 0);
	assert_int_equal(co_event_set(&elsewhere_ev), 0);
	assert_int_equal(pthread_join(r.w.th, NULL), 0);
	assert_int_equal(r.w.ret, 0);
	assert_int_equal(co_status(&r.x.kid.co), 0); /* the event came */
	assert_int_equal(atomic_load(&r.x.done), 1); /* woken past the grace: finished for it */
	assert_int_equal(atomic_load(&r.x.status), -ECANCELED);
	assert_int_equal(co_event_reset(&elsewhere_ev), 0);
	rig_down(&r);
	/* a when_all child that moved to another context: the cancel stop of
	 * the awaiting frame's context reaches it there */
	for (int timed = 0; timed < 2; timed++) {
		co_context c1, c2;
		co_engine_opts o = { .cancel_grace_ns = STUCK_GRACE };
		struct elsewhere x;

		assert_int_equal(co_context_init(&c1, &o), 0);
		assert_int_equal(co_context_init(&c2, NULL), 0);
		elsewhere_init(&x, NULL, &c2);
		assert_int_equal(co_context_start(&c1, CO_RUN_UNTIL_STOP), 0);
		assert_int_equal(co_context_start(&c2, CO_RUN_UNTIL_STOP), 0);
		assert_int_equal(co_context_spawn(&c1, &x.co), 0);
		WAIT_UNTIL(atomic_load(&x.kid.waiting));
		if (timed)
			assert_int_equal(co_engine_stop_timed(&c1.engine, STUCK_DRAIN), 0);
		else
			assert_int_equal(co_context_stop(&c1, CO_STOP_CANCEL), 0);
		assert_int_equal(co_context_join(&c1), 0); /* the test's timeout: a hang */
		assert_int_equal(atomic_load(&x.done), 1);
		assert_int_equal(atomic_load(&x.status), -ECANCELED);
		assert_int_equal(co_status(&x.kid.co), -ECANCELED);
		assert_int_equal(co_context_stop(&c2, CO_STOP_DRAIN), 0);
		assert_int_equal(co_context_join(&c2), 0);
		assert_int_equal(co_context_destroy(&c1), 0);
		assert_int_equal(co_context_destroy(&c2), 0);
	}
	assert_int_equal(co_event_destroy(&elsewhere_ev), 0);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_cancel_stop_ends_every_wait),
	cmocka_unit_test(test_cancel_stop_from_inside),
	cmocka_unit_test(test_timed_drain_becomes_cancel),
	cmocka_unit_test(test_cancel_stop_bounded),
	cmocka_unit_test(test_cancel_stop_unstarted),
	cmocka_unit_test(test_cancel_stop_past_grace_ends_children),
	cmocka_unit_test(test_drain_ends_armed_acceptor),
	cmocka_unit_test(test_drain_ends_acceptor_after_last_frame),
	cmocka_unit_test(test_cross_thread_cancel),
	cmocka_unit_test(test_cross_thread_cancel_races_end),
	cmocka_unit_test(test_cross_thread_cancel_at_finish),
	cmocka_unit_test(test_sched_run_waiters_and_stops),
	cmocka_unit_test(test_cancel_while_not_running),
	cmocka_unit_test(test_drain_rises_to_cancel),
	cmocka_unit_test(test_timed_stop_saturates),
	cmocka_unit_test(test_grace_saturates),
	cmocka_unit_test(test_blocked_send_ends_in_grace),
	cmocka_unit_test(test_blocked_recv_ends_in_grace),
	cmocka_unit_test(test_blocked_splice_ends_in_grace),
	cmocka_unit_test(test_pool_job_ends_in_grace),
	cmocka_unit_test(test_hard_linked_op_ends_in_grace),
	cmocka_unit_test(test_child_elsewhere_ends_in_grace),
};

CO_TEST_MAIN(tests, 1)
