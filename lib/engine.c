/* SPDX-License-Identifier: MIT */
/*
 * The per-thread engine: ready queue (ck_ring MPMC + ordered overflow),
 * io_uring, wake-up, loop. See docs/engine.md for the loop and the
 * threading rule.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <coring/engine.h>
#include "internal.h"

/* The live count and the STOPPED bit share one word, so that a spawn is
 * either counted before the stop (and runs) or refused: never both. */
#define LIVE_STOPPED 0x80000000u
#define LIVE_COUNT(v) ((v) & ~LIVE_STOPPED)

/* A frame that nothing wakes within this grace period, while the engine
 * is otherwise idle, makes co_engine_run return -EDEADLK. */
#define DEADLOCK_GRACE_NS 50000000LL

int (*co__uring_setup_hook)(unsigned entries, struct io_uring *ring, struct io_uring_params *p);

/* The engine running on this thread; lib/io.c reads it directly (internal.h)
 * rather than through co_engine_current's PLT call. */
_Thread_local co_engine *co__tls_engine __attribute__((tls_model("initial-exec")));
#define co__current co__tls_engine

co_engine *co_engine_current(void)
{
	return co__current;
}

/* ------------------------------------------------------------------------ */
/* Ready queue                                                              */
/* ------------------------------------------------------------------------ */

CO_NO_TSAN static int ring_push(co_engine *e, co_frame *f)
{
	int ok;

	co__hb_release(f); /* pairs with ring_pop's acquire of the same frame */
	co__tsan_ignore_begin();
	ok = ck_ring_enqueue_spmc(&e->ready, e->ready_buf, f); /* the owner only */
	co__tsan_ignore_end();
	return ok;
}

CO_NO_TSAN static co_frame *ring_pop(co_engine *e)
{
	void *p;
	int ok;

	co__tsan_ignore_begin();
	ok = ck_ring_dequeue_spmc(&e->ready, e->ready_buf, &p); /* owner and thieves */
	co__tsan_ignore_end();
	if (!ok)
		return NULL;
	co__hb_acquire(p);
	return p;
}

CO_NO_TSAN static unsigned ring_size(co_engine *e)
{
	unsigned n;

	co__tsan_ignore_begin();
	n = ck_ring_size(&e->ready);
	co__tsan_ignore_end();
	return n;
}

/*
 * The ready queue has three parts, so that no producer ever waits for
 * another (ck_ring's multi-producer enqueue makes a producer wait for every
 * earlier one to publish its slot: with more producers than CPUs, one
 * preempted producer stalled the rest for seconds, bench/xsubmit):
 *
 *   inbox  frames pushed by other threads: a lock-free stack through
 *          co_frame.next, one CAS per push; the owner takes it whole at
 *          the start of each turn and queues it oldest first;
 *   ring   the ck_ring, with the owner as its only producer (SPMC) and
 *          the owner and thieves as consumers; used when this engine may
 *          be stolen from, so that thieves see its ready frames;
 *   local  a plain FIFO through co_frame.next, owner only, no atomics: all
 *          of the queue when nobody steals (callgrind, echo_coring at 50
 *          connections: 662 -> 602 user instructions per request), and the
 *          overflow of a full ring otherwise (never a drop: DESIGN
 *          invariant 3). While it holds overflow, pushes go behind it.
 */
static void local_push(co_engine *e, co_frame *f)
{
	f->next = NULL;
	if (e->local_tail)
		e->local_tail->next = f;
	else
		e->local_head = f;
	e->local_tail = f;
	e->local_n++;
}

static co_frame *local_pop(co_engine *e)
{
	co_frame *f = e->local_head;

	if (f == NULL)
		return NULL;
	e->local_head = f->next;
	if (e->local_head == NULL)
		e->local_tail = NULL;
	e->local_n--;
	return f;
}

