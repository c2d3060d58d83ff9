/* SPDX-License-Identifier: MIT */
/*
 * A TCP echo server on 127.0.0.1 with coring: one coroutine per connection,
 * written as straight-line code. SIGINT/SIGTERM stop it cleanly.
 *
 *   echo_server [--port P] [--demo N]
 *
 * --demo N also runs N client coroutines in the same engine that echo
 * random messages and check every byte; the server then stops by itself and
 * the exit status says whether every byte came back.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/signalfd.h>
#include <coring/io.h>
#include <coring/net.h>
#include <coring/trace.h>

struct conn {                 /* one per connection: its fields are its locals */
	co_frame co;
	co_io io;
	co_io_all x;
	int fd, n;
	char buf[16384];
};

static int conn_fn(co_frame *f)
{
	struct conn *c = (struct conn *)f;

	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_recv(&c->io, c->fd, c->buf, sizeof c->buf, 0));
		c->n = co_result(f);
		if (c->n <= 0)
			break; /* peer closed, error, or shutdown (-ECANCELED) */
		CO_AWAIT(f, co_send_all(&c->x, c->fd, c->buf, (size_t)c->n, MSG_NOSIGNAL));
		if (co_result(f) < 0)
			break;
	}
	CO_AWAIT(f, co_close(&c->io, c->fd));
	CO_END(f);
}

static void free_frame(co_frame *f)
{
	free(f);
}

struct server {
	co_frame co;
	co_io io;
	int lfd;
	long accepted;
};

static int server_fn(co_frame *f)
{
	struct server *s = (struct server *)f;
	struct conn *c;

	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_accept(&s->io, s->lfd, NULL, NULL, SOCK_CLOEXEC));
		if (co_result(f) == -ECANCELED)
			break; /* shutting down */
		if (co_result(f) == -EMFILE || co_result(f) == -ENFILE || co_result(f) == -ENOMEM ||
		    co_result(f) == -ENOBUFS) {
			/* out of descriptors or memory: retrying at once would spin;
			 * wait for connections to finish and free some */
			CO_AWAIT(f, co_sleep(&s->io, 10 * CO_MS));
			if (co_result(f) == -ECANCELED)
				break;
			continue;
		}
		if (co_result(f) < 0)
			continue; /* the peer gave up first (-ECONNABORTED ...) */
		s->accepted++;
		c = calloc(1, sizeof *c); /* a C local: used before the next await only */
		if (c == NULL) {
			close(co_result(f));
			continue;
		}
		c->fd = co_result(f);
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
		co_init(&c->co, conn_fn);
		c->co.on_done = free_frame;
		co_engine_spawn(co_engine_current(), &c->co);
	}
	CO_END(f);
}

/* Stops the engine on SIGINT/SIGTERM: all pending I/O ends with -ECANCELED. */
struct sigwatch {
	co_frame co;
	co_io io;
	int fd;
	struct signalfd_siginfo si;
};

static int sigwatch_fn(co_frame *f)
{
	struct sigwatch *w = (struct sigwatch *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_read(&w->io, w->fd, &w->si, sizeof w->si, 0));
	if (co_result(f) > 0)
		co_engine_stop(co_engine_current(), 1);
	CO_END(f);
}

/* --demo: clients that check every echoed byte. */
struct client {
	co_frame co;
	co_io io;
	co_io_all x;
	int fd, round;
	size_t len;
	unsigned seed;
	struct sockaddr_in addr;
	unsigned char out[8192], in[8192];
};

static int clients_left, clients_bad;

static int client_fn(co_frame *f)
{
	struct client *c = (struct client *)f;

	CO_BEGIN(f);
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CO_AWAIT(f, co_connect(&c->io, c->fd, (struct sockaddr *)&c->addr, sizeof c->addr));
	if (co_result(f) < 0)
		goto fail;
	for (c->round = 0; c->round < 20; c->round++) {
		c->len = 1 + (size_t)rand_r(&c->seed) % sizeof c->out;
		for (size_t i = 0; i < c->len; i++)
			c->out[i] = (unsigned char)rand_r(&c->seed);
		CO_AWAIT(f, co_send_all(&c->x, c->fd, c->out, c->len, MSG_NOSIGNAL));
		CO_AWAIT(f, co_recv_all(&c->x, c->fd, c->in, c->len, 0));
		if ((size_t)co_result(f) != c->len || memcmp(c->in, c->out, c->len))
			goto fail;
	}
	goto done;
fail:
	clients_bad++;
done:
	close(c->fd);
	if (--clients_left == 0)
		co_engine_stop(co_engine_current(), 1); /* last one out stops the server */
	CO_END(f);
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct server srv = { 0 };
	struct sigwatch sw = { 0 };
	struct client *clients = NULL;
	int port = 0, demo = 0, err;
	sigset_t sigs;
	co_engine e;
	int trace_err;

	if ((trace_err = co_trace_env()) < 0) { /* CORING_TRACE=file (docs/tracing.md) */
		fprintf(stderr, "echo_server: CORING_TRACE: %s\n", strerror(-trace_err));
		return 2;
	}
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--port"))
			port = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--demo"))
			demo = atoi(argv[i + 1]);
	}
	srv.lfd = co_listen("127.0.0.1", port, 0, 0);
	if (srv.lfd < 0 || (port = co_local_port(srv.lfd)) < 0) {
		fprintf(stderr, "echo_server: listen: %s\n", strerror(-(srv.lfd < 0 ? srv.lfd : port)));
		return 1;
	}
	addr.sin_port = htons((uint16_t)port);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	sw.fd = signalfd(-1, &sigs, SFD_CLOEXEC);

	if ((err = co_engine_init(&e, NULL)) < 0) {
		fprintf(stderr, "echo_server: engine: %s\n", strerror(-err));
		return 1;
	}
	co_init(&srv.co, server_fn);
	co_init(&sw.co, sigwatch_fn);
	co_engine_spawn(&e, &srv.co);
	co_engine_spawn(&e, &sw.co);
	fprintf(stderr, "echo_server: listening on 127.0.0.1:%d\n", ntohs(addr.sin_port));
	if (demo > 0) {
		clients = calloc((size_t)demo, sizeof *clients);
		clients_left = demo;
		for (int i = 0; i < demo; i++) {
			clients[i].addr = addr;
			clients[i].seed = (unsigned)i + 1;
			co_init(&clients[i].co, client_fn);
			co_engine_spawn(&e, &clients[i].co);
		}
	}
	err = co_engine_run(&e, CO_RUN_UNTIL_STOP);
	co_engine_destroy(&e);
	close(srv.lfd);
	close(sw.fd);
	free(clients);
	if (err < 0) {
		fprintf(stderr, "echo_server: %s\n", strerror(-err));
		return 1;
	}
	if (demo > 0) {
		printf("echo_server: %d clients, %ld connections, %d failed\n", demo, srv.accepted,
		       clients_bad);
		return clients_bad ? 1 : 0;
	}
	return 0;
}
