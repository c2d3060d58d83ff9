/* SPDX-License-Identifier: MIT */
/* Tests of include/coring/co.h: every macro, built once per label backend
 * (meson compiles this file with and without CO_USE_COMPUTED_GOTO=1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>
#include <cmocka.h>

#include <coring/loop.h>
#include <coring/co.h>

/* ---- yield, return, status --------------------------------------------- */

struct counter {
	co_frame co;
	int i, n, hits;
};

static int counter_fn(co_frame *f)
{
	struct counter *c = (struct counter *)f;
	CO_BEGIN(f);
	for (c->i = 0; c->i < c->n; c->i++) {
		c->hits++;
		CO_YIELD(f);
	}
	CO_END(f);
}

static void test_yield_and_end(void **state)
{
	struct counter c = { .n = 3 };
	(void)state;
	co_init(&c.co, counter_fn);
	assert_false(co_done(&c.co));
	assert_int_equal(c.hits, 0); /* created suspended */
	assert_int_equal(co_resume(&c.co), CO_YIELDED);
	assert_int_equal(c.hits, 1);
	assert_int_equal(co_resume(&c.co), CO_YIELDED);
	assert_int_equal(co_resume(&c.co), CO_YIELDED);
	assert_int_equal(c.hits, 3);
	assert_false(co_done(&c.co));
	assert_int_equal(co_resume(&c.co), CO_DONE);
	assert_true(co_done(&c.co));
	assert_true((!co_done(&c.co)) == 0);
	assert_int_equal(co_status(&c.co), 0);

	/* a finished frame can be initialised and run again */
	c.hits = 0;
	c.n = 1;
	co_init(&c.co, counter_fn);
	assert_int_equal(co_resume(&c.co), CO_YIELDED);
	assert_int_equal(co_resume(&c.co), CO_DONE);
	assert_int_equal(c.hits, 1);
}

struct early {
	co_frame co;
	int arg, after;
};

static int early_fn(co_frame *f)
{
	struct early *e = (struct early *)f;
	CO_BEGIN(f);
	CO_YIELD(f);
	if (e->arg < 0)
		CO_RETURN(f, -EINVAL);
	e->after = 1;
	CO_RETURN(f, e->arg);
	e->after = 2; /* never reached */
	CO_END(f);
}

static void test_return_status(void **state)
{
	struct early e = { .arg = -1 };
	(void)state;
	co_init(&e.co, early_fn);
	assert_int_equal(co_resume(&e.co), CO_YIELDED);
	assert_int_equal(co_status(&e.co), 0); /* before the end (the lean frame's
						  label word holds the label) */
	assert_int_equal(co_resume(&e.co), CO_DONE);
	assert_int_equal(co_status(&e.co), -EINVAL);
	assert_int_equal(e.after, 0);

	e.arg = 42;
	co_init(&e.co, early_fn);
	while (co_resume(&e.co) != CO_DONE)
		;
	assert_int_equal(co_status(&e.co), 42);
	assert_int_equal(e.after, 1);
}

/* ---- generators ---------------------------------------------------------- */

struct squares {
	co_frame co;
	int i, n;
	long value;
};

static int squares_fn(co_frame *f)
{
	struct squares *s = (struct squares *)f;
	CO_BEGIN(f);
	for (s->i = 1; s->i <= s->n; s->i++)
		CO_YIELD_VALUE(f, s->value, (long)s->i * s->i);
	CO_END(f);
}

static void test_generator(void **state)
{
	struct squares sq = { .n = 5 };
	long got[8];
	int k = 0;
	(void)state;
	co_init(&sq.co, squares_fn);
	while (co_next(&sq.co))
		got[k++] = sq.value;
	assert_int_equal(k, 5);
	assert_int_equal(got[0], 1);
	assert_int_equal(got[1], 4);
	assert_int_equal(got[4], 25);
	assert_true(co_done(&sq.co));

	sq.n = 0; /* an empty generator yields nothing */
	co_init(&sq.co, squares_fn);
	assert_false(co_next(&sq.co));
}

/* A generator that waits on an awaiter between two values: co_next says
 * false while it waits (no new value), true for the value after the wake,
 * and false at the end. */
struct gen_waits {
	co_frame co;
	co_awaiter *aw;
	long value;
};

static int gen_waits_fn(co_frame *f)
{
	struct gen_waits *g = (struct gen_waits *)f;
	CO_BEGIN(f);
	CO_YIELD_VALUE(f, g->value, 1);
	CO_AWAIT(f, g->aw);
	CO_YIELD_VALUE(f, g->value, 2);
	CO_END(f);
}

/* ---- awaiters ------------------------------------------------------------- */

/* A manual awaiter that logs the protocol calls. */
struct probe {
	co_awaiter aw;
	int is_ready, suspends, value;
	co_frame *waiter;
	char log[32];
	int nlog;
};

static void probe_log(struct probe *p, char c)
{
	p->log[p->nlog++] = c;
	p->log[p->nlog] = 0;
}

static int probe_ready(co_awaiter *a, co_frame *f)
{
	struct probe *p = (struct probe *)a;
	(void)f;
	probe_log(p, 'r');
	return p->is_ready;
}

static int probe_suspend(co_awaiter *a, co_frame *f)
{
	struct probe *p = (struct probe *)a;
	probe_log(p, 's');
	p->waiter = f;
	return p->suspends;
}

static int probe_resume(co_awaiter *a, co_frame *f)
{
	struct probe *p = (struct probe *)a;
	(void)f;
	probe_log(p, 'R');
	return p->value;
}

static int probe_cancel(co_awaiter *a, co_frame *f)
{
	struct probe *p = (struct probe *)a;
	probe_log(p, 'c');
	p->value = -ECANCELED;
	co_wake(f);
	return 0;
}

static const co_awaiter_ops probe_ops = { probe_ready, probe_suspend, probe_resume,
					  probe_cancel, 0, "probe" };
static const co_awaiter_ops bare_ops = { NULL, probe_suspend, NULL, NULL, 0, NULL };

static void test_generator_that_waits(void **state)
{
	struct probe p = { .suspends = 1 };
	struct gen_waits g = { .aw = &p.aw };
	(void)state;
	p.aw.ops = &probe_ops;
	co_init(&g.co, gen_waits_fn);
	assert_true(co_next(&g.co));
	assert_int_equal(g.value, 1);
	assert_false(co_next(&g.co)); /* waits: no new value */
	assert_false(co_done(&g.co));
	assert_int_equal(g.value, 1);
	co_wake(p.waiter);
	assert_true(co_next(&g.co));
	assert_int_equal(g.value, 2);
	assert_false(co_next(&g.co));
	assert_true(co_done(&g.co));
}

/* In C, a void * given to CO_AWAIT is taken as an awaiter (as NULL must
 * be): the awaiter protocol runs on it (ready, then resume: "rR"). */
struct void_await {
	co_frame co;
	void *x;
	int got;
};

static int void_await_fn(co_frame *f)
{
	struct void_await *v = (struct void_await *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, v->x);
	v->got = co_result(f);
	CO_END(f);
}

static void test_void_pointer_is_an_awaiter(void **state)
{
	struct probe p = { .is_ready = 1, .value = 7 };
	struct void_await v = { .x = &p.aw };
	(void)state;
	p.aw.ops = &probe_ops;
	co_init(&v.co, void_await_fn);
	assert_int_equal(co_resume(&v.co), CO_DONE);
	assert_int_equal(v.got, 7);
	assert_string_equal(p.log, "rR");
}

struct awaiting {
	co_frame co;
	struct probe *p;
	int got, after;
};

static int awaiting_fn(co_frame *f)
{
	struct awaiting *w = (struct awaiting *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, &w->p->aw);
	w->got = co_result(f);
	w->after = 1;
	CO_END(f);
}

