/* SPDX-License-Identifier: MIT */
/*
 * Staying awake before sleeping (lib/engine/engine_wait.c spin_poll; docs/engine.md,
 * "Staying awake"): hand-offs between threads arrive with polling on and
 * off, an engine that gets no hand-off never polls, the poll ends after the
 * last hand-off (the engine reaches its sleep), where polling cannot help
 * it is off, and a scheduler caps how many contexts poll at once. Counts,
 * never timings: a poll that never ended would hang a test, and meson's
 * timeout is the guard.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>
#include <cmocka.h>

#include <coring/coring.h>
#include "engine/engine_internal.h"
#include "helpers.h"

static uint64_t spins(co_engine *e)
{
	return __atomic_load_n(&e->stats.spins, __ATOMIC_RELAXED);
}

/* ---- ping-pong over two channels between two contexts --------------------------- */

#define ROUND_TRIPS 20000

struct pp {
	co_frame co;
	co_waiter w;
	co_chan *to, *from;
	long v, n, got;
	int bad;
};

static int ping_fn(co_frame *f)
{
	struct pp *p = (struct pp *)f;
	CO_BEGIN(f);
	for (p->v = 0; p->v < p->n; p->v++) {
		CO_AWAIT(f, co_chan_send(&p->w, p->to, &p->v));
		if (co_result(f) != 0)
			break;
		CO_AWAIT(f, co_chan_recv(&p->w, p->from, &p->got));
		if (co_result(f) != 0 || p->got != p->v + 1)
			p->bad++;
	}
	co_chan_close(p->to);
	CO_END(f);
}

static int pong_fn(co_frame *f)
{
	struct pp *p = (struct pp *)f;
	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_chan_recv(&p->w, p->from, &p->got));
		if (co_result(f) != 0)
			break;
		p->got++;
		p->n++;
		CO_AWAIT(f, co_chan_send(&p->w, p->to, &p->got));
	}
	CO_END(f);
}

/* ping on context a, pong on b, n round trips. */
static void ping_pong(co_sched *s, unsigned a, unsigned b, long n, struct pp *ping, struct pp *pong,
		      co_chan ch[2])
{
	assert_int_equal(co_chan_init(&ch[0], sizeof(long), 1, NULL), 0);
	assert_int_equal(co_chan_init(&ch[1], sizeof(long), 1, NULL), 0);
	*ping = (struct pp){ .to = &ch[0], .from = &ch[1], .n = n };
	*pong = (struct pp){ .to = &ch[1], .from = &ch[0] };
	co_init(&ping->co, ping_fn);
	co_init(&pong->co, pong_fn);
	assert_int_equal(co_sched_spawn_to(s, a, &ping->co), 0);
	assert_int_equal(co_sched_spawn_to(s, b, &pong->co), 0);
}

static void pp_check(struct pp *ping, struct pp *pong, co_chan ch[2], long n)
{
	assert_int_equal(ping->bad, 0);
	assert_int_equal(ping->v, n);
	assert_int_equal(pong->n, n);
	assert_int_equal(co_chan_destroy(&ch[0]), 0);
	assert_int_equal(co_chan_destroy(&ch[1]), 0);
}

/* Every round trip arrives, with polling on (the default) and off. */
static void handoffs_arrive(int no_spin)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2, .engine = { .no_spin = no_spin } };
	struct pp ping, pong;
	co_chan ch[2];

	assert_int_equal(co_sched_init(&s, &o), 0);
	ping_pong(&s, 0, 1, ROUND_TRIPS, &ping, &pong, ch);
	assert_int_equal(co_sched_run(&s), 0);
	pp_check(&ping, &pong, ch, ROUND_TRIPS);
	for (unsigned i = 0; i < s.n; i++) {
		co_engine *e = &s.ctx[i].engine;
		assert_true(spins(e) >= __atomic_load_n(&e->stats.spin_hits, __ATOMIC_RELAXED));
		if (no_spin) {
			assert_int_equal(e->spin_max, 0);
			assert_int_equal(spins(e), 0);
		}
	}
	assert_int_equal(co_sched_destroy(&s), 0);
}

static void test_handoffs_arrive_polling(void **state)
{
	(void)state;
	handoffs_arrive(0);
}

static void test_handoffs_arrive_not_polling(void **state)
{
	(void)state;
	handoffs_arrive(1);
}

/* ---- a lone engine fed by a plain thread ------------------------------------------ */

#define FEEDS 3000

struct fed {
	co_frame co;
	atomic_int *ran;
};

static int fed_fn(co_frame *f)
{
	struct fed *t = (struct fed *)f;
	CO_BEGIN(f);
	atomic_fetch_add(t->ran, 1);
	CO_END(f);
}

/* Each frame is spawned from this thread once the one before has run:
 * every hand-off finds the engine idle, polling or asleep. */
static void feed(co_engine *e, struct fed *t, int n, atomic_int *ran)
{
	for (int i = 0; i < n; i++) {
		t[i].ran = ran;
		co_init(&t[i].co, fed_fn);
		assert_int_equal(co_engine_spawn(e, &t[i].co), 0);
		WAIT_UNTIL(atomic_load(ran) == i + 1);
	}
}

