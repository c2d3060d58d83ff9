/* SPDX-License-Identifier: MIT */
/*
 * The coring echo server for the benchmarks: echo_coring --port P [--threads N]
 * Listens on 127.0.0.1:P (0: a free port, printed as "port=P"), echoes
 * every byte on every connection. Runs on a scheduler of N contexts, each
 * with a listener task on its own SO_REUSEPORT socket; connections are
 * coroutines spawned on the context that accepted them: recv, send, recv.
 * Same buffer size and socket options as echo_epoll and echo_uring
 * (bench_util.h). The scheduler, listeners and stop are coring_server.h:
 * SIGINT/SIGTERM cancels all I/O, the coroutines end, exit 0.
 */
#include "coring_server.h"

struct conn {
	co_frame co;
	co_io io;
	int fd, n, sent;
	char buf[BENCH_BUF_SIZE];
};

static int conn_fn(co_frame *f)
{
	struct conn *c = (struct conn *)f;

	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_recv(&c->io, c->fd, c->buf, sizeof c->buf, 0));
		c->n = co_result(f);
		if (c->n <= 0)
			break;
		for (c->sent = 0; c->sent < c->n; c->sent += co_result(f)) {
			CO_AWAIT(f, co_send(&c->io, c->fd, c->buf + c->sent,
					    (size_t)(c->n - c->sent), MSG_NOSIGNAL));
			if (co_result(f) <= 0)
				goto out;
		}
	}
out:
	CO_AWAIT(f, co_close(&c->io, c->fd));
	CO_END(f);
}

static co_frame *new_conn(int fd, void *ctx)
{
	(void)ctx;
	struct conn *c = malloc(sizeof *c);

	if (c == NULL)
		return NULL;
	c->fd = fd;
	co_init(&c->co, conn_fn);
	c->co.on_done = coring_free_frame;
	return &c->co;
}

int main(int argc, char **argv)
{
	return coring_server_main("echo_coring", bench_parse(argc, argv), new_conn, NULL);
}
