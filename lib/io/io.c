/* SPDX-License-Identifier: MIT */
/* I/O awaiters: SQE in, CQE out, frame resumed. See docs/io.md. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/signalfd.h>

#include <coring/io.h>
#include "common/awaiter.h"
#include "common/fault.h"
#include "common/clock.h"
#include "engine/engine_internal.h"
#include "io_internal.h"

enum {
	K_SLEEP = 1u << 0,    /* a timeout op: -ETIME means "slept" */
	K_DEADLINE = 1u << 1, /* a linked timeout follows the op */
	K_NOLIMIT = 1u << 2,  /* co_deadline could not link its timeout, or
	                         co_wait_for was given the op: the op is
	                         cancelled at once, the await ends with
	                         -EINVAL (never a wait without its limit),
	                         or with the op's result if it completed
	                         before the cancel (bytes taken, a
	                         descriptor made: never lost) */
	K_UNSUP = 1u << 3,    /* co_sqe: the kernel lacks the operation; a nop
	                         went in its place, the await ends with
	                         -EOPNOTSUPP */
	K_MAPPED = 1u << 4,   /* the value is mapped from the result by the
	                         operation: co_signals_wait's is the signal,
	                         co_cancel_io's 0 for the count the kernel
	                         answers when it ended a futex or waitid wait */
	K_DRAIN = 1u << 5,    /* co_sqe: IOSQE_IO_DRAIN refused; a nop went in
	                         its place, the await ends with -EINVAL.
	                         With K_NOLIMIT: co_fixed_file applied late,
	                         the op went in on the plain descriptor of
	                         that number: -EINVAL whatever it did */
	K_AGAIN = 1u << 6,    /* the library asked the kernel to cancel the
	                         operation: co_io.again follows the asking */
	K_RESTART = 1u << 7,  /* a splice or tee: a signal's end of it comes
	                         back as the kernel's -ERESTARTSYS */
};

static const co_awaiter_ops io_ops, io_ops_plain, io_ops_parks;

/* The short path through CO_AWAIT (co.h's co__parking): frame is where it
 * stores the frame, res where it reads the value. */
_Static_assert(offsetof(co_io, frame) == offsetof(co__parking, frame), "co_io: frame");
_Static_assert(offsetof(co_io, res) == offsetof(co__parking, value), "co_io: res");

/* io's kind gains k: its await takes the full path (io_ops), whose
 * suspend and resume read the kind. A plain await's (kind 0) value is the
 * CQE's result as it is, and its suspend, when nothing was asked of the
 * frame, only notes the frame: io_ops_plain lets CO_AWAIT do both; a
 * sleep's, a signal wait's, a splice's (io_ops_parks) the suspend. */
static inline void io_kind_add(co_io *io, unsigned k)
{
	io->kind = (unsigned char)(io->kind | k);
	io->aw.ops = &io_ops;
}

/* The SQEs of one await: the operation, its linked timeout, the
 * library's cancel of it, the timer before that cancel is asked again. */
enum { TAG_OP = 0, TAG_DEADLINE = 1, TAG_CANCEL = 2, TAG_AGAIN = 3 };

/* co_io.again, read only while kind has K_AGAIN (io_begin clears that, so
 * a fresh co_io's byte is never read) */
enum {
	AGAIN_ASK = 1u << 7,    /* a cancel is on its way (its CQE is due) */
	AGAIN_TIMER = 1u << 6,  /* a timer before the next ask is out (due) */
	AGAIN_GONE = 1u << 5,   /* ... and asked to go: the operation ended */
	AGAIN_MISSED = 1u << 4, /* the last cancel did not end the operation */
	AGAIN_FIRED = 1u << 3,  /* the timer came back: ask again */
	AGAIN_TRIES = 0x07,     /* asks that missed so far (up to 7) */
};

/* The timer before the n-th ask again: 1 ms, doubling up to 64 ms. An
 * operation a cancel missed is between two of the kernel's attempts for a
 * few microseconds; one the cancel cannot end (a disk's) costs an ask per
 * 64 ms while it lasts. */
#define AGAIN_FIRST_NS CO_MS
#define AGAIN_MAX_SHIFT 6

/* The kernel's errno for a wait a signal ended, which a splice on an
 * io-wq worker passes on as it is (linux/errno.h, not for user space). */
#define KERNEL_ERESTARTSYS 512

/* ---- the awaiter ---------------------------------------------------------- */

/* An SQE of the library's own for io (a cancel, a timer): its CQE is
 * counted in io->pending, so the await ends only after it; nothing links
 * to it. */
static struct io_uring_sqe *io_own_sqe(co_engine *e, co_io *io, unsigned tag)
{
	struct io_uring_sqe *sqe = co__engine_sqe(e, &io->info, tag);

	e->last_info = NULL;
	io->pending++;
	return sqe;
}

/*
 * Ask the kernel to cancel io's operation: its own CQE ends the await,
 * with -ECANCELED or the result that won the race. The cancel's answer
 * (TAG_CANCEL) says whether it reached the operation, and it may not
 * have: one between two attempts of the kernel's (a poll that said ready
 * but a retry that found no room, which the kernel queues to run again,
 * then hands to an io-wq worker) is on no list a cancel searches
 * (-ENOENT), and one an io-wq worker runs is only told, by a signal that
 * ends a wait of a socket or a pipe (-EALREADY). Then, while the
 * operation's CQE is still due, the cancel is asked again after a timer
 * (io_again): measured on Linux 6.18, a send_all to a peer that never
 * reads, its socket shut for reading, found no send its cancel could
 * reach, and the next send blocked an io-wq worker for good.
 */
static void io_cancel_op(co_engine *e, co_io *io)
{
	if (!(io->kind & K_AGAIN)) {
		io_kind_add(io, K_AGAIN);
		io->again = 0;
	}
	if (io->again & AGAIN_ASK)
		return; /* one is on its way: its answer decides */
	io_uring_prep_cancel(io_own_sqe(e, io, TAG_CANCEL), &io->info, 0);
	io->again |= AGAIN_ASK;
}

