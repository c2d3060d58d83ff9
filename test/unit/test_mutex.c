/* SPDX-License-Identifier: MIT */
/*
 * The mutex's policy (lib/sync/sync.c; docs/sync.md, "The mutex"): a free mutex
 * goes to whoever asks first while its oldest waiter is only invited to
 * try again; the waiter's retry takes it, goes back to the head of the
 * queue, or ends with the cancel or the time limit that came meanwhile; no
 * waiter is overtaken more than CO_MUTEX_OVERTAKES times after it parked;
 * a FIFO mutex hands off; destroy waits for a retry on its way.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stdatomic.h>
#include <cmocka.h>

#include <coring/coring.h>
#include "helpers.h"

/* ---- one engine: a holder, a waiter, what happens between unlock and retry ------- */

enum act { ACT_RELOCK, ACT_CANCEL_WAITER, ACT_DESTROY, ACT_HOLD_UNTIL_WAITER_DONE,
	   ACT_CANCEL_STOP };

struct pair;

struct holder {
	co_frame co;
	co_waiter w;
	co_io io;
	struct pair *p;
	int k, relocked, destroy_res;
};

struct waiter {
	co_frame co;
	co_waiter w;
	struct pair *p;
	int res, ran_locked;
};

struct pair {
	co_engine e;
	co_mutex m;
	enum act act;
	uint64_t limit;          /* the waiter's time limit (0: none) */
	struct holder h;
	struct waiter wt;
};

static int holder_fn(co_frame *f)
{
	struct holder *h = (struct holder *)f;
	struct pair *p = h->p;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&h->w, &p->m));
	assert_int_equal(co_result(f), 0);
	for (h->k = 0; h->k < 3; h->k++)
		CO_YIELD(f); /* the waiter parks meanwhile */
	assert_int_equal(co_mutex_unlock(&p->m), 0); /* frees it, invites the waiter */
	switch (p->act) {
	case ACT_CANCEL_WAITER: /* then take the mutex before the retry */
		assert_int_equal(co_cancel(&p->wt.co), 0);
		h->relocked = co_mutex_trylock(&p->m) == 0;
		break;
	case ACT_RELOCK:
	case ACT_HOLD_UNTIL_WAITER_DONE:
	case ACT_CANCEL_STOP:
		h->relocked = co_mutex_trylock(&p->m) == 0;
		break;
	case ACT_DESTROY:
		h->destroy_res = co_mutex_destroy(&p->m);
		break;
	}
	if (p->act == ACT_CANCEL_STOP && h->relocked)
		assert_int_equal(co_engine_stop(&p->e, CO_STOP_CANCEL), 0);
	if (h->relocked) {
		/* the waiter's retry runs at the next turn, and finds it held */
		CO_AWAIT(f, co_nop(&h->io));
		while (p->act == ACT_HOLD_UNTIL_WAITER_DONE && !co_done(&p->wt.co))
			CO_YIELD(f);
		assert_int_equal(co_mutex_unlock(&p->m), 0);
	}
	CO_END(f);
}

static int waiter_fn(co_frame *f)
{
	struct waiter *t = (struct waiter *)f;
	struct pair *p = t->p;
	CO_BEGIN(f);
	CO_YIELD(f); /* the holder takes it first */
	if (p->limit)
		CO_AWAIT(f, co_wait_for(co_mutex_lock(&t->w, &p->m), p->limit));
	else
		CO_AWAIT(f, co_mutex_lock(&t->w, &p->m));
	t->res = co_result(f);
	if (t->res == 0) {
		t->ran_locked = co_mutex_trylock(&p->m) == -EBUSY;
		assert_int_equal(co_mutex_unlock(&p->m), 0);
	}
	CO_END(f);
}

static void pair_run(struct pair *p, enum act act, int fifo, uint64_t limit, int run_ret)
{
	memset(p, 0, sizeof *p);
	p->act = act;
	p->limit = limit;
	assert_int_equal(co_engine_init(&p->e, NULL), 0);
	assert_int_equal(fifo ? co_mutex_init_fifo(&p->m) : co_mutex_init(&p->m), 0);
	p->h.p = p;
	p->wt.p = p;
	co_init(&p->h.co, holder_fn);
	co_init(&p->wt.co, waiter_fn);
	assert_int_equal(co_engine_spawn(&p->e, &p->h.co), 0);
	assert_int_equal(co_engine_spawn(&p->e, &p->wt.co), 0);
	assert_int_equal(co_engine_run(&p->e, CO_RUN_UNTIL_IDLE), run_ret);
	assert_int_equal(co_engine_destroy(&p->e), 0);
}

/* A newcomer takes the free mutex while the invited waiter's retry is on
 * its way; the retry then finds it held, waits again, and gets it at the
 * next unlock. */
static void test_free_mutex_goes_to_newcomer(void **state)
{
	struct pair p;

	(void)state;
	pair_run(&p, ACT_RELOCK, 0, 0, 0);
	assert_int_equal(p.h.relocked, 1);
	assert_int_equal(p.wt.res, 0);
	assert_int_equal(p.wt.ran_locked, 1);
	assert_int_equal(co_mutex_destroy(&p.m), 0);
}

