/* SPDX-License-Identifier: MIT */
/*
 * A bare-metal firmware on co.h and loop.h, and the test that make test
 * boots on two emulated boards (board_test.sh). Board-independent: the
 * board file (board_<name>.c, see board.h) gives the console, the tick
 * and two timer interrupts of different priorities.
 *
 * What runs, for RUN_TICKS ticks of a 1 kHz tick:
 *   - the tick interrupt counts `ticks` (volatile: the loop and the tiny
 *     coroutines read it, the interrupt writes it); the count starts 256
 *     ticks before its 32-bit wrap, so every timer crosses it;
 *   - a producer interrupt (middle priority) puts numbered items into a
 *     co_isr_queue at random intervals, and a burst interrupt (high
 *     priority, preempting the producer) puts items too and gives a
 *     co_notify;
 *   - co_frame coroutines on a co_loop: a consumer that awaits a child
 *     taking four items at a time, a counter of the notify's gives, a
 *     sleeper of 1 to 7 ticks, a co_loop_timeout that must expire, and a
 *     driver that starts, stops and ends the rest;
 *   - three co_tiny blinkers, called from the main loop, each waiting for
 *     its deadline on the tick;
 *   - the main loop: co_loop_step, the blinkers, co_loop_idle with WFI.
 * Then it checks, and prints a line per check ("ok" or "FAIL"): every item
 * taken once and in order (no lost wake-up), every give taken, the burst
 * interrupt preempting the producer inside its puts, WFI entered, every
 * sleep on its tick and none early, the timeout on its tick, the blinkers
 * on their ticks, and that the masks hold off what they should
 * (CO_IRQ_BASEPRI: only interrupts of coring's priorities).
 */
#include <coring/co.h>
#include <coring/loop.h>

#include "board.h"

#define RUN_TICKS 300u
#define START_TICK 0xffffff00u

/* ---- the tick --------------------------------------------------------- */

static volatile co_tick ticks = START_TICK;

static co_tick now(void)
{
	return ticks;
}

void app_tick(void)
{
	ticks = ticks + 1;
}

/* ---- the interrupt sources --------------------------------------------- */

static co_loop loop;
static void *rx_slots[8];
static co_isr_queue rx;         /* items of both sources: source << 24 | number */
static co_notify ev;            /* the burst interrupt's gives, counted */
static co_notify never;         /* never given: the timeout's */

static volatile int sources_on; /* the handlers re-arm their timers */
static volatile uint32_t put_ok[2], put_full[2], gives_ok, gives_full;
static volatile uint32_t burst_runs, produce_runs, preempted;
static volatile uint32_t test_runs[2];

