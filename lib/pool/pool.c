/* SPDX-License-Identifier: MIT */
/* Blocking work on worker threads (pool.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <coring/pool.h>
#include "common/awaiter.h"
#include "engine/engine_internal.h"
#include "common/fault.h"

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE };

#define POOL_MAX_THREADS 1024u

/* Hand the frame back, from whichever thread ended the job: off the
 * engine's list, wake first, unpark second (so the engine never finds
 * itself idle with the wake on its way; lib/waiter/waiter.c does the same), and
 * nothing of the job is touched after the wake. */
static void job_release(co_pool_job *j)
{
	co_engine *e = j->engine;
	co_frame *f = j->frame;

	if (e)
		co__engine_stop_list_remove(e, &j->stop_link);
	co_wake(f);
	if (e)
		co_engine_unpark(e);
}

/* A job that ran to its end: its result, and its frame back; or one given
 * up meanwhile (job_give_up: its frame has gone on, and the job record
 * with it perhaps): the result is dropped and only its engine's hold is
 * let go. */
static void job_ended(struct co__pool_worker *w, co_pool_job *j, int res)
{
	co_pool *p = w->pool;
	co_engine *held;

	co__fault_point(CO__POINT_POOL_ENDED); /* tests: a cancel or a limit comes first */
	pthread_mutex_lock(&p->lock);
	p->busy--;
	held = w->held;
	w->held = NULL;
	if (w->job == j) {
		j->res = res;
		j->state = JOB_DONE;
	}
	w->job = NULL;
	pthread_mutex_unlock(&p->lock);
	if (held)
		co__engine_unhold(held);
	else
		job_release(j);
}

static void *worker(void *arg)
{
	struct co__pool_worker *w = arg;
	co_pool *p = w->pool;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		co_pool_job *j;
		int (*fn)(void *arg);
		void *fn_arg;

		while (p->head == NULL && !p->stopping)
			pthread_cond_wait(&p->work, &p->lock);
		if (p->head == NULL)
			break; /* stopping, and nothing is queued */
		j = p->head;
		p->head = j->next;
		if (p->head == NULL)
			p->tail = NULL;
		j->state = JOB_RUNNING;
		w->job = j;
		/* read under the lock: once it runs, the job may be given up
		 * and its record go with its frame */
		fn = j->fn;
		fn_arg = j->arg;
		pthread_mutex_unlock(&p->lock);

		job_ended(w, j, fn(fn_arg));
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* Stop the workers of p->workers[0 .. n) and wait for them. */
static void pool_join(co_pool *p, unsigned n)
{
	pthread_mutex_lock(&p->lock);
	p->stopping = 1;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < n; i++)
		pthread_join(p->workers[i].thread, NULL);
}

int co_pool_init(co_pool *p, unsigned threads)
{
	if (p == NULL)
		return -EINVAL;
	memset(p, 0, sizeof *p); /* refused too: a destroy then answers -EINVAL */
	if (threads == 0 || threads > POOL_MAX_THREADS)
		return -EINVAL;
	p->workers = co__calloc(threads, sizeof *p->workers);
	if (p->workers == NULL)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	for (unsigned i = 0; i < threads; i++) {
		int err;

		p->workers[i].pool = p;
		err = co__thread_create(&p->workers[i].thread, worker, &p->workers[i]);
		if (err) {
			pool_join(p, i);
			pthread_cond_destroy(&p->work);
			pthread_mutex_destroy(&p->lock);
			free(p->workers);
			/* not set up, as a refused init leaves it: a destroy
			 * takes its (zeroed, so usable) lock and answers -EINVAL */
			memset(p, 0, sizeof *p);
			return -EAGAIN;
		}
	}
	p->nthreads = threads;
	return 0;
}

int co_pool_destroy(co_pool *p)
{
	int err = 0;

	if (p == NULL)
		return -EINVAL;
	/* every look at the pool under its lock: another thread's destroy
	 * may have written it, ordered with this one by nothing else */
	pthread_mutex_lock(&p->lock);
	if (p->workers == NULL)
		err = -EINVAL; /* never set up (zeroed, a refused init), or destroyed */
	else if (p->busy || p->stopping)
		err = -EBUSY; /* a job queued, running, or given up and still
		                 running; or another destroy under way */
	else
		p->stopping = 1; /* from here co_pool_run answers -ESHUTDOWN */
	pthread_mutex_unlock(&p->lock);
	if (err)
		return err;
	co__fault_point(CO__POINT_POOL_STOPPING); /* tests: a second destroy now */
	pool_join(p, p->nthreads);
	/* the lock and the condition stay usable (glibc's hold no resource):
	 * a co_pool_run after this answers -ESHUTDOWN, a co_pool_destroy
	 * -EINVAL */
	pthread_mutex_lock(&p->lock);
	free(p->workers);
	p->workers = NULL;
	pthread_mutex_unlock(&p->lock);
	return 0;
}

static int job_suspend(co_awaiter *a, co_frame *f)
{
	co_pool_job *j = (co_pool_job *)a;
	co_pool *p = j->pool;

	if (co_await_cancelled(f)) {
		j->res = -ECANCELED;
		return 0;
	}
	pthread_mutex_lock(&p->lock);
	if (p->stopping || p->workers == NULL) {
		pthread_mutex_unlock(&p->lock);
		j->res = -ESHUTDOWN;
		return 0;
	}
	j->frame = f;
	j->next = NULL;
	j->state = JOB_QUEUED;
	/* on an engine: parked (it is not idle while the job is out) and
	 * listed (a cancel stop ends a queued job) */
	j->engine = NULL;
	if (co__tls_engine && co_root(f)->runner == &co__tls_engine->runner) {
		j->engine = co__tls_engine;
		co__engine_park_wait(j->engine, &j->stop_link);
	}
	if (p->tail)
		p->tail->next = j;
	else
		p->head = j;
	p->tail = j;
	p->busy++;
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->lock);
	return 1;
}

