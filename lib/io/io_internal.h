/* SPDX-License-Identifier: MIT */
/*
 * The I/O layer as the layers above it see it (not installed; lib/io/io.c):
 * what a time limit (lib/timeout/timeout.c) asks of an I/O await.
 */
#ifndef CORING_LIB_IO_INTERNAL_H
#define CORING_LIB_IO_INTERNAL_H

#include <stdint.h>

#include <coring/io.h>

/* Link a timeout of ns to the I/O awaiter aw just prepared: 0 (linked, or
 * the prep failed and ends at once), -EAGAIN (its SQE is no longer
 * queued, it is a sleep, or it has a timeout already). */
int co__io_link_timeout(co_awaiter *aw, uint64_t ns);

#endif
