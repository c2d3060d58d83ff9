/* SPDX-License-Identifier: MIT */
/*
 * engine_wait.c (not installed): waiting for work, polling then
 * sleeping, with the inline sleep of a server's every turn.
 */
#ifndef CORING_LIB_ENGINE_WAIT_H
#define CORING_LIB_ENGINE_WAIT_H

#ifdef CO_HAVE_VALGRIND_H
#include <valgrind/valgrind.h>
#define co__under_valgrind() RUNNING_ON_VALGRIND
#else
#define co__under_valgrind() 0
#endif

#include "engine_impl.h"

int co__engine_sleeping(co_engine *e);

/* On the calling thread's engine e (or NULL): 0 if co__engine_poll would
 * return 0 at once (no engine, no poll budget, I/O in flight, frames
 * queued): the inline half of its checks. */
static inline int co__engine_may_poll(const co_engine *e)
{
	return e != NULL && e->spin_cur != 0 && e->inflight == 0 && e->local_n == 0;
}
/*
 * On the calling thread's engine e (NULL: no engine), a frame that would
 * park until another thread changes something polls ready(arg) instead,
 * while e has nothing else to do (no I/O in flight, nothing ready), for at
 * most e's poll budget (lib/engine/engine_wait.c) and never past deadline
 * (CLOCK_MONOTONIC ns; 0: none): first after slip pauses, then at every
 * pause. Returns 0 if ready() did not become true (or e does not poll:
 * opts.no_spin, one CPU, a scheduler's spinners all busy, other work, a
 * deadline passed), else 1 + the pauses it waited.
 */
unsigned co__engine_poll(co_engine *e, int (*ready)(void *arg), void *arg, unsigned slip,
			 uint64_t deadline);

/* No frame ready and no I/O or parked frame pending. */
int co__engine_idle(co_engine *e);
/* Another thread is inside a call on e (or a finish waits for a cancel
 * request): its change is about to land. */
int co__engine_visitor_inside(co_engine *e);
/* Nothing changed since the turn began (snap) and e is idle. */
int co__engine_unchanged(co_engine *e, unsigned snap);
/* Idle with nothing that can progress: tell the scheduler (if any). */
void co__engine_quiet_set(co_engine *e, unsigned snap);
/* The sleep (in the kernel until a completion, unless something changed
 * since snap), and the wait with nothing in flight (a poll for a hand-off
 * first); each 0 or io_uring's error (-ETIME: ns ran out). */
int co__engine_sleep(co_engine *e, unsigned snap, uint64_t ns, int idle);
int co__engine_wait_idle(co_engine *e, unsigned snap, uint64_t ns, int idle);

/* At the first run: what the fast sleep enters the kernel with. */
void co__engine_enter_setup(co_engine *e, int registered);
/* The fast sleep's enter ended with -ETIME (a valgrind slice): 0. */
int co__engine_slice_end(co_engine *e);

/* Every sleep's check (invariant 1): sleeping goes up, then epoch is
 * looked at; something changed since snap (or a frame is queued, looked at
 * again as a guard unless the caller just looked: looked): no sleep, 0.
 * Else 1, counted in stats.waits. */
static co__inline int co__engine_sleep_begin(co_engine *e, unsigned snap, int looked)
{
	atomic_store_explicit(&e->sleeping, 1, memory_order_seq_cst); /* pairs with engine_kick */
	if (atomic_load_explicit(&e->epoch, memory_order_seq_cst) != snap ||
	    (!looked && e->local_n != 0)) {
		atomic_store_explicit(&e->sleeping, 0, memory_order_relaxed);
		return 0;
	}
	e->stats.waits++;
	return 1;
}

/* liburing's flush: the kernel sees the SQEs handed out up to the tail,
 * which is returned. */
static co__inline unsigned co__engine_sq_flush(co_engine *e)
{
	struct io_uring_sq *sq = &e->ring.sq;
	unsigned tail = sq->sqe_tail;

	if (sq->sqe_head != tail) {
		sq->sqe_head = tail;
		io_uring_smp_store_release(sq->ktail, tail);
	}
	return tail;
}

/*
 * co__engine_sleep with no limit and I/O in flight, a server's every turn:
 * the same check, then one io_uring_enter that submits the SQ and waits
 * for a completion, with the flags the first run worked out (the ring fd
 * registered or not; under valgrind a slice).
 */
static co__inline int co__engine_sleep_now(co_engine *e, unsigned snap, int looked)
{
	unsigned tail;
	int ret;

	if (!co__engine_sleep_begin(e, snap, looked))
		return 0;
	tail = co__engine_sq_flush(e);
	ret = io_uring_enter2((unsigned)e->enter_fd, tail - *e->ring.sq.khead, 1, e->enter_flags,
			      (sigset_t *)(uintptr_t)e->enter_arg, e->enter_argsz);
	atomic_store_explicit(&e->sleeping, 0, memory_order_relaxed);
	if (co__unlikely(ret == -ETIME))
		return co__engine_slice_end(e);
	return ret;
}

/* With nothing in flight the engine can only be waiting for another
 * thread: it polls for that first; with I/O in flight, a server's every
 * turn, it sleeps at once (inline: a few tests in the loop). */
static inline int co__engine_wait(co_engine *e, unsigned snap, uint64_t ns, int idle)
{
	if (co__unlikely(e->inflight == 0) && e->spin_max != 0)
		return co__engine_wait_idle(e, snap, ns, idle);
	if (co__likely((ns | (uint64_t)idle) == 0) && e->enter_fd >= 0)
		return co__engine_sleep_now(e, snap, 0);
	return co__engine_sleep(e, snap, ns, idle);
}
int co__engine_idle_sleep(co_engine *e, uint64_t ns);

#endif
