/* SPDX-License-Identifier: MIT */
/*
 * A game engine's job system on coring, written from docs/job_system.md:
 * three job types (a logic group the main thread ticks once per frame, a
 * group of workers, a slow group for blocking work), and on the logic
 * thread:
 *
 *   - entities that think, hop to a worker for a path search and back, take
 *     a step and wait for the next frame (co_next_turn);
 *   - a coroutine that waits for a notify (an event a slow job sets), and
 *     one that waits for a notify with a time limit that runs out;
 *   - a coroutine that spawns a child on a worker and takes its result;
 *   - a coroutine that awaits a graph of four nodes run on the workers
 *     (A before B and C, D after both; D adds what B and C computed);
 *   - a coroutine that waits for nothing ("never": it goes on at once),
 *     and one that is terminated (co_cancel) from the main loop.
 *
 * Each step records the frame (tick) it ran in, and the program checks the
 * frames the page promises: a next-frame wait resumes at the next frame;
 * an entity thinks again only in a later frame than its step; a coroutine
 * woken from another thread resumes at the first frame whose tick began
 * after the wake-up; every logic step on the main thread, every job on its
 * job type. It prints what it saw and exits 0, or 1 at a broken promise.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <coring/coring.h>

enum { LOGIC, WORK, SLOW, JOB_TYPES };

static const co_sched_group groups[JOB_TYPES] = {
	[LOGIC] = { .manual = 1 },              /* the main thread ticks it */
	[WORK] = { .contexts = 2, .steal = 1 }, /* small jobs */
	[SLOW] = { .contexts = 1 },             /* blocking or slow work */
};

static co_sched sched;
static pthread_t main_thread;
static atomic_long frame;      /* the frame the main loop is in */
static atomic_int broken;      /* a promise that did not hold */

#define CHECK(cond, ...)                                                    \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "job_system: " __VA_ARGS__);        \
			fputc('\n', stderr);                                \
			atomic_store(&broken, 1);                           \
		}                                                           \
	} while (0)

static int on_main_thread(void)
{
	return pthread_equal(pthread_self(), main_thread);
}

static int job_type(void)
{
	co_context *c = co_context_current();

	return c ? (int)c->kind : -1;
}


/* ---- entities: think, search on a worker, step, next frame ------------------------ */

#define ENTITIES 8
#define ROUNDS 6

struct entity {
	co_frame co;
	co_transfer tr;
	co_turn next;
	int round;
	long stepped;          /* the frame of the last step */
	unsigned long path;
};

static int entity_fn(co_frame *f)
{
	struct entity *e = (struct entity *)f;

	CO_BEGIN(f);
	for (e->round = 0; e->round < ROUNDS; e->round++) {
		CHECK(on_main_thread() && job_type() == LOGIC, "think off the logic thread");
		if (e->round > 0)
			CHECK(atomic_load(&frame) > e->stepped, "an entity thought in the frame of its step");
		CO_AWAIT(f, co_transfer_to(&e->tr, co_sched_pick(&sched, WORK)));
		CHECK(co_result(f) == 0 && job_type() == WORK, "the search is not on a worker");
		e->path = 1469598103934665603ul;
		for (int i = 0; i < 20000; i++)
			e->path = (e->path ^ (unsigned long)i) * 1099511628211ul;
		CO_AWAIT(f, co_transfer_to(&e->tr, co_sched_pick(&sched, LOGIC)));
		CHECK(co_result(f) == 0 && on_main_thread(), "the step is not on the logic thread");
		e->stepped = atomic_load(&frame);
		CO_AWAIT(f, co_next_turn(&e->next)); /* the next frame */
		CHECK(co_result(f) == 0 && atomic_load(&frame) == e->stepped + 1,
		      "a next-frame wait resumed in frame %ld after a step in %ld",
		      atomic_load(&frame), e->stepped);
	}
	CO_END(f);
}

/* ---- a notify, with and without a time limit ------------------------------------- */

static co_event loaded;        /* set by a slow job */
static atomic_long set_from, set_to; /* the frames before and after the set */

struct loader {                /* a slow job: blocking work, then the notify */
	co_frame co;
	co_io io;
};

static int loader_fn(co_frame *f)
{
	struct loader *l = (struct loader *)f;

	CO_BEGIN(f);
	CHECK(job_type() == SLOW, "the loader is not a slow job");
	CO_AWAIT(f, co_sleep(&l->io, 5 * CO_MS)); /* a file read, say */
	atomic_store(&set_from, atomic_load(&frame));
	co_event_set(&loaded);                    /* Awake: the waiter's handle */
	atomic_store(&set_to, atomic_load(&frame));
	CO_END(f);
}

struct notified {
	co_frame co;
	co_waiter w;
	int limited, res;
	uint64_t deadline;
	long woke;
};

static co_event never_set;

