/* SPDX-License-Identifier: MIT */
/* Tests of the task graph (lib/graph.c): order on random DAGs across two
 * contexts, the failure rule, cycles, errors, a long chain. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stdatomic.h>
#include <cmocka.h>

#include <coring/graph.h>
#include "helpers.h"

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

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_dags),
		cmocka_unit_test(test_failure_skips_dependents),
		cmocka_unit_test(test_cycle_and_errors),
		cmocka_unit_test(test_long_chain_skipped),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
