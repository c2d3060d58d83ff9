/* SPDX-License-Identifier: MIT */
/* Tests of the I/O awaiters (lib/io/io.c) against real descriptors: pipes,
 * socketpairs and temporary files; sleeps, deadlines and cancellation, and
 * their errors. TCP is in test_io_net.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <cmocka.h>

#include <coring/io.h>
#include "helpers.h"

/* ---- basic operations -------------------------------------------------- */

struct basic {
	co_frame co;
	co_io io;
	int p[2];
	char buf[64];
	int r[8];
	struct iovec iov[2];
	struct statx stx;
	char path[320];
	int fd;
};

static int pipe_fn(co_frame *f)
{
	struct basic *b = (struct basic *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&b->io));
	b->r[0] = co_result(f);
	CO_AWAIT(f, co_write(&b->io, b->p[1], "hello", 5, (uint64_t)-1));
	b->r[1] = co_result(f);
	CO_AWAIT(f, co_poll(&b->io, b->p[0], POLLIN));
	b->r[2] = co_result(f);
	CO_AWAIT(f, co_read(&b->io, b->p[0], b->buf, sizeof b->buf, (uint64_t)-1));
	b->r[3] = co_result(f);
	CO_AWAIT(f, co_read(&b->io, 1000000, b->buf, sizeof b->buf, 0)); /* no such fd */
	b->r[4] = co_result(f);
	CO_AWAIT(f, co_close(&b->io, b->p[1]));
	b->r[5] = co_result(f);
	CO_AWAIT(f, co_read(&b->io, b->p[0], b->buf, sizeof b->buf, (uint64_t)-1)); /* EOF */
	b->r[6] = co_result(f);
	CO_END(f);
}

/* include/coring/io.h: a co_io is 40 bytes on LP64 (136 with a co_frame) */
_Static_assert(sizeof(void *) != 8 || sizeof(co_io) == 40, "co_io is 40 bytes on LP64");

static void test_pipe_ops(void **state)
{
	struct basic b;
	(void)state;
	memset(&b, 0, sizeof b);
	assert_int_equal(pipe(b.p), 0);
	co_init(&b.co, pipe_fn);
	co_test_run1(&b.co);
	assert_int_equal(b.r[0], 0);
	assert_int_equal(b.r[1], 5);
	assert_true(b.r[2] & POLLIN);
	assert_int_equal(b.r[3], 5);
	assert_memory_equal(b.buf, "hello", 5);
	assert_int_equal(b.r[4], -EBADF);
	assert_int_equal(b.r[5], 0);
	assert_int_equal(b.r[6], 0);
	close(b.p[0]);
}

static int file_fn(co_frame *f)
{
	struct basic *b = (struct basic *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_openat(&b->io, AT_FDCWD, b->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
	b->fd = co_result(f);
	if (b->fd < 0)
		CO_RETURN(f, b->fd);
	b->iov[0] = (struct iovec){ "abc", 3 };
	b->iov[1] = (struct iovec){ "defg", 4 };
	CO_AWAIT(f, co_writev(&b->io, b->fd, b->iov, 2, 10));
	b->r[0] = co_result(f);
	CO_AWAIT(f, co_fsync(&b->io, b->fd, 0));
	b->r[1] = co_result(f);
	CO_AWAIT(f, co_statx(&b->io, AT_FDCWD, b->path, 0, STATX_SIZE, &b->stx));
	b->r[2] = co_result(f);
	b->iov[0] = (struct iovec){ b->buf, 5 };
	b->iov[1] = (struct iovec){ b->buf + 5, 2 };
	CO_AWAIT(f, co_readv(&b->io, b->fd, b->iov, 2, 10));
	b->r[3] = co_result(f);
	CO_AWAIT(f, co_close(&b->io, b->fd));
	b->r[4] = co_result(f);
	CO_AWAIT(f, co_openat(&b->io, AT_FDCWD, "/nonexistent/coring", O_RDONLY, 0));
	b->r[5] = co_result(f);
	CO_AWAIT(f, co_statx(&b->io, AT_FDCWD, NULL, 0, STATX_SIZE, &b->stx));
	b->r[6] = co_result(f);
	CO_AWAIT(f, co_statx(&b->io, AT_FDCWD, b->path, 0, STATX_SIZE, NULL));
	b->r[7] = co_result(f);
	CO_END(f);
}

static void test_file_ops(void **state)
{
	struct basic b;
	(void)state;
	memset(&b, 0, sizeof b);
	snprintf(b.path, sizeof b.path, "%s", co_test_tmp_path("coring-io", "file"));
	co_init(&b.co, file_fn);
	co_test_run1(&b.co);
	unlink(b.path);
	assert_int_equal(co_status(&b.co), 0);
	assert_int_equal(b.r[0], 7);
	assert_int_equal(b.r[1], 0);
	assert_int_equal(b.r[2], 0);
	assert_int_equal(b.stx.stx_size, 17);
	assert_int_equal(b.r[3], 7);
	assert_memory_equal(b.buf, "abcdefg", 7);
	assert_int_equal(b.r[4], 0);
	assert_int_equal(b.r[5], -ENOENT);
	assert_int_equal(b.r[6], -EFAULT);
	assert_int_equal(b.r[7], -EFAULT); /* NULL out */
}

static int sockpair_fn(co_frame *f)
{
	struct basic *b = (struct basic *)f;
	static char hdr[3] = "msg";
	static struct msghdr mh;
	CO_BEGIN(f);
	CO_AWAIT(f, co_send(&b->io, b->p[0], "ping", 4, 0));
	b->r[0] = co_result(f);
	CO_AWAIT(f, co_recv(&b->io, b->p[1], b->buf, sizeof b->buf, 0));
	b->r[1] = co_result(f);
	b->iov[0] = (struct iovec){ hdr, 3 };
	mh = (struct msghdr){ .msg_iov = b->iov, .msg_iovlen = 1 };
	CO_AWAIT(f, co_sendmsg(&b->io, b->p[1], &mh, 0));
	b->r[2] = co_result(f);
	b->iov[0] = (struct iovec){ b->buf + 4, 16 };
	CO_AWAIT(f, co_recvmsg(&b->io, b->p[0], &mh, 0));
	b->r[3] = co_result(f);
	close(b->p[1]);
	CO_AWAIT(f, co_send(&b->io, b->p[0], "x", 1, MSG_NOSIGNAL));
	b->r[4] = co_result(f);
	CO_END(f);
}

static void test_socketpair_ops(void **state)
{
	struct basic b;
	(void)state;
	memset(&b, 0, sizeof b);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, b.p), 0);
	co_init(&b.co, sockpair_fn);
	co_test_run1(&b.co);
	assert_int_equal(b.r[0], 4);
	assert_int_equal(b.r[1], 4);
	assert_memory_equal(b.buf, "ping", 4);
	assert_int_equal(b.r[2], 3);
	assert_int_equal(b.r[3], 3);
	assert_memory_equal(b.buf + 4, "msg", 3);
	assert_int_equal(b.r[4], -EPIPE);
	close(b.p[0]);
}

