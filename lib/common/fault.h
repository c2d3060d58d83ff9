/* SPDX-License-Identifier: MIT */
/*
 * Every failable call of the Linux layers that can leave work half done
 * (allocation, thread creation, ring setup, eventfd) goes through these
 * wrappers. In the library users link they are the plain calls. In the
 * test build (CO_FAULT_INJECTION, a static library that is never
 * installed) a test can make the n-th call of one kind fail with an errno
 * of its choice, and so check every error path in turn (test_faults).
 */
#ifndef CORING_FAULT_H
#define CORING_FAULT_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

enum co__fault_site {
	CO__FAULT_ALLOC,    /* malloc, calloc, realloc, anonymous mmap */
	CO__FAULT_THREAD,   /* pthread_create */
	CO__FAULT_RING,     /* io_uring_queue_init_params */
	CO__FAULT_EVENTFD,  /* eventfd */
	CO__FAULT_RING_FD,  /* io_uring_register_ring_fd */
	CO__FAULT_REGISTER, /* io_uring_register: the probe at set-up, the enable at the first run */
	CO__FAULT_SITES
};

/* Points inside the library where a test can run code of its own, to
 * hold a window between two steps open deterministically. */
enum co__fault_point {
	CO__POINT_CHAN_REFILL, /* a receiver freed slots and saw senders parked;
	                          it holds no lock and is about to refill the
	                          ring from them (lib/sync/channel.c refill) */
	CO__POINT_VIEW_TAKEN,  /* an engine took a view's request and has not
	                          answered it yet (lib/engine/engine_view.c) */
	CO__POINT_LIMIT_TIMER, /* a limit's timer ran out, not fired yet (lib/timeout/timeout.c) */
	CO__POINT_WAIT_VISIT,  /* an engine's look saw a parked waiter waiting, unlocked (lib/waiter/waiter.c) */
	CO__POINT_POOL_ENDED,  /* a pool job returned; its result not recorded (lib/pool/pool.c) */
	CO__POINT_CHAN_POLL,   /* a channel end about to poll, or to take its locks in order, before parking: no lock held (lib/sync/channel.c) */
	CO__POINT_BORROWED,    /* a thread holds an engine that runs nowhere, borrowed (a view's
	                          answer, a cancel of frames never run) (lib/engine/engine_state.c) */
	CO__POINT_SCHED_CLOSING, /* a scheduler's destroy refused spawns for a look at whether
	                            anything is live, and has not looked yet (lib/scheduler/scheduler.c) */
	CO__POINT_SPAWN_WAITS, /* a spawn found a destroy looking, and waits for its answer
	                          (lib/scheduler/scheduler.c) */
	CO__POINT_TAKE,        /* a run, a tick or a destroy has looked at the borrowers and is about
	                          to take the engine (lib/engine/engine_state.c) */
	CO__POINT_TAKE_REFUSED, /* a run, a tick or a destroy found the engine taken (a borrower may
	                           hold it) and has not looked at the borrowers yet (lib/engine/engine_state.c) */
	CO__POINT_MUTEX_REPARKED, /* a mutex waiter's retry found the mutex held, put the waiter back
	                             at the head of the queue and released the lock (lib/sync/sync.c) */
	CO__POINT_CONTEXT_ENDING, /* a context's thread marked it ENDED and has not told its
	                             scheduler yet (lib/context/context.c) */
	CO__POINT_SCHED_STOPPED, /* a destroy of an idle scheduler stopped its contexts, unlocked,
	                            and has not waited for their ends yet (lib/scheduler/scheduler.c) */
	CO__POINT_POOL_STOPPING, /* a pool's destroy marked it stopping and has not joined its
	                            workers yet (lib/pool/pool.c) */
	CO__POINT_VISIT_PUSH,  /* another thread's call is inside its visit of an engine, checks
	                          passed, its spawn or post not pushed yet (lib/engine/engine_visit.c) */
	CO__POINT_CONTEXT_DESTROY, /* a context's destroy found it not running and is about to
	                              destroy its engine (lib/context/context.c) */
	CO__POINT_GRAPH_WOKEN, /* a graph's last node woke its waiters and the run is not marked
	                          over yet (lib/graph/graph.c) */
	CO__POINT_POOL_GIVEN_UP, /* a stop gave up a running job and let go of the pool's lock;
	                            its frame not woken yet (lib/pool/pool.c) */
	CO__POINT_WHEN_SPAWNED, /* a when_all / when_any spawned a child and has others to
	                           spawn (lib/sync/when.c) */
	CO__POINT_VIEW_WAITS,  /* a view's request is published and its caller, outside any visit, is
	                          about to look for its answer (lib/engine/engine_view.c) */
	CO__POINT_POSTS_CLOSING, /* an engine's door to posts is about to close: its context's
	                            last run is over, or a manual context is about to end
	                            (lib/engine/engine_visit.c) */
	CO__POINT_IO_ALL_NEXT, /* a *_all call is about to ask for its next transfer, of
	                          x->len - x->done bytes (lib/io/io.c) */
	CO__POINT_WAKE_LOOK,   /* a release found an engine's look at a waiter it claimed under way, and
	                          waits for it to end before it wakes any frame (lib/waiter/waiter.c) */
	CO__POINT_TRACE_STOPPING, /* a stream's stop let go of the registry's lock to join
	                             its writer (lib/trace/trace.c) */
	CO__POINT_TRACE_START_WAITS, /* a start found a stop under way and waits for its
	                                end (lib/trace/trace.c) */
	CO__POINT_DESTROY_WAITS, /* another thread's call found an engine's destroy deciding and
	                            waits for its answer, outside its visit (lib/engine/engine_visit.c) */
	CO__POINT_CONTEXT_STARTING, /* a context's start claimed it and has not created its
	                               thread yet (lib/context/context.c) */
	CO__POINT_REGISTER,    /* a register of files, buffers or a buffer ring from off the engine's
	                          thread holds the engine borrowed, checks passed, and has not
	                          asked the kernel yet (lib/engine/engine_setup.c) */
	CO__POINT_TRACE_ENV,   /* co_trace_env started the recording and has not looked at
	                          whether its exit handler is registered (lib/trace/trace.c) */
	CO__POINT_TICK_QUIET,  /* a tick found its engine idle and raised its quiet flag; the
	                          tick has not returned (lib/engine/engine_loop.c) */
	CO__POINT_RUN_TAKEN,   /* a run or a tick took the engine (or was refused) and has not
	                          looked at its owner yet (lib/engine/engine_loop.c) */
	CO__POINT_RING_REFILLED, /* an engine moved a frame of its overflow into its ready ring,
	                          where thieves may take it (lib/engine/engine_queue.c) */
	CO__POINT_MUTEX_INVITED, /* an unlock let go of the mutex's lock and has not woken what it
	                          claimed (an invited waiter's retry, a hand-off) (lib/sync/sync.c) */
	CO__POINTS
};

