/* SPDX-License-Identifier: MIT */
/*
 * The loop (docs/engine.md, "The loop", "Turns and ticks"): each turn
 * takes in what other threads sent, runs the ready frames, submits, waits
 * and dispatches the completions; a tick is one turn that never sleeps.
 * The hot path: what it calls for every frame is inline in the headers of
 * the files it calls (engine_queue.h, engine_stop.h, engine_wait.h),
 * and the turn's own steps (run_ready, reap_all) are inline in the loop:
 * as calls, their saved registers cost a turn some 35 instructions.
 */

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <unistd.h>

#include "common/clock.h"
#include "engine_loop.h"
#include "engine_state.h"
#include "engine_frames.h"
#include "engine_queue.h"
#include "engine_sqe.h"
#include "engine_visit.h"
#include "engine_cancel.h"
#include "engine_stop.h"
#include "engine_turn.h"
#include "engine_view.h"
#include "engine_wait.h"
#include "common/thread_id.h"
#include "common/fault.h"

static void wake_arm(co_engine *e)
{
	struct io_uring_sqe *sqe = co__engine_sqe_get(e);

	io_uring_prep_read(sqe, e->wake_fd, &e->wake_val, sizeof e->wake_val, 0);
	io_uring_sqe_set_data(sqe, &e->wake_info);
	e->wake_armed = 1;
}

/* The eventfd read completed: a waker wrote, or a cancel-all hit it. */
void co__engine_wake_done(co_engine *e, co_io_info *info, int res, unsigned cqe_flags, unsigned tag)
{
	(void)info;
	(void)res;
	(void)cqe_flags;
	(void)tag;
	e->wake_armed = 0;
	e->inflight++; /* reap counted this CQE out; the wake read is not I/O */
	/* Clear before re-arming: a waker that sees 0 writes again, and the
	 * new read will see that write. */
	atomic_store_explicit(&e->wake_pending, 0, memory_order_release);
	if (e->wake_fd >= 0)
		wake_arm(e);
}

/* From the owner thread, reap the armed eventfd read before the ring goes,
 * so the kernel holds no pointer into *e (invariant 6). From another
 * thread, closing the ring cancels it. */
void co__engine_wake_disarm(co_engine *e)
{
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;

	if (!e->wake_armed || !e->has_owner || e->owner != co__thread_id())
		return;
	sqe = co__engine_sqe_get(e);
	io_uring_prep_cancel(sqe, &e->wake_info, 0);
	io_uring_sqe_set_data(sqe, NULL);
	io_uring_submit(&e->ring);
	close(e->wake_fd);
	e->wake_fd = -1; /* co__engine_wake_done must not re-arm */
	while (e->wake_armed && io_uring_wait_cqe(&e->ring, &cqe) == 0) {
		if (io_uring_cqe_get_data(cqe) == &e->wake_info)
			e->wake_armed = 0;
		io_uring_cqe_seen(&e->ring, cqe);
	}
}

/* After a frame's resume, with SQEs that should not wait for the turn's
 * end: a read or write prepared (submit_batch 0), or submit_batch of any
 * kind waiting. */
static void submit_soon(co_engine *e)
{
	unsigned want = e->submit_batch ? e->submit_batch : 1;

	e->submit_soon = e->submit_batch != 0; /* with submit_batch, after every resume */
	if (io_uring_sq_ready(&e->ring) >= want) {
		io_uring_submit(&e->ring);
		e->last_info = NULL; /* its SQE is gone: nothing may link to it */
	}
}

/* Resume root f, which e runs (from the ready queue or a completion
 * just dispatched): the count, the view's stamp, the trace, and where a
 * yield or an end goes. roam: e->roam != NULL, a constant at each call
 * (the copy for engines without roam stores nothing more per resume). */
