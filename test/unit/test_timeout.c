/* SPDX-License-Identifier: MIT */
/*
 * One time limit for any await (lib/timeout/timeout.c, coring/timeout.h): a row
 * per awaiter kind the library makes (a new kind without a row fails
 * test_every_kind_has_a_row), each awaited under co_timeout on something
 * that never completes (-ETIME) and on something that completes first
 * (its own value, and the timer removed: a timer left behind would keep
 * the engine running for an hour, and the meson timeout would say so);
 * a child coroutine under a limit; a deadline shared by several awaits;
 * nested limits; what cannot be limited (-EINVAL, never a silent
 * no-limit); co_shield for cleanup after a cancel.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <cmocka.h>

#include <coring/coring.h>
#include "common/awaiter.h"
#include "common/fault.h"
#include "helpers.h"
#include "waiter/waiter_internal.h"

#define NEVER (3600 * CO_S)
#define SHORT (2 * CO_MS)

/* ---- a user's awaiter: a gate that opens only when cancelled ------------------- */

struct gate {
	co_awaiter aw;
	co_frame *f;
	int res, open;            /* open: completes at once with 0 */
};

static int gate_suspend(co_awaiter *a, co_frame *f)
{
	struct gate *g = (struct gate *)a;

	if (g->open)
		return 0;
	g->f = f;
	return 1;
}

static int gate_resume(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((struct gate *)a)->res;
}

static int gate_cancel(co_awaiter *a, co_frame *f)
{
	struct gate *g = (struct gate *)a;

	if (g->f) { /* idempotent: a second cancel finds it gone */
		g->f = NULL;
		g->res = -ECANCELED;
		co_wake(f);
	}
	return 0;
}

static const co_awaiter_ops gate_ops = { NULL, gate_suspend, gate_resume, gate_cancel, 0,
					  "gate" };
static const co_awaiter_ops bare_ops = { NULL, gate_suspend, gate_resume, NULL, 0, "gate" };

static co_awaiter *gate(struct gate *g)
{
	g->aw.ops = &gate_ops;
	g->f = NULL;
	g->res = 0;
	g->open = 0;
	return &g->aw;
}

/* ---- a child that waits until cancelled, then says how it ended ---------------- */

struct sleeper {
	co_frame co;
	co_io io;
	int got, cancelled_seen;
};

static int sleeper_fn(co_frame *f)
{
	struct sleeper *s = (struct sleeper *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep(&s->io, NEVER));
	s->got = co_result(f);
	s->cancelled_seen = co_cancelled(f);
	CO_AWAIT(f, co_sleep(&s->io, NEVER)); /* a cancelled chain: ends at once */
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void sleeper_init(struct sleeper *s)
{
	memset(s, 0, sizeof *s);
	co_init(&s->co, sleeper_fn);
}

/* A child that finishes at once with status 7. */
static int quick_fn(co_frame *f)
{
	CO_BEGIN(f);
	CO_RETURN(f, 7);
	CO_END(f);
}

/* ---- the table: one row per awaiter kind ------------------------------------- */

struct kind_task {
	co_frame co;
	int kind, fast;           /* fast: the awaited thing completes first */
	co_limit lim, lim2;
	co_io io;
	co_waiter w;
	co_event ev;
	co_mutex m;
	co_chan ch;
	int item;
	co_when when;
	co_frame *kids[1];
	struct sleeper kid;
	co_frame quick;
	struct gate g;
	int res, after;           /* after: an await once the limited one ended */
	int fds[2];
	char buf[8];
	co_turn turn;
	co_bufring ring;          /* CO__AW_STREAM: a stream on a socket pair */
	co_stream st;
	int sv[2], skip;
};

/* The awaiter of row t->kind under a limit (fast: one that completes at
 * once or first). */
static co_awaiter *limited(struct kind_task *t)
{
	uint64_t ns = t->fast ? NEVER : SHORT;

	switch (t->kind) {
	case CO__AW_USER:
		gate(&t->g);
		t->g.open = t->fast;
		return co_timeout(&t->lim, &t->g.aw, ns);
	case CO__AW_IO:
		if (t->fast)
			assert_int_equal(write(t->fds[1], "x", 1), 1);
		return co_timeout(&t->lim, co_read(&t->io, t->fds[0], t->buf, 1, 0), ns);
	case CO__AW_WAIT:
		if (t->fast)
			co_event_set(&t->ev);
		return co_timeout(&t->lim, co_event_wait(&t->w, &t->ev), ns);
	case CO__AW_WHEN:
		if (t->fast)
			co_init(&t->quick, quick_fn);
		else
			sleeper_init(&t->kid);
		t->kids[0] = t->fast ? &t->quick : &t->kid.co;
		return co_timeout(&t->lim, co_when_all(&t->when, t->kids, 1), ns);
	case CO__AW_LIMIT: /* a limit around a limit: the shorter one wins */
		if (t->fast)
			return co_timeout(&t->lim2, co_timeout(&t->lim, co_sleep(&t->io, CO_MS), NEVER),
					  NEVER);
		return co_timeout(&t->lim2, co_timeout(&t->lim, gate(&t->g), NEVER), ns);
	case CO__AW_FAILED: /* a prep with a NULL object: its own -EINVAL */
		return co_timeout(&t->lim, co_event_wait(&t->w, NULL), ns);
	case CO__AW_STREAM: /* a stream's recv: the byte, once the multishot is in */
		if (t->fast)
			assert_int_equal(write(t->sv[1], "x", 1), 1);
		return co_timeout(&t->lim, co_stream_recv(&t->st), ns);
	case CO__AW_TURN: /* the next turn, or turns without end */
		return co_timeout(&t->lim, co_after_turns(&t->turn, t->fast ? 1 : UINT_MAX), ns);
	default:
		return NULL;
	}
}

static int kind_fn(co_frame *f)
{
	struct kind_task *t = (struct kind_task *)f;
	CO_BEGIN(f);
	if (t->kind == CO__AW_STREAM) {
		t->res = co_bufring_init(&t->ring, co_engine_current(), 4, 64);
		if (t->res == -EINVAL) { /* a kernel without buffer rings */
			t->skip = 1;
			CO_RETURN(f, 0);
		}
		assert_int_equal(t->res, 0);
		assert_int_equal(co_stream_open(&t->st, &t->ring, t->sv[0]), 0);
	}
	CO_AWAIT(f, limited(t));
	t->res = co_result(f);
	/* the limit is over: the chain is not cancelled, awaits work */
	CO_AWAIT(f, co_nop(&t->io));
	t->after = co_result(f) == 0 && !co_cancelled(f) ? 1 : -1;
	if (t->kind == CO__AW_STREAM) {
		CO_AWAIT(f, co_stream_close(&t->st));
		assert_int_equal(co_result(f), 0);
		assert_int_equal(co_bufring_destroy(&t->ring), 0);
	}
	CO_END(f);
}

struct row {
	const char *name;
	int slow, fast;           /* the awaits' values: limit first, thing first */
};

static const struct row rows[CO__AW_KINDS] = {
	[CO__AW_USER] = { "a user's awaiter with a cancel op", -ETIME, 0 },
	[CO__AW_IO] = { "I/O (linked timeout)", -ETIME, 1 },
	[CO__AW_WAIT] = { "a sync wait", -ETIME, 0 },
	[CO__AW_TRANSFER] = { "co_transfer: -EINVAL, see test_cannot_be_limited", 0, 0 },
	[CO__AW_WHEN] = { "co_when_all of a child", -ETIME, 0 },
	[CO__AW_LIMIT] = { "a limit around a limit", -ETIME, 0 },
	[CO__AW_FAILED] = { "a failed prep keeps its error", -EINVAL, -EINVAL },
	[CO__AW_STREAM] = { "a stream's recv", -ETIME, 1 },
	[CO__AW_TURN] = { "turns of the loop", -ETIME, 0 },
};

static void run_kind(int kind, int fast)
{
	struct kind_task t;

	memset(&t, 0, sizeof t);
	t.kind = kind;
	t.fast = fast;
	assert_int_equal(pipe(t.fds), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, t.sv), 0);
	co_event_init(&t.ev, 0);
	co_init(&t.co, kind_fn);
	co_test_run1(&t.co);
	close(t.sv[0]);
	close(t.sv[1]);
	if (t.skip) {
		print_message("%-40s skipped: no buffer rings here\n", rows[kind].name);
		close(t.fds[0]);
		close(t.fds[1]);
		return;
	}
	print_message("%-40s %s: %d\n", rows[kind].name, fast ? "fast" : "slow", t.res);
	assert_int_equal(t.res, fast ? rows[kind].fast : rows[kind].slow);
	assert_int_equal(t.after, 1);
	if (kind == CO__AW_WHEN && !fast) { /* the child was cancelled and unwound */
		assert_true(co_done(&t.kid.co));
		assert_int_equal(t.kid.got, -ECANCELED);
	}
	close(t.fds[0]);
	close(t.fds[1]);
}

static void test_every_kind_has_a_row(void **state)
{
	(void)state;
	for (int k = 0; k < CO__AW_KINDS; k++)
		assert_non_null(rows[k].name);
}

static void test_each_kind_limit_first(void **state)
{
	(void)state;
	for (int k = 0; k < CO__AW_KINDS; k++)
		if (k != CO__AW_TRANSFER)
			run_kind(k, 0);
}

static void test_each_kind_completes_first(void **state)
{
	(void)state;
	for (int k = 0; k < CO__AW_KINDS; k++)
		if (k != CO__AW_TRANSFER)
			run_kind(k, 1);
}

/* ---- more sync waits and I/O paths ---------------------------------------------- */

struct more {
	co_frame co;
	co_limit lim;
	co_io io;
	co_waiter w;
	co_mutex m;
	co_chan ch;
	int item, fds[2];
	char buf[4];
	int lock, recv, send, sleep, late, deadline_sleep, wait_for_io;
};

