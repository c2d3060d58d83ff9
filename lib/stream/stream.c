/* SPDX-License-Identifier: MIT */
/*
 * Streaming receive (coring/stream.h, docs/stream.md): one multishot recv
 * per stream into a ring of provided buffers registered with the engine.
 *
 * Each CQE of a multishot names the buffer the kernel filled. The stream
 * queues it, in arrival order, by linking buffer ids through the ring's
 * per-buffer arrays (next[bid], len[bid]): no bound but the ring, nothing
 * allocated. A recv hands the first CO_STREAM_IOV_MAX queued buffers to
 * the coroutine ("held"); the next recv, a release or the close gives
 * them back to the kernel (an entry in the ring and a release store of
 * its tail). The multishot's last CQE (no IORING_CQE_F_MORE) either arms
 * it again (it ended after data, or for want of buffers once some are
 * back) or ends the stream (end of file, an error, a cancel), and that
 * end is delivered after the data queued before it.
 *
 * Everything runs on the engine's thread: the CQE callbacks in its loop,
 * the awaiters in its frames. On an engine whose frames may be stolen, a
 * frame waiting on a stream is pinned (CO__CX_PINNED) until its await has
 * ended, so that it resumes on the ring's thread.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include <coring/stream.h>
#include "common/awaiter.h"
#include "engine/engine_internal.h"
#include "common/fault.h"

#define RING_MAGIC 0x42524e47u   /* a registered co_bufring */
#define OPEN_MAGIC 0x5354524du   /* an open co_stream */
#define CLOSED_MAGIC 0x434c5344u /* a closed one */

/* The buffers a stream of b may have queued before its multishot pauses:
 * b->stream_limit, which the user may set; 0 is taken as 1 (a stream that
 * could hold none would stay paused for good). */
static inline unsigned limit_of(const co_bufring *b)
{
	return b->stream_limit ? b->stream_limit : 1;
}

/* ---- awaiters that end at once with an error (nothing of the stream is
 * touched: it may belong to another thread, or another frame waits on it) */

CO__FAILED_AWAITER(fail_enxio, -ENXIO);
CO__FAILED_AWAITER(fail_ebusy, -EBUSY);

/* ---- the buffer ring -------------------------------------------------------- */

/* Put buffer bid back at the ring's tail; the kernel sees it once
 * published. */
static inline void ring_give(co_bufring *b, unsigned bid)
{
	struct io_uring_buf *buf = &b->br->bufs[b->tail & (b->count - 1)];

	buf->addr = (uint64_t)(uintptr_t)(b->bufs + (size_t)bid * b->size);
	buf->len = b->size;
	buf->bid = (uint16_t)bid;
	b->tail++;
}

/* Publish the n buffers given since the last publish (release: their
 * entries are written before the kernel can see the new tail). */
static inline void ring_publish(co_bufring *b, unsigned n)
{
	io_uring_smp_store_release(&b->br->tail, b->tail);
	b->free += n;
}

static size_t page_round(size_t n)
{
	long p = sysconf(_SC_PAGESIZE);
	size_t ps = p > 0 ? (size_t)p : 4096;

	return (n + ps - 1) & ~(ps - 1);
}

