/* SPDX-License-Identifier: MIT */
/*
 * coring/io.h - I/O awaiters: each fills an io_uring SQE on the engine of
 * the calling thread, tagged with the co_io's io_info, and returns the
 * awaiter for CO_AWAIT. The await's value (co_result) is what the kernel
 * returned: bytes, a descriptor, 0, or a negative errno.
 *
 *     struct conn { co_frame co; co_io io; int fd; char buf[4096]; };
 *
 *     CO_AWAIT(f, co_recv(&c->io, c->fd, c->buf, sizeof c->buf, 0));
 *     if (co_result(f) <= 0)
 *             CO_RETURN(f, co_result(f));
 *
 * Rules:
 *   - a co_io (and every buffer, path, address or length pointer given to
 *     it) must stay valid until its await completes: keep them in the
 *     coroutine's struct, never in C locals;
 *   - prepare and await in the same statement (the preps return the
 *     awaiter for exactly that); one co_io serves one await at a time;
 *   - called from a thread with no running engine, the await completes at
 *     once with -ENXIO;
 *   - a NULL co_io (or co_io_all) makes the prep return NULL, and awaiting
 *     NULL ends at once with -EINVAL (a trap in debug builds).
 */
#ifndef CORING_IO_H
#define CORING_IO_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <coring/engine.h>