/* A frame made ready on the owner thread. */
static void owner_push(co_engine *e, co_frame *f)
{
	if (e->steal == NULL) {
		local_push(e, f);
		return;
	}
	if (co__likely(e->local_n == 0) && co__likely(ring_push(e, f)))
		return;
	local_push(e, f); /* the ring is full, or overflow is ahead of us */
	e->stats.spilled++;
}

/* Move overflow into the ring as it has room, oldest first (the ring's
 * frames are older still), so that thieves can reach it. */
static void ring_refill(co_engine *e)
{
	while (e->local_head && ring_push(e, e->local_head))
		local_pop(e);
}

/*
 * A lock-free stack, for the inbox of frames and for posts: any thread
 * pushes with one CAS and never waits for another; the owner takes all of
 * it at once. Nodes link through a pointer at offset `link` (memcpy: the
 * field is a co_frame * or a co_post *).
 */
static void *link_get(void *node, size_t link)
{
	void *p;

	memcpy(&p, (char *)node + link, sizeof p);
	return p;
}

static void link_set(void *node, size_t link, void *p)
{
	memcpy((char *)node + link, &p, sizeof p);
}

static void lifo_push(_Atomic(void *) *top, void *node, size_t link)
{
	void *head = atomic_load_explicit(top, memory_order_relaxed);

	do {
		link_set(node, link, head);
		/* release: what the pusher wrote is visible to the owner; pairs
		 * with the acquire exchange in lifo_take */
	} while (!atomic_compare_exchange_weak_explicit(top, &head, node, memory_order_release,
							memory_order_relaxed));
}

/* Take the whole stack, oldest first: each pusher's nodes in its order. */
static void *lifo_take(_Atomic(void *) *top, size_t link)
{
	void *n = atomic_exchange_explicit(top, NULL, memory_order_acquire), *fifo = NULL;

	while (n) { /* the stack is newest first: reverse it */
		void *next = link_get(n, link);
		link_set(n, link, fifo);
		fifo = n;
		n = next;
	}
	return fifo;
}

/* Queue what other threads pushed, oldest first. */
static void inbox_drain(co_engine *e)
{
	co_frame *f = lifo_take(&e->inbox, offsetof(co_frame, next)), *next;

	for (; f; f = next) {
		next = f->next; /* owner_push reuses the link */
		owner_push(e, f);
	}
}

static int inbox_pending(co_engine *e)
{
	return atomic_load_explicit(&e->inbox, memory_order_relaxed) != NULL;
}

/* The next frame to resume, on the owner thread. */
static co_frame *ready_pop(co_engine *e)
{
	co_frame *f;

	if (e->steal == NULL)
		return local_pop(e);
	f = ring_pop(e); /* older than any overflow */
	return f ? f : local_pop(e);
}

static int posts_pending(co_engine *e)
{
	return atomic_load_explicit(&e->posts, memory_order_relaxed) != NULL;
}

/* Frames to resume or posts to run: the loop has work without waiting.
 * Other threads' pushes are seen through the inbox (the Dekker check of
 * engine_wait reads it after its fence). */
static int ready_nonempty(co_engine *e)
{
	return e->local_n != 0 || ring_size(e) != 0 || inbox_pending(e) || posts_pending(e);
}

/* ------------------------------------------------------------------------ */
/* Wake-up                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * Called by another thread after it queued work or asked to stop. Pairs
 * with the engine's sleep check: the engine stores sleeping = 1, fences,
 * then looks at the queue and the stop flag; we changed those, fence, then
 * look at sleeping. One of the two sees the other's store (Dekker), so the
 * engine never sleeps on queued work. At most one eventfd write is on its
 * way at a time (wake_pending).
 */
static void engine_kick(co_engine *e)
{
	uint64_t one = 1;

	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load_explicit(&e->sleeping, memory_order_relaxed))
		return;
	if (atomic_exchange_explicit(&e->wake_pending, 1, memory_order_acq_rel))
		return;
	atomic_fetch_add_explicit(&e->wake_writes, 1, memory_order_relaxed);
	while (write(e->wake_fd, &one, sizeof one) < 0 && errno == EINTR)
		;
}

