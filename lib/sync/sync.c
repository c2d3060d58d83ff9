/* SPDX-License-Identifier: MIT */
/*
 * Mutex, event, latch, wait group, semaphore, condition variable. Each is a
 * spinlock, a little state and a FIFO of co_waiters; the waiter core
 * (lib/waiter/waiter.c) parks, claims and wakes. See docs/sync.md.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>

#include <coring/sync.h>
#include "common/fault.h"
#include "waiter/waiter_internal.h"


/* Claim every waiter of q with result res (the lock is held). */
static void claim_all(co_waitq *q, int res, co__wake_list *l)
{
	while (q->head)
		co__wait_claim(q->head, res, l);
}

/*
 * The waits of mutex, event, latch, wait group and semaphore have one
 * shape: under the lock, take() completes the operation if it can;
 * otherwise the frame parks on the primitive's queue (at qoff).
 */
enum { TAKE_DEAD = -1, TAKE_WAIT = 0, TAKE_DONE = 1 };

typedef struct simple_ops {
	co__wait_ops w;               /* first: co_waiter.aw.ops points here */
	int (*take)(void *obj);       /* under the lock: TAKE_* */
	size_t qoff;                  /* offset of the co_waitq in the object */
} simple_ops;

static int simple_suspend(co_awaiter *a, co_frame *f)
{
	co_waiter *w = (co_waiter *)a;
	const simple_ops *ops = (const simple_ops *)(const void *)a->ops;
	int took;

	co__spin_lock(w->lk);
	took = ops->take(w->obj);
	if (took != TAKE_WAIT) {
		co__spin_unlock(w->lk);
		w->res = took == TAKE_DONE ? 0 : -EINVAL;
		return 0;
	}
	return co__wait_park(w, f, (co_waitq *)(void *)((char *)w->obj + ops->qoff));
}

#define SIMPLE_OPS(name, what, type, take_fn)                                       \
	static const simple_ops name = {                                            \
		{ { NULL, simple_suspend, co__wait_resume, co__wait_cancel, CO__AW_WAITER, what }, \
		  NULL },                                                           \
		take_fn, offsetof(type, q)                                          \
	}

/* The non-blocking variant: take() once, under the lock. 0 if it took,
 * busy if it would wait, -EINVAL if the object was destroyed. */
static int try_take(atomic_uint *lk, int (*take)(void *obj), void *obj, int busy)
{
	int took;

	co__spin_lock(lk);
	took = take(obj);
	co__spin_unlock(lk);
	return took == TAKE_DONE ? 0 : took == TAKE_WAIT ? busy : -EINVAL;
}

/* A primitive's dead word, under its lock: DEAD once destroyed, plus
 * RELEASING for each release that waits for an engine's look at a frame
 * it released (unlock_wake), and a condition variable's for each frame in
 * its wait that has not re-locked its mutex yet (cond_deliver). A mutex's
 * holds DEAD only (its releases are seen by destroy otherwise: invited,
 * or held for the frame handed it). */
#define DEAD 1
#define RELEASING 2

/* Take the lock of a primitive that has not been destroyed: 0, or -EINVAL
 * (destroyed; the lock is not held then). */
static int lock_alive(atomic_uint *lk, const int *dead)
{
	co__spin_lock(lk);
	if (!(*dead & DEAD))
		return 0;
	co__spin_unlock(lk);
	return -EINVAL;
}

/*
 * Destroy, under the lock: refused while a frame waits on q (or, for a
 * mutex, while it is held), or while a release waits for an engine's look
 * at a frame it released (that look may still take the lock); otherwise
 * every later call answers -EINVAL. Frames released earlier are never a
 * reason to wait: once their release stopped counting itself nothing
 * touches the object for them.
 */
static int destroy(atomic_uint *lk, int *dead, const co_waitq *q, const int *held)
{
	int err = 0;

	co__spin_lock(lk);
	if (*dead & DEAD)
		err = -EINVAL;
	else if (q->head || (held && *held) || *dead >= RELEASING)
		err = -EBUSY;
	else
		*dead = DEAD;
	co__spin_unlock(lk);
	return err;
}

