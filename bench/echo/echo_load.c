/* SPDX-License-Identifier: MIT */
/*
 * echo_load: the load generator of the echo benchmark (and a checking
 * client for the HTTP servers).
 *
 *   echo_load --port P [--conns N] [--size B] [--seconds T] [--warmup W]
 *             [--depth D] [--threads K] [--server-pid PID] [--http]
 *             [--churn MS] [--count K]
 *
 * Closed loop: each connection keeps D messages outstanding (1: ping-pong,
 * more: pipelined) and sends the next one when a whole echo came back.
 * Every echoed byte is compared with what was sent: message k of
 * connection c is a window of a fixed random table at an offset derived
 * from (c, k), so a byte that is lost, duplicated, reordered or crossed
 * with another connection is caught. --http sends "GET / HTTP/1.1" and
 * expects the exact hello response of bench/http/http_parse.h.
 *
 * Requests and latencies count only inside the measured window (after the
 * warm-up). With --server-pid, the window also samples the server's CPU
 * time (utime+stime of /proc/PID/stat, all threads), this process's own,
 * and the busy time of the whole machine (/proc/stat), so the runner gets
 * CPU per request and the CPU that other processes used (noise).
 * --churn MS closes and reopens a random connection every MS ms on
 * average (the soak's random disconnects).
 * --count K: each connection sends exactly K messages and closes once all
 * came back; every request counts (no warm-up window) and --seconds is
 * only a limit (the run fails if it is reached). The server then handles
 * exactly conns x K requests: what the instruction-count runs need.
 *
 * The open-file limit is raised to its hard limit when the connections
 * need it.
 *
 * Prints a human summary on stderr and one "echo_load key=value ..." line
 * on stdout. Exit 0 when every byte matched and no connection failed.
 */
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/resource.h>

#include "bench_util.h"
#include "http_parse.h"

/* ---- latency histogram: log-linear buckets (HdrHistogram-like) ---------- */

#define SUB_BITS 5                      /* 32 sub-buckets per power of two: ~3% */
#define SUB (1u << SUB_BITS)
#define HIST_BUCKETS (2 * SUB + 40 * SUB)

static unsigned hist_index(uint64_t v)
{
	if (v < 2 * SUB)
		return (unsigned)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v);
	unsigned shift = msb - SUB_BITS;
	unsigned i = (msb - SUB_BITS) * SUB + (unsigned)(v >> shift);
	return i < HIST_BUCKETS ? i : HIST_BUCKETS - 1;
}

/* The largest value that falls in bucket i (reported as the percentile). */
static uint64_t hist_value(unsigned i)
{
	if (i < 2 * SUB)
		return i;
	unsigned shift = i / SUB - 1;
	uint64_t base = (uint64_t)(i % SUB + SUB) << shift;
	return base + ((uint64_t)1 << shift) - 1;
}

/* ---- the message pattern ------------------------------------------------ */

#define TABLE_SIZE 65536
static unsigned char table[TABLE_SIZE + 65536];

static void table_init(void)
{
	uint64_t x = 0x9E3779B97F4A7C15ull;

	for (size_t i = 0; i < sizeof table; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		table[i] = (unsigned char)(x >> 24);
	}
}

static const unsigned char *echo_msg(unsigned c, uint64_t k)
{
	return table + ((c * 2654435761u + (unsigned)k * 40503u) & (TABLE_SIZE - 1));
}

/* ---- configuration and shared state -------------------------------------- */

struct opts {
	int port, conns, size, depth, threads, http, churn_ms, count;
	double seconds, warmup;
	int server_pid;
};

static struct opts o = { .conns = 50, .size = 64, .depth = 1, .threads = 1,
			 .seconds = 2, .warmup = 0.5, .port = -1 };
static uint64_t t_start, t_end;         /* the measured window (ns) */
static atomic_int failed;
static size_t out_len, in_len;          /* bytes of one request / response */
static const char *http_req = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

struct conn {
	int fd, id;
	uint64_t sent, done;            /* messages sent, messages fully echoed */
	size_t out_off;                 /* bytes of message `sent` already out */
	size_t in_off;                  /* bytes of message `done` already in */
	uint64_t *t_sent;               /* ring of D send times */
};

struct worker {
	pthread_t thread;
	int first, count;               /* its connections: ids first.. */
	int active;                     /* --count: connections not finished */
	struct conn *conns;
	uint64_t hist[HIST_BUCKETS];
	uint64_t requests, bytes_bad, reconnects;
	unsigned char *rbuf;
	size_t rbuf_size;
	uint64_t rng;
};