/*
 * Another thread is about to touch e. Once its frame is pushed, that frame
 * may run and finish and the engine may stop and be destroyed while the
 * thread is still kicking it: the visitor count makes destroy wait. The
 * increment precedes the push, which precedes everything that leads to
 * destroy, so destroy sees it.
 */
static void visit_begin(co_engine *e)
{
	atomic_fetch_add_explicit(&e->visitors, 1, memory_order_seq_cst);
}

static void visit_end(co_engine *e)
{
	atomic_fetch_sub_explicit(&e->visitors, 1, memory_order_release);
}

/* Bracket a change another thread makes to e (a push, a stop, an unpark):
 * counted as a visit before it, followed by a wake-up. Nothing to do on
 * the owner thread. */
static int remote_begin(co_engine *e)
{
	int remote = co__current != e;

	if (remote)
		visit_begin(e);
	return remote;
}

static void remote_end(co_engine *e, int remote)
{
	if (remote) {
		engine_kick(e);
		visit_end(e);
	}
}

/* co_runner.wake: a frame of this engine is runnable again. */
static void engine_wake(co_runner *s, co_frame *f)
{
	co_engine *e = (co_engine *)s;
	int remote = remote_begin(e);

	if (!remote) {
		owner_push(e, f); /* the hot path: no fence, no syscall */
		return;
	}
	lifo_push(&e->inbox, f, offsetof(co_frame, next));
	remote_end(e, remote);
}

static struct io_uring_sqe *sqe_get(co_engine *e)
{
	struct io_uring_sqe *sqe;

	while ((sqe = io_uring_get_sqe(&e->ring)) == NULL) {
		e->stats.sq_full++;
		io_uring_submit(&e->ring);
	}
	return sqe;
}

static void wake_arm(co_engine *e)
{
	struct io_uring_sqe *sqe = sqe_get(e);

	io_uring_prep_read(sqe, e->wake_fd, &e->wake_val, sizeof e->wake_val, 0);
	io_uring_sqe_set_data(sqe, &e->wake_info);
	e->wake_armed = 1;
}

/* The eventfd read completed: a waker wrote, or a cancel-all hit it. */
static void wake_done(co_io_info *info, int res, unsigned cqe_flags, unsigned tag)
{
	co_engine *e = co__container_of(info, co_engine, wake_info);

	(void)res;
	(void)cqe_flags;
	(void)tag;
	e->wake_armed = 0;
	/* Clear before re-arming: a waker that sees 0 writes again, and the
	 * new read will see that write. */
	atomic_store_explicit(&e->wake_pending, 0, memory_order_release);
	if (e->wake_fd >= 0)
		wake_arm(e);
}

/* ------------------------------------------------------------------------ */
/* Setup and teardown                                                       */
/* ------------------------------------------------------------------------ */

static int uring_setup(unsigned entries, struct io_uring *ring, struct io_uring_params *p)
{
	if (co__uring_setup_hook)
		return co__uring_setup_hook(entries, ring, p);
	return io_uring_queue_init_params(entries, ring, p);
}

/*
 * Create the ring disabled (enabled by the owner thread at its first run),
 * with the fastest task-run mode the kernel accepts: SINGLE_ISSUER |
 * DEFER_TASKRUN (measured 2x the echo rate of no flags), else COOP_TASKRUN,
 * else none.
 */
