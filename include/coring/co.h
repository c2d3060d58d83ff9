/* SPDX-License-Identifier: MIT */
/*
 * coring/co.h - stackless coroutines in plain C, header-only and freestanding.
 *
 * A coroutine is a struct whose FIRST member is a co_frame; its other fields
 * are the coroutine's locals (C locals do not survive a suspension). Its body
 * is a function `int fn(co_frame *)` written between CO_BEGIN and CO_END:
 *
 *     struct blink { co_frame co; int i; };
 *
 *     static int blink(co_frame *f)
 *     {
 *         struct blink *b = (struct blink *)f;
 *         CO_BEGIN(f);
 *         for (b->i = 0; b->i < 3; b->i++) {
 *             led_toggle();
 *             CO_YIELD(f);
 *         }
 *         CO_END(f);
 *     }
 *
 *     struct blink b;
 *     co_init(&b.co, blink);          // created suspended, like C++20 tasks
 *     while (!co_done(&b.co))
 *         co_resume(&b.co);
 *
 * Needs nothing but a C99 compiler: no libc, no heap, no threads. It compiles
 * with -std=c99 -ffreestanding -nostdlib and the object needs no symbol.
 *
 * Label backends (identical user code, chosen before including this header):
 *   CO_USE_COMPUTED_GOTO=1    GCC/Clang labels-as-values, their default
 *                             under an operating system (Unix, macOS,
 *                             Windows). Suspension points inside a user
 *                             `switch` work.
 *   CO_USE_COMPUTED_GOTO=0    switch on the frame's label (portable C99), the
 *                             default elsewhere, bare metal included: there
 *                             it is the smaller code for the tiny profile
 *                             (docs/firmware.md, "Cost"). A suspension
 *                             point inside a user `switch` cannot work
 *                             here; it traps on resume with a message (never
 *                             skips or restarts code), a co_tiny's as a
 *                             co_frame's.
 * Both backends give the same struct layout, so translation units built with
 * different backends can share frames and link against the same library.
 *
 * Rules the macros enforce:
 *   - one suspension point per source line (a second one is a compile error);
 *   - every CO_ macro sits between CO_BEGIN and CO_END of the same function
 *     (elsewhere it is a compile error naming the rule);
 *   - a missing CO_END leaves unbalanced braces: a compile error;
 *   - resuming a finished frame or one that is running (re-entered from its
 *     own body or an interrupt handler), waking a frame that is not waiting
 *     and awaiting a child that already runs trap in debug builds (CO_DEBUG,
 *     on unless NDEBUG); in release builds they are harmless: a finished
 *     or waiting frame (or a child resumed directly) is not run, a second
 *     wake is ignored, and awaiting a busy child yields -EBUSY;
 *   - a NULL frame given to any function here traps in debug builds with a
 *     message naming the function (release builds do not check: these are
 *     the hot path); a NULL awaiter or child makes the await's value
 *     -EINVAL (and traps in debug builds). docs/errors.md lists them all.
 */
#ifndef CORING_CO_H
#define CORING_CO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */
/* ------------------------------------------------------------------------ */

/* CO__OS: built for an operating system (Unix, macOS, Windows); 0 on bare
 * metal, where what a core lacks decides some defaults below. */
#if defined(__unix__) || defined(__APPLE__) || defined(_WIN32)
#define CO__OS 1
#else
#define CO__OS 0
#endif

/* Resume labels: computed goto (labels as values) where the compiler has
 * it, GCC and Clang, under an operating system: a suspension point may then
 * sit anywhere, inside a user's switch too. Elsewhere, bare metal included
 * (where it gives the tiny profile's bodies their smallest code, within
 * 1.2x of a hand-written state machine, and a co_frame's within a few
 * bytes of computed goto's), or with CO_USE_COMPUTED_GOTO defined to 0, a
 * portable switch (see "Label backends" below). */
#ifndef CO_USE_COMPUTED_GOTO
#if defined(__GNUC__) && CO__OS
#define CO_USE_COMPUTED_GOTO 1
#else
#define CO_USE_COMPUTED_GOTO 0
#endif
#endif

#if CO_USE_COMPUTED_GOTO && !defined(__GNUC__)
#error "coring: CO_USE_COMPUTED_GOTO needs GCC or Clang (labels as values)"
#endif

/* Anonymous unions (the lean frame's): C11, C++, or GNU C in any mode
 * (__extension__ keeps a -std=c99 -Wpedantic build quiet). */
#if defined(__GNUC__)
#define CO__ANON_UNION __extension__ union
#define CO__HAVE_ANON_UNION 1
#elif defined(__cplusplus) || (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L)
#define CO__ANON_UNION union
#define CO__HAVE_ANON_UNION 1
#else
#define CO__HAVE_ANON_UNION 0
#endif

/*
 * CO_LEAN_FRAME: the layout of co_frame (see "Types" below). 1: the lean
 * frame, 8 words (32 bytes on a 32-bit core): fields that are never in
 * use at the same time share a word, and it has no `user` field. 0: the
 * frame of the Linux layers (libcoring's engine, scheduler and sync),
 * every field in its own place, `user` and the engine's list of
 * cross-thread cancel requests included. The default is 0 on Linux, where
 * libcoring runs, and 1 elsewhere (bare metal, other systems); the lean
 * frame needs anonymous unions (GNU C, C11 or C++), without them 0. The
 * API and the behaviour are the same, except that the lean frame keeps a
 * CO_RETURN status in the label's word and an await's value in the
 * awaiter's: read them with co_status() and co_result() (a finished
 * frame's status, an await's value once it ended).
 */
#ifndef CO_LEAN_FRAME
#if defined(__linux__) || !CO__HAVE_ANON_UNION
#define CO_LEAN_FRAME 0
#else
#define CO_LEAN_FRAME 1
#endif
#endif
#if CO_LEAN_FRAME && !CO__HAVE_ANON_UNION
#error "coring: CO_LEAN_FRAME needs anonymous unions (GNU C, C11 or C++)"
#endif

#ifndef CO_DEBUG
#ifdef NDEBUG
#define CO_DEBUG 0
#else
#define CO_DEBUG 1
#endif
#endif

/*
 * CO_TRAP(msg): what a detected programming error does. Under an operating
 * system (a hosted build for Unix or Windows: CO_HOSTED_TRAP defaults to 1)
 * it prints "coring: <msg>" to stderr and calls abort(); everywhere else,
 * bare metal with or without a C library (newlib-nano included), it
 * executes a trap instruction, so that co.h never pulls stdio, abort or the
 * heap into firmware. Define CO_HOSTED_TRAP to 1 or 0 to choose, or define
 * CO_TRAP itself before including this header to route it elsewhere (a
 * firmware fault handler, a logger). It must not return.
 */
#ifndef CO_HOSTED_TRAP
#if defined(__STDC_HOSTED__) && __STDC_HOSTED__ && !defined(CO_NO_LIBC) && CO__OS
#define CO_HOSTED_TRAP 1
#else
#define CO_HOSTED_TRAP 0
#endif
#endif

#ifndef CO_TRAP
#if CO_HOSTED_TRAP
#include <stdio.h>
#include <stdlib.h>
#define CO_TRAP(msg) (fprintf(stderr, "coring: %s\n", (msg)), abort())
#elif defined(__GNUC__)
#define CO_TRAP(msg) ((void)(msg), __builtin_trap())
#else
#define CO_TRAP(msg) ((void)(msg), (void)(*(volatile int *)0 = 0))
#endif
#endif

#if CO_DEBUG
#define CO__CHECK(cond, msg) ((cond) ? (void)0 : (void)CO_TRAP(msg))
#else
#define CO__CHECK(cond, msg) ((void)0)
#endif

/* Negative errno values used by the core: the C library's own in a hosted
 * build (so that they equal what the user's <errno.h> says: newlib's
 * ECANCELED is 140, Linux's 125), Linux numbering in a freestanding one,
 * which never includes a header it may not have (a cross compiler would
 * find the host's). */
