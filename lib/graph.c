/* SPDX-License-Identifier: MIT */
/*
 * The task graph: counts of unfinished predecessors, decremented by the
 * context that finishes a node; the one that reaches zero submits the
 * successor (or skips it, if a predecessor failed).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <coring/graph.h>
#include "fault.h"

int co_graph_init(co_graph *g)
{
	if (g == NULL)
		return -EINVAL;
	memset(g, 0, sizeof *g);
	return 0;
}

/* A graph spawned on a scheduler whose nodes have not all finished. */
static int running(co_graph *g)
{
	return g->sched && atomic_load_explicit(&g->finished, memory_order_acquire) < g->n;
}

int co_graph_destroy(co_graph *g)
{
	if (g == NULL)
		return -EINVAL;
	if (running(g))
		return -EBUSY; /* its contexts read the edge lists */
	for (co_graph_node *n = g->head, *next; n; n = next) {
		next = n->next;
		free(n->succ);
		n->succ = NULL;
		n->nsucc = n->cap = 0;
		n->graph = NULL;
		n->next = NULL;
	}
	g->head = g->tail = NULL;
	g->n = 0;
	return 0;
}

int co_graph_add(co_graph *g, co_graph_node *n, co_frame *f)
{
	if (g == NULL || n == NULL || f == NULL)
		return -EINVAL;
	if (n->graph == g)
		for (co_graph_node *m = g->head; m; m = m->next)
			if (m == n)
				return -EEXIST; /* added twice */
	memset(n, 0, sizeof *n);
	n->frame = f;
	n->graph = g;
	if (g->tail)
		g->tail->next = n;
	else
		g->head = n;
	g->tail = n;
	g->n++;
	return 0;
}

int co_graph_precede(co_graph_node *a, co_graph_node *b)
{
	if (a == NULL || b == NULL || a == b || a->graph == NULL || a->graph != b->graph)
		return -EINVAL;
	if (a->nsucc == a->cap) {
		unsigned cap = a->cap ? 2 * a->cap : 4;
		co_graph_node **s = co__realloc(a->succ, cap * sizeof *s);

		if (s == NULL)
			return -ENOMEM;
		a->succ = s;
		a->cap = cap;
	}
	a->succ[a->nsucc++] = b;
	b->npred++;
	return 0;
}

int co_graph_succeed(co_graph_node *a, co_graph_node *b)
{
	return co_graph_precede(b, a);
}

static void record(co_graph *g, int err)
{
	int zero = 0;

	atomic_compare_exchange_strong_explicit(&g->error, &zero, err, memory_order_relaxed,
						memory_order_relaxed);
}

static void node_done(co_frame *f);

/* Hand n to the scheduler. 0, or the submit's error (n did not start). */
static int start(co_graph_node *n)
{
	int err;

	atomic_store_explicit(&n->state, CO_NODE_SUBMITTED, memory_order_relaxed);
	err = co_sched_spawn(n->graph->sched, n->frame);
	if (err < 0) {
		atomic_store_explicit(&n->state, CO_NODE_SKIPPED, memory_order_relaxed);
		record(n->graph, err);
	}
	return err;
}

/*
 * n is over (finished, or skipped, with failed set if its successors must
 * not run): release its successors. Skips propagate through a work list,
 * not recursion, so a long chain cannot overflow the stack.
 */
static void release(co_graph_node *n, int failed)
{
	co_graph *g = n->graph;
	co_graph_node *todo = NULL;

	for (;;) {
		for (unsigned i = 0; i < n->nsucc; i++) {
			co_graph_node *s = n->succ[i];

			if (failed) /* published by the fetch_sub's release */
				atomic_store_explicit(&s->failed, 1, memory_order_relaxed);
			/* acq_rel: the decrements form a release sequence, so
			 * the last one sees every predecessor's failed flag */
			if (atomic_fetch_sub_explicit(&s->waiting, 1, memory_order_acq_rel) != 1)
				continue;
			if (atomic_load_explicit(&s->failed, memory_order_relaxed)) {
				atomic_store_explicit(&s->state, CO_NODE_SKIPPED, memory_order_relaxed);
			} else if (start(s) == 0) {
				continue;
			}
			s->work = todo; /* skipped: its successors are skipped too */
			todo = s;
		}
		atomic_fetch_add_explicit(&g->finished, 1, memory_order_relaxed);
		if (todo == NULL)
			return;
		n = todo;
		todo = n->work;
		failed = 1;
	}
}

