/* SPDX-License-Identifier: MIT */
/*
 * A game-style main loop. The game's logic runs in coroutines on the main
 * thread, which drives them once per frame (co_context_tick on a manual
 * context) and never sleeps inside coring; work too slow for one frame (a
 * path search) moves to a worker group and comes back.
 *
 *     game_loop [--entities N] [--rounds K] [--view F]
 *
 * Each entity, K times: thinks (on the main thread), sends its path search
 * to a worker (co_transfer_to the WORKER kind), comes back (co_transfer_to
 * the LOGIC kind: the first tick after the search ended runs it), takes a
 * step, and waits for the next frame (co_next_turn: the next tick runs it,
 * never the tick that is running). The program checks that every logic
 * step ran on the main thread, every search on a worker, and no entity
 * thought again in the frame of its last step, and exits 0.
 *
 * --view F: after frame F, the main thread writes what every entity is
 * doing to stderr (coring/view.h): the logic context's frames, read
 * between two ticks, and the workers', which answer from their threads.
 * An option it does not know, one without its value, N or K under 1 or a
 * negative F: the usage on stderr, exit 2.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <coring/coring.h>

enum { LOGIC, WORKER, KINDS };

static const co_sched_group groups[KINDS] = {
	[LOGIC] = { .manual = 1 },     /* the main thread ticks it */
	[WORKER] = { .contexts = 2, .steal = 1 },
};

struct world {
	co_sched s;
	pthread_t main_thread;
	long frame;                     /* the frame the main loop is in */
	int bad;                        /* a step ran on the wrong thread */
	int twice;                      /* an entity thought in the frame of its
	                                   last step: two steps in one frame */
};

struct entity {
	co_frame co;
	co_transfer tr;
	co_turn next;
	struct world *w;
	int id, round, rounds, x;
	long stepped;                   /* the frame of its last step */
	unsigned long path;             /* the search's result */
};

/* A deliberately slow computation: too long for one frame. */
static unsigned long search(int from, int to)
{
	unsigned long h = 1469598103934665603ul;

	for (int i = 0; i < 200000; i++)
		h = (h ^ (unsigned long)(from * 31 + to + i)) * 1099511628211ul;
	return h;
}

static int entity_fn(co_frame *f)
{
	struct entity *e = (struct entity *)f;
	struct world *w = e->w;

	CO_BEGIN(f);
	for (e->round = 0; e->round < e->rounds; e->round++) {
		/* think: on the main thread, a frame after the last step */
		if (!pthread_equal(pthread_self(), w->main_thread))
			w->bad++;
		if (e->round > 0 && e->stepped == w->frame)
			w->twice++;
		/* the search: on a worker */
		CO_AWAIT(f, co_transfer_to(&e->tr, co_sched_pick(&w->s, WORKER)));
		if (co_result(f) < 0)
			CO_RETURN(f, co_result(f));
		if (co_context_current()->kind != WORKER)
			w->bad++;
		e->path = search(e->x, e->id);
		/* back to the logic, and a step */
		CO_AWAIT(f, co_transfer_to(&e->tr, co_sched_pick(&w->s, LOGIC)));
		if (co_result(f) < 0)
			CO_RETURN(f, co_result(f));
		if (!pthread_equal(pthread_self(), w->main_thread))
			w->bad++;
		e->stepped = w->frame;
		e->x += (int)(e->path & 1) ? 1 : -1;
		CO_AWAIT(f, co_next_turn(&e->next)); /* the next frame */
		if (co_result(f) < 0)
			CO_RETURN(f, co_result(f));
	}
	CO_END(f);
}

/* What every entity is doing, on stderr: each record an entity, none
 * twice, on the logic context or a worker. -1 if the view says otherwise. */
static int show_view(struct world *w, int n)
{
	co_view v;
	int err = co_view_sched(&v, &w->s, CO_VIEW_WAIT);

	if (err < 0) {
		fprintf(stderr, "game_loop: view: %s\n", strerror(-err));
		return -1;
	}
	co_view_print(&v, STDERR_FILENO, 0);
	if (v.unanswered || v.n > (size_t)n)
		err = -1;
	for (size_t i = 0; i < v.n; i++)
		if (v.frames[i].fn != entity_fn)
			err = -1;
	co_view_free(&v);
	return err;
}

int main(int argc, char **argv)
{
	static struct world w;
	co_sched_opts o = { .groups = groups, .ngroups = KINDS };
	struct entity *ents;
	co_context *logic;
	int n = 16, rounds = 8, err;
	long frames = 0, view_at = 0;
	int trace_err;

	if ((trace_err = co_trace_env()) < 0) { /* CORING_TRACE=file (docs/tracing.md) */
		fprintf(stderr, "game_loop: CORING_TRACE: %s\n", strerror(-trace_err));
		return 2;
	}
	for (int i = 1; i < argc; i += 2) {
		if (i + 1 == argc)
			n = 0; /* an option without its value */
		else if (strcmp(argv[i], "--entities") == 0)
			n = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--rounds") == 0)
			rounds = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--view") == 0)
			view_at = atol(argv[i + 1]);
		else
			n = 0; /* an option it does not know */
	}
	if (n < 1 || rounds < 1 || view_at < 0) {
		fprintf(stderr, "usage: %s [--entities N] [--rounds K] [--view F]\n", argv[0]);
		return 2;
	}
	w.main_thread = pthread_self();
	err = co_sched_init(&w.s, &o);
	if (err < 0) {
		fprintf(stderr, "game_loop: co_sched_init: %s\n", strerror(-err));
		return 1;
	}
	logic = co_sched_pick(&w.s, LOGIC);
	ents = calloc((size_t)n, sizeof *ents);
	if (ents == NULL)
		return 1;
	for (int i = 0; i < n; i++) {
		ents[i].w = &w;
		ents[i].id = i;
		ents[i].rounds = rounds;
		co_init(&ents[i].co, entity_fn);
		if (co_sched_spawn_kind(&w.s, LOGIC, &ents[i].co) < 0)
			return 1;
	}

	/* The main loop: one tick of the logic per frame, then the frame's
	 * own work (rendering, here a count); co_sched_poll says when the
	 * game is over without blocking. */
	for (;;) {
		w.frame = ++frames;
		err = co_context_tick(logic);
		if (err < 0) {
			fprintf(stderr, "game_loop: tick: %s\n", strerror(-err));
			return 1;
		}
		if (frames == view_at && show_view(&w, n) < 0)
			return 1;
		err = co_sched_poll(&w.s);
		if (err != -EAGAIN)
			break;
		if (frames % 64 == 0)
			sched_yield(); /* a real game waits for the next vsync here */
	}
	if (err < 0) {
		fprintf(stderr, "game_loop: %s\n", strerror(-err));
		return 1;
	}
	for (int i = 0; i < n; i++)
		if (co_status(&ents[i].co) != 0)
			w.bad++;
	printf("game_loop: %d entities x %d rounds in %ld frames; %d on a wrong thread, "
	       "%d steps in the frame of the last\n", n, rounds, frames, w.bad, w.twice);
	co_sched_stop(&w.s, CO_STOP_DRAIN);
	co_sched_run(&w.s);
	err = co_sched_destroy(&w.s);
	free(ents);
	return w.bad == 0 && w.twice == 0 && err == 0 ? 0 : 1;
}
