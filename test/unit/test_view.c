/* SPDX-License-Identifier: MIT */
/*
 * The view of the coroutines (coring/view.h, lib/view/view.c, lib/engine/engine_view.c):
 * 10,000 frames parked on five kinds of wait, each listed with its kind,
 * its object, its place and its context; a view taken while a stealing
 * scheduler churns (TSan); from a frame; of a manual context between and
 * during ticks; of a context that does not answer; of a lone engine; the
 * text; the errors; and frames the list could not take (fault injection).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <cmocka.h>

#include <coring/coring.h>
#include "engine/engine_internal.h"
#include "common/fault.h"
#include "helpers.h"
#include "view/view_internal.h"
#include "common/clock.h"

/* A library built without the view (meson -Dview=false) answers
 * -EOPNOTSUPP: packaging.sh checks that build; here the cases skip. */
#define NEED_VIEW()                                                  \
	do {                                                         \
		if (!co_view_available()) {                          \
			co_view v0;                                  \
			assert_int_equal(co_view_engine(&v0, NULL, 0), -EOPNOTSUPP); \
			skip();                                      \
		}                                                    \
	} while (0)

/* ---- five kinds of wait ------------------------------------------------------------ */

#define PER_KIND 2000
#define KINDS 5

enum { W_EVENT, W_MUTEX, W_SEM, W_CHAN, W_RECV };

static const char *const wait_names[KINDS] = { "event", "mutex", "semaphore", "channel recv",
					       "recv" };

struct park_world {
	co_event ev;
	co_mutex m;
	co_sem sem;
	co_chan ch;
	int chbuf[4];
	int sv[2];
	atomic_int done, ok;
};

struct parker {
	co_frame co;
	co_waiter w;
	co_io io;
	struct park_world *pw;
	int how, item;
	char c;
};

/* The line of each kind's await, for the switch backend's places. */
static int line_of[KINDS];

static void parker_done(co_frame *f)
{
	struct parker *p = (struct parker *)f;

	atomic_fetch_add(&p->pw->done, 1);
	if (co_status(f) == 0)
		atomic_fetch_add(&p->pw->ok, 1);
}

static int event_fn(co_frame *f)
{
	struct parker *p = (struct parker *)f;
	CO_BEGIN(f);
	line_of[W_EVENT] = __LINE__ + 1;
	CO_AWAIT(f, co_event_wait(&p->w, &p->pw->ev));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static int mutex_fn(co_frame *f)
{
	struct parker *p = (struct parker *)f;
	CO_BEGIN(f);
	line_of[W_MUTEX] = __LINE__ + 1;
	CO_AWAIT(f, co_mutex_lock(&p->w, &p->pw->m));
	if (co_result(f) == 0)
		co_mutex_unlock(&p->pw->m);
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static int sem_fn(co_frame *f)
{
	struct parker *p = (struct parker *)f;
	CO_BEGIN(f);
	line_of[W_SEM] = __LINE__ + 1;
	CO_AWAIT(f, co_sem_acquire(&p->w, &p->pw->sem));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static int chan_fn(co_frame *f)
{
	struct parker *p = (struct parker *)f;
	CO_BEGIN(f);
	line_of[W_CHAN] = __LINE__ + 1;
	CO_AWAIT(f, co_chan_recv(&p->w, &p->pw->ch, &p->item));
	CO_RETURN(f, co_result(f) == -EPIPE ? 0 : co_result(f)); /* closed: done */
	CO_END(f);
}

static int recv_fn(co_frame *f)
{
	struct parker *p = (struct parker *)f;
	CO_BEGIN(f);
	line_of[W_RECV] = __LINE__ + 1;
	CO_AWAIT(f, co_recv(&p->io, p->pw->sv[0], &p->c, 1, 0));
	CO_RETURN(f, co_result(f) >= 0 ? 0 : co_result(f));
	CO_END(f);
}

static int (*const kind_fn[KINDS])(co_frame *) = { event_fn, mutex_fn, sem_fn, chan_fn, recv_fn };

static const void *kind_object(struct park_world *pw, int k)
{
	const void *o[KINDS] = { &pw->ev, &pw->m, &pw->sem, &pw->ch, NULL };

	return o[k];
}

static void world_init(struct park_world *pw)
{
	memset(pw, 0, sizeof *pw);
	co_event_init(&pw->ev, 0);
	co_mutex_init(&pw->m);
	co_sem_init(&pw->sem, 0);
	assert_int_equal(co_chan_init(&pw->ch, sizeof(int), 4, pw->chbuf), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pw->sv), 0);
	assert_int_equal(co_mutex_trylock(&pw->m), 0); /* held by the test */
}

/* Let every parked frame go: each wait ends, each frame finishes. */
static void world_release(struct park_world *pw)
{
	co_event_set(&pw->ev);
	co_mutex_unlock(&pw->m);
	co_sem_release(&pw->sem, PER_KIND);
	co_chan_close(&pw->ch);
	shutdown(pw->sv[1], SHUT_WR); /* every recv sees EOF */
}

static void world_fini(struct park_world *pw)
{
	assert_int_equal(co_event_destroy(&pw->ev), 0);
	assert_int_equal(co_mutex_destroy(&pw->m), 0);
	assert_int_equal(co_sem_destroy(&pw->sem), 0);
	assert_int_equal(co_chan_destroy(&pw->ch), 0);
	close(pw->sv[0]);
	close(pw->sv[1]);
}

/* CLOCK_MONOTONIC_COARSE when the frames were spawned: each last ran
 * after it (its since), and before the view (at_ns). */
static uint64_t spawned_at;

static uint64_t coarse_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Every frame of kind k on the right context, with its wait and object. */
static void check_kind(const co_view *v, struct park_world *pw, int k, int ctx_of_kind)
{
	size_t n = 0;
	char place[256];

	for (size_t i = 0; i < v->n; i++) {
		const co_view_frame *f = &v->frames[i];

		if (f->fn != kind_fn[k])
			continue;
		n++;
		assert_int_equal(f->state, CO_VIEW_WAITING);
		assert_ptr_equal(f->at_fn, kind_fn[k]);
		assert_int_equal(f->depth, 0);
		assert_non_null(f->wait);
		if (strcmp(f->wait, wait_names[k]) != 0)
			fail_msg("kind %d: wait '%s', not '%s'", k, f->wait, wait_names[k]);
		assert_ptr_equal(f->object, kind_object(pw, k));
		assert_int_equal(f->context, ctx_of_kind);
		assert_true(f->since_ns >= spawned_at && f->since_ns <= v->at_ns);
		assert_true(f->at_label != 0);
	}
	assert_int_equal(n, PER_KIND);
	/* its place names the function, and with the switch backend the line */
	for (size_t i = 0; i < v->n; i++) {
		if (v->frames[i].fn != kind_fn[k])
			continue;
		assert_true(co_view_place(&v->frames[i], place, sizeof place) > 0);
		static const char *const fn_names[KINDS] = { "event_fn", "mutex_fn", "sem_fn",
							     "chan_fn", "recv_fn" };
		if (strstr(place, fn_names[k]) == NULL)
			fail_msg("kind %d: place '%s' does not name %s", k, place, fn_names[k]);
#if !CO_USE_COMPUTED_GOTO
		char line[32];
		snprintf(line, sizeof line, "test_view.c:%d ", line_of[k]);
		if (strstr(place, line) == NULL)
			fail_msg("kind %d: place '%s' is not at %s", k, place, line);
#endif
		break;
	}
}

/* 10,000 frames on five kinds of wait, over two contexts: each listed
 * with the right kind, object, place and context; then released, and
 * every one of them finishes. */
static void test_lists_five_kinds_of_wait(void **state)
{
	static struct parker p[KINDS * PER_KIND];
	static struct park_world pw;
	co_sched s;
	co_view v;
	int ctx_of_kind[KINDS];
	(void)state;
	NEED_VIEW();
	world_init(&pw);
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 2 }), 0);
	spawned_at = coarse_now();
	for (int k = 0; k < KINDS; k++) {
		ctx_of_kind[k] = k % 2;
		for (int i = 0; i < PER_KIND; i++) {
			struct parker *q = &p[k * PER_KIND + i];

			q->pw = &pw;
			q->how = k;
			co_init(&q->co, kind_fn[k]);
			q->co.on_done = parker_done;
			assert_int_equal(co_sched_spawn_to(&s, (unsigned)ctx_of_kind[k], &q->co), 0);
		}
	}
	/* every frame parked: the view is taken until it says so (a hang
	 * guard only; the counts are exact once they are there) */
	for (;;) {
		size_t waiting = 0;

		assert_int_equal(co_view_sched(&v, &s, CO_VIEW_WAIT), 0);
		assert_int_equal(v.contexts, 2);
		assert_int_equal(v.unanswered, 0);
		for (size_t i = 0; i < v.n; i++)
			waiting += v.frames[i].state == CO_VIEW_WAITING;
		if (waiting == KINDS * PER_KIND)
			break;
		co_view_free(&v);
		usleep(1000);
	}
	assert_int_equal(v.n, KINDS * PER_KIND);
	assert_int_equal(v.unlisted, 0);
	for (int k = 0; k < KINDS; k++)
		check_kind(&v, &pw, k, ctx_of_kind[k]);
	co_view_free(&v);
	world_release(&pw);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(atomic_load(&pw.done), KINDS * PER_KIND);
	assert_int_equal(atomic_load(&pw.ok), KINDS * PER_KIND);
	assert_int_equal(co_view_sched(&v, &s, CO_VIEW_WAIT), 0); /* nothing live */
	assert_int_equal(v.n, 0);
	co_view_free(&v);
	co_sched_stop(&s, CO_STOP_DRAIN);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	world_fini(&pw);
}

/* ---- a view while a stealing scheduler churns (TSan) -------------------------------- */

#define CHURN 4000

struct churner {
	co_frame co;
	co_transfer tr;
	co_turn turn;
	co_sched *s;
	atomic_int *done;
	int k;
};

static void churner_done(co_frame *f)
{
	atomic_fetch_add(((struct churner *)f)->done, 1);
}

/* Yields, next turns, hops between the contexts: frames move while the
 * views are taken (stealing moves them too). */
static int churner_fn(co_frame *f)
{
	struct churner *c = (struct churner *)f;
	CO_BEGIN(f);
	for (c->k = 0; c->k < 6; c->k++) {
		if (c->k % 3 == 0)
			CO_YIELD(f);
		else if (c->k % 3 == 1)
			CO_AWAIT(f, co_next_turn(&c->turn));
		else
			CO_AWAIT(f, co_transfer_to(&c->tr, &c->s->ctx[(co_context_current()->index + 1) %
								       c->s->n]));
	}
	CO_END(f);
}

