/* SPDX-License-Identifier: MIT */
/*
 * The counted invariants trap in a debug build (docs/design.md, "The rules
 * (invariants)"): each count the engine drops (live, parked, held,
 * inflight, deferred) is broken once on purpose, in a child process, and
 * the child must die of SIGABRT with "coring: invariant N" on stderr,
 * naming the count. A release build (NDEBUG) does the plain decrement:
 * every case skips there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>
#include <liburing.h>
#include <cmocka.h>

#include <coring/engine.h>
#include <coring/io.h>

#include "engine/engine_internal.h"
#include "helpers.h"

/* Run fn in a child; it must abort with "coring: <want>" on stderr. */
static void expect_trap(void (*fn)(void), const char *want)
{
	char out[1024];
	size_t len = 0;
	ssize_t n;
	int pfd[2], status;
	pid_t pid;

	if (!CO_DEBUG)
		skip(); /* a release build has no checks */
	assert_int_equal(pipe(pfd), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(pfd[1], STDERR_FILENO);
		close(pfd[0]);
		alarm(10); /* a child that never traps nor ends: SIGALRM, a failure */
		fn();
		_exit(0); /* no trap: the parent fails */
	}
	close(pfd[1]);
	while (len < sizeof out - 1 && (n = read(pfd[0], out + len, sizeof out - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = 0;
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
		fail_msg("no trap for \"%s\" (status 0x%x, stderr: %s)", want, status, out);
	if (strstr(out, want) == NULL)
		fail_msg("the trap does not say \"%s\": %s", want, out);
}

static co_engine eng;
static atomic_int runs[1];

static void engine_up(void)
{
	if (co_engine_init(&eng, NULL) != 0)
		_exit(77);
}

/* invariant 4: co_engine_unpark with no co_engine_park before it. */
static void unpark_without_park(void)
{
	engine_up();
	co_engine_unpark(&eng);
}

static void test_unpark_without_park_traps(void **state)
{
	(void)state;
	expect_trap(unpark_without_park, "coring: invariant 4: an engine's parked count");
}

/* invariant 3: a frame that ended is ended again. */
static void finished_twice(void)
{
	struct co_test_task t = { .runs = runs };

	engine_up();
	co_init(&t.co, co_test_task_fn);
	co_engine_spawn(&eng, &t.co);
	co_engine_run(&eng, CO_RUN_UNTIL_IDLE);
	co__engine_finish_now(&eng, &t.co);
}

static void test_frame_finished_twice_traps(void **state)
{
	(void)state;
	expect_trap(finished_twice, "coring: invariant 3: an engine's live count");
}

/* invariant 6: an SQE tagged with an io_info but not through
 * co_engine_sqe, so never counted in flight: its CQE traps in reap. */
struct sleeper {
	co_frame co;
	co_io io;
};

static int sleeper_fn(co_frame *f)
{
	struct sleeper *s = (struct sleeper *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep(&s->io, 20 * CO_MS));
	CO_END(f);
}

static void uncounted_cb(co_engine *e, co_io_info *info, int res, unsigned flags, unsigned tag)
{
	(void)e;
	(void)info;
	(void)res;
	(void)flags;
	(void)tag;
}

static void uncounted_sqe(void)
{
	static co_io_info info = { .cb = uncounted_cb };
	static struct sleeper s;
	struct io_uring_sqe *sqe;

	engine_up();
	sqe = io_uring_get_sqe(&eng.ring);
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data(sqe, &info);
	co_init(&s.co, sleeper_fn);
	co_engine_spawn(&eng, &s.co);
	/* the sleep's SQE is counted once; the nop's CQE takes that count,
	 * the run returns (nothing in flight, as far as it knows), and the
	 * sleep's CQE, reaped by the next run, finds none left */
	co_engine_run(&eng, CO_RUN_UNTIL_IDLE);
	co_engine_run(&eng, CO_RUN_UNTIL_STOP);
}

static void test_uncounted_sqe_traps(void **state)
{
	(void)state;
	expect_trap(uncounted_sqe, "coring: invariant 6: an engine's I/O in flight");
}

/* invariant 8: a cancel request finishes a frame whose finish was never
 * deferred to it. */
static void finish_taken_twice(void)
{
	static struct co_test_task t = { .runs = runs };

	engine_up();
	co_init(&t.co, co_test_task_fn);
	co_engine_spawn(&eng, &t.co);
	co_engine_run(&eng, CO_RUN_UNTIL_IDLE);
	/* as if a request had been queued while it finished: the owner
	 * takes a deferred finish that no finish counted */
	t.co.cancel = (unsigned char)(CO__CX_FINISHED | CO__CX_QUEUED);
	co__lifo_push(&eng.cancels, &t.co, offsetof(co_frame, cancel_next));
	co__engine_run_cancels(&eng);
}

static void test_deferred_finish_taken_twice_traps(void **state)
{
	(void)state;
	expect_trap(finish_taken_twice, "coring: invariant 8: an engine's deferred finishes");
}

/* invariant 8: a given-up wait ends twice (an unhold with no hold). */
static void unhold_without_hold(void)
{
	engine_up();
	co__engine_unhold(&eng);
}

static void test_unhold_without_hold_traps(void **state)
{
	(void)state;
	expect_trap(unhold_without_hold, "coring: invariant 8: an engine's held count");
}

/* The check is not a trap on every drop: a park then an unpark, and a
 * frame that ends once, leave the child running. */
static void balanced(void)
{
	struct co_test_task t = { .runs = runs };

	engine_up();
	co_engine_park(&eng);
	co_engine_unpark(&eng);
	co_init(&t.co, co_test_task_fn);
	co_engine_spawn(&eng, &t.co);
	co_engine_run(&eng, CO_RUN_UNTIL_IDLE);
	co_engine_destroy(&eng);
}

static void test_balanced_counts_do_not_trap(void **state)
{
	int status;
	pid_t pid;

	(void)state;
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		balanced();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unpark_without_park_traps),
		cmocka_unit_test(test_frame_finished_twice_traps),
		cmocka_unit_test(test_uncounted_sqe_traps),
		cmocka_unit_test(test_deferred_finish_taken_twice_traps),
		cmocka_unit_test(test_unhold_without_hold_traps),
		cmocka_unit_test(test_balanced_counts_do_not_trap),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