static uint32_t next_random(uint32_t *s) /* xorshift32 */
{
	uint32_t x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

static void put_item(unsigned src)
{
	void *item = (void *)(uintptr_t)(src << 24 | (put_ok[src] + 1));

	if (co_isr_queue_put(&rx, item))
		put_ok[src] = put_ok[src] + 1;
	else
		put_full[src] = put_full[src] + 1; /* the ring is full: refused */
}

/* Middle priority: two items, with some work between them, so that the
 * burst interrupt lands inside the puts and the gives. */
void app_produce(void)
{
	static uint32_t rnd = 0x2545f491u;
	uint32_t bursts = burst_runs;

	produce_runs = produce_runs + 1;
	put_item(0);
	for (volatile int spin = 0; spin < 20; spin++)
		;
	put_item(0);
	if (burst_runs != bursts)
		preempted = preempted + 1;
	if (sources_on)
		board_arm(BOARD_PRODUCER, 40 + (next_random(&rnd) & 127));
}

/* High priority: a give and an item. */
void app_burst(void)
{
	static uint32_t rnd = 0x9e3779b9u;

	burst_runs = burst_runs + 1;
	if (co_notify_give(&ev))
		gives_ok = gives_ok + 1;
	else
		gives_full = gives_full + 1;
	put_item(1);
	if (sources_on)
		board_arm(BOARD_BURST, 15 + (next_random(&rnd) & 63));
}

void app_test_irq(enum board_test_irq irq)
{
	test_runs[irq] = test_runs[irq] + 1;
}

/* ---- the coroutines ----------------------------------------------------- */

static volatile int stopping; /* the driver stopped the sources */

/* Takes four items; checks each source's order. A child of the consumer. */
struct reader {
	co_frame co;
	co_isr_queue_wait w;
	int n;
	uint32_t *last, *taken, *disorder;
};

static int reader_fn(co_frame *f)
{
	struct reader *r = (struct reader *)f;
	CO_BEGIN(f);
	for (r->n = 0; r->n < 4; r->n++) {
		CO_AWAIT(f, co_isr_queue_take(&r->w, &rx));
		if (co_result(f) != 0)
			CO_RETURN(f, co_result(f));
		{
			uintptr_t item = (uintptr_t)r->w.item;
			unsigned src = (unsigned)(item >> 24);

			if (src > 1 || (item & 0xffffffu) != r->last[src] + 1)
				++*r->disorder;
			else
				r->last[src]++;
			++*r->taken;
		}
	}
	CO_END(f);
}

struct consumer {
	co_frame co;
	struct reader rd;
	uint32_t last[2], taken, disorder;
};

static int consumer_fn(co_frame *f)
{
	struct consumer *c = (struct consumer *)f;
	CO_BEGIN(f);
	for (;;) {
		co_init(&c->rd.co, reader_fn);
		c->rd.last = c->last;
		c->rd.taken = &c->taken;
		c->rd.disorder = &c->disorder;
		CO_AWAIT(f, &c->rd.co);
		if (co_result(f) != 0)
			break; /* -ECANCELED: the driver ended it */
	}
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

struct counter {
	co_frame co;
	co_notify_wait w;
	uint32_t taken;
};

static int counter_fn(co_frame *f)
{
	struct counter *c = (struct counter *)f;
	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_notify_take(&c->w, &ev));
		if (co_result(f) != 0)
			break;
		c->taken++;
	}
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

/* Sleeps of 1 to 7 ticks; each must end on its tick, never before. */
struct sleeper {
	co_frame co;
	co_timer t;
	co_tick start;
	uint32_t k, rounds, early, late[3];
};

static int sleeper_fn(co_frame *f)
{
	struct sleeper *s = (struct sleeper *)f;
	CO_BEGIN(f);
	for (s->k = 1; !stopping; s->k = s->k == 7 ? 1 : s->k + 1) {
		s->start = ticks;
		CO_AWAIT(f, co_sleep_ticks(&s->t, &loop, s->k));
		{
			int32_t d = (int32_t)(ticks - s->start - s->k);

			if (d < 0)
				s->early++;
			else
				s->late[d < 2 ? d : 2]++;
		}
		s->rounds++;
	}
	CO_END(f);
}

/* An await that nothing completes, limited to 9 ticks: -ETIME. */
struct limiter {
	co_frame co;
	co_timer t;
	co_notify_wait w;
	co_tick start, took;
	int r;
};

static int limiter_fn(co_frame *f)
{
	struct limiter *l = (struct limiter *)f;
	CO_BEGIN(f);
	l->start = ticks;
	CO_AWAIT(f, co_loop_timeout(&l->t, &loop, co_notify_take(&l->w, &never), 9));
	l->r = co_result(f);
	l->took = ticks - l->start;
	CO_END(f);
}

static struct consumer consumer;
static struct counter counter;
static struct sleeper sleeper;
static struct limiter limiter;

/* Starts the sources, stops them after RUN_TICKS, waits until every
 * accepted item and give is taken (at most 50 ticks), then cancels the
 * consumer and the counter. */
struct driver {
	co_frame co;
	co_timer t;
	uint32_t waits;
};

static int drained(void)
{
	return consumer.taken == put_ok[0] + put_ok[1] && counter.taken == gives_ok;
}

static int driver_fn(co_frame *f)
{
	struct driver *d = (struct driver *)f;
	CO_BEGIN(f);
	sources_on = 1;
	board_arm(BOARD_PRODUCER, 100);
	board_arm(BOARD_BURST, 70);
	CO_AWAIT(f, co_sleep_ticks(&d->t, &loop, RUN_TICKS));
	sources_on = 0; /* a handler running now arms once more, at most */
	board_arm(BOARD_PRODUCER, 0);
	board_arm(BOARD_BURST, 0);
	stopping = 1;
	for (d->waits = 0; d->waits < 50 && (d->waits < 2 || !drained()); d->waits++)
		CO_AWAIT(f, co_sleep_ticks(&d->t, &loop, 1));
	co_cancel(&consumer.co);
	co_cancel(&counter.co);
	CO_END(f);
}

static struct driver driver;

/* ---- the tiny profile: blinkers called from the main loop -------------- */

static volatile uint32_t leds;

struct blink {
	co_tiny pt;
	co_tick next;
	uint32_t period, bit, toggles;
};

static int blink_fn(struct blink *b)
{
	co_tiny *f = &b->pt;
	CO_BEGIN(f);
	b->next = ticks;
	for (;;) {
		b->next += b->period;
		CO_AWAIT_UNTIL(f, (int32_t)(ticks - b->next) >= 0);
		leds ^= b->bit;
		b->toggles++;
	}
	CO_END(f);
}

/* ---- output ------------------------------------------------------------- */

static void put_str(const char *s)
{
	while (*s)
		board_putc(*s++);
}

/* Decimal, by subtraction: a Cortex-M0 has no division instruction, and
 * this -nostdlib link has no libgcc to call for one. */
static void put_dec(int32_t v)
{
	static const uint32_t pow10[] = { 1000000000, 100000000, 10000000, 1000000, 100000,
					  10000, 1000, 100, 10, 1 };
	uint32_t u = v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
	int started = 0;

	if (v < 0)
		board_putc('-');
	for (int i = 0; i < 10; i++) {
		char d = '0';

		while (u >= pow10[i]) {
			u -= pow10[i];
			d++;
		}
		started |= d != '0' || i == 9;
		if (started)
			board_putc(d);
	}
}

/* n / d by subtraction (small quotients only) */
static uint32_t quotient(uint32_t n, uint32_t d)
{
	uint32_t q = 0;

	for (; n >= d; n -= d)
		q++;
	return q;
}

static int all_ok = 1;

/* One check: "ok   name: ..." or "FAIL name: ...", then its details. */
static void check(int ok, const char *name)
{
	all_ok &= ok;
	put_str(ok ? "ok   " : "FAIL ");
	put_str(name);
	put_str(": ");
}

/* ---- the masking test ----------------------------------------------------- */

/* Inside a critical section of coring's (CO_IRQ_SAVE), pend an interrupt
 * at coring's priority and one more urgent than any that calls coring:
 * the first must wait for the end of the section; the second waits too
 * under PRIMASK, and runs at once under CO_IRQ_BASEPRI. */
static void masking_test(void)
{
#ifdef CO_IRQ_BASEPRI
	const uint32_t foreign_inside = 1;
#else
	const uint32_t foreign_inside = 0;
#endif
	CO_IRQ_STATE st;
	uint32_t inside[2];

	CO_IRQ_SAVE(st);
	board_pend(BOARD_TEST_CORING);
	board_pend(BOARD_TEST_FOREIGN);
	for (volatile int spin = 0; spin < 100; spin++)
		;
	inside[0] = test_runs[BOARD_TEST_CORING];
	inside[1] = test_runs[BOARD_TEST_FOREIGN];
	CO_IRQ_RESTORE(st);
	for (volatile int spin = 0; spin < 100; spin++)
		;
	check(inside[0] == 0 && inside[1] == foreign_inside && test_runs[0] == 1 && test_runs[1] == 1,
	      "masking");
	put_str("inside a section the coring-level interrupt ran ");
	put_dec((int32_t)inside[0]);
	put_str(" times, the foreign one ");
	put_dec((int32_t)inside[1]);
	put_str("; after it ");
	put_dec((int32_t)test_runs[0]);
	put_str(" and ");
	put_dec((int32_t)test_runs[1]);
	put_str("\n");
}

/* ---- the main loop -------------------------------------------------------- */

static uint32_t sleeps, pending_at_sleep, slept_with_work;

/* co_loop_idle's sleep. Interrupts are masked here: a frame woken after
 * the idle's check would be a wake-up slept through (the test counts them
 * through an internal of loop.h; firmware needs only the WFI). */
static void sleep_hook(void *arg)
{
	if (loop.ready || co__loop_has_pending(&loop))
		slept_with_work++;
	if (board_irq_pending())
		pending_at_sleep++; /* a wake-up raced the check: WFI returns at once */
	board_sleep(arg);
}

static void report(struct blink *bl, co_tick blink_start, co_tick blink_stop)
{
	int blinks_ok = 1;

	check(consumer.disorder == 0 && consumer.taken == put_ok[0] + put_ok[1] && consumer.taken > 0,
	      "items");
	put_dec((int32_t)consumer.taken);
	put_str(" taken in order of ");
	put_dec((int32_t)(put_ok[0] + put_ok[1]));
	put_str(" put (");
	put_dec((int32_t)(put_full[0] + put_full[1]));
	put_str(" refused: the ring was full), out of order ");
	put_dec((int32_t)consumer.disorder);
	put_str("\n");

	check(counter.taken == gives_ok && gives_ok > 0, "notify");
	put_dec((int32_t)counter.taken);
	put_str(" taken of ");
	put_dec((int32_t)gives_ok);
	put_str(" given\n");

	check(preempted > 0, "preemption");
	put_str("the burst interrupt preempted the producer's puts ");
	put_dec((int32_t)preempted);
	put_str(" times in ");
	put_dec((int32_t)produce_runs);
	put_str(" runs\n");

	check(sleeps > 0 && slept_with_work == 0, "idle");
	put_str("WFI entered ");
	put_dec((int32_t)sleeps);
	put_str(" times, ");
	put_dec((int32_t)pending_at_sleep);
	put_str(" of them with an interrupt already pending, ");
	put_dec((int32_t)slept_with_work);
	put_str(" with a frame woken after the check\n");

	check(sleeper.rounds > 0 && sleeper.early == 0 && sleeper.late[2] == 0 &&
		      (int32_t)(ticks - START_TICK) > 256, "timers");
	put_dec((int32_t)sleeper.rounds);
	put_str(" sleeps across the 32-bit wrap: on their tick ");
	put_dec((int32_t)sleeper.late[0]);
	put_str(", one tick later ");
	put_dec((int32_t)sleeper.late[1]);
	put_str(" (a tick between the deadline and the read), later ");
	put_dec((int32_t)sleeper.late[2]);
	put_str(", early ");
	put_dec((int32_t)sleeper.early);
	put_str("\n");

	check(limiter.r == -ETIME && limiter.took >= 9 && limiter.took <= 10, "timeout");
	put_str("result ");
	put_dec(limiter.r);
	put_str(" after ");
	put_dec((int32_t)limiter.took);
	put_str(" ticks (limit 9)\n");

	for (int i = 0; i < 3; i++) {
		int32_t want = (int32_t)quotient(blink_stop - blink_start, bl[i].period);

		blinks_ok &= (int32_t)bl[i].toggles >= want - 1 && (int32_t)bl[i].toggles <= want;
	}
	check(blinks_ok, "tiny");
	for (int i = 0; i < 3; i++) {
		put_str(i ? ", " : "blinkers toggled ");
		put_dec((int32_t)bl[i].toggles);
		put_str(" times every ");
		put_dec((int32_t)bl[i].period);
	}
	put_str(" ticks\n");
}

int main(void)
{
	static struct blink bl[3] = { { .period = 3, .bit = 1 }, { .period = 5, .bit = 2 },
				      { .period = 7, .bit = 4 } };
	co_tick blink_start, blink_stop = 0;

	board_init();
	put_str("coring board test: ");
	put_str(board_name);
	put_str(CO_USE_COMPUTED_GOTO ? ", computed goto" : ", switch backend");
	put_str(CO_DEBUG ? ", debug" : ", release");
#ifdef CO_IRQ_BASEPRI
	put_str(", mask BASEPRI");
#else
	put_str(", mask PRIMASK");
#endif
	put_str(", co_frame ");
	put_dec((int32_t)sizeof(co_frame));
	put_str(" B\n");
	masking_test();

	co_loop_init(&loop);
	co_loop_set_clock(&loop, now, 32);
	co_isr_queue_init(&rx, rx_slots, sizeof rx_slots / sizeof rx_slots[0]);
	co_notify_init(&ev, 1000);
	co_notify_init(&never, 1);
	co_init(&consumer.co, consumer_fn);
	co_init(&counter.co, counter_fn);
	co_init(&sleeper.co, sleeper_fn);
	co_init(&limiter.co, limiter_fn);
	co_init(&driver.co, driver_fn);
	co_loop_spawn(&loop, &consumer.co);
	co_loop_spawn(&loop, &counter.co);
	co_loop_spawn(&loop, &sleeper.co);
	co_loop_spawn(&loop, &limiter.co);
	co_loop_spawn(&loop, &driver.co);
	for (int i = 0; i < 3; i++)
		co_tiny_init(&bl[i].pt);
	blink_start = ticks;

	while (loop.live) {
		co_loop_step(&loop);
		if (!stopping) {
			for (int i = 0; i < 3; i++)
				blink_fn(&bl[i]);
			blink_stop = ticks;
		}
		if (co_loop_idle(&loop, sleep_hook, NULL))
			sleeps++;
	}
	report(bl, blink_start, blink_stop);
	put_str(all_ok ? "PASS\n" : "FAIL\n");
	board_exit(all_ok);
}