/* A FIFO mutex hands off: after the unlock the waiter owns it. */
static void test_fifo_mutex_hands_off(void **state)
{
	struct pair p;

	(void)state;
	pair_run(&p, ACT_RELOCK, 1, 0, 0);
	assert_int_equal(p.h.relocked, 0);
	assert_int_equal(p.wt.res, 0);
	assert_int_equal(p.wt.ran_locked, 1);
	assert_int_equal(co_mutex_destroy(&p.m), 0);
}

/* A waiter cancelled while its retry is on its way, the mutex taken
 * meanwhile: the retry ends its wait with -ECANCELED. */
static void test_invited_waiter_cancelled(void **state)
{
	struct pair p;

	(void)state;
	pair_run(&p, ACT_CANCEL_WAITER, 0, 0, 0);
	assert_int_equal(p.h.relocked, 1);
	assert_int_equal(p.wt.res, -ECANCELED);
	assert_int_equal(co_mutex_destroy(&p.m), 0);
}

/* Destroy refuses while a retry is on its way (it will touch the mutex). */
static void test_destroy_waits_for_retry(void **state)
{
	struct pair p;

	(void)state;
	pair_run(&p, ACT_DESTROY, 0, 0, 0);
	assert_int_equal(p.h.destroy_res, -EBUSY);
	assert_int_equal(p.wt.res, 0);
	assert_int_equal(co_mutex_destroy(&p.m), 0);
	assert_int_equal(co_mutex_destroy(&p.m), -EINVAL);
}

/* A timed waiter whose retry found the mutex taken waits again with its
 * time limit armed again: held until it is done, the wait ends -ETIME. */
static void test_invited_timed_waiter_times_out(void **state)
{
	struct pair p;

	(void)state;
	pair_run(&p, ACT_HOLD_UNTIL_WAITER_DONE, 0, 20 * CO_MS, 0);
	assert_int_equal(p.h.relocked, 1);
	assert_int_equal(p.wt.res, -ETIME);
	assert_int_equal(co_mutex_destroy(&p.m), 0);
}

/* A cancel stop while a retry is on its way (a timed waiter's retry comes
 * after its timer's CQE, so after the stop began): the waiter ends
 * -ECANCELED and the stop ends. */
static void test_invited_waiter_under_cancel_stop(void **state)
{
	struct pair p;

	(void)state;
	pair_run(&p, ACT_CANCEL_STOP, 0, 3600 * CO_S, 0);
	assert_int_equal(p.h.relocked, 1);
	assert_int_equal(p.wt.res, -ECANCELED);
	assert_int_equal(co_mutex_destroy(&p.m), 0);
}

/* ---- no waiter starves -------------------------------------------------------------- */

/*
 * On one engine, so that nothing depends on timing: a hog holds the mutex
 * across every turn (it unlocks and locks again in one resume, then awaits
 * a no-op that ends the turn), so an invited waiter's retry, which runs at
 * the next turn, always finds the mutex held. Without the bound the victim
 * would wait until the hog stops; with it, unlock hands the victim the
 * mutex after CO_MUTEX_OVERTAKES acquisitions by the hog.
 */
#define HOG_ROUNDS (3 * CO_MUTEX_OVERTAKES)

struct race {
	co_mutex m;
	int victim_waits, victim_done;
	long overtakes, counter, hog_rounds;
};

struct hog {
	co_frame co;
	co_waiter w;
	co_io io;
	struct race *r;
	long i;
};

static int hog_fn(co_frame *f)
{
	struct hog *h = (struct hog *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&h->w, &h->r->m));
	for (h->i = 0; h->i < HOG_ROUNDS && !h->r->victim_done; h->i++) {
		h->r->counter++;
		assert_int_equal(co_mutex_unlock(&h->r->m), 0);
		CO_AWAIT(f, co_mutex_lock(&h->w, &h->r->m)); /* free, or handed to the victim */
		assert_int_equal(co_result(f), 0);
		if (h->r->victim_waits)
			h->r->overtakes++;
		CO_AWAIT(f, co_nop(&h->io)); /* held across the turn */
	}
	h->r->hog_rounds = h->i;
	assert_int_equal(co_mutex_unlock(&h->r->m), 0);
	CO_END(f);
}

static int victim_fn(co_frame *f)
{
	struct hog *v = (struct hog *)f;
	CO_BEGIN(f);
	CO_YIELD(f); /* the hog takes it first */
	v->r->victim_waits = 1;
	CO_AWAIT(f, co_mutex_lock(&v->w, &v->r->m));
	assert_int_equal(co_result(f), 0);
	v->r->victim_waits = 0;
	v->r->victim_done = 1;
	v->r->counter++;
	assert_int_equal(co_mutex_unlock(&v->r->m), 0);
	CO_END(f);
}

