/* SPDX-License-Identifier: MIT */
/*
 * Listening sockets and connections by name (lib/net/net.c, coring/net.h):
 * co_listen and co_local_port on real loopback sockets, SO_REUSEPORT, and
 * every bad argument; co_dial to a numeric address, to a name tried
 * address by address, to a refused port, to a name that does not resolve,
 * against its time limit (a connect the kernel leaves hanging, a lookup
 * queued behind a busy pool), cancelled, and misused. No descriptor leaks.
 *
 * The name "multi.test" resolves here, for this program only, to
 * 127.0.0.2, 127.0.0.3 and 127.0.0.1 in that order (getaddrinfo below
 * stands in for the C library's for that name): only the last listens,
 * so a dial must try the three in turn. "late.test" resolves to 127.0.0.1
 * only once a given time has passed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <netdb.h>
#include <pthread.h>
#include <unistd.h>
#include <stdatomic.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <cmocka.h>

#include <coring/coring.h>
#include "helpers.h"

/* ---- "multi.test": three addresses ------------------------------------------------------ */

static atomic_int multi_lookups;
/* "late.test": the lookup returns 127.0.0.1 only after this time has
 * passed (CLOCK_MONOTONIC ns; a dial's deadline). */
static const uint64_t *late_until;
/* ... and, while late_held is set, not before it is cleared; late_lookups
 * counts the lookups that began. */
static atomic_int late_held, late_lookups;

struct fake {
	struct addrinfo ai;
	struct sockaddr_in sin;
};

/* The fake answers: slots taken in turn (a test makes far fewer lookups);
 * freeaddrinfo leaves them alone. */
static struct fake fakes[256][3];
static atomic_uint fakes_used;

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		struct addrinfo **res)
{
	static const char *const addrs[] = { "127.0.0.2", "127.0.0.3", "127.0.0.1" };
	int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
	struct fake *f;

	if (node && strcmp(node, "late.test") == 0 && !(hints && (hints->ai_flags & AI_NUMERICHOST))) {
		*(void **)&real = dlsym(RTLD_NEXT, "getaddrinfo");
		atomic_fetch_add(&late_lookups, 1);
		while (co_now_ns() <= *late_until || atomic_load(&late_held))
			usleep(1000);
		return real("127.0.0.1", service, hints, res);
	}
	if (node == NULL || strcmp(node, "multi.test") != 0) {
		*(void **)&real = dlsym(RTLD_NEXT, "getaddrinfo");
		return real(node, service, hints, res);
	}
	if (hints && (hints->ai_flags & AI_NUMERICHOST))
		return EAI_NONAME;
	atomic_fetch_add(&multi_lookups, 1);
	f = fakes[atomic_fetch_add(&fakes_used, 1) % 256];
	for (int i = 0; i < 3; i++) {
		f[i].sin.sin_family = AF_INET;
		f[i].sin.sin_port = htons((uint16_t)atoi(service));
		inet_pton(AF_INET, addrs[i], &f[i].sin.sin_addr);
		f[i].ai = (struct addrinfo){ .ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
					     .ai_protocol = IPPROTO_TCP, .ai_addrlen = sizeof f[i].sin,
					     .ai_addr = (struct sockaddr *)&f[i].sin,
					     .ai_next = i < 2 ? &f[i + 1].ai : NULL };
	}
	*res = &f[0].ai;
	return 0;
}

void freeaddrinfo(struct addrinfo *ai)
{
	void (*real)(struct addrinfo *);

	if ((char *)ai >= (char *)fakes && (char *)ai < (char *)fakes + sizeof fakes)
		return;
	*(void **)&real = dlsym(RTLD_NEXT, "freeaddrinfo");
	real(ai);
}

/* ---- co_listen ----------------------------------------------------------------------------- */

static void connect_to(int port, int expect_ok)
{
	struct sockaddr_in a = co_test_loopback((uint16_t)port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, expect_ok);
	close(fd);
}

/* n connections to port that nobody accepts all complete: the backlog
 * has room for them (with a backlog of 1 the kernel would drop SYNs and
 * they would hang; the poll's bound is a hang guard). */
