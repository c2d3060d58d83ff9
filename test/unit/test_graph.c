/* SPDX-License-Identifier: MIT */
/* Tests of the task graph (lib/graph/graph.c): order on random DAGs across two
 * contexts, the failure rule, cycles, errors, a long chain; the kind each
 * node starts on, awaiting a graph (time limit, cancel, many waiters, from
 * a hand-ticked context), polling it, values passed between nodes, and a
 * destroy right after the end (the last three are meant for TSan too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <cmocka.h>

#include <coring/graph.h>
#include <coring/sync.h>
#include "helpers.h"
#include "common/fault.h"
#include "waiter/waiter_internal.h"

struct task {
	co_frame co;
	atomic_uint *clock;
	unsigned start, end;      /* ticks of a shared clock */
	int yields, k, ret;
	atomic_int runs;
};

static int task_fn(co_frame *f)
{
	struct task *t = (struct task *)f;
	CO_BEGIN(f);
	atomic_fetch_add(&t->runs, 1);
	t->start = atomic_fetch_add(t->clock, 1);
	for (t->k = 0; t->k < t->yields; t->k++)
		CO_YIELD(f);
	t->end = atomic_fetch_add(t->clock, 1);
	CO_RETURN(f, t->ret);
	CO_END(f);
}

static void task_init(struct task *t, atomic_uint *clock, int yields, int ret)
{
	t->clock = clock;
	t->yields = yields;
	t->ret = ret;
	t->start = t->end = 0;
	atomic_init(&t->runs, 0);
	co_init(&t->co, task_fn);
}

static void sched_start(co_sched *s)
{
	co_sched_opts o = { .contexts = 2 };
	assert_int_equal(co_sched_init(s, &o), 0);
}

/* ---- random DAGs: every edge respected ---------------------------------------------- */

#define GRAPHS 300
#define MAX_NODES 30

static uint64_t rng = 0x2545F4914F6CDD1Dull; /* fixed seed: reproducible */

static unsigned rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

struct dag {
	co_graph g;
	unsigned n, nedges;
	co_graph_node node[MAX_NODES];
	struct task t[MAX_NODES];
	unsigned char from[MAX_NODES * MAX_NODES], to[MAX_NODES * MAX_NODES];
};

static void dag_build(struct dag *d, atomic_uint *clock)
{
	unsigned perm[MAX_NODES];

	d->n = 1 + rnd(MAX_NODES);
	d->nedges = 0;
	assert_int_equal(co_graph_init(&d->g), 0);
	for (unsigned i = 0; i < d->n; i++) {
		task_init(&d->t[i], clock, (int)rnd(3), 0);
		assert_int_equal(co_graph_add(&d->g, &d->node[i], &d->t[i].co), 0);
		perm[i] = i;
	}
	for (unsigned i = d->n; i > 1; i--) { /* a random topological order */
		unsigned j = rnd(i), x = perm[i - 1];
		perm[i - 1] = perm[j];
		perm[j] = x;
	}
	for (unsigned i = 0; i < d->n; i++)
		for (unsigned j = i + 1; j < d->n; j++) {
			if (rnd(100) >= 15)
				continue;
			unsigned a = perm[i], b = perm[j];
			if (rnd(2))
				assert_int_equal(co_graph_precede(&d->node[a], &d->node[b]), 0);
			else
				assert_int_equal(co_graph_succeed(&d->node[b], &d->node[a]), 0);
			d->from[d->nedges] = (unsigned char)a;
			d->to[d->nedges++] = (unsigned char)b;
		}
}

static void dag_check(struct dag *d)
{
	assert_int_equal(atomic_load(&d->g.error), 0);
	assert_int_equal(atomic_load(&d->g.finished), d->n);
	for (unsigned i = 0; i < d->n; i++) {
		assert_int_equal(atomic_load(&d->t[i].runs), 1);
		assert_int_equal(atomic_load(&d->node[i].state), CO_NODE_DONE);
	}
	for (unsigned e = 0; e < d->nedges; e++)
		if (d->t[d->from[e]].end >= d->t[d->to[e]].start)
			fail_msg("edge %u -> %u: ended at %u, successor started at %u", d->from[e],
				 d->to[e], d->t[d->from[e]].end, d->t[d->to[e]].start);
}

