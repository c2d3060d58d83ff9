/* SPDX-License-Identifier: MIT */
/*
 * A line server whose slow work runs on a group of its own while the I/O
 * stays on its context. Two groups of contexts: IO (the listener and the
 * connections) and SLOW (the slow work). Each connection is spawned with its
 * number as the key (co_sched_spawn_key), so all of one client's work stays
 * on one IO context. For every line a client sends, its connection
 * coroutine runs the slow part (a checksum) on a SLOW context with
 * co_spawn_on, waits for it without blocking its thread, and sends the
 * result back.
 *
 *     slow_work --demo N      serve N clients (threads of this process on
 *                             loopback) 20 lines each, check every reply
 *                             and that every slow part ran on a SLOW
 *                             context, stop, exit 0
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <coring/coring.h>

enum { IO, SLOW, KINDS };

static const co_sched_group groups[KINDS] = {
	[IO] = { .contexts = 2 },
	[SLOW] = { .contexts = 3, .dispatch = CO_DISPATCH_LEAST_LOADED },
};

#define LINES 20
#define LINE 64

static co_sched sched;
static atomic_int slow_on_slow; /* slow parts that ran on a SLOW context */

/* The slow work: checksum of a line, the long way. */
struct slow {
	co_frame co;
	char line[LINE];
	unsigned long sum;
	unsigned kind;                  /* where it ran */
};

static int slow_fn(co_frame *f)
{
	struct slow *j = (struct slow *)f;
	co_context *here = co_context_current();
	unsigned long h = 5381;

	CO_BEGIN(f);
	j->kind = here ? here->kind : KINDS; /* KINDS: run by hand */
	for (int r = 0; r < 20000; r++)
		for (const char *p = j->line; *p; p++)
			h = h * 33 + (unsigned char)*p + (unsigned long)r;
	j->sum = h;
	CO_END(f);
}

static unsigned long slow_sum(const char *line)
{
	struct slow j;

	memset(&j, 0, sizeof j);
	snprintf(j.line, sizeof j.line, "%s", line);
	co_init(&j.co, slow_fn);
	co_resume(&j.co); /* the same computation, by hand, for the clients */
	return j.sum;
}

struct conn {
	co_frame co;
	co_io io;
	co_io_all x;
	co_when w;
	struct slow slow;
	int fd, n;
	char buf[LINE];
	char out[32];
};

static int conn_fn(co_frame *f)
{
	struct conn *c = (struct conn *)f;

	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_recv(&c->io, c->fd, c->buf, sizeof c->buf - 1, 0));
		if ((c->n = co_result(f)) <= 0)
			break;
		c->buf[c->n] = '\0';
		memset(&c->slow, 0, sizeof c->slow);
		snprintf(c->slow.line, sizeof c->slow.line, "%s", c->buf);
		co_init(&c->slow.co, slow_fn);
		/* the job runs over there; this context serves other clients */
		CO_AWAIT(f, co_spawn_on(&c->w, &co_sched_pick(&sched, SLOW)->engine, &c->slow.co));
		if (co_result(f) < 0)
			break;
		if (c->slow.kind == SLOW)
			atomic_fetch_add(&slow_on_slow, 1);
		c->n = snprintf(c->out, sizeof c->out, "%016lx\n", c->slow.sum);
		CO_AWAIT(f, co_send_all(&c->x, c->fd, c->out, (size_t)c->n, MSG_NOSIGNAL));
		if (co_result(f) < 0)
			break;
	}
	CO_AWAIT(f, co_close(&c->io, c->fd));
	CO_END(f);
}

static void conn_free(co_frame *f)
{
	free(f);
}

struct listener {
	co_frame co;
	co_io io;
	int lfd, accepted;
	uint64_t next_key;
};