static void test_view_while_running(void **state)
{
	static struct churner c[CHURN];
	atomic_int done = 0;
	co_sched s;
	int views = 0, fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	(void)state;
	NEED_VIEW();
	assert_true(fd >= 0);
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 2, .steal = 1 }), 0);
	for (int i = 0; i < CHURN; i++) {
		c[i].s = &s;
		c[i].done = &done;
		co_init(&c[i].co, churner_fn);
		c[i].co.on_done = churner_done;
		assert_int_equal(co_sched_spawn(&s, &c[i].co), 0);
		if (i % 500 == 0 || atomic_load(&done) < i / 2) {
			co_view v;

			assert_int_equal(co_view_sched(&v, &s, CO_VIEW_WAIT), 0);
			assert_int_equal(v.unanswered, 0);
			/* none that finished: each record a live churner */
			assert_true(v.n <= (size_t)(i + 1));
			for (size_t a = 1; a < v.n; a++) /* each frame once */
				for (size_t b = 0; b < a && a < 200; b++)
					assert_ptr_not_equal(v.frames[a].frame, v.frames[b].frame);
			for (size_t j = 0; j < v.n; j++)
				assert_ptr_equal(v.frames[j].fn, churner_fn);
			assert_int_equal(co_view_print(&v, fd, CO_VIEW_EACH), 0);
			co_view_free(&v);
			views++;
		}
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(atomic_load(&done), CHURN);
	co_sched_stop(&s, CO_STOP_DRAIN);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	close(fd);
	print_message("      %d views while %d frames hopped\n", views, CHURN);
}

/* ---- from a frame: itself running, the other context answers ------------------------- */

struct viewer {
	co_frame co;
	co_sched *s;
	co_view v;
	int err;
	atomic_int taken;
};

static int viewer_fn(co_frame *f)
{
	struct viewer *w = (struct viewer *)f;
	CO_BEGIN(f);
	w->err = co_view_sched(&w->v, w->s, CO_VIEW_WAIT);
	atomic_store_explicit(&w->taken, 1, memory_order_release);
	CO_END(f);
}


static void test_view_from_a_frame(void **state)
{
	co_sched s;
	struct viewer w = { 0 };
	struct co_test_idler d[3];
	co_event ev;
	int running = 0, waiting = 0;
	(void)state;
	NEED_VIEW();
	co_event_init(&ev, 0);
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 2 }), 0);
	for (int i = 0; i < 3; i++) {
		co_test_idler_init(&d[i], &ev);
		assert_int_equal(co_sched_spawn_to(&s, 1, &d[i].co), 0);
	}
	w.s = &s;
	co_init(&w.co, viewer_fn);
	assert_int_equal(co_sched_spawn_to(&s, 0, &w.co), 0);
	WAIT_UNTIL(atomic_load_explicit(&w.taken, memory_order_acquire));
	assert_int_equal(w.err, 0);
	assert_int_equal(w.v.unanswered, 0);
	for (size_t i = 0; i < w.v.n; i++) {
		const co_view_frame *f = &w.v.frames[i];

		if (f->frame == &w.co) {
			assert_int_equal(f->state, CO_VIEW_RUNNING);
			assert_int_equal(f->context, 0);
			running++;
		} else if (f->fn == co_test_idler_fn && f->state == CO_VIEW_WAITING) {
			assert_int_equal(f->context, 1);
			waiting++;
		}
	}
	assert_int_equal(running, 1);
	/* the idlers may not all have parked when the view came: at most 3 */
	assert_true(waiting <= 3);
	co_view_free(&w.v);
	co_event_set(&ev);
	assert_int_equal(co_sched_run(&s), 0);
	co_sched_stop(&s, CO_STOP_DRAIN);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	co_event_destroy(&ev);
}

/* view.md, "How it is taken": two frames of two contexts taking views at
 * once each wait for the other until their wait_ns. Both frames meet
 * (each holds its thread until the other came), then take a view of the
 * scheduler with a wait of 20 ms: each reads its own context (RUNNING),
 * neither lists the other frame (held in its view, or finished), the
 * first to give up counts the other context unanswered, and both return. */
struct cross_viewer {
	co_frame co;
	co_sched *s;
	atomic_int *met;
	co_view v;
	int err;
};

static int cross_viewer_fn(co_frame *f)
{
	struct cross_viewer *w = (struct cross_viewer *)f;
	CO_BEGIN(f);
	atomic_fetch_add(w->met, 1);
	while (atomic_load(w->met) < 2)
		usleep(100); /* holds its thread until the other came */
	w->err = co_view_sched(&w->v, w->s, 20 * CO_MS);
	CO_END(f);
}

static void test_views_from_two_contexts_at_once(void **state)
{
	co_sched s;
	struct cross_viewer w[2];
	atomic_int met = 0;
	unsigned unanswered = 0;
	(void)state;
	NEED_VIEW();
	alarm(60);
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 2 }), 0);
	for (int i = 0; i < 2; i++) {
		memset(&w[i], 0, sizeof w[i]);
		w[i].s = &s;
		w[i].met = &met;
		co_init(&w[i].co, cross_viewer_fn);
		assert_int_equal(co_sched_spawn_to(&s, (unsigned)i, &w[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0); /* both views returned */
	for (int i = 0; i < 2; i++) {
		assert_true(co_done(&w[i].co));
		assert_int_equal(w[i].err, 0);
		assert_int_equal(w[i].v.contexts, 2);
		assert_int_equal(w[i].v.n, 1); /* itself: the other is held or gone */
		assert_ptr_equal(w[i].v.frames[0].frame, &w[i].co);
		assert_int_equal(w[i].v.frames[0].state, CO_VIEW_RUNNING);
		assert_int_equal(w[i].v.frames[0].context, i);
		unanswered += w[i].v.unanswered;
		co_view_free(&w[i].v);
	}
	/* the first to give up counts the other unanswered; the other may
	 * then get its answer from a context whose frame has finished */
	assert_true(unanswered >= 1);
	co_sched_stop(&s, CO_STOP_DRAIN);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	alarm(0);
}

/* ---- a manual context: between ticks, and while another thread ticks it -------------- */

struct yielder {
	co_frame co;
	co_turn turn;
	atomic_int *stop;
	int steps;
};

static int yielder_fn(co_frame *f)
{
	struct yielder *y = (struct yielder *)f;
	CO_BEGIN(f);
	while (!atomic_load(y->stop)) {
		y->steps++;
		if (y->steps % 2)
			CO_YIELD(f);
		else
			CO_AWAIT(f, co_next_turn(&y->turn));
	}
	CO_END(f);
}

struct ticker {
	co_context *c;
	atomic_int *stop, phase;
	long ticks;
	int err, first;
};

/* The context's one ticking thread: one tick, a pause while the test
 * looks (phase 1), then ticks without pause until told to stop. */
static void *tick_loop(void *arg)
{
	struct ticker *t = arg;

	t->first = co_context_tick(t->c);
	atomic_store(&t->phase, 1);
	while (atomic_load(&t->phase) == 1)
		usleep(100);
	while (!atomic_load(t->stop)) {
		int r = co_context_tick(t->c);

		if (r < 0 && t->err == 0)
			t->err = r;
		t->ticks++;
	}
	return NULL;
}

static void test_view_manual_context(void **state)
{
	static const co_sched_group groups[1] = { { .manual = 1 } };
	co_sched s;
	struct yielder y[4];
	atomic_int stop = 0, tstop = 0;
	struct ticker t;
	pthread_t th;
	co_view v;
	int next = 0;
	(void)state;
	NEED_VIEW();
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .groups = groups, .ngroups = 1 }), 0);
	for (int i = 0; i < 4; i++) {
		y[i] = (struct yielder){ .stop = &stop };
		co_init(&y[i].co, yielder_fn);
		assert_int_equal(co_sched_spawn_kind(&s, 0, &y[i].co), 0);
	}
	t = (struct ticker){ .c = co_sched_pick(&s, 0), .stop = &tstop };
	assert_int_equal(pthread_create(&th, NULL, tick_loop, &t), 0);
	WAIT_UNTIL(atomic_load(&t.phase) == 1);
	assert_int_equal(t.first, 4); /* each ran its first step and yielded */
	/* between ticks: the caller reads the list at once */
	assert_int_equal(co_view_sched(&v, &s, 0), 0);
	assert_int_equal(v.unanswered, 0);
	assert_int_equal(v.n, 4);
	for (size_t i = 0; i < v.n; i++) {
		assert_int_equal(v.frames[i].context, 0);
		next += v.frames[i].state == CO_VIEW_NEXT_TURN;
	}
	assert_int_equal(next, 4);
	co_view_free(&v);
	/* while the thread ticks without pause: the view still answers */
	atomic_store(&t.phase, 2);
	for (int i = 0; i < 20; i++) {
		assert_int_equal(co_view_sched(&v, &s, CO_VIEW_WAIT), 0);
		assert_int_equal(v.unanswered, 0);
		assert_int_equal(v.n, 4);
		for (size_t j = 0; j < v.n; j++)
			if (v.frames[j].state == CO_VIEW_WAITING)
				assert_string_equal(v.frames[j].wait, "next turn");
		co_view_free(&v);
	}
	atomic_store(&stop, 1);
	WAIT_UNTIL(co_sched_poll(&s) == 0);
	atomic_store(&tstop, 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(t.err, 0);
	co_sched_stop(&s, CO_STOP_DRAIN);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- a context that does not answer -------------------------------------------------- */

struct spinner {
	co_frame co;
	atomic_int *go, *in;
};

static int spinner_fn(co_frame *f)
{
	struct spinner *p = (struct spinner *)f;
	CO_BEGIN(f);
	atomic_store(p->in, 1);
	while (!atomic_load(p->go))
		usleep(100); /* holds its context's thread: no turn comes */
	CO_END(f);
}

static void test_view_unanswered(void **state)
{
	co_sched s;
	struct spinner p;
	struct co_test_idler d;
	co_event ev;
	atomic_int go = 0, in = 0;
	co_view v;
	(void)state;
	NEED_VIEW();
	co_event_init(&ev, 0);
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 2 }), 0);
	p = (struct spinner){ .go = &go, .in = &in };
	co_init(&p.co, spinner_fn);
	assert_int_equal(co_sched_spawn_to(&s, 0, &p.co), 0);
	co_test_idler_init(&d, &ev);
	assert_int_equal(co_sched_spawn_to(&s, 1, &d.co), 0);
	WAIT_UNTIL(atomic_load(&in));
	assert_int_equal(co_view_sched(&v, &s, 20 * 1000000ull), 0);
	assert_int_equal(v.contexts, 2);
	assert_int_equal(v.unanswered, 1); /* context 0 holds its thread */
	for (size_t i = 0; i < v.n; i++)
		assert_int_equal(v.frames[i].context, 1);
	co_view_free(&v);
	/* its request is answered (and freed) once the frame lets go */
	atomic_store(&go, 1);
	co_event_set(&ev);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_view_sched(&v, &s, CO_VIEW_WAIT), 0);
	assert_int_equal(v.unanswered, 0);
	co_view_free(&v);
	co_sched_stop(&s, CO_STOP_DRAIN);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0); /* nothing left pending on it */
	co_event_destroy(&ev);
}

/* view.md, "How it is taken": every engine is asked before any answer is
 * awaited. Each of two contexts runs a frame that holds its thread until
 * its engine holds a view's request, and then until the other frame saw
 * its own (or the view is over): only a view that asked both engines
 * before it waited for either gets both answers. One that waited for the
 * first before it asked the second would find the first unanswered at its
 * deadline. */
