/* SPDX-License-Identifier: MIT */
/* Tests of the bounded channel (lib/sync/channel.c): many producers and
 * consumers across contexts, close, timeouts, cancel, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <cmocka.h>

#include <coring/loop.h>
#include <coring/channel.h>
#include <coring/scheduler.h>
#include <coring/io.h>
#include "common/fault.h"
#include "common/tsan.h"
#include "sync/slip.h"
#include "helpers.h"

static void sched_start(co_sched *s)
{
	co_sched_opts o = { .contexts = 2 };
	assert_int_equal(co_sched_init(s, &o), 0);
}

/* Blocked parties on a queue, counted under the channel's lock. */
static unsigned blocked(co_chan *c, int senders)
{
	unsigned n = 0;
	while (atomic_exchange(&c->lock, 1))
		;
	for (co_waiter *w = senders ? c->sendq.head : c->recvq.head; w; w = w->next)
		n++;
	atomic_store(&c->lock, 0);
	return n;
}

/* ---- N producers x M consumers across 2 contexts: every item exactly once ------- */

#define PRODUCERS 4
#define CONSUMERS 4
#define PER_PRODUCER 5000
#define CAPACITY 8

struct item {
	uint32_t producer, seq;
	uint64_t check;
};

static uint64_t check_of(uint32_t p, uint32_t s)
{
	uint64_t x = ((uint64_t)p << 32 | s) * 0x9E3779B97F4A7C15ull;
	return x ^ (x >> 29);
}

struct mpmc {
	co_chan ch;
	co_waitgroup producing;
	atomic_uchar seen[PRODUCERS * PER_PRODUCER];
	atomic_int received, bad;
};

struct producer {
	co_frame co;
	co_waiter w;
	struct mpmc *m;
	uint32_t id, seq;
	struct item it;
};

static int producer_fn(co_frame *f)
{
	struct producer *p = (struct producer *)f;
	CO_BEGIN(f);
	for (p->seq = 0; p->seq < PER_PRODUCER; p->seq++) {
		p->it = (struct item){ p->id, p->seq, check_of(p->id, p->seq) };
		CO_AWAIT(f, co_chan_send(&p->w, &p->m->ch, &p->it));
		if (co_result(f) != 0)
			CO_RETURN(f, co_result(f));
	}
	assert_int_equal(co_waitgroup_done(&p->m->producing), 0);
	CO_END(f);
}

struct consumer {
	co_frame co;
	co_waiter w;
	struct mpmc *m;
	struct item it;
	int64_t last[PRODUCERS];  /* per producer: items arrive in send order */
	int got;
	unsigned many;            /* 0: co_chan_recv; else co_chan_recv_many */
	struct item batch[8];
};

/* One received item: counted once, in its producer's order. */
static void consumer_take(struct consumer *c, const struct item *it)
{
	if (it->producer >= PRODUCERS || it->seq >= PER_PRODUCER ||
	    it->check != check_of(it->producer, it->seq) ||
	    (int64_t)it->seq <= c->last[it->producer]) {
		atomic_fetch_add(&c->m->bad, 1);
		return;
	}
	c->last[it->producer] = it->seq;
	atomic_fetch_add(&c->m->seen[it->producer * PER_PRODUCER + it->seq], 1);
	atomic_fetch_add(&c->m->received, 1);
	c->got++;
}

static int consumer_fn(co_frame *f)
{
	struct consumer *c = (struct consumer *)f;
	CO_BEGIN(f);
	for (int i = 0; i < PRODUCERS; i++)
		c->last[i] = -1;
	while (c->many == 0) {
		CO_AWAIT(f, co_chan_recv(&c->w, &c->m->ch, &c->it));
		if (co_result(f) == -EPIPE)
			break;
		assert_int_equal(co_result(f), 0);
		consumer_take(c, &c->it);
	}
	while (c->many != 0) {
		CO_AWAIT(f, co_chan_recv_many(&c->w, &c->m->ch, c->batch, c->many));
		if (co_result(f) == -EPIPE)
			break;
		assert_in_range(co_result(f), 1, c->many);
		for (int k = 0; k < co_result(f); k++)
			consumer_take(c, &c->batch[k]);
	}
	CO_END(f);
}

struct closer {
	co_frame co;
	co_waiter w;
	co_io io;
	co_chan *ch;
	co_waitgroup *wg;         /* wait for it first, if set */
	unsigned recv_blocked, send_blocked; /* or for this many blocked parties */
	int res;
};

static int closer_fn(co_frame *f)
{
	struct closer *c = (struct closer *)f;
	CO_BEGIN(f);
	if (c->wg) {
		CO_AWAIT(f, co_waitgroup_wait(&c->w, c->wg));
		assert_int_equal(co_result(f), 0);
	}
	while (blocked(c->ch, 0) < c->recv_blocked || blocked(c->ch, 1) < c->send_blocked)
		CO_AWAIT(f, co_sleep(&c->io, CO_MS));
	c->res = co_chan_close(c->ch);
	CO_END(f);
}

/* consumers with many != 0 receive with co_chan_recv_many; a channel of
 * capacity cap; no_spin: ends park at once (engine opts.no_spin) */
static void mpmc_run_on(unsigned many, unsigned cap, int no_spin)
{
	co_sched s;
	struct mpmc *m = calloc(1, sizeof *m);
	struct producer p[PRODUCERS];
	struct consumer *c = calloc(CONSUMERS, sizeof *c);
	struct closer cl = { .res = 1 };
	assert_non_null(m);
	assert_non_null(c);
	assert_int_equal(co_chan_init(&m->ch, sizeof(struct item), cap, NULL), 0);
	assert_int_equal(co_waitgroup_init(&m->producing), 0);
	assert_int_equal(co_waitgroup_add(&m->producing, PRODUCERS), 0);
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 2,
					 .engine = { .no_spin = no_spin } }), 0);
	for (unsigned i = 0; i < CONSUMERS; i++) {
		c[i].m = m;
		c[i].many = many ? 1 + (i * many) % 8 : 0; /* 1 .. 8 */
		co_init(&c[i].co, consumer_fn);
		assert_int_equal(co_sched_spawn_to(&s, i % 2, &c[i].co), 0);
	}
	for (unsigned i = 0; i < PRODUCERS; i++) {
		p[i] = (struct producer){ .m = m, .id = i };
		co_init(&p[i].co, producer_fn);
		assert_int_equal(co_sched_spawn_to(&s, (i + 1) % 2, &p[i].co), 0);
	}
	cl.ch = &m->ch;
	cl.wg = &m->producing;
	co_init(&cl.co, closer_fn);
	assert_int_equal(co_sched_spawn(&s, &cl.co), 0);
	assert_int_equal(co_sched_run(&s), 0);

	assert_int_equal(cl.res, 0);
	assert_int_equal(atomic_load(&m->bad), 0);
	assert_int_equal(atomic_load(&m->received), PRODUCERS * PER_PRODUCER);
	for (int i = 0; i < PRODUCERS * PER_PRODUCER; i++)
		if (atomic_load(&m->seen[i]) != 1)
			fail_msg("item %d seen %d times", i, atomic_load(&m->seen[i]));
	for (int i = 0; i < PRODUCERS; i++)
		assert_int_equal(co_status(&p[i].co), 0);
	int sum = 0;
	for (int i = 0; i < CONSUMERS; i++)
		sum += c[i].got;
	assert_int_equal(sum, PRODUCERS * PER_PRODUCER);
	assert_int_equal(co_chan_destroy(&m->ch), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	free(c);
	free(m);
}

static void mpmc_run(unsigned many)
{
	mpmc_run_on(many, CAPACITY, 0);
}

static void test_mpmc_exactly_once(void **state)
{
	(void)state;
	mpmc_run(0);
}

/* Capacities 1 and 2, where the ring is full or empty most of the time:
 * a receiver may drain it while another, having taken an item, is about
 * to refill it from a parked sender (the drainer must not park then: it
 * refills the ring itself). Ends that park at once and ends that poll
 * first; SMALL_CAP_ROUNDS rounds, since that moment is short. Under TSan,
 * where a round costs ten times as much, a quarter of them: the other
 * builds run them all, and their counts catch an item or a wake-up lost. */
#ifdef CO_TSAN
#define SMALL_CAP_ROUNDS 10
#else
#define SMALL_CAP_ROUNDS 40
#endif

static void test_mpmc_small_capacity(void **state)
{
	(void)state;
	for (int i = 0; i < SMALL_CAP_ROUNDS; i++) {
		for (unsigned cap = 1; cap <= 2; cap++) {
			mpmc_run_on(0, cap, 1);
			mpmc_run_on(0, cap, 0);
			mpmc_run_on(2, cap, 1);
		}
	}
}

/* The same with consumers taking up to 1 .. 8 items a call. */
static void test_recv_many_exactly_once(void **state)
{
	(void)state;
	mpmc_run(3);
}

/* Timed receives racing with senders on the other context: a receive
 * either gets an item (0) or times out (-ETIME) having taken nothing. */
#define TIMED_ITEMS 3000

struct timed_mpmc {
	co_chan ch;
	atomic_uchar seen[TIMED_ITEMS];
	atomic_int received, timeouts, bad;
};

struct slow_producer {
	co_frame co;
	co_waiter w;
	co_io io;
	struct timed_mpmc *m;
	uint64_t v;
	int i;
};