static void test_await_suspends_then_wakes(void **state)
{
	struct probe p = { .aw = { &probe_ops }, .suspends = 1, .value = 7 };
	struct awaiting w = { .p = &p };
	(void)state;
	co_init(&w.co, awaiting_fn);
	assert_int_equal(co_resume(&w.co), CO_WAITING);
	assert_string_equal(p.log, "rs");
	assert_ptr_equal(p.waiter, &w.co);
	assert_int_equal(w.after, 0);
	co_wake(p.waiter);
	assert_int_equal(co_resume(&w.co), CO_DONE);
	assert_string_equal(p.log, "rsR");
	assert_int_equal(w.got, 7);
	assert_int_equal(co_result(&w.co), 7);
}

static void count_done(co_frame *f);

/* Rule 8 of docs/core.md: co_init sets every field, on_done and user too,
 * so a setter must come after it (the documented wrong order loses it). */
static void test_init_resets_every_field(void **state)
{
	struct counter c;
	(void)state;
	memset(&c, 0xa5, sizeof c);
	c.co.on_done = count_done; /* the wrong order: set first */
#if !CO_LEAN_FRAME
	c.co.user = &c;
#endif
	co_init(&c.co, counter_fn);
	assert_null(c.co.on_done);
#if !CO_LEAN_FRAME
	assert_null(c.co.user);
#endif
	assert_int_equal(c.co.label, 0);
	assert_int_equal(c.co.state, 0);
	assert_int_equal(c.co.cancel, 0);
	assert_int_equal(c.co.status, 0);
	assert_int_equal(c.co.result, 0);
	assert_ptr_equal(c.co.top, &c.co);
	assert_null(c.co.parent);
	c.co.on_done = count_done; /* the right order: set after */
	assert_ptr_equal(c.co.on_done, count_done);
#if CO_LEAN_FRAME
	/* the lean frame is 8 words: 32 bytes on a 32-bit core */
	assert_int_equal(sizeof(co_frame), 8 * sizeof(void *));
#else
	/* the Linux frame: 96 bytes on LP64 (include/coring/io.h counts on it) */
	if (sizeof(void *) == 8)
		assert_int_equal(sizeof(co_frame), 96);
#endif
}

/* co_waiting: true exactly while the chain waits on an awaiter. */
static void test_waiting_query(void **state)
{
	struct probe p = { .aw = { &probe_ops }, .suspends = 1, .value = 7 };
	struct awaiting w = { .p = &p };
	(void)state;
	co_init(&w.co, awaiting_fn);
	assert_false(co_waiting(&w.co));
	assert_int_equal(co_resume(&w.co), CO_WAITING);
	assert_true(co_waiting(&w.co));
	co_wake(p.waiter);
	assert_false(co_waiting(&w.co)); /* ready: a superloop resumes it */
	assert_int_equal(co_resume(&w.co), CO_DONE);
	assert_false(co_waiting(&w.co));
	/* a suspend that declines leaves it not waiting */
	memset(&p, 0, sizeof p);
	p.aw.ops = &probe_ops;
	co_init(&w.co, awaiting_fn);
	assert_int_equal(co_resume(&w.co), CO_DONE);
	assert_false(co_waiting(&w.co));
}

static void test_await_ready_skips_suspend(void **state)
{
	struct probe p = { .aw = { &probe_ops }, .is_ready = 1, .value = -5 };
	struct awaiting w = { .p = &p };
	(void)state;
	co_init(&w.co, awaiting_fn);
	assert_int_equal(co_resume(&w.co), CO_DONE);
	assert_string_equal(p.log, "rR");
	assert_int_equal(w.got, -5);
}

static void test_await_suspend_declines(void **state)
{
	struct probe p = { .aw = { &probe_ops }, .suspends = 0, .value = 3 };
	struct awaiting w = { .p = &p };
	(void)state;
	co_init(&w.co, awaiting_fn);
	assert_int_equal(co_resume(&w.co), CO_DONE);
	assert_string_equal(p.log, "rsR");
	assert_int_equal(w.got, 3);
}

static void test_await_optional_ops(void **state)
{
	struct probe p = { .aw = { &bare_ops }, .suspends = 1, .value = 9 };
	struct awaiting w = { .p = &p, .got = -1 };
	(void)state;
	co_init(&w.co, awaiting_fn);
	assert_int_equal(co_resume(&w.co), CO_WAITING);
	assert_string_equal(p.log, "s");
	co_wake(&w.co);
	assert_int_equal(co_resume(&w.co), CO_DONE);
	assert_int_equal(w.got, 0); /* no resume op: the value is 0 */
}

struct until {
	co_frame co;
	volatile int flag;
	int polls;
};

static int until_fn(co_frame *f)
{
	struct until *u = (struct until *)f;
	CO_BEGIN(f);
	CO_AWAIT_UNTIL(f, (u->polls++, u->flag));
	CO_RETURN(f, u->polls);
	CO_END(f);
}

static void test_await_until(void **state)
{
	struct until u = { .flag = 0 };
	(void)state;
	co_init(&u.co, until_fn);
	assert_int_equal(co_resume(&u.co), CO_YIELDED);
	assert_int_equal(co_resume(&u.co), CO_YIELDED);
	u.flag = 1;
	assert_int_equal(co_resume(&u.co), CO_DONE);
	assert_int_equal(co_status(&u.co), 3);

	u.polls = 0; /* a condition that already holds does not suspend */
	co_init(&u.co, until_fn);
	assert_int_equal(co_resume(&u.co), CO_DONE);
	assert_int_equal(co_status(&u.co), 1);
}

/* ---- cancellation -------------------------------------------------------- */

static void test_cancel_waiting_await(void **state)
{
	struct probe p = { .aw = { &probe_ops }, .suspends = 1, .value = 1 };
	struct awaiting w = { .p = &p };
	(void)state;
	co_init(&w.co, awaiting_fn);
	assert_false(co_cancelled(&w.co));
	assert_int_equal(co_resume(&w.co), CO_WAITING);
	assert_int_equal(co_cancel(&w.co), 0);
	assert_true(co_cancelled(&w.co));
	assert_int_equal(co_resume(&w.co), CO_DONE);
	assert_string_equal(p.log, "rscR");
	assert_int_equal(w.got, -ECANCELED);
	assert_int_equal(co_cancel(&w.co), -EALREADY);
}

static void test_cancel_without_cancel_op(void **state)
{
	struct probe p = { .aw = { &bare_ops }, .suspends = 1 };
	struct awaiting w = { .p = &p };
	struct counter c = { .n = 2 };
	(void)state;
	co_init(&w.co, awaiting_fn);
	assert_int_equal(co_resume(&w.co), CO_WAITING);
	assert_int_equal(co_cancel(&w.co), -EBUSY);
	assert_true(co_cancelled(&w.co)); /* the flag is set anyway */
	co_wake(&w.co);
	assert_int_equal(co_resume(&w.co), CO_DONE);

	/* a frame that is not waiting just gets the flag */
	co_init(&c.co, counter_fn);
	assert_int_equal(co_cancel(&c.co), 0);
	assert_true(co_cancelled(&c.co));
}

/* A mailbox that a producer keeps filling: its await takes an item when one
 * is there (ready), else parks; a cancel ends a park with -ECANCELED. */
struct mailbox {
	co_awaiter aw;
	int items, cancelled;
	co_frame *waiter;
};

static int mailbox_ready(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((struct mailbox *)a)->items > 0;
}

static int mailbox_suspend(co_awaiter *a, co_frame *f)
{
	struct mailbox *m = (struct mailbox *)a;

	if (co_await_cancelled(f)) {
		m->cancelled = 1;
		return 0;
	}
	m->waiter = f;
	return 1;
}

static int mailbox_resume(co_awaiter *a, co_frame *f)
{
	struct mailbox *m = (struct mailbox *)a;
	(void)f;
	if (m->cancelled) {
		m->cancelled = 0;
		return -ECANCELED;
	}
	m->items--;
	return 1;
}

static int mailbox_cancel(co_awaiter *a, co_frame *f)
{
	struct mailbox *m = (struct mailbox *)a;

	m->waiter = NULL;
	m->cancelled = 1;
	co_wake(f);
	return 0;
}

