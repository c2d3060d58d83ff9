/* SPDX-License-Identifier: MIT */
/*
 * The bounded channel: a ring of fixed-size items and two FIFOs of blocked
 * parties.
 *
 * Three spinlocks, always taken in this order: slock (senders: tail,
 * head_seen, slip_s), rlock (receivers: head, tail_seen, slip_r), lock
 * (the wait queues). A sender fills slot tail and publishes it by storing
 * tail (release); a receiver takes slot head and frees it by storing head.
 * Each side reads the other's index only when its own copy says the ring
 * is full (senders) or empty (receivers), so one producer and one consumer
 * on two CPUs share no cache line but the slots and, now and then, an
 * index: each pays one locked instruction per item, on its own lock.
 * Indexes run over 0 .. 2 cap - 1: tail == head is empty, tail == head +
 * cap (mod 2 cap) is full, no division.
 *
 * Parking. A receiver parks only holding all three locks, on an empty ring
 * with no sender parked, and sets recv_waiting; a sender parks only
 * holding all three, on a full ring, and sets send_waiting (close, under
 * all three, sets closed). Flags are cleared under the side's lock and
 * lock when the queue is empty. So a sender, which holds slock, reads
 * recv_waiting exactly, and one that finds it set hands its item to the
 * oldest parked receiver (no item can be in the ring then); a receiver,
 * which holds rlock, reads send_waiting exactly, and one that took items
 * with it set refills the ring from the parked senders, oldest first,
 * after letting rlock go. A receiver that finds the ring empty while
 * senders are still parked (another took the last item and is about to
 * refill) refills it itself instead of parking. No fence per item: the
 * locks order a parker and the other side. A flag may stay set after its
 * queue emptied (a cancel, a time limit): the next one to look clears it.
 *
 * Polling. Before it parks, an end on an engine with nothing else to do
 * polls the other side's index for a while (co__engine_poll, with a slip
 * below), so that two contexts passing a stream do not park and wake per
 * item.
 *
 * Destroy. A call that lets go of every lock and then touches the channel
 * again (a poll, a refill from parked senders, a receiver taking the
 * locks in order to park, a close waiting for its engines' looks at the
 * parties it released) counts itself in inside first, under the lock
 * it holds (slock or rlock), and leaves as its last touch of the channel,
 * or once it holds a lock again. Destroy, holding all three locks, sees
 * every call that is inside, and refuses (-EBUSY) while one is or a frame
 * is parked; it marks the channel destroyed (buf NULL) under the locks,
 * and every call looks at that under its own lock (never without one: a
 * call may race a destroy) before it touches the ring.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <coring/channel.h>
#include "waiter/waiter_internal.h"
#include "common/fault.h"
#include "sync/slip.h"

#define lock_s(c) co__spin_lock(&(c)->slock)
#define unlock_s(c) co__spin_unlock(&(c)->slock)
#define lock_r(c) co__spin_lock(&(c)->rlock)
#define unlock_r(c) co__spin_unlock(&(c)->rlock)

int co_chan_init(co_chan *c, size_t item_size, unsigned capacity, void *buf)
{
	if (c == NULL || item_size == 0 || capacity == 0 || capacity > UINT_MAX / 2)
		return -EINVAL;
	if (item_size > SIZE_MAX / capacity)
		return -EOVERFLOW;
	memset(c, 0, sizeof *c);
	atomic_init(&c->lock, 0);
	atomic_init(&c->slock, 0);
	atomic_init(&c->rlock, 0);
	atomic_init(&c->closed, 0);
	atomic_init(&c->recv_waiting, 0);
	atomic_init(&c->send_waiting, 0);
	atomic_init(&c->tail, 0);
	atomic_init(&c->head, 0);
	c->size = item_size;
	c->cap = capacity;
	c->buf = buf;
	if (buf == NULL) {
		/* on lines of its own: a neighbour on the heap that another
		 * thread writes would steal the ring's first or last line
		 * from the two ends (docs/benchmarks.md) */
		c->buf = co__malloc_aligned(CO_CACHELINE, item_size * capacity);
		if (c->buf == NULL)
			return -ENOMEM;
		c->owned = 1;
	}
	return 0;
}

static void lock_all(co_chan *c)
{
	lock_s(c);
	lock_r(c);
	co__lock(c);
}