/*
 * The end of a release (a set, a count down, a semaphore's release, a
 * notify), its lock lk held and the waiters it claimed on l: unlock, and
 * wake them. While an engine's look at one of them may still take lk
 * (co__wake_wait_looks), the release counts itself in dead, so that a
 * destroy from another thread answers -EBUSY and the primitive is not
 * freed under the look (docs/sync.md, "Freeing a primitive"). The count
 * is dropped before the first wake: a woken frame may destroy the
 * primitive at once, and nothing touches it after.
 */
static void unlock_wake(atomic_uint *lk, int *dead, co__wake_list *l)
{
	int looks = 0;

	/* seq_cst, after the claims: the look co__wake_wait_looks waits for
	 * (a look that begins later sees the claim, and leaves lk alone) */
	for (co_waiter *w = l->head; w && !looks; w = w->next)
		looks = atomic_load_explicit(&w->stop_link.visit, memory_order_seq_cst) != 0;

	if (looks)
		*dead += RELEASING;
	co__spin_unlock(lk);
	if (looks) {
		co__wake_wait_looks(l);
		co__spin_lock(lk);
		*dead -= RELEASING;
		co__spin_unlock(lk);
	}
	co__wake_all(l);
}

/* ---- mutex ----------------------------------------------------------------------- */

/*
 * A free mutex goes to whoever asks first; unlock frees it and invites its
 * oldest waiter (claims it with MUTEX_RETRY), whose retry runs on its own
 * engine: it takes the mutex if it is still free, else it goes back to the
 * head of the queue. One invitation is on its way at a time (invited); the
 * invited waiter is older than every queued one.
 *
 * The bound. barges counts the acquisitions made by later arrivals while a
 * frame waited (queued or invited): every take of a free mutex with a
 * waiter queued or invited (a lock, a trylock, a condition waiter's
 * re-lock: mutex_barge), not a retry's (the oldest overtakes nobody) nor a
 * hand-off. A waiter notes it when it parks (u.mark; the invited one's is
 * kept in invited_mark), so barges - mark is how many later arrivals
 * overtook it, and no waiter has been overtaken more than the oldest one.
 * Unlock hands the mutex on instead of freeing it (it stays locked, now
 * that waiter's):
 *   - to the invited waiter, once it has been overtaken CO_MUTEX_OVERTAKES
 *     times (invited becomes MUTEX_HELD_FOR: its retry finds it held for
 *     it and takes it);
 *   - else, with no invitation on its way, to the head of the queue when it
 *     has been overtaken CO_MUTEX_OVERTAKES times, when it is a condition
 *     variable's waiter re-locking (FIFO, as before its wait), and always
 *     in a FIFO mutex. Never past an invitation on its way: the head is
 *     younger than the invited waiter.
 * So the oldest waiter is overtaken CO_MUTEX_OVERTAKES times at most: the
 * acquisition that brings its count there holds the mutex, and its unlock
 * hands it on.
 *
 * word says whether it is held (MX_HELD) and whether anything beyond that
 * needs the lock (MX_SLOW: waiters queued, a retry due, destroyed).
 * With MX_SLOW clear, lock and unlock are one CAS each (0 -> MX_HELD ->
 * 0), without the lock: nobody waits, so nobody is overtaken, invited or
 * handed the mutex (in a FIFO mutex too).
 * Whatever queues a waiter sets MX_SLOW first, under the lock, with a CAS
 * (a fast unlock may race it: then the CAS fails and it looks again), so
 * an unlock with waiters always takes the slow path. Under the lock word
 * changes only by CAS while MX_SLOW may be clear; a stale MX_SLOW (the
 * last waiter timed out, a trylock found it held) only sends the next
 * lock or unlock the slow way, which recomputes it. holder is a hint for a frame that polls before it
 * parks.
 */
#define MUTEX_RETRY 1      /* the value of an invited waiter until its retry */
#define MUTEX_HELD_FOR 2   /* invited: and the mutex is held for its retry */
#define MUTEX_POLLS 4      /* rounds of polling a mutex held on another engine */
#define MUTEX_POLL_PAUSES 30
#define MX_HELD 1u
#define MX_SLOW 2u