/* A cancel missed: ask again after a timer, longer after each miss. */
static void io_again_later(co_engine *e, co_io *io)
{
	unsigned tries = io->again & AGAIN_TRIES;
	struct io_uring_sqe *sqe = io_own_sqe(e, io, TAG_AGAIN);
	struct __kernel_timespec *ts = co_engine_sqe_ts(e, sqe);

	co__ns_to_ts(ts, AGAIN_FIRST_NS << (tries < AGAIN_MAX_SHIFT ? tries : AGAIN_MAX_SHIFT));
	io_uring_prep_timeout(sqe, ts, 0, 0);
	if (tries < AGAIN_TRIES)
		tries++;
	io->again = (unsigned char)((io->again & ~AGAIN_TRIES) | AGAIN_TIMER | tries);
}

/* The CQEs still due for the operation itself: what pending counts, but
 * the library's cancel and timer and the linked timeout (whose result is
 * never 0, so tres 0 is "not in yet"). */
static unsigned op_due(const co_io *io)
{
	unsigned others = ((io->again & AGAIN_ASK) != 0) + ((io->again & AGAIN_TIMER) != 0) +
			  ((io->kind & K_DEADLINE) && io->tres == 0);

	return io->pending - others;
}

/* Did a cancel (the library's, or a linked timeout's) fail to end the
 * operation? -ENOENT: it found nothing; -EALREADY: it found it on an
 * io-wq worker, which is only sent a signal. */
static int cancel_missed(int res)
{
	return res == -ENOENT || res == -EALREADY;
}

/* The answer to the library's cancel (TAG_CANCEL) or its timer
 * (TAG_AGAIN) came in: no longer due; noted for io_again. */
static void io_answer(co_io *io, unsigned tag, int res)
{
	if (tag == TAG_CANCEL)
		io->again = (unsigned char)((io->again & ~(AGAIN_ASK | AGAIN_MISSED)) |
					    (cancel_missed(res) ? AGAIN_MISSED : 0));
	else
		io->again = (unsigned char)((io->again & ~(AGAIN_TIMER | AGAIN_GONE)) | AGAIN_FIRED);
}

/*
 * A CQE of an await that is not over came in (pending counted it out). A
 * linked timeout that fired but whose cancel missed the operation is
 * followed by a cancel of the library's, so a deadline ends the wait
 * too. While a cancel of the library's is under way: an operation that
 * ended takes its timer back at once (so the await ends now, not when the
 * timer would fire); one still due is asked again when the timer fires,
 * and gets a timer when a cancel missed it. Out of line, given what
 * io_done was given, with what it needs noted in co_io: inlined, or given
 * the CQE's tag and result, it cost io_done's every call instructions.
 */
static __attribute__((noinline, cold)) void io_again(co_engine *e, co_io_info *info)
{
	co_io *io = co__container_of(info, co_io, info);

	if (!(io->kind & K_AGAIN)) { /* a deadline's: did its timeout miss? */
		if (cancel_missed(io->tres) && op_due(io) != 0)
			io_cancel_op(e, io);
		return;
	}
	if (op_due(io) == 0) {
		if ((io->again & (AGAIN_TIMER | AGAIN_GONE)) == AGAIN_TIMER) {
			io_uring_prep_timeout_remove(co__engine_sqe(e, NULL, 0),
						     (uintptr_t)&io->info | TAG_AGAIN, 0);
			io->again |= AGAIN_GONE;
		}
		return;
	}
	if (io->again & (AGAIN_ASK | AGAIN_TIMER))
		return; /* an answer is due: it decides */
	if (io->again & AGAIN_FIRED) { /* the timer fired (or was cancelled): ask */
		io->again &= (unsigned char)~AGAIN_FIRED;
		io_cancel_op(e, io);
	} else if (io->again & AGAIN_MISSED) {
		io->again &= (unsigned char)~AGAIN_MISSED;
		io_again_later(e, io);
	}
}

/* A frame that was asked to cancel still submits the operation, followed
 * by its cancel: what completes at once (a close on the way out)
 * completes, what would wait ends with -ECANCELED, and either way the
 * result comes back through the engine's loop. */
static int io_suspend(co_awaiter *a, co_frame *f)
{
	co_io *io = (co_io *)a;

	if (co__unlikely(io->pending == 0))
		return 0; /* a prep that failed, or a CQE in already: no wait */
	io->frame = f;
	if (co__unlikely(co_await_cancelled(f) || (io->kind & K_NOLIMIT)))
		io_cancel_op(co__tls_engine, io);
	return 1;
}

static int io_resume(co_awaiter *a, co_frame *f)
{
	co_io *io = (co_io *)a;
	int res;

	(void)f;
	if (co__likely(io->kind == 0))
		return io->res;
	if (co__unlikely(io->kind & (K_NOLIMIT | K_UNSUP | K_DRAIN))) {
		/* refused, but the operation completed before its cancel:
		 * what it did reaches the caller */
		if ((io->kind & (K_NOLIMIT | K_UNSUP | K_DRAIN)) != K_NOLIMIT || io->res < 0)
			return io->kind & K_UNSUP ? -EOPNOTSUPP : -EINVAL;
	}
	if ((io->kind & K_SLEEP) && io->res == -ETIME)
		return 0;
	if ((io->kind & K_MAPPED) && io->res >= 0) {
		co_signals *s;

		/* a cancel that ended a futex or waitid wait: the kernel's
		 * count of what it ended (1) */
		if (io->op == IORING_OP_ASYNC_CANCEL)
			return 0;
		s = co__container_of(io, co_signals, io);
		return io->res == (int)sizeof s->info ? (int)s->info.ssi_signo : -EIO;
	}
	/* An io-wq worker that ran it was told of a cancel by a signal: the
	 * kernel says -EINTR (a splice, -ERESTARTSYS, which is not for user
	 * space). */
	res = io->res == -KERNEL_ERESTARTSYS && (io->kind & K_RESTART) ? -EINTR : io->res;
	/* the timeout fired: its cancel ended the operation (-ETIME; for a
	 * futex or waitid wait the kernel's cancel says how many it ended,
	 * so the timeout's result is that count, 1), or missed it and the
	 * library's own did (io_again) */
	if ((io->kind & K_DEADLINE) && (io->tres == -ETIME || io->tres > 0 || cancel_missed(io->tres)) &&
	    (res == -ECANCELED || res == -EINTR))
		return -ETIME;
	if ((io->kind & K_AGAIN) && res == -EINTR)
		return -ECANCELED; /* the library asked for the cancel */
	return res;
}