static int engine_ring_init(co_engine *e, const co_engine_opts *o)
{
	static const unsigned modes[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
		IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
		0,
	};
	int ret = -EINVAL;

	for (unsigned i = o->no_fast_flags ? 2 : 0; i < 3; i++) {
		struct io_uring_params p;

		memset(&p, 0, sizeof p);
		p.flags = IORING_SETUP_R_DISABLED | IORING_SETUP_CQSIZE | modes[i] | o->setup_flags;
		p.cq_entries = o->cq_entries;
		ret = uring_setup(o->sq_entries, &e->ring, &p);
		if (ret == -EINVAL)
			continue; /* an older kernel: try the next mode */
		if (ret < 0)
			return ret;
		if (i == 0)
			e->features |= CO_ENGINE_F_SINGLE_ISSUER;
		if (p.features & IORING_FEAT_NODROP)
			e->features |= CO_ENGINE_F_NODROP;
		return 0;
	}
	return ret;
}

int co_engine_init(co_engine *e, const co_engine_opts *opts)
{
	co_engine_opts o = { .ready_size = 4096, .sq_entries = 256, .batch = 256 };
	int ret;

	if (e == NULL)
		return -EINVAL;
	if (opts) {
		o = *opts;
		if (o.ready_size == 0)
			o.ready_size = 4096;
		if (o.sq_entries == 0)
			o.sq_entries = 256;
		if (o.batch == 0)
			o.batch = 256;
	}
	if (o.cq_entries == 0)
		o.cq_entries = 4 * o.sq_entries;
	if (o.ready_size < 2 || (o.ready_size & (o.ready_size - 1)) ||
	    o.cq_entries < o.sq_entries)
		return -EINVAL;

	memset(e, 0, sizeof *e);
	e->cancel_mark = ~(uint64_t)0; /* a cancel-stop cancels at least once */
	e->runner.wake = engine_wake;
	e->batch = o.batch;
	e->wake_fd = -1;
	e->wake_info.cb = wake_done;
	e->ready_buf = calloc(o.ready_size, sizeof *e->ready_buf);
	if (e->ready_buf == NULL)
		return -ENOMEM;
	ck_ring_init(&e->ready, o.ready_size);
	e->wake_fd = eventfd(0, EFD_CLOEXEC);
	if (e->wake_fd < 0) {
		ret = -errno;
		goto fail;
	}
	ret = engine_ring_init(e, &o);
	if (ret < 0)
		goto fail;
	e->ts = calloc(e->ring.sq.ring_entries, sizeof *e->ts);
	if (e->ts == NULL) {
		io_uring_queue_exit(&e->ring);
		ret = -ENOMEM;
		goto fail;
	}
	return 0;
fail:
	if (e->wake_fd >= 0)
		close(e->wake_fd);
	free(e->ready_buf);
	e->ready_buf = NULL;
	return ret;
}