struct both_asked {
	co_frame co;
	co_engine *e;
	atomic_int *seen, *other_seen, *over, *in;
};

static int both_asked_fn(co_frame *f)
{
	struct both_asked *b = (struct both_asked *)f;
	CO_BEGIN(f);
	atomic_fetch_add(b->in, 1);
	while (!atomic_load(b->over) &&
	       !(atomic_load(b->seen) && atomic_load(b->other_seen))) {
		if (atomic_load(&b->e->view_req) != NULL)
			atomic_store(b->seen, 1);
		usleep(100); /* holds its context's thread */
	}
	CO_END(f);
}

static void test_every_engine_asked_first(void **state)
{
	co_sched s;
	struct both_asked b[2];
	atomic_int over = 0, in = 0, seen[2] = { 0, 0 };
	co_view v;
	(void)state;
	NEED_VIEW();
	alarm(60);
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 2 }), 0);
	for (int i = 0; i < 2; i++) {
		b[i] = (struct both_asked){ .e = &s.ctx[i].engine, .seen = &seen[i],
					    .other_seen = &seen[1 - i], .over = &over, .in = &in };
		co_init(&b[i].co, both_asked_fn);
		assert_int_equal(co_sched_spawn_to(&s, (unsigned)i, &b[i].co), 0);
	}
	WAIT_UNTIL(atomic_load(&in) == 2); /* both hold their threads */
	assert_int_equal(co_view_sched(&v, &s, 5 * CO_S), 0);
	atomic_store(&over, 1);
	assert_int_equal(v.contexts, 2);
	assert_int_equal(v.unanswered, 0);
	co_view_free(&v);
	co_sched_stop(&s, CO_STOP_DRAIN);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	alarm(0);
}

/* The engine took the request but the deadline came before its answer:
 * the view goes without it, and the engine frees the request when it
 * answers (the window held open at CO__POINT_VIEW_TAKEN). */
static atomic_int hold_view, held_view;

static void hold_answer(void *arg)
{
	(void)arg;
	atomic_store(&held_view, 1);
	while (atomic_load(&hold_view))
		usleep(100);
}