int co_bufring_init(co_bufring *b, co_engine *e, unsigned count, unsigned size)
{
	size_t head, total;
	char *map;
	int err;

	if (b == NULL || e == NULL || count == 0 || count > CO_BUFRING_COUNT_MAX ||
	    (count & (count - 1)) || size == 0 || size > CO_BUFRING_SIZE_MAX)
		return -EINVAL;
	if (b->magic == RING_MAGIC)
		return -EALREADY; /* registered: a second set-up would lose it for good */
	/* One mapping: the ring the kernel reads (page-aligned, as it wants),
	 * the per-buffer arrays, then the buffers from a page boundary. */
	head = page_round((size_t)count *
			  (sizeof(struct io_uring_buf) + sizeof(uint32_t) + sizeof(uint16_t)));
	total = head + (size_t)count * size;
	map = co__mmap_anon(total);
	if (map == NULL)
		return -ENOMEM;
	memset(b, 0, sizeof *b);
	b->br = (struct io_uring_buf_ring *)(void *)map;
	b->len = (uint32_t *)(void *)(map + (size_t)count * sizeof(struct io_uring_buf));
	b->next = (uint16_t *)(void *)(map + (size_t)count * (sizeof(struct io_uring_buf) +
							       sizeof(uint32_t)));
	b->bufs = map + head;
	b->map_size = total;
	b->count = count;
	b->size = size;
	b->stream_limit = count / 64 > 2 * CO_STREAM_IOV_MAX ? count / 64 : 2 * CO_STREAM_IOV_MAX;
	for (unsigned bid = 0; bid < count; bid++)
		ring_give(b, bid);
	ring_publish(b, count);
	err = co__engine_buf_ring_register(e, b->br, count, &b->bgid);
	if (err < 0) {
		munmap(map, total);
		memset(b, 0, sizeof *b);
		return err;
	}
	b->engine = e;
	b->magic = RING_MAGIC;
	return 0;
}

int co_bufring_destroy(co_bufring *b)
{
	int err;

	if (b == NULL || b->magic != RING_MAGIC)
		return -EINVAL;
	if (b->streams != 0)
		return -EBUSY;
	err = co__engine_buf_ring_unregister(b->engine, b->bgid);
	if (err < 0)
		return err;
	munmap(b->br, b->map_size);
	memset(b, 0, sizeof *b);
	return 0;
}

/* ---- the stream's multishot --------------------------------------------------- */

/* The engine's cancel stop has begun: nothing is armed again. */
static inline int engine_cancelling(const co_engine *e)
{
	return e->cancel_since != 0;
}

