/* SPDX-License-Identifier: MIT */
/*
 * Dispatch strategies on an unbalanced load: N tasks, every other one 50x
 * heavier, so round-robin over 2 contexts puts all the heavy work on one.
 * Compares round-robin, least-loaded (balances counts, not cost), each
 * with and without work stealing, plus everything submitted to context 0.
 * Tasks yield between slices of work, so stealing can move them.
 *   dispatch [--tasks N] [--contexts C]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <coring/scheduler.h>

struct job {
	co_frame co;
	int slices, k;
	co_context *last;
	volatile unsigned long acc; /* per job: no cache line shared between contexts */
};

static int job_fn(co_frame *f)
{
	struct job *j = (struct job *)f;

	CO_BEGIN(f);
	for (j->k = 0; j->k < j->slices; j->k++) {
		for (int i = 0; i < 2000; i++)
			j->acc += (unsigned long)i; /* about a microsecond of work */
		CO_YIELD(f);
	}
	j->last = co_context_current();
	CO_END(f);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double run_case(struct job *jobs, int n, unsigned contexts, co_dispatch d, int steal,
		       int all_to_zero, double *share0)
{
	co_sched s;
	co_sched_opts o = { .contexts = contexts, .dispatch = d, .steal = steal };
	double t0, t;
	long work0 = 0, total = 0;

	if (co_sched_init(&s, &o) < 0) {
		fprintf(stderr, "dispatch: init failed\n");
		exit(1);
	}
	for (int i = 0; i < n; i++) {
		jobs[i].slices = (i % 2 == 0) ? 50 : 1;
		jobs[i].last = NULL;
		co_init(&jobs[i].co, job_fn);
		if ((all_to_zero ? co_sched_spawn_to(&s, 0, &jobs[i].co)
				 : co_sched_spawn(&s, &jobs[i].co)) < 0) {
			fprintf(stderr, "dispatch: submit failed\n");
			exit(1);
		}
	}
	t0 = now_s();
	if (co_sched_run(&s) < 0) {
		fprintf(stderr, "dispatch: run failed\n");
		exit(1);
	}
	t = now_s() - t0;
	for (int i = 0; i < n; i++) {
		if (jobs[i].last == NULL) {
			fprintf(stderr, "dispatch: job %d never finished\n", i);
			exit(1);
		}
		total += jobs[i].slices;
		if (jobs[i].last == &s.ctx[0])
			work0 += jobs[i].slices;
	}
	*share0 = (double)work0 / (double)total;
	co_sched_destroy(&s);
	return t;
}

int main(int argc, char **argv)
{
	int n = 4000;
	unsigned contexts = 2;
	struct job *jobs;
	static const struct {
		const char *name;
		co_dispatch d;
		int steal, zero;
	} cases[] = {
		{ "round-robin", CO_DISPATCH_ROUND_ROBIN, 0, 0 },
		{ "least-loaded", CO_DISPATCH_LEAST_LOADED, 0, 0 },
		{ "round-robin + steal", CO_DISPATCH_ROUND_ROBIN, 1, 0 },
		{ "least-loaded + steal", CO_DISPATCH_LEAST_LOADED, 1, 0 },
		{ "all to ctx 0", CO_DISPATCH_ROUND_ROBIN, 0, 1 },
		{ "all to ctx 0 + steal", CO_DISPATCH_ROUND_ROBIN, 1, 1 },
	};

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--tasks"))
			n = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--contexts"))
			contexts = (unsigned)atoi(argv[i + 1]);
	}
	if (n < 2 || contexts < 1) {
		fprintf(stderr, "usage: dispatch [--tasks N>=2] [--contexts C>=1]\n");
		return 2;
	}
	jobs = calloc((size_t)n, sizeof *jobs);
	printf("%-22s %10s %14s\n", "dispatch (unbalanced)", "seconds", "work on ctx 0");
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		double share0, t = run_case(jobs, n, contexts, cases[c].d, cases[c].steal,
					    cases[c].zero, &share0);
		printf("%-22s %10.3f %13.0f%%\n", cases[c].name, t, share0 * 100);
		printf("dispatch case=\"%s\" contexts=%u tasks=%d seconds=%.4f ctx0_work=%.3f\n",
		       cases[c].name, contexts, n, t, share0);
	}
	free(jobs);
	return 0;
}
