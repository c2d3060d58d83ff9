/* SPDX-License-Identifier: MIT */
/*
 * The kinds of awaiter the library's layers define (co_awaiter_ops.kind;
 * not installed). A layer tags its ops with its kind, so that another
 * layer (lib/timeout/timeout.c) can tell what it was given by a flag, never by
 * comparing function pointers.
 */
#ifndef CORING_LIB_AWAITER_H
#define CORING_LIB_AWAITER_H

#include <coring/co.h>

enum {
	CO__AW_USER = 0,
	CO__AW_IO,        /* lib/io/io.c */
	CO__AW_WAIT,      /* a co_waiter (lib/waiter/waiter.c) */
	CO__AW_TRANSFER,  /* lib/context/context.c */
	CO__AW_WHEN,      /* lib/sync/when.c */
	CO__AW_LIMIT,     /* lib/timeout/timeout.c */
	CO__AW_FAILED,    /* ends with an error: at once, or (a limit
	                     refused) once what it was around is cancelled */
	CO__AW_STREAM,    /* co_stream_recv (lib/stream/stream.c) */
	CO__AW_TURN,      /* co_next_turn, co_after_turns (lib/engine/engine_turn.c) */
	CO__AW_KINDS      /* how many (test_timeout has a row for each) */
};

/* The -EINVAL awaiter (co__einval_awaiter) is co.h's, of this kind. */
_Static_assert(CO__AW_FAILED == CO__AW_FAILED_KIND, "co.h's failed kind");

/* Define `name`, a stateless read-only awaiter that ends at once with err
 * (for errors other than -EINVAL, which co__einval_awaiter gives): one
 * serves every thread, and nothing of the caller's objects is touched. */
#define CO__FAILED_AWAITER(name, err)                                                        \
	static int name##_resume(co_awaiter *a, co_frame *f)                                  \
	{                                                                                     \
		(void)a;                                                                      \
		(void)f;                                                                      \
		return (err);                                                                 \
	}                                                                                     \
	static const co_awaiter_ops name##_ops = { co__einval_ready, co__einval_ready,        \
						   name##_resume, NULL, CO__AW_FAILED, "failed" };      \
	static const co_awaiter name = { &name##_ops }

/* What a call made for one kind of awaiter (co_deadline, co_wait_for ...)
 * returns for another: a failed prep as it is (its own error); a limit's
 * own awaiter refused, in place (its ops are the first of two, the second
 * the refused form, which cancels what the limit was around if a prep put
 * it in the kernel already, and ends with -EINVAL); anything else the
 * -EINVAL awaiter. */
static inline co_awaiter *co__wrong_kind(co_awaiter *aw)
{
	if (aw->ops != NULL && CO__AW_KIND(aw->ops) == CO__AW_FAILED)
		return aw;
	if (aw->ops != NULL && CO__AW_KIND(aw->ops) == CO__AW_LIMIT) {
		aw->ops = aw->ops + 1;
		return aw;
	}
	return co__einval_awaiter();
}

#endif
