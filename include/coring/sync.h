/* SPDX-License-Identifier: MIT */
/*
 * coring/sync.h - coroutine-aware synchronisation: mutex, event, latch,
 * wait group, counting semaphore, condition variable. A coroutine that has
 * to wait parks (its engine counts it, so its context stays alive) instead
 * of blocking its thread; whoever releases it makes it ready again on its
 * own engine, from any thread.
 *
 *     struct worker { co_frame co; co_waiter w; ... };
 *
 *     CO_AWAIT(f, co_mutex_lock(&s->w, &mutex));
 *     counter++;
 *     co_mutex_unlock(&mutex);
 *
 * Every wait takes a co_waiter: the awaiter and the wait-list node in one,
 * kept in the coroutine's struct (nothing is allocated to wait or to wake).
 * One co_waiter serves one await at a time; the prep functions return its
 * awaiter for CO_AWAIT. The await's value (co_result) is 0 on success,
 * -ECANCELED after co_cancel, -ETIME when co_wait_for's time ran out, or
 * the operation's own error. Misuse (a NULL or destroyed object) completes
 * at once with -EINVAL; a NULL co_waiter returns a shared awaiter that
 * does so too.
 *
 * Rules:
 *   - Wake-ups cross threads: a frame parked on engine A may be released
 *     from a coroutine on engine B or from a plain thread.
 *   - A cancelled frame (co_cancel, co_cancelled) is not parked again: a
 *     wait that cannot complete at once ends with -ECANCELED.
 *   - Frames that do not run on an engine (co_loop, co_resume by hand) may
 *     use the primitives from their own thread only, without time limits.
 *   - Freeing a primitive: once the call that released its last waiter
 *     (set, unlock, release, close ...) has returned, coring does not touch
 *     it again, even while the released frames' timers are being removed
 *     on their engines. Its destroy function checks that no frame waits
 *     and that no such call still waits for an engine's look at a frame
 *     it released (-EBUSY otherwise), and makes every later call answer
 *     -EINVAL: after a 0 any thread may free it (docs/sync.md).
 *   - Waiting frames are served in FIFO order by every primitive.
 */
#ifndef CORING_SYNC_H
#define CORING_SYNC_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <stddef.h>
#include <stdint.h>

#include <coring/waiter.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Mutex                                                                    */
/* ------------------------------------------------------------------------ */

/*
 * A mutex for coroutines (docs/sync.md, "The mutex"). A free mutex is
 * taken by whoever asks first: unlock frees it and invites the oldest
 * waiter to try again, on its own engine, while a coroutine that arrives
 * meanwhile may take it (a lock held by a coroutine of another context is
 * polled briefly before the caller parks). So a hand-off between contexts
 * never keeps the mutex held while a thread wakes up. No waiter starves:
 * no waiter sees more than CO_MUTEX_OVERTAKES acquisitions by coroutines
 * that came after it (parked after it, or took the free mutex without
 * parking): the unlock after the oldest waiter's last one hands the mutex
 * straight to it, queued or invited.
 * co_mutex_init_fifo makes a mutex that always hands off, oldest first
 * (no newcomer barges in). It is not tied to a thread or a frame: any
 * holder's unlock releases it.
 */
typedef struct co_mutex {
	CO__ATOMIC(unsigned) lock;    /* private: spinlock over the fields below */
	CO__ATOMIC(unsigned) word;    /* private: held (bit 0); waiters, a retry
	                                 due or no fast path (bit 1) */
	co_waitq q;                   /* private */
	int dead;                     /* private: destroyed */
	unsigned char fifo;           /* private: always hand off */
	unsigned char invited;        /* private: a waiter's retry is on its way
	                                 (2: the mutex is held for it) */
	unsigned barges;              /* private: acquisitions while a frame
	                                 waited (its overtakes count from it) */
	unsigned invited_mark;        /* private: the invited waiter's mark */
	void *holder;                 /* private: the engine whose coroutine
	                                 holds it (NULL: none, or no engine) */
} co_mutex;

