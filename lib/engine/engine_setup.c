/* SPDX-License-Identifier: MIT */
/*
 * Set-up and destroy (the ring with the fastest task-run mode the kernel
 * takes, the probe of its operations), registered files, buffers and
 * buffer rings, and a scheduler's hooks. The top of the engine's files:
 * the others never call it.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "engine_setup.h"
#include "engine_state.h"
#include "engine_frames.h"
#include "engine_queue.h"
#include "engine_visit.h"
#include "engine_cancel.h"
#include "engine_stop_list.h"
#include "engine_wait.h"
#include "engine_loop.h"
#include "common/thread_id.h"
#include "common/fault.h"

/* Setup flags the engine takes from the caller; the rest of the known
 * ones it cannot honour: IOPOLL (sockets and eventfd cannot be polled
 * that way, and an idle engine would spin), ATTACH_WQ (no wq_fd in the
 * options). CQSIZE and R_DISABLED it sets itself. */
#define SETUP_TAKEN                                                                   \
	(IORING_SETUP_SQPOLL | IORING_SETUP_SQ_AFF | IORING_SETUP_CLAMP |             \
	 IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SQE128 | IORING_SETUP_CQE32 |         \
	 IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG |                       \
	 IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |                     \
	 IORING_SETUP_CQSIZE | IORING_SETUP_R_DISABLED)
#define SETUP_REFUSED (IORING_SETUP_IOPOLL | IORING_SETUP_ATTACH_WQ)

static int uring_setup(unsigned entries, struct io_uring *ring, struct io_uring_params *p)
{
	int err = co__fault_hit(CO__FAULT_RING);

	return err ? -err : io_uring_queue_init_params(entries, ring, p);
}

/* Flags that bind the ring to the thread that enables it: without the
 * enable (registering refused) they would bind it to this one. */
#define SETUP_BOUND (IORING_SETUP_R_DISABLED | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN)

/*
 * Create the ring disabled (enabled by the owner thread at its first run),
 * with the fastest task-run mode the kernel accepts: SINGLE_ISSUER |
 * DEFER_TASKRUN, else COOP_TASKRUN, else none (docs/engine.md). bound 0:
 * enabled at once, without the modes that need the enable (where
 * io_uring_register is refused, a sandbox's seccomp filter).
 */
static int engine_ring_init(co_engine *e, const co_engine_opts *o, int bound)
{
	static const unsigned modes[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
		IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
		0,
	};
	int ret = -EINVAL;

	e->features = 0;
	for (unsigned i = o->no_fast_flags ? 2 : bound ? 0 : 1; i < 3; i++) {
		struct io_uring_params p;

		memset(&p, 0, sizeof p);
		p.flags = IORING_SETUP_CQSIZE | modes[i] |
			  (bound ? IORING_SETUP_R_DISABLED | o->setup_flags : o->setup_flags & ~SETUP_BOUND);
		p.cq_entries = o->cq_entries;
		ret = uring_setup(o->sq_entries, &e->ring, &p);
		if (ret == -EINVAL)
			continue; /* an older kernel, or a combination it refuses */
		if (ret < 0)
			return ret;
		if ((p.flags & (IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN)) ==
		    (IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN))
			e->features |= CO_ENGINE_F_SINGLE_ISSUER;
		if (p.features & IORING_FEAT_NODROP)
			e->features |= CO_ENGINE_F_NODROP;
		return 0;
	}
	return ret;
}

/* Which operations the kernel has: one probe when the engine is set up
 * (no probe, a kernel before 5.6, or no memory for it: every operation
 * counts as there). Returns the register's answer: -EPERM or -EACCES
 * where registering is refused. */
static int engine_probe(co_engine *e)
{
	enum { OPS = 256 };
	struct io_uring_probe *p = co__calloc(1, sizeof *p + OPS * sizeof p->ops[0]);
	int ret = p ? co__engine_register(e, IORING_REGISTER_PROBE, p, OPS) : -ENOMEM;

	memset(e->ops, 0, sizeof e->ops);
	for (unsigned op = 0; op < 64 * 4; op++)
		if (ret < 0 || (op <= p->last_op && io_uring_opcode_supported(p, (int)op)))
			e->ops[op / 64] |= 1ull << (op % 64);
	free(p);
	return ret;
}

int co_engine_supports(const co_engine *e, unsigned opcode)
{
	if (e == NULL || opcode >= 64 * 4)
		return 0;
	return (e->ops[opcode / 64] >> (opcode % 64)) & 1;
}