static void unlock_all(co_chan *c)
{
	co__unlock(c);
	unlock_r(c);
	unlock_s(c);
}

/* Under slock or rlock: a call inside the channel that is about to hold
 * no lock; inside_leave is its last touch of the channel (or it holds a
 * lock again). See the top of the file. */
static void inside_enter(co_chan *c)
{
	atomic_fetch_add_explicit(&c->inside, 1, memory_order_relaxed);
}

static void inside_leave(co_chan *c)
{
	atomic_fetch_sub_explicit(&c->inside, 1, memory_order_release);
}

int co_chan_destroy(co_chan *c)
{
	unsigned char *buf = NULL;
	int err = 0;

	if (c == NULL)
		return -EINVAL;
	lock_all(c);
	if (c->buf == NULL)
		err = -EINVAL;
	else if (c->recvq.head != NULL || c->sendq.head != NULL ||
		 atomic_load_explicit(&c->inside, memory_order_acquire) != 0)
		err = -EBUSY; /* parked, or a send or receive under way */
	else {
		buf = c->owned ? c->buf : NULL;
		c->buf = NULL; /* every later call: -EINVAL */
	}
	unlock_all(c);
	free(buf);
	return err;
}

/* ---- the ring ---------------------------------------------------------------------- */

static unsigned used(const co_chan *c, unsigned tail, unsigned head)
{
	return tail >= head ? tail - head : tail + 2 * c->cap - head;
}

static unsigned char *slot(co_chan *c, unsigned i)
{
	return c->buf + (size_t)(i >= c->cap ? i - c->cap : i) * c->size;
}

static unsigned next(const co_chan *c, unsigned i)
{
	return i + 1 == 2 * c->cap ? 0 : i + 1;
}

/* The item copy: a constant-size copy for the common small items. */
static inline void item_copy(void *dst, const void *src, size_t n)
{
	switch (n) {
	case 4: memcpy(dst, src, 4); break;
	case 8: memcpy(dst, src, 8); break;
	case 16: memcpy(dst, src, 16); break;
	default: memcpy(dst, src, n); break;
	}
}

/* Under slock. 1: the item is in the ring; 0: full. */
static int ring_put(co_chan *c, const void *item)
{
	unsigned t = atomic_load_explicit(&c->tail, memory_order_relaxed);

	if (used(c, t, c->head_seen) == c->cap) {
		c->head_seen = atomic_load_explicit(&c->head, memory_order_acquire);
		if (used(c, t, c->head_seen) == c->cap)
			return 0;
	}
	item_copy(slot(c, t), item, c->size);
	atomic_store_explicit(&c->tail, next(c, t), memory_order_release); /* publish */
	return 1;
}

/* Under rlock. 1: an item was taken into *item; 0: empty. */
static int ring_take(co_chan *c, void *item)
{
	unsigned h = atomic_load_explicit(&c->head, memory_order_relaxed);

	if (h == c->tail_seen) {
		c->tail_seen = atomic_load_explicit(&c->tail, memory_order_acquire);
		if (h == c->tail_seen)
			return 0;
	}
	item_copy(item, slot(c, h), c->size);
	atomic_store_explicit(&c->head, next(c, h), memory_order_release); /* free */
	return 1;
}

/* The items in the ring now (exact under slock and rlock, else a hint). */
static unsigned ring_used(const co_chan *c)
{
	return used(c, atomic_load_explicit(&c->tail, memory_order_relaxed),
		    atomic_load_explicit(&c->head, memory_order_relaxed));
}

/* A waiting flag: exact under slock (recv_waiting) and under rlock
 * (send_waiting); see the top of the file. */
#define flag(f) ((int)atomic_load_explicit((f), memory_order_relaxed))

/* ---- serving the parked ------------------------------------------------------------ */

/* Under slock and lock: the parked senders' items into the ring, oldest
 * first. How many. */
static int pump_senders(co_chan *c, co__wake_list *l)
{
	co_waiter *s;
	int n = 0;

	while ((s = c->sendq.head) != NULL && ring_put(c, s->u.item)) {
		co__wait_claim(s, 0, l);
		n++;
	}
	if (c->sendq.head == NULL)
		atomic_store_explicit(&c->send_waiting, 0, memory_order_relaxed);
	return n;
}

/* With no lock held, after a receiver freed slots and saw senders parked
 * (under rlock, where it counted itself inside): their items go into the
 * ring. No receiver can be parked then (one parks only with no sender
 * parked: recv_suspend), so nobody else needs serving. */
