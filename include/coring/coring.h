/* SPDX-License-Identifier: MIT */
/*
 * coring/coring.h - every coring header, for Linux programs:
 *
 *     #include <coring/coring.h>
 *
 * The layers, each depending only on those above it (docs/design.md,
 * "Layers", in the same order):
 *   co.h         coroutine frames, awaiters, child await (freestanding)
 *   loop.h       co_loop, a bare-metal run loop: interrupt wakes, ticks (freestanding)
 *   engine.h     one engine per thread: ready queue, io_uring, loop, next turns
 *   io.h         I/O awaiters (read, recv, accept, sleep, deadlines, ...)
 *   stream.h     streaming receive into provided buffers, batched sends
 *   waiter.h     the waiter every sync wait takes; co_wait_for
 *   sync.h       mutex, event, latch, wait group, semaphore, condition variable
 *   channel.h    bounded channel of fixed-size items
 *   when.h       when_all / when_any over child coroutines, co_spawn_on
 *   timeout.h    one time limit for any await: co_timeout
 *   context.h    a thread running one engine; co_transfer_to between them
 *   scheduler.h  N contexts behind one spawn/run API, groups of job types
 *   graph.h      a task graph run on a scheduler
 *   pool.h       blocking work on worker threads; co_getaddrinfo
 *   reader.h     a buffered reader: until a delimiter, exactly n bytes
 *   net.h        a listening socket; connect to a host name
 *   view.h       what every coroutine is doing now: a dump of live frames
 * and the services every layer uses: version.h (CORING_VERSION,
 * co_version()), trace.h (the lifecycle trace), posix.h (the feature
 * macro).
 * Firmware code includes co.h and loop.h alone.
 */
#ifndef CORING_CORING_H
#define CORING_CORING_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <coring/co.h>
#include <coring/loop.h>
#include <coring/version.h>
#include <coring/engine.h>
#include <coring/io.h>
#include <coring/context.h>
#include <coring/scheduler.h>
#include <coring/waiter.h>
#include <coring/sync.h>
#include <coring/channel.h>
#include <coring/when.h>
#include <coring/graph.h>
#include <coring/timeout.h>
#include <coring/pool.h>
#include <coring/stream.h>
#include <coring/reader.h>
#include <coring/net.h>
#include <coring/trace.h>
#include <coring/view.h>

#endif /* CORING_CORING_H */
