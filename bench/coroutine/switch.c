/* SPDX-License-Identifier: MIT */
/*
 * Suspend/resume round trip: a coring generator vs a C++20 coroutine (g++,
 * -std=c++20, in switch_cpp.cpp) vs ucontext swapcontext, in one run. The
 * coring generator runs twice: with co.h's default label backend (computed
 * goto under GCC and Clang) and with the switch backend
 * (CO_USE_COMPUTED_GOTO=0, switch_labels.c).
 * One round trip = resume the coroutine, it yields a value, control returns.
 * Usage: switch [--iters N] [--rounds R]   (prints the median of R rounds;
 * the rounds alternate the contestants)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

#ifdef HAVE_CPP_BASELINE
long cpp_generator_sum(long iters); /* switch_cpp.cpp */
#endif

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* --- coring: the generator of switch_gen.h, with this build's default
 * label backend here and the switch backend in switch_labels.c --- */
#define SWITCH_GEN_SUM coring_sum
#include "switch_gen.h"

long coring_switch_sum(long iters); /* switch_labels.c */

/* --- ucontext --- */
static ucontext_t uc_main, uc_gen;
static long uc_value, uc_n;
static int uc_done;

static void uc_body(void)
{
	for (long i = 0; i < uc_n; i++) {
		uc_value = i;
		swapcontext(&uc_gen, &uc_main);
	}
	uc_done = 1;
}

static long ucontext_sum(long iters)
{
	static char stack[64 * 1024];
	volatile long sum = 0; /* lives across swapcontext (a setjmp-like call) */
	uc_n = iters;
	uc_done = 0;
	getcontext(&uc_gen);
	uc_gen.uc_stack.ss_sp = stack;
	uc_gen.uc_stack.ss_size = sizeof stack;
	uc_gen.uc_link = &uc_main;
	makecontext(&uc_gen, uc_body, 0);
	for (;;) {
		swapcontext(&uc_main, &uc_gen);
		if (uc_done)
			break;
		sum += uc_value;
	}
	return sum;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

struct contestant {
	const char *name;
	long (*fn)(long);
	long iters;
	double ns[64];
};

/* One timed run; checks the result so nothing is optimised away. */
static void run_once(struct contestant *c, int round)
{
	long want = c->iters * (c->iters - 1) / 2;
	double t0 = now_ns();
	long sum = c->fn(c->iters);
	c->ns[round] = (now_ns() - t0) / (double)c->iters;
	if (sum != want) {
		fprintf(stderr, "%s: wrong sum %ld, want %ld\n", c->name, sum, want);
		exit(1);
	}
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof v[0], cmp_double);
	return v[n / 2];
}

int main(int argc, char **argv)
{
	long iters = 20000000;
	int rounds = 11;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--iters"))
			iters = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--rounds"))
			rounds = atoi(argv[i + 1]);
	}
	if (iters < 2 || rounds < 1 || rounds > 64) {
		fprintf(stderr, "usage: switch [--iters N>=2] [--rounds 1..64]\n");
		return 2;
	}
	struct contestant cs[] = {
		{ "coring (co.h)", coring_sum, iters, { 0 } },
		{ "coring, switch labels", coring_switch_sum, iters, { 0 } },
#ifdef HAVE_CPP_BASELINE
		{ "C++20 coroutine (g++)", cpp_generator_sum, iters, { 0 } },
#endif
		{ "ucontext swapcontext", ucontext_sum, iters / 50 + 2, { 0 } },
	};
	int n = (int)(sizeof cs / sizeof cs[0]);
	double base;

	/* Rounds alternate the contestants, so drift and noise hit all alike;
	 * the median of the rounds is reported. */
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < n; i++)
			run_once(&cs[i], r);
	base = median(cs[0].ns, rounds);
	printf("%-22s %10s %10s\n", "suspend/resume", "ns/round", "vs coring");
	for (int i = 0; i < n; i++) {
		double m = i ? median(cs[i].ns, rounds) : base;
		printf("%-22s %10.2f %10.2f\n", cs[i].name, m, m / base);
	}
	return 0;
}
