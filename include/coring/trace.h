/* SPDX-License-Identifier: MIT */
/*
 * coring/trace.h - a trace of coroutine lifecycles (docs/tracing.md).
 *
 *     co_trace_start(&(co_trace_opts){ .events = 1 << 16, .path = "run.trace" });
 *     ... run engines, contexts, schedulers ...
 *     co_trace_stop();                  // writes run.trace
 *
 * or, in a program, let the environment decide (CORING_TRACE=run.trace):
 *
 *     int err = co_trace_env();         // 0: not asked for; 1: recording
 *     if (err < 0) fprintf(stderr, "CORING_TRACE: %s\n", strerror(-err));
 *
 * then `tools/coring_trace.py json run.trace -o run.json` for Perfetto, or
 * `tools/coring_trace.py dot run.trace --fn conn_fn` for a state diagram.
 *
 * Tracing exists only in a library built with it (meson -Dtrace=true; the
 * default for debug and debugoptimized builds, not for release): without
 * it every hook compiles to nothing and these functions answer
 * -EOPNOTSUPP (co_trace_available() says which). With it, recording is off
 * until co_trace_start: each hook then costs one load and one branch.
 *
 * While recording, each thread that runs a hook writes events into a
 * buffer of its own (opts.events slots, rounded up to a power of two),
 * without locks; when it is full the oldest event goes (counted in
 * co_trace_stats's dropped). Its first event of a session allocates and
 * registers the buffer (a mutex, once per thread and session). Dumps read
 * the buffers from any thread while they are written.
 */
#ifndef CORING_TRACE_H
#define CORING_TRACE_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <stdint.h>

#include <coring/co.h>
#include <coring/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Event kinds, as written in the dump (docs/tracing.md has each one's
 * fields). RESUME, YIELD, WAIT and DONE equal the CO_LOOP_TRACE_* values
 * of loop.h, so that co_loop's hook can pass its own value here. */
enum co_trace_kind {
	CO_TRACE_SPAWN = 1,     /* a frame handed to an engine (any thread) */
	CO_TRACE_START = 2,     /* first resume */
	CO_TRACE_RESUME = 3,    /* a later resume */
	CO_TRACE_YIELD = 4,     /* suspended by a yield */
	CO_TRACE_WAIT = 5,      /* suspended on an awaiter (sub: its kind) */
	CO_TRACE_WAKE = 6,      /* made ready again by co_wake (waker's thread) */
	CO_TRACE_DONE = 7,      /* finished (arg: status) */
	CO_TRACE_TRANSFER = 8,  /* moved to another context (co_transfer_to) */
	CO_TRACE_STEAL = 9,     /* taken by an idle context (thief's thread) */
	CO_TRACE_CANCEL = 10,   /* co_cancel asked (requester's thread) */
	CO_TRACE_TIMEOUT = 11,  /* a time limit ran out (sub: whose) */
	CO_TRACE_SUBMIT = 12,   /* an I/O operation prepared (sub: opcode, arg: fd) */
	CO_TRACE_COMPLETE = 13, /* its completion (arg: result) */
	CO_TRACE_RUN = 14,      /* an engine run begins (b 1) or ends (b 0) */
	CO_TRACE_CONTEXT = 15,  /* a context's thread starts (arg: its index) */
	CO_TRACE_FOLLOW = 16,   /* moved to the context of the frame that woke
	                           it (co_sched_roam; waker's thread) */
};

typedef struct co_trace_opts {
	unsigned events;        /* slots per thread, 1 .. CO_TRACE_MAX_EVENTS
	                           (rounded up to a power of two); 0 is -EINVAL */
	const char *path;       /* written by co_trace_stop (and at exit after
	                           co_trace_env); NULL: only co_trace_dump writes */
	int stream;             /* nonzero (needs path): a thread of the library
	                           writes the events to path as they come, so a
	                           long run keeps more than a buffer holds */
} co_trace_opts;

#define CO_TRACE_MAX_EVENTS (1u << 22)
#define CO_TRACE_DEFAULT_EVENTS (1u << 16)