static void test_random_dags(void **state)
{
	co_sched s;
	struct dag *d = calloc(GRAPHS, sizeof *d);
	atomic_uint clock;
	(void)state;
	assert_non_null(d);
	atomic_init(&clock, 1);
	sched_start(&s);
	/* all graphs share one run, interleaved on both contexts */
	for (int i = 0; i < GRAPHS; i++) {
		dag_build(&d[i], &clock);
		assert_int_equal(co_graph_spawn(&d[i].g, &s), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < GRAPHS; i++) {
		dag_check(&d[i]);
		assert_int_equal(co_graph_destroy(&d[i].g), 0);
	}
	/* and a few alone, with co_graph_run */
	for (int i = 0; i < 5; i++) {
		dag_build(&d[i], &clock);
		assert_int_equal(co_graph_run(&d[i].g, &s), 0);
		dag_check(&d[i]);
		assert_int_equal(co_graph_destroy(&d[i].g), 0);
	}
	assert_int_equal(co_sched_destroy(&s), 0);
	free(d);
}

/* ---- the failure rule; running a graph again ---------------------------------------- */

static void test_failure_skips_dependents(void **state)
{
	/* a -> b -> d -> f, a -> c -> d, e alone; b fails */
	enum { A, B, C, D, E, F, N };
	co_sched s;
	co_graph g;
	co_graph_node n[N];
	struct task t[N];
	atomic_uint clock;
	(void)state;
	atomic_init(&clock, 1);
	sched_start(&s);
	assert_int_equal(co_graph_init(&g), 0);
	for (int i = 0; i < N; i++) {
		task_init(&t[i], &clock, 1, i == B ? -EIO : 0);
		assert_int_equal(co_graph_add(&g, &n[i], &t[i].co), 0);
	}
	assert_int_equal(co_graph_precede(&n[A], &n[B]), 0);
	assert_int_equal(co_graph_precede(&n[A], &n[C]), 0);
	assert_int_equal(co_graph_succeed(&n[D], &n[B]), 0);
	assert_int_equal(co_graph_succeed(&n[D], &n[C]), 0);
	assert_int_equal(co_graph_precede(&n[D], &n[F]), 0);
	assert_int_equal(co_graph_run(&g, &s), -EIO);
	assert_int_equal(atomic_load(&g.finished), N);
	for (int i = 0; i < N; i++) {
		int skipped = i == D || i == F;
		assert_int_equal(atomic_load(&n[i].state), skipped ? CO_NODE_SKIPPED : CO_NODE_DONE);
		assert_int_equal(atomic_load(&t[i].runs), skipped ? 0 : 1);
	}
	assert_int_equal(co_status(&t[B].co), -EIO);
	assert_true(t[A].end < t[C].start);

	/* frames run once: re-running needs fresh frames */
	assert_int_equal(co_graph_run(&g, &s), -EINVAL);
	for (int i = 0; i < N; i++)
		task_init(&t[i], &clock, 0, 0);
	assert_int_equal(co_graph_run(&g, &s), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(atomic_load(&n[i].state), CO_NODE_DONE);
	assert_true(t[D].end < t[F].start);
	assert_int_equal(co_graph_destroy(&g), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- cycles and misuse ------------------------------------------------------------------ */

static void test_cycle_and_errors(void **state)
{
	co_sched s;
	co_graph g, other;
	co_graph_node n[4], o;
	struct task t[4], ot;
	atomic_uint clock;
	(void)state;
	atomic_init(&clock, 1);
	sched_start(&s);
	assert_int_equal(co_graph_init(&g), 0);
	assert_int_equal(co_graph_init(&other), 0);
	for (int i = 0; i < 4; i++) {
		task_init(&t[i], &clock, 0, 0);
		assert_int_equal(co_graph_add(&g, &n[i], &t[i].co), 0);
	}
	task_init(&ot, &clock, 0, 0);
	assert_int_equal(co_graph_add(&other, &o, &ot.co), 0);

	assert_int_equal(co_graph_init(NULL), -EINVAL);
	assert_int_equal(co_graph_destroy(NULL), -EINVAL);
	assert_int_equal(co_graph_add(NULL, &n[0], &t[0].co), -EINVAL);
	assert_int_equal(co_graph_add(&g, NULL, &t[0].co), -EINVAL);
	assert_int_equal(co_graph_add(&g, &o, NULL), -EINVAL);
	assert_int_equal(co_graph_precede(NULL, &n[0]), -EINVAL);
	assert_int_equal(co_graph_precede(&n[0], NULL), -EINVAL);
	assert_int_equal(co_graph_precede(&n[0], &n[0]), -EINVAL);
	assert_int_equal(co_graph_precede(&n[0], &o), -EINVAL); /* other graph */
	assert_int_equal(co_graph_spawn(NULL, &s), -EINVAL);
	assert_int_equal(co_graph_spawn(&g, NULL), -EINVAL);
	assert_int_equal(co_graph_run(&g, NULL), -EINVAL);
	/* the same node twice: refused, not run in a loop */
	assert_int_equal(co_graph_add(&g, &n[1], &t[1].co), -EEXIST);
	assert_int_equal(g.n, 4);

	/* 0 -> 1 -> 2 -> 0, and 3 after 0: a cycle, nothing may start */
	assert_int_equal(co_graph_precede(&n[0], &n[1]), 0);
	assert_int_equal(co_graph_precede(&n[1], &n[2]), 0);
	assert_int_equal(co_graph_precede(&n[2], &n[0]), 0);
	assert_int_equal(co_graph_precede(&n[0], &n[3]), 0);
	assert_int_equal(co_graph_run(&g, &s), -ELOOP);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(atomic_load(&t[i].runs), 0);
		assert_int_equal(t[i].co.label, 0);
	}
	assert_int_equal(co_sched_tasks(&s), 0);

	/* one frame in two nodes: refused at spawn, nothing starts */
	{
		co_graph dup;
		co_graph_node a, b;
		struct task x;
		task_init(&x, &clock, 0, 0);
		assert_int_equal(co_graph_init(&dup), 0);
		assert_int_equal(co_graph_add(&dup, &a, &x.co), 0);
		assert_int_equal(co_graph_add(&dup, &b, &x.co), 0);
		assert_int_equal(co_graph_spawn(&dup, &s), -EINVAL);
		assert_int_equal(x.co.state & CO__ST_SPAWNED, 0); /* no mark left */
		assert_int_equal(co_sched_run(&s), 0);
		assert_int_equal(atomic_load(&x.runs), 0);
		assert_int_equal(co_graph_destroy(&dup), 0);
		/* its nodes are out: they can be added again */
		assert_int_equal(co_graph_add(&dup, &a, &x.co), 0);
		assert_int_equal(co_graph_run(&dup, &s), 0);
		assert_int_equal(atomic_load(&x.runs), 1);
		assert_int_equal(co_graph_destroy(&dup), 0);
	}

	/* an empty graph runs and succeeds */
	assert_int_equal(co_graph_run(&other, &s), 0);
	assert_int_equal(atomic_load(&ot.runs), 1);
	assert_int_equal(co_graph_destroy(&g), 0);
	assert_int_equal(co_graph_destroy(&other), 0);
	assert_int_equal(co_graph_init(&other), 0);
	assert_int_equal(co_graph_run(&other, &s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- a long chain whose head fails: skips propagate without recursion ------------------- */

#define CHAIN 50000

static void test_long_chain_skipped(void **state)
{
	co_sched s;
	co_graph g;
	co_graph_node *n = calloc(CHAIN, sizeof *n);
	struct task *t = calloc(CHAIN, sizeof *t);
	atomic_uint clock;
	(void)state;
	assert_non_null(n);
	assert_non_null(t);
	atomic_init(&clock, 1);
	sched_start(&s);
	assert_int_equal(co_graph_init(&g), 0);
	for (int i = 0; i < CHAIN; i++) {
		task_init(&t[i], &clock, 0, i == 0 ? -ENOENT : 0);
		assert_int_equal(co_graph_add(&g, &n[i], &t[i].co), 0);
		if (i)
			assert_int_equal(co_graph_precede(&n[i - 1], &n[i]), 0);
	}
	assert_int_equal(co_graph_run(&g, &s), -ENOENT);
	assert_int_equal(atomic_load(&g.finished), CHAIN);
	assert_int_equal(atomic_load(&n[CHAIN - 1].state), CO_NODE_SKIPPED);
	assert_int_equal(atomic_load(&t[CHAIN - 1].runs), 0);
	assert_int_equal(co_graph_destroy(&g), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	free(n);
	free(t);
}

/* ---- kinds, waiting, polling: the pieces ------------------------------------------------ */

/* A node that notes the kind of context it ran on, may first wait on a
 * gate (an event the test sets) or meet other nodes, then sums its inputs'
 * values and writes its own: plain memory, no atomics (the graph's
 * ordering publishes it). */
struct job {
	co_frame co;
	co_waiter w;
	co_event *gate;           /* NULL: none */
	atomic_int *meet;         /* NULL: none; else spin until meet_n came */
	int meet_n;
	co_graph_node *after;     /* NULL: none; else spin until it is DONE */
	co_event *signal;         /* NULL: none; else set it at the end */
	unsigned kind;            /* co_context_current()->kind */
	int ret, gate_res;
	atomic_int runs;
	long base, value, sum;    /* plain */
	struct job *in[4];        /* predecessors whose values it reads */
	int nin;
};

static int job_fn(co_frame *f)
{
	struct job *j = (struct job *)f;
	CO_BEGIN(f);
	atomic_fetch_add(&j->runs, 1);
	j->kind = co_context_current() ? co_context_current()->kind : UINT_MAX;
	if (j->gate) {
		CO_AWAIT(f, co_event_wait(&j->w, j->gate));
		j->gate_res = co_result(f);
	}
	if (j->meet) {
		/* Nodes on other contexts (threads) end together. Relaxed: the
		 * meeting orders nothing, so under TSan what orders their
		 * writes and ends is the graph alone (no earlier end of one
		 * reaches the other through the scheduler's own atomics). */
		atomic_fetch_add_explicit(j->meet, 1, memory_order_relaxed);
		while (atomic_load_explicit(j->meet, memory_order_relaxed) < j->meet_n)
			sched_yield();
	}
	while (j->after && atomic_load_explicit(&j->after->state, memory_order_relaxed) != CO_NODE_DONE)
		sched_yield(); /* relaxed: orders nothing either */
	j->sum = 0;
	for (int i = 0; i < j->nin; i++)
		j->sum += j->in[i]->value;
	j->value = j->base + j->sum;
	if (j->signal)
		co_event_set(j->signal);
	CO_RETURN(f, j->ret);
	CO_END(f);
}

static void job_init(struct job *j, long base, int ret)
{
	memset(j, 0, sizeof *j);
	j->base = base;
	j->ret = ret;
	j->kind = UINT_MAX;
	atomic_init(&j->runs, 0);
	co_init(&j->co, job_fn);
}

static void job_input(struct job *j, struct job *from)
{
	j->in[j->nin++] = from;
}

/* A coroutine that awaits a graph (with a time limit if limit is set; with
 * a NULL co_waiter if null_w), then reads one node's value and, with
 * destroy set, destroys the graph, poisons and frees it (own). */
struct gwait {
	co_frame co;
	co_waiter w;
	co_graph *g;
	uint64_t limit;           /* 0: none */
	int null_w, destroy, retry;
	int ask_done;             /* read co_graph_done right after the wait */
	int done_seen;            /* what it answered */
	co_sched *tasks_of;       /* NULL: none; else read co_sched_tasks after the wait */
	unsigned long tasks_seen; /* what it answered */
	void *own;                /* freed after a destroy */
	size_t own_size;
	struct job *look;         /* read look->value after the wait */
	unsigned kind;
	int res, dres, tries;
	long seen;
	atomic_int arrived, done;
};

static int gwait_fn(co_frame *f)
{
	struct gwait *x = (struct gwait *)f;
	co_awaiter *aw;
	CO_BEGIN(f);
	x->kind = co_context_current() ? co_context_current()->kind : UINT_MAX;
	atomic_store(&x->arrived, 1);
	for (;;) {
		aw = co_graph_wait(x->null_w ? NULL : &x->w, x->g);
		if (x->limit)
			aw = co_wait_for(aw, x->limit);
		x->tries++;
		CO_AWAIT(f, aw);
		x->res = co_result(f);
		if (!(x->retry && x->res == -EINVAL))
			break;
		CO_YIELD(f); /* not spawned yet: look again */
	}
	if (x->ask_done)
		x->done_seen = co_graph_done(x->g);
	if (x->tasks_of)
		x->tasks_seen = co_sched_tasks(x->tasks_of);
	if (x->look)
		x->seen = x->look->value;
	if (x->destroy) {
		x->dres = co_graph_destroy(x->g);
		memset(x->own, 0x5a, x->own_size); /* nothing may touch it now */
		free(x->own);
	}
	atomic_store(&x->done, 1);
	CO_END(f);
}

static void gwait_init(struct gwait *x, co_graph *g, uint64_t limit)
{
	memset(x, 0, sizeof *x);
	x->g = g;
	x->limit = limit;
	x->kind = UINT_MAX;
	co_init(&x->co, gwait_fn);
}

/* Tick the manual context until *flag is set. */
static void tick_until(co_context *logic, atomic_int *flag)
{
	while (!atomic_load(flag)) {
		assert_true(co_context_tick(logic) >= 0);
		sched_yield();
	}
}

/* Tick it until the scheduler has nothing left (the ticking thread polls
 * instead of blocking in co_sched_run); then no task is left. */
static void tick_to_end(co_sched *s, co_context *logic)
{
	int ret;

	while ((ret = co_sched_poll(s)) == -EAGAIN) {
		assert_true(co_context_tick(logic) >= 0);
		sched_yield();
	}
	assert_int_equal(ret, 0);
	assert_int_equal(co_sched_tasks(s), 0);
}

/* Stop a scheduler with a manual context and destroy it. */
static void sched_end(co_sched *s)
{
	assert_int_equal(co_sched_stop(s, CO_STOP_DRAIN), 0);
	assert_int_equal(co_sched_run(s), 0);
	assert_int_equal(co_sched_destroy(s), 0);
}

/* ---- kinds: each node starts on its own kind, or the run's default ---------------------- */

enum { K0, K1, K2, NK };

static const co_sched_group three_kinds[NK] = {
	[K0] = { .contexts = 1 },
	[K1] = { .contexts = 2 },
	[K2] = { .contexts = 1 },
};

static void test_kinds_respected(void **state)
{
	/* a(K2) -> b(K1), a -> c(default), b -> d(K0), c -> d, d -> e(default),
	 * e -> f(K1) */
	enum { A, B, C, D, E, F, N };
	static const int own[N] = { K2, K1, -1, K0, -1, K1 };
	co_sched s;
	co_sched_opts o = { .groups = three_kinds, .ngroups = NK };
	co_graph g;
	co_graph_node n[N];
	struct job j[N];
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	/* three runs: default K2 (run_kind), K0 (plain run), K1 (spawn_kind) */
	for (int round = 0; round < 3; round++) {
		unsigned dflt = round == 0 ? K2 : round == 1 ? K0 : K1;

		assert_int_equal(co_graph_init(&g), 0);
		for (int i = 0; i < N; i++) {
			job_init(&j[i], i, 0);
			if (own[i] >= 0)
				assert_int_equal(co_graph_add_kind(&g, &n[i], &j[i].co, (unsigned)own[i]), 0);
			else
				assert_int_equal(co_graph_add(&g, &n[i], &j[i].co), 0);
		}
		assert_int_equal(co_graph_precede(&n[A], &n[B]), 0);
		assert_int_equal(co_graph_precede(&n[A], &n[C]), 0);
		assert_int_equal(co_graph_precede(&n[B], &n[D]), 0);
		assert_int_equal(co_graph_precede(&n[C], &n[D]), 0);
		assert_int_equal(co_graph_precede(&n[D], &n[E]), 0);
		assert_int_equal(co_graph_precede(&n[E], &n[F]), 0);
		if (round == 0) {
			assert_int_equal(co_graph_run_kind(&g, &s, K2), 0);
		} else if (round == 1) {
			assert_int_equal(co_graph_run(&g, &s), 0);
		} else {
			assert_int_equal(co_graph_spawn_kind(&g, &s, K1), 0);
			assert_int_equal(co_sched_run(&s), 0);
		}
		for (int i = 0; i < N; i++) {
			assert_int_equal(atomic_load(&j[i].runs), 1);
			assert_int_equal(j[i].kind, own[i] >= 0 ? (unsigned)own[i] : dflt);
			assert_int_equal(n[i].kind, own[i] >= 0 ? (unsigned)own[i] : 0);
			assert_int_equal(n[i].own_kind, own[i] >= 0);
		}
		assert_int_equal(co_graph_done(&g), 1);
		assert_int_equal(co_graph_destroy(&g), 0);
	}
	assert_int_equal(co_sched_tasks(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- kinds out of range; calls on a running graph --------------------------------------- */

static void test_kind_errors(void **state)
{
	static const co_sched_group two[2] = { { .contexts = 1 }, { .contexts = 1 } };
	static const unsigned bad[] = { 2, (unsigned)-1, INT_MAX, UINT_MAX, (unsigned)INT_MIN };
	co_sched s;
	co_sched_opts o = { .groups = two, .ngroups = 2 };
	co_graph g;
	co_graph_node n[3], extra;
	struct job j[3], xj;
	co_event gate;
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	assert_int_equal(co_event_init(&gate, 0), 0);

	/* NULL, twice */
	job_init(&xj, 0, 0);
	assert_int_equal(co_graph_init(&g), 0);
	assert_int_equal(co_graph_add_kind(NULL, &extra, &xj.co, 0), -EINVAL);
	assert_int_equal(co_graph_add_kind(&g, NULL, &xj.co, 0), -EINVAL);
	assert_int_equal(co_graph_add_kind(&g, &extra, NULL, 0), -EINVAL);
	assert_int_equal(co_graph_add_kind(&g, &extra, &xj.co, 1), 0);
	assert_int_equal(co_graph_add_kind(&g, &extra, &xj.co, 1), -EEXIST);
	assert_int_equal(co_graph_add(&g, &extra, &xj.co), -EEXIST);
	assert_int_equal(g.n, 1);
	assert_int_equal(co_graph_spawn_kind(NULL, &s, 0), -EINVAL);
	assert_int_equal(co_graph_spawn_kind(&g, NULL, 0), -EINVAL);
	assert_int_equal(co_graph_run_kind(&g, NULL, 0), -EINVAL);
	assert_int_equal(co_graph_destroy(&g), 0);

	/* a default kind out of range: nothing starts, the graph was never
	 * spawned; a node's own kind out of range, after a root that is
	 * valid: the check comes before any submit */
	for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++)
		for (int where = 0; where < 2; where++) {
			assert_int_equal(co_graph_init(&g), 0);
			for (int i = 0; i < 3; i++)
				job_init(&j[i], i, 0);
			assert_int_equal(co_graph_add_kind(&g, &n[0], &j[0].co, 1), 0);
			if (where == 0)
				assert_int_equal(co_graph_add(&g, &n[1], &j[1].co), 0);
			else
				assert_int_equal(co_graph_add_kind(&g, &n[1], &j[1].co, bad[b]), 0);
			assert_int_equal(co_graph_add(&g, &n[2], &j[2].co), 0);
			assert_int_equal(co_graph_precede(&n[1], &n[2]), 0);
			assert_int_equal(co_graph_spawn_kind(&g, &s, where == 0 ? bad[b] : 0), -EINVAL);
			assert_int_equal(co_graph_run_kind(&g, &s, where == 0 ? bad[b] : 0), -EINVAL);
			if (where == 1) /* plain spawn checks node kinds too */
				assert_int_equal(co_graph_run(&g, &s), -EINVAL);
			assert_int_equal(co_graph_done(&g), -EINVAL); /* never spawned */
			assert_int_equal(co_sched_tasks(&s), 0);
			assert_int_equal(co_sched_run(&s), 0);
			for (int i = 0; i < 3; i++) {
				assert_int_equal(atomic_load(&j[i].runs), 0);
				assert_int_equal(j[i].co.label, 0);
				assert_int_equal(j[i].co.state & CO__ST_SPAWNED, 0);
				assert_int_equal(atomic_load(&n[i].state), CO_NODE_IDLE);
			}
			assert_int_equal(co_graph_destroy(&g), 0);
		}

	/* the same graph, kinds in range: runs; then calls on it while it
	 * runs (its root waits on the gate) */
	assert_int_equal(co_graph_init(&g), 0);
	for (int i = 0; i < 3; i++)
		job_init(&j[i], i, 0);
	j[0].gate = &gate;
	assert_int_equal(co_graph_add_kind(&g, &n[0], &j[0].co, 1), 0);
	assert_int_equal(co_graph_add_kind(&g, &n[1], &j[1].co, 0), 0);
	assert_int_equal(co_graph_add(&g, &n[2], &j[2].co), 0);
	assert_int_equal(co_graph_precede(&n[0], &n[2]), 0);
	assert_int_equal(co_graph_spawn_kind(&g, &s, 1), 0);
	job_init(&xj, 9, 0);
	assert_int_equal(co_graph_spawn_kind(&g, &s, 1), -EINVAL); /* twice */
	assert_int_equal(co_graph_spawn(&g, &s), -EINVAL);
	assert_int_equal(co_graph_add(&g, &extra, &xj.co), -EBUSY);
	assert_int_equal(co_graph_add_kind(&g, &extra, &xj.co, 0), -EBUSY);
	assert_int_equal(co_graph_precede(&n[1], &n[2]), -EBUSY);
	assert_int_equal(co_graph_succeed(&n[1], &n[0]), -EBUSY);
	assert_int_equal(co_graph_destroy(&g), -EBUSY);
	assert_int_equal(co_graph_done(&g), 0); /* the gate is closed */
	assert_int_equal(g.n, 3);
	assert_int_equal(co_event_set(&gate), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_graph_done(&g), 1);
	assert_int_equal(atomic_load(&g.error), 0);
	assert_int_equal(j[0].kind, 1);
	assert_int_equal(j[1].kind, 0);
	assert_int_equal(j[2].kind, 1);
	assert_int_equal(n[1].nsucc, 0); /* the refused edge was not added */
	assert_int_equal(atomic_load(&xj.runs), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(atomic_load(&j[i].runs), 1);
	assert_int_equal(co_graph_destroy(&g), 0);
	assert_int_equal(co_graph_done(&g), -EINVAL); /* destroyed */
	assert_int_equal(co_graph_destroy(&g), 0);    /* twice: nothing to do */
	assert_int_equal(co_sched_tasks(&s), 0);
	assert_int_equal(co_event_destroy(&gate), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- submits the scheduler refuses; a bad node kind leaves frames spawnable ------------- */

/*
 * graph.h, co_graph_spawn: "A node whose submit the scheduler refuses
 * (-ESHUTDOWN) counts as failed: see the failure rule". So the refused
 * node never runs (it is marked CO_NODE_SKIPPED: it never started), its
 * successors are skipped, nodes that do not depend on it still run, the
 * graph's error is -ESHUTDOWN, and the run still ends (co_graph_done 1,
 * every node counted). First the roots themselves are refused (the
 * scheduler was stopped before the spawn; co_graph_spawn itself answers 0),
 * then a successor is refused (the stop came while its predecessor ran).
 */
static void test_refused_submit_fails_node(void **state)
{
	enum { A, B, C, D, N };
	co_sched s;
	co_graph g;
	co_graph_node n[N];
	struct job j[N];
	co_event gate;
	(void)state;

	/* stopped before the spawn: a -> b, c alone; a and c are refused */
	sched_start(&s);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	assert_int_equal(co_graph_init(&g), 0);
	for (int i = 0; i < 3; i++) {
		job_init(&j[i], i, 0);
		assert_int_equal(co_graph_add(&g, &n[i], &j[i].co), 0);
	}
	assert_int_equal(co_graph_precede(&n[A], &n[B]), 0);
	assert_int_equal(co_graph_spawn(&g, &s), 0);
	assert_int_equal(co_graph_done(&g), 1); /* nothing could start: over */
	assert_int_equal(atomic_load(&g.error), -ESHUTDOWN);
	assert_int_equal(atomic_load(&g.finished), 3);
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(atomic_load(&n[i].state), CO_NODE_SKIPPED);
		assert_int_equal(atomic_load(&j[i].runs), 0);
	}
	assert_int_equal(co_graph_destroy(&g), 0);
	assert_int_equal(co_sched_destroy(&s), 0);

	/* stopped while a runs: a(gate) -> b -> c, d alone. b's submit comes
	 * after the stop: refused; c skipped; a and d finish normally. */
	sched_start(&s);
	assert_int_equal(co_event_init(&gate, 0), 0);
	assert_int_equal(co_graph_init(&g), 0);
	for (int i = 0; i < N; i++) {
		job_init(&j[i], i, 0);
		assert_int_equal(co_graph_add(&g, &n[i], &j[i].co), 0);
	}
	j[A].gate = &gate;
	j[A].gate_res = 1;
	assert_int_equal(co_graph_precede(&n[A], &n[B]), 0);
	assert_int_equal(co_graph_precede(&n[B], &n[C]), 0);
	assert_int_equal(co_graph_spawn(&g, &s), 0);
	WAIT_UNTIL(atomic_load(&j[A].runs) == 1); /* accepted and started */
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	assert_int_equal(co_event_set(&gate), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_graph_done(&g), 1);
	assert_int_equal(atomic_load(&g.error), -ESHUTDOWN);
	assert_int_equal(atomic_load(&g.finished), N);
	assert_int_equal(atomic_load(&n[A].state), CO_NODE_DONE);
	assert_int_equal(co_status(&j[A].co), 0);
	assert_int_equal(j[A].gate_res, 0); /* a drain: its wait was not cancelled */
	assert_int_equal(atomic_load(&n[D].state), CO_NODE_DONE);
	assert_int_equal(atomic_load(&j[D].runs), 1);
	assert_int_equal(atomic_load(&n[B].state), CO_NODE_SKIPPED);
	assert_int_equal(atomic_load(&n[C].state), CO_NODE_SKIPPED);
	assert_int_equal(atomic_load(&j[B].runs), 0);
	assert_int_equal(atomic_load(&j[C].runs), 0);
	assert_int_equal(co_graph_destroy(&g), 0);
	assert_int_equal(co_event_destroy(&gate), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/*
 * graph.h, co_graph_spawn: a scheduler destroyed (or never set up) is
 * "-EINVAL with nothing started", as co_sched_spawn answers for one. The
 * graph is left not spawned (co_graph_done: -EINVAL), its frames fresh:
 * each still spawns and runs once on a live scheduler. co_graph_run says
 * the same.
 */
static void test_dead_scheduler_refused(void **state)
{
	co_sched s, zero;
	co_graph g;
	co_graph_node n[2];
	struct job j[2];
	(void)state;

	memset(&zero, 0, sizeof zero); /* never set up */
	sched_start(&s);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_graph_init(&g), 0);
	for (int i = 0; i < 2; i++) {
		job_init(&j[i], i, 0);
		assert_int_equal(co_graph_add(&g, &n[i], &j[i].co), 0);
	}
	assert_int_equal(co_graph_precede(&n[0], &n[1]), 0);
	assert_int_equal(co_graph_spawn(&g, &s), -EINVAL);
	assert_int_equal(co_graph_spawn_kind(&g, &s, 0), -EINVAL);
	assert_int_equal(co_graph_run(&g, &s), -EINVAL);
	assert_int_equal(co_graph_spawn(&g, &zero), -EINVAL);
	assert_int_equal(co_graph_run(&g, &zero), -EINVAL);
	assert_int_equal(co_graph_done(&g), -EINVAL); /* never spawned */
	assert_int_equal(atomic_load(&g.error), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(atomic_load(&n[i].state), CO_NODE_IDLE);
		assert_null(j[i].co.on_done);
	}
	assert_int_equal(co_graph_destroy(&g), 0);

	/* the frames are fresh: a live scheduler runs each once */
	sched_start(&s);
	for (int i = 0; i < 2; i++)
		assert_int_equal(co_sched_spawn(&s, &j[i].co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(atomic_load(&j[i].runs), 1);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/*
 * graph.h, co_graph_spawn: a node's kind out of range is "-EINVAL with
 * nothing started". Beyond the run counts test_kind_errors looks at, the
 * frames must be left as they were: fresh (no spawn mark, no on_done or
 * user of the graph's), so each can still be spawned, here straight on the
 * scheduler, and runs once. The bad node comes last, after two valid
 * roots, so a check made while marking or submitting would be caught.
 */
static void test_bad_node_kind_leaves_frames_spawnable(void **state)
{
	static const co_sched_group two[2] = { { .contexts = 1 }, { .contexts = 1 } };
	static const unsigned kind[3] = { 1, 0, 0 }; /* where each runs after */
	co_sched s;
	co_sched_opts o = { .groups = two, .ngroups = 2 };
	co_graph g;
	co_graph_node n[3];
	struct job j[3];
	int mine;
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	assert_int_equal(co_graph_init(&g), 0);
	for (int i = 0; i < 3; i++) {
		job_init(&j[i], i, 0);
		j[i].co.user = &mine;
	}
	assert_int_equal(co_graph_add_kind(&g, &n[0], &j[0].co, 1), 0);
	assert_int_equal(co_graph_add(&g, &n[1], &j[1].co), 0);
	assert_int_equal(co_graph_add_kind(&g, &n[2], &j[2].co, 2), 0); /* no kind 2 */
	assert_int_equal(co_graph_precede(&n[1], &n[2]), 0);
	assert_int_equal(co_graph_spawn(&g, &s), -EINVAL);
	assert_int_equal(co_graph_run_kind(&g, &s, 1), -EINVAL);
	assert_int_equal(co_graph_done(&g), -EINVAL); /* never spawned */
	assert_int_equal(co_graph_destroy(&g), 0);
	for (int i = 0; i < 3; i++) {
		assert_null(j[i].co.on_done);
		assert_ptr_equal(j[i].co.user, &mine);
		assert_int_equal(co_sched_spawn_kind(&s, kind[i], &j[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(atomic_load(&j[i].runs), 1);
		assert_int_equal(j[i].kind, kind[i]);
		assert_int_equal(co_status(&j[i].co), 0);
	}
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- awaiting and polling: misuse, before and after the run, by hand -------------------- */

static void test_wait_errors(void **state)
{
	co_sched s;
	co_graph g;
	co_graph_node n[2];
	struct job j[2];
	struct gwait x;
	co_event gate;
	(void)state;
	sched_start(&s);
	assert_int_equal(co_event_init(&gate, 0), 0);
	assert_int_equal(co_graph_done(NULL), -EINVAL);

	/* a NULL graph, a NULL waiter: -EINVAL at once (frames resumed by
	 * hand: one resume finishes them, nothing parked) */
	gwait_init(&x, NULL, 0);
	assert_int_equal(co_resume(&x.co), CO_DONE);
	assert_int_equal(x.res, -EINVAL);
	assert_int_equal(co_graph_init(&g), 0);
	gwait_init(&x, &g, 0);
	x.null_w = 1;
	assert_int_equal(co_resume(&x.co), CO_DONE);
	assert_int_equal(x.res, -EINVAL);

	/* never spawned: wait and poll say -EINVAL, also an empty graph */
	assert_int_equal(co_graph_done(&g), -EINVAL);
	gwait_init(&x, &g, 0);
	assert_int_equal(co_resume(&x.co), CO_DONE);
	assert_int_equal(x.res, -EINVAL);
	for (int i = 0; i < 2; i++) {
		job_init(&j[i], i, i == 1 ? -EIO : 0);
		assert_int_equal(co_graph_add(&g, &n[i], &j[i].co), 0);
	}
	j[0].gate = &gate;
	assert_int_equal(co_graph_precede(&n[0], &n[1]), 0);
	gwait_init(&x, &g, 0);
	assert_int_equal(co_resume(&x.co), CO_DONE);
	assert_int_equal(x.res, -EINVAL);
	assert_int_equal(co_graph_done(&g), -EINVAL);

	/* running: polled 0; a time limit on a frame no engine runs: -ENXIO
	 * (nothing parked) */
	assert_int_equal(co_graph_spawn(&g, &s), 0);
	assert_int_equal(co_graph_done(&g), 0);
	gwait_init(&x, &g, 1000000000ull);
	assert_int_equal(co_resume(&x.co), CO_DONE);
	assert_int_equal(x.res, -ENXIO);
	assert_int_equal(co_event_set(&gate), 0);
	assert_int_equal(co_sched_run(&s), 0);

	/* over: polled 1; a wait completes at once with the graph's error,
	 * twice with one waiter, and with a time limit (not reached) */
	assert_int_equal(co_graph_done(&g), 1);
	gwait_init(&x, &g, 0);
	x.look = &j[1];
	assert_int_equal(co_resume(&x.co), CO_DONE);
	assert_int_equal(x.res, -EIO);
	assert_int_equal(x.seen, 1 + 0);
	co_init(&x.co, gwait_fn);
	x.limit = 0;
	assert_int_equal(co_resume(&x.co), CO_DONE);
	assert_int_equal(x.res, -EIO);
	assert_int_equal(co_graph_done(&g), 1); /* twice */

	/* destroyed: as never spawned */
	assert_int_equal(co_graph_destroy(&g), 0);
	assert_int_equal(co_graph_done(&g), -EINVAL);
	gwait_init(&x, &g, 0);
	assert_int_equal(co_resume(&x.co), CO_DONE);
	assert_int_equal(x.res, -EINVAL);

	/* an empty graph is over as soon as it is spawned */
	assert_int_equal(co_graph_spawn(&g, &s), 0);
	assert_int_equal(co_graph_done(&g), 1);
	gwait_init(&x, &g, 0);
	assert_int_equal(co_resume(&x.co), CO_DONE);
	assert_int_equal(x.res, 0);
	assert_int_equal(co_graph_destroy(&g), 0);
	assert_int_equal(co_event_destroy(&gate), 0);
	assert_int_equal(co_sched_tasks(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- a game's main thread: four nodes on a worker kind, awaited on a manual context ----- */

enum { WORK, LOGIC, WL };

static const co_sched_group work_logic[WL] = {
	[WORK] = { .contexts = 2 },
	[LOGIC] = { .manual = 1 },
};

static void test_manual_context_awaits(void **state)
{
	/* gate -> b, gate -> c, b -> d, c -> d; values: gate 1, b 10 + 1,
	 * c 100 + 1, d 1000 + 11 + 101 */
	co_sched s;
	co_sched_opts o = { .groups = work_logic, .ngroups = WL };
	co_context *logic;
	co_graph g;
	co_graph_node n[4];
	struct job j[4];
	struct gwait x;
	co_event gate;
	static const long base[4] = { 1, 10, 100, 1000 };
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	logic = co_sched_pick(&s, LOGIC);
	assert_non_null(logic);
	assert_int_equal(co_event_init(&gate, 0), 0);
	assert_int_equal(co_graph_init(&g), 0);
	for (int i = 0; i < 4; i++) {
		job_init(&j[i], base[i], 0);
		assert_int_equal(co_graph_add(&g, &n[i], &j[i].co), 0);
	}
	j[0].gate = &gate;
	job_input(&j[1], &j[0]);
	job_input(&j[2], &j[0]);
	job_input(&j[3], &j[1]);
	job_input(&j[3], &j[2]);
	assert_int_equal(co_graph_precede(&n[0], &n[1]), 0);
	assert_int_equal(co_graph_precede(&n[0], &n[2]), 0);
	assert_int_equal(co_graph_precede(&n[1], &n[3]), 0);
	assert_int_equal(co_graph_precede(&n[2], &n[3]), 0);
	assert_int_equal(co_graph_spawn_kind(&g, &s, WORK), 0);

	/* the waiter runs on the manual context: the tick that runs it to
	 * its await parks it (the gate holds the graph) */
	gwait_init(&x, &g, 0);
	x.look = &j[3];
	assert_int_equal(co_sched_spawn_kind(&s, LOGIC, &x.co), 0);
	tick_until(logic, &x.arrived);
	assert_int_equal(co_graph_done(&g), 0);
	assert_int_equal(atomic_load(&x.done), 0);
	assert_int_equal(co_graph_destroy(&g), -EBUSY); /* a frame waits on it */
	assert_int_equal(co_sched_poll(&s), -EAGAIN);

	/* open the gate; the main thread polls the graph as it ticks */
	assert_int_equal(co_event_set(&gate), 0);
	while (co_graph_done(&g) != 1) {
		assert_true(co_context_tick(logic) >= 0);
		sched_yield();
	}
	/* done: every node's plain writes are visible here */
	assert_int_equal(j[3].value, 1000 + 11 + 101);
	assert_int_equal(j[3].sum, 11 + 101);
	tick_until(logic, &x.done);
	assert_int_equal(x.res, 0);
	assert_int_equal(x.kind, LOGIC);
	assert_int_equal(x.seen, 1000 + 11 + 101);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(atomic_load(&j[i].runs), 1);
		assert_int_equal(j[i].kind, WORK);
		assert_int_equal(atomic_load(&n[i].state), CO_NODE_DONE);
	}
	assert_int_equal(j[0].gate_res, 0);
	tick_to_end(&s, logic); /* every accepted task finished */
	assert_int_equal(co_graph_destroy(&g), 0);
	assert_int_equal(co_event_destroy(&gate), 0);
	sched_end(&s);
}

/*
 * graph.h: a node that never starts leaves its frame as the caller set it.
 * a(-EIO) -> b: b is skipped; in a second graph on a stopped scheduler, c
 * is refused. Both frames keep their own on_done and user; after the
 * destroy (error and finished back to 0) and the nodes poisoned and
 * freed, each is spawned on a live scheduler and ends through its own
 * on_done: with the graph's left in it, b's end would write into the
 * freed nodes.
 */
static atomic_int own_done_calls;
static int own_marker;

static void own_done(co_frame *f)
{
	assert_ptr_equal(f->user, &own_marker);
	atomic_fetch_add(&own_done_calls, 1);
}

static void test_skipped_frames_untouched(void **state)
{
	co_sched s;
	co_graph g;
	co_graph_node *n = malloc(3 * sizeof *n);
	struct job j[3];
	(void)state;
	assert_non_null(n);
	atomic_store(&own_done_calls, 0);
	for (int i = 0; i < 3; i++) {
		job_init(&j[i], i, i == 0 ? -EIO : 0);
		j[i].co.on_done = own_done;
		j[i].co.user = &own_marker;
	}
	j[0].co.on_done = NULL;

	/* skipped: a fails, b never starts */
	sched_start(&s);
	assert_int_equal(co_graph_init(&g), 0);
	assert_int_equal(co_graph_add(&g, &n[0], &j[0].co), 0);
	assert_int_equal(co_graph_add(&g, &n[1], &j[1].co), 0);
	assert_int_equal(co_graph_precede(&n[0], &n[1]), 0);
	assert_int_equal(co_graph_run(&g, &s), -EIO);
	assert_int_equal(atomic_load(&n[1].state), CO_NODE_SKIPPED);
	assert_ptr_equal(j[1].co.on_done, own_done);
	assert_ptr_equal(j[1].co.user, &own_marker);
	assert_int_equal(atomic_load(&g.error), -EIO);
	assert_int_equal(atomic_load(&g.finished), 2);
	assert_int_equal(co_graph_destroy(&g), 0);
	assert_int_equal(atomic_load(&g.error), 0); /* as if never spawned */
	assert_int_equal(atomic_load(&g.finished), 0);
	assert_int_equal(co_graph_done(&g), -EINVAL);

	/* refused: c's submit meets a stopped scheduler */
	co_sched stopped;
	sched_start(&stopped);
	assert_int_equal(co_sched_stop(&stopped, CO_STOP_DRAIN), 0);
	assert_int_equal(co_graph_init(&g), 0);
	assert_int_equal(co_graph_add(&g, &n[2], &j[2].co), 0);
	assert_int_equal(co_graph_spawn(&g, &stopped), 0);
	assert_int_equal(atomic_load(&g.error), -ESHUTDOWN);
	assert_int_equal(atomic_load(&n[2].state), CO_NODE_SKIPPED);
	assert_ptr_equal(j[2].co.on_done, own_done);
	assert_ptr_equal(j[2].co.user, &own_marker);
	assert_int_equal(co_sched_run(&stopped), 0);
	assert_int_equal(co_graph_destroy(&g), 0);
	assert_int_equal(co_sched_destroy(&stopped), 0);

	memset(n, 0x5a, 3 * sizeof *n); /* nothing may touch them now */
	free(n);
	assert_int_equal(co_sched_spawn(&s, &j[1].co), 0);
	assert_int_equal(co_sched_spawn(&s, &j[2].co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(atomic_load(&own_done_calls), 2);
	for (int i = 0; i < 3; i++)
		assert_int_equal(atomic_load(&j[i].runs), 1);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/*
 * graph.h, co_graph_run: -EBUSY at once, nothing started, from a thread
 * whose wait would wait for itself: from a task of the scheduler; from
 * the thread that ticks a manual context, whether a node would start on
 * it or not. Without the check before the spawn, the graph would be
 * running when -EBUSY came back (the task would read co_graph_done 0).
 */
struct inner_run {
	co_frame co;
	co_graph *g;
	co_sched *s;
	int res, done_seen;
};

static int inner_run_fn(co_frame *f)
{
	struct inner_run *r = (struct inner_run *)f;
	CO_BEGIN(f);
	r->res = co_graph_run(r->g, r->s);
	r->done_seen = co_graph_done(r->g);
	CO_END(f);
}

static void not_started(co_graph *g, co_graph_node *n, struct job *j, int count)
{
	assert_int_equal(co_graph_done(g), -EINVAL);
	for (int i = 0; i < count; i++) {
		assert_int_equal(atomic_load(&n[i].state), CO_NODE_IDLE);
		assert_int_equal(atomic_load(&j[i].runs), 0);
		assert_null(j[i].co.on_done);
	}
}

static void test_run_refused_on_own_thread(void **state)
{
	co_sched s;
	co_sched_opts o = { .groups = work_logic, .ngroups = WL };
	co_context *logic;
	co_graph g;
	co_graph_node n[2];
	struct job j[2];
	struct inner_run r;
	(void)state;

	/* from a task on the scheduler */
	sched_start(&s);
	assert_int_equal(co_graph_init(&g), 0);
	for (int i = 0; i < 2; i++) {
		job_init(&j[i], i, 0);
		assert_int_equal(co_graph_add(&g, &n[i], &j[i].co), 0);
	}
	assert_int_equal(co_graph_precede(&n[0], &n[1]), 0);
	memset(&r, 0, sizeof r);
	r.g = &g;
	r.s = &s;
	co_init(&r.co, inner_run_fn);
	assert_int_equal(co_sched_spawn(&s, &r.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(r.res, -EBUSY);
	assert_int_equal(r.done_seen, -EINVAL);
	not_started(&g, n, j, 2);
	assert_int_equal(co_graph_run(&g, &s), 0); /* from outside: runs */
	for (int i = 0; i < 2; i++)
		assert_int_equal(atomic_load(&j[i].runs), 1);
	assert_int_equal(co_graph_destroy(&g), 0);
	assert_int_equal(co_sched_destroy(&s), 0);

	/* from the thread that ticks a manual context (idle): the graph's
	 * nodes on it (round 0) or on the workers only (round 1); then the
	 * way that thread runs a graph, spawned and polled as it ticks */
	assert_int_equal(co_sched_init(&s, &o), 0);
	logic = co_sched_pick(&s, LOGIC);
	assert_non_null(logic);
	assert_true(co_context_tick(logic) >= 0); /* this thread is its ticker */
	for (int round = 0; round < 3; round++) {
		assert_int_equal(co_graph_init(&g), 0);
		for (int i = 0; i < 2; i++)
			job_init(&j[i], i, 0);
		assert_int_equal(co_graph_add(&g, &n[0], &j[0].co), 0);
		if (round == 0)
			assert_int_equal(co_graph_add_kind(&g, &n[1], &j[1].co, LOGIC), 0);
		else
			assert_int_equal(co_graph_add(&g, &n[1], &j[1].co), 0);
		assert_int_equal(co_graph_precede(&n[0], &n[1]), 0);
		if (round < 2) {
			assert_int_equal(co_graph_run_kind(&g, &s, WORK), -EBUSY);
			not_started(&g, n, j, 2);
			assert_int_equal(co_sched_tasks(&s), 0);
		} else {
			assert_int_equal(co_graph_spawn_kind(&g, &s, WORK), 0);
			while (co_graph_done(&g) != 1)
				assert_true(co_context_tick(logic) >= 0);
			for (int i = 0; i < 2; i++)
				assert_int_equal(atomic_load(&j[i].runs), 1);
			tick_to_end(&s, logic);
		}
		assert_int_equal(co_graph_destroy(&g), 0);
	}
	sched_end(&s);
}

/* ---- done as soon as the waiters are woken ------------------------------------------------ */

/* The last node's context holds the run between the wake of the waiters
 * and the mark that the run is over (the point). In that window the graph
 * is done: co_graph_done answers 1 to the main thread, which reads the
 * node's plain write (relaxed window flags, so under TSan only the graph's
 * own release orders it), and to the waiter that resumed, right after its
 * co_graph_wait completed. The node's task is still counted there (its
 * on_done, which woke the waiter, has not returned): co_sched_tasks says
 * 2 to the waiter, 1 once the waiter ended, 0 once the hold is released. */
static atomic_int woken_window, woken_release;

static void hold_woken(void *arg)
{
	(void)arg;
	atomic_store_explicit(&woken_window, 1, memory_order_relaxed);
	while (!atomic_load_explicit(&woken_release, memory_order_relaxed))
		sched_yield();
}

static void test_done_once_waiters_woken(void **state)
{
	co_sched s;
	co_sched_opts o = { .groups = work_logic, .ngroups = WL };
	co_context *logic;
	co_graph g;
	co_graph_node n;
	struct job j;
	struct gwait x;
	atomic_int meet = 0;
	(void)state;
	alarm(30);
	assert_int_equal(co_sched_init(&s, &o), 0);
	logic = co_sched_pick(&s, LOGIC);
	assert_non_null(logic);
	assert_int_equal(co_graph_init(&g), 0);
	job_init(&j, 7, 0);
	j.meet = &meet; /* the node runs once the test counted in (relaxed) */
	j.meet_n = 2;
	assert_int_equal(co_graph_add(&g, &n, &j.co), 0);
	assert_int_equal(co_graph_spawn_kind(&g, &s, WORK), 0);
	gwait_init(&x, &g, 0);
	x.ask_done = 1;
	x.done_seen = -1;
	x.tasks_of = &s;
	x.tasks_seen = ULONG_MAX;
	assert_int_equal(co_sched_spawn_kind(&s, LOGIC, &x.co), 0);
	tick_until(logic, &x.arrived); /* parked: the node waits for the test */
	assert_int_equal(co_sched_tasks(&s), 2);
	atomic_store(&woken_window, 0);
	atomic_store(&woken_release, 0);
	co__fault_on_point(CO__POINT_GRAPH_WOKEN, hold_woken, NULL);
	atomic_fetch_add_explicit(&meet, 1, memory_order_relaxed);
	while (!atomic_load_explicit(&woken_window, memory_order_relaxed))
		sched_yield();
	assert_int_equal(co_graph_done(&g), 1); /* woken, not marked over yet */
	assert_int_equal(j.value, 7);           /* ordered by the graph alone */
	tick_until(logic, &x.done);
	assert_int_equal(x.res, 0);
	assert_int_equal(x.done_seen, 1);
	assert_int_equal(x.tasks_seen, 2); /* the node's on_done runs on */
	assert_int_equal(co_sched_tasks(&s), 1); /* the waiter ended in that tick */
	atomic_store_explicit(&woken_release, 1, memory_order_relaxed);
	co__fault_on_point(CO__POINT_GRAPH_WOKEN, NULL, NULL);
	WAIT_UNTIL(co_sched_tasks(&s) == 0); /* the node's on_done returned */
	tick_to_end(&s, logic);
	assert_int_equal(co_graph_done(&g), 1);
	assert_int_equal(co_graph_destroy(&g), 0);
	sched_end(&s);
	alarm(0);
}

/* ---- the time limit and cancel of a graph wait ------------------------------------------- */

static void test_wait_limit_and_cancel(void **state)
{
	/* gate -> bad (fails with -EIO) */
	co_sched s;
	co_sched_opts o = { .groups = work_logic, .ngroups = WL };
	co_context *logic;
	co_graph g;
	co_graph_node n[2];
	struct job j[2];
	struct gwait timed, cancelled, never, mcancelled, late;
	co_event gate;
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	logic = co_sched_pick(&s, LOGIC);
	assert_int_equal(co_event_init(&gate, 0), 0);
	assert_int_equal(co_graph_init(&g), 0);
	job_init(&j[0], 1, 0);
	job_init(&j[1], 2, -EIO);
	j[0].gate = &gate;
	for (int i = 0; i < 2; i++)
		assert_int_equal(co_graph_add_kind(&g, &n[i], &j[i].co, WORK), 0);
	assert_int_equal(co_graph_precede(&n[0], &n[1]), 0);
	assert_int_equal(co_graph_spawn(&g, &s), 0);

	gwait_init(&timed, &g, 1000000);        /* 1 ms: runs out (the gate holds) */
	gwait_init(&cancelled, &g, 0);
	gwait_init(&never, &g, UINT64_MAX);     /* a limit that never runs out */
	gwait_init(&mcancelled, &g, 0);
	assert_int_equal(co_sched_spawn_kind(&s, WORK, &timed.co), 0);
	assert_int_equal(co_sched_spawn_kind(&s, WORK, &cancelled.co), 0);
	assert_int_equal(co_sched_spawn_kind(&s, LOGIC, &never.co), 0);
	assert_int_equal(co_sched_spawn_kind(&s, LOGIC, &mcancelled.co), 0);
	tick_until(logic, &never.arrived);
	tick_until(logic, &mcancelled.arrived);

	/* the limit ran out while the graph could not end */
	WAIT_UNTIL(atomic_load(&timed.done));
	assert_int_equal(timed.res, -ETIME);
	assert_int_equal(co_graph_done(&g), 0);

	/* cancelled from this thread (another context's frame), and on the
	 * manual context by its ticker */
	WAIT_UNTIL(atomic_load(&cancelled.arrived));
	assert_int_equal(co_cancel(&cancelled.co), 0);
	WAIT_UNTIL(atomic_load(&cancelled.done));
	assert_int_equal(cancelled.res, -ECANCELED);
	assert_int_equal(co_cancel(&mcancelled.co), 0);
	tick_until(logic, &mcancelled.done);
	assert_int_equal(mcancelled.res, -ECANCELED);
	assert_int_equal(co_graph_done(&g), 0); /* the graph runs on */
	assert_int_equal(co_graph_destroy(&g), -EBUSY);

	/* the end: the timed waiter that stayed gets the graph's error */
	assert_int_equal(co_event_set(&gate), 0);
	tick_until(logic, &never.done);
	assert_int_equal(never.res, -EIO);
	assert_int_equal(co_graph_done(&g), 1);

	/* a wait after the end: its result at once, on a worker */
	gwait_init(&late, &g, 0);
	assert_int_equal(co_sched_spawn_kind(&s, WORK, &late.co), 0);
	tick_to_end(&s, logic);
	assert_int_equal(late.res, -EIO);
	assert_int_equal(late.tries, 1);
	assert_int_equal(atomic_load(&j[1].runs), 1);
	assert_int_equal(atomic_load(&g.error), -EIO);
	assert_int_equal(co_graph_destroy(&g), 0);
	assert_int_equal(co_event_destroy(&gate), 0);
	sched_end(&s);
}

/* ---- many waiters, on contexts of three kinds, one a manual one -------------------------- */

#define PER_KIND 16

static void test_many_waiters(void **state)
{
	static const co_sched_group groups[3] = {
		{ .contexts = 2 }, { .contexts = 2, .steal = 1 }, { .manual = 1 },
	};
	co_sched s;
	co_sched_opts o = { .groups = groups, .ngroups = 3 };
	co_context *logic;
	co_graph g;
	co_graph_node n[3];
	struct job j[3];
	struct gwait *x = calloc(3 * PER_KIND, sizeof *x);
	co_event gate;
	int arrived;
	(void)state;
	assert_non_null(x);
	assert_int_equal(co_sched_init(&s, &o), 0);
	logic = co_sched_pick(&s, 2);
	assert_int_equal(co_event_init(&gate, 0), 0);
	assert_int_equal(co_graph_init(&g), 0);
	/* gate(0) -> a(1, -EIO), gate -> b(1) */
	for (int i = 0; i < 3; i++) {
		job_init(&j[i], i, i == 1 ? -EIO : 0);
		assert_int_equal(co_graph_add_kind(&g, &n[i], &j[i].co, i ? 1 : 0), 0);
	}
	j[0].gate = &gate;
	assert_int_equal(co_graph_precede(&n[0], &n[1]), 0);
	assert_int_equal(co_graph_precede(&n[0], &n[2]), 0);
	assert_int_equal(co_graph_spawn(&g, &s), 0);
	for (int i = 0; i < 3 * PER_KIND; i++) {
		gwait_init(&x[i], &g, 0);
		x[i].look = &j[2];
		assert_int_equal(co_sched_spawn_kind(&s, (unsigned)(i % 3), &x[i].co), 0);
	}
	do { /* all at their await (most parked: the gate holds the graph) */
		assert_true(co_context_tick(logic) >= 0);
		sched_yield();
		arrived = 0;
		for (int i = 0; i < 3 * PER_KIND; i++)
			arrived += atomic_load(&x[i].arrived);
	} while (arrived < 3 * PER_KIND);
	assert_int_equal(co_graph_done(&g), 0);
	assert_int_equal(co_event_set(&gate), 0);
	for (int i = 0; i < 3 * PER_KIND; i++)
		tick_until(logic, &x[i].done);
	for (int i = 0; i < 3 * PER_KIND; i++) {
		assert_int_equal(x[i].res, -EIO); /* all woken, with the error */
		assert_int_equal(x[i].kind, (unsigned)(i % 3));
		assert_int_equal(x[i].seen, 2 + 0);
		assert_int_equal(x[i].tries, 1);
	}
	tick_to_end(&s, logic);
	for (int i = 0; i < 3; i++)
		assert_int_equal(atomic_load(&j[i].runs), 1);
	assert_int_equal(co_graph_destroy(&g), 0);
	assert_int_equal(co_event_destroy(&gate), 0);
	sched_end(&s);
	free(x);
}

/* ---- values passed between nodes: plain writes, read by a successor elsewhere -------------- */

#define VALUE_ROUNDS 100
#define VALUE_HOLD 65536

static const co_sched_group one_each[3] = {
	{ .contexts = 1 }, { .contexts = 1 }, { .contexts = 1 },
};

static void test_values_between_nodes(void **state)
{
	/*
	 * p (kind 0) and q (kind 1) write plain values; r (kind 2) sums them
	 * and then sets an event; d waits for p and for h (which waits on
	 * that event). Without the graph's ordering nothing orders p's write
	 * before r's read, not even the scheduler's own atomics, which would
	 * hide a missing order from TSan:
	 *  - p and q meet (relaxed) before p writes: q's context was running
	 *    before the write, so nothing it did to start q carries it;
	 *  - q ends once p's node is DONE (a relaxed look), so q's count is
	 *    (in practice) the last of r's two: q's context submits r;
	 *  - p's successor list goes on after r with VALUE_HOLD edges to d,
	 *    which cannot start before h: p's context is still counting them
	 *    when q submits r, so p's task has not ended yet (its end would
	 *    reach q through the scheduler's count of tasks).
	 * Under TSan, with the predecessor count decremented relaxed, r's
	 * read of p's value is reported as a race.
	 */
	enum { P, Q, R, H, D, N };
	static const unsigned kind[N] = { 0, 1, 2, 1, 0 };
	co_sched s;
	co_sched_opts o = { .groups = one_each, .ngroups = 3 };
	co_graph g;
	co_graph_node n[N];
	struct job j[N];
	co_event ev;
	atomic_int meet;
	(void)state;
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int round = 0; round < VALUE_ROUNDS; round++) {
		atomic_init(&meet, 0);
		assert_int_equal(co_event_init(&ev, 0), 0);
		assert_int_equal(co_graph_init(&g), 0);
		for (int i = 0; i < N; i++) {
			job_init(&j[i], (long)round * 1000 + i, 0);
			assert_int_equal(co_graph_add_kind(&g, &n[i], &j[i].co, kind[i]), 0);
		}
		j[P].meet = j[Q].meet = &meet;
		j[P].meet_n = j[Q].meet_n = 2;
		j[Q].after = &n[P];
		j[R].signal = &ev;
		j[H].gate = &ev;
		job_input(&j[R], &j[P]);
		job_input(&j[R], &j[Q]);
		assert_int_equal(co_graph_precede(&n[P], &n[R]), 0);
		assert_int_equal(co_graph_precede(&n[Q], &n[R]), 0);
		for (int i = 0; i < VALUE_HOLD; i++)
			assert_int_equal(co_graph_precede(&n[P], &n[D]), 0);
		assert_int_equal(co_graph_precede(&n[H], &n[D]), 0);
		assert_int_equal(co_graph_run(&g, &s), 0);
		assert_int_equal(j[R].sum, j[P].base + j[Q].base);
		for (int i = 0; i < N; i++)
			assert_int_equal(atomic_load(&j[i].runs), 1);
		assert_int_equal(co_graph_destroy(&g), 0);
		assert_int_equal(co_event_destroy(&ev), 0);
	}
	assert_int_equal(co_sched_tasks(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- destroy right after the end, on another thread; then the memory is gone -------------- */

#define DESTROY_ROUNDS 200

/* A graph in memory of its own, poisoned and freed right after destroy:
 * x (kind 0) and y (kind 1) meet and end together; z (kind 1) after both
 * sums their values. */
struct owned {
	co_graph g;
	co_graph_node n[3];
	struct job j[3];
	atomic_int meet;
};

static struct owned *owned_new(void)
{
	struct owned *r = malloc(sizeof *r);
	static const unsigned kind[3] = { 0, 1, 1 };

	assert_non_null(r);
	atomic_init(&r->meet, 0);
	assert_int_equal(co_graph_init(&r->g), 0);
	for (int i = 0; i < 3; i++) {
		job_init(&r->j[i], 10 * (i + 1), 0);
		assert_int_equal(co_graph_add_kind(&r->g, &r->n[i], &r->j[i].co, kind[i]), 0);
	}
	r->j[0].meet = r->j[1].meet = &r->meet;
	r->j[0].meet_n = r->j[1].meet_n = 2;
	job_input(&r->j[2], &r->j[0]);
	job_input(&r->j[2], &r->j[1]);
	assert_int_equal(co_graph_precede(&r->n[0], &r->n[2]), 0);
	assert_int_equal(co_graph_precede(&r->n[1], &r->n[2]), 0);
	return r;
}

/* Until the waiter is done; the test thread touches nothing of the
 * scheduler meanwhile (so under TSan nothing it does after the spawn
 * reaches the contexts). */
static void until_done(struct gwait *x)
{
	while (!atomic_load(&x->done))
		sched_yield();
}

static void test_destroy_right_after_end(void **state)
{
	co_sched s;
	co_sched_opts o = { .groups = one_each, .ngroups = 3 };
	struct gwait *x = calloc(DESTROY_ROUNDS, sizeof *x);
	(void)state;
	assert_non_null(x);
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int round = 0; round < DESTROY_ROUNDS; round++) {
		struct owned *r = owned_new();

		gwait_init(&x[round], &r->g, 0);
		if (round % 2) {
			/* a waiter destroys it as soon as its wait returns */
			assert_int_equal(co_graph_spawn(&r->g, &s), 0);
			x[round].destroy = 1;
			x[round].own = r;
			x[round].own_size = sizeof *r;
			x[round].look = &r->j[2];
			assert_int_equal(co_sched_spawn_kind(&s, 2, &x[round].co), 0);
			until_done(&x[round]);
			assert_int_equal(x[round].res, 0);
			assert_int_equal(x[round].dres, 0);
			assert_int_equal(x[round].seen, 30 + 10 + 20);
			continue;
		}
		/* this thread polls, reads, destroys; a waiter is woken at the
		 * end meanwhile. x and y wait for this thread, which counts in
		 * (relaxed) once the waiter is parked: a waiter that came after
		 * the end would complete at once, still reading the graph
		 * (its lock, phase, error) while this thread frees it */
		r->j[0].meet_n = r->j[1].meet_n = 3;
		assert_int_equal(co_graph_spawn(&r->g, &s), 0);
		assert_int_equal(co_sched_spawn_kind(&s, 2, &x[round].co), 0);
		while (atomic_load_explicit(&x[round].w.state, memory_order_relaxed) != CO__W_WAITING)
			sched_yield();
		atomic_fetch_add_explicit(&r->meet, 1, memory_order_relaxed);
		while (co_graph_done(&r->g) != 1)
			; /* no yield: a poll as often as it can */
		assert_int_equal(r->j[2].value, 30 + 10 + 20);
		assert_int_equal(co_graph_destroy(&r->g), 0);
		memset(r, 0x5a, sizeof *r); /* the waiter's wait is over: r is ours */
		free(r);
		until_done(&x[round]);
		assert_int_equal(x[round].res, 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_tasks(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	free(x);
}

/* A waiter that was waiting before the graph was spawned (it retries while
 * the graph is not spawned) destroys and frees it as soon as it is over:
 * the spawn must not touch the graph after its last submit. */
#define SPAWN_ROUNDS 100

static void test_destroy_while_spawn_returns(void **state)
{
	co_sched s;
	co_sched_opts o = { .groups = one_each, .ngroups = 3 };
	struct gwait *x = calloc(SPAWN_ROUNDS, sizeof *x);
	(void)state;
	assert_non_null(x);
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int round = 0; round < SPAWN_ROUNDS; round++) {
		/* roots x and y, then z: the node list goes on after the
		 * last root */
		struct owned *r = owned_new();

		gwait_init(&x[round], &r->g, 0);
		x[round].retry = 1;
		x[round].destroy = 1;
		x[round].own = r;
		x[round].own_size = sizeof *r;
		assert_int_equal(co_sched_spawn_kind(&s, 2, &x[round].co), 0);
		assert_int_equal(co_graph_spawn(&r->g, &s), 0);
		/* r may be gone already */
		until_done(&x[round]);
		assert_int_equal(x[round].res, 0);
		assert_int_equal(x[round].dres, 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_tasks(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	free(x);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_dags),
		cmocka_unit_test(test_failure_skips_dependents),
		cmocka_unit_test(test_cycle_and_errors),
		cmocka_unit_test(test_long_chain_skipped),
		cmocka_unit_test(test_kinds_respected),
		cmocka_unit_test(test_kind_errors),
		cmocka_unit_test(test_refused_submit_fails_node),
		cmocka_unit_test(test_dead_scheduler_refused),
		cmocka_unit_test(test_bad_node_kind_leaves_frames_spawnable),
		cmocka_unit_test(test_skipped_frames_untouched),
		cmocka_unit_test(test_run_refused_on_own_thread),
		cmocka_unit_test(test_wait_errors),
		cmocka_unit_test(test_manual_context_awaits),
		cmocka_unit_test(test_done_once_waiters_woken),
		cmocka_unit_test(test_wait_limit_and_cancel),
		cmocka_unit_test(test_many_waiters),
		cmocka_unit_test(test_values_between_nodes),
		cmocka_unit_test(test_destroy_right_after_end),
		cmocka_unit_test(test_destroy_while_spawn_returns),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
