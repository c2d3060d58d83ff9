/* SPDX-License-Identifier: MIT */
/*
 * The task graph: counts of unfinished predecessors, decremented by the
 * context that finishes a node; the one that reaches zero submits the
 * successor (or skips it, if a predecessor failed). The context that
 * counts the last node over wakes the frames waiting on the graph (the
 * waiter core, lib/waiter/waiter_internal.h), then marks the run over.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <coring/graph.h>
#include "common/fault.h"
#include "scheduler/scheduler_internal.h"
#include "waiter/waiter_internal.h"

int co_graph_init(co_graph *g)
{
	if (g == NULL)
		return -EINVAL;
	memset(g, 0, sizeof *g);
	return 0;
}

/*
 * co_graph.phase. RUNNING -> WAKING is stored under the graph's lock, so a
 * frame that comes to wait either parks before it (and is woken) or sees
 * it (and completes at once, its result read under the lock). Both WAKING
 * and OVER are stored with release by the context that counted the last
 * node, which acquired every count first: whoever reads either with
 * acquire sees every node's writes (co_graph_done answers 1 from WAKING
 * on, so a waiter just woken reads 1). OVER comes after the waiters are
 * woken, and nothing in coring touches the graph after that store.
 */
enum {
	GRAPH_IDLE = 0,    /* never spawned, or destroyed since */
	GRAPH_RUNNING = 1, /* spawned: nodes not all over */
	GRAPH_WAKING = 2,  /* every node over; its waiters being woken */
	GRAPH_OVER = 3,    /* done: nothing touches it any more */
};

/* The phase once no wake of waiters is in progress: a wake is short and
 * never waits for anything the caller could hold (it pushes frames and
 * waits only for an engine's look at a waiter under the graph's lock), so
 * the caller waits for it. Acquire: after OVER, every node's writes and
 * the wake's are visible. */
static int settled(const co_graph *g)
{
	int phase;

	while ((phase = atomic_load_explicit(&g->phase, memory_order_acquire)) == GRAPH_WAKING)
		co__cpu_relax();
	return phase;
}

/* A graph spawned whose run is not over: its contexts still read the edge
 * lists (and will wake its waiters). */
static int running(const co_graph *g)
{
	return settled(g) == GRAPH_RUNNING;
}

int co_graph_destroy(co_graph *g)
{
	if (g == NULL)
		return -EINVAL;
	if (running(g))
		return -EBUSY; /* its contexts read the edge lists; frames wait */
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
	g->sched = NULL;
	atomic_store_explicit(&g->error, 0, memory_order_relaxed);
	atomic_store_explicit(&g->finished, 0, memory_order_relaxed);
	atomic_store_explicit(&g->phase, GRAPH_IDLE, memory_order_relaxed);
	return 0;
}

