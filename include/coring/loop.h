/* SPDX-License-Identifier: MIT */
/*
 * coring/loop.h - a run loop for bare metal: no heap, no OS, header-only.
 *
 * co_loop runs root frames in turn from an intrusive FIFO. A yield sends a
 * frame to the back; co_wake() puts a waiting frame back in line, from the
 * loop's own code or from an interrupt handler. On top of it:
 *   - co_loop_idle: sleep (WFI) only when nothing is ready, without losing
 *     a wake-up that races the check;
 *   - tick timers from a user-supplied tick counter, wrap-safe at any
 *     counter width: co_sleep_ticks, and co_loop_timeout, a deadline on any
 *     await that has a cancel op (-ETIME when it expires);
 *   - co_notify: an event or counting semaphore that an interrupt handler
 *     gives and a coroutine awaits.
 *
 *     static co_loop loop;
 *     static co_notify rx;                     // given by the UART interrupt
 *     void uart_isr(void) { ...; co_notify_give(&rx); }
 *
 *     co_loop_init(&loop);
 *     co_loop_set_clock(&loop, systick_now, 32);
 *     co_notify_init(&rx, 1);
 *     co_loop_spawn(&loop, &parser.co);
 *     for (;;) {
 *         co_loop_step(&loop);
 *         co_loop_idle(&loop, wfi, NULL);      // sleeps only if nothing is ready
 *     }
 *
 * Interrupt safety. co_wake() from an interrupt handler (co_notify_give
 * calls it) pushes onto a lock-free stack that the next step drains: with
 * compare-and-swap where the core has it (Cortex-M3/M4/M7, RISC-V "A",
 * x86), inside CO_IRQ_SAVE/CO_IRQ_RESTORE where it has not (Cortex-M0/M0+).
 * Every other co_loop function belongs to the loop's own context, never to
 * an interrupt handler.
 *
 * CO_IRQ_STATE, CO_IRQ_SAVE(s) and CO_IRQ_RESTORE(s) mask interrupts and put
 * them back around each critical section (a few loads and stores). On
 * Cortex-M the default saves PRIMASK and sets it (cpsid i): every
 * interrupt waits out the section, and a handler of any priority may call
 * the functions above. On cores with BASEPRI (Cortex-M3/M4/M7/M33),
 * defining CO_IRQ_BASEPRI to a priority value as BASEPRI takes it (the
 * priority in the implemented top bits, nonzero) masks by priority
 * instead: only interrupts of that priority or lower wait, more urgent
 * ones keep running but must not call coring. Elsewhere the default masks
 * nothing, and then co_loop_idle cannot close the race between its check
 * and the sleep: define the three before including this header (the host
 * tests mask signals with them).
 */
#ifndef CORING_LOOP_H
#define CORING_LOOP_H

#include <coring/co.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ETIME
#define ETIME 62
#endif

/* ------------------------------------------------------------------------ */
/* Interrupt masking and the interrupt-safe push                            */
/* ------------------------------------------------------------------------ */

#if defined(__GNUC__) && defined(__arm__) && defined(__ARM_ARCH_PROFILE) && \
	__ARM_ARCH_PROFILE == 'M'
#define CO__CORTEX_M 1
/* PRIMASK: every interrupt of configurable priority is held off. */
#define CO__PRIMASK_SAVE(s) __asm__ volatile("mrs %0, primask\n\tcpsid i" : "=r"(s) : : "memory")
#define CO__PRIMASK_RESTORE(s) __asm__ volatile("msr primask, %0" : : "r"(s) : "memory")
#else
#define CO__CORTEX_M 0
#endif

#ifndef CO_IRQ_SAVE
#define CO__IRQ_DEFAULT 1
#if CO__CORTEX_M && defined(CO_IRQ_BASEPRI)
#if !defined(__ARM_ARCH_7M__) && !defined(__ARM_ARCH_7EM__) && !defined(__ARM_ARCH_8M_MAIN__) && \
	!defined(__ARM_ARCH_8_1M_MAIN__)