static const co_awaiter_ops mailbox_ops = { mailbox_ready, mailbox_suspend, mailbox_resume,
					    mailbox_cancel, 0, "mailbox" };

/* A consumer that takes an item, then yields (one a tick); checks says
 * whether its loop tests co_cancelled() besides the await's value. */
struct mb_consumer {
	co_frame co;
	struct mailbox *m;
	int checks, taken;
};

static int mb_consumer_fn(co_frame *f)
{
	struct mb_consumer *c = (struct mb_consumer *)f;
	CO_BEGIN(f);
	while (!(c->checks && co_cancelled(f))) {
		CO_AWAIT(f, &c->m->aw);
		if (co_result(f) < 0)
			break;
		c->taken++;
		CO_YIELD(f);
	}
	CO_END(f);
}

/* core.md, rule 9: a loop that keeps awaiting after co_cancel() must test
 * co_cancelled(), since an await whose value is already there takes it: fed
 * faster than it eats, a loop that looks only at the values never ends. */
static void test_cancelled_consumer_must_check(void **state)
{
	struct mailbox m = { .aw = { &mailbox_ops } };
	struct mb_consumer plain = { .m = &m }, checking = { .m = &m, .checks = 1 };
	(void)state;
	co_init(&plain.co, mb_consumer_fn);
	co_init(&checking.co, mb_consumer_fn);
	m.items = 1;
	assert_int_equal(co_resume(&plain.co), CO_YIELDED);
	m.items = 1;
	assert_int_equal(co_resume(&checking.co), CO_YIELDED);
	assert_int_equal(co_cancel(&plain.co), 0);
	assert_int_equal(co_cancel(&checking.co), 0);
	for (int i = 0; i < 100; i++) { /* the producer stays ahead */
		m.items = 1;
		assert_int_equal(co_resume(&plain.co), CO_YIELDED);
	}
	assert_true(co_cancelled(&plain.co));
	assert_int_equal(plain.taken, 101); /* each await took its item */
	assert_int_equal(m.items, 0);
	m.items = 1;
	assert_int_equal(co_resume(&checking.co), CO_DONE); /* its test ends it */
	assert_int_equal(checking.taken, 1);
	assert_int_equal(m.items, 1);
	/* an await that has to wait ends with -ECANCELED: once the producer
	 * stops, the plain loop ends too */
	m.items = 0;
	assert_int_equal(co_resume(&plain.co), CO_DONE);
	assert_int_equal(plain.taken, 101);
	assert_null(m.waiter);
}

/* ---- child await ------------------------------------------------------- */

struct child {
	co_frame co;
	int in, out, yields, k;
};

static int child_fn(co_frame *f)
{
	struct child *c = (struct child *)f;
	CO_BEGIN(f);
	for (c->k = 0; c->k < c->yields; c->k++)
		CO_YIELD(f);
	if (c->in < 0)
		CO_RETURN(f, c->in);
	c->out = c->in * 2;
	CO_END(f);
}

struct parent {
	co_frame co;
	struct child a, b;
	int steps, ra, rb;
};

static int parent_fn(co_frame *f)
{
	struct parent *p = (struct parent *)f;
	CO_BEGIN(f);
	p->steps = 1;
	CO_AWAIT_TASK(f, &p->a.co);
	p->ra = co_result(f);
	p->steps = 2;
	CO_AWAIT_TASK(f, &p->b.co);
	p->rb = co_result(f);
	p->steps = 3;
	CO_RETURN(f, p->a.out + p->b.out);
	CO_END(f);
}

static void test_child_results_and_errors(void **state)
{
	struct parent p = { .a = { .in = 5 }, .b = { .in = -ENOENT } };
	(void)state;
	co_init(&p.co, parent_fn);
	co_init(&p.a.co, child_fn);
	co_init(&p.b.co, child_fn);
	assert_int_equal(co_resume(&p.co), CO_DONE); /* no suspension anywhere */
	assert_int_equal(p.steps, 3);
	assert_int_equal(p.ra, 0);
	assert_int_equal(p.a.out, 10);
	assert_int_equal(p.rb, -ENOENT);
	assert_int_equal(co_status(&p.b.co), -ENOENT);
	assert_int_equal(co_status(&p.co), 10);
	assert_true(co_done(&p.a.co) && co_done(&p.b.co));
}

static void test_child_suspends_and_transfers_back(void **state)
{
	struct parent p = { .a = { .in = 1, .yields = 2 }, .b = { .in = 2, .yields = 1 } };
	(void)state;
	co_init(&p.co, parent_fn);
	co_init(&p.a.co, child_fn);
	co_init(&p.b.co, child_fn);
	assert_int_equal(co_resume(&p.co), CO_YIELDED);
	assert_int_equal(p.steps, 1);
	assert_ptr_equal(co_root(&p.a.co), &p.co);
	assert_int_equal(co_resume(&p.co), CO_YIELDED); /* a's second yield */
	assert_int_equal(p.steps, 1);
	/* a ends: the parent continues in the same resume and enters b */
	assert_int_equal(co_resume(&p.co), CO_YIELDED);
	assert_int_equal(p.steps, 2);
	assert_true(co_done(&p.a.co));
	assert_int_equal(p.a.out, 2);
	assert_int_equal(co_resume(&p.co), CO_DONE);
	assert_int_equal(p.steps, 3);
	assert_int_equal(co_status(&p.co), 6);
	assert_ptr_equal(co_root(&p.a.co), &p.a.co); /* detached from the chain */
}

static void test_child_already_done(void **state)
{
	struct parent p = { .a = { .in = 3 }, .b = { .in = 4 } };
	(void)state;
	co_init(&p.a.co, child_fn);
	assert_int_equal(co_resume(&p.a.co), CO_DONE);
	co_init(&p.co, parent_fn);
	co_init(&p.b.co, child_fn);
	assert_int_equal(co_resume(&p.co), CO_DONE);
	assert_int_equal(p.a.out, 6);
	assert_int_equal(co_status(&p.co), 14);
}

/* A child waiting on an awaiter: co_wake(child) readies the root. */
struct awaiting_parent {
	co_frame co;
	struct awaiting kid;
	int after;
};

static int awaiting_parent_fn(co_frame *f)
{
	struct awaiting_parent *ap = (struct awaiting_parent *)f;
	CO_BEGIN(f);
	co_init(&ap->kid.co, awaiting_fn);
	CO_AWAIT_TASK(f, &ap->kid.co);
	ap->after = ap->kid.got + 1;
	CO_END(f);
}

static void test_child_waits_on_awaiter(void **state)
{
	struct probe p = { .aw = { &probe_ops }, .suspends = 1, .value = 41 };
	struct awaiting_parent ap = { .kid = { .p = &p } };
	(void)state;
	co_init(&ap.co, awaiting_parent_fn);
	assert_int_equal(co_resume(&ap.co), CO_WAITING);
	assert_ptr_equal(p.waiter, &ap.kid.co);
	co_wake(p.waiter);
	assert_int_equal(co_resume(&ap.co), CO_DONE);
	assert_int_equal(ap.after, 42);

	/* cancelling the root reaches the awaiter of its innermost child */
	memset(&p, 0, sizeof p);
	p.aw.ops = &probe_ops;
	p.suspends = 1;
	co_init(&ap.co, awaiting_parent_fn);
	assert_int_equal(co_resume(&ap.co), CO_WAITING);
	assert_int_equal(co_cancel(&ap.co), 0);
	assert_true(co_cancelled(&ap.kid.co));
	assert_int_equal(co_resume(&ap.co), CO_DONE);
	assert_int_equal(ap.after, -ECANCELED + 1);
}

/* One CO_AWAIT for awaiters and children alike (C11 _Generic): a child that
 * suspends, an awaiter, a child that fails, a child already finished, the
 * NULL awaiter; each argument evaluated exactly once. */