#define CO_MUTEX_INIT { 0, 0, { NULL, NULL }, 0, 0, 0, 0, 0, NULL }

/* How many acquisitions by later arrivals a waiting frame sees at most
 * between its park and its own acquisition (docs/sync.md). */
#define CO_MUTEX_OVERTAKES 4096

/* Errors: -EINVAL (NULL). */
CO_API int co_mutex_init(co_mutex *m);
/* A mutex that hands off: unlock gives it straight to the oldest waiter,
 * and nobody barges in. Errors: -EINVAL (NULL). */
CO_API int co_mutex_init_fifo(co_mutex *m);
/* 0: from now on every call on m answers -EINVAL, and coring does not
 * touch m again (free it at will). -EBUSY (held, or a frame waits on it:
 * nothing changes), -EINVAL (NULL, destroyed). */
CO_API int co_mutex_destroy(co_mutex *m);
/* Await the lock. Value 0 (held), -ECANCELED, -ETIME (co_wait_for); -EINVAL
 * for a NULL mutex. */
CO_API co_awaiter *co_mutex_lock(co_waiter *w, co_mutex *m);
/* Take it only if it is free: 0, -EBUSY (held), -EINVAL (NULL). */
CO_API int co_mutex_trylock(co_mutex *m);
/* Release it (free, its oldest waiter invited to take it; or handed to
 * that waiter, see above): 0, -EPERM (not locked), -EINVAL (NULL). From
 * any thread. */
CO_API int co_mutex_unlock(co_mutex *m);

/* ------------------------------------------------------------------------ */
/* Event                                                                    */
/* ------------------------------------------------------------------------ */

/* A manual-reset event: set wakes every waiter and lets later waits pass
 * until reset. */
typedef struct co_event {
	CO__ATOMIC(unsigned) lock;             /* private */
	int set;                      /* private */
	co_waitq q;                   /* private */
	int dead;                     /* private */
} co_event;

/* Errors: -EINVAL (NULL). */
CO_API int co_event_init(co_event *ev, int set);
/* As co_mutex_destroy: -EBUSY while a frame waits on it. */
CO_API int co_event_destroy(co_event *ev);
/* Set it and wake every waiter: 0, -EINVAL. From any thread. */
CO_API int co_event_set(co_event *ev);
/* Clear it: 0, -EINVAL. */
CO_API int co_event_reset(co_event *ev);
/* 1 if set, 0 if not, -EINVAL. */
CO_API int co_event_is_set(co_event *ev);
/* Await the event: 0 once set, -ECANCELED, -ETIME (co_wait_for). */
CO_API co_awaiter *co_event_wait(co_waiter *w, co_event *ev);

/* ------------------------------------------------------------------------ */
/* Latch and wait group                                                     */
/* ------------------------------------------------------------------------ */

/* A single-use countdown: waits pass once the count reached zero. */
typedef struct co_latch {
	CO__ATOMIC(unsigned) lock;             /* private */
	unsigned count;               /* private */
	co_waitq q;                   /* private */
	int dead;                     /* private */
} co_latch;

/* Errors: -EINVAL (NULL). */
CO_API int co_latch_init(co_latch *l, unsigned count);
/* As co_mutex_destroy: -EBUSY while a frame waits on it. */
CO_API int co_latch_destroy(co_latch *l);
/* Count down by n; at zero every waiter wakes. 0, -EINVAL (NULL, or n
 * larger than what is left). From any thread. */
CO_API int co_latch_count_down(co_latch *l, unsigned n);
/* 0 if the count reached zero, -EAGAIN if not, -EINVAL. */
CO_API int co_latch_try_wait(co_latch *l);
/* Await zero: 0, -ECANCELED, -ETIME (co_wait_for). */
CO_API co_awaiter *co_latch_wait(co_waiter *w, co_latch *l);

