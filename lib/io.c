/* SPDX-License-Identifier: MIT */
/* I/O awaiters: SQE in, CQE out, frame resumed. See docs/io.md. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <time.h>

#include <coring/io.h>
#include "internal.h"

enum {
	K_SLEEP = 1u << 0,    /* a timeout op: -ETIME means "slept" */
	K_DEADLINE = 1u << 1, /* a linked timeout follows the op */
	K_NOLIMIT = 1u << 2,  /* co_deadline could not link its timeout: the
	                         op is cancelled at once, the await ends with
	                         -EINVAL (never a wait without its limit) */
};

enum { TAG_OP = 0, TAG_DEADLINE = 1 };

/* ---- the awaiter ---------------------------------------------------------- */

static int io_ready(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((co_io *)a)->pending == 0; /* a prep that failed has its result */
}

/* Ask the kernel to cancel io's operation (fire and forget): its own CQE
 * ends the await, with -ECANCELED or the result that won the race. */
static void io_cancel_op(co_engine *e, co_io *io)
{
	io_uring_prep_cancel(co_engine_sqe(e, NULL, 0), &io->info, 0);
}

/* A frame that was asked to cancel still submits the operation, followed
 * by its cancel: what completes at once (a close on the way out)
 * completes, what would wait ends with -ECANCELED, and either way the
 * result comes back through the engine's loop. */
static int io_suspend(co_awaiter *a, co_frame *f)
{
	co_io *io = (co_io *)a;

	io->frame = f;
	if (co__unlikely(co_await_cancelled(f) || (io->kind & K_NOLIMIT)))
		io_cancel_op(co__tls_engine, io);
	return 1;
}

static int io_resume(co_awaiter *a, co_frame *f)
{
	co_io *io = (co_io *)a;

	(void)f;
	io->frame = NULL;
	if (co__unlikely(io->kind & K_NOLIMIT))
		return -EINVAL;
	if ((io->kind & K_SLEEP) && io->res == -ETIME)
		return 0;
	if ((io->kind & K_DEADLINE) && io->tres == -ETIME &&
	    (io->res == -ECANCELED || io->res == -EINTR))
		return -ETIME;
	return io->res;
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

static const co_awaiter_ops io_ops = { io_ready, io_suspend, io_resume, io_cancel,
						CO__AW_IO };

static void io_done(co_io_info *info, int res, unsigned cqe_flags, unsigned tag)
{
	co_io *io = co__container_of(info, co_io, info);

	if (tag == TAG_DEADLINE) {
		io->tres = res;
	} else {
		io->res = res;
		io->cqe_flags = cqe_flags;
	}
	if (--io->pending == 0 && io->frame)
		co_wake(io->frame);
}

/* An await that completes at once with err (bad arguments, no engine):
 * no SQE is taken. */
static co_awaiter *io_fail(co_io *io, int err)
{
	if (io == NULL)
		return NULL; /* CO_AWAIT(f, NULL): -EINVAL, or a trap in debug builds */
	io->aw.ops = &io_ops;
	io->info.cb = io_done;
	io->frame = NULL;
	io->res = err;
	io->tres = 0;
	io->cqe_flags = 0;
	io->pending = 0;
	io->kind = 0;
	return &io->aw;
}

/* Start an operation: an SQE of the current engine, or a failed await. */
static struct io_uring_sqe *io_begin(co_io *io, unsigned kind)
{
	co_engine *e = co__tls_engine;

	if (io == NULL || e == NULL) {
		io_fail(io, -ENXIO);
		return NULL;
	}
	io->aw.ops = &io_ops;
	io->info.cb = io_done;
	io->frame = NULL;
	io->res = 0;
	io->tres = 0;
	io->cqe_flags = 0;
	io->pending = 1;
	io->kind = (unsigned char)kind;
	return co_engine_sqe(e, &io->info, TAG_OP);
}

#define IO_PREP(io, kind, prep_call)                             \
	do {                                                     \
		struct io_uring_sqe *sqe = io_begin((io), (kind)); \
		if (sqe)                                         \
			prep_call;                               \
		return (io) ? &(io)->aw : NULL;                  \
	} while (0)

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
	IO_PREP(io, 0, io_uring_prep_read(sqe, fd, buf, io_len(len), off));
}

co_awaiter *co_write(co_io *io, int fd, const void *buf, unsigned len, uint64_t off)
{
	IO_PREP(io, 0, io_uring_prep_write(sqe, fd, buf, io_len(len), off));
}

co_awaiter *co_readv(co_io *io, int fd, const struct iovec *iov, unsigned n, uint64_t off)
{
	IO_PREP(io, 0, io_uring_prep_readv(sqe, fd, iov, n, off));
}