int co_engine_destroy(co_engine *e)
{
	if (e == NULL || e->ready_buf == NULL)
		return -EINVAL;
	if (LIVE_COUNT(atomic_load(&e->live)) != 0 || posts_pending(e))
		return -EBUSY;
	while (atomic_load_explicit(&e->visitors, memory_order_acquire) != 0)
		sched_yield(); /* a waker is still returning from a kick */
	/* From the owner thread, reap the armed eventfd read before the ring
	 * goes, so the kernel holds no pointer into *e (invariant 6). */
	if (e->wake_armed && e->has_owner && pthread_equal(e->owner, pthread_self())) {
		struct io_uring_sqe *sqe = sqe_get(e);
		struct io_uring_cqe *cqe;

		io_uring_prep_cancel(sqe, &e->wake_info, 0);
		io_uring_sqe_set_data(sqe, NULL);
		io_uring_submit(&e->ring);
		close(e->wake_fd);
		e->wake_fd = -1; /* wake_done must not re-arm */
		while (e->wake_armed && io_uring_wait_cqe(&e->ring, &cqe) == 0) {
			co_io_info *info = io_uring_cqe_get_data(cqe);
			if (info == &e->wake_info)
				e->wake_armed = 0;
			io_uring_cqe_seen(&e->ring, cqe);
		}
	}
	io_uring_queue_exit(&e->ring);
	if (e->wake_fd >= 0)
		close(e->wake_fd);
	free(e->ready_buf);
	free(e->ts);
	e->ready_buf = NULL;
	e->ts = NULL;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Spawn, stop, park                                                        */
/* ------------------------------------------------------------------------ */

int co_engine_spawn(co_engine *e, co_frame *f)
{
	unsigned v;

	if (e == NULL || f == NULL || f->fn == NULL || f->parent != NULL || f->label != 0 ||
	    (f->state & (CO__ST_SPAWNED | CO__ST_DONE)) || e->ready_buf == NULL)
		return -EINVAL;
	v = atomic_load_explicit(&e->live, memory_order_relaxed);
	do {
		if (v & LIVE_STOPPED)
			return -ESHUTDOWN;
	} while (!atomic_compare_exchange_weak_explicit(&e->live, &v, v + 1, memory_order_acq_rel,
							memory_order_relaxed));
	f->state |= CO__ST_SPAWNED;
	f->runner = &e->runner;
	engine_wake(&e->runner, f);
	return 0;
}

int co_engine_stop(co_engine *e, int cancel_io)
{
	int remote;

	if (e == NULL || e->ready_buf == NULL)
		return -EINVAL;
	remote = remote_begin(e); /* before the engine can see the stop and leave */
	atomic_fetch_or_explicit(&e->live, LIVE_STOPPED, memory_order_acq_rel);
	if (cancel_io) {
		atomic_store_explicit(&e->stop, 2, memory_order_release);
	} else {
		int zero = 0;
		atomic_compare_exchange_strong(&e->stop, &zero, 1);
	}
	remote_end(e, remote);
	return 0;
}

int co_engine_park(co_engine *e)
{
	if (e == NULL || e->ready_buf == NULL)
		return -EINVAL;
	atomic_fetch_add_explicit(&e->parked, 1, memory_order_relaxed);
	return 0;
}

int co_engine_unpark(co_engine *e)
{
	int remote;

	if (e == NULL || e->ready_buf == NULL)
		return -EINVAL;
	remote = remote_begin(e);
	atomic_fetch_sub_explicit(&e->parked, 1, memory_order_release);
	/* The engine may now be idle: let it see that, whichever of unpark and
	 * the wake comes first. */
	remote_end(e, remote);
	return 0;
}

int co_engine_post(co_engine *e, co_post *p)
{
	int remote;

	if (e == NULL || e->ready_buf == NULL || p == NULL || p->fn == NULL)
		return -EINVAL;
	remote = remote_begin(e); /* once pushed, it may run, and e be destroyed */
	lifo_push(&e->posts, p, offsetof(co_post, next));
	remote_end(e, remote);
	return 0;
}

/* Run every post queued so far, oldest first. */
static void run_posts(co_engine *e)
{
	co_post *p = lifo_take(&e->posts, offsetof(co_post, next)), *next;

	for (; p; p = next) {
		next = p->next; /* before fn, which may free it */
		p->fn(p);
	}
}

static struct io_uring_sqe *sqe_tag(co_engine *e, struct io_uring_sqe *sqe, co_io_info *info,
				     unsigned tag)
{
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)info | (tag & 3));
	if (info) {
		e->inflight++;
		e->stats.ops++;
	}
	return sqe;
}

struct io_uring_sqe *co_engine_sqe(co_engine *e, co_io_info *info, unsigned tag)
{
	struct io_uring_sq *sq;
	unsigned tail;

	if (e == NULL || e != co__current)
		return NULL;
	/* Keep room for a linked timeout after this SQE, so a deadline never
	 * finds its chain cut by an early submit. The common case takes the
	 * slot in place (liburing's get_sqe with that room test folded in;
	 * callgrind: 602 -> 550 instructions per echo request). The acquire load of the
	 * head pairs with the kernel's release store after it consumed SQEs. */
	sq = &e->ring.sq;
	tail = sq->sqe_tail;
	if (co__likely(tail - io_uring_smp_load_acquire(sq->khead) + 2 <= sq->ring_entries)) {
		unsigned shift = (e->ring.flags & IORING_SETUP_SQE128) ? 1 : 0;
		e->last_sqe = &sq->sqes[(tail & sq->ring_mask) << shift];
		sq->sqe_tail = tail + 1;
	} else {
		e->stats.sq_full++;
		io_uring_submit(&e->ring);
		e->last_sqe = sqe_get(e);
	}
	e->last_info = info;
	return sqe_tag(e, e->last_sqe, info, tag);
}

