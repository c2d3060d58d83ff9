/* SPDX-License-Identifier: MIT */
/*
 * loop.h on the host: interrupt wake-ups (a signal handler is the
 * interrupt, signals masked are interrupts masked), the idle sleep, tick
 * timers across the wrap of 16- and 32-bit clocks, co_loop_timeout and
 * co_notify. Built twice: with compare-and-swap, and with CO_LOOP_NO_CAS
 * (the Cortex-M0 path: the push inside the critical section).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <cmocka.h>

/* Interrupts are SIGUSR1; masking them is blocking it. */
static sigset_t irq_set;
#define CO_IRQ_STATE sigset_t
#define CO_IRQ_SAVE(s) pthread_sigmask(SIG_BLOCK, &irq_set, &(s))
#define CO_IRQ_RESTORE(s) pthread_sigmask(SIG_SETMASK, &(s), NULL)

#include <coring/co.h>
#include <coring/loop.h>

#include "sanitized.h"

/* ---- interrupt wake-ups ------------------------------------------------- */

#define WAITERS 8

static co_notify notes[WAITERS];
static atomic_ulong handled;       /* gives made by the handler */
static atomic_int giving = 1;      /* 0: the handler only interrupts */
static sem_t acked;                /* the handler ran (the sender waits) */
static unsigned long taken[WAITERS];

struct taker {
	co_frame co;
	int i;
	co_notify_wait w;
};

static int taker_fn(co_frame *f)
{
	struct taker *t = (struct taker *)f;
	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_notify_take(&t->w, &notes[t->i]));
		assert_int_equal(co_result(f), 0);
		taken[t->i]++;
	}
	CO_END(f);
}

/* Keep the loop busy (its queue always moving, no sleep) for most of the
 * interrupts: those land inside queue operations. The rest land while the
 * loop sleeps or is about to. */
struct busy {
	co_frame co;
	unsigned long half;
};

static int busy_fn(co_frame *f)
{
	struct busy *b = (struct busy *)f;
	CO_BEGIN(f);
	while (atomic_load(&handled) < b->half)
		CO_YIELD(f);
	CO_END(f);
}

static void irq_handler(int sig)
{
	(void)sig;
	unsigned long k = atomic_load(&handled);

	if (atomic_load(&giving)) {
		co_notify_give(&notes[k % WAITERS]);
		atomic_store(&handled, k + 1);
		sem_post(&acked); /* async-signal-safe */
	}
}

/* Interrupts are SIGUSR1, handled by irq_handler (which gives); l empty. */
static void irq_setup(co_loop *l)
{
	struct sigaction sa = { .sa_handler = irq_handler };

	sigemptyset(&irq_set);
	sigaddset(&irq_set, SIGUSR1);
	sigaction(SIGUSR1, &sa, NULL);
	atomic_store(&handled, 0);
	atomic_store(&giving, 1);
	sem_init(&acked, 0, 0);
	co_loop_init(l);
}

struct sender {
	pthread_t target;
	unsigned long n;
	atomic_int done;
};

static void *sender_fn(void *arg)
{
	struct sender *s = arg;

	/* one signal at a time, each answered by the handler (standard signals
	 * do not queue): each lands wherever main happens to be */
	for (unsigned long k = 0; k < s->n; k++) {
		pthread_kill(s->target, SIGUSR1);
		while (sem_wait(&acked) != 0)
			;
	}
	atomic_store(&giving, 0);
	atomic_store(&s->done, 1);
	/* hang guard only: keep interrupting a main loop that would otherwise
	 * sleep for ever if a wake-up were lost (it then fails on the counts) */
	for (int k = 0; k < 20000 && atomic_load(&s->done) == 1; k++) {
		pthread_kill(s->target, SIGUSR1);
		usleep(100);
	}
	return NULL;
}

struct idle_probe {
	co_loop *loop;
	unsigned long sleeps;
	unsigned long late; /* found something ready under the mask: a race */
};

static void sleep_for_irq(void *arg)
{
	struct idle_probe *p = arg;
	sigset_t m;

	/* interrupts are masked since co_loop_idle looked: nothing can have
	 * become ready in between */
	p->sleeps++;
	if (p->loop->ready || co__loop_has_pending(p->loop)) {
		p->late++; /* the failure, counted; sleeping now could hang */
		return;
	}
	pthread_sigmask(SIG_SETMASK, NULL, &m);
	sigdelset(&m, SIGUSR1);
	sigsuspend(&m); /* unmask and wait, in one step; masked again after */
}

static unsigned long taken_total(void)
{
	unsigned long sum = 0;
	for (int i = 0; i < WAITERS; i++)
		sum += taken[i];
	return sum;
}

/* Every give an interrupt makes is taken exactly once: none lost to a race
 * with the loop's queue or with the idle check, none twice, the queue
 * never corrupted, while the loop steps and sleeps. */
static void test_interrupt_wakes_never_lost(void **state)
{
	struct taker t[WAITERS];
	struct busy busy[3];
	struct sender s = { .target = pthread_self(), .n = CO_TEST_SANITIZED ? 20000 : 50000 };
	co_loop loop;
	pthread_t th;
	struct idle_probe idle = { .loop = &loop };
	unsigned long steps = 0;
	(void)state;

	irq_setup(&loop);
	for (int i = 0; i < WAITERS; i++) {
		co_notify_init(&notes[i], UINT_MAX);
		taken[i] = 0;
		t[i].i = i;
		co_init(&t[i].co, taker_fn);
		assert_int_equal(co_loop_spawn(&loop, &t[i].co), 0);
	}
	for (int i = 0; i < 3; i++) {
		busy[i].half = s.n - s.n / 8;
		co_init(&busy[i].co, busy_fn);
		assert_int_equal(co_loop_spawn(&loop, &busy[i].co), 0);
	}
	assert_int_equal(pthread_create(&th, NULL, sender_fn, &s), 0);
	while (!(atomic_load(&s.done) && taken_total() == atomic_load(&handled))) {
		co_loop_step(&loop);
		co_loop_idle(&loop, sleep_for_irq, &idle);
		steps++;
		if (atomic_load(&s.done) && loop.ready == 0 && !co__loop_has_pending(&loop) &&
		    taken_total() != atomic_load(&handled)) {
			/* nothing left to run: the counts are final */
			break;
		}
	}
	atomic_store(&s.done, 2);
	pthread_join(th, NULL);
	signal(SIGUSR1, SIG_IGN);
	sem_destroy(&acked);
	assert_int_equal(atomic_load(&handled), s.n);
	assert_int_equal(taken_total(), s.n);
	for (int i = 0; i < WAITERS; i++) {
		assert_int_equal(taken[i], s.n / WAITERS + (i < (int)(s.n % WAITERS)));
		assert_int_equal(notes[i].count, 0);
		assert_true(co_waiting(&t[i].co));
	}
	assert_int_equal(loop.live, WAITERS); /* the busy ones ended */
	/* the queue is whole: empty, and its count says so */
	assert_int_equal(loop.ready, 0);
	assert_null(loop.head);
	assert_null(loop.tail);
	assert_null(loop.pending);
	assert_int_equal(idle.late, 0); /* never slept with a wake-up in */
	print_message("%lu interrupt gives, %lu steps, %lu sleeps\n", s.n, steps, idle.sleeps);
}