/* co_cancel() on a frame waiting here: ask the kernel; the frame resumes
 * when the operation's own CQE arrives (-ECANCELED, or its result if it
 * won the race), never before (invariant 6 of docs/design.md). */
static int io_cancel(co_awaiter *a, co_frame *f)
{
	co_io *io = (co_io *)a;
	co_engine *e = co__tls_engine;

	/* A frame waiting on I/O never moves, and co_cancel brings the
	 * request to its engine's thread, the only one that may submit. */
	if (e == NULL || co_root(f)->runner != &e->runner)
		return -EPERM;
	io_cancel_op(e, io);
	return 0;
}

/* No ready op: the suspend op tells, which saves a call per await. */
static const co_awaiter_ops io_ops = { NULL, io_suspend, io_resume, io_cancel, CO__AW_IO, "io" };
static const co_awaiter_ops io_ops_plain = { NULL, io_suspend, io_resume, io_cancel,
					     CO__AW_IO | CO__AW_PARKS | CO__AW_VALUE, "io" };
/* A sleep, a signal wait, a splice or tee: the value needs io_resume (it
 * maps the CQE's result), the suspend is a plain one's. */
static const co_awaiter_ops io_ops_parks = { NULL, io_suspend, io_resume, io_cancel,
					     CO__AW_IO | CO__AW_PARKS, "io" };
/* A prep that failed (io_fail): io_ops, told apart from an operation that
 * completed before its await (co_fixed_file keeps the one's error and
 * refuses the other). */
static const co_awaiter_ops io_ops_failed = { NULL, io_suspend, io_resume, io_cancel, CO__AW_IO,
					      "io" };

/* A CQE of io's counted out: the last one wakes the awaiting frame (none
 * yet when the await is still being prepared); one before the last may
 * need the library's cancel asked again (io_again). */
static inline void io_count_out(co_engine *e, co_io *io)
{
	if (co__likely(--io->pending == 0)) {
		if (io->frame)
			co__engine_wake_here(e, io->frame);
		else /* done before its await: that await takes the full
		      * path, whose suspend finds it done (not the short
		      * path's park, which nothing would wake) */
			io->aw.ops = &io_ops;
	} else if (co__unlikely(io->kind & (K_AGAIN | K_DEADLINE))) {
		io_again(e, &io->info);
	}
}

/* Any CQE but an operation's one and only: a linked timeout's, the
 * library's cancel or timer, a zero-copy send's two. */
static __attribute__((noinline)) void io_done_other(co_engine *e, co_io *io, int res,
						     unsigned cqe_flags, unsigned tag)
{
	if (tag == TAG_DEADLINE) {
		io->tres = res;
	} else if (tag != TAG_OP) { /* the library's cancel or timer */
		io_answer(io, tag, res);
	} else if (!(cqe_flags & IORING_CQE_F_NOTIF)) {
		/* a zero-copy send's first CQE: its notification follows, the
		 * await ends with that (the buffer is free again) */
		io->res = res;
		io->cqe_flags = cqe_flags;
		io->pending++;
	}
	io_count_out(e, io);
}

static void io_done(co_engine *e, co_io_info *info, int res, unsigned cqe_flags, unsigned tag)
{
	co_io *io = co__container_of(info, co_io, info);

	if (tag < TAG_CANCEL) /* (the library's own cancels and timers: not traced) */
		CO__TRACE_COMPLETE(io->frame, info, res, tag);
	if (co__unlikely((tag | (cqe_flags & (IORING_CQE_F_NOTIF | IORING_CQE_F_MORE))) != 0)) {
		io_done_other(e, io, res, cqe_flags, tag);
		return;
	}
	io->res = res; /* the operation's one CQE */
	io->cqe_flags = cqe_flags;
	io_count_out(e, io);
}

/* An await that completes at once with err (bad arguments, no engine):
 * no SQE is taken. */
static co_awaiter *io_fail(co_io *io, int err)
{
	if (io == NULL)
		return NULL; /* CO_AWAIT(f, NULL): -EINVAL, or a trap in debug builds */
	io->aw.ops = &io_ops_failed;
	io->info.cb = io_done;
	io->frame = NULL;
	io->res = err;
	io->tres = 0;
	io->cqe_flags = 0;
	io->pending = 0;
	io->kind = 0;
	return &io->aw;
}

/* The await's fields as an operation starts. res and cqe_flags are the
 * CQE's, tres the linked timeout's (set when one is linked): nothing reads
 * them before. pending (1), kind, op and again (0: read only under
 * K_AGAIN, which sets it) are adjacent bytes, written in one store: with a
 * prep inlined, the opcode is a constant. */
_Static_assert(offsetof(co_io, kind) == offsetof(co_io, pending) + 1 &&
		       offsetof(co_io, op) == offsetof(co_io, pending) + 2 &&
		       offsetof(co_io, again) == offsetof(co_io, pending) + 3,
	       "co_io: pending, kind, op, again adjacent");

static inline void io_start(co_io *io, unsigned kind, unsigned char op)
{
	unsigned char bytes[4] = { 1, (unsigned char)kind, op, 0 };

	io->aw.ops = kind == 0				     ? &io_ops_plain
		     : kind & ~(K_SLEEP | K_MAPPED | K_RESTART) ? &io_ops
								 : &io_ops_parks;
	io->info.cb = io_done;
	io->frame = NULL;
	memcpy((char *)io + offsetof(co_io, pending), bytes, sizeof bytes);
}

/* Start an operation: an SQE of the current engine, or a failed await. */
static struct io_uring_sqe *io_begin(co_io *io, unsigned kind)
{
	co_engine *e = co__tls_engine;

	if (io == NULL || e == NULL) {
		io_fail(io, -ENXIO);
		return NULL;
	}
	io_start(io, kind, 0); /* the caller names the operation (io_named) */
	return co__engine_sqe(e, &io->info, TAG_OP);
}

