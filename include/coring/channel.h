/* SPDX-License-Identifier: MIT */
/*
 * coring/channel.h - a bounded channel of fixed-size items between
 * coroutines: many producers, many consumers, on any contexts.
 *
 *     co_chan ch;
 *     co_chan_init(&ch, sizeof(struct job), 64, NULL);   // buffer allocated once
 *
 *     // producers
 *     CO_AWAIT(f, co_chan_send(&p->w, &ch, &p->job));
 *     if (co_result(f) < 0) ...                 // -EPIPE: closed, not sent
 *     // consumers
 *     CO_AWAIT(f, co_chan_recv(&c->w, &ch, &c->job));
 *     if (co_result(f) == -EPIPE) ...           // closed and drained
 *     // anyone
 *     co_chan_close(&ch);
 *
 * Items are copied (item_size bytes) into the ring buffer, or straight from
 * a waiting sender to a waiting receiver. Waiting senders and receivers
 * are served in FIFO order. Every item sent (value 0) is received exactly
 * once; a send that fails (-EPIPE, -ECANCELED, -ETIME) delivered nothing.
 * Close: later sends fail with -EPIPE; receivers first drain what is
 * buffered, then get -EPIPE; every blocked sender and receiver wakes with
 * -EPIPE. The item pointer of a send or receive must stay valid until its
 * await completes (keep it in the coroutine's struct). The waits take
 * co_wait_for (sync.h) for a time limit; their co_waiter is as in sync.h.
 */
#ifndef CORING_CHANNEL_H
#define CORING_CHANNEL_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <coring/sync.h>

#ifdef __cplusplus
extern "C" {
#endif

/* All fields are private unless marked. Senders and receivers each have a
 * lock and an index of their own, on lines of their own, so that one
 * producer and one consumer on two CPUs do not pull one cache line from
 * each other on every item (lib/sync/channel.c). */
typedef struct co_chan {
	CO__ATOMIC(unsigned) lock;    /* the wait queues (and close) */
	CO__ATOMIC(int) closed;
	CO__ATOMIC(unsigned) recv_waiting, send_waiting; /* set when one parks */
	int owned;                    /* buf was allocated by init */
	CO__ATOMIC(unsigned) inside;  /* calls inside a send or receive that
	                                 hold none of the locks (a poll, a
	                                 refill): destroy waits for none */
	size_t size;                  /* read-only: item size */
	unsigned cap;                 /* read-only: capacity in items */
	unsigned char *buf;           /* cap * size bytes */
	co_waitq recvq, sendq;        /* blocked receivers, senders */
	/* a line apart whatever the struct's alignment (no alignas: a
	 * co_chan may live in malloc'ed memory) */
	char pad_s[CO_CACHELINE];
	CO__ATOMIC(unsigned) slock;   /* senders' */
	CO__ATOMIC(unsigned) tail;    /* next slot to fill, 0 .. 2 cap - 1 */
	unsigned head_seen;           /* senders' copy of head */
	unsigned slip_s;              /* senders' poll slip (lib/sync/slip.h) */
	char pad_r[CO_CACHELINE];
	CO__ATOMIC(unsigned) rlock;   /* receivers' */
	CO__ATOMIC(unsigned) head;    /* next slot to take, 0 .. 2 cap - 1 */
	unsigned tail_seen;           /* receivers' copy of tail */
	unsigned slip_r;              /* receivers' poll slip */
	char pad_end[CO_CACHELINE];
} co_chan;

/*
 * Set up a channel of capacity items of item_size bytes. buf is the
 * caller's storage of capacity * item_size bytes, or NULL to allocate it
 * here, once (co_chan_destroy frees it), starting on a cache line
 * (CO_CACHELINE) and taking whole lines. Nothing is allocated later. A
 * caller's buffer that shares a line with data another thread writes
 * slows a stream between two contexts: align it the same way.
 * Errors: -EINVAL (NULL c, item_size or capacity 0, capacity above
 * UINT_MAX / 2), -EOVERFLOW (the buffer size overflows), -ENOMEM.
 */
CO_API int co_chan_init(co_chan *c, size_t item_size, unsigned capacity, void *buf);

/* Free what init allocated. 0: every later call answers -EINVAL (the
 * memory of c itself stays the caller's); items still buffered are
 * dropped (drain with co_chan_try_recv first). -EBUSY, nothing changes: a
 * frame is blocked on it, or a send or receive is under way (polling for
 * the other end before it parks, refilling the ring from parked senders),
 * or a close that released blocked frames waits for their engines' looks
 * at them, from any thread. -EINVAL (NULL, destroyed). */
CO_API int co_chan_destroy(co_chan *c);

/* Await sending *item: 0 (it is in the channel, or with a receiver),
 * -EPIPE (closed), -ECANCELED, -ETIME (co_wait_for), -EINVAL (NULL). */
CO_API co_awaiter *co_chan_send(co_waiter *w, co_chan *c, const void *item);

/* Await an item into *item: 0, -EPIPE (closed and empty), -ECANCELED,
 * -ETIME (co_wait_for), -EINVAL (NULL). */
CO_API co_awaiter *co_chan_recv(co_waiter *w, co_chan *c, void *item);

/*
 * Await up to max items into items[0 .. max): as many as the channel holds
 * (and the senders blocked on a full channel bring), at least one, in
 * order, taken under one hold of the receivers' lock. A receiver that must
 * wait gets the first item that comes. The value: how many (1 .. max; max
 * above 65535 is taken as 65535), or -EPIPE (closed and empty),
 * -ECANCELED, -ETIME (co_wait_for), -EINVAL (NULL argument, max 0). Across
 * contexts a consumer that takes what is there pays the receivers' lock
 * once per batch, not once per item (docs/sync.md, "Cost").
 */
CO_API co_awaiter *co_chan_recv_many(co_waiter *w, co_chan *c, void *items, unsigned max);

/* Without waiting, from any thread: 0, -EAGAIN (full / empty), -EPIPE
 * (closed / closed and empty), -EINVAL (NULL). */
CO_API int co_chan_try_send(co_chan *c, const void *item);
CO_API int co_chan_try_recv(co_chan *c, void *item);

/* Close it and wake everyone blocked (with -EPIPE). From any thread.
 * 0, -EALREADY (closed before), -EINVAL (NULL). */
CO_API int co_chan_close(co_chan *c);

/* Items buffered now (a snapshot), or -EINVAL. */
CO_API int co_chan_len(co_chan *c);

#ifdef __cplusplus
}
#endif

#endif /* CORING_CHANNEL_H */
