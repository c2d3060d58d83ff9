/* SPDX-License-Identifier: MIT */
/*
 * The epoll baseline of the HTTP benchmark:
 *   http_epoll --port P [--threads N] [--header-timeout MS] [--idle-timeout MS]
 *
 * HTTP/1.1 keep-alive "Hello, World!" server, built like echo_epoll (a
 * SO_REUSEPORT listener and a level-triggered epoll per thread, one recv
 * per readiness, the answers sent at once); requests are parsed and
 * answered by bench/http/http_parse.c, as in http_coring. Pipelined requests
 * are answered with one send.
 *
 * Slow clients: a request must be complete within --header-timeout ms
 * (default 10 s) of the accept or of its first byte; otherwise the
 * connection is closed. Connections with a partial request sit on a list
 * that the loop sweeps every 100 ms. A client that does not read its
 * answers parks only its own connection (EPOLLOUT, no more reading).
 *
 * Idle keep-alive connections are closed after --idle-timeout ms (default
 * 60 s), as in http_coring: every connection is on the worker's list, and
 * every quarter of the timeout (10 ms to 1 s) the loop closes those idle
 * for longer than the timeout. The loop reads the clock once per
 * epoll_wait; a connection records it when it becomes idle, so one is
 * closed no sooner than the timeout and no later than the timeout plus one
 * interval (and a loop turn). SIGINT/SIGTERM: exit 0.
 */
#include "bench_util.h"
#include "http_parse.h"

#define MAX_EVENTS 512
#define OUT_SIZE 16384
#define SWEEP_NS 100000000ull

struct conn {
	int fd;
	int closing;                    /* close once out is sent */
	size_t have, out_off, out_len;
	uint64_t deadline;              /* while on the pending list */
	uint64_t idle_since;            /* the loop's clock when it became idle */
	struct conn *prev, *next;       /* the pending list (partial requests) */
	struct conn *aprev, *anext;     /* the worker's list of all connections */
	struct http_parser p;
	char in[HTTP_MAX_REQUEST];
	char out[OUT_SIZE];
};

struct worker {
	int ep, lfd, stop_fd;
	struct conn pending;            /* list head */
	struct conn all;                /* list head */
	uint64_t timeout_ns, next_sweep;
	uint64_t idle_ns, idle_interval_ns, next_idle_sweep;
	uint64_t now;                   /* read once per epoll_wait */
};

static void pending_del(struct conn *c)
{
	if (c->next) {
		c->prev->next = c->next;
		c->next->prev = c->prev;
		c->next = c->prev = NULL;
	}
}

static void pending_add(struct worker *w, struct conn *c, uint64_t now)
{
	if (c->next)
		return; /* already timed from its first byte */
	c->deadline = now + w->timeout_ns;
	c->next = w->pending.next;
	c->prev = &w->pending;
	w->pending.next->prev = c;
	w->pending.next = c;
}

static void conn_close(struct conn *c)
{
	pending_del(c);
	c->aprev->anext = c->anext;
	c->anext->aprev = c->aprev;
	close(c->fd);
	free(c);
}

static int conn_want(int ep, struct conn *c, unsigned events)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };

	return epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* 1: all sent, 0: the socket is full, -1: error. */
static int conn_flush(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -1;
		}
		c->out_off += (size_t)n;
	}
	c->out_off = c->out_len = 0;
	return 1;
}

/* Answer what is buffered, send it. 0 to keep the connection. */
static int conn_serve(struct worker *w, struct conn *c)
{
	for (;;) {
		int st = http_serve(&c->p, c->in, &c->have, c->out, sizeof c->out, &c->out_len);
		int r = conn_flush(c);

		if (r < 0)
			return -1;
		if (st == HTTP_SERVE_CLOSE)
			c->closing = 1;
		if (r == 0) /* the peer does not read: park until it does */
			return conn_want(w->ep, c, EPOLLOUT);
		if (c->closing)
			return -1;
		if (st != HTTP_SERVE_FULL)
			break;
	}
	if (c->have) {
		pending_add(w, c, w->now);
	} else {
		pending_del(c);
		c->idle_since = w->now;
	}
	return 0;
}