/* ---- time: sleep, deadline ------------------------------------------------ */

struct timed {
	co_frame co;
	co_io io;
	int p[2];
	char buf[8];
	int r[6];
	uint64_t t0, t1;
};

static int timed_fn(co_frame *f)
{
	struct timed *t = (struct timed *)f;
	CO_BEGIN(f);
	t->t0 = co_now_ns();
	CO_AWAIT(f, co_sleep(&t->io, 2 * CO_MS));
	t->r[0] = co_result(f);
	t->t1 = co_now_ns();
	CO_AWAIT(f, co_sleep_until(&t->io, co_now_ns() + CO_MS));
	t->r[1] = co_result(f);
	/* nothing to read: the deadline fires */
	CO_AWAIT(f, co_deadline(co_recv(&t->io, t->p[0], t->buf, sizeof t->buf, 0), 5 * CO_MS));
	t->r[2] = co_result(f);
	/* the same co_io again, with data there: the op wins */
	write(t->p[1], "ok", 2);
	CO_AWAIT(f, co_deadline(co_recv(&t->io, t->p[0], t->buf, sizeof t->buf, 0), 10 * CO_S));
	t->r[3] = co_result(f);
	CO_END(f);
}

static void test_sleep_and_deadline(void **state)
{
	struct timed t;
	(void)state;
	memset(&t, 0, sizeof t);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, t.p), 0);
	co_init(&t.co, timed_fn);
	co_test_run1(&t.co);
	assert_int_equal(t.r[0], 0);
	assert_true(t.t1 - t.t0 >= 2 * CO_MS); /* it did wait */
	assert_int_equal(t.r[1], 0);
	assert_int_equal(t.r[2], -ETIME);
	assert_int_equal(t.r[3], 2);
	assert_memory_equal(t.buf, "ok", 2);
	close(t.p[0]);
	close(t.p[1]);
}

/* ---- cancellation ----------------------------------------------------------- */

struct victim {
	co_frame co;
	co_io io;
	int fd, res;
	char buf[8];
};

static int victim_fn(co_frame *f)
{
	struct victim *v = (struct victim *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_recv(&v->io, v->fd, v->buf, sizeof v->buf, 0));
	v->res = co_result(f);
	CO_END(f);
}

struct canceller {
	co_frame co;
	co_io io;
	struct victim *v;
	int by_io; /* cancel with the co_cancel_io awaiter, not co_cancel */
	int r[3];
};

static int canceller_fn(co_frame *f)
{
	struct canceller *c = (struct canceller *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&c->io)); /* the victim is waiting by now */
	if (c->by_io) {
		CO_AWAIT(f, co_cancel_io(&c->io, &c->v->io));
		c->r[0] = co_result(f);
		CO_AWAIT(f, co_cancel_io(&c->io, &c->v->io)); /* nothing left */
		c->r[1] = co_result(f);
	} else {
		c->r[0] = co_cancel(&c->v->co);
	}
	CO_END(f);
}

static void test_cancel_pending_recv(void **state)
{
	int p[2];
	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
	for (int by_io = 0; by_io < 2; by_io++) {
		struct victim v = { .fd = p[0], .res = 1 };
		struct canceller c = { .v = &v, .by_io = by_io };
		co_frame *fs[2] = { &v.co, &c.co };
		co_init(&v.co, victim_fn);
		co_init(&c.co, canceller_fn);
		co_test_run_frames(fs, 2);
		assert_int_equal(c.r[0], 0);
		assert_int_equal(v.res, -ECANCELED);
		if (by_io)
			assert_int_equal(c.r[1], -ENOENT);
	}
	close(p[0]);
	close(p[1]);
}

