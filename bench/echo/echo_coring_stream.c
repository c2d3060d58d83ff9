/* SPDX-License-Identifier: MIT */
/*
 * The coring echo server with streaming receive:
 * echo_coring_stream --port P [--threads N]
 * As echo_coring (scheduler, listeners, stop: coring_server.h), but each
 * connection receives through a co_stream: one multishot recv into the
 * context's ring of provided buffers (co_bufring), the buffers handed to
 * the coroutine by co_stream_recv, and everything held echoed with one
 * batched send (co_stream_send: sendmsg, MSG_WAITALL | MSG_NOSIGNAL). The
 * same kernel technique as echo_uring_mshot, in straight-line coroutine
 * code. Ring size as echo_uring_mshot's: 4096 buffers of 4 KiB per
 * context; a connection's multishot pauses past 64 queued buffers (the
 * ring's default stream limit, echo_uring_mshot's HIGH_WATER).
 */
#include <coring/stream.h>

#include "coring_server.h"

#define BUF_SIZE 4096
#define BUF_COUNT 4096

/* One per context: sets up the ring on its engine, keeps it until the
 * server stops and every stream on it is closed, then frees it. */
struct ring_task {
	co_frame co;
	co_io io;
	co_bufring ring;
	int err, ready;
};

struct conn {
	co_frame co;
	co_io io;
	co_stream s;
	struct ring_task *rt;
	int fd, n;
};

static int ring_fn(co_frame *f)
{
	struct ring_task *t = (struct ring_task *)f;

	CO_BEGIN(f);
	t->err = co_bufring_init(&t->ring, co_engine_current(), BUF_COUNT, BUF_SIZE);
	if (t->err < 0) {
		fprintf(stderr, "echo_coring_stream: buffer ring: %s\n", strerror(-t->err));
		exit(1);
	}
	t->ready = 1;
	CO_AWAIT(f, co_sleep(&t->io, UINT64_MAX / 2)); /* until the stop cancels it */
	while (t->ring.streams != 0)
		CO_YIELD(f); /* the connections close their streams */
	co_bufring_destroy(&t->ring);
	CO_END(f);
}

static int conn_fn(co_frame *f)
{
	struct conn *c = (struct conn *)f;

	CO_BEGIN(f);
	while (!c->rt->ready) /* the context's first turn sets the ring up */
		CO_YIELD(f);
	if (co_stream_open(&c->s, &c->rt->ring, c->fd) == 0) {
		for (;;) {
			CO_AWAIT(f, co_stream_recv(&c->s));
			c->n = co_result(f);
			if (c->n <= 0)
				break;
			CO_AWAIT(f, co_stream_send(&c->io, &c->s, c->fd, MSG_WAITALL | MSG_NOSIGNAL));
			if (co_result(f) != c->n)
				break;
		}
		CO_AWAIT(f, co_stream_close(&c->s));
	}
	CO_AWAIT(f, co_close(&c->io, c->fd));
	CO_END(f);
}

static co_frame *new_conn(int fd, void *ctx)
{
	struct conn *c = malloc(sizeof *c);

	if (c == NULL)
		return NULL;
	c->fd = fd;
	c->rt = ctx;
	memset(&c->s, 0, sizeof c->s); /* not open */
	co_init(&c->co, conn_fn);
	c->co.on_done = coring_free_frame;
	return &c->co;
}

static co_frame *per_context(unsigned i, void **ctx)
{
	struct ring_task *t = calloc(1, sizeof *t);

	(void)i;
	if (t == NULL) {
		fprintf(stderr, "echo_coring_stream: out of memory\n");
		exit(1);
	}
	co_init(&t->co, ring_fn);
	t->co.on_done = coring_free_frame; /* the ring is gone by then */
	*ctx = t;
	return &t->co;
}

int main(int argc, char **argv)
{
	return coring_server_main("echo_coring_stream", bench_parse(argc, argv), new_conn,
				  per_context);
}
