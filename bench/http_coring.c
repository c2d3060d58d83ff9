/* SPDX-License-Identifier: MIT */
/*
 * The coring HTTP server of the benchmark:
 *   http_coring --port P [--threads N] [--header-timeout MS]
 *
 * HTTP/1.1 keep-alive "Hello, World!" server: a scheduler of N contexts,
 * a listener task on each (SO_REUSEPORT), one coroutine per connection;
 * requests are parsed and answered by bench/http_parse.c, as in
 * http_epoll. Pipelined requests are answered with one send.
 *
 * Slow clients: a request must be complete within --header-timeout ms
 * (default 10 s) of the accept or of its first byte: the recvs of a
 * request in progress carry a co_deadline for the time left, and -ETIME
 * closes the connection. The recv of an idle keep-alive connection has no
 * deadline (so the common path costs no timeout SQE). A client that does
 * not read blocks only its own coroutine in its send.
 * SIGINT/SIGTERM: co_sched_shutdown cancels all I/O, exit 0.
 */
#include <stdatomic.h>
#include <coring/io.h>
#include <coring/scheduler.h>

#include "bench_util.h"
#include "http_parse.h"

#define OUT_SIZE 16384

static uint64_t timeout_ns;
/* Set before co_sched_shutdown: a connection that was between two awaits
 * when the shutdown cancelled all I/O must not start a new recv. */
static atomic_int stopping;

struct conn {
	co_frame co;
	co_io io;
	int fd, st;
	size_t have, sent, out_len;
	uint64_t deadline;              /* 0: no request in progress */
	struct http_parser p;
	char in[HTTP_MAX_REQUEST];
	char out[OUT_SIZE];
};

static int conn_fn(co_frame *f)
{
	struct conn *c = (struct conn *)f;
	uint64_t now;

	CO_BEGIN(f);
	for (;;) {
		if (atomic_load_explicit(&stopping, memory_order_relaxed))
			break;
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
		if (co_result(f) <= 0)
			break; /* closed, error, -ETIME (too slow), -ECANCELED (shutdown) */
		c->have += (size_t)co_result(f);
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
		if (c->have == 0)
			c->deadline = 0; /* idle keep-alive: not timed */
		else if (c->deadline == 0)
			c->deadline = co_now_ns() + timeout_ns; /* a request began */
	}
out:
	CO_AWAIT(f, co_close(&c->io, c->fd));
	CO_END(f);
}

static void free_frame(co_frame *f)
{
	free(f);
}

struct listener {
	co_frame co;
	co_io io;
	int lfd;
};

static int listener_fn(co_frame *f)
{
	struct listener *l = (struct listener *)f;
	struct conn *c;
	int fd;

	CO_BEGIN(f);
	while (!atomic_load_explicit(&stopping, memory_order_relaxed)) {
		CO_AWAIT(f, co_accept(&l->io, l->lfd, NULL, NULL, SOCK_CLOEXEC));
		fd = co_result(f);
		if (fd == -ECANCELED)
			break;
		if (fd < 0) { /* EMFILE and friends: back off, keep serving */
			CO_AWAIT(f, co_sleep(&l->io, 10 * CO_MS));
			if (co_result(f) == -ECANCELED)
				break;
			continue;
		}
		bench_conn_opts(fd);
		c = malloc(sizeof *c);
		if (c == NULL) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->have = c->out_len = 0;
		c->deadline = co_now_ns() + timeout_ns; /* the first request is timed */
		http_parser_init(&c->p);
		co_init(&c->co, conn_fn);
		c->co.on_done = free_frame;
		co_engine_spawn(co_engine_current(), &c->co);
	}
	CO_END(f);
}

static void stop_all(void *arg)
{
	/* the flag is seen by every context before its cancel: the engine
	 * reads the stop request with acquire, after this store */
	atomic_store(&stopping, 1);
	co_sched_shutdown(arg);
}

int main(int argc, char **argv)
{
	struct bench_args a = bench_parse(argc, argv);
	co_sched_opts o = { .contexts = (unsigned)a.threads,
			    .engine = { .sq_entries = 1024, .ready_size = 8192 } };
	struct listener *ls = calloc((size_t)a.threads, sizeof *ls);
	co_scheduler s;
	struct bench_sig sig = { stop_all, &s };
	pthread_t sig_thread;
	int err;

	timeout_ns = (uint64_t)a.header_timeout_ms * CO_MS;
	bench_block_signals();
	if (ls == NULL || (err = co_sched_init(&s, &o)) < 0) {
		fprintf(stderr, "http_coring: init failed\n");
		return 1;
	}
	for (int i = 0; i < a.threads; i++) {
		ls[i].lfd = bench_listen(&a.port);
		if (ls[i].lfd < 0) {
			perror("http_coring: listen");
			return 1;
		}
		co_init(&ls[i].co, listener_fn);
		co_sched_submit_to(&s, (unsigned)i, &ls[i].co);
	}
	pthread_create(&sig_thread, NULL, bench_sig_main, &sig);
	bench_ready("http_coring", a.port, a.threads);
	err = co_sched_run(&s);
	pthread_join(sig_thread, NULL);
	for (int i = 0; i < a.threads; i++)
		close(ls[i].lfd);
	free(ls);
	co_sched_destroy(&s);
	if (err < 0) {
		fprintf(stderr, "http_coring: %s\n", strerror(-err));
		return 1;
	}
	return 0;
}
