/* SPDX-License-Identifier: MIT */
/*
 * The coring HTTP server of the benchmark:
 *   http_coring --port P [--threads N] [--header-timeout MS] [--idle-timeout MS]
 *
 * HTTP/1.1 keep-alive "Hello, World!" server: a scheduler of N contexts,
 * a listener task on each (SO_REUSEPORT), one coroutine per connection;
 * requests are parsed and answered by bench/http/http_parse.c, as in
 * http_epoll. Pipelined requests are answered with one send.
 *
 * Slow clients: a request must be complete within --header-timeout ms
 * (default 10 s) of the accept or of its first byte: the recvs of a
 * request in progress carry a co_deadline for the time left, and -ETIME
 * closes the connection. A client that does not read blocks only its own
 * coroutine in its send.
 *
 * Idle keep-alive connections are closed after --idle-timeout ms (default
 * 60 s), so idle clients cannot take every descriptor. Their recv carries
 * no deadline (the common path costs no timeout SQE): a sweeper coroutine
 * per context wakes every quarter of the timeout (10 ms to 1 s), keeps
 * the context's coarse clock, and shuts down the connections that have
 * been idle for longer than the timeout; their recv then ends with 0. A
 * connection records the coarse clock when it becomes idle (no clock read
 * per request); the coarse clock lags by up to one interval, so one
 * interval is added to the limit: a connection is closed no sooner than
 * the timeout and no later than the timeout plus two intervals.
 * SIGINT/SIGTERM: co_sched_stop(CO_STOP_CANCEL) cancels every wait, exit 0.
 *
 * Built with HTTP_STREAM defined (the http_coring_stream program), each
 * connection receives through a co_stream instead: one multishot recv into
 * the context's ring of provided buffers (set up and torn down by the
 * context's sweeper), no recv SQE per request. The bytes a recv hands out
 * are copied into the request buffer as far as it has room, served, and
 * the rest copied after; a request in progress is limited by co_timeout
 * (-ETIME, as the deadline above).
 */
#ifdef HTTP_STREAM
#include <coring/stream.h>
#include <coring/timeout.h>
#define NAME "http_coring_stream"
#define BUF_SIZE 4096
#define BUF_COUNT 4096
#else
#define NAME "http_coring"
#endif
#include "coring_server.h"
#include "http_parse.h"

#define OUT_SIZE 16384

static uint64_t timeout_ns, idle_ns, interval_ns;
static struct hctx *contexts;   /* one per context, freed after the run */

struct conn;

/* A context's connections and its sweeper. */
struct hctx {
	co_frame co;
	co_io io;
	uint64_t now;                   /* coarse clock: the last sweep */
	struct conn *first;             /* the context's connections */
#ifdef HTTP_STREAM
	co_bufring ring;                /* the context's provided buffers */
	int ready;                      /* ring set up */
#endif
};

struct conn {
	co_frame co;
	co_io io;
	int fd, st, idle;
	size_t have, sent, out_len;
	uint64_t deadline;              /* 0: no request in progress */
	uint64_t idle_since;            /* coarse clock when it became idle */
	struct hctx *x;
	struct conn *prev, *next;       /* the context's list */
	struct http_parser p;
#ifdef HTTP_STREAM
	co_stream s;
	co_limit lim;
	const struct iovec *iov;        /* what the last recv handed out */
	unsigned niov, iv;              /* ... its buffers, the one being copied */
	size_t ioff;                    /* ... and how much of it is copied */
#endif
	char in[HTTP_MAX_REQUEST];
	char out[OUT_SIZE];
};

static void conn_unlink(struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		c->x->first = c->next;
	if (c->next)
		c->next->prev = c->prev;
}

static int sweeper_fn(co_frame *f)
{
	struct hctx *x = (struct hctx *)f;

	CO_BEGIN(f);
#ifdef HTTP_STREAM
	if (co_bufring_init(&x->ring, co_engine_current(), BUF_COUNT, BUF_SIZE) < 0) {
		fprintf(stderr, NAME ": buffer ring set-up failed\n");
		exit(1);
	}
	x->ready = 1;
#endif
	for (;;) {
		CO_AWAIT(f, co_sleep(&x->io, interval_ns));
		if (co_result(f) == -ECANCELED)
			break;
		x->now = co_now_ns();
		for (struct conn *c = x->first; c; c = c->next)
			if (c->idle && x->now - c->idle_since >= idle_ns + interval_ns) {
				c->idle = 0; /* once */
				shutdown(c->fd, SHUT_RDWR);
			}
	}
#ifdef HTTP_STREAM
	while (x->ring.streams != 0)
		CO_YIELD(f); /* the connections close their streams */
	co_bufring_destroy(&x->ring);
#endif
	CO_END(f);
}

#ifdef HTTP_STREAM
/* Copy what the last recv handed out into the request buffer, as far as
 * it has room; returns nonzero while some is left for later. */