static co__inline void resume_one(co_engine *e, co_frame *f, int roam)
{
	e->stats.resumed++;
#ifdef CO_WITH_VIEW
	e->view[f->view_slot].since = e->turn_stamp; /* slot 0, unlisted: the sink */
	e->running = f; /* a view from inside the frame (or its on_done) */
#endif
	CO__TRACE_RESUME(e, f);
	/* With roam, until its resume has returned here, a waker on another
	 * thread must not take f away (co__engine_wake_op): its awaiter and
	 * the trace may still read it. */
	if (roam)
		atomic_store_explicit(&e->resuming, f, memory_order_release);
	switch (co_resume(f)) {
	case CO_YIELDED:
		CO__TRACE_YIELD(e, f);
		co__engine_later(e, f); /* the next turn runs it */
		break;
	case CO_DONE:
		co__engine_finish_frame(e, f);
		break;
	default: /* CO_WAITING: its awaiter wakes it */
		CO__TRACE_WAIT(e, f);
		break;
	}
	if (roam)
		atomic_store_explicit(&e->resuming, NULL, memory_order_release);
	/* opts.submit_batch: the frame is suspended, so whatever it prepared
	 * (an operation and a timeout linked to it) is whole */
	if (co__unlikely(e->submit_soon))
		submit_soon(e);
}

/* Resume up to max ready frames; a yield waits for the next turn (the
 * later list). Under a cancel stop, every frame resumed is marked
 * cancelled first. */
static co__inline co_frame *ready_pop(co_engine *e, int steal)
{
	return steal ? co__engine_ready_pop(e) : co__engine_local_pop(e);
}

static co__inline void run_ready(co_engine *e, uint64_t cancel_deadline, unsigned max, int roam,
				 int steal)
{
	co_frame *f;

	if (co__likely(cancel_deadline == 0)) {
		/* the loop as a server runs it: no test of the stop per frame */
		for (unsigned n = 0; n < max && (f = ready_pop(e, steal)) != NULL; n++)
			resume_one(e, f, roam);
	} else {
		for (unsigned n = 0; n < max && (f = ready_pop(e, steal)) != NULL; n++) {
			if (f->label == 0 || co__now_ns() >= cancel_deadline) {
				co__engine_abandon(e, f);
				continue;
			}
			CO__OR_BYTE(&f->cancel, CO__CANCEL_ASKED);
			resume_one(e, f, roam);
		}
	}
#ifdef CO_WITH_VIEW
	e->running = NULL; /* between two resumes it names the frame that ran,
	                      which a view from its on_done no longer lists */
#endif
}

/*
 * Dispatch the CQEs in the ring, in one pass: the tail is read once (a
 * callback may add CQEs, an early submit that completes inline: the next
 * turn takes them; a wait for one returns at once while the CQ holds
 * any). A CQE without IORING_CQE_F_MORE is an operation's last: it leaves
 * the in-flight count (the wake read, which never entered it, puts it back
 * in co__engine_wake_done).
 * user_data 0-3 is a fire-and-forget SQE (no info, a tag at most) and
 * LIBURING_UDATA_TIMEOUT (all ones) liburing's own timeout on kernels
 * without EXT_ARG: ud + 1 <= CO_IO_TAG_MASK + 1 tells both in one test.
 *
 * direct (a constant at each call: the loop's pass on an engine that
 * thieves do not take from, outside a cancel stop): the first frame a CQE
 * of the pass wakes (co__engine_wake_here) while nothing is queued is kept
 * aside and resumed at the pass's end, instead of a push onto the queue
 * and a pop off it at the next turn. It was the first frame ready, and
 * what became ready after it is queued, so the order is the queue's; and
 * every CQE of the pass is in before it runs, so a frame with more than
 * one due (a stream's data beside its send) finds them all, as from the
 * queue.
 */