/* io_begin for the preps below, which call nothing on their common path:
 * with the SQ too full, the SQE is the thread's spill slot (*spilled set)
 * and io_unspill moves it into the SQ once it is filled. An operation the
 * kernel lacks (opcode, not 0, that the engine's probe did not find) ends
 * the await with -EOPNOTSUPP, nothing queued. */
static inline struct io_uring_sqe *io_begin_prep(co_io *io, unsigned opcode, int in_ring,
						 int *spilled)
{
	co_engine *e = co__tls_engine;

	*spilled = 0;
	if (co__unlikely(io == NULL || e == NULL)) {
		io_fail(io, -ENXIO);
		return NULL;
	}
	if (opcode != 0 && !co_engine_supports(e, opcode)) {
		io_fail(io, -EOPNOTSUPP);
		return NULL;
	}
	if (in_ring) /* its timespec is its slot's (co_engine_sqe_ts) */
		return co__engine_sqe(e, &io->info, TAG_OP);
	return co__engine_sqe_or_spill(e, &io->info, TAG_OP, spilled);
}

/* A prep filled sqe for io: note its operation (a view of the coroutines
 * names the wait by it) and trace it. */
static inline void io_named(co_io *io, struct io_uring_sqe *sqe)
{
	io->op = sqe->opcode;
	CO__TRACE_SUBMIT(sqe);
}

static __attribute__((noinline, cold)) co_awaiter *io_unspill(co_io *io)
{
	co__engine_unspill(co__tls_engine);
	return &io->aw;
}

/* A prep filled sqe: the await's fields, the early submit of a read or
 * write (soon), the trace. */
static inline void io_prepped(co_io *io, unsigned kind, int soon, struct io_uring_sqe *sqe)
{
	io_start(io, kind, sqe->opcode);
	if (soon)
		co__tls_engine->submit_soon = 1;
	CO__TRACE_SUBMIT(sqe);
}

/* The body of a prep: begin (opcode 0: one every kernel has), fill, end;
 * soon: a read or write, which goes to the kernel as soon as its frame
 * suspends (a disk serves several at once), not at the turn's end
 * (docs/engine.md, "The loop"); in_ring: a prep that needs its SQE's
 * place in the SQ (a timeout's timespec), never spilled. A spilled SQE
 * is filled on a path of its own, which ends in the tail call that moves
 * it into the SQ: the common path tests the spill once and saves one
 * register. */
#define IO_PREP_AS(io, kind, opcode, soon, in_ring, prep_call)           \
	do {                                                             \
		int spilled_;                                            \
		struct io_uring_sqe *sqe =                               \
			io_begin_prep((io), (opcode), (in_ring), &spilled_); \
		if (sqe == NULL)                                         \
			return (io) ? &(io)->aw : NULL;                  \
		if (co__unlikely(spilled_)) {                            \
			prep_call;                                       \
			io_prepped((io), (kind), (soon), sqe);           \
			return io_unspill(io);                           \
		}                                                        \
		prep_call;                                               \
		io_prepped((io), (kind), (soon), sqe);                   \
		return &(io)->aw;                                        \
	} while (0)

#define IO_PREP_OP(io, kind, opcode, prep_call) IO_PREP_AS(io, kind, opcode, 0, 0, prep_call)

/* An operation on paths: a NULL path is -EFAULT, before the kernel. */
#define IO_PREP_PATHS(io, paths_ok, opcode, prep_call)           \
	do {                                                     \
		if (!(paths_ok))                                 \
			return io_fail((io), -EFAULT);           \
		IO_PREP_OP(io, 0, opcode, prep_call);            \
	} while (0)

#define IO_PREP(io, kind, prep_call) IO_PREP_AS(io, kind, 0, 0, 0, prep_call)
#define IO_PREP_SOON(io, prep_call) IO_PREP_AS(io, 0, 0, 1, 0, prep_call)
#define IO_PREP_TIMEOUT(io, prep_call) IO_PREP_AS(io, K_SLEEP, 0, 0, 1, prep_call)

/* The SQE's length is 32 bits and the kernel moves at most CO_IO_MAX
 * bytes per call anyway: longer requests are clamped to it (a short count,
 * reported as such), never truncated modulo 2^32. */
static unsigned io_len(size_t len)
{
	return len > CO_IO_MAX ? CO_IO_MAX : (unsigned)len;
}

co_awaiter *co_nop(co_io *io)
{
	IO_PREP(io, 0, io_uring_prep_nop(sqe));
}

co_awaiter *co_read(co_io *io, int fd, void *buf, unsigned len, uint64_t off)
{
	IO_PREP_SOON(io, io_uring_prep_read(sqe, fd, buf, io_len(len), off));
}

co_awaiter *co_write(co_io *io, int fd, const void *buf, unsigned len, uint64_t off)
{
	IO_PREP_SOON(io, io_uring_prep_write(sqe, fd, buf, io_len(len), off));
}

co_awaiter *co_readv(co_io *io, int fd, const struct iovec *iov, unsigned n, uint64_t off)
{
	IO_PREP_SOON(io, io_uring_prep_readv(sqe, fd, iov, n, off));
}

co_awaiter *co_writev(co_io *io, int fd, const struct iovec *iov, unsigned n, uint64_t off)
{
	IO_PREP_SOON(io, io_uring_prep_writev(sqe, fd, iov, n, off));
}

co_awaiter *co_recv(co_io *io, int fd, void *buf, size_t len, int flags)
{
	IO_PREP(io, 0, io_uring_prep_recv(sqe, fd, buf, io_len(len), flags));
}

co_awaiter *co_send(co_io *io, int fd, const void *buf, size_t len, int flags)
{
	IO_PREP(io, 0, io_uring_prep_send(sqe, fd, buf, io_len(len), flags));
}

co_awaiter *co_recvmsg(co_io *io, int fd, struct msghdr *msg, unsigned flags)
{
	IO_PREP(io, 0, io_uring_prep_recvmsg(sqe, fd, msg, flags));
}

co_awaiter *co_sendmsg(co_io *io, int fd, const struct msghdr *msg, unsigned flags)
{
	IO_PREP(io, 0, io_uring_prep_sendmsg(sqe, fd, msg, flags));
}

co_awaiter *co_accept(co_io *io, int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
	IO_PREP(io, 0, io_uring_prep_accept(sqe, fd, addr, addrlen, flags));
}