static void pending_connects(int port, int n)
{
	struct sockaddr_in a = co_test_loopback((uint16_t)port);
	struct pollfd p[64];

	assert_true(n <= 64);
	for (int i = 0; i < n; i++) {
		p[i].fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		p[i].events = POLLOUT;
		connect(p[i].fd, (struct sockaddr *)&a, sizeof a);
	}
	for (int i = 0; i < n; i++) {
		int err = -1;
		socklen_t len = sizeof err;

		assert_int_equal(poll(&p[i], 1, 30000), 1);
		assert_int_equal(getsockopt(p[i].fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
		assert_int_equal(err, 0);
		close(p[i].fd);
	}
}

static void test_listen_and_port(void **state)
{
	int fds = co_test_open_fds();
	int a, b, c, port, one = 0;
	socklen_t len = sizeof one;

	(void)state;
	a = co_listen("127.0.0.1", 0, 0, 0);
	assert_true(a >= 0);
	port = co_local_port(a);
	assert_true(port > 0 && port < 65536);
	assert_true(fcntl(a, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(getsockopt(a, SOL_SOCKET, SO_REUSEADDR, &one, &len), 0);
	assert_int_equal(one, 1);
	connect_to(port, 1);
	pending_connects(port, 32); /* backlog 0 is SOMAXCONN: 32 wait in the queue */
	/* without SO_REUSEPORT a second socket on the port is refused */
	assert_int_equal(co_listen("127.0.0.1", port, 0, 0), -EADDRINUSE);
	close(a);
	/* with it, several share the port */
	b = co_listen("127.0.0.1", 0, 16, CO_LISTEN_REUSEPORT);
	assert_true(b >= 0);
	port = co_local_port(b);
	c = co_listen("127.0.0.1", port, 16, CO_LISTEN_REUSEPORT);
	assert_true(c >= 0);
	assert_int_equal(co_local_port(c), port);
	connect_to(port, 1);
	close(b);
	close(c);
	connect_to(port, 0); /* nothing listens any more */
	/* IPv6, where the machine has it */
	a = co_listen("::1", 0, 0, 0);
	if (a >= 0) {
		assert_true(co_local_port(a) > 0);
		close(a);
	} else {
		assert_true(a == -EADDRNOTAVAIL || a == -EAFNOSUPPORT);
	}
	assert_int_equal(co_test_open_fds(), fds);
}

static void test_listen_errors(void **state)
{
	int fds = co_test_open_fds(), p[2], u;

	(void)state;
	assert_int_equal(co_listen(NULL, 0, 0, 0), -EINVAL);
	assert_int_equal(co_listen("localhost", 0, 0, 0), -EINVAL); /* no lookup */
	assert_int_equal(co_listen("", 0, 0, 0), -EINVAL);
	assert_int_equal(co_listen("127.0.0.1", -1, 0, 0), -EINVAL);
	assert_int_equal(co_listen("127.0.0.1", 65536, 0, 0), -EINVAL);
	assert_int_equal(co_listen("127.0.0.1", INT32_MAX, 0, 0), -EINVAL);
	assert_int_equal(co_listen("127.0.0.1", 0, -1, 0), -EINVAL);
	assert_int_equal(co_listen("127.0.0.1", 0, 0, 4), -EINVAL);
	assert_int_equal(co_listen("127.0.0.1", 0, 0, ~0u), -EINVAL);
	assert_int_equal(co_listen("192.0.2.1", 0, 0, 0), -EADDRNOTAVAIL); /* not ours */
	u = co_listen("127.0.0.1", 0, INT32_MAX, 0); /* the kernel caps a huge backlog */
	assert_true(u >= 0);
	close(u);
	assert_int_equal(co_local_port(-1), -EBADF);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(co_local_port(p[0]), -ENOTSOCK);
	close(p[0]);
	close(p[1]);
	u = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(co_local_port(u), -EAFNOSUPPORT);
	close(u);
	assert_int_equal(co_test_open_fds(), fds);
}

/* ---- co_dial --------------------------------------------------------------------------------- */

struct dial {
	co_frame co;
	co_dialer d;
	co_limit lim;
	co_pool *pool;
	const char *host;
	int port, res, err, tried, limit_outer;
	uint64_t ns;
};

static int dial_fn(co_frame *f)
{
	struct dial *c = (struct dial *)f;

	CO_BEGIN(f);
	if (c->limit_outer)
		CO_AWAIT(f, co_timeout(&c->lim, co_dial(&c->d, c->pool, c->host, c->port, 0), c->ns));
	else
		CO_AWAIT(f, co_dial(&c->d, c->pool, c->host, c->port, c->ns));
	c->res = co_result(f);
	c->err = c->d.err;
	c->tried = (int)c->d.tried;
	CO_END(f);
}

static void dial_init(struct dial *c, co_pool *p, const char *host, int port, uint64_t ns)
{
	memset(c, 0, sizeof *c);
	c->pool = p;
	c->host = host;
	c->port = port;
	c->ns = ns;
	c->res = 99;
	co_init(&c->co, dial_fn);
}

/* The connection a dial made is real: accept it, a byte goes through. */
static void check_connected(int lfd, int fd)
{
	int s = accept(lfd, NULL, NULL);
	char c = 0;

	assert_true(fd >= 0);
	assert_true(s >= 0);
	assert_int_equal(write(fd, "k", 1), 1);
	assert_int_equal(read(s, &c, 1), 1);
	assert_int_equal(c, 'k');
	close(s);
	close(fd);
}

static void test_dial_numeric_and_names(void **state)
{
	int fds = co_test_open_fds(), lfd, port;
	struct dial c;
	co_pool pool;

	(void)state;
	assert_int_equal(co_pool_init(&pool, 2), 0);
	lfd = co_listen("127.0.0.1", 0, 0, 0);
	port = co_local_port(lfd);
	/* a numeric address needs no pool */
	dial_init(&c, NULL, "127.0.0.1", port, 0);
	co_test_run1(&c.co);
	assert_int_equal(c.tried, 1);
	assert_true(fcntl(c.res, F_GETFD) & FD_CLOEXEC);
	check_connected(lfd, c.res);
	/* a name, looked up on the pool */
	dial_init(&c, &pool, "localhost", port, 5 * CO_S);
	co_test_run1(&c.co);
	check_connected(lfd, c.res);
	/* three addresses, the third listens: each is tried in turn */
	atomic_store(&multi_lookups, 0);
	dial_init(&c, &pool, "multi.test", port, 5 * CO_S);
	co_test_run1(&c.co);
	assert_int_equal(atomic_load(&multi_lookups), 1);
	assert_int_equal(c.tried, 3);
	check_connected(lfd, c.res);
	close(lfd);
	assert_int_equal(co_pool_destroy(&pool), 0);
	assert_int_equal(co_test_open_fds(), fds);
}

/* A huge limit is no limit for a name too: net.md's "one time limit for
 * all of it, lookup and connects" with a timeout_ns whose sum with the
 * clock would wrap (UINT64_MAX, and a value just short of it) saturates,
 * so the lookup's timer and each connect's kernel timeout never run out:
 * all three of multi.test's addresses are tried and the third connects. */
static void test_dial_huge_limit_with_a_name(void **state)
{
	static const uint64_t huge[] = { UINT64_MAX, UINT64_MAX - CO_S };
	int fds = co_test_open_fds(), lfd, port;
	struct dial c;
	co_pool pool;

	(void)state;
	assert_int_equal(co_pool_init(&pool, 1), 0);
	lfd = co_listen("127.0.0.1", 0, 0, 0);
	port = co_local_port(lfd);
	for (int i = 0; i < 2; i++) {
		dial_init(&c, &pool, "multi.test", port, huge[i]);
		co_test_run1(&c.co);
		assert_int_equal(c.tried, 3);
		check_connected(lfd, c.res);
	}
	close(lfd);
	assert_int_equal(co_pool_destroy(&pool), 0);
	assert_int_equal(co_test_open_fds(), fds);
}

static void test_dial_refused_and_unresolved(void **state)
{
	int fds = co_test_open_fds(), lfd, port;
	struct dial c;
	co_pool pool;

	(void)state;
	assert_int_equal(co_pool_init(&pool, 1), 0);
	lfd = co_listen("127.0.0.1", 0, 0, 0);
	port = co_local_port(lfd);
	close(lfd); /* nothing listens there now */
	dial_init(&c, NULL, "127.0.0.1", port, 0);
	co_test_run1(&c.co);
	assert_int_equal(c.res, -ECONNREFUSED);
	assert_int_equal(c.tried, 1);
	/* every address refuses: each was tried, the last one's error */
	dial_init(&c, &pool, "multi.test", port, 5 * CO_S);
	co_test_run1(&c.co);
	assert_int_equal(c.res, -ECONNREFUSED);
	assert_int_equal(c.err, -ECONNREFUSED);
	assert_int_equal(c.tried, 3);
	/* a name that does not resolve (-EAGAIN where no resolver answers) */
	dial_init(&c, &pool, "no-such-host.invalid", port, 5 * CO_S);
	co_test_run1(&c.co);
	assert_true(c.res == -ENOENT || c.res == -EAGAIN);
	assert_int_equal(c.tried, 0);
	assert_int_equal(co_pool_destroy(&pool), 0);
	assert_int_equal(co_test_open_fds(), fds);
}

/* A listener (on every address) whose accept queue is full: the kernel
 * drops the next SYN, so a connect to it hangs (retrying) until something
 * ends it. */
static int full_listener(int *port, int *filler)
{
	int lfd = co_listen("0.0.0.0", 0, 1, 0);
	struct sockaddr_in a;

	assert_true(lfd >= 0);
	*port = co_local_port(lfd);
	a = co_test_loopback((uint16_t)*port);
	for (int i = 0; i < 2; i++) {
		filler[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		connect(filler[i], (struct sockaddr *)&a, sizeof a); /* in progress or done */
	}
	usleep(20000); /* (not a verdict: more fillers only make the hang surer) */
	return lfd;
}

static int gate[2];

static int wait_for_gate(void *arg)
{
	char c;

	(void)arg;
	return read(gate[0], &c, 1) == 1 ? 0 : -EIO;
}

struct blocker {
	co_frame co;
	co_pool_job job;
	co_pool *pool;
};

static int blocker_fn(co_frame *f)
{
	struct blocker *b = (struct blocker *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_pool_run(&b->job, b->pool, wait_for_gate, NULL));
	CO_END(f);
}

/* Let the dial's limit run out, then open the gate. */
struct opener {
	co_frame co;
	struct dial *c;
};

static int opener_fn(co_frame *f)
{
	struct opener *o = (struct opener *)f;

	CO_BEGIN(f);
	CO_AWAIT_UNTIL(f, co_done(&o->c->co));
	assert_int_equal(write(gate[1], "g", 1), 1);
	CO_END(f);
}

static void test_dial_time_limit(void **state)
{
	int fds = co_test_open_fds(), lfd, port, filler[2];
	struct blocker b = { 0 };
	struct opener o = { 0 };
	struct dial c;
	co_frame *frames[3];
	co_pool pool;

	(void)state;
	/* a connect that hangs: -ETIME, its socket closed */
	lfd = full_listener(&port, filler);
	dial_init(&c, NULL, "127.0.0.1", port, 100 * CO_MS);
	co_test_run1(&c.co);
	assert_int_equal(c.res, -ETIME);
	assert_int_equal(c.tried, 1);
	/* the same under co_timeout: the child is cancelled, -ETIME */
	dial_init(&c, NULL, "127.0.0.1", port, 100 * CO_MS);
	c.limit_outer = 1;
	co_test_run1(&c.co);
	assert_int_equal(c.res, -ETIME);
	close(filler[0]);
	close(filler[1]);
	close(lfd);
	/* a lookup queued behind a busy worker: taken off the queue, -ETIME */
	assert_int_equal(pipe(gate), 0);
	assert_int_equal(co_pool_init(&pool, 1), 0);
	b.pool = &pool;
	co_init(&b.co, blocker_fn);
	dial_init(&c, &pool, "multi.test", 1, 50 * CO_MS);
	o.c = &c;
	co_init(&o.co, opener_fn);
	atomic_store(&multi_lookups, 0);
	frames[0] = &b.co;
	frames[1] = &c.co;
	frames[2] = &o.co;
	co_test_run_frames(frames, 3);
	assert_int_equal(c.res, -ETIME);
	assert_int_equal(c.tried, 0);
	assert_int_equal(atomic_load(&multi_lookups), 0); /* it never ran */
	/* a lookup a worker has begun ends after the deadline: no connect */
	lfd = co_listen("127.0.0.1", 0, 0, 0);
	dial_init(&c, &pool, "late.test", co_local_port(lfd), 30 * CO_MS);
	late_until = &c.d.deadline;
	co_test_run1(&c.co);
	assert_int_equal(c.res, -ETIME);
	assert_int_equal(c.tried, 0);
	close(lfd);
	assert_int_equal(co_pool_destroy(&pool), 0);
	close(gate[0]);
	close(gate[1]);
	assert_int_equal(co_test_open_fds(), fds);
}

/* A cancel stop whose grace runs out while a worker runs the lookup
 * (net.h): the dial's frame is finished with -ECANCELED and the run
 * returns; the lookup
 * goes on, so co_pool_destroy answers -EBUSY until it has ended; then its
 * list is in d->dns.result, the caller's to free (ASan: a leak otherwise),
 * and the engine can go. */
static void test_dial_lookup_given_up(void **state)
{
	static const uint64_t passed = 0;
	co_engine_opts eo = { .cancel_grace_ns = 10 * CO_MS };
	struct dial *c = calloc(1, sizeof *c);
	co_test_runner r;
	co_pool pool;
	co_engine e;
	int fds = co_test_open_fds(), lfd;
	(void)state;
	assert_non_null(c);
	alarm(20); /* a wait below that never ends fails here instead of hanging */
	assert_int_equal(co_pool_init(&pool, 1), 0);
	assert_int_equal(co_engine_init(&e, &eo), 0);
	lfd = co_listen("127.0.0.1", 0, 0, 0);
	late_until = &passed;
	atomic_store(&late_lookups, 0);
	atomic_store(&late_held, 1);
	dial_init(c, &pool, "late.test", co_local_port(lfd), 0);
	assert_int_equal(co_engine_spawn(&e, &c->co), 0);
	co_test_runner_start(&r, &e, CO_RUN_UNTIL_STOP);
	WAIT_UNTIL(atomic_load(&late_lookups) == 1); /* a worker runs the lookup */
	assert_int_equal(co_engine_stop(&e, CO_STOP_CANCEL), 0);
	assert_int_equal(co_test_runner_join(&r), 0); /* past the grace, the lookup held */
	/* finished for it (docs/pool.md): its body never resumed */
	assert_int_equal(co_status(&c->co), -ECANCELED);
	assert_int_equal(c->res, 99);
	assert_int_equal(c->d.tried, 0);
	assert_int_equal(co_pool_destroy(&pool), -EBUSY); /* the lookup runs on */
	atomic_store(&late_held, 0);
	WAIT_UNTIL(co_pool_destroy(&pool) == 0);
	assert_non_null(c->d.dns.result); /* 127.0.0.1, left to the caller */
	freeaddrinfo(c->d.dns.result);
	assert_int_equal(co_engine_destroy(&e), 0);
	free(c);
	close(lfd);
	alarm(0);
	assert_int_equal(co_test_open_fds(), fds);
}

/* C: while A's dial hangs, the same dialer is refused, then A is
 * cancelled. */
struct canceller {
	co_frame co;
	struct dial *a;
	int busy, cancel;
};

static int canceller_fn(co_frame *f)
{
	struct canceller *k = (struct canceller *)f;

	CO_BEGIN(f);
	CO_AWAIT_UNTIL(f, co_waiting(&k->a->co) && k->a->d.tried > 0); /* in a connect */
	CO_AWAIT(f, co_dial(&k->a->d, NULL, "127.0.0.1", 1, 0));
	k->busy = co_result(f);
	k->cancel = co_cancel(&k->a->co);
	CO_END(f);
}

static void test_dial_cancel_and_misuse(void **state)
{
	int fds = co_test_open_fds(), lfd, port, filler[2];
	struct canceller k = { 0 };
	struct dial a;
	co_frame *frames[2] = { &a.co, &k.co };
	co_dialer d;
	co_pool pool;

	(void)state;
	memset(&d, 0, sizeof d);
	assert_null(co_dial(NULL, NULL, "127.0.0.1", 1, 0));
	assert_int_equal(co_status(co_dial(&d, NULL, NULL, 1, 0)), -EINVAL);
	assert_int_equal(co_status(co_dial(&d, NULL, "127.0.0.1", 0, 0)), -EINVAL);
	assert_int_equal(co_status(co_dial(&d, NULL, "127.0.0.1", -1, 0)), -EINVAL);
	assert_int_equal(co_status(co_dial(&d, NULL, "127.0.0.1", 65536, 0)), -EINVAL);
	assert_true(co_done(co_dial(&d, NULL, "127.0.0.1", 65536, 0)));
	/* a name needs a pool */
	dial_init(&a, NULL, "localhost", 1, 0);
	co_test_run1(&a.co);
	assert_int_equal(a.res, -EINVAL);
	/* a huge limit is no limit */
	lfd = co_listen("127.0.0.1", 0, 0, 0);
	dial_init(&a, NULL, "127.0.0.1", co_local_port(lfd), UINT64_MAX);
	co_test_run1(&a.co);
	check_connected(lfd, a.res);
	close(lfd);
	/* busy, then cancelled: no next address is tried (all three of
	 * multi.test would hang on this listener, bound to every address) */
	lfd = full_listener(&port, filler);
	assert_int_equal(co_pool_init(&pool, 1), 0);
	dial_init(&a, &pool, "multi.test", port, 0);
	k.a = &a;
	co_init(&k.co, canceller_fn);
	co_test_run_frames(frames, 2);
	assert_int_equal(k.busy, -EBUSY);
	assert_int_equal(k.cancel, 0);
	assert_int_equal(a.res, -ECANCELED);
	assert_int_equal(a.tried, 1);
	assert_int_equal(co_pool_destroy(&pool), 0);
	close(filler[0]);
	close(filler[1]);
	close(lfd);
	assert_int_equal(co_test_open_fds(), fds);
}

/* net.h: a dial is in progress on d from the call that handed out its
 * frame (reader.md's pipelined pattern: df = co_dial(...), another await,
 * then CO_AWAIT(f, df)) until that frame finishes: a second co_dial in
 * that window answers -EBUSY and leaves the first alone (it took over the
 * same frame, memset under it, and the first await dialled the second's
 * port); zeroing d drops a dial never awaited. */
struct handed_dial {
	co_frame co;
	co_frame *df;
	int res;
};

static int handed_dial_fn(co_frame *f)
{
	struct handed_dial *h = (struct handed_dial *)f;

	CO_BEGIN(f);
	CO_AWAIT_TASK(f, h->df);
	h->res = co_result(f);
	CO_END(f);
}

static void test_dial_handed_out_refuses_a_second(void **state)
{
	int fds = co_test_open_fds(), l1, l2;
	struct pollfd pfd = { .events = POLLIN };
	struct handed_dial h = { .res = 99 };
	co_dialer d;
	co_frame *second;

	(void)state;
	l1 = co_listen("127.0.0.1", 0, 0, 0);
	l2 = co_listen("127.0.0.1", 0, 0, 0);
	memset(&d, 0, sizeof d);
	h.df = co_dial(&d, NULL, "127.0.0.1", co_local_port(l1), 0);
	assert_ptr_equal(h.df, &d.co);
	assert_false(co_done(h.df));
	second = co_dial(&d, NULL, "127.0.0.1", co_local_port(l2), 0);
	assert_true(co_done(second));
	assert_int_equal(co_status(second), -EBUSY);
	co_init(&h.co, handed_dial_fn);
	co_test_run1(&h.co);
	check_connected(l1, h.res); /* the first dial's port, not the second's */
	pfd.fd = l2;
	assert_int_equal(poll(&pfd, 1, 0), 0); /* nothing dialled l2 */
	/* finished: d is free again */
	h.df = co_dial(&d, NULL, "127.0.0.1", co_local_port(l2), 0);
	assert_ptr_equal(h.df, &d.co);
	/* handed out and dropped: zeroing d frees it */
	assert_int_equal(co_status(co_dial(&d, NULL, "127.0.0.1", co_local_port(l1), 0)), -EBUSY);
	memset(&d, 0, sizeof d);
	h.df = co_dial(&d, NULL, "127.0.0.1", co_local_port(l2), 0);
	assert_ptr_equal(h.df, &d.co);
	h.res = 99;
	co_init(&h.co, handed_dial_fn);
	co_test_run1(&h.co);
	check_connected(l2, h.res);
	close(l1);
	close(l2);
	assert_int_equal(co_test_open_fds(), fds);
}

/* ---- a limit that runs out as a connect or an accept completes ----------------------------- */

/* Accept and close whatever waits in lfd's queue. */
static void drain_listener(int lfd)
{
	int fl = fcntl(lfd, F_GETFL), s;

	assert_int_equal(fcntl(lfd, F_SETFL, fl | O_NONBLOCK), 0);
	while ((s = accept(lfd, NULL, NULL)) >= 0)
		close(s);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(fcntl(lfd, F_SETFL, fl), 0);
}

/* co_timeout of a dial whose connect completes as the limit runs out: the
 * holder keeps the engine's thread, in the turn the dial began, until the
 * limit's time has passed; the connect and the limit's timer then go in
 * together, and their completions come in one batch. The dial that
 * connected keeps its descriptor as its value (or, cut short, closed it):
 * none is left behind. */
struct dial_race {
	co_frame co, holder;
	co_dialer d;
	co_limit lim;
	int port, res;
	uint64_t end;
};

static int dial_race_fn(co_frame *f)
{
	struct dial_race *t = (struct dial_race *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_timeout_at(&t->lim, co_dial(&t->d, NULL, "127.0.0.1", t->port, 0), t->end));
	t->res = co_result(f);
	CO_END(f);
}

static int dial_holder_fn(co_frame *f)
{
	struct dial_race *t = (struct dial_race *)(void *)((char *)f - offsetof(struct dial_race, holder));

	CO_BEGIN(f);
	while (co_now_ns() < t->end + CO_MS)
		;
	CO_END(f);
}

static void test_dial_result_kept(void **state)
{
	int fds = co_test_open_fds(), lfd = co_listen("127.0.0.1", 0, 0, 0), kept = 0;

	(void)state;
	assert_true(lfd >= 0);
	for (int round = 0; round < 20; round++) {
		struct dial_race t;
		co_frame *frames[2] = { &t.co, &t.holder };

		memset(&t, 0, sizeof t);
		t.port = co_local_port(lfd);
		t.end = co_now_ns() + 3 * CO_MS;
		co_init(&t.co, dial_race_fn);
		co_init(&t.holder, dial_holder_fn);
		co_test_run_frames(frames, 2);
		if (t.res >= 0) {
			kept++;
			check_connected(lfd, t.res);
		} else {
			assert_int_equal(t.res, -ETIME);
		}
		drain_listener(lfd);
		assert_int_equal(co_test_open_fds(), fds + 1); /* the listener only */
	}
	print_message("%d of 20 dials kept their connection at the limit\n", kept);
	close(lfd);
	assert_int_equal(co_test_open_fds(), fds);
}

/* An accept under a limit whose connection arrives as the limit runs out:
 * co_accept (a kernel timeout linked to it), a child that accepts (a
 * timer), and an acceptor whose descriptors a channel hands over, received
 * under a limit (the wait's own timer). The holder keeps the engine's
 * thread once the await's SQEs are in, connects, and waits until the
 * limit's time has passed: the accept and the timer complete in one batch.
 * Each connection is the await's value, or still there for the next
 * accept (in the queue, in the channel); no descriptor is left behind. */
enum { ACC_LINKED, ACC_CHILD, ACC_ACCEPTOR, ACC_FORMS };

struct acc_race {
	co_frame co, holder;
	struct acc_kid {
		co_frame co;
		co_io io;
		int lfd;
	} kid;
	co_io io, hio;
	co_limit lim;
	co_waiter w;
	co_chan ch;
	co_acceptor acc;
	int form, lfd, port, client, res, got;
	uint64_t end;
};

static int acc_kid_fn(co_frame *f)
{
	struct acc_kid *k = (struct acc_kid *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_accept(&k->io, k->lfd, NULL, NULL, SOCK_CLOEXEC));
	CO_RETURN(f, co_result(f));
	CO_END(f);
}

static void acc_on_conn(co_acceptor *a, int fd)
{
	struct acc_race *t = a->user;

	if (fd >= 0)
		assert_int_equal(co_chan_try_send(&t->ch, &fd), 0);
}

static int acc_race_fn(co_frame *f)
{
	struct acc_race *t = (struct acc_race *)f;

	CO_BEGIN(f);
	if (t->form == ACC_LINKED) {
		CO_AWAIT(f, co_timeout_at(&t->lim, co_accept(&t->io, t->lfd, NULL, NULL, SOCK_CLOEXEC),
					  t->end));
		t->res = co_result(f);
	} else if (t->form == ACC_CHILD) {
		t->kid.lfd = t->lfd;
		co_init(&t->kid.co, acc_kid_fn);
		CO_AWAIT(f, co_timeout_at(&t->lim, &t->kid.co, t->end));
		t->res = co_result(f);
	} else {
		assert_int_equal(co_acceptor_start(&t->acc, t->lfd, SOCK_CLOEXEC, acc_on_conn, t), 0);
		CO_AWAIT(f, co_timeout_at(&t->lim, co_chan_recv(&t->w, &t->ch, &t->got), t->end));
		t->res = co_result(f) == 0 ? t->got : co_result(f);
		assert_int_equal(co_acceptor_stop(&t->acc), 0);
	}
	CO_END(f);
}

static int acc_holder_fn(co_frame *f)
{
	struct acc_race *t = (struct acc_race *)(void *)((char *)f - offsetof(struct acc_race, holder));
	struct sockaddr_in a;

	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&t->hio)); /* the accept and the timer are in */
	a = co_test_loopback((uint16_t)t->port);
	t->client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(t->client, (struct sockaddr *)&a, sizeof a), 0);
	while (co_now_ns() < t->end + CO_MS)
		;
	CO_END(f);
}

static void test_accept_result_kept(void **state)
{
	static const char *names[ACC_FORMS] = { "co_accept", "a child", "an acceptor" };
	int fds = co_test_open_fds();

	(void)state;
	for (int form = 0; form < ACC_FORMS; form++) {
		int kept = 0;

		for (int round = 0; round < 20; round++) {
			struct acc_race t;
			co_frame *frames[2] = { &t.co, &t.holder };
			int fd = -1, other;
			char c = 0;

			memset(&t, 0, sizeof t);
			t.form = form;
			t.lfd = co_listen("127.0.0.1", 0, 0, 0);
			assert_true(t.lfd >= 0);
			t.port = co_local_port(t.lfd);
			assert_int_equal(co_chan_init(&t.ch, sizeof(int), 4, NULL), 0);
			t.end = co_now_ns() + 3 * CO_MS;
			co_init(&t.co, acc_race_fn);
			co_init(&t.holder, acc_holder_fn);
			co_test_run_frames(frames, 2);
			if (t.res >= 0) { /* the connection is the value */
				kept++;
				fd = t.res;
			} else { /* cut short: the connection waits for the next accept */
				struct pollfd pl = { .fd = t.lfd, .events = POLLIN };

				assert_int_equal(t.res, -ETIME);
				/* the acceptor's, in the channel; or in the listen queue
				 * (on a loaded machine the kernel may queue it only after
				 * the limit: the poll's bound is a hang guard) */
				if (form != ACC_ACCEPTOR || co_chan_try_recv(&t.ch, &fd) != 0) {
					/* not accepted: no descriptor but the listener's
					 * and the client's */
					assert_int_equal(co_test_open_fds(), fds + 2);
					assert_int_equal(poll(&pl, 1, 30000), 1);
					fd = accept(t.lfd, NULL, NULL);
				}
			}
			assert_true(fd >= 0);
			assert_int_equal(write(t.client, "k", 1), 1); /* it is that connection */
			assert_int_equal(read(fd, &c, 1), 1);
			assert_int_equal(c, 'k');
			assert_int_equal(co_chan_try_recv(&t.ch, &other), -EAGAIN); /* no other */
			close(fd);
			close(t.client);
			drain_listener(t.lfd);
			close(t.lfd);
			assert_int_equal(co_chan_destroy(&t.ch), 0);
			assert_int_equal(co_test_open_fds(), fds);
		}
		print_message("%-12s %d of 20 kept the connection at the limit\n", names[form], kept);
	}
}

/* Nagle off: TCP_NODELAY on co_listen's socket and the sockets accepted
 * from it, and on a dial's; CO_LISTEN_NAGLE leaves it on. */
static int nodelay(int fd)
{
	int on = -1;
	socklen_t len = sizeof on;

	assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len), 0);
	return on != 0;
}

