/* SPDX-License-Identifier: MIT */
/*
 * How an engine waits for work once it has nothing to run: it polls for a
 * hand-off from another thread for a while (docs/engine.md, "Staying
 * awake"), then sleeps in the kernel until a completion arrives, or, under
 * valgrind with nothing in flight, in ppoll. The loop's wait
 * (co__engine_wait, inline in engine_wait.h) comes here for a poll only
 * with nothing in flight: a server's turn pays two tests for it.
 */
#include <errno.h>
#include <poll.h>
#include <time.h>

#include "common/clock.h"
#include "engine_wait.h"
#include "engine_state.h"
#include "engine_queue.h"
#include "common/spin.h"

/* Sleep with nothing in flight: only a visitor (a spawn, a post, a stop)
 * can end it, by writing the wake eventfd whose read is armed in the ring.
 * The ring is submitted, then the ring and the eventfd are polled: the
 * ring is readable once a completion is posted; the eventfd is readable
 * while the ring's read of it still waits for this thread to run the
 * kernel's deferred completion work (IORING_SETUP_DEFER_TASKRUN, whose
 * completions do not wake pollers of the ring). The same wake-up as
 * waiting in io_uring_enter, but in a call that valgrind, which runs one
 * thread at a time, knows to block in, so the visitor's thread gets to run
 * (valgrind 3.19 holds its lock through io_uring_enter). Used under
 * valgrind only: natively it costs a syscall more per sleep than
 * io_uring_enter (a cross-context mutex hand-off runs at about half the
 * rate). An engine with I/O in flight waits in io_uring_enter, in slices
 * under valgrind (co__engine_sleep, below). */
int co__engine_idle_sleep(co_engine *e, uint64_t ns)
{
	struct pollfd p[2] = { { .fd = e->ring.ring_fd, .events = POLLIN },
			       { .fd = e->wake_fd, .events = POLLIN } };
	struct timespec ts = { .tv_sec = (time_t)(ns / CO__NS_PER_S),
			       .tv_nsec = (long)(ns % CO__NS_PER_S) };
	int ret = io_uring_submit(&e->ring);

	if (ret < 0)
		return ret;
	if (ppoll(p, 2, ns ? &ts : NULL, NULL) < 0)
		return -errno;
	if (e->ring.flags & IORING_SETUP_DEFER_TASKRUN)
		return io_uring_get_events(&e->ring); /* completions run in the caller */
	return 0;
}

/*
 * Staying awake (docs/engine.md): with nothing to run and no I/O in flight
 * the engine can only be waiting for another thread (a wake of a parked
 * frame, a spawn, a post, a transfer). A sleeping engine costs whoever
 * hands it work an eventfd write and a thread wake-up; so before it sleeps
 * it polls epoch, which every such hand-off bumps, for up to spin_cur ns.
 * While it polls, sleeping is 0: a hand-off sees it awake and writes
 * nothing. spin_cur adapts: a poll that finds nothing halves it (below
 * SPIN_MIN_NS it is 0: no poll at all), a poll that finds work doubles it,
 * and a sleep that a hand-off ended after t < spin_max (a poll of t would
 * have caught it) raises it to 2t; it never exceeds spin_max. So an engine
 * that gets no work from other threads never polls, and after the last
 * hand-off it polls once, for at most spin_max, then sleeps. A frame's
 * poll before it parks (co__engine_poll: a channel end) spends and adapts
 * the same budget.
 */
#define SPIN_MIN_NS 2000u

/* Raise the budget to at least 2 * t, within spin_max. */
static void spin_grow(co_engine *e, uint64_t t)
{
	uint64_t c = 2 * (t > SPIN_MIN_NS ? t : SPIN_MIN_NS);

	if (c > e->spin_max)
		c = e->spin_max;
	if (c > e->spin_cur)
		e->spin_cur = c;
}

/* After a poll: one that found what it polled for doubles the budget,
 * one that did not halves it (below SPIN_MIN_NS: no poll at all). */
static void spin_adapt(co_engine *e, int found)
{
	if (found)
		spin_grow(e, e->spin_cur);
	else if ((e->spin_cur /= 2) < SPIN_MIN_NS)
		e->spin_cur = 0;
}

/* Pauses between two looks at epoch while polling. epoch shares its line
 * with what a sender changes on its way in (the visit count, the live
 * count, the inbox); each look while it is on its way takes the line back
 * from it, and the sender's next change has to fetch it again. Three
 * pauses, against one, on the machine of docs/benchmarks.md: in its fast
 * mode for traffic between CPUs a transfer round trip 13 % and a
 * co_spawn_on round trip 33 % shorter, the other hand-offs level; in its
 * slow mode (a line transfer about 7x dearer) the transfer about 15 %
 * longer and co_spawn_on level to 10 % longer; 8 made the transfer 50 %
 * longer (the wait for the look). */
