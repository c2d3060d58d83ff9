/* SPDX-License-Identifier: MIT */
/*
 * The operations beyond read/write/send/recv: paths, file space, pipes
 * (splice, tee), sockets (socket, shutdown, zero-copy send), UDP
 * (sendto/recvfrom), any SQE (co_sqe), clocks and the periodic timer, and
 * what an operation the kernel lacks answers (-EOPNOTSUPP).
 */
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
#include <signal.h>
#include <stdatomic.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <cmocka.h>

#include <coring/io.h>
#include <coring/pool.h>
#include <coring/scheduler.h>
#include <coring/timeout.h>
#include "helpers.h"

struct ops {
	co_frame co;
	co_io io;
	co_msg msg;
	co_period tick, zero;
	co_limit lim;
	char dir[320], a[330], b[330], c[330];
	char buf[256];
	int fd, p[2], q[2], s[2];
	int r[16];
	uint64_t t[8];
	struct sockaddr_in from;
	siginfo_t info, child;
	co_engine *e;
	void *map;
};

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- paths -------------------------------------------------------------- */

static int paths_fn(co_frame *f)
{
	struct ops *o = (struct ops *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_mkdirat(&o->io, AT_FDCWD, o->dir, 0700));
	o->r[0] = co_result(f);
	CO_AWAIT(f, co_mkdirat(&o->io, AT_FDCWD, o->dir, 0700)); /* again */
	o->r[1] = co_result(f);
	o->fd = open(o->a, O_CREAT | O_WRONLY, 0600);
	close(o->fd);
	CO_AWAIT(f, co_linkat(&o->io, AT_FDCWD, o->a, AT_FDCWD, o->b, 0));
	o->r[2] = co_result(f);
	CO_AWAIT(f, co_symlinkat(&o->io, o->a, AT_FDCWD, o->c));
	o->r[3] = co_result(f);
	CO_AWAIT(f, co_unlinkat(&o->io, AT_FDCWD, o->b, 0));
	o->r[4] = co_result(f);
	CO_AWAIT(f, co_renameat(&o->io, AT_FDCWD, o->a, AT_FDCWD, o->b, 0));
	o->r[5] = co_result(f);
	CO_AWAIT(f, co_unlinkat(&o->io, AT_FDCWD, o->a, 0)); /* renamed away */
	o->r[6] = co_result(f);
	CO_AWAIT(f, co_unlinkat(&o->io, AT_FDCWD, o->b, 0));
	o->r[7] = co_result(f);
	CO_AWAIT(f, co_unlinkat(&o->io, AT_FDCWD, o->c, 0));
	o->r[8] = co_result(f);
	CO_AWAIT(f, co_unlinkat(&o->io, AT_FDCWD, o->dir, AT_REMOVEDIR));
	o->r[9] = co_result(f);
	CO_AWAIT(f, co_mkdirat(&o->io, AT_FDCWD, NULL, 0700));
	o->r[10] = co_result(f);
	CO_AWAIT(f, co_renameat(&o->io, AT_FDCWD, o->a, AT_FDCWD, NULL, 0));
	o->r[11] = co_result(f);
	CO_END(f);
}

static void test_path_ops(void **state)
{
	struct ops o;
	struct stat st;
	(void)state;
	memset(&o, 0, sizeof o);
	snprintf(o.dir, sizeof o.dir, "%s", co_test_tmp_path("coring-ops", "dir"));
	snprintf(o.a, sizeof o.a, "%s/a", o.dir);
	snprintf(o.b, sizeof o.b, "%s/b", o.dir);
	snprintf(o.c, sizeof o.c, "%s/c", o.dir);
	co_init(&o.co, paths_fn);
	co_test_run1(&o.co);
	assert_int_equal(o.r[0], 0);
	assert_int_equal(o.r[1], -EEXIST);
	assert_int_equal(o.r[2], 0);
	assert_int_equal(o.r[3], 0);
	assert_int_equal(o.r[4], 0);
	assert_int_equal(o.r[5], 0);
	assert_int_equal(o.r[6], -ENOENT);
	assert_int_equal(o.r[7], 0);
	assert_int_equal(o.r[8], 0);
	assert_int_equal(o.r[9], 0);
	assert_int_equal(o.r[10], -EFAULT);
	assert_int_equal(o.r[11], -EFAULT);
	assert_int_equal(stat(o.dir, &st), -1); /* all gone again */
}

/* ---- file space, pipes -------------------------------------------------- */

static int space_fn(co_frame *f)
{
	struct ops *o = (struct ops *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_fallocate(&o->io, o->fd, 0, 0, 8192));
	o->r[0] = co_result(f);
	CO_AWAIT(f, co_fadvise(&o->io, o->fd, 0, 8192, POSIX_FADV_SEQUENTIAL));
	o->r[1] = co_result(f);
	CO_AWAIT(f, co_madvise(&o->io, o->map, 4096, MADV_WILLNEED));
	o->r[2] = co_result(f);
	CO_AWAIT(f, co_fallocate(&o->io, o->fd, 0, (uint64_t)1 << 63, 1));
	o->r[3] = co_result(f);
	/* file -> pipe -> (tee: a copy into a second pipe) -> file */
	CO_AWAIT(f, co_write(&o->io, o->fd, "spliced!", 8, 0));
	o->r[4] = co_result(f);
	CO_AWAIT(f, co_splice(&o->io, o->fd, 0, o->p[1], -1, 8, 0));
	o->r[5] = co_result(f);
	CO_AWAIT(f, co_tee(&o->io, o->p[0], o->q[1], 8, 0));
	o->r[6] = co_result(f);
	CO_AWAIT(f, co_splice(&o->io, o->p[0], -1, o->fd, 100, 8, 0));
	o->r[7] = co_result(f);
	CO_AWAIT(f, co_read(&o->io, o->q[0], o->buf, sizeof o->buf, (uint64_t)-1));
	o->r[8] = co_result(f);
	CO_END(f);
}

static void test_file_space_and_pipe_ops(void **state)
{
	struct ops o;
	struct stat st;
	char back[8];
	(void)state;
	memset(&o, 0, sizeof o);
	snprintf(o.a, sizeof o.a, "%s", co_test_tmp_path("coring-ops", "space"));
	o.fd = open(o.a, O_CREAT | O_RDWR | O_TRUNC, 0600);
	assert_true(o.fd >= 0);
	assert_int_equal(pipe(o.p), 0);
	assert_int_equal(pipe(o.q), 0);
	o.map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(o.map != MAP_FAILED);
	co_init(&o.co, space_fn);
	co_test_run1(&o.co);
	assert_int_equal(o.r[0], 0);
	assert_int_equal(fstat(o.fd, &st), 0);
	assert_true(st.st_size >= 8192);
	assert_int_equal(o.r[1], 0);
	assert_int_equal(o.r[2], 0);
	assert_int_equal(o.r[3], -EINVAL); /* beyond off_t: refused before the kernel */
	assert_int_equal(o.r[4], 8);
	assert_int_equal(o.r[5], 8);
	assert_int_equal(o.r[6], 8);
	assert_int_equal(o.r[7], 8);
	assert_int_equal(o.r[8], 8);
	assert_memory_equal(o.buf, "spliced!", 8);
	assert_int_equal(pread(o.fd, back, 8, 100), 8);
	assert_memory_equal(back, "spliced!", 8);
	munmap(o.map, 4096);
	close(o.p[0]);
	close(o.p[1]);
	close(o.q[0]);
	close(o.q[1]);
	close(o.fd);
	unlink(o.a);
}

/* ---- sockets ------------------------------------------------------------- */