struct one_await {
	co_frame co;
	struct child a, b;
	struct probe *p;
	int picks, ra, rp, rb, rdone, rnull;
};

static co_frame *pick_a(struct one_await *o)
{
	o->picks++;
	return &o->a.co;
}

static co_awaiter *pick_probe(struct one_await *o)
{
	o->picks++;
	return &o->p->aw;
}

static int one_await_fn(co_frame *f)
{
	struct one_await *o = (struct one_await *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, pick_a(o));
	o->ra = co_result(f);
	CO_AWAIT(f, pick_probe(o));
	o->rp = co_result(f);
	CO_AWAIT(f, &o->b.co);
	o->rb = co_result(f);
	CO_AWAIT(f, &o->a.co);
	o->rdone = co_result(f);
	CO_AWAIT(f, NULL);
	o->rnull = co_result(f);
	CO_END(f);
}

#if !CO_DEBUG
static void test_one_await_for_children(void **state)
{
	struct probe p = { .aw = { &probe_ops }, .suspends = 1, .value = 9 };
	struct one_await o = { .a = { .in = 4, .yields = 2 }, .b = { .in = -EPIPE }, .p = &p };
	(void)state;
	co_init(&o.co, one_await_fn);
	co_init(&o.a.co, child_fn);
	co_init(&o.b.co, child_fn);
	assert_int_equal(co_resume(&o.co), CO_YIELDED); /* a's first yield */
	assert_ptr_equal(o.co.top, &o.a.co);
	assert_int_equal(co_resume(&o.co), CO_YIELDED);
	assert_int_equal(co_resume(&o.co), CO_WAITING); /* a done, on the probe */
	assert_int_equal(o.ra, 0);
	assert_int_equal(o.a.out, 8);
	assert_string_equal(p.log, "rs");
	co_wake(p.waiter);
	assert_int_equal(co_resume(&o.co), CO_DONE);
	assert_int_equal(o.rp, 9);
	assert_int_equal(o.rb, -EPIPE);
	assert_int_equal(o.rdone, 0); /* a finished child: its status at once */
	assert_int_equal(o.rnull, -EINVAL);
	assert_int_equal(o.picks, 2); /* resuming never evaluates it again */
}
#else
static int traps_with(void (*fn)(void), const char *msg);

static void await_null_in_one_await(void)
{
	static struct probe p = { .aw = { &probe_ops }, .value = 9, .is_ready = 1 };
	static struct one_await o = { .p = &p };
	co_init(&o.co, one_await_fn);
	co_init(&o.a.co, child_fn);
	co_init(&o.b.co, child_fn);
	co_resume(&o.co);
}

static void test_one_await_for_children(void **state)
{
	struct probe p = { .aw = { &probe_ops }, .suspends = 1, .value = 9 };
	struct one_await o = { .a = { .in = 4, .yields = 2 }, .b = { .in = -EPIPE }, .p = &p };
	(void)state;
	co_init(&o.co, one_await_fn);
	co_init(&o.a.co, child_fn);
	co_init(&o.b.co, child_fn);
	assert_int_equal(co_resume(&o.co), CO_YIELDED);
	assert_ptr_equal(o.co.top, &o.a.co);
	assert_int_equal(co_resume(&o.co), CO_YIELDED);
	assert_int_equal(co_resume(&o.co), CO_WAITING);
	assert_int_equal(o.ra, 0);
	assert_int_equal(o.a.out, 8);
	assert_int_equal(o.picks, 2);
	/* debug builds: the NULL awaiter at the end traps */
	assert_true(traps_with(await_null_in_one_await, "CO_AWAIT: NULL awaiter"));
}
#endif

/* ---- the tiny profile: co_tiny, 4 bytes, the same macros ------------------- */

struct tgen {
	co_tiny pt;
	int i, value;
};

static int tgen_fn(struct tgen *g)
{
	co_tiny *f = &g->pt;
	CO_BEGIN(f);
	for (g->i = 0; g->i < 3; g->i++)
		CO_YIELD_VALUE(f, g->value, g->i * 7);
	CO_RETURN(f, -EPIPE);
	CO_END(f);
}

/* a child the Protothreads way: the parent polls the child's body */
struct tparent {
	co_tiny pt;
	struct tgen kid;
	volatile int *flag;
	int sum, mode, out, polls;
};

static int tparent_fn(struct tparent *p)
{
	co_tiny *f = &p->pt;
	CO_BEGIN(f);
	co_tiny_init(&p->kid.pt);
	CO_AWAIT_UNTIL(f, (p->sum += p->kid.value, tgen_fn(&p->kid) == CO_DONE));
	p->polls++;
	CO_AWAIT_UNTIL(f, *p->flag);
	switch (p->mode) { /* a suspension point inside a switch */
	case 1:
		p->out = 10;
		CO_YIELD(f);
		p->out++;
		break;
	default:
		p->out = 20;
		break;
	}
	CO_END(f);
}

static void test_tiny_profile(void **state)
{
	struct tgen g;
	struct tparent p = { .mode = 1 };
	volatile int flag = 0;
	int n = 0;
	(void)state;

	assert_int_equal(sizeof(co_tiny), 4);
	co_tiny_init(&g.pt);
	while (tgen_fn(&g) == CO_YIELDED)
		assert_int_equal(g.value, 7 * n++);
	assert_int_equal(n, 3);
	assert_true(co_tiny_done(&g.pt));
	assert_int_equal(g.pt.status, -EPIPE);
#if !CO_DEBUG
	assert_int_equal(tgen_fn(&g), CO_DONE); /* after the end: at once */
	assert_int_equal(g.i, 3);
#endif

	p.flag = &flag;
	co_tiny_init(&p.pt);
	for (int k = 0; k < 3; k++)
		assert_int_equal(tparent_fn(&p), CO_YIELDED); /* the child yields */
	assert_int_equal(tparent_fn(&p), CO_YIELDED);   /* it ended; poll the flag */
	assert_int_equal(p.polls, 1);
	assert_true(co_tiny_done(&p.kid.pt));
	assert_int_equal(p.sum, 0 + 0 + 7 + 14);
	assert_int_equal(tparent_fn(&p), CO_YIELDED);
	flag = 1;
#if CO_USE_COMPUTED_GOTO
	assert_int_equal(tparent_fn(&p), CO_YIELDED); /* inside the switch */
	assert_int_equal(p.out, 10);
	assert_int_equal(tparent_fn(&p), CO_DONE);
	assert_int_equal(p.out, 11);
#else
	p.mode = 2; /* the switch backend: no suspension inside the switch */
	assert_int_equal(tparent_fn(&p), CO_DONE);
	assert_int_equal(p.out, 20);
#endif
	assert_true(co_tiny_done(&p.pt));
	assert_int_equal(p.pt.status, 0);
}

/* ---- 1,000,000 nested awaits: a trampoline, not recursion ---------------- */

#define DEPTH 1000000

struct level {
	co_frame co;
	struct level *next; /* the child this level awaits, NULL at the leaf */
};

static int level_fn(co_frame *f)
{
	struct level *l = (struct level *)f;
	CO_BEGIN(f);
	if (l->next == NULL) {
		CO_YIELD(f); /* suspend at the bottom of the chain */
		CO_RETURN(f, 7);
	}
	co_init(&l->next->co, level_fn);
	CO_AWAIT_TASK(f, &l->next->co);
	CO_RETURN(f, co_result(f) + 1);
	CO_END(f);
}

static void test_deep_await_chain(void **state)
{
	struct level *lv = calloc(DEPTH, sizeof *lv);
	(void)state;
	assert_non_null(lv);
	for (size_t i = 0; i + 1 < DEPTH; i++)
		lv[i].next = &lv[i + 1];
	co_init(&lv[0].co, level_fn);
	assert_int_equal(co_resume(&lv[0].co), CO_YIELDED); /* down to the leaf */
	assert_ptr_equal(lv[0].co.top, &lv[DEPTH - 1].co);
	assert_int_equal(co_resume(&lv[0].co), CO_DONE); /* and all the way up */
	assert_int_equal(co_status(&lv[0].co), 7 + DEPTH - 1);
	assert_true(co_done(&lv[DEPTH / 2].co));
	free(lv);
}