static int job_resume(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((co_pool_job *)a)->res;
}

/* Under the pool's lock: take j off the queue if it has not started (its
 * await ends with -ECANCELED once released). 1 if it was queued. */
static int job_unqueue(co_pool *p, co_pool_job *j)
{
	co_pool_job **q = &p->head, *prev = NULL;

	if (j->state != JOB_QUEUED)
		return 0;
	while (*q != j) {
		prev = *q;
		q = &(*q)->next;
	}
	*q = j->next;
	if (p->tail == j)
		p->tail = prev;
	j->state = JOB_DONE;
	j->res = -ECANCELED;
	p->busy--;
	return 1;
}

/* A queued job leaves the queue and never runs; a running one runs to its
 * end (its wake ends the await). */
static int job_cancel(co_awaiter *a, co_frame *f)
{
	(void)f;
	co_pool_job *j = (co_pool_job *)a;
	co_pool *p = j->pool;
	int mine;

	pthread_mutex_lock(&p->lock);
	mine = job_unqueue(p, j);
	pthread_mutex_unlock(&p->lock);
	if (mine)
		job_release(j);
	return 0;
}

/* The cancel stop's call (on the engine's thread, the job already off its
 * list): a queued job is cancelled; a running one lingers, under the
 * pool's lock (its worker's end, which takes the lock after, unlinks it),
 * until it ends or the stop's grace runs out (job_give_up). */
static void job_stop_cancel(co_stop_link *link)
{
	co_pool_job *j = co__container_of(link, co_pool_job, stop_link);
	co_pool *p = j->pool;
	int mine;

	pthread_mutex_lock(&p->lock);
	mine = job_unqueue(p, j);
	if (!mine && j->state == JOB_RUNNING)
		co__engine_stop_list_linger(j->engine, link);
	pthread_mutex_unlock(&p->lock);
	if (mine)
		job_release(j);
}

/* The stop's grace ran out while the job runs (on the engine's thread, the
 * job off the linger list): its worker will drop the result and only let
 * go of the engine's hold; the frame is woken and finished for it
 * (-ECANCELED), and its on_done may free the job. */
static void job_give_up(co_stop_link *link)
{
	co_pool_job *j = co__container_of(link, co_pool_job, stop_link);
	co_pool *p = j->pool;
	co_engine *e = j->engine;
	int mine = 0;

	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; j->state == JOB_RUNNING && i < p->nthreads; i++) {
		if (p->workers[i].job == j) {
			p->workers[i].job = NULL;
			p->workers[i].held = e;
			j->state = JOB_DONE;
			j->res = -ECANCELED;
			mine = 1;
			/* under the lock: the worker's job_ended, which takes it
			 * next, lets go of this hold, never before it is taken */
			co__engine_hold(e);
		}
	}
	pthread_mutex_unlock(&p->lock);
	co__fault_point(CO__POINT_POOL_GIVEN_UP); /* tests: the job ends now */
	if (mine)
		co_wake(j->frame); /* not touched after: past the grace, finished for it */
}

static const co_awaiter_ops job_ops = { NULL, job_suspend, job_resume, job_cancel, CO__AW_USER,
					 "pool job" };

co_awaiter *co_pool_run(co_pool_job *j, co_pool *p, int (*fn)(void *arg), void *arg)
{
	if (j == NULL || p == NULL || fn == NULL)
		return NULL;
	j->aw.ops = &job_ops;
	j->pool = p;
	j->frame = NULL;
	j->fn = fn;
	j->arg = arg;
	j->res = 0;
	j->state = JOB_DONE;
	j->engine = NULL;
	co__stop_link_init(&j->stop_link, job_stop_cancel);
	j->stop_link.give_up = job_give_up;
	return &j->aw;
}

/* ---- getaddrinfo ---------------------------------------------------------- */

static int eai_errno(int eai)
{
	switch (eai) {
	case 0:
		return 0;
	case EAI_NONAME:
	case EAI_SERVICE:
#ifdef EAI_NODATA
	case EAI_NODATA:
#endif
		return -ENOENT;
	case EAI_AGAIN:
		return -EAGAIN;
	case EAI_MEMORY:
		return -ENOMEM;
	case EAI_BADFLAGS:
	case EAI_FAMILY:
	case EAI_SOCKTYPE:
		return -EINVAL;
	case EAI_SYSTEM:
		return errno ? -errno : -EIO;
	default:
		return -EIO;
	}
}

static int lookup(void *arg)
{
	co_lookup *l = arg;

	errno = 0;
	l->eai = getaddrinfo(l->host, l->service, l->hints, &l->result);
	if (l->eai != 0)
		l->result = NULL;
	return eai_errno(l->eai);
}

co_awaiter *co_getaddrinfo(co_lookup *l, co_pool *p, const char *host, const char *service,
			   const struct addrinfo *hints)
{
	if (l == NULL)
		return NULL;
	l->host = host;
	l->service = service;
	l->hints = hints;
	l->result = NULL;
	l->eai = 0;
	return co_pool_run(&l->job, p, lookup, l);
}
