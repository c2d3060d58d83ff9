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
 * SIGINT/SIGTERM: co_sched_stop(CO_STOP_CANCEL) cancels every wait, exit 0.
 */
#include "coring_server.h"
#include "http_parse.h"

#define OUT_SIZE 16384

static uint64_t timeout_ns;

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

static co_frame *new_conn(int fd)
{
	struct conn *c = malloc(sizeof *c);

	if (c == NULL)
		return NULL;
	c->fd = fd;
	c->have = c->out_len = 0;
	c->deadline = co_now_ns() + timeout_ns; /* the first request is timed */
	http_parser_init(&c->p);
	co_init(&c->co, conn_fn);
	c->co.on_done = coring_free_frame;
	return &c->co;
}

int main(int argc, char **argv)
{
	struct bench_args a = bench_parse(argc, argv);

	timeout_ns = (uint64_t)a.header_timeout_ms * CO_MS;
	return coring_server_main("http_coring", a, new_conn);
}
