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
 * A node starts (as a scheduler task, on whichever context the dispatch
 * picks) once all its predecessors finished; the context that finishes the
 * last predecessor submits it. Nodes without a path between them run
 * concurrently.
 *
 * Failure rule: a node fails when its coroutine ends with a negative
 * co_status. Its successors, and everything reachable from them, are
 * skipped: never started (state CO_NODE_SKIPPED). Nodes that do not
 * depend on a failed node still run. The graph's error is the first
 * failure in time (a node's status, or the error of a submit that was
 * refused).
 *
 * While the graph runs, each node frame's on_done and user fields belong
 * to the graph. Frames run once: to run a graph again, co_init its frames.
 * Building a graph (add, edges) is not thread-safe and allocates the edge
 * lists; running it allocates nothing.
 */
#ifndef CORING_GRAPH_H
#define CORING_GRAPH_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <coring/scheduler.h>

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
	CO_NODE_SKIPPED = 3,   /* never started: a predecessor failed */
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
};

struct co_graph {
	co_graph_node *head, *tail;   /* private: nodes in insertion order */
	unsigned n;                   /* read-only: node count */
	co_sched *sched;          /* private: during a run */
	CO__ATOMIC(int) error;             /* read-only: the first failure, or 0 */
	CO__ATOMIC(unsigned) finished;         /* read-only: nodes done or skipped */
};

/* Errors: -EINVAL (NULL). */
CO_API int co_graph_init(co_graph *g);

/* Free the edge lists and take the nodes out (they may be added again,
 * to this graph or another); nodes and frames stay the caller's.
 * -EINVAL (NULL), -EBUSY (spawned, and not every node has finished). */
CO_API int co_graph_destroy(co_graph *g);

/* Add node n running frame f (co_init'ed). 0, -EINVAL (NULL), -EEXIST (n
 * is in g already). A node in another graph must leave it first
 * (co_graph_destroy of that graph). */
CO_API int co_graph_add(co_graph *g, co_graph_node *n, co_frame *f);

/* a must finish before b starts (precede), or after b (succeed). 0,
 * -EINVAL (NULL, a == b, nodes of different graphs or not added), -ENOMEM.
 * Cycles are reported when the graph is started. */
CO_API int co_graph_precede(co_graph_node *a, co_graph_node *b);
CO_API int co_graph_succeed(co_graph_node *a, co_graph_node *b);

/*
 * Start the graph on s without waiting: check it, then submit the nodes
 * that have no predecessor (the rest follow as they become ready). From
 * any thread; co_sched_run(s) (now or later) runs it to the end, and
 * several graphs may share one run. 0, -EINVAL (NULL, a frame already
 * started, spawned or finished, one frame in two nodes, or the graph is
 * running), -ELOOP (the
 * edges contain a cycle: nothing was started). A node whose submit the
 * scheduler refuses (-ESHUTDOWN) counts as failed: see the failure rule.
 */
CO_API int co_graph_spawn(co_graph *g, co_sched *s);

/* co_graph_spawn, then co_sched_run(s). Returns the scheduler's error
 * if it failed, else the graph's first failure, else 0. */
CO_API int co_graph_run(co_graph *g, co_sched *s);

#ifdef __cplusplus
}
#endif

#endif /* CORING_GRAPH_H */