/* ---- the idle sleep ------------------------------------------------------ */

struct yielder {
	co_frame co;
	int n;
};

static int yielder_fn(co_frame *f)
{
	struct yielder *y = (struct yielder *)f;
	CO_BEGIN(f);
	while (y->n-- > 0)
		CO_YIELD(f);
	CO_END(f);
}

static void count_sleep(void *arg)
{
	++*(int *)arg;
}

static co_tick fake_now;
static co_tick fake_clock(void)
{
	return fake_now;
}

/* ---- tick timers ------------------------------------------------------- */

struct sleeper {
	co_frame co;
	co_loop *l;
	co_tick ticks;
	co_tick woke;
	int res;
	co_timer t;
};

static int sleeper_fn(co_frame *f)
{
	struct sleeper *s = (struct sleeper *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep_ticks(&s->t, s->l, s->ticks));
	s->res = co_result(f);
	s->woke = fake_now;
	CO_END(f);
}

/* Sleeps across the wrap of a `bits`-bit clock: each wakes on the first
 * step at or after its deadline, never before, in deadline order. */
static void sleeps_across_the_wrap(unsigned bits)
{
	const co_tick mask = bits == 32 ? 0xffffffffu : (1u << bits) - 1;
	const co_tick lens[] = { 0, 1, 5, 16, 16, 40, 100, 3 };
	enum { N = sizeof lens / sizeof lens[0] };
	struct sleeper s[N];
	co_loop loop;
	co_tick start = mask - 20, dl;

	fake_now = start;
	co_loop_init(&loop);
	assert_int_equal(co_loop_set_clock(&loop, fake_clock, bits), 0);
	for (int i = 0; i < N; i++) {
		s[i] = (struct sleeper){ .l = &loop, .ticks = lens[i], .res = 99 };
		co_init(&s[i].co, sleeper_fn);
		assert_int_equal(co_loop_spawn(&loop, &s[i].co), 0);
	}
	co_loop_step(&loop); /* all sleep but the 0-tick one */
	assert_true(co_done(&s[0].co));
	assert_true(co_loop_next_deadline(&loop, &dl));
	assert_int_equal(dl, (start + 1) & mask);
	for (co_tick k = 1; k <= 120; k++) {
		fake_now = (start + k) & mask;
		co_loop_step(&loop);
		for (int i = 1; i < N; i++) {
			/* done exactly from its deadline on */
			assert_int_equal(co_done(&s[i].co), k >= lens[i]);
			if (co_done(&s[i].co)) {
				assert_int_equal(s[i].res, 0);
				assert_int_equal(s[i].woke, (start + lens[i]) & mask);
			}
		}
	}
	assert_int_equal(loop.live, 0);
	assert_false(co_loop_next_deadline(&loop, &dl));
}

static void test_timers_across_16_bit_wrap(void **state)
{
	(void)state;
	sleeps_across_the_wrap(16);
}

static void test_timers_across_32_bit_wrap(void **state)
{
	(void)state;
	sleeps_across_the_wrap(32);
	sleeps_across_the_wrap(8);
}

/* co_loop_next_deadline gives a tick of the clock: a value the clock can
 * show, 0 to 2^bits - 1, which a tickless idle writes to a compare
 * register of that width or compares with now(). Without the deadline
 * kept modulo the clock's width, a sleep across the wrap of a 16-bit clock
 * reports 0x10010 for the tick the clock shows as 0x0010, and a tickless
 * idle that waits until now() reaches it never wakes. */
static void test_next_deadline_in_the_clocks_range(void **state)
{
	static const unsigned widths[] = { 1, 8, 16, 31 };
	(void)state;

	for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
		const unsigned bits = widths[w];
		const co_tick mask = (co_tick)((1u << bits) - 1);
		const co_tick len = bits == 1 ? 0 : 32 > mask / 2 ? mask / 2 : 32;
		struct sleeper s = { .ticks = len, .res = 99 };
		co_loop loop;
		co_tick dl = 0xdeadbeefu;

		fake_now = mask; /* the clock's last value before the wrap */
		co_loop_init(&loop);
		assert_int_equal(co_loop_set_clock(&loop, fake_clock, bits), 0);
		s.l = &loop;
		co_init(&s.co, sleeper_fn);
		assert_int_equal(co_loop_spawn(&loop, &s.co), 0);
		co_loop_step(&loop);
		if (len == 0) { /* a 1-bit clock: no sleep but 0 ticks */
			assert_true(co_done(&s.co));
			continue;
		}
		assert_true(co_loop_next_deadline(&loop, &dl));
		assert_int_equal(dl, (mask + len) & mask);
		assert_true(dl <= mask);
		fake_now = dl;
		co_loop_step(&loop);
		assert_true(co_done(&s.co));
		assert_int_equal(s.res, 0);
	}
}