static int more_fn(co_frame *f)
{
	struct more *t = (struct more *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&t->w, &t->m)); /* held: the next lock waits */
	CO_AWAIT(f, co_timeout(&t->lim, co_mutex_lock(&t->w, &t->m), SHORT));
	t->lock = co_result(f);
	co_mutex_unlock(&t->m);
	CO_AWAIT(f, co_timeout(&t->lim, co_chan_recv(&t->w, &t->ch, &t->item), SHORT));
	t->recv = co_result(f);
	t->item = 1;
	CO_AWAIT(f, co_chan_send(&t->w, &t->ch, &t->item)); /* capacity 1: now full */
	CO_AWAIT(f, co_timeout(&t->lim, co_chan_send(&t->w, &t->ch, &t->item), SHORT));
	t->send = co_result(f);
	/* a sleep cannot take a linked timeout: the timer path */
	CO_AWAIT(f, co_timeout(&t->lim, co_sleep(&t->io, NEVER), SHORT));
	t->sleep = co_result(f);
	/* an SQE already submitted (a yield between prep and await) */
	co_read(&t->io, t->fds[0], t->buf, 1, 0);
	CO_YIELD(f);
	CO_AWAIT(f, co_timeout(&t->lim, &t->io.aw, SHORT));
	t->late = co_result(f);
	/* the I/O-only form on a sleep: -EINVAL, and the sleep is cut short */
	CO_AWAIT(f, co_deadline(co_sleep(&t->io, NEVER), SHORT));
	t->deadline_sleep = co_result(f);
	CO_END(f);
}

static void test_sync_waits_and_io_paths(void **state)
{
	struct more t;

	(void)state;
	memset(&t, 0, sizeof t);
	assert_int_equal(pipe(t.fds), 0);
	co_mutex_init(&t.m);
	assert_int_equal(co_chan_init(&t.ch, sizeof(int), 1, NULL), 0);
	co_init(&t.co, more_fn);
	co_test_run1(&t.co);
	assert_int_equal(t.lock, -ETIME);
	assert_int_equal(t.recv, -ETIME);
	assert_int_equal(t.send, -ETIME);
	assert_int_equal(t.sleep, -ETIME);
	assert_int_equal(t.late, -ETIME);
	assert_int_equal(t.deadline_sleep, -EINVAL);
	co_chan_destroy(&t.ch);
	close(t.fds[0]);
	close(t.fds[1]);
}

/* ---- a child coroutine, a shared deadline, nesting --------------------------- */

struct parent {
	co_frame co;
	co_limit lim, lim2;
	struct sleeper kid, kid2;
	co_frame quick;
	co_io io;
	co_waiter w;
	co_event ev;
	uint64_t end;
	int child, child_quick, nop, shared, inner, outer, cancelled_after;
};

/* A child that awaits a limited child (inner limit NEVER) */
struct middle {
	co_frame co;
	co_limit lim;
	struct sleeper *kid;
};

static int task_fn(co_frame *f)
{
	struct parent *p = (struct parent *)f;
	CO_BEGIN(f);
	sleeper_init(&p->kid);
	CO_AWAIT(f, co_timeout(&p->lim, &p->kid.co, SHORT)); /* C11: a child */
	p->child = co_result(f);
	p->cancelled_after = co_cancelled(f);
	co_init(&p->quick, quick_fn);
	CO_AWAIT(f, co_timeout_at(&p->lim, &p->quick, co_now_ns() + NEVER));
	p->child_quick = co_result(f);
	/* one deadline for two awaits: the first completes, the second runs out */
	p->end = co_now_ns() + SHORT;
	CO_AWAIT(f, co_timeout_at(&p->lim, co_nop(&p->io), p->end));
	p->nop = co_result(f);
	CO_AWAIT(f, co_timeout_at(&p->lim, co_event_wait(&p->w, &p->ev), p->end));
	p->shared = co_result(f);
	/* nested: an outer limit on a child that awaits under a longer limit */
	sleeper_init(&p->kid2);
	CO_AWAIT_TASK(f, co_timeout_task(&p->lim2, co_timeout_task(&p->lim, &p->kid2.co, NEVER),
					 SHORT));
	p->outer = co_result(f);
	CO_END(f);
}

static void test_child_shared_deadline_nesting(void **state)
{
	struct parent p;

	(void)state;
	memset(&p, 0, sizeof p);
	co_event_init(&p.ev, 0);
	co_init(&p.co, task_fn);
	co_test_run1(&p.co);
	assert_int_equal(p.child, -ETIME);
	assert_true(co_done(&p.kid.co));
	assert_int_equal(p.kid.got, -ECANCELED);  /* the child saw the cancel ... */
	assert_true(p.kid.cancelled_seen);
	assert_int_equal(co_status(&p.kid.co), -ECANCELED); /* ... and its next await too */
	assert_false(p.cancelled_after);          /* the parent is not cancelled */
	assert_int_equal(p.child_quick, 7);
	assert_int_equal(p.nop, 0);
	assert_int_equal(p.shared, -ETIME);
	assert_int_equal(p.outer, -ETIME);
	assert_int_equal(p.kid2.got, -ECANCELED);
}

/* ---- what cannot be limited ------------------------------------------------- */

/* Await aw (or, aw NULL, the child) in a frame resumed by hand: the value
 * of an await that ends at once. */
struct once {
	co_frame co;
	co_awaiter *aw;
	co_frame *child;
	int res;
};

static int once_fn(co_frame *f)
{
	struct once *o = (struct once *)f;
	CO_BEGIN(f);
	if (o->aw)
		CO_AWAIT(f, o->aw);
	else
		CO_AWAIT_TASK(f, o->child);
	o->res = co_result(f);
	CO_END(f);
}

static int value_at_once(co_awaiter *aw, co_frame *child)
{
	struct once o;

	memset(&o, 0, sizeof o);
	o.aw = aw;
	o.child = child;
	o.res = 1;
	co_init(&o.co, once_fn);
	assert_int_equal(co_resume(&o.co), CO_DONE);
	return o.res;
}

/* The same, in a frame an engine runs. */
static int value_on_engine(co_awaiter *aw, co_frame *child)
{
	struct once o;

	memset(&o, 0, sizeof o);
	o.aw = aw;
	o.child = child;
	o.res = 1;
	co_init(&o.co, once_fn);
	co_test_run1(&o.co);
	return o.res;
}

/* A prep that failed (its kind says so): it ends at once with -ENOSPC. */
static int failed_ready(co_awaiter *a, co_frame *f)
{
	(void)a;
	(void)f;
	return 1;
}

static int failed_resume(co_awaiter *a, co_frame *f)
{
	(void)a;
	(void)f;
	return -ENOSPC;
}

static const co_awaiter_ops failed_ops = { failed_ready, failed_ready, failed_resume, NULL,
					    CO__AW_FAILED, NULL };

/* What cannot be limited: given arguments that are not NULL, the await
 * ends with -EINVAL, in a debug build too (this program's: a NULL awaiter
 * would trap here), and nothing is started. NULL arguments give NULL. */
static void test_cannot_be_limited(void **state)
{
	co_limit l, l2, fresh;
	struct gate g;
	co_transfer tr;
	co_frame kid;
	co_waiter w;
	co_event ev;
	co_io io;
	co_awaiter zero = { NULL }, failed = { &failed_ops };
	struct sleeper sl;

	(void)state;
	memset(&fresh, 0, sizeof fresh);
	assert_int_equal(co_event_init(&ev, 0), 0);
	g.aw.ops = &bare_ops; /* no cancel op */
	g.f = NULL;
	assert_int_equal(value_at_once(co_timeout(&l, &g.aw, CO_S), NULL), -EINVAL);
	assert_null(g.f); /* never entered */
	assert_int_equal(value_at_once(co_timeout(&l, co_transfer_to(&tr, NULL), CO_S), NULL),
			 -EINVAL);
	assert_int_equal(value_at_once(co_timeout(&l, &zero, CO_S), NULL), -EINVAL);
	/* a limit of itself, the limit fresh (zeroed) or used before */
	assert_int_equal(value_at_once(co_timeout(&fresh, &fresh.aw, CO_S), NULL), -EINVAL);
	assert_non_null(co_timeout(&l, gate(&g), CO_S));
	assert_int_equal(value_at_once(co_timeout(&l, &l.aw, CO_S), NULL), -EINVAL);
	/* a loop of limits: l around l2 around l. Refused when the link that
	 * closes it is asked for; made, the await went round it for good
	 * (the alarm ends that) */
	alarm(10);
	assert_non_null(co_timeout(&l, gate(&g), CO_S));
	assert_ptr_equal(co_timeout(&l2, &l.aw, CO_S), &l2.aw);
	assert_int_equal(value_at_once(co_timeout(&l, &l2.aw, CO_S), NULL), -EINVAL);
	assert_int_equal(value_at_once(co_timeout(&l2, &l2.aw, CO_S), NULL), -EINVAL);
	alarm(0);
	assert_int_equal(value_at_once(NULL, co_timeout_task(&fresh, &fresh.co, CO_S)), -EINVAL);
	sleeper_init(&sl); /* one limit for two nested awaits: the inner never starts */
	assert_int_equal(value_at_once(NULL, co_timeout_task(&l, co_timeout_task(&l, &sl.co, NEVER),
							     CO_S)), -EINVAL);
	assert_false(co_done(&sl.co));
	assert_int_equal(sl.co.label, 0);
	/* a child without a body (co_init given NULL, or zeroed), off an
	 * engine and on one: refused as the limit is made, no timer armed,
	 * and no trap in this debug build. Without the body check in
	 * co_timeout_task_at, off an engine the value is -ENXIO, and on one
	 * the limit's own await of the child traps (CO_AWAIT: child frame has
	 * no body). */
	co_init(&kid, NULL);
	assert_int_equal(value_at_once(NULL, co_timeout_task(&l, &kid, CO_S)), -EINVAL);
	memset(&kid, 0, sizeof kid);
	assert_int_equal(value_on_engine(NULL, co_timeout_task(&l, &kid, CO_S)), -EINVAL);
	assert_int_equal(kid.label, 0);
	assert_false(co_done(&kid));
	/* the kind-specific forms: the wrong kind is an error, not a pass */
	assert_int_equal(value_at_once(co_deadline(gate(&g), CO_S), NULL), -EINVAL);
	assert_int_equal(value_at_once(co_deadline(co_event_wait(&w, &ev), CO_S), NULL), -EINVAL);
	assert_int_equal(value_at_once(co_deadline(&zero, CO_S), NULL), -EINVAL);
	assert_int_equal(value_at_once(co_fixed_file(gate(&g)), NULL), -EINVAL);
	assert_int_equal(value_at_once(co_fixed_file(&zero), NULL), -EINVAL);
	assert_int_equal(value_at_once(co_wait_for(gate(&g), CO_S), NULL), -EINVAL);
	assert_int_equal(value_at_once(co_wait_for(co_nop(&io), CO_S), NULL), -EINVAL);
	assert_int_equal(value_at_once(co_wait_for(&zero, CO_S), NULL), -EINVAL);
	/* a failed prep keeps its own error through each of them */
	assert_int_equal(value_at_once(co_deadline(&failed, CO_S), NULL), -ENOSPC);
	assert_int_equal(value_at_once(co_fixed_file(&failed), NULL), -ENOSPC);
	assert_int_equal(value_at_once(co_wait_for(&failed, CO_S), NULL), -ENOSPC);
	assert_int_equal(value_at_once(co_timeout(&l, &failed, CO_S), NULL), -ENOSPC);
	assert_int_equal(value_at_once(co_deadline(co_nop(&io), CO_S), NULL), -ENXIO);
	assert_int_equal(value_at_once(co_timeout(&l, co_nop(&io), CO_S), NULL), -ENXIO);
	/* NULL arguments: NULL (awaiting it: -EINVAL, a debug build traps) */
	assert_null(co_timeout(NULL, gate(&g), CO_S));
	assert_null(co_timeout(&l, NULL, CO_S));
	assert_null(co_timeout_task(NULL, &kid, CO_S));
	assert_null(co_timeout_task(&l, NULL, CO_S));
	assert_null(co_deadline(NULL, CO_S));
	assert_null(co_fixed_file(NULL));
	assert_null(co_wait_for(NULL, CO_S));
	assert_int_equal(co_event_destroy(&ev), 0);
}

