/* SPDX-License-Identifier: MIT */
/*
 * What every benchmark server shares, so that they differ only in their
 * I/O model: the command line (--port P [--threads N] [--header-timeout MS]
 * [--idle-timeout MS]),
 * the listening socket (127.0.0.1, SO_REUSEPORT: one socket per thread,
 * backlog 4096), the per-connection socket options (TCP_NODELAY), the
 * buffer size, the "port=P" line the runner and the smoke test read
 * (--port 0 picks a free port), and the stop (SIGINT/SIGTERM, seen by
 * every loop through a signalfd; SIGPIPE ignored).
 */
#ifndef CORING_BENCH_UTIL_H
#define CORING_BENCH_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

/* Receive buffer of every echo server (one per connection). */
#define BENCH_BUF_SIZE 16384

struct bench_args {
	int port;               /* 0: pick a free one */
	int threads;            /* server threads (one listener + loop each) */
	int header_timeout_ms;  /* HTTP servers: deadline for a request header */
	int idle_timeout_ms;    /* HTTP servers: an idle keep-alive connection
	                           is closed after this long */
};

/* The HTTP servers' idle keep-alive timeout unless --idle-timeout says
 * otherwise: idle clients cannot hold descriptors for ever. */
#define BENCH_IDLE_TIMEOUT_MS 60000

static inline void bench_usage(const char *prog)
{
	fprintf(stderr, "usage: %s --port P [--threads N] [--header-timeout MS] [--idle-timeout MS]\n",
		prog);
	exit(2);
}

static inline struct bench_args bench_parse(int argc, char **argv)
{
	struct bench_args a = { .port = -1, .threads = 1, .header_timeout_ms = 10000,
				.idle_timeout_ms = BENCH_IDLE_TIMEOUT_MS };

	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			bench_usage(argv[0]);
		if (!strcmp(argv[i], "--port"))
			a.port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--threads"))
			a.threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--header-timeout"))
			a.header_timeout_ms = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--idle-timeout"))
			a.idle_timeout_ms = atoi(argv[++i]);
		else
			bench_usage(argv[0]);
	}
	if (a.port < 0 || a.port > 65535 || a.threads < 1 || a.threads > 256 ||
	    a.header_timeout_ms < 1 || a.idle_timeout_ms < 1)
		bench_usage(argv[0]);
	return a;
}

/* A listening socket on 127.0.0.1:*port; *port 0 picks a free port and
 * stores it, so the next thread's socket joins the same port. -1 on error. */
static inline int bench_listen(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)*port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 4096) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

/* Options of every accepted connection. */
static inline void bench_conn_opts(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Tell the runner where we listen: one line on stdout, flushed. */
static inline void bench_ready(const char *name, int port, int threads)
{
	printf("port=%d\n", port);
	fflush(stdout);
	fprintf(stderr, "%s: listening on 127.0.0.1:%d, %d thread(s)\n", name, port, threads);
}

/* The stop: SIGINT/SIGTERM are blocked in every thread (call this before
 * creating any) and reported by the returned signalfd. Every loop watches
 * it for readability and never reads it, so the signal stays pending and
 * every thread's loop sees it and ends. No thread sits in sigwait: under
 * valgrind (the instruction-count runs) a thread blocked in io_uring_enter
 * holds valgrind's lock, and only a completion on its own ring wakes it.
 * SIGPIPE is ignored. Exits on failure. */
static inline int bench_stop_fd(const char *name)
{
	sigset_t s;
	int fd;

	sigemptyset(&s);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	signal(SIGPIPE, SIG_IGN);
	fd = signalfd(-1, &s, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "%s: signalfd: %s\n", name, strerror(errno));
		exit(1);
	}
	return fd;
}

/* Run the server: print the ready line (the listeners already listen),
 * then thread i runs fn(workers + i * wsize); join them all. */
static inline void bench_run(const char *name, const struct bench_args *a, void *workers,
			     size_t wsize, void *(*fn)(void *))
{
	pthread_t *t = calloc((size_t)a->threads, sizeof *t);

	bench_ready(name, a->port, a->threads);
	for (int i = 0; i < a->threads; i++)
		pthread_create(&t[i], NULL, fn, (char *)workers + (size_t)i * wsize);
	for (int i = 0; i < a->threads; i++)
		pthread_join(t[i], NULL);
	free(t);
}

/* The epoll servers' per-thread setup: a nonblocking listener on *port
 * and an epoll set watching it (data.ptr = lfd_tag) and the stop signalfd
 * (level-triggered, data.ptr = stop_tag). Exits on failure. */
static inline void bench_epoll_init(const char *name, int *port, int stop_fd, int *lfd, int *ep,
				    void *lfd_tag, void *stop_tag)
{
	struct epoll_event ev = { .events = EPOLLIN };

	*lfd = bench_listen(port);
	*ep = epoll_create1(EPOLL_CLOEXEC);
	if (*lfd < 0 || *ep < 0) {
		fprintf(stderr, "%s: listen: %s\n", name, strerror(errno));
		exit(1);
	}
	fcntl(*lfd, F_SETFL, O_NONBLOCK);
	ev.data.ptr = lfd_tag;
	epoll_ctl(*ep, EPOLL_CTL_ADD, *lfd, &ev);
	ev.data.ptr = stop_tag;
	epoll_ctl(*ep, EPOLL_CTL_ADD, stop_fd, &ev);
}

/* How often the HTTP servers look for idle connections: a quarter of the
 * timeout, between 10 ms and 1 s. */
static inline uint64_t bench_idle_interval_ns(int idle_timeout_ms)
{
	uint64_t ms = (uint64_t)idle_timeout_ms / 4;

	return (ms < 10 ? 10 : ms > 1000 ? 1000 : ms) * 1000000u;
}

static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