static void test_cancel_race_many(void **state)
{
	/* 2,000 rounds of cancel against a recv, with data present in half of
	 * them: each await completes exactly once; a cancelled recv never
	 * consumed the byte (it is still there), a completed one got it */
	int p[2], got_data = 0, cancelled_with_data = 0;
	char c;
	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
	for (int i = 0; i < 2000; i++) {
		struct victim v = { .fd = p[0], .res = 7 };
		struct canceller cn = { .v = &v };
		co_frame *fs[2] = { &v.co, &cn.co };
		int data = i & 1;
		if (data)
			assert_int_equal(write(p[1], "d", 1), 1);
		co_init(&v.co, victim_fn);
		co_init(&cn.co, canceller_fn);
		co_test_run_frames(fs, 2);
		assert_true(co_done(&v.co));
		if (v.res == 1) {
			assert_true(data);
			assert_int_equal(v.buf[0], 'd');
			assert_int_equal(cn.r[0], -EALREADY); /* it had finished */
			got_data++;
		} else {
			assert_int_equal(v.res, -ECANCELED);
			if (data) { /* the byte must still be there */
				assert_int_equal(recv(p[0], &c, 1, MSG_DONTWAIT), 1);
				cancelled_with_data++;
			}
		}
		assert_int_equal(recv(p[0], &c, 1, MSG_DONTWAIT), -1); /* nothing left over */
	}
	assert_int_equal(got_data + cancelled_with_data, 1000);
	close(p[0]);
	close(p[1]);
}

/* Three-way race, thousands of times: a recv with a deadline, a writer and a
 * canceller, each firing a random few microseconds in. Every recv must end
 * exactly once (a second wake traps in debug builds), with an outcome that
 * agrees with the socket: the byte was consumed if and only if the recv
 * reports it. */
#define RACES 20
#define RACE_BATCHES 150

struct racer {
	co_frame co;
	co_io io;
	int fd, res, ends;
	uint64_t deadline;
	char buf[8];
};

static int racer_fn(co_frame *f)
{
	struct racer *r = (struct racer *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_deadline(co_recv(&r->io, r->fd, r->buf, sizeof r->buf, 0), r->deadline));
	r->res = co_result(f);
	r->ends++;
	CO_END(f);
}

struct poker {
	co_frame co;
	co_io io;
	uint64_t delay;
	struct racer *target; /* cancel it ... */
	int fd;               /* ... or write a byte here */
	int r;
};

static int poker_fn(co_frame *f)
{
	struct poker *p = (struct poker *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep(&p->io, p->delay));
	if (p->target)
		p->r = co_cancel(&p->target->co);
	else
		p->r = (int)write(p->fd, "d", 1);
	CO_END(f);
}

static void test_deadline_cancel_completion_race(void **state)
{
	static struct racer r[RACES];
	static struct poker w[RACES], c[RACES];
	static int sp[RACES][2];
	unsigned seed = 12345;
	int seen[3] = { 0 }; /* data, -ETIME, -ECANCELED */
	char ch;
	(void)state;
	for (int b = 0; b < RACE_BATCHES; b++) {
		co_engine e;
		assert_int_equal(co_engine_init(&e, NULL), 0);
		for (int i = 0; i < RACES; i++) {
			/* A timed wake into user space takes tens of microseconds
			 * here, a deadline is enforced in the kernel: centre the
			 * deadline and the cancel on the writer's time, so that
			 * all three win often and many finish within microseconds.
			 * Small batches: many timers at once delay the writers. */
			uint64_t t = (uint64_t)(rand_r(&seed) % 300);
			assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp[i]), 0);
			r[i] = (struct racer){ .fd = sp[i][0],
					       .deadline = (t + 1 + (uint64_t)(rand_r(&seed) % 150)) * CO_US };
			co_init(&r[i].co, racer_fn);
			assert_int_equal(co_engine_spawn(&e, &r[i].co), 0);
			w[i] = (struct poker){ .fd = sp[i][1], .r = -1, .delay = t * CO_US };
			if (rand_r(&seed) % 4) { /* three in four rounds have data coming */
				co_init(&w[i].co, poker_fn);
				assert_int_equal(co_engine_spawn(&e, &w[i].co), 0);
			}
			c[i] = (struct poker){ .target = &r[i], .r = 1,
					       .delay = (t + (uint64_t)(rand_r(&seed) % 150)) * CO_US };
			if (rand_r(&seed) % 2) {
				co_init(&c[i].co, poker_fn);
				assert_int_equal(co_engine_spawn(&e, &c[i].co), 0);
			}
		}
		assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
		assert_int_equal(e.inflight, 0); /* every CQE consumed */
		assert_int_equal(co_engine_destroy(&e), 0);
		for (int i = 0; i < RACES; i++) {
			int wrote = w[i].r == 1, left;
			assert_int_equal(r[i].ends, 1);
			left = (int)recv(sp[i][0], &ch, 1, MSG_DONTWAIT) == 1;
			switch (r[i].res) {
			case 1:
				assert_true(wrote);
				assert_int_equal(r[i].buf[0], 'd');
				assert_false(left);
				seen[0]++;
				break;
			case -ETIME:
			case -ECANCELED:
				assert_int_equal(left, wrote); /* not consumed */
				seen[r[i].res == -ETIME ? 1 : 2]++;
				if (r[i].res == -ECANCELED)
					assert_int_equal(c[i].r, 0); /* a cancel was asked */
				break;
			default:
				fail_msg("race %d/%d: unexpected result %d", b, i, r[i].res);
			}
			close(sp[i][0]);
			close(sp[i][1]);
		}
	}
	assert_int_equal(seen[0] + seen[1] + seen[2], RACES * RACE_BATCHES);
	print_message("      %d races: %d data, %d deadline, %d cancelled\n",
		      RACES * RACE_BATCHES, seen[0], seen[1], seen[2]);
}