static int notified_fn(co_frame *f)
{
	struct notified *n = (struct notified *)f;

	CO_BEGIN(f);
	if (n->limited) {
		n->deadline = co_now_ns() + 10 * CO_MS;
		CO_AWAIT(f, co_wait_for(co_event_wait(&n->w, &never_set), 10 * CO_MS));
		n->res = co_result(f);
		CHECK(n->res == -ETIME, "a notify with a time limit: %d, not -ETIME", n->res);
		CHECK(co_now_ns() >= n->deadline, "a time limit ended before it ran out");
	} else {
		CO_AWAIT(f, co_event_wait(&n->w, &loaded));
		n->res = co_result(f);
		n->woke = atomic_load(&frame);
		/* the set was published in a frame from set_from to set_to: the
		 * frame whose tick began after it resumes the waiter */
		CHECK(n->res == 0 && n->woke >= atomic_load(&set_from) &&
			      (atomic_load(&set_to) == 0 || n->woke <= atomic_load(&set_to) + 1),
		      "notified in frames %ld-%ld, resumed in %ld", atomic_load(&set_from),
		      atomic_load(&set_to), n->woke);
	}
	CHECK(on_main_thread(), "a notified coroutine resumed off the logic thread");
	CO_END(f);
}

/* ---- a child with a result ------------------------------------------------------- */

struct child {                 /* runs on a worker; its result is a field */
	co_frame co;
	long sum;
	long done_in;
};

static int child_fn(co_frame *f)
{
	struct child *c = (struct child *)f;

	CO_BEGIN(f);
	CHECK(job_type() == WORK, "the child is not on a worker");
	for (long i = 1; i <= 1000; i++)
		c->sum += i;
	c->done_in = atomic_load(&frame);
	CO_RETURN(f, 0);
	CO_END(f);
}

struct parent {
	co_frame co;
	co_when w;
	struct child kid;
};

static int parent_fn(co_frame *f)
{
	struct parent *p = (struct parent *)f;

	CO_BEGIN(f);
	co_init(&p->kid.co, child_fn);
	CO_AWAIT(f, co_spawn_on(&p->w, &co_sched_pick(&sched, WORK)->engine, &p->kid.co));
	CHECK(co_result(f) == 0 && p->kid.sum == 500500, "the child's result: %d, sum %ld",
	      co_result(f), p->kid.sum);
	CHECK(on_main_thread() && atomic_load(&frame) >= p->kid.done_in,
	      "the parent resumed in frame %ld, the child ended in %ld", atomic_load(&frame),
	      p->kid.done_in);
	CO_END(f);
}

/* ---- a graph on the workers, awaited by the logic ------------------------------- */

struct node {
	co_frame co;
	struct node *in[2];
	long value;
	int kind;
};

static atomic_long graph_end; /* the frame its last node ended in */

static int node_fn(co_frame *f)
{
	struct node *n = (struct node *)f;

	CO_BEGIN(f);
	n->kind = job_type();
	n->value = 1;
	for (int i = 0; i < 2; i++) /* plain reads of what the nodes before wrote */
		if (n->in[i])
			n->value += n->in[i]->value * (i + 2);
	atomic_store(&graph_end, atomic_load(&frame));
	CO_END(f);
}

struct graph_waiter {
	co_frame co;
	co_waiter w;
	co_graph g;
	co_graph_node gn[4];
	struct node n[4];
};

static int graph_waiter_fn(co_frame *f)
{
	struct graph_waiter *gw = (struct graph_waiter *)f;

	CO_BEGIN(f);
	co_graph_init(&gw->g);
	for (int i = 0; i < 4; i++) {
		co_init(&gw->n[i].co, node_fn);
		co_graph_add(&gw->g, &gw->gn[i], &gw->n[i].co);
	}
	gw->n[1].in[0] = gw->n[2].in[0] = &gw->n[0]; /* A before B and C */
	gw->n[3].in[0] = &gw->n[1];                  /* D after B and C */
	gw->n[3].in[1] = &gw->n[2];
	co_graph_precede(&gw->gn[0], &gw->gn[1]);
	co_graph_precede(&gw->gn[0], &gw->gn[2]);
	co_graph_succeed(&gw->gn[3], &gw->gn[1]);
	co_graph_succeed(&gw->gn[3], &gw->gn[2]);
	CHECK(co_graph_spawn_kind(&gw->g, &sched, WORK) == 0, "the graph did not start");
	CO_AWAIT(f, co_graph_wait(&gw->w, &gw->g)); /* dag.dispatch(WORK).wait() */
	CHECK(co_result(f) == 0, "the graph: %d", co_result(f));
	CHECK(co_graph_done(&gw->g) == 1, "the graph waited for is not done");
	CHECK(gw->n[3].value == 1 + 3 * 2 + 3 * 3, "D computed %ld", gw->n[3].value);
	for (int i = 0; i < 4; i++)
		CHECK(gw->n[i].kind == WORK, "node %d ran on job type %d", i, gw->n[i].kind);
	CHECK(on_main_thread() && atomic_load(&frame) >= atomic_load(&graph_end),
	      "the graph's waiter resumed in frame %ld, its last node ended in %ld",
	      atomic_load(&frame), atomic_load(&graph_end));
	CHECK(co_graph_destroy(&gw->g) == 0, "the graph cannot be destroyed");
	CO_END(f);
}