struct io_uring_sqe *co_engine_sqe_link(co_engine *e, co_io_info *info, unsigned tag)
{
	struct io_uring_sqe *sqe;

	if (e == NULL || e != co__current)
		return NULL;
	sqe = io_uring_get_sqe(&e->ring); /* room kept by co_engine_sqe */
	e->last_info = NULL;
	return sqe ? sqe_tag(e, sqe, info, tag) : NULL;
}

struct io_uring_sqe *co_engine_last_sqe(co_engine *e, co_io_info *info)
{
	if (e == NULL || e != co__current || info == NULL || e->last_info != info)
		return NULL;
	return e->last_sqe;
}

struct __kernel_timespec *co_engine_sqe_ts(co_engine *e, struct io_uring_sqe *sqe)
{
	if (e == NULL || e->ts == NULL || sqe < e->ring.sq.sqes ||
	    sqe >= e->ring.sq.sqes + e->ring.sq.ring_entries)
		return NULL;
	return &e->ts[sqe - e->ring.sq.sqes];
}

/* ------------------------------------------------------------------------ */
/* The loop                                                                 */
/* ------------------------------------------------------------------------ */

static void frame_finished(co_engine *e, co_frame *f)
{
	int task = (f->state & CO__ST_TASK) != 0;

	if (f->on_done)
		f->on_done(f); /* may free f: not touched after this */
	atomic_fetch_sub_explicit(&e->live, 1, memory_order_release);
	if (task && e->task_done)
		e->task_done(e->hook_arg);
}

/* Resume up to batch ready frames; a yield goes to the back of the queue. */
static void run_ready(co_engine *e)
{
	for (unsigned n = 0; n < e->batch; n++) {
		co_frame *f = ready_pop(e);
		if (f == NULL)
			break;
		e->stats.resumed++;
		switch (co_resume(f)) {
		case CO_YIELDED:
			owner_push(e, f);
			break;
		case CO_DONE:
			frame_finished(e, f);
			break;
		default: /* CO_WAITING: its awaiter wakes it */
			break;
		}
	}
}

/* Dispatch every CQE in the ring, in one batch. */
static unsigned reap(co_engine *e)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	io_uring_for_each_cqe(&e->ring, head, cqe) {
		uintptr_t ud = (uintptr_t)cqe->user_data;
		co_io_info *info = (co_io_info *)(ud & ~(uintptr_t)3);

		n++;
		if (info == NULL || ud == (uintptr_t)LIBURING_UDATA_TIMEOUT)
			continue; /* fire-and-forget (a cancel request), or liburing's
				     own timeout on kernels without EXT_ARG */
		if (info != &e->wake_info && !(cqe->flags & IORING_CQE_F_MORE))
			e->inflight--;
		info->cb(info, cqe->res, cqe->flags, (unsigned)(ud & 3));
	}
	io_uring_cq_advance(&e->ring, n);
	e->stats.cqes += n;
	return n;
}

static void reap_all(co_engine *e)
{
	/* With FEAT_NODROP the kernel keeps what did not fit in the CQ; flush
	 * it in as soon as there is room. */
	while (reap(e) && io_uring_cq_has_overflow(&e->ring)) {
		e->stats.cq_overflow++;
		io_uring_get_events(&e->ring);
	}
}