static void test_view_given_up_after_taken(void **state)
{
	co_sched s;
	co_view v;
	struct yielder y;
	atomic_int stop = 1;
	(void)state;
	NEED_VIEW();
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 1 }), 0);
	/* its thread runs its engine: a task ran there */
	y = (struct yielder){ .stop = &stop };
	co_init(&y.co, yielder_fn);
	assert_int_equal(co_sched_spawn(&s, &y.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	atomic_store(&hold_view, 1);
	atomic_store(&held_view, 0);
	co__fault_on_point(CO__POINT_VIEW_TAKEN, hold_answer, NULL);
	assert_int_equal(co_view_sched(&v, &s, 20 * 1000000ull), 0);
	assert_int_equal(atomic_load(&held_view), 1); /* taken, not answered */
	assert_int_equal(v.contexts, 1);
	assert_int_equal(v.unanswered, 1);
	co_view_free(&v);
	atomic_store(&hold_view, 0); /* it answers now, to nobody, and frees */
	co__fault_on_point(CO__POINT_VIEW_TAKEN, NULL, NULL);
	assert_int_equal(co_view_sched(&v, &s, CO_VIEW_WAIT), 0);
	assert_int_equal(v.unanswered, 0);
	co_view_free(&v);
	co_sched_stop(&s, CO_STOP_DRAIN);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- a lone engine: idle, and run by another thread -------------------------------- */

static void test_view_lone_engine(void **state)
{
	co_engine e;
	struct co_test_idler d[2];
	co_event ev;
	co_view v;
	co_test_runner r;
	(void)state;
	NEED_VIEW();
	co_event_init(&ev, 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	for (int i = 0; i < 2; i++) {
		co_test_idler_init(&d[i], &ev);
		assert_int_equal(co_engine_spawn(&e, &d[i].co), 0);
	}
	/* never run: spawned from this thread, listed, not started */
	assert_int_equal(co_view_engine(&v, &e, 0), 0);
	assert_int_equal(v.n, 2);
	for (size_t i = 0; i < v.n; i++) {
		assert_int_equal(v.frames[i].state, CO_VIEW_READY);
		assert_int_equal(v.frames[i].at_label, 0);
		assert_int_equal(v.frames[i].context, -1);
		assert_int_equal(v.frames[i].kind, 0);
	}
	co_view_free(&v);
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_STOP);
	for (;;) { /* run by the runner's thread: asked, answered */
		size_t waiting = 0;

		assert_int_equal(co_view_engine(&v, &e, CO_VIEW_WAIT), 0);
		assert_int_equal(v.unanswered, 0);
		for (size_t i = 0; i < v.n; i++)
			waiting += v.frames[i].state == CO_VIEW_WAITING;
		co_view_free(&v);
		if (waiting == 2)
			break;
		usleep(1000);
	}
	co_event_set(&ev);
	co_engine_stop(&e, CO_STOP_DRAIN);
	assert_int_equal(co_test_runner_join(&r), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_view_engine(&v, &e, 0), -EINVAL); /* destroyed */
	co_event_destroy(&ev);
}

/* view.md, "What a view holds": a lone context (of no scheduler) is an
 * engine of no scheduler too: its frames' context is -1, their kind 0. */
static void test_view_lone_context(void **state)
{
	co_context c;
	struct co_test_idler d;
	co_event ev;
	co_view v;
	(void)state;
	NEED_VIEW();
	co_event_init(&ev, 0);
	assert_int_equal(co_context_init(&c, NULL), 0);
	co_test_idler_init(&d, &ev);
	assert_int_equal(co_context_spawn(&c, &d.co), 0);
	assert_int_equal(co_view_engine(&v, &c.engine, 0), 0);
	assert_int_equal(v.n, 1);
	assert_ptr_equal(v.frames[0].frame, &d.co);
	assert_int_equal(v.frames[0].context, -1);
	assert_int_equal(v.frames[0].kind, 0);
	co_view_free(&v);
	assert_int_equal(co_context_stop(&c, CO_STOP_CANCEL), 0);
	assert_int_equal(co_context_destroy(&c), 0);
	co_event_destroy(&ev);
}

/* ---- time limits: named by the wait that holds the frame -------------------------- */

/* A limit whose timer is its own is "limit", its inner the limited await;
 * one folded into the await (I/O's linked timeout, a sync wait's own
 * timer) shows that await; co_timeout_task shows the child's wait, two
 * levels down (the limit's own frame, then the child). */
enum { L_SLEEP, L_USER, L_RECV, L_EVENT, L_TASK, LIMITS };

struct limited {
	co_frame co;
	co_limit lim;
	co_io io;
	co_waiter w;
	co_awaiter mine;
	struct limited_kid { co_frame co; co_waiter w; co_event *ev; } kid;
	co_event *ev;
	int fd, how;
	char c;
};

static int mine_suspend(co_awaiter *a, co_frame *f)
{
	(void)a;
	(void)f;
	return 1; /* only a cancel ends it */
}

static int mine_cancel(co_awaiter *a, co_frame *f)
{
	(void)a;
	co_wake(f);
	return 0;
}

static const co_awaiter_ops mine_ops = { NULL, mine_suspend, NULL, mine_cancel, 0, "mine" };

static int limited_kid_fn(co_frame *f)
{
	struct limited_kid *k = (struct limited_kid *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_event_wait(&k->w, k->ev));
	CO_END(f);
}

static int limited_fn(co_frame *f)
{
	struct limited *l = (struct limited *)f;
	CO_BEGIN(f);
	/* if, not switch: the switch label backend has no await inside a switch */
	if (l->how == L_SLEEP) {
		CO_AWAIT(f, co_timeout(&l->lim, co_sleep(&l->io, 3600 * CO_S), 3600 * CO_S));
	} else if (l->how == L_USER) {
		l->mine.ops = &mine_ops;
		CO_AWAIT(f, co_timeout(&l->lim, &l->mine, 3600 * CO_S));
	} else if (l->how == L_RECV) {
		CO_AWAIT(f, co_timeout(&l->lim, co_recv(&l->io, l->fd, &l->c, 1, 0), 3600 * CO_S));
	} else if (l->how == L_EVENT) {
		CO_AWAIT(f, co_timeout(&l->lim, co_event_wait(&l->w, l->ev), 3600 * CO_S));
	} else {
		l->kid.ev = l->ev;
		co_init(&l->kid.co, limited_kid_fn);
		CO_AWAIT_TASK(f, co_timeout_task(&l->lim, &l->kid.co, 3600 * CO_S));
	}
	CO_END(f);
}

static void test_limits_named_by_their_wait(void **state)
{
	static const char *const wait[LIMITS] = { "limit", "limit", "recv", "event", "event" };
	static const char *const inner[LIMITS] = { "sleep", "mine", NULL, NULL, NULL };
	static const unsigned depth[LIMITS] = { 0, 0, 0, 0, 2 };
	struct limited l[LIMITS];
	co_engine e;
	co_event ev;
	co_view v;
	int sv[2];
	(void)state;
	NEED_VIEW();
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(co_event_init(&ev, 0), 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	memset(l, 0, sizeof l);
	for (int i = 0; i < LIMITS; i++) {
		l[i].how = i;
		l[i].ev = &ev;
		l[i].fd = sv[0];
		co_init(&l[i].co, limited_fn);
		assert_int_equal(co_engine_spawn(&e, &l[i].co), 0);
	}
	assert_int_equal(co_engine_tick(&e), LIMITS); /* each parks under its limit */
	assert_int_equal(co_view_engine(&v, &e, 0), 0); /* between ticks: read at once */
	assert_int_equal(v.n, LIMITS);
	for (size_t i = 0; i < v.n; i++) {
		const co_view_frame *r = &v.frames[i];
		int k = -1;

		for (int j = 0; j < LIMITS; j++)
			if (r->frame == &l[j].co)
				k = j;
		assert_true(k >= 0);
		assert_int_equal(r->state, CO_VIEW_WAITING);
		if (strcmp(r->wait, wait[k]) != 0)
			fail_msg("limit %d: wait %s, not %s", k, r->wait, wait[k]);
		if (inner[k] ? r->inner == NULL || strcmp(r->inner, inner[k]) != 0 : r->inner != NULL)
			fail_msg("limit %d: inner %s, not %s", k, r->inner ? r->inner : "NULL",
				 inner[k] ? inner[k] : "NULL");
		assert_int_equal(r->depth, depth[k]);
		if (k == L_EVENT || k == L_TASK)
			assert_ptr_equal(r->object, &ev);
	}
	co_view_free(&v);
	for (int i = 0; i < LIMITS; i++)
		assert_int_equal(co_cancel(&l[i].co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	for (int i = 0; i < LIMITS; i++)
		assert_true(co_done(&l[i].co));
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_event_destroy(&ev), 0);
	close(sv[0]);
	close(sv[1]);
}

/* ---- the other waits: each named as view.md's table says ------------------------------ */

/* The record of frame f in view v; fails the test where there is none. */
static const co_view_frame *record_of(const co_view *v, const co_frame *f)
{
	const co_view_frame *r = NULL;

	for (size_t i = 0; i < v->n; i++)
		if (v->frames[i].frame == f)
			r = &v->frames[i];
	assert_non_null(r);
	return r;
}

/* r waits (CO_VIEW_WAITING) on the wait named name; k names it in a failure. */
static void expect_waiting_on(const co_view_frame *r, const char *name, int k)
{
	assert_int_equal(r->state, CO_VIEW_WAITING);
	if (r->wait == NULL || strcmp(r->wait, name) != 0)
		fail_msg("wait %d: %s, not %s", k, r->wait ? r->wait : "NULL", name);
}

/* view.md, "What a view holds", the `wait` table: a bare co_sleep is
 * "sleep"; a latch, a wait group, a channel send are named by their kind
 * with the primitive as object; when_all, when_any and spawn_on by theirs,
 * spawn_on with the child's engine as object; an awaiter of the user's by
 * its ops' name, "await" when that is NULL. */
enum { N_SLEEP, N_LATCH, N_GROUP, N_SEND, N_ALL, N_ANY, N_ON, N_MINE, N_ANON, N_COND, NAMED };

struct named {
	co_frame co;
	int how;
	co_io io;
	co_waiter w;
	co_when when;
	co_awaiter mine;
	struct limited_kid kid[2];
	co_frame *kids[2];
	co_engine *other;
	co_latch *latch;
	co_waitgroup *wg;
	co_chan *chan;
	co_cond *cond;
	co_mutex *mutex;
	co_event *ev;
	int item;
};

static const co_awaiter_ops anon_ops = { NULL, mine_suspend, NULL, mine_cancel, 0, NULL };

static int named_fn(co_frame *f)
{
	struct named *n = (struct named *)f;
	CO_BEGIN(f);
	for (int i = 0; i < 2; i++) {
		n->kid[i].ev = n->ev;
		co_init(&n->kid[i].co, limited_kid_fn);
		n->kids[i] = &n->kid[i].co;
	}
	if (n->how == N_SLEEP) {
		CO_AWAIT(f, co_sleep(&n->io, 3600 * CO_S));
	} else if (n->how == N_LATCH) {
		CO_AWAIT(f, co_latch_wait(&n->w, n->latch));
	} else if (n->how == N_GROUP) {
		CO_AWAIT(f, co_waitgroup_wait(&n->w, n->wg));
	} else if (n->how == N_SEND) {
		CO_AWAIT(f, co_chan_send(&n->w, n->chan, &n->item));
	} else if (n->how == N_ALL) {
		CO_AWAIT(f, co_when_all(&n->when, n->kids, 2));
	} else if (n->how == N_ANY) {
		CO_AWAIT(f, co_when_any(&n->when, n->kids, 2));
	} else if (n->how == N_ON) {
		CO_AWAIT(f, co_spawn_on(&n->when, n->other, n->kids[0]));
	} else if (n->how == N_COND) {
		if (co_mutex_trylock(n->mutex) == 0) {
			CO_AWAIT(f, co_cond_wait(&n->w, n->cond, n->mutex));
			co_mutex_unlock(n->mutex);
		}
	} else {
		n->mine.ops = n->how == N_MINE ? &mine_ops : &anon_ops;
		CO_AWAIT(f, &n->mine);
	}
	CO_END(f);
}

static void test_other_waits_named(void **state)
{
	static const char *const wait[NAMED] = { "sleep", "latch", "wait group", "channel send",
						 "when_all", "when_any", "spawn_on", "mine", "await", "condition" };
	struct named n[NAMED];
	co_engine e, other;
	co_event ev;
	co_latch latch;
	co_waitgroup wg;
	co_chan chan;
	co_cond cond;
	co_mutex mutex;
	int buf[1], got, full = 7;
	co_view v;
	(void)state;
	NEED_VIEW();
	assert_int_equal(co_event_init(&ev, 0), 0);
	assert_int_equal(co_latch_init(&latch, 1), 0);
	assert_int_equal(co_waitgroup_init(&wg), 0);
	assert_int_equal(co_waitgroup_add(&wg, 1), 0);
	assert_int_equal(co_chan_init(&chan, sizeof(int), 1, buf), 0);
	assert_int_equal(co_chan_try_send(&chan, &full), 0); /* full: a send waits */
	assert_int_equal(co_cond_init(&cond), 0);
	assert_int_equal(co_mutex_init(&mutex), 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_engine_init(&other, NULL), 0); /* never runs */
	memset(n, 0, sizeof n);
	for (int i = 0; i < NAMED; i++) {
		n[i].how = i;
		n[i].ev = &ev;
		n[i].latch = &latch;
		n[i].wg = &wg;
		n[i].chan = &chan;
		n[i].other = &other;
		n[i].cond = &cond;
		n[i].mutex = &mutex;
		co_init(&n[i].co, named_fn);
		assert_int_equal(co_engine_spawn(&e, &n[i].co), 0);
	}
	assert_true(co_engine_tick(&e) >= NAMED); /* each parks (a tick never waits) */
	assert_true(co_engine_tick(&e) >= 0);     /* and the when's children too */
	assert_int_equal(co_view_engine(&v, &e, 0), 0);
	for (int k = 0; k < NAMED; k++) {
		const co_view_frame *r = record_of(&v, &n[k].co);

		expect_waiting_on(r, wait[k], k);
		assert_null(r->inner);
		if (k == N_LATCH)
			assert_ptr_equal(r->object, &latch);
		else if (k == N_GROUP)
			assert_ptr_equal(r->object, &wg);
		else if (k == N_SEND)
			assert_ptr_equal(r->object, &chan);
		else if (k == N_ON)
			assert_ptr_equal(r->object, &other);
		else if (k == N_COND)
			assert_ptr_equal(r->object, &cond);
	}
	co_view_free(&v);
	/* let every wait end */
	assert_int_equal(co_event_set(&ev), 0);
	assert_int_equal(co_latch_count_down(&latch, 1), 0);
	assert_int_equal(co_waitgroup_done(&wg), 0);
	assert_int_equal(co_chan_try_recv(&chan, &got), 0);
	assert_int_equal(co_cond_signal(&cond), 0);
	assert_int_equal(co_cancel(&n[N_SLEEP].co), 0);
	assert_int_equal(co_cancel(&n[N_ON].co), 0); /* its child never started: finished for it */
	assert_int_equal(co_cancel(&n[N_MINE].co), 0);
	assert_int_equal(co_cancel(&n[N_ANON].co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	for (int i = 0; i < NAMED; i++)
		assert_true(co_done(&n[i].co));
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_engine_destroy(&other), 0);
	assert_int_equal(co_mutex_destroy(&mutex), 0); /* the waiter re-took it and let go */
	assert_int_equal(co_cond_destroy(&cond), 0);
	co_chan_destroy(&chan);
	co_waitgroup_destroy(&wg);
	co_latch_destroy(&latch);
	assert_int_equal(co_event_destroy(&ev), 0);
}

/* ---- the waits of the graph, the turn, the stream, the pool; a transfer ---------------- */

/* view.md, the `wait` table: a frame in co_graph_wait is "graph" with the
 * graph as object; co_next_turn is "next turn"; co_stream_recv and
 * co_stream_close are "stream recv" and "stream close"; co_pool_run is
 * "pool job". A frame in co_transfer_to does not wait: to its own context
 * it is CO_VIEW_NEXT_TURN; to another, once there, CO_VIEW_READY (the view
 * of a manual context between two ticks takes in what was sent to it).
 * Each frame parks on manual context M, whose ticks the test drives (a
 * tick submits at its end and takes completions at the start of the
 * next: a close waits for its multishot's last completion until then);
 * the graph's node runs on context T, and the traveller starts there and
 * moves to M while M is not ticked. */
enum { M_GRAPH, M_TURN, M_RECV, M_CLOSE, M_POOL, M_SELF, M_AWAY, MODULES };

struct module_waits {
	co_graph g;
	co_bufring b;
	co_pool pool;
	co_context *m;
	int sv[2][2], gate[2];
	atomic_int done;
};

struct module_waiter {
	co_frame co;
	int how, res;
	struct module_waits *mw;
	co_waiter w;
	co_turn turn;
	co_stream s;
	co_pool_job job;
	co_transfer tr;
};

/* The pool's job: until the test writes the gate. */
static int gate_job(void *arg)
{
	char c;

	return read(*(int *)arg, &c, 1) == 1 ? 0 : -EIO;
}

static void module_waiter_done(co_frame *f)
{
	atomic_fetch_add(&((struct module_waiter *)f)->mw->done, 1);
}

static int module_waiter_fn(co_frame *f)
{
	struct module_waiter *m = (struct module_waiter *)f;
	CO_BEGIN(f);
	if (m->how == M_GRAPH) {
		CO_AWAIT(f, co_graph_wait(&m->w, &m->mw->g));
	} else if (m->how == M_TURN) {
		CO_AWAIT(f, co_next_turn(&m->turn));
	} else if (m->how == M_RECV || m->how == M_CLOSE) {
		m->res = co_stream_open(&m->s, &m->mw->b, m->mw->sv[m->how == M_CLOSE][0]);
		if (m->res < 0)
			CO_RETURN(f, m->res);
		if (m->how == M_RECV) {
			CO_AWAIT(f, co_stream_recv(&m->s)); /* end of file once released */
			m->res = co_result(f);
		}
		CO_AWAIT(f, co_stream_close(&m->s));
	} else if (m->how == M_POOL) {
		CO_AWAIT(f, co_pool_run(&m->job, &m->mw->pool, gate_job, &m->mw->gate[0]));
	} else {
		CO_AWAIT(f, co_transfer_to(&m->tr, m->mw->m));
	}
	if (co_result(f) < 0)
		CO_RETURN(f, co_result(f));
	CO_RETURN(f, m->res);
	CO_END(f);
}

static void test_module_waits_named(void **state)
{
	static const co_sched_group groups[2] = { { .manual = 1 }, { .contexts = 1 } };
	static const char *const wait[MODULES] = { "graph",    "next turn", "stream recv",
						   "stream close", "pool job", NULL, NULL };
	static struct module_waits mw;
	struct module_waiter w[MODULES];
	struct co_test_idler node_fr;
	co_graph_node node;
	co_event ev;
	co_sched s;
	co_view v;
	int ticks = 0;
	(void)state;
	NEED_VIEW();
	alarm(60);
	memset(&mw, 0, sizeof mw);
	memset(w, 0, sizeof w);
	for (int i = 0; i < 2; i++)
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, mw.sv[i]), 0);
	assert_int_equal(pipe2(mw.gate, O_CLOEXEC), 0);
	assert_int_equal(co_event_init(&ev, 0), 0);
	assert_int_equal(co_pool_init(&mw.pool, 1), 0);
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .groups = groups, .ngroups = 2 }), 0);
	mw.m = co_sched_pick(&s, 0);
	assert_non_null(mw.m);
	/* by M's ticker, before its first tick */
	assert_int_equal(co_bufring_init(&mw.b, &mw.m->engine, 4, 64), 0);
	/* the graph: one node on T, held on ev */
	co_test_idler_init(&node_fr, &ev);
	assert_int_equal(co_graph_init(&mw.g), 0);
	assert_int_equal(co_graph_add(&mw.g, &node, &node_fr.co), 0);
	assert_int_equal(co_graph_spawn_kind(&mw.g, &s, 1), 0);
	for (int i = 0; i < MODULES; i++) {
		w[i].how = i;
		w[i].mw = &mw;
		co_init(&w[i].co, module_waiter_fn);
		w[i].co.on_done = module_waiter_done;
		if (i != M_AWAY)
			assert_int_equal(co_sched_spawn_kind(&s, 0, &w[i].co), 0);
	}
	assert_int_equal(co_context_tick(mw.m), M_AWAY); /* each runs once, and parks */
	/* the traveller, from T to M, which is not ticked meanwhile */
	assert_int_equal(co_sched_spawn_kind(&s, 1, &w[M_AWAY].co), 0);
	for (;;) { /* until it reached M (a hang guard only) */
		int there = 0;

		assert_int_equal(co_view_sched(&v, &s, CO_VIEW_WAIT), 0);
		assert_int_equal(v.contexts, 2);
		assert_int_equal(v.unanswered, 0);
		for (size_t i = 0; i < v.n; i++)
			there |= v.frames[i].frame == &w[M_AWAY].co && v.frames[i].context == 0;
		if (there)
			break;
		co_view_free(&v);
		usleep(1000);
	}
	for (int k = 0; k < MODULES; k++) {
		const co_view_frame *r = record_of(&v, &w[k].co);

		assert_int_equal(r->context, 0);
		if (k == M_SELF || k == M_AWAY) { /* a transfer does not wait */
			assert_int_equal(r->state, k == M_SELF ? CO_VIEW_NEXT_TURN : CO_VIEW_READY);
			assert_null(r->wait);
			assert_null(r->object);
			continue;
		}
		expect_waiting_on(r, wait[k], k);
		assert_null(r->inner);
		if (k == M_GRAPH)
			assert_ptr_equal(r->object, &mw.g);
	}
	assert_int_equal(v.n, MODULES + 1); /* these and the graph's node on T */
	co_view_free(&v);
	/* let every wait end: the node, the peer's end of file, the job */
	assert_int_equal(co_event_set(&ev), 0);
	assert_int_equal(shutdown(mw.sv[0][1], SHUT_WR), 0);
	assert_int_equal(write(mw.gate[1], "x", 1), 1);
	while (atomic_load(&mw.done) < MODULES) {
		assert_true(co_context_tick(mw.m) >= 0);
		if (++ticks > 100)
			usleep(1000); /* the wakes from T and the pool's worker */
	}
	for (int i = 0; i < MODULES; i++) {
		assert_true(co_done(&w[i].co));
		assert_int_equal(co_status(&w[i].co), 0);
	}
	assert_int_equal(co_graph_done(&mw.g), 1);
	co_sched_stop(&s, CO_STOP_DRAIN);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_bufring_destroy(&mw.b), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_graph_destroy(&mw.g), 0);
	assert_int_equal(co_pool_destroy(&mw.pool), 0);
	assert_int_equal(co_event_destroy(&ev), 0);
	for (int i = 0; i < 2; i++) {
		close(mw.sv[i][0]);
		close(mw.sv[i][1]);
	}
	close(mw.gate[0]);
	close(mw.gate[1]);
	alarm(0);
}