#ifdef CO_FAULT_INJECTION
/* Run the function a test set for this point, if any. */
void co__fault_point(enum co__fault_point p);
/* Test control: fn(arg) runs at every pass through p, on the passing
 * thread (fn NULL: nothing). */
void co__fault_on_point(enum co__fault_point p, void (*fn)(void *arg), void *arg);
/* The errno the current call of this kind must fail with, or 0. */
int co__fault_hit(enum co__fault_site site);
/* Test control: calls first to last (counted from 1, from now on) of site
 * fail with err (first 0: none); co__fault_arm(s, n, err) fails the nth
 * only. co__fault_calls tells how many calls were made since. */
void co__fault_arm_range(enum co__fault_site site, unsigned long first, unsigned long last,
			 int err);
void co__fault_arm(enum co__fault_site site, unsigned long nth, int err);
unsigned long co__fault_calls(enum co__fault_site site);
#else
static inline int co__fault_hit(enum co__fault_site site)
{
	(void)site;
	return 0;
}

static inline void co__fault_point(enum co__fault_point p)
{
	(void)p;
}
#endif

static inline void *co__malloc(size_t n)
{
	return co__fault_hit(CO__FAULT_ALLOC) ? NULL : malloc(n);
}

/* n bytes rounded up to a multiple of align (a power of two), starting at
 * a multiple of align (free with free), or NULL */
static inline void *co__malloc_aligned(size_t align, size_t n)
{
	if (n > SIZE_MAX - (align - 1))
		return NULL;
	n = (n + align - 1) & ~(align - 1);
	return co__fault_hit(CO__FAULT_ALLOC) ? NULL : aligned_alloc(align, n);
}

static inline void *co__calloc(size_t n, size_t size)
{
	return co__fault_hit(CO__FAULT_ALLOC) ? NULL : calloc(n, size);
}

/* co__calloc for objects of a type aligned past what malloc promises (a
 * cache line): n zeroed objects of size bytes at a multiple of align. */
static inline void *co__calloc_aligned(size_t align, size_t n, size_t size)
{
	void *p;

	if (size != 0 && n > SIZE_MAX / size)
		return NULL;
	p = co__malloc_aligned(align, n * size);
	if (p != NULL)
		memset(p, 0, n * size);
	return p;
}

static inline void *co__realloc(void *p, size_t n)
{
	return co__fault_hit(CO__FAULT_ALLOC) ? NULL : realloc(p, n);
}

/* An anonymous private mapping of n bytes (zeroed, page-aligned), or NULL;
 * an allocation as far as faults go. */
static inline void *co__mmap_anon(size_t n)
{
	void *p;

	if (co__fault_hit(CO__FAULT_ALLOC))
		return NULL;
	p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* pthread_create with default attributes: 0 or a positive errno. The new
 * thread (every thread the library starts: a context's, a pool worker, the
 * trace's writer) has every signal blocked but those the kernel raises for
 * a fault of its own (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS),
 * so a signal sent to the process is left to the program's threads: a
 * co_signals opened after a scheduler or a pool started still gets it
 * (test_io_ops signals_after_library_threads). */
static inline int co__thread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
	int err = co__fault_hit(CO__FAULT_THREAD);
	sigset_t all, old;

	if (err)
		return err;
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGSYS);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* the new thread inherits it */
	err = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

/* eventfd(0, EFD_CLOEXEC): a descriptor, or -1 with errno set. */
static inline int co__eventfd(void)
{
	int err = co__fault_hit(CO__FAULT_EVENTFD);

	if (err) {
		errno = err;
		return -1;
	}
	return eventfd(0, EFD_CLOEXEC);
}

#endif