/* ---- never, and terminate -------------------------------------------------------- */

struct quick {
	co_frame co;
	co_turn t;
	long at;
};

static int quick_fn(co_frame *f)
{
	struct quick *q = (struct quick *)f;

	CO_BEGIN(f);
	q->at = atomic_load(&frame);
	CO_AWAIT(f, co_after_turns(&q->t, 0)); /* "never": no wait at all */
	CHECK(co_result(f) == 0 && atomic_load(&frame) == q->at, "a wait for nothing waited");
	CO_END(f);
}

struct doomed {
	co_frame co;
	co_waiter w;
	int res;
	long ended;                     /* the frame it ended in */
};

static int doomed_fn(co_frame *f)
{
	struct doomed *d = (struct doomed *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_event_wait(&d->w, &never_set));
	d->res = co_result(f);
	d->ended = atomic_load(&frame);
	CO_END(f);
}

/* ---- post: a function on a worker's thread --------------------------------------- */

static atomic_int posted_on = -1;

static void posted(co_post *p)
{
	(void)p;
	atomic_store(&posted_on, job_type());
}

int main(void)
{
	static struct entity ents[ENTITIES];
	static struct notified waiter, limited;
	static struct loader load;
	static struct parent par;
	static struct graph_waiter gw;
	static struct quick q;
	static struct doomed doom;
	static co_post post = { .fn = posted };
	co_context *logic;
	int err, ok;
	long frames = 0;

	main_thread = pthread_self();
	if (co_event_init(&loaded, 0) < 0 || co_event_init(&never_set, 0) < 0 ||
	    (err = co_sched_init(&sched, &(co_sched_opts){ .groups = groups, .ngroups = JOB_TYPES })) < 0)
		return 1;
	logic = co_sched_pick(&sched, LOGIC);
	for (int i = 0; i < ENTITIES; i++) {
		co_init(&ents[i].co, entity_fn);
		co_sched_spawn_kind(&sched, LOGIC, &ents[i].co);
	}
	limited.limited = 1;
	co_init(&waiter.co, notified_fn);
	co_init(&limited.co, notified_fn);
	co_init(&load.co, loader_fn);
	co_init(&par.co, parent_fn);
	co_init(&gw.co, graph_waiter_fn);
	co_init(&q.co, quick_fn);
	co_init(&doom.co, doomed_fn);
	co_sched_spawn_kind(&sched, LOGIC, &waiter.co);
	co_sched_spawn_kind(&sched, LOGIC, &limited.co);
	co_sched_spawn_kind(&sched, SLOW, &load.co);
	co_sched_spawn_kind(&sched, LOGIC, &par.co);
	co_sched_spawn_kind(&sched, LOGIC, &gw.co);
	co_sched_spawn_kind(&sched, LOGIC, &q.co);
	co_sched_spawn_kind(&sched, LOGIC, &doom.co);
	co_engine_post(&co_sched_pick(&sched, WORK)->engine, &post);

	/* The main loop: a frame is one tick of the logic; the game would
	 * render here. co_sched_poll says when the work is over. */
	for (;;) {
		atomic_store(&frame, ++frames);
		if (co_context_tick(logic) < 0)
			return 1;
		if (frames == 3)
			co_cancel(&doom.co); /* terminate: it ends at the next frame */
		if ((err = co_sched_poll(&sched)) != -EAGAIN)
			break;
		if (frames % 32 == 0)
			sched_yield(); /* a real game waits for the next vsync */
	}
	CHECK(err == 0, "the run: %d", err);
	CHECK(doom.res == -ECANCELED, "the terminated coroutine: %d", doom.res);
	CHECK(doom.ended == 4, "the coroutine terminated after frame 3 ended in frame %ld",
	      doom.ended);
	CHECK(atomic_load(&posted_on) == WORK, "the post ran on job type %d",
	      atomic_load(&posted_on));
	co_sched_stop(&sched, CO_STOP_DRAIN);
	co_sched_run(&sched);
	CHECK(co_sched_destroy(&sched) == 0, "the scheduler cannot be destroyed");
	co_event_destroy(&loaded);
	co_event_destroy(&never_set);
	ok = !atomic_load(&broken);
	printf("job_system: %d entities x %d rounds, a notify, a time limit, a child, a graph of 4, "
	       "a terminate, a post, in %ld frames: %s\n",
	       ENTITIES, ROUNDS, frames, ok ? "every promise held" : "BROKEN");
	return ok ? 0 : 1;
}
