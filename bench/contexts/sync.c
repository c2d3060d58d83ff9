/* SPDX-License-Identifier: MIT */
/*
 * Sync primitives across two contexts, against their thread baselines in
 * the same run:
 *   - mutex: coroutines on 2 contexts lock, bump a counter, unlock (FIFO
 *     hand-off when contended) vs 2 pthreads on a pthread_mutex_t;
 *   - channel: a producer coroutine on context 0 sends 8-byte items to a
 *     consumer on context 1 vs a writer thread and a reader thread on a
 *     pipe (one 8-byte write/read per item).
 * Each case runs ROUNDS times, alternating contestants; the median is
 * printed.
 *   sync [--quick]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <coring/channel.h>
#include <coring/scheduler.h>

#define ROUNDS 5

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "bench/sync: %s failed\n", what);
	exit(1);
}

static double median(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return v[n / 2];
}

/* ---- mutex ------------------------------------------------------------------------ */

static co_mutex cm;
static long counter;

struct locker {
	co_frame co;
	co_waiter w;
	long i, n;
};

static int locker_fn(co_frame *f)
{
	struct locker *l = (struct locker *)f;
	CO_BEGIN(f);
	for (l->i = 0; l->i < l->n; l->i++) {
		CO_AWAIT(f, co_mutex_lock(&l->w, &cm));
		counter++;
		co_mutex_unlock(&cm);
	}
	CO_END(f);
}

/* ops/s for `per` coroutines on each of 2 contexts, n locks each */
static double coring_mutex(int per, long n)
{
	co_sched s;
	struct locker *l = calloc((size_t)per * 2, sizeof *l);
	double t0, t;

	if (l == NULL || co_sched_init(&s, &(co_sched_opts){ .contexts = 2 }) < 0)
		die("setup");
	co_mutex_init(&cm);
	counter = 0;
	for (int i = 0; i < 2 * per; i++) {
		l[i].n = n;
		co_init(&l[i].co, locker_fn);
		if (co_sched_spawn_to(&s, (unsigned)i % 2, &l[i].co) < 0)
			die("submit");
	}
	t0 = now_s();
	if (co_sched_run(&s) < 0)
		die("run");
	t = now_s() - t0;
	if (counter != 2 * per * n)
		die("mutex count");
	co_sched_destroy(&s);
	free(l);
	return (double)(2 * per * n) / t;
}

static pthread_mutex_t pm = PTHREAD_MUTEX_INITIALIZER;

static void *pthread_locker(void *arg)
{
	long n = *(long *)arg;

	for (long i = 0; i < n; i++) {
		pthread_mutex_lock(&pm);
		counter++;
		pthread_mutex_unlock(&pm);
	}
	return NULL;
}

static double pthread_mutex(long n)
{
	pthread_t th[2];
	double t0, t;

	counter = 0;
	t0 = now_s();
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, pthread_locker, &n);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	t = now_s() - t0;
	if (counter != 2 * n)
		die("pthread count");
	return (double)(2 * n) / t;
}

/* ---- channel vs pipe ---------------------------------------------------------------- */

struct chan_end {
	co_frame co;
	co_waiter w;
	co_chan *ch;
	uint64_t v, sum;
	long i, n;
};

static int producer_fn(co_frame *f)
{
	struct chan_end *p = (struct chan_end *)f;
	CO_BEGIN(f);
	for (p->i = 0; p->i < p->n; p->i++) {
		p->v = (uint64_t)p->i;
		CO_AWAIT(f, co_chan_send(&p->w, p->ch, &p->v));
	}
	co_chan_close(p->ch);
	CO_END(f);
}

static int consumer_fn(co_frame *f)
{
	struct chan_end *c = (struct chan_end *)f;
	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_chan_recv(&c->w, c->ch, &c->v));
		if (co_result(f) < 0)
			break;
		c->sum += c->v;
		c->i++;
	}
	CO_END(f);
}

