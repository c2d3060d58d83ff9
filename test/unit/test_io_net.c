/* SPDX-License-Identifier: MIT */
/* Tests of the I/O awaiters over loopback TCP (lib/io/io.c): accept and
 * connect, refused and reset connections, the send/recv/read/write _all
 * helpers, 10,000 echo coroutines, random sizes to 64 KiB. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <cmocka.h>

#include <coring/io.h>
#include <coring/timeout.h>
#include "common/fault.h"
#include "helpers.h"

/* ---- TCP: accept, connect, refused, reset ------------------------------- */

struct tcp {
	co_frame co;
	co_io io;
	int lfd, fd, cfd;
	uint16_t port;
	struct sockaddr_in addr;
	char buf[16];
	int r[6];
};

static int tcp_server_fn(co_frame *f)
{
	struct tcp *t = (struct tcp *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_accept(&t->io, t->lfd, NULL, NULL, SOCK_CLOEXEC));
	t->fd = co_result(f);
	if (t->fd < 0)
		CO_RETURN(f, t->fd);
	CO_AWAIT(f, co_recv(&t->io, t->fd, t->buf, sizeof t->buf, 0));
	t->r[0] = co_result(f);
	CO_AWAIT(f, co_send(&t->io, t->fd, t->buf, (size_t)t->r[0], 0));
	CO_AWAIT(f, co_close(&t->io, t->fd));
	CO_END(f);
}

static int tcp_client_fn(co_frame *f)
{
	struct tcp *t = (struct tcp *)f;
	CO_BEGIN(f);
	t->cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	t->addr = co_test_loopback(t->port);
	CO_AWAIT(f, co_connect(&t->io, t->cfd, (struct sockaddr *)&t->addr, sizeof t->addr));
	t->r[1] = co_result(f);
	CO_AWAIT(f, co_send(&t->io, t->cfd, "tcp!", 4, 0));
	CO_AWAIT(f, co_recv(&t->io, t->cfd, t->buf, sizeof t->buf, MSG_WAITALL));
	t->r[2] = co_result(f);
	CO_AWAIT(f, co_recv(&t->io, t->cfd, t->buf, sizeof t->buf, 0)); /* server closed */
	t->r[3] = co_result(f);
	close(t->cfd);
	CO_END(f);
}

static void test_tcp_accept_connect(void **state)
{
	struct tcp s, c;
	co_frame *fs[2] = { &s.co, &c.co };
	(void)state;
	memset(&s, 0, sizeof s);
	memset(&c, 0, sizeof c);
	s.lfd = co_test_listen(&s.port);
	c.port = s.port;
	co_init(&s.co, tcp_server_fn);
	co_init(&c.co, tcp_client_fn);
	co_test_run_frames(fs, 2);
	assert_int_equal(co_status(&s.co), 0);
	assert_int_equal(s.r[0], 4);
	assert_int_equal(c.r[1], 0);
	assert_int_equal(c.r[2], 4);
	assert_memory_equal(c.buf, "tcp!", 4);
	assert_int_equal(c.r[3], 0);
	close(s.lfd);
}

static void test_tcp_refused(void **state)
{
	struct tcp c;
	int lfd;
	(void)state;
	memset(&c, 0, sizeof c);
	lfd = co_test_listen(&c.port);
	close(lfd); /* nobody listens there now */
	co_init(&c.co, tcp_client_fn);
	co_test_run1(&c.co);
	assert_int_equal(c.r[1], -ECONNREFUSED);
}

static int reset_reader_fn(co_frame *f)
{
	struct tcp *t = (struct tcp *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_recv(&t->io, t->fd, t->buf, sizeof t->buf, 0));
	t->r[0] = co_result(f);
	CO_END(f);
}

static void test_tcp_reset(void **state)
{
	/* the peer closes with SO_LINGER 0 while we wait in recv: -ECONNRESET */
	struct tcp t;
	struct linger lg = { 1, 0 };
	struct sockaddr_in a;
	int cfd;
	(void)state;
	memset(&t, 0, sizeof t);
	t.lfd = co_test_listen(&t.port);
	a = co_test_loopback(t.port);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(cfd, (struct sockaddr *)&a, sizeof a), 0);
	t.fd = accept(t.lfd, NULL, NULL);
	assert_true(t.fd >= 0);
	setsockopt(cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	close(cfd); /* RST before the engine even starts */
	co_init(&t.co, reset_reader_fn);
	co_test_run1(&t.co);
	assert_int_equal(t.r[0], -ECONNRESET);
	close(t.fd);
	close(t.lfd);
}