/* Registering with the kernel is for the ring's own thread: from a frame of
 * the engine, or while it does not run, by the thread that ran it (any
 * thread before its first run). Off the engine's thread the caller holds
 * it borrowed from the check to the kernel's answer: a run (the first one
 * too) that comes meanwhile waits, so the owner fields it reads are not
 * changing, and the ring is not enabled for another thread between the
 * check and the call (docs/engine.md, "The threading rule").
 * 0 (end it with register_end), or the refusal with nothing held. */
struct reg_hold {
	co_engine *prev;
	int borrowed;
};

static int register_begin(co_engine *e, struct reg_hold *h)
{
	h->borrowed = 0;
	if (e == NULL)
		return -EINVAL;
	for (;;) {
		int s = atomic_load_explicit(&e->state, memory_order_seq_cst);

		if (s == CO_ENGINE_DYING) { /* a destroy deciding: its answer */
			if (!co__engine_destroy_answer(e, 0))
				return -EINVAL;
			continue;
		}
		if (s == CO_ENGINE_DEAD)
			return -EINVAL;
		if (co__tls_engine == e)
			return 0;
		if (co__engine_borrow(e, &h->prev) == 0)
			break;
		s = atomic_load_explicit(&e->state, memory_order_seq_cst);
		if (s == CO_ENGINE_RUNNING || s == CO_ENGINE_STOPPING)
			return -EBUSY; /* a run is in progress (STOPPING: a stopped one) */
		/* the run ended or a destroy came since the refusal: again */
	}
	h->borrowed = 1;
	if (e->has_owner && e->owner != co__thread_id()) {
		co__engine_unborrow(e, h->prev);
		return -EPERM;
	}
	co__fault_point(CO__POINT_REGISTER); /* tests: a first run comes now */
	return 0;
}

static void register_end(co_engine *e, struct reg_hold *h)
{
	if (h->borrowed)
		co__engine_unborrow(e, h->prev);
}

/* One registration with the kernel, between register_begin and
 * register_end. */
enum reg_op { REG_FILES, UNREG_FILES, REG_BUFFERS, UNREG_BUFFERS };

static int register_op(co_engine *e, enum reg_op op, const void *arg, unsigned n)
{
	struct reg_hold h;
	int err = register_begin(e, &h);

	if (err)
		return err;
	if ((op == REG_FILES || op == REG_BUFFERS) && (arg == NULL || n == 0))
		err = -EINVAL;
	else if (op == REG_FILES)
		err = io_uring_register_files(&e->ring, arg, n);
	else if (op == REG_BUFFERS)
		err = io_uring_register_buffers(&e->ring, arg, n);
	else if (op == UNREG_FILES)
		err = io_uring_unregister_files(&e->ring);
	else
		err = io_uring_unregister_buffers(&e->ring);
	register_end(e, &h);
	return err;
}

int co_engine_register_files(co_engine *e, const int *fds, unsigned n)
{
	return register_op(e, REG_FILES, fds, n);
}

int co_engine_unregister_files(co_engine *e)
{
	return register_op(e, UNREG_FILES, NULL, 0);
}

int co_engine_register_buffers(co_engine *e, const struct iovec *iov, unsigned n)
{
	return register_op(e, REG_BUFFERS, iov, n);
}

int co_engine_unregister_buffers(co_engine *e)
{
	return register_op(e, UNREG_BUFFERS, NULL, 0);
}

int co__engine_buf_ring_register(co_engine *e, void *ring, unsigned entries, unsigned short *bgid)
{
	struct io_uring_buf_reg reg;
	struct reg_hold h;
	int err = register_begin(e, &h);

	if (err)
		return err;
	/* a group id of our own: of bufrings + 1 ids in a row, one is free
	 * (unless the user took ids behind our back: then the kernel's
	 * -EEXIST) */
	for (unsigned i = 0; i <= atomic_load_explicit(&e->bufrings, memory_order_relaxed); i++) {
		memset(&reg, 0, sizeof reg);
		reg.ring_addr = (uint64_t)(uintptr_t)ring;
		reg.ring_entries = entries;
		reg.bgid = e->bgid_next++;
		err = io_uring_register_buf_ring(&e->ring, &reg, 0);
		if (err != -EEXIST)
			break;
	}
	if (err == 0) {
		*bgid = reg.bgid;
		atomic_fetch_add_explicit(&e->bufrings, 1, memory_order_release);
	}
	register_end(e, &h);
	return err;
}

/* A thread that may not unregister (the kernel takes registrations from
 * the ring's own thread only) on a stopped engine with no frame left: its
 * thread may be gone for good (a context that ended). The ring stays
 * registered until the engine's destroy closes the io_uring, which
 * releases it; the engine stops counting it. Otherwise err, the
 * refusal (-EBUSY: it runs elsewhere, -EPERM: another thread owns it). */