/* ---- times near UINT64_MAX ------------------------------------------------------- */

/* A frame that awaits under limits near UINT64_MAX, and a partner that
 * ends each of those awaits by completing what it waits for, 2 ms after
 * the await began: a limit that took a wrapped sum for a time already
 * past would have ended it with -ETIME by then. */
enum huge_act { H_NONE, H_BYTE, H_GATE, H_EVENT };

struct huge {
	co_frame co, partner;
	co_limit lim, lim2;
	co_io io, pio;
	co_waiter w;
	co_event ev;
	struct gate g;
	struct gated { co_frame co; struct gate *g; } kid;
	int pipe[2];
	char c;
	int k, want, end, r[12];
};

static int gated_fn(co_frame *f)
{
	struct gated *c = (struct gated *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, gate(c->g));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static int partner_fn(co_frame *f)
{
	struct huge *h = (struct huge *)(void *)((char *)f - offsetof(struct huge, partner));
	CO_BEGIN(f);
	for (;;) {
		while (h->want == H_NONE && !h->end)
			CO_YIELD(f);
		if (h->end)
			break;
		CO_AWAIT(f, co_sleep(&h->pio, SHORT)); /* the await's SQEs went in */
		if (h->want == H_BYTE) {
			assert_int_equal(write(h->pipe[1], "x", 1), 1);
		} else if (h->want == H_EVENT) {
			assert_int_equal(co_event_set(&h->ev), 0);
		} else {
			co_frame *w = h->g.f;
			assert_non_null(w);
			h->g.f = NULL;
			h->g.res = 5;
			co_wake(w);
		}
		h->want = H_NONE;
		CO_YIELD(f);
	}
	CO_END(f);
}

static int huge_fn(co_frame *f)
{
	struct huge *h = (struct huge *)f;
	CO_BEGIN(f);
	/* sleeps: each outlives a 2 ms limit around it */
	CO_AWAIT(f, co_timeout(&h->lim2, co_sleep(&h->io, co_test_huge_ns(h->k)), SHORT));
	h->r[0] = co_result(f);
	CO_AWAIT(f, co_timeout(&h->lim2, co_sleep_until(&h->io, UINT64_MAX - (uint64_t)h->k), SHORT));
	h->r[1] = co_result(f);
	/* I/O: a deadline, a limit linked to the operation */
	h->want = H_BYTE;
	CO_AWAIT(f, co_deadline(co_read(&h->io, h->pipe[0], &h->c, 1, 0), co_test_huge_ns(h->k)));
	h->r[2] = co_result(f);
	h->want = H_BYTE;
	CO_AWAIT(f, co_timeout(&h->lim, co_read(&h->io, h->pipe[0], &h->c, 1, 0), co_test_huge_ns(h->k)));
	h->r[3] = co_result(f);
	/* the timer of a limit: a user's awaiter, a child, an absolute time */
	h->want = H_GATE;
	CO_AWAIT(f, co_timeout(&h->lim, gate(&h->g), co_test_huge_ns(h->k)));
	h->r[4] = co_result(f);
	h->want = H_GATE;
	h->kid.g = &h->g;
	co_init(&h->kid.co, gated_fn);
	CO_AWAIT_TASK(f, co_timeout_task(&h->lim, &h->kid.co, co_test_huge_ns(h->k)));
	h->r[5] = co_result(f);
	h->want = H_GATE;
	CO_AWAIT(f, co_timeout_at(&h->lim, gate(&h->g), UINT64_MAX - (uint64_t)h->k));
	h->r[6] = co_result(f);
	/* a sync wait's own timer: co_wait_for, co_timeout */
	h->want = H_EVENT;
	CO_AWAIT(f, co_wait_for(co_event_wait(&h->w, &h->ev), co_test_huge_ns(h->k)));
	h->r[7] = co_result(f);
	co_event_reset(&h->ev);
	h->want = H_EVENT;
	CO_AWAIT(f, co_timeout(&h->lim, co_event_wait(&h->w, &h->ev), co_test_huge_ns(h->k)));
	h->r[8] = co_result(f);
	co_event_reset(&h->ev);
	/* absolute times near UINT64_MAX: the I/O's linked timeout, a sync
	 * wait's own timer */
	h->want = H_BYTE;
	CO_AWAIT(f, co_timeout_at(&h->lim, co_read(&h->io, h->pipe[0], &h->c, 1, 0),
				  UINT64_MAX - (uint64_t)h->k));
	h->r[9] = co_result(f);
	h->want = H_EVENT;
	CO_AWAIT(f, co_timeout_at(&h->lim, co_event_wait(&h->w, &h->ev), UINT64_MAX - (uint64_t)h->k));
	h->r[10] = co_result(f);
	h->end = 1;
	CO_END(f);
}

static void test_huge_times_never_fire(void **state)
{
	static const int expect[11] = { -ETIME, -ETIME, 1, 1, 5, 5, 5, 0, 0, 1, 0 };
	(void)state;
	for (int k = 0; k < CO_TEST_HUGE_KINDS; k++) {
		struct huge h;
		co_frame *frames[2] = { &h.co, &h.partner };
		memset(&h, 0, sizeof h);
		h.k = k;
		assert_int_equal(pipe(h.pipe), 0);
		assert_int_equal(co_event_init(&h.ev, 0), 0);
		co_init(&h.co, huge_fn);
		co_init(&h.partner, partner_fn);
		co_test_run_frames(frames, 2);
		for (int i = 0; i < 11; i++)
			if (h.r[i] != expect[i])
				fail_msg("ns %d, await %d: %d", k, i, h.r[i]);
		assert_int_equal(co_event_destroy(&h.ev), 0);
		close(h.pipe[0]);
		close(h.pipe[1]);
	}
}

/* ---- times already past, and zero: tries ----------------------------------------- */

/* An absolute time already past (0, 1) ends the await with -ETIME, and a
 * zero duration is a try: the await's own value when it completes at once,
 * -ETIME when it would wait. A cond wait that cannot start returns with its
 * mutex still held. Every wait here would last an hour or for good without
 * its limit. */
struct past {
	co_frame co;
	co_limit lim;
	co_waiter w;
	co_io io;
	co_event never, set;
	co_mutex m;
	co_cond cv;
	co_sem sem;
	int r[12];
};

static int past_fn(co_frame *f)
{
	struct past *p = (struct past *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_timeout_at(&p->lim, co_event_wait(&p->w, &p->never), 0));
	p->r[0] = co_result(f);
	CO_AWAIT(f, co_timeout_at(&p->lim, co_event_wait(&p->w, &p->never), 1));
	p->r[1] = co_result(f);
	CO_AWAIT(f, co_timeout_at(&p->lim, co_sleep(&p->io, NEVER), 0));
	p->r[2] = co_result(f);
	CO_AWAIT(f, co_wait_for(co_event_wait(&p->w, &p->set), 0));
	p->r[3] = co_result(f);
	CO_AWAIT(f, co_wait_for(co_event_wait(&p->w, &p->never), 0));
	p->r[4] = co_result(f);
	CO_AWAIT(f, co_mutex_lock(&p->w, &p->m));
	CO_AWAIT(f, co_wait_for(co_cond_wait(&p->w, &p->cv, &p->m), 0));
	p->r[5] = co_result(f);
	p->r[6] = co_mutex_trylock(&p->m); /* ours still: -EBUSY */
	p->r[7] = co_mutex_unlock(&p->m);
	CO_AWAIT(f, co_timeout(&p->lim, co_sem_acquire(&p->w, &p->sem), 0));
	p->r[8] = co_result(f); /* the one permit */
	CO_AWAIT(f, co_timeout(&p->lim, co_sem_acquire(&p->w, &p->sem), 0));
	p->r[9] = co_result(f);
	CO_AWAIT(f, co_timeout(&p->lim, co_event_wait(&p->w, &p->set), 0));
	p->r[10] = co_result(f);
	CO_AWAIT(f, co_timeout(&p->lim, co_event_wait(&p->w, &p->never), 0));
	p->r[11] = co_result(f);
	CO_END(f);
}

static void test_past_and_zero_limits(void **state)
{
	static const int expect[12] = { -ETIME, -ETIME, -ETIME, 0, -ETIME, -ETIME,
					-EBUSY, 0,      0,      -ETIME, 0, -ETIME };
	struct past p;
	co_frame *frames[1] = { &p.co };

	(void)state;
	memset(&p, 0, sizeof p);
	assert_int_equal(co_event_init(&p.never, 0), 0);
	assert_int_equal(co_event_init(&p.set, 1), 0);
	assert_int_equal(co_mutex_init(&p.m), 0);
	assert_int_equal(co_cond_init(&p.cv), 0);
	assert_int_equal(co_sem_init(&p.sem, 1), 0);
	co_init(&p.co, past_fn);
	co_test_run_frames(frames, 1);
	for (int i = 0; i < 12; i++)
		if (p.r[i] != expect[i])
			fail_msg("await %d: %d, not %d", i, p.r[i], expect[i]);
	assert_int_equal(co_sem_try_acquire(&p.sem), -EAGAIN);
	assert_int_equal(co_event_destroy(&p.never), 0);
	assert_int_equal(co_event_destroy(&p.set), 0);
	assert_int_equal(co_mutex_destroy(&p.m), 0);
	assert_int_equal(co_cond_destroy(&p.cv), 0);
	assert_int_equal(co_sem_destroy(&p.sem), 0);
}

/* Not on an engine (resumed by hand): -ENXIO, the await not started. */
struct by_hand {
	co_frame co;
	co_limit lim;
	struct gate g;
	co_when when;
	co_frame kid, done_kid;
	co_frame *kids[1];
	int res, when_res, done_res;
};

static int by_hand_fn(co_frame *f)
{
	struct by_hand *b = (struct by_hand *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_timeout(&b->lim, gate(&b->g), CO_S));
	b->res = co_result(f);
	b->kids[0] = &b->kid;
	CO_AWAIT(f, co_timeout(&b->lim, co_when_all(&b->when, b->kids, 1), CO_S));
	b->when_res = co_result(f);
	CO_AWAIT_TASK(f, co_timeout_task(&b->lim, &b->done_kid, CO_S));
	b->done_res = co_result(f);
	CO_END(f);
}

/* And a when under a limit (-ENXIO, its child never started); a child that
 * has finished already is not limited: its status is the value. */
static void test_not_on_an_engine(void **state)
{
	struct by_hand b;

	(void)state;
	memset(&b, 0, sizeof b);
	co_init(&b.co, by_hand_fn);
	co_init(&b.kid, quick_fn);
	co_init(&b.done_kid, quick_fn);
	assert_int_equal(co_resume(&b.done_kid), CO_DONE);
	assert_int_equal(co_resume(&b.co), CO_DONE);
	assert_int_equal(b.res, -ENXIO);
	assert_null(b.g.f); /* the gate was never entered */
	assert_int_equal(b.when_res, -ENXIO);
	assert_int_equal(b.kid.label, 0); /* never started */
	assert_int_equal(b.done_res, 7);
}

/* ---- cleanup after a cancel: co_shield ---------------------------------------- */

struct victim {
	co_frame co;
	co_limit lim;
	co_io io;
	co_waiter w;
	co_mutex *m;
	co_event never;
	int first, parked, lock, limited, sleep, after_unshield;
};

static int victim_fn(co_frame *f)
{
	struct victim *v = (struct victim *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_event_wait(&v->w, &v->never));
	v->first = co_result(f); /* -ECANCELED */
	co_shield(f);
	co_shield(f); /* shields do not nest: the one co_unshield below ends it */
	CO_AWAIT(f, co_sleep(&v->io, CO_MS)); /* I/O under the shield: runs */
	v->sleep = co_result(f);
	v->parked = 1;
	CO_AWAIT(f, co_mutex_lock(&v->w, v->m)); /* parked; cancelled again meanwhile */
	v->lock = co_result(f);
	if (v->lock == 0)
		co_mutex_unlock(v->m);
	/* a time limit still applies under a shield */
	CO_AWAIT(f, co_timeout(&v->lim, co_event_wait(&v->w, &v->never), SHORT));
	v->limited = co_result(f);
	co_unshield(f);
	/* bounded: were the shield still up, the limit would end it (-ETIME) */
	CO_AWAIT(f, co_timeout(&v->lim, co_sleep(&v->io, NEVER), 5 * CO_S));
	v->after_unshield = co_result(f);
	CO_END(f);
}

struct killer {
	co_frame co;
	co_io io;
	co_waiter w;
	struct victim *v;
	co_mutex *m;
	int cancel1, cancel2;
};

static int killer_fn(co_frame *f)
{
	struct killer *k = (struct killer *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&k->w, k->m));
	CO_YIELD(f); /* the victim parks on its event */
	k->cancel1 = co_cancel(&k->v->co);
	while (!k->v->parked)
		CO_YIELD(f);
	CO_YIELD(f); /* its lock attempt parks it */
	k->cancel2 = co_cancel(&k->v->co); /* shielded: recorded only */
	CO_YIELD(f);
	co_mutex_unlock(k->m); /* hands the lock to the victim */
	CO_END(f);
}