/* co_loop_idle sleeps only when nothing is ready, woken or due. */
static void test_idle_sleeps_only_when_nothing_is_ready(void **state)
{
	co_loop loop;
	struct sleeper sl = { .ticks = 5, .res = 99 };
	struct yielder y = { .n = 2 };
	struct taker t = { .i = 0 };
	int slept = 0;
	(void)state;

	sigemptyset(&irq_set);
	co_loop_init(&loop);
	assert_int_equal(co_loop_idle(&loop, count_sleep, &slept), 1); /* empty */
	co_init(&y.co, yielder_fn);
	assert_int_equal(co_loop_spawn(&loop, &y.co), 0);
	assert_int_equal(co_loop_idle(&loop, count_sleep, &slept), 0); /* spawned */
	co_loop_step(&loop);
	assert_int_equal(co_loop_idle(&loop, count_sleep, &slept), 0); /* it yielded */
	co_loop_run(&loop);
	assert_int_equal(co_loop_idle(&loop, count_sleep, &slept), 1);

	/* a frame woken (as from an interrupt) but not yet stepped is ready */
	co_notify_init(&notes[0], 1);
	taken[0] = 0;
	co_init(&t.co, taker_fn);
	assert_int_equal(co_loop_spawn(&loop, &t.co), 0);
	co_loop_step(&loop);
	assert_true(co_waiting(&t.co));
	assert_int_equal(co_loop_idle(&loop, count_sleep, &slept), 1);
	co_notify_give(&notes[0]);
	assert_int_equal(co_loop_idle(&loop, count_sleep, &slept), 0);
	co_loop_step(&loop);
	assert_int_equal(taken[0], 1);

	/* a timer not yet due lets it sleep; one that is due is ready */
	fake_now = 0;
	assert_int_equal(co_loop_set_clock(&loop, fake_clock, 32), 0);
	sl.l = &loop;
	co_init(&sl.co, sleeper_fn);
	assert_int_equal(co_loop_spawn(&loop, &sl.co), 0);
	co_loop_step(&loop);
	assert_int_equal(co_loop_idle(&loop, count_sleep, &slept), 1);
	fake_now = 5;
	assert_int_equal(co_loop_idle(&loop, count_sleep, &slept), 0);
	co_loop_step(&loop);
	assert_true(co_done(&sl.co));
	assert_int_equal(slept, 4);
}

/* An interrupt that lands after co_loop_idle has looked and before it
 * sleeps: the clock read, the check's last step, raises it. With the mask
 * held from the check through the sleep it stays pending until the sleep
 * unmasks (as WFI wakes for it), so the sleep is short and nothing was
 * ready when it began. Without the mask the handler would run inside the
 * check, and the loop would go to sleep with the woken frame queued. */
static int raise_in_now;

static co_tick raising_clock(void)
{
	if (raise_in_now) {
		raise_in_now = 0;
		raise(SIGUSR1);
	}
	return fake_now;
}

static void test_idle_masks_from_check_to_sleep(void **state)
{
	struct idle_probe idle;
	struct sleeper sl = { .ticks = 100, .res = 99 };
	struct taker t = { .i = 0 };
	co_loop loop;
	(void)state;

	irq_setup(&loop);
	idle = (struct idle_probe){ .loop = &loop };
	fake_now = 0;
	raise_in_now = 0;
	assert_int_equal(co_loop_set_clock(&loop, raising_clock, 32), 0);
	co_notify_init(&notes[0], 1);
	taken[0] = 0;
	co_init(&t.co, taker_fn);
	assert_int_equal(co_loop_spawn(&loop, &t.co), 0);
	sl.l = &loop;
	co_init(&sl.co, sleeper_fn); /* a timer not due: the check reads the clock */
	assert_int_equal(co_loop_spawn(&loop, &sl.co), 0);
	co_loop_step(&loop);
	assert_true(co_waiting(&t.co));
	assert_true(co_waiting(&sl.co));

	raise_in_now = 1;
	assert_int_equal(co_loop_idle(&loop, sleep_for_irq, &idle), 1);
	assert_int_equal(raise_in_now, 0); /* the check read the clock */
	assert_int_equal(idle.sleeps, 1);
	assert_int_equal(idle.late, 0); /* nothing was ready when it slept */
	assert_int_equal(atomic_load(&handled), 1);
	co_loop_step(&loop);
	assert_int_equal(taken[0], 1);
	signal(SIGUSR1, SIG_IGN);
	sem_destroy(&acked);
}

/* ---- co_loop_timeout, cancellation, errors -------------------------------- */

struct limited {
	co_frame co;
	co_loop *l;
	co_notify *n;
	co_tick ticks;
	int res;
	co_timer t;
	co_notify_wait w;
};

static int limited_fn(co_frame *f)
{
	struct limited *s = (struct limited *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_loop_timeout(&s->t, s->l, co_notify_take(&s->w, s->n), s->ticks));
	s->res = co_result(f);
	CO_END(f);
}