/* ---- no engine on this thread ---------------------------------------------- */

static void test_no_engine(void **state)
{
	struct basic b;
	(void)state;
	memset(&b, 0, sizeof b);
	co_init(&b.co, pipe_fn);
	b.p[0] = b.p[1] = -1;
	/* resumed by hand, outside any engine: every await says -ENXIO */
	while (co_resume(&b.co) != CO_DONE)
		;
	assert_int_equal(b.r[0], -ENXIO);
	assert_int_equal(b.r[3], -ENXIO);
}

/* A NULL co_io or co_io_all: the prep returns NULL, which CO_AWAIT (for an
 * awaiter or a child) turns into -EINVAL (test_co checks that step, and the debug
 * trap); bad arguments the kernel would fault on never reach it. */
static void test_null_arguments(void **state)
{
	co_io io;
	co_io_all x;
	(void)state;
	assert_null(co_nop(NULL));
	assert_null(co_recv(NULL, 0, NULL, 0, 0));
	assert_null(co_sleep(NULL, 1));
	assert_null(co_openat(NULL, AT_FDCWD, NULL, 0, 0));
	assert_null(co_cancel_io(NULL, NULL));
	assert_null(co_deadline(NULL, 1));
	assert_null(co_read_all(NULL, 0, NULL, 0, 0));
	assert_null(co_send_all(NULL, 0, NULL, 0, 0));
	assert_int_equal(co_acceptor_start(NULL, 3, 0, NULL, NULL), -EINVAL);
	assert_int_equal(co_acceptor_stop(NULL), -EINVAL);
	/* failed preps complete at once with their error, no engine needed:
	 * the suspend op declines to wait */
	assert_int_equal(co_openat(&io, AT_FDCWD, NULL, 0, 0)->ops->suspend(&io.aw, NULL), 0);
	assert_int_equal(io.res, -EFAULT);
	assert_int_equal(co_cancel_io(&io, NULL)->ops->suspend(&io.aw, NULL), 0);
	assert_int_equal(io.res, -EINVAL);
	/* a too-long or NULL buffer: the helper's status is -EINVAL */
	co_frame *c = co_send_all(&x, 0, NULL, 5, 0);
	assert_int_equal(co_resume(c), CO_DONE);
	assert_int_equal(co_status(c), -EINVAL);
	c = co_recv_all(&x, 0, &x, (size_t)INT_MAX + 1, 0);
	assert_int_equal(co_resume(c), CO_DONE);
	assert_int_equal(co_status(c), -EINVAL);
	c = co_write_all(&x, 0, &x, SIZE_MAX, 0);
	assert_int_equal(co_resume(c), CO_DONE);
	assert_int_equal(co_status(c), -EINVAL);
}

/* ---- awaits that must not wait on their operation alone -------------------- */

/* A wait that should not be: every 2 s the guard writes to the pipe, which
 * ends it with a count instead of the error the case expects (a failure,
 * not a hang). The case cancels the guard once it is done. */
struct pipe_guard {
	co_frame co;
	co_io io;
	int fd;
};

static int pipe_guard_fn(co_frame *f)
{
	struct pipe_guard *g = (struct pipe_guard *)f;
	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_sleep(&g->io, 2 * CO_S));
		if (co_result(f) != 0)
			break;
		CO_AWAIT(f, co_write(&g->io, g->fd, "hang", 4, (uint64_t)-1));
	}
	CO_END(f);
}

struct nowait {
	co_frame co;
	co_io io, other;
	co_awaiter *a;
	int p[2];
	char buf[8];
	int r[4];
	struct pipe_guard guard;
};

static void nowait_run(struct nowait *w, int (*fn)(co_frame *))
{
	memset(w, 0, sizeof *w);
	assert_int_equal(pipe(w->p), 0);
	co_init(&w->co, fn);
	co_init(&w->guard.co, pipe_guard_fn);
	w->guard.fd = w->p[1];
	co_test_run_frames((co_frame *[]){ &w->co, &w->guard.co }, 2);
	close(w->p[0]);
	close(w->p[1]);
}

/* co_deadline and co_fixed_file given a read of an empty pipe after another
 * prep took an SQE (so the read's is no longer the last): never a wait
 * without the limit. The read is cancelled at once and the await ends with
 * -EINVAL, although nothing would ever end it otherwise; the pipe still
 * works afterwards. */
static int late_fn(co_frame *f)
{
	struct nowait *l = (struct nowait *)f;
	CO_BEGIN(f);
	l->a = co_read(&l->io, l->p[0], l->buf, sizeof l->buf, (uint64_t)-1);
	co_nop(&l->other); /* its CQE is never awaited: no frame to wake */
	CO_AWAIT(f, co_deadline(l->a, CO_S));
	l->r[0] = co_result(f);
	l->a = co_read(&l->io, l->p[0], l->buf, sizeof l->buf, (uint64_t)-1);
	co_nop(&l->other);
	CO_AWAIT(f, co_fixed_file(l->a));
	l->r[1] = co_result(f);
	CO_AWAIT(f, co_write(&l->io, l->p[1], "ok", 2, (uint64_t)-1));
	CO_AWAIT(f, co_read(&l->io, l->p[0], l->buf, sizeof l->buf, (uint64_t)-1));
	l->r[2] = co_result(f);
	co_cancel(&l->guard.co);
	CO_END(f);
}