static unsigned mx_word(co_mutex *m)
{
	return atomic_load_explicit(&m->word, memory_order_acquire);
}

/* A look without ordering: what to try, not what holds. */
static unsigned mx_word_hint(co_mutex *m)
{
	return atomic_load_explicit(&m->word, memory_order_relaxed);
}

/* Under the lock: MX_SLOW if anything needs the lock besides the holder. */
static unsigned mx_slow(const co_mutex *m)
{
	return m->q.head || m->invited || m->dead ? MX_SLOW : 0;
}

/* Under the lock: word becomes held (or free) with MX_SLOW recomputed. A
 * CAS loop, as a fast lock or unlock may race while MX_SLOW is clear.
 * only_if_free: take a free m; -1 (nothing changed) if it is held.
 * Otherwise the caller knows m is held with MX_SLOW set (no fast path can
 * move it meanwhile). */
static int mx_set(co_mutex *m, int held, int only_if_free)
{
	unsigned old = mx_word(m), nw = (held ? MX_HELD : 0) | mx_slow(m);

	for (;;) {
		if (only_if_free && (old & MX_HELD))
			return -1;
		if (old & MX_SLOW) { /* no fast path can move it: a store */
			atomic_store_explicit(&m->word, nw, memory_order_release);
			return 0;
		}
		if (atomic_compare_exchange_weak_explicit(&m->word, &old, nw, memory_order_acq_rel,
							  memory_order_acquire))
			return 0;
	}
}

/* Under the lock, before queueing a waiter: 1 if m is held, with MX_SLOW
 * now set (its unlock will take the lock and see the waiter); 0 if it is
 * free (a fast unlock came first): take it instead. */
static int mx_mark_waiting(co_mutex *m)
{
	unsigned old = mx_word(m);

	while (old & MX_HELD) {
		if ((old & MX_SLOW) ||
		    atomic_compare_exchange_weak_explicit(&m->word, &old, old | MX_SLOW,
							  memory_order_acq_rel, memory_order_acquire))
			return 1;
	}
	return 0;
}

static int mutex_setup(co_mutex *m, int fifo)
{
	if (m == NULL)
		return -EINVAL;
	atomic_init(&m->lock, 0);
	atomic_init(&m->word, 0);
	m->dead = 0;
	m->q.head = m->q.tail = NULL;
	m->fifo = (unsigned char)fifo;
	m->invited = 0;
	m->barges = 0;
	m->invited_mark = 0;
	m->holder = NULL;
	return 0;
}

int co_mutex_init(co_mutex *m)
{
	return mutex_setup(m, 0);
}

int co_mutex_init_fifo(co_mutex *m)
{
	return mutex_setup(m, 1);
}

int co_mutex_destroy(co_mutex *m)
{
	int err = 0;

	if (m == NULL)
		return -EINVAL;
	co__lock(m);
	if (m->dead) {
		err = -EINVAL;
	} else if (m->q.head || m->invited) { /* waited on, a retry due */
		err = -EBUSY;
	} else {
		m->dead = 1; /* MX_SLOW from now on: every call takes the lock */
		if (mx_set(m, 0, 1) < 0) { /* held (a fast lock may come first) */
			m->dead = 0;
			err = -EBUSY;
		}
	}
	co__unlock(m);
	return err;
}

/* Under the lock: m is held now (it was, or it was free and is taken: 0;
 * -1 if a fast lock took it first), by a frame of engine e (or none). */
static int mutex_hold(co_mutex *m, co_engine *e, int was_free)
{
	if (mx_set(m, 1, was_free) < 0)
		return -1;
	__atomic_store_n(&m->holder, (void *)e, __ATOMIC_RELAXED);
	return 0;
}

/* Under the lock: take m for a frame of engine e if it is free (1), else
 * mark it waited on (0: held, MX_SLOW set, the caller may queue). A fast
 * lock or unlock may move word in between: it looks again. */
