/* SPDX-License-Identifier: MIT */
/*
 * The engine's list of its live root frames, for a view of the coroutines
 * (coring/view.h, lib/view.c): a frame is listed when its engine takes it
 * (a spawn, a transfer or a steal that brings it) and unlisted when it
 * finishes or leaves; the loop notes in its slot the turn it last ran in.
 * A view reads the list with the engine to itself: on the engine's thread,
 * or while the engine runs nowhere (co__engine_view_visit).
 *
 * Slots never move, so a frame's index stays valid while it is listed;
 * freed slots are reused first. Only a thief, which takes frames from
 * another engine's ready ring on its own thread, changes a list not its
 * own: engines that may be stolen from take view_lock for every change,
 * and a view of them holds it while it reads (the loop's note of a turn
 * is the owner's alone, in a slot no thief touches).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "engine_impl.h"
#include "fault.h"
#include "spin.h"

#ifdef CO_WITH_VIEW

#define VIEW_FIRST_SLOTS 16u

int co__view_init(co_engine *e)
{
	co__stamp_init();
	e->view = co__calloc(VIEW_FIRST_SLOTS, sizeof *e->view);
	if (e->view == NULL)
		return -ENOMEM;
	e->view_cap = VIEW_FIRST_SLOTS;
	e->view_n = 1; /* slot 0: the sink */
	e->view_free = 0;
	return 0;
}

void co__view_fini(co_engine *e)
{
	free(e->view);
	e->view = NULL;
	e->view_cap = e->view_n = 0;
}

void co__view_lock(co_engine *e)
{
	if (e->stealing)
		co__spin_lock(&e->view_lock);
}

void co__view_unlock(co_engine *e)
{
	if (e->stealing)
		co__spin_unlock(&e->view_lock);
}

/* Room for one more slot: 1, or 0 (no memory: the frame stays unlisted). */
static int view_grow(co_engine *e)
{
	unsigned cap = e->view_cap * 2;
	struct co__view_slot *v;

	if (cap <= e->view_cap)
		return 0;
	v = co__realloc(e->view, cap * sizeof *v);
	if (v == NULL)
		return 0;
	e->view = v;
	e->view_cap = cap;
	return 1;
}

void co__view_add(co_engine *e, co_frame *f)
{
	unsigned i;

	if (f->view_slot != 0)
		return;
	co__view_lock(e);
	if (e->view_free != 0) {
		i = e->view_free;
		e->view_free = (unsigned)e->view[i].since;
	} else if (e->view_n < e->view_cap || view_grow(e)) {
		i = e->view_n++;
	} else {
		co__view_unlock(e);
		return;
	}
	e->view[i].f = f;
	e->view[i].since = e->turn_stamp ? e->turn_stamp : co__stamp();
	f->view_slot = i;
	co__view_unlock(e);
}

void co__view_del(co_engine *e, co_frame *f)
{
	unsigned i = f->view_slot;

	if (i == 0)
		return;
	co__view_lock(e);
	e->view[i].f = NULL;
	e->view[i].since = e->view_free;
	e->view_free = i;
	f->view_slot = 0;
	co__view_unlock(e);
}

/* ---- reading the list with the engine to itself --------------------------------- */

/*
 * A request published in e->view_req (one at a time). Whoever takes it out
 * answers it: the engine at the start of its next turn (any turn whose
 * epoch moved: the publisher kicks it), or the publisher itself, while e
 * runs nowhere (a manual context between ticks, a context that ended). So
 * a request never waits on an engine that will not turn again. The
 * publisher may give up (gone): the engine then frees it after answering.
 */
struct co__view_req {
	co_engine *e;
	void (*fn)(co_engine *e, void *arg);
	void (*drop)(void *arg);
	void *arg;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done, gone;               /* under mu */
	int published;                /* in e->view_req (or taken from it) */
};

static void req_free(struct co__view_req *r)
{
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

static void answer(co_engine *e, struct co__view_req *r)
{
	co__view_lock(e);
	r->fn(e, r->arg);
	co__view_unlock(e);
}

/* The engine's turn found a request (its own thread). */
void co__engine_view_answer(co_engine *e)
{
	struct co__view_req *r = atomic_exchange_explicit(&e->view_req, NULL, memory_order_acq_rel);
	int gone;

	if (r == NULL)
		return;
	co__fault_point(CO__POINT_VIEW_TAKEN); /* tests: the publisher gives up now */
	co__engine_inbox_drain(e); /* frames other threads sent: listed now */
	answer(e, r);
	pthread_mutex_lock(&r->mu);
	r->done = 1;
	gone = r->gone;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu); /* not gone: the publisher frees r from here */
	if (gone) {
		r->drop(r->arg);
		req_free(r);
	}
}

/* Take e as a run would while it runs nowhere (a run or a tick that comes
 * meanwhile waits), and answer r if it is still there. 1: answered. A
 * borrower of an engine that no thief reads may queue its inbox too, so
 * that frames other threads spawned on it are listed. */