static void test_timeout_and_cancel(void **state)
{
	co_loop loop;
	co_notify n;
	struct limited a = { .ticks = 10, .res = 99 }, b = { .ticks = 10, .res = 99 };
	struct sleeper s = { .ticks = 50, .res = 99 };
	co_tick dl;
	(void)state;

	sigemptyset(&irq_set);
	fake_now = 1000;
	co_loop_init(&loop);
	assert_int_equal(co_loop_set_clock(&loop, fake_clock, 32), 0);
	co_notify_init(&n, 1);

	/* the limit runs out: -ETIME, the take is off the notify */
	a.l = &loop;
	a.n = &n;
	co_init(&a.co, limited_fn);
	assert_int_equal(co_loop_spawn(&loop, &a.co), 0);
	co_loop_step(&loop);
	assert_true(co_loop_next_deadline(&loop, &dl));
	assert_int_equal(dl, 1010);
	fake_now = 1009;
	co_loop_step(&loop);
	assert_false(co_done(&a.co));
	fake_now = 1010;
	co_loop_step(&loop);
	co_loop_step(&loop);
	assert_true(co_done(&a.co));
	assert_int_equal(a.res, -ETIME);
	assert_null(n.waiter);
	assert_false(co_loop_next_deadline(&loop, &dl));

	/* the give comes first: 0, and the timer is disarmed */
	b.l = &loop;
	b.n = &n;
	co_init(&b.co, limited_fn);
	assert_int_equal(co_loop_spawn(&loop, &b.co), 0);
	co_loop_step(&loop);
	assert_int_equal(co_notify_give(&n), 1);
	co_loop_step(&loop);
	assert_true(co_done(&b.co));
	assert_int_equal(b.res, 0);
	assert_false(co_loop_next_deadline(&loop, &dl));

	/* co_cancel ends a sleep with -ECANCELED and disarms it */
	s.l = &loop;
	co_init(&s.co, sleeper_fn);
	assert_int_equal(co_loop_spawn(&loop, &s.co), 0);
	co_loop_step(&loop);
	assert_true(co_loop_next_deadline(&loop, NULL));
	assert_int_equal(co_cancel(&s.co), 0);
	co_loop_step(&loop);
	assert_true(co_done(&s.co));
	assert_int_equal(s.res, -ECANCELED);
	assert_false(co_loop_next_deadline(&loop, &dl));

	/* co_cancel of a limited take: -ECANCELED, not -ETIME */
	a.res = 99;
	co_init(&a.co, limited_fn);
	assert_int_equal(co_loop_spawn(&loop, &a.co), 0);
	co_loop_step(&loop);
	assert_int_equal(co_cancel(&a.co), 0);
	co_loop_step(&loop);
	assert_int_equal(a.res, -ECANCELED);
	assert_false(co_loop_next_deadline(&loop, &dl));
	assert_int_equal(loop.live, 0);
}

/* A limit whose time comes after its await ended: the await completed (a
 * give, a user's awaiter completed from an interrupt) or was cancelled
 * (co_cancel), and its frame has not run yet when the step that fires the
 * limit's timer comes (woken frames join the queue after the timers
 * fire). The limit cut nothing short: the await keeps its own value (5, 0,
 * -ECANCELED), and the awaiter's cancel op is not called on a frame that
 * no longer waits (co.h: cancel runs "while f waits"; this one wakes the
 * frame, as the contract lets it, so a second call would wake it twice).
 * Without the limit's look at whether its frame still waits, the cancel
 * op runs again (a debug build traps in co_wake) and the value is -ETIME. */
struct gate {
	co_awaiter aw;
	co_frame *f;
	int res, cancels;
};

static int gate_suspend(co_awaiter *a, co_frame *f)
{
	((struct gate *)a)->f = f;
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

	g->cancels++;
	g->res = -ECANCELED;
	g->f = NULL;
	co_wake(f);
	return 0;
}

static const co_awaiter_ops gate_ops = { NULL, gate_suspend, gate_resume, gate_cancel, 0, "gate" };

struct gated {
	co_frame co;
	co_loop *l;
	co_notify *n; /* NULL: the gate */
	int res;
	co_timer t;
	co_notify_wait w;
	struct gate g;
};

static int gated_fn(co_frame *f)
{
	struct gated *s = (struct gated *)f;
	CO_BEGIN(f);
	if (s->n)
		CO_AWAIT(f, co_loop_timeout(&s->t, s->l, co_notify_take(&s->w, s->n), 10));
	else
		CO_AWAIT(f, co_loop_timeout(&s->t, s->l, &s->g.aw, 10));
	s->res = co_result(f);
	CO_END(f);
}

enum { END_COMPLETE, END_CANCEL };

static void limit_due_after_end(co_loop *loop, co_notify *n, int how, int want)
{
	struct gated s = { .l = loop, .n = n, .res = 99, .g = { .aw = { &gate_ops } } };
	co_tick dl = 0;

	co_init(&s.co, gated_fn);
	assert_int_equal(co_loop_spawn(loop, &s.co), 0);
	co_loop_step(loop); /* waits; the limit's timer armed */
	assert_true(co_loop_next_deadline(loop, &dl));
	if (how == END_CANCEL) {
		assert_int_equal(co_cancel(&s.co), 0);
	} else if (n) {
		assert_int_equal(co_notify_give(n), 1);
	} else {
		co_frame *f = s.g.f;

		s.g.f = NULL;
		s.g.res = 5;
		co_wake(f);
	}
	assert_false(co_done(&s.co));
	fake_now = dl; /* the limit is due at the step that runs the frame */
	co_loop_step(loop);
	assert_true(co_done(&s.co));
	assert_int_equal(s.res, want);
	if (!n)
		assert_int_equal(s.g.cancels, how == END_CANCEL);
	assert_false(co_loop_next_deadline(loop, &dl));
}

static void test_limit_due_after_its_await_ended(void **state)
{
	co_loop loop;
	co_notify n;
	(void)state;

	sigemptyset(&irq_set);
	fake_now = 1000;
	co_loop_init(&loop);
	assert_int_equal(co_loop_set_clock(&loop, fake_clock, 32), 0);
	co_notify_init(&n, 1);
	limit_due_after_end(&loop, NULL, END_COMPLETE, 5);
	limit_due_after_end(&loop, NULL, END_CANCEL, -ECANCELED);
	limit_due_after_end(&loop, &n, END_COMPLETE, 0);
	limit_due_after_end(&loop, &n, END_CANCEL, -ECANCELED);
}

static int no_cancel_suspend(co_awaiter *a, co_frame *f)
{
	(void)a;
	(void)f;
	return 0;
}