/* ---- co_loop ------------------------------------------------------------- */

struct worker {
	co_frame co;
	int id, rounds, k;
	char *trace;
	int *len;
};

static int worker_fn(co_frame *f)
{
	struct worker *w = (struct worker *)f;
	CO_BEGIN(f);
	for (w->k = 0; w->k < w->rounds; w->k++) {
		w->trace[(*w->len)++] = (char)('a' + w->id);
		CO_YIELD(f);
	}
	CO_END(f);
}

static int done_count;
static void count_done(co_frame *f)
{
	(void)f;
	done_count++;
}

static void test_loop_round_robin(void **state)
{
	co_loop loop;
	struct worker w[3];
	char trace[32] = { 0 };
	int len = 0;
	(void)state;
	co_loop_init(&loop);
	done_count = 0;
	for (int i = 0; i < 3; i++) {
		w[i] = (struct worker){ .id = i, .rounds = 2 + i, .trace = trace, .len = &len };
		co_init(&w[i].co, worker_fn);
		w[i].co.on_done = count_done;
		assert_int_equal(co_loop_spawn(&loop, &w[i].co), 0);
	}
	assert_int_equal(loop.live, 3);
	assert_int_equal(co_loop_step(&loop), 3); /* one pass: each ran once */
	assert_string_equal(trace, "abc");
	assert_int_equal(co_loop_run(&loop), 0);
	assert_string_equal(trace, "abcabcbcc");
	assert_int_equal(done_count, 3);
	assert_int_equal(loop.live, 0);
}

/* A frame resumed by hand whose body hands its own frame to a loop before
 * its first suspension, when its label is still 0: the frame has started
 * (its body runs), and a spawn of a started frame is -EINVAL. Debug builds
 * see it by the marks of a running body; release builds keep none, and
 * cannot tell. Without the spawn looking at those marks, the loop takes a
 * frame that its caller goes on resuming by hand. */
static co_loop self_spawn_loop;

struct self_spawn {
	co_frame co;
	int r;
};

static int self_spawn_fn(co_frame *f)
{
	struct self_spawn *s = (struct self_spawn *)f;
	CO_BEGIN(f);
	s->r = co_loop_spawn(&self_spawn_loop, f);
	CO_YIELD(f);
	CO_END(f);
}

static void test_loop_spawn_errors(void **state)
{
	co_loop loop;
	struct counter c = { .n = 1 };
	(void)state;
	co_loop_init(&loop);
	co_init(&c.co, counter_fn);
	assert_int_equal(co_loop_spawn(NULL, &c.co), -EINVAL);
	assert_int_equal(co_loop_spawn(&loop, NULL), -EINVAL);
	assert_int_equal(co_loop_spawn(&loop, &c.co), 0);
	assert_int_equal(co_loop_spawn(&loop, &c.co), -EINVAL); /* twice */
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(co_loop_spawn(&loop, &c.co), -EINVAL); /* finished */
	co_init(&c.co, NULL);
	assert_int_equal(co_loop_spawn(&loop, &c.co), -EINVAL); /* no body */

	/* started by hand: it yielded */
	c.n = 2;
	co_init(&c.co, counter_fn);
	assert_int_equal(co_resume(&c.co), CO_YIELDED);
	assert_int_equal(co_loop_spawn(&loop, &c.co), -EINVAL);
	assert_int_equal(loop.live, 0);

	/* started by hand: its body spawns itself before its first suspension */
	struct self_spawn ss = { .r = 99 };
	co_loop_init(&self_spawn_loop);
	co_init(&ss.co, self_spawn_fn);
	assert_int_equal(co_resume(&ss.co), CO_YIELDED);
#if CO_DEBUG
	assert_int_equal(ss.r, -EINVAL);
	assert_int_equal(self_spawn_loop.live, 0);
	assert_int_equal(co_resume(&ss.co), CO_DONE);
#endif
}

/* A one-shot signal awaiter: frames park on it, a producer fires it. */
struct signal {
	co_awaiter aw;
	co_frame *parked;
	int fired, value;
};

static int signal_ready(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((struct signal *)a)->fired;
}

static int signal_suspend(co_awaiter *a, co_frame *f)
{
	((struct signal *)a)->parked = f;
	return 1;
}

static int signal_resume(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((struct signal *)a)->value;
}

static const co_awaiter_ops signal_ops = { signal_ready, signal_suspend, signal_resume, NULL, 0,
					   "signal" };

static void signal_fire(struct signal *s, int value)
{
	s->fired = 1;
	s->value = value;
	if (s->parked) {
		co_frame *f = s->parked;
		s->parked = NULL;
		co_wake(f);
	}
}

struct consumer {
	co_frame co;
	struct signal *sig;
	int got;
};

static int consumer_fn(co_frame *f)
{
	struct consumer *c = (struct consumer *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, &c->sig->aw);
	c->got = co_result(f);
	CO_END(f);
}

struct producer {
	co_frame co;
	struct signal *sig;
};

static int producer_fn(co_frame *f)
{
	struct producer *p = (struct producer *)f;
	CO_BEGIN(f);
	CO_YIELD(f);
	CO_YIELD(f);
	signal_fire(p->sig, 99);
	CO_END(f);
}

static void test_loop_wake_through_awaiter(void **state)
{
	co_loop loop;
	struct signal sig = { .aw = { &signal_ops } };
	struct consumer c = { .sig = &sig };
	struct producer p = { .sig = &sig };
	(void)state;
	co_loop_init(&loop);
	co_init(&c.co, consumer_fn);
	co_init(&p.co, producer_fn);
	assert_int_equal(co_loop_spawn(&loop, &c.co), 0);
	assert_int_equal(co_loop_spawn(&loop, &p.co), 0);
	assert_int_equal(co_loop_step(&loop), 1); /* consumer parked, producer yielded */
	assert_ptr_equal(sig.parked, &c.co);
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(c.got, 99);

	/* a frame parked forever is reported as alive, not lost */
	struct signal never = { .aw = { &signal_ops } };
	struct consumer c2 = { .sig = &never };
	co_init(&c2.co, consumer_fn);
	assert_int_equal(co_loop_spawn(&loop, &c2.co), 0);
	assert_int_equal(co_loop_run(&loop), 1);
	signal_fire(&never, 5);
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(c2.got, 5);
}

/* ---- a suspension point inside a user switch ---------------------------- */

struct sw {
	co_frame co;
	int mode, out;
};

static int switch_fn(co_frame *f)
{
	struct sw *s = (struct sw *)f;
	CO_BEGIN(f);
	switch (s->mode) {
	case 1:
		s->out = 10;
		CO_YIELD(f);
		s->out += 1;
		break;
	default:
		s->out = 20;
		break;
	}
	CO_END(f);
}

/* the same with the tiny profile */
struct tsw {
	co_tiny pt;
	int mode, out;
};

static int tswitch_fn(struct tsw *s)
{
	co_tiny *f = &s->pt;
	CO_BEGIN(f);
	switch (s->mode) {
	case 1:
		s->out = 10;
		CO_YIELD(f);
		s->out += 1;
		break;
	default:
		s->out = 20;
		break;
	}
	CO_END(f);
}

/* ---- programming errors trap loudly (CO_DEBUG) --------------------------- */

/* Runs fn in a child process; returns its wait status, stderr in err. */
static int run_in_child(void (*fn)(void), char *err, size_t size)
{
	int pipefd[2], status = -1;
	ssize_t n;
	size_t len = 0;
	pid_t pid;

	if (pipe(pipefd) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(pipefd[1], 2);
		fn();
		_exit(0);
	}
	close(pipefd[1]);
	while (len + 1 < size && (n = read(pipefd[0], err + len, size - 1 - len)) > 0)
		len += (size_t)n;
	err[len] = 0;
	close(pipefd[0]);
	waitpid(pid, &status, 0);
	return status;
}

