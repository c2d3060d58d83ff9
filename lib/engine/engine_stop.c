/* SPDX-License-Identifier: MIT */
/*
 * The stop (docs/engine.md, "Lifecycle, stop and idle"; docs/design.md,
 * "Stop modes"): asking it from any thread, and on the engine's thread at
 * each turn: a timed drain that becomes a cancel, the cancel of everything
 * in flight, asked again while anything is, and the grace.
 */

#include <errno.h>

#include "common/clock.h"
#include "engine_stop.h"
#include "engine_state.h"
#include "engine_sqe.h"
#include "engine_visit.h"
#include "engine_stop_list.h"

/* Ask e to stop (any thread): refuse spawns from now on, raise the mode,
 * and, for a timed drain, keep the earliest time asked for. */
static int stop(co_engine *e, int mode, uint64_t at)
{
	int remote, cur;

	if (e == NULL || (mode != CO_STOP_DRAIN && mode != CO_STOP_CANCEL))
		return -EINVAL;
	if (co__engine_call_begin(e, &remote) < 0) /* before the engine can see the stop and leave */
		return -EINVAL;
	atomic_fetch_or_explicit(&e->live, CO__LIVE_STOPPED, memory_order_acq_rel);
	if (at) { /* the earliest time asked for */
		uint64_t cur_at = atomic_load_explicit(&e->stop_at, memory_order_relaxed);
		while ((cur_at == 0 || at < cur_at) &&
		       !atomic_compare_exchange_weak(&e->stop_at, &cur_at, at))
			;
	}
	/* the mode only rises: none < drain < cancel */
	cur = atomic_load_explicit(&e->stop_mode, memory_order_relaxed);
	while (cur < mode && !atomic_compare_exchange_weak(&e->stop_mode, &cur, mode))
		;
	co__engine_transition(e, CO__T_STOP);
	if (!remote) /* the owner may be about to sleep in this turn */
		atomic_fetch_add_explicit(&e->epoch, 1, memory_order_seq_cst);
	co__engine_visit_end(e, remote);
	return 0;
}

int co_engine_stop(co_engine *e, int mode)
{
	return stop(e, mode, 0);
}

int co_engine_stop_timed(co_engine *e, uint64_t ns)
{
	uint64_t at = co__deadline_after(ns); /* UINT64_MAX: it never becomes a cancel */

	return stop(e, CO_STOP_DRAIN, at ? at : 1);
}

/* Ask the kernel to cancel every operation in flight (fire and forget). */
static void cancel_all(co_engine *e)
{
	struct io_uring_sqe *sqe = co__engine_sqe_get(e);

	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
	io_uring_sqe_set_data(sqe, NULL);
}

/*
 * A cancel stop begins (owner thread, once): cancel every operation in
 * flight and every listed parked wait. From then on each frame the loop
 * resumes is marked cancelled, and a cancelled frame's later waits end at
 * once: sync waits refuse to park (lib/waiter/waiter.c), and an I/O await asks the
 * kernel to cancel its operation right after it (lib/io/io.c), behind
 * anything that completes at once, like a close on the way out, and asks
 * again until the kernel ends it.
 */
static void cancel_begin(co_engine *e)
{
	uint64_t now = co__now_ns();

	e->cancel_since = now ? now : 1;
	e->cancel_again = co__time_add(now, CO__CANCEL_AGAIN_NS);
	cancel_all(e);
	co__engine_stop_list_cancel_all(e);
}

/*
 * A cancel stop with operations in flight: every CO__CANCEL_AGAIN_NS, ask
 * the kernel again to cancel them all, and sleep no longer than that
 * (*wait_ns). The first ask reaches every operation the kernel has on a
 * list, but not one between two of its attempts (a retry queued to run,
 * a hand-over to an io-wq worker) nor one that starts after it (behind a
 * hard link): such an operation ends at the next ask, which finds it
 * waiting, or tells the io-wq worker that runs it (a signal, which ends
 * the wait of a socket or a pipe).
 */
static void cancel_again(co_engine *e, uint64_t *wait_ns)
{
	uint64_t now = co__now_ns(), left;

	if (now >= e->cancel_again) {
		cancel_all(e);
		e->cancel_again = co__time_add(now, CO__CANCEL_AGAIN_NS);
	}
	left = e->cancel_again - now;
	if (*wait_ns == 0 || left < *wait_ns)
		*wait_ns = left;
}

/* The stop state at the start of a turn: escalates a timed drain to a
 * cancel when its time came, begins the cancel once, and returns the
 * time after which frames still running are finished for them (0: no
 * cancel stop), and in *wait_ns how long a drain may still sleep. */
uint64_t co__engine_stop_turn_slow(co_engine *e, int mode, uint64_t *wait_ns)
{
	uint64_t at;

	if (mode == CO_STOP_DRAIN) {
		/* Every frame finished: what is still in flight belongs to no
		 * frame (an armed co_acceptor, an SQE of the user's own with a
		 * callback) and would keep the run for good (invariant 4):
		 * asked to cancel, at every turn while it lasts (a turn comes
		 * only with a completion). */
		if (e->inflight != 0 && CO__LIVE_COUNT(atomic_load_explicit(&e->live, memory_order_acquire)) == 0)
			cancel_all(e);
		at = atomic_load_explicit(&e->stop_at, memory_order_relaxed);
		if (at == 0)
			return 0;
		uint64_t now = co__now_ns();
		if (now < at) {
			*wait_ns = at - now;
			return 0;
		}
		int drain = CO_STOP_DRAIN;
		atomic_compare_exchange_strong(&e->stop_mode, &drain, CO_STOP_CANCEL);
	}
	if (e->cancel_since == 0)
		cancel_begin(e);
	at = co__time_add(e->cancel_since, e->cancel_grace); /* UINT64_MAX: no end */
	if (co__unlikely(co__engine_stop_list_lingering(e)) && at != UINT64_MAX) {
		uint64_t now = co__now_ns();

		if (now < at)
			*wait_ns = at - now; /* wake when the grace runs out */
		else
			co__engine_stop_list_give_up_all(e);
	}
	if (e->inflight != 0)
		cancel_again(e, wait_ns);
	return at;
}
