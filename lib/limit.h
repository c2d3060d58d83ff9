/* SPDX-License-Identifier: MIT */
/*
 * What a time limit (lib/timeout.c) asks of the layers below it (not
 * installed): the I/O layer links a kernel timeout to an operation just
 * prepared, the waiter layer arms a waiter's own timer. Each layer
 * implements its half; timeout.c is the only caller.
 */
#ifndef CORING_LIB_LIMIT_H
#define CORING_LIB_LIMIT_H

#include <stdint.h>

#include <coring/co.h>

/* Link a timeout of ns to the I/O awaiter aw just prepared (lib/io.c): 0
 * (linked, or the prep failed and ends at once), -EAGAIN (its SQE is no
 * longer queued, it is a sleep, or it has a timeout already). */
int co__io_link_timeout(co_awaiter *aw, uint64_t ns);

/* Limit the co_waiter awaiter aw to an absolute CLOCK_MONOTONIC deadline
 * (lib/waiter.c); an earlier limit already set holds. */
void co__wait_limit(co_awaiter *aw, uint64_t deadline);

#endif