static const unsigned char *msg_out(struct conn *c, uint64_t k)
{
	return o.http ? (const unsigned char *)http_req : echo_msg((unsigned)c->id, k);
}

static const unsigned char *msg_in(struct conn *c, uint64_t k)
{
	return o.http ? (const unsigned char *)HTTP_HELLO_RESPONSE : echo_msg((unsigned)c->id, k);
}

static void fail(const char *what, struct conn *c)
{
	if (atomic_fetch_add(&failed, 1) < 5)
		fprintf(stderr, "echo_load: connection %d: %s (%s)\n", c ? c->id : -1, what,
			errno ? strerror(errno) : "closed");
}

static int dial(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)o.port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	uint64_t deadline = bench_now_ns() + 3000000000ull;

	for (;;) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
			bench_conn_opts(fd);
			fcntl(fd, F_SETFL, O_NONBLOCK);
			return fd;
		}
		close(fd);
		/* the server may still be starting */
		if (errno != ECONNREFUSED || bench_now_ns() > deadline)
			return -1;
		usleep(20000);
	}
}

/* Send what the window allows. -1 on error. */
static int pump(struct conn *c, uint64_t now)
{
	while (c->sent < c->done + (uint64_t)o.depth && (!o.count || c->sent < (uint64_t)o.count)) {
		const unsigned char *m = msg_out(c, c->sent);
		ssize_t n = send(c->fd, m + c->out_off, out_len - c->out_off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -1; /* EPOLLIN will come back */
		}
		if (c->out_off == 0)
			c->t_sent[c->sent % (uint64_t)o.depth] = now;
		c->out_off += (size_t)n;
		if (c->out_off == out_len) {
			c->out_off = 0;
			c->sent++;
		}
	}
	return 0;
}

/* Check what came in; count and time the messages it completes. */
static int absorb(struct worker *w, struct conn *c, const unsigned char *p, size_t n, uint64_t now)
{
	while (n) {
		size_t take = in_len - c->in_off;
		if (take > n)
			take = n;
		/* no more than was sent: a whole request per response (HTTP), or
		 * byte for byte (echo) */
		if (o.http ? c->done >= c->sent
			   : c->done * in_len + c->in_off + take > c->sent * out_len + c->out_off) {
			errno = 0;
			fail("more bytes than were sent", c);
			return -1;
		}
		if (memcmp(p, msg_in(c, c->done) + c->in_off, take) != 0) {
			w->bytes_bad++;
			errno = 0;
			fail("echoed bytes differ from the bytes sent", c);
			return -1;
		}
		p += take;
		n -= take;
		c->in_off += take;
		if (c->in_off == in_len) {
			c->in_off = 0;
			if (now >= t_start && now < t_end) {
				w->requests++;
				w->hist[hist_index(now - c->t_sent[c->done % (uint64_t)o.depth])]++;
			}
			c->done++;
			if (o.count && c->done == (uint64_t)o.count) {
				if (n) {
					errno = 0;
					fail("more bytes than were sent", c);
					return -1;
				}
				close(c->fd); /* also leaves the epoll set */
				c->fd = -1;
				w->active--;
			}
		}
	}
	return 0;
}

/* Start a connection: dial it unless main already did, then send. */
static int conn_open(struct worker *w, int ep, struct conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

	if (c->fd < 0)
		c->fd = dial();
	if (c->fd < 0) {
		fail("connect", c);
		return -1;
	}
	c->sent = c->done = 0;
	c->out_off = c->in_off = 0;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		return -1;
	(void)w;
	return pump(c, bench_now_ns());
}