static void test_late_limit_never_waits(void **state)
{
	struct nowait l;
	(void)state;
	nowait_run(&l, late_fn);
	assert_int_equal(l.r[0], -EINVAL);
	assert_int_equal(l.r[1], -EINVAL);
	assert_int_equal(l.r[2], 2);
}

/* io.md, Rules: an await that comes after its operation completed (a
 * prep, then yields until its CQE is in) ends at once with the result:
 * a read of a pipe with data (the short path's kind), a sleep of 0 and a
 * nop. Without the completion switching the awaiter to the full path,
 * the read's await parks and nothing wakes it (the run: -EDEADLK). */
struct after {
	co_frame co;
	co_io io;
	int p[2], r[3], yields;
	char buf[4];
};

static int after_fn(co_frame *f)
{
	struct after *a = (struct after *)f;
	CO_BEGIN(f);
	co_read(&a->io, a->p[0], a->buf, sizeof a->buf, (uint64_t)-1);
	for (a->yields = 0; a->io.pending != 0 && a->yields < 1000; a->yields++)
		CO_YIELD(f);
	CO_AWAIT(f, &a->io.aw);
	a->r[0] = co_result(f);
	co_sleep(&a->io, 0);
	for (a->yields = 0; a->io.pending != 0 && a->yields < 1000; a->yields++)
		CO_YIELD(f);
	CO_AWAIT(f, &a->io.aw);
	a->r[1] = co_result(f);
	co_nop(&a->io);
	for (a->yields = 0; a->io.pending != 0 && a->yields < 1000; a->yields++)
		CO_YIELD(f);
	CO_AWAIT(f, &a->io.aw);
	a->r[2] = co_result(f);
	CO_END(f);
}

static void test_await_after_completion(void **state)
{
	struct after a;
	(void)state;
	memset(&a, 0, sizeof a);
	assert_int_equal(pipe(a.p), 0);
	assert_int_equal(write(a.p[1], "ok", 2), 2);
	co_init(&a.co, after_fn);
	co_test_run1(&a.co);
	assert_int_equal(a.r[0], 2);
	assert_memory_equal(a.buf, "ok", 2);
	assert_int_equal(a.r[1], 0);
	assert_int_equal(a.r[2], 0);
	close(a.p[0]);
	close(a.p[1]);
}

/* io.h: co_fixed_file applied late ends the await with -EINVAL "even if
 * it completed": its operation went in on the plain descriptor of that
 * number. Applied after a read of a pipe with data has completed (a prep,
 * then yields until its CQE is in; no table is registered), the await
 * ends with -EINVAL, not with the bytes the plain descriptor gave. */
static int fixed_late_fn(co_frame *f)
{
	struct after *a = (struct after *)f;
	CO_BEGIN(f);
	co_read(&a->io, a->p[0], a->buf, sizeof a->buf, (uint64_t)-1);
	for (a->yields = 0; a->io.pending != 0 && a->yields < 1000; a->yields++)
		CO_YIELD(f);
	CO_AWAIT(f, co_fixed_file(&a->io.aw));
	a->r[0] = co_result(f);
	/* a prep that failed keeps its own error (no SQE: -EFAULT) */
	CO_AWAIT(f, co_fixed_file(co_openat(&a->io, AT_FDCWD, NULL, 0, 0)));
	a->r[1] = co_result(f);
	/* right after the prep: the fixed-file flag is taken (no table: -EBADF
	 * or -ENXIO, the kernel's) */
	CO_AWAIT(f, co_fixed_file(co_read(&a->io, 0, a->buf, sizeof a->buf, (uint64_t)-1)));
	a->r[2] = co_result(f);
	CO_END(f);
}

static void test_fixed_file_after_completion(void **state)
{
	struct after a;
	(void)state;
	memset(&a, 0, sizeof a);
	assert_int_equal(pipe(a.p), 0);
	assert_int_equal(write(a.p[1], "ok", 2), 2);
	co_init(&a.co, fixed_late_fn);
	co_test_run1(&a.co);
	assert_true(a.yields < 1000);
	assert_int_equal(a.r[0], -EINVAL);
	assert_int_equal(a.r[1], -EFAULT);
	assert_true(a.r[2] == -EBADF || a.r[2] == -ENXIO);
	close(a.p[0]);
	close(a.p[1]);
}

/* A frame asked to cancel before it awaits an operation that would wait
 * (a read of an empty pipe): the operation is submitted and cancelled at
 * once, the await ends with -ECANCELED; under co_shield it would wait, so
 * the shielded read is given data first. */
