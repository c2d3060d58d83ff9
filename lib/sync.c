/* SPDX-License-Identifier: MIT */
/*
 * Mutex, event, latch, wait group, semaphore, condition variable. Each is a
 * spinlock, a little state and a FIFO of co_waiters; the waiter core
 * (lib/waiter.c) parks, claims and wakes. See docs/sync.md.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>

#include <coring/sync.h>
#include "waiter_internal.h"


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

#define SIMPLE_OPS(name, type, take_fn)                                             \
	static const simple_ops name = {                                            \
		{ { NULL, simple_suspend, co__wait_resume, co__wait_cancel, CO__AW_WAIT }, NULL }, \
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

/* Take the lock of a primitive that has not been destroyed: 0, or -EINVAL
 * (destroyed; the lock is not held then). */
static int lock_alive(atomic_uint *lk, const int *dead)
{
	co__spin_lock(lk);
	if (!*dead)
		return 0;
	co__spin_unlock(lk);
	return -EINVAL;
}

/*
 * Destroy, under the lock: refused while a frame waits on q (or, for a
 * mutex, while it is held); otherwise every later call answers -EINVAL.
 * Frames it released earlier are never a reason to wait: nothing touches
 * the object after the call that released them returned.
 */
static int destroy(atomic_uint *lk, int *dead, const co_waitq *q, const int *held)
{
	int err = 0;

	co__spin_lock(lk);
	if (*dead)
		err = -EINVAL;
	else if (q->head || (held && *held))
		err = -EBUSY;
	else
		*dead = 1;
	co__spin_unlock(lk);
	return err;
}

/* ---- mutex ----------------------------------------------------------------------- */

int co_mutex_init(co_mutex *m)
{
	if (m == NULL)
		return -EINVAL;
	atomic_init(&m->lock, 0);
	m->locked = 0;
	m->dead = 0;
	m->q.head = m->q.tail = NULL;
	return 0;
}

int co_mutex_destroy(co_mutex *m)
{
	return m ? destroy(&m->lock, &m->dead, &m->q, &m->locked) : -EINVAL;
}

/* With hand-off, "unlocked" implies "nobody waits": no barging. */
static int mutex_take(void *obj)
{
	co_mutex *m = obj;

	if (m->dead)
		return TAKE_DEAD;
	if (m->locked)
		return TAKE_WAIT;
	m->locked = 1;
	return TAKE_DONE;
}

SIMPLE_OPS(mutex_lock_ops, co_mutex, mutex_take);

co_awaiter *co_mutex_lock(co_waiter *w, co_mutex *m)
{
	return co__wait_prep(w, &mutex_lock_ops.w, m ? &m->lock : NULL, m);
}

int co_mutex_trylock(co_mutex *m)
{
	if (m == NULL)
		return -EINVAL;
	return try_take(&m->lock, mutex_take, m, -EBUSY);
}

int co_mutex_unlock(co_mutex *m)
{
	co__wake_list l = CO__WAKE_LIST_INIT;
	co_waiter *w;

	if (m == NULL)
		return -EINVAL;
	co__lock(m);
	if (m->dead || !m->locked) {
		int dead = m->dead;
		co__unlock(m);
		return dead ? -EINVAL : -EPERM;
	}
	w = m->q.head;
	if (w) /* hand-off: stays locked, now owned by w; a condition
		  variable's waiter (re-locking) keeps the result of its wait */
		co__wait_claim(w, atomic_load_explicit(&w->state, memory_order_relaxed) == CO__W_MUTEX ?
					  w->res : 0, &l);
	else
		m->locked = 0;
	co__unlock(m);
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
	co__unlock(ev);
	co__wake_all(&l);
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

	return ev->dead ? TAKE_DEAD : ev->set ? TAKE_DONE : TAKE_WAIT;
}

SIMPLE_OPS(event_wait_ops, co_event, event_take);

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
	co__unlock(l);
	co__wake_all(&wl);
	return 0;
}

static int count_take(void *obj)
{
	co_latch *l = obj;

	return l->dead ? TAKE_DEAD : l->count == 0 ? TAKE_DONE : TAKE_WAIT;
}

SIMPLE_OPS(count_wait_ops, co_latch, count_take);

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
	return co__wait_prep(w, &count_wait_ops.w, wg ? &wg->c.lock : NULL, wg ? &wg->c : NULL);
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

	if (s->dead)
		return TAKE_DEAD;
	if (s->count == 0)
		return TAKE_WAIT;
	s->count--;
	return TAKE_DONE;
}

SIMPLE_OPS(sem_acquire_ops, co_sem, sem_take);

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
	co__unlock(s);
	co__wake_all(&l);
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
static void cond_deliver(co_waiter *w)
{
	co_mutex *m = w->u.mutex;

	if (m == NULL) { /* handed the mutex by an unlock: done */
		co__wait_wake_frame(w);
		return;
	}
	if (lock_alive(&m->lock, &m->dead)) {
		w->res = -EINVAL; /* destroyed under a waiting cond: not held */
		co__wait_wake_frame(w);
		return;
	}
	if (!m->locked) {
		m->locked = 1;
		co__unlock(m);
		co__wait_wake_frame(w);
		return;
	}
	w->timed = 0; /* a mutex hand-off wakes it directly */
	w->u.mutex = NULL;
	atomic_store_explicit(&w->state, CO__W_MUTEX, memory_order_relaxed);
	co__waitq_push(&m->q, w);
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
	held = m->locked;
	co__unlock(m);
	if (!held) {
		w->res = -EPERM;
		return 0;
	}
	if (lock_alive(&c->lock, &c->dead)) {
		w->res = -EINVAL;
		return 0;
	}
	held = co__wait_park(w, f, &c->q);
	if (held != 1)
		return held; /* did not wait: the caller still holds m */
	/* Queued on c before m is released, so a notify that follows our
	 * unlock finds us. A notify may already have claimed us: then we are
	 * queued on m (still locked), and this unlock may hand it to us. */
	co_mutex_unlock(m);
	return 1;
}

static const co__wait_ops cond_wait_ops = {
	{ NULL, cond_wait_suspend, co__wait_resume, co__wait_cancel, CO__AW_WAIT }, cond_deliver
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
	co__unlock(c);
	co__wake_all(&l); /* each re-locks the mutex (cond_deliver) */
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
