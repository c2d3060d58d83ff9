/* SPDX-License-Identifier: MIT */
/*
 * What the hand-written liburing servers (echo_uring, echo_uring_mshot)
 * share: user_data as a pointer with the operation in its low bits, and an
 * SQE that is always there.
 */
#ifndef BENCH_URING_UTIL_H
#define BENCH_URING_UTIL_H

#include <stdint.h>
#include <liburing.h>

/* p is 8-byte aligned: the operation goes in its 3 low bits. */
static inline void set_data(struct io_uring_sqe *sqe, void *p, unsigned op)
{
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)p | op);
}

/* The SQ is sized for every connection of a turn; if it fills anyway,
 * submit what is there and take a slot. */
static inline struct io_uring_sqe *get_sqe(struct io_uring *r)
{
	struct io_uring_sqe *sqe;

	while ((sqe = io_uring_get_sqe(r)) == NULL)
		io_uring_submit(r);
	return sqe;
}

#endif
