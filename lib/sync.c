/* SPDX-License-Identifier: MIT */
/*
 * Mutex, event, latch, wait group, semaphore, condition variable. Each is a
 * spinlock, a little state and a FIFO of co_waiters; the waiter core
 * (lib/wait.c) parks, claims and wakes. See docs/sync.md.
 */
#include <errno.h>
#include <limits.h>

#include <coring/sync.h>
#include "wait.h"

/* Every primitive's fields are read and written under its spinlock only. */
#define LOCK(p) co__spin_lock(&(p)->lock)
#define UNLOCK(p) co__spin_unlock(&(p)->lock)

/* Claim every waiter of q with result res (the lock is held). */
static void claim_all(co_waitq *q, int res, co__wake_list *l)
{
	while (q->head)
		co__wait_claim(q->head, res, l);
}

/* ---- mutex ----------------------------------------------------------------------- */

int co_mutex_init(co_mutex *m)
{
	if (m == NULL)
		return -EINVAL;
	atomic_init(&m->lock, 0);
	m->locked = 0;
	m->q.head = m->q.tail = NULL;
	return 0;
}

static int mutex_lock_suspend(co_awaiter *a, co_frame *f)
{
	co_waiter *w = (co_waiter *)a;
	co_mutex *m = w->obj;

	LOCK(m);
	/* With hand-off, "unlocked" implies "nobody waits": no barging. */
	if (!m->locked) {
		m->locked = 1;
		UNLOCK(m);
		w->res = 0;
		return 0;
	}
	return co__wait_park(w, f, &m->q);
}

static const co__wait_ops mutex_lock_ops = {
	{ NULL, mutex_lock_suspend, co__wait_resume, co__wait_cancel }, NULL
};

co_awaiter *co_mutex_lock(co_waiter *w, co_mutex *m)
{
	return co__wait_prep(w, &mutex_lock_ops, m ? &m->lock : NULL, m);
}

int co_mutex_trylock(co_mutex *m)
{
	int err = 0;

	if (m == NULL)
		return -EINVAL;
	LOCK(m);
	if (m->locked)
		err = -EBUSY;
	else
		m->locked = 1;
	UNLOCK(m);
	return err;
}

static const co__wait_ops cond_wait_ops;

int co_mutex_unlock(co_mutex *m)
{
	co__wake_list l = CO__WAKE_LIST_INIT;
	co_waiter *w;

	if (m == NULL)
		return -EINVAL;
	LOCK(m);
	if (!m->locked) {
		UNLOCK(m);
		return -EPERM;
	}
	w = m->q.head;
	if (w) /* hand-off: stays locked, now owned by w; a condition
		  variable's waiter keeps the result of its wait */
		co__wait_claim(w, w->aw.ops == &cond_wait_ops.ops ? w->res : 0, &l);
	else
		m->locked = 0;
	UNLOCK(m);
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
	ev->q.head = ev->q.tail = NULL;
	return 0;
}

int co_event_set(co_event *ev)
{
	co__wake_list l = CO__WAKE_LIST_INIT;

	if (ev == NULL)
		return -EINVAL;
	LOCK(ev);
	ev->set = 1;
	claim_all(&ev->q, 0, &l);
	UNLOCK(ev);
	co__wake_all(&l);
	return 0;
}

int co_event_reset(co_event *ev)
{
	if (ev == NULL)
		return -EINVAL;
	LOCK(ev);
	ev->set = 0;
	UNLOCK(ev);
	return 0;
}

int co_event_is_set(co_event *ev)
{
	int set;

	if (ev == NULL)
		return -EINVAL;
	LOCK(ev);
	set = ev->set;
	UNLOCK(ev);
	return set;
}

static int event_wait_suspend(co_awaiter *a, co_frame *f)
{
	co_waiter *w = (co_waiter *)a;
	co_event *ev = w->obj;

	LOCK(ev);
	if (ev->set) {
		UNLOCK(ev);
		w->res = 0;
		return 0;
	}
	return co__wait_park(w, f, &ev->q);
}

static const co__wait_ops event_wait_ops = {
	{ NULL, event_wait_suspend, co__wait_resume, co__wait_cancel }, NULL
};

co_awaiter *co_event_wait(co_waiter *w, co_event *ev)
{
	return co__wait_prep(w, &event_wait_ops, ev ? &ev->lock : NULL, ev);
}

/* ---- latch and wait group ------------------------------------------------------- */

int co_latch_init(co_latch *l, unsigned count)
{
	if (l == NULL)
		return -EINVAL;
	atomic_init(&l->lock, 0);
	l->count = count;
	l->q.head = l->q.tail = NULL;
	return 0;
}

int co_latch_count_down(co_latch *l, unsigned n)
{
	co__wake_list wl = CO__WAKE_LIST_INIT;

	if (l == NULL)
		return -EINVAL;
	LOCK(l);
	if (n > l->count) {
		UNLOCK(l);
		return -EINVAL;
	}
	l->count -= n;
	if (l->count == 0)
		claim_all(&l->q, 0, &wl);
	UNLOCK(l);
	co__wake_all(&wl);
	return 0;
}

int co_latch_try_wait(co_latch *l)
{
	int err;

	if (l == NULL)
		return -EINVAL;
	LOCK(l);
	err = l->count == 0 ? 0 : -EAGAIN;
	UNLOCK(l);
	return err;
}

