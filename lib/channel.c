/* SPDX-License-Identifier: MIT */
/*
 * The bounded channel: a ring of fixed-size items and two FIFOs of blocked
 * parties, under one spinlock. Invariants (under the lock): receivers wait
 * only while the ring is empty, senders only while it is full. So an
 * arriving sender hands its item straight to the oldest receiver, and a
 * receiver that frees a slot refills it from the oldest sender.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <coring/channel.h>
#include "waiter_internal.h"
#include "fault.h"


int co_chan_init(co_chan *c, size_t item_size, unsigned capacity, void *buf)
{
	if (c == NULL || item_size == 0 || capacity == 0)
		return -EINVAL;
	if (item_size > SIZE_MAX / capacity)
		return -EOVERFLOW;
	memset(c, 0, sizeof *c);
	atomic_init(&c->lock, 0);
	c->size = item_size;
	c->cap = capacity;
	c->buf = buf;
	if (buf == NULL) {
		c->buf = co__malloc(item_size * capacity);
		if (c->buf == NULL)
			return -ENOMEM;
		c->owned = 1;
	}
	return 0;
}

int co_chan_destroy(co_chan *c)
{
	int busy;

	if (c == NULL || c->buf == NULL)
		return -EINVAL;
	co__lock(c);
	busy = c->recvq.head != NULL || c->sendq.head != NULL;
	co__unlock(c);
	if (busy)
		return -EBUSY;
	if (c->owned)
		free(c->buf);
	c->buf = NULL;
	return 0;
}

/* Slot i after the head (i <= count < cap, head < cap): wrapped by a
 * compare, not a division, inside the lock. */
static unsigned char *slot(co_chan *c, unsigned i)
{
	unsigned k = c->head + i;

	if (k >= c->cap)
		k -= c->cap;
	return c->buf + (size_t)k * c->size;
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

/* Under the lock. 1: sent (to a receiver or into the ring); 0: full. */
static int put(co_chan *c, const void *item, co__wake_list *l)
{
	co_waiter *r = c->recvq.head;

	if (r) {
		item_copy(r->u.item, item, c->size); /* r is linked, so alive */
		co__wait_claim(r, r->many ? 1 : 0, l); /* recv_many: one item */
		return 1;
	}
	if (c->count == c->cap)
		return 0;
	item_copy(slot(c, c->count), item, c->size);
	c->count++;
	return 1;
}

/* Under the lock. 1: received; 0: empty. */
static int take(co_chan *c, void *item, co__wake_list *l)
{
	co_waiter *s;

	if (c->count == 0)
		return 0;
	item_copy(item, slot(c, 0), c->size);
	c->head = c->head + 1 == c->cap ? 0 : c->head + 1;
	c->count--;
	s = c->sendq.head;
	if (s) { /* the ring was full: the oldest sender fills the slot */
		item_copy(slot(c, c->count), s->u.item, c->size);
		c->count++;
		co__wait_claim(s, 0, l);
	}
	return 1;
}

static int send_suspend(co_awaiter *a, co_frame *f)
{
	co_waiter *w = (co_waiter *)a;
	co_chan *c = w->obj;
	co__wake_list l = CO__WAKE_LIST_INIT;

	co__lock(c);
	if (c->closed || put(c, w->u.item, &l)) {
		w->res = c->closed ? -EPIPE : 0;
		co__unlock(c);
		co__wake_all(&l);
		return 0;
	}
	return co__wait_park(w, f, &c->sendq);
}

static int recv_suspend(co_awaiter *a, co_frame *f)
{
	co_waiter *w = (co_waiter *)a;
	co_chan *c = w->obj;
	co__wake_list l = CO__WAKE_LIST_INIT;
	unsigned char *to = w->u.item;
	int got = 0;

	co__lock(c);
	/* one item, or for recv_many what there is, up to w->many */
	while (take(c, to, &l) && (unsigned)++got < w->many)
		to += c->size;
	if (got || c->closed) {
		w->res = got == 0 ? -EPIPE : w->many ? got : 0;
		co__unlock(c);
		co__wake_all(&l);
		return 0;
	}
	return co__wait_park(w, f, &c->recvq);
}

static const co__wait_ops send_ops = {
	{ NULL, send_suspend, co__wait_resume, co__wait_cancel, CO__AW_WAIT }, NULL
};
static const co__wait_ops recv_ops = {
	{ NULL, recv_suspend, co__wait_resume, co__wait_cancel, CO__AW_WAIT }, NULL
};

static co_awaiter *chan_prep(co_waiter *w, const co__wait_ops *ops, co_chan *c, void *item,
			     unsigned many, int valid)
{
	co_awaiter *a = co__wait_prep(w, ops, c ? &c->lock : NULL,
				      valid && c && item && c->buf ? c : NULL);

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
	co__wake_list l = CO__WAKE_LIST_INIT;
	int err;

	if (c == NULL || item == NULL || c->buf == NULL)
		return -EINVAL;
	co__lock(c);
	err = c->closed ? -EPIPE : put(c, item, &l) ? 0 : -EAGAIN;
	co__unlock(c);
	co__wake_all(&l);
	return err;
}

int co_chan_try_recv(co_chan *c, void *item)
{
	co__wake_list l = CO__WAKE_LIST_INIT;
	int err;

	if (c == NULL || item == NULL || c->buf == NULL)
		return -EINVAL;
	co__lock(c);
	err = take(c, item, &l) ? 0 : c->closed ? -EPIPE : -EAGAIN;
	co__unlock(c);
	co__wake_all(&l);
	return err;
}

int co_chan_close(co_chan *c)
{
	co__wake_list l = CO__WAKE_LIST_INIT;

	if (c == NULL || c->buf == NULL)
		return -EINVAL;
	co__lock(c);
	if (c->closed) {
		co__unlock(c);
		return -EALREADY;
	}
	c->closed = 1;
	/* Receivers wait only on an empty ring: nothing is left for them. */
	while (c->recvq.head)
		co__wait_claim(c->recvq.head, -EPIPE, &l);
	while (c->sendq.head)
		co__wait_claim(c->sendq.head, -EPIPE, &l);
	co__unlock(c);
	co__wake_all(&l);
	return 0;
}

int co_chan_len(co_chan *c)
{
	int n;

	if (c == NULL || c->buf == NULL)
		return -EINVAL;
	co__lock(c);
	n = (int)c->count;
	co__unlock(c);
	return n;
}