static void test_no_delay(void **state)
{
	int fds = co_test_open_fds();

	(void)state;
	for (int nagle = 0; nagle < 2; nagle++) {
		int lfd = co_listen("127.0.0.1", 0, 0, nagle ? CO_LISTEN_NAGLE : 0), s;
		struct dial c;

		assert_true(lfd >= 0);
		assert_int_equal(nodelay(lfd), !nagle);
		dial_init(&c, NULL, "127.0.0.1", co_local_port(lfd), 0);
		co_test_run1(&c.co);
		assert_true(c.res >= 0);
		assert_int_equal(nodelay(c.res), 1); /* a dial's: always */
		s = accept(lfd, NULL, NULL);
		assert_true(s >= 0);
		assert_int_equal(nodelay(s), !nagle); /* inherited from the listener */
		close(s);
		close(c.res);
		close(lfd);
	}
	assert_int_equal(co_test_open_fds(), fds);
}

/* ---- what counts as a numeric address -------------------------------------------------------- */

/* The address fd is bound to, as inet_ntop writes it ("-" for neither family). */
static const char *bound_to(int fd, char *out, size_t n)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;

	assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
	if (ss.ss_family == AF_INET)
		return inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)n);
	if (ss.ss_family == AF_INET6)
		return inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, out, (socklen_t)n);
	return "-";
}