static int asked_fn(co_frame *f)
{
	struct nowait *w = (struct nowait *)f;
	CO_BEGIN(f);
	w->r[3] = co_cancel(f);
	CO_AWAIT(f, co_read(&w->io, w->p[0], w->buf, sizeof w->buf, (uint64_t)-1));
	w->r[0] = co_result(f);
	co_shield(f);
	if (write(w->p[1], "ok", 2) != 2)
		w->r[3] = -EIO;
	CO_AWAIT(f, co_read(&w->io, w->p[0], w->buf, sizeof w->buf, (uint64_t)-1));
	w->r[1] = co_result(f);
	co_unshield(f);
	CO_AWAIT(f, co_read(&w->io, w->p[0], w->buf, sizeof w->buf, (uint64_t)-1));
	w->r[2] = co_result(f);
	co_cancel(&w->guard.co);
	CO_END(f);
}

static void test_cancelled_before_await(void **state)
{
	struct nowait w;
	(void)state;
	nowait_run(&w, asked_fn);
	assert_int_equal(w.r[3], 0);
	assert_int_equal(w.r[0], -ECANCELED);
	assert_int_equal(w.r[1], 2);
	assert_int_equal(w.r[2], -ECANCELED);
}

/* ---- lengths past 32 bits, and a write to a pipe with no reader -------------- */

struct big {
	co_frame co;
	co_io io;
	int fd;
	char *buf;
	size_t len;
	int res;
};

static int big_send_fn(co_frame *f)
{
	struct big *b = (struct big *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_send(&b->io, b->fd, b->buf, b->len, MSG_DONTWAIT | MSG_NOSIGNAL));
	b->res = co_result(f);
	CO_END(f);
}

/* 4 GiB + 5 bytes: the request is clamped to CO_IO_MAX, never truncated
 * modulo 2^32 (which made it 5 bytes; 4 GiB made it 0). The socket takes
 * what fits in its buffer: a short count, more than 5. The buffer is a
 * reserved, untouched mapping: only the bytes sent are read. */
static void test_length_past_32_bits(void **state)
{
	size_t len = ((size_t)4 << 30) + 5;
	struct big b = { .len = len, .res = 1 };
	int sv[2];
	(void)state;
	b.buf = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	assert_true(b.buf != MAP_FAILED);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	b.fd = sv[0];
	co_init(&b.co, big_send_fn);
	co_test_run1(&b.co);
	assert_true(b.res > 5);
	assert_true((unsigned)b.res <= CO_IO_MAX);
	b.len = (size_t)4 << 30; /* 4 GiB exactly: was 0 */
	b.res = 1;
	close(sv[1]);
	close(sv[0]);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	b.fd = sv[0];
	co_init(&b.co, big_send_fn);
	co_test_run1(&b.co);
	assert_true(b.res > 5);
	munmap(b.buf, len);
	close(sv[0]);
	close(sv[1]);
}

/* co_read, co_write and co_recv: the same clamp (docs/io.md, on lengths). The
 * buffer is a reserved range of 4 GiB + 5 bytes (PROT_NONE: no memory is
 * committed) whose first MiB alone is read-write: the kernel only touches
 * the bytes the descriptor offers or takes, which lie there. co_read and
 * co_write take an unsigned length (UINT_MAX at most, which the kernel
 * would cap too): what fails there is a length refused or cut to nothing;
 * co_recv's is a size_t, which modulo 2^32 became 5 bytes, or 0. */
enum { BIG_READ, BIG_WRITE, BIG_RECV };

struct bigio {
	co_frame co;
	co_io io;
	int op, fd;
	char *buf;
	size_t len;
	int res;
};

static int bigio_fn(co_frame *f)
{
	struct bigio *b = (struct bigio *)f;
	CO_BEGIN(f);
	if (b->op == BIG_READ)
		CO_AWAIT(f, co_read(&b->io, b->fd, b->buf, (unsigned)b->len, 0));
	else if (b->op == BIG_WRITE)
		CO_AWAIT(f, co_write(&b->io, b->fd, b->buf, (unsigned)b->len, (uint64_t)-1));
	else
		CO_AWAIT(f, co_recv(&b->io, b->fd, b->buf, b->len, MSG_DONTWAIT));
	b->res = co_result(f);
	CO_END(f);
}

static int bigio_run(int op, int fd, char *buf, size_t len)
{
	struct bigio b = { .op = op, .fd = fd, .buf = buf, .len = len, .res = 1 };

	co_init(&b.co, bigio_fn);
	co_test_run1(&b.co);
	return b.res;
}