/* After the last hand-off the engine polls once at most, then sleeps. */
static void test_poll_ends_after_last_handoff(void **state)
{
	co_engine e;
	co_test_runner r;
	struct fed *t = calloc(FEEDS, sizeof *t);
	atomic_int ran = 0;
	uint64_t s0;

	(void)state;
	assert_non_null(t);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_STOP);
	feed(&e, t, FEEDS, &ran);
	s0 = spins(&e);
	WAIT_UNTIL(co__engine_sleeping(&e)); /* a poll that never ended hangs here */
	assert_true(spins(&e) - s0 <= 1);
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_test_runner_join(&r), 0);
	assert_int_equal(atomic_load(&ran), FEEDS);
	assert_int_equal(co_engine_destroy(&e), 0);
	free(t);
}

/* ---- an engine that gets no hand-off never polls ---------------------------------- */

struct napper {
	co_frame co;
	co_io io;
	int k;
};

static int napper_fn(co_frame *f)
{
	struct napper *n = (struct napper *)f;
	CO_BEGIN(f);
	for (n->k = 0; n->k < 20; n->k++) {
		CO_AWAIT(f, co_sleep(&n->io, 100 * CO_US));
		CO_YIELD(f);
	}
	CO_END(f);
}

static void test_no_poll_without_handoffs(void **state)
{
	co_engine e;
	co_test_runner r;
	struct napper n[4];
	co_frame *fs[4];

	(void)state;
	/* with I/O in flight it sleeps in the kernel, never polling first */
	assert_int_equal(co_engine_init(&e, NULL), 0);
	for (int i = 0; i < 4; i++) {
		co_init(&n[i].co, napper_fn);
		fs[i] = &n[i].co;
		assert_int_equal(co_engine_spawn(&e, fs[i]), 0);
	}
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_true(e.stats.waits > 0);
	assert_int_equal(e.stats.spins, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	/* idle, waiting for a stop: it sleeps at once, with no hand-off yet */
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_STOP);
	WAIT_UNTIL(co__engine_sleeping(&e));
	assert_int_equal(spins(&e), 0);
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_test_runner_join(&r), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* ---- where polling cannot help, or is not wanted, it is off ----------------------- */

static void test_spin_options(void **state)
{
	co_engine e;
	cpu_set_t all, one;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
	/* the value taken, where the process has two CPUs or more */
	if (CPU_COUNT(&all) > 1) {
		assert_int_equal(co_engine_init(&e, &(co_engine_opts){ .spin_ns = 7000 }), 0);
		assert_int_equal(e.spin_max, 7000);
		assert_int_equal(co_engine_destroy(&e), 0);
		assert_int_equal(co_engine_init(&e, NULL), 0);
		assert_int_equal(e.spin_max, 50000); /* the default */
		assert_int_equal(co_engine_destroy(&e), 0);
	}
	assert_int_equal(co_engine_init(&e, &(co_engine_opts){ .no_spin = 1 }), 0);
	assert_int_equal(e.spin_max, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	/* one CPU: the thread that would hand work over cannot run meanwhile */
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all)) {
			CPU_SET(c, &one);
			break;
		}
	assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
	assert_int_equal(co_engine_init(&e, &(co_engine_opts){ .spin_ns = 7000 }), 0);
	assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
	assert_int_equal(e.spin_max, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* ---- the scheduler caps how many contexts poll at once --------------------------- */

static void test_sched_caps_pollers(void **state)
{
	co_sched s;
	struct pp ping[2], pong[2];
	co_chan ch[2][2];
	cpu_set_t all;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 4 }), 0);
	assert_int_equal(s.spinners, (unsigned)(CPU_COUNT(&all) > 1 ? CPU_COUNT(&all) : 1));
	assert_int_equal(co_sched_destroy(&s), 0);

	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 4, .spinners = 1 }), 0);
	assert_int_equal(s.spinners, 1);
	ping_pong(&s, 0, 1, ROUND_TRIPS / 2, &ping[0], &pong[0], ch[0]);
	ping_pong(&s, 2, 3, ROUND_TRIPS / 2, &ping[1], &pong[1], ch[1]);
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < 2; i++)
		pp_check(&ping[i], &pong[i], ch[i], ROUND_TRIPS / 2);
	assert_true(s.spin_peak <= 1);
	/* a context that went quiet may still be polling when run returns;
	 * once they have all ended, none is */
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(atomic_load(&s.spinning), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* With no more contexts than spinners the cap cannot bind: the contexts
 * poll without counting themselves (spin_peak stays 0). */
static void test_sched_uncapped_counts_nothing(void **state)
{
	co_sched s;
	struct pp ping, pong;
	co_chan ch[2];
	cpu_set_t all;
	uint64_t spins = 0;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 2, .spinners = 2 }), 0);
	ping_pong(&s, 0, 1, ROUND_TRIPS / 2, &ping, &pong, ch);
	assert_int_equal(co_sched_run(&s), 0);
	pp_check(&ping, &pong, ch, ROUND_TRIPS / 2);
	for (unsigned i = 0; i < s.n; i++)
		spins += __atomic_load_n(&s.ctx[i].engine.stats.spins, __ATOMIC_RELAXED);
	if (CPU_COUNT(&all) > 1)
		assert_true(spins > 0); /* they polled (not on one CPU) */
	assert_int_equal(s.spin_peak, 0);
	assert_int_equal(atomic_load(&s.spinning), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* A manual context never polls (its ticks never wait): it does not count
 * towards the cap. Two threaded contexts and a manual one, spinners 2:
 * the cap cannot bind, and nothing is counted (spin_peak stays 0). */
static void test_sched_manual_not_a_poller(void **state)
{
	static const co_sched_group groups[2] = { { .manual = 1 }, { .contexts = 2 } };
	co_sched s;
	struct pp ping, pong;
	co_chan ch[2];
	cpu_set_t all;
	uint64_t spins = 0;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .groups = groups, .ngroups = 2,
							    .spinners = 2 }),
			 0);
	assert_int_equal(s.n, 3);
	ping_pong(&s, 1, 2, ROUND_TRIPS / 2, &ping, &pong, ch);
	assert_int_equal(co_sched_run(&s), 0);
	pp_check(&ping, &pong, ch, ROUND_TRIPS / 2);
	for (unsigned i = 0; i < s.n; i++) {
		co_engine *e = &s.ctx[i].engine;

		spins += __atomic_load_n(&e->stats.spins, __ATOMIC_RELAXED) +
			 __atomic_load_n(&e->stats.polls, __ATOMIC_RELAXED);
	}
	if (CPU_COUNT(&all) > 1)
		assert_true(spins > 0); /* they polled (not on one CPU) */
	assert_int_equal(s.spin_peak, 0);
	assert_int_equal(atomic_load(&s.spinning), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- a channel end polls before it parks -------------------------------------------- */

#define TAKES 40

struct taker {
	co_frame co;
	co_waiter w;
	co_chan *ch;
	uint64_t v;
	long got, n;              /* n: how many (0: TAKES) */
	int bad;
	atomic_int fin;
};

/* Takes 0 .. n - 1 from its channel, in order. */
static int taker_fn(co_frame *f)
{
	struct taker *t = (struct taker *)f;
	CO_BEGIN(f);
	for (t->got = 0; t->got < (t->n ? t->n : TAKES); t->got++) {
		CO_AWAIT(f, co_chan_recv(&t->w, t->ch, &t->v));
		if (co_result(f) != 0 || t->v != (uint64_t)t->got)
			t->bad++;
	}
	atomic_store(&t->fin, 1);
	CO_END(f);
}

/* A frame with a read in flight (a pipe nobody writes to until the end). */
struct reader {
	co_frame co;
	co_io io;
	int fd;
	char c;
	atomic_int fin;
};

static int reader_fn(co_frame *f)
{
	struct reader *r = (struct reader *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_read(&r->io, r->fd, &r->c, 1, 0));
	atomic_store(&r->fin, 1);
	CO_END(f);
}

/* Receivers parked on c, counted under the channel's queue lock. */
static unsigned parked_receivers(co_chan *c)
{
	unsigned n = 0;

	while (atomic_exchange(&c->lock, 1))
		;
	for (co_waiter *w = c->recvq.head; w; w = w->next)
		n++;
	atomic_store(&c->lock, 0);
	return n;
}

struct cap_hook {
	atomic_int asked;
	int allow;
};

static int cap_spin(co_engine *e, void *arg, int begin)
{
	struct cap_hook *h = arg;

	(void)e;
	if (!begin)
		return 0;
	atomic_fetch_add(&h->asked, 1);
	return h->allow;
}

/*
 * A taker on a lone engine gets TAKES items from this thread, each sent
 * only once the taker has parked: every receive finds the channel empty,
 * polls if it may, gives up, parks. hook: a scheduler-like cap on polling
 * (NULL: none); read_in_flight: the engine also has a read in flight.
 */
static void take_from_thread(struct cap_hook *hook, int read_in_flight, uint64_t *polls,
			     uint64_t *hits)
{
	static const struct co__engine_hooks hooks = { .spin = cap_spin };
	co_engine e;
	co_test_runner run;
	co_chan ch;
	struct taker t = { .ch = &ch };
	struct reader rd = { .fd = -1 };
	int p[2];

	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_chan_init(&ch, sizeof(uint64_t), 4, NULL), 0);
	if (hook)
		co__engine_set_hooks(&e, &hooks, hook);
	e.spin_cur = e.spin_max; /* as after a quick hand-off; before the run */
	co_init(&t.co, taker_fn);
	assert_int_equal(co_engine_spawn(&e, &t.co), 0);
	if (read_in_flight) {
		assert_int_equal(pipe(p), 0);
		rd.fd = p[0];
		co_init(&rd.co, reader_fn);
		assert_int_equal(co_engine_spawn(&e, &rd.co), 0);
	}
	co_test_runner_start(&run, &e, CO_RUN_UNTIL_STOP);
	for (uint64_t i = 0; i < TAKES; i++) {
		/* a poll that never gave up hangs here */
		WAIT_UNTIL(parked_receivers(&ch) == 1);
		assert_int_equal(co_chan_try_send(&ch, &i), 0);
	}
	WAIT_UNTIL(atomic_load(&t.fin));
	if (read_in_flight) {
		assert_int_equal(write(p[1], "x", 1), 1);
		WAIT_UNTIL(atomic_load(&rd.fin));
	}
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_test_runner_join(&run), 0);
	assert_int_equal(t.bad, 0);
	assert_int_equal(t.got, TAKES);
	*polls = __atomic_load_n(&e.stats.polls, __ATOMIC_RELAXED);
	*hits = __atomic_load_n(&e.stats.poll_hits, __ATOMIC_RELAXED);
	assert_int_equal(co_chan_destroy(&ch), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	if (read_in_flight) {
		close(p[0]);
		close(p[1]);
	}
}