#define SPIN_PAUSES 3

/* Poll for a hand-off until wait_ns (0: no limit) or the budget runs out:
 * 1 if one came (epoch moved, or frames were stolen), 0 if not. */
static int spin_poll(co_engine *e, unsigned snap, uint64_t wait_ns)
{
	uint64_t budget = e->spin_cur, start;
	int found = 0;

	if (wait_ns && wait_ns < budget)
		budget = wait_ns;
	if (e->hooks && e->hooks->spin && !e->hooks->spin(e, e->hook_arg, 1))
		return 0; /* enough contexts poll already */
	/* a single writer; readable from any thread (engine.h) */
	__atomic_store_n(&e->stats.spins, e->stats.spins + 1, __ATOMIC_RELAXED);
	/* the clock is first read after 64 looks: a hand-off that comes
	 * sooner (most do) costs no clock read */
	for (unsigned i = 1, start_set = 0;; i++) {
		/* relaxed: a hint; the next turn reads epoch seq_cst */
		if (atomic_load_explicit(&e->epoch, memory_order_relaxed) != snap) {
			found = 1;
			break;
		}
		for (unsigned k = 0; k < SPIN_PAUSES; k++)
			co__cpu_relax();
		if (i % 64 == 0) {
			uint64_t now = co__now_ns();

			if (e->stealing && e->hooks->steal(e, e->hook_arg) > 0) {
				found = 1;
				break;
			}
			if (!start_set) {
				start = now;
				start_set = 1;
			} else if (now - start >= budget) {
				break;
			}
		}
	}
	if (e->hooks && e->hooks->spin)
		e->hooks->spin(e, e->hook_arg, 0);
	if (found)
		__atomic_store_n(&e->stats.spin_hits, e->stats.spin_hits + 1, __ATOMIC_RELAXED);
	spin_adapt(e, found);
	return found;
}

unsigned co__engine_poll(co_engine *e, int (*ready)(void *arg), void *arg, unsigned slip,
			 uint64_t deadline)
{
	uint64_t budget, start = 0;
	unsigned waited = slip, found = 0;

	if (!co__engine_may_poll(e) || co__engine_ready_nonempty(e))
		return 0;
	budget = e->spin_cur;
	if (deadline != 0) { /* the wait's own limit caps the poll */
		uint64_t now = co__now_ns();

		if (now >= deadline)
			return 0;
		if (deadline - now < budget)
			budget = deadline - now;
		start = now;
	}
	if (e->hooks && e->hooks->spin && !e->hooks->spin(e, e->hook_arg, 1))
		return 0;
	/* a single writer; readable from any thread (engine.h) */
	__atomic_store_n(&e->stats.polls, e->stats.polls + 1, __ATOMIC_RELAXED);
	for (unsigned k = 0; k < slip; k++)
		co__cpu_relax();
	for (;;) {
		if (ready(arg)) {
			found = waited + 1;
			break;
		}
		co__cpu_relax();
		if (++waited % 64 == 0) {
			uint64_t now = co__now_ns();

			if (co__engine_ready_nonempty(e))
				break;
			if (start == 0)
				start = now;
			else if (now - start >= budget)
				break;
		}
	}
	if (e->hooks && e->hooks->spin)
		e->hooks->spin(e, e->hook_arg, 0);
	spin_adapt(e, found != 0);
	if (found)
		__atomic_store_n(&e->stats.poll_hits, e->stats.poll_hits + 1, __ATOMIC_RELAXED);
	return found;
}

/* Nothing in flight and polling allowed: poll while the budget lasts,
 * then sleep; a hand-off that ended the sleep sooner than spin_max says a
 * poll would have caught it: poll next time. */
int co__engine_wait_idle(co_engine *e, unsigned snap, uint64_t ns, int idle)
{
	uint64_t since, t;
	int ret;

	if (e->spin_cur != 0 && spin_poll(e, snap, ns))
		return 0;
	since = co__now_ns();
	ret = co__engine_sleep(e, snap, ns, idle);
	if (atomic_load_explicit(&e->epoch, memory_order_relaxed) != snap &&
	    (t = co__now_ns() - since) < e->spin_max)
		spin_grow(e, t);
	return ret;
}

/* No frame ready and no I/O or parked frame pending. */
int co__engine_idle(co_engine *e)
{
	/* SQEs prepared by awaiters are counted in inflight; the rest (the
	 * wake read, cancel requests) need no waiting for. */
	return !co__engine_ready_nonempty(e) && e->inflight == 0 &&
	       atomic_load_explicit(&e->parked, memory_order_acquire) == 0;
}