static co__inline unsigned reap(co_engine *e, int direct)
{
	struct io_uring_cq *cq = &e->ring.cq;
	unsigned head = *cq->khead, tail = io_uring_smp_load_acquire(cq->ktail), n = tail - head;
	unsigned mask = cq->ring_mask, shift = e->cqe_shift;

	if (n == 0)
		return 0;
	if (direct)
		e->direct = CO__DIRECT_OPEN;
	do {
		struct io_uring_cqe *cqe =
			(struct io_uring_cqe *)((char *)cq->cqes + ((size_t)(head & mask) << shift));
		uintptr_t ud = (uintptr_t)cqe->user_data;
		co_io_info *info = (co_io_info *)(ud & ~(uintptr_t)CO_IO_TAG_MASK);

		if (co__unlikely(ud + 1 <= CO_IO_TAG_MASK + 1))
			continue;
		if (co__likely(!(cqe->flags & IORING_CQE_F_MORE)))
			co__inflight_drop(e, info);
		info->cb(e, info, cqe->res, cqe->flags, (unsigned)(ud & CO_IO_TAG_MASK));
	} while (++head != tail);
	/* release: the kernel may reuse the slots once it sees the head */
	io_uring_smp_store_release(cq->khead, head);
	e->stats.cqes += n;
	if (direct) {
		co_frame *f = e->direct;

		e->direct = NULL; /* closed: what f wakes is queued */
		if ((uintptr_t)f > (uintptr_t)CO__DIRECT_OPEN) {
			resume_one(e, f, 0);
#ifdef CO_WITH_VIEW
			e->running = NULL;
#endif
		}
	}
	return n;
}

static co__inline void reap_all(co_engine *e, int direct)
{
	/* With FEAT_NODROP the kernel keeps what did not fit in the CQ; flush
	 * it in as soon as there is room. It keeps a completion aside only
	 * while the CQ is full, and only the walk empties it: the walk after
	 * one was kept finds the CQ full, so a walk that did not need not look
	 * at the flag (the kernel's wait flushes what it kept too). */
	while (co__unlikely(reap(e, direct) == e->ring.cq.ring_entries) &&
	       io_uring_cq_has_overflow(&e->ring)) {
		e->stats.cq_overflow++;
		io_uring_get_events(&e->ring);
	}
}

static int register_ring_fd(struct io_uring *ring)
{
	int err = co__fault_hit(CO__FAULT_RING_FD);

	return err ? -err : io_uring_register_ring_fd(ring);
}

static int first_run(co_engine *e)
{
	int ret;

	/* io_uring_enable_rings is declared but not exported by liburing 2.3.
	 * A ring set up where registering is refused was made enabled
	 * (engine_setup.c). A refusal here changes nothing: no owner yet, so
	 * the next run (any thread's) tries again. */
	if (e->ring.flags & IORING_SETUP_R_DISABLED) {
		ret = co__engine_register(e, IORING_REGISTER_ENABLE_RINGS, NULL, 0);
		if (ret < 0)
			return ret;
	}
	e->owner = co__thread_id();
	atomic_store_explicit(&e->has_owner, 1, memory_order_release); /* after owner */
	/* optional: saves an fd lookup per enter; 1 when the fd is registered */
	co__engine_enter_setup(e, register_ring_fd(&e->ring) == 1);
	wake_arm(e);
	ret = io_uring_submit(&e->ring);
	return ret < 0 ? ret : 0;
}

/* snap: the epoch read when the turn began. Every push onto the lists
 * other threads fill (inbox, posts, cancels) is followed by a bump of
 * epoch, so the lists need a look only when it moved since the last look;
 * a push whose bump comes after snap is seen by co__engine_wait, which then
 * does not sleep, and by the next turn. */
static co__inline uint64_t turn_begin(co_engine *e, unsigned snap, uint64_t *wait_ns)
{
	co__engine_quiet_clear(e);
	e->stats.turns++;
	if (co__unlikely(snap != e->seen_epoch)) {
		e->seen_epoch = snap;
#ifdef CO_WITH_VIEW
		if (atomic_load_explicit(&e->view_req, memory_order_relaxed) != NULL)
			co__engine_view_answer(e);
#endif
		if (!co__lifo_empty(&e->posts))
			co__engine_run_posts(e);
		if (!co__lifo_empty(&e->inbox))
			co__engine_inbox_drain(e);
		if (!co__lifo_empty(&e->cancels))
			co__engine_run_cancels(e);
	}
	return co__engine_stop_turn(e, wait_ns);
}

