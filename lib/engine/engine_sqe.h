/* SPDX-License-Identifier: MIT */
/*
 * engine_sqe.c (not installed): taking SQEs, with the owner thread's
 * fast paths that lib/io/io.c inlines (e is the engine running on the
 * calling thread, co__tls_engine, never NULL there).
 */
#ifndef CORING_LIB_ENGINE_SQE_H
#define CORING_LIB_ENGINE_SQE_H

#include "engine_impl.h"

/* Tag sqe with info | tag; an SQE with info counts as in flight until
 * its (last) CQE. */
static inline void co__sqe_tag(co_engine *e, struct io_uring_sqe *sqe, co_io_info *info,
			       unsigned tag)
{
	sqe->user_data = (uint64_t)(uintptr_t)info | (tag & CO_IO_TAG_MASK);
	if (info) {
		e->inflight++;
		e->stats.ops++;
	}
}

/* No room for co__engine_sqe: submit what is queued, then take a slot. */
struct io_uring_sqe *co__engine_sqe_slow(co_engine *e);

/* Room in the SQ for an SQE and a linked timeout after it, so that a
 * deadline never finds its chain cut by an early submit. The acquire load
 * of the head pairs with the kernel's release store after it consumed
 * SQEs. */
static inline int co__engine_sq_room(struct io_uring_sq *sq, unsigned tail)
{
	return tail - io_uring_smp_load_acquire(sq->khead) + 2 <= sq->ring_entries;
}

/* The SQ's slot at tail, taken in place (the caller found room). */
static inline struct io_uring_sqe *co__engine_sq_take(co_engine *e, unsigned tail)
{
	struct io_uring_sq *sq = &e->ring.sq;

	sq->sqe_tail = tail + 1;
	return &sq->sqes[(tail & sq->ring_mask) << e->sqe_shift];
}

/* sqe becomes the last one handed out, tagged with info | tag. */
static inline struct io_uring_sqe *co__engine_sqe_claim(co_engine *e, struct io_uring_sqe *sqe,
							 co_io_info *info, unsigned tag)
{
	e->last_info = info;
	co__sqe_tag(e, sqe, info, tag);
	return sqe;
}

/* co_engine_sqe without the thread check: with room (co__engine_sq_room)
 * the SQ's next slot in place (liburing's get_sqe with that room test
 * folded in), without it an early submit first. */
static inline struct io_uring_sqe *co__engine_sqe(co_engine *e, co_io_info *info, unsigned tag)
{
	unsigned tail = e->ring.sq.sqe_tail;
	struct io_uring_sqe *sqe;

	if (co__likely(co__engine_sq_room(&e->ring.sq, tail)))
		sqe = co__engine_sq_take(e, tail);
	else
		sqe = co__engine_sqe_slow(e);
	return co__engine_sqe_claim(e, sqe, info, tag);
}

/* Where co__engine_sqe_or_spill puts an SQE it found no room for: the
 * calling thread's (two slots: an SQE128 engine's SQE is two). */
extern _Thread_local struct io_uring_sqe co__sqe_spill[2]
	__attribute__((tls_model("initial-exec"), visibility("hidden")));

/* co__engine_sqe for a prep that calls nothing on its common path, so
 * that it keeps no argument in a saved register across a call (a prep's
 * saves and restores were a fifth of its instructions). With room, the
 * SQ's next slot; without, the thread's spill slot and *spilled set: the
 * caller fills it, then calls co__engine_unspill, which makes room and
 * moves it into the SQ. The SQE never goes out half filled. */
static inline struct io_uring_sqe *co__engine_sqe_or_spill(co_engine *e, co_io_info *info,
							    unsigned tag, int *spilled)
{
	unsigned tail = e->ring.sq.sqe_tail;
	struct io_uring_sqe *sqe;

	*spilled = !co__engine_sq_room(&e->ring.sq, tail);
	if (co__likely(!*spilled))
		sqe = co__engine_sq_take(e, tail);
	else
		sqe = co__sqe_spill;
	return co__engine_sqe_claim(e, sqe, info, tag);
}

/* Submit until the SQ has room, then move the spilled SQE into it. */
void co__engine_unspill(co_engine *e);

/* A free SQE, submitting what is queued first if there is none. */
struct io_uring_sqe *co__engine_sqe_get(co_engine *e);

#endif
