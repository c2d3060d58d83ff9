/* SPDX-License-Identifier: MIT */
/* Tests of the engine's queues (lib/engine/engine_queue.c): round-robin order, the
 * ready ring past capacity, spawns from other threads waking a sleeping
 * engine, many producers on a tiny ring, tiny SQ/CQ rings, an SQE spilled
 * by a full SQ, the local FIFO against the ring. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>
#include <sys/socket.h>
#include <cmocka.h>

#include <coring/engine.h>
#include <coring/io.h>

#include "engine/engine_internal.h"
#include "common/fault.h"
#include "helpers.h"

static atomic_int done_calls;
static void on_done_count(co_frame *f)
{
	(void)f;
	atomic_fetch_add(&done_calls, 1);
}


/* ---- running ------------------------------------------------------------- */

static void test_run_round_robin(void **state)
{
	co_engine e;
	struct co_test_task t[4];
	atomic_int runs[4] = { 0 };
	int order[4];
	atomic_int n = 0;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	atomic_store(&done_calls, 0);
	for (int i = 0; i < 4; i++) {
		/* yields 3,2,1,0: finishing order is the reverse of spawning */
		t[i] = (struct co_test_task){ .id = i, .yields = 3 - i, .runs = runs, .order = order, .n = &n };
		co_init(&t[i].co, co_test_task_fn);
		t[i].co.on_done = on_done_count;
		assert_int_equal(co_engine_spawn(&e, &t[i].co), 0);
	}
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(atomic_load(&runs[i]), 1);
		assert_int_equal(order[i], 3 - i);
	}
	assert_int_equal(atomic_load(&done_calls), 4);
	assert_int_equal(atomic_load(&e.live), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

#define MANY 20000

/* A steal hook that takes nothing: it puts an engine in the mode where its
 * ready frames live in the ring, for thieves to see. */
static int steal_nothing(co_engine *e, void *arg)
{
	(void)e;
	(void)arg;
	return 0;
}

static const struct co__engine_hooks stealing = { .steal = steal_nothing };

/* 20,000 frames spawned from another thread: every frame runs once, in
 * order; with stealing on they go through a 4-slot ring (capacity 3), and
 * the overflow keeps every frame. */
static void ready_past_capacity(int steal)
{
	co_engine e;
	co_engine_opts o = { .ready_size = 4, .batch = 64 };
	struct co_test_task *t = calloc(MANY, sizeof *t);
	atomic_int *runs = calloc(MANY, sizeof *runs);
	int *order = calloc(MANY, sizeof *order);
	atomic_int n = 0;
	assert_non_null(t);
	assert_int_equal(co_engine_init(&e, &o), 0);
	if (steal)
		co__engine_set_hooks(&e, &stealing, NULL);
	for (int i = 0; i < MANY; i++) {
		t[i] = (struct co_test_task){ .id = i, .runs = runs, .order = order, .n = &n };
		co_init(&t[i].co, co_test_task_fn);
		assert_int_equal(co_engine_spawn(&e, &t[i].co), 0);
	}
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(atomic_load(&n), MANY);
	for (int i = 0; i < MANY; i++) {
		assert_int_equal(atomic_load(&runs[i]), 1);
		assert_int_equal(order[i], i);
	}
	if (steal)
		assert_true(e.stats.spilled > 0); /* the ring was full */
	assert_int_equal(co_engine_destroy(&e), 0);
	free(t);
	free(runs);
	free(order);
}

static void test_ready_ring_past_capacity(void **state)
{
	(void)state;
	ready_past_capacity(1);
	ready_past_capacity(0);
}

/* The refill of the ring from the overflow reads nothing of a frame once
 * it is in the ring: a thief may take it there, run it and reuse its
 * link, or free it. The fault point right after each push stands in for
 * that thief: it takes every frame of the ring (the ring's consumers are
 * the owner and the thieves), scribbles over their links as a thief's
 * queue would, and puts them back in order. Every frame still runs once,
 * in order (a refill that read the pushed frame's link would lose the
 * overflow behind it, or follow the scribble). */
#define SCRIBBLE ((co_frame *)(uintptr_t)0x5a5a5a5a5a5a5a5aull)
static co_engine *thief_victim;
static int thief_took;

static void thief_scribbles(void *arg)
{
	co_frame *taken[8];
	unsigned n = 0;

	(void)arg;
	while (n < 8 && (taken[n] = co__engine_ring_pop(thief_victim)) != NULL)
		taken[n++]->next = SCRIBBLE;
	for (unsigned i = 0; i < n; i++)
		assert_true(co__engine_ring_push(thief_victim, taken[i]));
	thief_took += n != 0;
}

static void test_refill_reads_no_pushed_frame(void **state)
{
	enum { N = 64 };
	co_engine e;
	co_engine_opts o = { .ready_size = 4, .batch = 2 }; /* a ring of 3, a few frames a turn */
	struct co_test_task t[N];
	atomic_int runs[N] = { 0 };
	int order[N];
	atomic_int n = 0;
	(void)state;
	assert_int_equal(co_engine_init(&e, &o), 0);
	co__engine_set_hooks(&e, &stealing, NULL);
	for (int i = 0; i < N; i++) {
		t[i] = (struct co_test_task){ .id = i, .runs = runs, .order = order, .n = &n };
		co_init(&t[i].co, co_test_task_fn);
		assert_int_equal(co_engine_spawn(&e, &t[i].co), 0);
	}
	thief_victim = &e;
	thief_took = 0;
	co__fault_on_point(CO__POINT_RING_REFILLED, thief_scribbles, NULL);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	co__fault_on_point(CO__POINT_RING_REFILLED, NULL, NULL);
	assert_true(thief_took > 0); /* the refill ran, with frames in the ring */
	assert_int_equal(atomic_load(&n), N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(atomic_load(&runs[i]), 1);
		assert_int_equal(order[i], i);
	}
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* ---- other threads -------------------------------------------------------- */

struct stopper {
	co_frame co;
	co_engine *e;
	atomic_int *ran;
};

static int stopper_fn(co_frame *f)
{
	struct stopper *s = (struct stopper *)f;
	CO_BEGIN(f);
	atomic_store(s->ran, 1);
	co_engine_stop(s->e, 0);
	CO_END(f);
}

static void test_spawn_from_other_thread_wakes(void **state)
{
	co_engine e;
	co_test_runner r;
	struct stopper s;
	atomic_int ran = 0;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_STOP);
	/* let the engine go to sleep with nothing to do (not required for
	 * correctness: the spawn must work whether it sleeps or not) */
	for (int i = 0; i < 1000 && !atomic_load(&e.sleeping); i++)
		usleep(1000);
	co_init(&s.co, stopper_fn);
	s.e = &e;
	s.ran = &ran;
	assert_int_equal(co_engine_spawn(&e, &s.co), 0);
	assert_int_equal(co_test_runner_join(&r), 0);
	assert_int_equal(atomic_load(&ran), 1);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), -EPERM); /* not the owner */
	assert_int_equal(co_engine_destroy(&e), 0);
}