/* A node's on_done, on the context that finished it. Successors are
 * submitted before this task's count drops, so the run cannot end in
 * between. */
static void node_done(co_frame *f)
{
	co_graph_node *n = f->user;
	int st = co_status(f);

	atomic_store_explicit(&n->state, CO_NODE_DONE, memory_order_relaxed);
	if (st < 0)
		record(n->graph, st);
	release(n, st < 0);
}

static int frame_fresh(const co_frame *f)
{
	return f->fn && f->label == 0 && f->parent == NULL &&
	       !(f->state & (CO__ST_SPAWNED | CO__ST_DONE));
}

/* Kahn's algorithm on the predecessor counts: every node is reached iff
 * there is no cycle. Uses waiting and work as scratch. */
static int acyclic(co_graph *g)
{
	co_graph_node *stack = NULL, *n;
	unsigned seen = 0;

	for (n = g->head; n; n = n->next) {
		atomic_store_explicit(&n->waiting, n->npred, memory_order_relaxed);
		if (n->npred == 0) {
			n->work = stack;
			stack = n;
		}
	}
	while (stack) {
		n = stack;
		stack = n->work;
		seen++;
		for (unsigned i = 0; i < n->nsucc; i++) {
			co_graph_node *s = n->succ[i];
			unsigned left = atomic_load_explicit(&s->waiting, memory_order_relaxed) - 1;

			atomic_store_explicit(&s->waiting, left, memory_order_relaxed);
			if (left == 0) {
				s->work = stack;
				stack = s;
			}
		}
	}
	return seen == g->n;
}

int co_graph_spawn(co_graph *g, co_sched *s)
{
	co_graph_node *n;

	if (g == NULL || s == NULL)
		return -EINVAL;
	if (running(g))
		return -EINVAL; /* still running */
	/* Each frame fresh, and in one node only: mark them as we go (they
	 * are nobody else's yet), then take the marks off. */
	for (n = g->head; n; n = n->next) {
		if (!frame_fresh(n->frame))
			break;
		n->frame->state |= CO__ST_SPAWNED;
	}
	for (co_graph_node *m = g->head; m != n; m = m->next)
		m->frame->state &= ~(unsigned)CO__ST_SPAWNED;
	if (n != NULL)
		return -EINVAL;
	if (!acyclic(g))
		return -ELOOP;
	g->sched = s;
	atomic_store_explicit(&g->error, 0, memory_order_relaxed);
	atomic_store_explicit(&g->finished, 0, memory_order_relaxed);
	for (n = g->head; n; n = n->next) {
		atomic_store_explicit(&n->waiting, n->npred, memory_order_relaxed);
		atomic_store_explicit(&n->failed, 0, memory_order_relaxed);
		atomic_store_explicit(&n->state, CO_NODE_IDLE, memory_order_relaxed);
		n->frame->on_done = node_done;
		n->frame->user = n;
	}
	/* Everything above is published to the contexts by the submits. */
	for (n = g->head; n; n = n->next)
		if (n->npred == 0 && start(n) < 0)
			release(n, 1);
	return 0;
}

int co_graph_run(co_graph *g, co_sched *s)
{
	int err = co_graph_spawn(g, s);

	if (err < 0)
		return err;
	err = co_sched_run(s);
	if (err < 0)
		return err;
	return atomic_load_explicit(&g->error, memory_order_relaxed);
}