/* Go's WaitGroup: add work, mark it done, wait until none is left.
 * Reusable: add after a wait completed starts a new round. */
typedef struct co_waitgroup {
	co_latch c;                   /* private */
} co_waitgroup;

/* Errors: -EINVAL (NULL). */
CO_API int co_waitgroup_init(co_waitgroup *wg);
/* As co_mutex_destroy: -EBUSY while a frame waits on it. */
CO_API int co_waitgroup_destroy(co_waitgroup *wg);
/* 0, -EINVAL (NULL), -EOVERFLOW (the count would pass UINT_MAX). */
CO_API int co_waitgroup_add(co_waitgroup *wg, unsigned n);
/* One unit done; at zero every waiter wakes. 0, -EINVAL (NULL, or nothing
 * was added). From any thread. */
CO_API int co_waitgroup_done(co_waitgroup *wg);
/* Await zero: 0, -ECANCELED, -ETIME (co_wait_for). */
CO_API co_awaiter *co_waitgroup_wait(co_waiter *w, co_waitgroup *wg);

/* ------------------------------------------------------------------------ */
/* Counting semaphore                                                       */
/* ------------------------------------------------------------------------ */

typedef struct co_sem {
	CO__ATOMIC(unsigned) lock;             /* private */
	unsigned count;               /* private: permits available */
	co_waitq q;                   /* private */
	int dead;                     /* private */
} co_sem;

/* Errors: -EINVAL (NULL). */
CO_API int co_sem_init(co_sem *s, unsigned count);
/* As co_mutex_destroy: -EBUSY while a frame waits on it. */
CO_API int co_sem_destroy(co_sem *s);
/* Await a permit: 0, -ECANCELED, -ETIME (co_wait_for). */
CO_API co_awaiter *co_sem_acquire(co_waiter *w, co_sem *s);
/* 0 if a permit was taken, -EAGAIN if none is free, -EINVAL. */
CO_API int co_sem_try_acquire(co_sem *s);
/* Give back n permits, to the oldest waiters first. 0, -EINVAL (NULL),
 * -EOVERFLOW (the count would pass UINT_MAX; nothing changes). */
CO_API int co_sem_release(co_sem *s, unsigned n);

/* ------------------------------------------------------------------------ */
/* Condition variable                                                       */
/* ------------------------------------------------------------------------ */

/* Used with a co_mutex the waiter holds. Wake-ups are never spurious, but
 * another coroutine may change the state between the notify and the
 * re-lock: test the predicate in a loop. */
typedef struct co_cond {
	CO__ATOMIC(unsigned) lock;             /* private */
	co_waitq q;                   /* private */
	int dead;                     /* private */
} co_cond;

/* Errors: -EINVAL (NULL). */
CO_API int co_cond_init(co_cond *c);
/* As co_mutex_destroy: -EBUSY while a frame waits on it, which it does
 * until it has re-locked its mutex (notified, timed out or cancelled):
 * destroy c first, then m. */
CO_API int co_cond_destroy(co_cond *c);
/*
 * Release m and wait for a notify; re-acquire m before the await returns,
 * whatever its value. 0 (notified), -ECANCELED, -ETIME (co_wait_for limits
 * the wait for the notify, not the re-lock); -EPERM (m is not locked: the
 * await returns at once), -EINVAL (NULL). If the wait cannot start
 * (cancelled, a zero time limit) it returns at once, m still held. m must
 * not be destroyed while a frame waits on c with it (if it is, the await
 * ends with -EINVAL, m not held).
 */
CO_API co_awaiter *co_cond_wait(co_waiter *w, co_cond *c, struct co_mutex *m);
/* Wake the oldest waiter / every waiter: 0, -EINVAL. From any thread;
 * holding the mutex is not required. */
CO_API int co_cond_signal(co_cond *c);
CO_API int co_cond_broadcast(co_cond *c);

#ifdef __cplusplus
}
#endif

#endif /* CORING_SYNC_H */