#define PRODUCERS 4
#define PER_PRODUCER 5000

struct seq_task {
	co_frame co;
	int producer, seq;
	int *last; /* last[producer]: the last seq run */
	atomic_int *bad;
	atomic_int *count;
};

static int seq_fn(co_frame *f)
{
	struct seq_task *t = (struct seq_task *)f;
	CO_BEGIN(f);
	/* only the engine thread runs these: plain reads and writes are fine */
	if (t->last[t->producer] + 1 != t->seq)
		atomic_fetch_add(t->bad, 1);
	t->last[t->producer] = t->seq;
	atomic_fetch_add(t->count, 1);
	CO_END(f);
}

struct producer_arg {
	co_engine *e;
	struct seq_task *tasks;
	int id;
};

static void *producer(void *arg)
{
	struct producer_arg *p = arg;
	for (int i = 0; i < PER_PRODUCER; i++)
		if (co_engine_spawn(p->e, &p->tasks[i].co) != 0)
			abort();
	return NULL;
}

/* 4 threads spawn 5,000 frames each while the engine runs (through its
 * 8-slot ring when stealing is on): every frame runs exactly once, each
 * producer's in order. */
static void many_producers(int steal)
{
	co_engine e;
	co_engine_opts o = { .ready_size = 8 };
	co_test_runner r;
	static struct seq_task tasks[PRODUCERS][PER_PRODUCER];
	struct producer_arg pa[PRODUCERS];
	pthread_t pt[PRODUCERS];
	int last[PRODUCERS];
	atomic_int bad = 0, count = 0;
	assert_int_equal(co_engine_init(&e, &o), 0);
	if (steal)
		co__engine_set_hooks(&e, &stealing, NULL);
	for (int p = 0; p < PRODUCERS; p++) {
		last[p] = -1;
		for (int i = 0; i < PER_PRODUCER; i++) {
			tasks[p][i] = (struct seq_task){ .producer = p, .seq = i, .last = last,
							 .bad = &bad, .count = &count };
			co_init(&tasks[p][i].co, seq_fn);
		}
	}
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_STOP);
	for (int p = 0; p < PRODUCERS; p++) {
		pa[p] = (struct producer_arg){ &e, tasks[p], p };
		assert_int_equal(pthread_create(&pt[p], NULL, producer, &pa[p]), 0);
	}
	for (int p = 0; p < PRODUCERS; p++)
		pthread_join(pt[p], NULL);
	assert_int_equal(co_engine_stop(&e, 0), 0);
	assert_int_equal(co_test_runner_join(&r), 0);
	assert_int_equal(atomic_load(&count), PRODUCERS * PER_PRODUCER);
	assert_int_equal(atomic_load(&bad), 0);
	for (int p = 0; p < PRODUCERS; p++)
		assert_int_equal(last[p], PER_PRODUCER - 1);
	assert_int_equal(co_engine_destroy(&e), 0);
}