/* An end that finds the channel empty polls (it may: two CPUs, a budget,
 * nothing else to do); the poll gives up within the budget and the frame
 * parks (a poll that never ended would hang); with a cap that refuses, or
 * with I/O in flight, it does not poll at all. */
static void test_chan_poll_gives_up_or_is_refused(void **state)
{
	struct cap_hook refuse = { .allow = 0 }, allow = { .allow = 1 };
	uint64_t polls, hits;
	co_engine e;

	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	if (e.spin_max == 0) { /* one CPU: nothing polls */
		assert_int_equal(co_engine_destroy(&e), 0);
		skip();
	}
	assert_int_equal(co_engine_destroy(&e), 0);
	take_from_thread(NULL, 0, &polls, &hits);
	assert_true(polls >= 1);
	assert_int_equal(hits, 0); /* each item came after its receiver parked */
	take_from_thread(&allow, 0, &polls, &hits);
	assert_true(polls >= 1);
	assert_true(atomic_load(&allow.asked) >= (int)polls);
	take_from_thread(&refuse, 0, &polls, &hits);
	assert_true(atomic_load(&refuse.asked) > 0);
	assert_int_equal(polls, 0);
	take_from_thread(NULL, 1, &polls, &hits);
	assert_int_equal(polls, 0);
}