static int mutex_take_or_mark(co_mutex *m, co_engine *e)
{
	for (;;) {
		if (mutex_hold(m, e, 1) == 0)
			return 1;
		if (mx_mark_waiting(m))
			return 0;
	}
}

/* Under the lock: take m for a later arrival (a lock, a trylock, a
 * condition waiter's re-lock) of engine e if it is free (1: counted as an
 * overtake of every waiter), else 0 with MX_SLOW set (the caller may
 * queue). */
static int mutex_barge(co_mutex *m, co_engine *e)
{
	if (!mutex_take_or_mark(m, e))
		return 0;
	if (m->q.head || m->invited)
		m->barges++; /* it overtakes the waiters */
	return 1;
}

/* Under the lock: take m if free, else TAKE_WAIT with MX_SLOW set (stale
 * if the caller does not queue after all: a trylock, a cancelled frame). */
static int mutex_take(void *obj)
{
	co_mutex *m = obj;

	if (m->dead)
		return TAKE_DEAD;
	return mutex_barge(m, co__tls_engine) ? TAKE_DONE : TAKE_WAIT;
}

/* Nobody waits and it is free: take it with one CAS. */
static int mutex_take_fast(co_mutex *m)
{
	unsigned free_word = 0;

	/* a look first: a CAS that fails still takes the line */
	if (mx_word_hint(m) != 0 ||
	    !atomic_compare_exchange_strong_explicit(&m->word, &free_word, MX_HELD,
						     memory_order_acquire, memory_order_relaxed))
		return 0;
	__atomic_store_n(&m->holder, (void *)co__tls_engine, __ATOMIC_RELAXED);
	return 1;
}

/* Held by a coroutine of another engine, which runs while we look, and
 * holds it briefly: poll a few rounds before parking. Not for one of this
 * engine (it cannot run while we poll), nor in a FIFO mutex. */
static void mutex_poll(co_mutex *m)
{
	void *holder = __atomic_load_n(&m->holder, __ATOMIC_RELAXED);

	if (m->fifo || holder == NULL || holder == (void *)co__tls_engine)
		return;
	for (int i = 0; i < MUTEX_POLLS && (mx_word_hint(m) & MX_HELD); i++)
		for (int k = 0; k < MUTEX_POLL_PAUSES; k++)
			co__cpu_relax();
}

static int mutex_lock_suspend(co_awaiter *a, co_frame *f)
{
	co_waiter *w = (co_waiter *)a;
	co_mutex *m = w->obj;
	int took;

	if (mutex_take_fast(m)) {
		w->res = 0;
		return 0;
	}
	mutex_poll(m);
	co__spin_lock(w->lk);
	took = mutex_take(m);
	if (took != TAKE_WAIT) {
		co__spin_unlock(w->lk);
		w->res = took == TAKE_DONE ? 0 : -EINVAL;
		return 0;
	}
	w->u.mark = m->barges;
	return co__wait_park(w, f, &m->q);
}

/* An invited waiter's retry, on its engine's thread (with no engine, the
 * frame's own): take the mutex if it is still free or held for it (handed
 * at the bound), else back to the head of the queue, unless the frame was
 * cancelled meanwhile. The mutex cannot be destroyed while the retry is
 * due (invited). */
static void mutex_retry_post(co_post *p);

static void mutex_retry(co_waiter *w, int foreign)
{
	co_mutex *m = w->obj;
	int waiting = 0, timed = 0, handed;

	co__lock(m);
	handed = m->invited == MUTEX_HELD_FOR;
	m->invited = 0;
	if (handed) /* held since that unlock: its now (MX_SLOW was set) */
		mutex_hold(m, w->engine, 0);
	if (handed || mutex_take_or_mark(m, w->engine)) {
		w->res = 0;
	} else if (foreign) {
		/* On the unlocker's thread (a frame that follows its waker):
		 * a waiter goes back to its queue only on its own engine's
		 * thread, where a cancel's look at it and a cancel stop's run
		 * (lib/waiter/waiter.c), never between the two. The
		 * invitation stays on its way, as a retry posted there. */
		m->invited = MUTEX_RETRY;
		co__unlock(m);
		w->post.fn = mutex_retry_post;
		co_engine_post(w->engine, &w->post);
		return;
	} else { /* held, MX_SLOW set: back to the head of the queue */
		waiting = co__wait_repark(w);
		/* Read under the lock: once it is released, an unlock on
		 * another thread may claim an untimed waiter again, and its
		 * frame run there and reuse it at once. A timed one stays
		 * ours until its timer's CQE (co__wait_repark). */
		timed = waiting && w->timed;
	}
	co__unlock(m);
	co__fault_point(CO__POINT_MUTEX_REPARKED);
	if (timed)
		co__wait_rearm(w);
	else if (!waiting)
		co__wait_wake_frame(w);
}