/* ---- I/O named by its opcode ------------------------------------------------------ */

/* view.md, the `wait` table: an I/O operation is named by its io_uring
 * opcode. Each frame parks on one that cannot complete: an accept on a
 * listener nobody connects to, a read of an empty pipe, a write to a full
 * pipe, a send on a socket whose buffer is full, a connect to a listener
 * whose backlog is full; and co_after_turns is "next turn" as co_next_turn
 * is. Then each is cancelled, and finishes. */
enum { I_ACCEPT, I_READ, I_WRITE, I_SEND, I_CONNECT, I_TURNS, IOS };

struct io_waiter {
	co_frame co;
	int how, fd;
	const struct sockaddr_un *to;
	co_io io;
	co_turn turn;
	char c;
};

static int io_waiter_fn(co_frame *f)
{
	struct io_waiter *w = (struct io_waiter *)f;
	CO_BEGIN(f);
	if (w->how == I_ACCEPT)
		CO_AWAIT(f, co_accept(&w->io, w->fd, NULL, NULL, 0));
	else if (w->how == I_READ)
		CO_AWAIT(f, co_read(&w->io, w->fd, &w->c, 1, 0));
	else if (w->how == I_WRITE)
		CO_AWAIT(f, co_write(&w->io, w->fd, &w->c, 1, 0));
	else if (w->how == I_SEND)
		CO_AWAIT(f, co_send(&w->io, w->fd, &w->c, 1, 0));
	else if (w->how == I_CONNECT)
		CO_AWAIT(f, co_connect(&w->io, w->fd, (const struct sockaddr *)w->to, sizeof *w->to));
	else
		CO_AWAIT(f, co_after_turns(&w->turn, 1000));
	CO_END(f);
}

/* Fill fd (made non-blocking) until it takes no more. */
static void fill(int fd)
{
	static char junk[4096];

	assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
	while (write(fd, junk, sizeof junk) > 0)
		;
	assert_int_equal(errno, EAGAIN);
}

