/* SPDX-License-Identifier: MIT */
/*
 * The kinds of awaiter the library's layers define (co_awaiter_ops.kind;
 * not installed). A layer tags its ops with its kind, so that another
 * layer (lib/timeout.c) can tell what it was given by a flag, never by
 * comparing function pointers.
 */
#ifndef CORING_LIB_AWAITER_H
#define CORING_LIB_AWAITER_H

enum {
	CO__AW_USER = 0,
	CO__AW_IO,        /* lib/io.c */
	CO__AW_WAIT,      /* a co_waiter (lib/waiter.c) */
	CO__AW_TRANSFER,  /* lib/context.c */
	CO__AW_WHEN,      /* lib/when.c */
	CO__AW_LIMIT,     /* lib/timeout.c */
	CO__AW_FAILED,    /* completes at once with an error */
	CO__AW_STREAM,    /* co_stream_recv (lib/stream.c) */
	CO__AW_KINDS      /* how many (test_timeout has a row for each) */
};

#endif