#if defined(__STDC_HOSTED__) && __STDC_HOSTED__ && !defined(CO_NO_LIBC)
#include <errno.h>
#endif
#ifndef EINVAL
#define EINVAL 22
#endif
#ifndef EALREADY
#define EALREADY 114
#endif
#ifndef ECANCELED
#define ECANCELED 125
#endif
#ifndef EBUSY
#define EBUSY 16
#endif

#if !CO_USE_COMPUTED_GOTO && defined(__GNUC__) && ((__GNUC__ >= 7) || defined(__clang__))
#define CO__FALLTHROUGH __attribute__((__fallthrough__))
#else
#define CO__FALLTHROUGH ((void)0)
#endif

#if defined(__GNUC__)
#define CO__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define CO__LIKELY(x) __builtin_expect(!!(x), 1)
#define CO__NOINLINE __attribute__((__noinline__))
#else
#define CO__UNLIKELY(x) (x)
#define CO__LIKELY(x) (x)
#define CO__NOINLINE
#endif

/* A frame's state word is read by co_cancel on the frame's thread while
 * co_wake may clear WAITING from another: plain loads and stores (a mov on
 * x86 and Cortex-M, no lock), but atomic so neither tears nor races. */
/* Where an int is not lock-free (clang for Cortex-M0 or RV32I would call
 * __atomic_load_4, which bare metal lacks), a plain volatile access: an
 * aligned word is read and written whole there, and such cores run
 * frames on one thread (co_loop). */
#if defined(__GNUC__) && defined(__GCC_ATOMIC_INT_LOCK_FREE) && __GCC_ATOMIC_INT_LOCK_FREE == 2
#define CO__LOAD_RELAXED(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define CO__STORE_RELAXED(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#elif defined(__GNUC__)
#define CO__LOAD_RELAXED(p) (*(volatile __typeof__(*(p)) *)(p))
#define CO__STORE_RELAXED(p, v) ((void)(*(volatile __typeof__(*(p)) *)(p) = (v)))
#else
#define CO__LOAD_RELAXED(p) (*(p))
#define CO__STORE_RELAXED(p, v) ((void)(*(p) = (v)))
#endif

/* co_frame.cancel is written by co_cancel on the frame's thread and, on the
 * Linux engine, by cancel requests from other threads: an atomic OR where
 * the target has one for a byte, a plain one where it has not (a core
 * without atomics runs frames on one thread: co_loop). */
#if defined(__GNUC__) && defined(__GCC_ATOMIC_CHAR_LOCK_FREE) && __GCC_ATOMIC_CHAR_LOCK_FREE == 2
#define CO__OR_BYTE(p, v) ((void)__atomic_fetch_or((p), (unsigned char)(v), __ATOMIC_RELAXED))
#define CO__AND_BYTE(p, v) ((void)__atomic_fetch_and((p), (unsigned char)(v), __ATOMIC_RELAXED))
#else
#define CO__OR_BYTE(p, v) ((void)(*(p) = (unsigned char)(*(p) | (v))))
#define CO__AND_BYTE(p, v) ((void)(*(p) = (unsigned char)(*(p) & (v))))
#endif

/* ------------------------------------------------------------------------ */
/* Types                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct co_frame co_frame;
typedef struct co_awaiter co_awaiter;
typedef struct co_awaiter_ops co_awaiter_ops;
typedef struct co_runner co_runner;

/* What a body returns to the trampoline (internal; bodies return them via
 * the macros only). The two that suspend are the nonzero ones, so that
 * co_resume's common case is one test against zero; a body that ended and
 * one that starts a child both return 0, told apart by the root's top
 * frame (co__call_begin makes the child the top). GO_ON is what an
 * await's first half returns when it does not suspend. */
enum {                         /* YIELD and WAIT equal CO_YIELDED, CO_WAITING */
	CO__RET_DONE = 0,      /* finished (CO_END / CO_RETURN) */
	CO__RET_YIELD = 1,     /* suspended, ready to run again */
	CO__RET_WAIT = 2,      /* suspended on an awaiter that will co_wake() it */
	CO__RET_CALL = 0,      /* start the child now at the root's top */
	CO__GO_ON = -1,        /* not a body's: the await completed at once */
};

/* What co_resume() reports. */
enum co_run {
	CO_DONE = 0,      /* the coroutine (root of the chain) has finished */
	CO_YIELDED = 1,   /* it yielded: resume it again when you like */
	CO_WAITING = 2,   /* it waits on an awaiter; co_wake() makes it ready */
};

/* co_frame.state bits (private to coring). Those of the low byte each send
 * co_resume off its fast path, so that it tests the byte against zero;
 * SPAWNED and TASK, which do not, are above it. */
enum {
	CO__ST_DONE = 1u << 0,       /* finished; never runs again */
	CO__ST_WAITING = 1u << 1,    /* root: suspended on an awaiter */
	CO__ST_RUNNING = 1u << 2,    /* root: inside co_resume (debug builds) */
	CO__ST_NESTED = 1u << 4,     /* root: top is a child, not the root */
	CO__ST_CHILD = 1u << 6,      /* child: awaited by a parent right now */
	CO__ST_SLOW = 0xffu,         /* the low byte: any bit set, the slow path */
	CO__ST_SPAWNED = 1u << 8,    /* root: owned by a runner (loop/engine) */
	CO__ST_TASK = 1u << 9,       /* root: a scheduler's top-level task */
	CO__ST_IN_BODY = 1u << 10,   /* its body runs now (debug builds: set by
	                                CO_BEGIN, cleared at each exit) */
	CO__ST_ROAM = 1u << 11,      /* root: may follow the frame that wakes it
	                                to that frame's context (co_sched_roam) */
};

/* The RUNNING bit where it is kept: debug builds only, so that release
 * builds store nothing more per resume. */
#if CO_DEBUG
#define CO__ST_DBG_RUNNING ((unsigned)CO__ST_RUNNING)
#else
#define CO__ST_DBG_RUNNING 0u
#endif

/* co_frame.cancel bits (private). ASKED is co_cancel's request (sticky);
 * SHIELD is co_shield's; LIMITS counts the time limits (coring/timeout.h)
 * that ran out and whose await has not ended yet: each cancels the chain
 * until its own await ends, and pierces a shield. co_cancelled() reports
 * ASKED or LIMITS. Bits 4-7 belong to the frame's runner (the Linux engine
 * routes requests made on other threads with them). */
enum {
	CO__CANCEL_ASKED = 1u << 0,
	CO__CANCEL_SHIELD = 1u << 1,
	CO__CANCEL_LIMIT1 = 1u << 2,   /* LIMITS: a 2-bit count, 0..3 */
	CO__CANCEL_LIMITS = 3u << 2,
};

/*
 * The frame every coroutine struct begins with. Field ownership:
 *   public, read-only: status (after the end), result (after an await);
 *   public, read-write before spawning: on_done, user (not in the lean
 *   frame);
 *   private: everything else (the trampoline, the awaiters, the runners).
 * Two layouts (CO_LEAN_FRAME above), with the same field names:
 *   the lean frame, 32 bytes on a 32-bit core (64 on LP64): a word holds
 *   the label until the end, then the status; one the parent of a child
 *   or the runner of a root (the CHILD bit tells which); one the awaiter
 *   during an await, then its value;
 *   the full frame, 96 bytes on LP64 (56 on a 32-bit core); see
 *   bench/coroutine/memory for the per-coroutine total.
 */