static void refill(co_chan *c)
{
	co__wake_list l = CO__WAKE_LIST_INIT;

	co__fault_point(CO__POINT_CHAN_REFILL); /* tests: a sender comes first */
	lock_s(c);
	co__lock(c);
	pump_senders(c, &l);
	co__unlock(c);
	unlock_s(c);
	co__wake_all(&l);
}

/* ---- send and receive -------------------------------------------------------------- */

/* Under slock: straight to the oldest parked receiver, if one waits. 1 if
 * handed over. */
static int handed_over(co_chan *c, const void *item)
{
	co__wake_list l = CO__WAKE_LIST_INIT;
	co_waiter *r;

	co__lock(c);
	r = c->recvq.head;
	if (r != NULL) {
		item_copy(r->u.item, item, c->size); /* linked: alive */
		co__wait_claim(r, r->many ? 1 : 0, &l);
	}
	if (c->recvq.head == NULL)
		atomic_store_explicit(&c->recv_waiting, 0, memory_order_relaxed);
	co__unlock(c);
	co__wake_all(&l);
	return r != NULL;
}

/* Under slock: 1 if parked senders are still waiting after a pump (a new
 * sender queues behind them). */
static int senders_ahead(co_chan *c)
{
	co__wake_list l = CO__WAKE_LIST_INIT;
	int ahead;

	co__lock(c);
	pump_senders(c, &l);
	ahead = c->sendq.head != NULL;
	co__unlock(c);
	co__wake_all(&l);
	return ahead;
}

/* Under slock: 1 sent (to a parked receiver or into the ring), 0 full,
 * -EPIPE closed. An item put into the ring is for no parked receiver:
 * receivers park only on an empty ring, under slock, and handed_over has
 * just served or cleared them. */
static inline int send_now(co_chan *c, const void *item)
{
	if (co__unlikely(c->buf == NULL))
		return -EINVAL; /* destroyed */
	if (atomic_load_explicit(&c->closed, memory_order_relaxed))
		return -EPIPE;
	if (flag(&c->recv_waiting) && handed_over(c, item))
		return 1;
	if (flag(&c->send_waiting) && senders_ahead(c))
		return 0;
	return ring_put(c, item);
}

/* What a polling end watches (hints, read without its lock: the retry
 * after the poll reads them under it). */
static int send_ready(void *arg)
{
	co_chan *c = arg;

	return ring_used(c) < c->cap || atomic_load_explicit(&c->closed, memory_order_relaxed);
}

static int recv_ready(void *arg)
{
	co_chan *c = arg;

	return ring_used(c) != 0 || atomic_load_explicit(&c->closed, memory_order_relaxed);
}

/* Under the end's lock: an end that polled for waited pauses (0: it did
 * not find what it polled for) and found n items or slots (lib/sync/slip.h). */
static void slip_adapt(const co_chan *c, unsigned *slip, unsigned waited, unsigned n)
{
	*slip = co__slip_next(c->cap, *slip, waited, n);
}

/* Poll before parking: not for a frame asked to cancel, whose wait ends
 * at the park (-ECANCELED), and never past the wait's own limit
 * (co__engine_poll's deadline: a limit of 0, a try, does not poll). */
static int may_poll(co_frame *f)
{
	return co__engine_may_poll(co__tls_engine) && !co_await_cancelled(f);
}

static int send_suspend(co_awaiter *a, co_frame *f)
{
	co_waiter *w = (co_waiter *)a;
	co_chan *c = w->obj;
	int ret;

	lock_s(c);
	ret = send_now(c, w->u.item);
	if (ret == 0 && may_poll(f)) {
		/* full: while the engine has nothing else to do, poll for a
		 * receiver to free a slot before parking */
		unsigned waited, slip = c->slip_s;

		inside_enter(c);
		unlock_s(c);
		co__fault_point(CO__POINT_CHAN_POLL); /* tests: destroy now */
		waited = co__engine_poll(co__tls_engine, send_ready, c, slip, w->deadline);
		lock_s(c);
		inside_leave(c);
		slip_adapt(c, &c->slip_s, waited, c->cap - ring_used(c));
		/* again, found or not: a receiver may have parked meanwhile */
		ret = send_now(c, w->u.item);
	}
	if (ret == 0) {
		/* park, unless a receiver freed a slot meanwhile (head is
		 * exact under rlock) */
		lock_r(c);
		co__lock(c);
		if (c->sendq.head != NULL || !ring_put(c, w->u.item)) {
			atomic_store_explicit(&c->send_waiting, 1, memory_order_relaxed);
			ret = co__wait_park(w, f, &c->sendq); /* unlocks lock */
			unlock_r(c);
			unlock_s(c);
			return ret;
		}
		co__unlock(c);
		unlock_r(c);
		ret = 1;
	}
	unlock_s(c);
	w->res = ret > 0 ? 0 : ret;
	return 0;
}