#if CO_DEBUG || !CO_USE_COMPUTED_GOTO
/* 1 if fn aborts with msg on stderr (the switch-backend trap fires in
 * release builds too). */
static int traps_with(void (*fn)(void), const char *msg)
{
	char err[512];
	int status = run_in_child(fn, err, sizeof err);

	if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT)) {
		print_error("child did not abort: status %d, stderr '%s'\n", status, err);
		return 0;
	}
	if (strstr(err, msg) == NULL) {
		print_error("stderr '%s' lacks '%s'\n", err, msg);
		return 0;
	}
	return 1;
}
#endif

#if !CO_DEBUG
/* 1 if fn returns normally and prints nothing. */
static int harmless(void (*fn)(void))
{
	char err[512];
	int status = run_in_child(fn, err, sizeof err);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 && err[0] == 0;
}
#endif

static void misuse_resume_finished(void)
{
	struct counter c = { .n = 0 };
	co_init(&c.co, counter_fn);
	co_resume(&c.co);
	co_resume(&c.co);
}

static void misuse_wake_not_waiting(void)
{
	struct counter c = { .n = 1 };
	co_init(&c.co, counter_fn);
	co_resume(&c.co);
	co_wake(&c.co);
}

static void misuse_resume_waiting(void)
{
	static struct probe p = { .aw = { &probe_ops }, .suspends = 1 };
	static struct awaiting w = { .p = &p };
	co_init(&w.co, awaiting_fn);
	co_resume(&w.co);
	co_resume(&w.co);
}

static void misuse_resume_child(void)
{
	static struct parent p = { .a = { .yields = 1 } };
	co_init(&p.co, parent_fn);
	co_init(&p.a.co, child_fn);
	co_init(&p.b.co, child_fn);
	co_resume(&p.co);
	co_resume(&p.a.co);
}

struct borrower {
	co_frame co;
	co_frame *kid;
};

static int borrower_fn(co_frame *f)
{
	struct borrower *b = (struct borrower *)f;
	CO_BEGIN(f);
	CO_AWAIT_TASK(f, b->kid);
	CO_END(f);
}

static void misuse_await_running_child(void)
{
	/* a second parent awaits a child that runs under the first */
	static struct parent p = { .a = { .yields = 1 } };
	static struct borrower b;
	co_init(&p.co, parent_fn);
	co_init(&p.a.co, child_fn);
	co_init(&p.b.co, child_fn);
	co_resume(&p.co);
	b.kid = &p.a.co;
	co_init(&b.co, borrower_fn);
	co_resume(&b.co);
}

/* A root resumed by hand whose body, before its first suspension (its
 * label still 0), resumes another root that awaits it as a child: the
 * child runs already, and the await traps in debug builds naming that.
 * Without the await looking at the marks of a running body, it starts the
 * child's body a second time inside the first, whose CO_BEGIN traps with
 * the message of a body called as a plain function, a mistake this code
 * does not make. Release builds keep no such mark. */
#if CO_DEBUG
struct runs_other {
	co_frame co;
	co_frame *other;
	int entries;
};

static struct runs_other busy_root;
static struct borrower busy_borrower;

static int runs_other_fn(co_frame *f)
{
	struct runs_other *r = (struct runs_other *)f;
	CO_BEGIN(f);
	r->entries++;
	co_resume(r->other);
	CO_YIELD(f);
	CO_END(f);
}

static void misuse_await_running_root(void)
{
	co_init(&busy_root.co, runs_other_fn);
	co_init(&busy_borrower.co, borrower_fn);
	busy_root.other = &busy_borrower.co;
	busy_borrower.kid = &busy_root.co;
	co_resume(&busy_root.co);
}
#endif

/* NULL given where a frame, awaiter or child is due. */
struct nulls {
	co_frame co;
	int r_await, r_task;
};

static int nulls_fn(co_frame *f)
{
	struct nulls *n = (struct nulls *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, (co_awaiter *)NULL);
	n->r_await = co_result(f);
	CO_AWAIT_TASK(f, (co_frame *)NULL);
	n->r_task = co_result(f);
	CO_END(f);
}

static struct nulls nulls_probe;

static void misuse_await_nulls(void)
{
	co_init(&nulls_probe.co, nulls_fn);
	co_resume(&nulls_probe.co);
}

#if CO_DEBUG
/* Re-entry: a body resumes its own frame, or an interrupt (a signal) does
 * while the body runs (debug builds trap; release builds do not look). */
struct reenter {
	co_frame co;
	int from_signal;
};

static struct reenter reenter_probe;

static void reenter_handler(int sig)
{
	(void)sig;
	co_resume(&reenter_probe.co);
}

static int reenter_fn(co_frame *f)
{
	struct reenter *r = (struct reenter *)f;
	CO_BEGIN(f);
	CO_YIELD(f);
	if (r->from_signal)
		raise(SIGUSR1);
	else
		co_resume(f);
	CO_END(f);
}

static void misuse_reenter(int from_signal)
{
	signal(SIGUSR1, reenter_handler);
	reenter_probe.from_signal = from_signal;
	co_init(&reenter_probe.co, reenter_fn);
	co_resume(&reenter_probe.co); /* a yield: not running any more */
	co_resume(&reenter_probe.co);
}

static void misuse_reenter_self(void)
{
	misuse_reenter(0);
}

/* The same after an await whose suspend completed at once: the frame still
 * runs inside the resume that ran it, so it is still marked running (the
 * mark ends at a wake, and nothing woke it). */
struct reawait {
	co_frame co;
	struct probe p;
};

static struct reawait reawait_probe;

static int reawait_fn(co_frame *f)
{
	struct reawait *r = (struct reawait *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, &r->p.aw);
	co_resume(f);
	CO_END(f);
}

static void misuse_reenter_after_await(void)
{
	reawait_probe.p = (struct probe){ .aw = { &probe_ops }, .suspends = 0 };
	co_init(&reawait_probe.co, reawait_fn);
	co_resume(&reawait_probe.co);
}

static void misuse_reenter_signal(void)
{
	misuse_reenter(1);
}

/* A coroutine body called as a plain function on its caller's frame
 * (instead of awaited as a child with a frame of its own): its CO_BEGIN
 * finds the caller's body running on that frame, and traps. */
static int plain_helper_fn(co_frame *f)
{
	CO_BEGIN(f);
	CO_YIELD(f);
	CO_END(f);
}

static int plain_caller_fn(co_frame *f)
{
	CO_BEGIN(f);
	(void)plain_helper_fn(f); /* the misuse */
	CO_YIELD(f);
	CO_END(f);
}

static void misuse_body_called_plainly(void)
{
	co_frame fr;

	co_init(&fr, plain_caller_fn);
	co_resume(&fr);
}

/* The right way, for contrast: the same helper awaited as a child, and a
 * frame resumed many times, never trip the mark. */
struct helped {
	co_frame co;
	co_frame kid;
	int k;
};

static int helped_fn(co_frame *f)
{
	struct helped *h = (struct helped *)f;
	CO_BEGIN(f);
	for (h->k = 0; h->k < 3; h->k++) {
		co_init(&h->kid, plain_helper_fn);
		CO_AWAIT(f, &h->kid);
		CO_YIELD(f);
	}
	CO_END(f);
}

static struct tgen tiny_probe;

static void misuse_tiny_after_end(void)
{
	co_tiny_init(&tiny_probe.pt);
	while (tgen_fn(&tiny_probe) != CO_DONE)
		;
	tgen_fn(&tiny_probe);
}

static int tiny_reenter_fn(co_tiny *f)
{
	CO_BEGIN(f);
	tiny_reenter_fn(f);
	CO_END(f);
}

static void misuse_tiny_reenter(void)
{
	static co_tiny t;
	co_tiny_init(&t);
	tiny_reenter_fn(&t);
}