static void test_no_waiter_starves(void **state)
{
	co_engine e;
	struct race r = { .counter = 0 };
	struct hog hog = { .r = &r }, victim = { .r = &r };

	(void)state;
	assert_int_equal(co_mutex_init(&r.m), 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&hog.co, hog_fn);
	co_init(&victim.co, victim_fn);
	assert_int_equal(co_engine_spawn(&e, &hog.co), 0);
	assert_int_equal(co_engine_spawn(&e, &victim.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(r.victim_done, 1);
	assert_int_equal(r.counter, r.hog_rounds + 1);
	/* overtaken exactly as often as the bound allows, then served */
	assert_int_equal(r.overtakes, CO_MUTEX_OVERTAKES);
	assert_true(r.hog_rounds < HOG_ROUNDS);
	assert_int_equal(co_mutex_destroy(&r.m), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* ---- the invited waiter: the bound holds while its retry is on its way ---------- */

/*
 * On one engine, so that nothing depends on timing: a barger holds the
 * mutex while the victim parks, then unlocks (the victim is invited: its
 * retry runs at the engine's next turn) and, in the same resume, takes
 * the free mutex again and again (a lock that completes at once, or a
 * trylock), unlocking in between. Every take overtakes the invited victim.
 * Once it has been overtaken CO_MUTEX_OVERTAKES times the free mutex is
 * the retry's: the barger's trylock answers -EBUSY, its lock parks, and
 * the victim gets the mutex next.
 */
#define BARGES (2 * CO_MUTEX_OVERTAKES)

struct bound_run {
	co_mutex m;
	co_cond c;
	int by_trylock;           /* the barger takes with trylock, else lock */
	long acq;                 /* acquisitions, counted inside the mutex */
	long parked_at;           /* acq when the victim parked */
	long overtakes;           /* acquisitions between its park and its own */
	long refused_at;          /* the barger's take that was refused */
	int victim_waits, victim_done, trylock_refused, relock_after;
};

struct barger {
	co_frame co;
	co_waiter w;
	struct bound_run *r;
	long i;
};

static int barger_fn(co_frame *f)
{
	struct barger *b = (struct barger *)f;
	struct bound_run *r = b->r;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&b->w, &r->m));
	r->acq++;
	while (!r->victim_waits)
		CO_YIELD(f); /* the victim parks meanwhile */
	r->refused_at = -1;
	for (b->i = 0; b->i < BARGES; b->i++) {
		assert_int_equal(co_mutex_unlock(&r->m), 0); /* the first invites the victim */
		if (r->by_trylock) {
			int t = co_mutex_trylock(&r->m);

			if (t == 0) {
				r->acq++;
				continue;
			}
			assert_int_equal(t, -EBUSY); /* free, but the victim's */
			r->trylock_refused = 1;
		}
		CO_AWAIT(f, co_mutex_lock(&b->w, &r->m)); /* taken at once, or parked */
		assert_int_equal(co_result(f), 0);
		r->acq++;
		if (r->victim_done) { /* it parked: the victim came first */
			r->refused_at = b->i;
			break;
		}
	}
	assert_int_equal(co_mutex_unlock(&r->m), 0);
	CO_END(f);
}

static int bound_victim_fn(co_frame *f)
{
	struct barger *v = (struct barger *)f;
	struct bound_run *r = v->r;
	CO_BEGIN(f);
	CO_YIELD(f); /* the barger takes it first */
	r->victim_waits = 1;
	r->parked_at = r->acq; /* it is held here: nobody takes it before the park */
	CO_AWAIT(f, co_mutex_lock(&v->w, &r->m));
	assert_int_equal(co_result(f), 0);
	r->overtakes = r->acq - r->parked_at; /* nobody waited before it */
	r->acq++;
	r->victim_done = 1;
	assert_int_equal(co_mutex_unlock(&r->m), 0);
	CO_END(f);
}

static void bound_run(int by_trylock)
{
	co_engine e;
	struct bound_run r = { .by_trylock = by_trylock };
	struct barger b = { .r = &r }, v = { .r = &r };

	assert_int_equal(co_mutex_init(&r.m), 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&b.co, barger_fn);
	co_init(&v.co, bound_victim_fn);
	assert_int_equal(co_engine_spawn(&e, &b.co), 0);
	assert_int_equal(co_engine_spawn(&e, &v.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(r.victim_done, 1);
	assert_int_equal(r.overtakes, CO_MUTEX_OVERTAKES); /* not one more */
	assert_int_equal(r.refused_at, CO_MUTEX_OVERTAKES); /* the take after the bound */
	assert_int_equal(r.trylock_refused, by_trylock);
	assert_int_equal(co_mutex_destroy(&r.m), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

static void test_invited_waiter_bounded(void **state)
{
	(void)state;
	bound_run(0);
	bound_run(1);
}

/*
 * A condition variable's waiter that re-locks the mutex is a later arrival
 * too, and no hand-off passes the invited waiter. On one engine: the
 * victim is invited and has been overtaken `before` times by a barger
 * when a broadcast wakes RELOCKERS condition waiters. The first re-locks
 * the free mutex (an overtake), the others queue behind it. When it
 * unlocks, the next re-locker (which came after the victim) is not handed
 * the mutex; a trylock of the first takes the free mutex if the bound
 * allows one more overtake, and then the mutex is handed to the victim.
 * Either way the victim is overtaken CO_MUTEX_OVERTAKES times, no more.
 */
#define RELOCKERS 4

struct relocker {
	co_frame co;
	co_waiter w;
	struct bound_run *r;
	int res, took_again;
};

static int relocker_fn(co_frame *f)
{
	struct relocker *k = (struct relocker *)f;
	struct bound_run *r = k->r;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&k->w, &r->m));
	r->acq++;
	CO_AWAIT(f, co_cond_wait(&k->w, &r->c, &r->m)); /* unlocks, parks */
	k->res = co_result(f);
	r->acq++; /* held again */
	r->relock_after += r->victim_done;
	assert_int_equal(co_mutex_unlock(&r->m), 0);
	if (co_mutex_trylock(&r->m) == 0) { /* a later arrival again */
		k->took_again = 1;
		r->acq++;
		assert_int_equal(co_mutex_unlock(&r->m), 0);
	}
	CO_END(f);
}

static int broadcaster_fn(co_frame *f)
{
	struct barger *b = (struct barger *)f;
	struct bound_run *r = b->r;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&b->w, &r->m));
	r->acq++;
	while (!r->victim_waits)
		CO_YIELD(f); /* the victim parks meanwhile */
	assert_int_equal(co_mutex_unlock(&r->m), 0); /* invites the victim */
	for (b->i = 0; b->i < r->refused_at; b->i++) { /* the overtakes before */
		assert_int_equal(co_mutex_trylock(&r->m), 0);
		r->acq++;
		assert_int_equal(co_mutex_unlock(&r->m), 0);
	}
	assert_int_equal(co_cond_broadcast(&r->c), 0); /* free: the first re-locks */
	CO_END(f);
}

static void relock_run(long before)
{
	co_engine e;
	struct bound_run r = { .refused_at = before };
	struct barger b = { .r = &r }, v = { .r = &r };
	struct relocker k[RELOCKERS];

	assert_int_equal(co_mutex_init(&r.m), 0);
	assert_int_equal(co_cond_init(&r.c), 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	for (int i = 0; i < RELOCKERS; i++) { /* each waits on c, the mutex free */
		k[i] = (struct relocker){ .r = &r, .res = 1 };
		co_init(&k[i].co, relocker_fn);
		assert_int_equal(co_engine_spawn(&e, &k[i].co), 0);
	}
	co_init(&b.co, broadcaster_fn);
	co_init(&v.co, bound_victim_fn);
	assert_int_equal(co_engine_spawn(&e, &b.co), 0);
	assert_int_equal(co_engine_spawn(&e, &v.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(r.victim_done, 1);
	/* the barger's, the first re-lock, its trylock if one was left */
	assert_int_equal(r.overtakes, CO_MUTEX_OVERTAKES);
	assert_int_equal(k[0].took_again, before < CO_MUTEX_OVERTAKES - 1);
	assert_int_equal(r.relock_after, RELOCKERS - 1); /* the others came after it */
	for (int i = 0; i < RELOCKERS; i++)
		assert_int_equal(k[i].res, 0);
	assert_int_equal(co_cond_destroy(&r.c), 0);
	assert_int_equal(co_mutex_destroy(&r.m), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

static void test_relock_is_an_overtake(void **state)
{
	(void)state;
	relock_run(CO_MUTEX_OVERTAKES - 1); /* the re-lock is the last overtake */
	relock_run(CO_MUTEX_OVERTAKES - 2); /* and its trylock */
}

/* ---- heaviest contention: 64 coroutines on 4 contexts ----------------------------- */

/*
 * 62 contenders on 4 contexts lock and unlock in a loop; a probe on
 * context 0, a holder and a waiter, measures the waiter's overtakes in
 * rounds. The holder takes the mutex and keeps it until PROBE_AHEAD
 * waiters are queued; then the waiter arrives: it finds the mutex held by
 * a frame of its own engine, which cannot run meanwhile, so nobody takes
 * it between the waiter's call and its park. The holder, still holding,
 * finds the waiter in the queue and notes the acquisitions so far and the
 * waiters before it (queued ahead, or invited): those acquire once each
 * before it, and every other acquisition before its own is by a later
 * arrival. The verdict is a count, never a time: the waiter is overtaken
 * CO_MUTEX_OVERTAKES times at most, in every round.
 */
#define CONTENDERS 62
#define PROBE_ROUNDS 64
#define PROBE_AHEAD 8
#define BUSY_SPINS 2000

struct arena {
	co_mutex m;
	long acq;                 /* acquisitions, counted inside the mutex */
	atomic_int stop;          /* the contenders end */
	atomic_long done_acq;     /* acquisitions the frames counted */
	/* the probe's (context 0's thread only) */
	int go, served, rounds;
	long parked_at, ahead, worst, over;
	co_waiter *probe;
};

/* The waiters that come before w in m's queue (w itself not queued: all
 * of them, *queued = 0), plus an invited one, whose retry is on its way:
 * read under the mutex's internal lock, taken as a test may (a 0/1 word). */
static long waiters_before(co_mutex *m, const co_waiter *w, int *queued)
{
	long n = 0;
	co_waiter *x;

	while (atomic_exchange(&m->lock, 1))
		;
	for (x = m->q.head; x && x != w; x = x->next)
		n++;
	*queued = x != NULL;
	n += m->invited;
	atomic_store(&m->lock, 0);
	return n;
}

struct contender {
	co_frame co;
	co_waiter w;
	struct arena *a;
	long n;
};

static int contender_fn(co_frame *f)
{
	struct contender *c = (struct contender *)f;
	CO_BEGIN(f);
	while (!atomic_load_explicit(&c->a->stop, memory_order_relaxed)) {
		CO_AWAIT(f, co_mutex_lock(&c->w, &c->a->m));
		assert_int_equal(co_result(f), 0);
		c->a->acq++;
		assert_int_equal(co_mutex_unlock(&c->a->m), 0);
		if (++c->n % 64 == 0)
			CO_YIELD(f); /* the probe's frames share context 0 */
	}
	atomic_fetch_add(&c->a->done_acq, c->n);
	CO_END(f);
}

/* Work on the probe's context between its turns: an invited waiter's
 * retry waits for the next turn there, while the other contexts go on
 * taking the mutex. */
static int busy_fn(co_frame *f)
{
	struct contender *b = (struct contender *)f;
	CO_BEGIN(f);
	while (!atomic_load_explicit(&b->a->stop, memory_order_relaxed)) {
		for (volatile int k = 0; k < BUSY_SPINS; k = k + 1)
			;
		CO_YIELD(f);
	}
	CO_END(f);
}

static int probe_holder_fn(co_frame *f)
{
	struct contender *h = (struct contender *)f;
	struct arena *a = h->a;
	int queued;
	CO_BEGIN(f);
	for (a->rounds = 0; a->rounds < PROBE_ROUNDS; a->rounds++) {
		CO_AWAIT(f, co_mutex_lock(&h->w, &a->m));
		assert_int_equal(co_result(f), 0);
		a->acq++;
		h->n++;
		while (waiters_before(&a->m, NULL, &queued) < PROBE_AHEAD)
			CO_YIELD(f); /* the contenders queue up */
		a->go = 1;
		while (waiters_before(&a->m, a->probe, &queued), !queued)
			CO_YIELD(f); /* the waiter arrives and parks */
		a->parked_at = a->acq;
		a->ahead = waiters_before(&a->m, a->probe, &queued);
		assert_int_equal(co_mutex_unlock(&a->m), 0);
		while (!a->served)
			CO_YIELD(f);
		a->served = 0;
	}
	atomic_store(&a->stop, 1);
	atomic_fetch_add(&a->done_acq, h->n);
	CO_END(f);
}

static int probe_waiter_fn(co_frame *f)
{
	struct contender *w = (struct contender *)f;
	struct arena *a = w->a;
	long over;
	CO_BEGIN(f);
	for (;;) {
		while (!a->go && !atomic_load(&a->stop))
			CO_YIELD(f);
		if (!a->go)
			break;
		a->go = 0;
		CO_AWAIT(f, co_mutex_lock(&w->w, &a->m));
		assert_int_equal(co_result(f), 0);
		over = a->acq - a->parked_at - a->ahead;
		a->acq++;
		w->n++;
		if (over > a->worst)
			a->worst = over;
		a->over += over > CO_MUTEX_OVERTAKES;
		assert_int_equal(co_mutex_unlock(&a->m), 0);
		a->served = 1;
	}
	atomic_fetch_add(&a->done_acq, w->n);
	CO_END(f);
}

static void test_overtakes_bounded(void **state)
{
	co_sched s;
	struct arena *a = calloc(1, sizeof *a);
	struct contender *c = calloc(CONTENDERS + 3, sizeof *c);
	struct contender *w = &c[CONTENDERS + 1];

	(void)state;
	assert_non_null(a);
	assert_non_null(c);
	assert_int_equal(co_mutex_init(&a->m), 0);
	a->probe = &w->w;
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 4 }), 0);
	for (int i = 0; i < CONTENDERS + 3; i++) {
		c[i].a = a;
		co_init(&c[i].co, i == CONTENDERS ? probe_holder_fn
				  : i == CONTENDERS + 1 ? probe_waiter_fn
				  : i == CONTENDERS + 2 ? busy_fn : contender_fn);
		assert_int_equal(co_sched_spawn_to(&s, i < CONTENDERS ? (unsigned)i % 4 : 0,
						   &c[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	print_message("      %d rounds: the waiter overtaken %ld times at most (bound %d), "
		      "%ld acquisitions in all\n", PROBE_ROUNDS, a->worst, CO_MUTEX_OVERTAKES, a->acq);
	assert_int_equal(a->rounds, PROBE_ROUNDS);
	assert_int_equal(a->over, 0);
	assert_true(a->worst <= CO_MUTEX_OVERTAKES);
	assert_int_equal(a->acq, atomic_load(&a->done_acq)); /* mutual exclusion */
	assert_int_equal(co_mutex_destroy(&a->m), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	free(c);
	free(a);
}

/* ---- many lockers on two contexts: every increment counted ----------------------- */

#define LOCKERS 64
#define LOCKS 2000

struct locker {
	co_frame co;
	co_waiter w;
	co_mutex *m;
	long *counter;
	int i;
};

static int locker_fn(co_frame *f)
{
	struct locker *l = (struct locker *)f;
	CO_BEGIN(f);
	for (l->i = 0; l->i < LOCKS; l->i++) {
		CO_AWAIT(f, co_mutex_lock(&l->w, l->m));
		assert_int_equal(co_result(f), 0);
		++*l->counter;
		assert_int_equal(co_mutex_unlock(l->m), 0);
		if (l->i % 64 == 0)
			CO_YIELD(f);
	}
	CO_END(f);
}

static void lockers(int fifo)
{
	co_sched s;
	co_mutex m;
	long counter = 0;
	struct locker *l = calloc(LOCKERS, sizeof *l);

	assert_non_null(l);
	assert_int_equal(fifo ? co_mutex_init_fifo(&m) : co_mutex_init(&m), 0);
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 2 }), 0);
	for (int i = 0; i < LOCKERS; i++) {
		l[i] = (struct locker){ .m = &m, .counter = &counter };
		co_init(&l[i].co, locker_fn);
		assert_int_equal(co_sched_spawn_to(&s, (unsigned)i % 2, &l[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(counter, (long)LOCKERS * LOCKS);
	assert_int_equal(co_mutex_trylock(&m), 0);
	assert_int_equal(co_mutex_unlock(&m), 0);
	assert_int_equal(co_mutex_destroy(&m), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	free(l);
}

static void test_lockers_barging(void **state)
{
	(void)state;
	lockers(0);
}

static void test_lockers_fifo(void **state)
{
	(void)state;
	lockers(1);
}

struct fast_locker {
	co_frame co;
	co_waiter w;
	co_mutex *m;
	int lock_res, unlock_res;
};

static int fast_locker_fn(co_frame *f)
{
	struct fast_locker *t = (struct fast_locker *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mutex_lock(&t->w, t->m));
	t->lock_res = co_result(f);
	t->unlock_res = co_mutex_unlock(t->m);
	CO_END(f);
}

/* With nobody waiting, lock and unlock never take the mutex's internal
 * lock (one CAS each): here it is held by "someone else" throughout, and
 * an await of co_mutex_lock, co_mutex_trylock and co_mutex_unlock still
 * complete (a path through that lock would spin for ever: meson's timeout
 * is the guard). */
static void test_uncontended_takes_no_lock(void **state)
{
	co_mutex m;
	struct fast_locker t = { .m = &m, .lock_res = 1, .unlock_res = 1 };
	(void)state;
	assert_int_equal(co_mutex_init(&m), 0);
	atomic_store(&m.lock, 1);
	co_init(&t.co, fast_locker_fn);
	co_test_run1(&t.co);
	assert_int_equal(t.lock_res, 0);
	assert_int_equal(t.unlock_res, 0);
	assert_int_equal(co_mutex_trylock(&m), 0);
	assert_int_equal(co_mutex_unlock(&m), 0);
	atomic_store(&m.lock, 0);
	/* the slow paths answer as before */
	assert_int_equal(co_mutex_unlock(&m), -EPERM);
	assert_int_equal(co_mutex_trylock(&m), 0);
	assert_int_equal(co_mutex_trylock(&m), -EBUSY);
	assert_int_equal(co_mutex_destroy(&m), -EBUSY);
	assert_int_equal(co_mutex_unlock(&m), 0);
	assert_int_equal(co_mutex_destroy(&m), 0);
	assert_int_equal(co_mutex_trylock(&m), -EINVAL);
	assert_int_equal(co_mutex_unlock(&m), -EINVAL);
}

static void test_init_errors(void **state)
{
	(void)state;
	assert_int_equal(co_mutex_init(NULL), -EINVAL);
	assert_int_equal(co_mutex_init_fifo(NULL), -EINVAL);
}

/* ---- destroy from a third thread through a hand-off ---------------------------------- */

/*
 * docs/sync.md, "Freeing a primitive": a plain thread holds the mutex
 * (co_mutex_trylock) while a waiter parks on it on engine W, run by a
 * thread of its own; a blocker frame then holds W's thread inside its
 * resume, so the waiter's wake (a FIFO mutex's hand-off) or retry (a
 * plain mutex's invitation) cannot run. A second plain thread unlocks;
 * a third destroys without pause from before that unlock. Every destroy
 * answers -EBUSY (held, waited on, or a retry due) while W is held, however
 * often it is tried; then W runs, the waiter takes the mutex, unlocks it,
 * and only that unlock lets a destroy answer 0. The destroyer frees the
 * mutex (heap) at once: TSan sees any touch after.
 */
struct hand {
	co_engine w;
	co_mutex *m;
	struct hand_waiter {
		co_frame co;
		co_waiter wt;
		struct hand *h;
		int res;
	} waiter;
	struct hand_blocker {
		co_frame co;
		struct hand *h;
	} blocker;
	atomic_int parked, blocking, release, unlocked, unlocking, locks, finished;
	atomic_long busy_total;
	int destroy_res, busy_other;
};

static int hand_waiter_fn(co_frame *f)
{
	struct hand_waiter *t = (struct hand_waiter *)f;
	struct hand *h = t->h;
	CO_BEGIN(f);
	atomic_store(&h->parked, 1); /* parks in this resume */
	CO_AWAIT(f, co_mutex_lock(&t->wt, h->m));
	t->res = co_result(f);
	if (t->res == 0) {
		atomic_fetch_add(&h->locks, 1);
		atomic_store(&h->unlocking, 1);
		assert_int_equal(co_mutex_unlock(h->m), 0);
	}
	CO_END(f);
}

static int hand_blocker_fn(co_frame *f)
{
	struct hand_blocker *b = (struct hand_blocker *)f;
	struct hand *h = b->h;
	CO_BEGIN(f);
	while (!atomic_load(&h->parked))
		CO_YIELD(f);
	atomic_store(&h->blocking, 1); /* W's thread stays in this resume */
	WAIT_UNTIL(atomic_load(&h->release));
	CO_END(f);
}

static void *hand_run_w(void *arg)
{
	struct hand *h = arg;
	assert_int_equal(co_engine_run(&h->w, CO_RUN_UNTIL_STOP), 0);
	return NULL;
}

static void *hand_unlock(void *arg)
{
	struct hand *h = arg;
	assert_int_equal(co_mutex_unlock(h->m), 0);
	atomic_store(&h->unlocked, 1);
	return NULL;
}

static void *hand_destroy(void *arg)
{
	struct hand *h = arg;

	for (;;) {
		int r = co_mutex_destroy(h->m);

		if (r == 0) {
			/* only the waiter's own unlock ends the hand-off */
			h->destroy_res = atomic_load(&h->unlocking) ? 0 : -1;
			free(h->m); /* coring does not touch it again */
			atomic_store(&h->finished, 1);
			return NULL;
		}
		if (r != -EBUSY) {
			h->destroy_res = r;
			atomic_store(&h->finished, 1);
			return NULL;
		}
		atomic_fetch_add(&h->busy_total, 1);
	}
}

static void test_destroy_busy_through_hand_off(void **state)
{
	(void)state;
	alarm(60);
	for (int fifo = 0; fifo < 2; fifo++)
		for (int round = 0; round < 20; round++) {
			struct hand *h = calloc(1, sizeof *h);
			pthread_t tw, tu, td;

			assert_non_null(h);
			h->m = malloc(sizeof *h->m);
			assert_non_null(h->m);
			assert_int_equal(fifo ? co_mutex_init_fifo(h->m) : co_mutex_init(h->m), 0);
			assert_int_equal(co_mutex_trylock(h->m), 0); /* held by this thread */
			assert_int_equal(co_engine_init(&h->w, NULL), 0);
			h->waiter.h = h;
			h->blocker.h = h;
			co_init(&h->waiter.co, hand_waiter_fn);
			co_init(&h->blocker.co, hand_blocker_fn);
			assert_int_equal(co_engine_spawn(&h->w, &h->waiter.co), 0);
			assert_int_equal(co_engine_spawn(&h->w, &h->blocker.co), 0);
			assert_int_equal(pthread_create(&tw, NULL, hand_run_w, h), 0);
			WAIT_UNTIL(atomic_load(&h->blocking)); /* parked, W held */
			assert_int_equal(pthread_create(&td, NULL, hand_destroy, h), 0);
			WAIT_UNTIL(atomic_load(&h->busy_total) >= 1 || atomic_load(&h->finished));
			assert_int_equal(atomic_load(&h->finished), 0); /* held and waited on: busy */
			assert_int_equal(pthread_create(&tu, NULL, hand_unlock, h), 0);
			WAIT_UNTIL(atomic_load(&h->unlocked));
			/* the hand-off or the retry is due, W still held: busy, however often asked */
			{
				long seen = atomic_load(&h->busy_total);
				WAIT_UNTIL(atomic_load(&h->busy_total) >= seen + 100 ||
					   atomic_load(&h->finished));
			}
			assert_int_equal(atomic_load(&h->finished), 0); /* W held: no answer but -EBUSY */
			assert_int_equal(atomic_load(&h->locks), 0);
			atomic_store(&h->release, 1);
			assert_int_equal(pthread_join(td, NULL), 0);
			assert_int_equal(pthread_join(tu, NULL), 0);
			assert_int_equal(h->destroy_res, 0);
			assert_int_equal(co_engine_stop(&h->w, CO_STOP_DRAIN), 0);
			assert_int_equal(pthread_join(tw, NULL), 0);
			assert_int_equal(h->waiter.res, 0);
			assert_int_equal(atomic_load(&h->locks), 1);
			assert_int_equal(co_status(&h->blocker.co), 0);
			assert_int_equal(co_engine_destroy(&h->w), 0);
			free(h);
		}
	alarm(0);
}

/* ---- mixed stress: lock, trylock, timed lock, condition waits, 4 contexts -------- */

/* sync.md promises lockers that lose no increment (lockers_barging), a
 * timed waiter that holds the mutex exactly when its value is 0, and a
 * condition waiter that holds it again after -ETIME too. Here all of it at
 * once on a barging mutex: 32 coroutines on 4 contexts pick at random a
 * trylock, a lock limited to 0..19 us, or a lock followed by a condition
 * wait limited to 0..29 us, a signal or a broadcast. Never two holders,
 * no value but 0 and -ETIME, every increment counted, nobody left waiting
 * (the run ends), the mutex free at the end. */

#define MIX_TASKS 32
#define MIX_ITERS 3000

struct mix_shared {
	co_mutex m;
	co_cond c;
	long counter;               /* plain: under m */
	atomic_int holders, overlaps, bad;
	atomic_long done_incs;
};

struct mix_task {
	co_frame co;
	co_waiter w;
	struct mix_shared *sh;
	unsigned seed;
	int i, op, got;
	long incs;
};

static unsigned mix_rand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 16;
}

static int mix_fn(co_frame *f)
{
	struct mix_task *t = (struct mix_task *)f;
	CO_BEGIN(f);
	for (t->i = 0; t->i < MIX_ITERS; t->i++) {
		t->op = (int)(mix_rand(&t->seed) % 6);
		t->got = 0;
		if (t->op == 0) {
			t->got = co_mutex_trylock(&t->sh->m) == 0;
		} else if (t->op == 1) {
			CO_AWAIT(f, co_wait_for(co_mutex_lock(&t->w, &t->sh->m),
						(mix_rand(&t->seed) % 20) * 1000));
			if (co_result(f) == 0)
				t->got = 1;
			else if (co_result(f) != -ETIME)
				atomic_fetch_add(&t->sh->bad, 1);
		} else {
			CO_AWAIT(f, co_mutex_lock(&t->w, &t->sh->m));
			if (co_result(f) != 0)
				atomic_fetch_add(&t->sh->bad, 1);
			t->got = 1;
		}
		if (!t->got) {
			CO_YIELD(f);
			continue;
		}
		if (atomic_fetch_add(&t->sh->holders, 1) != 0)
			atomic_fetch_add(&t->sh->overlaps, 1);
		t->sh->counter++;
		t->incs++;
		if (t->op == 3) {
			atomic_fetch_sub(&t->sh->holders, 1);
			CO_AWAIT(f, co_wait_for(co_cond_wait(&t->w, &t->sh->c, &t->sh->m),
						(mix_rand(&t->seed) % 30) * 1000));
			if (co_result(f) != 0 && co_result(f) != -ETIME)
				atomic_fetch_add(&t->sh->bad, 1);
			if (atomic_fetch_add(&t->sh->holders, 1) != 0)
				atomic_fetch_add(&t->sh->overlaps, 1);
			t->sh->counter++;
			t->incs++;
		} else if (t->op == 4) {
			co_cond_signal(&t->sh->c);
		} else if (t->op == 5) {
			co_cond_broadcast(&t->sh->c);
		}
		atomic_fetch_sub(&t->sh->holders, 1);
		if (co_mutex_unlock(&t->sh->m) != 0)
			atomic_fetch_add(&t->sh->bad, 1);
		if (t->i % 3 == 0)
			CO_YIELD(f);
	}
	atomic_fetch_add(&t->sh->done_incs, t->incs);
	CO_END(f);
}

static void test_mixed_stress(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 4 };
	struct mix_shared sh;
	struct mix_task *t = calloc(MIX_TASKS, sizeof *t);
	(void)state;
	assert_non_null(t);
	memset(&sh, 0, sizeof sh);
	assert_int_equal(co_mutex_init(&sh.m), 0);
	assert_int_equal(co_cond_init(&sh.c), 0);
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < MIX_TASKS; i++) {
		t[i].sh = &sh;
		t[i].seed = 77u + (unsigned)i * 7919u;
		co_init(&t[i].co, mix_fn);
		assert_int_equal(co_sched_spawn_to(&s, (unsigned)i % 4, &t[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	print_message("counter %ld overlaps %d bad %d\n", sh.counter, atomic_load(&sh.overlaps),
		      atomic_load(&sh.bad));
	assert_int_equal(atomic_load(&sh.overlaps), 0);
	assert_int_equal(atomic_load(&sh.bad), 0);
	assert_int_equal(sh.counter, atomic_load(&sh.done_incs));
	assert_int_equal(co_mutex_trylock(&sh.m), 0);
	assert_int_equal(co_mutex_unlock(&sh.m), 0);
	assert_int_equal(co_cond_destroy(&sh.c), 0);
	assert_int_equal(co_mutex_destroy(&sh.m), 0);
	free(t);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_free_mutex_goes_to_newcomer),
		cmocka_unit_test(test_fifo_mutex_hands_off),
		cmocka_unit_test(test_invited_waiter_cancelled),
		cmocka_unit_test(test_destroy_waits_for_retry),
		cmocka_unit_test(test_destroy_busy_through_hand_off),
		cmocka_unit_test(test_invited_timed_waiter_times_out),
		cmocka_unit_test(test_invited_waiter_under_cancel_stop),
		cmocka_unit_test(test_no_waiter_starves),
		cmocka_unit_test(test_invited_waiter_bounded),
		cmocka_unit_test(test_relock_is_an_overtake),
		cmocka_unit_test(test_overtakes_bounded),
		cmocka_unit_test(test_lockers_barging),
		cmocka_unit_test(test_lockers_fifo),
		cmocka_unit_test(test_uncontended_takes_no_lock),
		cmocka_unit_test(test_init_errors),
		cmocka_unit_test(test_mixed_stress),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
