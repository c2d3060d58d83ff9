/* SPDX-License-Identifier: MIT */
/*
 * coring/stream.h - streaming receive: one multishot recv per connection
 * into a ring of buffers the kernel picks from (provided buffers), the
 * received buffers handed to the coroutine and given back, and batched
 * sends of what it holds. docs/stream.md has the details.
 *
 *     struct conn { co_frame co; co_io io; co_stream s; int fd; };
 *
 *     co_stream_open(&c->s, ring, c->fd);              // a frame of ring's engine
 *     for (;;) {
 *             CO_AWAIT(f, co_stream_recv(&c->s));      // bytes now held, 0 at EOF
 *             if (co_result(f) <= 0)
 *                     break;
 *             // co_stream_iov(&c->s, &n): the held buffers, in order
 *             CO_AWAIT(f, co_stream_send(&c->io, &c->s, c->fd, MSG_WAITALL | MSG_NOSIGNAL));
 *     }
 *     CO_AWAIT(f, co_stream_close(&c->s));             // before c goes away
 *
 * A co_bufring belongs to one engine and is used on its thread only; every
 * stream on it, and every call on those streams, too. What arrives while
 * the coroutine does something else is queued on its stream, in order;
 * once a stream has ring->stream_limit buffers queued its multishot is
 * paused (the data waits in the socket) until the coroutine has received
 * part of them, so one slow reader cannot take the whole ring. A stream
 * whose multishot found no free buffer waits until buffers come back (a
 * release, a recv, a close) and is armed again: nothing is lost or
 * reordered.
 */
#ifndef CORING_STREAM_H
#define CORING_STREAM_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <coring/io.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Buffers one recv hands out at most (the rest stays queued for the next). */
#define CO_STREAM_IOV_MAX 16
/* The most buffers a ring may have (buffer ids are 15 bits here). */
#define CO_BUFRING_COUNT_MAX 32768u
/* The largest buffer: what CO_STREAM_IOV_MAX of them hold fits an int. */
#define CO_BUFRING_SIZE_MAX (CO_IO_MAX / CO_STREAM_IOV_MAX)

typedef struct co_stream co_stream;

/* A ring of `count` buffers of `size` bytes registered with one engine.
 * All fields are private unless marked. */
typedef struct co_bufring {
	co_engine *engine;              /* read-only */
	struct io_uring_buf_ring *br;   /* private: the ring the kernel reads */
	char *bufs;                     /* private: count * size bytes */
	uint32_t *len;                  /* private: per buffer id: bytes received */
	uint16_t *next;                 /* private: per buffer id: the next one
	                                   queued on the same stream */
	size_t map_size;                /* private */
	unsigned count, size;           /* read-only */
	unsigned free;                  /* read-only: buffers the kernel may fill */
	unsigned stream_limit;          /* public: buffers one stream may have
	                                   queued before its multishot is paused
	                                   (a reader that does not keep up cannot
	                                   take the whole ring); init sets
	                                   max(2 * CO_STREAM_IOV_MAX, count / 64);
	                                   0 is taken as 1 */
	unsigned streams;               /* read-only: streams open on it */
	uint64_t starvations;           /* read-only: times a stream's multishot
	                                   found no free buffer (-ENOBUFS) */
	unsigned magic;                 /* private: set while registered */
	unsigned short bgid;            /* read-only: its buffer group id */
	unsigned short tail;            /* private: the ring's tail as written */
	co_stream *starved;             /* private: streams waiting for buffers */
} co_bufring;

/* One connection's multishot recv. All fields are private. */
struct co_stream {
	co_awaiter aw;                  /* co_stream_recv's awaiter */
	co_awaiter close_aw;            /* co_stream_close's */
	co_io_info info;                /* the multishot's user_data */
	co_stop_link stop_link;         /* while starved: the cancel stop's reach */
	co_bufring *ring;
	co_frame *frame;                /* waiting in recv or close */
	co_stream *next_starved;
	int fd;
	int fin;                        /* why the multishot ended for good */
	int res;                        /* an await's value decided early */
	unsigned magic;                 /* open, closed */
	unsigned qn;                    /* buffers queued, held ones included */
	unsigned held;                  /* the first `held` of them are the coroutine's */
	unsigned short head, tail;      /* the queue, linked through ring->next */
	unsigned char armed, ended, starved, closing, pinned, paused;
	struct msghdr msg;              /* the batched send of the held buffers */
	struct iovec iov[CO_STREAM_IOV_MAX];
};