/* co_listen's addr and a co_dial host that needs no pool are what
 * getaddrinfo takes with AI_NUMERICHOST (net.md): IPv6 text, and IPv4 in
 * every inet_aton form, not only the dotted quad: "127.1" (a.b: b is the
 * last 24 bits), "0x7f.1", "0x7f000001" and "2130706433" (one number), and
 * "0177.0.0.1" (a leading 0 is octal) are all 127.0.0.1. glibc also takes
 * "*" as no host at all: for a dial, the loopback addresses; for a
 * listen, the wildcard (only its bound address is looked at, and it is
 * closed at once: nothing connects to it). Anything else,
 * spaces around an address included, is a name: co_listen answers -EINVAL,
 * and a dial without a pool -EINVAL before any address is tried. */
static void test_numeric_address_forms(void **state)
{
	static const char *const v4[] = { "127.0.0.1", "127.1",      "0x7f.1",
					  "0x7f000001", "2130706433", "0177.0.0.1" };
	static const char *const names[] = { "localhost", "",  " 127.0.0.1", "127.0.0.1 ",
					     "127.0.0.256", "[::1]", "127.0.0.1:80", "::1%lo",
					     "bogus!" };
	int fds = co_test_open_fds(), lfd, port, fd, l6;
	char got[INET6_ADDRSTRLEN];
	struct dial c;

	(void)state;
	alarm(30); /* loopback connects end at once; a dial that hangs fails here */
	lfd = co_listen("127.0.0.1", 0, 0, 0);
	assert_true(lfd >= 0);
	port = co_local_port(lfd);
	for (size_t i = 0; i < sizeof v4 / sizeof v4[0]; i++) {
		fd = co_listen(v4[i], 0, 0, 0);
		if (fd < 0)
			fail_msg("co_listen(\"%s\"): %d", v4[i], fd);
		assert_string_equal(bound_to(fd, got, sizeof got), "127.0.0.1");
		close(fd);
		dial_init(&c, NULL, v4[i], port, 0);
		co_test_run1(&c.co);
		if (c.res < 0)
			fail_msg("co_dial(\"%s\") without a pool: %d", v4[i], c.res);
		assert_int_equal(c.tried, 1);
		check_connected(lfd, c.res);
	}
	fd = co_listen("*", 0, 1, 0); /* every interface: closed at once */
	assert_true(fd >= 0);
	assert_string_equal(bound_to(fd, got, sizeof got), "0.0.0.0");
	close(fd);
	/* "*": no host; a dial tries the loopback addresses (::1 may come
	 * first and be refused: only 127.0.0.1 listens) */
	dial_init(&c, NULL, "*", port, 0);
	co_test_run1(&c.co);
	if (c.res < 0)
		fail_msg("co_dial(\"*\") without a pool: %d", c.res);
	assert_true(c.tried >= 1 && c.tried <= 2);
	check_connected(lfd, c.res);
	/* IPv6 text, and an IPv4-mapped IPv6 address, where the machine has IPv6 */
	l6 = co_listen("::1", 0, 0, 0);
	if (l6 >= 0) {
		assert_string_equal(bound_to(l6, got, sizeof got), "::1");
		dial_init(&c, NULL, "::1", co_local_port(l6), 0);
		co_test_run1(&c.co);
		assert_int_equal(c.tried, 1);
		check_connected(l6, c.res);
		close(l6);
		fd = co_listen("::ffff:127.0.0.1", 0, 0, 0);
		assert_true(fd >= 0);
		assert_string_equal(bound_to(fd, got, sizeof got), "::ffff:127.0.0.1");
		close(fd);
	} else {
		assert_true(l6 == -EADDRNOTAVAIL || l6 == -EAFNOSUPPORT);
	}
	/* names: refused by co_listen, and by a dial that has no pool */
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		fd = co_listen(names[i], 0, 0, 0);
		if (fd != -EINVAL)
			fail_msg("co_listen(\"%s\"): %d, not -EINVAL", names[i], fd);
		dial_init(&c, NULL, names[i], port, 0);
		co_test_run1(&c.co);
		if (c.res != -EINVAL || c.tried != 0)
			fail_msg("co_dial(\"%s\") without a pool: %d after %d addresses", names[i],
				 c.res, c.tried);
	}
	close(lfd);
	alarm(0);
	assert_int_equal(co_test_open_fds(), fds);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_listen_and_port),
	cmocka_unit_test(test_listen_errors),
	cmocka_unit_test(test_dial_numeric_and_names),
	cmocka_unit_test(test_dial_refused_and_unresolved),
	cmocka_unit_test(test_dial_huge_limit_with_a_name),
	cmocka_unit_test(test_dial_time_limit),
	cmocka_unit_test(test_dial_lookup_given_up),
	cmocka_unit_test(test_dial_cancel_and_misuse),
	cmocka_unit_test(test_dial_handed_out_refuses_a_second),
	cmocka_unit_test(test_dial_result_kept),
	cmocka_unit_test(test_accept_result_kept),
	cmocka_unit_test(test_no_delay),
	cmocka_unit_test(test_numeric_address_forms),
};

CO_TEST_MAIN(tests, 1)
