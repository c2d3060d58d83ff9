/* SPDX-License-Identifier: MIT */
/*
 * The lifecycle trace (docs/tracing.md): known programs give exactly the
 * expected events in order (a generator, an echo exchange over loopback,
 * a transfer between two contexts, a cancelled wait, time limits, a
 * co_loop run); a full buffer drops the oldest and counts; the stream
 * loses nothing it can keep; dumps from other threads while threads
 * record (TSan); every error path. Built without tracing, the API says
 * so (compiled_out) and the other cases skip.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <coring/channel.h>
#include <coring/io.h>
#include <coring/scheduler.h>
#include <coring/stream.h>
#include <coring/sync.h>
#include <coring/timeout.h>
#include <coring/trace.h>
#define CO_LOOP_TRACE(f, what) co_trace_frame((f), (what))
#include <coring/loop.h>

#include "helpers.h"
#include "trace_file.h"
#include "common/awaiter.h"
#include "common/fault.h"

#define NEED_TRACE()                                                           \
	do {                                                                   \
		if (!co_trace_available())                                     \
			skip(); /* built without tracing: compiled_out checks */ \
	} while (0)

/* A fresh file name in a directory of this process's own. */
static const char *tmp_path(const char *name)
{
	return co_test_tmp_path("coring-trace", name);
}

/* Start a session with opts, run fn, stop (the file written), read it. */
static void start(unsigned events, const char *path)
{
	co_trace_opts o = { .events = events, .path = path };

	assert_int_equal(co_trace_start(&o), 0);
}

static void stop_and_read(const char *path, struct tfile *tf)
{
	assert_int_equal(co_trace_stop(), 0);
	assert_int_equal(tfile_read(path, tf), 0);
	unlink(path);
}

/* Time order, a thread's own order kept (file order breaks ties). */
static int by_time(const void *x, const void *y)
{
	const struct tev *a = x, *b = y;

	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The events of one frame, in time order; n returned. */
static size_t of_frame(struct tfile *tf, const void *frame, struct tev **out)
{
	size_t n = 0;

	*out = calloc(tf->n ? tf->n : 1, sizeof **out);
	for (size_t i = 0; i < tf->n; i++)
		if (tf->ev[i].frame == (uint64_t)(uintptr_t)frame) {
			(*out)[n] = tf->ev[i];
			(*out)[n++].seq = i;
		}
	qsort(*out, n, sizeof **out, by_time);
	return n;
}

static void expect_kinds(const struct tev *ev, size_t n, const unsigned *kinds, size_t nk)
{
	for (size_t i = 0; i < n && i < nk; i++)
		if (ev[i].kind != kinds[i])
			fail_msg("event %zu is kind %u, expected %u", i, ev[i].kind, kinds[i]);
	assert_int_equal(n, nk);
}

#define P(x) ((uint64_t)(uintptr_t)(x))
#define EXPECT(ev, n, ...)                                                        \
	do {                                                                      \
		static const unsigned k_[] = { __VA_ARGS__ };                     \
		expect_kinds((ev), (n), k_, sizeof k_ / sizeof k_[0]);            \
	} while (0)

enum { SPAWN = CO_TRACE_SPAWN, START = CO_TRACE_START, RESUME = CO_TRACE_RESUME,
       YIELD = CO_TRACE_YIELD, WAIT = CO_TRACE_WAIT, WAKE = CO_TRACE_WAKE, DONE = CO_TRACE_DONE,
       TRANSFER = CO_TRACE_TRANSFER, STEAL = CO_TRACE_STEAL, CANCEL = CO_TRACE_CANCEL, TIMEOUT = CO_TRACE_TIMEOUT,
       SUBMIT = CO_TRACE_SUBMIT, COMPLETE = CO_TRACE_COMPLETE, RUN = CO_TRACE_RUN,
       CONTEXT = CO_TRACE_CONTEXT, FOLLOW = CO_TRACE_FOLLOW };

/* ---- a generator on an engine ------------------------------------------ */

struct gen {
	co_frame co;
	int i, value;
};

static int gen_fn(co_frame *f)
{
	struct gen *g = (struct gen *)f;

	CO_BEGIN(f);
	for (g->i = 0; g->i < 2; g->i++)
		CO_YIELD_VALUE(f, g->value, g->i);
	CO_YIELD(f);
	CO_RETURN(f, -EPIPE);
	CO_END(f);
}

static void test_generator(void **state)
{
	const char *path = tmp_path("gen.trace");
	struct gen g;
	struct tfile tf;
	struct tev *ev;
	co_engine e;
	size_t n;
	(void)state;
	NEED_TRACE();
	start(1024, path);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&g.co, gen_fn);
	assert_int_equal(co_engine_spawn(&e, &g.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	stop_and_read(path, &tf);

	n = of_frame(&tf, &g.co, &ev);
	EXPECT(ev, n, SPAWN, START, YIELD, RESUME, YIELD, RESUME, YIELD, RESUME, DONE);
	assert_int_equal(ev[0].a, P(gen_fn));
	assert_int_equal(ev[0].b, P(&e));
	assert_int_equal(ev[1].b, 0); /* started from the beginning */
	/* two yields on one line, then another: each resume continues where
	 * the yield before it stopped */
	assert_int_equal(ev[2].b, ev[4].b);
	assert_int_not_equal(ev[4].b, ev[6].b);
	for (size_t i = 1; i < n; i++) {
		assert_int_equal(ev[i].e, P(&e));
		assert_int_equal(ev[i].thread, ev[1].thread);
		if (ev[i].kind != DONE) {
			assert_int_equal(ev[i].a, P(gen_fn));
			assert_int_equal(ev[i].c, P(gen_fn)); /* no child: leaf = root */
			assert_int_equal(ev[i].d, ev[i].b);
		}
		if (ev[i].kind == RESUME)
			assert_int_equal(ev[i].b, ev[i - 1].b);
		assert_true(ev[i].t >= ev[i - 1].t);
	}
	assert_int_equal(ev[8].arg, -EPIPE);
	assert_int_equal(ev[8].a, P(gen_fn));
	/* the run's bounds on the engine's thread */
	assert_int_equal(tf.ev[0].kind, SPAWN);
	assert_int_equal(tf.ev[1].kind, RUN);
	assert_int_equal(tf.ev[1].b, 1);
	assert_int_equal(tf.ev[tf.n - 1].kind, RUN);
	assert_int_equal(tf.ev[tf.n - 1].b, 0);
	assert_int_equal(tf.n, n + 2);
	assert_int_equal(tf.recorded, tf.n);
	assert_int_equal(tf.dropped, 0);
	assert_true(tf.has_maps);
	free(ev);
	tfile_free(&tf);
}

/* A frame a cancel stop finishes without running it: its DONE, with
 * -ECANCELED, and no START (tracing.md, DONE): on an engine that runs
 * after the stop, and on a context whose thread never started (the stop
 * finishes it on the calling thread). */
static void test_cancelled_before_start(void **state)
{
	const char *path = tmp_path("unstarted.trace");
	struct gen g, h;
	struct tfile tf;
	struct tev *ev;
	co_engine e;
	co_context c;
	size_t n;
	(void)state;
	NEED_TRACE();
	start(1024, path);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&g.co, gen_fn);
	assert_int_equal(co_engine_spawn(&e, &g.co), 0);
	assert_int_equal(co_engine_stop(&e, CO_STOP_CANCEL), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_status(&g.co), -ECANCELED);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_context_init(&c, NULL), 0);
	co_init(&h.co, gen_fn);
	assert_int_equal(co_context_spawn(&c, &h.co), 0);
	assert_int_equal(co_context_stop(&c, CO_STOP_CANCEL), 0);
	assert_int_equal(co_status(&h.co), -ECANCELED);
	assert_int_equal(co_context_destroy(&c), 0);
	stop_and_read(path, &tf);
	n = of_frame(&tf, &g.co, &ev);
	EXPECT(ev, n, SPAWN, DONE);
	assert_int_equal(ev[1].arg, -ECANCELED);
	assert_int_equal(ev[1].a, P(gen_fn));
	free(ev);
	n = of_frame(&tf, &h.co, &ev);
	EXPECT(ev, n, SPAWN, DONE);
	assert_int_equal(ev[1].arg, -ECANCELED);
	assert_int_equal(ev[1].thread, ev[0].thread); /* the stop's thread: this one */
	free(ev);
	tfile_free(&tf);
}

/* ---- an echo exchange over loopback ------------------------------------- */

struct echo {
	co_frame co;
	co_io io;
	int lfd, fd, n;
	char buf[16];
};

static int echo_fn(co_frame *f)
{
	struct echo *s = (struct echo *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_accept(&s->io, s->lfd, NULL, NULL, SOCK_CLOEXEC));
	s->fd = co_result(f);
	CO_AWAIT(f, co_recv(&s->io, s->fd, s->buf, sizeof s->buf, 0));
	s->n = co_result(f);
	CO_AWAIT(f, co_send(&s->io, s->fd, s->buf, (size_t)s->n, MSG_NOSIGNAL));
	CO_AWAIT(f, co_close(&s->io, s->fd));
	CO_END(f);
}