static void stream_arm(co_stream *s, co_engine *e)
{
	struct io_uring_sqe *sqe = co__engine_sqe(e, &s->info, 0);

	io_uring_prep_recv_multishot(sqe, s->fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = s->ring->bgid;
	CO__TRACE_SUBMIT(sqe);
	s->armed = 1;
}

/* Wake the frame waiting in recv or close (e: the stream's engine, whose
 * thread this is). */
static inline void stream_wake(co_stream *s, co_engine *e)
{
	co_frame *f = s->frame;

	if (f) {
		s->frame = NULL;
		co__engine_wake_here(e, f);
	}
}

/* The multishot ended for good: fin is delivered after the queued data. */
static void stream_end(co_stream *s, int fin)
{
	s->ended = 1;
	s->paused = 0;
	s->fin = fin;
	stream_wake(s, co__tls_engine);
}

/* Arm a stream that is not armed (starved, paused); under the engine's
 * cancel stop, end it instead. */
static void stream_rearm(co_stream *s, co_engine *e)
{
	if (engine_cancelling(e))
		stream_end(s, -ECANCELED);
	else
		stream_arm(s, e);
}

static void starved_remove(co_bufring *b, co_stream *s)
{
	co_stream **p = &b->starved;

	while (*p != s)
		p = &(*p)->next_starved;
	*p = s->next_starved;
	s->next_starved = NULL;
	s->starved = 0;
}

/* The engine's cancel stop reached a starved stream (its thread; the
 * parking is off the engine's list already): the stream ends. */
static void stream_stop_cancel(co_stop_link *p)
{
	co_stream *s = co__container_of(p, co_stream, stop_link);

	starved_remove(s->ring, s);
	stream_end(s, -ECANCELED);
}

/* No free buffer: wait on the ring's starved list for buffers to come
 * back. Listed with the engine too, so that a cancel stop ends it. */
static void stream_starve(co_stream *s, co_engine *e)
{
	co_bufring *b = s->ring;

	s->starved = 1;
	s->next_starved = b->starved;
	b->starved = s;
	co__stop_link_init(&s->stop_link, stream_stop_cancel);
	co__engine_stop_list_add(e, &s->stop_link);
}

/* Buffers came back: arm every starved stream again (one that finds none
 * free after all is starved again by its -ENOBUFS); under a cancel stop,
 * end them instead. */
static void starved_rearm(co_bufring *b)
{
	co_engine *e = b->engine;
	co_stream *s;

	while ((s = b->starved) != NULL) {
		b->starved = s->next_starved;
		s->next_starved = NULL;
		s->starved = 0;
		co__engine_stop_list_remove(e, &s->stop_link);
		stream_rearm(s, e);
	}
}

/* Append buffer bid, holding len bytes, to s's queue. */
static inline void stream_queue(co_stream *s, co_bufring *b, unsigned bid, unsigned len)
{
	b->len[bid] = (uint32_t)len;
	if (s->qn++)
		b->next[s->tail] = (uint16_t)bid;
	else
		s->head = (uint16_t)bid;
	s->tail = (uint16_t)bid;
}

/* The multishot's last CQE (no IORING_CQE_F_MORE). */
static void stream_last_cqe(co_engine *e, co_stream *s, int res)
{
	co_bufring *b = s->ring;

	s->armed = 0;
	if (s->closing) {
		/* the close goes on; s->frame stays its frame until its resume
		 * (close_ready: any other await meanwhile is refused) */
		if (s->frame)
			co__engine_wake_here(e, s->frame);
		return;
	}
	if (res == -ENOBUFS)
		b->starvations++;
	if (engine_cancelling(e) ||
	    !(res > 0 || res == -ENOBUFS || (res == -ECANCELED && s->paused))) {
		/* end of file, an error, a cancel (the engine's stop) */
		stream_end(s, res > 0 || res == -ENOBUFS ? -ECANCELED : res);
		return;
	}
	/* ended by the kernel after data, for want of a buffer, or paused */
	if (s->qn >= limit_of(b)) {
		s->paused = 1; /* armed again once the coroutine took part of it */
	} else {
		s->paused = 0;
		if (res == -ENOBUFS && b->free == 0)
			stream_starve(s, e);
		else
			stream_arm(s, e);
	}
	if (s->qn != 0)
		stream_wake(s, e);
}

/* A CQE off the common path: no buffer in it, the stream closing or
 * past its limit, or the multishot's last. */
static __attribute__((noinline)) void stream_cqe_slow(co_engine *e, co_stream *s, int res,
						       unsigned cqe_flags)
{
	co_bufring *b = s->ring;

	if (cqe_flags & IORING_CQE_F_BUFFER) {
		unsigned bid = cqe_flags >> IORING_CQE_BUFFER_SHIFT;

		b->free--;
		if (res > 0 && !s->closing) {
			stream_queue(s, b, bid, (unsigned)res);
		} else { /* nothing in it, or the stream is closing */
			ring_give(b, bid);
			ring_publish(b, 1);
			if (b->starved)
				starved_rearm(b);
		}
	}
	if (s->qn >= limit_of(b) && !s->paused && !s->closing &&
	    (cqe_flags & IORING_CQE_F_MORE)) {
		/* a reader far behind: stop receiving for now */
		s->paused = 1;
		io_uring_prep_cancel(co__engine_sqe(e, NULL, 0), &s->info, 0);
	}
	if (cqe_flags & IORING_CQE_F_MORE) {
		if (s->frame && !s->closing)
			stream_wake(s, e);
		return;
	}
	stream_last_cqe(e, s, res);
}

/* Every CQE of the multishot: queue its buffer, wake a waiting recv. The
 * common one (data, more to come, nothing unusual) takes the short way. */
static inline void stream_cqe_in(co_engine *e, co_stream *s, int res, unsigned cqe_flags)
{
	co_bufring *b = s->ring;

	if (co__likely((cqe_flags & (IORING_CQE_F_BUFFER | IORING_CQE_F_MORE)) ==
			       (IORING_CQE_F_BUFFER | IORING_CQE_F_MORE) &&
		       res > 0 && !s->closing && s->qn + 1 < limit_of(b))) {
		b->free--;
		stream_queue(s, b, cqe_flags >> IORING_CQE_BUFFER_SHIFT, (unsigned)res);
		if (s->frame)
			stream_wake(s, e);
		return;
	}
	stream_cqe_slow(e, s, res, cqe_flags);
}

/* While a trace session records: each CQE's COMPLETE (its byte count,
 * the waiting frame), then the same. Out of line, so that without a
 * session the CQE's path keeps no register for the recorder's call. */
static __attribute__((noinline)) void stream_cqe_traced(co_engine *e, co_stream *s,
							 co_io_info *info, int res,
							 unsigned cqe_flags, unsigned tag)
{
	(void)info;
	(void)tag;
	CO__TRACE_COMPLETE(s->frame, info, res, tag);
	stream_cqe_in(e, s, res, cqe_flags);
}

static void stream_cqe(co_engine *e, co_io_info *info, int res, unsigned cqe_flags, unsigned tag)
{
	co_stream *s = co__container_of(info, co_stream, info);

	if (CO__TRACING()) {
		stream_cqe_traced(e, s, info, res, cqe_flags, tag);
		return;
	}
	stream_cqe_in(e, s, res, cqe_flags);
}

/* After buffers came back: a paused stream whose reader caught up is
 * armed again, and so are the starved streams. */
static __attribute__((noinline)) void stream_gave_back(co_stream *s)
{
	co_bufring *b = s->ring;

	if (s->paused && !s->armed && !s->closing && s->qn < limit_of(b)) {
		s->paused = 0;
		stream_rearm(s, b->engine);
	}
	if (b->starved != NULL)
		starved_rearm(b);
}

/* Put the n buffers (n > 0) from the head of s's queue back in the ring
 * (not published yet): the ring's new tail. */
static __attribute__((noinline)) unsigned give_back_many(co_stream *s, co_bufring *b, unsigned n)
{
	unsigned bid = s->head, tail = b->tail;

	do {
		struct io_uring_buf *e = &b->br->bufs[tail++ & (b->count - 1)];
		unsigned next = b->next[bid];

		e->addr = (uint64_t)(uintptr_t)(b->bufs + (size_t)bid * b->size);
		e->len = b->size;
		e->bid = (uint16_t)bid;
		bid = next;
	} while (--n);
	s->head = (uint16_t)bid;
	return tail;
}

/* Give the n buffers (n > 0) from the head of the queue back to the
 * ring, and publish them. One buffer (the common case) without a loop. */
static void stream_give_back(co_stream *s, unsigned n)
{
	co_bufring *b = s->ring;
	unsigned tail;

	s->qn -= n;
	b->free += n;
	if (co__likely(n == 1)) {
		unsigned bid = s->head;
		struct io_uring_buf *e = &b->br->bufs[b->tail & (b->count - 1)];

		s->head = b->next[bid];
		e->addr = (uint64_t)(uintptr_t)(b->bufs + (size_t)bid * b->size);
		e->len = b->size;
		e->bid = (uint16_t)bid;
		tail = b->tail + 1u;
	} else {
		tail = give_back_many(s, b, n);
	}
	b->tail = (uint16_t)tail;
	io_uring_smp_store_release(&b->br->tail, (uint16_t)tail);
	if (co__unlikely(s->paused | (b->starved != NULL)))
		stream_gave_back(s);
}

static inline void stream_release(co_stream *s)
{
	unsigned n = s->held;

	s->held = 0;
	stream_give_back(s, n);
}

/* Hand the first queued buffers to the coroutine: their byte count, or,
 * with nothing queued, the end (0 or the error). */
static int stream_deliver(co_stream *s)
{
	co_bufring *b = s->ring;
	unsigned n = s->qn < CO_STREAM_IOV_MAX ? s->qn : CO_STREAM_IOV_MAX;
	unsigned bid = s->head;
	int total = 0;

	if (co__unlikely(n == 0))
		return s->ended ? s->fin : -EAGAIN; /* (no wake leaves it empty) */
	for (unsigned i = 0; i < n; i++) {
		unsigned len = b->len[bid];

		s->iov[i].iov_base = b->bufs + (size_t)bid * b->size;
		s->iov[i].iov_len = len;
		total += (int)len; /* <= CO_STREAM_IOV_MAX * CO_BUFRING_SIZE_MAX */
		bid = b->next[bid];
	}
	s->held = n;
	return total;
}

/* On an engine whose frames may be stolen, keep the waiting frame on it
 * until its await ends (an outer time limit may hold the pin already). */
static void stream_pin(co_stream *s, co_frame *f)
{
	unsigned char old = __atomic_fetch_or(&co_root(f)->cancel, (unsigned char)CO__CX_PINNED,
					      __ATOMIC_ACQ_REL);

	s->pinned = !(old & CO__CX_PINNED);
}

static void stream_unpin(co_stream *s, co_frame *f)
{
	s->pinned = 0;
	__atomic_fetch_and(&co_root(f)->cancel, (unsigned char)~CO__CX_PINNED, __ATOMIC_ACQ_REL);
}

/* ---- recv ------------------------------------------------------------------------ */

static int recv_ready(co_awaiter *a, co_frame *f)
{
	co_stream *s = (co_stream *)a;

	(void)f;
	return s->qn != 0 || s->ended;
}

static int recv_suspend(co_awaiter *a, co_frame *f)
{
	co_stream *s = (co_stream *)a;

	if (co__unlikely(co_await_cancelled(f))) {
		s->res = -ECANCELED; /* nothing queued: the library's rule */
		return 0;
	}
	s->frame = f;
	if (co__unlikely(co__tls_engine->stealing))
		stream_pin(s, f);
	return 1;
}

static int recv_resume(co_awaiter *a, co_frame *f)
{
	co_stream *s = (co_stream *)a;

	/* an await of a receive handed out before the close began, made
	 * since (the close set ended: it did not wait): the pin, if any, is
	 * the closing frame's */
	if (co__unlikely(s->closing))
		return -EINVAL;
	if (co__unlikely(s->pinned))
		stream_unpin(s, f);
	if (co__unlikely(s->res != 0)) {
		int res = s->res;
		s->res = 0;
		return res;
	}
	return stream_deliver(s);
}

/* co_cancel (or a time limit) of a frame waiting in recv: that await ends
 * with -ECANCELED; the stream goes on queueing. */
static int recv_cancel(co_awaiter *a, co_frame *f)
{
	co_stream *s = (co_stream *)a;
	co_engine *e = co__tls_engine;

	if (e == NULL || e != s->ring->engine)
		return -EPERM;
	if (s->frame == f) {
		s->res = -ECANCELED;
		stream_wake(s, e);
	}
	return 0;
}

static const co_awaiter_ops recv_ops = { recv_ready, recv_suspend, recv_resume, recv_cancel,
					 CO__AW_STREAM, "stream recv" };

co_awaiter *co_stream_recv(co_stream *s)
{
	if (co__unlikely(s == NULL))
		return NULL;
	if (co__unlikely(s->magic != OPEN_MAGIC || s->closing))
		return co__einval_awaiter();
	if (co__unlikely(co__tls_engine != s->ring->engine))
		return (co_awaiter *)(uintptr_t)&fail_enxio;
	if (co__unlikely(s->frame != NULL))
		return (co_awaiter *)(uintptr_t)&fail_ebusy;
	if (s->held)
		stream_release(s);
	s->res = 0;
	return &s->aw;
}

const struct iovec *co_stream_iov(const co_stream *s, unsigned *n)
{
	if (s == NULL || s->magic != OPEN_MAGIC) {
		if (n)
			*n = 0;
		return NULL;
	}
	if (n)
		*n = s->held;
	return s->iov;
}

int co_stream_release(co_stream *s)
{
	if (s == NULL || s->magic != OPEN_MAGIC)
		return -EINVAL;
	if (co__tls_engine != s->ring->engine)
		return -ENXIO;
	if (s->held)
		stream_release(s);
	return 0;
}

co_awaiter *co_stream_send(co_io *io, co_stream *s, int fd, int flags)
{
	if (io == NULL || s == NULL)
		return NULL;
	if (s->magic != OPEN_MAGIC)
		return co__einval_awaiter();
	if (s->held == 0)
		return co_nop(io);
	if (s->held == 1) /* a send is cheaper than a sendmsg in the kernel */
		return co_send(io, fd, s->iov[0].iov_base, s->iov[0].iov_len, flags);
	s->msg.msg_iovlen = s->held;
	return co_sendmsg(io, fd, &s->msg, (unsigned)flags);
}

/* ---- open and close ---------------------------------------------------------------- */

/* The close begins when its await does (not in co_stream_close): an
 * await that never starts (co_timeout refuses this awaiter, which has no
 * cancel op) leaves the stream as it was. The checks are the await's too,
 * for an awaiter handed out before: an await on a stream closed already,
 * or while a frame waits on it (in a receive, or in a close that has not
 * resumed yet: s->frame stays the closing frame until then), is ready at
 * once, and close_resume tells it from the close by those same facts. */
static int close_ready(co_awaiter *a, co_frame *f)
{
	co_stream *s = co__container_of(a, co_stream, close_aw);

	if (s->magic != OPEN_MAGIC || s->frame != NULL)
		return 1; /* refused: -EINVAL or -EBUSY */
	s->closing = 1;
	s->ended = 1; /* a receive awaited from now on is ready: -EINVAL */
	s->frame = f;
	if (s->armed) /* fire and forget: the multishot's last CQE answers */
		io_uring_prep_cancel(co__engine_sqe(s->ring->engine, NULL, 0), &s->info, 0);
	if (s->starved) {
		starved_remove(s->ring, s);
		co__engine_stop_list_remove(s->ring->engine, &s->stop_link);
	}
	return !s->armed;
}

static int close_suspend(co_awaiter *a, co_frame *f)
{
	co_stream *s = co__container_of(a, co_stream, close_aw);

	/* s->frame is f (close_ready); no cancel check: a close on the way
	 * out completes */
	if (co__unlikely(co__tls_engine->stealing))
		stream_pin(s, f);
	return 1;
}

/* The multishot is over: give back every buffer, close the stream. */
static int close_resume(co_awaiter *a, co_frame *f)
{
	co_stream *s = co__container_of(a, co_stream, close_aw);
	co_bufring *b = s->ring;

	if (s->magic != OPEN_MAGIC)
		return -EINVAL; /* closed already */
	if (s->frame != f)
		return -EBUSY; /* another frame waits on s (close_ready refused) */
	s->frame = NULL;
	if (s->pinned)
		stream_unpin(s, f);
	s->held = 0;
	if (s->qn)
		stream_give_back(s, s->qn);
	else if (b->starved)
		starved_rearm(b);
	s->magic = CLOSED_MAGIC;
	b->streams--;
	return 0;
}

/* No cancel op: it ends by itself once the kernel answered the cancel. */
static const co_awaiter_ops close_ops = { close_ready, close_suspend, close_resume, NULL,
					  CO__AW_USER, "stream close" };

int co_stream_open(co_stream *s, co_bufring *b, int fd)
{
	co_engine *e = co__tls_engine;

	if (s == NULL || b == NULL || b->magic != RING_MAGIC || fd < 0)
		return -EINVAL;
	if (s->magic == OPEN_MAGIC)
		return -EALREADY;
	if (e == NULL || e != b->engine)
		return -ENXIO;
	memset(s, 0, sizeof *s);
	s->aw.ops = &recv_ops;
	s->close_aw.ops = &close_ops;
	s->info.cb = stream_cqe;
	s->ring = b;
	s->fd = fd;
	s->msg.msg_iov = s->iov;
	s->magic = OPEN_MAGIC;
	b->streams++;
	if (engine_cancelling(e)) {
		s->ended = 1;
		s->fin = -ECANCELED;
	} else {
		stream_arm(s, e);
	}
	return 0;
}

co_awaiter *co_stream_close(co_stream *s)
{
	co_engine *e = co__tls_engine;

	if (s == NULL)
		return NULL;
	if (s->magic != OPEN_MAGIC)
		return co__einval_awaiter();
	if (e == NULL || e != s->ring->engine)
		return (co_awaiter *)(uintptr_t)&fail_enxio;
	if (s->frame != NULL)
		return (co_awaiter *)(uintptr_t)&fail_ebusy; /* a recv (or a close) waits */
	return &s->close_aw;
}