/* ---- whole reads and writes: the *_all calls ------------------------------ */

#define BIG (4 << 20)

struct bulk {
	co_frame co;
	co_io_all x;
	int fd;
	unsigned char *buf;
	size_t len;
	int recv;
};

static int bulk_fn(co_frame *f)
{
	struct bulk *b = (struct bulk *)f;
	CO_BEGIN(f);
	if (b->recv)
		CO_AWAIT(f, co_recv_all(&b->x, b->fd, b->buf, b->len, 0));
	else
		CO_AWAIT(f, co_send_all(&b->x, b->fd, b->buf, b->len, MSG_NOSIGNAL));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void test_send_recv_all(void **state)
{
	/* 4 MiB through a socketpair with small buffers: many short sends and
	 * receives, every byte in place */
	struct bulk s = { .len = BIG }, r = { .len = BIG, .recv = 1 };
	co_frame *fs[2] = { &s.co, &r.co };
	int p[2], small = 16384;
	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
	setsockopt(p[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
	setsockopt(p[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
	s.buf = malloc(BIG);
	r.buf = calloc(1, BIG);
	for (int i = 0; i < BIG; i++)
		s.buf[i] = (unsigned char)(i * 7 + (i >> 9));
	s.fd = p[0];
	r.fd = p[1];
	co_init(&s.co, bulk_fn);
	co_init(&r.co, bulk_fn);
	co_test_run_frames(fs, 2);
	assert_int_equal(co_status(&s.co), BIG);
	assert_int_equal(co_status(&r.co), BIG);
	assert_memory_equal(s.buf, r.buf, BIG);
	/* EOF: a short count, not an error */
	close(p[0]);
	r.len = 10;
	co_init(&r.co, bulk_fn);
	co_test_run1(&r.co);
	assert_int_equal(co_status(&r.co), 0);
	/* the peer is gone: send_all reports the error */
	s.fd = p[1];
	s.len = 1000;
	co_init(&s.co, bulk_fn);
	co_test_run1(&s.co);
	assert_int_equal(co_status(&s.co), -EPIPE);
	/* bad arguments */
	free(s.buf);
	s.buf = NULL;
	co_init(&s.co, bulk_fn);
	co_test_run1(&s.co);
	assert_int_equal(co_status(&s.co), -EINVAL);
	close(p[1]);
	free(r.buf);
}

struct filecopy {
	co_frame co;
	co_io_all x;
	int fd;
	unsigned char *buf;
	int write;
};

static int filecopy_fn(co_frame *f)
{
	struct filecopy *c = (struct filecopy *)f;
	CO_BEGIN(f);
	if (c->write)
		CO_AWAIT(f, co_write_all(&c->x, c->fd, c->buf, 1 << 20, 4096));
	else
		CO_AWAIT(f, co_read_all(&c->x, c->fd, c->buf, 2 << 20, 4096));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void test_read_write_all_file(void **state)
{
	struct filecopy w = { .write = 1 }, r = { 0 };
	char path[320];
	(void)state;
	snprintf(path, sizeof path, "%s", co_test_tmp_path("coring-all", "file"));
	w.fd = r.fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(w.fd >= 0);
	unlink(path);
	w.buf = malloc(1 << 20);
	r.buf = calloc(1, 2 << 20);
	for (int i = 0; i < (1 << 20); i++)
		w.buf[i] = (unsigned char)(i ^ (i >> 8));
	co_init(&w.co, filecopy_fn);
	co_test_run1(&w.co);
	assert_int_equal(co_status(&w.co), 1 << 20);
	co_init(&r.co, filecopy_fn);
	co_test_run1(&r.co);
	assert_int_equal(co_status(&r.co), 1 << 20); /* asked 2 MiB: EOF at 1 MiB */
	assert_memory_equal(w.buf, r.buf, 1 << 20);
	close(w.fd);
	free(w.buf);
	free(r.buf);
}

/* At the current position ((uint64_t)-1): each later read or write of the
 * loop goes on from where the last ended, as the kernel moved the file's
 * position, and a read stops at the end of the file. */
struct curpos {
	co_frame co;
	co_io_all x;
	int fd, write;
	const char *out;
	char in[32];
};

static int curpos_fn(co_frame *f)
{
	struct curpos *c = (struct curpos *)f;
	CO_BEGIN(f);
	if (c->write)
		CO_AWAIT(f, co_write_all(&c->x, c->fd, c->out, strlen(c->out), (uint64_t)-1));
	else
		CO_AWAIT(f, co_read_all(&c->x, c->fd, c->in, sizeof c->in, (uint64_t)-1));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void test_all_at_current_position(void **state)
{
	struct curpos c;
	char path[320], got[32] = { 0 };
	int fd;

	(void)state;
	snprintf(path, sizeof path, "%s", co_test_tmp_path("coring-all", "curpos"));
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	unlink(path);
	memset(&c, 0, sizeof c);
	c.fd = fd;
	c.write = 1;
	c.out = "ABCDE";
	co_init(&c.co, curpos_fn);
	co_test_run1(&c.co);
	assert_int_equal(co_status(&c.co), 5);
	c.out = "FGHIJ";
	co_init(&c.co, curpos_fn);
	co_test_run1(&c.co);
	assert_int_equal(co_status(&c.co), 5);
	assert_int_equal(pread(fd, got, sizeof got, 0), 10);
	assert_string_equal(got, "ABCDEFGHIJ");
	/* read from byte 3: a short read of 7, then the end of the file (a
	 * read at a wrapped offset would fetch byte 9 again) */
	assert_int_equal(lseek(fd, 3, SEEK_SET), 3);
	c.write = 0;
	co_init(&c.co, curpos_fn);
	co_test_run1(&c.co);
	assert_int_equal(co_status(&c.co), 7);
	assert_int_equal(c.x.done, 7);
	assert_memory_equal(c.in, "DEFGHIJ", 8); /* and nothing after it */
	close(fd);
}

/* A descriptor with O_NONBLOCK, or MSG_DONTWAIT: -EAGAIN waits until the
 * descriptor is ready (co_poll), not in a loop asked again at once; a
 * limit or a cancel ends that wait. */
struct nb {
	co_frame co, peer;
	co_io_all x;
	co_io pio;
	co_limit lim;
	int fd, pfd, send, limited, cancel, cancel_res;
	unsigned char *buf;
	size_t len, got;
};

static int nb_fn(co_frame *f)
{
	struct nb *n = (struct nb *)f;
	CO_BEGIN(f);
	if (n->limited)
		CO_AWAIT_TASK(f, co_timeout_task(&n->lim,
						 co_recv_all(&n->x, n->fd, n->buf, n->len, MSG_DONTWAIT),
						 10 * CO_MS));
	else if (n->send)
		CO_AWAIT(f, co_send_all(&n->x, n->fd, n->buf, n->len, MSG_NOSIGNAL));
	else
		CO_AWAIT(f, co_recv_all(&n->x, n->fd, n->buf, n->len, MSG_DONTWAIT));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

/* The other end: 3 bytes at once, then (after 5 ms) the rest, or, for a
 * send, everything read after 5 ms. */
static int nb_peer_fn(co_frame *f)
{
	struct nb *n = (struct nb *)(void *)((char *)f - offsetof(struct nb, peer));
	static unsigned char sink[1 << 16];
	CO_BEGIN(f);
	if (n->cancel) { /* once the receive waits for its descriptor: a cancel */
		CO_AWAIT_UNTIL(f, co_waiting(&n->co));
		n->cancel_res = co_cancel(&n->co);
		CO_RETURN(f, 0);
	}
	if (!n->send)
		assert_int_equal(write(n->pfd, "abc", 3), 3);
	CO_AWAIT(f, co_sleep(&n->pio, 5 * CO_MS));
	if (!n->send)
		assert_int_equal(write(n->pfd, "defgh", 5), 5);
	while (n->send && n->got < n->len) {
		CO_AWAIT(f, co_recv(&n->pio, n->pfd, sink, sizeof sink, 0));
		assert_true(co_result(f) > 0);
		n->got += (size_t)co_result(f);
	}
	CO_END(f);
}

static void nb_run(struct nb *n, int with_peer, uint64_t max_cqes)
{
	co_engine e;
	co_frame *fs[2] = { &n->co, &n->peer };

	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&n->co, nb_fn);
	co_init(&n->peer, nb_peer_fn);
	for (int i = 0; i < 1 + with_peer; i++)
		assert_int_equal(co_engine_spawn(&e, fs[i]), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	/* each -EAGAIN costs a poll, not a spin: a few completions for the
	 * receive (5 here; thousands asked again at once), about two per
	 * 4 KiB for the send */
	if (e.stats.cqes > max_cqes)
		fail_msg("%llu completions", (unsigned long long)e.stats.cqes);
	assert_int_equal(co_engine_destroy(&e), 0);
}

static void test_all_nonblocking_waits(void **state)
{
	struct nb n;
	unsigned char in[8];
	int p[2], small = 4096;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
	memset(&n, 0, sizeof n);
	n.fd = p[0];
	n.pfd = p[1];
	n.buf = in;
	n.len = sizeof in;
	nb_run(&n, 1, 16);
	assert_int_equal(co_status(&n.co), 8);
	assert_memory_equal(in, "abcdefgh", 8);
	/* a send on O_NONBLOCK into a full buffer: waits for the peer's read */
	assert_int_equal(fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK), 0);
	setsockopt(p[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
	memset(&n, 0, sizeof n);
	n.fd = p[0];
	n.pfd = p[1];
	n.send = 1;
	n.len = 256 << 10;
	n.buf = calloc(1, n.len);
	nb_run(&n, 1, 512);
	assert_int_equal(co_status(&n.co), (int)(256 << 10));
	assert_int_equal(n.got, 256 << 10);
	free(n.buf);
	/* nothing comes: the limit ends the wait */
	memset(&n, 0, sizeof n);
	n.fd = p[0];
	n.pfd = p[1];
	n.limited = 1;
	n.buf = in;
	n.len = sizeof in;
	nb_run(&n, 0, 16);
	assert_int_equal(co_status(&n.co), -ETIME);
	assert_int_equal(n.x.done, 0);
	/* nothing comes: a cancel ends the wait */
	memset(&n, 0, sizeof n);
	n.fd = p[0];
	n.pfd = p[1];
	n.cancel = 1;
	n.buf = in;
	n.len = sizeof in;
	nb_run(&n, 1, 16);
	assert_int_equal(n.cancel_res, 0);
	assert_int_equal(co_status(&n.co), -ECANCELED);
	assert_int_equal(n.x.done, 0);
	close(p[0]);
	close(p[1]);
}

/* ---- the acceptor re-armed -------------------------------------------------- */

/* io.md, "Multishot accept": "The kernel ending the multishot after a
 * success re-arms it". A CQ of 2 entries and 16 connections waiting in
 * the backlog when the acceptor starts: the kernel accepts until the CQ is
 * full, then ends the multishot with a descriptor (no IORING_CQE_F_MORE),
 * again and again. Every connection reaches on_conn, then the frame stops
 * the acceptor: its last call is -ECANCELED. Without the re-arm the
 * acceptor stays stopped after the first full CQ and the count stops
 * short (the frame gives up after 5 s). */
enum { REARM_CONNS = 16 };

struct rearm {
	co_frame co;
	co_io io;
	co_acceptor acc;
	int lfd, fds, cancelled, other, start, stop, polls;
};

static void rearm_conn(co_acceptor *a, int fd)
{
	struct rearm *r = a->user;

	if (fd >= 0) {
		r->fds++;
		close(fd);
	} else if (fd == -ECANCELED) {
		r->cancelled++;
	} else {
		r->other++;
	}
}

static int rearm_fn(co_frame *f)
{
	struct rearm *r = (struct rearm *)f;
	CO_BEGIN(f);
	r->start = co_acceptor_start(&r->acc, r->lfd, SOCK_CLOEXEC, rearm_conn, r);
	for (r->polls = 0; r->fds < REARM_CONNS && r->polls < 5000; r->polls++)
		CO_AWAIT(f, co_sleep(&r->io, CO_MS));
	r->stop = co_acceptor_stop(&r->acc);
	while (r->cancelled == 0 && r->polls++ < 10000)
		CO_AWAIT(f, co_sleep(&r->io, CO_MS));
	CO_END(f);
}

static void test_acceptor_rearmed_after_success(void **state)
{
	co_engine e;
	co_engine_opts opts = { 0 };
	struct rearm r;
	uint16_t port;
	int c[REARM_CONNS];
	(void)state;
	memset(&r, 0, sizeof r);
	r.lfd = co_test_listen(&port);
	for (int i = 0; i < REARM_CONNS; i++) {
		struct sockaddr_in a = co_test_loopback(port);
		c[i] = socket(AF_INET, SOCK_STREAM, 0);
		assert_true(c[i] >= 0);
		assert_int_equal(connect(c[i], (struct sockaddr *)&a, sizeof a), 0);
	}
	opts.sq_entries = 2;
	opts.cq_entries = 2;
	assert_int_equal(co_engine_init(&e, &opts), 0);
	co_init(&r.co, rearm_fn);
	r.acc.user = &r;
	assert_int_equal(co_engine_spawn(&e, &r.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(r.start, 0);
	assert_int_equal(r.stop, 0);
	assert_int_equal(r.fds, REARM_CONNS);
	assert_int_equal(r.acc.accepted, REARM_CONNS);
	assert_int_equal(r.cancelled, 1);
	assert_int_equal(r.other, 0);
	assert_int_equal(r.acc.armed, 0);
	for (int i = 0; i < REARM_CONNS; i++)
		close(c[i]);
	close(r.lfd);
}

/* ---- the acceptor's errors ---------------------------------------------- */

struct acc_probe {
	co_frame co;
	co_io io;
	co_acceptor acc, bad;
	int lfd, sfd;
	int r[8];
	int calls, cancelled, last, bad_calls, bad_res;
};

static void acc_probe_conn(co_acceptor *a, int fd)
{
	struct acc_probe *p = a->user;

	p->calls++;
	p->last = fd;
	if (fd == -ECANCELED)
		p->cancelled++;
	else if (fd >= 0)
		close(fd);
}

static void acc_probe_bad(co_acceptor *a, int fd)
{
	struct acc_probe *p = a->user;

	p->bad_calls++;
	p->bad_res = fd;
}

static void *acc_stop_elsewhere(void *arg)
{
	return (void *)(intptr_t)co_acceptor_stop(arg);
}

static int acc_probe_fn(co_frame *f)
{
	struct acc_probe *p = (struct acc_probe *)f;
	pthread_t th;
	void *ret;
	CO_BEGIN(f);
	p->r[0] = co_acceptor_start(&p->acc, -1, 0, acc_probe_conn, p);
	p->r[1] = co_acceptor_start(&p->acc, p->lfd, 0, NULL, p);
	p->r[2] = co_acceptor_start(&p->acc, p->lfd, SOCK_CLOEXEC, acc_probe_conn, p);
	p->r[3] = co_acceptor_start(&p->acc, p->lfd, SOCK_CLOEXEC, acc_probe_conn, p);
	/* a socket that does not listen: started, then on_conn gets the error */
	p->r[4] = co_acceptor_start(&p->bad, p->sfd, 0, acc_probe_bad, p);
	/* a stop from a thread that does not run the acceptor's engine */
	assert_int_equal(pthread_create(&th, NULL, acc_stop_elsewhere, &p->acc), 0);
	pthread_join(th, &ret);
	p->r[7] = (int)(intptr_t)ret;
	CO_AWAIT(f, co_sleep(&p->io, CO_MS));
	p->r[5] = co_acceptor_stop(&p->acc);
	p->r[6] = co_acceptor_stop(&p->acc); /* again */
	CO_AWAIT(f, co_sleep(&p->io, CO_MS));
	CO_END(f);
}

static void test_acceptor_errors(void **state)
{
	struct acc_probe p;
	uint16_t port;
	co_acceptor off;
	(void)state;
	memset(&p, 0, sizeof p);
	p.lfd = co_test_listen(&port);
	p.sfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(p.sfd >= 0);
	memset(&off, 0, sizeof off);
	assert_int_equal(co_acceptor_start(&off, p.lfd, 0, acc_probe_conn, &p), -ENXIO);
	assert_int_equal(co_acceptor_stop(&off), 0); /* not armed: nothing to stop */
	co_init(&p.co, acc_probe_fn);
	co_test_run1(&p.co);
	assert_int_equal(p.r[0], -EINVAL);
	assert_int_equal(p.r[1], -EINVAL);
	assert_int_equal(p.r[2], 0);
	assert_int_equal(p.r[3], -EALREADY);
	assert_int_equal(p.r[4], 0);
	assert_int_equal(p.r[5], 0);
	assert_int_equal(p.r[6], 0);
	assert_int_equal(p.r[7], -ENXIO);
	assert_int_equal(p.cancelled, 1); /* one last call, -ECANCELED */
	assert_int_equal(p.calls, 1);
	assert_int_equal(p.acc.armed, 0);
	assert_int_equal(p.bad_calls, 1);
	assert_int_equal(p.bad_res, -EINVAL);
	assert_int_equal(p.bad.armed, 0);
	close(p.lfd);
	close(p.sfd);
}

/*
 * io.h, co_acceptor_start: "-EALREADY (armed)". An acceptor armed on one
 * engine, started again from a frame of another engine (both ticked by
 * this thread, one after the other): -EALREADY. Without co_acceptor_start's
 * refusal of any armed acceptor (lib/io/io.c), it answered 0 and armed a
 * second multishot with the same co_io_info on the other ring, while the
 * first was still in flight on the first ring.
 */
struct acc_twice {
	co_frame co;
	co_acceptor *acc;
	int lfd, res, stop;
};

static void acc_twice_conn(co_acceptor *a, int fd)
{
	(void)a;
	if (fd >= 0)
		close(fd);
}

static int acc_twice_fn(co_frame *f)
{
	struct acc_twice *t = (struct acc_twice *)f;
	CO_BEGIN(f);
	if (t->stop)
		t->res = co_acceptor_stop(t->acc);
	else
		t->res = co_acceptor_start(t->acc, t->lfd, SOCK_CLOEXEC, acc_twice_conn, NULL);
	CO_END(f);
}

static void test_acceptor_armed_on_another_engine(void **state)
{
	co_engine x, y;
	co_acceptor acc;
	struct acc_twice a = { 0 }, b = { 0 }, c = { 0 };
	uint16_t port;
	int lfd = co_test_listen(&port);
	(void)state;
	memset(&acc, 0, sizeof acc);
	assert_int_equal(co_engine_init(&x, NULL), 0);
	assert_int_equal(co_engine_init(&y, NULL), 0);
	a.acc = b.acc = c.acc = &acc;
	a.lfd = b.lfd = lfd;
	co_init(&a.co, acc_twice_fn);
	assert_int_equal(co_engine_spawn(&x, &a.co), 0);
	assert_int_equal(co_engine_tick(&x), 1);
	assert_int_equal(a.res, 0);
	assert_int_equal(acc.armed, 1);
	co_init(&b.co, acc_twice_fn);
	assert_int_equal(co_engine_spawn(&y, &b.co), 0);
	assert_int_equal(co_engine_tick(&y), 1);
	assert_int_equal(b.res, -EALREADY); /* armed (on x) */
	/* stop it on x, where it runs */
	c.stop = 1;
	co_init(&c.co, acc_twice_fn);
	assert_int_equal(co_engine_spawn(&x, &c.co), 0);
	assert_int_equal(co_engine_run(&x, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(c.res, 0);
	assert_int_equal(acc.armed, 0);
	assert_int_equal(co_engine_run(&y, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_engine_destroy(&x), 0);
	assert_int_equal(co_engine_destroy(&y), 0);
	close(lfd);
}

/* ---- multishot accept + 10,000-coroutine echo --------------------------- */

#define ECHO_CONNS 5000 /* 5,000 clients + 5,000 server handlers */
#define ECHO_ROUNDS 3
#define BIG_MSG 65536

struct echo_server {
	co_acceptor acc;
	struct co_test_echo *conns;
	int nconn, maxconn, errors, cancelled;
};

static void on_conn(co_acceptor *a, int fd)
{
	struct echo_server *s = a->user;
	struct co_test_echo *c;
	if (fd < 0) {
		if (fd == -ECANCELED)
			s->cancelled++;
		else
			s->errors++;
		return;
	}
	if (s->nconn == s->maxconn) { /* more than the test opened */
		s->errors++;
		close(fd);
		return;
	}
	c = &s->conns[s->nconn++];
	c->fd = fd;
	co_init(&c->co, co_test_echo_fn);
	assert_int_equal(co_engine_spawn(co_engine_current(), &c->co), 0);
}

struct echo_client {
	co_frame co;
	co_io io;
	co_io_all x;
	int fd, round, len, maxlen, bad;
	uint16_t port;
	struct sockaddr_in addr;
	unsigned seed;
	unsigned char *out, *in;
	int *clients_left;
	struct echo_server *srv;
	int lfd;
};

static int echo_client_fn(co_frame *f)
{
	struct echo_client *c = (struct echo_client *)f;
	CO_BEGIN(f);
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	c->addr = co_test_loopback(c->port);
	CO_AWAIT(f, co_connect(&c->io, c->fd, (struct sockaddr *)&c->addr, sizeof c->addr));
	if (co_result(f) < 0) {
		c->bad = co_result(f);
		goto out;
	}
	for (c->round = 0; c->round < ECHO_ROUNDS; c->round++) {
		c->len = 1 + (int)(rand_r(&c->seed) % (unsigned)c->maxlen);
		for (int i = 0; i < c->len; i++)
			c->out[i] = (unsigned char)rand_r(&c->seed);
		CO_AWAIT(f, co_send_all(&c->x, c->fd, c->out, (size_t)c->len, MSG_NOSIGNAL));
		if (co_result(f) != c->len) {
			c->bad = -1000 - co_result(f);
			goto out;
		}
		CO_AWAIT(f, co_recv_all(&c->x, c->fd, c->in, (size_t)c->len, 0));
		if (co_result(f) != c->len || memcmp(c->in, c->out, (size_t)c->len) != 0) {
			c->bad = -2000;
			goto out;
		}
	}
out:
	close(c->fd);
	/* the last client stops the acceptor, so the engine can go idle */
	if (--*c->clients_left == 0)
		co_acceptor_stop(&c->srv->acc);
	CO_END(f);
}

struct acceptor_starter {
	co_frame co;
	struct echo_server *srv;
	int lfd, ret;
};

static int starter_fn(co_frame *f)
{
	struct acceptor_starter *s = (struct acceptor_starter *)f;
	CO_BEGIN(f);
	s->ret = co_acceptor_start(&s->srv->acc, s->lfd, SOCK_CLOEXEC, on_conn, s->srv);
	CO_END(f);
}

/* conns clients and conns server coroutines echo messages of random sizes
 * from 1 to maxlen bytes over loopback; every byte is checked. */
static void echo_run(int conns, int maxlen)
{
	struct rlimit rl;
	struct echo_server srv = { 0 };
	struct acceptor_starter st = { 0 };
	struct echo_client *cl;
	unsigned char *bufs;
	co_engine e;
	co_engine_opts o = { .ready_size = 16384, .sq_entries = 1024 };
	uint16_t port;
	int lfd, left = conns, bad = 0;

	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < 2 * (rlim_t)conns + 64) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur < 2 * (rlim_t)conns + 64)
			skip();
	}
	lfd = co_test_listen(&port);
	srv.conns = calloc((size_t)conns, sizeof *srv.conns);
	srv.maxconn = conns;
	cl = calloc((size_t)conns, sizeof *cl);
	bufs = malloc((size_t)conns * 2 * (size_t)maxlen);
	assert_non_null(srv.conns);
	assert_non_null(cl);
	assert_non_null(bufs);
	assert_int_equal(co_engine_init(&e, &o), 0);
	st.srv = &srv;
	st.lfd = lfd;
	co_init(&st.co, starter_fn);
	assert_int_equal(co_engine_spawn(&e, &st.co), 0);
	for (int i = 0; i < conns; i++) {
		cl[i].port = port;
		cl[i].seed = (unsigned)i * 2654435761u + (unsigned)maxlen;
		cl[i].maxlen = maxlen;
		cl[i].out = bufs + (size_t)i * 2 * (size_t)maxlen;
		cl[i].in = cl[i].out + maxlen;
		cl[i].clients_left = &left;
		cl[i].srv = &srv;
		co_init(&cl[i].co, echo_client_fn);
		assert_int_equal(co_engine_spawn(&e, &cl[i].co), 0);
	}
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(st.ret, 0);
	for (int i = 0; i < conns; i++)
		if (cl[i].bad) {
			if (bad++ < 5)
				print_error("client %d: %d\n", i, cl[i].bad);
		}
	assert_int_equal(bad, 0);
	assert_int_equal(srv.nconn, conns);
	assert_int_equal(srv.acc.accepted, (uint64_t)conns);
	assert_int_equal(srv.errors, 0);
	assert_int_equal(srv.cancelled, 1);
	assert_int_equal(srv.acc.armed, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	close(lfd);
	free(srv.conns);
	free(cl);
	free(bufs);
}

static void test_echo_10000_coroutines(void **state)
{
	(void)state;
	echo_run(ECHO_CONNS, 3000);
}

static void test_echo_random_sizes_to_64k(void **state)
{
	(void)state;
	echo_run(300, BIG_MSG); /* 1 byte to 64 KiB: many short sends and reads */
}

/* A write or a send that makes no progress (the kernel answers 0 for a
 * length that is not 0) ends the loop with -EIO, x->done the bytes moved
 * before it; asked again it would answer 0 again, for good. The fault
 * point shrinks the transfer the loop is about to ask for to nothing (the
 * kernel answers a transfer of 0 bytes with 0), once, at the transfer
 * chosen. Without the loop's check of a 0, the write "ends" with its
 * count short and no error: -EIO is what io.md promises. */
struct stall {
	co_frame co;
	co_io_all x;
	int fd, op, at, pass; /* op 0: write_all, 1: send_all; stall the at-th transfer */
	char buf[8];
};

static void stall_at(void *arg)
{
	struct stall *st = arg;

	if (++st->pass == st->at)
		st->x.len = st->x.done; /* this transfer asks for nothing */
}

static int stall_fn(co_frame *f)
{
	struct stall *st = (struct stall *)f;

	CO_BEGIN(f);
	if (st->op == 0)
		CO_AWAIT(f, co_write_all(&st->x, st->fd, st->buf, sizeof st->buf, (uint64_t)-1));
	else
		CO_AWAIT(f, co_send_all(&st->x, st->fd, st->buf, sizeof st->buf, MSG_NOSIGNAL));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void test_all_write_without_progress(void **state)
{
	(void)state;
	for (int op = 0; op < 2; op++) {
		struct stall st;
		int sv[2];

		if (op == 0)
			assert_int_equal(pipe(sv), 0);
		else
			co_test_tcp_pair(sv);
		memset(&st, 0, sizeof st);
		memcpy(st.buf, "abcdefgh", 8);
		st.fd = sv[1];
		st.op = op;
		st.at = 1;
		co__fault_on_point(CO__POINT_IO_ALL_NEXT, stall_at, &st);
		co_init(&st.co, stall_fn);
		co_test_run1(&st.co);
		co__fault_on_point(CO__POINT_IO_ALL_NEXT, NULL, NULL);
		assert_int_equal(st.pass, 1);
		assert_int_equal(co_status(&st.co), -EIO);
		assert_int_equal(st.x.done, 0);
		close(sv[0]);
		close(sv[1]);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tcp_accept_connect),
		cmocka_unit_test(test_tcp_refused),
		cmocka_unit_test(test_tcp_reset),
		cmocka_unit_test(test_send_recv_all),
		cmocka_unit_test(test_read_write_all_file),
		cmocka_unit_test(test_all_at_current_position),
		cmocka_unit_test(test_all_nonblocking_waits),
		cmocka_unit_test(test_all_write_without_progress),
		cmocka_unit_test(test_acceptor_errors),
		cmocka_unit_test(test_acceptor_rearmed_after_success),
		cmocka_unit_test(test_acceptor_armed_on_another_engine),
		cmocka_unit_test(test_echo_10000_coroutines),
		cmocka_unit_test(test_echo_random_sizes_to_64k),
	};
	signal(SIGPIPE, SIG_IGN);
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