static void mutex_retry_post(co_post *p)
{
	mutex_retry(co__container_of(p, co_waiter, post), 0);
}

/* A claimed lock waiter: handed the mutex (0), timed out or cancelled:
 * woken; invited: its retry goes to its engine, which runs it at its next
 * turn (a timed waiter's comes from that engine already, after its timer's
 * CQE), so that frames running meanwhile may take the free mutex. A frame
 * that follows its waker (co_sched_roam) retries here, on the unlocker's
 * thread, and runs next on the unlocker's context if it took the mutex;
 * if a later arrival took it first, its retry goes to its engine after
 * all. */
static void mutex_deliver(co_waiter *w)
{
	if (w->res != MUTEX_RETRY) {
		co__wait_wake_frame(w);
	} else if (w->engine == NULL || w->timer_done) {
		mutex_retry(w, 0);
	} else if (co__engine_may_follow(w->engine, w->frame)) {
		mutex_retry(w, 1);
	} else {
		w->post.fn = mutex_retry_post;
		co_engine_post(w->engine, &w->post);
	}
}

static const simple_ops mutex_lock_ops = {
	{ { NULL, mutex_lock_suspend, co__wait_resume, co__wait_cancel, CO__AW_WAITER, "mutex" },
	  mutex_deliver },
	mutex_take, offsetof(co_mutex, q)
};

co_awaiter *co_mutex_lock(co_waiter *w, co_mutex *m)
{
	return co__wait_prep(w, &mutex_lock_ops.w, m ? &m->lock : NULL, m);
}

int co_mutex_trylock(co_mutex *m)
{
	if (m == NULL)
		return -EINVAL;
	if (mutex_take_fast(m))
		return 0;
	return try_take(&m->lock, mutex_take, m, -EBUSY);
}

/* Under the lock, no invitation on its way: hand m to the head of its
 * queue w rather than free it? */
static int mutex_hand_off(co_mutex *m, co_waiter *w)
{
	return m->fifo || atomic_load_explicit(&w->state, memory_order_relaxed) == CO__W_MUTEX ||
	       m->barges - (unsigned)w->u.mark >= CO_MUTEX_OVERTAKES;
}

int co_mutex_unlock(co_mutex *m)
{
	co__wake_list l = CO__WAKE_LIST_INIT;
	co_waiter *w;
	unsigned held = MX_HELD;

	if (m == NULL)
		return -EINVAL;
	/* nobody waits: one CAS (holder is a hint: cleared first) */
	if (mx_word_hint(m) == MX_HELD) {
		__atomic_store_n(&m->holder, NULL, __ATOMIC_RELAXED);
		if (atomic_compare_exchange_strong_explicit(&m->word, &held, 0, memory_order_release,
							    memory_order_relaxed))
			return 0;
	}
	co__lock(m);
	if (m->dead || !(mx_word(m) & MX_HELD)) {
		int dead = m->dead;
		co__unlock(m);
		return dead ? -EINVAL : -EPERM;
	}
	w = m->q.head;
	if (m->invited && m->barges - m->invited_mark >= CO_MUTEX_OVERTAKES) {
		/* the invited waiter at the bound: held for its retry */
		m->invited = MUTEX_HELD_FOR;
		__atomic_store_n(&m->holder, NULL, __ATOMIC_RELAXED);
	} else if (w && !m->invited && mutex_hand_off(m, w)) {
		/* (never past an invitation on its way: w is younger) stays
		 * held, now w's; a condition variable's waiter (re-locking)
		 * keeps the result of its wait */
		co__wait_claim(w, atomic_load_explicit(&w->state, memory_order_relaxed) == CO__W_MUTEX ?
					  w->res : 0, &l);
		mutex_hold(m, w->engine, 0); /* MX_SLOW was set: w was queued */
	} else {
		if (w && !m->invited) {
			m->invited = 1;
			m->invited_mark = (unsigned)w->u.mark;
			co__wait_claim(w, MUTEX_RETRY, &l);
		}
		__atomic_store_n(&m->holder, NULL, __ATOMIC_RELAXED);
		mx_set(m, 0, 0); /* free; MX_SLOW while a retry is due or waiters stay */
	}
	co__unlock(m);
	co__fault_point(CO__POINT_MUTEX_INVITED); /* tests: a later arrival barges now */
	co__wake_all(&l);
	return 0;
}