static void test_shield_lets_cleanup_run(void **state)
{
	struct victim v;
	struct killer k;
	co_mutex m;
	co_frame *frames[2] = { &k.co, &v.co };

	(void)state;
	memset(&v, 0, sizeof v);
	memset(&k, 0, sizeof k);
	co_mutex_init(&m);
	co_event_init(&v.never, 0);
	v.m = k.m = &m;
	k.v = &v;
	co_init(&v.co, victim_fn);
	co_init(&k.co, killer_fn);
	co_test_run_frames(frames, 2);
	assert_int_equal(k.cancel1, 0);
	assert_int_equal(k.cancel2, 0);
	assert_int_equal(v.first, -ECANCELED);
	assert_int_equal(v.sleep, 0);
	assert_int_equal(v.lock, 0);
	assert_int_equal(v.limited, -ETIME);
	assert_int_equal(v.after_unshield, -ECANCELED);
}


/* ---- on a scheduler with stealing: every task accounted for ------------------- */

#define SCHED_TASKS 400

/* A child that yields a few times (it may be stolen meanwhile), then ends,
 * or (slow) sleeps until cancelled. */
struct hop_kid {
	co_frame co;
	co_io io;
	int slow, k;
};

static int hop_kid_fn(co_frame *f)
{
	struct hop_kid *h = (struct hop_kid *)f;
	CO_BEGIN(f);
	for (h->k = 0; h->k < 3; h->k++)
		CO_YIELD(f);
	if (h->slow)
		CO_AWAIT(f, co_sleep(&h->io, NEVER));
	CO_RETURN(f, h->slow ? co_result(f) : 5);
	CO_END(f);
}

struct sched_task {
	co_frame co;
	co_limit lim;
	co_when w;
	co_frame *kids[1];
	struct hop_kid kid;
	co_context *on_suspend, *on_resume;
	int res;
	atomic_int *done;
};

static int sched_task_fn(co_frame *f)
{
	struct sched_task *t = (struct sched_task *)f;
	CO_BEGIN(f);
	t->kids[0] = &t->kid.co;
	co_init(&t->kid.co, hop_kid_fn);
	t->on_suspend = co_context_current();
	CO_AWAIT(f, co_timeout(&t->lim, co_when_all(&t->w, t->kids, 1), t->kid.slow ? SHORT : NEVER));
	t->on_resume = co_context_current();
	t->res = co_result(f);
	atomic_fetch_add(t->done, 1);
	CO_END(f);
}

