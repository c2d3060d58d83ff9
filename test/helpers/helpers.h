/* SPDX-License-Identifier: MIT */
/*
 * What the tests share: one entry point that runs one cmocka case (meson
 * registers each case as a test of its own, so a hang names its case) and
 * skips (exit 77) where io_uring is unavailable; loopback sockets; a count
 * of open descriptors; a counting task; an engine run on a thread of its
 * own; and a wait that is only a hang guard.
 */
#ifndef CORING_TEST_HELPERS_H
#define CORING_TEST_HELPERS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <netinet/in.h>
#include <cmocka.h>

#include <coring/engine.h>
#include <coring/io.h>
#include <coring/sync.h>

#include "sanitized.h"

/* Run the case named argv[1] (every case without an argument). With
 * needs_uring, exit 77 (meson: skipped) when io_uring cannot be set up
 * here (no kernel support, disabled by policy, seccomp). A single case
 * that called skip() and did not fail exits 77 too, so that meson says
 * SKIP, not OK (cmocka's own count of a run leaves skips out). */
extern int co_test_skipped;
#undef skip
#define skip()                                  \
	do {                                    \
		co_test_skipped = 1;            \
		_skip(__FILE__, __LINE__);      \
	} while (0)

int co_test_main(int argc, char **argv, const struct CMUnitTest *tests, size_t n,
		 int needs_uring);

#define CO_TEST_MAIN(tests, needs_uring)                                                \
	int main(int argc, char **argv)                                                 \
	{                                                                               \
		return co_test_main(argc, argv, (tests), sizeof(tests) / sizeof((tests)[0]), \
				    (needs_uring));                                     \
	}

/* Poll until cond holds. Only a hang guard: a test never decides its
 * verdict by time, and meson's timeout ends one that hangs. */
#define WAIT_UNTIL(cond)                  \
	do {                              \
		while (!(cond))           \
			usleep(100);      \
	} while (0)

/* Run the given root frames on a fresh engine until none is left; the
 * engine ends with nothing in flight. */
void co_test_run_frames(co_frame **frames, int n);
void co_test_run1(co_frame *f);

/* A listening TCP socket on 127.0.0.1, its port in *port. */
int co_test_listen(uint16_t *port);
/* A connected pair of loopback TCP sockets (sv[0] accepted, sv[1] the
 * client's). */
void co_test_tcp_pair(int sv[2]);
/* 127.0.0.1:port */
struct sockaddr_in co_test_loopback(uint16_t port);
/* Descriptors open in this process. */
int co_test_open_fds(void);

/* A fresh file name under a directory of this process's own, made on the
 * first call under $TMPDIR (else /tmp) and removed, with what a case left
 * in it, at the exit of the process that made it (a forked child's exit
 * leaves it). prefix names the directory; the last 8 names returned stay
 * valid. */
const char *co_test_tmp_path(const char *prefix, const char *name);

/* A frame that yields `yields` times, then counts its run (runs[id]) and,
 * with order set, records its place (order[(*n)++] = id). */
struct co_test_task {
	co_frame co;
	int id, yields, k;
	atomic_int *runs;
	int *order;
	atomic_int *n;
};

int co_test_task_fn(co_frame *f);

/* A root frame that counts its runs (ran) and, in its on_done, its
 * finishes (done) and its status. */
struct co_test_counted {
	co_frame co;
	atomic_int ran, done, status;
};

void co_test_counted_init(struct co_test_counted *t);

/* A frame that sleeps ns (co_sleep) and keeps the await's value in res
 * (1 until then: 0 slept, -ECANCELED cancelled). */
struct co_test_sleeper {
	co_frame co;
	co_io io;
	uint64_t ns;
	int res;
};

void co_test_sleeper_init(struct co_test_sleeper *s, uint64_t ns);

/* A frame that waits for event ev (co_event_wait); its function is
 * co_test_idler_fn, which a view's records name. */
struct co_test_idler {
	co_frame co;
	co_waiter w;
	co_event *ev;
};

int co_test_idler_fn(co_frame *f);
void co_test_idler_init(struct co_test_idler *d, co_event *ev);

/* Durations whose sum with the clock wraps, or nearly (k < CO_TEST_HUGE_KINDS:
 * UINT64_MAX, UINT64_MAX - 5, one that makes now + ns wrap to 0, ...): each
 * must mean "never", not "at once". */
#define CO_TEST_HUGE_KINDS 6
uint64_t co_test_huge_ns(int k);

/* One connection of an echo server: echoes what it receives on fd until EOF
 * or an error (end: the last recv's or send's result), then closes fd. */
struct co_test_echo {
	co_frame co;
	co_io io;
	co_io_all x;
	int fd, n, end;
	char buf[8192];
};

int co_test_echo_fn(co_frame *f);

/* An engine run by co_engine_run on a thread of its own. */
typedef struct co_test_runner {
	co_engine *e;
	int mode, ret;
	pthread_t th;
} co_test_runner;

void co_test_runner_start(co_test_runner *r, co_engine *e, int mode);
int co_test_runner_join(co_test_runner *r);

/* fn(arg) on a thread of its own, joined: what fn returned (a call that
 * must come from a thread that is not the caller's). */
int co_test_on_thread(int (*fn)(void *arg), void *arg);

#endif
