/* SPDX-License-Identifier: MIT */
/*
 * The I/O layer as the layers above it see it (not installed; lib/io/io.c):
 * what a time limit (lib/timeout/timeout.c) and co_wait_for
 * (lib/waiter/waiter.c) ask of an I/O await.
 */
#ifndef CORING_LIB_IO_INTERNAL_H
#define CORING_LIB_IO_INTERNAL_H

#include <stdint.h>

#include <coring/io.h>

/* Link a timeout of ns to the I/O awaiter aw just prepared: 0 (linked, or
 * the prep failed and ends at once), -EAGAIN (its SQE is no longer
 * queued, it is a sleep, or it has a timeout already). */
int co__io_link_timeout(co_awaiter *aw, uint64_t ns);

/* Refuse the I/O awaiter aw, given to a form that does not limit I/O
 * (co_wait_for): its prep queued the operation already, so the await
 * cancels it and ends with -EINVAL once the kernel has answered for it:
 * an operation that would wait takes nothing (a prep that failed, nothing
 * queued: -EINVAL at once). */
void co__io_refuse(co_awaiter *aw);

#endif
