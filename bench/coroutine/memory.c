/* SPDX-License-Identifier: MIT */
/*
 * Memory per idle coroutine: memory [--count N]   (default 1,000,000)
 *
 * Two cases, each with N live coroutines on one engine:
 *   timer  every coroutine awaits a one-hour co_sleep: its state is a
 *          co_frame and a co_io (the SQE's user_data points into it);
 *   event  every coroutine awaits one shared event (an awaiter written
 *          here, the way a user writes one: waiters are chained through
 *          co_frame.next, so a waiter costs nothing but its frame).
 * Once all of them wait, a controller coroutine samples the process RSS
 * (/proc/self/statm) and the kernel's slab (/proc/meminfo), then ends the
 * case (cancels the timers / sets the event) and checks that every
 * coroutine finished with the expected result. Prints the runtime bytes
 * per coroutine (the structs coring needs), the RSS growth per coroutine
 * (those structs as the allocator lays them out, plus the engine's
 * memory), and the kernel memory per pending timer (io_uring's request).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <coring/io.h>

static long count = 1000000;

static double rss_bytes(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return (double)resident * (double)sysconf(_SC_PAGESIZE);
}

/* Slab (SReclaimable + SUnreclaim) in bytes: kernel objects. */
static double slab_bytes(void)
{
	char line[256];
	double kb = 0, v;
	FILE *f = fopen("/proc/meminfo", "r");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "Slab: %lf", &v) == 1)
			kb = v;
	fclose(f);
	return kb * 1024;
}

/* ---- the two kinds of idle coroutine ------------------------------------- */

struct timer_co {
	co_frame co;
	co_io io;
};

static int timer_fn(co_frame *f)
{
	struct timer_co *t = (struct timer_co *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep(&t->io, 3600 * CO_S));
	CO_END(f);
}

/* A one-shot event: waiters chained through co_frame.next. */
struct event {
	co_awaiter aw;
	co_engine *engine;
	co_frame *waiters;
	int set;
};

static int ev_ready(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((struct event *)a)->set;
}

static int ev_suspend(co_awaiter *a, co_frame *f)
{
	struct event *e = (struct event *)a;

	f->next = e->waiters;
	e->waiters = f;
	co_engine_park(e->engine); /* the engine stays alive while we hold f */
	return 1;
}

static const co_awaiter_ops ev_ops = { ev_ready, ev_suspend, NULL, NULL, 0, "event" };

static void event_set(struct event *e)
{
	e->set = 1;
	while (e->waiters) {
		co_frame *f = e->waiters;
		e->waiters = f->next;
		co_engine_unpark(e->engine);
		co_wake(f);
	}
}

static struct event ev;

static int event_fn(co_frame *f)
{
	CO_BEGIN(f);
	CO_AWAIT(f, &ev.aw);
	CO_END(f);
}

/* ---- the controller -------------------------------------------------------- */

struct ctl {
	co_frame co;
	co_io io;
	int timers;
	double rss0, slab0, rss, slab;
};

static int ctl_fn(co_frame *f)
{
	struct ctl *c = (struct ctl *)f;

	CO_BEGIN(f);
	/* spawned last: every coroutine has run to its await; a short sleep
	 * lets the engine submit the last SQEs */
	CO_AWAIT(f, co_sleep(&c->io, 20 * CO_MS));
	c->rss = rss_bytes();
	c->slab = slab_bytes();
	if (c->timers)
		co_engine_stop(co_engine_current(), 1); /* cancel every timer */
	else
		event_set(&ev);
	CO_END(f);
}

static int run_case(int timers)
{
	size_t size = timers ? sizeof(struct timer_co) : sizeof(co_frame);
	co_engine e;
	/* The cancel stop ends the timer case: a million cancellations and
	 * completions take the kernel more than the default second of grace
	 * on a busy machine, and frames past the grace would be finished
	 * without running (their await's value never set): a long grace. */
	co_engine_opts eo = { .sq_entries = 4096, .cq_entries = 65536, .ready_size = 65536,
			      .cancel_grace_ns = 120 * CO_S };
	struct ctl c = { .timers = timers };
	char *mem;
	long bad = 0;
	int err;

	c.rss0 = rss_bytes();
	c.slab0 = slab_bytes();
	if ((err = co_engine_init(&e, &eo)) < 0) {
		fprintf(stderr, "memory: engine: %s\n", strerror(-err));
		return 1;
	}
	ev.engine = &e;
	ev.aw.ops = &ev_ops;
	ev.waiters = NULL;
	ev.set = 0;
	mem = malloc((size_t)count * size);
	if (mem == NULL) {
		fprintf(stderr, "memory: out of memory\n");
		return 1;
	}
	for (long i = 0; i < count; i++) {
		co_frame *f = (co_frame *)(mem + (size_t)i * size);
		co_init(f, timers ? timer_fn : event_fn);
		co_engine_spawn(&e, f);
	}
	co_init(&c.co, ctl_fn);
	co_engine_spawn(&e, &c.co);
	err = co_engine_run(&e, CO_RUN_UNTIL_IDLE);
	for (long i = 0; i < count; i++) {
		co_frame *f = (co_frame *)(mem + (size_t)i * size);
		int want = timers ? -ECANCELED : 0;
		if (!co_done(f) || co_result(f) != want)
			bad++;
	}
	free(mem);
	co_engine_destroy(&e);
	if (err < 0 || bad) {
		fprintf(stderr, "memory: run %d, %ld coroutines did not end as expected\n", err, bad);
		return 1;
	}
	double rss = (c.rss - c.rss0) / (double)count, slab = (c.slab - c.slab0) / (double)count;
	printf("%-24s %10zu %14.1f %14.1f\n", timers ? "awaiting a timer" : "awaiting an event",
	       size, rss, timers ? slab : 0.0);
	printf("memory case=%s count=%ld runtime_bytes=%zu rss_bytes_per_co=%.1f "
	       "kernel_bytes_per_co=%.1f rss_total_mb=%.1f\n", timers ? "timer" : "event", count,
	       size, rss, timers ? slab : 0.0, c.rss / 1048576.0);
	return 0;
}

int main(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i += 2)
		if (!strcmp(argv[i], "--count"))
			count = atol(argv[i + 1]);
	if (count < 1) {
		fprintf(stderr, "usage: memory [--count N]\n");
		return 2;
	}
	printf("%ld live coroutines        runtime B   RSS B/coroutine  kernel B/coro\n", count);
	return run_case(1) || run_case(0);
}