/*
 * Set up b: count buffers (a power of two, 1 to CO_BUFRING_COUNT_MAX) of
 * size bytes (1 to CO_BUFRING_SIZE_MAX), registered with e as a provided
 * buffer ring under a buffer group id of its own. Call it from a frame of
 * e, or, while e does not run, from the thread that runs it (any thread
 * before its first run), as co_engine_register_buffers. co_engine_destroy
 * refuses (-EBUSY) while a ring is registered.
 * Errors: -EINVAL (NULL, a count or size out of range, a dead engine),
 * -EALREADY (b is set up already: destroy it first), -ENOMEM, -EBUSY (e
 * runs on another thread), -EPERM (another thread owns
 * e's ring), or the kernel's (-EINVAL on kernels before 5.19, which lack
 * buffer rings; -ENOMEM over RLIMIT_MEMLOCK on old ones). Nothing leaks.
 */
CO_API int co_bufring_init(co_bufring *b, co_engine *e, unsigned count, unsigned size);

/* Unregister and free b (same threads as co_bufring_init; on a
 * scheduler, a frame on the ring's context). Once e is stopped with no
 * frame left (its thread may be gone: a context that ended), from any
 * thread: the mapping is freed, and the registration goes with e's
 * io_uring at co_engine_destroy. co_sched_destroy refuses (-EBUSY) while
 * a context's engine holds a ring. Errors: -EINVAL (NULL, not set up,
 * destroyed), -EBUSY (streams are open on it, or e runs on another
 * thread), -EPERM (another thread owns e's ring, and e may still run);
 * nothing changes on an error. */
CO_API int co_bufring_destroy(co_bufring *b);

/*
 * Start receiving fd into b: one multishot recv (IORING_RECV_MULTISHOT
 * with IOSQE_BUFFER_SELECT), from a frame of b's engine. s must not be
 * open (zeroed or closed memory). Errors: -EINVAL (NULL, b not set up, a
 * negative fd), -EALREADY (s is open), -ENXIO (not on b's engine thread).
 * Under the engine's cancel stop the stream opens ended: its recv is
 * -ECANCELED.
 */
CO_API int co_stream_open(co_stream *s, co_bufring *b, int fd);

/*
 * Receive: first gives back the buffers held from the last recv, then
 * waits until something is queued. The value: the bytes now held (> 0,
 * in up to CO_STREAM_IOV_MAX buffers, see co_stream_iov); 0 at end of
 * file once everything queued was delivered; or a negative errno: the
 * error that ended the multishot (-ECONNRESET ...; after the data queued
 * before it), -ECANCELED (the await was cancelled: co_cancel, a time
 * limit, the engine's cancel stop; a frame already cancelled gets it at
 * once when nothing is queued, and data queued is delivered regardless),
 * -EINVAL (s not open, or closing), -ENXIO (not on the ring's engine
 * thread), -EBUSY (another frame waits in recv on s). A cancelled await
 * does not end the stream: data keeps being queued for the next recv.
 * co_timeout limits it. NULL s: returns NULL (awaiting it is -EINVAL).
 */
CO_API co_awaiter *co_stream_recv(co_stream *s);

/* The buffers the last recv handed out, in order (*n of them; NULL and 0
 * for NULL s). Valid until the next recv, release or close. */
CO_API const struct iovec *co_stream_iov(const co_stream *s, unsigned *n);

/* Give the held buffers back to the ring now (co_stream_recv does it
 * anyway). Returns 0, -EINVAL (NULL, not open), -ENXIO (not on the ring's
 * engine thread: nothing given back). */
CO_API int co_stream_release(co_stream *s);

/*
 * Send everything held on fd with one sendmsg (one send for one buffer):
 * the batched send. The value is the kernel's: the bytes sent, which with
 * MSG_WAITALL is the held total unless an error cut it short. The buffers
 * stay held until the next recv or release. io as for co_send (held
 * nothing: a nop, value 0). NULL io or s: returns NULL.
 */
CO_API co_awaiter *co_stream_send(co_io *io, co_stream *s, int fd, int flags);

/*
 * Close: cancel the multishot, wait for its last completion, give back
 * every buffer (held and queued: unreceived data is dropped), and close
 * the stream (not fd). Must be awaited, and must have ended, before s's
 * memory goes away. It cannot be cancelled nor limited in time (it ends
 * by itself once the kernel answered: co_timeout answers -EINVAL and the
 * close does not begin, the stream stays open), and a cancelled frame's
 * close still completes. Value 0, or -EINVAL (not open), -ENXIO (not on the ring's
 * engine thread), -EBUSY (a frame waits in recv on s: cancel it first;
 * or in another close). The checks are the await's as well: a close or a
 * recv handed out before the close began and awaited later answers
 * -EINVAL or -EBUSY. NULL s: returns NULL (awaiting it is -EINVAL).
 */
CO_API co_awaiter *co_stream_close(co_stream *s);

#ifdef __cplusplus
}
#endif

#endif /* CORING_STREAM_H */