static int sock_fn(co_frame *f)
{
	struct ops *o = (struct ops *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_socket(&o->io, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
	o->fd = co_result(f);
	CO_AWAIT(f, co_socket(&o->io, 12345, SOCK_STREAM, 0)); /* no such family */
	o->r[0] = co_result(f);
	/* zero-copy: the await ends once buf is free again */
	memset(o->buf, 'z', sizeof o->buf);
	CO_AWAIT(f, co_send_zc(&o->io, o->s[0], o->buf, sizeof o->buf, MSG_NOSIGNAL));
	o->r[1] = co_result(f);
	memset(o->buf, 0, sizeof o->buf);
	CO_AWAIT(f, co_recv(&o->io, o->s[1], o->buf, sizeof o->buf, MSG_WAITALL));
	o->r[2] = co_result(f);
	CO_AWAIT(f, co_shutdown(&o->io, o->s[0], SHUT_WR));
	o->r[3] = co_result(f);
	CO_AWAIT(f, co_recv(&o->io, o->s[1], o->buf, sizeof o->buf, 0)); /* EOF */
	o->r[4] = co_result(f);
	CO_AWAIT(f, co_shutdown(&o->io, o->p[0], SHUT_RDWR)); /* not a socket */
	o->r[5] = co_result(f);
	CO_END(f);
}

/* A zero-copy send's await ends once the kernel no longer needs the
 * buffer, whatever its limit: on loopback the kernel keeps the pages until
 * the peer has read them, so a 1 MiB send under a 20 ms limit to a peer
 * that reads only after 100 ms ends after that read, and the bytes the
 * frame writes into the buffer at once after the await are not the ones
 * the peer reads. (An await that ended at the send's first CQE, before
 * the buffer was free, let the peer read those.) */
enum { ZC_LEN = 1 << 20 };

struct zc_send {
	co_frame co;
	co_io io;
	co_limit lim;
	int fd, res;
	char *buf;
};

static int zc_send_fn(co_frame *f)
{
	struct zc_send *z = (struct zc_send *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_timeout(&z->lim, co_send_zc(&z->io, z->fd, z->buf, ZC_LEN, MSG_NOSIGNAL),
			       20 * CO_MS));
	z->res = co_result(f);
	memset(z->buf, 'X', ZC_LEN); /* the buffer is the frame's again */
	shutdown(z->fd, SHUT_WR);
	CO_END(f);
}

struct zc_peer {
	int fd;
	long got, bad;
};

static void *zc_peer_fn(void *arg)
{
	struct zc_peer *p = arg;
	char b[65536];
	ssize_t n;

	usleep(100 * 1000); /* the send's limit has run out by now */
	while ((n = read(p->fd, b, sizeof b)) > 0) {
		p->got += n;
		for (ssize_t i = 0; i < n; i++)
			p->bad += b[i] != 'z';
	}
	return NULL;
}

static void test_send_zc_buffer_free_at_end(void **state)
{
	struct zc_send z = { .res = 1 };
	struct zc_peer peer = { 0 };
	pthread_t t;
	int sv[2];
	(void)state;
	alarm(20); /* a send that never ends: fail, not hang */
	co_test_tcp_pair(sv);
	z.fd = sv[0];
	z.buf = malloc(ZC_LEN);
	assert_non_null(z.buf);
	memset(z.buf, 'z', ZC_LEN);
	peer.fd = sv[1];
	assert_int_equal(pthread_create(&t, NULL, zc_peer_fn, &peer), 0);
	co_init(&z.co, zc_send_fn);
	co_test_run1(&z.co);
	assert_int_equal(pthread_join(t, NULL), 0);
	if (z.res == -EOPNOTSUPP) /* a kernel without it */
		goto out;
	assert_true(z.res > 0); /* sent, not -ETIME: the result is kept */
	{ /* a socket that cannot send without copying: -EOPNOTSUPP */
		struct zc_send u = { .res = 1, .buf = z.buf };
		int us[2];

		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, us), 0);
		u.fd = us[0];
		co_init(&u.co, zc_send_fn);
		co_test_run1(&u.co);
		assert_int_equal(u.res, -EOPNOTSUPP);
		close(us[0]);
		close(us[1]);
	}
	assert_int_equal(peer.got, z.res);
	assert_int_equal(peer.bad, 0);
out:
	free(z.buf);
	close(sv[0]);
	close(sv[1]);
	alarm(0);
}

/* A cancel stop cannot end a zero-copy send whose buffer the kernel
 * keeps: on loopback, until the peer has read the bytes. The stop (its
 * grace 1 ms) comes as the send's first CQE is in; the peer reads after
 * 100 ms; the run returns only once it has begun to read. (An await that
 * ended at the first CQE let the stop end at once.) */
struct zc_plain {
	co_frame co;
	co_io io;
	int fd;
	char *buf;
};

static int zc_plain_fn(co_frame *f)
{
	struct zc_plain *z = (struct zc_plain *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_send_zc(&z->io, z->fd, z->buf, ZC_LEN, MSG_NOSIGNAL));
	memset(z->buf, 'X', ZC_LEN);
	CO_END(f);
}

struct zc_stopper {
	co_frame co;
	co_io io;
};

static int zc_stopper_fn(co_frame *f)
{
	struct zc_stopper *s = (struct zc_stopper *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&s->io)); /* the send went with it */
	co_engine_stop(co_engine_current(), CO_STOP_CANCEL);
	CO_END(f);
}

struct zc_reader {
	int fd;
	long got, bad;
	atomic_int reading;
};

static void *zc_reader_fn(void *arg)
{
	struct zc_reader *p = arg;
	char b[65536];
	ssize_t n;

	usleep(100 * 1000);
	atomic_store(&p->reading, 1);
	while ((n = read(p->fd, b, sizeof b)) > 0) {
		p->got += n;
		for (ssize_t i = 0; i < n; i++)
			p->bad += b[i] != 'z';
	}
	return NULL;
}

static void test_send_zc_stop_waits_for_buffer(void **state)
{
	co_engine e;
	co_engine_opts o = { .cancel_grace_ns = CO_MS };
	struct zc_plain z;
	struct zc_stopper st;
	struct zc_reader peer = { 0 };
	pthread_t t;
	int sv[2], ran;
	(void)state;
	alarm(20); /* a stop that never ends: fail, not hang */
	co_test_tcp_pair(sv);
	memset(&z, 0, sizeof z);
	z.fd = sv[0];
	z.buf = malloc(ZC_LEN);
	assert_non_null(z.buf);
	memset(z.buf, 'z', ZC_LEN);
	peer.fd = sv[1];
	assert_int_equal(co_engine_init(&e, &o), 0);
	if (!co_engine_supports(&e, IORING_OP_SEND_ZC))
		goto out; /* a kernel without it */
	co_init(&z.co, zc_plain_fn);
	co_init(&st.co, zc_stopper_fn);
	assert_int_equal(co_engine_spawn(&e, &z.co), 0);
	assert_int_equal(co_engine_spawn(&e, &st.co), 0);
	assert_int_equal(pthread_create(&t, NULL, zc_reader_fn, &peer), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_STOP), 0);
	ran = atomic_load(&peer.reading);
	shutdown(sv[0], SHUT_WR); /* the peer's end of file */
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(ran, 1);
	assert_true(co_done(&z.co));
	assert_true(peer.got > 0);
	assert_int_equal(peer.bad, 0);
out:
	assert_int_equal(co_engine_destroy(&e), 0);
	free(z.buf);
	close(sv[0]);
	close(sv[1]);
	alarm(0);
}

