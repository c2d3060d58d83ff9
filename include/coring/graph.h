/* SPDX-License-Identifier: MIT */
/*
 * coring/graph.h - a task graph (precede/succeed): nodes are
 * coroutines, edges say which must finish first; it runs on a scheduler.
 *
 *     co_graph g;
 *     co_graph_node a, b, c, d;
 *     co_graph_init(&g);
 *     co_graph_add(&g, &a, &load.co);   ... (b, c, d likewise)
 *     co_graph_precede(&a, &b);         // a before b
 *     co_graph_precede(&a, &c);
 *     co_graph_succeed(&d, &b);         // d after b
 *     co_graph_succeed(&d, &c);
 *     int err = co_graph_run(&g, &sched);   // first error, or 0
 *     co_graph_destroy(&g);
 *
 * A node starts (as a scheduler task) once all its predecessors finished;
 * the context that finishes the last predecessor submits it. It starts on
 * the kind it was given (co_graph_add_kind), else on the run's default
 * kind (co_graph_spawn_kind; co_graph_spawn: kind 0), on whichever context
 * of that kind the group's dispatch picks. Nodes without a path between
 * them run concurrently.
 *
 *     co_graph_add_kind(&g, &physics, &ph.co, CPU);  // a job type per node
 *     co_graph_spawn_kind(&g, &sched, IO);           // the rest on IO
 *     ...   // the main thread, ticking its manual context:
 *     if (co_graph_done(&g) == 1) ...                // without blocking
 *     CO_AWAIT(f, co_wait_for(co_graph_wait(&s->w, &g), 5 * CO_MS));
 *
 * Values between nodes: whatever a node wrote (plain memory, no atomics
 * needed) before its coroutine ended is visible to every node after it
 * (its successors, and theirs) when they start; and everything every node
 * wrote is visible to a caller once co_graph_done answered 1, once a
 * co_graph_wait completed with the graph's result, and after co_graph_run
 * returned. Nodes without a path between them get no such guarantee from
 * each other.
 *
 * Failure rule: a node fails when its coroutine ends with a negative
 * co_status. Its successors, and everything reachable from them, are
 * skipped: never started (state CO_NODE_SKIPPED). Nodes that do not
 * depend on a failed node still run. The graph's error is the first
 * failure in time (a node's status, or the error of a submit that was
 * refused).
 *
 * A node's frame gives its on_done and user fields to the graph when the
 * node is submitted, and they stay the graph's (a frame that ran keeps
 * them); a node that never starts (skipped, or refused) leaves its frame
 * as the caller set it, fresh: it may be spawned elsewhere. Frames run
 * once: to run a graph again, co_init its frames.
 * Building a graph (add, edges) is not thread-safe and allocates the edge
 * lists; running it allocates nothing.
 */
#ifndef CORING_GRAPH_H
#define CORING_GRAPH_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <coring/scheduler.h>
#include <coring/waiter.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct co_graph co_graph;
typedef struct co_graph_node co_graph_node;

/* co_graph_node.state */
enum co_node_state {
	CO_NODE_IDLE = 0,      /* not started (yet) */
	CO_NODE_SUBMITTED = 1, /* handed to the scheduler */
	CO_NODE_DONE = 2,      /* finished: see co_status(node->frame) */
	CO_NODE_SKIPPED = 3,   /* never started: a predecessor failed, or
	                          the scheduler refused its submit */
};

struct co_graph_node {
	co_frame *frame;              /* read-only: the node's coroutine */
	co_graph *graph;              /* read-only */
	CO__ATOMIC(int) state;             /* read-only: enum co_node_state */
	co_graph_node *next;          /* private: the graph's node list */
	co_graph_node **succ;         /* private: successors (malloc'd) */
	unsigned nsucc, cap;          /* private */
	unsigned npred;               /* private: edges in */
	CO__ATOMIC(unsigned) waiting;          /* private: predecessors not finished */
	CO__ATOMIC(int) failed;            /* private: a predecessor failed */
	co_graph_node *work;          /* private: a work list link */
	unsigned kind;                /* read-only: the kind it starts on, if
	                                 own_kind (co_graph_add_kind) */
	int own_kind;                 /* read-only: nonzero: it named a kind;
	                                 0: it starts on the run's default */
};

struct co_graph {
	co_graph_node *head, *tail;   /* private: nodes in insertion order */
	unsigned n;                   /* read-only: node count */
	co_sched *sched;          /* private: during a run */
	CO__ATOMIC(int) error;             /* read-only: the first failure, or 0 */
	CO__ATOMIC(unsigned) finished;         /* read-only: nodes done or skipped */
	unsigned kind;                /* private: the default kind of a run */
	CO__ATOMIC(int) phase;        /* private: never spawned, running, waking
	                                 its waiters, over (lib/graph/graph.c) */
	CO__ATOMIC(unsigned) lock;    /* private: spinlock over q, and over the
	                                 end of a run for its waiters */
	co_waitq q;                   /* private: frames in co_graph_wait */
};

/* Errors: -EINVAL (NULL). */
CO_API int co_graph_init(co_graph *g);