static void test_timer_errors(void **state)
{
	static const co_awaiter_ops no_cancel = { NULL, no_cancel_suspend, NULL, NULL, 0, NULL };
	co_awaiter plain = { &no_cancel }, zeroed = { NULL };
	co_loop loop, bare;
	co_timer t;
	co_notify n;
	co_notify_wait w;
	(void)state;

	co_loop_init(&loop);
	co_loop_init(&bare);
	co_notify_init(&n, 1);
	assert_int_equal(co_loop_set_clock(NULL, fake_clock, 32), -EINVAL);
	assert_int_equal(co_loop_set_clock(&loop, NULL, 32), -EINVAL);
	assert_int_equal(co_loop_set_clock(&loop, fake_clock, 0), -EINVAL);
	assert_int_equal(co_loop_set_clock(&loop, fake_clock, 33), -EINVAL);
	assert_int_equal(co_loop_set_clock(&loop, fake_clock, 16), 0);
	/* less than half the clock's range */
	assert_non_null(co_sleep_ticks(&t, &loop, 32767));
	assert_null(co_sleep_ticks(&t, &loop, 32768));
	assert_null(co_sleep_ticks(&t, &bare, 1)); /* no clock */
	assert_null(co_sleep_ticks(NULL, &loop, 1));
	assert_null(co_sleep_ticks(&t, NULL, 1));
	assert_null(co_loop_timeout(&t, &loop, &plain, 5)); /* no cancel op */
	/* no ops at all (zeroed, never prepared): no cancel op either.
	 * Without the ops check co_loop_timeout reads the cancel op through
	 * NULL (SIGSEGV). */
	assert_null(co_loop_timeout(&t, &loop, &zeroed, 5));
	assert_null(co_loop_timeout(&t, &loop, NULL, 5));
	assert_null(co_loop_timeout(&t, &loop, co_notify_take(&w, &n), 32768));
	assert_null(co_notify_take(NULL, &n));
	assert_null(co_notify_take(&w, NULL));
	assert_int_equal(co_loop_next_deadline(NULL, NULL), 0);
}

/* ---- co_notify ----------------------------------------------------------- */

static void test_notify_counts_and_one_waiter(void **state)
{
	co_loop loop;
	co_notify ev, sem;
	struct limited a = { .ticks = 100, .res = 99 }, b = { .ticks = 100, .res = 99 };
	(void)state;

	sigemptyset(&irq_set);
	fake_now = 0;
	co_loop_init(&loop);
	assert_int_equal(co_loop_set_clock(&loop, fake_clock, 32), 0);

	/* max 1: an event; a second give while set is dropped */
	co_notify_init(&ev, 1);
	assert_int_equal(co_notify_give(&ev), 1);
	assert_int_equal(co_notify_give(&ev), 0);
	/* max 3: a counting semaphore */
	co_notify_init(&sem, 3);
	for (int k = 0; k < 3; k++)
		assert_int_equal(co_notify_give(&sem), 1);
	assert_int_equal(co_notify_give(&sem), 0);
	assert_int_equal(sem.count, 3);

	/* a count is taken without suspending */
	a.l = &loop;
	a.n = &ev;
	co_init(&a.co, limited_fn);
	assert_int_equal(co_resume(&a.co), CO_DONE);
	assert_int_equal(a.res, 0);
	assert_int_equal(ev.count, 0);

	/* a second waiter on one notify: -EBUSY, the first still waits */
	a.res = 99;
	co_init(&a.co, limited_fn);
	b.l = &loop;
	b.n = &ev;
	co_init(&b.co, limited_fn);
	assert_int_equal(co_loop_spawn(&loop, &a.co), 0);
	assert_int_equal(co_loop_spawn(&loop, &b.co), 0);
	co_loop_step(&loop);
	assert_true(co_done(&b.co));
	assert_int_equal(b.res, -EBUSY);
	assert_true(co_waiting(&a.co));
	assert_int_equal(co_notify_give(&ev), 1);
	co_loop_run(&loop);
	assert_int_equal(a.res, 0);
	assert_int_equal(loop.live, 0);
}

/* ---- co_isr_queue --------------------------------------------------------- */

struct qtaker {
	co_frame co;
	co_isr_queue *q;
	co_loop *l;
	co_isr_queue_wait w;
	co_timer t;
	uintptr_t got[8];
	int n, res;
};

static int qtaker_fn(co_frame *f)
{
	struct qtaker *k = (struct qtaker *)f;
	CO_BEGIN(f);
	for (k->n = 0; k->n < 4; k->n++) {
		CO_AWAIT(f, co_isr_queue_take(&k->w, k->q));
		k->got[k->n] = (uintptr_t)k->w.item;
	}
	CO_AWAIT(f, co_loop_timeout(&k->t, k->l, co_isr_queue_take(&k->w, k->q), 5));
	k->res = co_result(f);
	CO_END(f);
}

static void test_isr_queue(void **state)
{
	void *slots[3];
	co_isr_queue q;
	co_loop loop;
	struct qtaker k = { .q = &q, .l = &loop };
	(void)state;

	sigemptyset(&irq_set);
	assert_int_equal(co_isr_queue_init(&q, NULL, 3), -EINVAL);
	assert_int_equal(co_isr_queue_init(&q, slots, 0), -EINVAL);
	assert_int_equal(co_isr_queue_init(NULL, slots, 3), -EINVAL);
	assert_int_equal(co_isr_queue_init(&q, slots, 3), 0);
	assert_null(co_isr_queue_take(NULL, &q));
	fake_now = 0;
	co_loop_init(&loop);
	assert_int_equal(co_loop_set_clock(&loop, fake_clock, 32), 0);
	/* three fit, the fourth does not and changes nothing */
	assert_int_equal(co_isr_queue_put(&q, (void *)1), 1);
	assert_int_equal(co_isr_queue_put(&q, (void *)2), 1);
	assert_int_equal(co_isr_queue_put(&q, (void *)3), 1);
	assert_int_equal(co_isr_queue_put(&q, (void *)4), 0);
	co_init(&k.co, qtaker_fn);
	assert_int_equal(co_loop_spawn(&loop, &k.co), 0);
	co_loop_run(&loop);
	assert_true(co_waiting(&k.co)); /* took three, waits for the fourth */
	assert_int_equal(co_isr_queue_put(&q, (void *)5), 1);
	co_loop_run(&loop);
	assert_int_equal(k.got[0], 1); /* first in, first out */
	assert_int_equal(k.got[1], 2);
	assert_int_equal(k.got[2], 3);
	assert_int_equal(k.got[3], 5);
	fake_now = 5; /* the limited take finds nothing */
	co_loop_run(&loop);
	assert_int_equal(k.res, -ETIME);
	assert_int_equal(loop.live, 0);
	assert_int_equal(q.count, 0);

	/* the ring wraps in place: the oldest is at slot 1 now, so the third
	 * put lands in slot 0 (a compare, no division), still first out */
	assert_int_equal(co_isr_queue_put(&q, (void *)6), 1);
	assert_int_equal(co_isr_queue_put(&q, (void *)7), 1);
	assert_int_equal(co_isr_queue_put(&q, (void *)8), 1);
	assert_int_equal(co_isr_queue_put(&q, (void *)9), 0);
	assert_ptr_equal(slots[0], (void *)8);
	memset(&k, 0, sizeof k);
	k.q = &q;
	k.l = &loop;
	co_init(&k.co, qtaker_fn);
	assert_int_equal(co_loop_spawn(&loop, &k.co), 0);
	co_loop_run(&loop);
	assert_int_equal(co_isr_queue_put(&q, (void *)10), 1);
	co_loop_run(&loop);
	assert_int_equal(k.got[0], 6);
	assert_int_equal(k.got[1], 7);
	assert_int_equal(k.got[2], 8);
	assert_int_equal(k.got[3], 10);
}