#if CO_LEAN_FRAME
struct co_frame {
	int (*fn)(co_frame *);          /* private: the body */
	CO__ANON_UNION {
		uintptr_t label;        /* private: resume point, 0 = not started */
		int status;             /* public: CO_RETURN status, once finished
		                           (co_status) */
	};
	CO__ANON_UNION {
		co_frame *parent;       /* private: child: who awaits it */
		co_runner *runner;      /* private: root: who runs it (NULL: by hand) */
	};
	co_frame *top;                  /* private: root: innermost running frame;
	                                   child: its root */
	co_frame *next;                 /* private: intrusive link, owned by whichever
	                                   queue or wait list holds the frame */
	CO__ANON_UNION {
		union {                 /* private: the awaiter of an await */
			co_awaiter *aw;
		} u;
		int result;             /* public: the last await's value, once it
		                           ended (co_result) */
	};
	void (*on_done)(co_frame *);    /* public: called by its runner once the
	                                   root finished; may free the frame */
	uint16_t state;                 /* private: CO__ST_* bits */
	unsigned char cancel;           /* private: root: CO__CANCEL_* bits */
};
#else
struct co_frame {
	int (*fn)(co_frame *);          /* private: the body */
	uintptr_t label;                /* private: resume point, 0 = not started */
	co_frame *parent;               /* private: who awaits us (NULL at the root) */
	co_frame *top;                  /* private: root: innermost running frame;
	                                   child: its root */
	co_frame *next;                 /* private: intrusive link, owned by whichever
	                                   queue or wait list holds the frame */
	co_runner *runner;              /* private: root: who runs it (NULL: by hand) */
	union {                         /* private: the awaiter of an await */
		co_awaiter *aw;
	} u;
	void (*on_done)(co_frame *);    /* public: called by its runner once the
	                                   root finished; may free the frame */
	void *user;                     /* public: free for the owner's use */
	int status;                     /* public: CO_RETURN status (0 or -errno) */
	int result;                     /* public: value of the last await */
	uint16_t state;                 /* private: CO__ST_* bits */
	unsigned char cancel;           /* private: root: CO__CANCEL_* bits; a
	                                   byte of its own, so that co_cancel and a
	                                   co_wake from another thread never
	                                   read-modify-write the same word */
	uint32_t view_slot;             /* private: root: its place in its
	                                   engine's list of live frames (0: none;
	                                   coring/view.h) */
	co_frame *cancel_next;          /* private: root: the runner's list of
	                                   cancel requests from other threads */
};
#endif

/* Is f a child (awaited by a parent right now)? Its parent, or NULL. */
#if CO_LEAN_FRAME
#define CO__IS_CHILD(f) (((f)->state & CO__ST_CHILD) != 0)
#define CO__PARENT(f) (CO__IS_CHILD(f) ? (f)->parent : (co_frame *)NULL)
#else
#define CO__IS_CHILD(f) ((f)->parent != NULL)
#define CO__PARENT(f) ((f)->parent)
#endif

/*
 * The C++20 awaiter protocol. An awaiter is a struct (usually a field of the
 * coroutine struct, since it must outlive the suspension) that begins with
 * co_awaiter. CO_AWAIT calls, in order:
 *   ready(a, f)    optional; nonzero: the value is there, do not suspend;
 *   suspend(a, f)  required; arranges for co_wake(f) later and returns
 *                  nonzero, or returns 0 to continue at once (like
 *                  await_suspend returning false). Once it returns nonzero
 *                  another thread may already be resuming f;
 *   resume(a, f)   optional; the await's value (0 when NULL), stored in
 *                  f->result and readable with co_result(f);
 *   cancel(a, f)   optional; co_cancel() calls it while f waits: it must
 *                  eventually co_wake(f) so resume() reports -ECANCELED (or
 *                  the result that won the race). Returns 0 or -errno.
 *                  Without it the await cannot be cancelled, nor limited
 *                  in time (co_timeout answers -EINVAL).
 *   kind           0 for a user's awaiter; the library marks its own kinds
 *                  (I/O, waits, transfer ...) in the low 16 bits, so that
 *                  co_timeout can limit each in its own way, and flags of
 *                  a shorter path in the high bits (CO__AW_PARKS below).
 *   name           optional; what a frame waiting here waits on, in a view
 *                  of the coroutines (coring/view.h): "vsync", "reply" ...
 *                  NULL: "await".
 * A suspend op ends the await at once with -ECANCELED when
 * co_await_cancelled(f) is true (the library's awaiters do).
 */
struct co_awaiter_ops {
	int (*ready)(co_awaiter *a, co_frame *f);
	int (*suspend)(co_awaiter *a, co_frame *f);
	int (*resume)(co_awaiter *a, co_frame *f);
	int (*cancel)(co_awaiter *a, co_frame *f);
	unsigned kind;
	const char *name;
};

struct co_awaiter {
	const co_awaiter_ops *ops;
};

/*
 * The library's short path through the protocol (private: its flags are
 * in the high bits of co_awaiter_ops.kind, which a user's awaiter leaves
 * 0; the kind itself is the low 16 bits, CO__AW_KIND). An awaiter whose
 * ops carry them is laid out as co__parking:
 *   CO__AW_PARKS  it always waits and only needs its frame: CO_AWAIT stores
 *                 the frame in co__parking.frame and calls no suspend,
 *                 unless the root's cancel byte is not 0 (a cancel asked,
 *                 a time limit, a move): then suspend runs as usual;
 *   CO__AW_VALUE  the await's value is co__parking.value when the frame
 *                 resumes: CO_AWAIT calls no resume.
 * Both ops stay callable (a wrapper such as co_timeout calls them), and a
 * program built before the flags calls them: the flags only save calls.
 */
#define CO__AW_PARKS 0x80000000u
#define CO__AW_VALUE 0x40000000u
#define CO__AW_KIND(ops) ((ops)->kind & 0xffffu)

typedef struct co__parking {
	co_awaiter aw;
	co_frame *frame; /* CO__AW_PARKS: the frame waiting here */
	void *own;       /* the awaiter's own */
	int value;       /* CO__AW_VALUE: the await's value */
} co__parking;

/*
 * A runner: anything that runs root frames (the bare-metal co_loop of loop.h,
 * the Linux engine). wake() makes a root runnable again; it is called by
 * co_wake() and must be safe from wherever the runner says it is (the
 * engine's is safe from any thread; co_loop's from its own thread and
 * interrupt handlers).
 * cancel() is optional: co_cancel() hands the request to it, so that a
 * runner whose frames may be cancelled from other threads can carry the
 * request to the frame's own thread, which then calls co__cancel_here().
 * Without it, co_cancel() acts at once, on the calling thread.
 */
struct co_runner {
	void (*wake)(co_runner *r, co_frame *root);
	int (*cancel)(co_runner *r, co_frame *root);
};

/*
 * co_tiny: the frame of the tiny profile, 4 bytes. A coroutine that only
 * yields, polls (CO_AWAIT_UNTIL), sleeps by polling a tick and returns can
 * use it instead of a co_frame, with the same macros:
 *
 *     struct blink { co_tiny pt; unsigned until; };
 *
 *     static int blink(struct blink *b)
 *     {
 *         co_tiny *f = &b->pt;
 *         CO_BEGIN(f);
 *         for (;;) {
 *             b->until = ticks + 500;
 *             CO_AWAIT_UNTIL(f, (int)(ticks - b->until) >= 0);
 *             led_toggle();
 *         }
 *         CO_END(f);
 *     }
 *
 *     co_tiny_init(&b.pt);
 *     for (;;) blink(&b);          // the body is called directly
 *
 * The body returns CO_YIELDED, or CO_DONE once it has finished (calling it
 * again then returns CO_DONE at once; a debug build traps). It cannot
 * await an awaiter or a child, has no runner, no cancellation and no
 * result: CO_AWAIT on a co_tiny does not compile. Debug builds trap on a
 * re-entry, as for frames.
 */
typedef struct co_tiny {
	uint16_t label;           /* private: resume point, 0 = not started */
	unsigned char state;      /* private: CO__TINY_* bits */
	signed char status;       /* public, read-only: the CO_RETURN status,
	                             -128 to 127 (co__tiny_status) */
} co_tiny;

enum {
	CO__TINY_DONE = 1u << 0,
	CO__TINY_RUNNING = 1u << 1,   /* debug builds */
};