/* The second half's start: the frames the last turn left for this one
 * (yields, co_next_turn) join the ready queue, behind what is there. */
static co__inline void turn_ready(co_engine *e)
{
	if (co__unlikely(((uintptr_t)e->later_head | (uintptr_t)e->turns_head) != 0))
		co__engine_later_take(e);
	if (co__unlikely(e->local_n != 0) && co__engine_stealable(e))
		co__engine_ring_refill(e);
}

/* The SQEs handed out so far went to the kernel (a submit, a wait): none
 * is there for a timeout to link to. What runs next (the completions'
 * frames, the next turn's) is stamped now, for a view. */
static co__inline void after_submit(co_engine *e)
{
	e->last_info = NULL;
#ifdef CO_WITH_VIEW
	e->turn_stamp = co__stamp(); /* when its frames last ran */
#endif
}

/* A turn with nothing to do but wait for the I/O in flight: no list other
 * threads fill has moved (snap), no frame is queued or left for this
 * turn, no stop was asked. Such a turn, on an engine thieves do not take
 * from, goes straight to the wait, as the turn's steps would after
 * finding nothing (a server with one connection busy takes it at every
 * turn). The quiet flag needs no look: it is set only while nothing is in
 * flight (co__engine_quiet_set, on an idle engine), and what gives the
 * engine work again moves epoch or queues a frame, so the turn after it
 * takes the whole path, which clears the flag. */
static co__inline int quick_turn(co_engine *e, unsigned snap)
{
	return snap == e->seen_epoch && e->local_n == 0 && e->inflight != 0 &&
	       ((uintptr_t)e->later_head | (uintptr_t)e->turns_head) == 0 &&
	       atomic_load_explicit(&e->stop_mode, memory_order_acquire) == CO__STOP_NONE;
}

/* The loop, for an engine thieves take from (steal 1) or not (0): a
 * constant at each call, since a scheduler sets it before the first run;
 * without stealing the turn's checks of the ring, of roaming and of the
 * walk fold away. */
static co__inline int loop_as(co_engine *e, int mode, int steal)
{
	int ret = 0;

	after_submit(e); /* nothing is prepared yet */

	for (;;) {
		unsigned snap = atomic_load_explicit(&e->epoch, memory_order_seq_cst);
		uint64_t wait_ns, cancel_deadline;

		if (!steal && co__likely(quick_turn(e, snap))) {
			/* co__engine_wait, with I/O in flight and no limit;
			 * quick_turn just found no frame queued (only this
			 * thread queues to local_n) */
			e->stats.turns++;
			cancel_deadline = 0;
			ret = co__likely(e->enter_fd >= 0) ? co__engine_sleep_now(e, snap, 1)
							   : co__engine_sleep(e, snap, 0, 0);
		} else {
			cancel_deadline = turn_begin(e, snap, &wait_ns);
			turn_ready(e);
			if (steal && co__unlikely(e->roam != NULL)) /* roam: stealing groups only */
				run_ready(e, cancel_deadline, e->batch, 1, steal);
			else
				run_ready(e, cancel_deadline, e->batch, 0, steal);
			if (e->local_n != 0 ||
			    ((uintptr_t)e->later_head | (uintptr_t)e->turns_head) != 0 ||
			    (steal && co__engine_ring_size(e) != 0)) {
				/* Busy: flush SQEs and pick up completions
				 * without waiting; liburing enters the kernel
				 * only if there is something to submit or
				 * completions to run. */
				if (e->hooks && e->hooks->backlog && co__engine_ring_size(e) > 1)
					e->hooks->backlog(e, e->hook_arg);
				ret = io_uring_submit(&e->ring);
			} else if (!steal &&
				   (e->inflight != 0 ||
				    atomic_load_explicit(&e->parked, memory_order_acquire) != 0)) {
				/* The common wait, one syscall: submit + wait. What
				 * other threads sent meanwhile (inbox, posts,
				 * cancels) is seen by co__engine_wait, which then
				 * does not sleep. */
				ret = co__engine_wait(e, snap, wait_ns, 0);
			} else if (co__engine_ready_nonempty(e)) {
				ret = io_uring_submit(&e->ring); /* other threads sent work */
			} else if (steal && e->hooks->steal(e, e->hook_arg) > 0) {
				ret = io_uring_submit(&e->ring); /* run the stolen frames next */
			} else if (!co__engine_idle(e)) {
				ret = co__engine_wait(e, snap, wait_ns, 0);
			} else {
				unsigned live = atomic_load_explicit(&e->live, memory_order_seq_cst);
				int stopping =
					(live & CO__LIVE_STOPPED) || mode == CO_RUN_UNTIL_IDLE;

				if (CO__LIVE_COUNT(live) == 0 && stopping)
					break; /* every frame finished */
				if (co__engine_visitor_inside(e)) {
					sched_yield(); /* its change is about to land */
					continue;
				}
				if (co__engine_unchanged(e, snap) && CO__LIVE_COUNT(live) != 0 &&
				    stopping) {
					e->stuck = CO__LIVE_COUNT(live);
					ret = -EDEADLK;
					break;
				}
				/* a visitor wakes us; quiet once it goes to sleep */
				ret = co__engine_wait(e, snap, wait_ns, 1);
			}
		}
		if (co__unlikely(ret < 0) && ret != -EINTR && ret != -ETIME && ret != -EAGAIN &&
		    ret != -EBUSY)
			break;
		ret = 0;
		after_submit(e);
		/* The first frame the walk's completions wake runs at its
		 * end (reap's direct), unless thieves may take frames (the
		 * queue is the ring they see) or a cancel stop runs (it marks
		 * every frame it resumes: run_ready). */
		if (!steal && co__likely(cancel_deadline == 0))
			reap_all(e, 1);
		else
			reap_all(e, 0);
	}
	return ret;
}