static double coring_chan(long n, unsigned cap)
{
	co_sched s;
	co_chan ch;
	struct chan_end p = { .n = n }, c = { .n = n };
	double t0, t;

	if (co_sched_init(&s, &(co_sched_opts){ .contexts = 2 }) < 0 ||
	    co_chan_init(&ch, sizeof(uint64_t), cap, NULL) < 0)
		die("setup");
	p.ch = c.ch = &ch;
	co_init(&p.co, producer_fn);
	co_init(&c.co, consumer_fn);
	co_sched_spawn_to(&s, 0, &p.co);
	co_sched_spawn_to(&s, 1, &c.co);
	t0 = now_s();
	if (co_sched_run(&s) < 0)
		die("run");
	t = now_s() - t0;
	if (c.i != n || c.sum != (uint64_t)n * (uint64_t)(n - 1) / 2)
		die("channel count");
	co_chan_destroy(&ch);
	co_sched_destroy(&s);
	return (double)n / t;
}

struct pipe_end {
	int fd;
	long n;
	uint64_t sum;
};

static void *pipe_writer(void *arg)
{
	struct pipe_end *p = arg;

	for (long i = 0; i < p->n; i++) {
		uint64_t v = (uint64_t)i;
		if (write(p->fd, &v, sizeof v) != sizeof v)
			die("pipe write");
	}
	return NULL;
}

static void *pipe_reader(void *arg)
{
	struct pipe_end *p = arg;

	for (long i = 0; i < p->n; i++) {
		uint64_t v;
		if (read(p->fd, &v, sizeof v) != sizeof v) /* atomic: 8 < PIPE_BUF */
			die("pipe read");
		p->sum += v;
	}
	return NULL;
}

static double pipe_chan(long n)
{
	int fds[2];
	pthread_t w, r;
	struct pipe_end pw = { .n = n }, pr = { .n = n };
	double t0, t;

	if (pipe(fds) < 0)
		die("pipe");
	pr.fd = fds[0];
	pw.fd = fds[1];
	t0 = now_s();
	pthread_create(&r, NULL, pipe_reader, &pr);
	pthread_create(&w, NULL, pipe_writer, &pw);
	pthread_join(w, NULL);
	pthread_join(r, NULL);
	t = now_s() - t0;
	close(fds[0]);
	close(fds[1]);
	if (pr.sum != (uint64_t)n * (uint64_t)(n - 1) / 2)
		die("pipe sum");
	return (double)n / t;
}

/* ---- the table ---------------------------------------------------------------------- */

static void row(const char *name, const char *base, double a, double b)
{
	printf("%-40s %14.0f %-18s %14.0f %7.2fx\n", name, a, base, b, a / b);
}

int main(int argc, char **argv)
{
	int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	long nm = quick ? 50000 : 500000, nc = quick ? 200000 : 2000000;
	double a[2][ROUNDS], b[2][ROUNDS], ca[2][ROUNDS], cb[ROUNDS];

	for (int r = 0; r < ROUNDS; r++) { /* contestants alternate */
		a[0][r] = coring_mutex(1, nm);
		b[0][r] = pthread_mutex(nm);
		a[1][r] = coring_mutex(32, nm / 32);
		b[1][r] = pthread_mutex(nm);
		ca[0][r] = coring_chan(nc, 256);
		cb[r] = pipe_chan(nc);
		ca[1][r] = coring_chan(nc, 16);
	}
	printf("bench/sync: 2 contexts vs 2 threads, median of %d rounds, ops/s\n", ROUNDS);
	printf("%-40s %14s %-18s %14s %8s\n", "coring", "ops/s", "baseline", "ops/s", "ratio");
	row("mutex lock+unlock, 1 coroutine/context", "pthread_mutex", median(a[0], ROUNDS),
	    median(b[0], ROUNDS));
	row("mutex lock+unlock, 32 coroutines/ctx", "pthread_mutex", median(a[1], ROUNDS),
	    median(b[1], ROUNDS));
	row("channel 8 B items, capacity 256", "pipe 8 B write/read", median(ca[0], ROUNDS),
	    median(cb, ROUNDS));
	row("channel 8 B items, capacity 16", "pipe 8 B write/read", median(ca[1], ROUNDS),
	    median(cb, ROUNDS));
	return 0;
}