/* A co_tiny keeps its status in one byte, so that the frame stays 4
 * bytes: a CO_RETURN outside -128..127 (an errno past 128, such as
 * newlib's ECANCELED, 140) keeps the nearer end, -128 or 127, never
 * another number; debug builds trap on it. */
static inline signed char co__tiny_status(int st)
{
	CO__CHECK(st >= -128 && st <= 127, "CO_RETURN: status out of a co_tiny's range (-128 to 127)");
	return (signed char)(st < -128 ? -128 : st > 127 ? 127 : st);
}

static inline void co_tiny_init(co_tiny *t)
{
	CO__CHECK(t != NULL, "co_tiny_init: NULL frame");
	t->label = 0;
	t->state = 0;
	t->status = 0;
}

/* True once the tiny coroutine has finished. */
static inline int co_tiny_done(const co_tiny *t)
{
	CO__CHECK(t != NULL, "co_tiny_done: NULL frame");
	return (t->state & CO__TINY_DONE) != 0;
}

/* ------------------------------------------------------------------------ */
/* Frame functions                                                          */
/* ------------------------------------------------------------------------ */

/* Prepare f to run fn; the coroutine is created suspended (label 0) and
 * runs when resumed or awaited. Field by field: no memset in freestanding. */
static inline void co_init(co_frame *f, int (*fn)(co_frame *))
{
	CO__CHECK(f != NULL, "co_init: NULL frame");
	f->fn = fn;
	f->top = f;
	f->next = NULL;
	f->on_done = NULL;
	f->state = 0;
	f->cancel = 0;
#if CO_LEAN_FRAME
	f->label = 0; /* and status 0 */
	f->parent = NULL; /* and runner NULL */
	f->u.aw = NULL; /* and result 0 */
	f->result = 0;
#else
	f->label = 0;
	f->parent = NULL;
	f->runner = NULL;
	f->u.aw = NULL;
	f->user = NULL;
	f->status = 0;
	f->result = 0;
	f->view_slot = 0;
	f->cancel_next = NULL;
#endif
}

/* True once the coroutine has finished (CO_END or CO_RETURN). */
static inline int co_done(const co_frame *f)
{
	CO__CHECK(f != NULL, "co_done: NULL frame");
	return (f->state & CO__ST_DONE) != 0;
}

/* The outermost frame of f's await chain (what runners queue). */
static inline co_frame *co_root(co_frame *f)
{
	return CO__IS_CHILD(f) ? f->top : f;
}

/* co_root for the queries, which take a const frame. */
static inline const co_frame *co__root_const(const co_frame *f)
{
	return CO__IS_CHILD(f) ? f->top : f;
}

/* True while f's chain is suspended on an awaiter: only a co_wake makes it
 * ready again (a hand-written superloop resumes the frames for which this
 * is false and co_done is false). */
static inline int co_waiting(const co_frame *f)
{
	CO__CHECK(f != NULL, "co_waiting: NULL frame");
	return (CO__LOAD_RELAXED(&co__root_const(f)->state) & CO__ST_WAITING) != 0;
}

/* The status given to CO_RETURN (0 after CO_END or before the end). */
static inline int co_status(const co_frame *f)
{
	CO__CHECK(f != NULL, "co_status: NULL frame");
#if CO_LEAN_FRAME
	/* the status has the label's word: before the end it holds the label */
	return (f->state & CO__ST_DONE) ? f->status : 0;
#else
	return f->status;
#endif
}

/* The value of the frame's last CO_AWAIT / CO_AWAIT_TASK. */
static inline int co_result(const co_frame *f)
{
	CO__CHECK(f != NULL, "co_result: NULL frame");
	return f->result;
}

/* True once co_cancel() was requested for the frame's chain, or while a
 * time limit of an await in the chain has run out (coring/timeout.h). */
static inline int co_cancelled(const co_frame *f)
{
	const co_frame *r;

	CO__CHECK(f != NULL, "co_cancelled: NULL frame");
	r = co__root_const(f);
	return (CO__LOAD_RELAXED(&r->cancel) & (CO__CANCEL_ASKED | CO__CANCEL_LIMITS)) != 0;
}

/* What an awaiter's suspend checks: is an await of this chain to end with
 * -ECANCELED now? A shield holds co_cancel's request back, not a limit's. */
static inline int co_await_cancelled(const co_frame *f)
{
	const co_frame *r = co__root_const(f);
	unsigned c = CO__LOAD_RELAXED(&r->cancel);

	/* c == 0, nothing asked, first: one test on the common path */
	return c != 0 && ((c & CO__CANCEL_LIMITS) ||
			  (c & (CO__CANCEL_ASKED | CO__CANCEL_SHIELD)) == CO__CANCEL_ASKED);
}

/*
 * Shield f's chain from cancellation, so that cleanup after a cancel (an
 * unlock, a close, a goodbye) is not itself cancelled:
 *
 *     if (co_result(f) == -ECANCELED) {
 *         co_shield(f);
 *         CO_AWAIT(f, co_send(&s->io, s->fd, "bye\n", 4, MSG_NOSIGNAL));
 *         CO_AWAIT(f, co_close(&s->io, s->fd));
 *         co_unshield(f);
 *     }
 *
 * While shielded, co_cancel() only records its request: awaits begun
 * under the shield run to their end (but for a move to another context:
 * co_transfer_to refuses a frame asked to cancel, -ECANCELED, since such a
 * frame never changes engines), and co_cancelled() still tells. Once
 * co_unshield() is called, a recorded request cancels the next await as
 * usual. A time limit (coring/timeout.h) still applies under a shield.
 * Call both from the frame's own body; they do not nest (one unshield
 * ends the shield). What a shield cannot hold back: the engine's cancel
 * stop, which ends every operation and wait in flight when it begins and
 * abandons frames still running after its grace (docs/engine.md).
 */
static inline void co_shield(co_frame *f)
{
	CO__CHECK(f != NULL, "co_shield: NULL frame");
	CO__OR_BYTE(&co_root(f)->cancel, CO__CANCEL_SHIELD);
}

static inline void co_unshield(co_frame *f)
{
	CO__CHECK(f != NULL, "co_unshield: NULL frame");
	CO__AND_BYTE(&co_root(f)->cancel, (unsigned char)~CO__CANCEL_SHIELD);
}

/* How co_resume returns a suspension r of root's chain (YIELD or WAIT).
 * After a wait the awaiter may already have handed the frame to another
 * thread: touch nothing (the wake clears RUNNING: co__wake_root). */
static inline int co__suspended(co_frame *root, int r)
{
#if CO_DEBUG
	if (r == CO__RET_YIELD)
		root->state &= ~(unsigned)CO__ST_DBG_RUNNING;
#else
	(void)root;
#endif
	return r;
}

/* The trampoline: cur, a frame of root's chain, returned 0. If its await
 * made a child the root's top (co__call_begin), the child starts; else cur
 * has ended and its parent continues with the child's status as the
 * await's value (symmetric transfer). Runs on until a body suspends or the
 * root ends, so the C stack does not grow with the await depth. */
static inline int co__resume_chain(co_frame *root, co_frame *cur)
{
	for (;;) {
		int r;

		if (root->top != cur) {
			cur = root->top;
		} else {
			co_frame *p = CO__PARENT(cur);

			cur->state = (cur->state | CO__ST_DONE) &
				     ~(unsigned)(CO__ST_CHILD | CO__ST_DBG_RUNNING);
			if (p == NULL)
				return CO_DONE;
			cur->parent = NULL;
			cur->top = cur;
			p->result = cur->status;
			root->top = p;
			if (p == root)
				root->state &= ~(unsigned)CO__ST_NESTED;
			cur = p;
		}
		r = cur->fn(cur);
		if (r != CO__RET_DONE)
			return co__suspended(root, r);
	}
}

/* co_resume on a misuse (hot: the state's low byte): a trap in debug
 * builds, an answer in release builds, which run a frame marked RUNNING
 * by a debug build's resume. Out of line: the resume paths stay short. */
