/* SPDX-License-Identifier: MIT */
/* What the tests share (helpers.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "helpers.h"

int co_test_skipped;

int co_test_main(int argc, char **argv, const struct CMUnitTest *tests, size_t n,
		 int needs_uring)
{
	int rc;

	if (needs_uring) {
		co_engine e;
		int err = co_engine_init(&e, NULL);

		if (err == -ENOSYS || err == -EPERM) {
			printf("skipped: io_uring is unavailable here (%s)\n", strerror(-err));
			return 77;
		}
		if (err == 0)
			co_engine_destroy(&e);
	}
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	rc = _cmocka_run_group_tests(argv[0], tests, n, NULL, NULL);
	return rc == 0 && argc > 1 && co_test_skipped ? 77 : rc;
}

void co_test_run_frames(co_frame **frames, int n)
{
	co_engine e;

	assert_int_equal(co_engine_init(&e, NULL), 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(co_engine_spawn(&e, frames[i]), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(e.inflight, 0);
	assert_int_equal(co_engine_destroy(&e), 0);
}

void co_test_run1(co_frame *f)
{
	co_test_run_frames(&f, 1);
}

int co_test_listen(uint16_t *port)
{
	struct sockaddr_in a = co_test_loopback(0);
	socklen_t len = sizeof a;
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(fd, 4096), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

void co_test_tcp_pair(int sv[2])
{
	uint16_t port;
	int lfd = co_test_listen(&port);
	struct sockaddr_in a = co_test_loopback(port);

	sv[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(sv[1] >= 0);
	assert_int_equal(connect(sv[1], (struct sockaddr *)&a, sizeof a), 0);
	sv[0] = accept(lfd, NULL, NULL);
	assert_true(sv[0] >= 0);
	close(lfd);
}

struct sockaddr_in co_test_loopback(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	return a;
}

int co_test_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void *runner_main(void *arg)
{
	co_test_runner *r = arg;

	r->ret = co_engine_run(r->e, r->mode);
	return NULL;
}

void co_test_runner_start(co_test_runner *r, co_engine *e, int mode)
{
	r->e = e;
	r->mode = mode;
	r->ret = 1;
	assert_int_equal(pthread_create(&r->th, NULL, runner_main, r), 0);
}

int co_test_runner_join(co_test_runner *r)
{
	pthread_join(r->th, NULL);
	return r->ret;
}

struct on_thread {
	int (*fn)(void *arg);
	void *arg;
	int ret;
};

static void *on_thread_main(void *arg)
{
	struct on_thread *t = arg;

	t->ret = t->fn(t->arg);
	return NULL;
}

int co_test_on_thread(int (*fn)(void *arg), void *arg)
{
	struct on_thread t = { fn, arg, 0 };
	pthread_t th;

	assert_int_equal(pthread_create(&th, NULL, on_thread_main, &t), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	return t.ret;
}

int co_test_task_fn(co_frame *f)
{
	struct co_test_task *t = (struct co_test_task *)f;

	CO_BEGIN(f);
	for (t->k = 0; t->k < t->yields; t->k++)
		CO_YIELD(f);
	atomic_fetch_add(&t->runs[t->id], 1);
	if (t->order)
		t->order[atomic_fetch_add(t->n, 1)] = t->id;
	CO_END(f);
}

static int counted_fn(co_frame *f)
{
	struct co_test_counted *t = (struct co_test_counted *)f;
	CO_BEGIN(f);
	atomic_fetch_add(&t->ran, 1);
	CO_END(f);
}

static void counted_done(co_frame *f)
{
	struct co_test_counted *t = (struct co_test_counted *)f;
	atomic_store(&t->status, co_status(f));
	atomic_fetch_add(&t->done, 1);
}

void co_test_counted_init(struct co_test_counted *t)
{
	memset(t, 0, sizeof *t);
	co_init(&t->co, counted_fn);
	t->co.on_done = counted_done;
}

static int sleeper_fn(co_frame *f)
{
	struct co_test_sleeper *s = (struct co_test_sleeper *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep(&s->io, s->ns));
	s->res = co_result(f);
	CO_END(f);
}

void co_test_sleeper_init(struct co_test_sleeper *s, uint64_t ns)
{
	memset(s, 0, sizeof *s);
	s->ns = ns;
	s->res = 1;
	co_init(&s->co, sleeper_fn);
}

int co_test_idler_fn(co_frame *f)
{
	struct co_test_idler *d = (struct co_test_idler *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_event_wait(&d->w, d->ev));
	CO_END(f);
}

void co_test_idler_init(struct co_test_idler *d, co_event *ev)
{
	memset(d, 0, sizeof *d);
	d->ev = ev;
	co_init(&d->co, co_test_idler_fn);
}

static char tmp_dir[256];
static pid_t tmp_dir_owner;

/* At exit of the process that made it (not of a forked child, whose
 * parent still reads the files): the directory and what a case left. */
static void tmp_dir_remove(void)
{
	DIR *d;
	struct dirent *e;
	char p[sizeof tmp_dir + 256 + 2];

	if (getpid() != tmp_dir_owner)
		return;
	d = opendir(tmp_dir);
	if (d) {
		while ((e = readdir(d)) != NULL) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			snprintf(p, sizeof p, "%s/%s", tmp_dir, e->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(tmp_dir);
}

const char *co_test_tmp_path(const char *prefix, const char *name)
{
	static char p[8][320];
	static int k;
	char *r = p[k++ % 8];

	if (tmp_dir[0] == '\0') {
		const char *base = getenv("TMPDIR");

		snprintf(tmp_dir, sizeof tmp_dir, "%s/%s-XXXXXX",
			 base && base[0] ? base : "/tmp", prefix);
		assert_non_null(mkdtemp(tmp_dir));
		tmp_dir_owner = getpid();
		atexit(tmp_dir_remove);
	}
	snprintf(r, sizeof p[0], "%s/%s", tmp_dir, name);
	return r;
}

uint64_t co_test_huge_ns(int k)
{
	switch (k) {
	case 0: return UINT64_MAX;
	case 1: return UINT64_MAX - 5;
	case 2: return UINT64_MAX - co_now_ns() + 1; /* now + ns wraps to 0 */
	case 3: return UINT64_MAX - co_now_ns() / 2;
	case 4: return (uint64_t)1 << 63;
	default: return ((uint64_t)1 << 63) - 1;
	}
}

int co_test_echo_fn(co_frame *f)
{
	struct co_test_echo *c = (struct co_test_echo *)f;
	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_recv(&c->io, c->fd, c->buf, sizeof c->buf, 0));
		c->n = c->end = co_result(f);
		if (c->n <= 0)
			break; /* EOF, -ECONNRESET, -ECANCELED */
		CO_AWAIT(f, co_send_all(&c->x, c->fd, c->buf, (size_t)c->n, MSG_NOSIGNAL));
		c->end = co_result(f);
		if (c->end < 0)
			break;
	}
	CO_AWAIT(f, co_close(&c->io, c->fd));
	CO_END(f);
}