static void test_length_clamped_read_write_recv(void **state)
{
	const size_t span = ((size_t)4 << 30) + 5, head = (size_t)1 << 20;
	const size_t recv_lens[] = { span, (size_t)4 << 30, SIZE_MAX, (size_t)CO_IO_MAX + 1 };
	const unsigned rw_lens[] = { UINT_MAX, CO_IO_MAX + 1 };
	const char *path = co_test_tmp_path("coring-io", "big");
	int fds = co_test_open_fds(), fd, p[2], sv[2], n;
	char msg[100], *buf;
	(void)state;
	alarm(30); /* each await ends at once; one that waits fails here */
	for (size_t i = 0; i < sizeof msg; i++)
		msg[i] = (char)('a' + i % 26);
	buf = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	assert_true(buf != MAP_FAILED);
	assert_int_equal(mprotect(buf, head, PROT_READ | PROT_WRITE), 0);
	/* co_read: a 10-byte file, then a pipe holding 100 bytes */
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(write(fd, msg, 10), 10);
	assert_int_equal(pipe(p), 0);
	for (size_t i = 0; i < sizeof rw_lens / sizeof rw_lens[0]; i++) {
		memset(buf, 0, sizeof msg);
		assert_int_equal(bigio_run(BIG_READ, fd, buf, rw_lens[i]), 10);
		assert_memory_equal(buf, msg, 10);
		assert_int_equal(write(p[1], msg, sizeof msg), (int)sizeof msg);
		memset(buf, 0, sizeof msg);
		assert_int_equal(bigio_run(BIG_READ, p[0], buf, rw_lens[i]), (int)sizeof msg);
		assert_memory_equal(buf, msg, sizeof msg);
	}
	close(fd);
	/* co_write: into an empty pipe, which takes what fits (its capacity,
	 * well under the head): a short count, and that is what the pipe holds */
	for (size_t i = 0; i < sizeof rw_lens / sizeof rw_lens[0]; i++) {
		int cap = fcntl(p[1], F_GETPIPE_SZ), res;

		assert_true(cap > 0 && (size_t)cap <= head);
		memset(buf, 'w', (size_t)cap);
		res = bigio_run(BIG_WRITE, p[1], buf, rw_lens[i]);
		if (res <= 0 || res > cap)
			fail_msg("co_write of %u bytes into a pipe of %d: %d", rw_lens[i], cap, res);
		assert_int_equal(ioctl(p[0], FIONREAD, &n), 0);
		assert_int_equal(n, res);
		while (n > 0) { /* empty it for the next round */
			int got = (int)read(p[0], msg, sizeof msg);

			assert_true(got > 0);
			n -= got;
		}
	}
	close(p[0]);
	close(p[1]);
	for (size_t i = 0; i < sizeof msg; i++)
		msg[i] = (char)('A' + i % 26);
	/* co_recv: 100 bytes waiting on a socket; each length returns them all */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	for (size_t i = 0; i < sizeof recv_lens / sizeof recv_lens[0]; i++) {
		int res;

		assert_int_equal(write(sv[1], msg, sizeof msg), (int)sizeof msg);
		memset(buf, 0, sizeof msg);
		res = bigio_run(BIG_RECV, sv[0], buf, recv_lens[i]);
		if (res != (int)sizeof msg)
			fail_msg("co_recv of %zu bytes with 100 waiting: %d", recv_lens[i], res);
		assert_memory_equal(buf, msg, sizeof msg);
	}
	close(sv[0]);
	close(sv[1]);
	munmap(buf, span);
	alarm(0);
	assert_int_equal(co_test_open_fds(), fds);
}

struct pipe_writer {
	co_frame co;
	co_io io;
	int fd, res;
};

static int pipe_writer_fn(co_frame *f)
{
	struct pipe_writer *w = (struct pipe_writer *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_write(&w->io, w->fd, "x", 1, (uint64_t)-1));
	w->res = co_result(f);
	CO_END(f);
}

/* What io.md says: like write(2), a write to a pipe whose reader is gone
 * raises SIGPIPE, whose default action ends the process; with SIGPIPE
 * ignored (what servers do) the await's value is -EPIPE. Checked in a
 * child process for each case. */