static int borrow_answer(co_engine *e, struct co__view_req *r)
{
	int visit = co__engine_visit_begin(e), did = 0;
	void *mine = r;

	atomic_fetch_add_explicit(&e->borrowers, 1, memory_order_acq_rel);
	if (co__engine_alive(e) && co__engine_transition(e, CO__T_RUN) >= 0) {
		if (atomic_compare_exchange_strong_explicit(&e->view_req, &mine, NULL,
							    memory_order_acq_rel, memory_order_acquire)) {
			if (!e->stealing)
				co__engine_inbox_drain(e);
			answer(e, r);
			did = 1;
		}
		co__engine_transition(e, CO__T_RUN_END);
	}
	atomic_fetch_sub_explicit(&e->borrowers, 1, memory_order_release);
	co__engine_visit_end(e, visit);
	return did;
}

/* Take r back if the engine has not taken it: 1 if so. */
static int take_back(co_engine *e, struct co__view_req *r)
{
	void *mine = r;

	return atomic_compare_exchange_strong_explicit(&e->view_req, &mine, NULL, memory_order_acq_rel,
						       memory_order_acquire);
}

/* Publish r in e's slot (another view's request may hold it): 1 if so;
 * the engine's next turn then looks. */
static int publish(co_engine *e, struct co__view_req *r)
{
	void *none = NULL;

	if (!atomic_compare_exchange_strong_explicit(&e->view_req, &none, r, memory_order_acq_rel,
						     memory_order_acquire))
		return 0;
	r->published = 1;
	co__engine_kick(e);
	return 1;
}

#define VIEW_SLICE_NS 1000000ull /* between two looks at whether e still runs */

static struct co__view_req *req_new(co_engine *e, void (*fn)(co_engine *e, void *arg),
				    void (*drop)(void *arg), void *arg)
{
	struct co__view_req *r = co__malloc(sizeof *r);
	pthread_condattr_t ca;

	if (r == NULL)
		return NULL;
	memset(r, 0, sizeof *r);
	r->e = e;
	r->fn = fn;
	r->drop = drop;
	r->arg = arg;
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	return r;
}

/* Wait for r's answer until deadline, a slice at most: 1 if answered. */
static int wait_answer(struct co__view_req *r, uint64_t deadline)
{
	uint64_t until = co__time_add(co__now_ns(), VIEW_SLICE_NS);
	struct timespec ts;
	int done;

	if (until > deadline)
		until = deadline;
	ts.tv_sec = (time_t)(until / CO__NS_PER_S);
	ts.tv_nsec = (long)(until % CO__NS_PER_S);
	pthread_mutex_lock(&r->mu);
	if (!r->done)
		pthread_cond_timedwait(&r->cv, &r->mu, &ts);
	done = r->done;
	pthread_mutex_unlock(&r->mu);
	return done;
}

int co__engine_view_begin(co_engine *e, void (*fn)(co_engine *e, void *arg), void (*drop)(void *arg),
			  void *arg, struct co__view_req **out)
{
	*out = NULL;
	if (e == NULL || !co__engine_alive(e))
		return -EINVAL;
	if (co__tls_engine == e) { /* its own thread: a frame, a post, an on_done */
		answer(e, &(struct co__view_req){ .e = e, .fn = fn, .arg = arg });
		return 0;
	}
	*out = req_new(e, fn, drop, arg);
	if (*out == NULL)
		return -ENOMEM;
	publish(e, *out);
	return 0;
}

/* The deadline came: take r back if no engine took it (err: arg stays the
 * caller's), else leave r and arg to the engine that answers (gone:
 * -EINPROGRESS), unless it just did (0). */
static int give_up(co_engine *e, struct co__view_req *r, int err)
{
	if (!r->published || take_back(e, r)) {
		req_free(r);
		return err;
	}
	pthread_mutex_lock(&r->mu);
	if (r->done) { /* it answered meanwhile */
		pthread_mutex_unlock(&r->mu);
		req_free(r);
		return 0;
	}
	r->gone = 1; /* the engine frees r (and arg) once it answers */
	pthread_mutex_unlock(&r->mu);
	return -EINPROGRESS;
}

int co__engine_view_end(struct co__view_req *r, uint64_t deadline)
{
	co_engine *e;

	if (r == NULL)
		return 0; /* answered at once */
	e = r->e;
	for (;;) {
		if (!r->published && !publish(e, r)) {
			if (co__engine_alive(e) && co__now_ns() < deadline) {
				usleep(50); /* another view's request first */
				continue;
			}
		} else if (borrow_answer(e, r) || wait_answer(r, deadline)) {
			req_free(r);
			return 0;
		}
		if (!co__engine_alive(e))
			return give_up(e, r, -EINVAL);
		if (co__now_ns() >= deadline)
			return give_up(e, r, -ETIMEDOUT);
	}
}

#else /* without the view (meson -Dview=false): no list, no request */

int co__view_init(co_engine *e)
{
	(void)e;
	return 0;
}

void co__view_fini(co_engine *e)
{
	(void)e;
}

void co__view_lock(co_engine *e)
{
	(void)e;
}

void co__view_unlock(co_engine *e)
{
	(void)e;
}

void co__engine_view_answer(co_engine *e)
{
	(void)e;
}

int co__engine_view_begin(co_engine *e, void (*fn)(co_engine *e, void *arg), void (*drop)(void *arg),
			  void *arg, struct co__view_req **out)
{
	(void)e;
	(void)fn;
	(void)drop;
	(void)arg;
	*out = NULL;
	return -EOPNOTSUPP;
}

int co__engine_view_end(struct co__view_req *r, uint64_t deadline)
{
	(void)r;
	(void)deadline;
	return -EOPNOTSUPP;
}

#endif