/*
 * The engine is idle (nothing ready, no I/O, nothing parked): can anything
 * still come from inside coring? Only from another thread inside a call
 * on the engine (a spawn counts its frame before pushing it; a waker
 * pushes before it unparks): visits are short, so the caller yields until
 * there is none and looks again (the same for a frame whose finish waits
 * for a cancel request: its requester is inside co_cancel). Read after
 * the live count; with no
 * visitor and nothing changed since the turn began (snap), the live frames
 * are stuck for good. No timing is involved.
 */
int co__engine_visitor_inside(co_engine *e)
{
	/* a finish waiting for a cancel request is one: its requester has
	 * marked the frame and is about to push the request */
	return atomic_load_explicit(&e->visitors, memory_order_seq_cst) != 0 || e->deferred != 0;
}

int co__engine_unchanged(co_engine *e, unsigned snap)
{
	return atomic_load_explicit(&e->epoch, memory_order_seq_cst) == snap && co__engine_idle(e);
}

/*
 * Tell the scheduler (if any) that this engine is idle with nothing that
 * can progress; cleared by the next visitor or by the owner's next turn.
 * The flag goes up first and the engine looks for visitors after: a
 * visitor that came in between sees the flag and takes it down, or we see
 * the visitor; either way the scheduler never counts the engine quiet
 * while a change is on its way.
 */
void co__engine_quiet_set(co_engine *e, unsigned snap)
{
	int want = CO__QUIET_NO;

	if (!e->hooks || !e->hooks->quiet ||
	    !atomic_compare_exchange_strong_explicit(&e->quiet, &want, CO__QUIET_MAYBE,
						    memory_order_seq_cst, memory_order_relaxed))
		return;
	want = CO__QUIET_MAYBE;
	if (co__engine_visitor_inside(e) || !co__engine_unchanged(e, snap)) {
		atomic_compare_exchange_strong(&e->quiet, &want, CO__QUIET_NO);
		return;
	}
	if (atomic_compare_exchange_strong(&e->quiet, &want, CO__QUIET_YES))
		e->hooks->quiet(e, e->hook_arg, 1);
}

/* Under valgrind, the longest wait in io_uring_enter (co__engine_sleep) */
#define VALGRIND_SLICE_NS (10 * 1000000ull)

static int engine_slept(co_engine *e, int ret)
{
	atomic_store_explicit(&e->sleeping, 0, memory_order_relaxed);
	return ret;
}

/*
 * Submit what is queued and wait for a completion, or until *ts (NULL: no
 * limit), in one io_uring_enter. liburing's submit-and-wait does the same
 * and more: with a timeout it peeks at the CQ before and after the call,
 * which the loop's reap does anyway. Where the kernel takes no timeout
 * argument (no EXT_ARG) or its own thread submits (SQPOLL), liburing's.
 * Inline: a server's every turn sleeps here (a call costs some 15
 * instructions of saved registers).
 */
static co__inline int enter_wait(co_engine *e, struct __kernel_timespec *ts)
{
	struct io_uring *ring = &e->ring;
	struct io_uring_sq *sq = &ring->sq;
	struct io_uring_getevents_arg arg = { .ts = (uint64_t)(uintptr_t)ts };
	unsigned tail, flags = IORING_ENTER_GETEVENTS;

	if (co__unlikely(ring->flags & IORING_SETUP_SQPOLL) ||
	    (ts && !(ring->features & IORING_FEAT_EXT_ARG))) {
		struct io_uring_cqe *cqe;

		return ts ? io_uring_submit_and_wait_timeout(ring, &cqe, 1, ts, NULL)
			  : io_uring_submit_and_wait(ring, 1);
	}
	tail = co__engine_sq_flush(e);
	flags |= e->enter_flags & IORING_ENTER_REGISTERED_RING;
	if (ts == NULL) /* io_uring_enter2 answers -errno */
		return io_uring_enter2((unsigned)ring->enter_ring_fd, tail - *sq->khead, 1, flags,
				       NULL, _NSIG / 8);
	return io_uring_enter2((unsigned)ring->enter_ring_fd, tail - *sq->khead, 1,
			       flags | IORING_ENTER_EXT_ARG, (sigset_t *)&arg, sizeof arg);
}

/* RUNNING_ON_VALGRIND, asked once: a dozen instructions (a client
 * request) that the sleep of every turn would pay. 0 not asked yet, 1 no,
 * 2 yes. */
static int under_valgrind(void)
{
	static _Atomic int known;
	int v = atomic_load_explicit(&known, memory_order_relaxed);

	if (co__unlikely(v == 0)) {
		v = co__under_valgrind() ? 2 : 1;
		atomic_store_explicit(&known, v, memory_order_relaxed);
	}
	return v == 2;
}

