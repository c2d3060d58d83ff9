/* SPDX-License-Identifier: MIT */
/*
 * The SQE calls of engine.h for awaiters written outside the library (and
 * for lib/io/io.c's links and timeouts): an SQE tagged with an io_info, the
 * next SQE of a link chain, the last SQE handed out, a timespec slot that
 * lives as long as an SQE is queued. The library's own preps take SQEs
 * through co__engine_sqe (engine_sqe.h), inlined.
 */
#include <string.h>

#include "engine_sqe.h"
#include "engine_state.h"

struct io_uring_sqe *co_engine_sqe(co_engine *e, co_io_info *info, unsigned tag)
{
	if (e == NULL || e != co__tls_engine)
		return NULL;
	return co__engine_sqe(e, info, tag);
}

struct io_uring_sqe *co_engine_sqe_link(co_engine *e, co_io_info *info, unsigned tag)
{
	struct io_uring_sqe *sqe;

	if (e == NULL || e != co__tls_engine)
		return NULL;
	sqe = io_uring_get_sqe(&e->ring); /* room kept by co_engine_sqe */
	e->last_info = NULL;
	if (sqe == NULL)
		return NULL;
	co__sqe_tag(e, sqe, info, tag);
	return sqe;
}

struct io_uring_sqe *co_engine_last_sqe(co_engine *e, co_io_info *info)
{
	struct io_uring_sq *sq;

	if (e == NULL || e != co__tls_engine || info == NULL || e->last_info != info)
		return NULL;
	sq = &e->ring.sq; /* last_info's SQE is the one before the tail */
	return &sq->sqes[((sq->sqe_tail - 1) & sq->ring_mask) << e->sqe_shift];
}

struct __kernel_timespec *co_engine_sqe_ts(co_engine *e, struct io_uring_sqe *sqe)
{
	size_t i;

	if (e == NULL || e->ts == NULL || sqe < e->ring.sq.sqes)
		return NULL;
	i = (size_t)(sqe - e->ring.sq.sqes) >> e->sqe_shift; /* SQE128: two per slot */
	if (i >= e->ring.sq.ring_entries)
		return NULL;
	return &e->ts[i];
}

struct io_uring_sqe *co__engine_sqe_get(co_engine *e)
{
	struct io_uring_sqe *sqe;

	while ((sqe = io_uring_get_sqe(&e->ring)) == NULL) {
		e->stats.sq_full++;
		io_uring_submit(&e->ring);
	}
	return sqe;
}

/* co__engine_sqe (engine_sqe.h) found the SQ too full to keep room for a
 * linked timeout: submit what is queued, then take a slot. */
struct io_uring_sqe *co__engine_sqe_slow(co_engine *e)
{
	e->stats.sq_full++;
	io_uring_submit(&e->ring);
	return co__engine_sqe_get(e);
}

_Thread_local struct io_uring_sqe co__sqe_spill[2] __attribute__((tls_model("initial-exec")));

void co__engine_unspill(co_engine *e)
{
	struct io_uring_sqe *sqe = co__engine_sqe_slow(e);

	memcpy(sqe, co__sqe_spill, sizeof *sqe << e->sqe_shift);
}