/*
 * co_engine_stop(e, 1): cancel all I/O, from the owner thread; again on
 * every turn that started operations since, so that a coroutine which was
 * between two awaits at the stop cannot wait forever. The cancel SQE comes
 * after that turn's operations: what completes at once (a close, a file
 * write) completes, what would wait is cancelled.
 */
static void cancel_all_io(co_engine *e)
{
	struct io_uring_sqe *sqe = sqe_get(e);

	e->cancel_mark = e->stats.ops;
	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
	io_uring_sqe_set_data(sqe, NULL);
}

static int first_run(co_engine *e)
{
	int ret;

	e->owner = pthread_self();
	e->has_owner = 1;
	/* io_uring_enable_rings is declared but not exported by liburing 2.3 */
	ret = io_uring_register(e->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0);
	if (ret < 0)
		return ret;
	io_uring_register_ring_fd(&e->ring); /* optional: saves an fd lookup per enter */
	wake_arm(e);
	ret = io_uring_submit(&e->ring);
	return ret < 0 ? ret : 0;
}

/* 1 if no frame is ready and no I/O or parked frame is pending. */
static int engine_idle(co_engine *e)
{
	/* SQEs prepared by awaiters are counted in inflight; the rest (the
	 * wake read, cancel requests) need no waiting for. */
	return !ready_nonempty(e) && e->inflight == 0 &&
	       atomic_load_explicit(&e->parked, memory_order_acquire) == 0;
}

/*
 * Sleep in the kernel until a completion arrives (submitting what is
 * queued in the same call), unless the Dekker check finds work or a stop
 * request the loop has not seen yet. With a timeout (ns > 0) it returns
 * -ETIME when nothing came.
 */
static int engine_wait(co_engine *e, int seen_stop, long long ns)
{
	int ret;

	atomic_store_explicit(&e->sleeping, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst); /* pairs with engine_kick */
	if (ready_nonempty(e) || atomic_load_explicit(&e->stop, memory_order_relaxed) != seen_stop) {
		atomic_store_explicit(&e->sleeping, 0, memory_order_relaxed);
		return 0;
	}
	e->stats.waits++;
	if (ns > 0) {
		struct __kernel_timespec ts = { .tv_sec = ns / 1000000000LL, .tv_nsec = ns % 1000000000LL };
		struct io_uring_cqe *cqe;
		ret = io_uring_submit_and_wait_timeout(&e->ring, &cqe, 1, &ts, NULL);
	} else {
		ret = io_uring_submit_and_wait(&e->ring, 1);
	}
	atomic_store_explicit(&e->sleeping, 0, memory_order_relaxed);
	return ret;
}