/* valgrind 3.19 holds its lock through io_uring_enter: no other thread of
 * the process runs while this one waits there, not even the one that
 * would stop or wake it. With nothing in flight the engine waits in ppoll
 * instead, which valgrind knows (co__engine_idle_sleep, above); with I/O
 * in flight it waits in the native path's io_uring_enter (so callgrind
 * counts that path, plus the timeout argument) but for a slice at most,
 * and yields valgrind's lock when a slice ends with nothing. */
static int valgrind_sleep(co_engine *e, uint64_t ns, int idle)
{
	static const struct __kernel_timespec slice = { 0, VALGRIND_SLICE_NS };
	struct __kernel_timespec ts = slice;
	int sliced = ns == 0 || ns > VALGRIND_SLICE_NS, ret;

	if (idle)
		return co__engine_idle_sleep(e, ns);
	if (!sliced)
		co__ns_to_ts(&ts, ns);
	ret = enter_wait(e, &ts);
	if (sliced && ret == -ETIME) {
		sched_yield(); /* valgrind hands its lock on here */
		ret = 0;
	}
	return ret;
}

/* Under valgrind, the fast sleep's limit: a slice (then a yield). */
static const struct __kernel_timespec valgrind_slice = { 0, VALGRIND_SLICE_NS };
static const struct io_uring_getevents_arg valgrind_arg = {
	.ts = (uint64_t)(uintptr_t)&valgrind_slice
};

/* At the first run, once the ring fd is registered (registered: what
 * io_uring_register_ring_fd answered was 1; liburing then enters with its
 * index, ring->enter_ring_fd, as the engine does) or not: the loop's fast
 * sleep (co__engine_sleep_now) enters with these, and enter_wait with
 * REGISTERED_RING from enter_flags. Where the kernel takes no timeout
 * argument or its own thread submits, the fast sleep is liburing's calls
 * (enter_fd -1). */
void co__engine_enter_setup(co_engine *e, int registered)
{
	struct io_uring *ring = &e->ring;
	int slice = under_valgrind();

	e->enter_fd = -1;
	e->enter_flags = IORING_ENTER_GETEVENTS | (registered ? IORING_ENTER_REGISTERED_RING : 0);
	if ((ring->flags & IORING_SETUP_SQPOLL) || (slice && !(ring->features & IORING_FEAT_EXT_ARG)))
		return;
	e->enter_fd = ring->enter_ring_fd;
	e->enter_arg = NULL;
	e->enter_argsz = _NSIG / 8;
	if (slice) {
		e->enter_flags |= IORING_ENTER_EXT_ARG;
		e->enter_arg = &valgrind_arg;
		e->enter_argsz = sizeof valgrind_arg;
	}
}

/* The fast sleep's io_uring_enter ended with -ETIME: under valgrind a
 * slice ran out (valgrind hands its lock on at the yield); 0 either way
 * (natively it never waits with a limit). */
int co__engine_slice_end(co_engine *e)
{
	if (e->enter_arg != NULL)
		sched_yield();
	return 0;
}

/*
 * Sleep in the kernel until a completion arrives (submitting what is
 * queued in the same call), unless something changed since the turn began
 * (snap). epoch says it all: the loop comes here with its own queues
 * empty (it just looked; local_n, two instructions, is looked at again
 * as a guard), and every push onto the lists other threads fill is
 * followed by a bump of epoch, then, from another thread, a look at
 * sleeping (invariant 1: that thread then wakes us, or we see the bump).
 * With ns > 0 it returns -ETIME
 * when nothing came in time (under valgrind, 0 after a slice: the loop
 * then turns again).
 */
int co__engine_sleep(co_engine *e, unsigned snap, uint64_t ns, int idle)
{
	int ret;

	/* Idle: the scheduler may count it quiet (co__engine_quiet_set looks again that
	 * nothing changed since snap). Only now, after any poll: a hand-off
	 * that a poll catches costs no write to the scheduler's count. */
	if (idle)
		co__engine_quiet_set(e, snap);
	if (!co__engine_sleep_begin(e, snap, 0))
		return 0;
	if (co__unlikely(under_valgrind()))
		return engine_slept(e, valgrind_sleep(e, ns, idle));
	if (ns) {
		struct __kernel_timespec ts;

		co__ns_to_ts(&ts, ns);
		ret = enter_wait(e, &ts);
	} else {
		ret = enter_wait(e, NULL);
	}
	return engine_slept(e, ret);
}

int co__engine_sleeping(co_engine *e)
{
	return atomic_load_explicit(&e->sleeping, memory_order_relaxed);
}
