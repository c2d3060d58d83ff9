/* SPDX-License-Identifier: MIT */
/*
 * The ready queue (docs/engine.md, "The ready queue"): the inbox other
 * threads push onto, the ck_ring thieves may take from, and the owner's
 * plain FIFO. Its inline halves, which the loop runs for every frame, are
 * in engine_queue.h.
 */

#include "engine_queue.h"
#include "common/fault.h"
#include "engine_frames.h"
#include "common/tsan.h"

CO_NO_TSAN int co__engine_ring_push(co_engine *e, co_frame *f)
{
	int ok;

	co__hb_release(f); /* pairs with co__engine_ring_pop's acquire of the same frame */
	co__tsan_ignore_begin();
	ok = ck_ring_enqueue_spmc(&e->ready->ring, e->ready->buf, f); /* the owner only */
	co__tsan_ignore_end();
	return ok;
}

CO_NO_TSAN co_frame *co__engine_ring_pop(co_engine *e)
{
	void *p;
	int ok;

	co__tsan_ignore_begin();
	ok = ck_ring_dequeue_spmc(&e->ready->ring, e->ready->buf, &p); /* owner and thieves */
	co__tsan_ignore_end();
	if (!ok)
		return NULL;
	co__hb_acquire(p);
	return p;
}

CO_NO_TSAN unsigned co__engine_ring_size(co_engine *e)
{
	unsigned n;

	co__tsan_ignore_begin();
	n = ck_ring_size(&e->ready->ring);
	co__tsan_ignore_end();
	return n;
}

/* A frame made ready on the owner thread while thieves may look: into the
 * ring, or behind the overflow. (Without stealing, co__engine_push_owner
 * in engine_queue.h queues it locally and never comes here.) */
void co__engine_push_ring(co_engine *e, co_frame *f)
{
	if (co__likely(e->local_head == NULL) && co__likely(co__engine_ring_push(e, f)))
		return;
	co__engine_local_push(e, f); /* the ring is full, or overflow is ahead of us */
	e->stats.spilled++;
}

/* Move overflow into the ring as it has room, oldest first (the ring's
 * frames are older still), so that thieves can reach it. Each frame
 * leaves the overflow before its push: once in the ring, a thief may take
 * it, run it and reuse its link, or its on_done free it, so nothing of it
 * is read after. One the full ring refuses goes back to the head. */
void co__engine_ring_refill(co_engine *e)
{
	co_frame *f;

	while ((f = co__engine_local_pop(e)) != NULL) {
		if (!co__engine_ring_push(e, f)) {
			f->next = e->local_head;
			e->local_head = f;
			if (e->local_tail == NULL)
				e->local_tail = f;
			e->local_n++;
			return;
		}
		co__fault_point(CO__POINT_RING_REFILLED); /* tests: a thief takes f now */
	}
}

/* Queue what other threads pushed, oldest first. */
void co__engine_inbox_drain(co_engine *e)
{
	co_frame *f = co__lifo_take(&e->inbox, offsetof(co_frame, next)), *next;

	for (; f; f = next) {
		next = f->next; /* owner_push reuses the link */
		if (f->view_slot == 0) /* a spawn or a transfer: now ours */
			co__view_add(e, f);
		co__engine_push_owner(e, f);
	}
}