static void misuse_init_null(void)
{
	co_init(NULL, counter_fn);
}

static void misuse_resume_no_body(void)
{
	struct counter c;
	co_init(&c.co, NULL); /* allowed: spawns refuse it with -EINVAL */
	co_resume(&c.co);
}

static void misuse_resume_null(void)
{
	co_resume(NULL);
}

static void misuse_wake_null(void)
{
	co_wake(NULL);
}

static void misuse_done_null(void)
{
	(void)co_done(NULL);
}

/* co.h: "a NULL frame given to any function here traps in debug builds
 * with a message naming the function". Without their own checks,
 * co_tiny_done(NULL) is a segmentation fault and co_next(NULL) traps
 * naming co_resume, a function the caller never called. */
static void misuse_tiny_done_null(void)
{
	const co_tiny *volatile t = NULL;
	signal(SIGSEGV, SIG_DFL); /* a crash ends the child, not cmocka's jump */
	(void)co_tiny_done(t);
}

static void misuse_next_null(void)
{
	co_frame *volatile f = NULL;
	(void)co_next(f);
}

static void misuse_loop_null(void)
{
	co_loop_run(NULL);
}

static int task_null_fn(co_frame *f)
{
	CO_BEGIN(f);
	CO_AWAIT_TASK(f, (co_frame *)NULL);
	CO_END(f);
}

static void misuse_await_task_null(void)
{
	struct counter c;
	co_init(&c.co, task_null_fn);
	co_resume(&c.co);
}

/* An awaiter never prepared (zeroed: no ops), awaited: a debug build
 * traps naming the mistake. Without the ops check in co__await_begin the
 * await reads the ops through NULL: SIGSEGV. */
struct zeroed_await {
	co_frame co;
	co_awaiter aw;
};

static int zeroed_await_fn(co_frame *f)
{
	struct zeroed_await *z = (struct zeroed_await *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, &z->aw);
	CO_END(f);
}

static void misuse_await_zeroed(void)
{
	static struct zeroed_await z;
	co_init(&z.co, zeroed_await_fn);
	z.aw.ops = NULL;
	co_resume(&z.co);
}
#endif

#if !CO_USE_COMPUTED_GOTO
static void misuse_switch_suspension(void)
{
	struct sw s = { .mode = 1 };
	co_init(&s.co, switch_fn);
	co_resume(&s.co);
	co_resume(&s.co);
}

static void misuse_tiny_switch_suspension(void)
{
	struct tsw s = { .mode = 1 };
	co_tiny_init(&s.pt);
	tswitch_fn(&s);
	tswitch_fn(&s);
}
#endif

static void test_suspend_inside_user_switch(void **state)
{
	struct sw s = { .mode = 2 };
	(void)state;
	co_init(&s.co, switch_fn);
	assert_int_equal(co_resume(&s.co), CO_DONE);
	assert_int_equal(s.out, 20);
#if CO_USE_COMPUTED_GOTO
	/* computed goto: a suspension point inside a switch just works */
	s.mode = 1;
	co_init(&s.co, switch_fn);
	assert_int_equal(co_resume(&s.co), CO_YIELDED);
	assert_int_equal(s.out, 10);
	assert_int_equal(co_resume(&s.co), CO_DONE);
	assert_int_equal(s.out, 11);
#else
	/* switch backend: never a silent skip or restart, a loud trap */
	assert_true(traps_with(misuse_switch_suspension, "suspension point inside a switch"));
#endif
}

static void test_tiny_suspend_inside_user_switch(void **state)
{
	struct tsw s = { .mode = 2 };
	(void)state;
	co_tiny_init(&s.pt);
	assert_int_equal(tswitch_fn(&s), CO_DONE);
	assert_int_equal(s.out, 20);
#if CO_USE_COMPUTED_GOTO
	s.mode = 1;
	co_tiny_init(&s.pt);
	assert_int_equal(tswitch_fn(&s), CO_YIELDED);
	assert_int_equal(s.out, 10);
	assert_int_equal(tswitch_fn(&s), CO_DONE);
	assert_int_equal(s.out, 11);
#else
	/* debug and release builds alike: the resume finds no case and traps */
	assert_true(traps_with(misuse_tiny_switch_suspension, "suspension point inside a switch"));
	/* and a user's switch on a value equal to the point's line (what the
	 * label holds) does not jump to the point: the cases are the lines
	 * shifted up 16 bits */
	s.mode = 1;
	co_tiny_init(&s.pt);
	assert_int_equal(tswitch_fn(&s), CO_YIELDED);
	s.mode = s.pt.label;
	assert_true(s.mode > 0 && s.mode < 65536);
	s.out = 0;
	co_tiny_init(&s.pt);
	assert_int_equal(tswitch_fn(&s), CO_DONE);
	assert_int_equal(s.out, 20);
#endif
}

static void test_misuse(void **state)
{
	(void)state;
#if CO_DEBUG
	assert_true(traps_with(misuse_resume_finished, "co_resume: frame already finished"));
	assert_true(traps_with(misuse_wake_not_waiting, "co_wake: frame is not waiting"));
	assert_true(traps_with(misuse_resume_waiting, "only co_wake may make it ready"));
	assert_true(traps_with(misuse_resume_child, "resume the root frame"));
	assert_true(traps_with(misuse_await_running_child, "CO_AWAIT: child already started"));
	assert_true(traps_with(misuse_await_running_root, "CO_AWAIT: child already started"));
	assert_true(traps_with(misuse_reenter_self, "co_resume: frame is running"));
	assert_true(traps_with(misuse_reenter_signal, "co_resume: frame is running"));
	assert_true(traps_with(misuse_reenter_after_await, "co_resume: frame is running"));
	assert_true(traps_with(misuse_body_called_plainly, "called as a plain function"));
	{
		struct helped h;
		int n = 0;

		co_init(&h.co, helped_fn);
		while (co_resume(&h.co) != CO_DONE)
			n++;
		assert_int_equal(n, 6); /* 3 child yields, 3 of its own */
	}
	assert_true(traps_with(misuse_tiny_after_end, "co_tiny: resumed after its end"));
	assert_true(traps_with(misuse_tiny_reenter, "or while it runs"));
#else
	/* release builds: the detectable misuse is a harmless no-op */
	assert_true(harmless(misuse_resume_finished));
	assert_true(harmless(misuse_wake_not_waiting));
	assert_true(harmless(misuse_resume_waiting));
	assert_true(harmless(misuse_resume_child));
	assert_true(harmless(misuse_await_running_child));
	{
		/* and in detail: refused without disturbing the real parent */
		struct parent p = { .a = { .in = 3, .yields = 1 }, .b = { .in = 4 } };
		struct borrower b;
		co_init(&p.co, parent_fn);
		co_init(&p.a.co, child_fn);
		co_init(&p.b.co, child_fn);
		assert_int_equal(co_resume(&p.co), CO_YIELDED); /* a runs, yields */
		assert_int_equal(co_resume(&p.a.co), CO_WAITING); /* not by hand */
		b.kid = &p.a.co;
		co_init(&b.co, borrower_fn);
		assert_int_equal(co_resume(&b.co), CO_DONE);
		assert_int_equal(co_result(&b.co), -EBUSY);
		assert_int_equal(co_resume(&p.co), CO_DONE);
		assert_int_equal(co_status(&p.co), 6 + 8);
		/* a spawned frame is not a child either */
		co_loop l;
		struct counter c = { .n = 1 };
		co_loop_init(&l);
		co_init(&c.co, counter_fn);
		assert_int_equal(co_loop_spawn(&l, &c.co), 0);
		b.kid = &c.co;
		co_init(&b.co, borrower_fn);
		assert_int_equal(co_resume(&b.co), CO_DONE);
		assert_int_equal(co_result(&b.co), -EBUSY);
		assert_int_equal(co_loop_run(&l), 0);
		assert_int_equal(c.hits, 1);
	}
#endif
}