co_awaiter *co_connect(co_io *io, int fd, const struct sockaddr *addr, socklen_t addrlen)
{
	IO_PREP(io, 0, io_uring_prep_connect(sqe, fd, addr, addrlen));
}

co_awaiter *co_close(co_io *io, int fd)
{
	IO_PREP(io, 0, io_uring_prep_close(sqe, fd));
}

co_awaiter *co_openat(co_io *io, int dfd, const char *path, int flags, mode_t mode)
{
	if (path == NULL)
		return io_fail(io, -EFAULT);
	IO_PREP(io, 0, io_uring_prep_openat(sqe, dfd, path, flags, mode));
}

co_awaiter *co_fsync(co_io *io, int fd, unsigned flags)
{
	IO_PREP_SOON(io, io_uring_prep_fsync(sqe, fd, flags));
}

co_awaiter *co_statx(co_io *io, int dfd, const char *path, int flags, unsigned mask,
		     struct statx *out)
{
	if (path == NULL || out == NULL)
		return io_fail(io, -EFAULT);
	IO_PREP(io, 0, io_uring_prep_statx(sqe, dfd, path, flags, mask, out));
}

co_awaiter *co_poll(co_io *io, int fd, unsigned events)
{
	IO_PREP(io, 0, io_uring_prep_poll_add(sqe, fd, events));
}

/* ---- sockets, pipes, files, paths ----------------------------------------- */

co_awaiter *co_socket(co_io *io, int domain, int type, int protocol)
{
	IO_PREP_OP(io, 0, IORING_OP_SOCKET, io_uring_prep_socket(sqe, domain, type, protocol, 0));
}

co_awaiter *co_shutdown(co_io *io, int fd, int how)
{
	IO_PREP_OP(io, 0, IORING_OP_SHUTDOWN, io_uring_prep_shutdown(sqe, fd, how));
}

co_awaiter *co_send_zc(co_io *io, int fd, const void *buf, size_t len, int flags)
{
	IO_PREP_OP(io, 0, IORING_OP_SEND_ZC,
		   io_uring_prep_send_zc(sqe, fd, buf, io_len(len), flags, 0));
}

/* The one-buffer message of co_sendto / co_recvfrom. */
static void msg_set(co_msg *m, const void *buf, size_t len, const struct sockaddr *addr,
		    socklen_t addrlen)
{
	memset(&m->msg, 0, sizeof m->msg);
	m->iov.iov_base = (void *)buf;
	m->iov.iov_len = io_len(len);
	m->msg.msg_name = (void *)addr;
	m->msg.msg_namelen = addr ? addrlen : 0;
	m->msg.msg_iov = &m->iov;
	m->msg.msg_iovlen = 1;
}

co_awaiter *co_sendto(co_msg *m, int fd, const void *buf, size_t len, int flags,
		      const struct sockaddr *to, socklen_t tolen)
{
	if (m == NULL)
		return NULL;
	msg_set(m, buf, len, to, tolen);
	IO_PREP(&m->io, 0, io_uring_prep_sendmsg(sqe, fd, &m->msg, (unsigned)flags));
}

co_awaiter *co_recvfrom(co_msg *m, int fd, void *buf, size_t len, int flags,
			struct sockaddr *from, socklen_t fromlen)
{
	if (m == NULL)
		return NULL;
	msg_set(m, buf, len, from, fromlen);
	IO_PREP(&m->io, 0, io_uring_prep_recvmsg(sqe, fd, &m->msg, (unsigned)flags));
}

co_awaiter *co_splice(co_io *io, int fd_in, int64_t off_in, int fd_out, int64_t off_out,
		      unsigned len, unsigned flags)
{
	IO_PREP_OP(io, K_RESTART, IORING_OP_SPLICE,
		   io_uring_prep_splice(sqe, fd_in, off_in, fd_out, off_out, len, flags));
}

co_awaiter *co_tee(co_io *io, int fd_in, int fd_out, unsigned len, unsigned flags)
{
	IO_PREP_OP(io, K_RESTART, IORING_OP_TEE, io_uring_prep_tee(sqe, fd_in, fd_out, len, flags));
}

co_awaiter *co_fallocate(co_io *io, int fd, int mode, uint64_t off, uint64_t len)
{
	if (off > INT64_MAX || len > INT64_MAX)
		return io_fail(io, -EINVAL);
	IO_PREP_OP(io, 0, IORING_OP_FALLOCATE,
		   io_uring_prep_fallocate(sqe, fd, mode, (off_t)off, (off_t)len));
}

co_awaiter *co_fadvise(co_io *io, int fd, uint64_t off, uint32_t len, int advice)
{
	IO_PREP_OP(io, 0, IORING_OP_FADVISE, io_uring_prep_fadvise(sqe, fd, off, len, advice));
}

co_awaiter *co_madvise(co_io *io, void *addr, uint32_t len, int advice)
{
	IO_PREP_OP(io, 0, IORING_OP_MADVISE, io_uring_prep_madvise(sqe, addr, len, advice));
}

co_awaiter *co_unlinkat(co_io *io, int dfd, const char *path, int flags)
{
	IO_PREP_PATHS(io, path, IORING_OP_UNLINKAT, io_uring_prep_unlinkat(sqe, dfd, path, flags));
}

co_awaiter *co_renameat(co_io *io, int olddfd, const char *oldpath, int newdfd,
			const char *newpath, unsigned flags)
{
	IO_PREP_PATHS(io, oldpath && newpath, IORING_OP_RENAMEAT,
		      io_uring_prep_renameat(sqe, olddfd, oldpath, newdfd, newpath, flags));
}

co_awaiter *co_mkdirat(co_io *io, int dfd, const char *path, mode_t mode)
{
	IO_PREP_PATHS(io, path, IORING_OP_MKDIRAT, io_uring_prep_mkdirat(sqe, dfd, path, mode));
}

co_awaiter *co_linkat(co_io *io, int olddfd, const char *oldpath, int newdfd,
		      const char *newpath, int flags)
{
	IO_PREP_PATHS(io, oldpath && newpath, IORING_OP_LINKAT,
		      io_uring_prep_linkat(sqe, olddfd, oldpath, newdfd, newpath, flags));
}