static CO__NOINLINE int co__resume_odd(co_frame *root, unsigned hot)
{
	co_frame *cur = root->top;
	int r;

	/* WAITING first: a frame that waits keeps the RUNNING of the resume
	 * that ran it until its wake (co__wake_root) */
	if (hot & (CO__ST_DONE | CO__ST_WAITING | CO__ST_CHILD)) {
		CO__CHECK(!(hot & CO__ST_DONE), "co_resume: frame already finished");
		CO__CHECK(!(hot & CO__ST_WAITING),
			  "co_resume: frame waits on an awaiter; only co_wake may make it ready");
		/* release builds: a child runs only when its root resumes */
		return (hot & CO__ST_DONE) ? CO_DONE : CO_WAITING;
	}
	CO__CHECK(!(hot & CO__ST_DBG_RUNNING),
		  "co_resume: frame is running (resumed from its own body or an "
		  "interrupt handler)");
	r = cur->fn(cur);
	if (r != CO__RET_DONE)
		return co__suspended(root, r);
	return co__resume_chain(root, cur);
}

/*
 * Run the coroutine, or the innermost child it awaits, until its next
 * suspension point or its end. Children are entered and left by a
 * trampoline, so the C stack does not grow with the await depth, and a
 * resume costs the same at any depth (the root keeps its innermost frame).
 * Returns CO_DONE, CO_YIELDED or CO_WAITING. Give it a root frame (one not
 * awaited by a parent); resuming a finished or waiting frame is a
 * programming error (trap in debug builds, CO_DONE/CO_WAITING otherwise).
 */
static inline int co_resume(co_frame *f)
{
	unsigned hot;
	int r;

	CO__CHECK(f != NULL, "co_resume: NULL frame");
	CO__CHECK(f->fn != NULL, "co_resume: frame has no body (co_init given NULL)");
	CO__CHECK(!CO__IS_CHILD(f), "co_resume: frame is awaited by a parent; resume the root frame");
	/* One load and test of the state's low byte. The common case, a root
	 * that awaits no child, calls its own body without a load of top (the
	 * frame's address is already in hand), then tests the returned code
	 * once. "Started" is label != 0: no flag to store per resume. */
	hot = f->state & CO__ST_SLOW;
	if (CO__LIKELY(hot == 0)) {
		f->state |= CO__ST_DBG_RUNNING; /* nothing in release builds */
		r = f->fn(f);
		if (CO__LIKELY(r != CO__RET_DONE))
			return co__suspended(f, r);
		return co__resume_chain(f, f);
	}
	if (CO__UNLIKELY(hot != CO__ST_NESTED))
		return co__resume_odd(f, hot);
	/* a child at the top: resume it, at the same cost at any depth */
	f->state |= CO__ST_DBG_RUNNING;
	r = f->top->fn(f->top);
	if (CO__LIKELY(r != CO__RET_DONE))
		return co__suspended(f, r);
	return co__resume_chain(f, f->top);
}

/* Generator step: resume and tell whether a new value was yielded (0 once
 * it finished, or while it waits on an awaiter: co_done tells which). */
static inline int co_next(co_frame *f)
{
	CO__CHECK(f != NULL, "co_next: NULL frame");
	return co_resume(f) == CO_YIELDED;
}

/*
 * Make a frame that waits on an awaiter runnable again: its root goes back
 * to its runner (or, with no runner, to whoever calls co_resume).
 * Awaiters call this exactly once per suspension; waking a frame that is
 * not waiting traps in debug builds.
 */
/* co_wake's first half, for runners with a faster second half of their
 * own: f's root no longer waits; returns it, or NULL if it was not
 * waiting (a trap in debug builds). */
static inline co_frame *co__wake_root(co_frame *f)
{
	co_frame *r;

	CO__CHECK(f != NULL, "co_wake: NULL frame");
	r = co_root(f);
	CO__CHECK(r->state & CO__ST_WAITING,
		  "co_wake: frame is not waiting (woken twice, or never suspended)");
	if (CO__UNLIKELY(!(r->state & CO__ST_WAITING)))
		return NULL; /* release builds: never queue a frame twice */
	/* a store, not |= / &=: only co_wake writes the word while the frame
	 * waits (co_cancel writes r->cancel). RUNNING (set by a debug
	 * co_resume, which a body's await leaves) ends here too: the frame
	 * runs again only through another co_resume. */
	CO__STORE_RELAXED(&r->state,
			  r->state & ~(unsigned)(CO__ST_WAITING | CO__ST_RUNNING));
	return r;
}

static inline void co_wake(co_frame *f)
{
	co_frame *r = co__wake_root(f);
	co_runner *run;

	if (r == NULL)
		return;
	run = CO__LOAD_RELAXED(&r->runner); /* another thread may read it */
	if (run)
		run->wake(run, r);
}

/* End root r's current await early, on the thread that runs it: the leaf
 * awaiter's cancel op, if r waits. */
static inline int co__cancel_wait(co_frame *r)
{
	co_frame *leaf = r->top;

	if (!(CO__LOAD_RELAXED(&r->state) & CO__ST_WAITING))
		return 0; /* running, or a wake from another thread came first */
	if (leaf->u.aw->ops->cancel == NULL)
		return -EBUSY;
	return leaf->u.aw->ops->cancel(leaf->u.aw, leaf);
}

/* Cancel root r's chain on the thread that runs it (co_cancel without a
 * runner, or a runner's cancel op once it is there). */
static inline int co__cancel_here(co_frame *r)
{
	if (CO__LOAD_RELAXED(&r->state) & CO__ST_DONE)
		return -EALREADY;
	CO__OR_BYTE(&r->cancel, CO__CANCEL_ASKED);
	if (CO__LOAD_RELAXED(&r->cancel) & CO__CANCEL_SHIELD)
		return 0; /* recorded: it acts once the shield is lifted */
	return co__cancel_wait(r);
}

/*
 * Request cancellation of f's chain. If its innermost frame waits on an
 * awaiter that can be cancelled, that awaiter's cancel op runs and the await
 * later ends with -ECANCELED (or with the result that won the race: a
 * cancelled await always completes exactly once). Bodies may poll
 * co_cancelled(). On a co_loop or by hand, call it from the thread that runs
 * f; the Linux engine takes requests from any thread (see engine.h).
 * Returns 0, -EINVAL for NULL, -EALREADY if f has finished, -EBUSY if the
 * awaiter cannot be cancelled (the flag is still set), or the cancel op's
 * error.
 */
static inline int co_cancel(co_frame *f)
{
	co_frame *r;
	co_runner *run;

	if (f == NULL)
		return -EINVAL;
	r = co_root(f);
	run = CO__LOAD_RELAXED(&r->runner);
	if (run && run->cancel)
		return run->cancel(run, r);
	return co__cancel_here(r);
}

/* --- internals used by the macros --------------------------------------- */

/* What a NULL awaiter or child turns into: an await that ends at once with
 * -EINVAL (a prep given a NULL co_io returns NULL). */
static inline int co__einval_ready(co_awaiter *a, co_frame *f)
{
	(void)a;
	(void)f;
	return 1;
}

static inline int co__einval_resume(co_awaiter *a, co_frame *f)
{
	(void)a;
	(void)f;
	return -EINVAL;
}

/* The kind (co_awaiter_ops.kind) of an awaiter that ends at once with an
 * error: the library's kinds are numbered in lib/common/awaiter.h, which
 * checks that its CO__AW_FAILED is this. */
#define CO__AW_FAILED_KIND 6u

/* The one awaiter that ends at once with -EINVAL, in every build: what a
 * NULL awaiter turns into (after the debug trap), and what a call returns
 * for a mistake it found in arguments that are not NULL (co_deadline given
 * a sync wait, co_timeout given its own limit ...). const, in read-only
 * memory: its ops never touch it, so one serves every thread. */