static void test_many_producers_tiny_ring(void **state)
{
	(void)state;
	many_producers(1);
	many_producers(0);
}

/* ---- tiny rings: SQ full, CQ overflow -------------------------------------- */

#define TINY_FRAMES 500

struct busy_io {
	co_frame co;
	co_io io;
	int p[2];
	char c;
	int k, bad;
};

static int busy_io_fn(co_frame *f)
{
	struct busy_io *b = (struct busy_io *)f;
	CO_BEGIN(f);
	for (b->k = 0; b->k < 4; b->k++) {
		CO_AWAIT(f, co_nop(&b->io));
		if (co_result(f) != 0)
			b->bad++;
		CO_AWAIT(f, co_write(&b->io, b->p[1], "x", 1, (uint64_t)-1));
		if (co_result(f) != 1)
			b->bad++;
		CO_AWAIT(f, co_read(&b->io, b->p[0], &b->c, 1, (uint64_t)-1));
		if (co_result(f) != 1 || b->c != 'x')
			b->bad++;
	}
	CO_AWAIT(f, co_sleep(&b->io, CO_MS));
	if (co_result(f) != 0)
		b->bad++;
	CO_END(f);
}

static void test_tiny_rings_lose_nothing(void **state)
{
	/* 500 coroutines doing 13 operations each through a 4-entry SQ and an
	 * 8-entry CQ: the SQ fills (early submits), completions overflow the
	 * CQ (kept by the kernel, flushed in), and every await gets its own
	 * result exactly once */
	co_engine e;
	co_engine_opts o = { .sq_entries = 4, .cq_entries = 8, .ready_size = 1024 };
	static struct busy_io b[TINY_FRAMES];
	(void)state;
	assert_int_equal(co_engine_init(&e, &o), 0);
	assert_true(e.features & CO_ENGINE_F_NODROP);
	for (int i = 0; i < TINY_FRAMES; i++) {
		memset(&b[i], 0, sizeof b[i]);
		assert_int_equal(pipe(b[i].p), 0);
		co_init(&b[i].co, busy_io_fn);
		assert_int_equal(co_engine_spawn(&e, &b[i].co), 0);
	}
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	for (int i = 0; i < TINY_FRAMES; i++) {
		assert_true(co_done(&b[i].co));
		assert_int_equal(b[i].bad, 0);
		close(b[i].p[0]);
		close(b[i].p[1]);
	}
	assert_true(e.stats.sq_full > 0);     /* the SQ was full ... */
	assert_true(e.stats.cq_overflow > 0); /* ... and the CQ overflowed */
	assert_true(e.stats.cqes >= (uint64_t)TINY_FRAMES * 13);
	assert_int_equal(e.inflight, 0);
	print_message("      %llu early submits, %llu CQ overflows, %llu completions, %llu turns\n",
		      (unsigned long long)e.stats.sq_full, (unsigned long long)e.stats.cq_overflow,
		      (unsigned long long)e.stats.cqes, (unsigned long long)e.stats.turns);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* A prep that finds the SQ without room for it and a linked timeout fills
 * a spill slot, which goes into the SQ once room is made (engine.md, "The
 * loop"): the operation is submitted after those before it, and a
 * deadline put on it right after the prep is linked to it. */
struct spill_frame {
	co_frame co;
	co_io io;
	int fd;   /* where it sends c, or (c 0) a recv with a deadline on it */
	char c;
	int res;
};

static int spill_fn(co_frame *f)
{
	struct spill_frame *s = (struct spill_frame *)f;
	CO_BEGIN(f);
	if (s->c == 0)
		CO_AWAIT(f, co_deadline(co_recv(&s->io, s->fd, &s->res, 1, 0), 20 * CO_MS));
	else
		CO_AWAIT(f, co_send(&s->io, s->fd, &s->c, 1, 0)); /* at the turn's end */
	s->res = co_result(f);
	CO_END(f);
}

/* Writes the byte the recv waits for, after its deadline should have
 * ended it: a recv whose deadline was not linked gets it. */
struct late_writer {
	co_frame co;
	co_io io;
	int fd;
};

static int late_writer_fn(co_frame *f)
{
	struct late_writer *w = (struct late_writer *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep(&w->io, 200 * CO_MS));
	if (write(w->fd, "x", 1) != 1)
		CO_RETURN(f, -1);
	CO_END(f);
}

static void test_spilled_sqe_keeps_order_and_deadline(void **state)
{
	co_engine e;
	co_engine_opts o = { .sq_entries = 4 };
	/* three sends take three of the four slots: the recv finds room for
	 * itself but not for its timeout (spilled); the next send finds room,
	 * the one after it none (spilled) */
	static const char order[] = "abc\0ef";
	struct spill_frame s[6];
	struct late_writer w;
	int sp[2], p[2]; /* the recv's; the sends' */
	char got[8] = { 0 };
	(void)state;
	alarm(10); /* an SQE the spill lost would leave its frame waiting */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
	assert_int_equal(co_engine_init(&e, &o), 0);
	assert_int_equal(e.ring.sq.ring_entries, 4);
	for (int i = 0; i < 6; i++) {
		s[i] = (struct spill_frame){ .fd = order[i] ? p[1] : sp[0], .c = order[i], .res = 2 };
		co_init(&s[i].co, spill_fn);
		assert_int_equal(co_engine_spawn(&e, &s[i].co), 0);
	}
	w = (struct late_writer){ .fd = sp[1] };
	co_init(&w.co, late_writer_fn);
	assert_int_equal(co_engine_spawn(&e, &w.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	alarm(0);
	for (int i = 0; i < 6; i++)
		assert_int_equal(s[i].res, order[i] ? 1 : -ETIME);
	assert_int_equal(e.stats.sq_full, 2); /* the recv's prep and the last send's */
	/* the sends went to the kernel in the order of their preps */
	assert_int_equal(read(p[0], got, sizeof got), 5);
	assert_string_equal(got, "abcef");
	assert_true(co_done(&w.co) && w.co.status == 0);
	assert_int_equal(e.inflight, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	close(sp[0]);
	close(sp[1]);
	close(p[0]);
	close(p[1]);
}

/* ---- the owner's local FIFO (no stealing) and the ring share the loop ------ */

struct spinner {
	co_frame co;
	atomic_int *flag;
	atomic_int started;
	long spins;         /* read after the engine thread is joined */
};

/* Yields (to the owner's local FIFO) until another thread's frame, which
 * comes through the ring, sets the flag: the loop must not starve it. */
static int spinner_fn(co_frame *f)
{
	struct spinner *s = (struct spinner *)f;
	CO_BEGIN(f);
	atomic_store(&s->started, 1);
	while (!atomic_load(s->flag) && s->spins < 50000000)
		CO_YIELD_VALUE(f, s->spins, s->spins + 1);
	CO_END(f);
}

struct setter {
	co_frame co;
	atomic_int *flag;
};

static int setter_fn(co_frame *f)
{
	CO_BEGIN(f);
	atomic_store(((struct setter *)f)->flag, 1);
	CO_END(f);
}

static void test_local_fifo_does_not_starve_ring(void **state)
{
	co_engine e;
	co_test_runner r;
	struct spinner sp = { .spins = 0, .started = 0 };
	struct setter st;
	atomic_int flag = 0;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	sp.flag = st.flag = &flag;
	co_init(&sp.co, spinner_fn);
	assert_int_equal(co_engine_spawn(&e, &sp.co), 0);
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_IDLE);
	while (!atomic_load(&sp.started)) /* it spins on the engine thread */
		usleep(100);
	co_init(&st.co, setter_fn);
	assert_int_equal(co_engine_spawn(&e, &st.co), 0); /* from another thread: the ring */
	assert_int_equal(co_test_runner_join(&r), 0);
	assert_int_equal(atomic_load(&flag), 1);
	assert_true(sp.spins < 50000000); /* it saw the flag: the ring frame ran */
	assert_int_equal(co_engine_destroy(&e), 0);
}

struct spawner {
	co_frame co;
	struct co_test_task kids[8];
};

/* Frames a coroutine spawns on its own engine (the local FIFO) run in
 * spawn order. */
static int spawner_fn(co_frame *f)
{
	struct spawner *s = (struct spawner *)f;
	CO_BEGIN(f);
	for (int i = 0; i < 8; i++)
		if (co_engine_spawn(co_engine_current(), &s->kids[i].co) != 0)
			abort();
	CO_END(f);
}

static void test_local_spawns_run_in_order(void **state)
{
	co_engine e;
	struct spawner sp;
	atomic_int runs[8] = { 0 };
	int order[8];
	atomic_int n = 0;
	(void)state;
	assert_int_equal(co_engine_init(&e, NULL), 0);
	for (int i = 0; i < 8; i++) {
		sp.kids[i] = (struct co_test_task){ .id = i, .yields = 1, .runs = runs, .order = order, .n = &n };
		co_init(&sp.kids[i].co, co_test_task_fn);
	}
	co_init(&sp.co, spawner_fn);
	assert_int_equal(co_engine_spawn(&e, &sp.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(atomic_load(&n), 8);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(order[i], i);
		assert_int_equal(atomic_load(&runs[i]), 1);
	}
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* The ready ring starts on a cache line (thieves take its consumer index,
 * the owner writes its producer index): with heap neighbours of every
 * size before it, at every ring size. */
static void test_ready_ring_on_its_own_lines(void **state)
{
	static const unsigned sizes[] = { 2, 4, 64, 4096, 8 };
	enum { N = sizeof sizes / sizeof sizes[0] };
	co_engine e[N];
	void *noise[N];
	(void)state;
	for (int i = 0; i < N; i++) {
		noise[i] = malloc(8 + 16 * (size_t)i);
		assert_non_null(noise[i]);
		assert_int_equal(co_engine_init(&e[i], &(co_engine_opts){ .ready_size = sizes[i] }), 0);
		assert_int_equal((uintptr_t)e[i].ready % CO_CACHELINE, 0);
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(co_engine_destroy(&e[i]), 0);
		free(noise[i]);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_run_round_robin),
		cmocka_unit_test(test_ready_ring_past_capacity),
		cmocka_unit_test(test_refill_reads_no_pushed_frame),
		cmocka_unit_test(test_spawn_from_other_thread_wakes),
		cmocka_unit_test(test_many_producers_tiny_ring),
		cmocka_unit_test(test_tiny_rings_lose_nothing),
		cmocka_unit_test(test_spilled_sqe_keeps_order_and_deadline),
		cmocka_unit_test(test_local_fifo_does_not_starve_ring),
		cmocka_unit_test(test_local_spawns_run_in_order),
		cmocka_unit_test(test_ready_ring_on_its_own_lines),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
