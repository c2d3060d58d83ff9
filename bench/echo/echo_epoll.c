/* SPDX-License-Identifier: MIT */
/*
 * The epoll baseline of the echo benchmark: echo_epoll --port P [--threads N]
 *
 * The best epoll echo server we can write for ping-pong traffic. Each
 * thread has its own SO_REUSEPORT listener and epoll instance (no shared
 * state, no locks). Level-triggered: one recv per readiness (no extra recv
 * that only returns EAGAIN, which edge-triggered mode needs), then the send
 * straight away; up to 512 events per epoll_wait. So a request costs
 * recv + send + a share of one epoll_wait. A short send parks the
 * connection on EPOLLOUT and stops reading it (backpressure), which blocks
 * only that connection. Same buffer size and socket options as the other
 * servers (bench_util.h). SIGINT/SIGTERM: every loop stops, exit 0.
 */
#include "bench_util.h"

#define MAX_EVENTS 512

struct conn {
	int fd;
	unsigned off, len;      /* bytes of buf still to send */
	char buf[BENCH_BUF_SIZE];
};

struct worker {
	int ep, lfd, stop_fd;
	unsigned long conns;
};

static struct conn *conn_new(int ep, int fd)
{
	struct conn *c = malloc(sizeof *c);
	struct epoll_event ev = { .events = EPOLLIN };

	if (c == NULL)
		return NULL;
	c->fd = fd;
	c->off = c->len = 0;
	ev.data.ptr = c;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		free(c);
		return NULL;
	}
	return c;
}

static void conn_close(struct conn *c)
{
	close(c->fd); /* also removes it from the epoll set */
	free(c);
}

/* Send what is pending. 1: all sent, 0: the socket is full, -1: error. */
static int conn_flush(struct conn *c)
{
	while (c->off < c->len) {
		ssize_t n = send(c->fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -1;
		}
		c->off += (unsigned)n;
	}
	c->off = c->len = 0;
	return 1;
}

static int conn_want(int ep, struct conn *c, unsigned events)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };

	return epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Readable (or writable while parked). 0 to keep the connection. */
static int conn_event(int ep, struct conn *c, unsigned events)
{
	int r;

	if (c->len) { /* parked on EPOLLOUT */
		if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return 0;
		if ((r = conn_flush(c)) <= 0)
			return r;
		return conn_want(ep, c, EPOLLIN);
	}
	ssize_t n = recv(c->fd, c->buf, sizeof c->buf, 0);
	if (n <= 0)
		return (n < 0 && (errno == EAGAIN || errno == EINTR)) ? 0 : -1;
	c->len = (unsigned)n;
	if ((r = conn_flush(c)) < 0)
		return -1;
	if (r == 0) /* the peer does not read: stop reading it until it does */
		return conn_want(ep, c, EPOLLOUT);
	return 0;
}

static void accept_all(struct worker *w)
{
	for (;;) {
		int fd = accept4(w->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return; /* EAGAIN; EMFILE and friends: retried on the next event */
		}
		bench_conn_opts(fd);
		if (conn_new(w->ep, fd) == NULL)
			close(fd);
		else
			w->conns++;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[MAX_EVENTS];

	for (;;) {
		int n = epoll_wait(w->ep, evs, MAX_EVENTS, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			perror("echo_epoll: epoll_wait");
			break;
		}
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			if (p == &w->lfd) {
				accept_all(w);
			} else if (p == &w->stop_fd) {
				goto out;
			} else if (conn_event(w->ep, p, evs[i].events) < 0) {
				conn_close(p);
			}
		}
	}
out:
	/* Connections still open are closed by exit: a benchmark server keeps
	 * no list of them (that would cost on the hot path). */
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_args a = bench_parse(argc, argv);
	struct worker *ws = calloc((size_t)a.threads, sizeof *ws);
	int stop_fd = bench_stop_fd("echo_epoll");

	if (ws == NULL)
		return 1;
	for (int i = 0; i < a.threads; i++) {
		ws[i].stop_fd = stop_fd;
		bench_epoll_init("echo_epoll", &a.port, stop_fd, &ws[i].lfd, &ws[i].ep, &ws[i].lfd,
				 &ws[i].stop_fd);
	}
	bench_run("echo_epoll", &a, ws, sizeof *ws, worker_main);
	for (int i = 0; i < a.threads; i++) {
		close(ws[i].lfd);
		close(ws[i].ep);
	}
	close(stop_fd);
	free(ws);
	return 0;
}
