/* SPDX-License-Identifier: MIT */
/*
 * Hand-off between contexts: what it costs to pass work, an item or a lock
 * from one context of a scheduler to the other (2 contexts, public API
 * only). bench/contexts/handoff_pthread.c measures the same shapes between
 * two plain threads (the machine's limit) and bench/contexts/handoff.go in
 * Go; bench/runner/run.py runs the three in turn and tabulates them.
 *
 *   pingpong  a coroutine on context 0 sends an 8-byte item on a channel of
 *             capacity 1 to one on context 1, which sends it back on a
 *             second channel: ns per round trip
 *   transfer  one coroutine hops co_transfer_to(context 1) and back to
 *             context 0: ns per round trip
 *   spawn     a coroutine on context 0 runs a child on context 1 with
 *             co_spawn_on and awaits it (the child answers its input + 1):
 *             ns per round trip
 *   chan1, chan16, chan256
 *             a producer on context 0 sends 8-byte items (0, 1, 2 ...) to a
 *             consumer on context 1 through a channel of that capacity:
 *             items per second
 *   chan16_many, chan256_many
 *             chan16 and chan256 with a consumer that takes what the channel
 *             holds (co_chan_recv_many, up to the capacity)
 *   pingpong_one, chan16_one, chan256_one
 *             pingpong, chan16 and chan256 with both ends on context 0: what
 *             the same channel costs without a thread between its ends
 *             (Go's pingpong and chan shapes end up there: its woken
 *             goroutine runs next on the waker's P)
 *   mutex1, mutex32
 *             1 (32) coroutines on each context, started together (a
 *             latch), lock a co_mutex, bump a shared counter, unlock: lock
 *             operations per second
 *   pingpong_roam, spawn_roam, chan1_roam, chan16_roam, chan256_roam,
 *   mutex1_roam, mutex32_roam
 *             the same shapes on a scheduler that steals, with every frame
 *             marked co_sched_roam: a frame woken by a frame of the other
 *             context follows it there (what Go and tokio do with a
 *             woken goroutine or task; docs/scheduler.md)
 *   idle      a burst of ping-pong (at most 0.1 s), then the process's CPU
 *             time over --idle-ms starting 1 ms after the burst's last
 *             coroutine finished: % of one CPU (after_ms: how long after
 *             that the window started, 1 unless the scheduler took longer to
 *             report the burst done)
 *
 * Every shape checks its result: each item arrives once and in order,
 * each answer is the one expected, each hop lands on the context it
 * asked for, the counter equals the increments made; otherwise it exits 1.
 * Command line and output: bench/contexts/handoff.h.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <coring/channel.h>
#include <coring/scheduler.h>
#include <coring/when.h>

#include "handoff.h"

static const char *const shapes[] = { "pingpong", "transfer", "spawn", "chan1", "chan16",
				      "chan256", "chan16_many", "chan256_many", "pingpong_one",
				      "chan16_one", "chan256_one",
				      "mutex1", "mutex32", "idle", "pingpong_roam", "spawn_roam",
				      "chan1_roam", "chan16_roam", "chan256_roam", "mutex1_roam",
				      "mutex32_roam", NULL };
static int one_context;  /* the _one shapes: context 1's side runs on 0 */

static co_sched scheds[2]; /* frames that stay; frames that roam (stealing) */
static co_sched *sched = &scheds[0];
static int roam; /* the _roam shapes: every frame may follow its waker */
static struct handoff_args args;
static uint64_t deadline;          /* of the shape running */
static struct handoff_span span;   /* of the shape running */

/* The shape that starts now: its workers' span and its time bound. */
static void shape_start(int workers, double secs)
{
	handoff_span_init(&span, workers);
	deadline = handoff_now_ns() + (uint64_t)(secs * 1e9);
}

/* Whether a worker at step i (counted from 0) is past the time bound; the
 * clock is read every `every` steps (a power of two). */
static int past_deadline(long i, long every)
{
	return (i & (every - 1)) == every - 1 && handoff_now_ns() > deadline;
}

static void run_all(const char *shape)
{
	int err = co_sched_run(sched);

	if (err != 0) {
		fprintf(stderr, "handoff: coring %s: co_sched_run: %s\n", shape, strerror(-err));
		exit(1);
	}
}