static int buf_ring_drop(co_engine *e, int err)
{
	int visit;

	if (co__engine_call_begin(e, &visit) < 0) /* a busy destroy is waited out */
		return -EINVAL;
	if (atomic_load_explicit(&e->state, memory_order_acquire) == CO_ENGINE_STOPPED &&
	    co__engine_live(e) == 0) {
		atomic_fetch_sub_explicit(&e->bufrings, 1, memory_order_release);
		err = 0;
	}
	co__engine_visit_end(e, visit);
	return err;
}

int co__engine_buf_ring_unregister(co_engine *e, unsigned short bgid)
{
	struct reg_hold h;
	int err = register_begin(e, &h);

	if (err == -EPERM || err == -EBUSY)
		return buf_ring_drop(e, err);
	if (err)
		return err;
	err = io_uring_unregister_buf_ring(&e->ring, bgid);
	if (err == 0)
		atomic_fetch_sub_explicit(&e->bufrings, 1, memory_order_release);
	register_end(e, &h);
	return err;
}

static void engine_free(co_engine *e)
{
	if (e->wake_fd >= 0)
		close(e->wake_fd);
	e->wake_fd = -1;
	free(e->ready);
	free(e->ts);
	e->ready = NULL;
	e->ts = NULL;
	co__view_fini(e);
}

/* The longest poll for work before a sleep: none where it cannot help
 * (the process may use one CPU only, so the thread that would hand work
 * over cannot run while we poll; valgrind, which runs one thread at a
 * time) or where it is turned off. */
static uint64_t spin_max(const co_engine_opts *o)
{
	cpu_set_t cpus;

	if (o->no_spin || co__under_valgrind())
		return 0;
	if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) < 2)
		return 0;
	return o->spin_ns ? o->spin_ns : CO__SPIN_DEFAULT_NS;
}

int co_engine_init(co_engine *e, const co_engine_opts *opts)
{
	co_engine_opts o = { .ready_size = 4096, .sq_entries = 256, .batch = 256 };
	int ret;

	if (e == NULL)
		return -EINVAL;
	/* not set up (DEAD) until it is, refused too: a destroy or a run of it
	 * then answers -EINVAL, whatever the memory held */
	memset(e, 0, sizeof *e);
	if (opts) {
		o = *opts;
		if (o.ready_size == 0)
			o.ready_size = 4096;
		if (o.sq_entries == 0)
			o.sq_entries = 256;
		if (o.batch == 0)
			o.batch = 256;
	}
	if (o.cq_entries == 0) /* four times the SQ, held at UINT_MAX (CLAMP takes any size) */
		o.cq_entries = o.sq_entries > UINT_MAX / 4 ? UINT_MAX : 4 * o.sq_entries;
	if (o.cancel_grace_ns == 0)
		o.cancel_grace_ns = CO__CANCEL_GRACE_NS;
	for (unsigned i = 0; i < sizeof o.reserved / sizeof o.reserved[0]; i++)
		if (o.reserved[i] != 0)
			return -EINVAL; /* a later version's option: refused, not ignored */
	/* an SQ of one has no room for an operation and its linked timeout */
	if (o.ready_size < 2 || (o.ready_size & (o.ready_size - 1)) || o.sq_entries < 2 ||
	    o.cq_entries < o.sq_entries || (o.setup_flags & ~(SETUP_TAKEN | SETUP_REFUSED)))
		return -EINVAL;
	if (o.setup_flags & SETUP_REFUSED)
		return -EOPNOTSUPP;

	e->runner.wake = co__engine_wake_op;
	e->runner.cancel = co__engine_cancel_op;
	e->wake_info.cb = co__engine_wake_done;
	e->batch = o.batch;
	e->spin_max = spin_max(&o);
	e->submit_batch = o.submit_batch;
	e->submit_soon = o.submit_batch != 0;
	e->cancel_grace = o.cancel_grace_ns;
	e->wake_fd = -1;
	e->enter_fd = -1; /* liburing's enter until the first run (co__engine_enter_setup) */
	atomic_init(&e->stop_mode, CO__STOP_NONE);
	/* On lines of its own: thieves take its consumer index, the owner
	 * writes its producer index, and neither shares a line with a heap
	 * neighbour (ck_ring pads the two apart, from the ring's start). */
	e->ready = co__calloc_aligned(CO_CACHELINE, 1,
				      sizeof *e->ready + o.ready_size * sizeof e->ready->buf[0]);
	if (e->ready == NULL)
		return -ENOMEM;
	ck_ring_init(&e->ready->ring, o.ready_size);
	ret = co__view_init(e);
	if (ret < 0)
		goto fail;
	e->wake_fd = co__eventfd();
	if (e->wake_fd < 0) {
		ret = -errno;
		goto fail;
	}
	ret = engine_ring_init(e, &o, 1);
	if (ret < 0)
		goto fail;
	/* The first register: where it is refused, the enable at the first
	 * run would be too. The ring is made again, enabled now. */
	ret = engine_probe(e);
	if (ret == -EPERM || ret == -EACCES) {
		io_uring_queue_exit(&e->ring);
		ret = engine_ring_init(e, &o, 0);
		if (ret < 0)
			goto fail;
		engine_probe(e);
	}
	e->sqe_shift = (e->ring.flags & IORING_SETUP_SQE128) ? 1 : 0;
	e->cqe_shift = (e->ring.flags & IORING_SETUP_CQE32) ? 5 : 4; /* a CQE's bytes, log2 */
	e->ts = co__calloc(e->ring.sq.ring_entries, sizeof *e->ts);
	if (e->ts == NULL) {
		io_uring_queue_exit(&e->ring);
		ret = -ENOMEM;
		goto fail;
	}
	atomic_store_explicit(&e->state, CO_ENGINE_READY, memory_order_release);
	return 0;
fail:
	engine_free(e);
	return ret;
}