/* Items put by a signal handler (the interrupt) arrive in order, none
 * lost: every put the handler made that was accepted is taken, once. */
static co_isr_queue irq_q;
static atomic_ulong puts_ok, puts_full;

static void irq_put_handler(int sig)
{
	unsigned long k = atomic_load(&handled);
	(void)sig;
	if (atomic_load(&giving)) {
		if (co_isr_queue_put(&irq_q, (void *)(uintptr_t)(k + 1)))
			atomic_fetch_add(&puts_ok, 1);
		else
			atomic_fetch_add(&puts_full, 1);
		atomic_store(&handled, k + 1);
		sem_post(&acked);
	}
}

struct consumer {
	co_frame co;
	co_isr_queue_wait w;
	uintptr_t last;
	unsigned long taken, disorder;
};

static int consumer_fn(co_frame *f)
{
	struct consumer *c = (struct consumer *)f;
	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_isr_queue_take(&c->w, &irq_q));
		if ((uintptr_t)c->w.item <= c->last)
			c->disorder++;
		c->last = (uintptr_t)c->w.item;
		c->taken++;
	}
	CO_END(f);
}

static void test_isr_queue_from_interrupts(void **state)
{
	static void *slots[64];
	struct consumer c = { .last = 0 };
	struct busy busy[2];
	struct sender s = { .target = pthread_self(), .n = CO_TEST_SANITIZED ? 20000 : 50000 };
	struct sigaction sa = { .sa_handler = irq_put_handler };
	co_loop loop;
	struct idle_probe idle = { .loop = &loop };
	pthread_t th;
	(void)state;

	sigemptyset(&irq_set);
	sigaddset(&irq_set, SIGUSR1);
	sigaction(SIGUSR1, &sa, NULL);
	atomic_store(&handled, 0);
	atomic_store(&puts_ok, 0);
	atomic_store(&puts_full, 0);
	atomic_store(&giving, 1);
	sem_init(&acked, 0, 0);
	assert_int_equal(co_isr_queue_init(&irq_q, slots, 64), 0);
	co_loop_init(&loop);
	co_init(&c.co, consumer_fn);
	assert_int_equal(co_loop_spawn(&loop, &c.co), 0);
	for (int i = 0; i < 2; i++) {
		busy[i].half = s.n - s.n / 8;
		co_init(&busy[i].co, busy_fn);
		assert_int_equal(co_loop_spawn(&loop, &busy[i].co), 0);
	}
	assert_int_equal(pthread_create(&th, NULL, sender_fn, &s), 0);
	while (!(atomic_load(&s.done) && c.taken == atomic_load(&puts_ok))) {
		co_loop_step(&loop);
		co_loop_idle(&loop, sleep_for_irq, &idle);
		if (atomic_load(&s.done) && loop.ready == 0 && !co__loop_has_pending(&loop))
			break; /* nothing left to run: the counts are final */
	}
	atomic_store(&s.done, 2);
	pthread_join(th, NULL);
	signal(SIGUSR1, SIG_IGN);
	sem_destroy(&acked);
	assert_int_equal(atomic_load(&handled), s.n);
	assert_int_equal(atomic_load(&puts_ok) + atomic_load(&puts_full), s.n);
	assert_int_equal(c.taken, atomic_load(&puts_ok));
	assert_int_equal(c.disorder, 0);
	assert_int_equal(irq_q.count, 0);
	assert_int_equal(idle.late, 0);
	print_message("%lu puts from interrupts, %lu taken, %lu refused (full)\n", s.n, c.taken,
		      atomic_load(&puts_full));
}

/* co_loop_idle with a NULL loop or sleep traps in debug builds; in release
 * builds (loop_ndebug) it is undefined (errors.md), so nothing to test. */
static void test_idle_null_traps(void **state)
{
#if !CO_DEBUG
	(void)state;
	skip(); /* the calls below are not even compiled: gcc sees their NULL */
#else
	int st;
	pid_t pid;
	co_loop loop;
	(void)state;

	co_loop_init(&loop);
	for (int which = 0; which < 2; which++) {
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			int fd = open("/dev/null", O_WRONLY);
			dup2(fd, 2);
			if (which == 0)
				co_loop_idle(NULL, count_sleep, NULL);
			else
				co_loop_idle(&loop, NULL, NULL);
			_exit(0);
		}
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	}
#endif
}

/* ---- a stranger's nesting and self-wrapping ------------------------------- */

/* Runs fn in a child process (stderr to /dev/null); its wait status. */
static int loop_child(void (*fn)(void))
{
	int st = -1;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, 2);
		signal(SIGSEGV, SIG_DFL); /* cmocka's handler would hide a crash */
		signal(SIGBUS, SIG_DFL);
		alarm(10); /* a hang fails too */
		fn();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return st;
}

/* A documented error (a debug trap: SIGABRT) or a clean run (exit 0):
 * never a crash, a hang or a wrong result (exit 1). */