static void spawn_to(unsigned ctx, co_frame *f, int (*fn)(co_frame *))
{
	co_init(f, fn);
	if (co_sched_roam(f, roam) < 0 || co_sched_spawn_to(sched, one_context ? 0 : ctx, f) < 0)
		handoff_fail("coring", "setup", "co_sched_spawn_to failed");
}

/* ---- channels: ping-pong and throughput --------------------------------------------- */

/* One end of a channel shape: sends on out, receives from in. */
struct end {
	co_frame co;
	co_waiter w;
	co_chan *in, *out;
	uint64_t v;
	long i, n;
	const char *bad;
	uint64_t end_ns;  /* when it finished */
};

/* context 0: item i out, the same item back, n times (or until the
 * deadline); then closes its channel, which ends the other side */
static int pinger_fn(co_frame *f)
{
	struct end *p = (struct end *)f;
	CO_BEGIN(f);
	handoff_span_begin(&span);
	for (p->i = 0; p->i < p->n && !past_deadline(p->i, 16); p->i++) {
		p->v = (uint64_t)p->i;
		CO_AWAIT(f, co_chan_send(&p->w, p->out, &p->v));
		if (co_result(f) != 0) {
			p->bad = "send failed";
			break;
		}
		CO_AWAIT(f, co_chan_recv(&p->w, p->in, &p->v));
		if (co_result(f) != 0 || p->v != (uint64_t)p->i) {
			p->bad = "wrong or missing answer";
			break;
		}
	}
	handoff_span_end(&span);
	co_chan_close(p->out);
	p->end_ns = handoff_now_ns();
	CO_END(f);
}

/* context 1: every item back, in order, until the pinger closes */
static int ponger_fn(co_frame *f)
{
	struct end *p = (struct end *)f;
	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_chan_recv(&p->w, p->in, &p->v));
		if (co_result(f) == -EPIPE)
			break;
		if (co_result(f) != 0 || p->v != (uint64_t)p->i) {
			p->bad = "item lost or out of order";
			break;
		}
		p->v += args.miscount && p->i == MISCOUNT_AT;
		p->i++;
		CO_AWAIT(f, co_chan_send(&p->w, p->out, &p->v));
		if (co_result(f) != 0) {
			p->bad = "send back failed";
			break;
		}
	}
	co_chan_close(p->out); /* on a failure, the pinger's wait ends */
	p->end_ns = handoff_now_ns();
	CO_END(f);
}

static void chan_pair(co_chan *a, co_chan *b, unsigned cap, const char *shape)
{
	if (co_chan_init(a, sizeof(uint64_t), cap, NULL) < 0 ||
	    (b != NULL && co_chan_init(b, sizeof(uint64_t), cap, NULL) < 0))
		handoff_fail("coring", shape, "co_chan_init failed");
}

/* when the last ping-pong's last coroutine finished */
static uint64_t pingpong_end;

/* n round trips at most, within secs; returns the round trips done */
static long pingpong(const char *shape, long n, double secs)
{
	static struct end a, b;
	co_chan ping, pong;
	long done;

	chan_pair(&ping, &pong, 1, shape);
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	a.out = b.in = &ping;
	a.in = b.out = &pong;
	a.n = n;
	shape_start(1, secs);
	spawn_to(1, &b.co, ponger_fn);
	spawn_to(0, &a.co, pinger_fn);
	run_all(shape);
	if (a.bad || b.bad)
		handoff_fail("coring", shape, a.bad ? a.bad : b.bad);
	if (b.i != a.i || a.i < 1)
		handoff_fail("coring", shape, "round trips counted differently on the two sides");
	done = a.i;
	pingpong_end = a.end_ns > b.end_ns ? a.end_ns : b.end_ns;
	co_chan_destroy(&ping);
	co_chan_destroy(&pong);
	return done;
}