co_awaiter *co_symlinkat(co_io *io, const char *target, int newdfd, const char *linkpath)
{
	IO_PREP_PATHS(io, target && linkpath, IORING_OP_SYMLINKAT,
		      io_uring_prep_symlinkat(sqe, target, newdfd, linkpath));
}

/* Operations newer than the liburing the library builds with (2.3): their
 * opcodes, and the SQE fields they read, as the kernel defines them. */
enum { OP_WAITID = 50, OP_FTRUNCATE = 55 };

static void prep_waitid(struct io_uring_sqe *sqe, idtype_t idtype, id_t id, siginfo_t *info,
			int options)
{
	io_uring_prep_rw(OP_WAITID, sqe, (int)id, NULL, (unsigned)idtype, 0);
	sqe->rw_flags = 0;                  /* waitid's own flags: none yet */
	sqe->file_index = (unsigned)options;
	sqe->addr2 = (uint64_t)(uintptr_t)info;
}

co_awaiter *co_waitid(co_io *io, idtype_t idtype, id_t id, siginfo_t *info, int options)
{
	if (info == NULL)
		return io_fail(io, -EFAULT);
	IO_PREP_OP(io, 0, OP_WAITID, prep_waitid(sqe, idtype, id, info, options));
}

co_awaiter *co_ftruncate(co_io *io, int fd, uint64_t len)
{
	if (len > INT64_MAX)
		return io_fail(io, -EINVAL);
	IO_PREP_OP(io, 0, OP_FTRUNCATE, io_uring_prep_rw(OP_FTRUNCATE, sqe, fd, NULL, 0, len));
}

/* ---- signals ---------------------------------------------------------------- */

/* A co_signals that co_signals_open set up: a zeroed one, never opened,
 * has descriptor 0 in fd, which is not its to read or close. */
#define SIGNALS_OPEN 0x5349474eu