co_awaiter *co_writev(co_io *io, int fd, const struct iovec *iov, unsigned n, uint64_t off)
{
	IO_PREP(io, 0, io_uring_prep_writev(sqe, fd, iov, n, off));
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
	IO_PREP(io, 0, io_uring_prep_fsync(sqe, fd, flags));
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

static void ns_to_ts(struct __kernel_timespec *ts, uint64_t ns)
{
	ts->tv_sec = (long long)(ns / CO_S);
	ts->tv_nsec = (long long)(ns % CO_S);
}

/* A timeout SQE whose timespec lives in the engine's slot for that SQE. */
static void prep_timeout(struct io_uring_sqe *sqe, uint64_t ns, unsigned flags)
{
	struct __kernel_timespec *ts = co_engine_sqe_ts(co__tls_engine, sqe);

	ns_to_ts(ts, ns);
	io_uring_prep_timeout(sqe, ts, 0, flags);
}

co_awaiter *co_sleep(co_io *io, uint64_t ns)
{
	IO_PREP(io, K_SLEEP, prep_timeout(sqe, ns, 0));
}

co_awaiter *co_sleep_until(co_io *io, uint64_t monotonic_ns)
{
	IO_PREP(io, K_SLEEP, prep_timeout(sqe, monotonic_ns, IORING_TIMEOUT_ABS));
}

co_awaiter *co_cancel_io(co_io *io, co_io *target)
{
	if (target == NULL)
		return io_fail(io, -EINVAL);
	IO_PREP(io, 0, io_uring_prep_cancel(sqe, &target->info, 0));
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
	ns_to_ts(ts, ns);
	op->flags |= IOSQE_IO_LINK;
	io_uring_prep_link_timeout(sqe, ts, 0);
	io->pending = 2;
	io->kind |= K_DEADLINE;
	return 0;
}

co_awaiter *co_deadline(co_awaiter *aw, uint64_t ns)
{
	if (aw == NULL || aw->ops->kind != CO__AW_IO)
		return NULL; /* not I/O: the await ends with -EINVAL (co_timeout limits any) */
	if (co__io_link_timeout(aw, ns) < 0)
		((co_io *)aw)->kind |= K_NOLIMIT;
	return aw;
}

uint64_t co_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * CO_S + (uint64_t)ts.tv_nsec;
}

/* ---- transfer helpers ------------------------------------------------------ */

enum { X_READ, X_WRITE, X_RECV, X_SEND };

static int xfer_fn(co_frame *f)
{
	co_xfer *x = (co_xfer *)f;

	CO_BEGIN(f);
	while (x->done < x->len) {
		/* Each op is capped so its count fits the int result. */
		switch (x->op) {
		case X_READ:
			co_read(&x->io, x->fd, x->buf + x->done, (unsigned)(x->len - x->done),
				x->off + x->done);
			break;
		case X_WRITE:
			co_write(&x->io, x->fd, x->buf + x->done, (unsigned)(x->len - x->done),
				 x->off + x->done);
			break;
		case X_RECV:
			co_recv(&x->io, x->fd, x->buf + x->done, x->len - x->done, x->flags);
			break;
		default:
			co_send(&x->io, x->fd, x->buf + x->done, x->len - x->done, x->flags);
			break;
		}
		CO_AWAIT(f, &x->io.aw);
		if (co_result(f) < 0) {
			if (co_result(f) == -EINTR || co_result(f) == -EAGAIN)
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

static int xfer_fail(co_frame *f)
{
	CO_BEGIN(f);
	CO_RETURN(f, -EINVAL);
	CO_END(f);
}

static co_frame *xfer_init(co_xfer *x, int op, int fd, const void *buf, size_t len, uint64_t off,
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
	co_init(&x->co, (len > INT_MAX || (buf == NULL && len)) ? xfer_fail : xfer_fn);
	return &x->co;
}

co_frame *co_read_all(co_xfer *x, int fd, void *buf, size_t len, uint64_t off)
{
	return xfer_init(x, X_READ, fd, buf, len, off, 0);
}

co_frame *co_write_all(co_xfer *x, int fd, const void *buf, size_t len, uint64_t off)
{
	return xfer_init(x, X_WRITE, fd, buf, len, off, 0);
}

co_frame *co_recv_all(co_xfer *x, int fd, void *buf, size_t len, int flags)
{
	return xfer_init(x, X_RECV, fd, buf, len, 0, flags);
}

co_frame *co_send_all(co_xfer *x, int fd, const void *buf, size_t len, int flags)
{
	return xfer_init(x, X_SEND, fd, buf, len, 0, flags);
}

/* ---- multishot accept ------------------------------------------------------ */

static void acceptor_arm(co_acceptor *a)
{
	struct io_uring_sqe *sqe = co_engine_sqe(a->engine, &a->info, 0);

	io_uring_prep_multishot_accept(sqe, a->fd, NULL, NULL, a->flags);
	a->armed = 1;
}

static void acceptor_done(co_io_info *info, int res, unsigned cqe_flags, unsigned tag)
{
	co_acceptor *a = co__container_of(info, co_acceptor, info);

	(void)tag;
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
	if (a->armed && a->engine == e)
		return -EALREADY;
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