#error "coring: CO_IRQ_BASEPRI needs a core with BASEPRI (ARMv7-M or ARMv8-M Mainline)"
#endif
#if (CO_IRQ_BASEPRI) <= 0 || (CO_IRQ_BASEPRI) > 255
#error "coring: CO_IRQ_BASEPRI is a BASEPRI value, 1..255 (0 would mask nothing)"
#endif
/* BASEPRI_MAX only ever raises the mask, so a section nested in a handler
 * or in another section keeps the stricter one; the ISB makes the new
 * mask hold from the next instruction on every core. */
#define CO_IRQ_STATE uint32_t
#define CO_IRQ_SAVE(s)                                                     \
	__asm__ volatile("mrs %0, basepri\n\tmsr basepri_max, %1\n\tisb"     \
			 : "=&r"(s) : "r"((uint32_t)(CO_IRQ_BASEPRI)) : "memory")
#define CO_IRQ_RESTORE(s) __asm__ volatile("msr basepri, %0" : : "r"(s) : "memory")
#elif CO__CORTEX_M
#define CO_IRQ_STATE uint32_t
#define CO_IRQ_SAVE(s) CO__PRIMASK_SAVE(s)
#define CO_IRQ_RESTORE(s) CO__PRIMASK_RESTORE(s)
#else
#define CO_IRQ_STATE int
#define CO_IRQ_SAVE(s) ((void)((s) = 0))
#define CO_IRQ_RESTORE(s) ((void)(s))
#endif
#endif

/* co_loop_idle's mask around its check and the sleep: with coring's own
 * masks on Cortex-M, PRIMASK whatever the sections use (WFI wakes for a
 * pending interrupt that PRIMASK holds off, not for one that BASEPRI
 * does); with the user's, theirs. */
#if CO__CORTEX_M && defined(CO__IRQ_DEFAULT)
#define CO__IDLE_STATE uint32_t
#define CO__IDLE_SAVE(s) CO__PRIMASK_SAVE(s)
#define CO__IDLE_RESTORE(s) CO__PRIMASK_RESTORE(s)
#else
#define CO__IDLE_STATE CO_IRQ_STATE
#define CO__IDLE_SAVE(s) CO_IRQ_SAVE(s)
#define CO__IDLE_RESTORE(s) CO_IRQ_RESTORE(s)
#endif

/* Compare-and-swap on a pointer, where the core has it lock-free; else the
 * critical section (CO_LOOP_NO_CAS forces that, for tests). */
#if !defined(CO_LOOP_NO_CAS) && defined(__GNUC__) && defined(__GCC_ATOMIC_POINTER_LOCK_FREE) && \
	__GCC_ATOMIC_POINTER_LOCK_FREE == 2
#define CO__LOOP_CAS 1
#else
#define CO__LOOP_CAS 0
#endif

/* ------------------------------------------------------------------------ */
/* The loop                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Tracing (optional): CO_LOOP_TRACE(f, what) is called by co_loop_step
 * before each resume of root frame f (what: CO_LOOP_TRACE_RESUME) and
 * after it, with how it came back (_YIELD, _WAIT, _DONE; before on_done).
 * Undefined, it is nothing: no code. Define it before including this
 * header to record the frame's state machine: on Linux,
 *
 *     #define CO_LOOP_TRACE(f, what) co_trace_frame((f), (what))
 *
 * (coring/trace.h, whose event kinds have these values), on bare metal
 * your own recorder of f->top->fn and f->top->label (docs/tracing.md).
 */
enum {
	CO_LOOP_TRACE_RESUME = 3,
	CO_LOOP_TRACE_YIELD = 4,
	CO_LOOP_TRACE_WAIT = 5,
	CO_LOOP_TRACE_DONE = 7,
};
#ifndef CO_LOOP_TRACE
#define CO_LOOP_TRACE(f, what) ((void)0)
#endif

/* A tick count as the user's clock gives it (co_loop_set_clock). */
typedef uint32_t co_tick;

typedef struct co_loop co_loop;

/*
 * A timer: what co_sleep_ticks and co_loop_timeout need, kept in the
 * coroutine's struct like any awaiter. All fields are private.
 */