static int loop(co_engine *e, int mode)
{
	return co__engine_stealable(e) ? loop_as(e, mode, 1) : loop_as(e, mode, 0);
}

/* Frames in the ready queue (owner thread). */
static unsigned ready_count(co_engine *e)
{
	return e->local_n + (co__engine_stealable(e) ? co__engine_ring_size(e) : 0);
}

/* What a tick resumes at most: the frames ready now and batch more (those
 * they wake), the sum held at UINT_MAX (a batch near it would wrap it to
 * fewer than are ready). */
static unsigned tick_max(unsigned ready, unsigned batch)
{
	return ready > UINT_MAX - batch ? UINT_MAX : ready + batch;
}

/*
 * One turn that never sleeps (co_engine_tick). It takes in the completions
 * that are there when it begins, then runs the frames ready at that moment,
 * each once, then the frames those wake (up to opts.batch more); a frame
 * that yields or waits for the next turn is left for the next tick, and
 * the tick's I/O is submitted at its end.
 */
static int tick(co_engine *e)
{
	unsigned snap = atomic_load_explicit(&e->epoch, memory_order_seq_cst);
	uint64_t resumed = e->stats.resumed, wait_ns, cancel_deadline;
	int ret = 0;

	cancel_deadline = turn_begin(e, snap, &wait_ns);
	after_submit(e); /* the last tick ended with a submit */
	if (e->inflight)
		ret = io_uring_get_events(&e->ring); /* runs the kernel's completion work */
	reap_all(e, 0); /* its frames run below, after those ready before */
	turn_ready(e);
	run_ready(e, cancel_deadline, tick_max(ready_count(e), e->batch), e->roam != NULL, 1);
	if (ret >= 0 || ret == -EINTR || ret == -EAGAIN || ret == -EBUSY)
		ret = io_uring_submit(&e->ring);
	if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
		return ret;
	/* for other threads (co__engine_io_due): before the quiet flag, which
	 * publishes it to a scheduler's look, and the state's change */
	atomic_store_explicit(&e->io_due, e->inflight, memory_order_relaxed);
	if (co__engine_idle(e) && !co__engine_visitor_inside(e) && co__engine_unchanged(e, snap)) {
		unsigned live = atomic_load_explicit(&e->live, memory_order_seq_cst);

		/* After a stop, frames left that nothing can wake: the run's
		 * verdict (e->stuck), without -EDEADLK (a tick never waits) */
		if ((live & CO__LIVE_STOPPED) && CO__LIVE_COUNT(live) != 0)
			e->stuck = CO__LIVE_COUNT(live);
		co__engine_quiet_set(e, snap);
		co__fault_point(CO__POINT_TICK_QUIET); /* tests: a scheduler looks now */
	}
	return (int)(e->stats.resumed - resumed);
}