static void test_null_arguments(void **state)
{
	(void)state;
	assert_int_equal(co_cancel(NULL), -EINVAL);
#if CO_DEBUG
	assert_true(traps_with(misuse_init_null, "co_init: NULL frame"));
	assert_true(traps_with(misuse_resume_no_body, "co_resume: frame has no body"));
	assert_true(traps_with(misuse_resume_null, "co_resume: NULL frame"));
	assert_true(traps_with(misuse_wake_null, "co_wake: NULL frame"));
	assert_true(traps_with(misuse_done_null, "co_done: NULL frame"));
	assert_true(traps_with(misuse_tiny_done_null, "co_tiny_done: NULL frame"));
	assert_true(traps_with(misuse_next_null, "co_next: NULL frame"));
	assert_true(traps_with(misuse_loop_null, "co_loop_run: NULL loop"));
	assert_true(traps_with(misuse_await_nulls, "CO_AWAIT: NULL awaiter"));
	assert_true(traps_with(misuse_await_task_null, "CO_AWAIT: NULL child frame"));
	assert_true(traps_with(misuse_await_zeroed, "CO_AWAIT: awaiter has no ops"));
#else
	/* release: a NULL awaiter or child is an await whose value is -EINVAL */
	misuse_await_nulls();
	assert_true(co_done(&nulls_probe.co));
	assert_int_equal(nulls_probe.r_await, -EINVAL);
	assert_int_equal(nulls_probe.r_task, -EINVAL);
#endif
}

/* A child whose co_init was given no body (allowed: a spawn refuses it),
 * awaited: a debug build traps naming the mistake; a release build ends
 * the await with -EINVAL, the child untouched, and the parent goes on.
 * Without the body check in co__call_begin the trampoline calls the
 * child's NULL fn: SIGSEGV in every build. */
struct bodiless {
	co_frame co;
	co_frame kid;
	int r;
};

static int bodiless_fn(co_frame *f)
{
	struct bodiless *b = (struct bodiless *)f;
	CO_BEGIN(f);
	CO_AWAIT_TASK(f, &b->kid);
	b->r = co_result(f);
	CO_END(f);
}

static struct bodiless bodiless_probe;

static void await_child_without_body(void)
{
	bodiless_probe.r = 1;
	co_init(&bodiless_probe.co, bodiless_fn);
	co_init(&bodiless_probe.kid, NULL);
	co_resume(&bodiless_probe.co);
}

static void test_child_without_body(void **state)
{
	(void)state;
#if CO_DEBUG
	assert_true(traps_with(await_child_without_body, "CO_AWAIT: child frame has no body"));
#else
	assert_true(harmless(await_child_without_body));
	await_child_without_body();
	assert_true(co_done(&bodiless_probe.co));
	assert_int_equal(bodiless_probe.r, -EINVAL);
	assert_false(co_done(&bodiless_probe.kid));
	assert_int_equal(bodiless_probe.kid.label, 0);
#endif
}

/* ---- what a stranger reads back ------------------------------------------ */

/* A co_tiny's status is one byte, -128 to 127 (the frame stays 4 bytes):
 * those come back as given; a CO_RETURN outside keeps the nearer end, -128
 * or 127, never another number (a signed char took 133 for 123: Linux's
 * EHWPOISON; newlib's ECANCELED is 140), and a debug build traps. */
struct tret {
	co_tiny pt;
	int err;
};

static int tret_fn(struct tret *t)
{
	co_tiny *f = &t->pt;
	CO_BEGIN(f);
	CO_RETURN(f, t->err);
	CO_END(f);
}

static int tiny_status_of(int err)
{
	struct tret t = { .err = err };

	co_tiny_init(&t.pt);
	assert_int_equal(tret_fn(&t), CO_DONE);
	assert_true(co_tiny_done(&t.pt));
	return t.pt.status;
}

#if CO_DEBUG
static void tiny_return_133(void)
{
	(void)tiny_status_of(-133);
}
#endif

static void test_tiny_status_range(void **state)
{
	static const int kept[] = { 0, 1, -1, -125, -127, -128, 127 };
	(void)state;

	for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
		assert_int_equal(tiny_status_of(kept[i]), kept[i]);
#if CO_DEBUG
	assert_true(traps_with(tiny_return_133, "CO_RETURN: status out of a co_tiny's range"));
#else
	assert_int_equal(tiny_status_of(-133), -128);
	assert_int_equal(tiny_status_of(-140), -128);
	assert_int_equal(tiny_status_of(-100000), -128);
	assert_int_equal(tiny_status_of(128), 127);
	assert_int_equal(tiny_status_of(200), 127);
#endif
}

/* Release builds: firmware.md's pitfall table promises "a no-op returning
 * CO_DONE" for a finished co_frame resumed again (test_misuse only checks
 * that the call returns and prints nothing), and co.h CO_WAITING for a
 * frame that waits. The body must not run again. */
static void test_release_misuse_answers(void **state)
{
	(void)state;
#if CO_DEBUG
	skip();
#else
	struct counter c = { .n = 1 };
	struct probe p = { .aw = { &probe_ops }, .suspends = 1, .value = 5 };
	struct awaiting w = { .p = &p };

	co_init(&c.co, counter_fn);
	assert_int_equal(co_resume(&c.co), CO_YIELDED);
	assert_int_equal(co_resume(&c.co), CO_DONE);
	assert_int_equal(co_resume(&c.co), CO_DONE); /* finished: no-op */
	assert_int_equal(co_resume(&c.co), CO_DONE);
	assert_int_equal(c.hits, 1);
	assert_int_equal(c.i, 1);

	co_init(&w.co, awaiting_fn);
	assert_int_equal(co_resume(&w.co), CO_WAITING);
	assert_int_equal(co_resume(&w.co), CO_WAITING); /* waiting: no-op */
	assert_string_equal(p.log, "rs");
	assert_int_equal(w.after, 0);
	co_wake(&w.co);
	assert_int_equal(co_resume(&w.co), CO_DONE);
	assert_int_equal(w.got, 5);
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_yield_and_end),
		cmocka_unit_test(test_return_status),
		cmocka_unit_test(test_generator),
		cmocka_unit_test(test_generator_that_waits),
		cmocka_unit_test(test_void_pointer_is_an_awaiter),
		cmocka_unit_test(test_await_suspends_then_wakes),
		cmocka_unit_test(test_init_resets_every_field),
		cmocka_unit_test(test_waiting_query),
		cmocka_unit_test(test_await_ready_skips_suspend),
		cmocka_unit_test(test_await_suspend_declines),
		cmocka_unit_test(test_await_optional_ops),
		cmocka_unit_test(test_await_until),
		cmocka_unit_test(test_cancel_waiting_await),
		cmocka_unit_test(test_cancel_without_cancel_op),
		cmocka_unit_test(test_cancelled_consumer_must_check),
		cmocka_unit_test(test_child_results_and_errors),
		cmocka_unit_test(test_child_suspends_and_transfers_back),
		cmocka_unit_test(test_child_already_done),
		cmocka_unit_test(test_child_waits_on_awaiter),
		cmocka_unit_test(test_one_await_for_children),
		cmocka_unit_test(test_tiny_profile),
		cmocka_unit_test(test_tiny_suspend_inside_user_switch),
		cmocka_unit_test(test_deep_await_chain),
		cmocka_unit_test(test_loop_round_robin),
		cmocka_unit_test(test_loop_spawn_errors),
		cmocka_unit_test(test_loop_wake_through_awaiter),
		cmocka_unit_test(test_suspend_inside_user_switch),
		cmocka_unit_test(test_misuse),
		cmocka_unit_test(test_null_arguments),
		cmocka_unit_test(test_child_without_body),
		cmocka_unit_test(test_tiny_status_range),
		cmocka_unit_test(test_release_misuse_answers),
	};
	return cmocka_run_group_tests_name(CO_USE_COMPUTED_GOTO ? "co (computed goto)" : "co (switch)",
					   tests, NULL, NULL);
}
