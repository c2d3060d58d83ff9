/* SPDX-License-Identifier: MIT */
/*
 * coring/pool.h - blocking work off the engine's thread: a pool of worker
 * threads runs a function, and the coroutine that awaits it resumes with
 * its result. For what io_uring cannot do: a blocking library call, a
 * compression pass, a name lookup (co_getaddrinfo, below).
 *
 *     static co_pool pool;                       // co_pool_init(&pool, 4)
 *     struct job { co_frame co; co_pool_job run; ... };
 *
 *     static int compress(void *arg) { ...; return n; }    // on a worker
 *     CO_AWAIT(f, co_pool_run(&s->run, &pool, compress, s));
 *     if (co_result(f) < 0) ...
 *
 * A job queued but not started yet can be cancelled (co_cancel,
 * co_timeout): it never runs and the await ends with -ECANCELED (-ETIME);
 * a frame already cancelled queues none. A job that has started runs to
 * its end and the await has its result: a blocking call cannot be
 * interrupted. Except under a cancel stop of the frame's engine whose
 * grace runs out first: the frame is then finished for it with
 * -ECANCELED (its on_done may free it), the job runs on to its end and
 * its result is dropped, and co_pool_destroy (and the engine's destroy)
 * answer -EBUSY until it has ended. What fn uses (arg) must outlive the
 * job. Jobs start in the order queued.
 */
#ifndef CORING_POOL_H
#define CORING_POOL_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <pthread.h>
#include <netdb.h>

#include <coring/engine.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct co_pool_job co_pool_job;
typedef struct co_pool co_pool;

/* A worker thread (private). */
struct co__pool_worker {
	pthread_t thread;
	co_pool *pool;
	co_pool_job *job;              /* the job it runs; NULL once given up */
	co_engine *held;               /* a given-up job's engine, held until
	                                  the job ends */
};

/* All fields are private. */
struct co_pool {
	pthread_mutex_t lock;
	pthread_cond_t work;           /* a job was queued, or the pool stops */
	co_pool_job *head, *tail;      /* queued jobs, first in first out */
	struct co__pool_worker *workers;
	unsigned nthreads;
	unsigned busy;                 /* jobs queued or running */
	int stopping;
};

/* All fields are private. */
struct co_pool_job {
	co_awaiter aw;
	co_pool_job *next;
	co_pool *pool;
	co_frame *frame;
	co_engine *engine;             /* the frame's engine, parked on; or NULL */
	co_stop_link stop_link;        /* on the engine's list: a cancel stop ends it */
	int (*fn)(void *arg);
	void *arg;
	int res;
	int state;
};

/* Start `threads` worker threads (1 to 1024). Returns 0, -EINVAL, -ENOMEM,
 * or -EAGAIN when a thread cannot be created (none is left running). p
 * need not be zeroed first, and so init cannot tell a pool that is set up
 * from memory never set up: on a live pool (not destroyed) it is undefined
 * (its workers, jobs and lock are lost under it); co_pool_destroy it first. */
CO_API int co_pool_init(co_pool *p, unsigned threads);

/* Stop the workers and free the pool. -EBUSY (and nothing changes) while a
 * job is queued or running, a given-up one too: every job queued is run
 * or cancelled, never dropped; -EBUSY too while another destroy is under
 * way. Returns 0, or -EINVAL for NULL, a pool destroyed already or never
 * set up (an init that failed leaves it so). */
CO_API int co_pool_destroy(co_pool *p);

/* Run fn(arg) on a worker; the await's value is what fn returns (keep it
 * 0 or a negative errno, or a count), -ECANCELED if cancelled before it
 * started, -ESHUTDOWN once co_pool_destroy has begun. Returns what CO_AWAIT
 * takes (NULL for a NULL argument: -EINVAL). A job record (j, or a
 * co_lookup) serves one await at a time: co_pool_run on a record whose
 * job is queued or running rewrites it under the pool (its queue breaks),
 * and nothing refuses it, since a record need not be zeroed memory
 * before its first use; give each await in flight a record of its own. */
CO_API co_awaiter *co_pool_run(co_pool_job *j, co_pool *p, int (*fn)(void *arg), void *arg);

/*
 * getaddrinfo on the pool: a name lookup that does not block the engine.
 * The await's value is 0, with the list in l->result (free it with
 * freeaddrinfo), or a negative errno for getaddrinfo's error, whose own
 * code stays in l->eai (gai_strerror): -ENOENT (no such name or service),
 * -EAGAIN (try again), -ENOMEM, -EINVAL (bad hints), -EIO (a permanent
 * failure), or the errno of EAI_SYSTEM. l, host, service and hints must
 * stay valid during the await, and, if a cancel stop gave the lookup up
 * (the await ended with -ECANCELED while it ran), until co_pool_destroy
 * succeeds: the lookup then writes l->result, which the caller frees.
 *
 *     CO_AWAIT(f, co_getaddrinfo(&s->dns, &pool, "example.org", "443", &hints));
 */
typedef struct co_lookup {
	co_pool_job job;                /* private */
	const char *host, *service;     /* private */
	const struct addrinfo *hints;   /* private */
	struct addrinfo *result;        /* read-only: the answer */
	int eai;                        /* read-only: getaddrinfo's return code */
} co_lookup;

CO_API co_awaiter *co_getaddrinfo(co_lookup *l, co_pool *p, const char *host, const char *service,
				  const struct addrinfo *hints);

#ifdef __cplusplus
}
#endif

#endif /* CORING_POOL_H */