/* Free the edge lists and take the nodes out (they may be added again,
 * to this graph or another); nodes and frames stay the caller's. After it
 * returned 0 coring does not touch g, its nodes or their frames again:
 * free them at will. The graph is then as if never spawned (co_graph_done
 * and co_graph_wait answer -EINVAL; error and finished are 0). -EINVAL (NULL), -EBUSY (spawned, and
 * a node has not finished or been skipped; so also while a frame waits on
 * it in co_graph_wait). Right after the last node, while the context that
 * finished it wakes the graph's waiters, it waits for that wake to end (it
 * is short and waits for nothing the caller could hold), so a waiter that
 * was just woken may destroy the graph at once. A frame that begins a
 * co_graph_wait on a graph that is over reads the graph in that call (its
 * wait completes at once): as for any object, a destroy on another thread
 * must not race such a call; the waiters it orders against are the frames
 * already parked. */
CO_API int co_graph_destroy(co_graph *g);

/* Add node n running frame f (co_init'ed); it starts on the run's default
 * kind. 0, -EINVAL (NULL), -EEXIST (n is in g already), -EBUSY (g is
 * running). A node in another graph must leave it first (co_graph_destroy
 * of that graph). */
CO_API int co_graph_add(co_graph *g, co_graph_node *n, co_frame *f);

/* co_graph_add, and n starts on a context of that kind (a scheduler group,
 * co_sched_spawn_kind), whatever the run's default. The kind is checked
 * when the graph is started: see co_graph_spawn_kind. Errors as
 * co_graph_add. */
CO_API int co_graph_add_kind(co_graph *g, co_graph_node *n, co_frame *f, unsigned kind);

/* a must finish before b starts (precede), or after b (succeed). 0,
 * -EINVAL (NULL, a == b, nodes of different graphs or not added), -EBUSY
 * (their graph is running), -ENOMEM. Cycles are reported when the graph
 * is started. */
CO_API int co_graph_precede(co_graph_node *a, co_graph_node *b);
CO_API int co_graph_succeed(co_graph_node *a, co_graph_node *b);

/*
 * Start the graph on s without waiting: check it, then submit the nodes
 * that have no predecessor (the rest follow as they become ready). Nodes
 * that named no kind start on kind (co_graph_spawn: kind 0). From any
 * thread; co_sched_run(s) (now or later) runs it to the end, and several
 * graphs may share one run; or poll co_graph_done, or await co_graph_wait.
 * 0; -EINVAL with nothing started (NULL; s destroyed or never set up,
 * test_graph dead_scheduler_refused; kind, or a node's kind, not a
 * kind of s: kind >= s->ngroups, which a negative kind converted, INT_MAX
 * and UINT_MAX are for any scheduler; a frame already started, spawned or
 * finished; one frame in two nodes; the graph is running); -ELOOP (the
 * edges contain a cycle: nothing was started). A node whose submit the
 * scheduler refuses (-ESHUTDOWN; -EINVAL once a destroy racing the spawn
 * has finished) counts as failed: see the failure rule;
 * it is SKIPPED, and the spawn still answers 0 when every root is refused
 * (a stopped scheduler): the graph's error says -ESHUTDOWN
 * (test_graph refused_submit_fails_node).
 */
CO_API int co_graph_spawn(co_graph *g, co_sched *s);
CO_API int co_graph_spawn_kind(co_graph *g, co_sched *s, unsigned kind);

/*
 * co_graph_spawn(_kind), then co_sched_run(s). Returns the graph's first
 * failure, or 0; co_graph_spawn's errors (nothing started); -EBUSY at
 * once, nothing started, from a thread whose wait would wait for itself:
 * one that runs one of s's contexts (a task, an on_done), or ticks a
 * manual context of s (spawn the graph and tick, polling co_graph_done
 * or co_sched_poll, instead; test_graph run_refused_on_own_thread). Any other error
 * is co_sched_run's, after the graph started: it may still run (-EDEADLK,
 * a context's error, a manual context no thread has ticked yet):
 * co_graph_done answers 0 until it is over, and co_graph_destroy -EBUSY.
 */
CO_API int co_graph_run(co_graph *g, co_sched *s);
CO_API int co_graph_run_kind(co_graph *g, co_sched *s, unsigned kind);

/*
 * Without blocking (a main thread that ticks a manual context): 1 once
 * every node finished or was skipped: every node's writes are then
 * visible to the caller (acquire), and co_graph_destroy succeeds (it waits
 * for a wake of the graph's waiters still under way); 0 while it runs;
 * -EINVAL (NULL, never spawned, or destroyed since). A frame whose
 * co_graph_wait completed reads 1.
 */
CO_API int co_graph_done(const co_graph *g);

/*
 * Await the end of the graph's run (every node finished or skipped), from
 * a coroutine on any context (a manual one too: it parks, and a tick after
 * the end resumes it) or any engine. The value is the graph's error (its
 * first failure) or 0, and every node's writes are visible after it; at
 * once if the graph is over already. -EINVAL (NULL w or g, a graph
 * never spawned or destroyed since), -ETIME (co_wait_for's time ran out;
 * the graph runs on), -ECANCELED (co_cancel; the graph runs on), -ENXIO
 * (a time limit on a frame no engine runs). Any number of frames may
 * wait; the end wakes them all. The graph cannot be destroyed while a
 * frame waits (-EBUSY: it is running).
 */
CO_API co_awaiter *co_graph_wait(co_waiter *w, co_graph *g);

#ifdef __cplusplus
}
#endif

#endif /* CORING_GRAPH_H */
