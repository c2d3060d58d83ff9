/* SPDX-License-Identifier: MIT */
/*
 * A peer of the echo benchmark on libuv: echo_libuv --port P [--threads N]
 *
 * Written the way libuv's documentation shows a TCP server: a loop per
 * thread (uv_loop_init), a uv_tcp_t listener (uv_tcp_bind, uv_listen), a
 * uv_tcp_t per accepted connection reading with uv_read_start, and
 * uv_signal_t handles for the stop. What it adds to the guide's echo
 * server makes it as good as our own servers, not worse:
 *   - one 16 KiB buffer per connection handed out by the alloc callback
 *     (the guide mallocs one per read and frees it after the write);
 *   - the answer goes out with uv_try_write, which writes at once and
 *     queues nothing; only what the socket did not take is queued with
 *     uv_write, and reading stops until that write completes (the
 *     guide's echo keeps reading and queueing: a client that never reads
 *     would grow the server without bound);
 *   - SO_REUSEPORT on each thread's listener (set on the descriptor of a
 *     uv_tcp_init_ex socket, as libuv 1.44 has no flag for it), so that
 *     --threads N works like the other servers.
 * Same address, backlog (4096), TCP_NODELAY and buffer size as the other
 * servers (bench_util.h). SIGINT/SIGTERM: every loop stops (libuv delivers
 * a signal to the handles of every loop), exit 0.
 */
#include <uv.h>

#include "bench_util.h"

struct conn {
	uv_tcp_t tcp;           /* first: the handle's address is the conn's */
	uv_write_t wr;
	char buf[BENCH_BUF_SIZE];
};

struct worker {
	uv_loop_t loop;
	uv_tcp_t listener;
	uv_signal_t sigint, sigterm;
};

static void conn_free(uv_handle_t *h)
{
	free(h);
}

static void conn_close(uv_stream_t *s)
{
	if (!uv_is_closing((uv_handle_t *)s))
		uv_close((uv_handle_t *)s, conn_free);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct conn *c = (struct conn *)h;

	(void)suggested;
	*buf = uv_buf_init(c->buf, sizeof c->buf);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* The queued rest of an answer is out: read again. */
static void on_written(uv_write_t *req, int status)
{
	if (status < 0 || uv_read_start(req->handle, on_alloc, on_read) < 0)
		conn_close(req->handle);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct conn *c = (struct conn *)s;
	uv_buf_t out;
	int n;

	if (nread == 0) /* EAGAIN */
		return;
	if (nread < 0) { /* UV_EOF or an error */
		conn_close(s);
		return;
	}
	out = uv_buf_init(buf->base, (unsigned)nread);
	n = uv_try_write(s, &out, 1);
	if (n == nread)
		return;
	if (n < 0 && n != UV_EAGAIN) {
		conn_close(s);
		return;
	}
	/* the socket is full: queue the rest, stop reading until it is out */
	if (n > 0)
		out = uv_buf_init(buf->base + n, (unsigned)(nread - n));
	uv_read_stop(s);
	if (uv_write(&c->wr, s, &out, 1, on_written) < 0)
		conn_close(s);
}

static void on_connection(uv_stream_t *listener, int status)
{
	struct conn *c;

	if (status < 0) /* EMFILE and friends: libuv retries on the next event */
		return;
	c = malloc(sizeof *c);
	if (c == NULL || uv_tcp_init(listener->loop, &c->tcp) < 0) {
		free(c);
		return;
	}
	if (uv_accept(listener, (uv_stream_t *)&c->tcp) < 0 ||
	    uv_tcp_nodelay(&c->tcp, 1) < 0 ||
	    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
		conn_close((uv_stream_t *)&c->tcp);
}

static void on_signal(uv_signal_t *h, int signum)
{
	(void)signum;
	uv_stop(h->loop);
}

/* Thread i's loop, listener and signal handles; *port 0 picks a free port
 * and stores it, so the next thread's listener joins it. */
static int worker_init(struct worker *w, int *port)
{
	struct sockaddr_in a;
	struct sockaddr_storage got;
	int len = sizeof got, one = 1, err;
	uv_os_fd_t fd;

	if ((err = uv_loop_init(&w->loop)) < 0 ||
	    (err = uv_tcp_init_ex(&w->loop, &w->listener, AF_INET)) < 0 ||
	    (err = uv_fileno((uv_handle_t *)&w->listener, &fd)) < 0)
		return err;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
		return -errno;
	if ((err = uv_ip4_addr("127.0.0.1", *port, &a)) < 0 ||
	    (err = uv_tcp_bind(&w->listener, (const struct sockaddr *)&a, 0)) < 0 ||
	    (err = uv_listen((uv_stream_t *)&w->listener, 4096, on_connection)) < 0 ||
	    (err = uv_tcp_getsockname(&w->listener, (struct sockaddr *)&got, &len)) < 0)
		return err;
	*port = ntohs(((struct sockaddr_in *)&got)->sin_port);
	if ((err = uv_signal_init(&w->loop, &w->sigint)) < 0 ||
	    (err = uv_signal_start(&w->sigint, on_signal, SIGINT)) < 0 ||
	    (err = uv_signal_init(&w->loop, &w->sigterm)) < 0 ||
	    (err = uv_signal_start(&w->sigterm, on_signal, SIGTERM)) < 0)
		return err;
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	uv_run(&w->loop, UV_RUN_DEFAULT);
	/* Connections still open are closed by exit, as in the other servers. */
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_args a = bench_parse(argc, argv);
	struct worker *ws = calloc((size_t)a.threads, sizeof *ws);
	int err;

	if (ws == NULL)
		return 1;
	signal(SIGPIPE, SIG_IGN); /* a write to a closed peer fails with EPIPE */
	for (int i = 0; i < a.threads; i++) {
		if ((err = worker_init(&ws[i], &a.port)) < 0) {
			fprintf(stderr, "echo_libuv: listen: %s\n", uv_strerror(err));
			return 1;
		}
	}
	bench_run("echo_libuv", &a, ws, sizeof *ws, worker_main);
	free(ws); /* the loops are not closed: their connections are still open */
	return 0;
}