static int write_to_closed_pipe(int ignore)
{
	struct pipe_writer w = { .res = 1 };
	int p[2], status;
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGPIPE, ignore ? SIG_IGN : SIG_DFL); /* whatever we inherited */
		if (pipe(p) != 0)
			_exit(2);
		close(p[0]);
		w.fd = p[1];
		co_init(&w.co, pipe_writer_fn);
		co_test_run1(&w.co);
		_exit(w.res == -EPIPE ? 0 : 3);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void test_write_to_closed_pipe(void **state)
{
	int st;
	(void)state;
	st = write_to_closed_pipe(0);
	if (!WIFSIGNALED(st))
		fail_msg("default SIGPIPE: child status %#x", st);
	assert_int_equal(WTERMSIG(st), SIGPIPE);
	st = write_to_closed_pipe(1);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- when SQEs go to the kernel: a read as its frame suspends, a socket
 * op at the turn's end, or as opts.submit_batch says ---------------------- */

struct early {
	co_frame co;
	co_io io;
	int p[2];
	int sock;                 /* a recv on p[0] (a socket) instead of a read */
	unsigned waiting;         /* the SQEs the other frame saw waiting */
	struct early *other;      /* NULL: the frame that awaits */
	char buf[8];
};

/* The first frame suspends on a read with a linked timeout; the second,
 * resumed right after it in the same turn, looks at the SQ: empty when the
 * suspend submitted. The read then ends by its deadline (-ETIME): the
 * timeout went out linked to it, not cut off by the early submit. */
static int early_fn(co_frame *f)
{
	struct early *s = (struct early *)f;

	CO_BEGIN(f);
	if (s->other) {
		s->waiting = io_uring_sq_ready(&co_engine_current()->ring);
		CO_RETURN(f, 0);
	}
	if (s->sock)
		CO_AWAIT(f, co_deadline(co_recv(&s->io, s->p[0], s->buf, sizeof s->buf, 0), 20 * CO_MS));
	else
		CO_AWAIT(f, co_deadline(co_read(&s->io, s->p[0], s->buf, sizeof s->buf, 0), 20 * CO_MS));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void submit_batch_case(unsigned batch, int sock, unsigned want_waiting)
{
	co_engine_opts o = { .submit_batch = batch };
	struct early a = { .other = NULL, .sock = sock }, b;
	co_engine e;

	if (sock)
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, a.p), 0);
	else
		assert_int_equal(pipe(a.p), 0);
	b = a;
	b.other = &a;
	assert_int_equal(co_engine_init(&e, &o), 0);
	co_init(&a.co, early_fn);
	co_init(&b.co, early_fn);
	assert_int_equal(co_engine_spawn(&e, &a.co), 0);
	assert_int_equal(co_engine_spawn(&e, &b.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(b.waiting, want_waiting);
	assert_int_equal(co_status(&a.co), -ETIME);
	assert_int_equal(e.inflight, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	close(a.p[0]);
	close(a.p[1]);
}

static void test_submit_batch(void **state)
{
	(void)state;
	submit_batch_case(0, 0, 0); /* the default: a read goes as it suspends, the chain whole */
	submit_batch_case(0, 1, 2); /* the default: a recv and its timeout wait for the turn's end */
	submit_batch_case(1, 1, 0); /* 1: anything goes as the await suspends */
	submit_batch_case(3, 0, 2); /* 3: fewer than 3 waiting, a read too: not yet */
}

/* ---- a deadline ends a send that an io-wq worker blocks in --------------------- */

/* Fill fd's send buffer and its peer's receive buffer (a peer that never
 * reads), then shut fd for reading: on Linux 6.18 the kernel then hands a
 * send on fd to an io-wq worker, where it blocks (poll says there is room,
 * the send finds none), and for a while after its submission it is on no
 * list a cancel searches. */
static void fill_and_shut(int fd)
{
	static char chunk[65536];
	int fl = fcntl(fd, F_GETFL);

	assert_int_equal(fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
	while (send(fd, chunk, sizeof chunk, MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
		;
	assert_int_equal(fcntl(fd, F_SETFL, fl), 0);
	assert_int_equal(shutdown(fd, SHUT_RD), 0);
}

struct limited_send {
	co_frame co;
	co_io io;
	int fd;
	uint64_t ns;
	char buf[1 << 16];
	atomic_int done, res;
};

static int limited_send_fn(co_frame *f)
{
	struct limited_send *l = (struct limited_send *)f;
	CO_BEGIN(f);
	do { /* until a send waits: the kernel may still find room for some */
		CO_AWAIT(f, co_deadline(co_send(&l->io, l->fd, l->buf, sizeof l->buf, MSG_NOSIGNAL),
					l->ns));
	} while (co_result(f) > 0);
	atomic_store(&l->res, co_result(f));
	atomic_store(&l->done, 1);
	CO_END(f);
}

/* A deadline of 0, 1 us or 1 ms on such a send: the timeout fires while
 * the send is between two attempts and its cancel finds nothing
 * (-ENOENT), or finds it on the worker (-EALREADY); the library's own
 * cancel follows, asked until the send ends, and the await ends with
 * -ETIME. A watchdog fails the case if a send has not ended 20 s after it
 * began; no pass waits for any time. */
static void test_deadline_ends_send_in_worker(void **state)
{
	static const uint64_t ns[] = { 0, CO_US, CO_MS };
	(void)state;
	for (unsigned i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		struct limited_send *l = calloc(1, sizeof *l);
		co_test_runner r;
		co_engine e;
		uint64_t deadline;
		int sv[2];

		assert_non_null(l);
		co_test_tcp_pair(sv);
		fill_and_shut(sv[0]);
		l->fd = sv[0];
		l->ns = ns[i];
		atomic_store(&l->res, 1);
		co_init(&l->co, limited_send_fn);
		assert_int_equal(co_engine_init(&e, NULL), 0);
		assert_int_equal(co_engine_spawn(&e, &l->co), 0);
		co_test_runner_start(&r, &e, CO_RUN_UNTIL_IDLE);
		deadline = co_now_ns() + 20 * CO_S;
		while (!atomic_load(&l->done)) {
			if (co_now_ns() > deadline)
				fail_msg("deadline of %llu ns: the send has not ended after 20 s",
					 (unsigned long long)ns[i]);
			usleep(1000);
		}
		assert_int_equal(co_test_runner_join(&r), 0);
		if (atomic_load(&l->res) != -ETIME)
			fail_msg("deadline of %llu ns: %d", (unsigned long long)ns[i], atomic_load(&l->res));
		assert_int_equal(e.inflight, 0);
		assert_int_equal(co_engine_destroy(&e), 0);
		close(sv[0]);
		close(sv[1]);
		free(l);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pipe_ops),
		cmocka_unit_test(test_await_after_completion),
		cmocka_unit_test(test_fixed_file_after_completion),
		cmocka_unit_test(test_file_ops),
		cmocka_unit_test(test_socketpair_ops),
		cmocka_unit_test(test_sleep_and_deadline),
		cmocka_unit_test(test_cancel_pending_recv),
		cmocka_unit_test(test_cancel_race_many),
		cmocka_unit_test(test_deadline_cancel_completion_race),
		cmocka_unit_test(test_no_engine),
		cmocka_unit_test(test_null_arguments),
		cmocka_unit_test(test_late_limit_never_waits),
		cmocka_unit_test(test_cancelled_before_await),
		cmocka_unit_test(test_length_past_32_bits),
		cmocka_unit_test(test_length_clamped_read_write_recv),
		cmocka_unit_test(test_write_to_closed_pipe),
		cmocka_unit_test(test_submit_batch),
		cmocka_unit_test(test_deadline_ends_send_in_worker),
	};
	signal(SIGPIPE, SIG_IGN);
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 1);
}