int co_graph_add(co_graph *g, co_graph_node *n, co_frame *f)
{
	if (g == NULL || n == NULL || f == NULL)
		return -EINVAL;
	if (running(g))
		return -EBUSY; /* g->n and the node list are read by the run */
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

int co_graph_add_kind(co_graph *g, co_graph_node *n, co_frame *f, unsigned kind)
{
	int err = co_graph_add(g, n, f);

	if (err == 0) {
		n->kind = kind; /* checked against the scheduler at spawn */
		n->own_kind = 1;
	}
	return err;
}

int co_graph_precede(co_graph_node *a, co_graph_node *b)
{
	if (a == NULL || b == NULL || a == b || a->graph == NULL || a->graph != b->graph)
		return -EINVAL;
	if (running(a->graph))
		return -EBUSY; /* its contexts read the edge lists */
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

/* Hand n to the scheduler, on its own kind or the run's default; its
 * frame's on_done and user become the graph's here, not before, so a
 * node that never starts leaves its frame as the caller set it (it may be
 * spawned elsewhere). 0, or the submit's error (n did not start, its
 * frame's fields given back). Once the submit succeeded n may run and
 * finish at once: nothing of n or its graph is read after it. */
static int start(co_graph_node *n)
{
	co_graph *g = n->graph;
	co_frame *f = n->frame;
	unsigned kind = n->own_kind ? n->kind : g->kind;
	void (*on_done)(co_frame *) = f->on_done;
	void *user = f->user;
	int err;

	atomic_store_explicit(&n->state, CO_NODE_SUBMITTED, memory_order_relaxed);
	f->on_done = node_done;
	f->user = n;
	err = co_sched_spawn_kind(g->sched, kind, f);
	if (err < 0) { /* refused: the frame is not the scheduler's */
		f->on_done = on_done;
		f->user = user;
		atomic_store_explicit(&n->state, CO_NODE_SKIPPED, memory_order_relaxed);
		record(g, err);
	}
	return err;
}

/*
 * Every node is over (the caller counted the last one): wake the frames
 * waiting on g with its result, then mark the run over. The lock orders
 * the end against a frame coming to wait. The waiters are woken before
 * OVER: co__wake_all waits for an engine's look at a waiter under g's
 * lock, so g must live until it returns; a destroy waits for OVER, and
 * nothing touches g after the store.
 */
static void graph_over(co_graph *g)
{
	co__wake_list l = CO__WAKE_LIST_INIT;
	int err = atomic_load_explicit(&g->error, memory_order_relaxed);

	co__spin_lock(&g->lock);
	atomic_store_explicit(&g->phase, GRAPH_WAKING, memory_order_release);
	while (g->q.head)
		co__wait_claim(g->q.head, err, &l);
	co__spin_unlock(&g->lock);
	co__wake_all(&l);
	co__fault_point(CO__POINT_GRAPH_WOKEN); /* tests: a waiter resumes before OVER */
	atomic_store_explicit(&g->phase, GRAPH_OVER, memory_order_release);
}

/*
 * n is over (finished, or skipped, with failed set if its successors must
 * not run): release its successors. Skips propagate through a work list,
 * not recursion, so a long chain cannot overflow the stack.
 */
static void release(co_graph_node *n, int failed)
{
	co_graph *g = n->graph;
	unsigned total = g->n; /* read now: after our last count g may be gone */
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
		/* n is over. acq_rel: our reads of n (its successor list)
		 * happen before the count, and the context that counts the
		 * last node, having acquired every count, wakes the waiters
		 * and publishes the end (graph_over); destroy acquires that.
		 * After any count but the last, g is not touched: the nodes
		 * on todo are not counted yet, so g lives while we read them. */
		if (atomic_fetch_add_explicit(&g->finished, 1, memory_order_acq_rel) + 1 == total) {
			graph_over(g); /* the last: nothing was left on todo */
			return;
		}
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

/* Every kind the run uses is one of s: kind (the default; checked even if
 * every node names its own) and each node's own. s->ngroups is set once,
 * at co_sched_init. */
static int kinds_valid(const co_graph *g, const co_sched *s, unsigned kind)
{
	if (kind >= s->ngroups)
		return 0;
	for (const co_graph_node *n = g->head; n; n = n->next)
		if (n->own_kind && n->kind >= s->ngroups)
			return 0;
	return 1;
}

int co_graph_spawn_kind(co_graph *g, co_sched *s, unsigned kind)
{
	co_graph_node *n, *roots = NULL, **last = &roots;

	if (g == NULL || s == NULL)
		return -EINVAL;
	if (running(g))
		return -EINVAL; /* still running */
	/* destroyed or never set up: refused as co_sched_spawn refuses it,
	 * before anything is marked (a destroy that comes later fails the
	 * nodes it refuses: the failure rule) */
	if (co_sched_state(s) == CO_SCHED_DEAD)
		return -EINVAL;
	if (!kinds_valid(g, s, kind))
		return -EINVAL; /* before anything is marked or submitted */
	/* Each frame fresh, and in one node only: mark them as we go (they
	 * are nobody else's yet), then take the marks off. */
	for (n = g->head; n; n = n->next) {
		if (!co__frame_fresh(n->frame))
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
	g->kind = kind;
	atomic_store_explicit(&g->error, 0, memory_order_relaxed);
	atomic_store_explicit(&g->finished, 0, memory_order_relaxed);
	for (n = g->head; n; n = n->next) {
		atomic_store_explicit(&n->waiting, n->npred, memory_order_relaxed);
		atomic_store_explicit(&n->failed, 0, memory_order_relaxed);
		atomic_store_explicit(&n->state, CO_NODE_IDLE, memory_order_relaxed);
	}
	/* The roots, listed first (in order): once the last of them is
	 * submitted the run may end and g be destroyed, so the submits must
	 * not walk the node list (a root's work link is not used while it
	 * runs). */
	for (n = g->head; n; n = n->next)
		if (n->npred == 0) {
			*last = n;
			last = &n->work;
		}
	*last = NULL;
	if (g->n == 0) { /* nothing to run: over at once, nobody waits */
		atomic_store_explicit(&g->phase, GRAPH_OVER, memory_order_release);
		return 0;
	}
	/* Everything above is published to the contexts by the submits. */
	atomic_store_explicit(&g->phase, GRAPH_RUNNING, memory_order_relaxed);
	while (roots) {
		n = roots;
		roots = n->work; /* before the submit: then n may run */
		if (start(n) < 0)
			release(n, 1);
	}
	return 0;
}

int co_graph_spawn(co_graph *g, co_sched *s)
{
	return co_graph_spawn_kind(g, s, 0);
}

/* The run's wait would wait for the calling thread (it runs one of s's
 * contexts, or ticks a manual one): refused before the spawn, so that
 * -EBUSY means nothing started. */
int co_graph_run_kind(co_graph *g, co_sched *s, unsigned kind)
{
	int err;

	if (g == NULL || s == NULL)
		return -EINVAL;
	err = co__sched_runs_here(s);
	if (err != 0)
		return err < 0 ? err : -EBUSY;
	err = co_graph_spawn_kind(g, s, kind);
	if (err < 0)
		return err;
	err = co_sched_run(s);
	if (err < 0)
		return err;
	return atomic_load_explicit(&g->error, memory_order_relaxed);
}

int co_graph_run(co_graph *g, co_sched *s)
{
	return co_graph_run_kind(g, s, 0);
}

int co_graph_done(const co_graph *g)
{
	int phase;

	if (g == NULL)
		return -EINVAL;
	/* acquire: pairs with graph_over's release of WAKING or OVER (every
	 * node's writes). While the waiters are being woken every node is
	 * over already: a waiter that resumed reads 1, and a destroy waits
	 * for the wake to end */
	phase = atomic_load_explicit(&g->phase, memory_order_acquire);
	if (phase == GRAPH_IDLE)
		return -EINVAL;
	return phase >= GRAPH_WAKING;
}

/* ---- awaiting the graph: the waiter core ------------------------------------------ */

/* Under the graph's lock: park while it runs; otherwise complete at once,
 * with its result (WAKING or OVER: the end came first) or -EINVAL (never
 * spawned). Relaxed is enough for phase under the lock: WAKING is stored
 * under it, and a later phase is only read after it (coherence). */
static int graph_wait_suspend(co_awaiter *a, co_frame *f)
{
	co_waiter *w = (co_waiter *)a;
	co_graph *g = w->obj;
	int phase;

	co__spin_lock(w->lk);
	phase = atomic_load_explicit(&g->phase, memory_order_relaxed);
	if (phase == GRAPH_RUNNING)
		return co__wait_park(w, f, &g->q); /* releases the lock */
	co__spin_unlock(w->lk);
	w->res = phase == GRAPH_IDLE ? -EINVAL : atomic_load_explicit(&g->error, memory_order_relaxed);
	return 0;
}

static const co__wait_ops graph_wait_ops = {
	{ NULL, graph_wait_suspend, co__wait_resume, co__wait_cancel, CO__AW_WAITER, "graph" }, NULL
};

co_awaiter *co_graph_wait(co_waiter *w, co_graph *g)
{
	return co__wait_prep(w, &graph_wait_ops, g ? &g->lock : NULL, g);
}
