/* SPDX-License-Identifier: MIT */
/*
 * Every failable call of the Linux layers fails in turn: allocation, thread
 * creation, io_uring setup, eventfd (lib/common/fault.h). For each kind, the n-th
 * call fails, for n = 1, 2, ... until a run no longer reaches an n-th call.
 * After each run: the caller got the injected error (or the run did not
 * need that call), no accepted task was lost, nothing hangs (meson's
 * timeout), no descriptor is left open, and nothing leaks (LeakSanitizer,
 * in the ASan build).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>
#include <sys/socket.h>
#include <errno.h>
#include <stdatomic.h>
#include <cmocka.h>

#include <coring/coring.h>
#include "common/fault.h"
#include "helpers.h"

/* The work: tasks that do I/O, lock a mutex, and pass an item through a
 * channel with a time limit (a timer on their engine). */
#define TASKS 8

struct shared {
	co_mutex m;
	co_chan ch;
	atomic_int done, ok;
};

struct work {
	co_frame co;
	co_io io;
	co_waiter w;
	struct shared *sh;
	int item, got;
};

static int work_fn(co_frame *f)
{
	struct work *t = (struct work *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&t->io));
	if (co_result(f) != 0)
		CO_RETURN(f, co_result(f));
	CO_AWAIT(f, co_mutex_lock(&t->w, &t->sh->m));
	co_mutex_unlock(&t->sh->m);
	CO_AWAIT(f, co_wait_for(co_chan_send(&t->w, &t->sh->ch, &t->item), 10 * CO_S));
	if (co_result(f) != 0)
		CO_RETURN(f, co_result(f));
	CO_AWAIT(f, co_wait_for(co_chan_recv(&t->w, &t->sh->ch, &t->got), 10 * CO_S));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void work_done(co_frame *f)
{
	struct work *t = (struct work *)f;
	if (co_status(f) == 0)
		atomic_fetch_add(&t->sh->ok, 1);
	atomic_fetch_add(&t->sh->done, 1);
}

static void work_init(struct work *t, struct shared *sh, int i)
{
	memset(t, 0, sizeof *t);
	t->sh = sh;
	t->item = i;
	co_init(&t->co, work_fn);
	t->co.on_done = work_done;
}

/* Returns the error the scenario met (0: none). Either everything ran, or
 * it failed with an error before anything was accepted. */