static int conn_copy_in(struct conn *c)
{
	while (c->iv < c->niov && c->have < sizeof c->in) {
		size_t left = c->iov[c->iv].iov_len - c->ioff, room = sizeof c->in - c->have;
		size_t n = left < room ? left : room;

		memcpy(c->in + c->have, (char *)c->iov[c->iv].iov_base + c->ioff, n);
		c->have += n;
		c->ioff += n;
		if (c->ioff == c->iov[c->iv].iov_len) {
			c->iv++;
			c->ioff = 0;
		}
	}
	return c->iv < c->niov;
}
#endif

static int conn_fn(co_frame *f)
{
	struct conn *c = (struct conn *)f;
	uint64_t now;

	CO_BEGIN(f);
#ifdef HTTP_STREAM
	while (!c->x->ready) /* the context's sweeper sets the ring up first */
		CO_YIELD(f);
	if (co_stream_open(&c->s, &c->x->ring, c->fd) < 0)
		goto out;
#endif
	for (;;) {
#ifdef HTTP_STREAM
		if (c->deadline == 0) {
			CO_AWAIT(f, co_stream_recv(&c->s));
		} else {
			now = co_now_ns();
			if (now >= c->deadline)
				break;
			CO_AWAIT(f, co_timeout(&c->lim, co_stream_recv(&c->s), c->deadline - now));
		}
#else
		if (c->deadline == 0) {
			CO_AWAIT(f, co_recv(&c->io, c->fd, c->in + c->have, sizeof c->in - c->have, 0));
		} else {
			now = co_now_ns();
			if (now >= c->deadline)
				break;
			CO_AWAIT(f, co_deadline(co_recv(&c->io, c->fd, c->in + c->have,
							sizeof c->in - c->have, 0),
						c->deadline - now));
		}
#endif
		c->idle = 0;
		if (co_result(f) <= 0)
			break; /* closed (or shut down idle), error, -ETIME (too slow), -ECANCELED */
#ifdef HTTP_STREAM
		c->iov = co_stream_iov(&c->s, &c->niov);
		c->iv = 0;
		c->ioff = 0;
	more:
		conn_copy_in(c);
#else
		c->have += (size_t)co_result(f);
#endif
		do {
			c->st = http_serve(&c->p, c->in, &c->have, c->out, sizeof c->out, &c->out_len);
			for (c->sent = 0; c->sent < c->out_len; c->sent += (size_t)co_result(f)) {
				CO_AWAIT(f, co_send(&c->io, c->fd, c->out + c->sent,
						    c->out_len - c->sent, MSG_NOSIGNAL));
				if (co_result(f) <= 0)
					goto out;
			}
			c->out_len = 0;
		} while (c->st == HTTP_SERVE_FULL);
		if (c->st == HTTP_SERVE_CLOSE)
			break;
#ifdef HTTP_STREAM
		if (c->iv < c->niov)
			goto more; /* the recv handed out more than the buffer had room for */
#endif
		if (c->have == 0) { /* idle keep-alive: not timed by a deadline */
			c->deadline = 0;
			c->idle = 1;
			c->idle_since = c->x->now;
		} else if (c->deadline == 0) {
			c->deadline = co_now_ns() + timeout_ns; /* a request began */
		}
	}
out:
	conn_unlink(c);
#ifdef HTTP_STREAM
	CO_AWAIT(f, co_stream_close(&c->s)); /* -EINVAL if it never opened */
#endif
	CO_AWAIT(f, co_close(&c->io, c->fd));
	CO_END(f);
}

static co_frame *new_conn(int fd, void *ctx)
{
	struct hctx *x = ctx;
	struct conn *c = malloc(sizeof *c);

	if (c == NULL)
		return NULL;
	c->fd = fd;
	c->have = c->out_len = 0;
	c->idle = 0;
	c->deadline = co_now_ns() + timeout_ns; /* the first request is timed */
	c->x = x;
	c->prev = NULL;
	c->next = x->first;
	if (x->first)
		x->first->prev = c;
	x->first = c;
	http_parser_init(&c->p);
#ifdef HTTP_STREAM
	memset(&c->s, 0, sizeof c->s); /* not open */
	memset(&c->lim, 0, sizeof c->lim);
#endif
	co_init(&c->co, conn_fn);
	c->co.on_done = coring_free_frame;
	return &c->co;
}

static co_frame *per_context(unsigned i, void **ctx)
{
	struct hctx *x = &contexts[i];

	x->now = co_now_ns();
	co_init(&x->co, sweeper_fn);
	*ctx = x;
	return &x->co;
}

int main(int argc, char **argv)
{
	struct bench_args a = bench_parse(argc, argv);

	timeout_ns = (uint64_t)a.header_timeout_ms * CO_MS;
	idle_ns = (uint64_t)a.idle_timeout_ms * CO_MS;
	interval_ns = bench_idle_interval_ns(a.idle_timeout_ms);
	/* the connections of a context unlink themselves as they end, which
	 * may be after its sweeper ended: the contexts outlive the run */
	contexts = calloc((size_t)a.threads, sizeof *contexts);
	if (contexts == NULL)
		return 1;
	int rc = coring_server_main(NAME, a, new_conn, per_context);
	free(contexts);
	return rc;
}
