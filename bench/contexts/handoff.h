/* SPDX-License-Identifier: MIT */
/*
 * What the hand-off benchmarks (bench/contexts/handoff.c: coring,
 * bench/contexts/handoff_pthread.c: the thread baselines) share: the command
 * line, the clock, the span of a shape (from the first worker's start to
 * the last one's end), the result line that bench/runner/run.py parses,
 * and the failure exit. bench/contexts/handoff.go takes the same command
 * line and prints the same lines.
 *
 *   PROGRAM [--rt N] [--items N] [--ops N] [--seconds S] [--idle-ms MS]
 *           [--shapes a,b,...] [--miscount]
 *
 * Every shape stops at its count or after --seconds, whichever comes first
 * (both bound a run), and reports what it did in the time it took:
 *   handoff peer=P shape=S n=DONE seconds=T value=V unit=U
 * [more=...] with unit ns (per round trip), per_s (items or lock operations per
 * second) or cpu_pct (% of one CPU). A shape whose own check fails (a lost,
 * duplicated or reordered item, a counter that does not match) prints
 * "handoff: PEER SHAPE: WHAT" on stderr and the program exits 1.
 * --miscount makes every shape get one step wrong on purpose (an answer, an
 * item, a hop, an increment): the smoke test checks that each shape's own
 * check then fails it.
 */
#ifndef CORING_BENCH_HANDOFF_H
#define CORING_BENCH_HANDOFF_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct handoff_args {
	long rt;             /* round trips per round-trip shape */
	long items;          /* items per channel-throughput shape */
	long ops;            /* lock operations per mutex shape, all workers */
	double seconds;      /* time bound of each shape */
	long idle_ms;        /* the idle window */
	const char *shapes;  /* NULL: all; else a comma-separated list */
	int miscount;        /* get step MISCOUNT_AT of every shape wrong */
};

/* The step --miscount gets wrong: early, so that every shape reaches it. */
#define MISCOUNT_AT 7

static inline uint64_t handoff_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline _Noreturn void handoff_usage(const char *prog)
{
	fprintf(stderr, "usage: %s [--rt N] [--items N] [--ops N] [--seconds S] [--idle-ms MS] "
			"[--shapes a,b,...] [--miscount]\n", prog);
	exit(2);
}

static inline struct handoff_args handoff_parse(int argc, char **argv)
{
	struct handoff_args a = { .rt = 200000, .items = 5000000, .ops = 4000000, .seconds = 1.0,
				  .idle_ms = 200, .shapes = NULL };

	for (int i = 1; i < argc; i += 2) {
		const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end = NULL;

		if (!strcmp(k, "--miscount")) {
			a.miscount = 1;
			i--; /* no value */
			continue;
		}
		if (v == NULL || *v == '\0')
			handoff_usage(argv[0]);
		if (!strcmp(k, "--shapes")) {
			a.shapes = v;
			continue;
		}
		if (!strcmp(k, "--rt"))
			a.rt = strtol(v, &end, 10);
		else if (!strcmp(k, "--items"))
			a.items = strtol(v, &end, 10);
		else if (!strcmp(k, "--ops"))
			a.ops = strtol(v, &end, 10);
		else if (!strcmp(k, "--seconds"))
			a.seconds = strtod(v, &end);
		else if (!strcmp(k, "--idle-ms"))
			a.idle_ms = strtol(v, &end, 10);
		else
			handoff_usage(argv[0]);
		if (*end != '\0')
			handoff_usage(argv[0]);
	}
	/* counts within what a long and the checks' arithmetic hold; the
	 * time bound at most an hour */
	if (a.rt < 1 || a.rt > 1000000000L || a.items < 1 || a.items > 1000000000L || a.ops < 64 ||
	    a.ops > 1000000000L || !(a.seconds > 0 && a.seconds <= 3600) || a.idle_ms < 1 ||
	    a.idle_ms > 60000)
		handoff_usage(argv[0]);
	return a;
}

/* Whether shape name was asked for (every shape without --shapes). */
static inline int handoff_want(const struct handoff_args *a, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = a->shapes; p != NULL; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == '\0'))
			return 1;
	return a->shapes == NULL;
}

/* Exit with the usage if --shapes names a shape not in known (NULL-ended). */
static inline void handoff_check_shapes(const struct handoff_args *a, const char *const *known,
					const char *prog)
{
	for (const char *p = a->shapes; p != NULL; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
		size_t n = strcspn(p, ",");
		int found = 0;

		for (const char *const *k = known; *k != NULL; k++)
			found |= strlen(*k) == n && !strncmp(p, *k, n);
		if (!found) {
			fprintf(stderr, "%s: unknown shape '%.*s' (known:", prog, (int)n, p);
			for (const char *const *k = known; *k != NULL; k++)
				fprintf(stderr, " %s", *k);
			fprintf(stderr, ")\n");
			exit(2);
		}
	}
}

static inline _Noreturn void handoff_fail(const char *peer, const char *shape, const char *what)
{
	fprintf(stderr, "handoff: %s %s: %s\n", peer, shape, what);
	exit(1);
}

/*
 * The span of a shape: from the first worker's start to the last worker's
 * end, measured by the workers themselves, so that neither the spawn of
 * the first nor the main thread's wait for the last one is counted.
 */
struct handoff_span {
	atomic_uint_least64_t t0, t1;
	atomic_int live;
};

static inline void handoff_span_init(struct handoff_span *s, int workers)
{
	atomic_init(&s->t0, 0);
	atomic_init(&s->t1, 0);
	atomic_init(&s->live, workers);
}

static inline void handoff_span_begin(struct handoff_span *s)
{
	uint_least64_t zero = 0;

	atomic_compare_exchange_strong(&s->t0, &zero, handoff_now_ns());
}

static inline void handoff_span_end(struct handoff_span *s)
{
	if (atomic_fetch_sub(&s->live, 1) == 1)
		atomic_store(&s->t1, handoff_now_ns());
}

static inline double handoff_span_seconds(struct handoff_span *s)
{
	uint64_t t0 = atomic_load(&s->t0), t1 = atomic_load(&s->t1);

	return t1 > t0 ? (double)(t1 - t0) / 1e9 : 1e-9;
}

/* The time bound of the shape that starts now. */
static inline uint64_t handoff_deadline(const struct handoff_args *a)
{
	return handoff_now_ns() + (uint64_t)(a->seconds * 1e9);
}

/* One result line: value in unit, from n operations over secs seconds;
 * extra (or "") adds key=value words. */
static inline void handoff_line(const char *peer, const char *shape, long n, double secs,
				double value, const char *unit, const char *extra)
{
	printf("handoff peer=%s shape=%s n=%ld seconds=%.6f value=%.6g unit=%s%s%s\n", peer, shape, n,
	       secs, value, unit, *extra ? " " : "", extra);
	fflush(stdout);
}

/* A round-trip shape's line (ns per round trip) and a rate shape's
 * (operations per second). */
static inline void handoff_rt(const char *peer, const char *shape, long n, double secs)
{
	handoff_line(peer, shape, n, secs, secs * 1e9 / (double)n, "ns", "");
}

static inline void handoff_rate(const char *peer, const char *shape, long n, double secs)
{
	handoff_line(peer, shape, n, secs, (double)n / secs, "per_s", "");
}

#endif