static int scenario_sched(void)
{
	static struct work t[TASKS];
	struct shared sh;
	co_sched s;
	co_sched_opts o = { .contexts = 3, .steal = 1 };
	int err;

	memset(&sh, 0, sizeof sh);
	co_mutex_init(&sh.m);
	err = co_chan_init(&sh.ch, sizeof(int), 2, NULL);
	if (err < 0)
		return err;
	err = co_sched_init(&s, &o);
	if (err < 0) {
		assert_int_equal(co_chan_destroy(&sh.ch), 0);
		return err;
	}
	for (int i = 0; i < TASKS; i++) {
		work_init(&t[i], &sh, i);
		assert_int_equal(co_sched_spawn(&s, &t[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(atomic_load(&sh.done), TASKS); /* none lost */
	assert_int_equal(atomic_load(&sh.ok), TASKS);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_chan_destroy(&sh.ch), 0);
	return 0;
}

/* A lone context: its frames are queued before it starts. A failed start
 * leaves them queued: the scenario starts it again (the fault is spent),
 * and they all run. */
static int scenario_context(void)
{
	static struct work t[TASKS];
	struct shared sh;
	co_context c;
	int err;

	memset(&sh, 0, sizeof sh);
	co_mutex_init(&sh.m);
	err = co_chan_init(&sh.ch, sizeof(int), 2, NULL);
	if (err < 0)
		return err;
	err = co_context_init(&c, NULL);
	if (err < 0) {
		assert_int_equal(co_chan_destroy(&sh.ch), 0);
		return err;
	}
	for (int i = 0; i < TASKS; i++) {
		work_init(&t[i], &sh, i);
		assert_int_equal(co_context_spawn(&c, &t[i].co), 0);
	}
	err = co_context_start(&c, CO_RUN_UNTIL_IDLE);
	if (err < 0) {
		assert_int_equal(co_context_state(&c), CO_CONTEXT_NEW);
		assert_int_equal(atomic_load(&sh.done), 0);
		assert_int_equal(co_context_start(&c, CO_RUN_UNTIL_IDLE), 0);
	}
	assert_int_equal(co_context_join(&c), 0);
	assert_int_equal(atomic_load(&sh.done), TASKS);
	assert_int_equal(atomic_load(&sh.ok), TASKS);
	assert_int_equal(co_context_destroy(&c), 0);
	assert_int_equal(co_chan_destroy(&sh.ch), 0);
	return err;
}

/* A task graph: building it allocates edge lists. */
static int scenario_graph(void)
{
	static struct work t[4];
	struct shared sh;
	co_graph g;
	co_graph_node n[4];
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	int err, first = 0;

	memset(&sh, 0, sizeof sh);
	co_mutex_init(&sh.m);
	err = co_chan_init(&sh.ch, sizeof(int), 4, NULL);
	if (err < 0)
		return err;
	err = co_sched_init(&s, &o);
	if (err < 0) {
		co_chan_destroy(&sh.ch);
		return err;
	}
	co_graph_init(&g);
	for (int i = 0; i < 4; i++) {
		work_init(&t[i], &sh, i);
		assert_int_equal(co_graph_add(&g, &n[i], &t[i].co), 0);
	}
	for (int i = 1; i < 4; i++) {
		err = co_graph_precede(&n[0], &n[i]);
		if (err < 0 && first == 0)
			first = err; /* -ENOMEM: that edge is missing, the graph is valid */
	}
	assert_int_equal(co_graph_run(&g, &s), 0);
	for (int i = 0; i < 4; i++) { /* the graph owns their on_done */
		assert_true(co_done(&t[i].co));
		assert_int_equal(co_status(&t[i].co), 0);
	}
	assert_int_equal(co_graph_destroy(&g), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_chan_destroy(&sh.ch), 0);
	return first;
}

struct site {
	enum co__fault_site site;
	int err;
	const char *name;
};

static const struct site sites[] = {
	{ CO__FAULT_ALLOC, ENOMEM, "allocation" },
	{ CO__FAULT_THREAD, EAGAIN, "thread creation" },
	{ CO__FAULT_RING, ENOMEM, "io_uring setup" },
	{ CO__FAULT_EVENTFD, EMFILE, "eventfd" },
};

static void sweep(int (*scenario)(void), const char *what)
{
	int fds = co_test_open_fds();

	for (unsigned k = 0; k < sizeof sites / sizeof sites[0]; k++) {
		unsigned long n;
		int failed = 0;

		for (n = 1;; n++) {
			int err;

			co__fault_arm(sites[k].site, n, sites[k].err);
			err = scenario();
			if (co__fault_calls(sites[k].site) < n) {
				assert_int_equal(err, 0); /* not reached: a clean run */
				break;
			}
			if (err != 0) {
				/* the injected error, as the caller's answer */
				if (err != -sites[k].err)
					fail_msg("%s, %s #%lu: error %d", what, sites[k].name, n, err);
				failed++;
			}
			assert_int_equal(co_test_open_fds(), fds);
		}
		co__fault_arm(sites[k].site, 0, 0);
		print_message("      %s: %s failed at each of %lu calls (%d reported)\n", what,
			      sites[k].name, n - 1, failed);
	}
}

static void test_sched_faults(void **state)
{
	(void)state;
	sweep(scenario_sched, "scheduler");
}

static void test_context_faults(void **state)
{
	(void)state;
	sweep(scenario_context, "context");
}

static void test_graph_faults(void **state)
{
	(void)state;
	sweep(scenario_graph, "graph");
}

/* ---- the hot path allocates nothing ------------------------------------------------- */

#define ROUND_TRIPS 10000

struct pinger {
	co_frame co;
	co_io io;
	co_waiter w;
	co_mutex *m;
	co_event *never;
	int fd, n, bad;
	char c;
};

static int pinger_fn(co_frame *f)
{
	struct pinger *p = (struct pinger *)f;
	CO_BEGIN(f);
	for (p->n = 0; p->n < ROUND_TRIPS; p->n++) {
		p->c = (char)p->n;
		CO_AWAIT(f, co_send(&p->io, p->fd, &p->c, 1, MSG_NOSIGNAL));
		CO_AWAIT(f, co_deadline(co_recv(&p->io, p->fd, &p->c, 1, 0), 10 * CO_S));
		if (co_result(f) != 1)
			p->bad++;
		CO_AWAIT(f, co_mutex_lock(&p->w, p->m));
		CO_YIELD(f);
		co_mutex_unlock(p->m);
		if (p->n % 100 == 0) /* a timed wait that times out: its timer */
			CO_AWAIT(f, co_wait_for(co_event_wait(&p->w, p->never), 1000));
	}
	CO_END(f);
}

static void test_hot_path_allocates_nothing(void **state)
{
	co_engine e;
	co_mutex m;
	co_event never;
	struct pinger a, b;
	int sv[2];
	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	co_mutex_init(&m);
	co_event_init(&never, 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	a = (struct pinger){ .m = &m, .never = &never, .fd = sv[0] };
	b = (struct pinger){ .m = &m, .never = &never, .fd = sv[1] };
	co_init(&a.co, pinger_fn);
	co_init(&b.co, pinger_fn);
	co__fault_arm(CO__FAULT_ALLOC, 0, 0); /* count from here */
	assert_int_equal(co_engine_spawn(&e, &a.co), 0);
	assert_int_equal(co_engine_spawn(&e, &b.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(a.bad + b.bad, 0);
	assert_int_equal(co__fault_calls(CO__FAULT_ALLOC), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	close(sv[0]);
	close(sv[1]);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_sched_faults),
	cmocka_unit_test(test_context_faults),
	cmocka_unit_test(test_graph_faults),
	cmocka_unit_test(test_hot_path_allocates_nothing),
};

CO_TEST_MAIN(tests, 1)