static int conn_event(struct worker *w, struct conn *c, unsigned events)
{
	if (c->out_len) { /* parked on EPOLLOUT */
		int r;
		if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return 0;
		if ((r = conn_flush(c)) <= 0)
			return r;
		if (c->closing || conn_want(w->ep, c, EPOLLIN) < 0)
			return -1;
		return conn_serve(w, c); /* requests left when out was full */
	}
	ssize_t n = recv(c->fd, c->in + c->have, sizeof c->in - c->have, 0);
	if (n <= 0)
		return (n < 0 && (errno == EAGAIN || errno == EINTR)) ? 0 : -1;
	c->have += (size_t)n;
	return conn_serve(w, c);
}

static void accept_all(struct worker *w)
{
	for (;;) {
		int fd = accept4(w->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct conn *c;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		bench_conn_opts(fd);
		c = malloc(sizeof *c);
		if (c == NULL) {
			close(fd);
			continue;
		}
		memset(c, 0, offsetof(struct conn, in));
		c->fd = fd;
		http_parser_init(&c->p);
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			free(c);
			continue;
		}
		c->anext = w->all.anext;
		c->aprev = &w->all;
		w->all.anext->aprev = c;
		w->all.anext = c;
		pending_add(w, c, w->now); /* its first request is timed */
	}
}

/* Close the connections whose request did not arrive in time. */
static void sweep(struct worker *w, uint64_t now)
{
	struct conn *c = w->pending.next;

	while (c != &w->pending) {
		struct conn *next = c->next;
		if (now >= c->deadline)
			conn_close(c);
		c = next;
	}
	w->next_sweep = now + SWEEP_NS;
}

/* Close the keep-alive connections idle for longer than the timeout (not
 * those with a partial request, nor those parked with answers to send). */
static void idle_sweep(struct worker *w, uint64_t now)
{
	struct conn *c = w->all.anext;

	while (c != &w->all) {
		struct conn *next = c->anext;
		if (!c->next && c->have == 0 && c->out_len == 0 && now - c->idle_since >= w->idle_ns)
			conn_close(c);
		c = next;
	}
	w->next_idle_sweep = now + w->idle_interval_ns;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[MAX_EVENTS];

	w->now = bench_now_ns();
	w->next_idle_sweep = w->now + w->idle_interval_ns;
	for (;;) {
		int ms = w->pending.next != &w->pending ? (int)(SWEEP_NS / 1000000)
			 : w->all.anext != &w->all ? (int)(w->idle_interval_ns / 1000000) : -1;
		int n = epoll_wait(w->ep, evs, MAX_EVENTS, ms);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			perror("http_epoll: epoll_wait");
			break;
		}
		w->now = bench_now_ns();
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			if (p == &w->lfd)
				accept_all(w);
			else if (p == &w->stop_fd)
				return NULL;
			else if (conn_event(w, p, evs[i].events) < 0)
				conn_close(p);
		}
		if (w->pending.next != &w->pending && w->now >= w->next_sweep)
			sweep(w, w->now);
		if (w->now >= w->next_idle_sweep)
			idle_sweep(w, w->now);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_args a = bench_parse(argc, argv);
	struct worker *ws = calloc((size_t)a.threads, sizeof *ws);
	int stop_fd = bench_stop_fd("http_epoll");

	if (ws == NULL)
		return 1;
	for (int i = 0; i < a.threads; i++) {
		struct worker *w = &ws[i];

		w->stop_fd = stop_fd;
		w->timeout_ns = (uint64_t)a.header_timeout_ms * 1000000u;
		w->idle_ns = (uint64_t)a.idle_timeout_ms * 1000000u;
		w->idle_interval_ns = bench_idle_interval_ns(a.idle_timeout_ms);
		w->pending.next = w->pending.prev = &w->pending;
		w->all.anext = w->all.aprev = &w->all;
		bench_epoll_init("http_epoll", &a.port, stop_fd, &w->lfd, &w->ep, &w->lfd, &w->stop_fd);
	}
	bench_run("http_epoll", &a, ws, sizeof *ws, worker_main);
	for (int i = 0; i < a.threads; i++) {
		close(ws[i].lfd);
		close(ws[i].ep);
	}
	close(stop_fd);
	free(ws);
	return 0;
}