static uint64_t rnd(struct worker *w)
{
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	return w->rng;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[512];
	int ep = epoll_create1(EPOLL_CLOEXEC);
	uint64_t next_churn = 0;

	w->active = w->count;
	for (int i = 0; i < w->count; i++)
		if (conn_open(w, ep, &w->conns[i]) < 0)
			goto out;
	if (o.churn_ms)
		next_churn = bench_now_ns() + (rnd(w) % (2u * (unsigned)o.churn_ms)) * 1000000u;
	for (;;) {
		int n = epoll_wait(ep, evs, 512, 50);
		uint64_t now = bench_now_ns();

		if (n < 0 && errno != EINTR) {
			fail("epoll_wait", NULL);
			break;
		}
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			ssize_t r = recv(c->fd, w->rbuf, w->rbuf_size, 0);

			if (r <= 0) {
				if (r < 0 && (errno == EAGAIN || errno == EINTR))
					continue;
				fail("recv", c);
				goto out;
			}
			if (absorb(w, c, w->rbuf, (size_t)r, now) < 0 ||
			    (c->fd >= 0 && pump(c, now) < 0)) {
				fail("send", c);
				goto out;
			}
		}
		if (o.count && w->active == 0)
			break;
		if (now >= t_end || atomic_load_explicit(&failed, memory_order_relaxed)) {
			if (o.count) {
				errno = 0;
				fail("--count not reached within --seconds", NULL);
			}
			break;
		}
		if (o.churn_ms && now >= next_churn) {
			/* a random disconnect, at a random point of a message */
			struct conn *c = &w->conns[rnd(w) % (uint64_t)w->count];
			close(c->fd);
			c->fd = -1;
			w->reconnects++;
			if (conn_open(w, ep, c) < 0)
				goto out;
			next_churn = now + (rnd(w) % (2u * (unsigned)o.churn_ms)) * 1000000u;
		}
	}
out:
	for (int i = 0; i < w->count; i++)
		if (w->conns[i].fd >= 0)
			close(w->conns[i].fd);
	close(ep);
	return NULL;
}

/* ---- CPU accounting ------------------------------------------------------ */

struct cpu_sample {
	double server, self, busy;      /* seconds */
};

static double ticks(void)
{
	static double hz;
	if (hz == 0)
		hz = (double)sysconf(_SC_CLK_TCK);
	return hz;
}

/* utime + stime of a process, all threads (fields 14 and 15). */
static double proc_cpu(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	p = fgets(buf, sizeof buf, f);
	fclose(f);
	if (p == NULL || (p = strrchr(buf, ')')) == NULL)
		return -1;
	/* after the name: state is field 3; utime, stime are 14, 15 */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / ticks();
}

/* Busy time of the whole machine: user + nice + system + steal (irq and
 * softirq are left out: loopback networking of the measured pair is
 * accounted there). */
static double machine_busy(void)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");

	if (f == NULL)
		return -1;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
		   &v[4], &v[5], &v[6], &v[7]) != 8) {
		fclose(f);
		return -1;
	}
	fclose(f);
	return (double)(v[0] + v[1] + v[2] + v[7]) / ticks();
}

static void sample(struct cpu_sample *s)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	s->self = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		  (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	s->server = o.server_pid ? proc_cpu(o.server_pid) : 0;
	s->busy = machine_busy();
}

