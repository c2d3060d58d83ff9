/* SPDX-License-Identifier: MIT */
/*
 * What the trace costs on the engine's hot path (docs/tracing.md): frames
 * that only yield, resumed on one engine, timed with the recorder off
 * (compiled in, not recording) and on (two events per resume: RESUME,
 * YIELD), alternating, best of a few rounds.
 *   trace_cost [--resumes N]
 * Prints ns per resume off and on, and ns per event. In a build without
 * tracing, ns per resume of the same loop (no hooks at all).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <coring/engine.h>
#include <coring/trace.h>

#define FRAMES 64

struct spin {
	co_frame co;
	long i, n;
};

static int spin_fn(co_frame *f)
{
	struct spin *s = (struct spin *)f;

	CO_BEGIN(f);
	for (s->i = 0; s->i < s->n; s->i++)
		CO_YIELD(f);
	CO_END(f);
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ns per resume of one run of FRAMES frames, n resumes in all */
static double run(long n)
{
	static struct spin s[FRAMES];
	co_engine e;
	double t;

	if (co_engine_init(&e, NULL) < 0) {
		fprintf(stderr, "trace_cost: engine\n");
		exit(1);
	}
	for (int i = 0; i < FRAMES; i++) {
		co_init(&s[i].co, spin_fn);
		s[i].n = n / FRAMES;
		co_engine_spawn(&e, &s[i].co);
	}
	t = now_ns();
	co_engine_run(&e, CO_RUN_UNTIL_IDLE);
	t = now_ns() - t;
	co_engine_destroy(&e);
	return t / (double)(n / FRAMES * FRAMES + FRAMES);
}

int main(int argc, char **argv)
{
	long n = 4000000;
	double off = 1e30, on = 1e30;
	co_trace_stats st;

	if (argc == 3 && !strcmp(argv[1], "--resumes"))
		n = atol(argv[2]);
	if (!co_trace_available()) { /* the same loop, no hooks at all */
		for (int round = 0; round < 3; round++) {
			double t = run(n);
			off = t < off ? t : off;
		}
		printf("trace_cost resumes=%ld compiled_out_ns_per_resume=%.1f\n", n, off);
		return 0;
	}
	for (int round = 0; round < 3; round++) {
		double t = run(n);

		off = t < off ? t : off;
		/* a ring of 2^16 per thread: full after the first resumes, as in a long run */
		if (co_trace_start(NULL) < 0)
			return 1;
		t = run(n);
		co_trace_stats_get(&st);
		co_trace_stop();
		on = t < on ? t : on;
	}
	printf("trace_cost resumes=%ld off_ns_per_resume=%.1f on_ns_per_resume=%.1f "
	       "ns_per_event=%.1f events_per_resume=%.2f\n",
	       n, off, on, (on - off) / 2, (double)st.recorded / (double)n);
	return 0;
}