typedef struct co_trace_stats {
	uint64_t recorded;      /* events written by every thread this session */
	uint64_t dropped;       /* of those, overwritten before a dump or the
	                           stream took them (the oldest go first) */
	uint64_t lost;          /* events not recorded: a thread's buffer could
	                           not be allocated */
	unsigned threads;       /* threads that recorded this session */
	int recording;          /* 1 between co_trace_start and co_trace_stop */
} co_trace_stats;

/* 1 if the library was built with tracing (-Dtrace=true), else 0. */
CO_API int co_trace_available(void);

/*
 * Begin a session (opts NULL: the defaults, no path): every hook records
 * from now on. Errors: -EOPNOTSUPP (built without tracing), -EALREADY
 * (recording already), -EINVAL (events 0 or above CO_TRACE_MAX_EVENTS,
 * stream without path), open's errors for path (-ENOENT, -EACCES,
 * -EISDIR ...: the file is created, or truncated, here), -ENOMEM,
 * pthread_create's for the stream's thread, or -EAGAIN when the first
 * start finds no thread-specific key left (PTHREAD_KEYS_MAX; a later
 * start tries again). On an error the session
 * before stays as it was (co_trace_dump writes it, co_trace_stats_get
 * counts it); a stream start that fails once path is open (its header
 * not written, -ENOSPC or -EFBIG; no memory; no thread) leaves the file at
 * path created or emptied, holding its header at most. A start that comes
 * while a stream's co_trace_stop writes its file waits for that stop.
 */
CO_API int co_trace_start(const co_trace_opts *opts);

/*
 * End the session: hooks stop recording, and with a path the file is
 * written (or, streaming, its last events and its end). The buffers stay
 * until the next co_trace_start, so co_trace_dump still works. Returns 0,
 * -EALREADY (not recording), -EOPNOTSUPP, the write's error (-ENOSPC,
 * -EIO ...), or -ENOMEM (no memory for a snapshot's chunk: the file holds
 * what was written before; or for the list of mappings that names
 * functions: the file is whole without it). On an error the session has
 * ended anyway.
 */
CO_API int co_trace_stop(void);

/*
 * Write what the buffers of the current (or last) session hold to path,
 * from any thread, while recording or after: a snapshot, the buffers are
 * not emptied. Returns 0, -EINVAL (NULL path), -EOPNOTSUPP, or open's and
 * write's errors (-ENOENT, -EACCES, -EISDIR, -ENOSPC ...; a partial file
 * is removed).
 */
CO_API int co_trace_dump(const char *path);

/* The counts of the current (or last) session; zeros before any. */
CO_API void co_trace_stats_get(co_trace_stats *st);

/*
 * Start a session as the environment asks: CORING_TRACE=path, optionally
 * followed by ",events=N" and ",stream" (in any order). The file is
 * written by co_trace_stop or, if the program does not call it, at exit.
 * Returns 0 when CORING_TRACE is unset, 1 when recording, or an error:
 * -EINVAL (empty path, an unknown option, events not a number in
 * 1 .. CO_TRACE_MAX_EVENTS), -EOPNOTSUPP (built without tracing), or
 * co_trace_start's errors. Never exits or prints.
 */
CO_API int co_trace_env(void);

/*
 * A hook for runners other than the engine (co_loop, a loop of your own):
 * record that root frame f is about to be resumed (CO_TRACE_RESUME: the
 * event is START if it never ran) or has just returned from co_resume
 * (CO_TRACE_YIELD, CO_TRACE_WAIT, CO_TRACE_DONE), on the calling thread.
 * loop.h calls it for you when CO_LOOP_TRACE is defined to it:
 *
 *     #define CO_LOOP_TRACE(f, what) co_trace_frame((f), (what))
 *     #include <coring/loop.h>
 *
 * Any other kind, a NULL frame, or no session: nothing is recorded.
 */
CO_API void co_trace_frame(co_frame *f, int kind);

#ifdef __cplusplus
}
#endif

#endif /* CORING_TRACE_H */