static void test_io_waits_named(void **state)
{
	static const char *const wait[IOS] = { "accept", "read", "write", "send", "connect",
					       "next turn" };
	struct io_waiter w[IOS];
	struct sockaddr_un addr = { .sun_family = AF_UNIX }, full = { .sun_family = AF_UNIX };
	int lfd, rp[2], wp[2], sv[2], ffd, first, cfd;
	co_engine e;
	co_view v;
	(void)state;
	NEED_VIEW();
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(lfd >= 0);
	snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "coring-view-%d", (int)getpid());
	assert_int_equal(bind(lfd, (struct sockaddr *)&addr, sizeof addr), 0); /* abstract */
	assert_int_equal(listen(lfd, 1), 0);
	/* a listener with one connection waiting and a backlog of 0: the next
	 * connect waits for room */
	ffd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	first = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	cfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(ffd >= 0 && first >= 0 && cfd >= 0);
	snprintf(full.sun_path + 1, sizeof full.sun_path - 1, "coring-view-full-%d", (int)getpid());
	assert_int_equal(bind(ffd, (struct sockaddr *)&full, sizeof full), 0);
	assert_int_equal(listen(ffd, 0), 0);
	assert_int_equal(connect(first, (struct sockaddr *)&full, sizeof full), 0);
	assert_int_equal(pipe2(rp, O_CLOEXEC), 0);
	assert_int_equal(pipe2(wp, O_CLOEXEC), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fill(wp[1]);
	fill(sv[0]);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	memset(w, 0, sizeof w);
	for (int i = 0; i < IOS; i++) {
		w[i].how = i;
		w[i].fd = i == I_ACCEPT ? lfd : i == I_READ ? rp[0] : i == I_WRITE ? wp[1] : sv[0];
		if (i == I_CONNECT) {
			w[i].fd = cfd;
			w[i].to = &full;
		}
		co_init(&w[i].co, io_waiter_fn);
		assert_int_equal(co_engine_spawn(&e, &w[i].co), 0);
	}
	assert_int_equal(co_engine_tick(&e), IOS); /* each parks */
	assert_int_equal(co_engine_tick(&e), 0);   /* none of it completes */
	assert_int_equal(co_view_engine(&v, &e, 0), 0);
	assert_int_equal(v.n, IOS);
	for (int k = 0; k < IOS; k++) {
		const co_view_frame *r = record_of(&v, &w[k].co);

		expect_waiting_on(r, wait[k], k);
	}
	co_view_free(&v);
	for (int i = 0; i < IOS; i++)
		assert_int_equal(co_cancel(&w[i].co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	for (int i = 0; i < IOS; i++)
		assert_true(co_done(&w[i].co));
	assert_int_equal(co_engine_destroy(&e), 0);
	close(lfd);
	close(ffd);
	close(first);
	close(cfd);
	for (int i = 0; i < 2; i++) {
		close(rp[i]);
		close(wp[i]);
		close(sv[i]);
	}
}

/* ---- the text ------------------------------------------------------------------------ */

static char *read_all(int fd)
{
	static char buf[1 << 20];
	ssize_t n, got = 0;

	lseek(fd, 0, SEEK_SET);
	while ((n = read(fd, buf + got, sizeof buf - 1 - (size_t)got)) > 0)
		got += n;
	buf[got] = 0;
	return buf;
}

static void test_text_groups_and_counts(void **state)
{
	static struct parker p[3 * 50];
	static struct park_world pw;
	co_engine e;
	co_view v;
	const char *path = co_test_tmp_path("view", "text");
	int fd;
	char *text;
	(void)state;
	NEED_VIEW();
	world_init(&pw);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < 50; i++) {
			struct parker *q = &p[k * 50 + i];

			q->pw = &pw;
			co_init(&q->co, kind_fn[k]);
			q->co.on_done = parker_done;
			assert_int_equal(co_engine_spawn(&e, &q->co), 0);
		}
	assert_int_equal(co_engine_tick(&e), 150); /* all parked */
	assert_int_equal(co_view_engine(&v, &e, 0), 0);
	assert_int_equal(v.n, 150);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(co_view_print(&v, fd, CO_VIEW_EACH), 0);
	text = read_all(fd);
	print_message("%.600s...\n", text);
	assert_non_null(strstr(text, "coring view: 150 frames on 1 context\n"));
	assert_non_null(strstr(text, "\n50 waiting on event 0x"));
	assert_non_null(strstr(text, "\n50 waiting on mutex 0x"));
	assert_non_null(strstr(text, "\n50 waiting on semaphore 0x"));
	assert_non_null(strstr(text, "event_fn"));
	assert_non_null(strstr(text, "    on a lone engine\n"));
	{ /* CO_VIEW_EACH: one line per frame */
		size_t lines = 0;
		for (const char *q = text; (q = strstr(q, "\nframe 0x")) != NULL; q++)
			lines++;
		assert_int_equal(lines, 150);
	}
	close(fd);
	unlink(path);
	co_view_free(&v);
	world_release(&pw);
	while (atomic_load(&pw.done) < 150)
		assert_true(co_engine_tick(&e) >= 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	world_fini(&pw);
}

/* co_view_print of v into a file, read back (read_all's buffer). */
static const char *print_to_text(const co_view *v)
{
	const char *path = co_test_tmp_path("view", "contexts");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	char *text;

	assert_true(fd >= 0);
	assert_int_equal(co_view_print(v, fd, 0), 0);
	text = read_all(fd);
	print_message("%s", text);
	close(fd);
	unlink(path);
	return text;
}

/*
 * view.md, "As text": co_view_print writes "a header, one line per context
 * with frames with its count, and how many of the contexts that answered
 * have none" (a co_view keeps counts of the contexts it read, not a list).
 * A scheduler of two contexts with no frame: the view reads both
 * (v.contexts 2), and the text says both are without frames; with a frame
 * waiting on context 1, context 1 has its line and one context is without
 * frames.
 */
static void test_text_line_per_context(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	struct co_test_idler d;
	co_event ev;
	co_view v;
	const char *text;
	int waiting = 0;
	(void)state;
	NEED_VIEW();
	co_event_init(&ev, 0);
	assert_int_equal(co_sched_init(&s, &o), 0);
	assert_int_equal(co_view_sched(&v, &s, CO_VIEW_WAIT), 0);
	assert_int_equal(v.contexts, 2);
	assert_int_equal(v.unanswered, 0);
	assert_int_equal(v.n, 0);
	text = print_to_text(&v);
	co_view_free(&v);
	assert_non_null(strstr(text, "coring view: 0 frames on 2 contexts\n"));
	assert_non_null(strstr(text, "\n  2 contexts without frames\n"));
	assert_null(strstr(text, "context 0 (kind"));
	co_test_idler_init(&d, &ev);
	assert_int_equal(co_sched_spawn_to(&s, 1, &d.co), 0);
	for (;;) { /* until it waits on the event */
		assert_int_equal(co_view_sched(&v, &s, CO_VIEW_WAIT), 0);
		waiting = v.n == 1 && v.frames[0].state == CO_VIEW_WAITING;
		if (waiting)
			break;
		co_view_free(&v);
		usleep(1000);
	}
	text = print_to_text(&v);
	co_view_free(&v);
	co_event_set(&ev);
	co_sched_stop(&s, CO_STOP_DRAIN);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_non_null(strstr(text, "coring view: 1 frame on 2 contexts\n"));
	assert_non_null(strstr(text, "\n  context 1 (kind 0): 1 frame\n  1 context without frames\n"));
}

/*
 * view.md, "What a view holds": "context, kind: its context's index and
 * kind (group); -1 and 0 on a lone engine". co_view_engine of the engine
 * of a scheduler's context 1 (not a lone engine): its frame's record says
 * context 1, as co_view_sched's would.
 */
static void test_view_engine_of_a_context(void **state)
{
	co_sched s;
	co_sched_opts o = { .contexts = 2 };
	struct co_test_idler d;
	co_event ev;
	co_view v;
	int context = -2, waiting = 0;
	(void)state;
	NEED_VIEW();
	co_event_init(&ev, 0);
	assert_int_equal(co_sched_init(&s, &o), 0);
	co_test_idler_init(&d, &ev);
	assert_int_equal(co_sched_spawn_to(&s, 1, &d.co), 0);
	for (;;) { /* until it waits on the event */
		assert_int_equal(co_view_engine(&v, &s.ctx[1].engine, CO_VIEW_WAIT), 0);
		assert_int_equal(v.n, 1);
		waiting = v.frames[0].state == CO_VIEW_WAITING;
		context = v.frames[0].context;
		co_view_free(&v);
		if (waiting)
			break;
		usleep(1000);
	}
	co_event_set(&ev);
	co_sched_stop(&s, CO_STOP_DRAIN);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(context, 1);
}

/*
 * view.md: "on the engine's own thread (a frame, a post or an on_done that
 * takes the view) at once"; "an engine that runs nowhere (a context that
 * has not started ...) is read by the caller at once". context.h: a cancel
 * stop of a context whose thread never started "finishes the queued
 * frames at once, on the calling thread (their on_done sees -ECANCELED)".
 * A view of that context's engine from such an on_done: the calling
 * thread holds the engine borrowed (a borrow of its own would be
 * refused), so the view reads it at once: 0, the context read, nothing
 * unanswered (the finished frame is no longer listed), well within its
 * wait_ns.
 */
struct done_view {
	co_frame co;
	co_context *c;
	int res, status;
	unsigned contexts, unanswered;
	size_t n;
};

static int done_view_body(co_frame *f)
{
	CO_BEGIN(f);
	CO_END(f);
}

static void done_view_on_done(co_frame *f)
{
	struct done_view *d = (struct done_view *)f;
	co_view v;

	d->status = co_status(f);
	d->res = co_view_engine(&v, &d->c->engine, 100 * CO_MS);
	d->contexts = v.contexts;
	d->unanswered = v.unanswered;
	d->n = v.n;
	co_view_free(&v);
}

static void test_view_from_on_done_of_cancel_stop(void **state)
{
	co_context c;
	struct done_view d;
	(void)state;
	NEED_VIEW();
	memset(&d, 0, sizeof d);
	d.res = 1;
	d.c = &c;
	assert_int_equal(co_context_init(&c, NULL), 0);
	co_init(&d.co, done_view_body);
	d.co.on_done = done_view_on_done;
	assert_int_equal(co_context_spawn(&c, &d.co), 0);
	assert_int_equal(co_context_stop(&c, CO_STOP_CANCEL), 0); /* its on_done runs here */
	assert_int_equal(d.status, -ECANCELED);
	assert_int_equal(co_context_destroy(&c), 0);
	assert_int_equal(d.res, 0);
	assert_int_equal(d.unanswered, 0);
	assert_int_equal(d.contexts, 1);
	assert_int_equal(d.n, 0);
}

/* ---- errors ------------------------------------------------------------------------ */

static void test_view_errors(void **state)
{
	co_sched s, zero;
	co_view v, empty;
	co_view_frame f;
	char buf[8];
	int full = open("/dev/full", O_WRONLY | O_CLOEXEC);
	(void)state;
	NEED_VIEW();
	memset(&zero, 0, sizeof zero);
	assert_int_equal(co_view_sched(NULL, &zero, 0), -EINVAL);
	assert_int_equal(co_view_sched(&v, NULL, 0), -EINVAL);
	assert_int_equal(co_view_sched(&v, &zero, 0), -EINVAL); /* never set up */
	assert_int_equal(v.n, 0);
	assert_int_equal(co_view_engine(NULL, NULL, 0), -EINVAL);
	assert_int_equal(co_view_engine(&v, NULL, 0), -EINVAL);
	assert_int_equal(co_sched_init(&s, NULL), 0);
	assert_int_equal(co_view_sched(&v, &s, UINT64_MAX), 0); /* no limit: answers */
	assert_int_equal(v.n, 0);
	assert_int_equal(co_view_print(&v, -1, 0), -EINVAL);
	assert_int_equal(co_view_print(NULL, 1, 0), -EINVAL);
	assert_int_equal(co_view_print(&v, 1, 2), -EINVAL); /* unknown flag */
	assert_int_equal(co_view_print(&v, 1000000, 0), -EBADF);
	{ /* a pipe nobody reads, SIGPIPE's default action (the end of the
	     process): -EPIPE, and no SIGPIPE left pending or delivered; one
	     pending before the print stays */
		int p[2];
		void (*was)(int) = signal(SIGPIPE, SIG_DFL);
		sigset_t pipe_only, old, pending;
		struct timespec now = { 0, 0 };

		assert_int_equal(pipe(p), 0);
		close(p[0]);
		assert_int_equal(co_view_print(&v, p[1], 0), -EPIPE);
		assert_int_equal(sigpending(&pending), 0);
		assert_false(sigismember(&pending, SIGPIPE));
		sigemptyset(&pipe_only);
		sigaddset(&pipe_only, SIGPIPE);
		pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
		assert_int_equal(pthread_kill(pthread_self(), SIGPIPE), 0);
		assert_int_equal(co_view_print(&v, p[1], 0), -EPIPE);
		assert_int_equal(sigpending(&pending), 0);
		assert_true(sigismember(&pending, SIGPIPE));
		assert_int_equal(sigtimedwait(&pipe_only, NULL, &now), SIGPIPE);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		signal(SIGPIPE, was);
		close(p[1]);
	}
	if (full >= 0) {
		assert_int_equal(co_view_print(&v, full, 0), -ENOSPC);
		close(full);
	}
	co_view_free(&v);
	co_view_free(&v); /* twice: empty already */
	co_view_free(NULL);
	co_sched_stop(&s, CO_STOP_DRAIN);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_view_sched(&v, &s, 0), -EINVAL); /* destroyed */
	/* a place: NULL, a short buffer (cut, the length it needed) */
	memset(&f, 0, sizeof f);
	f.at_fn = event_fn;
	f.at_label = 0;
	assert_int_equal(co_view_place(NULL, buf, sizeof buf), -EINVAL);
	assert_int_equal(co_view_place(&f, NULL, 4), -EINVAL);
	{
		int need = co_view_place(&f, buf, sizeof buf);
		char big[256];
		assert_true(need > (int)sizeof buf);
		assert_int_equal(strlen(buf), sizeof buf - 1);
		assert_int_equal(co_view_place(&f, big, sizeof big), need);
		assert_non_null(strstr(big, "event_fn (not started)"));
		assert_int_equal(co_view_place(&f, NULL, 0), need);
	}
	memset(&empty, 0, sizeof empty);
	empty.n = 3; /* frames NULL */
	assert_int_equal(co_view_print(&empty, 1, 0), -EINVAL);
}

/* A view whose request to an engine cannot be allocated: -ENOMEM, and v
 * empty, though a context read before that one answered; the next view
 * reads them all. */
static void test_view_no_memory(void **state)
{
	struct co_test_idler d, sd[2];
	co_engine e;
	co_event ev;
	co_sched s;
	co_view v;
	(void)state;
	NEED_VIEW();
	co_event_init(&ev, 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_test_idler_init(&d, &ev);
	assert_int_equal(co_engine_spawn(&e, &d.co), 0);
	assert_int_equal(co_engine_tick(&e), 1);
	co__fault_arm(CO__FAULT_ALLOC, 1, ENOMEM);
	assert_int_equal(co_view_engine(&v, &e, CO_VIEW_WAIT), -ENOMEM);
	co__fault_arm(CO__FAULT_ALLOC, 0, 0);
	assert_int_equal(v.n, 0);
	assert_null(v.frames);
	assert_int_equal(v.contexts, 0);
	assert_int_equal(co_view_engine(&v, &e, CO_VIEW_WAIT), 0);
	assert_int_equal(v.n, 1);
	assert_int_equal(v.frames[0].state, CO_VIEW_WAITING);
	co_view_free(&v);
	/* two contexts whose threads run: the first is asked and answers,
	 * the second's request fails */
	assert_int_equal(co_sched_init(&s, &(co_sched_opts){ .contexts = 2 }), 0);
	for (unsigned i = 0; i < 2; i++) {
		co_test_idler_init(&sd[i], &ev);
		assert_int_equal(co_sched_spawn_to(&s, i, &sd[i].co), 0);
	}
	for (;;) {
		size_t waiting = 0;

		assert_int_equal(co_view_sched(&v, &s, CO_VIEW_WAIT), 0);
		for (size_t i = 0; i < v.n; i++)
			waiting += v.frames[i].state == CO_VIEW_WAITING;
		co_view_free(&v);
		if (waiting == 2)
			break;
		usleep(1000);
	}
	co__fault_arm(CO__FAULT_ALLOC, 2, ENOMEM);
	assert_int_equal(co_view_sched(&v, &s, CO_VIEW_WAIT), -ENOMEM);
	co__fault_arm(CO__FAULT_ALLOC, 0, 0);
	assert_int_equal(v.n, 0);
	assert_null(v.frames);
	assert_int_equal(v.contexts, 0);
	assert_int_equal(co_view_sched(&v, &s, CO_VIEW_WAIT), 0);
	assert_int_equal(v.n, 2);
	assert_int_equal(v.contexts, 2);
	co_view_free(&v);
	co_event_set(&ev);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	co_sched_stop(&s, CO_STOP_DRAIN);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	co_event_destroy(&ev);
}

/* ---- a list that cannot grow -------------------------------------------------------- */

/* The list starts with room for 15 frames; when it cannot grow, the
 * frames it could not take run all the same and are counted unlisted. */
static void test_unlisted_when_list_cannot_grow(void **state)
{
	static struct parker p[40];
	static struct park_world pw;
	co_engine e;
	co_view v;
	(void)state;
	NEED_VIEW();
	world_init(&pw);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	for (int i = 0; i < 40; i++) {
		p[i].pw = &pw;
		co_init(&p[i].co, event_fn);
		p[i].co.on_done = parker_done;
		assert_int_equal(co_engine_spawn(&e, &p[i].co), 0);
	}
	/* the tick takes them in: the list's growth fails */
	co__fault_arm_range(CO__FAULT_ALLOC, 1, 1000, ENOMEM);
	assert_int_equal(co_engine_tick(&e), 40);
	co__fault_arm(CO__FAULT_ALLOC, 0, 0);
	assert_int_equal(co_view_engine(&v, &e, 0), 0);
	assert_int_equal(v.n, 15);
	assert_int_equal(v.unlisted, 25);
	co_view_free(&v);
	co_event_set(&pw.ev);
	while (atomic_load(&pw.done) < 40)
		assert_true(co_engine_tick(&e) >= 0);
	assert_int_equal(atomic_load(&pw.ok), 40);
	assert_int_equal(co_view_engine(&v, &e, 0), 0);
	assert_int_equal(v.n + v.unlisted, 0);
	co_view_free(&v);
	assert_int_equal(co_engine_destroy(&e), 0);
	co_mutex_unlock(&pw.m);
	co_sem_release(&pw.sem, 0);
	world_fini(&pw);
}

/* ---- the list itself ----------------------------------------------------------------- */

struct heap_frame {
	co_frame co;
	co_io io;
};

static int heap_fn(co_frame *f)
{
	struct heap_frame *h = (struct heap_frame *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&h->io));
	CO_END(f);
}

static void heap_done(co_frame *f)
{
	free(f); /* the on_done frees it: the list must not keep it */
}

/* Frames whose on_done frees them: every slot of the list is free once
 * they finished (a slot kept would be read by the next view, freed). */
static void test_finished_frames_leave_the_list(void **state)
{
	co_engine e;
	co_view v;
	unsigned cap = 0;
	(void)state;
	NEED_VIEW();
	assert_int_equal(co_engine_init(&e, NULL), 0);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 50; i++) {
			struct heap_frame *h = malloc(sizeof *h);

			assert_non_null(h);
			co_init(&h->co, heap_fn);
			h->co.on_done = heap_done;
			assert_int_equal(co_engine_spawn(&e, &h->co), 0);
		}
		assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
		for (unsigned i = 1; i < e.view_n; i++)
			assert_null(e.view[i].f);
		assert_true(e.view_n <= 51); /* freed slots were taken again */
		/* the list keeps its highest size, with no frame live */
		if (round == 0)
			cap = e.view_cap;
		assert_true(cap >= 51);
		assert_int_equal(e.view_cap, cap);
		assert_int_equal(co_view_engine(&v, &e, 0), 0);
		assert_int_equal(v.n + v.unlisted, 0);
		co_view_free(&v);
	}
	assert_int_equal(co_engine_destroy(&e), 0);
	if (sizeof(void *) == 8)
		assert_int_equal(sizeof(struct co__view_slot), 16); /* per frame live at once */
}