/* A stopped engine whose last run found frames stuck, with nothing
 * changed since: nothing can wake them, so destroy may forget them. */
static int only_stuck_left(co_engine *e, unsigned live)
{
	return atomic_load_explicit(&e->stop_mode, memory_order_acquire) != CO__STOP_NONE &&
	       e->stuck != 0 && CO__LIVE_COUNT(live) == e->stuck &&
	       atomic_load_explicit(&e->parked, memory_order_acquire) == 0 && !co__engine_ready_nonempty(e);
}

int co__engine_only_stuck(co_engine *e)
{
	unsigned live = atomic_load_explicit(&e->live, memory_order_acquire);

	return CO__LIVE_COUNT(live) != 0 && only_stuck_left(e, live);
}

int co_engine_destroy(co_engine *e)
{
	unsigned live;
	int was;

	if (e == NULL)
		return -EINVAL;
	/* a borrower does not make it busy */
	was = co__engine_take(e, CO__T_DESTROY); /* another destroy deciding: its answer */
	if (was < 0)
		return was;
	/* DYING: no run can start, and calls from other threads that begin
	 * from now on see it and wait for the answer, outside their visit
	 * (co__engine_call_begin). Let those inside leave. */
	while (CO__VISIT_INSIDE(atomic_load_explicit(&e->visitors, memory_order_acquire)) != 0)
		sched_yield();
	/* Close the door to spawns unless frames are live (the CAS fails if
	 * a spawn counted itself meanwhile), posts are pending or an SQE
	 * whose CQE is awaited is in flight (its callback has not run: an
	 * SQE of the user's own that outlived its frame, after a tick; a run
	 * returns with none, but on an error of io_uring's). inflight is the
	 * owner's: no run is in progress, and the take ordered us after the
	 * last. */
	live = atomic_load_explicit(&e->live, memory_order_acquire);
	if ((CO__LIVE_COUNT(live) != 0 && !only_stuck_left(e, live)) || !co__lifo_empty(&e->posts) ||
	    e->inflight != 0 || co__engine_held(e) ||
	    !atomic_compare_exchange_strong(&e->live, &live, live | CO__LIVE_STOPPED)) {
		/* Busy after all. A stop that came meanwhile set the refusal
		 * bit but could not move the state: STOPPED then. */
		if (atomic_load_explicit(&e->live, memory_order_acquire) & CO__LIVE_STOPPED)
			was = CO_ENGINE_STOPPED;
		atomic_store_explicit(&e->state, was, memory_order_release);
		return -EBUSY;
	}
	co__engine_wake_disarm(e);
	io_uring_queue_exit(&e->ring);
	engine_free(e);
	atomic_store_explicit(&e->state, CO_ENGINE_DEAD, memory_order_seq_cst);
	/* the calls that waited for the answer see it and leave, and those
	 * that came meanwhile see DEAD: the caller may free *e once we
	 * return */
	while (atomic_load_explicit(&e->visitors, memory_order_acquire) != 0)
		sched_yield();
	return 0;
}

void co__engine_set_hooks(co_engine *e, const struct co__engine_hooks *h, void *arg)
{
	e->hooks = h;
	e->hook_arg = arg;
	e->stealing = h && h->steal;
}