static inline co_awaiter *co__einval_awaiter(void)
{
	static const co_awaiter_ops ops = { co__einval_ready, co__einval_ready, co__einval_resume,
					    NULL, CO__AW_FAILED_KIND, "failed" };
	static const co_awaiter aw = { &ops };

	return (co_awaiter *)(uintptr_t)&aw;
}

static inline int co__await_begin(co_frame *f, co_awaiter *a)
{
	co_frame *r;

	if (CO__UNLIKELY(a == NULL)) {
		CO__CHECK(0, "CO_AWAIT: NULL awaiter (a prep given a NULL argument?)");
		/* It ends at once (its ready op says so). Returning here keeps
		 * it off the short path below, where gcc -O2 -DNDEBUG warns
		 * (-Warray-bounds) that it is smaller than a co__parking. */
		f->u.aw = co__einval_awaiter();
		return 0;
	}
	/* release builds do not look: a zeroed awaiter is undefined, as a
	 * NULL frame given to an accessor */
	CO__CHECK(a->ops != NULL, "CO_AWAIT: awaiter has no ops (zeroed: never prepared?)");
	f->u.aw = a;
	if (CO__LIKELY(a->ops->kind & CO__AW_PARKS)) {
		/* The short path (co__parking, which has no ready op): with
		 * nothing asked of the root, the frame waits here. */
		r = co_root(f);
		if (CO__LOAD_RELAXED(&r->cancel) == 0) {
			r->state |= CO__ST_WAITING;
			((co__parking *)(void *)a)->frame = f;
			return 1;
		}
	} else if (a->ops->ready && a->ops->ready(a, f)) {
		return 0;
	}
	/* Mark waiting before suspend(): from inside suspend() on, another
	 * thread may wake and resume the frame. Nothing but f lives across
	 * the ops' calls (a and the root are taken again), so that a body,
	 * which enters through its prologue at every resume, saves no
	 * register for them. */
	co_root(f)->state |= CO__ST_WAITING;
	if (f->u.aw->ops->suspend(f->u.aw, f))
		return 1;
	co_root(f)->state &= (uint16_t)~CO__ST_WAITING; /* completed at once */
	return 0;
}

static inline int co__await_end(co_frame *f)
{
	co_awaiter *a = f->u.aw;

	if (CO__LIKELY(a->ops->kind & CO__AW_VALUE))
		return ((co__parking *)(void *)a)->value;
	return a->ops->resume ? a->ops->resume(a, f) : 0;
}

/* An await of a child that ends at once with value: a finished child's
 * status, or the error of one that cannot start. */
static inline int co__call_now(co_frame *f, int value)
{
	f->result = value;
	return 0;
}

/* Start an await of child from f: 1, and the child is the root's top, for
 * the trampoline to start (the body returns CO__RET_CALL); or 0, the
 * await ended at once. */
static inline int co__call_begin(co_frame *f, co_frame *child)
{
	co_frame *root;

	if (CO__UNLIKELY(child == NULL)) {
		CO__CHECK(0, "CO_AWAIT: NULL child frame");
		return co__call_now(f, -EINVAL);
	}
	/* A finished child completes the await at once: its status is the
	 * value. Anything else must be fresh. */
	if (child->state & CO__ST_DONE)
		return co__call_now(f, child->status);
	if (CO__UNLIKELY(child->fn == NULL)) { /* the trampoline would call it */
		CO__CHECK(0, "CO_AWAIT: child frame has no body (co_init given NULL)");
		return co__call_now(f, -EINVAL); /* release builds, as a spawn */
	}
	root = co_root(f);
	/* RUNNING and IN_BODY (debug builds): a root whose body runs, by hand,
	 * before its first suspension, when its label is still 0 */
	if (CO__UNLIKELY(CO__IS_CHILD(child) || child->label != 0 || child == root ||
			 (child->state & (CO__ST_SPAWNED | CO__ST_RUNNING | CO__ST_IN_BODY)))) {
		CO__CHECK(0, "CO_AWAIT: child already started, awaited twice or spawned");
		return co__call_now(f, -EBUSY); /* release builds */
	}
	child->parent = f;
	child->top = root;
	child->state |= CO__ST_CHILD;
	root->top = child;
	root->state |= CO__ST_NESTED;
	return 1;
}

/* The value of a child's await: the trampoline stored the child's status
 * when it ended (or co__call_now the value at once). */
static inline int co__call_end(co_frame *f)
{
	return f->result;
}

/* CO_AWAIT's two halves: the begin returns CO__GO_ON (the await completed)
 * or the code the body returns to suspend (WAIT) or to start the child
 * (CALL); the end gives the await's value. */
static inline int co__await_begin_ret(co_frame *f, co_awaiter *a)
{
	return co__await_begin(f, a) ? CO__RET_WAIT : CO__GO_ON;
}

static inline int co__call_begin_ret(co_frame *f, co_frame *child)
{
	return co__call_begin(f, child) ? CO__RET_CALL : CO__GO_ON;
}