static void test_pinned_on_a_stealing_scheduler(void **state)
{
	static struct sched_task t[SCHED_TASKS];
	co_sched s;
	co_sched_opts o = { .contexts = 2, .steal = 1 };
	atomic_int done;

	(void)state;
	atomic_init(&done, 0);
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < SCHED_TASKS; i++) {
		memset(&t[i], 0, sizeof t[i]);
		t[i].kid.slow = i % 2;
		t[i].done = &done;
		co_init(&t[i].co, sched_task_fn);
		assert_int_equal(co_sched_spawn(&s, &t[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(atomic_load(&done), SCHED_TASKS);
	for (int i = 0; i < SCHED_TASKS; i++) {
		assert_true(co_done(&t[i].co));
		assert_true(co_done(&t[i].kid.co));
		assert_int_equal(t[i].res, i % 2 ? -ETIME : 0);
		/* pinned: the limited await ends where it began */
		assert_ptr_equal(t[i].on_suspend, t[i].on_resume);
	}
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* A co_transfer inside a limited child: -EBUSY (the frame is pinned). */
struct mover {
	co_frame co;
	co_transfer tr;
	co_context *to;
	int res;
};

static int mover_fn(co_frame *f)
{
	struct mover *m = (struct mover *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_transfer_to(&m->tr, m->to));
	m->res = co_result(f);
	CO_END(f);
}

struct mover_parent {
	co_frame co;
	co_limit lim;
	struct mover m;
	co_transfer tr;
	co_sched *s;
	int res, free_move;
};

static int mover_parent_fn(co_frame *f)
{
	struct mover_parent *p = (struct mover_parent *)f;
	CO_BEGIN(f);
	p->m.to = co_sched_pick(p->s, 0);
	if (p->m.to == co_context_current()) /* the other one */
		p->m.to = co_sched_pick(p->s, 0);
	co_init(&p->m.co, mover_fn);
	CO_AWAIT_TASK(f, co_timeout_task(&p->lim, &p->m.co, NEVER));
	p->res = co_result(f);
	CO_AWAIT(f, co_transfer_to(&p->tr, p->m.to)); /* the limit is over: moves */
	p->free_move = co_result(f);
	CO_END(f);
}

static void test_transfer_inside_a_limit(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2, .dispatch = CO_DISPATCH_ROUND_ROBIN };
	struct mover_parent p;

	(void)state;
	memset(&p, 0, sizeof p);
	p.s = &s;
	assert_int_equal(co_sched_init(&s, &o), 0);
	co_init(&p.co, mover_parent_fn);
	assert_int_equal(co_sched_spawn(&s, &p.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(p.m.res, -EBUSY);
	assert_int_equal(p.res, 0);
	assert_int_equal(p.free_move, 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}


/* The timer record cannot be allocated: -ENOMEM, the awaiter not started. */
struct no_mem {
	co_frame co;
	co_limit lim;
	struct gate g;
	int res;
};

static int no_mem_fn(co_frame *f)
{
	struct no_mem *n = (struct no_mem *)f;
	CO_BEGIN(f);
	co__fault_arm(CO__FAULT_ALLOC, 1, ENOMEM); /* the next allocation: the limit's */
	CO_AWAIT(f, co_timeout(&n->lim, gate(&n->g), NEVER));
	n->res = co_result(f);
	CO_END(f);
}

static void test_timer_allocation_fails(void **state)
{
	struct no_mem n;

	(void)state;
	memset(&n, 0, sizeof n);
	co_init(&n.co, no_mem_fn);
	co_test_run1(&n.co);
	assert_int_equal(n.res, -ENOMEM);
	assert_null(n.g.f);
	co__fault_arm(CO__FAULT_ALLOC, 0, 0);
}

/* ---- a limit that runs out as its await completes --------------------------------- */

/* At the limit's timer (CO__POINT_LIMIT_TIMER, on the engine's thread,
 * before the limit fires) the gate the await waits on opens with 5: the
 * await has completed when the limit fires, as when a completion and the
 * timer come in one batch of CQEs. */
static void open_gate_at_limit(void *arg)
{
	struct gate *g = arg;
	co_frame *f = g->f;

	if (f) {
		g->f = NULL;
		g->res = 5;
		co_wake(f);
	}
}

/* A child that reads a byte: what it read is its effect. */
struct reader_kid {
	co_frame co;
	co_io io;
	int fd;
	char c;
};

static int reader_kid_fn(co_frame *f)
{
	struct reader_kid *k = (struct reader_kid *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_read(&k->io, k->fd, &k->c, 1, 0));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

enum race_form { R_CHILD, R_AWAITER, R_WHEN_ALL, R_WHEN_ANY, R_PIPE };

struct racer {
	co_frame co, holder;
	co_limit lim;
	int form, res;
	struct gate g;
	struct gated kid;
	struct reader_kid rk;
	co_when when;
	co_frame *kids[1];
	uint64_t end;
	int wfd;                  /* R_PIPE: the pipe's other end */
	co_io hio;
};

static int racer_fn(co_frame *f)
{
	struct racer *r = (struct racer *)f;
	CO_BEGIN(f);
	gate(&r->g);
	r->kid.g = &r->g;
	co_init(&r->kid.co, gated_fn);
	r->kids[0] = &r->kid.co;
	if (r->form == R_CHILD)
		CO_AWAIT(f, co_timeout(&r->lim, &r->kid.co, SHORT));
	else if (r->form == R_AWAITER)
		CO_AWAIT(f, co_timeout(&r->lim, &r->g.aw, SHORT));
	else if (r->form == R_WHEN_ALL)
		CO_AWAIT(f, co_timeout(&r->lim, co_when_all(&r->when, r->kids, 1), SHORT));
	else if (r->form == R_WHEN_ANY)
		CO_AWAIT(f, co_timeout(&r->lim, co_when_any(&r->when, r->kids, 1), SHORT));
	else
		CO_AWAIT(f, co_timeout_at(&r->lim, &r->rk.co, r->end));
	r->res = co_result(f);
	CO_END(f);
}

/* R_PIPE: keeps the engine's thread (once the racer's read and timer are
 * in): writes the byte, then waits until the limit's time has passed: the
 * read and the limit's timer complete in one batch. */
static int holder_fn(co_frame *f)
{
	struct racer *r = (struct racer *)(void *)((char *)f - offsetof(struct racer, holder));
	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&r->hio));
	assert_int_equal(write(r->wfd, "x", 1), 1);
	while (co_now_ns() < r->end + CO_MS)
		;
	CO_END(f);
}

/* A child that finished before its await began: its status, whether the
 * limit's timer can be set up or not. */
struct late {
	co_frame co;
	co_limit lim;
	co_frame *kid;
	int res;
};

static int late_fn(co_frame *f)
{
	struct late *l = (struct late *)f;
	CO_BEGIN(f);
	co__fault_arm(CO__FAULT_ALLOC, 1, ENOMEM); /* the limit's timer record */
	CO_AWAIT(f, co_timeout(&l->lim, l->kid, NEVER));
	l->res = co_result(f);
	co__fault_arm(CO__FAULT_ALLOC, 0, 0);
	CO_END(f);
}

/* The rule for a limit that races its await's completion: the await that
 * completed keeps its value, the limit's -ETIME only replaces the
 * -ECANCELED of an await its cancel cut short. For a child, a when and a
 * user's awaiter (the window held open at the limit's timer); for a child
 * whose read and the limit's timer land in one batch (nothing lost: the
 * byte is the value, or it is still in the pipe); for a child that
 * finished in the call (a reader's buffered read), under a timer that
 * cannot be allocated and off an engine. */
static void test_child_result_kept(void **state)
{
	static const char *names[] = { "child", "awaiter", "when_all", "when_any" };
	int kept = 0, timed_out = 0;

	(void)state;
	for (int form = R_CHILD; form <= R_WHEN_ANY; form++) {
		for (int open = 0; open < 2; open++) {
			struct racer r;

			memset(&r, 0, sizeof r);
			r.form = form;
			if (open)
				co__fault_on_point(CO__POINT_LIMIT_TIMER, open_gate_at_limit, &r.g);
			co_init(&r.co, racer_fn);
			co_test_run1(&r.co);
			co__fault_on_point(CO__POINT_LIMIT_TIMER, NULL, NULL);
			print_message("%-9s %s: %d\n", names[form], open ? "completes at the limit" :
				      "cut short", r.res);
			/* completed: its value (when_any: the winner's index) */
			if (open)
				assert_int_equal(r.res, form == R_CHILD || form == R_AWAITER ? 5 : 0);
			else
				assert_int_equal(r.res, -ETIME);
			if (form != R_AWAITER)
				assert_int_equal(co_status(&r.kid.co), open ? 5 : -ECANCELED);
		}
	}
	for (int round = 0; round < 20; round++) {
		struct racer r;
		co_frame *frames[2] = { &r.co, &r.holder };
		int p[2];
		char c;

		memset(&r, 0, sizeof r);
		assert_int_equal(pipe(p), 0);
		r.form = R_PIPE;
		r.rk.fd = p[0];
		r.wfd = p[1];
		co_init(&r.rk.co, reader_kid_fn);
		r.end = co_now_ns() + SHORT;
		co_init(&r.co, racer_fn);
		co_init(&r.holder, holder_fn);
		co_test_run_frames(frames, 2);
		if (r.res == 1) { /* the byte is the value ... */
			kept++;
			assert_int_equal(r.rk.c, 'x');
		} else { /* ... or the read was cut short and the byte is still there */
			timed_out++;
			assert_int_equal(r.res, -ETIME);
			assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
			assert_int_equal(read(p[0], &c, 1), 1);
		}
		close(p[0]);
		close(p[1]);
	}
	print_message("a read and the limit in one batch: %d kept, %d timed out\n", kept, timed_out);
	for (int on_engine = 0; on_engine < 2; on_engine++) {
		struct late l;
		co_frame kid;

		memset(&l, 0, sizeof l);
		co_init(&kid, quick_fn);
		assert_int_equal(co_resume(&kid), CO_DONE); /* finished: status 7 */
		l.kid = &kid;
		co_init(&l.co, late_fn);
		if (on_engine)
			co_test_run1(&l.co);
		else
			assert_int_equal(co_resume(&l.co), CO_DONE); /* no engine: no -ENXIO */
		assert_int_equal(l.res, 7);
	}
}

/* ---- a release racing a limit: exactly one wins, nothing is lost ---------------------- */

/* A mutex, a semaphore, an event and a channel's receive, each awaited
 * under co_wait_for, under co_timeout (both the wait's own timer) and as a
 * child under co_timeout (the limit's timer cancels the wait), the time
 * running out. In one run the window is held open (CO__POINT_WAIT_VISIT:
 * the engine's look, at the timer or the cancel, saw the waiter waiting
 * and has not taken the primitive's lock): a release from another thread
 * comes first, claims the waiter and waits for the look to end. The
 * release wins: the await's value is 0 and the frame has what was
 * released (the mutex, a permit, the item). In the other run nothing is
 * released before the time runs out: -ETIME, and what is released after
 * stays with the primitive. Either way the accounting is exact. */
enum { RL_MUTEX, RL_SEM, RL_EVENT, RL_CHAN, RL_KINDS };
enum { RL_WAIT_FOR, RL_TIMEOUT, RL_CHILD, RL_FORMS };

struct rl {
	co_frame co;
	struct rl_kid {
		co_frame co;
		co_waiter w;
		struct rl *t;
	} kid;
	co_waiter w;
	co_limit lim;
	co_mutex m;
	co_sem sem;
	co_event ev;
	co_chan ch;
	int kind, form, item, res;
	co_waiter *parked;        /* the waiter the window is about */
	pthread_t releaser;
	atomic_int started;       /* the window was held open (once) */
};

/* The release, from any thread. */
static void rl_release(struct rl *t)
{
	int item = 42;

	switch (t->kind) {
	case RL_MUTEX:
		assert_int_equal(co_mutex_unlock(&t->m), 0);
		break;
	case RL_SEM:
		assert_int_equal(co_sem_release(&t->sem, 1), 0);
		break;
	case RL_EVENT:
		assert_int_equal(co_event_set(&t->ev), 0);
		break;
	default:
		assert_int_equal(co_chan_try_send(&t->ch, &item), 0);
		break;
	}
}

static void *rl_releaser(void *arg)
{
	rl_release(arg);
	return NULL;
}

/* At the look (the engine's thread): a release on another thread claims
 * the waiter first; it then waits for the look to end, which finds it
 * claimed. */
static void rl_window(void *arg)
{
	struct rl *t = arg;

	if (atomic_exchange(&t->started, 1))
		return;
	assert_int_equal(pthread_create(&t->releaser, NULL, rl_releaser, t), 0);
	while (atomic_load(&t->parked->state) == CO__W_WAITING)
		;
}

static co_awaiter *rl_wait(struct rl *t, co_waiter *w)
{
	switch (t->kind) {
	case RL_MUTEX:
		return co_mutex_lock(w, &t->m);
	case RL_SEM:
		return co_sem_acquire(w, &t->sem);
	case RL_EVENT:
		return co_event_wait(w, &t->ev);
	default:
		return co_chan_recv(w, &t->ch, &t->item);
	}
}

static int rl_kid_fn(co_frame *f)
{
	struct rl_kid *k = (struct rl_kid *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, rl_wait(k->t, &k->w));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static int rl_fn(co_frame *f)
{
	struct rl *t = (struct rl *)f;
	CO_BEGIN(f);
	if (t->form == RL_WAIT_FOR) {
		t->parked = &t->w;
		CO_AWAIT(f, co_wait_for(rl_wait(t, &t->w), SHORT));
	} else if (t->form == RL_TIMEOUT) {
		t->parked = &t->w;
		CO_AWAIT(f, co_timeout(&t->lim, rl_wait(t, &t->w), SHORT));
	} else {
		t->parked = &t->kid.w;
		t->kid.t = t;
		co_init(&t->kid.co, rl_kid_fn);
		CO_AWAIT(f, co_timeout(&t->lim, &t->kid.co, SHORT));
	}
	t->res = co_result(f);
	if (t->res == -ETIME) /* too late: the release goes to the primitive */
		rl_release(t);
	/* what the frame holds goes back, what the primitive holds stays */
	switch (t->kind) {
	case RL_MUTEX:
		if (t->res == 0)
			assert_int_equal(co_mutex_unlock(&t->m), 0);
		break;
	case RL_SEM:
		if (t->res == 0)
			assert_int_equal(co_sem_release(&t->sem, 1), 0);
		break;
	case RL_CHAN:
		if (t->res == -ETIME)
			assert_int_equal(co_chan_try_recv(&t->ch, &t->item), 0);
		assert_int_equal(t->item, 42);
		break;
	default:
		break;
	}
	CO_END(f);
}

static void test_release_races_limit(void **state)
{
	static const char *kinds[RL_KINDS] = { "mutex", "semaphore", "event", "channel" };
	static const char *forms[RL_FORMS] = { "co_wait_for", "co_timeout", "a child" };

	(void)state;
	for (int kind = 0; kind < RL_KINDS; kind++) {
		for (int form = 0; form < RL_FORMS; form++) {
			for (int window = 0; window < 2; window++) {
				struct rl t;
				int item;

				memset(&t, 0, sizeof t);
				t.kind = kind;
				t.form = form;
				assert_int_equal(co_mutex_init(&t.m), 0);
				assert_int_equal(co_mutex_trylock(&t.m), 0); /* held: the lock waits */
				assert_int_equal(co_sem_init(&t.sem, 0), 0);
				assert_int_equal(co_event_init(&t.ev, 0), 0);
				assert_int_equal(co_chan_init(&t.ch, sizeof(int), 1, NULL), 0);
				if (window)
					co__fault_on_point(CO__POINT_WAIT_VISIT, rl_window, &t);
				co_init(&t.co, rl_fn);
				co_test_run1(&t.co);
				co__fault_on_point(CO__POINT_WAIT_VISIT, NULL, NULL);
				if (atomic_load(&t.started))
					pthread_join(t.releaser, NULL);
				print_message("%-9s %-11s %s: %d\n", kinds[kind], forms[form],
					      atomic_load(&t.started) ? "released in the window" :
					      "released late", t.res);
				/* (a wait that found its time gone before it parked, on a
				 * loaded machine, has no window: released late) */
				assert_int_equal(t.res, atomic_load(&t.started) ? 0 : -ETIME);
				/* exact: the mutex free, one permit, the event set,
				 * the channel empty */
				if (kind != RL_MUTEX) /* (held from the start otherwise) */
					assert_int_equal(co_mutex_unlock(&t.m), 0);
				assert_int_equal(co_mutex_trylock(&t.m), 0);
				assert_int_equal(co_mutex_unlock(&t.m), 0);
				if (kind == RL_SEM) {
					assert_int_equal(co_sem_try_acquire(&t.sem), 0);
					assert_int_equal(co_sem_try_acquire(&t.sem), -EAGAIN);
				}
				if (kind == RL_EVENT)
					assert_true(co_event_is_set(&t.ev));
				assert_int_equal(co_chan_try_recv(&t.ch, &item), -EAGAIN);
				assert_int_equal(co_mutex_destroy(&t.m), 0);
				assert_int_equal(co_sem_destroy(&t.sem), 0);
				assert_int_equal(co_event_destroy(&t.ev), 0);
				assert_int_equal(co_chan_destroy(&t.ch), 0);
			}
		}
	}
}

/* The same race for the waits test_release_races_limit leaves out: a
 * condition wait (signal), a channel send on a full ring (a receiver on
 * another thread takes an item and refills the ring from the parked
 * sender), a receive of many (a send hands it one item), a latch and a
 * wait group (the last count down). sync.md, "The timeout race": whoever
 * claims the waiter first decides its result, exactly one of "released"
 * and "timed out" wins, and the claim's result stands. Held open at
 * CO__POINT_WAIT_VISIT (the timer's look saw the waiter waiting), the
 * release comes first: 0 (1 for the receive of many), the mutex held
 * again after the condition wait, the item delivered once; released late:
 * -ETIME, and what is released after stays with the primitive. */
enum { RL2_COND, RL2_SEND, RL2_RECV_MANY, RL2_LATCH, RL2_WAITGROUP, RL2_KINDS };

struct rl2 {
	co_frame co;
	co_waiter w;
	co_mutex m;
	co_cond c;
	co_chan ch;
	co_latch latch;
	co_waitgroup wg;
	int kind, item, many[4], res, held_after;
	pthread_t releaser;
	atomic_int started;
};

static void rl2_release(struct rl2 *t)
{
	int item = 42, got = 0;

	if (t->kind == RL2_COND) {
		assert_int_equal(co_cond_signal(&t->c), 0);
	} else if (t->kind == RL2_SEND) {
		assert_int_equal(co_chan_try_recv(&t->ch, &got), 0);
		assert_int_equal(got, 1); /* the item that filled the ring */
	} else if (t->kind == RL2_RECV_MANY) {
		assert_int_equal(co_chan_try_send(&t->ch, &item), 0);
	} else if (t->kind == RL2_LATCH) {
		assert_int_equal(co_latch_count_down(&t->latch, 1), 0);
	} else {
		assert_int_equal(co_waitgroup_done(&t->wg), 0);
	}
}

static void *rl2_releaser(void *arg)
{
	rl2_release(arg);
	return NULL;
}

static void rl2_window(void *arg)
{
	struct rl2 *t = arg;

	if (atomic_exchange(&t->started, 1))
		return;
	assert_int_equal(pthread_create(&t->releaser, NULL, rl2_releaser, t), 0);
	while (atomic_load(&t->w.state) == CO__W_WAITING)
		;
}

static co_awaiter *rl2_wait(struct rl2 *t)
{
	if (t->kind == RL2_COND)
		return co_cond_wait(&t->w, &t->c, &t->m);
	if (t->kind == RL2_SEND)
		return co_chan_send(&t->w, &t->ch, &t->item);
	if (t->kind == RL2_RECV_MANY)
		return co_chan_recv_many(&t->w, &t->ch, t->many, 4);
	if (t->kind == RL2_LATCH)
		return co_latch_wait(&t->w, &t->latch);
	return co_waitgroup_wait(&t->w, &t->wg);
}

static int rl2_fn(co_frame *f)
{
	struct rl2 *t = (struct rl2 *)f;
	CO_BEGIN(f);
	if (t->kind == RL2_COND) {
		CO_AWAIT(f, co_mutex_lock(&t->w, &t->m));
		assert_int_equal(co_result(f), 0);
	}
	CO_AWAIT(f, co_wait_for(rl2_wait(t), SHORT));
	t->res = co_result(f);
	if (t->kind == RL2_COND) { /* held again, whatever the value */
		t->held_after = co_mutex_trylock(&t->m) == -EBUSY;
		assert_int_equal(co_mutex_unlock(&t->m), 0);
	}
	if (t->res == -ETIME) /* too late: the release goes to the primitive */
		rl2_release(t);
	CO_END(f);
}

static void test_release_races_limit_other_waits(void **state)
{
	static const char *kinds[RL2_KINDS] = { "condition", "send", "recv_many", "latch",
						"wait group" };

	(void)state;
	for (int kind = 0; kind < RL2_KINDS; kind++) {
		for (int window = 0; window < 2; window++) {
			struct rl2 t;
			int item = 0, one = 1;

			memset(&t, 0, sizeof t);
			t.kind = kind;
			t.item = 2;
			assert_int_equal(co_mutex_init(&t.m), 0);
			assert_int_equal(co_cond_init(&t.c), 0);
			assert_int_equal(co_chan_init(&t.ch, sizeof(int), 1, NULL), 0);
			if (kind == RL2_SEND) /* full: the send waits */
				assert_int_equal(co_chan_try_send(&t.ch, &one), 0);
			assert_int_equal(co_latch_init(&t.latch, 1), 0);
			assert_int_equal(co_waitgroup_init(&t.wg), 0);
			assert_int_equal(co_waitgroup_add(&t.wg, 1), 0);
			if (window)
				co__fault_on_point(CO__POINT_WAIT_VISIT, rl2_window, &t);
			co_init(&t.co, rl2_fn);
			co_test_run1(&t.co);
			co__fault_on_point(CO__POINT_WAIT_VISIT, NULL, NULL);
			if (atomic_load(&t.started))
				pthread_join(t.releaser, NULL);
			print_message("%-10s %s: %d\n", kinds[kind],
				      atomic_load(&t.started) ? "released in the window" : "released late",
				      t.res);
			assert_int_equal(t.res, atomic_load(&t.started) ?
							(kind == RL2_RECV_MANY ? 1 : 0) : -ETIME);
			if (kind == RL2_COND)
				assert_int_equal(t.held_after, 1);
			if (kind == RL2_SEND) {
				/* sent once (in the window), or not at all */
				int r = co_chan_try_recv(&t.ch, &item);
				if (atomic_load(&t.started)) {
					assert_int_equal(r, 0);
					assert_int_equal(item, 2);
				} else {
					assert_int_equal(r, -EAGAIN);
				}
			}
			if (kind == RL2_RECV_MANY) {
				if (atomic_load(&t.started)) {
					assert_int_equal(t.many[0], 42);
					assert_int_equal(co_chan_try_recv(&t.ch, &item), -EAGAIN);
				} else { /* the late item stays in the channel */
					assert_int_equal(co_chan_try_recv(&t.ch, &item), 0);
					assert_int_equal(item, 42);
				}
			}
			assert_int_equal(co_latch_try_wait(&t.latch), kind == RL2_LATCH ? 0 : -EAGAIN);
			assert_int_equal(co_chan_try_recv(&t.ch, &item), -EAGAIN);
			assert_int_equal(co_mutex_destroy(&t.m), 0);
			assert_int_equal(co_cond_destroy(&t.c), 0);
			assert_int_equal(co_chan_destroy(&t.ch), 0);
			assert_int_equal(co_latch_destroy(&t.latch), 0);
			assert_int_equal(co_waitgroup_destroy(&t.wg), 0);
		}
	}
}

/* ---- four limits out at once ------------------------------------------------------ */

/* Four children nested, each awaited under a limit of its own (the
 * innermost the earliest, a millisecond apart), and a holder that keeps
 * the engine's thread until all four times have passed; then the same
 * with the innermost limit around the sleep itself (an awaiter's limit
 * inside three children's). The four timers
 * come in one batch, the innermost first, so the outermost fires when
 * three limits are out already (the frame's count of them holds 0..3).
 * Until the outermost limit's await has ended, its chain is cancelled:
 * each child's await after its limited one (a sleep of an hour under a
 * limit of 500 ms, which bounds the failure) ends with -ECANCELED at once.
 * Without the count handed to a limit that rode on three others when one
 * of those ends, the outermost limit's child sees no cancel once the three
 * inner limits have ended, and its sleep ends with -ETIME at 500 ms. */
#define NEST 4

struct nest_kid {
	co_frame co;
	co_limit lim, lim2;
	co_io io;
	struct nest_kid *inner;
	uint64_t end;             /* the inner limit's deadline */
	int leaf_limited;         /* no inner kid: the sleep under a limit */
	int got, after;
};

static int nest_kid_fn(co_frame *f)
{
	struct nest_kid *k = (struct nest_kid *)f;
	CO_BEGIN(f);
	if (k->inner)
		CO_AWAIT(f, co_timeout_at(&k->lim, &k->inner->co, k->end));
	else if (k->leaf_limited)
		CO_AWAIT(f, co_timeout_at(&k->lim, co_sleep(&k->io, NEVER), k->end));
	else
		CO_AWAIT(f, co_sleep(&k->io, NEVER));
	k->got = co_result(f);
	CO_AWAIT(f, co_timeout(&k->lim2, co_sleep(&k->io, NEVER), 500 * CO_MS));
	k->after = co_result(f);
	CO_RETURN(f, k->after);
	CO_END(f);
}

struct nest {
	co_frame co, holder;
	co_limit lim;
	co_io hio;
	struct nest_kid kid[NEST];
	uint64_t end;             /* the outermost limit's deadline */
	int res, cancelled_after;
};

static int nest_fn(co_frame *f)
{
	struct nest *n = (struct nest *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_timeout_at(&n->lim, &n->kid[0].co, n->end));
	n->res = co_result(f);
	n->cancelled_after = co_cancelled(f);
	CO_END(f);
}

static int nest_holder_fn(co_frame *f)
{
	struct nest *n = (struct nest *)(void *)((char *)f - offsetof(struct nest, holder));
	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&n->hio)); /* the four timers are in */
	while (co_now_ns() < n->end + 2 * CO_MS)
		;
	CO_END(f);
}

/* leaf_limited: three children, the third's sleep under the fourth limit */
static void run_nest(int leaf_limited)
{
	struct nest n;
	co_frame *frames[2] = { &n.co, &n.holder };
	int kids = leaf_limited ? NEST - 1 : NEST;

	memset(&n, 0, sizeof n);
	n.end = co_now_ns() + 50 * CO_MS;
	for (int i = 0; i < kids; i++) {
		co_init(&n.kid[i].co, nest_kid_fn);
		n.kid[i].inner = i + 1 < kids ? &n.kid[i + 1] : NULL;
		n.kid[i].leaf_limited = leaf_limited;
		n.kid[i].end = n.end - (uint64_t)(i + 1) * CO_MS; /* deeper: earlier */
	}
	co_init(&n.co, nest_fn);
	co_init(&n.holder, nest_holder_fn);
	co_test_run_frames(frames, 2);
	assert_int_equal(n.res, -ETIME);
	assert_false(n.cancelled_after);
	for (int i = 0; i < kids; i++) {
		print_message("level %d: %d, then %d\n", i, n.kid[i].got, n.kid[i].after);
		assert_int_equal(n.kid[i].got, i + 1 < kids || leaf_limited ? -ETIME : -ECANCELED);
		assert_int_equal(n.kid[i].after, -ECANCELED);
	}
}

static void test_four_limits_out_at_once(void **state)
{
	(void)state;
	run_nest(0);
	run_nest(1);
}

/* ---- the kind-specific forms given I/O: nothing started ---------------------- */

/* co_wait_for given an I/O awaiter, on an engine: the await ends with
 * -EINVAL and the read it was given never takes a byte: written after the
 * await, the byte is still in the pipe once the engine has been into the
 * kernel again. Without the prepared operation being cancelled, its SQE
 * goes to the kernel anyway, and the read takes the byte (into the
 * frame's buffer, after its await said -EINVAL). */
struct wrong_io {
	co_frame co;
	co_io io, nop;
	int fds[2], res, nop_res;
	char c;
};

static int wrong_io_fn(co_frame *f)
{
	struct wrong_io *w = (struct wrong_io *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_wait_for(co_read(&w->io, w->fds[0], &w->c, 1, 0), NEVER));
	w->res = co_result(f);
	assert_int_equal(write(w->fds[1], "x", 1), 1);
	CO_AWAIT(f, co_nop(&w->nop)); /* the engine goes into the kernel */
	w->nop_res = co_result(f);
	CO_END(f);
}

static void test_wrong_kind_starts_nothing(void **state)
{
	struct wrong_io w;
	char c = 0;

	(void)state;
	memset(&w, 0, sizeof w);
	assert_int_equal(pipe2(w.fds, O_NONBLOCK), 0);
	co_init(&w.co, wrong_io_fn);
	co_test_run1(&w.co);
	assert_int_equal(w.res, -EINVAL);
	assert_int_equal(w.nop_res, 0);
	assert_int_equal(read(w.fds[0], &c, 1), 1); /* the byte was left where it was */
	assert_int_equal(c, 'x');
	assert_int_equal(w.c, 0);
	close(w.fds[0]);
	close(w.fds[1]);
}

/* A refused operation that completed before its cancel keeps what it did
 * (timeout.md, io.md): a read given to co_wait_for, a read inside a
 * co_timeout given to co_deadline (the timeout linked to the read), and a
 * limit of its own (a timer, around a read with its timeout) given to
 * co_wait_for, each find a byte already in the pipe and end with 1, the
 * byte in their buffer; an accept given to co_wait_for with a connection
 * pending ends with the new descriptor, which the test closes (nothing
 * leaks). A co_fixed_file applied after co_deadline still answers
 * -EINVAL: its read went in on the plain descriptor of that number.
 * Without the refused await passing a completed result on, each ends with
 * -EINVAL: the byte is gone and the socket leaks. */
struct kept {
	co_frame co;
	co_limit lim;
	co_io io;
	int fds[2], lfd, r[5];
	char c[4];
};

static int kept_fn(co_frame *f)
{
	struct kept *k = (struct kept *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_wait_for(co_read(&k->io, k->fds[0], &k->c[0], 1, 0), NEVER));
	k->r[0] = co_result(f);
	CO_AWAIT(f, co_deadline(co_timeout(&k->lim, co_read(&k->io, k->fds[0], &k->c[1], 1, 0),
					   NEVER), NEVER));
	k->r[1] = co_result(f);
	/* a limit of its own (a timer: the read has its timeout already) */
	CO_AWAIT(f, co_wait_for(co_timeout(&k->lim, co_deadline(co_read(&k->io, k->fds[0], &k->c[2],
									 1, 0), NEVER),
					   NEVER), NEVER));
	k->r[2] = co_result(f);
	CO_AWAIT(f, co_wait_for(co_accept(&k->io, k->lfd, NULL, NULL, 0), NEVER));
	k->r[3] = co_result(f);
	CO_AWAIT(f, co_fixed_file(co_deadline(co_read(&k->io, k->fds[0], &k->c[3], 1, 0), NEVER)));
	k->r[4] = co_result(f);
	CO_END(f);
}

static void test_refused_keeps_what_completed(void **state)
{
	struct kept k;
	uint16_t port;
	int cfd;
	struct sockaddr_in a;

	(void)state;
	memset(&k, 0, sizeof k);
	assert_int_equal(pipe2(k.fds, O_NONBLOCK), 0);
	assert_int_equal(write(k.fds[1], "abcd", 4), 4);
	k.lfd = co_test_listen(&port);
	a = co_test_loopback(port);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(cfd >= 0);
	assert_int_equal(connect(cfd, (struct sockaddr *)&a, sizeof a), 0);
	co_init(&k.co, kept_fn);
	co_test_run1(&k.co);
	assert_int_equal(k.r[0], 1);
	assert_int_equal(k.r[1], 1);
	assert_int_equal(k.r[2], 1);
	assert_memory_equal(k.c, "abc", 3);
	assert_true(k.r[3] >= 0); /* the accepted socket */
	assert_int_equal(k.r[4], -EINVAL);
	if (k.r[3] >= 0)
		close(k.r[3]);
	close(cfd);
	close(k.lfd);
	close(k.fds[0]);
	close(k.fds[1]);
}

/* co_deadline, co_fixed_file, co_wait_for and co_timeout of the same
 * co_limit (one limit for two nested limits) given a limit's own awaiter
 * (co_timeout of a read already submitted, or of a sleep: the timer path):
 * the await ends with -EINVAL, and what the limit was around is cancelled
 * and takes nothing: a byte written after the await is still in the pipe
 * once the engine has been into the kernel again, and no sleep of an hour
 * is left in flight (the run ends). Without the limit refused as a whole,
 * the -EINVAL awaiter takes its place and the read, in the kernel already,
 * takes the byte (and the frame, freed after its await, is written to by
 * the read's completion). */
struct wrong_limit {
	co_frame co;
	co_limit lim;
	co_io io, nop;
	int fds[2], r[4], k;
	char c, got;
};

static co_awaiter *wrong_form(struct wrong_limit *w, co_awaiter *aw)
{
	if (w->k == 0)
		return co_wait_for(aw, NEVER);
	if (w->k == 1)
		return co_deadline(aw, NEVER);
	if (w->k == 2)
		return co_fixed_file(aw);
	return co_timeout(&w->lim, aw, NEVER);
}

static int wrong_limit_fn(co_frame *f)
{
	struct wrong_limit *w = (struct wrong_limit *)f;
	CO_BEGIN(f);
	for (w->k = 0; w->k < 4; w->k++) {
		co_read(&w->io, w->fds[0], &w->c, 1, 0);
		CO_YIELD(f); /* submitted: co_timeout's own timer */
		CO_AWAIT(f, wrong_form(w, co_timeout(&w->lim, &w->io.aw, NEVER)));
		w->r[w->k] = co_result(f);
		assert_int_equal(write(w->fds[1], "x", 1), 1);
		CO_AWAIT(f, co_nop(&w->nop));
		assert_int_equal(read(w->fds[0], &w->got, 1), 1); /* left where it was */
		CO_AWAIT(f, wrong_form(w, co_timeout(&w->lim, co_sleep(&w->io, NEVER), NEVER)));
		assert_int_equal(co_result(f), -EINVAL);
	}
	CO_END(f);
}

static void test_limit_given_to_kind_forms(void **state)
{
	struct wrong_limit w;

	(void)state;
	memset(&w, 0, sizeof w);
	assert_int_equal(pipe2(w.fds, O_NONBLOCK), 0);
	co_init(&w.co, wrong_limit_fn);
	alarm(20); /* an hour's sleep left in flight keeps the run */
	co_test_run1(&w.co);
	alarm(0);
	for (int k = 0; k < 4; k++)
		assert_int_equal(w.r[k], -EINVAL);
	assert_int_equal(w.c, 0);
	close(w.fds[0]);
	close(w.fds[1]);
}

/* ---- zero: a try on every path; limits under a shield on every path ----------- */

/* timeout.h: "0: a try: -ETIME unless aw completes at once", on the paths
 * that are not a wait's own timer (past_and_zero_limits has those): a read
 * under a linked timeout of 0 with its byte there (the byte) and without
 * (-ETIME, and the pipe still works), a user's awaiter open and shut, a
 * child that finishes in its first run and one that sleeps. Then, under a
 * shield with a co_cancel recorded, a limit still runs out on each path
 * (a linked timeout, a sleep's timer, a user's awaiter, a child: -ETIME,
 * the shield holding back only the cancel), and the chain after each is
 * not ended by the limit (an await under the shield: its own value). */
struct zero {
	co_frame co;
	co_limit lim;
	co_io io;
	struct gate g;
	struct sleeper kid;
	co_frame quick;
	int fds[2];
	char c;
	int r[8], s[4], nop[4], cancel;
};

static int zero_fn(co_frame *f)
{
	struct zero *z = (struct zero *)f;
	CO_BEGIN(f);
	assert_int_equal(write(z->fds[1], "a", 1), 1);
	CO_AWAIT(f, co_timeout(&z->lim, co_read(&z->io, z->fds[0], &z->c, 1, 0), 0));
	z->r[0] = co_result(f);
	CO_AWAIT(f, co_timeout(&z->lim, co_read(&z->io, z->fds[0], &z->c, 1, 0), 0));
	z->r[1] = co_result(f);
	gate(&z->g);
	z->g.open = 1;
	CO_AWAIT(f, co_timeout(&z->lim, &z->g.aw, 0));
	z->r[2] = co_result(f);
	CO_AWAIT(f, co_timeout(&z->lim, gate(&z->g), 0));
	z->r[3] = co_result(f);
	co_init(&z->quick, quick_fn);
	CO_AWAIT(f, co_timeout(&z->lim, &z->quick, 0));
	z->r[4] = co_result(f);
	sleeper_init(&z->kid);
	CO_AWAIT(f, co_timeout(&z->lim, &z->kid.co, 0));
	z->r[5] = co_result(f);
	assert_int_equal(write(z->fds[1], "b", 1), 1);
	CO_AWAIT(f, co_read(&z->io, z->fds[0], &z->c, 1, 0));
	z->r[6] = co_result(f) == 1 && z->c == 'b';
	/* under a shield, a cancel recorded */
	co_shield(f);
	z->cancel = co_cancel(f);
	CO_AWAIT(f, co_timeout(&z->lim, co_read(&z->io, z->fds[0], &z->c, 1, 0), SHORT));
	z->s[0] = co_result(f);
	CO_AWAIT(f, co_nop(&z->io));
	z->nop[0] = co_result(f);
	CO_AWAIT(f, co_timeout(&z->lim, co_sleep(&z->io, NEVER), SHORT));
	z->s[1] = co_result(f);
	CO_AWAIT(f, co_nop(&z->io));
	z->nop[1] = co_result(f);
	CO_AWAIT(f, co_timeout(&z->lim, gate(&z->g), SHORT));
	z->s[2] = co_result(f);
	CO_AWAIT(f, co_nop(&z->io));
	z->nop[2] = co_result(f);
	sleeper_init(&z->kid);
	CO_AWAIT(f, co_timeout(&z->lim, &z->kid.co, SHORT));
	z->s[3] = co_result(f);
	CO_AWAIT(f, co_nop(&z->io));
	z->nop[3] = co_result(f);
	z->r[7] = co_cancelled(f); /* the recorded request: co_cancelled() tells */
	co_unshield(f);
	CO_END(f);
}

static void test_zero_and_shield_each_path(void **state)
{
	static const int expect[8] = { 1, -ETIME, 0, -ETIME, 7, -ETIME, 1, 1 };
	struct zero z;

	(void)state;
	memset(&z, 0, sizeof z);
	assert_int_equal(pipe(z.fds), 0);
	co_init(&z.co, zero_fn);
	co_test_run1(&z.co);
	for (int i = 0; i < 8; i++)
		if (z.r[i] != expect[i])
			fail_msg("try %d: %d, not %d", i, z.r[i], expect[i]);
	assert_int_equal(z.cancel, 0);
	for (int i = 0; i < 4; i++) {
		if (z.s[i] != -ETIME)
			fail_msg("shielded limit %d: %d", i, z.s[i]);
		assert_int_equal(z.nop[i], 0);
	}
	assert_int_equal(co_status(&z.co), 0);
	close(z.fds[0]);
	close(z.fds[1]);
}

/* ---- a frame freed right after its limited await -------------------------------- */

/* timeout.md: the timer's CQE may come after the await has ended and the
 * co_limit has been reused or freed; the await's end detaches the timer.
 * Frames on the heap, each freed by its on_done right after a limited await
 * whose thing completed first (a child, a user's awaiter, a when_all: the
 * timer still in the kernel, its removal asked), or whose limit ran out
 * (its CQE in): ASan finds any touch of the freed co_limit. */
struct freed {
	co_frame co;
	co_limit lim;
	struct gate g;
	co_frame quick;
	co_when when;
	co_frame *kids[1];
	int form, *ended;
};

static int freed_fn(co_frame *f)
{
	struct freed *d = (struct freed *)f;
	CO_BEGIN(f);
	co_init(&d->quick, quick_fn);
	d->kids[0] = &d->quick;
	gate(&d->g);
	d->g.open = d->form == 1;
	if (d->form == 0)
		CO_AWAIT(f, co_timeout(&d->lim, &d->quick, NEVER));
	else if (d->form == 1)
		CO_AWAIT(f, co_timeout(&d->lim, &d->g.aw, NEVER));
	else if (d->form == 2)
		CO_AWAIT(f, co_timeout(&d->lim, co_when_all(&d->when, d->kids, 1), NEVER));
	else
		CO_AWAIT(f, co_timeout(&d->lim, &d->g.aw, 0));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void freed_done(co_frame *f)
{
	struct freed *d = (struct freed *)f;
	static const int want[4] = { 7, 0, 0, -ETIME };

	assert_int_equal(co_status(f), want[d->form]);
	(*d->ended)++;
	memset(d, 0x5a, sizeof *d);
	free(d);
}

static void test_limit_freed_after_await(void **state)
{
	co_engine e;
	int ended = 0;

	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	for (int i = 0; i < 64; i++) {
		struct freed *d = calloc(1, sizeof *d);

		assert_non_null(d);
		d->form = i % 4;
		d->ended = &ended;
		co_init(&d->co, freed_fn);
		d->co.on_done = freed_done;
		assert_int_equal(co_engine_spawn(&e, &d->co), 0);
	}
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(ended, 64);
	assert_int_equal(e.inflight, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_every_kind_has_a_row),
	cmocka_unit_test(test_each_kind_limit_first),
	cmocka_unit_test(test_each_kind_completes_first),
	cmocka_unit_test(test_sync_waits_and_io_paths),
	cmocka_unit_test(test_child_shared_deadline_nesting),
	cmocka_unit_test(test_cannot_be_limited),
	cmocka_unit_test(test_huge_times_never_fire),
	cmocka_unit_test(test_past_and_zero_limits),
	cmocka_unit_test(test_not_on_an_engine),
	cmocka_unit_test(test_timer_allocation_fails),
	cmocka_unit_test(test_child_result_kept),
	cmocka_unit_test(test_release_races_limit),
	cmocka_unit_test(test_release_races_limit_other_waits),
	cmocka_unit_test(test_shield_lets_cleanup_run),
	cmocka_unit_test(test_pinned_on_a_stealing_scheduler),
	cmocka_unit_test(test_transfer_inside_a_limit),
	cmocka_unit_test(test_four_limits_out_at_once),
	cmocka_unit_test(test_wrong_kind_starts_nothing),
	cmocka_unit_test(test_refused_keeps_what_completed),
	cmocka_unit_test(test_limit_given_to_kind_forms),
	cmocka_unit_test(test_zero_and_shield_each_path),
	cmocka_unit_test(test_limit_freed_after_await),
};

CO_TEST_MAIN(tests, 0)