static int count_wait_suspend(co_awaiter *a, co_frame *f)
{
	co_waiter *w = (co_waiter *)a;
	co_latch *l = w->obj;

	LOCK(l);
	if (l->count == 0) {
		UNLOCK(l);
		w->res = 0;
		return 0;
	}
	return co__wait_park(w, f, &l->q);
}

static const co__wait_ops count_wait_ops = {
	{ NULL, count_wait_suspend, co__wait_resume, co__wait_cancel }, NULL
};

co_awaiter *co_latch_wait(co_waiter *w, co_latch *l)
{
	return co__wait_prep(w, &count_wait_ops, l ? &l->lock : NULL, l);
}

int co_wg_init(co_waitgroup *wg)
{
	return wg ? co_latch_init(&wg->c, 0) : -EINVAL;
}

int co_wg_add(co_waitgroup *wg, unsigned n)
{
	int err = 0;

	if (wg == NULL)
		return -EINVAL;
	LOCK(&wg->c);
	if (n > UINT_MAX - wg->c.count)
		err = -EOVERFLOW;
	else
		wg->c.count += n;
	UNLOCK(&wg->c);
	return err;
}

int co_wg_done(co_waitgroup *wg)
{
	return wg ? co_latch_count_down(&wg->c, 1) : -EINVAL;
}

co_awaiter *co_wg_wait(co_waiter *w, co_waitgroup *wg)
{
	return co__wait_prep(w, &count_wait_ops, wg ? &wg->c.lock : NULL, wg ? &wg->c : NULL);
}

/* ---- semaphore ------------------------------------------------------------------- */

int co_sem_init(co_sem *s, unsigned count)
{
	if (s == NULL)
		return -EINVAL;
	atomic_init(&s->lock, 0);
	s->count = count;
	s->q.head = s->q.tail = NULL;
	return 0;
}

static int sem_acquire_suspend(co_awaiter *a, co_frame *f)
{
	co_waiter *w = (co_waiter *)a;
	co_sem *s = w->obj;

	LOCK(s);
	/* Permits go to waiters first (release hands them over), so a free
	 * permit means nobody waits: FIFO. */
	if (s->count > 0) {
		s->count--;
		UNLOCK(s);
		w->res = 0;
		return 0;
	}
	return co__wait_park(w, f, &s->q);
}

static const co__wait_ops sem_acquire_ops = {
	{ NULL, sem_acquire_suspend, co__wait_resume, co__wait_cancel }, NULL
};

co_awaiter *co_sem_acquire(co_waiter *w, co_sem *s)
{
	return co__wait_prep(w, &sem_acquire_ops, s ? &s->lock : NULL, s);
}

int co_sem_try_acquire(co_sem *s)
{
	int err = 0;

	if (s == NULL)
		return -EINVAL;
	LOCK(s);
	if (s->count > 0)
		s->count--;
	else
		err = -EAGAIN;
	UNLOCK(s);
	return err;
}

int co_sem_release(co_sem *s, unsigned n)
{
	co__wake_list l = CO__WAKE_LIST_INIT;

	if (s == NULL)
		return -EINVAL;
	LOCK(s);
	if (s->q.head == NULL && n > UINT_MAX - s->count) {
		UNLOCK(s);
		return -EOVERFLOW;
	}
	for (; n && s->q.head; n--)
		co__wait_claim(s->q.head, 0, &l);
	s->count += n; /* waiters exist only while count is 0: no overflow */
	UNLOCK(s);
	co__wake_all(&l);
	return 0;
}

/* ---- condition variable ------------------------------------------------------------ */

int co_cond_init(co_cond *c)
{
	if (c == NULL)
		return -EINVAL;
	atomic_init(&c->lock, 0);
	c->q.head = c->q.tail = NULL;
	return 0;
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
	LOCK(m);
	if (!m->locked) {
		m->locked = 1;
		UNLOCK(m);
		co__wait_wake_frame(w);
		return;
	}
	w->timed = 0; /* a mutex hand-off wakes it directly */
	w->u.mutex = NULL;
	atomic_store_explicit(&w->state, CO__W_MUTEX, memory_order_relaxed);
	co__waitq_push(&m->q, w);
	UNLOCK(m);
}

static int cond_wait_suspend(co_awaiter *a, co_frame *f)
{
	co_waiter *w = (co_waiter *)a;
	co_cond *c = w->obj;
	co_mutex *m = w->u.mutex;
	int held;

	LOCK(m);
	held = m->locked;
	UNLOCK(m);
	if (!held) {
		w->res = -EPERM;
		return 0;
	}
	LOCK(c);
	if (!co__wait_park(w, f, &c->q))
		return 0; /* did not wait: the caller still holds m */
	/* Queued on c before m is released, so a notify that follows our
	 * unlock finds us. A notify may already have claimed us: then we are
	 * queued on m (still locked), and this unlock may hand it to us. */
	co_mutex_unlock(m);
	return 1;
}

static const co__wait_ops cond_wait_ops = {
	{ NULL, cond_wait_suspend, co__wait_resume, co__wait_cancel }, cond_deliver
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

	if (c == NULL)
		return -EINVAL;
	LOCK(c);
	if (all)
		claim_all(&c->q, 0, &l);
	else if (c->q.head)
		co__wait_claim(c->q.head, 0, &l);
	UNLOCK(c);
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
