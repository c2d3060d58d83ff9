/* SPDX-License-Identifier: MIT */
/*
 * The thread baselines of bench/contexts/handoff.c: the same hand-offs
 * between two plain threads, the machine's limits.
 *
 *   spin   two threads spinning on one cache line: one stores 2i+1 and
 *          waits for 2i+2, the other waits for 2i+1 and stores 2i+2 (the
 *          fastest round trip two CPUs can make; a side that waits long
 *          yields its CPU): ns per round trip
 *   hop    spin, with 128 bytes (two cache lines apart from the turn's)
 *          that each side reads and writes in its turn before it passes
 *          the turn on: a piece of state that moves to the other CPU and is
 *          used there, the least a transfer of a frame between two threads
 *          costs (co_transfer_to's row): ns per round trip
 *   cond   the same turn-taking through a mutex and two condition
 *          variables (each side sleeps until the other wakes it: the round
 *          trip of a sleeping thread): ns per round trip
 *   mutex  two threads, started together, lock a pthread_mutex_t, bump a
 *          shared counter, unlock: lock operations per second
 *
 * Every shape checks its result (each turn seen in order, both sides
 * counted the same round trips, the counter equals the increments made) and
 * exits 1 otherwise. Command line and output: bench/contexts/handoff.h
 * (--items and --idle-ms are accepted and unused).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handoff.h"

static const char *const shapes[] = { "spin", "hop", "cond", "mutex", NULL };

static struct handoff_args args;
static uint64_t deadline;
static struct handoff_span span;

/* the turn word the two sides take turns on; STOP ends the other side */
#define STOP UINT64_MAX

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

static void start_shape(int workers)
{
	handoff_span_init(&span, workers);
	deadline = handoff_now_ns() + (uint64_t)(args.seconds * 1e9);
}

static int past_deadline(long i, long every)
{
	return (i & (every - 1)) == every - 1 && handoff_now_ns() > deadline;
}

/* Run a and b on two threads and wait for both. */
static void run_pair(void *(*a)(void *), void *(*b)(void *), void *arg)
{
	pthread_t ta, tb;

	if (pthread_create(&tb, NULL, b, arg) != 0 || pthread_create(&ta, NULL, a, arg) != 0)
		handoff_fail("pthread", "start", "pthread_create failed");
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
}

/* ---- spin: one cache line ---------------------------------------------------------------- */

struct spin {
	_Alignas(64) atomic_uint_least64_t turn;
	/* hop: the state that moves; word 0 in one line, word 8 in the
	 * next, each the last turn's value (ordered by turn's release and
	 * acquire) */
	_Alignas(64) uint64_t pay[16];
	_Alignas(64) long rounds_a, rounds_b;
	int bad, hop;
};

/* hop: take the state the other side left for turn `was` and leave it for
 * turn `now`; 0 if it was not there (spin: nothing to move, always 1). */
static int spin_move(struct spin *s, uint64_t was, uint64_t now)
{
	if (!s->hop)
		return 1;
	if (s->pay[0] != was || s->pay[8] != was)
		return 0;
	s->pay[0] = now;
	s->pay[8] = now;
	return 1;
}

/* Spin until turn is no longer old; its new value. After 1024 pauses (far
 * longer than a round trip between two running threads) the partner is
 * not running: yield the CPU to it rather than spin out a time slice on a
 * machine shared with other work. */
static uint64_t spin_wait(struct spin *s, uint64_t old)
{
	uint64_t v;

	for (unsigned spins = 0; (v = atomic_load_explicit(&s->turn, memory_order_acquire)) == old;
	     spins++)
		if (spins < 1024)
			cpu_relax();
		else
			sched_yield();
	return v;
}

/* a: turn 2i+1 out, 2i+2 expected back */
static void *spin_a(void *arg)
{
	struct spin *s = arg;
	long i;

	handoff_span_begin(&span);
	for (i = 0; i < args.rt && !past_deadline(i, 16); i++) {
		if (!spin_move(s, 2 * (uint64_t)i, 2 * (uint64_t)i + 1)) {
			s->bad = 1;
			break;
		}
		atomic_store_explicit(&s->turn, 2 * (uint64_t)i + 1, memory_order_release);
		if (spin_wait(s, 2 * (uint64_t)i + 1) != 2 * (uint64_t)i + 2) {
			s->bad = 1;
			break;
		}
	}
	handoff_span_end(&span);
	s->rounds_a = i;
	atomic_store_explicit(&s->turn, STOP, memory_order_release);
	return NULL;
}

/* b: answers 2i+1 with 2i+2 until STOP */
static void *spin_b(void *arg)
{
	struct spin *s = arg;
	uint64_t v, last = 0;
	long i;

	for (i = 0; (v = spin_wait(s, last)) != STOP; i++) {
		/* --miscount: the turn wrong (spin), or only the state (hop) */
		int wrong = args.miscount && i == MISCOUNT_AT;

		/* a's turn out of order, or its state not there: stop it */
		if (v != 2 * (uint64_t)i + 1 || !spin_move(s, v, 2 * (uint64_t)i + 2 + (wrong && s->hop))) {
			s->bad = 1;
			atomic_store_explicit(&s->turn, STOP, memory_order_release);
			break;
		}
		last = 2 * (uint64_t)i + 2 + (wrong && !s->hop);
		atomic_store_explicit(&s->turn, last, memory_order_release);
	}
	s->rounds_b = i;
	return NULL;
}