static void test_socket_ops(void **state)
{
	struct ops o;
	uint16_t port;
	int lfd;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	(void)state;
	memset(&o, 0, sizeof o);
	lfd = co_test_listen(&port);
	assert_true(lfd >= 0);
	sa.sin_port = htons(port);
	o.s[0] = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(o.s[0], (struct sockaddr *)&sa, sizeof sa), 0);
	o.s[1] = accept(lfd, NULL, NULL);
	assert_true(o.s[1] >= 0);
	assert_int_equal(pipe(o.p), 0);
	co_init(&o.co, sock_fn);
	co_test_run1(&o.co);
	assert_true(o.fd >= 0);
	assert_true(fcntl(o.fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(o.r[0], -EAFNOSUPPORT);
	assert_int_equal(o.r[1], (int)sizeof o.buf);
	assert_int_equal(o.r[2], (int)sizeof o.buf);
	for (size_t i = 0; i < sizeof o.buf; i++)
		assert_int_equal(o.buf[i], 'z');
	assert_int_equal(o.r[3], 0);
	assert_int_equal(o.r[4], 0);
	assert_int_equal(o.r[5], -ENOTSOCK);
	close(o.fd);
	close(o.s[0]);
	close(o.s[1]);
	close(o.p[0]);
	close(o.p[1]);
	close(lfd);
}

static int udp_fn(co_frame *f)
{
	struct ops *o = (struct ops *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sendto(&o->msg, o->s[0], "datagram", 8, 0, (struct sockaddr *)&o->from,
			      sizeof o->from));
	o->r[0] = co_result(f);
	memset(&o->from, 0, sizeof o->from);
	CO_AWAIT(f, co_recvfrom(&o->msg, o->s[1], o->buf, sizeof o->buf, 0,
				(struct sockaddr *)&o->from, sizeof o->from));
	o->r[1] = co_result(f);
	o->r[2] = (int)o->msg.msg.msg_namelen;
	CO_END(f);
}

static void test_udp_sendto_recvfrom(void **state)
{
	struct ops o;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in b = a;
	socklen_t len = sizeof a;
	(void)state;
	memset(&o, 0, sizeof o);
	o.s[0] = socket(AF_INET, SOCK_DGRAM, 0);
	o.s[1] = socket(AF_INET, SOCK_DGRAM, 0);
	assert_int_equal(bind(o.s[0], (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(bind(o.s[1], (struct sockaddr *)&b, sizeof b), 0);
	assert_int_equal(getsockname(o.s[0], (struct sockaddr *)&a, &len), 0);
	assert_int_equal(getsockname(o.s[1], (struct sockaddr *)&b, &len), 0);
	o.from = b; /* where to send */
	co_init(&o.co, udp_fn);
	co_test_run1(&o.co);
	assert_int_equal(o.r[0], 8);
	assert_int_equal(o.r[1], 8);
	assert_memory_equal(o.buf, "datagram", 8);
	assert_int_equal(o.r[2], (int)sizeof(struct sockaddr_in));
	assert_int_equal(o.from.sin_port, a.sin_port); /* the sender's address */
	assert_null(co_sendto(NULL, 0, "x", 1, 0, NULL, 0));
	assert_null(co_recvfrom(NULL, 0, o.buf, 1, 0, NULL, 0));
	close(o.s[0]);
	close(o.s[1]);
}

/* ---- any SQE ------------------------------------------------------------- */

static void prep_nop(struct io_uring_sqe *sqe, void *arg)
{
	(void)arg;
	io_uring_prep_nop(sqe);
	sqe->user_data = 0xdead; /* a careless prep: the library restores its own */
	sqe->flags |= IOSQE_IO_LINK;
}

static void prep_read(struct io_uring_sqe *sqe, void *arg)
{
	struct ops *o = arg;
	io_uring_prep_read(sqe, o->p[0], o->buf, sizeof o->buf, (uint64_t)-1);
}

static void prep_poll_in(struct io_uring_sqe *sqe, void *arg)
{
	struct ops *o = arg;
	io_uring_prep_poll_add(sqe, o->q[0], POLLIN);
}

static int sqe_fn(co_frame *f)
{
	struct ops *o = (struct ops *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sqe(&o->io, prep_nop, NULL));
	o->r[0] = co_result(f);
	CO_AWAIT(f, co_sqe(&o->io, prep_read, o));
	o->r[1] = co_result(f);
	/* deadlines and time limits apply: a poll that never fires */
	CO_AWAIT(f, co_deadline(co_sqe(&o->io, prep_poll_in, o), 2 * CO_MS));
	o->r[2] = co_result(f);
	CO_AWAIT(f, co_timeout(&o->lim, co_sqe(&o->io, prep_poll_in, o), 2 * CO_MS));
	o->r[3] = co_result(f);
	CO_AWAIT(f, co_sqe(&o->io, NULL, NULL));
	o->r[4] = co_result(f);
	CO_END(f);
}

static void test_any_sqe(void **state)
{
	struct ops o;
	(void)state;
	memset(&o, 0, sizeof o);
	assert_int_equal(pipe(o.p), 0);
	assert_int_equal(pipe(o.q), 0);
	assert_int_equal(write(o.p[1], "raw", 3), 3);
	co_init(&o.co, sqe_fn);
	co_test_run1(&o.co);
	assert_int_equal(o.r[0], 0);
	assert_int_equal(o.r[1], 3);
	assert_memory_equal(o.buf, "raw", 3);
	assert_int_equal(o.r[2], -ETIME);
	assert_int_equal(o.r[3], -ETIME);
	assert_int_equal(o.r[4], -EINVAL);
	assert_null(co_sqe(NULL, prep_nop, NULL));
	close(o.p[0]);
	close(o.p[1]);
	close(o.q[0]);
	close(o.q[1]);
}

/* io.md, "Operations" (any SQE): the prep may fill the SQE by hand, field
 * by field. It is handed a clean SQE (every byte 0 but the library's user_data), not
 * what the slot's last operation left: a send with MSG_NOSIGNAL leaves its
 * flags in the union a nop reads as its own flags, which the kernel
 * refuses (-EINVAL). An engine of 4 SQ slots, two sends and then a nop
 * whose prep sets only the opcode, 16 times: every slot comes round again,
 * and each nop's slot was a send's. Without the clean SQE, 15 nops end
 * with -EINVAL. */
struct by_hand {
	co_frame co;
	co_io io;
	int sv[2], i, dirty, r[16];
	char c;
};

static void prep_nop_by_hand(struct io_uring_sqe *sqe, void *arg)
{
	struct by_hand *h = arg;
	struct io_uring_sqe clean;

	memset(&clean, 0, sizeof clean);
	clean.user_data = sqe->user_data;
	if (memcmp(sqe, &clean, sizeof clean) != 0)
		h->dirty++;
	sqe->opcode = IORING_OP_NOP;
}

static int by_hand_fn(co_frame *f)
{
	struct by_hand *h = (struct by_hand *)f;
	CO_BEGIN(f);
	for (h->i = 0; h->i < 16; h->i++) {
		CO_AWAIT(f, co_send(&h->io, h->sv[0], "x", 1, MSG_NOSIGNAL));
		CO_AWAIT(f, co_send(&h->io, h->sv[0], "y", 1, MSG_NOSIGNAL));
		CO_AWAIT(f, co_sqe(&h->io, prep_nop_by_hand, h));
		h->r[h->i] = co_result(f);
	}
	CO_END(f);
}

static void test_any_sqe_by_hand(void **state)
{
	co_engine e;
	co_engine_opts opts = { 0 };
	struct by_hand h;
	(void)state;
	memset(&h, 0, sizeof h);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, h.sv), 0);
	opts.sq_entries = 4;
	assert_int_equal(co_engine_init(&e, &opts), 0);
	co_init(&h.co, by_hand_fn);
	assert_int_equal(co_engine_spawn(&e, &h.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(h.i, 16);
	for (int i = 0; i < 16; i++)
		assert_int_equal(h.r[i], 0);
	assert_int_equal(h.dirty, 0);
	close(h.sv[0]);
	close(h.sv[1]);
}

/* io.md, "Operations" (any SQE): the library keeps the SQE's user_data and
 * link flags for itself, a prep that sets them corrected. A nop's prep
 * sets IOSQE_IO_HARDLINK and IOSQE_CQE_SKIP_SUCCESS: the SQE queued has
 * neither (a skipped success would post no CQE, and the await would wait
 * for good: the test takes them off itself, noting it, so that it fails
 * rather than hangs) and the await ends with 0. */
struct sqe_flags {
	co_frame co;
	co_io io;
	co_awaiter *a;
	int kept, r;
};

static void prep_nop_flags(struct io_uring_sqe *sqe, void *arg)
{
	(void)arg;
	io_uring_prep_nop(sqe);
	sqe->flags |= IOSQE_IO_HARDLINK | IOSQE_CQE_SKIP_SUCCESS;
}

static int sqe_flags_fn(co_frame *f)
{
	struct sqe_flags *t = (struct sqe_flags *)f;
	struct io_uring_sqe *sqe;
	CO_BEGIN(f);
	t->a = co_sqe(&t->io, prep_nop_flags, NULL);
	sqe = co_engine_last_sqe(co_engine_current(), &t->io.info);
	t->kept = sqe ? (int)(sqe->flags & (IOSQE_IO_HARDLINK | IOSQE_CQE_SKIP_SUCCESS)) : -1;
	if (sqe)
		sqe->flags &= (uint8_t) ~(IOSQE_IO_HARDLINK | IOSQE_CQE_SKIP_SUCCESS);
	CO_AWAIT(f, t->a);
	t->r = co_result(f);
	CO_END(f);
}

static void test_any_sqe_flags_corrected(void **state)
{
	struct sqe_flags t;
	(void)state;
	memset(&t, 0, sizeof t);
	t.r = 1;
	co_init(&t.co, sqe_flags_fn);
	co_test_run1(&t.co);
	assert_int_equal(t.kept, 0);
	assert_int_equal(t.r, 0);
}

/* io.md's errors "before the kernel": the await ends with the error and
 * no SQE was taken (the engine's count of operations does not move). The
 * kernel would refuse most of them with the same errno, so only the count
 * tells that the library did: fallocate's offset and length past off_t,
 * ftruncate's length past INT64_MAX, a NULL info for waitid, NULL paths. */
struct before_kernel {
	co_frame co;
	co_io io;
	siginfo_t info;
	struct statx stx;
	int r[9];
	uint64_t moved;
};

static int before_kernel_fn(co_frame *f)
{
	struct before_kernel *b = (struct before_kernel *)f;
	CO_BEGIN(f);
	b->moved = co_engine_current()->stats.ops;
	CO_AWAIT(f, co_fallocate(&b->io, 0, 0, (uint64_t)1 << 63, 1));
	b->r[0] = co_result(f);
	CO_AWAIT(f, co_fallocate(&b->io, 0, 0, 0, (uint64_t)1 << 63));
	b->r[1] = co_result(f);
	CO_AWAIT(f, co_ftruncate(&b->io, 0, (uint64_t)1 << 63));
	b->r[2] = co_result(f);
	CO_AWAIT(f, co_waitid(&b->io, P_ALL, 0, NULL, WEXITED));
	b->r[3] = co_result(f);
	CO_AWAIT(f, co_openat(&b->io, AT_FDCWD, NULL, 0, 0));
	b->r[4] = co_result(f);
	CO_AWAIT(f, co_statx(&b->io, AT_FDCWD, "/", 0, STATX_SIZE, NULL));
	b->r[5] = co_result(f);
	CO_AWAIT(f, co_unlinkat(&b->io, AT_FDCWD, NULL, 0));
	b->r[6] = co_result(f);
	CO_AWAIT(f, co_linkat(&b->io, AT_FDCWD, "/", AT_FDCWD, NULL, 0));
	b->r[7] = co_result(f);
	CO_AWAIT(f, co_symlinkat(&b->io, NULL, AT_FDCWD, "/"));
	b->r[8] = co_result(f);
	b->moved = co_engine_current()->stats.ops - b->moved;
	CO_END(f);
}

static void test_errors_before_the_kernel(void **state)
{
	struct before_kernel b;
	(void)state;
	memset(&b, 0, sizeof b);
	co_init(&b.co, before_kernel_fn);
	co_test_run1(&b.co);
	assert_int_equal(b.r[0], -EINVAL);
	assert_int_equal(b.r[1], -EINVAL);
	assert_int_equal(b.r[2], -EINVAL);
	assert_int_equal(b.r[3], -EFAULT);
	for (int i = 4; i < 9; i++)
		assert_int_equal(b.r[i], -EFAULT);
	assert_int_equal(b.moved, 0);
}

/* IOSQE_IO_DRAIN would wait for every operation submitted before it on the
 * engine's ring, its own wake-up read included, which is always in
 * flight: it is refused (-EINVAL, the SQE runs as a nop), so that no
 * await is left that neither a limit nor a cancel could end. */
static void prep_drain(struct io_uring_sqe *sqe, void *arg)
{
	struct ops *o = arg;
	io_uring_prep_read(sqe, o->p[0], o->buf, sizeof o->buf, (uint64_t)-1);
	sqe->flags |= IOSQE_IO_DRAIN;
}

static int drain_fn(co_frame *f)
{
	struct ops *o = (struct ops *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sqe(&o->io, prep_drain, o));
	o->r[0] = co_result(f);
	CO_AWAIT(f, co_timeout(&o->lim, co_sqe(&o->io, prep_drain, o), 2 * CO_MS));
	o->r[1] = co_result(f);
	CO_AWAIT(f, co_deadline(co_sqe(&o->io, prep_drain, o), 2 * CO_MS));
	o->r[2] = co_result(f);
	CO_AWAIT(f, co_sqe(&o->io, prep_read, o)); /* the same read, without the drain */
	o->r[3] = co_result(f);
	CO_END(f);
}

static void test_sqe_drain_refused(void **state)
{
	struct ops o;
	(void)state;
	memset(&o, 0, sizeof o);
	assert_int_equal(pipe(o.p), 0);
	assert_int_equal(write(o.p[1], "raw", 3), 3);
	co_init(&o.co, drain_fn);
	co_test_run1(&o.co);
	assert_int_equal(o.r[0], -EINVAL);
	assert_int_equal(o.r[1], -EINVAL);
	assert_int_equal(o.r[2], -EINVAL);
	assert_int_equal(o.r[3], 3); /* the refused reads read nothing */
	close(o.p[0]);
	close(o.p[1]);
}

/* An operation the kernel lacks: the engine's probe says so, and both a
 * helper and co_sqe end with -EOPNOTSUPP, queueing nothing. Simulated by
 * clearing the opcodes in the probe's result. */
static int unsupported_fn(co_frame *f)
{
	struct ops *o = (struct ops *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_socket(&o->io, AF_INET, SOCK_STREAM, 0));
	o->r[0] = co_result(f);
	CO_AWAIT(f, co_sqe(&o->io, prep_nop, NULL));
	o->r[1] = co_result(f);
	CO_AWAIT(f, co_deadline(co_mkdirat(&o->io, AT_FDCWD, o->a, 0700), CO_MS));
	o->r[2] = co_result(f);
	CO_END(f);
}

static void test_operation_the_kernel_lacks(void **state)
{
	co_engine e;
	struct ops o;
	struct stat st;
	(void)state;
	memset(&o, 0, sizeof o);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_true(co_engine_supports(&e, IORING_OP_NOP));
	assert_true(co_engine_supports(&e, IORING_OP_SOCKET)); /* kernel >= 5.19 */
	assert_false(co_engine_supports(&e, 255));
	assert_false(co_engine_supports(NULL, IORING_OP_NOP));
	e.ops[IORING_OP_SOCKET / 64] &= ~(1ull << (IORING_OP_SOCKET % 64));
	e.ops[IORING_OP_NOP / 64] &= ~(1ull << (IORING_OP_NOP % 64));
	e.ops[IORING_OP_MKDIRAT / 64] &= ~(1ull << (IORING_OP_MKDIRAT % 64));
	snprintf(o.a, sizeof o.a, "%s", co_test_tmp_path("coring-ops", "never"));
	co_init(&o.co, unsupported_fn);
	assert_int_equal(co_engine_spawn(&e, &o.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(o.r[0], -EOPNOTSUPP);
	assert_int_equal(o.r[1], -EOPNOTSUPP);
	assert_int_equal(o.r[2], -EOPNOTSUPP);
	assert_int_equal(stat(o.a, &st), -1);
	assert_int_equal(co_engine_destroy(&e), 0);
}

/* ---- clocks and the periodic timer ----------------------------------------- */

static int clocks_fn(co_frame *f)
{
	struct ops *o = (struct ops *)f;
	CO_BEGIN(f);
	o->t[0] = clock_ns(CLOCK_REALTIME) + 3 * CO_MS;
	CO_AWAIT(f, co_sleep_until_clock(&o->io, CLOCK_REALTIME, o->t[0]));
	o->r[0] = co_result(f);
	o->t[1] = clock_ns(CLOCK_REALTIME);
	o->t[2] = clock_ns(CLOCK_BOOTTIME) + 3 * CO_MS;
	CO_AWAIT(f, co_sleep_until_clock(&o->io, CLOCK_BOOTTIME, o->t[2]));
	o->r[1] = co_result(f);
	o->t[3] = clock_ns(CLOCK_BOOTTIME);
	CO_AWAIT(f, co_sleep_until_clock(&o->io, CLOCK_PROCESS_CPUTIME_ID, 0));
	o->r[2] = co_result(f);
	/* four ticks of 2 ms, each no earlier than its multiple of the period */
	co_period_init(&o->tick, 2 * CO_MS);
	o->t[4] = o->tick.next - 2 * CO_MS; /* the start */
	for (o->r[3] = 0; o->r[3] < 4; o->r[3]++) {
		CO_AWAIT(f, co_period_wait(&o->tick));
		o->r[4] |= co_result(f);
		if (co_now_ns() < o->t[4] + (uint64_t)(o->r[3] + 1) * 2 * CO_MS)
			o->r[5]++; /* early: must never happen */
	}
	/* hold the engine for three periods: the next wait skips them */
	o->t[5] = co_now_ns();
	while (co_now_ns() < o->t[5] + 7 * CO_MS)
		;
	CO_AWAIT(f, co_period_wait(&o->tick));
	o->r[6] = co_result(f);
	co_period_init(&o->zero, 0);
	CO_AWAIT(f, co_period_wait(&o->zero));
	o->r[7] = co_result(f);
	CO_END(f);
}

static void test_clocks_and_period(void **state)
{
	struct ops o;
	(void)state;
	memset(&o, 0, sizeof o);
	co_init(&o.co, clocks_fn);
	co_test_run1(&o.co);
	assert_int_equal(o.r[0], 0);
	assert_true(o.t[1] >= o.t[0]);
	assert_int_equal(o.r[1], 0);
	assert_true(o.t[3] >= o.t[2]);
	assert_int_equal(o.r[2], -EINVAL);
	assert_int_equal(o.r[4], 0);
	assert_int_equal(o.r[5], 0);
	assert_int_equal(o.r[6], 0);
	assert_true(o.tick.missed >= 3); /* 10, 12 and 14 ms after the start */
	assert_int_equal(o.r[7], -EINVAL); /* a zero period */
	assert_null(co_period_wait(NULL));
	co_period_init(NULL, 1); /* ignored, no crash */
}

/* A stall: with a 10 ms period, two waits, then the engine's thread held
 * until 85 ms after the start. The third wait sleeps until the next
 * multiple (90 ms at the earliest), and counts the ticks that went by (30
 * to 80: missed is their number). Checked on the grid of ticks, T0 + k P,
 * T0 read between t[0] and t[1]: the wait ends at tick K = 3 + missed, K
 * was still to come when it was called, and it had come when it ended. */
#define PERIOD (10 * CO_MS)

static int stall_fn(co_frame *f)
{
	struct ops *o = (struct ops *)f;
	CO_BEGIN(f);
	o->t[0] = co_now_ns();
	co_period_init(&o->tick, PERIOD);
	o->t[1] = co_now_ns();
	CO_AWAIT(f, co_period_wait(&o->tick));
	o->r[0] = co_result(f);
	CO_AWAIT(f, co_period_wait(&o->tick));
	o->r[1] = co_result(f);
	while (co_now_ns() < o->t[1] + 85 * CO_MS)
		; /* the stall */
	o->t[2] = co_now_ns();
	CO_AWAIT(f, co_period_wait(&o->tick));
	o->r[2] = co_result(f);
	o->t[3] = co_now_ns();
	CO_END(f);
}

/* The same for a wait less than one period late: the first wait, called
 * 15 ms after the start, skips the tick of 10 ms and sleeps until 20. */
static int late_fn(co_frame *f)
{
	struct ops *o = (struct ops *)f;
	CO_BEGIN(f);
	o->t[0] = co_now_ns();
	co_period_init(&o->tick, PERIOD);
	o->t[1] = co_now_ns();
	while (co_now_ns() < o->t[1] + PERIOD + PERIOD / 2)
		;
	o->t[2] = co_now_ns();
	CO_AWAIT(f, co_period_wait(&o->tick));
	o->r[2] = co_result(f);
	o->t[3] = co_now_ns();
	CO_END(f);
}

/* The wait that ended at tick k (of the grid T0 + k P, T0 between t[0]
 * and t[1]) was called at t[2] and ended at t[3]: tick k was the first
 * still to come. */
static void on_the_grid(const struct ops *o, uint64_t k)
{
	if (o->t[1] + k * PERIOD <= o->t[2])
		fail_msg("tick %llu had come before the wait: not the next one",
			 (unsigned long long)k);
	if (o->t[3] < o->t[0] + k * PERIOD)
		fail_msg("the wait ended before tick %llu", (unsigned long long)k);
}

static void test_period_after_a_stall(void **state)
{
	struct ops o;
	uint64_t k;
	(void)state;
	memset(&o, 0, sizeof o);
	co_init(&o.co, stall_fn);
	co_test_run1(&o.co);
	assert_int_equal(o.r[0] | o.r[1] | o.r[2], 0);
	k = 3 + o.tick.missed; /* the tick the third wait ended at */
	assert_true(k >= 9);   /* 90 ms at the earliest: 85 ms had gone by */
	on_the_grid(&o, k);

	memset(&o, 0, sizeof o);
	co_init(&o.co, late_fn);
	co_test_run1(&o.co);
	assert_int_equal(o.r[2], 0);
	k = 1 + o.tick.missed;
	assert_true(k >= 2); /* the tick of 10 ms had come */
	on_the_grid(&o, k);
}

/*
 * io.h, co_period: "each co_period_wait sleeps until the first tick still
 * to come. Ticks whose time came before the wait ... are skipped and
 * added to missed ... Value 0, or -ECANCELED / -ETIME as for any sleep."
 * A wait that a 1 ms limit ends long before its tick (T0 + P) leaves that
 * tick still to come: it is not consumed. Then a stall until T0 + 2.5 P:
 * the ticks of P and 2P came while nobody waited, so the next wait adds 2
 * to missed (and sleeps until 3P). With co_period_wait (lib/io/io.c)
 * moving next past the tick as it prepared the wait, it added 1: the tick
 * of a wait that did not end at it was neither waited for nor counted. On the
 * grid, as period_after_a_stall: T0 is read between t[0] and t[1].
 */
#define LPERIOD (50 * CO_MS)

static int limited_period_fn(co_frame *f)
{
	struct ops *o = (struct ops *)f;
	CO_BEGIN(f);
	o->t[0] = co_now_ns();
	co_period_init(&o->tick, LPERIOD);
	o->t[1] = co_now_ns();
	CO_AWAIT(f, co_timeout(&o->lim, co_period_wait(&o->tick), CO_MS));
	o->r[0] = co_result(f);
	o->t[2] = co_now_ns();
	while (co_now_ns() < o->t[1] + 2 * LPERIOD + LPERIOD / 2)
		; /* the stall */
	o->t[3] = co_now_ns();
	CO_AWAIT(f, co_period_wait(&o->tick));
	o->r[1] = co_result(f);
	CO_END(f);
}

static void test_period_after_a_limited_wait(void **state)
{
	struct ops o;
	uint64_t lo, hi;
	(void)state;
	memset(&o, 0, sizeof o);
	co_init(&o.co, limited_period_fn);
	co_test_run1(&o.co);
	assert_int_equal(o.r[0], -ETIME); /* the limit, long before the tick */
	assert_int_equal(o.r[1], 0);
	/* ticks T0 + k P (k >= 1) that had come when the second wait was called */
	lo = (o.t[3] - o.t[1]) / LPERIOD;
	hi = (o.t[3] - o.t[0]) / LPERIOD;
	if (o.t[2] >= o.t[0] + LPERIOD || lo != hi)
		skip(); /* the limit ended after the tick, or T0 is ambiguous: no verdict */
	assert_int_equal(o.tick.missed, lo); /* 2: the ticks of P and 2P */
}

/* Periods whose sums with the clock wrap: the wait never ends by itself
 * (a 2 ms limit ends it), twice in a row, and counts no tick. */
static int period_huge_fn(co_frame *f)
{
	struct ops *o = (struct ops *)f;
	CO_BEGIN(f);
	for (o->r[0] = 0; o->r[0] < 6; o->r[0]++) {
		switch (o->r[0]) {
		case 0: co_period_init(&o->tick, UINT64_MAX); break;
		case 1: co_period_init(&o->tick, UINT64_MAX - 5); break;
		case 2: co_period_init(&o->tick, UINT64_MAX - co_now_ns() + 1); break;
		case 3: co_period_init(&o->tick, (uint64_t)1 << 63); break;
		case 4: co_period_init(&o->tick, ((uint64_t)1 << 63) - 1); break;
		default: co_period_init(&o->tick, UINT64_MAX / 3); break;
		}
		for (o->r[1] = 0; o->r[1] < 2; o->r[1]++) {
			CO_AWAIT(f, co_timeout(&o->lim, co_period_wait(&o->tick), 2 * CO_MS));
			if (co_result(f) != -ETIME || o->tick.missed != 0)
				o->r[2 + o->r[0]] = co_result(f) ? co_result(f) : 1;
		}
	}
	CO_END(f);
}

static void test_period_huge(void **state)
{
	struct ops o;
	(void)state;
	memset(&o, 0, sizeof o);
	co_init(&o.co, period_huge_fn);
	co_test_run1(&o.co);
	for (int i = 0; i < 6; i++)
		if (o.r[2 + i])
			fail_msg("period %d: %d (ended at once, or counted a tick)", i, o.r[2 + i]);
}

/* ---- ftruncate, waitid (operations newer than liburing 2.3) ------------------ */

static int proc_fn(co_frame *f)
{
	struct ops *o = (struct ops *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_ftruncate(&o->io, o->fd, 10));
	o->r[0] = co_result(f);
	CO_AWAIT(f, co_ftruncate(&o->io, o->fd, (uint64_t)1 << 63));
	o->r[1] = co_result(f);
	CO_AWAIT(f, co_waitid(&o->io, P_PID, (id_t)o->p[0], &o->info, WEXITED));
	o->r[2] = co_result(f);
	o->child = o->info; /* the next call rewrites info, as waitid(2) does */
	CO_AWAIT(f, co_waitid(&o->io, P_PID, (id_t)o->p[0], &o->info, WEXITED)); /* reaped */
	o->r[3] = co_result(f);
	CO_AWAIT(f, co_waitid(&o->io, P_ALL, 0, NULL, WEXITED));
	o->r[4] = co_result(f);
	CO_END(f);
}

static void test_ftruncate_and_waitid(void **state)
{
	struct ops o;
	struct stat st;
	char data[100];
	(void)state;
	memset(&o, 0, sizeof o);
	memset(data, 'd', sizeof data);
	snprintf(o.a, sizeof o.a, "%s", co_test_tmp_path("coring-ops", "trunc"));
	o.fd = open(o.a, O_CREAT | O_RDWR | O_TRUNC, 0600);
	assert_int_equal(write(o.fd, data, sizeof data), (int)sizeof data);
	o.p[0] = fork();
	assert_true(o.p[0] >= 0);
	if (o.p[0] == 0)
		_exit(7);
	co_init(&o.co, proc_fn);
	co_test_run1(&o.co);
	assert_int_equal(o.r[0], 0);
	assert_int_equal(fstat(o.fd, &st), 0);
	assert_int_equal(st.st_size, 10);
	assert_int_equal(o.r[1], -EINVAL);
	assert_int_equal(o.r[2], 0);
	assert_int_equal(o.child.si_pid, o.p[0]);
	assert_int_equal(o.child.si_code, CLD_EXITED);
	assert_int_equal(o.child.si_status, 7);
	assert_int_equal(o.r[3], -ECHILD);
	assert_int_equal(o.r[4], -EFAULT);
	close(o.fd);
	unlink(o.a);
}

/* A limit on a waitid, and a cancel of one: the kernel's cancel of a
 * waitid (as of a futex wait) answers how many it ended, 1, where other
 * operations' answer 0. The child waits on a pipe until the end. */
struct waits {
	co_frame co;
	co_io io, io2;
	co_limit lim;
	siginfo_t info;
	pid_t pid;
	int r[5];
};

struct waitid_kid {
	co_frame co;
	co_io io;
	siginfo_t info;
	pid_t pid;
};

static int waitid_kid_fn(co_frame *f)
{
	struct waitid_kid *k = (struct waitid_kid *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_waitid(&k->io, P_PID, (id_t)k->pid, &k->info, WEXITED));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static struct waitid_kid waitid_kid;

static int waits_fn(co_frame *f)
{
	struct waits *w = (struct waits *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_deadline(co_waitid(&w->io, P_PID, (id_t)w->pid, &w->info, WEXITED), 20 * CO_MS));
	w->r[0] = co_result(f);
	CO_AWAIT(f, co_timeout(&w->lim, co_waitid(&w->io, P_PID, (id_t)w->pid, &w->info, WEXITED),
			       20 * CO_MS));
	w->r[1] = co_result(f);
	/* another frame waits; our cancel ends its wait */
	memset(&waitid_kid, 0, sizeof waitid_kid);
	waitid_kid.pid = w->pid;
	co_init(&waitid_kid.co, waitid_kid_fn);
	w->r[2] = co_engine_spawn(co_engine_current(), &waitid_kid.co);
	CO_AWAIT(f, co_sleep(&w->io, 5 * CO_MS)); /* its waitid is in */
	CO_AWAIT(f, co_cancel_io(&w->io, &waitid_kid.io));
	w->r[3] = co_result(f);
	CO_AWAIT(f, co_sleep(&w->io, CO_MS)); /* its end */
	w->r[4] = co_status(&waitid_kid.co);
	CO_END(f);
}

static void test_waitid_limit_and_cancel(void **state)
{
	struct waits w;
	int p[2];
	char c;
	(void)state;
	memset(&w, 0, sizeof w);
	assert_int_equal(pipe(p), 0);
	w.pid = fork();
	assert_true(w.pid >= 0);
	if (w.pid == 0) {
		close(p[1]);
		_exit(read(p[0], &c, 1) == 0 ? 0 : 1); /* until the parent closes */
	}
	close(p[0]);
	co_init(&w.co, waits_fn);
	co_test_run1(&w.co);
	close(p[1]);
	assert_int_equal(waitpid(w.pid, NULL, 0), w.pid); /* none of the waits reaped it */
	assert_int_equal(w.r[0], -ETIME);
	assert_int_equal(w.r[1], -ETIME);
	assert_int_equal(w.r[2], 0);
	assert_int_equal(w.r[3], 0);
	assert_int_equal(w.r[4], -ECANCELED);
}

/* ---- registered files and buffers ---------------------------------------- */

static char fixed_buf[4096];

static void *register_elsewhere(void *arg)
{
	struct ops *o = arg;
	o->r[10] = co_engine_register_files(o->e, o->p, 2);
	return NULL;
}


static int fixed_fn(co_frame *f)
{
	struct ops *o = (struct ops *)f;
	CO_BEGIN(f);
	/* files 0 and 1 are the pipe's read and write ends */
	CO_AWAIT(f, co_fixed_file(co_write(&o->io, 1, "fixed", 5, (uint64_t)-1)));
	o->r[0] = co_result(f);
	CO_AWAIT(f, co_fixed_file(co_read(&o->io, 0, o->buf, sizeof o->buf, (uint64_t)-1)));
	o->r[1] = co_result(f);
	/* a registered buffer, to a file and back */
	memcpy(fixed_buf, "registered", 10);
	CO_AWAIT(f, co_write_fixed(&o->io, o->fd, fixed_buf, 10, 0, 0));
	o->r[2] = co_result(f);
	memset(fixed_buf, 0, 10);
	CO_AWAIT(f, co_read_fixed(&o->io, o->fd, fixed_buf, 10, 0, 0));
	o->r[3] = co_result(f);
	CO_AWAIT(f, co_read_fixed(&o->io, o->fd, o->buf, 10, 0, 0)); /* not in buffer 0 */
	o->r[4] = co_result(f);
	/* late: after a deadline was linked */
	CO_AWAIT(f, co_fixed_file(co_deadline(co_nop(&o->io), CO_S)));
	o->r[5] = co_result(f);
	o->r[7] = co_engine_register_files(o->e, o->p, 2); /* twice */
	o->r[8] = co_engine_unregister_files(o->e);
	{
		pthread_t t; /* while the engine runs: another thread is refused */
		pthread_create(&t, NULL, register_elsewhere, o);
		pthread_join(t, NULL);
		o->r[11] = o->r[10];
	}
	CO_AWAIT(f, co_fixed_file(co_read(&o->io, 0, o->buf, 1, (uint64_t)-1)));
	o->r[9] = co_result(f); /* no table any more */
	CO_END(f);
}

static void test_registered_files_and_buffers(void **state)
{
	co_engine e;
	struct ops o;
	pthread_t t;
	struct iovec iov = { fixed_buf, sizeof fixed_buf };
	(void)state;
	memset(&o, 0, sizeof o);
	o.e = &e;
	assert_int_equal(pipe(o.p), 0);
	snprintf(o.a, sizeof o.a, "%s", co_test_tmp_path("coring-ops", "fixed"));
	o.fd = open(o.a, O_CREAT | O_RDWR | O_TRUNC, 0600);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_engine_register_files(&e, NULL, 2), -EINVAL);
	assert_int_equal(co_engine_register_files(&e, o.p, 0), -EINVAL);
	assert_int_equal(co_engine_register_files(NULL, o.p, 2), -EINVAL);
	assert_int_equal(co_engine_register_files(&e, o.p, 2), 0);   /* before the first run */
	assert_int_equal(co_engine_register_buffers(&e, &iov, 1), 0);
	co_init(&o.co, fixed_fn);
	assert_int_equal(co_engine_spawn(&e, &o.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(o.r[0], 5);
	assert_int_equal(o.r[1], 5);
	assert_memory_equal(o.buf, "fixed", 5);
	assert_int_equal(o.r[2], 10);
	assert_int_equal(o.r[3], 10);
	assert_memory_equal(fixed_buf, "registered", 10);
	assert_int_equal(o.r[4], -EFAULT);
	assert_int_equal(o.r[5], -EINVAL);
	assert_int_equal(o.r[7], -EBUSY);
	assert_int_equal(o.r[8], 0);
	assert_int_equal(o.r[9], -EBADF);
	assert_int_equal(o.r[11], -EBUSY);
	/* the ring belongs to this thread now */
	assert_int_equal(pthread_create(&t, NULL, register_elsewhere, &o), 0);
	pthread_join(t, NULL);
	assert_int_equal(o.r[10], -EPERM);
	assert_int_equal(co_engine_unregister_buffers(&e), 0);
	assert_int_equal(co_engine_unregister_buffers(&e), -ENXIO);
	assert_int_equal(co_engine_destroy(&e), 0);
	assert_int_equal(co_engine_register_files(&e, o.p, 2), -EINVAL); /* destroyed */
	assert_null(co_fixed_file(NULL));
	{
		static const co_awaiter_ops user_ops = { NULL, NULL, NULL, NULL, 0, NULL };
		co_awaiter user = { &user_ops };
		co_awaiter *a = co_fixed_file(&user); /* not I/O: an await that is -EINVAL */
		assert_non_null(a);
		assert_ptr_not_equal(a, &user);
		assert_int_equal(a->ops->resume(a, NULL), -EINVAL);
	}
	close(o.p[0]);
	close(o.p[1]);
	close(o.fd);
	unlink(o.a);
}

/* ---- signals ------------------------------------------------------------ */

struct sigs {
	co_frame co;
	co_signals s;
	int r[4];
	int value;
};

static int sigs_fn(co_frame *f)
{
	struct sigs *g = (struct sigs *)f;
	CO_BEGIN(f);
	/* nothing pending: a deadline ends the wait */
	CO_AWAIT(f, co_deadline(co_signals_wait(&g->s), 2 * CO_MS));
	g->r[0] = co_result(f);
	sigqueue(getpid(), SIGUSR2, (union sigval){ .sival_int = 42 });
	CO_AWAIT(f, co_signals_wait(&g->s));
	g->r[1] = co_result(f);
	g->value = g->s.info.ssi_int;
	kill(getpid(), SIGURG);
	CO_AWAIT(f, co_signals_wait(&g->s));
	g->r[2] = co_result(f);
	CO_END(f);
}

static void test_signals(void **state)
{
	struct sigs g;
	sigset_t set, old;
	(void)state;
	memset(&g, 0, sizeof g);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGURG);
	pthread_sigmask(SIG_SETMASK, NULL, &old);
	assert_int_equal(co_signals_open(&g.s, &set), 0);
	{ /* open already: refused, its descriptor kept */
		int fds = co_test_open_fds(), fd = g.s.fd;

		assert_int_equal(co_signals_open(&g.s, &set), -EALREADY);
		assert_int_equal(g.s.fd, fd);
		assert_int_equal(co_test_open_fds(), fds);
	}
	co_init(&g.co, sigs_fn);
	co_test_run1(&g.co);
	assert_int_equal(g.r[0], -ETIME);
	assert_int_equal(g.r[1], SIGUSR2);
	assert_int_equal(g.value, 42);
	assert_int_equal(g.r[2], SIGURG);
	assert_int_equal(co_signals_close(&g.s), 0);
	assert_int_equal(co_signals_close(&g.s), -EINVAL); /* twice */
	assert_int_equal(co_signals_open(&g.s, &set), 0); /* closed: opens again */
	assert_int_equal(co_signals_close(&g.s), 0);
	assert_int_equal(co_signals_open(NULL, &set), -EINVAL);
	assert_int_equal(co_signals_open(&g.s, NULL), -EINVAL);
	assert_null(co_signals_wait(NULL));
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	{ /* no descriptor left: -EMFILE, and the signals not blocked */
		struct rlimit lim, none;
		sigset_t now;
		int lowest = dup(0); /* the lowest free number: none from there on */

		assert_true(lowest >= 0);
		close(lowest);
		assert_int_equal(getrlimit(RLIMIT_NOFILE, &lim), 0);
		none = lim;
		none.rlim_cur = (rlim_t)lowest;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &none), 0);
		assert_int_equal(co_signals_open(&g.s, &set), -EMFILE);
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
		assert_int_equal(g.s.fd, -1);
		pthread_sigmask(SIG_SETMASK, NULL, &now);
		assert_false(sigismember(&now, SIGUSR2));
		assert_false(sigismember(&now, SIGURG));
		assert_int_equal(co_signals_close(&g.s), -EINVAL); /* nothing open */
	}
}

/* The library's threads (a scheduler's contexts, a pool's workers) block
 * the signals a program handles, so opening co_signals after starting them
 * still catches a signal sent to the process: no library thread takes it
 * (its default action would end the process). */
struct late_sigs {
	co_frame co;
	co_signals s;
	int r;
};

static int late_sigs_fn(co_frame *f)
{
	struct late_sigs *l = (struct late_sigs *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_deadline(co_signals_wait(&l->s), 30 * CO_S)); /* a hang guard */
	l->r = co_result(f);
	CO_END(f);
}

static void test_signals_after_library_threads(void **state)
{
	struct late_sigs l;
	co_sched sch;
	co_pool pool;
	sigset_t set, old;
	(void)state;
	memset(&l, 0, sizeof l);
	assert_int_equal(co_sched_init(&sch, &(co_sched_opts){ .contexts = 2 }), 0);
	assert_int_equal(co_pool_init(&pool, 2), 0);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_SETMASK, NULL, &old);
	assert_int_equal(co_signals_open(&l.s, &set), 0); /* after the threads */
	assert_int_equal(kill(getpid(), SIGTERM), 0);     /* to the process */
	co_init(&l.co, late_sigs_fn);
	co_test_run1(&l.co);
	assert_int_equal(l.r, SIGTERM);
	assert_int_equal(co_signals_close(&l.s), 0);
	assert_int_equal(co_pool_destroy(&pool), 0);
	co_sched_stop(&sch, CO_STOP_DRAIN);
	assert_int_equal(co_sched_run(&sch), 0);
	assert_int_equal(co_sched_destroy(&sch), 0);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* co_signals_close from a thread other than the opener's: the header
 * names no thread for it. The opener (a thread of its own) opens, then
 * waits; this thread closes: 0, the descriptor closed (one fewer open),
 * the signals still blocked in the opener. A second close, from a third
 * thread, once the descriptor's number is taken again by another file:
 * -EINVAL, nothing closed. */
struct sig_opener {
	co_signals *s;
	int res, fd, still_blocked;
	atomic_int opened, closed;
};

static void *sig_opener_main(void *arg)
{
	struct sig_opener *o = arg;
	sigset_t set, cur;

	sigemptyset(&set);
	sigaddset(&set, SIGWINCH);
	o->res = co_signals_open(o->s, &set);
	o->fd = o->s->fd;
	atomic_store(&o->opened, 1);
	WAIT_UNTIL(atomic_load(&o->closed)); /* the close is another thread's */
	sigemptyset(&cur);
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	o->still_blocked = sigismember(&cur, SIGWINCH) == 1;
	return NULL;
}

struct sig_closer {
	co_signals *s;
	int res;
};

static void *sig_closer_main(void *arg)
{
	struct sig_closer *c = arg;

	c->res = co_signals_close(c->s);
	return NULL;
}

/* Two threads close one co_signals at once, many times: one closes it
 * (0), the other answers -EINVAL, and one descriptor closes. (Both passed
 * the check once, and both closed the number: the second one closed, or
 * a descriptor that took the number meanwhile; TSan saw the race.) */
struct sig_race {
	co_signals *s;
	pthread_barrier_t *go;
	int res;
};

static void *sig_race_main(void *arg)
{
	struct sig_race *r = arg;

	pthread_barrier_wait(r->go);
	r->res = co_signals_close(r->s);
	return NULL;
}

static void test_signals_close_twice_at_once(void **state)
{
	co_signals s;
	sigset_t set, old;
	pthread_barrier_t go;
	int fds;
	(void)state;
	sigemptyset(&set);
	sigaddset(&set, SIGWINCH);
	pthread_sigmask(SIG_SETMASK, NULL, &old);
	fds = co_test_open_fds();
	for (int i = 0; i < 200; i++) {
		struct sig_race r[2] = { { &s, &go, 1 }, { &s, &go, 1 } };
		pthread_t t[2];

		memset(&s, 0, sizeof s);
		assert_int_equal(co_signals_open(&s, &set), 0);
		assert_int_equal(pthread_barrier_init(&go, NULL, 2), 0);
		for (int k = 0; k < 2; k++)
			assert_int_equal(pthread_create(&t[k], NULL, sig_race_main, &r[k]), 0);
		for (int k = 0; k < 2; k++)
			assert_int_equal(pthread_join(t[k], NULL), 0);
		pthread_barrier_destroy(&go);
		assert_true((r[0].res == 0 && r[1].res == -EINVAL) ||
			    (r[0].res == -EINVAL && r[1].res == 0));
		assert_int_equal(s.fd, -1);
		assert_int_equal(co_test_open_fds(), fds);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void test_signals_close_other_thread(void **state)
{
	co_signals s;
	struct sig_opener o;
	struct sig_closer c;
	pthread_t opener, closer;
	int fds, again;

	(void)state;
	alarm(30);
	memset(&s, 0, sizeof s);
	memset(&o, 0, sizeof o);
	o.s = &s;
	o.fd = -1;
	fds = co_test_open_fds();
	assert_int_equal(pthread_create(&opener, NULL, sig_opener_main, &o), 0);
	WAIT_UNTIL(atomic_load(&o.opened));
	assert_int_equal(o.res, 0);
	assert_true(o.fd >= 0);
	assert_int_equal(co_test_open_fds(), fds + 1);
	/* from this thread, not the opener */
	assert_int_equal(co_signals_close(&s), 0);
	assert_int_equal(s.fd, -1);
	assert_int_equal(co_test_open_fds(), fds);
	errno = 0;
	assert_int_equal(fcntl(o.fd, F_GETFD), -1);
	assert_int_equal(errno, EBADF);
	atomic_store(&o.closed, 1);
	pthread_join(opener, NULL);
	assert_true(o.still_blocked); /* "the signals stay blocked" */
	/* the number goes to another file; a second close, from a third thread,
	 * closes nothing */
	again = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_int_equal(again, o.fd); /* the lowest free number */
	c = (struct sig_closer){ .s = &s, .res = 1 };
	assert_int_equal(pthread_create(&closer, NULL, sig_closer_main, &c), 0);
	pthread_join(closer, NULL);
	assert_int_equal(c.res, -EINVAL);
	assert_true(fcntl(again, F_GETFD) >= 0); /* still open */
	assert_int_equal(co_test_open_fds(), fds + 1);
	close(again);
	alarm(0);
}

/* A co_signals never opened (zeroed: its fd field is 0): close closes
 * nothing (descriptor 0 stays open) and says -EINVAL; a wait on it reads
 * nothing (-EBADF). */
struct unopened {
	co_frame co;
	co_signals s;
	int r;
};

static int unopened_fn(co_frame *f)
{
	struct unopened *u = (struct unopened *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_signals_wait(&u->s));
	u->r = co_result(f);
	CO_END(f);
}

static void test_signals_never_opened(void **state)
{
	struct unopened u;
	int devnull = -1;
	(void)state;
	if (fcntl(0, F_GETFD) < 0) /* make sure there is a descriptor 0 to lose */
		devnull = open("/dev/null", O_RDONLY);
	assert_true(fcntl(0, F_GETFD) >= 0);
	memset(&u, 0, sizeof u);
	assert_int_equal(co_signals_close(&u.s), -EINVAL);
	assert_true(fcntl(0, F_GETFD) >= 0); /* still open */
	co_init(&u.co, unopened_fn);
	co_test_run1(&u.co);
	assert_int_equal(u.r, -EBADF);
	assert_true(fcntl(0, F_GETFD) >= 0);
	if (devnull == 0)
		close(devnull);
}

/*
 * io.md, "Operations": "another thread gets -EBUSY while
 * it runs and -EPERM once it has run"; an unregister with no table -ENXIO
 * (engine.h: "-EBUSY (the engine runs on another thread ...)"). A drain
 * stop asked by a frame leaves the run going (state STOPPING): another
 * thread's register is still -EBUSY (register_check, lib/engine/
 * engine_setup.c, counts STOPPING as running; without it, -EPERM).
 */
static int register_while_stopping_fn(co_frame *f)
{
	struct ops *o = (struct ops *)f;
	pthread_t t;
	CO_BEGIN(f);
	o->r[0] = co_engine_unregister_files(o->e); /* none registered */
	pthread_create(&t, NULL, register_elsewhere, o);
	pthread_join(t, NULL);
	o->r[1] = o->r[10]; /* running: -EBUSY */
	o->r[2] = co_engine_stop(o->e, CO_STOP_DRAIN);
	o->r[3] = co_engine_state(o->e);
	pthread_create(&t, NULL, register_elsewhere, o);
	pthread_join(t, NULL);
	o->r[4] = o->r[10]; /* still running (a drain): -EBUSY */
	CO_END(f);
}

static void test_register_while_stopping(void **state)
{
	co_engine e;
	struct ops o;
	(void)state;
	memset(&o, 0, sizeof o);
	o.e = &e;
	assert_int_equal(pipe(o.p), 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	co_init(&o.co, register_while_stopping_fn);
	assert_int_equal(co_engine_spawn(&e, &o.co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(o.r[0], -ENXIO);
	assert_int_equal(o.r[1], -EBUSY);
	assert_int_equal(o.r[2], 0);
	assert_int_equal(o.r[3], CO_ENGINE_STOPPING);
	assert_int_equal(o.r[4], -EBUSY);
	assert_int_equal(co_engine_destroy(&e), 0);
	close(o.p[0]);
	close(o.p[1]);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_path_ops),
	cmocka_unit_test(test_file_space_and_pipe_ops),
	cmocka_unit_test(test_socket_ops),
	cmocka_unit_test(test_send_zc_buffer_free_at_end),
	cmocka_unit_test(test_send_zc_stop_waits_for_buffer),
	cmocka_unit_test(test_udp_sendto_recvfrom),
	cmocka_unit_test(test_any_sqe),
	cmocka_unit_test(test_any_sqe_by_hand),
	cmocka_unit_test(test_any_sqe_flags_corrected),
	cmocka_unit_test(test_errors_before_the_kernel),
	cmocka_unit_test(test_sqe_drain_refused),
	cmocka_unit_test(test_operation_the_kernel_lacks),
	cmocka_unit_test(test_clocks_and_period),
	cmocka_unit_test(test_period_after_a_stall),
	cmocka_unit_test(test_period_huge),
	cmocka_unit_test(test_period_after_a_limited_wait),
	cmocka_unit_test(test_ftruncate_and_waitid),
	cmocka_unit_test(test_waitid_limit_and_cancel),
	cmocka_unit_test(test_registered_files_and_buffers),
	cmocka_unit_test(test_register_while_stopping),
	cmocka_unit_test(test_signals),
	cmocka_unit_test(test_signals_after_library_threads),
	cmocka_unit_test(test_signals_never_opened),
	cmocka_unit_test(test_signals_close_other_thread),
	cmocka_unit_test(test_signals_close_twice_at_once),
};

CO_TEST_MAIN(tests, 1)