/* sync.md, "The timeout race": "co_wait_for(aw, 0) is a try: -ETIME at
 * once unless the wait completes at once"; and a limit is when the wait
 * ends with -ETIME. A channel end that must wait polls the channel first
 * (Channel: "an end that must wait polls the channel for a while", up to
 * the engine's poll budget, opts.spin_ns). A try must not: it has no time
 * to wait. Here an idle engine with a budget of 2 s and a receive from an
 * empty channel limited to 0, then a send into a full one limited to 0.
 * recv_suspend / send_suspend (lib/sync/channel.c) give the poll the
 * wait's deadline, which is past for a try: no poll (stats.polls). Without
 * it each try spun for the whole budget (2 s here) before its -ETIME. */
struct zero_try {
	co_frame co;
	co_waiter w;
	co_chan *empty, *full;
	uint64_t item;
	int recv_res, send_res;
	uint64_t polls_before, polls_after_recv, polls_after_send, ns_recv, ns_send;
};

static uint64_t zt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int zero_try_fn(co_frame *f)
{
	struct zero_try *t = (struct zero_try *)f;
	co_engine *e = co_engine_current();
	CO_BEGIN(f);
	t->polls_before = e->stats.polls;
	t->ns_recv = zt_now();
	CO_AWAIT(f, co_wait_for(co_chan_recv(&t->w, t->empty, &t->item), 0));
	t->ns_recv = zt_now() - t->ns_recv;
	t->recv_res = co_result(f);
	e = co_engine_current();
	t->polls_after_recv = e->stats.polls;
	e->spin_cur = e->spin_max; /* the failed poll halved it: whole again */
	t->ns_send = zt_now();
	CO_AWAIT(f, co_wait_for(co_chan_send(&t->w, t->full, &t->item), 0));
	t->ns_send = zt_now() - t->ns_send;
	t->send_res = co_result(f);
	t->polls_after_send = co_engine_current()->stats.polls;
	CO_END(f);
}