/* ---- event ----------------------------------------------------------------------- */

int co_event_init(co_event *ev, int set)
{
	if (ev == NULL)
		return -EINVAL;
	atomic_init(&ev->lock, 0);
	ev->set = set != 0;
	ev->dead = 0;
	ev->q.head = ev->q.tail = NULL;
	return 0;
}

int co_event_destroy(co_event *ev)
{
	return ev ? destroy(&ev->lock, &ev->dead, &ev->q, NULL) : -EINVAL;
}

int co_event_set(co_event *ev)
{
	co__wake_list l = CO__WAKE_LIST_INIT;

	if (ev == NULL || lock_alive(&ev->lock, &ev->dead))
		return -EINVAL;
	ev->set = 1;
	claim_all(&ev->q, 0, &l);
	unlock_wake(&ev->lock, &ev->dead, &l);
	return 0;
}

int co_event_reset(co_event *ev)
{
	if (ev == NULL || lock_alive(&ev->lock, &ev->dead))
		return -EINVAL;
	ev->set = 0;
	co__unlock(ev);
	return 0;
}

static int event_take(void *obj)
{
	co_event *ev = obj;

	return (ev->dead & DEAD) ? TAKE_DEAD : ev->set ? TAKE_DONE : TAKE_WAIT;
}

SIMPLE_OPS(event_wait_ops, "event", co_event, event_take);

int co_event_is_set(co_event *ev)
{
	int r;

	if (ev == NULL)
		return -EINVAL;
	r = try_take(&ev->lock, event_take, ev, 1);
	return r == 0 ? 1 : r == 1 ? 0 : r; /* taken: set */
}

co_awaiter *co_event_wait(co_waiter *w, co_event *ev)
{
	return co__wait_prep(w, &event_wait_ops.w, ev ? &ev->lock : NULL, ev);
}

/* ---- latch and wait group ------------------------------------------------------- */

int co_latch_init(co_latch *l, unsigned count)
{
	if (l == NULL)
		return -EINVAL;
	atomic_init(&l->lock, 0);
	l->count = count;
	l->dead = 0;
	l->q.head = l->q.tail = NULL;
	return 0;
}

int co_latch_destroy(co_latch *l)
{
	return l ? destroy(&l->lock, &l->dead, &l->q, NULL) : -EINVAL;
}

int co_latch_count_down(co_latch *l, unsigned n)
{
	co__wake_list wl = CO__WAKE_LIST_INIT;

	if (l == NULL || lock_alive(&l->lock, &l->dead))
		return -EINVAL;
	if (n > l->count) {
		co__unlock(l);
		return -EINVAL;
	}
	l->count -= n;
	if (l->count == 0)
		claim_all(&l->q, 0, &wl);
	unlock_wake(&l->lock, &l->dead, &wl);
	return 0;
}

static int count_take(void *obj)
{
	co_latch *l = obj;

	return (l->dead & DEAD) ? TAKE_DEAD : l->count == 0 ? TAKE_DONE : TAKE_WAIT;
}

SIMPLE_OPS(count_wait_ops, "latch", co_latch, count_take);
SIMPLE_OPS(group_wait_ops, "wait group", co_latch, count_take);

