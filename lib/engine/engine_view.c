/* SPDX-License-Identifier: MIT */
/*
 * A view's request to an engine (coring/view.h, lib/view/view.c): the engine's
 * list of live frames (lib/engine/engine_frames.c) is read with the engine to
 * itself: on its own thread (at once, or at its next turn, which a request
 * published in e->view_req asks for), or on the caller's while the engine
 * runs nowhere. Every engine is asked before any answer is awaited.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "engine_view.h"
#include "engine_state.h"
#include "engine_frames.h"
#include "engine_queue.h"
#include "engine_visit.h"
#include "common/fault.h"

#ifdef CO_WITH_VIEW

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
	co_engine *prev;

	if (co__engine_alive(e) && co__engine_borrow(e, &prev) == 0) {
		if (atomic_compare_exchange_strong_explicit(&e->view_req, &mine, NULL,
							    memory_order_acq_rel, memory_order_acquire)) {
			if (!e->stealing)
				co__engine_inbox_drain(e);
			answer(e, r);
			did = 1;
		}
		co__engine_unborrow(e, prev);
	}
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

/* A caller that publishes a request counts itself in e->viewers from
 * co__engine_view_begin until its last touch of e in co__engine_view_end.
 * It waits outside any visit (a cancel stop that holds e borrowed waits for
 * the visitors to leave), so a destroy that comes meanwhile waits for the
 * viewers instead (co__view_fini, lib/engine/engine_frames.c): each sees e
 * dying within a slice, takes its request back and waits for the
 * destroy's answer as a call does (viewer_await_destroy). The count is
 * taken inside a visit that saw e alive (a destroy deciding meanwhile is
 * waited out: co__engine_call_begin), so a destroy that waited for the
 * visitors sees it. 0: e was destroyed, or never set up. */
static int viewer_enter(co_engine *e)
{
	int visit;

	if (co__engine_call_begin(e, &visit) < 0)
		return 0;
	atomic_fetch_add_explicit(&e->viewers, 1, memory_order_seq_cst);
	co__engine_visit_end(e, visit);
	return 1;
}

/* The viewer's last touch of e: from here e may be destroyed. */
static void viewer_leave(co_engine *e)
{
	atomic_fetch_sub_explicit(&e->viewers, 1, memory_order_release);
}

/* A viewer (its request not in e) found a destroy deciding. It becomes a
 * visitor before it stops being a viewer (so e outlives it: the destroy
 * that frees e waits for the viewers, then for the visitors), and waits
 * for the answer outside the visit. 1: e lives on, and the caller is a
 * viewer again; 0: e was destroyed, and is not touched again. */
static int viewer_await_destroy(co_engine *e)
{
	int visit = co__engine_visit_begin(e);

	viewer_leave(e);
	if (!co__engine_destroy_answer(e, visit))
		return 0;
	atomic_fetch_add_explicit(&e->viewers, 1, memory_order_seq_cst);
	co__engine_visit_end(e, visit);
	return 1;
}

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
	if (e == NULL)
		return -EINVAL;
	/* Its own thread (a frame, a post, an on_done), or a thread that holds
	 * it borrowed (an on_done a cancel stop runs there: its own borrow
	 * would be refused): e is the caller's now. */
	if (co__tls_engine == e || co__engine_borrowed_here(e)) {
		answer(e, &(struct co__view_req){ .e = e, .fn = fn, .arg = arg });
		return 0;
	}
	if (!viewer_enter(e))
		return -EINVAL;
	*out = req_new(e, fn, drop, arg);
	if (*out == NULL) {
		viewer_leave(e);
		return -ENOMEM;
	}
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

/* Wait for r's answer, as a viewer of e: the answer (0), or the caller
 * gives up (-ETIMEDOUT, -EINPROGRESS; a destroy freed e: -EINVAL). The
 * viewer has left e when it returns. */
static int view_wait(co_engine *e, struct co__view_req *r, uint64_t deadline)
{
	int err;

	for (;;) {
		if (!r->published && !publish(e, r)) {
			if (co__engine_alive(e) && co__now_ns() < deadline) {
				usleep(50); /* another view's request first */
				continue;
			}
		} else {
			co__fault_point(CO__POINT_VIEW_WAITS); /* tests: a destroy comes now */
			if (borrow_answer(e, r) || wait_answer(r, deadline)) {
				req_free(r);
				err = 0;
				break;
			}
		}
		if (!co__engine_alive(e)) {
			/* A destroy deciding: no run starts meanwhile, so a
			 * request e took is answered already. Taken back, it
			 * waits for the answer; e lives on: published again. */
			if (r->published && !take_back(e, r)) {
				err = give_up(e, r, -EINVAL);
				break;
			}
			r->published = 0;
			if (viewer_await_destroy(e))
				continue;
			req_free(r);
			return -EINVAL; /* destroyed: no viewer left */
		}
		if (co__now_ns() >= deadline) {
			err = give_up(e, r, -ETIMEDOUT);
			break;
		}
	}
	viewer_leave(e);
	return err;
}

int co__engine_view_end(struct co__view_req *r, uint64_t deadline)
{
	if (r == NULL)
		return 0; /* answered at once */
	return view_wait(r->e, r, deadline);
}

#else /* without the view: no request */

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