static void test_zero_limit_does_not_poll(void **state)
{
	co_engine e;
	co_chan empty, full;
	uint64_t one = 1;
	struct zero_try t;

	(void)state;
	assert_int_equal(co_engine_init(&e, &(co_engine_opts){ .spin_ns = 2 * CO_S }), 0);
	if (e.spin_max == 0) { /* one CPU: nothing polls */
		assert_int_equal(co_engine_destroy(&e), 0);
		skip();
	}
	assert_int_equal(co_chan_init(&empty, sizeof(uint64_t), 1, NULL), 0);
	assert_int_equal(co_chan_init(&full, sizeof(uint64_t), 1, NULL), 0);
	assert_int_equal(co_chan_try_send(&full, &one), 0);
	memset(&t, 0, sizeof t);
	t.empty = &empty;
	t.full = &full;
	t.recv_res = t.send_res = 1;
	co_init(&t.co, zero_try_fn);
	e.spin_cur = e.spin_max; /* a budget, as after a hand-off */
	assert_int_equal(co_engine_spawn(&e, &t.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	print_message("recv: %d after %llu us, %llu polls; send: %d after %llu us, %llu polls\n",
		      t.recv_res, (unsigned long long)(t.ns_recv / 1000),
		      (unsigned long long)(t.polls_after_recv - t.polls_before), t.send_res,
		      (unsigned long long)(t.ns_send / 1000),
		      (unsigned long long)(t.polls_after_send - t.polls_after_recv));
	assert_int_equal(t.recv_res, -ETIME);
	assert_int_equal(t.send_res, -ETIME);
	assert_int_equal(t.polls_after_recv - t.polls_before, 0);
	assert_int_equal(t.polls_after_send - t.polls_after_recv, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_chan_destroy(&empty), 0);
	assert_int_equal(co_chan_destroy(&full), 0);
}

/* sync.md, "The waiter": "A frame that has been cancelled is not parked
 * again: a wait that cannot complete at once ends with -ECANCELED" (and
 * co_cancel's request stays for its later waits). A cancelled frame's
 * receive from an empty channel has nothing to wait for: no poll
 * (stats.polls). Without channel.c's may_poll check it spun for the
 * engine's whole budget (2 s here) before its -ECANCELED. */
struct cancelled_recv {
	co_frame co;
	co_waiter w;
	co_chan *ch;
	uint64_t item, polls_before, polls_after, ns;
	int res;
};

static int cancelled_recv_fn(co_frame *f)
{
	struct cancelled_recv *t = (struct cancelled_recv *)f;
	co_engine *e = co_engine_current();
	CO_BEGIN(f);
	assert_int_equal(co_cancel(f), 0); /* the request stays */
	t->polls_before = e->stats.polls;
	t->ns = zt_now();
	CO_AWAIT(f, co_chan_recv(&t->w, t->ch, &t->item));
	t->ns = zt_now() - t->ns;
	t->res = co_result(f);
	t->polls_after = co_engine_current()->stats.polls;
	CO_END(f);
}

static void test_cancelled_recv_does_not_poll(void **state)
{
	co_engine e;
	co_chan ch;
	struct cancelled_recv t;

	(void)state;
	assert_int_equal(co_engine_init(&e, &(co_engine_opts){ .spin_ns = 2 * CO_S }), 0);
	if (e.spin_max == 0) { /* one CPU: nothing polls */
		assert_int_equal(co_engine_destroy(&e), 0);
		skip();
	}
	assert_int_equal(co_chan_init(&ch, sizeof(uint64_t), 1, NULL), 0);
	memset(&t, 0, sizeof t);
	t.ch = &ch;
	t.res = 1;
	co_init(&t.co, cancelled_recv_fn);
	e.spin_cur = e.spin_max;
	assert_int_equal(co_engine_spawn(&e, &t.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	print_message("recv: %d after %llu us, %llu polls\n", t.res,
		      (unsigned long long)(t.ns / 1000),
		      (unsigned long long)(t.polls_after - t.polls_before));
	assert_int_equal(t.res, -ECANCELED);
	assert_int_equal(t.polls_after - t.polls_before, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_chan_destroy(&ch), 0);
}

/* A frame's poll spends the engine's budget and adapts it as the engine's
 * own poll does: one that finds nothing halves it, one that finds doubles
 * it (up to spin_max), and with none left there is no poll. */
struct poller {
	co_frame co;
	uint64_t before, after_miss, after_hit, after_zero, polls_past, capped_ns;
	unsigned miss, hit, zero, past, capped;
};

static int never(void *arg)
{
	(void)arg;
	return 0;
}

static int always(void *arg)
{
	(void)arg;
	return 1;
}

static int poller_fn(co_frame *f)
{
	struct poller *p = (struct poller *)f;
	co_engine *e = co__tls_engine;
	CO_BEGIN(f);
	p->before = e->spin_cur;
	p->miss = co__engine_poll(e, never, NULL, 0, 0);
	p->after_miss = e->spin_cur;
	p->hit = co__engine_poll(e, always, NULL, 3, 0);
	p->after_hit = e->spin_cur;
	/* a deadline passed: no poll, though ready */
	p->polls_past = e->stats.polls;
	p->past = co__engine_poll(e, always, NULL, 0, co_now_ns() - 1);
	p->polls_past = e->stats.polls - p->polls_past;
	/* a deadline 2 ms away caps a budget of 2 s */
	e->spin_cur = e->spin_max;
	p->capped_ns = co_now_ns();
	p->capped = co__engine_poll(e, never, NULL, 0, p->capped_ns + 2 * CO_MS);
	p->capped_ns = co_now_ns() - p->capped_ns;
	e->spin_cur = 0;
	p->zero = co__engine_poll(e, always, NULL, 0, 0);
	p->after_zero = e->spin_cur;
	CO_END(f);
}

static void test_frame_poll_adapts_budget(void **state)
{
	co_engine e;
	struct poller p;

	(void)state;
	assert_int_equal(co_engine_init(&e, &(co_engine_opts){ .spin_ns = 2 * CO_S }), 0);
	if (e.spin_max == 0) { /* one CPU: nothing polls */
		assert_int_equal(co_engine_destroy(&e), 0);
		skip();
	}
	e.spin_cur = e.spin_max;
	co_init(&p.co, poller_fn);
	assert_int_equal(co_engine_spawn(&e, &p.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(p.before, e.spin_max);
	assert_int_equal(p.miss, 0);
	assert_int_equal(p.after_miss, e.spin_max / 2);
	assert_int_equal(p.hit, 3 + 1); /* found at the first look, after the slip */
	assert_int_equal(p.after_hit, e.spin_max);
	assert_int_equal(p.past, 0);
	assert_int_equal(p.polls_past, 0);
	assert_int_equal(p.capped, 0);
	assert_true(p.capped_ns < CO_S); /* 2 ms, not the budget's 2 s */
	assert_int_equal(p.zero, 0); /* no budget: no poll, though ready */
	assert_int_equal(p.after_zero, 0);
	assert_int_equal(e.stats.polls, 3);
	assert_int_equal(e.stats.poll_hits, 1);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* ---- a receiver that parks while a sender polls gets the next item ------------------ */

#define SENDS 200

struct sender {
	co_frame co;
	co_waiter w;
	co_chan *ch;
	uint64_t v;
	int bad;
};

static int sender_fn(co_frame *f)
{
	struct sender *t = (struct sender *)f;
	CO_BEGIN(f);
	for (t->v = 0; t->v < SENDS; t->v++) {
		CO_AWAIT(f, co_chan_send(&t->w, t->ch, &t->v));
		if (co_result(f) != 0)
			t->bad++;
	}
	CO_END(f);
}

struct park_gate {
	co_chan *ch;
	struct taker *t;
	atomic_int asked;
};

/* The sender's engine asks before it polls: hold it until the receiver has
 * parked (it took the last item and found the ring empty), then refuse. */
static int gate_spin(co_engine *e, void *arg, int begin)
{
	struct park_gate *g = arg;

	(void)e;
	if (begin) {
		atomic_fetch_add(&g->asked, 1);
		WAIT_UNTIL(parked_receivers(g->ch) == 1 || atomic_load(&g->t->fin));
	}
	return 0;
}

/* A sender on a full channel of capacity 1 lets its lock go to poll; the
 * receiver meanwhile takes the item and parks; the poll is refused. The
 * sender must then hand its item to the parked receiver: put into the
 * ring instead, it would sit there while the next item went past it
 * (or, at the last item, the receiver would wait for ever). */
static void test_chan_receiver_parked_during_sender_poll(void **state)
{
	static const struct co__engine_hooks hooks = { .spin = gate_spin };
	co_engine ea, eb;
	co_test_runner ra, rb;
	co_chan ch;
	struct taker t = { .ch = &ch, .n = SENDS };
	struct sender snd = { .ch = &ch };
	struct park_gate g = { .ch = &ch, .t = &t };

	(void)state;
	assert_int_equal(co_engine_init(&ea, NULL), 0);
	assert_int_equal(co_engine_init(&eb, &(co_engine_opts){ .no_spin = 1 }), 0);
	if (ea.spin_max == 0) { /* one CPU: nothing polls */
		assert_int_equal(co_engine_destroy(&ea), 0);
		assert_int_equal(co_engine_destroy(&eb), 0);
		skip();
	}
	assert_int_equal(co_chan_init(&ch, sizeof(uint64_t), 1, NULL), 0);
	co__engine_set_hooks(&ea, &hooks, &g);
	ea.spin_cur = ea.spin_max; /* before the run */
	co_init(&t.co, taker_fn);
	co_init(&snd.co, sender_fn);
	assert_int_equal(co_engine_spawn(&eb, &t.co), 0);
	co_test_runner_start(&rb, &eb, CO_RUN_UNTIL_STOP);
	WAIT_UNTIL(parked_receivers(&ch) == 1);
	assert_int_equal(co_engine_spawn(&ea, &snd.co), 0);
	co_test_runner_start(&ra, &ea, CO_RUN_UNTIL_STOP);
	WAIT_UNTIL(atomic_load(&t.fin)); /* an item left behind hangs here */
	assert_int_equal(co_engine_stop(&ea, CO_STOP_DRAIN), 0);
	assert_int_equal(co_engine_stop(&eb, CO_STOP_DRAIN), 0);
	assert_int_equal(co_test_runner_join(&ra), 0);
	assert_int_equal(co_test_runner_join(&rb), 0);
	assert_true(atomic_load(&g.asked) > 0); /* the sender did get to poll */
	assert_int_equal(snd.bad, 0);
	assert_int_equal(t.bad, 0); /* in order */
	assert_int_equal(t.got, SENDS);
	assert_int_equal(co_chan_destroy(&ch), 0);
	assert_int_equal(co_engine_destroy(&ea), 0);
	assert_int_equal(co_engine_destroy(&eb), 0);
}

/* ---- wakes to one engine travel together ---------------------------------------- */

#define SLEEPERS 64

struct sleeper {
	co_frame co;
	co_waiter w;
	co_event *ev;
	int res;
};

static int sleeper_fn(co_frame *f)
{
	struct sleeper *t = (struct sleeper *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_event_wait(&t->w, t->ev));
	t->res = co_result(f);
	CO_END(f);
}

/* A set that releases 64 frames parked on one sleeping engine visits it
 * once: one bump of its epoch, one eventfd write at most. */
static void test_broadcast_wakes_in_one_visit(void **state)
{
	co_engine e;
	co_event ev;
	co_test_runner r;
	struct sleeper *t = calloc(SLEEPERS, sizeof *t);
	unsigned epoch, writes;

	(void)state;
	assert_non_null(t);
	assert_int_equal(co_event_init(&ev, 0), 0);
	assert_int_equal(co_engine_init(&e, &(co_engine_opts){ .no_spin = 1 }), 0);
	for (int i = 0; i < SLEEPERS; i++) {
		t[i] = (struct sleeper){ .ev = &ev, .res = 1 };
		co_init(&t[i].co, sleeper_fn);
		assert_int_equal(co_engine_spawn(&e, &t[i].co), 0);
	}
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_IDLE);
	WAIT_UNTIL(atomic_load(&e.parked) == SLEEPERS && co__engine_sleeping(&e));
	epoch = atomic_load(&e.epoch);
	writes = atomic_load(&e.wake_writes);
	assert_int_equal(co_event_set(&ev), 0);
	assert_int_equal(atomic_load(&e.epoch) - epoch, 1);
	assert_int_equal(co_test_runner_join(&r), 0);
	assert_int_equal(atomic_load(&e.wake_writes) - writes, 1);
	for (int i = 0; i < SLEEPERS; i++)
		assert_int_equal(t[i].res, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_event_destroy(&ev), 0);
	free(t);
}

/* sync.md, "Waking across contexts": "Waiters of one engine released by
 * one call (a set, a broadcast, a release of several permits, a close)
 * travel together: their frames are pushed with one CAS in one visit,
 * which bumps epoch once and writes the engine's eventfd once at most."
 * test_broadcast_wakes_in_one_visit checks a set; here a release of 64
 * permits, a close with 64 receivers and the count downs of a latch and a
 * wait group, each releasing 64 frames parked on one sleeping engine. */
enum { RV_SEM, RV_CLOSE, RV_LATCH, RV_WAITGROUP, RV_KINDS };

struct rv_sleeper {
	co_frame co;
	co_waiter w;
	int kind, res;
	uint64_t item;
	co_sem *sem;
	co_chan *ch;
	co_latch *latch;
	co_waitgroup *wg;
};

static int rv_sleeper_fn(co_frame *f)
{
	struct rv_sleeper *t = (struct rv_sleeper *)f;
	CO_BEGIN(f);
	if (t->kind == RV_SEM)
		CO_AWAIT(f, co_sem_acquire(&t->w, t->sem));
	else if (t->kind == RV_CLOSE)
		CO_AWAIT(f, co_chan_recv(&t->w, t->ch, &t->item));
	else if (t->kind == RV_LATCH)
		CO_AWAIT(f, co_latch_wait(&t->w, t->latch));
	else
		CO_AWAIT(f, co_waitgroup_wait(&t->w, t->wg));
	t->res = co_result(f);
	CO_END(f);
}

static void test_release_wakes_in_one_visit(void **state)
{
	(void)state;
	for (int kind = 0; kind < RV_KINDS; kind++) {
		co_engine e;
		co_sem sem;
		co_chan ch;
		co_latch latch;
		co_waitgroup wg;
		co_test_runner r;
		struct rv_sleeper *t = calloc(SLEEPERS, sizeof *t);
		unsigned epoch, writes;

		assert_non_null(t);
		assert_int_equal(co_sem_init(&sem, 0), 0);
		assert_int_equal(co_chan_init(&ch, sizeof(uint64_t), 4, NULL), 0);
		assert_int_equal(co_latch_init(&latch, 2), 0);
		assert_int_equal(co_waitgroup_init(&wg), 0);
		assert_int_equal(co_waitgroup_add(&wg, 1), 0);
		assert_int_equal(co_engine_init(&e, &(co_engine_opts){ .no_spin = 1 }), 0);
		for (int i = 0; i < SLEEPERS; i++) {
			t[i] = (struct rv_sleeper){ .kind = kind, .res = 1, .sem = &sem, .ch = &ch,
						    .latch = &latch, .wg = &wg };
			co_init(&t[i].co, rv_sleeper_fn);
			assert_int_equal(co_engine_spawn(&e, &t[i].co), 0);
		}
		co_test_runner_start(&r, &e, CO_RUN_UNTIL_IDLE);
		WAIT_UNTIL(atomic_load(&e.parked) == SLEEPERS && co__engine_sleeping(&e));
		if (kind == RV_LATCH) /* not yet zero: nobody wakes */
			assert_int_equal(co_latch_count_down(&latch, 1), 0);
		epoch = atomic_load(&e.epoch);
		writes = atomic_load(&e.wake_writes);
		if (kind == RV_SEM)
			assert_int_equal(co_sem_release(&sem, SLEEPERS + 1), 0);
		else if (kind == RV_CLOSE)
			assert_int_equal(co_chan_close(&ch), 0);
		else if (kind == RV_LATCH)
			assert_int_equal(co_latch_count_down(&latch, 1), 0);
		else
			assert_int_equal(co_waitgroup_done(&wg), 0);
		assert_int_equal(atomic_load(&e.epoch) - epoch, 1);
		assert_int_equal(co_test_runner_join(&r), 0);
		assert_int_equal(atomic_load(&e.wake_writes) - writes, 1);
		for (int i = 0; i < SLEEPERS; i++)
			assert_int_equal(t[i].res, kind == RV_CLOSE ? -EPIPE : 0);
		if (kind == RV_SEM) { /* 65 released, 64 taken: one left over */
			assert_int_equal(co_sem_try_acquire(&sem), 0);
			assert_int_equal(co_sem_try_acquire(&sem), -EAGAIN);
		}
		assert_int_equal(co_engine_destroy(&e), 0);
		assert_int_equal(co_sem_destroy(&sem), 0);
		assert_int_equal(co_chan_destroy(&ch), 0);
		assert_int_equal(co_latch_destroy(&latch), 0);
		assert_int_equal(co_waitgroup_destroy(&wg), 0);
		free(t);
	}
}

/* ---- a polling engine is not quiet --------------------------------------------- */

struct quiet_spy {
	atomic_int polls, quiet_polls, quiets, unquiets;
};

/* At each poll's start: was the engine already counted quiet? */
static int spy_spin(co_engine *e, void *arg, int begin)
{
	struct quiet_spy *q = arg;

	if (!begin)
		return 0;
	atomic_fetch_add(&q->polls, 1);
	if (co__engine_quiet(e, &(unsigned){ 0 }))
		atomic_fetch_add(&q->quiet_polls, 1);
	return 1;
}

static void spy_quiet(co_engine *e, void *arg, int quiet)
{
	struct quiet_spy *q = arg;

	(void)e;
	atomic_fetch_add(quiet ? &q->quiets : &q->unquiets, 1);
}

/* An idle engine polls before it sleeps, and tells its scheduler it is
 * quiet only once it goes to sleep: a hand-off that a poll catches then
 * costs no write to the scheduler's shared count, and a context is never
 * counted quiet while it still looks for work. */
static void test_quiet_only_after_poll(void **state)
{
	static const struct co__engine_hooks hooks = { .spin = spy_spin, .quiet = spy_quiet };
	struct quiet_spy q = { 0 };
	co_engine e;
	co_test_runner r;
	struct sleeper t = { .res = 1 };
	co_event ev;

	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	if (e.spin_max == 0) { /* one CPU: nothing polls */
		assert_int_equal(co_engine_destroy(&e), 0);
		skip();
	}
	assert_int_equal(co_event_init(&ev, 0), 0);
	co__engine_set_hooks(&e, &hooks, &q);
	e.spin_cur = e.spin_max; /* before the run: it polls when it runs dry */
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_STOP);
	WAIT_UNTIL(atomic_load(&q.quiets) == 1 && co__engine_sleeping(&e));
	assert_true(atomic_load(&q.polls) >= 1);
	assert_int_equal(atomic_load(&q.quiet_polls), 0);
	/* a spawn takes it out of quiet; its frame parks on the event, and the
	 * engine (a frame parked: not quiet) sleeps with no further count */
	t.ev = &ev;
	co_init(&t.co, sleeper_fn);
	assert_int_equal(co_engine_spawn(&e, &t.co), 0);
	WAIT_UNTIL(atomic_load(&e.parked) == 1 && co__engine_sleeping(&e));
	assert_int_equal(atomic_load(&q.unquiets), 1);
	assert_int_equal(co_event_set(&ev), 0);
	WAIT_UNTIL(atomic_load(&q.quiets) == 2 && co__engine_sleeping(&e));
	assert_int_equal(t.res, 0);
	assert_int_equal(atomic_load(&q.quiet_polls), 0);
	assert_true(atomic_load(&q.polls) >= 2);
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_test_runner_join(&r), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_event_destroy(&ev), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handoffs_arrive_polling),
		cmocka_unit_test(test_handoffs_arrive_not_polling),
		cmocka_unit_test(test_poll_ends_after_last_handoff),
		cmocka_unit_test(test_no_poll_without_handoffs),
		cmocka_unit_test(test_spin_options),
		cmocka_unit_test(test_sched_caps_pollers),
		cmocka_unit_test(test_sched_uncapped_counts_nothing),
		cmocka_unit_test(test_sched_manual_not_a_poller),
		cmocka_unit_test(test_broadcast_wakes_in_one_visit),
		cmocka_unit_test(test_release_wakes_in_one_visit),
		cmocka_unit_test(test_quiet_only_after_poll),
		cmocka_unit_test(test_chan_poll_gives_up_or_is_refused),
		cmocka_unit_test(test_frame_poll_adapts_budget),
		cmocka_unit_test(test_zero_limit_does_not_poll),
		cmocka_unit_test(test_cancelled_recv_does_not_poll),
		cmocka_unit_test(test_chan_receiver_parked_during_sender_poll),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