/* context 0: 0, 1, 2 ... until n or the deadline, then close */
static int producer_fn(co_frame *f)
{
	struct end *p = (struct end *)f;
	CO_BEGIN(f);
	handoff_span_begin(&span);
	for (p->i = 0; p->i < p->n && !past_deadline(p->i, 256); p->i++) {
		p->v = (uint64_t)p->i + (args.miscount && p->i == MISCOUNT_AT);
		CO_AWAIT(f, co_chan_send(&p->w, p->out, &p->v));
		if (co_result(f) != 0) {
			p->bad = "send failed";
			break;
		}
	}
	co_chan_close(p->out);
	CO_END(f);
}

/* context 1: every item, in order, until the channel is closed and empty */
static int consumer_fn(co_frame *f)
{
	struct end *c = (struct end *)f;
	CO_BEGIN(f);
	handoff_span_begin(&span);
	for (;;) {
		CO_AWAIT(f, co_chan_recv(&c->w, c->in, &c->v));
		if (co_result(f) == -EPIPE)
			break;
		if (co_result(f) != 0 || c->v != (uint64_t)c->i) {
			c->bad = "item lost or out of order";
			co_chan_close(c->in); /* the producer's wait ends */
			break;
		}
		c->i++;
	}
	handoff_span_end(&span);
	CO_END(f);
}

/* The same, taking what the channel holds (co_chan_recv_many, up to its
 * capacity) */
static uint64_t batch[256];

static int batch_consumer_fn(co_frame *f)
{
	struct end *c = (struct end *)f;
	CO_BEGIN(f);
	handoff_span_begin(&span);
	for (;;) {
		CO_AWAIT(f, co_chan_recv_many(&c->w, c->in, batch, c->in->cap));
		if (co_result(f) == -EPIPE)
			break;
		for (int k = 0; k < co_result(f); k++, c->i++)
			if (batch[k] != (uint64_t)c->i)
				c->bad = "item lost or out of order";
		if (co_result(f) < 1 || c->bad) {
			c->bad = c->bad ? c->bad : "recv_many failed";
			co_chan_close(c->in);
			break;
		}
	}
	handoff_span_end(&span);
	CO_END(f);
}

static void throughput(const char *shape, unsigned cap, long n)
{
	static struct end p, c;
	co_chan ch;
	int many = strstr(shape, "_many") != NULL;

	chan_pair(&ch, NULL, cap, shape);
	memset(&p, 0, sizeof p);
	memset(&c, 0, sizeof c);
	p.out = c.in = &ch;
	p.n = n;
	shape_start(1, args.seconds);
	spawn_to(1, &c.co, many ? batch_consumer_fn : consumer_fn);
	spawn_to(0, &p.co, producer_fn);
	run_all(shape);
	if (p.bad || c.bad)
		handoff_fail("coring", shape, c.bad ? c.bad : p.bad);
	if (c.i != p.i || c.i < 1)
		handoff_fail("coring", shape, "items sent and received differ");
	co_chan_destroy(&ch);
	handoff_rate("coring", shape, c.i, handoff_span_seconds(&span));
}

/* ---- co_transfer_to and co_spawn_on round trips -------------------------------------- */

/* A round-trip shape run by one coroutine on context 0: what it did. */
struct trips {
	co_frame co;
	long i, n;
	const char *bad;
};

static void trips(const char *shape, struct trips *t, int (*fn)(co_frame *))
{
	t->i = 0;
	t->n = args.rt;
	t->bad = NULL;
	shape_start(1, args.seconds);
	spawn_to(0, &t->co, fn);
	run_all(shape);
	if (t->bad)
		handoff_fail("coring", shape, t->bad);
	handoff_rt("coring", shape, t->i, handoff_span_seconds(&span));
}

/* the index of the context the step i of a hop goes to: 1, but for the
 * step --miscount gets wrong */
static unsigned other_ctx(long i)
{
	return args.miscount && i == MISCOUNT_AT ? 0 : 1;
}

static struct hopper {
	struct trips r;
	co_transfer t;
} hopper;

static int hopper_fn(co_frame *f)
{
	struct hopper *h = (struct hopper *)f;
	CO_BEGIN(f);
	handoff_span_begin(&span);
	for (; h->r.i < h->r.n && !past_deadline(h->r.i, 16); h->r.i++) {
		CO_AWAIT(f, co_transfer_to(&h->t, &sched->ctx[other_ctx(h->r.i)]));
		if (co_result(f) != 0 || co_context_current() != &sched->ctx[1]) {
			h->r.bad = "the hop to context 1 did not land there";
			break;
		}
		CO_AWAIT(f, co_transfer_to(&h->t, &sched->ctx[0]));
		if (co_result(f) != 0 || co_context_current() != &sched->ctx[0]) {
			h->r.bad = "the hop back to context 0 did not land there";
			break;
		}
	}
	handoff_span_end(&span);
	CO_END(f);
}