/* Under rlock: one item, or for recv_many what there is, up to w->many,
 * after the `had` items taken before. */
static inline int take_some(co_chan *c, co_waiter *w, int had)
{
	unsigned char *to = (unsigned char *)w->u.item + (size_t)had * c->size;
	int got = had;

	while ((unsigned)got < (w->many ? w->many : 1u) && ring_take(c, to)) {
		got++;
		to += c->size;
	}
	return got - had;
}

/* Under rlock, having taken got >= 1 items: unlocks rlock, refills the
 * freed slots from parked senders, and for recv_many takes those too, up
 * to w->many. */
static int take_more(co_chan *c, co_waiter *w, int got)
{
	for (;;) {
		int more;

		if (!flag(&c->send_waiting)) {
			unlock_r(c);
			return got;
		}
		inside_enter(c);
		unlock_r(c);
		refill(c);
		if ((unsigned)got >= w->many) {
			inside_leave(c);
			return got;
		}
		lock_r(c);
		inside_leave(c);
		more = take_some(c, w, got);
		if (more == 0) {
			unlock_r(c);
			return got;
		}
		got += more;
	}
}

/* Under slock and rlock, the ring empty: park w, unless closed (then
 * -EPIPE) or senders are parked (a receiver drained the ring before it
 * refilled it from them: their items go in now, and w takes the first).
 * Unlocks both. */
static int recv_park(co_chan *c, co_waiter *w, co_frame *f)
{
	co__wake_list l = CO__WAKE_LIST_INIT;
	int ret;

	co__lock(c);
	if (c->sendq.head != NULL) {
		pump_senders(c, &l);
		co__unlock(c);
		unlock_s(c);
		co__wake_all(&l);
		w->res = take_more(c, w, take_some(c, w, 0)); /* >= 1 */
		if (w->many == 0)
			w->res = 0;
		return 0;
	}
	if (atomic_load_explicit(&c->closed, memory_order_relaxed)) {
		co__unlock(c);
		unlock_r(c);
		unlock_s(c);
		w->res = -EPIPE;
		return 0;
	}
	atomic_store_explicit(&c->recv_waiting, 1, memory_order_relaxed);
	ret = co__wait_park(w, f, &c->recvq); /* unlocks lock */
	unlock_r(c);
	unlock_s(c);
	return ret;
}

static int recv_suspend(co_awaiter *a, co_frame *f)
{
	co_waiter *w = (co_waiter *)a;
	co_chan *c = w->obj;
	int got;

	lock_r(c);
	if (co__unlikely(c->buf == NULL)) { /* destroyed */
		unlock_r(c);
		w->res = -EINVAL;
		return 0;
	}
	got = take_some(c, w, 0);
	if (got == 0 && may_poll(f)) {
		/* empty: while the engine has nothing else to do, poll for a
		 * sender before parking */
		unsigned waited, slip = c->slip_r;

		inside_enter(c);
		unlock_r(c);
		co__fault_point(CO__POINT_CHAN_POLL); /* tests: destroy now */
		waited = co__engine_poll(co__tls_engine, recv_ready, c, slip, w->deadline);
		lock_r(c);
		inside_leave(c);
		slip_adapt(c, &c->slip_r, waited, ring_used(c));
		if (waited)
			got = take_some(c, w, 0);
	}
	if (got == 0) {
		/* park with the ring exact: no sender can put while we hold
		 * slock, and one that puts after sees recv_waiting */
		if (!co__spin_trylock(&c->slock)) { /* against the lock order */
			inside_enter(c);
			unlock_r(c);
			co__fault_point(CO__POINT_CHAN_POLL); /* tests: destroy now */
			lock_s(c);
			lock_r(c);
			inside_leave(c);
		}
		got = take_some(c, w, 0); /* a sender may have put before */
		if (got == 0)
			return recv_park(c, w, f);
		unlock_s(c);
	}
	w->res = take_more(c, w, got);
	if (w->many == 0)
		w->res = 0;
	return 0;
}