#ifdef __cplusplus
extern "C" {
#endif

/* co_statx fills a struct statx, which <sys/stat.h> declares only with
 * _GNU_SOURCE: declared here, so that this header compiles without it
 * (code that calls co_statx needs the definition, and so the macro). */
struct statx;

typedef struct co_io {
	co_awaiter aw;                /* private: first, returned by the preps */
	co_frame *frame;              /* private: the awaiting frame */
	co_io_info info;              /* private: the SQE's user_data */
	int res;                      /* read-only: the kernel's result */
	int tres;                     /* private: the linked timeout's result */
	unsigned cqe_flags;           /* read-only: the CQE's flags */
	unsigned char pending;        /* private: CQEs still due (1 or 2) */
	unsigned char kind;           /* private */
	unsigned char op;             /* private: the io_uring opcode (a view of
	                                 the coroutines names the wait by it) */
	unsigned char again;          /* private: the library's cancel of the
	                                 operation, asked again until the kernel
	                                 ends it (lib/io/io.c; in what was padding) */
} co_io;                              /* 40 bytes on LP64: with the Linux co_frame (96), 136 */

/* The most bytes one read, write, recv or send moves (the kernel's limit):
 * a longer length is clamped to it, and the await reports the short count
 * (the *_all helpers below loop). */
#define CO_IO_MAX 0x7ffff000u

/* Operations. Errors are the kernel's (see docs/io.md). */
CO_API co_awaiter *co_nop(co_io *io);
CO_API co_awaiter *co_read(co_io *io, int fd, void *buf, unsigned len, uint64_t off);
CO_API co_awaiter *co_write(co_io *io, int fd, const void *buf, unsigned len, uint64_t off);
CO_API co_awaiter *co_readv(co_io *io, int fd, const struct iovec *iov, unsigned n, uint64_t off);
CO_API co_awaiter *co_writev(co_io *io, int fd, const struct iovec *iov, unsigned n, uint64_t off);
CO_API co_awaiter *co_recv(co_io *io, int fd, void *buf, size_t len, int flags);
CO_API co_awaiter *co_send(co_io *io, int fd, const void *buf, size_t len, int flags);
CO_API co_awaiter *co_recvmsg(co_io *io, int fd, struct msghdr *msg, unsigned flags);
CO_API co_awaiter *co_sendmsg(co_io *io, int fd, const struct msghdr *msg, unsigned flags);
CO_API co_awaiter *co_accept(co_io *io, int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);
CO_API co_awaiter *co_connect(co_io *io, int fd, const struct sockaddr *addr, socklen_t addrlen);
CO_API co_awaiter *co_close(co_io *io, int fd);
CO_API co_awaiter *co_openat(co_io *io, int dfd, const char *path, int flags, mode_t mode);
CO_API co_awaiter *co_fsync(co_io *io, int fd, unsigned flags);
CO_API co_awaiter *co_statx(co_io *io, int dfd, const char *path, int flags, unsigned mask,
		     struct statx *out);
/* Readiness: the value is the ready events (POLLIN ...). */
CO_API co_awaiter *co_poll(co_io *io, int fd, unsigned events);

/* Sockets, pipes, files and paths. Each needs a kernel with the operation
 * (the engine's probe; see co_engine_supports): without it the await ends
 * with -EOPNOTSUPP. co_socket returns the new descriptor (close-on-exec
 * when type has SOCK_CLOEXEC). co_send_zc sends without copying: the
 * await ends once the kernel no longer needs buf (its second CQE), so buf
 * may be reused after it; no time limit or cancel ends it sooner (on
 * loopback the kernel keeps buf until the peer has read the bytes). */
CO_API co_awaiter *co_socket(co_io *io, int domain, int type, int protocol);
CO_API co_awaiter *co_shutdown(co_io *io, int fd, int how);
CO_API co_awaiter *co_send_zc(co_io *io, int fd, const void *buf, size_t len, int flags);
CO_API co_awaiter *co_splice(co_io *io, int fd_in, int64_t off_in, int fd_out, int64_t off_out,
			     unsigned len, unsigned flags);
CO_API co_awaiter *co_tee(co_io *io, int fd_in, int fd_out, unsigned len, unsigned flags);
CO_API co_awaiter *co_fallocate(co_io *io, int fd, int mode, uint64_t off, uint64_t len);
CO_API co_awaiter *co_fadvise(co_io *io, int fd, uint64_t off, uint32_t len, int advice);
CO_API co_awaiter *co_madvise(co_io *io, void *addr, uint32_t len, int advice);
CO_API co_awaiter *co_unlinkat(co_io *io, int dfd, const char *path, int flags);
CO_API co_awaiter *co_renameat(co_io *io, int olddfd, const char *oldpath, int newdfd,
			       const char *newpath, unsigned flags);
CO_API co_awaiter *co_mkdirat(co_io *io, int dfd, const char *path, mode_t mode);
CO_API co_awaiter *co_linkat(co_io *io, int olddfd, const char *oldpath, int newdfd,
			     const char *newpath, int flags);
CO_API co_awaiter *co_symlinkat(co_io *io, const char *target, int newdfd, const char *linkpath);
/* Linux 6.9: truncate an open file to len bytes. */
CO_API co_awaiter *co_ftruncate(co_io *io, int fd, uint64_t len);
/* Linux 6.7: wait for a child as waitid(2) does (P_PID, P_PGID, P_ALL;
 * WEXITED, WNOHANG ...); its state in *info, which must stay valid during
 * the await. Value 0 or a negative errno (-ECHILD). */
CO_API co_awaiter *co_waitid(co_io *io, idtype_t idtype, id_t id, siginfo_t *info, int options);

/* UDP: sendto / recvfrom over a message the co_msg keeps for the await.
 * After co_recvfrom, m->msg.msg_namelen is the sender's address length. */
typedef struct co_msg {
	co_io io;                     /* private */
	struct msghdr msg;            /* read-only after the await */
	struct iovec iov;             /* private */
} co_msg;

CO_API co_awaiter *co_sendto(co_msg *m, int fd, const void *buf, size_t len, int flags,
			     const struct sockaddr *to, socklen_t tolen);
CO_API co_awaiter *co_recvfrom(co_msg *m, int fd, void *buf, size_t len, int flags,
			       struct sockaddr *from, socklen_t fromlen);

/*
 * Signals as an await: co_signals_open blocks the signals of set in the
 * calling thread (the threads coring starts block them already; block them
 * before starting threads of your own, which inherit the mask, or in each)
 * and opens a signalfd for them; each
 * co_signals_wait ends with the number of the next one that arrives (its
 * details in s->info), or a negative errno. Deadlines, co_timeout and
 * cancellation apply. co_signals_close closes the descriptor; the signals
 * stay blocked. Open already: -EALREADY, nothing changes (close it first).
 * Two closes at once (any threads): one closes, the other answers
 * -EINVAL. A signalfd refused (-EMFILE ...): its error, the signals not blocked
 * (their default actions stay). Closed already, or never opened (zeroed
 * memory, whose fd is 0): -EINVAL, nothing closed; a wait on it ends with
 * -EBADF.
 *
 *     sigemptyset(&set); sigaddset(&set, SIGTERM); sigaddset(&set, SIGINT);
 *     co_signals_open(&sigs, &set);                    // before your threads
 *     CO_AWAIT(f, co_signals_wait(&sigs));             // SIGTERM or SIGINT
 */
typedef struct co_signals {
	co_io io;                       /* private */
	int fd;                         /* read-only: the signalfd, -1 if closed */
	unsigned magic;                 /* private: set while open */
	struct signalfd_siginfo info;   /* read-only: the last signal's details */
} co_signals;

CO_API int co_signals_open(co_signals *s, const sigset_t *set);
CO_API co_awaiter *co_signals_wait(co_signals *s);
CO_API int co_signals_close(co_signals *s);

/*
 * Registered files and buffers (co_engine_register_files / _buffers).
 * co_fixed_file(aw), applied right after an I/O prep (and before
 * co_deadline), makes its fd an index into the registered files:
 *
 *     CO_AWAIT(f, co_fixed_file(co_recv(&s->io, 0, buf, n, 0)));   // file 0
 *
 * Given an awaiter that is not I/O, the await ends with -EINVAL (NULL:
 * returns NULL, which CO_AWAIT makes -EINVAL, a debug build traps); applied
 * late (after co_deadline, after another prep, or once the operation
 * completed), the operation is cancelled at once if still in flight and
 * the await ends with -EINVAL, even if it completed (it may have run on
 * descriptor number fd by then: apply it right after the prep). A prep
 * that failed keeps its error. co_read_fixed / co_write_fixed transfer within registered
 * buffer buf_index ([buf, buf + len) must lie inside it, else -EFAULT).
 */
CO_API co_awaiter *co_fixed_file(co_awaiter *aw);
CO_API co_awaiter *co_read_fixed(co_io *io, int fd, void *buf, unsigned len, uint64_t off,
				 unsigned buf_index);
CO_API co_awaiter *co_write_fixed(co_io *io, int fd, const void *buf, unsigned len, uint64_t off,
				  unsigned buf_index);

/* Any operation the library has no helper for: prep fills the SQE (any
 * io_uring_prep_* call, or fields by hand: it is handed every field 0 but
 * user_data) and must leave user_data alone;
 * link flags are cleared (co_deadline links its own timeout). Deadlines,
 * co_timeout and cancellation apply as to any I/O. The await's value is
 * the CQE's res, or -EOPNOTSUPP when the kernel lacks the opcode, or
 * -EINVAL for IOSQE_IO_DRAIN (a nop takes the operation's place in both
 * cases): a drain would wait for the engine's own wake-up read, always in
 * flight, and no limit or cancel reaches an operation the kernel holds
 * back. For single-shot operations: one whose CQEs carry
 * IORING_CQE_F_MORE ends at its last CQE.
 *
 *     static void prep_nop(struct io_uring_sqe *sqe, void *arg) { io_uring_prep_nop(sqe); }
 *     CO_AWAIT(f, co_sqe(&s->io, prep_nop, NULL));
 */
CO_API co_awaiter *co_sqe(co_io *io, void (*prep)(struct io_uring_sqe *sqe, void *arg), void *arg);
/* Sleep ns (relative), or until ns on CLOCK_MONOTONIC (absolute): 0 when
 * the time came, -ECANCELED when cancelled. A time near UINT64_MAX (292
 * years and more) never comes. */
CO_API co_awaiter *co_sleep(co_io *io, uint64_t ns);
CO_API co_awaiter *co_sleep_until(co_io *io, uint64_t monotonic_ns);
/* Sleep until ns on CLOCK_MONOTONIC, CLOCK_REALTIME (follows changes of
 * the wall clock) or CLOCK_BOOTTIME (counts suspend); another clock:
 * -EINVAL. */
CO_API co_awaiter *co_sleep_until_clock(co_io *io, clockid_t clock, uint64_t ns);

/* A periodic timer without drift: ticks at every multiple of the period
 * after co_period_init; each co_period_wait sleeps until the first tick
 * still to come. Ticks whose time came before the wait (a stall, a slow
 * body) are skipped and added to missed: with a 10 ms period, a wait at
 * 85 ms after the last one at 50 ms sleeps until 90 ms and adds 3 (60, 70,
 * 80). A wait that a cancel or a time limit ends before its tick leaves
 * that tick still to come. A period whose sum with the clock would wrap
 * never ticks. Value 0, or -ECANCELED / -ETIME as for any sleep.
 *
 *     co_period_init(&s->tick, 10 * CO_MS);
 *     for (;;) { CO_AWAIT(f, co_period_wait(&s->tick)); sample(); }
 */
typedef struct co_period {
	co_io io;                     /* private */
	uint64_t next;                /* private: CLOCK_MONOTONIC ns */
	uint64_t period;              /* private */
	uint64_t missed;              /* read-only: ticks skipped */
} co_period;

CO_API void co_period_init(co_period *p, uint64_t period_ns);
CO_API co_awaiter *co_period_wait(co_period *p);
/* Ask the kernel to cancel target's pending operation: 0 if it was
 * cancelled, -ENOENT if none was found, -EALREADY if it already runs. */
CO_API co_awaiter *co_cancel_io(co_io *io, co_io *target);

/*
 * Deadline on the operation just prepared (a linked timeout):
 *     CO_AWAIT(f, co_deadline(co_recv(&s->io, fd, buf, n, 0), 500 * CO_MS));
 * If ns pass first, the await ends with -ETIME and the operation is
 * cancelled (the await still waits for the kernel's answer, so the co_io
 * and its buffer may be reused at once); an ns near UINT64_MAX never
 * passes. A prep that failed keeps its own error. On a sleep, or an
 * operation already submitted, no timeout can be linked: the operation is
 * cancelled at once and the await ends with -EINVAL, or with the
 * operation's result if it completed before its cancel (bytes taken, a
 * descriptor made: never lost). Given an awaiter
 * that is not I/O (a sync wait: see co_wait_for; co_timeout limits any),
 * the await ends with -EINVAL in every build; NULL returns NULL.
 */
CO_API co_awaiter *co_deadline(co_awaiter *aw, uint64_t ns);

#define CO_US 1000ull
#define CO_MS 1000000ull
#define CO_S 1000000000ull

/* Monotonic clock in ns (for co_sleep_until). */
CO_API uint64_t co_now_ns(void);

/*
 * Whole reads and writes (the *_all calls, in a co_io_all) that loop over
 * short ones: child coroutines, run with CO_AWAIT (CO_AWAIT_TASK in C99).
 * The child's status (co_result after the await) is the byte count (less
 * than len only at end of file for reads), or the first error; x->done
 * holds the bytes moved before an error. len must not exceed INT_MAX.
 * -EAGAIN (O_NONBLOCK, MSG_DONTWAIT) waits for the descriptor (co_poll);
 * an offset of (uint64_t)-1 is the current position throughout.
 *
 *     CO_AWAIT(f, co_send_all(&s->x, s->fd, s->buf, s->n, MSG_NOSIGNAL));
 */
typedef struct co_io_all {
	co_frame co;                  /* first: awaited as a child */
	co_io io;
	int fd, op, flags;
	char *buf;
	size_t len, done;
	uint64_t off;
} co_io_all;

CO_API co_frame *co_read_all(co_io_all *x, int fd, void *buf, size_t len, uint64_t off);
CO_API co_frame *co_write_all(co_io_all *x, int fd, const void *buf, size_t len, uint64_t off);
CO_API co_frame *co_recv_all(co_io_all *x, int fd, void *buf, size_t len, int flags);
CO_API co_frame *co_send_all(co_io_all *x, int fd, const void *buf, size_t len, int flags);

/*
 * Multishot accept: one SQE keeps accepting; every new descriptor (or
 * error) is handed to on_conn on the engine thread, where it typically
 * sets up and spawns a connection coroutine. Nothing is buffered, so
 * nothing is lost. When the kernel ends the multishot after a success it
 * is re-armed; after an error (for example -EMFILE) on_conn gets the error
 * and the acceptor stays stopped until co_acceptor_start is called again
 * (back off first). co_acceptor_stop cancels it; the last call of on_conn
 * is then -ECANCELED, after which the acceptor may be reused or freed. An
 * engine stop ends it too: a cancel stop at once, a drain once every frame
 * has finished.
 */
typedef struct co_acceptor co_acceptor;
struct co_acceptor {
	co_io_info info;              /* private */
	co_engine *engine;            /* private */
	int fd, flags;                /* private */
	int armed;                    /* read-only: a multishot is in flight */
	int stopping;                 /* private */
	void (*on_conn)(co_acceptor *a, int fd_or_error); /* public */
	void *user;                   /* public */
	uint64_t accepted;            /* read-only: descriptors handed out */
};

/* From the engine thread. Errors: -EINVAL (NULL, bad fd, no callback),
 * -EALREADY (armed, on this engine or another), -ENXIO (no engine on this
 * thread). */
CO_API int co_acceptor_start(co_acceptor *a, int listen_fd, int flags,
		      void (*on_conn)(co_acceptor *, int), void *user);
/* From the engine thread. 0 (also when not armed, or stopping already),
 * -EINVAL (NULL), -ENXIO (armed on an engine this thread does not run). */
CO_API int co_acceptor_stop(co_acceptor *a);

#ifdef __cplusplus
}
#endif

#endif /* CORING_IO_H */