static int slow_producer_fn(co_frame *f)
{
	struct slow_producer *p = (struct slow_producer *)f;
	CO_BEGIN(f);
	for (p->i = 0; p->i < TIMED_ITEMS; p->i++) {
		if (p->i % 64 == 0) /* let the receivers time out now and then */
			CO_AWAIT(f, co_sleep(&p->io, 200 * CO_US));
		p->v = (uint64_t)p->i;
		CO_AWAIT(f, co_chan_send(&p->w, &p->m->ch, &p->v));
		assert_int_equal(co_result(f), 0);
	}
	assert_int_equal(co_chan_close(&p->m->ch), 0);
	CO_END(f);
}

struct timed_consumer {
	co_frame co;
	co_waiter w;
	struct timed_mpmc *m;
	uint64_t v, ns;
	int k;
};

static int timed_consumer_fn(co_frame *f)
{
	struct timed_consumer *c = (struct timed_consumer *)f;
	CO_BEGIN(f);
	for (c->k = 0;; c->k++) {
		c->v = UINT64_MAX;
		c->ns = (uint64_t)(c->k % 5) * 40 * CO_US + 1; /* 1 ns: a try */
		CO_AWAIT(f, co_wait_for(co_chan_recv(&c->w, &c->m->ch, &c->v), c->ns));
		if (co_result(f) == -EPIPE)
			break;
		if (co_result(f) == -ETIME) {
			if (c->v != UINT64_MAX)
				atomic_fetch_add(&c->m->bad, 1); /* took an item and lost it */
			atomic_fetch_add(&c->m->timeouts, 1);
			continue;
		}
		if (co_result(f) != 0 || c->v >= TIMED_ITEMS) {
			atomic_fetch_add(&c->m->bad, 1);
			continue;
		}
		atomic_fetch_add(&c->m->seen[c->v], 1);
		atomic_fetch_add(&c->m->received, 1);
	}
	CO_END(f);
}