int co_engine_run(co_engine *e, int mode)
{
	int ret = 0, stalled = 0;

	if (e == NULL || e->ready_buf == NULL || (mode != CO_RUN_UNTIL_IDLE && mode != CO_RUN_UNTIL_STOP))
		return -EINVAL;
	if (co__current != NULL)
		return -EBUSY;
	if (!e->has_owner) {
		ret = first_run(e);
		if (ret < 0)
			return ret;
	} else if (!pthread_equal(e->owner, pthread_self())) {
		return -EPERM;
	}
	co__current = e;

	for (;;) {
		int stop = atomic_load_explicit(&e->stop, memory_order_acquire);
		uint64_t resumed = e->stats.resumed;

		e->stats.turns++;
		e->last_info = NULL; /* SQEs of earlier turns are submitted */
		if (co__unlikely(posts_pending(e)))
			run_posts(e);
		if (inbox_pending(e))
			inbox_drain(e);
		if (co__unlikely(e->local_n != 0) && e->steal)
			ring_refill(e);
		run_ready(e);
		if (co__unlikely(stop == 2) && e->cancel_mark != e->stats.ops)
			cancel_all_io(e);
		if (e->stats.resumed != resumed)
			stalled = 0;

		if (ready_nonempty(e)) {
			/* Busy: flush SQEs and pick up completions without
			 * waiting; liburing enters the kernel only if there is
			 * something to submit or completions to run. */
			if (e->backlog && ring_size(e) > 1)
				e->backlog(e, e->hook_arg);
			ret = io_uring_submit(&e->ring);
		} else if (e->steal && e->steal(e, e->hook_arg) > 0) {
			stalled = 0;
			ret = io_uring_submit(&e->ring); /* run the stolen frames next */
		} else if (!engine_idle(e)) {
			ret = engine_wait(e, stop, 0); /* one syscall: submit + wait */
		} else {
			unsigned live = atomic_load_explicit(&e->live, memory_order_acquire);
			int stopping = (live & LIVE_STOPPED) || mode == CO_RUN_UNTIL_IDLE;

			if (LIVE_COUNT(live) == 0 && stopping)
				break; /* every frame finished */
			if (LIVE_COUNT(live) != 0 && stopping) {
				/* Frames that nothing can wake: give a push in
				 * progress a grace period, then report them. */
				if (stalled) {
					ret = -EDEADLK;
					break;
				}
				stalled = 1;
				ret = engine_wait(e, stop, DEADLOCK_GRACE_NS);
			} else {
				ret = engine_wait(e, stop, 0); /* UNTIL_STOP: wait for work */
			}
		}
		if (co__unlikely(ret < 0) && ret != -EINTR && ret != -ETIME && ret != -EAGAIN &&
		    ret != -EBUSY)
			break;
		ret = 0;
		reap_all(e);
	}
	e->stats.wake_writes = atomic_load_explicit(&e->wake_writes, memory_order_relaxed);
	io_uring_submit(&e->ring); /* nothing prepared stays unsubmitted */
	co__current = NULL;
	return ret;
}

/* ------------------------------------------------------------------------ */
/* Moving frames between engines (lib/scheduler.c)                          */
/* ------------------------------------------------------------------------ */

void co__engine_kick(co_engine *e)
{
	remote_end(e, remote_begin(e));
}

unsigned co__engine_ready(co_engine *e)
{
	return ring_size(e);
}

unsigned co__engine_live(co_engine *e)
{
	return LIVE_COUNT(atomic_load_explicit(&e->live, memory_order_relaxed));
}

int co__engine_sleeping(co_engine *e)
{
	return atomic_load_explicit(&e->sleeping, memory_order_relaxed);
}

/* Count one more frame on e unless it stopped. */
static int live_get(co_engine *e)
{
	unsigned v = atomic_load_explicit(&e->live, memory_order_relaxed);

	do {
		if (v & LIVE_STOPPED)
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(&e->live, &v, v + 1, memory_order_acq_rel,
							memory_order_relaxed));
	return 1;
}

/*
 * Take up to max ready frames from victim's ring into thief's. Only frames
 * in a ready ring move: none of them has I/O in flight (their awaits have
 * completed), so no SQE or CQE refers to another ring than the one that
 * will resume them. Returns how many moved.
 */
unsigned co__engine_steal(co_engine *thief, co_engine *victim, unsigned max)
{
	unsigned n = 0;
	co_frame *f;

	while (n < max && (f = ring_pop(victim)) != NULL) {
		atomic_fetch_add_explicit(&thief->live, 1, memory_order_relaxed);
		f->runner = &thief->runner;
		atomic_fetch_sub_explicit(&victim->live, 1, memory_order_release);
		owner_push(thief, f); /* we run on the thief's thread */
		n++;
	}
	return n;
}

/*
 * Move a waiting root frame (it is suspended in an awaiter's suspend) from
 * the engine running it to target, and wake it there. Fails with
 * -ESHUTDOWN, leaving everything as it was, if target has stopped.
 */
int co__engine_move(co_frame *root, co_engine *from, co_engine *target)
{
	if (!live_get(target))
		return -ESHUTDOWN;
	root->runner = &target->runner;
	if (from)
		atomic_fetch_sub_explicit(&from->live, 1, memory_order_release);
	co_wake(root);
	return 0;
}