static void test_echo_exchange(void **state)
{
	const char *path = tmp_path("echo.trace");
	struct echo s = { 0 };
	struct tfile tf;
	struct tev *ev;
	co_engine e;
	uint16_t port;
	struct sockaddr_in a;
	char back[8];
	int cfd;
	size_t n;
	(void)state;
	NEED_TRACE();
	/* the peer has connected and sent before the run: each operation
	 * completes at once, one at a time, so the order is the program's */
	s.lfd = co_test_listen(&port);
	a = co_test_loopback(port);
	cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(cfd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(send(cfd, "ping", 4, 0), 4);

	start(1024, path);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&s.co, echo_fn);
	assert_int_equal(co_engine_spawn(&e, &s.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	stop_and_read(path, &tf);
	assert_int_equal(recv(cfd, back, sizeof back, MSG_WAITALL), 4);
	assert_memory_equal(back, "ping", 4);
	close(cfd);
	close(s.lfd);

	n = of_frame(&tf, &s.co, &ev);
	EXPECT(ev, n, SPAWN, START,
	       SUBMIT, WAIT, COMPLETE, WAKE, RESUME,
	       SUBMIT, WAIT, COMPLETE, WAKE, RESUME,
	       SUBMIT, WAIT, COMPLETE, WAKE, RESUME,
	       SUBMIT, WAIT, COMPLETE, WAKE, RESUME, DONE);
	{
		static const unsigned ops[] = { IORING_OP_ACCEPT, IORING_OP_RECV, IORING_OP_SEND,
						 IORING_OP_CLOSE };
		for (unsigned k = 0; k < 4; k++) {
			struct tev *sub = &ev[2 + 5 * k], *w = sub + 1, *c = sub + 2, *wk = sub + 3,
				   *r = sub + 4;

			assert_int_equal(sub->sub, ops[k]);
			assert_int_equal(sub->a, P(&s.io.info)); /* the operation's co_io_info */
			assert_int_equal(c->a, sub->a);
			assert_int_equal(w->sub, CO__AW_IO);
			assert_int_equal(wk->a, P(&e));
			assert_int_equal(r->b, w->b); /* resumes where it waited */
			assert_int_equal(c->sub, 0); /* the operation's own CQE, no deadline */
		}
		assert_int_equal(ev[2].arg, s.lfd);             /* accept on the listener */
		assert_true(ev[4].arg >= 0);                     /* the new descriptor */
		assert_int_equal(ev[7].arg, ev[4].arg);          /* recv on it */
		assert_int_equal(ev[9].arg, 4);                  /* "ping" */
		assert_int_equal(ev[14].arg, 4);                 /* sent back */
		assert_int_equal(ev[19].arg, 0);                 /* closed */
		assert_int_equal(ev[22].arg, 0);
		/* four suspension points, four lines */
		assert_int_not_equal(ev[3].b, ev[8].b);
		assert_int_not_equal(ev[8].b, ev[13].b);
		assert_int_not_equal(ev[13].b, ev[18].b);
	}
	free(ev);
	tfile_free(&tf);
}

/* ---- multishot operations: an acceptor, a stream ---------------------------- */

struct streamer {
	co_frame co;
	co_io io;
	co_bufring ring;
	co_stream st;
	co_acceptor acc;
	co_event ev;
	co_waiter w;
	int lfd, fd, n;
};

static void streamer_conn(co_acceptor *a, int fd)
{
	struct streamer *s = a->user;

	if (fd >= 0) {
		s->fd = fd;
		co_acceptor_stop(a);
	} else if (fd == -ECANCELED) {
		co_event_set(&s->ev); /* stopped: the frame goes on */
	}
}

static void prep_nop(struct io_uring_sqe *sqe, void *arg)
{
	(void)arg;
	io_uring_prep_nop(sqe);
}

static int streamer_fn(co_frame *f)
{
	struct streamer *s = (struct streamer *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_sqe(&s->io, prep_nop, NULL));
	co_acceptor_start(&s->acc, s->lfd, SOCK_CLOEXEC, streamer_conn, s);
	CO_AWAIT(f, co_event_wait(&s->w, &s->ev));
	co_bufring_init(&s->ring, co_engine_current(), 8, 64);
	co_stream_open(&s->st, &s->ring, s->fd);
	CO_AWAIT(f, co_stream_recv(&s->st));
	s->n = co_result(f);
	CO_AWAIT(f, co_stream_close(&s->st));
	co_bufring_destroy(&s->ring);
	close(s->fd);
	CO_END(f);
}

/* The first event of kind k about operation op (its co_io_info), from
 * index *from on; NULL if none. */
static const struct tev *find_op(const struct tfile *tf, unsigned k, const void *op, size_t *from)
{
	for (size_t i = *from; i < tf->n; i++)
		if (tf->ev[i].kind == k && tf->ev[i].a == P(op)) {
			*from = i + 1;
			return &tf->ev[i];
		}
	return NULL;
}

/* Any SQE (co_sqe), a multishot accept and a stream's multishot recv:
 * the SQE and each arming are a SUBMIT (opcode, descriptor), each CQE a
 * COMPLETE with its result (a descriptor, a byte count, the cancel that
 * ended it); the frame's wait in co_stream_recv is a WAIT on a stream
 * (sub CO__AW_STREAM). */
static void test_sqe_and_multishot_recorded(void **state)
{
	const char *path = tmp_path("multi.trace");
	struct streamer s;
	struct tfile tf;
	const struct tev *t;
	co_engine e;
	uint16_t port;
	struct sockaddr_in a;
	int cfd, stream_waits = 0;
	size_t at = 0;
	(void)state;
	NEED_TRACE();
	memset(&s, 0, sizeof s);
	assert_int_equal(co_event_init(&s.ev, 0), 0);
	s.lfd = co_test_listen(&port);
	a = co_test_loopback(port);
	cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(cfd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(send(cfd, "ping", 4, 0), 4);

	start(1024, path);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&s.co, streamer_fn);
	assert_int_equal(co_engine_spawn(&e, &s.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	stop_and_read(path, &tf);
	close(cfd);
	close(s.lfd);
	assert_int_equal(s.n, 4);

	t = find_op(&tf, SUBMIT, &s.io.info, &at); /* co_sqe's nop */
	assert_non_null(t);
	assert_int_equal(t->sub, IORING_OP_NOP);
	assert_int_equal(t->frame, P(&s.co));
	t = find_op(&tf, COMPLETE, &s.io.info, &at);
	assert_non_null(t);
	assert_int_equal(t->arg, 0);
	t = find_op(&tf, SUBMIT, &s.acc.info, &at); /* the accept, armed by the frame */
	assert_non_null(t);
	assert_int_equal(t->sub, IORING_OP_ACCEPT);
	assert_int_equal(t->arg, s.lfd);
	assert_int_equal(t->frame, P(&s.co));
	t = find_op(&tf, COMPLETE, &s.acc.info, &at);
	assert_non_null(t);
	assert_int_equal(t->arg, s.fd); /* the connection */
	t = find_op(&tf, COMPLETE, &s.acc.info, &at);
	assert_non_null(t);
	assert_int_equal(t->arg, -ECANCELED); /* stopped */
	t = find_op(&tf, SUBMIT, &s.st.info, &at); /* the stream's recv */
	assert_non_null(t);
	assert_int_equal(t->sub, IORING_OP_RECV);
	assert_int_equal(t->arg, s.fd);
	t = find_op(&tf, COMPLETE, &s.st.info, &at);
	assert_non_null(t);
	assert_int_equal(t->arg, 4); /* "ping" */
	assert_int_equal(t->frame, P(&s.co)); /* for the frame waiting in recv */
	t = find_op(&tf, COMPLETE, &s.st.info, &at);
	assert_non_null(t);
	assert_int_equal(t->arg, -ECANCELED); /* the close's cancel ends it */
	for (size_t i = 0; i < tf.n; i++)
		if (tf.ev[i].kind == WAIT && tf.ev[i].frame == P(&s.co) &&
		    tf.ev[i].sub == CO__AW_STREAM)
			stream_waits++;
	assert_int_equal(stream_waits, 1);
	assert_int_equal(co_event_destroy(&s.ev), 0);
	tfile_free(&tf);
}

/* ---- a transfer between two contexts ------------------------------------ */

struct hop {
	co_frame co;
	co_transfer t;
	co_context *to;
	unsigned where;
};

static int hop_fn(co_frame *f)
{
	struct hop *h = (struct hop *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_transfer_to(&h->t, h->to));
	h->where = co_context_current()->index;
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

/* The thread whose CONTEXT event says it is context `index`. */
static unsigned thread_of_context(struct tfile *tf, unsigned index)
{
	for (size_t i = 0; i < tf->n; i++)
		if (tf->ev[i].kind == CONTEXT && tf->ev[i].arg == (int)index)
			return tf->ev[i].thread;
	fail_msg("no context %u in the trace", index);
	return 0;
}

static void test_transfer(void **state)
{
	const char *path = tmp_path("hop.trace");
	co_sched_opts o = { .contexts = 2 };
	struct hop h = { 0 };
	struct tfile tf;
	struct tev *ev;
	unsigned t0, t1;
	uint64_t e0, e1;
	co_sched s;
	size_t n;
	(void)state;
	NEED_TRACE();
	start(4096, path);
	assert_int_equal(co_sched_init(&s, &o), 0);
	co_init(&h.co, hop_fn);
	h.to = &s.ctx[1];
	assert_int_equal(co_sched_spawn_to(&s, 0, &h.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	e0 = P(&s.ctx[0].engine); /* gone with the scheduler */
	e1 = P(&s.ctx[1].engine);
	assert_int_equal(co_sched_destroy(&s), 0);
	stop_and_read(path, &tf);
	assert_int_equal(h.where, 1);
	assert_int_equal(co_status(&h.co), 0);

	t0 = thread_of_context(&tf, 0);
	t1 = thread_of_context(&tf, 1);
	assert_int_not_equal(t0, t1);
	n = of_frame(&tf, &h.co, &ev);
	/* the spawn (this thread), then context 0's events, then 1's */
	{
		struct tev on0[8] = { 0 }, on1[8] = { 0 }, here[8] = { 0 };
		size_t n0 = 0, n1 = 0, nh = 0;

		for (size_t i = 0; i < n; i++) {
			if (ev[i].thread == t0 && n0 < 8)
				on0[n0++] = ev[i];
			else if (ev[i].thread == t1 && n1 < 8)
				on1[n1++] = ev[i];
			else if (nh < 8)
				here[nh++] = ev[i];
		}
		EXPECT(here, nh, SPAWN);
		assert_int_equal(here[0].b, e0);
		EXPECT(on0, n0, START, TRANSFER, WAKE, WAIT);
		EXPECT(on1, n1, RESUME, DONE);
		assert_int_equal(on0[1].a, e0);
		assert_int_equal(on0[1].b, e1);
		assert_int_equal(on0[2].a, e1); /* woken for context 1 */
		assert_int_equal(on0[3].sub, CO__AW_TRANSFER);
		assert_int_equal(on0[3].b, on0[1].d);            /* where it left */
		assert_int_equal(on1[0].b, on0[3].b);            /* continues there */
		assert_int_equal(on1[0].e, e1);
		assert_true(on1[0].t >= on0[1].t);               /* one clock */
	}
	free(ev);
	tfile_free(&tf);
}

/* ---- a cancelled wait ----------------------------------------------------- */

struct reader {
	co_frame co;
	co_io io;
	int fd;
	char c;
};

static int reader_fn(co_frame *f)
{
	struct reader *r = (struct reader *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_read(&r->io, r->fd, &r->c, 1, 0));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

struct canceller {
	co_frame co;
	co_frame *victim;
};

static int canceller_fn(co_frame *f)
{
	struct canceller *c = (struct canceller *)f;

	CO_BEGIN(f);
	co_cancel(c->victim);
	CO_END(f);
}

static void test_cancelled_wait(void **state)
{
	const char *path = tmp_path("cancel.trace");
	struct reader r = { 0 };
	struct canceller c = { 0 };
	struct tfile tf;
	co_engine e;
	int p[2];
	(void)state;
	NEED_TRACE();
	assert_int_equal(pipe(p), 0);
	r.fd = p[0];
	c.victim = &r.co;
	start(1024, path);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&r.co, reader_fn);
	co_init(&c.co, canceller_fn);
	assert_int_equal(co_engine_spawn(&e, &r.co), 0);
	assert_int_equal(co_engine_spawn(&e, &c.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	stop_and_read(path, &tf);
	close(p[0]);
	close(p[1]);
	assert_int_equal(co_status(&r.co), -ECANCELED);

	/* the whole thread, in order: one engine, two frames */
	EXPECT(tf.ev, tf.n, SPAWN, SPAWN, RUN, START, SUBMIT, WAIT, START, CANCEL, DONE, COMPLETE,
	       WAKE, RESUME, DONE, RUN);
	assert_int_equal(tf.ev[0].frame, P(&r.co));
	assert_int_equal(tf.ev[1].frame, P(&c.co));
	assert_int_equal(tf.ev[3].frame, P(&r.co));
	assert_int_equal(tf.ev[4].sub, IORING_OP_READ);
	assert_int_equal(tf.ev[4].frame, P(&r.co)); /* prepared while r runs */
	assert_int_equal(tf.ev[6].frame, P(&c.co));
	assert_int_equal(tf.ev[7].frame, P(&r.co)); /* c asks to cancel r */
	assert_int_equal(tf.ev[8].frame, P(&c.co));
	assert_int_equal(tf.ev[9].frame, P(&r.co));
	assert_int_equal(tf.ev[9].arg, -ECANCELED);
	assert_int_equal(tf.ev[12].frame, P(&r.co));
	assert_int_equal(tf.ev[12].arg, -ECANCELED);
	tfile_free(&tf);
}

/* ---- time limits ------------------------------------------------------------ */

struct limited {
	co_frame co;
	co_limit lim;
	co_waiter w;
	co_io io;
	struct reader kid;
	co_event *ev;
	int fd, r1, r2, r3;
	char c;
};

static int limited_fn(co_frame *f)
{
	struct limited *l = (struct limited *)f;

	CO_BEGIN(f);
	/* a waiter's own timer */
	CO_AWAIT(f, co_timeout(&l->lim, co_event_wait(&l->w, l->ev), 1 * CO_MS));
	l->r1 = co_result(f);
	/* a kernel timeout linked to the read */
	CO_AWAIT(f, co_timeout(&l->lim, co_read(&l->io, l->fd, &l->c, 1, 0), 1 * CO_MS));
	l->r2 = co_result(f);
	/* a child under co_timeout's own timer */
	co_init(&l->kid.co, reader_fn);
	l->kid.fd = l->fd;
	CO_AWAIT(f, co_timeout_task(&l->lim, &l->kid.co, 1 * CO_MS));
	l->r3 = co_result(f);
	CO_END(f);
}

static void test_time_limits(void **state)
{
	const char *path = tmp_path("limit.trace");
	struct limited l = { 0 };
	struct tfile tf;
	struct tev *ev;
	co_event event;
	co_engine e;
	size_t n, k = 0;
	int p[2];
	unsigned kinds[3] = { 0 };
	(void)state;
	NEED_TRACE();
	assert_int_equal(pipe(p), 0);
	assert_int_equal(co_event_init(&event, 0), 0);
	l.ev = &event;
	l.fd = p[0];
	start(1024, path);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&l.co, limited_fn);
	assert_int_equal(co_engine_spawn(&e, &l.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	stop_and_read(path, &tf);
	close(p[0]);
	close(p[1]);
	co_event_destroy(&event);
	assert_int_equal(l.r1, -ETIME);
	assert_int_equal(l.r2, -ETIME);
	assert_int_equal(l.r3, -ETIME);

	/* in order: the waiter's timer (TIMEOUT, whose 2), the read's linked
	 * timeout (its CQE, tag 1, -ETIME), the child's limit (TIMEOUT 1) */
	n = of_frame(&tf, &l.co, &ev);
	for (size_t i = 0; i < n; i++) {
		if (ev[i].kind == TIMEOUT && k < 3)
			kinds[k++] = (unsigned)ev[i].b;
		else if (ev[i].kind == COMPLETE && ev[i].sub == 1 && k < 3) {
			assert_int_equal(ev[i].arg, -ETIME);
			kinds[k++] = 100;
		}
	}
	assert_int_equal(k, 3);
	assert_int_equal(kinds[0], 2);
	assert_int_equal(kinds[1], 100);
	assert_int_equal(kinds[2], 1);
	assert_int_equal(ev[n - 1].kind, DONE);
	free(ev);
	tfile_free(&tf);
}

/* ---- co_loop, through its hook --------------------------------------------- */

static void test_loop_hook(void **state)
{
	const char *path = tmp_path("loop.trace");
	struct gen g;
	struct tfile tf;
	co_loop l;
	(void)state;
	NEED_TRACE();
	start(64, path);
	co_loop_init(&l);
	co_init(&g.co, gen_fn);
	assert_int_equal(co_loop_spawn(&l, &g.co), 0);
	assert_int_equal(co_loop_run(&l), 0);
	stop_and_read(path, &tf);
	EXPECT(tf.ev, tf.n, START, YIELD, RESUME, YIELD, RESUME, YIELD, RESUME, DONE);
	for (size_t i = 0; i < tf.n; i++) {
		assert_int_equal(tf.ev[i].frame, P(&g.co));
		assert_int_equal(tf.ev[i].e, 0); /* no engine */
	}
	assert_int_equal(tf.ev[7].arg, -EPIPE);
	tfile_free(&tf);
}

/* trace.h: co_trace_frame with any other kind, a NULL frame, or no
 * session records nothing. */
static void test_frame_hook_misuse(void **state)
{
	static const int kinds[] = { 0, CO_TRACE_SPAWN, CO_TRACE_START, CO_TRACE_WAKE,
				     CO_TRACE_RUN, 99, -1 };
	co_trace_stats st;
	co_frame f;
	(void)state;
	NEED_TRACE();
	co_init(&f, gen_fn);
	co_trace_frame(&f, CO_TRACE_YIELD); /* no session */
	start(64, NULL);
	co_trace_frame(NULL, CO_TRACE_RESUME);
	co_trace_frame(NULL, CO_TRACE_DONE);
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		co_trace_frame(&f, kinds[i]);
	co_trace_stats_get(&st);
	assert_int_equal(st.recorded, 0);
	assert_int_equal(st.lost, 0);
	co_trace_frame(&f, CO_TRACE_YIELD);
	co_trace_stats_get(&st);
	assert_int_equal(st.recorded, 1);
	assert_int_equal(co_trace_stop(), 0);
}

/* ---- a full buffer -------------------------------------------------------- */

static void test_full_buffer_drops_oldest(void **state)
{
	const char *path = tmp_path("full.trace");
	co_trace_stats st;
	struct tfile tf;
	co_frame f;
	(void)state;
	NEED_TRACE();
	start(6, NULL); /* rounded up to 8 */
	co_init(&f, gen_fn);
	for (unsigned i = 1; i <= 100; i++) {
		f.label = i; /* numbers the events */
		co_trace_frame(&f, CO_TRACE_YIELD);
	}
	co_trace_stats_get(&st);
	assert_int_equal(st.recorded, 100);
	assert_int_equal(st.dropped, 92);
	assert_int_equal(st.threads, 1);
	assert_int_equal(st.recording, 1);
	assert_int_equal(co_trace_dump(path), 0);
	assert_int_equal(tfile_read(path, &tf), 0);
	assert_int_equal(tf.n, 8);
	for (unsigned i = 0; i < 8; i++)
		assert_int_equal(tf.ev[i].b, 93 + i); /* the newest eight, in order */
	assert_int_equal(tf.recorded, 100);
	assert_int_equal(tf.dropped, 92);
	assert_int_equal(tf.nth, 1);
	assert_int_equal(tf.th[0].recorded, 100);
	assert_int_equal(tf.th[0].dropped, 92);
	assert_int_equal(tf.th[0].tid, gettid());
	tfile_free(&tf);
	assert_int_equal(co_trace_stop(), 0);
	/* a dump after the stop still has the last session */
	assert_int_equal(co_trace_dump(path), 0);
	assert_int_equal(tfile_read(path, &tf), 0);
	assert_int_equal(tf.n, 8);
	co_trace_stats_get(&st);
	assert_int_equal(st.recording, 0);
	tfile_free(&tf);
	unlink(path);
	/* not recording: nothing is added */
	co_trace_frame(&f, CO_TRACE_YIELD);
	co_trace_stats_get(&st);
	assert_int_equal(st.recorded, 100);
}

/* co_trace_start(NULL): 65,536 events per thread (the 65,537th drops the
 * oldest), and no file. */
static void test_null_opts_defaults(void **state)
{
	co_trace_stats st;
	co_frame f;
	(void)state;
	NEED_TRACE();
	assert_int_equal(co_trace_start(NULL), 0);
	co_init(&f, gen_fn);
	for (unsigned i = 0; i < 65536; i++)
		co_trace_frame(&f, CO_TRACE_YIELD);
	co_trace_stats_get(&st);
	assert_int_equal(st.recorded, 65536);
	assert_int_equal(st.dropped, 0);
	co_trace_frame(&f, CO_TRACE_YIELD);
	co_trace_stats_get(&st);
	assert_int_equal(st.recorded, 65537);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(co_trace_stop(), 0);
}

/* A thread whose buffer cannot be allocated records nothing, counts what
 * it lost, and goes on. */
static void test_no_memory_for_buffer(void **state)
{
	co_trace_stats st;
	co_frame f;
	(void)state;
	NEED_TRACE();
	start(64, NULL);
	co_init(&f, gen_fn);
	co__fault_arm(CO__FAULT_ALLOC, 1, ENOMEM);
	for (int i = 0; i < 10; i++)
		co_trace_frame(&f, CO_TRACE_YIELD);
	co__fault_arm(CO__FAULT_ALLOC, 0, 0);
	co_trace_stats_get(&st);
	assert_int_equal(st.lost, 10);
	assert_int_equal(st.recorded, 0);
	assert_int_equal(co_trace_stop(), 0);
	/* the next session allocates again */
	start(64, NULL);
	co_trace_frame(&f, CO_TRACE_YIELD);
	co_trace_stats_get(&st);
	assert_int_equal(st.lost, 0);
	assert_int_equal(st.recorded, 1);
	assert_int_equal(co_trace_stop(), 0);
}

/* A thread that recorded in a session with other buffer sizes, and whose
 * new buffer cannot be allocated, gives its old one up: the next start
 * frees it, and the thread's end must not touch it then (ASan sees a
 * write to freed memory otherwise). */
struct resized {
	pthread_t th;
	co_frame f;
	sem_t done, go;
};

static void *resized_main(void *arg)
{
	struct resized *r = arg;

	co_trace_frame(&r->f, CO_TRACE_YIELD); /* a buffer of the first size */
	sem_post(&r->done);
	while (sem_wait(&r->go) < 0)
		;
	co_trace_frame(&r->f, CO_TRACE_YIELD); /* another size: not allocated */
	sem_post(&r->done);
	while (sem_wait(&r->go) < 0)
		;
	return NULL; /* ends once the next start freed its first buffer */
}

static void test_resized_buffer_not_allocated(void **state)
{
	struct resized r;
	co_trace_stats st;
	(void)state;
	NEED_TRACE();
	co_init(&r.f, gen_fn);
	assert_int_equal(sem_init(&r.done, 0, 0), 0);
	assert_int_equal(sem_init(&r.go, 0, 0), 0);
	start(16, NULL);
	assert_int_equal(pthread_create(&r.th, NULL, resized_main, &r), 0);
	while (sem_wait(&r.done) < 0)
		;
	assert_int_equal(co_trace_stop(), 0);
	start(32, NULL);
	co__fault_arm(CO__FAULT_ALLOC, 1, ENOMEM);
	sem_post(&r.go);
	while (sem_wait(&r.done) < 0)
		;
	co__fault_arm(CO__FAULT_ALLOC, 0, 0);
	co_trace_stats_get(&st);
	assert_int_equal(st.lost, 1);
	assert_int_equal(st.recorded, 0);
	assert_int_equal(co_trace_stop(), 0);
	start(16, NULL); /* frees the buffers given up */
	sem_post(&r.go);
	assert_int_equal(pthread_join(r.th, NULL), 0);
	assert_int_equal(co_trace_stop(), 0);
	sem_destroy(&r.done);
	sem_destroy(&r.go);
}

/* Recording allocates once per thread and session (its buffer, at its
 * first event), however many events follow and though the buffer fills
 * and drops: never on the hot path after that (docs/design.md). */
static void test_allocates_once_per_thread(void **state)
{
	co_trace_stats st;
	co_frame f;
	(void)state;
	NEED_TRACE();
	start(64, NULL);
	co_init(&f, gen_fn);
	co__fault_arm(CO__FAULT_ALLOC, 0, 0); /* count from here */
	for (int i = 0; i < 100000; i++)
		co_trace_frame(&f, CO_TRACE_YIELD);
	assert_int_equal(co__fault_calls(CO__FAULT_ALLOC), 1);
	co_trace_stats_get(&st);
	assert_int_equal(st.recorded, 100000);
	assert_int_equal(st.lost, 0);
	assert_int_equal(co_trace_stop(), 0);
}

/* ---- the stream ------------------------------------------------------------- */

static void stream_run(unsigned events, unsigned n, int expect_all)
{
	const char *path = tmp_path("stream.trace");
	co_trace_opts o = { .events = events, .path = path, .stream = 1 };
	struct tfile tf;
	co_frame f;

	assert_int_equal(co_trace_start(&o), 0);
	co_init(&f, gen_fn);
	for (unsigned i = 1; i <= n; i++) {
		f.label = i;
		co_trace_frame(&f, CO_TRACE_YIELD);
	}
	stop_and_read(path, &tf);
	assert_int_equal(tf.recorded, n);
	assert_int_equal(tf.n + tf.dropped, n); /* each event written or counted */
	for (size_t i = 1; i < tf.n; i++)
		assert_true(tf.ev[i].b > tf.ev[i - 1].b); /* in order, none twice */
	if (expect_all)
		assert_int_equal(tf.n, n);
	assert_int_equal(tf.ev[tf.n - 1].b, n); /* the last one is always there */
	tfile_free(&tf);
}

static void test_stream(void **state)
{
	(void)state;
	NEED_TRACE();
	stream_run(1 << 15, 20000, 1); /* the buffer holds it all: nothing is lost */
	stream_run(16, 20000, 0);      /* the writer may fall behind: counted */
}

/* The threads of the process now (a sanitizer may have its own). */
static size_t task_ids(int *ids, size_t max)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *d;
	size_t n = 0;

	assert_non_null(dir);
	while ((d = readdir(dir)) != NULL)
		if (d->d_name[0] != '.' && n < max)
			ids[n++] = atoi(d->d_name);
	closedir(dir);
	return n;
}

static void *nothing_main(void *arg)
{
	return arg;
}

/* The stream's writer thread blocks every signal, so a signal sent to the
 * process goes to a thread of the program's (a program that blocks SIGTERM
 * to read it from a signalfd still gets it): its mask, read from
 * /proc/self/task, has SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGPIPE. */
static void test_stream_writer_blocks_signals(void **state)
{
	const char *path = tmp_path("signals.trace");
	co_trace_opts o = { .events = 64, .path = path, .stream = 1 };
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGPIPE };
	int before[64], after[64];
	size_t nb, na, writers = 0;
	char name[64], line[256];
	struct stat sb;
	pthread_t th;
	co_frame f;
	(void)state;
	NEED_TRACE();
	/* a thread made and joined first: a sanitizer's own thread, made at
	 * the first thread, is one of those before */
	assert_int_equal(pthread_create(&th, NULL, nothing_main, NULL), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	nb = task_ids(before, 64);
	assert_int_equal(co_trace_start(&o), 0);
	/* the writer runs its own code once it wrote an event (a new thread
	 * starts with every signal blocked until it takes the mask it was
	 * made with) */
	co_init(&f, gen_fn);
	co_trace_frame(&f, CO_TRACE_YIELD);
	WAIT_UNTIL(stat(path, &sb) == 0 && sb.st_size > 32);
	na = task_ids(after, 64);
	for (size_t i = 0; i < na; i++) {
		unsigned long long blocked = 0;
		int found = 0, old = 0;
		FILE *st;

		for (size_t j = 0; j < nb; j++)
			old |= before[j] == after[i];
		if (old)
			continue;
		snprintf(name, sizeof name, "/proc/self/task/%d/status", after[i]);
		st = fopen(name, "r");
		assert_non_null(st);
		while (fgets(line, sizeof line, st))
			if (sscanf(line, "SigBlk: %llx", &blocked) == 1)
				found = 1;
		fclose(st);
		assert_true(found);
		for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++)
			if (!(blocked & 1ull << (sigs[k] - 1)))
				fail_msg("the writer takes signal %d (mask %llx)", sigs[k], blocked);
		writers++;
	}
	assert_int_equal(writers, 1);
	assert_int_equal(co_trace_stop(), 0);
	unlink(path);
}

/* A start that comes while a stream's stop writes the file (the stop has
 * let go of its lock to join the writer) waits for that stop to end: the
 * stopped session's file is whole, and the new session records and stops
 * as any other. The window is held open: the start comes from another
 * thread while the stop is inside it, and must not have returned when its
 * wait began. */
struct start_in_stop {
	pthread_t th;
	const char *path;
	sem_t sig;
	atomic_int rc, posted;
};

static struct start_in_stop sis;

static void sis_signal(void *arg)
{
	(void)arg;
	if (atomic_exchange(&sis.posted, 1) == 0)
		sem_post(&sis.sig);
}

static void *sis_main(void *arg)
{
	co_trace_opts o = { .events = 64, .path = sis.path };

	(void)arg;
	atomic_store(&sis.rc, co_trace_start(&o));
	sis_signal(NULL);
	return NULL;
}

static void sis_in_stop(void *arg)
{
	(void)arg;
	co__fault_on_point(CO__POINT_TRACE_STOPPING, NULL, NULL);
	assert_int_equal(pthread_create(&sis.th, NULL, sis_main, NULL), 0);
	while (sem_wait(&sis.sig) < 0)
		;
	if (atomic_load(&sis.rc) != 1)
		fail_msg("a start during a stop returned %d before the stop ended",
			 atomic_load(&sis.rc));
}

static void test_start_waits_for_a_stop(void **state)
{
	const char *first = tmp_path("stopping.trace");
	char second[256];
	co_trace_opts o = { .events = 64, .path = first, .stream = 1 };
	co_trace_stats st;
	struct tfile tf;
	co_frame f;
	(void)state;
	NEED_TRACE();
	snprintf(second, sizeof second, "%s", tmp_path("started.trace"));
	sis.path = second;
	atomic_store(&sis.rc, 1); /* not returned */
	atomic_store(&sis.posted, 0);
	assert_int_equal(sem_init(&sis.sig, 0, 0), 0);
	co_init(&f, gen_fn);
	assert_int_equal(co_trace_start(&o), 0);
	for (int i = 0; i < 5; i++)
		co_trace_frame(&f, CO_TRACE_YIELD);
	co__fault_on_point(CO__POINT_TRACE_START_WAITS, sis_signal, NULL);
	co__fault_on_point(CO__POINT_TRACE_STOPPING, sis_in_stop, NULL);
	assert_int_equal(co_trace_stop(), 0);
	assert_int_equal(pthread_join(sis.th, NULL), 0);
	co__fault_on_point(CO__POINT_TRACE_START_WAITS, NULL, NULL);
	assert_int_equal(atomic_load(&sis.rc), 0);
	assert_int_equal(tfile_read(first, &tf), 0);
	assert_int_equal(tf.n, 5);
	tfile_free(&tf);
	co_trace_stats_get(&st);
	assert_int_equal(st.recording, 1);
	co_trace_frame(&f, CO_TRACE_YIELD);
	stop_and_read(second, &tf);
	assert_int_equal(tf.n, 1);
	tfile_free(&tf);
	unlink(first);
	sem_destroy(&sis.sig);
}

/* ---- many threads, dumps from another (TSan) ------------------------------ */

struct rec_thread {
	pthread_t th;
	co_frame f;
	unsigned n;
};

static void *rec_main(void *arg)
{
	struct rec_thread *r = arg;

	for (unsigned i = 1; i <= r->n; i++) {
		r->f.label = i;
		co_trace_frame(&r->f, CO_TRACE_YIELD);
	}
	return NULL;
}

/* Every event of a thread in a dump: numbered one more than the one
 * before it (nothing torn, nothing twice, nothing skipped inside what
 * was kept). */
static void check_sequences(struct tfile *tf)
{
	uint64_t last[256] = { 0 };

	for (size_t i = 0; i < tf->n; i++) {
		struct tev *v = &tf->ev[i];

		assert_true(v->thread < 256);
		assert_int_equal(v->kind, YIELD);
		assert_int_equal(v->a, P(gen_fn));
		if (last[v->thread])
			assert_int_equal(v->b, last[v->thread] + 1);
		last[v->thread] = v->b;
	}
}

static void test_threads_and_dumps(void **state)
{
	const char *path = tmp_path("mt.trace");
	struct rec_thread r[4];
	struct tfile tf;
	co_trace_stats st;
	int dumps = 0;
	(void)state;
	NEED_TRACE();
	start(512, NULL);
	for (int i = 0; i < 4; i++) {
		co_init(&r[i].f, gen_fn);
		r[i].n = 20000;
		assert_int_equal(pthread_create(&r[i].th, NULL, rec_main, &r[i]), 0);
	}
	for (int i = 0; i < 20; i++) { /* dumps while they record */
		assert_int_equal(co_trace_dump(path), 0);
		assert_int_equal(tfile_read(path, &tf), 0);
		check_sequences(&tf);
		tfile_free(&tf);
		dumps++;
	}
	for (int i = 0; i < 4; i++)
		pthread_join(r[i].th, NULL);
	/* the threads have gone: their buffers stay for the dump */
	assert_int_equal(co_trace_dump(path), 0);
	assert_int_equal(tfile_read(path, &tf), 0);
	check_sequences(&tf);
	assert_int_equal(tf.n, 4 * 512);
	assert_int_equal(tf.recorded, 4 * 20000);
	assert_int_equal(tf.threads, 4);
	tfile_free(&tf);
	co_trace_stats_get(&st);
	assert_int_equal(st.recorded, 4 * 20000);
	assert_int_equal(st.dropped, 4 * (20000 - 512));
	assert_int_equal(co_trace_stop(), 0);
	/* a new session frees the buffers of the threads that are gone */
	start(512, NULL);
	co_trace_stats_get(&st);
	assert_int_equal(st.threads, 0);
	assert_int_equal(co_trace_stop(), 0);
	unlink(path);
	assert_int_equal(dumps, 20);
}

/* Stealing contexts, transfers and wake-ups across threads, recorded
 * while another thread dumps (TSan checks the hooks' reads). */
struct bouncer {
	co_frame co;
	co_transfer t;
	co_sched *s;
	int i;
};

static int bouncer_fn(co_frame *f)
{
	struct bouncer *b = (struct bouncer *)f;

	CO_BEGIN(f);
	for (b->i = 0; b->i < 50; b->i++) {
		CO_YIELD(f);
		CO_AWAIT(f, co_transfer_to(&b->t, &b->s->ctx[(unsigned)b->i % 3]));
	}
	CO_END(f);
}

static void test_scheduler_recorded(void **state)
{
	const char *path = tmp_path("sched.trace");
	co_sched_opts o = { .contexts = 3, .steal = 1 };
	struct bouncer b[32];
	struct tfile tf;
	co_sched s;
	size_t done = 0, transfers = 0, steals = 0;
	(void)state;
	NEED_TRACE();
	start(1 << 16, path);
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < 32; i++) {
		co_init(&b[i].co, bouncer_fn);
		b[i].s = &s;
		assert_int_equal(co_sched_spawn(&s, &b[i].co), 0);
	}
	for (int i = 0; i < 5; i++) {
		assert_int_equal(co_trace_dump(tmp_path("sched2.trace")), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	stop_and_read(path, &tf);
	unlink(tmp_path("sched2.trace"));
	for (size_t i = 0; i < tf.n; i++) {
		done += tf.ev[i].kind == DONE;
		transfers += tf.ev[i].kind == TRANSFER;
		if (tf.ev[i].kind == STEAL) {
			/* a stolen frame runs next on the thief's thread */
			struct tev *ev;
			size_t n = of_frame(&tf, (void *)(uintptr_t)tf.ev[i].frame, &ev), k;

			for (k = 0; k < n && !(ev[k].kind == STEAL && ev[k].t == tf.ev[i].t &&
					       ev[k].thread == tf.ev[i].thread); k++)
				;
			/* (or is stolen again from the thief before it ran) */
			while (k + 1 < n && ev[k + 1].kind == STEAL && ev[k + 1].a == ev[k].b)
				k++;
			assert_true(k + 1 < n);
			/* its first resume if it was stolen before it ever ran */
			assert_true(ev[k + 1].kind == RESUME || ev[k + 1].kind == START);
			assert_int_equal(ev[k + 1].thread, ev[k].thread);
			assert_int_equal(ev[k + 1].e, ev[k].b); /* the thief's engine */
			steals++;
			free(ev);
		}
	}
	print_message("      %zu transfers, %zu steals\n", transfers, steals);
	assert_int_equal(done, 32);
	assert_true(transfers > 0);
	assert_int_equal(tf.dropped, 0);
	tfile_free(&tf);
}

/* Frames that follow their waker (co_sched_roam): a ping-pong between
 * context 0 and 1 through two channels. Every FOLLOW is recorded on the
 * waker's thread, a: the engine the frame leaves, b: the waker's; the
 * frame's next RESUME is on that thread and engine. */
struct volley {
	co_frame co;
	co_waiter w;
	co_chan *in, *out;
	uint64_t v;
	int i, first;
};

static int volley_fn(co_frame *f)
{
	struct volley *p = (struct volley *)f;

	CO_BEGIN(f);
	for (p->i = 0; p->i < 200; p->i++) {
		if (p->first)
			CO_AWAIT(f, co_chan_send(&p->w, p->out, &p->v));
		CO_AWAIT(f, co_chan_recv(&p->w, p->in, &p->v));
		if (!p->first)
			CO_AWAIT(f, co_chan_send(&p->w, p->out, &p->v));
	}
	CO_END(f);
}

static void test_follow_recorded(void **state)
{
	const char *path = tmp_path("follow.trace");
	co_sched_opts o = { .contexts = 2, .steal = 1, .engine = { .no_spin = 1 } };
	static struct volley v[2];
	co_chan ch[2];
	struct tfile tf;
	co_sched s;
	size_t follows = 0;
	(void)state;
	NEED_TRACE();
	start(1 << 16, path);
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int k = 0; k < 2; k++)
		assert_int_equal(co_chan_init(&ch[k], sizeof(uint64_t), 1, NULL), 0);
	for (int k = 0; k < 2; k++) {
		memset(&v[k], 0, sizeof v[k]);
		v[k].first = k == 0;
		v[k].out = &ch[k];
		v[k].in = &ch[1 - k];
		co_init(&v[k].co, volley_fn);
		assert_int_equal(co_sched_roam(&v[k].co, 1), 0);
		assert_int_equal(co_sched_spawn_to(&s, (unsigned)k, &v[k].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	for (int k = 0; k < 2; k++)
		assert_int_equal(co_chan_destroy(&ch[k]), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	stop_and_read(path, &tf);
	for (size_t i = 0; i < tf.n; i++) {
		struct tev *ev;
		size_t n, k;

		if (tf.ev[i].kind != FOLLOW)
			continue;
		assert_int_not_equal(tf.ev[i].a, tf.ev[i].b);
		n = of_frame(&tf, (void *)(uintptr_t)tf.ev[i].frame, &ev);
		for (k = 0; k < n && !(ev[k].kind == FOLLOW && ev[k].seq == i); k++)
			;
		while (k + 1 < n && ev[k + 1].kind != RESUME)
			k++;
		assert_true(k + 1 < n);
		assert_int_equal(ev[k + 1].thread, tf.ev[i].thread);
		assert_int_equal(ev[k + 1].e, tf.ev[i].b);
		follows++;
		free(ev);
	}
	print_message("      %zu follows\n", follows);
	assert_true(follows > 0);
	assert_int_equal(tf.dropped, 0);
	tfile_free(&tf);
}

/* A manual context has no thread of its own: the thread that ticks it is
 * its track. Its thread record names the context, and it has the
 * context's CONTEXT event, as a context's own thread does. */
struct ticked_task {
	co_frame co;
	int k;
};

static int ticked_task_fn(co_frame *f)
{
	struct ticked_task *t = (struct ticked_task *)f;
	CO_BEGIN(f);
	for (t->k = 0; t->k < 3; t->k++)
		CO_YIELD(f);
	CO_END(f);
}

static void test_manual_context_named(void **state)
{
	static const co_sched_group g[2] = { { .contexts = 1 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	const char *path = tmp_path("manual.trace");
	struct ticked_task t = { 0 };
	struct tfile tf;
	co_context *manual;
	co_sched s;
	unsigned me = ~0u;
	(void)state;
	NEED_TRACE();
	assert_int_equal(co_sched_init(&s, &o), 0);
	start(1 << 12, path);
	manual = co_sched_pick(&s, 1);
	co_init(&t.co, ticked_task_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 1, &t.co), 0);
	while (!co_done(&t.co))
		assert_true(co_context_tick(manual) >= 0);
	stop_and_read(path, &tf);
	for (unsigned i = 0; i < tf.nth; i++)
		if (tf.th[i].tid == gettid())
			me = i;
	assert_true(me != ~0u);
	assert_int_equal(tf.th[me].context, (int)manual->index);
	assert_int_equal(thread_of_context(&tf, manual->index), tf.th[me].index);
	tfile_free(&tf);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}


/*
 * scheduler.md: "In a trace the ticking thread is the manual context's
 * track: its first tick in a session records the context's CONTEXT
 * event". A co_context_tick from another thread is refused (-EPERM: the
 * engine has its ticker) and records no CONTEXT event: the event is
 * recorded only once the engine accepted the tick. Without that, the
 * trace named a thread that never ticked as the manual context's too (two
 * threads carried its index), and a context thread whose frame made such
 * a call (refused -EBUSY) was renamed for the rest of the session
 * (test_groups refused_tick_keeps_current).
 */
struct wrong_tick {
	co_context *c;
	int ret;
	int tid;
};

static void *wrong_tick_main(void *arg)
{
	struct wrong_tick *w = arg;

	w->tid = gettid();
	w->ret = co_context_tick(w->c);
	return NULL;
}

static void test_refused_tick_not_named(void **state)
{
	static const co_sched_group g[2] = { { .contexts = 1 }, { .manual = 1 } };
	co_sched_opts o = { .groups = g, .ngroups = 2 };
	const char *path = tmp_path("refused.trace");
	struct ticked_task t = { 0 };
	struct wrong_tick w = { 0 };
	struct tfile tf;
	co_context *manual;
	co_sched s;
	pthread_t th;
	unsigned me = ~0u, other = ~0u;
	(void)state;
	NEED_TRACE();
	assert_int_equal(co_sched_init(&s, &o), 0);
	manual = co_sched_pick(&s, 1);
	assert_true(co_context_tick(manual) >= 0); /* this thread is its ticker */
	start(1 << 12, path);
	w.c = manual;
	assert_int_equal(pthread_create(&th, NULL, wrong_tick_main, &w), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(w.ret, -EPERM);
	co_init(&t.co, ticked_task_fn);
	assert_int_equal(co_sched_spawn_kind(&s, 1, &t.co), 0);
	while (!co_done(&t.co))
		assert_true(co_context_tick(manual) >= 0);
	stop_and_read(path, &tf);
	for (unsigned i = 0; i < tf.nth; i++) {
		if (tf.th[i].tid == gettid())
			me = i;
		if (tf.th[i].tid == w.tid)
			other = i;
	}
	assert_true(me != ~0u);
	assert_int_equal(tf.th[me].context, (int)manual->index);
	assert_int_equal(thread_of_context(&tf, manual->index), tf.th[me].index);
	if (other != ~0u) /* the refused thread: no context of its own */
		assert_int_not_equal(tf.th[other].context, (int)manual->index);
	tfile_free(&tf);
	assert_int_equal(co_sched_stop(&s, CO_STOP_DRAIN), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
}

/* ---- errors -------------------------------------------------------------- */

/* A thread that records five events and ends. */
static void *record_and_end(void *arg)
{
	co_frame f;

	(void)arg;
	co_init(&f, gen_fn);
	for (int i = 0; i < 5; i++)
		co_trace_frame(&f, CO_TRACE_YIELD);
	return NULL;
}

/* A stop that cannot write all of the file says so: no memory for the
 * snapshot's chunk or for the list of mappings (a list cut short would
 * name functions wrongly): -ENOMEM, the session ended anyway. A stream
 * takes its chunk at the start (-ENOMEM there, nothing started), so its
 * passes, the stop's last one included, never lack memory. */
static void test_stop_errors_said(void **state)
{
	co_trace_opts o = { .events = 64 };
	co_trace_stats st;
	struct tfile tf;
	struct stat sb;
	co_frame f;
	(void)state;
	NEED_TRACE();
	co_init(&f, gen_fn);
	o.path = tmp_path("stop.trace");
	for (unsigned long nth = 1; nth <= 2; nth++) { /* the chunk, the mappings */
		assert_int_equal(co_trace_start(&o), 0);
		co_trace_frame(&f, CO_TRACE_YIELD);
		co__fault_arm(CO__FAULT_ALLOC, nth, ENOMEM);
		assert_int_equal(co_trace_stop(), -ENOMEM);
		co__fault_arm(CO__FAULT_ALLOC, 0, 0);
		co_trace_stats_get(&st);
		assert_int_equal(st.recording, 0);
	}
	/* the second: the file holds what came before the mappings, and no
	 * list of them cut short */
	assert_int_equal(tfile_read(o.path, &tf), 0);
	assert_true(tf.n >= 1);
	assert_int_equal(tf.has_maps, 0);
	tfile_free(&tf);
	/* the stream: no chunk at the start, nothing started, the file at
	 * path holding the header at most; the same when its thread cannot
	 * be made */
	o.stream = 1;
	co__fault_arm(CO__FAULT_ALLOC, 1, ENOMEM);
	assert_int_equal(co_trace_start(&o), -ENOMEM);
	co__fault_arm(CO__FAULT_ALLOC, 0, 0);
	co_trace_stats_get(&st);
	assert_int_equal(st.recording, 0);
	assert_int_equal(stat(o.path, &sb), 0);
	assert_true(sb.st_size > 0 && sb.st_size <= 64);
	co__fault_arm(CO__FAULT_THREAD, 1, EAGAIN);
	assert_int_equal(co_trace_start(&o), -EAGAIN);
	co__fault_arm(CO__FAULT_THREAD, 0, 0);
	co_trace_stats_get(&st);
	assert_int_equal(st.recording, 0);
	assert_int_equal(stat(o.path, &sb), 0);
	assert_true(sb.st_size > 0 && sb.st_size <= 64);
	/* with its chunk, no pass lacks memory: every allocation refused from
	 * before the second event, both events are in the file (the list of
	 * mappings is not: -ENOMEM for it alone) */
	assert_int_equal(co_trace_start(&o), 0);
	co_trace_frame(&f, CO_TRACE_YIELD); /* this thread's buffer, made now */
	co__fault_arm_range(CO__FAULT_ALLOC, 1, ~0ul, ENOMEM);
	co_trace_frame(&f, CO_TRACE_YIELD);
	assert_int_equal(co_trace_stop(), -ENOMEM);
	co__fault_arm(CO__FAULT_ALLOC, 0, 0);
	assert_int_equal(tfile_read(o.path, &tf), 0);
	assert_true(tf.n >= 2);
	assert_int_equal(tf.has_maps, 0);
	tfile_free(&tf);
	assert_int_equal(co_trace_start(&o), 0); /* and with memory: 0 */
	co_trace_frame(&f, CO_TRACE_YIELD);
	assert_int_equal(co_trace_stop(), 0);
	unlink(o.path);
}

/* The first start makes a thread-specific key (a thread's buffer, told
 * when its thread ends): with none left it answers -EAGAIN and starts
 * nothing, and a start once one is free records. */
static void test_no_key_left(void **state)
{
	static pthread_key_t keys[4096]; /* glibc has 1024 */
	unsigned n = 0;
	co_trace_stats st;
	(void)state;
	NEED_TRACE();
	while (n < 4096 && pthread_key_create(&keys[n], NULL) == 0)
		n++;
	assert_true(n > 0 && n < 4096); /* every key taken */
	assert_int_equal(co_trace_start(NULL), -EAGAIN);
	co_trace_stats_get(&st);
	assert_int_equal(st.recording, 0);
	pthread_key_delete(keys[--n]);
	assert_int_equal(co_trace_start(NULL), 0);
	co_trace_stats_get(&st);
	assert_int_equal(st.recording, 1);
	assert_int_equal(co_trace_stop(), 0);
	while (n > 0)
		pthread_key_delete(keys[--n]);
}

static void test_errors(void **state)
{
	co_trace_opts o = { .events = 64 };
	co_trace_stats st;
	char dir[128];
	(void)state;
	NEED_TRACE();
	o.events = 0;
	assert_int_equal(co_trace_start(&o), -EINVAL);
	o.events = CO_TRACE_MAX_EVENTS + 1;
	assert_int_equal(co_trace_start(&o), -EINVAL);
	o.events = ~0u;
	assert_int_equal(co_trace_start(&o), -EINVAL);
	o.events = 64;
	o.stream = 1;
	assert_int_equal(co_trace_start(&o), -EINVAL); /* a stream needs a file */
	o.stream = 0;
	o.path = "/nonexistent-coring-dir/x.trace";
	assert_int_equal(co_trace_start(&o), -ENOENT);
	snprintf(dir, sizeof dir, "%s", tmp_path(""));
	o.path = dir;
	assert_int_equal(co_trace_start(&o), -EISDIR);
	co_trace_stats_get(&st);
	assert_int_equal(st.recording, 0); /* nothing started */

	assert_int_equal(co_trace_stop(), -EALREADY);
	assert_int_equal(co_trace_start(NULL), 0); /* the defaults */
	assert_int_equal(co_trace_start(NULL), -EALREADY);
	assert_int_equal(co_trace_dump(NULL), -EINVAL);
	assert_int_equal(co_trace_dump("/nonexistent-coring-dir/x.trace"), -ENOENT);
	assert_int_equal(co_trace_dump(dir), -EISDIR);
	if (access("/dev/full", W_OK) == 0) {
		struct stat st;

		assert_int_equal(co_trace_dump("/dev/full"), -ENOSPC);
		assert_int_equal(stat("/dev/full", &st), 0); /* a device is never removed */
	}
	/* a partial regular file is removed: a full file system, made with a
	 * file size limit */
	{
		const char *part = tmp_path("partial.trace");
		struct rlimit old, lim = { 100, RLIM_INFINITY };
		co_frame f;

		co_init(&f, gen_fn);
		co_trace_frame(&f, CO_TRACE_YIELD);
		assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
		lim.rlim_max = old.rlim_max;
		signal(SIGXFSZ, SIG_IGN);
		assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
		assert_int_equal(co_trace_dump(part), -EFBIG);
		assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
		assert_int_equal(access(part, F_OK), -1);
	}
	assert_int_equal(co_trace_stop(), 0);
	assert_int_equal(co_trace_stop(), -EALREADY);
	/* a file that cannot be written at the stop: the error, the session ends */
	if (access("/dev/full", W_OK) == 0) {
		o.path = "/dev/full";
		assert_int_equal(co_trace_start(&o), 0);
		assert_int_equal(co_trace_stop(), -ENOSPC);
		co_trace_stats_get(&st);
		assert_int_equal(st.recording, 0);
		o.stream = 1;
		assert_int_equal(co_trace_start(&o), -ENOSPC); /* its header fails */
		co_trace_stats_get(&st);
		assert_int_equal(st.recording, 0);
	}
	/* a start that fails keeps the session before it for co_trace_dump:
	 * its counts, and the buffer of a thread that has ended since */
	if (access("/dev/full", W_OK) == 0) {
		co_trace_opts plain = { .events = 64 };
		co_trace_stats a, b;
		pthread_t th;
		co_frame f;

		assert_int_equal(co_trace_start(&plain), 0);
		co_init(&f, gen_fn);
		for (int i = 0; i < 10; i++)
			co_trace_frame(&f, CO_TRACE_YIELD);
		assert_int_equal(pthread_create(&th, NULL, record_and_end, NULL), 0);
		pthread_join(th, NULL);
		assert_int_equal(co_trace_stop(), 0);
		co_trace_stats_get(&a);
		assert_int_equal(a.threads, 2);
		assert_true(a.recorded >= 15);
		o.path = "/dev/full";
		o.stream = 1;
		assert_int_equal(co_trace_start(&o), -ENOSPC);
		co_trace_stats_get(&b);
		assert_int_equal(b.recording, 0);
		assert_int_equal(b.threads, a.threads);
		assert_int_equal(b.recorded, a.recorded);
		assert_int_equal(b.dropped, a.dropped);
		assert_int_equal(b.lost, a.lost);
	}
	co_trace_stats_get(NULL); /* harmless */
}

static void test_env(void **state)
{
	const char *path = tmp_path("env.trace");
	char v[256];
	struct tfile tf;
	co_trace_stats st;
	co_frame f;
	static const char *const garbage[] = { "", ",events=64", "%s,events=abc", "%s,events=0",
					       "%s,events=-5", "%s,events=99999999999",
					       "%s,events=64x", "%s,bogus", "%s,events=",
					       "%s,stream,wat", "%s,", "%s,,,", "%s,,stream",
					       "%s,events= 5", "%s,events=+5", "%s,events=\t7" };
	(void)state;
	NEED_TRACE();
	unsetenv("CORING_TRACE");
	assert_int_equal(co_trace_env(), 0);
	for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
		snprintf(v, sizeof v, garbage[i], path);
		setenv("CORING_TRACE", v, 1);
		if (co_trace_env() != -EINVAL)
			fail_msg("CORING_TRACE=%s was accepted", v);
	}
	setenv("CORING_TRACE", "/nonexistent-coring-dir/x", 1);
	assert_int_equal(co_trace_env(), -ENOENT);
	co_trace_stats_get(&st);
	assert_int_equal(st.recording, 0);

	snprintf(v, sizeof v, "%s,events=5,stream", path);
	setenv("CORING_TRACE", v, 1);
	assert_int_equal(co_trace_env(), 1);
	co_init(&f, gen_fn);
	for (unsigned i = 0; i < 3; i++)
		co_trace_frame(&f, CO_TRACE_YIELD);
	stop_and_read(path, &tf);
	assert_int_equal(tf.n, 3);
	tfile_free(&tf);

	/* not stopped by the program: written at exit (by a child process) */
	snprintf(v, sizeof v, "%s", path);
	setenv("CORING_TRACE", v, 1);
	{
		pid_t pid = fork();
		int status;

		assert_true(pid >= 0);
		if (pid == 0) {
			if (co_trace_env() != 1)
				_exit(3);
			co_trace_frame(&f, CO_TRACE_YIELD);
			exit(0);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	assert_int_equal(tfile_read(path, &tf), 0);
	assert_int_equal(tf.n, 1);
	tfile_free(&tf);
	unlink(path);
	unsetenv("CORING_TRACE");
}

/* Two threads' co_trace_env can both succeed: the first's recording is
 * stopped, and the second's starts, before the first looks at whether the
 * exit handler is registered. Held open at CO__POINT_TRACE_ENV: the first
 * stops its recording there and starts the second, which runs its own
 * co_trace_env while the first goes on. The look is an atomic exchange:
 * TSan reports a plain flag's race here. Both record, then the exit
 * handler stops the last recording in a child process. */
struct env_race {
	pthread_t t;
	int second_ret, stop_ret, started;
	atomic_int passes;
};

static void *env_second(void *arg)
{
	struct env_race *r = arg;

	r->second_ret = co_trace_env();
	return NULL;
}

static void env_at_point(void *arg)
{
	struct env_race *r = arg;

	if (atomic_fetch_add(&r->passes, 1) != 0)
		return; /* the second thread's pass */
	r->stop_ret = co_trace_stop();
	r->started = pthread_create(&r->t, NULL, env_second, r) == 0;
}

static void test_env_from_two_threads(void **state)
{
	const char *path = tmp_path("env2.trace");
	pid_t pid;
	int status;
	co_frame f;
	(void)state;
	NEED_TRACE();
	setenv("CORING_TRACE", path, 1);
	pid = fork(); /* the exit handler runs at the child's exit */
	assert_true(pid >= 0);
	if (pid == 0) {
		static struct env_race r;
		int first;

		co__fault_on_point(CO__POINT_TRACE_ENV, env_at_point, &r);
		first = co_trace_env();
		if (!r.started)
			_exit(4);
		pthread_join(r.t, NULL);
		co__fault_on_point(CO__POINT_TRACE_ENV, NULL, NULL);
		if (first != 1 || r.second_ret != 1 || r.stop_ret != 0 || atomic_load(&r.passes) != 2)
			_exit(3);
		co_init(&f, gen_fn);
		co_trace_frame(&f, CO_TRACE_YIELD); /* into the second recording */
		exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	{
		struct tfile tf;

		assert_int_equal(tfile_read(path, &tf), 0);
		assert_int_equal(tf.n, 1); /* the exit handler wrote it */
		tfile_free(&tf);
	}
	unlink(path);
	unsetenv("CORING_TRACE");
}

/* A case's leftovers go with the directory the test helpers make (a stop
 * that fails leaves its file, as stop_errors_said's first passes do): a
 * child makes its own directory, leaves a file in it and exits; the
 * directory is gone. Run with the other cases in one process, the child
 * inherits the parent's directory (removed only by the parent): skipped. */
static void test_tmp_dir_removed_with_leftovers(void **state)
{
	char dir[320] = { 0 };
	const char *mine;
	struct stat sb;
	int fds[2], status;
	pid_t pid;
	(void)state;
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		const char *path = co_test_tmp_path("coring-trace", "left");
		int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
		size_t n = strlen(path);

		if (fd < 0 || write(fds[1], path, n) != (ssize_t)n)
			_exit(3);
		close(fd);
		exit(0); /* the helpers' exit handler runs */
	}
	close(fds[1]);
	assert_true(read(fds[0], dir, sizeof dir - 1) > 0);
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	*strrchr(dir, '/') = '\0';
	mine = co_test_tmp_path("coring-trace", "x");
	if (strncmp(mine, dir, strlen(dir)) == 0 && mine[strlen(dir)] == '/')
		skip(); /* the parent's directory, inherited */
	assert_int_equal(stat(dir, &sb), -1);
	assert_int_equal(errno, ENOENT);
}

/* ---- built without tracing ------------------------------------------------- */

static void test_compiled_out(void **state)
{
	co_trace_stats st;
	co_frame f;
	(void)state;
	if (co_trace_available())
		skip(); /* the other cases test this build */
	assert_int_equal(co_trace_start(NULL), -EOPNOTSUPP);
	assert_int_equal(co_trace_stop(), -EOPNOTSUPP);
	assert_int_equal(co_trace_dump(tmp_path("x.trace")), -EOPNOTSUPP);
	unsetenv("CORING_TRACE");
	assert_int_equal(co_trace_env(), 0);
	setenv("CORING_TRACE", tmp_path("x.trace"), 1);
	assert_int_equal(co_trace_env(), -EOPNOTSUPP);
	unsetenv("CORING_TRACE");
	co_init(&f, gen_fn);
	co_trace_frame(&f, CO_TRACE_YIELD);
	co_trace_stats_get(&st);
	assert_int_equal(st.recorded, 0);
	assert_int_equal(st.recording, 0);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_generator),
	cmocka_unit_test(test_cancelled_before_start),
	cmocka_unit_test(test_echo_exchange),
	cmocka_unit_test(test_sqe_and_multishot_recorded),
	cmocka_unit_test(test_transfer),
	cmocka_unit_test(test_cancelled_wait),
	cmocka_unit_test(test_time_limits),
	cmocka_unit_test(test_loop_hook),
	cmocka_unit_test(test_frame_hook_misuse),
	cmocka_unit_test(test_full_buffer_drops_oldest),
	cmocka_unit_test(test_null_opts_defaults),
	cmocka_unit_test(test_no_memory_for_buffer),
	cmocka_unit_test(test_resized_buffer_not_allocated),
	cmocka_unit_test(test_allocates_once_per_thread),
	cmocka_unit_test(test_stream),
	cmocka_unit_test(test_stream_writer_blocks_signals),
	cmocka_unit_test(test_start_waits_for_a_stop),
	cmocka_unit_test(test_threads_and_dumps),
	cmocka_unit_test(test_scheduler_recorded),
	cmocka_unit_test(test_follow_recorded),
	cmocka_unit_test(test_manual_context_named),
	cmocka_unit_test(test_refused_tick_not_named),
	cmocka_unit_test(test_errors),
	cmocka_unit_test(test_no_key_left),
	cmocka_unit_test(test_stop_errors_said),
	cmocka_unit_test(test_env),
	cmocka_unit_test(test_env_from_two_threads),
	cmocka_unit_test(test_tmp_dir_removed_with_leftovers),
	cmocka_unit_test(test_compiled_out),
};

CO_TEST_MAIN(tests, 1)