#if defined(__cplusplus)
} /* extern "C": overloads choose the kind */
static inline int co__await_begin_any(co_frame *f, co_awaiter *a)
{
	return co__await_begin_ret(f, a);
}
static inline int co__await_begin_any(co_frame *f, co_frame *child)
{
	return co__call_begin_ret(f, child);
}
static inline int co__await_begin_any(co_frame *f, decltype(nullptr))
{
	return co__await_begin_ret(f, nullptr);
}
static inline int co__await_end_any(co_frame *f, co_awaiter *)
{
	return co__await_end(f);
}
static inline int co__await_end_any(co_frame *f, co_frame *)
{
	return co__call_end(f);
}
static inline int co__await_end_any(co_frame *f, decltype(nullptr))
{
	return co__await_end(f);
}
extern "C" {
#define CO__AWAIT_BEGIN(f, x) co__await_begin_any((f), (x))
/* a null pointer of x's type picks the overload; x is not evaluated */
#define CO__AWAIT_END(f, x) co__await_end_any((f), (decltype(x))0)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
/* No default: a pointer to anything else does not compile. _Generic does
 * not evaluate its controlling expression, so x runs once, in the begin. */
#define CO__AWAIT_BEGIN(f, x)                                              \
	_Generic((x), co_awaiter *: co__await_begin_ret, void *: co__await_begin_ret, \
		 co_frame *: co__call_begin_ret)((f), (x))
#define CO__AWAIT_END(f, x)                                                \
	_Generic((x), co_awaiter *: co__await_end, void *: co__await_end,  \
		 co_frame *: co__call_end)(f)
#else
#if defined(__GNUC__)
/* C99: awaiters only; a co_frame * is a negative array size here, named
 * after the fix, instead of a mere pointer-type warning and a crash. */
#define CO__AWAITER_ONLY(x)                                                \
	((void)sizeof(struct {                                             \
		char CO_AWAIT_of_a_child_needs_C11_use_CO_AWAIT_TASK       \
			[1 - 2 * __builtin_types_compatible_p(__typeof__(x), co_frame *)]; \
	}))
#else
#define CO__AWAITER_ONLY(x) ((void)0)
#endif
#define CO__AWAIT_BEGIN(f, x) (CO__AWAITER_ONLY(x), co__await_begin_ret((f), (x)))
#define CO__AWAIT_END(f, x) co__await_end(f)
#endif

/* ------------------------------------------------------------------------ */
/* Label backends                                                           */
/* ------------------------------------------------------------------------ */

#define CO__CAT2(a, b) a##b
#define CO__CAT(a, b) CO__CAT2(a, b)

/* Declared by CO_BEGIN; every other macro names it, so a CO_ macro used
 * outside a body is a compile error that states the rule. */
#define CO__IN_BODY co__use_CO_macros_only_between_CO_BEGIN_and_CO_END
#define CO__MARK(f) \
	((void)CO__IN_BODY, CO__CHECK((const void *)(f) == CO__IN_BODY, \
				      "CO_ macro given another frame than CO_BEGIN"))

/* The macros serve co_frame and co_tiny alike: CO__TINY(f) is a constant
 * (sizes differ), so each body keeps only its own kind's code. */
#define CO__TINY(f) (sizeof(*(f)) == sizeof(co_tiny))

/* A frame must be one of the two (C11: anything else does not compile). */
#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define CO__FRAME_KIND(f) ((void)sizeof(_Generic((f), co_frame *: 1, co_tiny *: 1)))
#else
#define CO__FRAME_KIND(f) ((void)0)
#endif

/* Awaits need a co_frame: on a co_tiny they do not compile. */
#if defined(__cplusplus)
#define CO__NOT_TINY(f) ((void)sizeof(char[1 - 2 * CO__TINY(f)]))
#else
#define CO__NOT_TINY(f)                                                    \
	((void)sizeof(struct {                                             \
		char CO_AWAIT_needs_a_co_frame_not_a_co_tiny[1 - 2 * CO__TINY(f)]; \
	}))
#endif

/* Entering a body: debug builds trap on a finished co_tiny and on a
 * re-entry, and mark the frame as inside its body; every exit (a
 * suspension, the start of a child, the end) takes the mark off, before
 * an awaiter's suspend (from there on another thread may own the frame).
 * So a body entered while the same frame's body runs traps: a coroutine
 * body called as a plain function on its caller's frame, instead of
 * awaited as a child with a frame of its own. Finishing, a co_tiny's label
 * moves to CO_END's own resume point, which returns CO_DONE, so a finished
 * one called again costs no test on entry. The mark is set and taken off
 * in the body's own translation unit, whatever CO_DEBUG the runner was
 * built with. Release builds: no code. */
#if CO_DEBUG
#define CO__TINY_ENTER(f)                                                  \
	if (CO__TINY(f)) {                                                 \
		CO__CHECK(!((f)->state & (CO__TINY_DONE | CO__TINY_RUNNING)), \
			  "co_tiny: resumed after its end, or while it runs"); \
		(f)->state |= CO__TINY_RUNNING;                            \
	} else {                                                           \
		CO__CHECK(!((f)->state & CO__ST_IN_BODY),                  \
			  "CO_BEGIN: this frame's body runs already: a coroutine body " \
			  "called as a plain function? Await it as a child, with a " \
			  "frame of its own (CO_AWAIT(f, &child.co))");       \
		(f)->state |= CO__ST_IN_BODY;                              \
	}
#define CO__LEAVE(f)                                                       \
	(CO__TINY(f) ? (void)((f)->state &= (unsigned char)~CO__TINY_RUNNING)     \
		     : (void)((f)->state &= (unsigned)~CO__ST_IN_BODY))
/* an await that ended at once: the body goes on */
#define CO__BACK(f) (CO__TINY(f) ? (void)0 : (void)((f)->state |= CO__ST_IN_BODY))
#else
#define CO__TINY_ENTER(f)
#define CO__LEAVE(f) ((void)0)
#define CO__BACK(f) ((void)0)
#endif
/* A lean co_frame's status takes the label's word at its end: 0 unless
 * CO_RETURN stored one (and returned without coming here). */
#if CO_LEAN_FRAME
#define CO__FRAME_FINISH(f) ((void)((f)->status = 0))
#else
#define CO__FRAME_FINISH(f) ((void)0)
#endif
#define CO__FINISH(f)                                                      \
	(CO__TINY(f) ? (void)((f)->label = CO__END_LABEL, (f)->state = CO__TINY_DONE) \
		     : CO__FRAME_FINISH(f))

#if CO_USE_COMPUTED_GOTO

/* Labels as values are an extension: __extension__ and these pragmas keep
 * a user's -Wpedantic -Werror build quiet about ours. */
#if defined(__clang__)
#define CO__GOTO(p)                                                        \
	_Pragma("clang diagnostic push")                                   \
	_Pragma("clang diagnostic ignored \"-Wgnu-label-as-value\"")       \
	goto *(p);                                                         \
	_Pragma("clang diagnostic pop")
#else
#define CO__GOTO(p)                                                        \
	_Pragma("GCC diagnostic push")                                     \
	_Pragma("GCC diagnostic ignored \"-Wpedantic\"")                   \
	goto *(p);                                                         \
	_Pragma("GCC diagnostic pop")
#endif
#define CO__LABEL_ADDR(l) ((uintptr_t)(__extension__ && l))

/* A co_frame keeps a label's address (0 before its first resume: the
 * runners read "not started" off it); a co_tiny its 16-bit distance from
 * co__begin (a body is far smaller than 32 KiB), so that its 0 is
 * co__begin itself and a co_tiny jumps without testing the label. */
#define CO__DEST(f)                                                        \
	(CO__TINY(f) ? (void *)((char *)(__extension__ &&co__begin) + (int16_t)(f)->label) \
		     : (void *)(uintptr_t)(f)->label)

#define CO_BEGIN(f)                                                        \
	{                                                                  \
		const void *const CO__IN_BODY = (f);                       \
		CO__FRAME_KIND(f);                                         \
		CO__TINY_ENTER(f)                                          \
		if (CO__TINY(f) || (f)->label) {                           \
			CO__GOTO(CO__DEST(f))                              \
		}                                                          \
		/* an address-taken label, so that a body without any   \
		 * suspension point still compiles (clang) */            \
		(void)CO__LABEL_ADDR(co__begin);                           \
	co__begin:                                                         \
		{

/* Store the resume point; a second point on one line is a duplicate label. */
#define CO__SET(f)                                                         \
	((f)->label = CO__TINY(f) ? (uint16_t)(int16_t)(CO__LABEL_ADDR(CO__CAT(co__L, __LINE__)) - \
						      CO__LABEL_ADDR(co__begin)) \
				  : CO__LABEL_ADDR(CO__CAT(co__L, __LINE__)))
#define CO__HERE(f) CO__CAT(co__L, __LINE__) :
/* a co_tiny's resume point once finished (see CO__FINISH) */
#define CO__END_LABEL                                                      \
	(uint16_t)(int16_t)(CO__LABEL_ADDR(co__end) - CO__LABEL_ADDR(co__begin))
#define CO__END_HERE                                                       \
	co__end:                                                           \
	;

#else /* switch backend */

/* Resume points are offset line numbers: a point nested in a user switch on
 * a narrow or enum type no longer compiles (-Werror), and elsewhere the
 * outer switch misses its case and the default traps loudly. */
#define CO__LINE_LABEL ((uintptr_t)0x5C000000u + (uintptr_t)__LINE__)

/* A co_tiny keeps the line in 16 bits; its cases are the line shifted
 * up 16 bits, and the switch shifts the label the same way (one
 * instruction, and the constants are immediates on Thumb-2): a user's
 * switch on a small value can never hit a resume point's case, and one
 * on a type narrower than 32 bits does not compile (the misuse above),
 * in release builds too. */
#define CO__TINY_CASE(line) ((uintptr_t)(line) << 16)
/* A finished co_tiny ends up in the default; in release builds its state
 * byte holds nothing but DONE, so any bit set means finished (a test of
 * the whole byte, the shortest on most cores). */
#if CO_DEBUG
#define CO__TINY_FINISHED(f) ((f)->state & CO__TINY_DONE)
#else
#define CO__TINY_FINISHED(f) ((f)->state != 0)
#endif
#define CO__LABEL_OF(f)                                                    \
	(CO__TINY(f) ? ((f)->label ? CO__TINY_CASE((f)->label) : 0) : (uintptr_t)(f)->label)

#define CO_BEGIN(f)                                                        \
	{                                                                  \
		const void *const CO__IN_BODY = (f);                       \
		CO__FRAME_KIND(f);                                         \
		CO__TINY_ENTER(f)                                          \
		switch (CO__LABEL_OF(f)) {                                 \
		default:                                                   \
			if (CO__TINY(f) && CO__TINY_FINISHED(f))           \
				return CO__RET_DONE;                       \
			CO_TRAP("resume point not found: a suspension point inside a " \
				"switch statement (use CO_USE_COMPUTED_GOTO) or a corrupt frame"); \
			return CO__RET_DONE;                               \
		case 0:

/* A co_tiny's label is the line in 16 bits, where 0 means "not started"
 * and 0xFFFF "finished" (CO__END_LABEL): a point on line 65535 or later
 * would restart the body or trap at its resume, so it does not compile. */
#if defined(__cplusplus)
#define CO__TINY_LINE_FITS(f) ((void)sizeof(char[1 - 2 * (CO__TINY(f) && __LINE__ >= 0xFFFF)]))
#else
#define CO__TINY_LINE_FITS(f)                                              \
	((void)sizeof(struct {                                             \
		char co_tiny_suspension_point_past_line_65534_use_a_co_frame \
			[1 - 2 * (CO__TINY(f) && __LINE__ >= 0xFFFF)];     \
	}))
#endif
#define CO__SET(f)                                                         \
	(CO__TINY_LINE_FITS(f),                                            \
	 (f)->label = CO__TINY(f) ? (uint16_t)CO__LINE_LABEL : CO__LINE_LABEL)
#define CO__HERE(f) case CO__TINY(f) ? CO__TINY_CASE(__LINE__) : CO__LINE_LABEL:
/* A finished co_tiny's label matches no case: the default returns CO_DONE
 * (no case of its own, which would cost frames a larger jump table). */
#define CO__END_LABEL ((uint16_t)0xFFFFu)
#define CO__END_HERE

#endif

/*
 * CO_BEGIN(f) ... CO_END(f): delimit the body. CO_END finishes the
 * coroutine with the status already set (0 unless CO_RETURN set one) and
 * passes control to the parent awaiting it, if any.
 *
 *     CO_BEGIN(f);
 *     ...
 *     CO_END(f);
 */
#define CO_END(f)                                                          \
	(void)CO__IN_BODY;                                                 \
	CO__CHECK((const void *)(f) == CO__IN_BODY, "CO_END given another frame than CO_BEGIN"); \
	goto co__finish; /* where a co_tiny's CO_RETURN comes too */      \
	co__finish:                                                        \
	CO__FINISH(f);                                                     \
	CO__LEAVE(f);                                                      \
	CO__END_HERE                                                       \
	}                                                                  \
	return CO__RET_DONE;                                               \
	}

/*
 * CO_YIELD(f): suspend; the next co_resume() continues after it. Inside a
 * child, the whole chain yields and the next resume of the root continues
 * here. On an engine the frame runs again at the engine's next loop turn
 * (coring/engine.h, co_next_turn); on a co_loop, at the back of its queue.
 *
 *     for (s->i = 0; s->i < 10; s->i++) { work(s->i); CO_YIELD(f); }
 */
#define CO_YIELD(f)                                                        \
	do {                                                               \
		CO__MARK(f);                                               \
		CO__SET(f);                                                \
		CO__LEAVE(f);                                              \
		return CO__RET_YIELD;                                      \
		CO__HERE(f);                                               \
	} while (0)

/*
 * CO_YIELD_VALUE(f, slot, value): generator step: store value in a field of
 * the coroutine's struct, then yield. The caller loops with co_next():
 *
 *     struct squares { co_frame co; int i, n, value; };
 *     ... CO_BEGIN(f);
 *         for (s->i = 1; s->i <= s->n; s->i++)
 *             CO_YIELD_VALUE(f, s->value, s->i * s->i);
 *         CO_END(f);
 *     ...
 *     while (co_next(&sq.co)) printf("%d\n", sq.value);
 */
#define CO_YIELD_VALUE(f, slot, val)                                       \
	do {                                                               \
		(slot) = (val);                                          \
		CO_YIELD(f);                                               \
	} while (0)

/*
 * CO_RETURN(f, status): finish now with status (0 or a negative errno),
 * readable with co_status(); the parent, if any, continues at once.
 *
 *     if (s->fd < 0) CO_RETURN(f, -EBADF);
 */
#define CO_RETURN(f, st)                                                   \
	do {                                                               \
		CO__MARK(f);                                               \
		(f)->status = CO__TINY(f) ? co__tiny_status(st) : (st);    \
		if (CO__TINY(f))                                           \
			goto co__finish; /* in CO_END */                   \
		CO__LEAVE(f);                                              \
		return CO__RET_DONE;                                       \
	} while (0)

/*
 * CO_AWAIT(f, x): suspend until x completes; its value is stored in
 * f->result (co_result(f)). x is either
 *   - an awaiter (a co_awaiter *, what every prep such as co_recv returns):
 *     the C++20 protocol, ready, then suspend, then, once co_wake()d,
 *     resume. The awaiter must outlive the suspension: keep it in the
 *     coroutine's struct;
 *   - a child coroutine (a co_frame * set up with co_init, or what a helper
 *     such as co_send_all returns): it starts at once in the same resume;
 *     when it suspends, resuming our root resumes it; when it ends, we
 *     continue in the same resume (symmetric transfer). The value is
 *     co_status(child), and the child's result fields are readable. A
 *     child that already finished completes the await at once; one already
 *     started, awaited twice or spawned ends the await with -EBUSY.
 * A NULL awaiter (a prep given a NULL argument) ends the await with -EINVAL.
 *
 *     CO_AWAIT(f, co_recv(&s->io, s->fd, s->buf, sizeof s->buf, 0));
 *     if (co_result(f) <= 0) CO_RETURN(f, co_result(f));
 *
 *     co_init(&s->sum.co, sum_body);
 *     s->sum.n = 10;
 *     CO_AWAIT(f, &s->sum.co);
 *     use(s->sum.value);
 *
 * In C11 and C++ the kind is chosen from x's type; any other pointer type
 * is a compile error. Before C11 (C99), CO_AWAIT takes awaiters only (GCC
 * and Clang reject a co_frame * at compile time) and children go through
 * CO_AWAIT_TASK. x is evaluated once.
 */
#define CO_AWAIT(f, x)                                                     \
	do {                                                               \
		CO__MARK(f);                                               \
		CO__NOT_TINY(f);                                           \
		CO__SET(f);                                                \
		CO__LEAVE(f);                                              \
		{                                                          \
			int co__ret = CO__AWAIT_BEGIN((f), (x));           \
			if (co__ret != CO__GO_ON)                          \
				return co__ret;                            \
		}                                                          \
		CO__BACK(f);                                               \
		CO__FALLTHROUGH;                                           \
		CO__HERE(f);                                               \
		(f)->result = CO__AWAIT_END((f), (x));                     \
	} while (0)

/*
 * CO_AWAIT_UNTIL(f, cond): suspend (as a yield) until cond holds; cond is
 * evaluated now and on every resume. The polling wait of bare-metal code:
 *
 *     CO_AWAIT_UNTIL(f, uart_rx_ready());
 */
#define CO_AWAIT_UNTIL(f, cond)                                            \
	do {                                                               \
		CO__MARK(f);                                               \
		CO__SET(f);                                                \
		CO__FALLTHROUGH;                                           \
		CO__HERE(f);                                               \
		if (!(cond)) {                                             \
			CO__LEAVE(f);                                      \
			return CO__RET_YIELD;                              \
		}                                                          \
	} while (0)

/*
 * CO_AWAIT_TASK(f, child): CO_AWAIT for a child coroutine only (a
 * co_frame *), for C99 code, where CO_AWAIT takes awaiters only.
 */
#define CO_AWAIT_TASK(f, kid)                                              \
	do {                                                               \
		CO__MARK(f);                                               \
		CO__NOT_TINY(f);                                           \
		CO__SET(f);                                                \
		CO__LEAVE(f);                                              \
		if (co__call_begin((f), (kid)))                            \
			return CO__RET_CALL;                               \
		CO__BACK(f);                                               \
		CO__FALLTHROUGH;                                           \
		CO__HERE(f);                                               \
		(f)->result = co__call_end(f);                             \
	} while (0)

#ifdef __cplusplus
}
#endif

#endif /* CORING_CO_H */