typedef struct co_timer {
	co_awaiter aw;             /* the sleep's or the limit's awaiter */
	struct co_timer *next;     /* the loop's armed list, earliest first */
	co_loop *loop;
	co_frame *frame;           /* the waiting frame */
	co_awaiter *inner;         /* co_loop_timeout: the limited await */
	co_tick deadline;
	co_tick ticks;             /* the length asked for */
	unsigned char armed;       /* on the loop's list */
	unsigned char fired;       /* it expired during the await */
	int err;                   /* the sleep's value: 0 or -ECANCELED */
} co_timer;

struct co_loop {
	co_runner runner;          /* private: must stay first */
	co_frame *head;            /* private: ready FIFO */
	co_frame *tail;            /* private */
	co_frame *pending;         /* private: woken frames, a LIFO (any context) */
	co_timer *timers;          /* private: armed timers, earliest first */
	co_tick (*now)(void);      /* private: the clock, NULL until set */
	unsigned char tick_shift;  /* private: 32 - the clock's bits */
	unsigned char stepped;     /* private: a step ended since the running
	                              step resumed its frame: a body stepped
	                              the loop */
	unsigned ready;            /* read-only: frames in the FIFO */
	unsigned live;             /* read-only: spawned frames not yet finished */
};

static inline void co__loop_push(co_loop *l, co_frame *f)
{
	f->next = NULL;
	if (l->tail)
		l->tail->next = f;
	else
		l->head = f;
	l->tail = f;
	l->ready++;
}

static inline co_frame *co__loop_pop(co_loop *l)
{
	co_frame *f = l->head;

	l->head = f->next;
	if (l->head == NULL)
		l->tail = NULL;
	l->ready--;
	return f;
}