static const co__wait_ops send_ops = {
	{ NULL, send_suspend, co__wait_resume, co__wait_cancel, CO__AW_WAITER, "channel send" }, NULL
};
static const co__wait_ops recv_ops = {
	{ NULL, recv_suspend, co__wait_resume, co__wait_cancel, CO__AW_WAITER, "channel recv" }, NULL
};

static co_awaiter *chan_prep(co_waiter *w, const co__wait_ops *ops, co_chan *c, void *item,
			     unsigned many, int valid)
{
	co_awaiter *a = co__wait_prep(w, ops, c ? &c->lock : NULL,
				      valid && c && item ? c : NULL); /* destroyed: under the lock */

	if (w) {
		w->u.item = item;
		w->many = (unsigned short)(many > 65535 ? 65535 : many);
	}
	return a;
}

co_awaiter *co_chan_send(co_waiter *w, co_chan *c, const void *item)
{
	return chan_prep(w, &send_ops, c, (void *)(uintptr_t)item, 0, 1);
}

co_awaiter *co_chan_recv(co_waiter *w, co_chan *c, void *item)
{
	return chan_prep(w, &recv_ops, c, item, 0, 1);
}

co_awaiter *co_chan_recv_many(co_waiter *w, co_chan *c, void *items, unsigned max)
{
	return chan_prep(w, &recv_ops, c, items, max, max != 0);
}

int co_chan_try_send(co_chan *c, const void *item)
{
	int ret;

	if (c == NULL || item == NULL)
		return -EINVAL;
	lock_s(c);
	ret = send_now(c, item);
	unlock_s(c);
	return ret > 0 ? 0 : ret == 0 ? -EAGAIN : ret;
}

int co_chan_try_recv(co_chan *c, void *item)
{
	int s, closed;

	if (c == NULL || item == NULL)
		return -EINVAL;
	lock_r(c);
	if (c->buf == NULL) { /* destroyed */
		unlock_r(c);
		return -EINVAL;
	}
	if (ring_take(c, item)) {
		s = flag(&c->send_waiting);
		if (s)
			inside_enter(c);
		unlock_r(c);
		if (s) {
			refill(c);
			inside_leave(c);
		}
		return 0;
	}
	/* exact under rlock: close holds it, and every put came before */
	closed = (int)atomic_load_explicit(&c->closed, memory_order_relaxed);
	unlock_r(c);
	return closed ? -EPIPE : -EAGAIN;
}

int co_chan_close(co_chan *c)
{
	co__wake_list l = CO__WAKE_LIST_INIT;

	if (c == NULL)
		return -EINVAL;
	lock_all(c);
	if (c->buf == NULL || atomic_load_explicit(&c->closed, memory_order_relaxed)) {
		int err = c->buf == NULL ? -EINVAL : -EALREADY; /* destroyed */

		unlock_all(c);
		return err;
	}
	atomic_store_explicit(&c->closed, 1, memory_order_release);
	/* parked receivers wait on an empty ring: nothing is left for them;
	 * parked senders' items were not sent */
	while (c->recvq.head)
		co__wait_claim(c->recvq.head, -EPIPE, &l);
	while (c->sendq.head)
		co__wait_claim(c->sendq.head, -EPIPE, &l);
	if (l.head == NULL) {
		unlock_all(c);
		return 0;
	}
	/* inside until no engine's look at those it claimed can lock the
	 * channel any more: a destroy meanwhile, with nobody parked, would
	 * free it under that look */
	inside_enter(c);
	unlock_all(c);
	co__wake_wait_looks(&l);
	inside_leave(c);
	co__wake_all(&l);
	return 0;
}

int co_chan_len(co_chan *c)
{
	int n;

	if (c == NULL)
		return -EINVAL;
	lock_s(c);
	lock_r(c);
	n = c->buf == NULL ? -EINVAL
			   : (int)used(c, atomic_load_explicit(&c->tail, memory_order_relaxed),
				       atomic_load_explicit(&c->head, memory_order_relaxed));
	unlock_r(c);
	unlock_s(c);
	return n;
}