struct napper {
	co_frame co;
	co_io io;
	co_waiter w;
	co_event *ev;
};

static int napper_fn(co_frame *f)
{
	struct napper *n = (struct napper *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep(&n->io, 60 * 1000000ull));
	CO_AWAIT(f, co_event_wait(&n->w, n->ev));
	CO_END(f);
}

/* since is the turn it last ran in, not the one it was listed in: a frame
 * that slept 60 ms, then ran and parked, has since >= spawn + 60 ms (less
 * the coarse clock's step). */
static void test_since_is_last_run(void **state)
{
	co_engine e;
	co_event ev;
	struct napper n;
	co_view v;
	uint64_t t0;
	int parked = 0;
	(void)state;
	NEED_VIEW();
	co_event_init(&ev, 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	n.ev = &ev;
	co_init(&n.co, napper_fn);
	t0 = coarse_now();
	assert_int_equal(co_engine_spawn(&e, &n.co), 0);
	while (!parked) { /* tick until it parks on the event, after its sleep */
		assert_true(co_engine_tick(&e) >= 0);
		assert_int_equal(co_view_engine(&v, &e, 0), 0);
		assert_int_equal(v.n, 1);
		parked = v.frames[0].wait && strcmp(v.frames[0].wait, "event") == 0;
		if (parked) {
			assert_true(v.frames[0].since_ns >= t0 + 45 * 1000000ull);
			assert_true(v.frames[0].since_ns <= v.at_ns);
		} else {
			usleep(1000);
		}
		co_view_free(&v);
	}
	co_event_set(&ev);
	while (!co_done(&n.co))
		assert_true(co_engine_tick(&e) >= 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	co_event_destroy(&ev);
}

/* The turn's stamp is the CPU's counter where it keeps time: on x86-64 a
 * kernel whose clocksource is the tsc, or a CPU whose flags say its counter
 * is invariant and reliable (a kvm-clock guest's); else the coarse clock.
 * The engine's choice on this machine is the one its files give. */
static void test_stamp_counter_choice(void **state)
{
	static const char reliable[] = "fpu tsc msr constant_tsc rep_good nopl nonstop_tsc "
				       "cpuid tsc_known_freq tsc_reliable pni\n";
	(void)state;
	assert_int_equal(co__stamp_pick("tsc\n", NULL), CO__STAMP_TSC);
	assert_int_equal(co__stamp_pick("kvm-clock\n", reliable), CO__STAMP_TSC);
	assert_int_equal(co__stamp_pick(NULL, reliable), CO__STAMP_TSC);
	/* one of the three missing, or a word that only contains one */
	assert_int_equal(co__stamp_pick("kvm-clock\n", "flags : constant_tsc nonstop_tsc\n"),
			 CO__STAMP_COARSE);
	assert_int_equal(co__stamp_pick("kvm-clock\n", "constant_tsc tsc_reliable\n"),
			 CO__STAMP_COARSE);
	assert_int_equal(co__stamp_pick("hpet\n", "xconstant_tsc nonstop_tsc tsc_reliable\n"),
			 CO__STAMP_COARSE);
	assert_int_equal(co__stamp_pick("hpet\n", "constant_tsc nonstop_tsc tsc_reliablex\n"),
			 CO__STAMP_COARSE);
	assert_int_equal(co__stamp_pick("tsc", NULL), CO__STAMP_COARSE); /* not the whole line */
	assert_int_equal(co__stamp_pick(NULL, NULL), CO__STAMP_COARSE);
#if defined(__x86_64__)
	{
		char name[64] = "", flags[4096] = "";
		int have_name = 0, have_flags = 0;
		FILE *fp = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");

		if (fp) {
			have_name = fgets(name, sizeof name, fp) != NULL;
			fclose(fp);
		}
		fp = fopen("/proc/cpuinfo", "r");
		if (fp) {
			while (fgets(flags, sizeof flags, fp))
				if (strncmp(flags, "flags", 5) == 0) {
					have_flags = 1;
					break;
				}
			fclose(fp);
		}
		co__stamp_init();
		assert_int_equal(co__stamp_kind, co__stamp_pick(have_name ? name : NULL,
								 have_flags ? flags : NULL));
	}
#endif
}

/* The step that keeps one record per frame: the first one, in order. */
static void test_twice_seen_frames_kept_once(void **state)
{
	co_frame a, b, c;
	co_view v;
	const co_frame *order[] = { &a, &b, &a, &c, &b, &b };
	(void)state;
	NEED_VIEW();
	memset(&v, 0, sizeof v);
	v.frames = calloc(6, sizeof *v.frames);
	assert_non_null(v.frames);
	for (int i = 0; i < 6; i++) {
		v.frames[i].frame = order[i];
		v.frames[i].context = i;
	}
	v.n = 6;
	assert_int_equal(co__view_drop_twice_seen(&v), 0);
	assert_int_equal(v.n, 3);
	assert_ptr_equal(v.frames[0].frame, &a);
	assert_int_equal(v.frames[0].context, 0);
	assert_ptr_equal(v.frames[1].frame, &b);
	assert_int_equal(v.frames[1].context, 1);
	assert_ptr_equal(v.frames[2].frame, &c);
	assert_int_equal(v.frames[2].context, 3);
	co_view_free(&v);
}

/* ---- a view that races the engine's destroy ------------------------------------------ */

/*
 * engine.h, co_engine_destroy: "afterwards the library never touches *e
 * again ... it waits for other threads still returning from a call on
 * e"; engine.md: "destroy it and set it up again". view.md: "an engine
 * that runs on its thread gets a request, which its next loop turn
 * answers" and "A request never waits on an engine that will not turn
 * again". A co_view_engine from another thread asks an engine whose frame
 * holds the thread; the frame then ends, and the run (UNTIL_IDLE, nothing
 * live) may return without another turn: it answers the request before it
 * returns, so none is left in the engine (view_req NULL). Its owner then
 * destroys the engine and sets it up again at the same address. Expected:
 * the view answered (0, nothing unanswered) or refused (-EINVAL:
 * destroyed meanwhile), never a wait on the new engine, which does not
 * hold its request.
 */
struct race_view {
	co_engine e;
	co_view v;
	int res;
	atomic_int done;
};

static struct race_view rv;

static int race_spin_fn(co_frame *f)
{
	CO_BEGIN(f);
	/* hold the thread until the viewer's request is published (or the
	 * view is over: it was answered before the run took the engine) */
	while (atomic_load(&rv.e.view_req) == NULL && !atomic_load(&rv.done))
		;
	CO_END(f);
}

static void *race_viewer(void *arg)
{
	(void)arg;
	rv.res = co_view_engine(&rv.v, &rv.e, 100 * CO_MS);
	atomic_store(&rv.done, 1);
	return NULL;
}

static void test_view_races_destroy_and_init(void **state)
{
	(void)state;
	NEED_VIEW();
	for (int round = 0; round < 5; round++) {
		co_frame f;
		pthread_t t;

		atomic_store(&rv.done, 0);
		assert_int_equal(co_engine_init(&rv.e, NULL), 0);
		co_init(&f, race_spin_fn);
		assert_int_equal(co_engine_spawn(&rv.e, &f), 0);
		assert_int_equal(pthread_create(&t, NULL, race_viewer, NULL), 0);
		assert_int_equal(co_engine_run(&rv.e, CO_RUN_UNTIL_IDLE), 0);
		assert_null(atomic_load(&rv.e.view_req)); /* answered: none pending */
		assert_int_equal(co_engine_destroy(&rv.e), 0);
		assert_int_equal(co_engine_init(&rv.e, NULL), 0); /* set up again */
		pthread_join(t, NULL);
		if (rv.res == 0)
			assert_int_equal(rv.v.unanswered, 0);
		else
			assert_int_equal(rv.res, -EINVAL);
		co_view_free(&rv.v);
		assert_int_equal(co_engine_destroy(&rv.e), 0);
	}
}

/*
 * engine.h, co_engine_destroy: "it waits for other threads still returning
 * from a call on e". A co_view_engine from another thread has published
 * its request to an engine that runs nowhere and waits, outside any visit,
 * for its answer (held at CO__POINT_VIEW_WAITS until the engine is
 * dying, or set up again); the owner destroys the engine meanwhile and
 * sets it up again at the same address. The destroy waits for the view,
 * which sees the engine dying and takes its request back: -EINVAL. A
 * destroy that did not wait would let the view go on with the new engine,
 * which never holds its request: it would wait its whole wait_ns and
 * count the engine unanswered.
 */
static struct {
	co_engine e;
	co_view v;
	int res;
	atomic_int waits, again;
} dv;

static void view_waits_for_destroy(void *arg)
{
	(void)arg;
	if (atomic_exchange(&dv.waits, 1))
		return; /* its first look only */
	while (co_engine_state(&dv.e) != CO_ENGINE_DYING && !atomic_load(&dv.again))
		sched_yield();
}

static void *destroy_viewer(void *arg)
{
	(void)arg;
	dv.res = co_view_engine(&dv.v, &dv.e, 100 * CO_MS);
	return NULL;
}

static void test_destroy_waits_for_a_view(void **state)
{
	pthread_t t;
	(void)state;
	NEED_VIEW();
	atomic_store(&dv.waits, 0);
	atomic_store(&dv.again, 0);
	assert_int_equal(co_engine_init(&dv.e, NULL), 0);
	co__fault_on_point(CO__POINT_VIEW_WAITS, view_waits_for_destroy, NULL);
	assert_int_equal(pthread_create(&t, NULL, destroy_viewer, NULL), 0);
	while (!atomic_load(&dv.waits)) /* published, waiting */
		sched_yield();
	assert_int_equal(co_engine_destroy(&dv.e), 0);
	assert_int_equal(co_engine_init(&dv.e, NULL), 0); /* set up again */
	atomic_store(&dv.again, 1);
	pthread_join(t, NULL);
	co__fault_on_point(CO__POINT_VIEW_WAITS, NULL, NULL);
	assert_int_equal(dv.res, -EINVAL);
	co_view_free(&dv.v);
	assert_int_equal(co_engine_destroy(&dv.e), 0);
}

/*
 * view.md, "How it is taken": a view of an engine whose destroy decides
 * (DYING, held open by a post from another thread held inside its visit,
 * at CO__POINT_VISIT_PUSH) waits for the destroy's answer, as every other
 * call from another thread does (engine.md, "The threading rule"). The
 * destroy finds the post pending (-EBUSY) and the engine lives on: the
 * view goes on and lists its frame. The view's wait at
 * CO__POINT_DESTROY_WAITS releases the post. Either the view is asked
 * while the destroy decides (asked_while_dying), or it waits for an
 * answer (held at CO__POINT_VIEW_WAITS) when the destroy comes. Both
 * answered -EINVAL on an engine that lived on.
 */
static struct {
	co_engine e;
	co_post p;
	co_view v;
	atomic_int view_rc, destroy_rc, post_rc;
	atomic_int inside, release, view_waits, answer_waits, posts_run;
} bd;

static _Thread_local int bd_poster, bd_viewer;

static void bd_hold_post(void *arg)
{
	(void)arg;
	if (!bd_poster)
		return;
	atomic_store(&bd.inside, 1);
	while (!atomic_load(&bd.release))
		sched_yield();
}

/* The viewer waits for the destroy's answer: the post may go on. */
static void bd_answer_waits(void *arg)
{
	(void)arg;
	if (!bd_viewer)
		return;
	atomic_fetch_add(&bd.answer_waits, 1);
	atomic_store(&bd.release, 1);
}

/* The viewer's first wait for its answer: until the destroy decides. */
static void bd_view_waits(void *arg)
{
	(void)arg;
	if (atomic_exchange(&bd.view_waits, 1))
		return;
	while (co_engine_state(&bd.e) != CO_ENGINE_DYING && atomic_load(&bd.destroy_rc) == INT_MIN)
		sched_yield();
}

static void bd_post_fn(co_post *p)
{
	(void)p;
	atomic_fetch_add(&bd.posts_run, 1);
}

static void *bd_post(void *arg)
{
	(void)arg;
	bd_poster = 1;
	atomic_store(&bd.post_rc, co_engine_post(&bd.e, &bd.p));
	return NULL;
}

static void *bd_destroy(void *arg)
{
	(void)arg;
	atomic_store(&bd.destroy_rc, co_engine_destroy(&bd.e));
	return NULL;
}

static void *bd_view(void *arg)
{
	(void)arg;
	bd_viewer = 1;
	atomic_store(&bd.view_rc, co_view_engine(&bd.v, &bd.e, CO_VIEW_WAIT));
	return NULL;
}

static void view_and_busy_destroy(int asked_while_dying)
{
	struct co_test_idler d;
	co_event ev;
	pthread_t poster, destroyer, viewer;

	alarm(30);
	memset(&bd, 0, sizeof bd);
	bd.p.fn = bd_post_fn;
	atomic_init(&bd.view_rc, INT_MIN);
	atomic_init(&bd.destroy_rc, INT_MIN);
	atomic_init(&bd.post_rc, INT_MIN);
	co_event_init(&ev, 0);
	assert_int_equal(co_engine_init(&bd.e, NULL), 0);
	co_test_idler_init(&d, &ev);
	assert_int_equal(co_engine_spawn(&bd.e, &d.co), 0);
	co__fault_on_point(CO__POINT_VISIT_PUSH, bd_hold_post, NULL);
	co__fault_on_point(CO__POINT_DESTROY_WAITS, bd_answer_waits, NULL);
	if (!asked_while_dying) {
		co__fault_on_point(CO__POINT_VIEW_WAITS, bd_view_waits, NULL);
		assert_int_equal(pthread_create(&viewer, NULL, bd_view, NULL), 0);
		WAIT_UNTIL(atomic_load(&bd.view_waits) || atomic_load(&bd.view_rc) != INT_MIN);
	}
	assert_int_equal(pthread_create(&poster, NULL, bd_post, NULL), 0);
	WAIT_UNTIL(atomic_load(&bd.inside));
	assert_int_equal(pthread_create(&destroyer, NULL, bd_destroy, NULL), 0);
	WAIT_UNTIL(co_engine_state(&bd.e) == CO_ENGINE_DYING || atomic_load(&bd.destroy_rc) != INT_MIN);
	if (asked_while_dying)
		assert_int_equal(pthread_create(&viewer, NULL, bd_view, NULL), 0);
	/* the view waits for the answer (and releases the post), or came back */
	WAIT_UNTIL(atomic_load(&bd.answer_waits) || atomic_load(&bd.view_rc) != INT_MIN);
	atomic_store(&bd.release, 1);
	assert_int_equal(pthread_join(viewer, NULL), 0);
	assert_int_equal(pthread_join(destroyer, NULL), 0);
	assert_int_equal(pthread_join(poster, NULL), 0);
	co__fault_on_point(CO__POINT_VISIT_PUSH, NULL, NULL);
	co__fault_on_point(CO__POINT_DESTROY_WAITS, NULL, NULL);
	co__fault_on_point(CO__POINT_VIEW_WAITS, NULL, NULL);
	assert_int_equal(atomic_load(&bd.post_rc), 0);
	assert_int_equal(atomic_load(&bd.destroy_rc), -EBUSY); /* the post, the frame */
	assert_int_equal(atomic_load(&bd.view_rc), 0);
	assert_true(atomic_load(&bd.answer_waits) >= 1);
	assert_int_equal(bd.v.contexts, 1);
	assert_int_equal(bd.v.unanswered, 0);
	assert_int_equal(bd.v.n, 1);
	assert_ptr_equal(bd.v.frames[0].frame, &d.co);
	assert_int_equal(bd.v.frames[0].state, CO_VIEW_READY);
	co_view_free(&bd.v);
	/* the engine lived on: the post and the frame run, then it goes */
	co_event_set(&ev);
	assert_int_equal(co_engine_run(&bd.e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(atomic_load(&bd.posts_run), 1);
	assert_true(co_done(&d.co));
	assert_int_equal(co_engine_destroy(&bd.e), 0);
	co_event_destroy(&ev);
	alarm(0);
}

static void test_view_asked_while_busy_destroy_decides(void **state)
{
	(void)state;
	NEED_VIEW();
	view_and_busy_destroy(1);
}

static void test_view_waiting_outlives_busy_destroy(void **state)
{
	(void)state;
	NEED_VIEW();
	view_and_busy_destroy(0);
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lists_five_kinds_of_wait),
		cmocka_unit_test(test_view_while_running),
		cmocka_unit_test(test_view_from_a_frame),
		cmocka_unit_test(test_views_from_two_contexts_at_once),
		cmocka_unit_test(test_view_manual_context),
		cmocka_unit_test(test_view_unanswered),
		cmocka_unit_test(test_every_engine_asked_first),
		cmocka_unit_test(test_view_given_up_after_taken),
		cmocka_unit_test(test_view_lone_engine),
		cmocka_unit_test(test_view_lone_context),
	cmocka_unit_test(test_limits_named_by_their_wait),
		cmocka_unit_test(test_other_waits_named),
		cmocka_unit_test(test_module_waits_named),
		cmocka_unit_test(test_io_waits_named),
		cmocka_unit_test(test_text_groups_and_counts),
		cmocka_unit_test(test_text_line_per_context),
		cmocka_unit_test(test_view_engine_of_a_context),
		cmocka_unit_test(test_view_from_on_done_of_cancel_stop),
		cmocka_unit_test(test_view_errors),
		cmocka_unit_test(test_view_no_memory),
		cmocka_unit_test(test_unlisted_when_list_cannot_grow),
		cmocka_unit_test(test_finished_frames_leave_the_list),
		cmocka_unit_test(test_since_is_last_run),
		cmocka_unit_test(test_stamp_counter_choice),
		cmocka_unit_test(test_twice_seen_frames_kept_once),
		cmocka_unit_test(test_view_races_destroy_and_init),
		cmocka_unit_test(test_destroy_waits_for_a_view),
		cmocka_unit_test(test_view_asked_while_busy_destroy_decides),
		cmocka_unit_test(test_view_waiting_outlives_busy_destroy),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