struct kid {
	co_frame co;
	long in, out;
	unsigned ran_on; /* the index of the context it ran on */
};

/* on context 1: answers in + 1 */
static int kid_fn(co_frame *f)
{
	struct kid *k = (struct kid *)f;
	CO_BEGIN(f);
	k->ran_on = co_context_current() ? co_context_current()->index : ~0u;
	if (co_context_current() != &sched->ctx[1])
		CO_RETURN(f, -EXDEV);
	k->out = k->in + 1;
	CO_END(f);
}

static struct spawner {
	struct trips r;
	co_when w;
	struct kid kid;
} spawner;

static int spawner_fn(co_frame *f)
{
	struct spawner *s = (struct spawner *)f;
	CO_BEGIN(f);
	handoff_span_begin(&span);
	for (; s->r.i < s->r.n && !past_deadline(s->r.i, 16); s->r.i++) {
		co_init(&s->kid.co, kid_fn);
		s->kid.in = s->r.i;
		CO_AWAIT(f, co_spawn_on(&s->w, &sched->ctx[other_ctx(s->r.i)].engine, &s->kid.co));
		if (co_result(f) != 0 || s->kid.out != s->r.i + 1) {
			/* which of the three, with the step: a failure seen
			 * once under load is told apart the next time */
			static char why[128];

			if (co_result(f) == -EXDEV)
				snprintf(why, sizeof why, "step %ld: the child ran on context %u, not 1",
					 s->r.i, s->kid.ran_on);
			else if (co_result(f) != 0)
				snprintf(why, sizeof why, "step %ld: co_spawn_on answered %s", s->r.i,
					 strerror(-co_result(f)));
			else
				snprintf(why, sizeof why, "step %ld: the child answered %ld, not %ld",
					 s->r.i, s->kid.out, s->r.i + 1);
			s->r.bad = why;
			break;
		}
	}
	handoff_span_end(&span);
	CO_END(f);
}

/* ---- mutex ------------------------------------------------------------------------------ */

static co_mutex mutex;
static long counter;  /* under mutex */
static co_latch gate; /* every locker is there: they start together */

struct locker {
	co_frame co;
	co_waiter w;
	long i, n;
	const char *bad;
};

static int locker_fn(co_frame *f)
{
	struct locker *l = (struct locker *)f;
	CO_BEGIN(f);
	co_latch_count_down(&gate, 1);
	CO_AWAIT(f, co_latch_wait(&l->w, &gate));
	handoff_span_begin(&span);
	for (l->i = 0; l->i < l->n && !past_deadline(l->i, 64); l->i++) {
		CO_AWAIT(f, co_mutex_lock(&l->w, &mutex));
		if (co_result(f) != 0) {
			l->bad = "lock failed";
			break;
		}
		counter += 1 + (args.miscount && l->i == MISCOUNT_AT);
		if (co_mutex_unlock(&mutex) != 0) {
			l->bad = "unlock failed";
			break;
		}
	}
	handoff_span_end(&span);
	CO_END(f);
}

static void mutex_shape(const char *shape, int per)
{
	struct locker *l = calloc((size_t)per * 2, sizeof *l);
	long sum = 0;

	if (l == NULL || co_mutex_init(&mutex) != 0 || co_latch_init(&gate, 2 * (unsigned)per) != 0)
		handoff_fail("coring", shape, "setup failed");
	counter = 0;
	shape_start(2 * per, args.seconds);
	for (int i = 0; i < 2 * per; i++) {
		l[i].n = args.ops / (2 * per);
		spawn_to((unsigned)i % 2, &l[i].co, locker_fn);
	}
	run_all(shape);
	for (int i = 0; i < 2 * per; i++) {
		if (l[i].bad)
			handoff_fail("coring", shape, l[i].bad);
		sum += l[i].i;
	}
	if (counter != sum)
		handoff_fail("coring", shape, "the counter differs from the increments made");
	co_mutex_destroy(&mutex);
	co_latch_destroy(&gate);
	free(l);
	handoff_rate("coring", shape, sum, handoff_span_seconds(&span));
}

