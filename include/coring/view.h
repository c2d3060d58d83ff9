/* SPDX-License-Identifier: MIT */
/*
 * coring/view.h - what every coroutine is doing, now: each live frame of
 * a scheduler or an engine with its context, its state, what it waits on,
 * where it stands and since when. No trace needs to run beforehand; take
 * it from any thread, while the contexts run (docs/view.md).
 *
 *     co_view v;
 *     if (co_view_sched(&v, &sched, CO_VIEW_WAIT) == 0) {
 *             co_view_print(&v, STDERR_FILENO, 0);   // grouped, counted
 *             co_view_free(&v);
 *     }
 *
 * prints, for example:
 *
 *     coring view: 10004 frames on 3 contexts
 *       2000 waiting on recv for 3.2 s (longest 3.4 s)
 *         at echo_server.c:88 conn_fn              [context 1-2, kind 0]
 *       ...
 *
 * Each engine lists its live root frames (spawned, not finished) as part
 * of spawning and finishing them, and notes when each last ran; each view
 * reads those lists on the thread that runs the engine, so nothing is read
 * while it changes: a context that runs gets the request at its next loop
 * turn, one that does not run (idle, a manual context between two ticks)
 * is read by the caller at once.
 */
#ifndef CORING_VIEW_H
#define CORING_VIEW_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <stddef.h>
#include <stdint.h>

#include <coring/scheduler.h>

#ifdef __cplusplus
extern "C" {
#endif

/* co_view_frame.state */
enum co_view_state {
	CO_VIEW_READY = 1,      /* in its engine's ready queue */
	CO_VIEW_NEXT_TURN = 2,  /* yielded: its engine's next turn runs it */
	CO_VIEW_RUNNING = 3,    /* running (the frame that took the view) */
	CO_VIEW_WAITING = 4,    /* suspended on an awaiter (see wait) */
};

typedef struct co_view_frame {
	const co_frame *frame;  /* which frame (an identity only: it may have
	                           finished since the view was taken) */
	int (*fn)(co_frame *);  /* the root coroutine's function */
	uintptr_t label;        /* where the root stands (awaiting the child,
	                           when depth > 0); 0: not started */
	int (*at_fn)(co_frame *); /* the innermost frame's function: the child
	                           the root awaits, or the root itself */
	uintptr_t at_label;     /* its resume label: where it stands (0: not
	                           started) */
	unsigned depth;         /* children between the root and that frame */
	int context;            /* its context's index in the scheduler; -1 on
	                           an engine of no scheduler */
	int kind;               /* that context's kind (its group); 0 */
	int state;              /* enum co_view_state */
	const char *wait;       /* what it waits on ("recv", "event", "mutex",
	                           "channel recv", "graph", "next turn",
	                           "spawn_on", "limit", your awaiter's name ...),
	                           NULL unless waiting */
	const char *inner;      /* a time limit's await ("recv" in "limit" of a
	                           recv), else NULL */
	const void *object;     /* the primitive, graph or engine it waits on,
	                           if the awaiter has one; else NULL */
	uint64_t since_ns;      /* CLOCK_MONOTONIC at the start of the loop turn
	                           in which it last ran: it has waited since then */
} co_view_frame;

typedef struct co_view {
	co_view_frame *frames;  /* n of them, context by context */
	size_t n;
	uint64_t at_ns;         /* CLOCK_MONOTONIC when the view was taken */
	unsigned contexts;      /* contexts (engines) looked at */
	unsigned unanswered;    /* of those, how many did not answer within the
	                           wait: their frames are not in the view */
	size_t unlisted;        /* live frames in no list when their engine was
	                           read (on their way to another context, or a
	                           list that could not grow: docs/view.md) */
} co_view;

/* How long co_view_sched waits for a context that is busy, by default. */
#define CO_VIEW_WAIT (1000000000ull)

/* 1 if the library keeps what a view reads (the default), 0 if it was
 * built without (meson -Dview=false: docs/view.md, "Cost"). */
CO_API int co_view_available(void);

/*
 * Take the view of every context of s (co_view_sched) or of engine e
 * (co_view_engine), from any thread, a frame of one of its contexts
 * included. A context whose thread runs is asked to make its list at its
 * next loop turn and answer within wait_ns (0: only the contexts that can
 * be read at once; UINT64_MAX: no limit); one that does not answer is
 * counted in v->unanswered and left out (a frame that runs without
 * suspending holds its thread, and a view taken by a frame of a context
 * waits for the others, which may wait for it). Allocates v->frames:
 * release it with co_view_free. Returns 0, -EINVAL (NULL v, s or e; a
 * scheduler or engine not set up or destroyed), -ENOMEM (v is then
 * empty), -EOPNOTSUPP (built without the view: co_view_available).
 */
CO_API int co_view_sched(co_view *v, co_sched *s, uint64_t wait_ns);
CO_API int co_view_engine(co_view *v, co_engine *e, uint64_t wait_ns);

/* Free what a view holds; v is then empty (NULL: nothing). */
CO_API void co_view_free(co_view *v);

/* co_view_print flags */
enum {
	CO_VIEW_EACH = 1u << 0, /* after the groups, one line per frame */
};

/*
 * Write v as text to descriptor fd: a header line, one line per context
 * with frames, one with how many answered without frames, then the
 * frames grouped by state, wait and place (the root function and
 * where the innermost frame stands), largest group first, each with its
 * count and how long its frames have waited; with CO_VIEW_EACH, then one
 * line per frame. Places are named from the program's symbol table: the
 * function, its source file (static functions), and the line where the
 * switch label backend stands, else the offset in the function. Returns
 * 0, -EINVAL (NULL v, fd < 0, an unknown flag), -ENOMEM, or write's error
 * (-EBADF, -EPIPE ...). A pipe or socket that nobody reads answers -EPIPE
 * and never ends the process: SIGPIPE is blocked on the calling thread
 * while it writes, and one its write raised is taken back.
 */
CO_API int co_view_print(const co_view *v, int fd, unsigned flags);

/*
 * Where f stands, as text ("echo_server.c:88 conn_fn", "conn_fn+0x1c4",
 * or the address and the object file when no symbol names it) into buf of
 * len bytes (cut short to fit, NUL-terminated). Returns the length it
 * needed (as snprintf), or -EINVAL (NULL f, NULL buf with len > 0).
 */
CO_API int co_view_place(const co_view_frame *f, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* CORING_VIEW_H */