/* Start a run or a tick on the calling thread: 0, or the call's error. */
static int enter(co_engine *e)
{
	int ret;

	if (atomic_load_explicit(&e->state, memory_order_acquire) == CO_ENGINE_DEAD)
		return -EINVAL; /* DYING: the take below waits for the answer */
	if (co__tls_engine != NULL)
		return -EBUSY; /* another engine runs on this thread */
	/* Not the owner: refused without taking e, which would make the
	 * owner's own run or tick meanwhile answer -EBUSY (-EBUSY while the
	 * owner runs it, as the take would say). A thread that comes before
	 * the first run takes e, and is told below. */
	if (atomic_load_explicit(&e->has_owner, memory_order_acquire) &&
	    e->owner != co__thread_id())
		return co_engine_state(e) == CO_ENGINE_RUNNING ? -EBUSY : -EPERM;
	ret = co__engine_take(e, CO__T_RUN);
	co__fault_point(CO__POINT_RUN_TAKEN); /* tests: the owner's tick comes now */
	if (ret < 0)
		return ret;
	/* Only one thread gets here at a time: owner is safe to read. */
	if (e->has_owner && e->owner != co__thread_id()) {
		co__engine_transition(e, CO__T_RUN_END);
		return -EPERM;
	}
	if (!e->has_owner) {
		ret = first_run(e);
		if (ret < 0) {
			co__engine_transition(e, CO__T_RUN_END);
			return ret;
		}
	}
	co__tls_engine = e;
	/* the first turn looks at the lists whatever epoch says */
	e->seen_epoch = atomic_load_explicit(&e->epoch, memory_order_relaxed) - 1;
	return 0;
}

static void leave(co_engine *e)
{
#ifdef CO_WITH_VIEW
	/* A view's request published since the last turn: no turn comes
	 * after this one, so it is answered now (not at the viewer's next
	 * look, which a destroy would have to wait for). */
	if (atomic_load_explicit(&e->view_req, memory_order_acquire) != NULL)
		co__engine_view_answer(e);
#endif
	e->stats.wake_writes = atomic_load_explicit(&e->wake_writes, memory_order_relaxed);
	io_uring_submit(&e->ring); /* nothing prepared stays unsubmitted */
	co__tls_engine = NULL;
	co__engine_transition(e, CO__T_RUN_END);
}

int co_engine_run(co_engine *e, int mode)
{
	int ret;

	if (e == NULL || (mode != CO_RUN_UNTIL_IDLE && mode != CO_RUN_UNTIL_STOP))
		return -EINVAL;
	ret = enter(e);
	if (ret < 0)
		return ret;
	e->stuck = 0;
	CO__TRACE_RUN(e, 1);
	ret = loop(e, mode);
	co__engine_quiet_clear(e);
	CO__TRACE_RUN(e, 0);
	leave(e);
	return ret;
}

int co__engine_tick_as(co_engine *e, void (*entered)(void *arg), void *arg)
{
	int ret;

	if (e == NULL)
		return -EINVAL;
	ret = enter(e);
	if (ret < 0)
		return ret;
	if (entered)
		entered(arg);
	e->stuck = 0; /* as a run: only the last run's verdict may stand */
	ret = tick(e);
	leave(e);
	return ret;
}

int co_engine_tick(co_engine *e)
{
	return co__engine_tick_as(e, NULL, NULL);
}