int co_latch_try_wait(co_latch *l)
{
	if (l == NULL)
		return -EINVAL;
	return try_take(&l->lock, count_take, l, -EAGAIN);
}

co_awaiter *co_latch_wait(co_waiter *w, co_latch *l)
{
	return co__wait_prep(w, &count_wait_ops.w, l ? &l->lock : NULL, l);
}

int co_waitgroup_init(co_waitgroup *wg)
{
	return wg ? co_latch_init(&wg->c, 0) : -EINVAL;
}

int co_waitgroup_destroy(co_waitgroup *wg)
{
	return wg ? co_latch_destroy(&wg->c) : -EINVAL;
}

int co_waitgroup_add(co_waitgroup *wg, unsigned n)
{
	int err = 0;

	if (wg == NULL || lock_alive(&wg->c.lock, &wg->c.dead))
		return -EINVAL;
	if (n > UINT_MAX - wg->c.count)
		err = -EOVERFLOW;
	else
		wg->c.count += n;
	co__unlock(&wg->c);
	return err;
}

int co_waitgroup_done(co_waitgroup *wg)
{
	return wg ? co_latch_count_down(&wg->c, 1) : -EINVAL;
}

co_awaiter *co_waitgroup_wait(co_waiter *w, co_waitgroup *wg)
{
	return co__wait_prep(w, &group_wait_ops.w, wg ? &wg->c.lock : NULL, wg ? &wg->c : NULL);
}

/* ---- semaphore ------------------------------------------------------------------- */

int co_sem_init(co_sem *s, unsigned count)
{
	if (s == NULL)
		return -EINVAL;
	atomic_init(&s->lock, 0);
	s->count = count;
	s->dead = 0;
	s->q.head = s->q.tail = NULL;
	return 0;
}

int co_sem_destroy(co_sem *s)
{
	return s ? destroy(&s->lock, &s->dead, &s->q, NULL) : -EINVAL;
}

/* Permits go to waiters first (release hands them over), so a free
 * permit means nobody waits: FIFO. */
static int sem_take(void *obj)
{
	co_sem *s = obj;

	if (s->dead & DEAD)
		return TAKE_DEAD;
	if (s->count == 0)
		return TAKE_WAIT;
	s->count--;
	return TAKE_DONE;
}

SIMPLE_OPS(sem_acquire_ops, "semaphore", co_sem, sem_take);

co_awaiter *co_sem_acquire(co_waiter *w, co_sem *s)
{
	return co__wait_prep(w, &sem_acquire_ops.w, s ? &s->lock : NULL, s);
}

int co_sem_try_acquire(co_sem *s)
{
	if (s == NULL)
		return -EINVAL;
	return try_take(&s->lock, sem_take, s, -EAGAIN);
}

int co_sem_release(co_sem *s, unsigned n)
{
	co__wake_list l = CO__WAKE_LIST_INIT;

	if (s == NULL || lock_alive(&s->lock, &s->dead))
		return -EINVAL;
	if (s->q.head == NULL && n > UINT_MAX - s->count) {
		co__unlock(s);
		return -EOVERFLOW;
	}
	for (; n && s->q.head; n--)
		co__wait_claim(s->q.head, 0, &l);
	s->count += n; /* waiters exist only while count is 0: no overflow */
	unlock_wake(&s->lock, &s->dead, &l);
	return 0;
}

/* ---- condition variable ------------------------------------------------------------ */

int co_cond_init(co_cond *c)
{
	if (c == NULL)
		return -EINVAL;
	atomic_init(&c->lock, 0);
	c->dead = 0;
	c->q.head = c->q.tail = NULL;
	return 0;
}

int co_cond_destroy(co_cond *c)
{
	return c ? destroy(&c->lock, &c->dead, &c->q, NULL) : -EINVAL;
}

/*
 * A claimed condition waiter (notified, timed out or cancelled) re-locks
 * its mutex before its frame wakes: at once if the mutex is free, else it
 * joins the mutex's queue and the hand-off of a later unlock wakes it. No
 * time limit and no cancel apply to this phase (like pthread_cond_wait).
 * Runs on the claimer's thread, or on the waiter's engine for a timed wait,
 * with no lock held; the waiter belongs to whoever claimed it.
 */