static int error_or_works(int st)
{
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 1;
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT)
		return 1;
	print_error("child: %s %d\n", WIFSIGNALED(st) ? "signal" : "exit",
		    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	return 0;
}

/* co_loop_timeout given the co_sleep_ticks of its own co_timer: the limit
 * wraps itself (t->inner == &t->aw) and its ready op calls itself until the
 * stack overflows (SIGSEGV), in debug and release builds. What the other
 * mistakes in its arguments get (firmware.md, Tick timers): NULL, an await
 * of -EINVAL, as co_timeout answers "given its own limit" (errors.md). */
static co_loop self_loop;

struct self_limited {
	co_frame co;
	co_timer t;
	int res;
};

static int self_limited_fn(co_frame *f)
{
	struct self_limited *s = (struct self_limited *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_loop_timeout(&s->t, &self_loop, co_sleep_ticks(&s->t, &self_loop, 5), 10));
	s->res = co_result(f);
	CO_END(f);
}

static void self_limited_child(void)
{
	struct self_limited s = { .res = 99 };

	fake_now = 0;
	co_loop_init(&self_loop);
	co_loop_set_clock(&self_loop, fake_clock, 32);
	co_init(&s.co, self_limited_fn);
	co_loop_spawn(&self_loop, &s.co);
	for (int i = 0; i < 30; i++, fake_now++)
		co_loop_step(&self_loop);
	_exit(co_done(&s.co) && s.res == -EINVAL ? 0 : 1);
}

static void test_timeout_of_its_own_timer(void **state)
{
	co_loop loop;
	co_timer t;
	int st;
	(void)state;

	co_loop_init(&loop);
	assert_int_equal(co_loop_set_clock(&loop, fake_clock, 32), 0);
	st = loop_child(self_limited_child);
	assert_true(error_or_works(st));
#if CO_DEBUG
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT); /* CO_AWAIT(f, NULL) traps */
#else
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* the await's -EINVAL */
#endif
	assert_null(co_loop_timeout(&t, &loop, co_sleep_ticks(&t, &loop, 5), 10));
}

/* co_loop_step called from the body of a frame the loop runs (a nested
 * step): the inner step runs the other ready frame to its end, and the
 * outer one, which counted it, pops an empty queue: a NULL dereference in
 * co__loop_pop, in debug and release builds. Nothing in firmware.md or
 * errors.md forbids it or names a trap for it. */
static co_loop nest_loop;

struct nester {
	co_frame co;
	int ran;
};

static int nest_outer_fn(co_frame *f)
{
	struct nester *n = (struct nester *)f;
	CO_BEGIN(f);
	co_loop_step(&nest_loop);
	n->ran = 1;
	CO_END(f);
}

static int nest_inner_fn(co_frame *f)
{
	struct nester *n = (struct nester *)f;
	CO_BEGIN(f);
	n->ran = 1;
	CO_END(f);
}

static void nested_step_child(void)
{
	struct nester a = { .ran = 0 }, b = { .ran = 0 };

	co_loop_init(&nest_loop);
	co_init(&a.co, nest_outer_fn);
	co_init(&b.co, nest_inner_fn);
	co_loop_spawn(&nest_loop, &a.co);
	co_loop_spawn(&nest_loop, &b.co);
	_exit(co_loop_run(&nest_loop) == 0 && a.ran && b.ran ? 0 : 1);
}

/* co_loop_step returns how many frames are ready when it ends: those in
 * its queue and those woken during the step (by a body, or an interrupt)
 * that the next step takes in. Without counting each woken frame, two
 * frames woken by one body count as one. */
struct giver {
	co_frame co;
	int n;
};

static int giver_fn(co_frame *f)
{
	struct giver *g = (struct giver *)f;
	CO_BEGIN(f);
	for (int i = 0; i < g->n; i++)
		co_notify_give(&notes[i]);
	CO_END(f);
}

static void test_step_counts_the_frames_woken(void **state)
{
	co_loop loop;
	struct taker t[3] = { { .i = 0 }, { .i = 1 }, { .i = 2 } };
	struct giver g = { .n = 3 };
	(void)state;

	sigemptyset(&irq_set);
	co_loop_init(&loop);
	for (int i = 0; i < 3; i++) {
		co_notify_init(&notes[i], 1);
		taken[i] = 0;
		co_init(&t[i].co, taker_fn);
		assert_int_equal(co_loop_spawn(&loop, &t[i].co), 0);
	}
	assert_int_equal(co_loop_step(&loop), 0); /* all three wait */
	co_init(&g.co, giver_fn);
	assert_int_equal(co_loop_spawn(&loop, &g.co), 0);
	assert_int_equal(co_loop_step(&loop), 3); /* woken by the giver's body */
	assert_int_equal(co_loop_step(&loop), 0); /* each took its give */
	for (int i = 0; i < 3; i++)
		assert_int_equal(taken[i], 1);
}

/* A nested step runs the frames ready then, the outer step's too, and the
 * outer one goes on with those left: none. One co_loop_step from main runs
 * each ready frame once. Without the outer step noticing the nested one,
 * it goes on with the count it took and runs the frames that the nested
 * step ran and sent to the back again: twice in one step. A body that
 * steps the loop 256 or 512 times in one resume is noticed as well (a
 * count of steps modulo 256 was not). */
static co_loop once_loop;

struct counted {
	co_frame co;
	int runs, nests;
};

static int counted_fn(co_frame *f)
{
	struct counted *c = (struct counted *)f;
	CO_BEGIN(f);
	for (;;) {
		c->runs++;
		if (c->nests) {
			int k = c->nests;

			c->nests = 0;
			while (k--)
				co_loop_step(&once_loop);
		}
		CO_YIELD(f);
	}
	CO_END(f);
}

