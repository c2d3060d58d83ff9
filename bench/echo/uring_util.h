/* SPDX-License-Identifier: MIT */
/*
 * What the hand-written liburing servers (echo_uring, echo_uring_mshot)
 * share: the ring's setup, user_data as a pointer with the operation in its
 * low bits, and an SQE that is always there.
 */
#ifndef BENCH_URING_UTIL_H
#define BENCH_URING_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <liburing.h>

/* A ring of 1024 SQEs and cq_entries CQEs, created disabled (the thread
 * that drives it enables it: ring_enable), with SINGLE_ISSUER |
 * DEFER_TASKRUN, or COOP_TASKRUN where the kernel lacks those, or neither.
 * 0 or -errno. */
static inline int ring_init(struct io_uring *r, unsigned cq_entries)
{
	static const unsigned modes[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_COOP_TASKRUN,
		0,
	};
	int ret = -EINVAL;

	for (unsigned i = 0; i < 3; i++) {
		struct io_uring_params p;

		memset(&p, 0, sizeof p);
		p.flags = IORING_SETUP_R_DISABLED | IORING_SETUP_CQSIZE | modes[i];
		p.cq_entries = cq_entries;
		ret = io_uring_queue_init_params(1024, r, &p);
		if (ret != -EINVAL)
			return ret;
	}
	return ret;
}

/* On the thread that drives the ring, before its first submit: the ring
 * was created disabled, and enabling it here binds it to this thread
 * (SINGLE_ISSUER); its fd is registered for io_uring_enter. */
static inline void ring_enable(struct io_uring *r)
{
	io_uring_register(r->ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0);
	io_uring_register_ring_fd(r);
}

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