/* The runner's wake op: from the loop's context or an interrupt handler. */
static inline void co__loop_wake(co_runner *s, co_frame *root)
{
	co_loop *l = (co_loop *)s;
#if CO__LOOP_CAS
	co_frame *old = __atomic_load_n(&l->pending, __ATOMIC_RELAXED);

	do
		root->next = old;
	while (!__atomic_compare_exchange_n(&l->pending, &old, root, 1, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
#else
	CO_IRQ_STATE st;

	CO_IRQ_SAVE(st);
	root->next = l->pending;
	l->pending = root;
	CO_IRQ_RESTORE(st);
#endif
}

/* Take the frames woken since the last step, in the order they woke. */
static inline void co__loop_drain(co_loop *l)
{
	co_frame *f, *rev = NULL;

#if CO__LOOP_CAS
	if (__atomic_load_n(&l->pending, __ATOMIC_RELAXED) == NULL)
		return;
	f = __atomic_exchange_n(&l->pending, (co_frame *)NULL, __ATOMIC_ACQUIRE);
#else
	CO_IRQ_STATE st;

	if (*(co_frame *volatile *)&l->pending == NULL)
		return;
	CO_IRQ_SAVE(st);
	f = l->pending;
	l->pending = NULL;
	CO_IRQ_RESTORE(st);
#endif
	while (f) {
		co_frame *n = f->next;
		f->next = rev;
		rev = f;
		f = n;
	}
	while (rev) {
		co_frame *n = rev->next;
		co__loop_push(l, rev);
		rev = n;
	}
}

/* How many frames were woken since the last drain: a walk down the
 * stack, whose links below its top only the drain changes (a wake pushes
 * a frame on top, from anywhere). */
static inline unsigned co__loop_woken(co_loop *l)
{
	unsigned k = 0;
	co_frame *f;

#if CO__LOOP_CAS
	f = __atomic_load_n(&l->pending, __ATOMIC_ACQUIRE);
#else
	f = *(co_frame *volatile *)&l->pending;
#endif
	for (; f; f = f->next)
		k++;
	return k;
}

static inline int co__loop_has_pending(co_loop *l)
{
#if CO__LOOP_CAS
	return __atomic_load_n(&l->pending, __ATOMIC_RELAXED) != NULL;
#else
	return *(co_frame *volatile *)&l->pending != NULL;
#endif
}

static inline void co_loop_init(co_loop *l)
{
	CO__CHECK(l != NULL, "co_loop_init: NULL loop");
	l->runner.wake = co__loop_wake;
	l->runner.cancel = NULL;
	l->head = NULL;
	l->tail = NULL;
	l->pending = NULL;
	l->timers = NULL;
	l->now = NULL;
	l->tick_shift = 0;
	l->stepped = 0;
	l->ready = 0;
	l->live = 0;
}

/*
 * Hand a root frame (co_init'ed, not started) to the loop; it runs on the
 * next step. Its on_done callback, if set, runs when it finishes.
 * Returns 0, or -EINVAL for a NULL argument, a started frame or a child.
 * A frame whose body runs before its first suspension has no label yet:
 * debug builds tell it by the marks of a running body (RUNNING, IN_BODY);
 * release builds keep none and cannot.
 */
static inline int co_loop_spawn(co_loop *l, co_frame *f)
{
	if (l == NULL || f == NULL || f->fn == NULL || CO__IS_CHILD(f) || f->label != 0 ||
	    (f->state & (CO__ST_SPAWNED | CO__ST_DONE | CO__ST_RUNNING | CO__ST_IN_BODY)))
		return -EINVAL;
	f->state |= CO__ST_SPAWNED;
	f->runner = &l->runner;
	l->live++;
	co__loop_push(l, f);
	return 0;
}

static inline void co__loop_fire_timers(co_loop *l);

/*
 * Run each frame that is ready now once: the frames woken since the last
 * step (by co_wake, from anywhere) and those whose timers expired join the
 * queue first; frames made ready meanwhile (a yield, a co_wake) run on the
 * next step. Returns how many are ready then: those in the queue and
 * those woken during the step, each counted. A body the loop runs may
 * step it too (a nested step): that step runs the frames ready then, the
 * outer step's included, and the outer one ends once that body returns,
 * so that each ready frame runs once per step.
 */
static inline unsigned co_loop_step(co_loop *l)
{
	unsigned n;

	CO__CHECK(l != NULL, "co_loop_step: NULL loop");
	if (l->timers)
		co__loop_fire_timers(l);
	co__loop_drain(l);
	n = l->ready;

	while (n-- && l->head) { /* a nested step may have run the rest */
		co_frame *f = co__loop_pop(l);
		CO_LOOP_TRACE(f, CO_LOOP_TRACE_RESUME);
		l->stepped = 0;
		switch (co_resume(f)) {
		case CO_YIELDED:
			CO_LOOP_TRACE(f, CO_LOOP_TRACE_YIELD);
			co__loop_push(l, f);
			break;
		case CO_DONE:
			CO_LOOP_TRACE(f, CO_LOOP_TRACE_DONE);
			l->live--;
			if (f->on_done)
				f->on_done(f);
			break;
		default: /* CO_WAITING: its awaiter will co_wake() it */
			CO_LOOP_TRACE(f, CO_LOOP_TRACE_WAIT);
			break;
		}
		if (l->stepped)
			break; /* a body stepped the loop: that step ran the rest */
	}
	l->stepped = 1; /* for the step whose body this one ran in, if any */
	return l->ready + co__loop_woken(l);
}

/* Step until no frame is ready. Returns the frames still alive (waiting on
 * an awaiter or a timer); 0 means every spawned frame has finished. */
static inline unsigned co_loop_run(co_loop *l)
{
	CO__CHECK(l != NULL, "co_loop_run: NULL loop");
	while (co_loop_step(l))
		;
	return l->live;
}

/* ------------------------------------------------------------------------ */
/* Tick timers                                                              */
/* ------------------------------------------------------------------------ */

/*
 * The loop's clock: now() returns a counter of `bits` bits (1..32) that
 * counts up and wraps, such as a 16-bit hardware timer or a 32-bit SysTick
 * tick count. Timers compare ticks modulo 2^bits, so a wrap is harmless; a
 * timer may last at most 2^(bits-1) - 1 ticks. Returns 0, or -EINVAL.
 */
static inline int co_loop_set_clock(co_loop *l, co_tick (*now)(void), unsigned bits)
{
	if (l == NULL || now == NULL || bits == 0 || bits > 32)
		return -EINVAL;
	l->now = now;
	l->tick_shift = (unsigned char)(32u - bits);
	return 0;
}

/* b - a in ticks, signed: > 0 if b comes after a (modulo the clock's
 * width). The shift puts the clock's top bit at bit 31. */
static inline int32_t co__tick_diff(const co_loop *l, co_tick a, co_tick b)
{
	return (int32_t)(uint32_t)((b - a) << l->tick_shift);
}

static inline co_tick co__tick_max(const co_loop *l)
{
	return (co_tick)(0x7fffffffu >> l->tick_shift);
}

static inline void co__timer_arm(co_timer *t)
{
	co_loop *l = t->loop;
	co_timer **p = &l->timers;

	/* a tick the clock can show (0 to 2^bits - 1): what
	 * co_loop_next_deadline hands a tickless idle */
	t->deadline = (co_tick)((l->now() + t->ticks) & (0xffffffffu >> l->tick_shift));
	t->fired = 0;
	/* after the timers due no later: equal deadlines fire in arming order */
	while (*p && co__tick_diff(l, (*p)->deadline, t->deadline) >= 0)
		p = &(*p)->next;
	t->next = *p;
	*p = t;
	t->armed = 1;
}

static inline void co__timer_disarm(co_timer *t)
{
	co_timer **p = &t->loop->timers;

	if (!t->armed)
		return;
	while (*p != t)
		p = &(*p)->next;
	*p = t->next;
	t->armed = 0;
}

static inline void co__loop_fire_timers(co_loop *l)
{
	co_tick now = l->now();

	while (l->timers && co__tick_diff(l, l->timers->deadline, now) >= 0) {
		co_timer *t = l->timers;

		l->timers = t->next;
		t->armed = 0;
		if (!t->inner) {
			t->fired = 1;
			co_wake(t->frame);
		} else if (co_waiting(t->frame)) {
			t->fired = 1;
			t->inner->ops->cancel(t->inner, t->frame); /* ends in a co_wake */
		}
		/* else its await ended first (completed, or cancelled) and the
		 * frame waits in the queue: the limit cut nothing short, and
		 * the cancel op is only for a frame that waits (co.h) */
	}
}

/*
 * The earliest armed deadline, for a tickless idle hook that programs a
 * wake-up: returns 1 and sets *deadline, a tick of the clock (0 to
 * 2^bits - 1, wrapped as the clock wraps), or 0 when no timer is armed.
 */
static inline int co_loop_next_deadline(const co_loop *l, co_tick *deadline)
{
	if (l == NULL || l->timers == NULL)
		return 0;
	if (deadline)
		*deadline = l->timers->deadline;
	return 1;
}

static inline int co__sleep_ready(co_awaiter *a, co_frame *f)
{
	co_timer *t = (co_timer *)a;

	(void)f;
	t->err = 0;
	return t->ticks == 0;
}

static inline int co__sleep_suspend(co_awaiter *a, co_frame *f)
{
	co_timer *t = (co_timer *)a;

	if (co_await_cancelled(f)) {
		t->err = -ECANCELED;
		return 0;
	}
	t->frame = f;
	co__timer_arm(t);
	return 1;
}

static inline int co__sleep_resume(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((co_timer *)a)->err;
}

static inline int co__sleep_cancel(co_awaiter *a, co_frame *f)
{
	co_timer *t = (co_timer *)a;

	if (!t->armed)
		return 0; /* it expired: the wake is on its way */
	co__timer_disarm(t);
	t->err = -ECANCELED;
	co_wake(f);
	return 0;
}

/*
 * Sleep for `ticks` ticks of the loop's clock (0: no suspension). The
 * await's value is 0, or -ECANCELED after co_cancel. Returns what CO_AWAIT
 * takes; NULL (so the await ends with -EINVAL, a trap in debug builds) for
 * a NULL timer or loop, a loop without a clock, or half the clock's range
 * of ticks or more.
 *
 *     CO_AWAIT(f, co_sleep_ticks(&s->t, &loop, 500));
 */
static inline co_awaiter *co_sleep_ticks(co_timer *t, co_loop *l, co_tick ticks)
{
	static const co_awaiter_ops ops = { co__sleep_ready, co__sleep_suspend,
					    co__sleep_resume, co__sleep_cancel, 0, "sleep" };

	if (t == NULL || l == NULL || l->now == NULL || ticks > co__tick_max(l))
		return NULL;
	t->aw.ops = &ops;
	t->loop = l;
	t->inner = NULL;
	t->ticks = ticks;
	t->armed = 0;
	return &t->aw;
}

static inline int co__limit_ready(co_awaiter *a, co_frame *f)
{
	co_timer *t = (co_timer *)a;

	t->fired = 0;
	return t->inner->ops->ready && t->inner->ops->ready(t->inner, f);
}

static inline int co__limit_suspend(co_awaiter *a, co_frame *f)
{
	co_timer *t = (co_timer *)a;

	t->frame = f;
	co__timer_arm(t);
	if (t->inner->ops->suspend(t->inner, f))
		return 1;
	co__timer_disarm(t); /* it completed at once */
	return 0;
}

static inline int co__limit_resume(co_awaiter *a, co_frame *f)
{
	co_timer *t = (co_timer *)a;
	int r;

	co__timer_disarm(t);
	r = t->inner->ops->resume ? t->inner->ops->resume(t->inner, f) : 0;
	return t->fired && r == -ECANCELED ? -ETIME : r;
}

static inline int co__limit_cancel(co_awaiter *a, co_frame *f)
{
	co_timer *t = (co_timer *)a;

	return t->inner->ops->cancel(t->inner, f);
}

/*
 * A deadline on any await whose awaiter has a cancel op (a co_notify_take,
 * a sleep, your own): if it has not completed `ticks` ticks from now, it is
 * cancelled and its value is -ETIME; otherwise it has its own value (also
 * when it completed or was cancelled and the step that runs its frame
 * finds the limit due: the limit cuts short only a frame that waits).
 * Returns what CO_AWAIT takes; NULL (-EINVAL, a trap in debug builds) for
 * a NULL argument, an awaiter without a cancel op (a zeroed one, never
 * prepared, included), a loop without a clock or half the clock's range
 * of ticks or more.
 *
 *     CO_AWAIT(f, co_loop_timeout(&s->t, &loop, co_notify_take(&s->w, &rx), 100));
 *     if (co_result(f) == -ETIME) ...
 */
static inline co_awaiter *co_loop_timeout(co_timer *t, co_loop *l, co_awaiter *aw, co_tick ticks)
{
	static const co_awaiter_ops ops = { co__limit_ready, co__limit_suspend,
					    co__limit_resume, co__limit_cancel, 0, "limit" };

	if (t == NULL || l == NULL || aw == NULL || aw == &t->aw || aw->ops == NULL ||
	    aw->ops->cancel == NULL ||
	    l->now == NULL || ticks > co__tick_max(l))
		return NULL; /* aw == &t->aw: the sleep of its own timer, which it would overwrite */
	t->aw.ops = &ops;
	t->loop = l;
	t->inner = aw;
	t->ticks = ticks;
	t->armed = 0;
	return &t->aw;
}

/*
 * Sleep while nothing is ready: with interrupts masked (CO_IRQ_SAVE), if no
 * frame is ready, none was woken and no timer is due, call sleep(arg), then
 * unmask. sleep must return with interrupts still masked; Cortex-M's WFI
 * does (an interrupt that became pending while masked ends the WFI at
 * once, and its handler runs after the unmask), so a wake-up that raced
 * the check is never slept through. A tickless sleep programs its wake-up
 * from co_loop_next_deadline. A frame that yields or polls with
 * CO_AWAIT_UNTIL is ready: the loop never sleeps while one exists (wait
 * on a co_notify or a timer instead). Returns 1 if it called sleep, else 0.
 */
static inline int co_loop_idle(co_loop *l, void (*sleep)(void *arg), void *arg)
{
	CO__IDLE_STATE st;
	int slept = 0;

	CO__CHECK(l != NULL && sleep != NULL, "co_loop_idle: NULL loop or sleep");
	CO__IDLE_SAVE(st);
	if (l->ready == 0 && !co__loop_has_pending(l) &&
	    !(l->timers && co__tick_diff(l, l->timers->deadline, l->now()) >= 0)) {
		sleep(arg);
		slept = 1;
	}
	CO__IDLE_RESTORE(st);
	return slept;
}

/* ------------------------------------------------------------------------ */
/* co_notify: given by interrupt handlers, awaited by a coroutine           */
/* ------------------------------------------------------------------------ */

/*
 * A count of gives, at most max (1: an event that is set or not; more: a
 * counting semaphore), and at most one waiting coroutine. co_notify_give
 * is safe from interrupt handlers (inside CO_IRQ_SAVE/RESTORE; see the top
 * of this file for cores where the default masks nothing). All fields are
 * private.
 */
typedef struct co_notify {
	co_frame *waiter;
	unsigned count;
	unsigned max;
} co_notify;

typedef struct co_notify_wait {
	co_awaiter aw;
	co_notify *n;
	int err;
} co_notify_wait;

static inline void co_notify_init(co_notify *n, unsigned max)
{
	CO__CHECK(n != NULL, "co_notify_init: NULL notify");
	n->waiter = NULL;
	n->count = 0;
	n->max = max ? max : 1;
}

/*
 * Give: wake the waiting coroutine, or count the give (up to max). From
 * anywhere, interrupt handlers included. Returns 1, or 0 when the count
 * was already at max (the give is dropped, as a set event stays set).
 */
static inline int co_notify_give(co_notify *n)
{
	CO_IRQ_STATE st;
	co_frame *w;
	int ok = 1;

	CO_IRQ_SAVE(st);
	w = n->waiter;
	if (w)
		n->waiter = NULL;
	else if (n->count < n->max)
		n->count++;
	else
		ok = 0;
	CO_IRQ_RESTORE(st);
	if (w)
		co_wake(w);
	return ok;
}

static inline int co__notify_take1(co_notify *n)
{
	CO_IRQ_STATE st;
	int got = 0;

	CO_IRQ_SAVE(st);
	if (n->count) {
		n->count--;
		got = 1;
	}
	CO_IRQ_RESTORE(st);
	return got;
}

static inline int co__notify_ready(co_awaiter *a, co_frame *f)
{
	co_notify_wait *w = (co_notify_wait *)a;

	(void)f;
	w->err = 0;
	return co__notify_take1(w->n);
}

static inline int co__notify_suspend(co_awaiter *a, co_frame *f)
{
	co_notify_wait *w = (co_notify_wait *)a;
	co_notify *n = w->n;
	CO_IRQ_STATE st;
	int wait = 0;

	if (co_await_cancelled(f)) {
		w->err = -ECANCELED;
		return 0;
	}
	CO_IRQ_SAVE(st);
	if (n->count)
		n->count--; /* a give came after ready() */
	else if (n->waiter)
		w->err = -EBUSY; /* one waiter at a time */
	else {
		n->waiter = f;
		wait = 1;
	}
	CO_IRQ_RESTORE(st);
	return wait;
}

static inline int co__notify_resume(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((co_notify_wait *)a)->err;
}

static inline int co__notify_cancel(co_awaiter *a, co_frame *f)
{
	co_notify_wait *w = (co_notify_wait *)a;
	CO_IRQ_STATE st;
	int mine = 0;

	CO_IRQ_SAVE(st);
	if (w->n->waiter == f) {
		w->n->waiter = NULL;
		mine = 1;
	}
	CO_IRQ_RESTORE(st);
	if (mine) { /* else a give won the race: its wake is on its way */
		w->err = -ECANCELED;
		co_wake(f);
	}
	return 0;
}

/*
 * Take one give, waiting for it if there is none. The await's value is 0,
 * -ECANCELED after co_cancel (or -ETIME under co_loop_timeout), or -EBUSY
 * if another coroutine already waits on n. Returns what CO_AWAIT takes
 * (NULL for a NULL argument: -EINVAL).
 *
 *     CO_AWAIT(f, co_notify_take(&s->w, &rx));
 */
static inline co_awaiter *co_notify_take(co_notify_wait *w, co_notify *n)
{
	static const co_awaiter_ops ops = { co__notify_ready, co__notify_suspend,
					    co__notify_resume, co__notify_cancel, 0, "notify" };

	if (w == NULL || n == NULL)
		return NULL;
	w->aw.ops = &ops;
	w->n = n;
	return &w->aw;
}

/* ------------------------------------------------------------------------ */
/* co_isr_queue: items put by interrupt handlers, taken by a coroutine      */
/* ------------------------------------------------------------------------ */

/*
 * A ring of cap pointers in memory the user provides (no heap), filled
 * from anywhere (interrupt handlers included, as co_notify_give) and
 * emptied by one coroutine at a time:
 *
 *     static void *rx_slots[16];
 *     static co_isr_queue rx;                  // co_isr_queue_init(&rx, rx_slots, 16)
 *     void dma_isr(void) { co_isr_queue_put(&rx, frame_done()); }
 *
 *     CO_AWAIT(f, co_isr_queue_take(&s->w, &rx));   // 0, or -ECANCELED / -ETIME
 *     handle(s->w.item);
 *
 * All fields are private.
 */
typedef struct co_isr_queue {
	void **slots;
	unsigned cap;
	unsigned head;       /* next to take */
	unsigned count;
	co_notify items;     /* counts the items (max cap) */
} co_isr_queue;

typedef struct co_isr_queue_wait {
	co_notify_wait w;    /* private */
	co_isr_queue *q;     /* private */
	void *item;          /* read-only: the item taken, after the await */
} co_isr_queue_wait;

/* Returns 0, or -EINVAL for a NULL queue or slots, or cap 0. */
static inline int co_isr_queue_init(co_isr_queue *q, void **slots, unsigned cap)
{
	if (q == NULL || slots == NULL || cap == 0)
		return -EINVAL;
	q->slots = slots;
	q->cap = cap;
	q->head = 0;
	q->count = 0;
	co_notify_init(&q->items, cap);
	return 0;
}

/* Put an item (from anywhere): 1, or 0 when the queue is full (the item
 * is not queued; nothing is overwritten). */
static inline int co_isr_queue_put(co_isr_queue *q, void *item)
{
	CO_IRQ_STATE st;
	int ok = 0;

	CO_IRQ_SAVE(st);
	if (q->count < q->cap) {
		/* the slot count places after head, wrapped by a compare
		 * (no division: Cortex-M0 has none and would call libgcc),
		 * and without overflow at any cap */
		unsigned room = q->cap - q->head;

		q->slots[q->count < room ? q->head + q->count : q->count - room] = item;
		q->count++;
		ok = 1;
	}
	CO_IRQ_RESTORE(st);
	if (ok)
		co_notify_give(&q->items);
	return ok;
}

static inline int co__isr_queue_resume(co_awaiter *a, co_frame *f)
{
	co_isr_queue_wait *w = (co_isr_queue_wait *)a;
	co_isr_queue *q = w->q;
	int r = co__notify_resume(a, f);
	CO_IRQ_STATE st;

	if (r < 0)
		return r;
	/* the give counted an item that is in the ring: take the oldest */
	CO_IRQ_SAVE(st);
	w->item = q->slots[q->head];
	q->head = q->head + 1 == q->cap ? 0 : q->head + 1;
	q->count--;
	CO_IRQ_RESTORE(st);
	return 0;
}

/* Take the oldest item, waiting for one if the queue is empty; it is in
 * w->item after the await. Cancellable, and limited with co_loop_timeout;
 * one coroutine waits at a time (a second: -EBUSY). NULL argument: NULL. */
static inline co_awaiter *co_isr_queue_take(co_isr_queue_wait *w, co_isr_queue *q)
{
	static const co_awaiter_ops ops = { co__notify_ready, co__notify_suspend,
					    co__isr_queue_resume, co__notify_cancel, 0,
					    "isr queue" };

	if (w == NULL || q == NULL)
		return NULL;
	co_notify_take(&w->w, &q->items);
	w->w.aw.ops = &ops;
	w->q = q;
	w->item = NULL;
	return &w->w.aw;
}

#ifdef __cplusplus
}
#endif

#endif /* CORING_LOOP_H */