static int listener_fn(co_frame *f)
{
	struct listener *l = (struct listener *)f;
	struct conn *c;

	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_accept(&l->io, l->lfd, NULL, NULL, SOCK_CLOEXEC));
		if (co_result(f) < 0)
			break; /* -ECANCELED at the stop */
		c = calloc(1, sizeof *c);
		if (c == NULL) {
			close(co_result(f));
			continue;
		}
		c->fd = co_result(f);
		co_init(&c->co, conn_fn);
		c->co.on_done = conn_free;
		/* one client, one IO context: its key is its number */
		if (co_sched_spawn_key(&sched, IO, l->next_key++, &c->co) < 0) {
			close(c->fd);
			free(c);
			continue;
		}
		l->accepted++;
	}
	CO_END(f);
}

/* ---- --demo: clients in threads of this process ----------------------------------------- */

struct client {
	pthread_t th;
	uint16_t port;
	int id, ok;
};

static void *client_main(void *arg)
{
	struct client *cl = arg;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(cl->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char line[LINE], want[32], got[32];

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
		return NULL;
	for (int i = 0; i < LINES; i++) {
		size_t n = 0;
		int len = snprintf(line, sizeof line, "client %d line %d", cl->id, i);

		snprintf(want, sizeof want, "%016lx\n", slow_sum(line));
		if (send(fd, line, (size_t)len, MSG_NOSIGNAL) != len)
			break;
		while (n < 17) { /* 16 hex digits and a newline */
			ssize_t r = recv(fd, got + n, 17 - n, 0);
			if (r <= 0)
				break;
			n += (size_t)r;
		}
		if (n != 17 || memcmp(got, want, 17) != 0)
			break;
		cl->ok++;
	}
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	co_sched_opts o = { .groups = groups, .ngroups = KINDS };
	static struct listener l;
	struct client *cl;
	int n = 0, ok = 0, err, port;
	int trace_err;

	if ((trace_err = co_trace_env()) < 0) { /* CORING_TRACE=file (docs/tracing.md) */
		fprintf(stderr, "slow_work: CORING_TRACE: %s\n", strerror(-trace_err));
		return 2;
	}
	if (argc == 3 && strcmp(argv[1], "--demo") == 0)
		n = atoi(argv[2]);
	if (n < 1) {
		fprintf(stderr, "usage: %s --demo N\n", argv[0]);
		return 2;
	}
	l.lfd = co_listen("127.0.0.1", 0, 128, 0); /* port 0: the kernel picks one */
	if (l.lfd < 0 || (port = co_local_port(l.lfd)) < 0) {
		fprintf(stderr, "slow_work: listen: %s\n", strerror(-(l.lfd < 0 ? l.lfd : port)));
		return 1;
	}
	err = co_sched_init(&sched, &o);
	if (err < 0) {
		fprintf(stderr, "slow_work: co_sched_init: %s\n", strerror(-err));
		return 1;
	}
	co_init(&l.co, listener_fn);
	if (co_sched_spawn_kind(&sched, IO, &l.co) < 0)
		return 1;
	cl = calloc((size_t)n, sizeof *cl);
	if (cl == NULL)
		return 1;
	for (int i = 0; i < n; i++) {
		cl[i].port = port;
		cl[i].id = i;
		if (pthread_create(&cl[i].th, NULL, client_main, &cl[i]) != 0)
			return 1;
	}
	for (int i = 0; i < n; i++) {
		pthread_join(cl[i].th, NULL);
		ok += cl[i].ok;
	}
	/* every reply checked: stop (the listener's accept is cancelled) */
	co_sched_stop(&sched, CO_STOP_CANCEL);
	err = co_sched_run(&sched);
	printf("slow_work: %d clients, %d of %d replies right, %d slow parts on SLOW, %d accepted\n",
	       n, ok, n * LINES, atomic_load(&slow_on_slow), l.accepted);
	if (co_sched_destroy(&sched) != 0 || err != 0)
		return 1;
	close(l.lfd);
	free(cl);
	return ok == n * LINES && atomic_load(&slow_on_slow) == n * LINES && l.accepted == n ? 0 : 1;
}