/* ---- an idle scheduler after a burst ------------------------------------------------------ */

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static void idle(void)
{
	long n = pingpong("idle", args.rt, args.seconds < 0.1 ? args.seconds : 0.1);
	uint64_t start = pingpong_end + 1000000u, late = handoff_now_ns();
	double c0, c1, window = (double)args.idle_ms / 1e3;
	char extra[64];

	/* the window starts 1 ms after the burst's last coroutine finished,
	 * or now if the scheduler took longer than that to report it */
	if (late > start)
		start = late;
	sleep_until(start);
	c0 = cpu_s();
	sleep_until(start + (uint64_t)args.idle_ms * 1000000u);
	c1 = cpu_s();
	snprintf(extra, sizeof extra, "after_ms=%.3f burst=%ld",
		 (double)(start - pingpong_end) / 1e6, n);
	handoff_line("coring", "idle", n, window, (c1 - c0) * 100 / window, "cpu_pct", extra);
}

static void sched_up(co_sched *sc, int steal)
{
	int err = co_sched_init(sc, &(co_sched_opts){ .contexts = 2, .steal = steal });

	if (err < 0) {
		fprintf(stderr, "handoff: co_sched_init: %s\n", strerror(-err));
		exit(1);
	}
}

static void sched_down(co_sched *sc)
{
	int err = co_sched_destroy(sc);

	if (err < 0) {
		fprintf(stderr, "handoff: co_sched_destroy: %s\n", strerror(-err));
		exit(1);
	}
}

/* The shapes that run on both schedulers, with sfx after their names. */
static void two_context_shapes(const char *sfx)
{
	char name[32];

#define SHAPE(s) (snprintf(name, sizeof name, "%s%s", (s), sfx), name)
	if (handoff_want(&args, SHAPE("pingpong"))) {
		long n = pingpong(name, args.rt, args.seconds);
		handoff_rt("coring", name, n, handoff_span_seconds(&span));
	}
	if (handoff_want(&args, SHAPE("spawn")))
		trips(name, &spawner.r, spawner_fn);
	if (handoff_want(&args, SHAPE("chan1")))
		throughput(name, 1, args.items);
	if (handoff_want(&args, SHAPE("chan16")))
		throughput(name, 16, args.items);
	if (handoff_want(&args, SHAPE("chan256")))
		throughput(name, 256, args.items);
	if (handoff_want(&args, SHAPE("mutex1")))
		mutex_shape(name, 1);
	if (handoff_want(&args, SHAPE("mutex32")))
		mutex_shape(name, 32);
#undef SHAPE
}

int main(int argc, char **argv)
{
	args = handoff_parse(argc, argv);
	handoff_check_shapes(&args, shapes, argv[0]);
	sched_up(&scheds[0], 0);
	two_context_shapes("");
	if (handoff_want(&args, "transfer"))
		trips("transfer", &hopper.r, hopper_fn);
	if (handoff_want(&args, "chan16_many"))
		throughput("chan16_many", 16, args.items);
	if (handoff_want(&args, "chan256_many"))
		throughput("chan256_many", 256, args.items);
	one_context = 1;
	if (handoff_want(&args, "pingpong_one")) {
		long n = pingpong("pingpong_one", args.rt, args.seconds);
		handoff_rt("coring", "pingpong_one", n, handoff_span_seconds(&span));
	}
	if (handoff_want(&args, "chan16_one"))
		throughput("chan16_one", 16, args.items);
	if (handoff_want(&args, "chan256_one"))
		throughput("chan256_one", 256, args.items);
	one_context = 0;
	if (handoff_want(&args, "idle"))
		idle();
	/* one scheduler at a time: the idle one's threads would share the CPUs */
	sched_down(&scheds[0]);
	sched_up(&scheds[1], 1);
	sched = &scheds[1];
	roam = 1;
	two_context_shapes("_roam");
	sched_down(&scheds[1]);
	return 0;
}