static void spin(const char *shape, int hop)
{
	static struct spin s;

	atomic_init(&s.turn, 0);
	memset(s.pay, 0, sizeof s.pay);
	s.bad = 0;
	s.hop = hop;
	start_shape(1);
	run_pair(spin_a, spin_b, &s);
	if (s.bad || s.rounds_a != s.rounds_b || s.rounds_a < 1)
		handoff_fail("pthread", shape, hop ? "a turn or its state was lost or out of order"
						   : "a turn was lost or out of order");
	handoff_rt("pthread", shape, s.rounds_a, handoff_span_seconds(&span));
}

/* ---- cond: sleep and wake ------------------------------------------------------------------ */

struct turns {
	pthread_mutex_t m;
	pthread_cond_t to_a, to_b;
	uint64_t turn;   /* under m */
	long rounds_a, rounds_b;
	int bad;
};

/* Set turn to give (unless it is STOP), wake the other side, sleep until
 * turn changes; its new value. */
static uint64_t cond_pass(struct turns *t, uint64_t give, pthread_cond_t *wake,
			  pthread_cond_t *mine)
{
	uint64_t v;

	pthread_mutex_lock(&t->m);
	if (t->turn != STOP)
		t->turn = give;
	pthread_cond_signal(wake);
	while (t->turn == give)
		pthread_cond_wait(mine, &t->m);
	v = t->turn;
	pthread_mutex_unlock(&t->m);
	return v;
}

static void cond_stop(struct turns *t, pthread_cond_t *wake)
{
	pthread_mutex_lock(&t->m);
	t->turn = STOP;
	pthread_cond_signal(wake);
	pthread_mutex_unlock(&t->m);
}

static void *cond_a(void *arg)
{
	struct turns *t = arg;
	long i;

	handoff_span_begin(&span);
	for (i = 0; i < args.rt && !past_deadline(i, 16); i++)
		if (cond_pass(t, 2 * (uint64_t)i + 1, &t->to_b, &t->to_a) != 2 * (uint64_t)i + 2) {
			t->bad = 1;
			break;
		}
	handoff_span_end(&span);
	t->rounds_a = i;
	cond_stop(t, &t->to_b);
	return NULL;
}

static void *cond_b(void *arg)
{
	struct turns *t = arg;
	uint64_t v;
	long i;

	pthread_mutex_lock(&t->m);
	while (t->turn == 0)
		pthread_cond_wait(&t->to_b, &t->m);
	v = t->turn;
	pthread_mutex_unlock(&t->m);
	for (i = 0; v != STOP; i++) {
		if (v != 2 * (uint64_t)i + 1) { /* a's turn out of order: stop it */
			t->bad = 1;
			cond_stop(t, &t->to_a);
			break;
		}
		v = cond_pass(t, 2 * (uint64_t)i + 2 + (args.miscount && i == MISCOUNT_AT), &t->to_a,
			      &t->to_b);
	}
	t->rounds_b = i;
	return NULL;
}

static void cond(void)
{
	static struct turns t;

	pthread_mutex_init(&t.m, NULL);
	pthread_cond_init(&t.to_a, NULL);
	pthread_cond_init(&t.to_b, NULL);
	t.turn = 0;
	t.bad = 0;
	start_shape(1);
	run_pair(cond_a, cond_b, &t);
	if (t.bad || t.rounds_a != t.rounds_b || t.rounds_a < 1)
		handoff_fail("pthread", "cond", "a turn was lost or out of order");
	pthread_cond_destroy(&t.to_a);
	pthread_cond_destroy(&t.to_b);
	pthread_mutex_destroy(&t.m);
	handoff_rt("pthread", "cond", t.rounds_a, handoff_span_seconds(&span));
}

/* ---- mutex ---------------------------------------------------------------------------------- */

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static long counter;        /* under mutex */
static atomic_int arrived;  /* both threads are there: they start together */

static void *locker(void *arg)
{
	long *done = arg, i;

	atomic_fetch_add(&arrived, 1);
	while (atomic_load(&arrived) < 2)
		cpu_relax();
	handoff_span_begin(&span);
	for (i = 0; i < args.ops / 2 && !past_deadline(i, 64); i++) {
		pthread_mutex_lock(&mutex);
		counter += 1 + (args.miscount && i == MISCOUNT_AT);
		pthread_mutex_unlock(&mutex);
	}
	handoff_span_end(&span);
	*done = i;
	return NULL;
}

static void mutex_shape(void)
{
	pthread_t t[2];
	long done[2];

	counter = 0;
	atomic_store(&arrived, 0);
	start_shape(2);
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, locker, &done[i]) != 0)
			handoff_fail("pthread", "mutex", "pthread_create failed");
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	if (counter != done[0] + done[1])
		handoff_fail("pthread", "mutex", "the counter differs from the increments made");
	handoff_rate("pthread", "mutex", counter, handoff_span_seconds(&span));
}

int main(int argc, char **argv)
{
	args = handoff_parse(argc, argv);
	handoff_check_shapes(&args, shapes, argv[0]);
	if (handoff_want(&args, "spin"))
		spin("spin", 0);
	if (handoff_want(&args, "hop"))
		spin("hop", 1);
	if (handoff_want(&args, "cond"))
		cond();
	if (handoff_want(&args, "mutex"))
		mutex_shape();
	return 0;
}