/* Let this process open at least n descriptors, up to the hard limit. */
static void raise_nofile(rlim_t n)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < n) {
		rl.rlim_cur = n < rl.rlim_max ? n : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = { (time_t)(t / 1000000000u), (long)(t % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static void usage(void)
{
	fprintf(stderr, "usage: echo_load --port P [--conns N] [--size B] [--seconds T] "
			"[--warmup W] [--depth D] [--threads K] [--server-pid PID] [--http] "
			"[--churn MS] [--count K]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct cpu_sample s0, s1;
	struct worker *ws;
	struct conn *conns;
	uint64_t hist[HIST_BUCKETS] = { 0 }, requests = 0, reconnects = 0, t0;
	double p[3] = { 0.50, 0.99, 0.999 }, pv[3] = { 0 };

	for (int i = 1; i < argc; i++) {
		const char *k = argv[i];
		if (!strcmp(k, "--http")) {
			o.http = 1;
			continue;
		}
		if (i + 1 >= argc)
			usage();
		const char *v = argv[++i];
		if (!strcmp(k, "--port"))
			o.port = atoi(v);
		else if (!strcmp(k, "--conns"))
			o.conns = atoi(v);
		else if (!strcmp(k, "--size"))
			o.size = atoi(v);
		else if (!strcmp(k, "--seconds"))
			o.seconds = atof(v);
		else if (!strcmp(k, "--warmup"))
			o.warmup = atof(v);
		else if (!strcmp(k, "--depth"))
			o.depth = atoi(v);
		else if (!strcmp(k, "--threads"))
			o.threads = atoi(v);
		else if (!strcmp(k, "--server-pid"))
			o.server_pid = atoi(v);
		else if (!strcmp(k, "--churn"))
			o.churn_ms = atoi(v);
		else if (!strcmp(k, "--count"))
			o.count = atoi(v);
		else
			usage();
	}
	if (o.port <= 0 || o.port > 65535 || o.conns < 1 || o.size < 1 || o.size > 65536 ||
	    o.depth < 1 || o.depth > 1024 || o.threads < 1 || o.seconds <= 0 || o.warmup < 0 ||
	    o.churn_ms < 0 || o.count < 0 || (o.count && o.churn_ms))
		usage();
	if (o.threads > o.conns)
		o.threads = o.conns;
	signal(SIGPIPE, SIG_IGN);
	raise_nofile((rlim_t)o.conns + 64);
	table_init();
	out_len = o.http ? strlen(http_req) : (size_t)o.size;
	in_len = o.http ? strlen(HTTP_HELLO_RESPONSE) : (size_t)o.size;

	ws = calloc((size_t)o.threads, sizeof *ws);
	conns = calloc((size_t)o.conns, sizeof *conns);
	/* every connection is open before the clock starts: with thousands of
	 * them, connecting takes longer than a warm-up */
	for (int i = 0; i < o.conns; i++) {
		conns[i].id = i;
		if ((conns[i].fd = dial()) < 0) {
			fail("connect", &conns[i]);
			return 1;
		}
	}
	t0 = bench_now_ns();
	if (o.count)
		o.warmup = 0;
	t_start = t0 + (uint64_t)(o.warmup * 1e9);
	t_end = t_start + (uint64_t)(o.seconds * 1e9);
	for (int i = 0; i < o.conns; i++)
		conns[i].t_sent = calloc((size_t)o.depth, sizeof(uint64_t));
	for (int i = 0, first = 0; i < o.threads; i++) {
		struct worker *w = &ws[i];
		w->first = first;
		w->count = o.conns / o.threads + (i < o.conns % o.threads);
		w->conns = conns + first;
		w->rbuf_size = in_len * (size_t)o.depth + 65536;
		w->rbuf = malloc(w->rbuf_size);
		w->rng = 0x2545F4914F6CDD1Dull ^ ((uint64_t)i << 32) ^ t0;
		first += w->count;
		pthread_create(&w->thread, NULL, worker_main, w);
	}
	sleep_until(t_start);
	sample(&s0);
	if (!o.count) {
		sleep_until(t_end);
		sample(&s1);
	}
	for (int i = 0; i < o.threads; i++) {
		pthread_join(ws[i].thread, NULL);
		requests += ws[i].requests;
		reconnects += ws[i].reconnects;
		for (unsigned b = 0; b < HIST_BUCKETS; b++)
			hist[b] += ws[i].hist[b];
		free(ws[i].rbuf);
	}
	if (o.count)
		sample(&s1);
	for (int k = 0; k < 3; k++) {
		uint64_t want = (uint64_t)ceil(p[k] * (double)requests), acc = 0;
		for (unsigned b = 0; b < HIST_BUCKETS && requests; b++) {
			acc += hist[b];
			if (acc >= want) {
				pv[k] = (double)hist_value(b) / 1000.0;
				break;
			}
		}
	}

	double secs = o.count ? (double)(bench_now_ns() - t0) / 1e9 : o.seconds;
	double rps = (double)requests / secs;
	double server = s1.server - s0.server, self = s1.self - s0.self;
	double other = (s1.busy - s0.busy) - self - (o.server_pid ? server : 0);
	int nfail = atomic_load(&failed);

	if (other < 0)
		other = 0;
	fprintf(stderr, "echo_load: %d conns x %d B, depth %d: %.0f req/s, p50 %.1f us, "
			"p99 %.1f us, p99.9 %.1f us%s\n", o.conns, o.http ? 0 : o.size, o.depth,
		rps, pv[0], pv[1], pv[2], nfail ? ", FAILED" : "");
	printf("echo_load conns=%d size=%d depth=%d http=%d seconds=%.3f requests=%llu rps=%.0f "
	       "p50_us=%.1f p99_us=%.1f p999_us=%.1f server_cpu_s=%.3f server_us_per_req=%.3f "
	       "load_cpu_s=%.3f other_cpu_s=%.3f reconnects=%llu errors=%d\n",
	       o.conns, o.http ? 0 : o.size, o.depth, o.http, secs, (unsigned long long)requests,
	       rps, pv[0], pv[1], pv[2], server,
	       requests ? server * 1e6 / (double)requests : 0.0, self, other,
	       (unsigned long long)reconnects, nfail);
	for (int i = 0; i < o.conns; i++)
		free(conns[i].t_sent);
	free(conns);
	free(ws);
	return nfail || requests == 0 || (o.count && requests != (uint64_t)o.count * (uint64_t)o.conns)
		       ? 1 : 0;
}