int co_signals_open(co_signals *s, const sigset_t *set)
{
	int err, fd;

	if (s == NULL || set == NULL)
		return -EINVAL;
	if (s->magic == SIGNALS_OPEN && s->fd >= 0)
		return -EALREADY; /* its descriptor would be lost: close it first */
	s->fd = -1;
	s->magic = 0;
	/* the descriptor first: a failure (no descriptor left) leaves the
	 * mask as it was, and the signals' default actions with it */
	fd = signalfd(-1, set, SFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = pthread_sigmask(SIG_BLOCK, set, NULL);
	if (err) {
		close(fd);
		return -err;
	}
	s->fd = fd;
	s->magic = SIGNALS_OPEN;
	return 0;
}

co_awaiter *co_signals_wait(co_signals *s)
{
	if (s == NULL)
		return NULL;
	if (s->magic != SIGNALS_OPEN || s->fd < 0)
		return io_fail(&s->io, -EBADF);
	IO_PREP(&s->io, K_MAPPED,
		io_uring_prep_read(sqe, s->fd, &s->info, sizeof s->info, (uint64_t)-1));
}

int co_signals_close(co_signals *s)
{
	unsigned open = SIGNALS_OPEN;
	int fd;

	/* The claim: of two closes at once, one takes the descriptor, the
	 * other answers -EINVAL (never opened, or closed: nothing closed). */
	if (s == NULL || !__atomic_compare_exchange_n(&s->magic, &open, 0, 0, __ATOMIC_ACQ_REL,
						      __ATOMIC_ACQUIRE))
		return -EINVAL;
	fd = s->fd; /* open: its magic is set only with a descriptor */
	s->fd = -1;
	return close(fd) ? -errno : 0;
}

/* ---- registered files and buffers -------------------------------------- */

co_awaiter *co_read_fixed(co_io *io, int fd, void *buf, unsigned len, uint64_t off,
			  unsigned buf_index)
{
	IO_PREP_SOON(io, io_uring_prep_read_fixed(sqe, fd, buf, io_len(len), off, (int)buf_index));
}

co_awaiter *co_write_fixed(co_io *io, int fd, const void *buf, unsigned len, uint64_t off,
			   unsigned buf_index)
{
	IO_PREP_SOON(io, io_uring_prep_write_fixed(sqe, fd, buf, io_len(len), off, (int)buf_index));
}

co_awaiter *co_fixed_file(co_awaiter *aw)
{
	co_io *io = (co_io *)aw;
	struct io_uring_sqe *op;

	if (aw == NULL)
		return NULL; /* the await ends with -EINVAL (debug: trap) */
	if (aw->ops == NULL || CO__AW_KIND(aw->ops) != CO__AW_IO)
		return co__wrong_kind(aw); /* not I/O: -EINVAL */
	if (aw->ops == &io_ops_failed)
		return aw; /* the prep failed: the await ends at once anyway */
	/* right after the prep only (before co_deadline): its SQE is queued;
	 * one completed already ran on the plain descriptor */
	op = io->kind & K_DEADLINE || io->pending == 0 ? NULL
						       : co_engine_last_sqe(co__tls_engine, &io->info);
	if (op == NULL) {
		/* cancelled at once; -EINVAL even if it completed, on the
		 * plain descriptor of that number */
		io_kind_add(io, K_NOLIMIT | K_DRAIN);
		return aw;
	}
	op->flags |= IOSQE_FIXED_FILE;
	return aw;
}

/* ---- any SQE ---------------------------------------------------------------- */

co_awaiter *co_sqe(co_io *io, void (*prep)(struct io_uring_sqe *sqe, void *arg), void *arg)
{
	struct io_uring_sqe *sqe;
	uint64_t data;

	if (prep == NULL)
		return io_fail(io, -EINVAL);
	sqe = io_begin(io, 0);
	if (sqe == NULL)
		return io ? &io->aw : NULL;
	data = sqe->user_data;
	/* a clean SQE, whatever the slot's last operation left in it: a prep
	 * that fills fields by hand leaves the others 0, as the kernel wants */
	memset(sqe, 0, sizeof *sqe << co__tls_engine->sqe_shift);
	sqe->user_data = data;
	prep(sqe, arg);
	/* the completion is ours, and so is the link chain a deadline adds */
	sqe->user_data = data;
	sqe->flags &= (uint8_t) ~(IOSQE_IO_LINK | IOSQE_IO_HARDLINK | IOSQE_CQE_SKIP_SUCCESS);
	/* A drain would wait for every operation before it on the engine's
	 * ring, the engine's own wake-up read too, which is always in flight:
	 * it would never start, and neither a limit nor a cancel reaches an
	 * operation the kernel holds back. Refused, as an opcode the kernel
	 * lacks is: the SQE is taken, a nop completes it. */
	if (co__unlikely(sqe->flags & IOSQE_IO_DRAIN))
		io_kind_add(io, K_DRAIN);
	else if (!co_engine_supports(co__tls_engine, sqe->opcode))
		io_kind_add(io, K_UNSUP);
	if (co__unlikely(io->kind)) {
		io_uring_prep_nop(sqe);
		sqe->user_data = data;
	}
	io_named(io, sqe);
	return &io->aw;
}

/* A timeout SQE whose timespec lives in the engine's slot for that SQE. */
static void prep_timeout(struct io_uring_sqe *sqe, uint64_t ns, unsigned flags)
{
	struct __kernel_timespec *ts = co_engine_sqe_ts(co__tls_engine, sqe);

	co__ns_to_ts(ts, ns);
	io_uring_prep_timeout(sqe, ts, 0, flags);
}

co_awaiter *co_sleep(co_io *io, uint64_t ns)
{
	IO_PREP_TIMEOUT(io, prep_timeout(sqe, ns, 0));
}

co_awaiter *co_sleep_until(co_io *io, uint64_t monotonic_ns)
{
	IO_PREP_TIMEOUT(io, prep_timeout(sqe, monotonic_ns, IORING_TIMEOUT_ABS));
}

co_awaiter *co_sleep_until_clock(co_io *io, clockid_t clock, uint64_t ns)
{
	unsigned flags = IORING_TIMEOUT_ABS;

	if (clock == CLOCK_REALTIME)
		flags |= IORING_TIMEOUT_REALTIME;
	else if (clock == CLOCK_BOOTTIME)
		flags |= IORING_TIMEOUT_BOOTTIME;
	else if (clock != CLOCK_MONOTONIC)
		return io_fail(io, -EINVAL);
	IO_PREP_TIMEOUT(io, prep_timeout(sqe, ns, flags));
}

void co_period_init(co_period *p, uint64_t period_ns)
{
	if (p == NULL)
		return;
	p->period = period_ns;
	p->next = co__deadline_after(period_ns); /* UINT64_MAX: it never ticks */
	p->missed = 0;
	p->io.res = 0; /* no wait has ended at a tick */
}

/* next is the first tick not waited for to its end. The last wait's
 * sleep ended at its tick when the kernel's timeout fired (its res
 * -ETIME): that tick is taken, the next one is due. A wait that a cancel
 * or a limit ended first leaves its tick still to come. The ticks whose
 * time has come then (next <= now) went by while nobody waited, and are
 * counted; the wait ends at the first tick still to come. The skip cannot
 * overflow: next <= now there, and next is at least the period past
 * co_period_init's now, so the period and late * period (below now - next
 * + period) are below now, and next + late * period below 2 now. The
 * next tick's sum saturates (a huge period). */
co_awaiter *co_period_wait(co_period *p)
{
	uint64_t now;

	if (p == NULL)
		return NULL;
	if (p->period == 0)
		return io_fail(&p->io, -EINVAL);
	if (p->io.res == -ETIME) /* the last wait ended at its tick */
		p->next = co__time_add(p->next, p->period);
	now = co__now_ns();
	if (now >= p->next) {
		uint64_t late = (now - p->next) / p->period + 1;
		p->missed += late;
		p->next += late * p->period;
	}
	return co_sleep_until(&p->io, p->next);
}

co_awaiter *co_cancel_io(co_io *io, co_io *target)
{
	if (target == NULL)
		return io_fail(io, -EINVAL);
	IO_PREP(io, K_MAPPED, io_uring_prep_cancel(sqe, &target->info, 0));
}

int co__io_link_timeout(co_awaiter *aw, uint64_t ns)
{
	co_io *io = (co_io *)aw;
	co_engine *e = co__tls_engine;
	struct io_uring_sqe *op, *sqe;
	struct __kernel_timespec *ts;

	if (io->pending == 0)
		return 0; /* the prep failed: the await ends at once anyway */
	/* Only right after the prep: the op's SQE must still be queued. */
	if (io->pending != 1 || io->frame != NULL || (io->kind & (K_SLEEP | K_DEADLINE)) ||
	    e == NULL || (op = co_engine_last_sqe(e, &io->info)) == NULL)
		return -EAGAIN;
	sqe = co_engine_sqe_link(e, &io->info, TAG_DEADLINE);
	if (sqe == NULL)
		return -EAGAIN;
	ts = co_engine_sqe_ts(e, sqe);
	co__ns_to_ts(ts, ns);
	op->flags |= IOSQE_IO_LINK;
	io_uring_prep_link_timeout(sqe, ts, 0);
	io->tres = 0;
	io->pending = 2;
	io_kind_add(io, K_DEADLINE);
	return 0;
}

void co__io_refuse(co_awaiter *aw)
{
	co_io *io = (co_io *)aw;

	io->kind = (unsigned char)(io->kind | K_NOLIMIT);
	io->aw.ops = &io_ops;
}

co_awaiter *co_deadline(co_awaiter *aw, uint64_t ns)
{
	if (aw == NULL)
		return NULL; /* the await ends with -EINVAL (debug: trap) */
	if (aw->ops == NULL || CO__AW_KIND(aw->ops) != CO__AW_IO)
		return co__wrong_kind(aw); /* not I/O: -EINVAL (co_timeout limits any) */
	if (co__io_link_timeout(aw, ns) < 0)
		io_kind_add((co_io *)aw, K_NOLIMIT);
	return aw;
}

/* ---- whole reads and writes: the *_all calls ------------------------------ */

enum { X_READ, X_WRITE, X_RECV, X_SEND };

/* Where the next read or write of x goes: the current position stays
 * (uint64_t)-1, which the kernel advances itself. */
static uint64_t io_all_off(const co_io_all *x)
{
	return x->off == (uint64_t)-1 ? x->off : x->off + x->done;
}

/*
 * -EAGAIN (a descriptor with O_NONBLOCK, or MSG_DONTWAIT) waits until fd
 * is ready again, with co_poll: asked again at once, the operation would
 * fail the same way, in a loop that no cancel or limit ends. -EINTR is
 * asked again. A poll's error (a cancel, a limit) ends the loop with it.
 */
static int io_all_fn(co_frame *f)
{
	co_io_all *x = (co_io_all *)f;

	CO_BEGIN(f);
	while (x->done < x->len) {
		co__fault_point(CO__POINT_IO_ALL_NEXT); /* tests: a transfer of nothing */
		/* Each op is capped so its count fits the int result. */
		switch (x->op) {
		case X_READ:
			co_read(&x->io, x->fd, x->buf + x->done, (unsigned)(x->len - x->done),
				io_all_off(x));
			break;
		case X_WRITE:
			co_write(&x->io, x->fd, x->buf + x->done, (unsigned)(x->len - x->done),
				 io_all_off(x));
			break;
		case X_RECV:
			co_recv(&x->io, x->fd, x->buf + x->done, x->len - x->done, x->flags);
			break;
		default:
			co_send(&x->io, x->fd, x->buf + x->done, x->len - x->done, x->flags);
			break;
		}
		CO_AWAIT(f, &x->io.aw);
		if (co_result(f) == -EAGAIN) {
			CO_AWAIT(f, co_poll(&x->io, x->fd,
					    x->op == X_READ || x->op == X_RECV ? POLLIN : POLLOUT));
			if (co_result(f) < 0)
				CO_RETURN(f, co_result(f));
			continue; /* ready, or an error the operation will report */
		}
		if (co_result(f) < 0) {
			if (co_result(f) == -EINTR)
				continue;
			CO_RETURN(f, co_result(f));
		}
		if (co_result(f) == 0) {
			if (x->op == X_READ || x->op == X_RECV)
				break; /* end of file: a short count */
			CO_RETURN(f, -EIO); /* a write that makes no progress */
		}
		x->done += (size_t)co_result(f);
	}
	CO_RETURN(f, (int)x->done);
	CO_END(f);
}

static int io_all_fail(co_frame *f)
{
	CO_BEGIN(f);
	CO_RETURN(f, -EINVAL);
	CO_END(f);
}

static co_frame *io_all_init(co_io_all *x, int op, int fd, const void *buf, size_t len, uint64_t off,
			   int flags)
{
	if (x == NULL)
		return NULL; /* awaiting a NULL child: -EINVAL, or a debug trap */
	x->op = op;
	x->fd = fd;
	x->buf = (char *)(uintptr_t)buf;
	x->len = len;
	x->done = 0;
	x->off = off;
	x->flags = flags;
	co_init(&x->co, (len > INT_MAX || (buf == NULL && len)) ? io_all_fail : io_all_fn);
	return &x->co;
}

co_frame *co_read_all(co_io_all *x, int fd, void *buf, size_t len, uint64_t off)
{
	return io_all_init(x, X_READ, fd, buf, len, off, 0);
}

co_frame *co_write_all(co_io_all *x, int fd, const void *buf, size_t len, uint64_t off)
{
	return io_all_init(x, X_WRITE, fd, buf, len, off, 0);
}

co_frame *co_recv_all(co_io_all *x, int fd, void *buf, size_t len, int flags)
{
	return io_all_init(x, X_RECV, fd, buf, len, 0, flags);
}

co_frame *co_send_all(co_io_all *x, int fd, const void *buf, size_t len, int flags)
{
	return io_all_init(x, X_SEND, fd, buf, len, 0, flags);
}

/* ---- multishot accept ------------------------------------------------------ */

static void acceptor_arm(co_acceptor *a)
{
	struct io_uring_sqe *sqe = co_engine_sqe(a->engine, &a->info, 0);

	io_uring_prep_multishot_accept(sqe, a->fd, NULL, NULL, a->flags);
	CO__TRACE_SUBMIT(sqe);
	a->armed = 1;
}

static void acceptor_done(co_engine *e, co_io_info *info, int res, unsigned cqe_flags, unsigned tag)
{
	co_acceptor *a = co__container_of(info, co_acceptor, info);

	(void)e; /* a->engine */
	(void)tag;
	CO__TRACE_COMPLETE(NULL, info, res, tag);
	if (res >= 0)
		a->accepted++;
	if (res >= 0 || (cqe_flags & IORING_CQE_F_MORE))
		a->on_conn(a, res); /* a descriptor, or an error it goes on after */
	if (cqe_flags & IORING_CQE_F_MORE)
		return;
	/* The multishot ended. */
	a->armed = 0;
	if (a->stopping) {
		a->stopping = 0;
		a->on_conn(a, -ECANCELED);
	} else if (res >= 0) {
		acceptor_arm(a); /* the kernel ended it after a success */
	} else {
		a->on_conn(a, res); /* why it ended, e.g. -EMFILE: back off */
	}
}

int co_acceptor_start(co_acceptor *a, int listen_fd, int flags,
		      void (*on_conn)(co_acceptor *, int), void *user)
{
	co_engine *e = co_engine_current();

	if (a == NULL || listen_fd < 0 || on_conn == NULL)
		return -EINVAL;
	if (e == NULL)
		return -ENXIO;
	if (a->armed)
		return -EALREADY; /* on this engine or another: its one co_io_info is in flight */
	a->info.cb = acceptor_done;
	a->engine = e;
	a->fd = listen_fd;
	a->flags = flags;
	a->stopping = 0;
	a->on_conn = on_conn;
	a->user = user;
	a->accepted = 0;
	acceptor_arm(a);
	return 0;
}

int co_acceptor_stop(co_acceptor *a)
{
	struct io_uring_sqe *sqe;

	if (a == NULL)
		return -EINVAL;
	if (!a->armed || a->stopping)
		return 0;
	if (a->engine != co_engine_current())
		return -ENXIO;
	a->stopping = 1;
	sqe = co_engine_sqe(a->engine, NULL, 0);
	io_uring_prep_cancel(sqe, &a->info, 0);
	return 0;
}