static void test_timed_receives_lose_nothing(void **state)
{
	co_sched s;
	struct timed_mpmc *m = calloc(1, sizeof *m);
	struct slow_producer p = { .m = m };
	struct timed_consumer c[4];
	(void)state;
	assert_non_null(m);
	assert_int_equal(co_chan_init(&m->ch, sizeof(uint64_t), 2, NULL), 0);
	sched_start(&s);
	co_init(&p.co, slow_producer_fn);
	assert_int_equal(co_sched_spawn_to(&s, 0, &p.co), 0);
	for (unsigned i = 0; i < 4; i++) {
		c[i] = (struct timed_consumer){ .m = m };
		co_init(&c[i].co, timed_consumer_fn);
		assert_int_equal(co_sched_spawn_to(&s, (i % 2) ? 0 : 1, &c[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(atomic_load(&m->bad), 0);
	assert_int_equal(atomic_load(&m->received), TIMED_ITEMS);
	for (int i = 0; i < TIMED_ITEMS; i++)
		if (atomic_load(&m->seen[i]) != 1)
			fail_msg("item %d seen %d times", i, atomic_load(&m->seen[i]));
	assert_true(atomic_load(&m->timeouts) > 0);
	assert_int_equal(co_chan_destroy(&m->ch), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	free(m);
}

/* ---- close wakes every blocked party ------------------------------------------------ */

struct party {
	co_frame co;
	co_waiter w;
	co_chan *ch;
	uint64_t item;
	int res;
};

static int receiver_fn(co_frame *f)
{
	struct party *t = (struct party *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_chan_recv(&t->w, t->ch, &t->item));
	t->res = co_result(f);
	CO_END(f);
}

static int sender_fn(co_frame *f)
{
	struct party *t = (struct party *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_chan_send(&t->w, t->ch, &t->item));
	t->res = co_result(f);
	CO_END(f);
}

#define BLOCKED 6

static void test_close_wakes_blocked(void **state)
{
	co_sched s;
	co_chan ch;
	uint64_t storage[2], v;
	struct party r[BLOCKED], snd[BLOCKED];
	struct closer cl = { .res = 1 };
	(void)state;
	sched_start(&s);

	/* receivers blocked on an empty channel, on both contexts */
	assert_int_equal(co_chan_init(&ch, sizeof(uint64_t), 2, storage), 0);
	for (unsigned i = 0; i < BLOCKED; i++) {
		r[i] = (struct party){ .ch = &ch, .res = 1 };
		co_init(&r[i].co, receiver_fn);
		assert_int_equal(co_sched_spawn_to(&s, i % 2, &r[i].co), 0);
	}
	cl = (struct closer){ .ch = &ch, .recv_blocked = BLOCKED, .res = 1 };
	co_init(&cl.co, closer_fn);
	assert_int_equal(co_sched_spawn(&s, &cl.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(cl.res, 0);
	for (int i = 0; i < BLOCKED; i++)
		assert_int_equal(r[i].res, -EPIPE);
	assert_int_equal(co_chan_close(&ch), -EALREADY);
	assert_int_equal(co_chan_destroy(&ch), 0);

	/* senders blocked on a full channel; receivers then drain, then -EPIPE */
	assert_int_equal(co_chan_init(&ch, sizeof(uint64_t), 2, NULL), 0);
	v = 100;
	assert_int_equal(co_chan_try_send(&ch, &v), 0);
	v = 101;
	assert_int_equal(co_chan_try_send(&ch, &v), 0);
	assert_int_equal(co_chan_try_send(&ch, &v), -EAGAIN);
	for (unsigned i = 0; i < BLOCKED; i++) {
		snd[i] = (struct party){ .ch = &ch, .item = 200 + i, .res = 1 };
		co_init(&snd[i].co, sender_fn);
		assert_int_equal(co_sched_spawn_to(&s, i % 2, &snd[i].co), 0);
	}
	cl = (struct closer){ .ch = &ch, .send_blocked = BLOCKED, .res = 1 };
	co_init(&cl.co, closer_fn);
	assert_int_equal(co_sched_spawn(&s, &cl.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(cl.res, 0);
	for (int i = 0; i < BLOCKED; i++)
		assert_int_equal(snd[i].res, -EPIPE);
	v = 1;
	assert_int_equal(co_chan_try_send(&ch, &v), -EPIPE);
	assert_int_equal(co_chan_len(&ch), 2);
	assert_int_equal(co_chan_try_recv(&ch, &v), 0);
	assert_int_equal(v, 100);
	assert_int_equal(co_chan_try_recv(&ch, &v), 0);
	assert_int_equal(v, 101);
	assert_int_equal(co_chan_try_recv(&ch, &v), -EPIPE);
	assert_int_equal(co_chan_destroy(&ch), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- hand-off order, timeouts, cancel (one engine) --------------------------------- */

struct timed_party {
	co_frame co;
	co_waiter w;
	co_chan *ch;
	uint64_t item, ns;
	int send, res;
};

static int timed_party_fn(co_frame *f)
{
	struct timed_party *t = (struct timed_party *)f;
	CO_BEGIN(f);
	if (t->send)
		CO_AWAIT(f, co_wait_for(co_chan_send(&t->w, t->ch, &t->item), t->ns));
	else
		CO_AWAIT(f, co_wait_for(co_chan_recv(&t->w, t->ch, &t->item), t->ns));
	t->res = co_result(f);
	CO_END(f);
}

struct cancel_task {
	co_frame co;
	co_frame *victim;
};

static int cancel_task_fn(co_frame *f)
{
	struct cancel_task *c = (struct cancel_task *)f;
	CO_BEGIN(f);
	CO_YIELD(f);
	assert_int_equal(co_cancel(c->victim), 0);
	CO_END(f);
}

static void test_timeouts_and_cancel(void **state)
{
	co_engine e;
	co_chan empty, full;
	uint64_t v;
	struct timed_party r = { .ch = &empty, .ns = 5 * CO_MS, .res = 1 };
	struct timed_party s = { .ch = &full, .ns = 5 * CO_MS, .send = 1, .item = 7, .res = 1 };
	struct party victim = { .ch = &full, .item = 8, .res = 1 };
	struct cancel_task ct = { .victim = &victim.co };
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_chan_init(&empty, sizeof v, 1, NULL), 0);
	assert_int_equal(co_chan_init(&full, sizeof v, 1, NULL), 0);
	v = 1;
	assert_int_equal(co_chan_try_send(&full, &v), 0);
	co_init(&r.co, timed_party_fn);
	co_init(&s.co, timed_party_fn);
	co_init(&victim.co, sender_fn);
	co_init(&ct.co, cancel_task_fn);
	assert_int_equal(co_engine_spawn(&e, &r.co), 0);
	assert_int_equal(co_engine_spawn(&e, &s.co), 0);
	assert_int_equal(co_engine_spawn(&e, &victim.co), 0);
	assert_int_equal(co_engine_spawn(&e, &ct.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(r.res, -ETIME);
	assert_int_equal(s.res, -ETIME);
	assert_int_equal(victim.res, -ECANCELED);
	/* neither the timed-out nor the cancelled send delivered anything */
	assert_int_equal(co_chan_len(&full), 1);
	assert_int_equal(co_chan_try_recv(&full, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(co_chan_try_recv(&full, &v), -EAGAIN);
	assert_int_equal(co_chan_try_recv(&empty, &v), -EAGAIN);
	assert_int_equal(co_chan_destroy(&empty), 0);
	assert_int_equal(co_chan_destroy(&full), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* Blocked receivers are served first come, first served, and straight
 * from the sender (the ring stays empty); blocked senders likewise. */
static void test_fifo_direct_handoff(void **state)
{
	co_loop loop;
	co_chan ch;
	uint64_t v;
	struct party r[3], snd[3];
	(void)state;
	co_loop_init(&loop);
	assert_int_equal(co_chan_init(&ch, sizeof v, 1, NULL), 0);
	for (int i = 0; i < 3; i++) {
		r[i] = (struct party){ .ch = &ch, .res = 1 };
		co_init(&r[i].co, receiver_fn);
		assert_int_equal(co_loop_spawn(&loop, &r[i].co), 0);
	}
	assert_int_equal(co_loop_run(&loop), 3); /* all blocked */
	for (v = 10; v < 13; v++)
		assert_int_equal(co_chan_try_send(&ch, &v), 0);
	assert_int_equal(co_chan_len(&ch), 0);
	assert_int_equal(co_loop_run(&loop), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(r[i].res, 0);
		assert_int_equal(r[i].item, 10 + (uint64_t)i);
	}
	v = 20;
	assert_int_equal(co_chan_try_send(&ch, &v), 0); /* fills the ring */
	for (int i = 0; i < 3; i++) {
		snd[i] = (struct party){ .ch = &ch, .item = 21 + (uint64_t)i, .res = 1 };
		co_init(&snd[i].co, sender_fn);
		assert_int_equal(co_loop_spawn(&loop, &snd[i].co), 0);
	}
	assert_int_equal(co_loop_run(&loop), 3);
	for (uint64_t want = 20; want < 24; want++) {
		assert_int_equal(co_chan_try_recv(&ch, &v), 0);
		assert_int_equal(v, want);
	}
	assert_int_equal(co_loop_run(&loop), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(snd[i].res, 0);
	/* destroy refuses while someone is blocked */
	r[0] = (struct party){ .ch = &ch, .res = 1 };
	co_init(&r[0].co, receiver_fn);
	assert_int_equal(co_loop_spawn(&loop, &r[0].co), 0);
	assert_int_equal(co_loop_run(&loop), 1);
	assert_int_equal(co_chan_destroy(&ch), -EBUSY);
	assert_int_equal(co_chan_close(&ch), 0);
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(r[0].res, -EPIPE);
	assert_int_equal(co_chan_destroy(&ch), 0);
}

/* At the refill point: a new sender comes between a receiver's take and
 * its refill from the parked senders, and tries to send. */
struct cutter {
	co_chan *ch;
	uint64_t item;
	int res;
};

static void cutter_send(void *arg)
{
	struct cutter *k = arg;

	co__fault_on_point(CO__POINT_CHAN_REFILL, NULL, NULL); /* once */
	k->res = co_chan_try_send(k->ch, &k->item);
}

/* A sender does not pass parked senders: a receiver frees the slot of a
 * full channel with a sender parked and, before it has refilled the ring
 * from that sender, a new one tries to send. The new one must find the
 * slot taken by the parked sender's item (-EAGAIN), not take it, or its
 * item would overtake one sent earlier. The window is held open by the
 * test build's refill point (lib/common/fault.h). */
static void test_new_sender_queues_behind_parked(void **state)
{
	co_loop loop;
	co_chan ch;
	uint64_t v = 20;
	struct party snd = { .ch = &ch, .item = 21, .res = 1 };
	struct cutter k = { .ch = &ch, .item = 99, .res = 1 };
	(void)state;
	co_loop_init(&loop);
	assert_int_equal(co_chan_init(&ch, sizeof v, 1, NULL), 0);
	assert_int_equal(co_chan_try_send(&ch, &v), 0); /* fills the ring */
	co_init(&snd.co, sender_fn);
	assert_int_equal(co_loop_spawn(&loop, &snd.co), 0);
	assert_int_equal(co_loop_run(&loop), 1); /* 21 parked */
	co__fault_on_point(CO__POINT_CHAN_REFILL, cutter_send, &k);
	assert_int_equal(co_chan_try_recv(&ch, &v), 0);
	assert_int_equal(v, 20);
	assert_int_equal(k.res, -EAGAIN); /* the point was reached, the slot was 21's */
	assert_int_equal(co_chan_try_recv(&ch, &v), 0);
	assert_int_equal(v, 21);
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(snd.res, 0);
	assert_int_equal(co_chan_try_send(&ch, &k.item), 0); /* now it may */
	assert_int_equal(co_chan_try_recv(&ch, &v), 0);
	assert_int_equal(v, 99);
	assert_int_equal(co_chan_destroy(&ch), 0);
}

/* At the refill point, a receiving frame instead of a new sender. The
 * ring is empty (the first receiver took its only item) but a sender is
 * still parked. lib/sync/channel.c: "A receiver that finds the ring empty
 * while senders are still parked ... refills it itself instead of
 * parking"; sync.md: "receivers wait only on an empty ring and senders
 * only on a full one". The frame, run by a second loop at the point,
 * takes the parked sender's item at once (it does not park), the first
 * receiver's refill then finds nobody, and the item arrives exactly once. */
struct overtaker {
	co_loop loop;
	struct party r;
	int parked;               /* what the second loop's run answered */
};

static void overtaker_recv(void *arg)
{
	struct overtaker *k = arg;

	co__fault_on_point(CO__POINT_CHAN_REFILL, NULL, NULL); /* once */
	co_init(&k->r.co, receiver_fn);
	assert_int_equal(co_loop_spawn(&k->loop, &k->r.co), 0);
	k->parked = co_loop_run(&k->loop);
}

static void test_receiver_in_refill_window_takes_parked(void **state)
{
	co_loop loop;
	co_chan ch;
	uint64_t v = 20;
	struct party snd = { .ch = &ch, .item = 21, .res = 1 };
	struct overtaker k;
	(void)state;
	memset(&k, 0, sizeof k);
	k.r = (struct party){ .ch = &ch, .res = 1 };
	k.parked = -1;
	co_loop_init(&loop);
	co_loop_init(&k.loop);
	assert_int_equal(co_chan_init(&ch, sizeof v, 1, NULL), 0);
	assert_int_equal(co_chan_try_send(&ch, &v), 0); /* fills the ring */
	co_init(&snd.co, sender_fn);
	assert_int_equal(co_loop_spawn(&loop, &snd.co), 0);
	assert_int_equal(co_loop_run(&loop), 1); /* 21 parked */
	co__fault_on_point(CO__POINT_CHAN_REFILL, overtaker_recv, &k);
	assert_int_equal(co_chan_try_recv(&ch, &v), 0);
	assert_int_equal(v, 20);
	assert_int_equal(k.parked, 0); /* it did not park */
	assert_int_equal(k.r.res, 0);
	assert_int_equal(k.r.item, 21);
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(snd.res, 0);
	assert_int_equal(co_chan_try_recv(&ch, &v), -EAGAIN); /* once */
	assert_int_equal(co_chan_len(&ch), 0);
	assert_int_equal(co_chan_destroy(&ch), 0);
}

/* ---- co_chan_recv_many -------------------------------------------------------------- */

struct mparty {
	co_frame co;
	co_waiter w;
	co_chan *ch;
	void *items;              /* NULL: into own[] */
	unsigned max;
	int null_items;           /* pass NULL as items */
	uint64_t own[8];
	int res;
};

static int many_fn(co_frame *f)
{
	struct mparty *t = (struct mparty *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_chan_recv_many(&t->w, t->ch,
				      t->null_items ? NULL : t->items ? t->items : (void *)t->own,
				      t->max));
	t->res = co_result(f);
	CO_END(f);
}

static int many_run(co_loop *loop, struct mparty *t, co_chan *ch, unsigned max)
{
	*t = (struct mparty){ .ch = ch, .max = max, .res = 1 };
	co_init(&t->co, many_fn);
	assert_int_equal(co_loop_spawn(loop, &t->co), 0);
	return co_loop_run(loop);
}

/* ---- destroy while a send or receive is under way ------------------------------------ */

/*
 * An end that must wait polls the channel before it parks, holding none of
 * its locks; so does a receiver that finds the senders' lock taken and
 * lets go of its own to take both in order. The test build's poll point
 * (lib/common/fault.h) holds that moment open. There co_chan_destroy answers
 * -EBUSY and changes nothing, whether the point itself destroys (on the
 * end's thread) or holds the window while the test thread does; the wait
 * then completes as if nothing had been asked. Under ASan a destroy that
 * went through would free the ring the end is about to use.
 */
struct in_poll {
	co_chan *ch;
	int block;                /* hold the window until released */
	atomic_int reached, released, destroy_res;
};

static void in_poll_hook(void *arg)
{
	struct in_poll *k = arg;

	co__fault_on_point(CO__POINT_CHAN_POLL, NULL, NULL); /* once */
	atomic_store(&k->reached, 1);
	if (!k->block)
		atomic_store(&k->destroy_res, co_chan_destroy(k->ch));
	while (k->block && !atomic_load(&k->released))
		sched_yield(); /* the test thread destroys meanwhile */
}

struct poll_party {
	co_frame co;
	co_waiter w;
	co_chan *ch;
	int send;
	uint64_t item;
	atomic_int res;           /* 1 until the await completed */
};

static int poll_party_fn(co_frame *f)
{
	struct poll_party *p = (struct poll_party *)f;
	CO_BEGIN(f);
	if (p->send)
		CO_AWAIT(f, co_chan_send(&p->w, p->ch, &p->item));
	else
		CO_AWAIT(f, co_chan_recv(&p->w, p->ch, &p->item));
	atomic_store(&p->res, co_result(f));
	CO_END(f);
}

/* send: a sender on a full channel, else a receiver on an empty one;
 * block: the test thread destroys; in_order: the end does not poll, the
 * receiver finds the senders' lock held (by this thread, until the point
 * is reached) and takes the locks in order. */
static void destroy_in_poll(int send, int block, int in_order)
{
	co_engine e;
	co_test_runner run;
	co_chan ch;
	uint64_t v = 7;
	struct poll_party p = { .ch = &ch, .send = send, .item = 42, .res = 1 };
	struct in_poll k = { .ch = &ch, .block = block, .destroy_res = 1 };

	assert_int_equal(co_engine_init(&e, NULL), 0);
	/* the end polls, whatever the CPUs; or never */
	e.spin_max = e.spin_cur = in_order ? 0 : 1000000;
	assert_int_equal(co_chan_init(&ch, sizeof v, 1, NULL), 0);
	if (send)
		assert_int_equal(co_chan_try_send(&ch, &v), 0); /* full: the sender waits */
	if (in_order)
		while (atomic_exchange(&ch.slock, 1)) /* the senders' lock, as a test may */
			;
	co__fault_on_point(CO__POINT_CHAN_POLL, in_poll_hook, &k);
	co_init(&p.co, poll_party_fn);
	assert_int_equal(co_engine_spawn(&e, &p.co), 0);
	co_test_runner_start(&run, &e, CO_RUN_UNTIL_STOP);
	WAIT_UNTIL(atomic_load(&k.reached));
	if (in_order)
		atomic_store(&ch.slock, 0); /* a destroy, and then the end, may take it */
	if (block) { /* from this thread, while the end polls on its own */
		assert_int_equal(co_chan_destroy(&ch), -EBUSY);
		atomic_store(&k.released, 1);
	} else {
		WAIT_UNTIL(atomic_load(&k.destroy_res) != 1);
		assert_int_equal(atomic_load(&k.destroy_res), -EBUSY);
	}
	/* nothing changed: the other end comes, the wait completes */
	if (send) {
		assert_int_equal(co_chan_try_recv(&ch, &v), 0);
		assert_int_equal(v, 7);
		WAIT_UNTIL(atomic_load(&p.res) != 1);
		assert_int_equal(co_chan_try_recv(&ch, &v), 0);
		assert_int_equal(v, 42);
	} else {
		assert_int_equal(co_chan_try_send(&ch, &v), 0);
		WAIT_UNTIL(atomic_load(&p.res) != 1);
		assert_int_equal(p.item, 7);
	}
	assert_int_equal(atomic_load(&p.res), 0);
	assert_int_equal(co_engine_stop(&e, CO_STOP_DRAIN), 0);
	assert_int_equal(co_test_runner_join(&run), 0);
	assert_int_equal(__atomic_load_n(&e.stats.polls, __ATOMIC_RELAXED) >= 1, !in_order);
	assert_int_equal(co_chan_destroy(&ch), 0); /* nobody inside now */
	assert_int_equal(co_chan_destroy(&ch), -EINVAL);
	assert_int_equal(co_chan_len(&ch), -EINVAL);
	assert_int_equal(co_chan_try_send(&ch, &v), -EINVAL);
	assert_int_equal(co_chan_try_recv(&ch, &v), -EINVAL);
	assert_int_equal(co_chan_close(&ch), -EINVAL);
	assert_int_equal(co_engine_destroy(&e), 0);
}

static void test_destroy_while_polling(void **state)
{
	(void)state;
	for (int send = 0; send < 2; send++)
		for (int block = 0; block < 2; block++)
			destroy_in_poll(send, block, 0);
	for (int block = 0; block < 2; block++)
		destroy_in_poll(0, block, 1);
}

/*
 * A receiver of many that took the ring's items and saw a sender parked
 * lets go of its lock and refills the ring from the senders, then takes
 * more: at the refill point (lib/common/fault.h) the parked sender is cancelled
 * and a new item sent, so that no frame is parked and the ring holds an
 * item the receiver is about to take. Destroy answers -EBUSY there (the
 * receiver is inside), and the receiver takes that item. The same for a
 * co_chan_try_recv that refills.
 */
struct in_refill {
	co_chan *ch;
	co_frame *parked;         /* the parked sender, cancelled here */
	uint64_t item;
	int destroy_res;
};

static void in_refill_hook(void *arg)
{
	struct in_refill *k = arg;

	co__fault_on_point(CO__POINT_CHAN_REFILL, NULL, NULL); /* once */
	assert_int_equal(co_cancel(k->parked), 0); /* no sender parked now */
	assert_int_equal(co_chan_try_send(k->ch, &k->item), 0);
	k->destroy_res = co_chan_destroy(k->ch);
}

static void test_destroy_while_refilling(void **state)
{
	co_loop loop;
	co_chan ch;
	uint64_t v, got[4];
	struct party snd = { .ch = &ch, .item = 3, .res = 1 };
	struct mparty r;
	struct in_refill k = { .ch = &ch, .parked = &snd.co, .item = 9, .destroy_res = 1 };
	(void)state;
	co_loop_init(&loop);
	assert_int_equal(co_chan_init(&ch, sizeof v, 2, NULL), 0);
	for (v = 1; v <= 2; v++)
		assert_int_equal(co_chan_try_send(&ch, &v), 0); /* full */
	co_init(&snd.co, sender_fn);
	assert_int_equal(co_loop_spawn(&loop, &snd.co), 0);
	assert_int_equal(co_loop_run(&loop), 1); /* 3 parked */
	co__fault_on_point(CO__POINT_CHAN_REFILL, in_refill_hook, &k);
	assert_int_equal(many_run(&loop, &r, &ch, 4), 0);
	assert_int_equal(k.destroy_res, -EBUSY);
	assert_int_equal(r.res, 3); /* 1, 2, then the item sent at the point */
	memcpy(got, r.own, sizeof got);
	assert_int_equal(got[0], 1);
	assert_int_equal(got[1], 2);
	assert_int_equal(got[2], 9);
	assert_int_equal(snd.res, -ECANCELED); /* it delivered nothing */
	assert_int_equal(co_chan_len(&ch), 0);

	/* a try_recv: it took 1 and refills; 9 is in the ring after it */
	v = 1;
	assert_int_equal(co_chan_try_send(&ch, &v), 0);
	assert_int_equal(co_chan_try_send(&ch, &v), 0); /* full */
	snd = (struct party){ .ch = &ch, .item = 3, .res = 1 };
	co_init(&snd.co, sender_fn);
	assert_int_equal(co_loop_spawn(&loop, &snd.co), 0);
	assert_int_equal(co_loop_run(&loop), 1); /* 3 parked */
	k.destroy_res = 1;
	co__fault_on_point(CO__POINT_CHAN_REFILL, in_refill_hook, &k);
	assert_int_equal(co_chan_try_recv(&ch, &v), 0);
	assert_int_equal(k.destroy_res, -EBUSY);
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(snd.res, -ECANCELED);
	assert_int_equal(co_chan_len(&ch), 2); /* 1, 9 */
	assert_int_equal(co_chan_destroy(&ch), 0);
	/* destroyed: every wait answers -EINVAL */
	snd = (struct party){ .ch = &ch, .item = 3, .res = 1 };
	co_init(&snd.co, sender_fn);
	assert_int_equal(co_loop_spawn(&loop, &snd.co), 0);
	assert_int_equal(many_run(&loop, &r, &ch, 4), 0);
	assert_int_equal(snd.res, -EINVAL);
	assert_int_equal(r.res, -EINVAL);
}

/*
 * A close releases three parked receivers: r2 on engine e2, then r3 and r1
 * on engine e1, while e1 looks at r1 (a cancel: CO__POINT_WAIT_VISIT
 * holds the look open, after it saw r1 waiting and before it takes the
 * channel's lock). The close claims all three and waits for that look to
 * end; meanwhile (CO__POINT_WAKE_LOOK, on the closing thread, which ticks
 * e2) r2 must not have been woken: a frame woken by the close may destroy
 * the channel at once, as nobody is blocked on it, and free it, which the
 * look would then lock. r2 destroys it once woken, and notes whether the
 * look was still open then. Every receiver ends with -EPIPE.
 */
struct close_look {
	co_chan *ch;
	co_engine *e2;
	atomic_int look_open;     /* e1's look at r1 is held open */
	atomic_int go;            /* the closing thread may close */
	atomic_int r2_parked, point_done, close_res;
	int point_ticked;         /* what a tick of e2 at the point resumed */
	int saw_open, destroy_res;
};

struct close_rx {
	co_frame co;
	co_waiter w;
	struct close_look *k;
	int destroys;             /* r2: destroy the channel once woken */
	uint64_t item;
	atomic_int res;           /* 1 until the await completed */
};

static int close_rx_fn(co_frame *f)
{
	struct close_rx *r = (struct close_rx *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_chan_recv(&r->w, r->k->ch, &r->item));
	if (r->destroys) {
		r->k->saw_open = atomic_load(&r->k->look_open);
		r->k->destroy_res = co_chan_destroy(r->k->ch); /* a frame may, then free it */
	}
	atomic_store(&r->res, co_result(f));
	CO_END(f);
}

struct close_canceller {
	co_frame co;
	co_frame *target;
};

static int close_canceller_fn(co_frame *f)
{
	struct close_canceller *c = (struct close_canceller *)f;
	CO_BEGIN(f);
	co_cancel(c->target);
	CO_END(f);
}

/* On e1's thread: the look at r1 saw it waiting. */
static void close_look_visit(void *arg)
{
	struct close_look *k = arg;

	co__fault_on_point(CO__POINT_WAIT_VISIT, NULL, NULL); /* once */
	atomic_store(&k->look_open, 1);
	atomic_store(&k->go, 1);
	WAIT_UNTIL(atomic_load(&k->point_done)); /* the close waits for this look */
	atomic_store(&k->look_open, 0);
}

/* On the closing thread: the close found the look open. */
static void close_look_point(void *arg)
{
	struct close_look *k = arg;

	co__fault_on_point(CO__POINT_WAKE_LOOK, NULL, NULL); /* once */
	k->point_ticked = co_engine_tick(k->e2);
	atomic_store(&k->point_done, 1);
}

struct close_thread {
	struct close_look *k;
	struct close_rx *r2;
	int ticks_ok;
};

static void *close_thread_fn(void *arg)
{
	struct close_thread *t = arg;
	struct close_look *k = t->k;

	t->ticks_ok = co_engine_tick(k->e2) == 1; /* this thread owns e2: r2 parks */
	atomic_store(&k->r2_parked, 1);
	WAIT_UNTIL(atomic_load(&k->go));
	atomic_store(&k->close_res, co_chan_close(k->ch));
	while (atomic_load(&t->r2->res) == 1)
		if (co_engine_tick(k->e2) < 0)
			t->ticks_ok = 0;
	return NULL;
}

static void test_close_waits_for_looks_before_waking(void **state)
{
	co_engine e1, e2;
	co_chan *ch = malloc(sizeof *ch);
	struct close_look k = { .ch = ch, .e2 = &e2, .close_res = 1, .point_ticked = -1,
				.saw_open = -1, .destroy_res = 1 };
	struct close_rx r1 = { .k = &k, .res = 1 }, r2 = { .k = &k, .destroys = 1, .res = 1 },
			r3 = { .k = &k, .res = 1 };
	struct close_canceller c = { .target = &r1.co };
	struct close_thread t = { .k = &k, .r2 = &r2 };
	pthread_t th;
	(void)state;
	assert_non_null(ch);
	assert_int_equal(co_chan_init(ch, sizeof(uint64_t), 1, NULL), 0);
	assert_int_equal(co_engine_init(&e1, NULL), 0);
	assert_int_equal(co_engine_init(&e2, NULL), 0);
	e1.spin_max = e1.spin_cur = e2.spin_max = e2.spin_cur = 0; /* they park at once */
	co_init(&r2.co, close_rx_fn);
	assert_int_equal(co_engine_spawn(&e2, &r2.co), 0);
	assert_int_equal(pthread_create(&th, NULL, close_thread_fn, &t), 0);
	WAIT_UNTIL(atomic_load(&k.r2_parked)); /* first in the queue */
	co_init(&r3.co, close_rx_fn);
	assert_int_equal(co_engine_spawn(&e1, &r3.co), 0);
	assert_int_equal(co_engine_tick(&e1), 1); /* this thread owns e1 */
	co_init(&r1.co, close_rx_fn);
	assert_int_equal(co_engine_spawn(&e1, &r1.co), 0);
	assert_int_equal(co_engine_tick(&e1), 1);
	assert_int_equal(blocked(ch, 0), 3);
	co__fault_on_point(CO__POINT_WAIT_VISIT, close_look_visit, &k);
	co__fault_on_point(CO__POINT_WAKE_LOOK, close_look_point, &k);
	co_init(&c.co, close_canceller_fn);
	assert_int_equal(co_engine_spawn(&e1, &c.co), 0);
	assert_true(co_engine_tick(&e1) >= 1); /* the look held open; the woken may run too */
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(t.ticks_ok, 1);
	assert_int_equal(atomic_load(&k.close_res), 0);
	assert_int_equal(k.point_ticked, 0); /* nothing woken on e2 while e1 looked */
	assert_int_equal(k.saw_open, 0);
	assert_int_equal(k.destroy_res, 0);
	free(ch); /* destroyed: nothing touches it any more */
	while (atomic_load(&r1.res) == 1 || atomic_load(&r3.res) == 1)
		assert_true(co_engine_tick(&e1) >= 0);
	assert_int_equal(atomic_load(&r1.res), -EPIPE); /* claimed before the cancel's look */
	assert_int_equal(atomic_load(&r2.res), -EPIPE);
	assert_int_equal(atomic_load(&r3.res), -EPIPE);
	assert_int_equal(co_engine_destroy(&e1), 0);
	assert_int_equal(co_engine_destroy(&e2), 0);
}

/*
 * The same close, a receiver parked on e1 whose engine looks at it (held
 * open at CO__POINT_WAIT_VISIT): while the close waits for that look
 * (CO__POINT_WAKE_LOOK), a destroy from any thread answers -EBUSY and
 * changes nothing (the look is about to lock the channel: freed after a
 * 0, it would be used after its free). A consumer off the engines meets
 * the close there already (co_chan_try_recv: -EPIPE), as one that destroys
 * the channel once it is drained would. Once the close returned, destroy
 * answers 0.
 */
struct close_destroy {
	co_chan *ch;
	atomic_int go, point_done, close_res;
	int try_res, destroy_res;
};

static void close_destroy_visit(void *arg)
{
	struct close_destroy *k = arg;

	co__fault_on_point(CO__POINT_WAIT_VISIT, NULL, NULL); /* once */
	atomic_store(&k->go, 1);
	WAIT_UNTIL(atomic_load(&k->point_done)); /* the close waits for this look */
}

static void close_destroy_point(void *arg)
{
	struct close_destroy *k = arg;
	uint64_t v;

	co__fault_on_point(CO__POINT_WAKE_LOOK, NULL, NULL); /* once */
	k->try_res = co_chan_try_recv(k->ch, &v);
	k->destroy_res = co_chan_destroy(k->ch);
	atomic_store(&k->point_done, 1);
}

static void *close_destroy_thread(void *arg)
{
	struct close_destroy *k = arg;

	WAIT_UNTIL(atomic_load(&k->go));
	atomic_store(&k->close_res, co_chan_close(k->ch));
	return NULL;
}

static void test_destroy_while_close_waits_for_look(void **state)
{
	co_engine e;
	co_chan *ch = malloc(sizeof *ch);
	struct close_look unused = { .ch = ch };
	struct close_destroy k = { .ch = ch, .close_res = 1, .try_res = 1, .destroy_res = 1 };
	struct close_rx r = { .k = &unused, .res = 1 };
	struct close_canceller c = { .target = &r.co };
	pthread_t th;
	(void)state;
	assert_non_null(ch);
	assert_int_equal(co_chan_init(ch, sizeof(uint64_t), 1, NULL), 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	e.spin_max = e.spin_cur = 0; /* it parks at once */
	co_init(&r.co, close_rx_fn);
	assert_int_equal(co_engine_spawn(&e, &r.co), 0);
	assert_int_equal(co_engine_tick(&e), 1); /* this thread owns e */
	assert_int_equal(blocked(ch, 0), 1);
	assert_int_equal(pthread_create(&th, NULL, close_destroy_thread, &k), 0);
	co__fault_on_point(CO__POINT_WAIT_VISIT, close_destroy_visit, &k);
	co__fault_on_point(CO__POINT_WAKE_LOOK, close_destroy_point, &k);
	co_init(&c.co, close_canceller_fn);
	assert_int_equal(co_engine_spawn(&e, &c.co), 0);
	assert_true(co_engine_tick(&e) >= 1); /* the look held open; the woken may run too */
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(atomic_load(&k.close_res), 0);
	assert_int_equal(k.try_res, -EPIPE);
	assert_int_equal(k.destroy_res, -EBUSY); /* the close was waiting for the look */
	assert_int_equal(co_chan_destroy(ch), 0);
	free(ch);
	while (atomic_load(&r.res) == 1)
		assert_true(co_engine_tick(&e) >= 0);
	assert_int_equal(atomic_load(&r.res), -EPIPE); /* claimed before the cancel's look */
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* What the ring holds, up to max, in order; then the rest. */
static void test_recv_many_takes_what_is_there(void **state)
{
	co_loop loop;
	co_chan ch;
	struct mparty t;
	uint64_t v;
	(void)state;
	co_loop_init(&loop);
	assert_int_equal(co_chan_init(&ch, sizeof v, 8, NULL), 0);
	for (v = 1; v <= 5; v++)
		assert_int_equal(co_chan_try_send(&ch, &v), 0);
	assert_int_equal(many_run(&loop, &t, &ch, 3), 0);
	assert_int_equal(t.res, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(t.own[i], 1 + (uint64_t)i);
	assert_int_equal(many_run(&loop, &t, &ch, 8), 0);
	assert_int_equal(t.res, 2);
	assert_int_equal(t.own[0], 4);
	assert_int_equal(t.own[1], 5);
	assert_int_equal(co_chan_try_recv(&ch, &v), -EAGAIN);
	assert_int_equal(co_chan_destroy(&ch), 0);
	{ /* max above 65535: 65535 taken, the rest left */
		enum { QUEUED = 70000 };
		uint32_t *in = calloc(QUEUED, sizeof *in), x;

		assert_non_null(in);
		assert_int_equal(co_chan_init(&ch, sizeof x, QUEUED, NULL), 0);
		for (x = 0; x < QUEUED; x++)
			assert_int_equal(co_chan_try_send(&ch, &x), 0);
		t = (struct mparty){ .ch = &ch, .items = in, .max = 100000, .res = 1 };
		co_init(&t.co, many_fn);
		assert_int_equal(co_loop_spawn(&loop, &t.co), 0);
		assert_int_equal(co_loop_run(&loop), 0);
		assert_int_equal(t.res, 65535);
		for (x = 0; x < 65535; x++)
			assert_int_equal(in[x], x);
		for (x = 65535; x < QUEUED; x++) {
			uint32_t y;

			assert_int_equal(co_chan_try_recv(&ch, &y), 0);
			assert_int_equal(y, x);
		}
		assert_int_equal(co_chan_try_recv(&ch, &x), -EAGAIN);
		assert_int_equal(co_chan_destroy(&ch), 0);
		free(in);
	}
}

/* A receiver of many on an empty channel gets the first item sent, straight
 * from the sender (value 1); later items stay in the ring. */
static void test_recv_many_waits_for_one(void **state)
{
	co_loop loop;
	co_chan ch;
	struct mparty t;
	uint64_t v = 7;
	(void)state;
	co_loop_init(&loop);
	assert_int_equal(co_chan_init(&ch, sizeof v, 4, NULL), 0);
	assert_int_equal(many_run(&loop, &t, &ch, 4), 1); /* blocked */
	assert_int_equal(co_chan_try_send(&ch, &v), 0);
	assert_int_equal(co_chan_len(&ch), 0); /* handed over */
	v = 8;
	assert_int_equal(co_chan_try_send(&ch, &v), 0);
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(t.res, 1);
	assert_int_equal(t.own[0], 7);
	assert_int_equal(co_chan_len(&ch), 1);
	assert_int_equal(co_chan_try_recv(&ch, &v), 0);
	assert_int_equal(v, 8);
	assert_int_equal(co_chan_destroy(&ch), 0);
}

/* Slots freed on a full ring are refilled from the blocked senders, oldest
 * first, and taken in the same call. */
static void test_recv_many_refills_from_senders(void **state)
{
	co_loop loop;
	co_chan ch;
	struct mparty t;
	struct party snd[2];
	uint64_t v;
	(void)state;
	co_loop_init(&loop);
	assert_int_equal(co_chan_init(&ch, sizeof v, 2, NULL), 0);
	for (v = 1; v <= 2; v++)
		assert_int_equal(co_chan_try_send(&ch, &v), 0);
	for (int i = 0; i < 2; i++) {
		snd[i] = (struct party){ .ch = &ch, .item = 3 + (uint64_t)i, .res = 1 };
		co_init(&snd[i].co, sender_fn);
		assert_int_equal(co_loop_spawn(&loop, &snd[i].co), 0);
	}
	assert_int_equal(co_loop_run(&loop), 2); /* both blocked */
	assert_int_equal(many_run(&loop, &t, &ch, 8), 0);
	assert_int_equal(t.res, 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(t.own[i], 1 + (uint64_t)i);
	assert_int_equal(snd[0].res, 0);
	assert_int_equal(snd[1].res, 0);
	assert_int_equal(co_chan_len(&ch), 0);
	assert_int_equal(co_chan_destroy(&ch), 0);
}

/* Closed: what is buffered, then -EPIPE; a blocked receiver of many wakes
 * with -EPIPE; bad arguments: -EINVAL; max over 65535 takes what there is. */
static void test_recv_many_close_and_errors(void **state)
{
	co_loop loop;
	co_chan ch;
	struct mparty t;
	uint64_t v, big[4];
	(void)state;
	co_loop_init(&loop);
	assert_int_equal(co_chan_init(&ch, sizeof v, 4, NULL), 0);
	assert_int_equal(many_run(&loop, &t, &ch, 2), 1); /* blocked */
	assert_int_equal(co_chan_close(&ch), 0);
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(t.res, -EPIPE);
	assert_int_equal(co_chan_destroy(&ch), 0);

	assert_int_equal(co_chan_init(&ch, sizeof v, 4, NULL), 0);
	for (v = 1; v <= 3; v++)
		assert_int_equal(co_chan_try_send(&ch, &v), 0);
	t = (struct mparty){ .ch = &ch, .items = big, .max = 65536, .res = 1 };
	co_init(&t.co, many_fn);
	assert_int_equal(co_loop_spawn(&loop, &t.co), 0);
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(t.res, 3);
	assert_int_equal(big[2], 3);
	v = 4;
	assert_int_equal(co_chan_try_send(&ch, &v), 0);
	assert_int_equal(co_chan_close(&ch), 0);
	assert_int_equal(many_run(&loop, &t, &ch, 8), 0);
	assert_int_equal(t.res, 1);
	assert_int_equal(t.own[0], 4);
	assert_int_equal(many_run(&loop, &t, &ch, 8), 0);
	assert_int_equal(t.res, -EPIPE);

	assert_int_equal(many_run(&loop, &t, &ch, 0), 0);
	assert_int_equal(t.res, -EINVAL);
	assert_int_equal(many_run(&loop, &t, NULL, 4), 0);
	assert_int_equal(t.res, -EINVAL);
	t = (struct mparty){ .ch = &ch, .max = 4, .null_items = 1, .res = 1 };
	co_init(&t.co, many_fn);
	assert_int_equal(co_loop_spawn(&loop, &t.co), 0);
	assert_int_equal(co_loop_run(&loop), 0);
	assert_int_equal(t.res, -EINVAL);
	assert_int_equal(co_chan_destroy(&ch), 0);
}

/* ---- one producer and one consumer: polling ends and parked ends ------------------ */

#define STREAM_ITEMS 20000
#define ROUNDS 5000

struct end {
	co_frame co;
	co_waiter w;
	co_chan *out, *in;        /* sends on out, receives from in */
	uint64_t v, n, got;       /* n: items (a streamer), round trips (a pinger) */
	int bad;
};

/* Sends 0 .. n - 1 on out, then closes it. */
static int streamer_fn(co_frame *f)
{
	struct end *e = (struct end *)f;
	CO_BEGIN(f);
	for (e->v = 0; e->v < e->n; e->v++) {
		CO_AWAIT(f, co_chan_send(&e->w, e->out, &e->v));
		if (co_result(f) != 0)
			e->bad++;
	}
	co_chan_close(e->out);
	CO_END(f);
}

/* Receives 0, 1, 2 ... from in until it is closed; n: how many came. */
static int drainer_fn(co_frame *f)
{
	struct end *e = (struct end *)f;
	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_chan_recv(&e->w, e->in, &e->got));
		if (co_result(f) == -EPIPE)
			break;
		if (co_result(f) != 0 || e->got != e->n)
			e->bad++;
		e->n++;
	}
	CO_END(f);
}

/* Sends v on out and waits for v + 1 on in, n times; then closes out. */
static int pinger_fn(co_frame *f)
{
	struct end *e = (struct end *)f;
	CO_BEGIN(f);
	for (e->v = 0; e->v < e->n; e->v++) {
		CO_AWAIT(f, co_chan_send(&e->w, e->out, &e->v));
		if (co_result(f) != 0)
			e->bad++;
		CO_AWAIT(f, co_chan_recv(&e->w, e->in, &e->got));
		if (co_result(f) != 0 || e->got != e->v + 1)
			e->bad++;
	}
	co_chan_close(e->out);
	CO_END(f);
}

/* Answers every v from in with v + 1 on out until in is closed; n: how
 * many it answered. */
static int ponger_fn(co_frame *f)
{
	struct end *e = (struct end *)f;
	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_chan_recv(&e->w, e->in, &e->got));
		if (co_result(f) == -EPIPE)
			break;
		e->got++;
		e->n++;
		CO_AWAIT(f, co_chan_send(&e->w, e->out, &e->got));
		if (co_result(f) != 0)
			e->bad++;
	}
	CO_END(f);
}

struct pair_run {
	co_frame co;              /* the starter */
	co_sched *s;
	unsigned at[4];           /* the contexts of the four ends */
	int spawned;
	co_chan stream, ping, pong;
	struct end streamer, drainer, pinger, ponger;
};

/* Spawns the four ends from a context, so that on one context all four
 * are queued before any runs (none finds the others not yet spawned). */
static int starter_fn(co_frame *f)
{
	struct pair_run *r = (struct pair_run *)f;
	struct end *ends[4] = { &r->streamer, &r->drainer, &r->pinger, &r->ponger };
	CO_BEGIN(f);
	for (int i = 0; i < 4; i++)
		r->spawned += co_sched_spawn_to(r->s, r->at[i], &ends[i]->co) == 0;
	CO_END(f);
}

/* A stream from context a to b and a ping-pong between b and a (c and d
 * if given: d >= 0), on channels of capacity cap; every item arrives once
 * and in order. */
static void pair_run(co_sched *s, unsigned cap, unsigned a, unsigned b, int c, int d)
{
	struct pair_run *r = calloc(1, sizeof *r);

	assert_non_null(r);
	assert_int_equal(co_chan_init(&r->stream, sizeof(uint64_t), cap, NULL), 0);
	assert_int_equal(co_chan_init(&r->ping, sizeof(uint64_t), cap, NULL), 0);
	assert_int_equal(co_chan_init(&r->pong, sizeof(uint64_t), cap, NULL), 0);
	r->streamer = (struct end){ .out = &r->stream, .n = STREAM_ITEMS };
	r->drainer = (struct end){ .in = &r->stream };
	r->pinger = (struct end){ .out = &r->ping, .in = &r->pong, .n = ROUNDS };
	r->ponger = (struct end){ .out = &r->pong, .in = &r->ping };
	co_init(&r->streamer.co, streamer_fn);
	co_init(&r->drainer.co, drainer_fn);
	co_init(&r->pinger.co, pinger_fn);
	co_init(&r->ponger.co, ponger_fn);
	r->s = s;
	r->at[0] = a;
	r->at[1] = b;
	r->at[2] = c >= 0 ? (unsigned)c : b;
	r->at[3] = d >= 0 ? (unsigned)d : a;
	co_init(&r->co, starter_fn);
	assert_int_equal(co_sched_spawn_to(s, a, &r->co), 0);
	assert_int_equal(co_sched_run(s), 0);
	assert_int_equal(r->spawned, 4);
	assert_int_equal(r->streamer.bad + r->drainer.bad + r->pinger.bad + r->ponger.bad, 0);
	assert_int_equal(r->drainer.n, STREAM_ITEMS);
	assert_int_equal(r->pinger.v, ROUNDS);
	assert_int_equal(r->ponger.n, ROUNDS);
	assert_int_equal(co_chan_destroy(&r->stream), 0);
	assert_int_equal(co_chan_destroy(&r->ping), 0);
	assert_int_equal(co_chan_destroy(&r->pong), 0);
	free(r);
}

static uint64_t polls_of(co_sched *s, int hits)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < s->n; i++) {
		co_engine_stats *st = &s->ctx[i].engine.stats;
		n += __atomic_load_n(hits ? &st->poll_hits : &st->polls, __ATOMIC_RELAXED);
	}
	return n;
}

/* Across contexts, ends that poll (the default), ends that park (no_spin)
 * and a mix (4 contexts, 1 may poll at a time) lose no item and no
 * wake-up, at capacities 1, 2 and 16. A lost wake-up hangs the run. */
static void test_two_contexts_lose_no_wakeup(void **state)
{
	static const unsigned caps[] = { 1, 2, 16 };

	(void)state;
	for (int mode = 0; mode < 3; mode++) {
		for (unsigned k = 0; k < sizeof caps / sizeof caps[0]; k++) {
			co_sched s;
			co_sched_opts o = { .contexts = mode == 2 ? 4 : 2,
					    .spinners = mode == 2 ? 1 : 0,
					    .engine = { .no_spin = mode == 1 } };

			assert_int_equal(co_sched_init(&s, &o), 0);
			if (mode == 2)
				pair_run(&s, caps[k], 0, 1, 2, 3);
			else
				pair_run(&s, caps[k], 0, 1, -1, -1);
			assert_true(polls_of(&s, 1) <= polls_of(&s, 0));
			if (mode == 1) /* ends that may not poll never do */
				assert_int_equal(polls_of(&s, 0), 0);
			assert_int_equal(co_sched_destroy(&s), 0);
		}
	}
}

/* Both ends on one context: when one waits the other is ready, so neither
 * ever polls (a poll would only delay it). A lone context never polls at
 * all; on a scheduler of two, context 0 could poll but has no reason to. */
static void test_one_context_never_polls(void **state)
{
	(void)state;
	for (unsigned n = 1; n <= 2; n++) {
		co_sched s;
		co_sched_opts o = { .contexts = n };

		assert_int_equal(co_sched_init(&s, &o), 0);
		pair_run(&s, 16, 0, 0, -1, -1);
		pair_run(&s, 1, 0, 0, -1, -1);
		assert_int_equal(__atomic_load_n(&s.ctx[0].engine.stats.polls, __ATOMIC_RELAXED), 0);
		assert_int_equal(co_sched_destroy(&s), 0);
	}
}

/* ---- errors -------------------------------------------------------------------------- */

struct misuse {
	co_frame co;
	co_waiter w;
	co_chan *ch;
	uint64_t v;
	int r[4];
};

static int misuse_fn(co_frame *f)
{
	struct misuse *t = (struct misuse *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_chan_send(&t->w, NULL, &t->v));
	t->r[0] = co_result(f);
	CO_AWAIT(f, co_chan_send(&t->w, t->ch, NULL));
	t->r[1] = co_result(f);
	CO_AWAIT(f, co_chan_recv(&t->w, NULL, &t->v));
	t->r[2] = co_result(f);
	CO_AWAIT(f, co_chan_recv(NULL, t->ch, &t->v));
	t->r[3] = co_result(f);
	CO_END(f);
}

static void test_errors(void **state)
{
	co_chan ch;
	co_loop loop;
	struct misuse t = { .ch = &ch };
	uint64_t v = 0;
	(void)state;
	assert_int_equal(co_chan_init(NULL, 8, 1, NULL), -EINVAL);
	assert_int_equal(co_chan_init(&ch, 0, 1, NULL), -EINVAL);
	assert_int_equal(co_chan_init(&ch, 8, 0, NULL), -EINVAL);
	assert_int_equal(co_chan_init(&ch, 1, UINT_MAX / 2 + 1, NULL), -EINVAL);
	assert_int_equal(co_chan_init(&ch, 1, UINT_MAX, NULL), -EINVAL);
	assert_int_equal(co_chan_init(&ch, SIZE_MAX / 2, 4, NULL), -EOVERFLOW);
	/* fits a size_t, but not once rounded up to whole cache lines */
	assert_int_equal(co_chan_init(&ch, SIZE_MAX / 2, 2, NULL), -ENOMEM);
	assert_int_equal(co_chan_destroy(NULL), -EINVAL);
	assert_int_equal(co_chan_try_send(NULL, &v), -EINVAL);
	assert_int_equal(co_chan_try_recv(NULL, &v), -EINVAL);
	assert_int_equal(co_chan_close(NULL), -EINVAL);
	assert_int_equal(co_chan_len(NULL), -EINVAL);
	assert_int_equal(co_chan_init(&ch, sizeof v, 4, NULL), 0);
	assert_int_equal(co_chan_try_send(&ch, NULL), -EINVAL);
	assert_int_equal(co_chan_try_recv(&ch, NULL), -EINVAL);
	co_loop_init(&loop);
	co_init(&t.co, misuse_fn);
	assert_int_equal(co_loop_spawn(&loop, &t.co), 0);
	assert_int_equal(co_loop_run(&loop), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(t.r[i], -EINVAL);
	assert_int_equal(co_chan_destroy(&ch), 0);
	assert_int_equal(co_chan_destroy(&ch), -EINVAL); /* once */
}

/* A destroy drops what is still buffered: the channel is gone, and with
 * it the items no receive took (every call after it: -EINVAL). */
static void test_destroy_drops_buffered(void **state)
{
	co_chan ch;
	int v = 7;
	(void)state;
	assert_int_equal(co_chan_init(&ch, sizeof v, 4, NULL), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(co_chan_try_send(&ch, &v), 0);
	assert_int_equal(co_chan_len(&ch), 3);
	assert_int_equal(co_chan_destroy(&ch), 0);
	assert_int_equal(co_chan_try_recv(&ch, &v), -EINVAL);
	assert_int_equal(co_chan_destroy(&ch), -EINVAL);
}

/* channel.h, co_chan_init: a ring allocated by init starts on a cache line
 * and takes whole lines, so no other data shares a line with it. Item
 * sizes and capacities whose products are not multiples of a line, with
 * small allocations between them (a plain malloc answers 16-byte
 * multiples); each ring is written up to its last whole line, which
 * ASan reports if the allocation were not rounded up. */
static void test_ring_on_its_own_lines(void **state)
{
	static const struct { size_t size; unsigned cap; } shape[] = {
		{ 8, 1 }, { 8, 3 }, { 1, 1 }, { 24, 5 }, { 8, 256 }, { 40, 7 }, { 3, 100 },
	};
	enum { N = sizeof shape / sizeof shape[0] };
	co_chan ch[N];
	void *noise[N];
	(void)state;
	for (int i = 0; i < N; i++) {
		size_t n = shape[i].size * shape[i].cap;
		size_t lines = (n + CO_CACHELINE - 1) / CO_CACHELINE * CO_CACHELINE;

		noise[i] = malloc(8 + 16 * (size_t)i);
		assert_non_null(noise[i]);
		assert_int_equal(co_chan_init(&ch[i], shape[i].size, shape[i].cap, NULL), 0);
		assert_int_equal((uintptr_t)ch[i].buf % CO_CACHELINE, 0);
		memset(ch[i].buf, 0xa5, lines);
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(co_chan_destroy(&ch[i]), 0);
		free(noise[i]);
	}
}

/* lib/sync/slip.h, the slip rule of a channel end that polled. */
static void test_slip_rule(void **state)
{
	unsigned s = 0;
	(void)state;
	/* a stream into a ring of 256: the slip grows to the capacity */
	for (int i = 0; i < 12; i++)
		s = co__slip_next(256, s, s + 1, 10);
	assert_int_equal(s, 256);
	/* capped at SLIP_TOP above it, at SLIP_MIN_TOP below 16 */
	s = 0;
	for (int i = 0; i < 12; i++)
		s = co__slip_next(4096, s, s + 1, 10);
	assert_int_equal(s, SLIP_TOP);
	s = 0;
	for (int i = 0; i < 12; i++)
		s = co__slip_next(4, s, 1, 1);
	assert_int_equal(s, SLIP_MIN_TOP);
	/* at 16, quick finds of 2 grow to 16 */
	s = 0;
	for (int i = 0; i < 12; i++)
		s = co__slip_next(16, s, s + 1, 2);
	assert_int_equal(s, 16);
	/* half the ring or more found: the ends took turns, halve */
	assert_int_equal(co__slip_next(256, 200, 201, 128), 100);
	assert_int_equal(co__slip_next(256, 200, 201, 256), 100);
	assert_int_equal(co__slip_next(256, 200, 201, 127), 256);
	assert_int_equal(co__slip_next(16, 16, 17, 8), 8);
	/* a long wait for one item (a round trip): halve */
	assert_int_equal(co__slip_next(256, 64, 500, 1), 32);
	/* a quick find of one: grow */
	assert_int_equal(co__slip_next(256, 1, SLIP_QUICK, 1), 3);
	/* found nothing, or a capacity of 1: no slip */
	assert_int_equal(co__slip_next(256, 64, 0, 0), 0);
	assert_int_equal(co__slip_next(1, 0, 1, 1), 0);
	assert_int_equal(co__slip_next(1, 5, 1, 1), 0);
}

/* ---- timed sends and receives of one and of many, 4 contexts --------------------- */

/* sync.md, Channel: "Every successful send (0) is received exactly once
 * while the channel lives, and a failed send delivered nothing", with
 * time limits on both ends (a send that ran out of time delivered
 * nothing) and receivers of one and of many mixed. 8 producers send
 * unique items under limits of 0..19 us (retrying one that failed), 8
 * consumers receive under limits of 0..29 us, half of them by
 * co_chan_recv_many; after the producers end the channel is closed and
 * drained. Every item sent (0) arrives exactly once, no failed send's
 * item arrives, values are only 0 / counts, -ETIME and -EPIPE. */
#define TS_PRODUCERS 8
#define TS_CONSUMERS 8
#define TS_ITEMS 4000               /* per producer */

struct ts_shared {
	co_chan ch;
	atomic_uchar *seen;         /* per item: times received */
	atomic_uchar *sent;         /* per item: 1 if its send answered 0 */
	atomic_int producers_left, bad;
	int cancels;                /* co_cancel parties at random */
	struct ts_party *parties;
};

struct ts_party {
	co_frame co;
	co_waiter w;
	struct ts_shared *sh;
	unsigned seed;
	int id, i, many;
	uint32_t item, got[8];
};

static unsigned ts_rand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 16;
}

static int ts_producer_fn(co_frame *f)
{
	struct ts_party *p = (struct ts_party *)f;
	CO_BEGIN(f);
	for (p->i = 0; p->i < TS_ITEMS;) {
		p->item = (uint32_t)(p->id * TS_ITEMS + p->i);
		CO_AWAIT(f, co_wait_for(co_chan_send(&p->w, &p->sh->ch, &p->item),
					(ts_rand(&p->seed) % 20) * 1000));
		if (co_result(f) == 0) {
			atomic_store(&p->sh->sent[p->item], 1);
			p->i++;
		} else if (co_result(f) == -ECANCELED && p->sh->cancels) {
			break;
		} else if (co_result(f) != -ETIME) {
			atomic_fetch_add(&p->sh->bad, 1);
			break;
		}
	}
	if (atomic_fetch_sub(&p->sh->producers_left, 1) == 1)
		assert_int_equal(co_chan_close(&p->sh->ch), 0);
	CO_END(f);
}

static void ts_got(struct ts_shared *sh, uint32_t item)
{
	if (item >= TS_PRODUCERS * TS_ITEMS)
		atomic_fetch_add(&sh->bad, 1);
	else
		atomic_fetch_add(&sh->seen[item], 1);
}

/* The ledger at the end: every item sent (its send answered 0) arrived
 * once, none arrived that was not sent, nothing out of range; then the
 * channel and the ledger go. */
static void ts_check(struct ts_shared *sh)
{
	long lost = 0, twice = 0, ghost = 0;

	for (int i = 0; i < TS_PRODUCERS * TS_ITEMS; i++) {
		int n = atomic_load(&sh->seen[i]), ok = atomic_load(&sh->sent[i]);
		if (ok && n == 0)
			lost++;
		if (n > 1)
			twice++;
		if (!ok && n)
			ghost++;
	}
	print_message("lost %ld twice %ld ghost %ld bad %d\n", lost, twice, ghost,
		      atomic_load(&sh->bad));
	assert_int_equal(atomic_load(&sh->bad), 0);
	assert_int_equal(lost, 0);
	assert_int_equal(twice, 0);
	assert_int_equal(ghost, 0);
	assert_int_equal(co_chan_destroy(&sh->ch), 0);
	free(sh->seen);
	free(sh->sent);
	free(sh->parties);
}

static int ts_consumer_fn(co_frame *f)
{
	struct ts_party *p = (struct ts_party *)f;
	CO_BEGIN(f);
	for (;;) {
		if (p->many)
			CO_AWAIT(f, co_wait_for(co_chan_recv_many(&p->w, &p->sh->ch, p->got, 8),
						(ts_rand(&p->seed) % 30) * 1000));
		else
			CO_AWAIT(f, co_wait_for(co_chan_recv(&p->w, &p->sh->ch, &p->got[0]),
						(ts_rand(&p->seed) % 30) * 1000));
		if (co_result(f) == -EPIPE)
			break;
		if (co_result(f) == -ECANCELED && p->sh->cancels)
			break;
		if (co_result(f) == -ETIME)
			continue;
		if (co_result(f) < 0 || (p->many && (co_result(f) == 0 || co_result(f) > 8)) ||
		    (!p->many && co_result(f) != 0)) {
			atomic_fetch_add(&p->sh->bad, 1);
			break;
		}
		for (p->i = 0; p->i < (p->many ? co_result(f) : 1); p->i++)
			ts_got(p->sh, p->got[p->i]);
	}
	CO_END(f);
}

/* The stress's set-up: the ledger, a channel of capacity 4, a scheduler of
 * 4 contexts and its producers and consumers spread over them (half the
 * consumers receive many at a time); cancels: how many parties a
 * canceller cancels at random. ts_check frees what this allocates. */
static void ts_start(co_sched *s, struct ts_shared *sh, int cancels)
{
	co_sched_opts o = { .contexts = 4 };

	memset(sh, 0, sizeof *sh);
	sh->seen = calloc(TS_PRODUCERS * TS_ITEMS, 1);
	sh->sent = calloc(TS_PRODUCERS * TS_ITEMS, 1);
	sh->parties = calloc(TS_PRODUCERS + TS_CONSUMERS, sizeof *sh->parties);
	assert_non_null(sh->seen);
	assert_non_null(sh->sent);
	assert_non_null(sh->parties);
	sh->cancels = cancels;
	atomic_init(&sh->producers_left, TS_PRODUCERS);
	assert_int_equal(co_chan_init(&sh->ch, sizeof(uint32_t), 4, NULL), 0);
	assert_int_equal(co_sched_init(s, &o), 0);
	for (int i = 0; i < TS_PRODUCERS + TS_CONSUMERS; i++) {
		struct ts_party *p = &sh->parties[i];
		p->sh = sh;
		p->id = i;
		p->seed = 99u + (unsigned)i * 4241u;
		p->many = i >= TS_PRODUCERS && i % 2;
		co_init(&p->co, i < TS_PRODUCERS ? ts_producer_fn : ts_consumer_fn);
		assert_int_equal(co_sched_spawn_to(s, (unsigned)i % 4, &p->co), 0);
	}
}

static void test_timed_ends_exactly_once(void **state)
{
	co_sched s;
	struct ts_shared sh;
	(void)state;
	ts_start(&s, &sh, 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	ts_check(&sh);
}

/* The same with co_cancel: a canceller cancels 6 parties at random while
 * they run ("a cancelled sender delivered nothing"); a cancelled party
 * stops, the test drains what cancelled consumers left. Still exactly
 * once. */
struct ts_canceller {
	co_frame co;
	struct ts_shared *sh;
	unsigned seed;
	int i, k;
};

static int ts_canceller_fn(co_frame *f)
{
	struct ts_canceller *c = (struct ts_canceller *)f;
	CO_BEGIN(f);
	for (c->i = 0; c->i < c->sh->cancels; c->i++) {
		for (c->k = 0; c->k < 200; c->k++)
			CO_YIELD(f);
		co_cancel(&c->sh->parties[ts_rand(&c->seed) % (TS_PRODUCERS + TS_CONSUMERS)].co);
	}
	CO_END(f);
}

static void test_timed_ends_with_cancels(void **state)
{
	co_sched s;
	struct ts_shared sh;
	struct ts_canceller c;
	uint32_t item;
	(void)state;
	memset(&c, 0, sizeof c);
	ts_start(&s, &sh, 6);
	c.sh = &sh;
	c.seed = 5;
	co_init(&c.co, ts_canceller_fn);
	assert_int_equal(co_sched_spawn_to(&s, 1, &c.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	while (co_chan_try_recv(&sh.ch, &item) == 0) /* what cancelled consumers left */
		ts_got(&sh, item);
	ts_check(&sh);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_destroy_drops_buffered),
		cmocka_unit_test(test_mpmc_exactly_once),
		cmocka_unit_test(test_recv_many_exactly_once),
		cmocka_unit_test(test_mpmc_small_capacity),
		cmocka_unit_test(test_recv_many_takes_what_is_there),
		cmocka_unit_test(test_recv_many_waits_for_one),
		cmocka_unit_test(test_recv_many_refills_from_senders),
		cmocka_unit_test(test_recv_many_close_and_errors),
		cmocka_unit_test(test_timed_receives_lose_nothing),
		cmocka_unit_test(test_close_wakes_blocked),
		cmocka_unit_test(test_new_sender_queues_behind_parked),
		cmocka_unit_test(test_receiver_in_refill_window_takes_parked),
		cmocka_unit_test(test_destroy_while_polling),
		cmocka_unit_test(test_destroy_while_refilling),
		cmocka_unit_test(test_close_waits_for_looks_before_waking),
		cmocka_unit_test(test_destroy_while_close_waits_for_look),
		cmocka_unit_test(test_timeouts_and_cancel),
		cmocka_unit_test(test_fifo_direct_handoff),
		cmocka_unit_test(test_two_contexts_lose_no_wakeup),
		cmocka_unit_test(test_one_context_never_polls),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_ring_on_its_own_lines),
		cmocka_unit_test(test_slip_rule),
		cmocka_unit_test(test_timed_ends_exactly_once),
		cmocka_unit_test(test_timed_ends_with_cancels),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