/* The frame of a condition wait on c has re-locked its mutex, or is
 * queued for it (its spinlock held then, so that no hand-off wakes the
 * frame first): c no longer counts it. After this, nothing touches c for
 * it: a destroy of c may answer 0 and c be freed. */
static void cond_relocked(co_cond *c)
{
	co__spin_lock(&c->lock);
	c->dead -= RELEASING;
	co__spin_unlock(&c->lock);
}

static void cond_deliver(co_waiter *w)
{
	co_mutex *m = w->u.mutex;
	co_cond *c = w->obj;

	if (m == NULL) { /* handed the mutex by an unlock: done */
		co__wait_wake_frame(w);
		return;
	}
	if (lock_alive(&m->lock, &m->dead)) {
		cond_relocked(c);
		w->res = -EINVAL; /* destroyed under a waiting cond: not held */
		co__wait_wake_frame(w);
		return;
	}
	if (mutex_barge(m, w->engine)) { /* an overtake, if others wait */
		cond_relocked(c);
		co__unlock(m);
		co__wait_wake_frame(w);
		return;
	}
	/* held or owed, MX_SLOW set: queued, an unlock's hand-off wakes it */
	w->timed = 0; /* a mutex hand-off wakes it directly */
	w->u.mutex = NULL;
	atomic_store_explicit(&w->state, CO__W_MUTEX, memory_order_relaxed);
	co__waitq_push(&m->q, w);
	cond_relocked(c);
	co__unlock(m);
}

static int cond_wait_suspend(co_awaiter *a, co_frame *f)
{
	co_waiter *w = (co_waiter *)a;
	co_cond *c = w->obj;
	co_mutex *m = w->u.mutex;
	int held;

	if (lock_alive(&m->lock, &m->dead)) {
		w->res = -EINVAL;
		return 0;
	}
	held = (mx_word(m) & MX_HELD) != 0;
	co__unlock(m);
	if (!held) {
		w->res = -EPERM;
		return 0;
	}
	if (lock_alive(&c->lock, &c->dead)) {
		w->res = -EINVAL;
		return 0;
	}
	/* counted until its deliver has re-locked m (or queued it there): a
	 * notify claims it from c's queue, but it is c's wait until then, and
	 * c's destroy answers -EBUSY (the caller's destroy of m comes after) */
	c->dead += RELEASING;
	held = co__wait_park(w, f, &c->q);
	if (held != 1) { /* did not wait: the caller still holds m */
		cond_relocked(c);
		return held;
	}
	/* Queued on c before m is released, so a notify that follows our
	 * unlock finds us. A notify may already have claimed us: then we are
	 * queued on m (still locked), and this unlock may hand it to us. */
	co_mutex_unlock(m);
	return 1;
}

static const co__wait_ops cond_wait_ops = {
	{ NULL, cond_wait_suspend, co__wait_resume, co__wait_cancel, CO__AW_WAITER,
	  "condition" },
	cond_deliver
};

co_awaiter *co_cond_wait(co_waiter *w, co_cond *c, co_mutex *m)
{
	co_awaiter *a = co__wait_prep(w, &cond_wait_ops, c ? &c->lock : NULL, m ? (void *)c : NULL);

	if (w)
		w->u.mutex = m;
	return a;
}

static int cond_notify(co_cond *c, int all)
{
	co__wake_list l = CO__WAKE_LIST_INIT;

	if (c == NULL || lock_alive(&c->lock, &c->dead))
		return -EINVAL;
	if (all)
		claim_all(&c->q, 0, &l);
	else if (c->q.head)
		co__wait_claim(c->q.head, 0, &l);
	unlock_wake(&c->lock, &c->dead, &l); /* each re-locks the mutex (cond_deliver) */
	return 0;
}

int co_cond_signal(co_cond *c)
{
	return cond_notify(c, 0);
}

int co_cond_broadcast(co_cond *c)
{
	return cond_notify(c, 1);
}