static void test_step_nested_runs_each_frame_once(void **state)
{
	struct counted c[3] = { { .nests = 1 }, { .nests = 0 }, { .nests = 0 } };
	(void)state;

	co_loop_init(&once_loop);
	for (int i = 0; i < 3; i++) {
		co_init(&c[i].co, counted_fn);
		assert_int_equal(co_loop_spawn(&once_loop, &c[i].co), 0);
	}
	/* c[0] steps the loop: c[1] and c[2] run there, once */
	assert_int_equal(co_loop_step(&once_loop), 3);
	assert_int_equal(c[0].runs, 1);
	assert_int_equal(c[1].runs, 1);
	assert_int_equal(c[2].runs, 1);
	/* and the next step runs each once again, in the queue's order */
	assert_int_equal(co_loop_step(&once_loop), 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(c[i].runs, 2);
	assert_int_equal(once_loop.ready, 3);

	/* c[0], first in the queue, steps the loop k times in its body: c[1]
	 * and c[2] run k times there, and not once more in the outer step */
	for (int k = 255; k <= 513; k += k == 257 ? 254 : 1) {
		co_loop_init(&once_loop);
		for (int i = 0; i < 3; i++) {
			c[i].runs = 0;
			c[i].nests = i == 0 ? k : 0;
			co_init(&c[i].co, counted_fn);
			assert_int_equal(co_loop_spawn(&once_loop, &c[i].co), 0);
		}
		assert_int_equal(co_loop_step(&once_loop), 3);
		assert_int_equal(c[0].runs, 1);
		assert_int_equal(c[1].runs, k);
		assert_int_equal(c[2].runs, k);
	}
}

static void test_step_nested_in_a_body(void **state)
{
	int st;
	(void)state;
	st = loop_child(nested_step_child);
	assert_true(error_or_works(st));
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* it works: both ran */
}

/* After co_cancel, an await that would wait ends with -ECANCELED; one whose
 * value is already there takes it (a give, an item, a sleep of 0 ticks),
 * so a cleanup that takes what is there keeps working. */
struct after_cancel {
	co_frame co;
	co_loop *l;
	co_notify *given, *empty;
	co_isr_queue *full, *none;
	co_notify_wait w;
	co_isr_queue_wait qw;
	co_timer t;
	void *item;
	int r[6];
};

static int after_cancel_fn(co_frame *f)
{
	struct after_cancel *a = (struct after_cancel *)f;
	CO_BEGIN(f);
	CO_YIELD(f); /* cancelled here */
	CO_AWAIT(f, co_notify_take(&a->w, a->given));
	a->r[0] = co_result(f);
	CO_AWAIT(f, co_notify_take(&a->w, a->empty));
	a->r[1] = co_result(f);
	CO_AWAIT(f, co_isr_queue_take(&a->qw, a->full));
	a->r[2] = co_result(f);
	a->item = a->qw.item;
	CO_AWAIT(f, co_isr_queue_take(&a->qw, a->none));
	a->r[3] = co_result(f);
	CO_AWAIT(f, co_sleep_ticks(&a->t, a->l, 0));
	a->r[4] = co_result(f);
	CO_AWAIT(f, co_sleep_ticks(&a->t, a->l, 5));
	a->r[5] = co_result(f);
	CO_END(f);
}

static void test_cancelled_takes_what_is_there(void **state)
{
	co_loop loop;
	co_notify given, empty;
	co_isr_queue full, none;
	void *full_slots[2], *none_slots[2];
	int thing;
	co_tick dl;
	struct after_cancel a = { .r = { 99, 99, 99, 99, 99, 99 } };
	(void)state;

	sigemptyset(&irq_set);
	fake_now = 1000;
	co_loop_init(&loop);
	assert_int_equal(co_loop_set_clock(&loop, fake_clock, 32), 0);
	co_notify_init(&given, 1);
	co_notify_init(&empty, 1);
	assert_int_equal(co_notify_give(&given), 1);
	co_isr_queue_init(&full, full_slots, 2);
	co_isr_queue_init(&none, none_slots, 2);
	assert_int_equal(co_isr_queue_put(&full, &thing), 1);
	a.l = &loop;
	a.given = &given;
	a.empty = &empty;
	a.full = &full;
	a.none = &none;
	co_init(&a.co, after_cancel_fn);
	assert_int_equal(co_loop_spawn(&loop, &a.co), 0);
	co_loop_step(&loop); /* to its yield */
	assert_int_equal(co_cancel(&a.co), 0);
	for (int i = 0; i < 4 && !co_done(&a.co); i++)
		co_loop_step(&loop);
	assert_true(co_done(&a.co));
	assert_int_equal(a.r[0], 0);           /* the give was there */
	assert_int_equal(a.r[1], -ECANCELED);  /* nothing to take: no wait */
	assert_int_equal(a.r[2], 0);           /* the item was there */
	assert_ptr_equal(a.item, &thing);
	assert_int_equal(a.r[3], -ECANCELED);
	assert_int_equal(a.r[4], 0);           /* 0 ticks: no suspension */
	assert_int_equal(a.r[5], -ECANCELED);
	assert_null(empty.waiter);
	assert_null(none.items.waiter);
	assert_false(co_loop_next_deadline(&loop, &dl));
	assert_int_equal(loop.live, 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_interrupt_wakes_never_lost),
		cmocka_unit_test(test_idle_sleeps_only_when_nothing_is_ready),
		cmocka_unit_test(test_idle_masks_from_check_to_sleep),
		cmocka_unit_test(test_timers_across_16_bit_wrap),
		cmocka_unit_test(test_timers_across_32_bit_wrap),
		cmocka_unit_test(test_next_deadline_in_the_clocks_range),
		cmocka_unit_test(test_timeout_and_cancel),
		cmocka_unit_test(test_limit_due_after_its_await_ended),
		cmocka_unit_test(test_timer_errors),
		cmocka_unit_test(test_notify_counts_and_one_waiter),
		cmocka_unit_test(test_idle_null_traps),
		cmocka_unit_test(test_isr_queue),
		cmocka_unit_test(test_isr_queue_from_interrupts),
		cmocka_unit_test(test_timeout_of_its_own_timer),
		cmocka_unit_test(test_step_counts_the_frames_woken),
		cmocka_unit_test(test_step_nested_in_a_body),
		cmocka_unit_test(test_step_nested_runs_each_frame_once),
		cmocka_unit_test(test_cancelled_takes_what_is_there),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
