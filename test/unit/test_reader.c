/* SPDX-License-Identifier: MIT */
/*
 * The buffered reader (lib/reader/reader.c, coring/reader.h), over co_recv and
 * over a stream: random scripts of delimiter and exact reads whose bytes
 * arrive in random pieces, every byte checked; reads that complete in the
 * call; views in place in a stream's buffer and copies across two; a peer
 * that closes or resets mid-line; a line longer than the limit; a slow
 * sender against the time limit; co_timeout and co_cancel of a read;
 * every misuse; allocation failures; no allocation per read. Peers are
 * plain threads with blocking sockets. Durations are hang guards only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <unistd.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <cmocka.h>

#include <coring/coring.h>
#include "common/fault.h"
#include "helpers.h"

#define MAX_STEPS 512

/* ---- a peer: a thread that writes bytes in pieces ---------------------------------- */

struct peer {
	pthread_t th;
	int fd;
	const char *data;
	size_t len, chunk;        /* chunk 0: random pieces of 1..64 bytes */
	unsigned seed;
	int then;                 /* 0: shutdown(SHUT_WR); 1: reset; 2: nothing */
	atomic_int *go;           /* wait for it before writing, if set */
	int bad;
};

static void *peer_main(void *arg)
{
	struct peer *p = arg;
	size_t done = 0;

	if (p->go)
		WAIT_UNTIL(atomic_load(p->go));
	while (done < p->len) {
		size_t n = p->chunk ? p->chunk : 1 + (size_t)rand_r(&p->seed) % 64;
		ssize_t w;

		if (n > p->len - done)
			n = p->len - done;
		w = write(p->fd, p->data + done, n);
		if (w <= 0) {
			p->bad = 1;
			return NULL;
		}
		done += (size_t)w;
		if (p->chunk == 0 && rand_r(&p->seed) % 4 == 0)
			usleep(100); /* let the reader catch up now and then */
	}
	if (p->then == 1) {
		struct linger l = { 1, 0 };
		setsockopt(p->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
		close(p->fd); /* a reset after the data */
		p->fd = -1;
	} else if (p->then == 0) {
		shutdown(p->fd, SHUT_WR);
	}
	return NULL;
}

static void peer_start(struct peer *p, int fd, const char *data, size_t len, size_t chunk)
{
	p->fd = fd;
	p->data = data;
	p->len = len;
	p->chunk = chunk;
	assert_int_equal(pthread_create(&p->th, NULL, peer_main, p), 0);
}

static void peer_join(struct peer *p)
{
	pthread_join(p->th, NULL);
	assert_int_equal(p->bad, 0);
	if (p->fd >= 0)
		close(p->fd);
}

/* Run f on e until nothing is left; nothing stays in flight. */
static void co_test_run1_on(co_engine *e, co_frame *f)
{
	assert_int_equal(co_engine_spawn(e, f), 0);
	assert_int_equal(co_engine_run(e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(e->inflight, 0);
}

/* ---- a script of reads ------------------------------------------------------------------- */

enum { UNTIL = 1, EXACT = 2 };

struct step {
	int op;
	const char *delim;        /* UNTIL */
	size_t n;                 /* EXACT: n; UNTIL: the line's expected length */
	size_t at;                /* where its bytes start in the peer's data */
	int expect;               /* the read's value (> 0: n, the bytes at at) */
};

struct script {
	co_frame co;
	co_reader r;
	co_stream s;
	co_bufring *ring;         /* read through a stream on it, if set */
	co_reader_opts o;
	int fd, init, nsteps, i;
	const struct step *steps;
	const char *expect;       /* the peer's data */
	int res[MAX_STEPS];
	int at_once[MAX_STEPS];   /* the read completed in the call */
	int in_place[MAX_STEPS];  /* its view was in the ring's buffers */
	size_t held[MAX_STEPS];   /* co_reader_buffered after it */
	size_t cap1;              /* limits_fn: the buffer after two refusals */
	int bad;                  /* a value or a byte differed */
	int last;                 /* one more until after the steps */
	int destroy;
	co_frame *rf;
};

static int in_ring(const co_bufring *b, const char *p)
{
	return b && p >= b->bufs && p < b->bufs + (size_t)b->count * b->size;
}

static int script_fn(co_frame *f)
{
	struct script *s = (struct script *)f;
	const struct step *st;

	CO_BEGIN(f);
	if (s->ring) {
		assert_int_equal(co_stream_open(&s->s, s->ring, s->fd), 0);
		s->init = co_reader_init_stream(&s->r, &s->s, &s->o);
	} else {
		s->init = co_reader_init(&s->r, s->fd, &s->o);
	}
	if (s->init < 0)
		CO_RETURN(f, s->init);
	for (s->i = 0; s->i < s->nsteps; s->i++) {
		st = &s->steps[s->i];
		s->rf = st->op == UNTIL ? co_reader_until(&s->r, st->delim, strlen(st->delim))
				       : co_reader_exact(&s->r, st->n);
		s->at_once[s->i] = co_done(s->rf);
		CO_AWAIT(f, s->rf);
		st = &s->steps[s->i];
		s->res[s->i] = co_result(f);
		s->held[s->i] = co_reader_buffered(&s->r);
		if (co_result(f) != st->expect)
			s->bad++;
		else if (co_result(f) <= 0)
			continue;
		else if ((size_t)co_result(f) != s->r.len || s->r.len != st->n ||
			 memcmp(s->r.data, s->expect + st->at, st->n) != 0)
			s->bad++;
		s->in_place[s->i] = in_ring(s->ring, s->r.data);
	}
	CO_AWAIT(f, co_reader_until(&s->r, "\n", 1));
	s->last = co_result(f);
	s->destroy = co_reader_destroy(&s->r);
	if (s->ring)
		CO_AWAIT(f, co_stream_close(&s->s));
	CO_END(f);
}

static void script_init(struct script *s, int fd, co_bufring *ring, const struct step *steps,
			int n, const char *expect)
{
	memset(s, 0, sizeof *s);
	s->fd = fd;
	s->ring = ring;
	s->steps = steps;
	s->nsteps = n;
	s->expect = expect;
	co_init(&s->co, script_fn);
}

/* Run s on a fresh engine (a ring of count buffers of size bytes if
 * count) against a peer writing data in pieces of chunk bytes. */
static void script_run(struct script *s, struct peer *p, unsigned count, unsigned size,
		       const char *data, size_t len, size_t chunk)
{
	co_engine e;
	co_bufring ring;
	int sv[2];

	co_test_tcp_pair(sv);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	if (count)
		assert_int_equal(co_bufring_init(&ring, &e, count, size), 0);
	s->fd = sv[0];
	s->ring = count ? &ring : NULL;
	if (chunk == SIZE_MAX) { /* all of it in the socket before the reader starts */
		assert_int_equal(write(sv[1], data, len), (ssize_t)len);
		len = 0;
	}
	peer_start(p, sv[1], data, len, chunk);
	assert_int_equal(co_engine_spawn(&e, &s->co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	peer_join(p);
	assert_int_equal(e.inflight, 0);
	if (count)
		assert_int_equal(co_bufring_destroy(&ring), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	close(sv[0]);
	s->ring = NULL;
}

/* ---- random scripts: every read returns its bytes, in order --------------------------- */

static const char *const delims[] = { "\n", "\r\n", "|", "##", "<END>", "\r\n\r\n" };

/* A random script of n reads and the data a peer sends for it: line
 * bytes from [a-z0-9] (no delimiter character), so that each line's first
 * delimiter is its end; exact reads of any bytes. Returns the length. */
static size_t make_script(struct step *steps, int n, char *data, unsigned seed, size_t maxline)
{
	size_t at = 0;

	for (int i = 0; i < n; i++) {
		size_t k = (size_t)rand_r(&seed) % maxline;

		steps[i].at = at;
		if (rand_r(&seed) % 3) {
			const char *d = delims[(size_t)rand_r(&seed) % (sizeof delims / sizeof delims[0])];

			for (size_t j = 0; j < k; j++)
				data[at++] = "abcdefghijklmnopqrstuvwxyz0123456789"[rand_r(&seed) % 36];
			memcpy(data + at, d, strlen(d));
			at += strlen(d);
			steps[i] = (struct step){ UNTIL, d, k + strlen(d), steps[i].at,
						  (int)(k + strlen(d)) };
		} else {
			for (size_t j = 0; j <= k; j++)
				data[at++] = (char)rand_r(&seed);
			steps[i] = (struct step){ EXACT, NULL, k + 1, steps[i].at, (int)k + 1 };
		}
	}
	return at;
}

/* count 0: over co_recv; else over a stream on a ring of count x size. */
static void random_scripts(unsigned count, unsigned size, int rounds)
{
	static struct step steps[MAX_STEPS];
	static char data[MAX_STEPS * 80];
	static struct script s;
	int in_place = 0, copied = 0;

	for (int round = 0; round < rounds; round++) {
		struct peer p = { .seed = (unsigned)round + 7 };
		size_t len = make_script(steps, 300, data, (unsigned)round + 1, 64);

		script_init(&s, -1, NULL, steps, 300, data);
		s.o = (co_reader_opts){ .size = (size_t)8 << (round % 4), .max = 128 };
		script_run(&s, &p, count, size, data, len, 0);
		assert_int_equal(s.init, 0);
		for (int i = 0; i < 300; i++) {
			assert_int_equal(s.res[i], (int)steps[i].n);
			in_place += s.in_place[i];
			copied += count && !s.in_place[i];
		}
		assert_int_equal(s.bad, 0);
		assert_int_equal(s.last, 0); /* then the end of file */
		assert_int_equal(s.destroy, 0);
	}
	if (count) { /* small buffers: some reads in place, some across two */
		assert_true(in_place > 0);
		assert_true(copied > 0);
	}
}

static void test_random_reads_over_recv(void **state)
{
	(void)state;
	random_scripts(0, 0, 12);
}

static void test_random_reads_over_stream(void **state)
{
	(void)state;
	random_scripts(64, 16, 12); /* 16-byte buffers: lines span several */
	random_scripts(64, 1024, 4);
}

/* ---- reads in the call; views in place; the bytes across two buffers -------------- */

/* Three lines in the socket before the first read: the first read waits,
 * the next two complete in the call (a finished frame). */
static void test_reads_complete_in_the_call(void **state)
{
	static const char data[] = "one\ntwo\nthree\n";
	static const struct step steps[] = {
		{ UNTIL, "\n", 4, 0, 4 }, { UNTIL, "\n", 4, 4, 4 }, { UNTIL, "\n", 6, 8, 6 },
	};
	static struct script s;

	(void)state;
	for (int stream = 0; stream < 2; stream++) {
		struct peer p = { 0 };

		script_init(&s, -1, NULL, steps, 3, data);
		script_run(&s, &p, stream ? 8 : 0, 64, data, strlen(data), SIZE_MAX);
		assert_int_equal(s.bad, 0);
		assert_int_equal(s.at_once[0], 0);
		assert_int_equal(s.at_once[1], 1);
		assert_int_equal(s.at_once[2], 1);
		assert_int_equal(s.held[0], 10);
		assert_int_equal(s.held[2], 0);
		assert_int_equal(s.in_place[1], stream); /* over a stream: in its buffer */
		assert_int_equal(s.last, 0);
	}
}

/* 16-byte stream buffers holding "abcdefghij\n01234" "56789ABCDE\nwxyzt" "ail\n":
 * the first line is a view into the first buffer; the second spans two and
 * is copied, and what the search copied past its end is given back, so the
 * exact read after it is in place again; the last spans two again. */
static void test_in_place_and_across_buffers(void **state)
{
	static const char data[] = "abcdefghij\n0123456789ABCDE\nwxyztail\n";
	static const struct step steps[] = {
		{ UNTIL, "\n", 11, 0, 11 }, { UNTIL, "\n", 16, 11, 16 },
		{ EXACT, NULL, 4, 27, 4 }, { UNTIL, "\n", 5, 31, 5 },
	};
	static struct script s;
	struct peer p = { 0 };

	(void)state;
	script_init(&s, -1, NULL, steps, 4, data);
	script_run(&s, &p, 8, 16, data, strlen(data), SIZE_MAX);
	assert_int_equal(s.bad, 0);
	assert_int_equal(s.in_place[0], 1);
	assert_int_equal(s.in_place[1], 0);
	assert_int_equal(s.in_place[2], 1);
	assert_int_equal(s.in_place[3], 0);
	assert_int_equal(s.last, 0);
}

/* ---- the end of the input inside a read ---------------------------------------------- */

/* "abc" then the end: a line cannot end (-EPROTO, the bytes stay), again;
 * exact reads take what is there; then 0, and 0 again. */
static void test_peer_closes_mid_line(void **state)
{
	static const char data[] = "abc";
	static const struct step steps[] = {
		{ UNTIL, "\n", 0, 0, -EPROTO }, { UNTIL, "\n", 0, 0, -EPROTO },
		{ EXACT, NULL, 2, 0, 2 }, { EXACT, NULL, 2, 0, -EPROTO },
		{ EXACT, NULL, 1, 2, 1 }, { UNTIL, "\n", 0, 0, 0 }, { EXACT, NULL, 5, 0, 0 },
	};
	static struct script s;

	(void)state;
	for (int stream = 0; stream < 2; stream++) {
		struct peer p = { 0 };

		script_init(&s, -1, NULL, steps, 7, data);
		script_run(&s, &p, stream ? 8 : 0, 64, data, 3, 1);
		assert_int_equal(s.bad, 0);
		assert_int_equal(s.held[0], 3);
		assert_int_equal(s.held[1], 3);
		assert_int_equal(s.held[3], 1);
		assert_int_equal(s.last, 0);
	}
}

/* A reset after "abc\nde": the line, then -ECONNRESET; the bytes before it
 * are still read; then -ECONNRESET for good. */
static void test_peer_resets_mid_line(void **state)
{
	static const char data[] = "abc\nde";
	static const struct step steps[] = {
		{ UNTIL, "\n", 4, 0, 4 }, { UNTIL, "\n", 0, 0, -ECONNRESET },
		{ EXACT, NULL, 2, 4, 2 }, { UNTIL, "\n", 0, 0, -ECONNRESET },
		{ EXACT, NULL, 1, 0, -ECONNRESET },
	};
	static struct script s;

	(void)state;
	for (int stream = 0; stream < 2; stream++) {
		struct peer p = { .then = 1 };

		script_init(&s, -1, NULL, steps, 5, data);
		script_run(&s, &p, stream ? 8 : 0, 64, data, 6, SIZE_MAX);
		assert_int_equal(s.bad, 0);
		assert_int_equal(s.last, -ECONNRESET);
	}
}

/* ---- the size limit ---------------------------------------------------------------------- */

/* max 16: no delimiter in 16 bytes is -EMSGSIZE, again (nothing consumed);
 * exact 17 too, exact 16 works; a 16-byte line passes, a 17-byte one does
 * not, until max is raised between reads; a line buffered already but
 * longer than a lowered max is refused as well. */
static int limits_fn(co_frame *f)
{
	struct script *s = (struct script *)f;

	CO_BEGIN(f);
	if (s->ring) {
		assert_int_equal(co_stream_open(&s->s, s->ring, s->fd), 0);
		s->init = co_reader_init_stream(&s->r, &s->s, &s->o);
	} else {
		s->init = co_reader_init(&s->r, s->fd, &s->o);
	}
	assert_int_equal(s->init, 0);
	CO_AWAIT(f, co_reader_until(&s->r, "\n", 1));
	s->res[0] = co_result(f);
	CO_AWAIT(f, co_reader_until(&s->r, "\n", 1));
	s->res[1] = co_result(f);
	s->held[1] = co_reader_buffered(&s->r);
	s->cap1 = s->r.cap;
	CO_AWAIT(f, co_reader_exact(&s->r, 17));
	s->res[2] = co_result(f);
	CO_AWAIT(f, co_reader_exact(&s->r, 16));
	s->res[3] = co_result(f);
	s->bad += memcmp(s->r.data, "0123456789abcdef", 16) != 0;
	CO_AWAIT(f, co_reader_until(&s->r, "\n", 1));
	s->res[4] = co_result(f);
	CO_AWAIT(f, co_reader_until(&s->r, "\r\n", 2));
	s->res[5] = co_result(f); /* 16 bytes: fits */
	CO_AWAIT(f, co_reader_until(&s->r, "\r\n", 2));
	s->res[6] = co_result(f); /* 17: does not */
	s->r.max = 32;
	CO_AWAIT(f, co_reader_until(&s->r, "\r\n", 2));
	s->res[7] = co_result(f);
	s->bad += s->r.len != 17 || memcmp(s->r.data, "0123456789abcde\r\n", 17) != 0;
	CO_AWAIT(f, co_reader_exact(&s->r, 1)); /* "x": the next line is buffered now */
	s->r.max = 8;
	CO_AWAIT(f, co_reader_until(&s->r, "\n", 1));
	s->res[8] = co_result(f);
	s->r.max = 32;
	CO_AWAIT(f, co_reader_until(&s->r, "\n", 1));
	s->res[9] = co_result(f);
	s->last = co_reader_destroy(&s->r);
	if (s->ring)
		CO_AWAIT(f, co_stream_close(&s->s));
	CO_END(f);
}

static void test_line_longer_than_the_limit(void **state)
{
	static const char data[] = "0123456789abcdefXYZ\n0123456789abcd\r\n0123456789abcde\r\n"
				   "x0123456789\n";
	static struct script s;
	static const unsigned sizes[] = { 0, 8, 64 };

	(void)state;
	for (int i = 0; i < 3; i++) {
		struct peer p = { 0 };

		script_init(&s, -1, NULL, NULL, 0, data);
		co_init(&s.co, limits_fn);
		s.o = (co_reader_opts){ .size = 8, .max = 16 };
		script_run(&s, &p, sizes[i] ? 8 : 0, sizes[i], data, strlen(data), SIZE_MAX);
		assert_int_equal(s.res[0], -EMSGSIZE);
		assert_int_equal(s.res[1], -EMSGSIZE);
		assert_true(s.held[1] >= 16);
		assert_true(s.cap1 <= 16); /* the buffer did not grow past the limit */
		assert_int_equal(s.res[2], -EMSGSIZE);
		assert_int_equal(s.res[3], 16);
		assert_int_equal(s.res[4], 4);
		assert_int_equal(s.res[5], 16);
		assert_int_equal(s.res[6], -EMSGSIZE);
		assert_int_equal(s.res[7], 17);
		assert_int_equal(s.res[8], -EMSGSIZE);
		assert_int_equal(s.res[9], 11);
		assert_int_equal(s.bad, 0);
		assert_int_equal(s.last, 0);
	}
}

/* A line of 100 bytes against a limit of 16, over co_recv and over
 * 64-byte stream buffers (the first holds no delimiter): -EMSGSIZE, and
 * the buffer stays within 16. */
struct toolong {
	co_frame co;
	co_reader r;
	co_stream s;
	co_bufring *ring;
	int fd, res;
	size_t cap;
};

static int toolong_fn(co_frame *f)
{
	struct toolong *t = (struct toolong *)f;
	co_reader_opts o = { .size = 8, .max = 16 };

	CO_BEGIN(f);
	if (t->ring) {
		assert_int_equal(co_stream_open(&t->s, t->ring, t->fd), 0);
		assert_int_equal(co_reader_init_stream(&t->r, &t->s, &o), 0);
	} else {
		assert_int_equal(co_reader_init(&t->r, t->fd, &o), 0);
	}
	CO_AWAIT(f, co_reader_until(&t->r, "\n", 1));
	t->res = co_result(f);
	t->cap = t->r.cap;
	assert_int_equal(co_reader_destroy(&t->r), 0);
	if (t->ring)
		CO_AWAIT(f, co_stream_close(&t->s));
	CO_END(f);
}

static void test_no_delimiter_within_the_limit(void **state)
{
	char line[101];

	(void)state;
	memset(line, 'z', 100);
	line[100] = '\n';
	for (int stream = 0; stream < 2; stream++) {
		struct toolong t;
		co_engine e;
		co_bufring ring;
		int sv[2];

		co_test_tcp_pair(sv);
		memset(&t, 0, sizeof t);
		assert_int_equal(co_engine_init(&e, NULL), 0);
		if (stream)
			assert_int_equal(co_bufring_init(&ring, &e, 4, 64), 0);
		assert_int_equal(write(sv[1], line, sizeof line), (ssize_t)sizeof line);
		t.fd = sv[0];
		t.ring = stream ? &ring : NULL;
		co_init(&t.co, toolong_fn);
		co_test_run1_on(&e, &t.co);
		assert_int_equal(t.res, -EMSGSIZE);
		assert_true(t.cap <= 16);
		if (stream)
			assert_int_equal(co_bufring_destroy(&ring), 0);
		assert_int_equal(co_engine_destroy(&e), 0);
		close(sv[0]);
		close(sv[1]);
	}
}

/* ---- the time limit ------------------------------------------------------------------------- */

/* A sender that trickles one byte at a time, never the end of the line,
 * until told to finish it; then it ends its side once told so. */
struct trickle {
	pthread_t th;
	int fd;
	atomic_int finish, end;
	size_t sent;
};

static void *trickle_main(void *arg)
{
	struct trickle *t = arg;

	while (!atomic_load(&t->finish)) {
		if (write(t->fd, "x", 1) != 1)
			return NULL;
		t->sent++;
		usleep(2000);
	}
	if (write(t->fd, "\n", 1) != 1)
		return NULL;
	t->sent++;
	WAIT_UNTIL(atomic_load(&t->end));
	shutdown(t->fd, SHUT_WR);
	return NULL;
}

struct slow {
	co_frame co;
	co_reader r;
	co_stream s;
	co_limit lim;
	co_bufring *ring;
	struct trickle *t;
	int fd, res[4];
	size_t held, len1;
};

/* A read under the reader's own limit ends with -ETIME although bytes
 * keep coming (the limit is the read's, not each recv's); nothing is
 * lost: once the line ends, the next read returns every byte. Then a
 * co_timeout of a read on an idle socket: -ETIME, and the reader goes on. */
static int slow_fn(co_frame *f)
{
	struct slow *s = (struct slow *)f;
	co_reader_opts o = { .max = 1 << 20, .timeout_ns = 30 * CO_MS };

	CO_BEGIN(f);
	if (s->ring) {
		assert_int_equal(co_stream_open(&s->s, s->ring, s->fd), 0);
		assert_int_equal(co_reader_init_stream(&s->r, &s->s, &o), 0);
	} else {
		assert_int_equal(co_reader_init(&s->r, s->fd, &o), 0);
	}
	CO_AWAIT(f, co_reader_until(&s->r, "\n", 1));
	s->res[0] = co_result(f);
	s->held = co_reader_buffered(&s->r);
	atomic_store(&s->t->finish, 1);
	s->r.timeout_ns = 0;
	CO_AWAIT(f, co_reader_until(&s->r, "\n", 1));
	s->res[1] = co_result(f);
	s->len1 = s->r.len;
	CO_AWAIT(f, co_timeout(&s->lim, co_reader_until(&s->r, "\n", 1), 20 * CO_MS));
	s->res[2] = co_result(f);
	atomic_store(&s->t->end, 1);
	CO_AWAIT(f, co_reader_until(&s->r, "\n", 1)); /* the peer's end: 0 */
	s->res[3] = co_result(f);
	assert_int_equal(co_reader_destroy(&s->r), 0);
	if (s->ring)
		CO_AWAIT(f, co_stream_close(&s->s));
	CO_END(f);
}

static void test_slow_sender_time_limit(void **state)
{
	(void)state;
	for (int stream = 0; stream < 2; stream++) {
		struct trickle t = { .fd = -1 };
		struct slow s;
		co_engine e;
		co_bufring ring;
		int sv[2];

		co_test_tcp_pair(sv);
		memset(&s, 0, sizeof s);
		assert_int_equal(co_engine_init(&e, NULL), 0);
		if (stream)
			assert_int_equal(co_bufring_init(&ring, &e, 16, 64), 0);
		t.fd = sv[1];
		assert_int_equal(write(sv[1], "x", 1), 1); /* a byte before the read */
		t.sent = 1;
		assert_int_equal(pthread_create(&t.th, NULL, trickle_main, &t), 0);
		s.fd = sv[0];
		s.t = &t;
		s.ring = stream ? &ring : NULL;
		co_init(&s.co, slow_fn);
		assert_int_equal(co_engine_spawn(&e, &s.co), 0);
		assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
		pthread_join(t.th, NULL);
		assert_int_equal(s.res[0], -ETIME);
		assert_true(s.held >= 1);
		assert_int_equal(s.res[1], (int)t.sent); /* every byte, then "\n" */
		assert_int_equal(s.len1, t.sent);
		assert_int_equal(s.res[2], -ETIME);
		assert_int_equal(s.res[3], 0);
		assert_int_equal(e.inflight, 0);
		close(sv[0]);
		close(sv[1]);
		if (stream)
			assert_int_equal(co_bufring_destroy(&ring), 0);
		assert_int_equal(co_engine_destroy(&e), 0);
	}
}

/* A time limit whose sum with the clock would wrap (timeout_ns near
 * UINT64_MAX, co_test_huge_ns) is no limit, not "at once": a read that
 * waits 5 ms for its line gets it, over co_recv and over a stream. */
struct huge {
	co_frame co;
	co_reader r;
	co_stream s;
	co_bufring *ring;
	uint64_t ns;
	int fd, res;
};

static int huge_fn(co_frame *f)
{
	struct huge *h = (struct huge *)f;
	co_reader_opts o = { .max = 64, .timeout_ns = h->ns };

	CO_BEGIN(f);
	if (h->ring) {
		assert_int_equal(co_stream_open(&h->s, h->ring, h->fd), 0);
		assert_int_equal(co_reader_init_stream(&h->r, &h->s, &o), 0);
	} else {
		assert_int_equal(co_reader_init(&h->r, h->fd, &o), 0);
	}
	CO_AWAIT(f, co_reader_until(&h->r, "\n", 1));
	h->res = co_result(f);
	assert_int_equal(co_reader_destroy(&h->r), 0);
	if (h->ring)
		CO_AWAIT(f, co_stream_close(&h->s));
	CO_END(f);
}

static void *late_line(void *arg)
{
	usleep(5000);
	if (write(*(int *)arg, "hi\n", 3) != 3)
		abort();
	return NULL;
}

static void test_huge_time_limit_never_fires(void **state)
{
	(void)state;
	for (int stream = 0; stream < 2; stream++) {
		for (int k = 0; k < CO_TEST_HUGE_KINDS; k++) {
			struct huge h;
			co_engine e;
			co_bufring ring;
			pthread_t th;
			int sv[2];

			co_test_tcp_pair(sv);
			memset(&h, 0, sizeof h);
			assert_int_equal(co_engine_init(&e, NULL), 0);
			if (stream)
				assert_int_equal(co_bufring_init(&ring, &e, 8, 64), 0);
			h.fd = sv[0];
			h.ring = stream ? &ring : NULL;
			h.ns = co_test_huge_ns(k);
			assert_int_equal(pthread_create(&th, NULL, late_line, &sv[1]), 0);
			co_init(&h.co, huge_fn);
			co_test_run1_on(&e, &h.co);
			pthread_join(th, NULL);
			if (h.res != 3)
				fail_msg("%s, limit kind %d: %d", stream ? "stream" : "recv", k, h.res);
			if (stream)
				assert_int_equal(co_bufring_destroy(&ring), 0);
			assert_int_equal(co_engine_destroy(&e), 0);
			close(sv[0]);
			close(sv[1]);
		}
	}
}

/* A stream that holds buffers when the reader takes it over: the reader
 * reads them first. */
struct held {
	co_frame co;
	co_bufring ring;
	co_stream s;
	co_reader r;
	int fd, got, res[2];
	char line[32];
};

static int held_fn(co_frame *f)
{
	struct held *h = (struct held *)f;

	CO_BEGIN(f);
	assert_int_equal(co_bufring_init(&h->ring, co_engine_current(), 8, 64), 0);
	assert_int_equal(co_stream_open(&h->s, &h->ring, h->fd), 0);
	CO_AWAIT(f, co_stream_recv(&h->s)); /* the stream holds "first\nsecond\n" */
	h->got = co_result(f);
	assert_int_equal(co_reader_init_stream(&h->r, &h->s, NULL), 0);
	CO_AWAIT(f, co_reader_until(&h->r, "\n", 1));
	h->res[0] = co_result(f);
	if (h->res[0] > 0 && h->res[0] < (int)sizeof h->line)
		memcpy(h->line, h->r.data, (size_t)h->res[0]);
	CO_AWAIT(f, co_reader_until(&h->r, "\n", 1));
	h->res[1] = co_result(f);
	assert_int_equal(co_reader_destroy(&h->r), 0);
	CO_AWAIT(f, co_stream_close(&h->s));
	assert_int_equal(co_bufring_destroy(&h->ring), 0);
	CO_END(f);
}

/* The stream closed (and its ring destroyed) while the reader still holds
 * part of its buffers, which the rules forbid: the reader reads none of
 * them again: nothing buffered, nothing to peek, a read is -EINVAL. */
struct gone {
	co_frame co;
	co_bufring ring;
	co_stream s;
	co_reader r;
	int fd, first, after;
	size_t buffered_before, buffered_after, len_after;
	const char *peek_after;
};

static int gone_fn(co_frame *f)
{
	struct gone *g = (struct gone *)f;
	co_frame *read;

	CO_BEGIN(f);
	assert_int_equal(co_bufring_init(&g->ring, co_engine_current(), 8, 64), 0);
	assert_int_equal(co_stream_open(&g->s, &g->ring, g->fd), 0);
	assert_int_equal(co_reader_init_stream(&g->r, &g->s, NULL), 0);
	CO_AWAIT(f, co_reader_until(&g->r, "\n", 1));
	g->first = co_result(f);
	g->buffered_before = co_reader_buffered(&g->r); /* "second\n", in the ring */
	CO_AWAIT(f, co_stream_close(&g->s));
	assert_int_equal(co_bufring_destroy(&g->ring), 0); /* the buffers unmapped */
	g->buffered_after = co_reader_buffered(&g->r);
	g->peek_after = co_reader_peek(&g->r, NULL);
	read = co_reader_until(&g->r, "\n", 1);
	assert_true(co_done(read));
	g->after = co_status(read);
	g->len_after = g->r.len;
	assert_int_equal(co_reader_destroy(&g->r), 0);
	CO_END(f);
}

static void test_stream_closed_under_reader(void **state)
{
	struct gone g;
	int sv[2];

	(void)state;
	co_test_tcp_pair(sv);
	memset(&g, 0, sizeof g);
	assert_int_equal(write(sv[1], "first\nsecond\n", 13), 13);
	g.fd = sv[0];
	co_init(&g.co, gone_fn);
	co_test_run1(&g.co);
	assert_int_equal(g.first, 6);
	assert_int_equal(g.buffered_before, 7);
	assert_int_equal(g.buffered_after, 0);
	assert_null(g.peek_after);
	assert_int_equal(g.after, -EINVAL);
	assert_int_equal(g.len_after, 0);
	close(sv[0]);
	close(sv[1]);
}

static void test_stream_held_before_init(void **state)
{
	struct held h;
	int sv[2];

	(void)state;
	co_test_tcp_pair(sv);
	memset(&h, 0, sizeof h);
	assert_int_equal(write(sv[1], "first\nsecond\n", 13), 13);
	h.fd = sv[0];
	co_init(&h.co, held_fn);
	co_test_run1(&h.co);
	assert_int_equal(h.got, 13);
	assert_int_equal(h.res[0], 6);
	assert_memory_equal(h.line, "first\n", 6);
	assert_int_equal(h.res[1], 7);
	close(sv[0]);
	close(sv[1]);
}

/* ---- co_cancel, a read in progress, no engine ------------------------------------------------ */

struct party {
	co_frame co;
	co_reader *r;
	struct party *other;
	atomic_int *go;           /* the peer may send the rest */
	int res, busy_read, busy_destroy, cancel;
	size_t held;
	char line[16];
};

/* A waits in a read of a line whose first bytes came. */
static int party_a(co_frame *f)
{
	struct party *p = (struct party *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_reader_until(p->r, "\n", 1));
	p->res = co_result(f);
	p->held = co_reader_buffered(p->r);
	CO_END(f);
}

/* C: while A waits, a second read and a destroy are refused; then C
 * cancels A. */
static int party_c(co_frame *f)
{
	struct party *p = (struct party *)f;

	CO_BEGIN(f);
	CO_AWAIT_UNTIL(f, co_waiting(&p->other->co));
	CO_AWAIT(f, co_reader_until(p->r, "\n", 1));
	p->busy_read = co_result(f);
	p->busy_destroy = co_reader_destroy(p->r);
	p->cancel = co_cancel(&p->other->co);
	CO_END(f);
}

/* B: once A has ended, the rest comes, and B reads the whole line. */
static int party_b(co_frame *f)
{
	struct party *p = (struct party *)f;

	CO_BEGIN(f);
	CO_AWAIT_UNTIL(f, co_done(&p->other->co));
	atomic_store(p->go, 1);
	CO_AWAIT(f, co_reader_until(p->r, "\n", 1));
	p->res = co_result(f);
	if (p->res > 0 && p->res < (int)sizeof p->line)
		memcpy(p->line, p->r->data, (size_t)p->res);
	CO_END(f);
}

static void *send_rest(void *arg)
{
	struct peer *p = arg;

	WAIT_UNTIL(atomic_load(p->go));
	if (write(p->fd, "cd\n", 3) != 3)
		p->bad = 1;
	return NULL;
}

static void test_cancel_and_busy(void **state)
{
	struct party a = { 0 }, b = { 0 }, c = { 0 };
	co_frame *frames[3] = { &a.co, &c.co, &b.co };
	atomic_int go = 0;
	struct peer p = { .go = &go };
	co_reader r;
	int sv[2];

	(void)state;
	co_test_tcp_pair(sv);
	assert_int_equal(co_reader_init(&r, sv[0], NULL), 0);
	assert_int_equal(write(sv[1], "ab", 2), 2);
	p.fd = sv[1];
	assert_int_equal(pthread_create(&p.th, NULL, send_rest, &p), 0);
	a.r = b.r = c.r = &r;
	c.other = &a;
	b.other = &a;
	b.go = &go;
	co_init(&a.co, party_a);
	co_init(&b.co, party_b);
	co_init(&c.co, party_c);
	co_test_run_frames(frames, 3);
	pthread_join(p.th, NULL);
	assert_int_equal(p.bad, 0);
	assert_int_equal(c.busy_read, -EBUSY);
	assert_int_equal(c.busy_destroy, -EBUSY);
	assert_int_equal(c.cancel, 0);
	assert_int_equal(a.res, -ECANCELED);
	assert_int_equal(a.held, 2); /* the bytes A had stay */
	assert_int_equal(b.res, 5);
	assert_memory_equal(b.line, "abcd\n", 5);
	assert_int_equal(r.len, 5); /* the view is the reader's: B's line */
	assert_int_equal(co_reader_destroy(&r), 0);
	close(sv[0]);
	close(sv[1]);
}

/* A read handed out but not awaited yet (docs/reader.md's pipelined
 * server: rf = co_reader_until(...), another await, then CO_AWAIT(f, rf))
 * is in progress: a second frame's read in that window is -EBUSY.
 * Otherwise the second read took over the same frame, and the first
 * frame's await then returned the line the second one had read. A destroy
 * in that window gives the read up (the frame was never started: the
 * server that gives up a connection after a failed send does just that),
 * answers 0 and frees the buffer; the frame is not awaited after it. */
struct handed {
	co_frame co;
	co_io io;
	co_reader *r;
	struct handed *other;
	co_frame *rf;
	int first;                /* A: hands a read out, sleeps, awaits it */
	int destroy_it;           /* B: destroys instead of reading */
	int skip;                 /* A: the reader was destroyed, do not await */
	int at_call_done, destroy, res;
	char line[16];
};

static int handed_fn(co_frame *f)
{
	struct handed *h = (struct handed *)f;

	CO_BEGIN(f);
	if (h->first) {
		h->rf = co_reader_until(h->r, "\n", 1); /* nothing in the reader: waits */
		h->at_call_done = co_done(h->rf);
		CO_AWAIT(f, co_sleep(&h->io, 20 * CO_MS)); /* B comes now */
		if (h->skip)
			CO_RETURN(f, 0); /* awaiting rf would run a freed reader */
		CO_AWAIT(f, h->rf);
		h->res = co_result(f);
	} else if (h->destroy_it) {
		CO_AWAIT_UNTIL(f, h->other->rf != NULL);
		h->destroy = co_reader_destroy(h->r);
		h->other->skip = h->destroy == 0;
		CO_RETURN(f, 0);
	} else {
		CO_AWAIT_UNTIL(f, h->other->rf != NULL);
		CO_AWAIT(f, co_reader_until(h->r, "\n", 1));
		h->res = co_result(f);
	}
	if (h->res > 0 && h->res < (int)sizeof h->line)
		memcpy(h->line, h->r->data, (size_t)h->res);
	CO_END(f);
}

static void handed_run(int destroy_it, struct handed *a, struct handed *b, co_reader *r)
{
	co_engine e;
	int sv[2];

	memset(a, 0, sizeof *a);
	memset(b, 0, sizeof *b);
	co_test_tcp_pair(sv);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	assert_int_equal(co_reader_init(r, sv[0], NULL), 0);
	assert_int_equal(write(sv[1], "one\ntwo\n", 8), 8); /* in the socket, not the reader */
	a->r = b->r = r;
	a->first = 1;
	b->other = a;
	b->destroy_it = destroy_it;
	co_init(&a->co, handed_fn);
	co_init(&b->co, handed_fn);
	assert_int_equal(co_engine_spawn(&e, &a->co), 0);
	assert_int_equal(co_engine_spawn(&e, &b->co), 0);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(co_engine_destroy(&e), 0);
	close(sv[0]);
	close(sv[1]);
}

static void test_handed_out_read_refuses_a_second(void **state)
{
	struct handed a, b;
	co_reader r;

	(void)state;
	handed_run(0, &a, &b, &r);
	assert_false(a.at_call_done);
	assert_int_equal(a.res, 4);
	assert_memory_equal(a.line, "one\n", 4);
	if (b.res != -EBUSY)
		fail_msg("a second frame's read while A's read was handed out: %d (\"%.*s\"), "
			 "not -EBUSY; A's await then gave %d (\"%.*s\")",
			 b.res, b.res > 0 ? b.res : 0, b.line, a.res, a.res > 0 ? a.res : 0, a.line);
	assert_int_equal(co_reader_destroy(&r), 0);
}

static void test_destroy_gives_up_handed_out_read(void **state)
{
	struct handed a, b;
	co_reader r;

	(void)state;
	handed_run(1, &a, &b, &r);
	assert_false(a.at_call_done);
	assert_int_equal(b.destroy, 0); /* given up: A does not await it */
	assert_int_equal(a.res, 0);
	assert_int_equal(co_reader_destroy(&r), -EINVAL); /* destroyed */
}

/* A read from a frame that no engine runs: co_recv's -ENXIO, and the
 * reader is as it was. */
struct by_hand {
	co_frame co;
	co_reader *r;
	int res;
};

static int by_hand_fn(co_frame *f)
{
	struct by_hand *h = (struct by_hand *)f;

	CO_BEGIN(f);
	CO_AWAIT(f, co_reader_until(h->r, "\n", 1));
	h->res = co_result(f);
	CO_END(f);
}

static void test_no_engine(void **state)
{
	struct by_hand h = { 0 };
	co_reader r;
	int sv[2];

	(void)state;
	co_test_tcp_pair(sv);
	assert_int_equal(co_reader_init(&r, sv[0], NULL), 0);
	h.r = &r;
	co_init(&h.co, by_hand_fn);
	assert_int_equal(co_resume(&h.co), CO_DONE);
	assert_int_equal(h.res, -ENXIO);
	assert_int_equal(co_reader_buffered(&r), 0);
	assert_int_equal(co_reader_destroy(&r), 0);
	close(sv[0]);
	close(sv[1]);
}

/* ---- misuse ------------------------------------------------------------------------------------ */

static int status_of(co_frame *f)
{
	assert_non_null(f);
	assert_true(co_done(f));
	return co_status(f);
}

/* One line read with r, awaited. */
struct line_read {
	co_frame co;
	co_reader *r;
	int res;
};

static int line_read_fn(co_frame *f)
{
	struct line_read *l = (struct line_read *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_reader_until(l->r, "\n", 1));
	l->res = co_result(f);
	CO_END(f);
}

static void test_misuse_errors(void **state)
{
	co_reader r, z;
	co_stream closed;
	char big[CO_READER_DELIM_MAX + 1] = { 0 };
	size_t n = 7;

	(void)state;
	memset(&z, 0, sizeof z);
	memset(&closed, 0, sizeof closed);
	assert_int_equal(co_reader_init(NULL, 0, NULL), -EINVAL);
	assert_int_equal(co_reader_init(&r, -1, NULL), -EINVAL);
	assert_int_equal(co_reader_init(&r, 0, &(co_reader_opts){ .size = 64, .max = 32 }), -EINVAL);
	assert_int_equal(co_reader_init(&r, 0, &(co_reader_opts){ .max = CO_READER_MAX + 1 }), -EINVAL);
	assert_int_equal(co_reader_init(&r, 0, &(co_reader_opts){ .size = SIZE_MAX }), -EINVAL);
	assert_int_equal(co_reader_init(&r, 0, &(co_reader_opts){ .max = SIZE_MAX }), -EINVAL);
	assert_int_equal(co_reader_init_stream(NULL, &closed, NULL), -EINVAL);
	assert_int_equal(co_reader_init_stream(&r, NULL, NULL), -EINVAL);
	assert_int_equal(co_reader_init_stream(&r, &closed, NULL), -EINVAL);
	/* defaults */
	assert_int_equal(co_reader_init(&r, 0, NULL), 0);
	assert_int_equal(r.cap, 4096);
	assert_int_equal(r.max, 4096);
	assert_int_equal(co_reader_destroy(&r), 0);
	assert_int_equal(co_reader_init(&r, 0, &(co_reader_opts){ .max = 10 }), 0);
	assert_int_equal(r.cap, 10);
	assert_int_equal(co_reader_destroy(&r), 0);
	assert_int_equal(co_reader_init(&r, 0, &(co_reader_opts){ .size = 100 }), 0);
	assert_int_equal(r.max, 100);
	/* reads */
	assert_null(co_reader_until(NULL, "\n", 1));
	assert_null(co_reader_exact(NULL, 1));
	assert_int_equal(status_of(co_reader_until(&z, "\n", 1)), -EINVAL);
	assert_int_equal(status_of(co_reader_exact(&z, 1)), -EINVAL);
	assert_int_equal(status_of(co_reader_until(&r, NULL, 1)), -EINVAL);
	assert_int_equal(status_of(co_reader_until(&r, "\n", 0)), -EINVAL);
	assert_int_equal(status_of(co_reader_until(&r, big, sizeof big)), -EINVAL);
	assert_int_equal(status_of(co_reader_until(&r, big, SIZE_MAX)), -EINVAL);
	assert_int_equal(status_of(co_reader_exact(&r, 0)), -EINVAL);
	assert_int_equal(status_of(co_reader_exact(&r, 101)), -EMSGSIZE);
	assert_int_equal(status_of(co_reader_exact(&r, SIZE_MAX)), -EMSGSIZE);
	{ /* a refused read leaves no result behind: len 0, nothing to copy */
		static const char *const what[] = { "until \"\"", "exact 0", "exact 101",
						     "max 0" };
		char out[16];
		int p[2];

		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
		assert_int_equal(write(p[1], "l1\nl2\nl3\nl4\n", 12), 12);
		r.fd = p[0];
		for (int k = 0; k < 4; k++) {
			int res;

			struct line_read lr = { .r = &r };

			co_init(&lr.co, line_read_fn);
			co_test_run1(&lr.co);
			assert_int_equal(lr.res, 3);
			assert_int_equal(co_reader_copy(&r, out, sizeof out), 3);
			if (k == 0)
				res = status_of(co_reader_until(&r, "", 0));
			else if (k == 1)
				res = status_of(co_reader_exact(&r, 0));
			else if (k == 2)
				res = status_of(co_reader_exact(&r, 101));
			else {
				r.max = 0;
				res = status_of(co_reader_until(&r, "\n", 1));
				r.max = 100;
			}
			assert_true(res < 0);
			if (r.len != 0 || r.data != NULL || co_reader_copy(&r, out, sizeof out) != 0)
				fail_msg("after %s: len %zu", what[k], r.len);
		}
		r.fd = 0;
		close(p[0]);
		close(p[1]);
	}
	r.max = 0;
	assert_int_equal(status_of(co_reader_until(&r, "\n", 1)), -EINVAL);
	r.max = SIZE_MAX;
	assert_int_equal(status_of(co_reader_exact(&r, 1)), -EINVAL);
	r.max = 100;
	assert_int_equal(co_reader_buffered(NULL), 0);
	assert_int_equal(co_reader_buffered(&z), 0);
	assert_null(co_reader_peek(NULL, &n));
	assert_int_equal(n, 0);
	assert_null(co_reader_peek(&r, &n)); /* nothing held */
	assert_null(co_reader_peek(&r, NULL));
	/* destroy */
	assert_int_equal(co_reader_destroy(NULL), -EINVAL);
	assert_int_equal(co_reader_destroy(&z), -EINVAL);
	assert_int_equal(co_reader_destroy(&r), 0);
	assert_int_equal(co_reader_destroy(&r), -EINVAL);
	assert_int_equal(status_of(co_reader_until(&r, "\n", 1)), -EINVAL);
	assert_int_equal(co_reader_buffered(&r), 0);
}

/* ---- allocations ------------------------------------------------------------------------------- */

struct grow {
	co_frame co;
	co_reader r;
	co_stream s;
	co_bufring *ring;
	int fd, init, res[3];
	char line[32];
};

/* A buffer of 8 that must grow for a 17-byte line: the growth fails
 * (-ENOMEM, the bytes stay), then works. */
static int grow_fn(co_frame *f)
{
	struct grow *g = (struct grow *)f;
	co_reader_opts o = { .size = 8, .max = 64 };

	CO_BEGIN(f);
	if (g->ring) {
		assert_int_equal(co_stream_open(&g->s, g->ring, g->fd), 0);
		assert_int_equal(co_reader_init_stream(&g->r, &g->s, &o), 0);
	} else {
		assert_int_equal(co_reader_init(&g->r, g->fd, &o), 0);
	}
	co__fault_arm_range(CO__FAULT_ALLOC, 1, 1000, ENOMEM);
	CO_AWAIT(f, co_reader_until(&g->r, "\n", 1));
	co__fault_arm(CO__FAULT_ALLOC, 0, 0);
	g->res[0] = co_result(f);
	CO_AWAIT(f, co_reader_until(&g->r, "\n", 1));
	g->res[1] = co_result(f);
	if (g->res[1] > 0 && g->res[1] <= (int)sizeof g->line)
		memcpy(g->line, g->r.data, (size_t)g->res[1]);
	CO_AWAIT(f, co_reader_until(&g->r, "\n", 1));
	g->res[2] = co_result(f);
	assert_int_equal(co_reader_destroy(&g->r), 0);
	if (g->ring)
		CO_AWAIT(f, co_stream_close(&g->s));
	CO_END(f);
}

static void test_allocation_fails(void **state)
{
	static const char data[] = "0123456789abcdef\n";
	co_reader r;

	(void)state;
	co__fault_arm(CO__FAULT_ALLOC, 1, ENOMEM);
	assert_int_equal(co_reader_init(&r, 0, NULL), -ENOMEM);
	co__fault_arm(CO__FAULT_ALLOC, 0, 0);
	for (int stream = 0; stream < 2; stream++) {
		struct grow g;
		co_engine e;
		co_bufring ring;
		int sv[2];

		co_test_tcp_pair(sv);
		memset(&g, 0, sizeof g);
		assert_int_equal(co_engine_init(&e, NULL), 0);
		if (stream)
			assert_int_equal(co_bufring_init(&ring, &e, 8, 8), 0);
		assert_int_equal(write(sv[1], data, 17), 17);
		shutdown(sv[1], SHUT_WR);
		g.fd = sv[0];
		g.ring = stream ? &ring : NULL;
		co_init(&g.co, grow_fn);
		assert_int_equal(co_engine_spawn(&e, &g.co), 0);
		assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
		assert_int_equal(g.res[0], -ENOMEM);
		assert_int_equal(g.res[1], 17);
		assert_memory_equal(g.line, data, 17);
		assert_int_equal(g.res[2], 0);
		if (stream)
			assert_int_equal(co_bufring_destroy(&ring), 0);
		assert_int_equal(co_engine_destroy(&e), 0);
		close(sv[0]);
		close(sv[1]);
	}
}

/* 20,000 lines in random pieces through a reader whose buffer never needs
 * to grow: the library allocates nothing per read (fault-injection
 * build's count), over co_recv with a time limit as well. */
static void test_reading_allocates_nothing(void **state)
{
	static struct step steps[MAX_STEPS];
	static char data[MAX_STEPS * 80];
	static struct script s;

	(void)state;
	for (int stream = 0; stream < 2; stream++) {
		unsigned long calls = 0;

		for (int round = 0; round < 40; round++) {
			struct peer p = { .seed = (unsigned)round };
			size_t len = make_script(steps, 500, data, (unsigned)round + 100, 64);
			co_engine e;
			co_bufring ring;
			int sv[2];

			script_init(&s, -1, NULL, steps, 500, data);
			/* over co_recv under a time limit too: a linked timeout, no timer */
			s.o = (co_reader_opts){ .size = 256, .max = 256,
						.timeout_ns = stream ? 0 : 3600 * CO_S };
			co_test_tcp_pair(sv);
			assert_int_equal(co_engine_init(&e, NULL), 0);
			if (stream)
				assert_int_equal(co_bufring_init(&ring, &e, 64, 64), 0);
			s.fd = sv[0];
			s.ring = stream ? &ring : NULL;
			peer_start(&p, sv[1], data, len, 0);
			assert_int_equal(co_engine_spawn(&e, &s.co), 0);
			co__fault_arm(CO__FAULT_ALLOC, 0, 0); /* count from here */
			assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
			calls += co__fault_calls(CO__FAULT_ALLOC);
			peer_join(&p);
			assert_int_equal(s.bad, 0);
			if (stream)
				assert_int_equal(co_bufring_destroy(&ring), 0);
			assert_int_equal(co_engine_destroy(&e), 0);
			close(sv[0]);
		}
		/* one: the reader's buffer at init, per round */
		assert_int_equal(calls, 40);
	}
}

/* ---- a limit that runs out as a read completes ------------------------------------------ */

/* co_timeout of an exact read whose bytes arrive as the limit runs out: the
 * holder keeps the engine's thread (the read waits, its receive and the
 * limit's timer submitted) while the peer's bytes come and the limit's
 * time passes, in either order; the receive and the timer complete in one
 * batch.
 * The read that took the bytes keeps them as its value; a read cut short
 * leaves them for the next one. Then a read that completes in the call
 * under a limit whose timer cannot be allocated: its bytes, not -ENOMEM. */
struct racing {
	co_frame co, holder;
	co_reader r;
	co_stream s;
	co_limit lim;
	co_io hio;
	co_bufring *ring;
	int fd, wfd, res[4];
	int bytes_first;          /* the bytes come before the limit's time */
	uint64_t end;
	size_t held;
	char got[4][6];
};

static void racing_take(struct racing *t, int i)
{
	t->res[i] = co_result(&t->co);
	if (t->res[i] == 5)
		memcpy(t->got[i], t->r.data, 5);
}

static int racing_fn(co_frame *f)
{
	struct racing *t = (struct racing *)f;

	CO_BEGIN(f);
	if (t->ring) {
		assert_int_equal(co_stream_open(&t->s, t->ring, t->fd), 0);
		assert_int_equal(co_reader_init_stream(&t->r, &t->s, NULL), 0);
	} else {
		assert_int_equal(co_reader_init(&t->r, t->fd, NULL), 0);
	}
	CO_AWAIT(f, co_timeout_at(&t->lim, co_reader_exact(&t->r, 5), t->end));
	racing_take(t, 0);
	assert_int_equal(write(t->wfd, "BBBBB", 5), 5);
	CO_AWAIT(f, co_reader_exact(&t->r, 5));
	racing_take(t, 1);
	if (t->res[0] != 5) {
		/* cut short: these are the bytes it did not take (if they were
		 * lost, the read below would wait for ever) */
		assert_memory_equal(t->got[1], "AAAAA", 5);
		CO_AWAIT(f, co_reader_exact(&t->r, 5));
		racing_take(t, 2);
	}
	assert_int_equal(write(t->wfd, "CCCCCDDDDD", 10), 10);
	CO_AWAIT(f, co_reader_exact(&t->r, 5));
	t->held = co_reader_buffered(&t->r);
	co__fault_arm(CO__FAULT_ALLOC, 1, ENOMEM); /* the limit's timer record */
	CO_AWAIT(f, co_timeout(&t->lim, co_reader_exact(&t->r, 5), 3600 * CO_S));
	co__fault_arm(CO__FAULT_ALLOC, 0, 0);
	racing_take(t, 3);
	assert_int_equal(co_reader_destroy(&t->r), 0);
	if (t->ring)
		CO_AWAIT(f, co_stream_close(&t->s));
	CO_END(f);
}

static int racing_holder_fn(co_frame *f)
{
	struct racing *t = (struct racing *)(void *)((char *)f - offsetof(struct racing, holder));

	CO_BEGIN(f);
	CO_AWAIT(f, co_nop(&t->hio)); /* the read's receive and the timer are in */
	if (t->bytes_first)
		assert_int_equal(write(t->wfd, "AAAAA", 5), 5);
	while (co_now_ns() < t->end + CO_MS)
		;
	if (!t->bytes_first)
		assert_int_equal(write(t->wfd, "AAAAA", 5), 5);
	CO_END(f);
}

static void test_limit_races_read(void **state)
{
	(void)state;
	for (int stream = 0; stream < 2; stream++) {
		int kept = 0;

		for (int round = 0; round < 20; round++) {
			struct racing t;
			co_engine e;
			co_bufring ring;
			int sv[2];

			co_test_tcp_pair(sv);
			memset(&t, 0, sizeof t);
			assert_int_equal(co_engine_init(&e, NULL), 0);
			if (stream)
				assert_int_equal(co_bufring_init(&ring, &e, 16, 64), 0);
			t.fd = sv[0];
			t.wfd = sv[1];
			t.ring = stream ? &ring : NULL;
			t.bytes_first = round % 2 == 0;
			t.end = co_now_ns() + 3 * CO_MS;
			co_init(&t.co, racing_fn);
			co_init(&t.holder, racing_holder_fn);
			assert_int_equal(co_engine_spawn(&e, &t.co), 0);
			assert_int_equal(co_engine_spawn(&e, &t.holder), 0);
			assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
			assert_int_equal(e.inflight, 0);
			if (t.res[0] == 5) { /* the read took "AAAAA": its value */
				kept++;
				assert_memory_equal(t.got[0], "AAAAA", 5);
				assert_int_equal(t.res[1], 5);
				assert_memory_equal(t.got[1], "BBBBB", 5);
			} else { /* cut short: "AAAAA" is the next read's */
				assert_int_equal(t.res[0], -ETIME);
				assert_int_equal(t.res[1], 5);
				assert_memory_equal(t.got[1], "AAAAA", 5);
				assert_int_equal(t.res[2], 5);
				assert_memory_equal(t.got[2], "BBBBB", 5);
			}
			assert_int_equal(t.held, 5); /* "DDDDD": the next read completes in the call */
			assert_int_equal(t.res[3], 5);
			assert_memory_equal(t.got[3], "DDDDD", 5);
			if (stream)
				assert_int_equal(co_bufring_destroy(&ring), 0);
			assert_int_equal(co_engine_destroy(&e), 0);
			close(sv[0]);
			close(sv[1]);
		}
		print_message("over %s: %d of 20 reads kept the bytes at the limit\n",
			      stream ? "a stream" : "co_recv", kept);
	}
}

/* ---- a view is not a C string ---------------------------------------------------------------- */

/* A line read from a buffer that holds more: no NUL follows the view (the
 * next byte does), so a copy made with co_reader_copy is what sscanf may
 * read; a buffer too small gets "" and -EMSGSIZE; a failed read copies "". */
struct cstr {
	co_frame co;
	co_reader r;
	int fd, res[3], a, b, scanned;
	char after, buf[16], small[6], empty[4];
};

static int cstr_fn(co_frame *f)
{
	struct cstr *c = (struct cstr *)f;

	CO_BEGIN(f);
	assert_int_equal(co_reader_init(&c->r, c->fd, NULL), 0);
	CO_AWAIT(f, co_reader_until(&c->r, "\n", 1));
	assert_int_equal(co_result(f), 6);
	c->after = c->r.data[c->r.len]; /* the next line's first byte, in the buffer */
	c->res[0] = co_reader_copy(&c->r, c->buf, sizeof c->buf);
	c->scanned = sscanf(c->buf, "%d %d", &c->a, &c->b);
	c->res[1] = co_reader_copy(&c->r, c->small, sizeof c->small);
	CO_AWAIT(f, co_reader_exact(&c->r, 100)); /* the input ends first */
	assert_int_equal(co_result(f), -EPROTO);
	c->res[2] = co_reader_copy(&c->r, c->empty, sizeof c->empty);
	assert_int_equal(co_reader_destroy(&c->r), 0);
	CO_END(f);
}

static void test_view_is_not_a_string(void **state)
{
	struct cstr c;
	char b[4] = "xyz";
	int sv[2];

	(void)state;
	co_test_tcp_pair(sv);
	memset(&c, 0, sizeof c);
	memset(c.small, 'q', sizeof c.small);
	memset(c.empty, 'q', sizeof c.empty);
	assert_int_equal(write(sv[1], "12 34\nXYZ", 9), 9);
	shutdown(sv[1], SHUT_WR);
	c.fd = sv[0];
	co_init(&c.co, cstr_fn);
	co_test_run1(&c.co);
	assert_int_equal(c.after, 'X'); /* not a NUL */
	assert_int_equal(c.res[0], 6);
	assert_string_equal(c.buf, "12 34\n");
	assert_int_equal(c.scanned, 2);
	assert_int_equal(c.a, 12);
	assert_int_equal(c.b, 34);
	assert_int_equal(c.res[1], -EMSGSIZE); /* 6 bytes and the NUL do not fit in 6 */
	assert_int_equal(c.small[0], '\0');
	assert_int_equal(c.res[2], 0);         /* a failed read: "" */
	assert_int_equal(c.empty[0], '\0');
	assert_int_equal(co_reader_copy(NULL, b, sizeof b), -EINVAL);
	assert_int_equal(co_reader_copy(&c.r, NULL, 4), -EINVAL);
	assert_int_equal(co_reader_copy(&c.r, b, 0), -EINVAL);
	assert_string_equal(b, "xyz"); /* untouched by a refusal */
	close(sv[0]);
	close(sv[1]);
}

/* ---- the delimiter is the call's copy --------------------------------------------------- */

/* reader.md: a delimiter is "copied by the call (they need not outlive
 * it)". The read is handed out with the delimiter in a buffer that is
 * overwritten before the await (the read has to wait: nothing is buffered
 * yet), and it still ends at "\r\n"; a single '\n' in the line does not
 * end it. */
struct delim_copy {
	co_frame co;
	co_reader r;
	co_frame *rf;
	char delim[4];
	int fd, waited, res, res2;
	char line[16];
};

static int delim_copy_fn(co_frame *f)
{
	struct delim_copy *d = (struct delim_copy *)f;

	CO_BEGIN(f);
	assert_int_equal(co_reader_init(&d->r, d->fd, NULL), 0);
	memcpy(d->delim, "\r\n", 2);
	d->rf = co_reader_until(&d->r, d->delim, 2);
	d->waited = !co_done(d->rf);
	memcpy(d->delim, "\n\n", 2); /* the caller's buffer, reused */
	CO_AWAIT(f, d->rf);
	d->res = co_result(f);
	if (d->res > 0)
		co_reader_copy(&d->r, d->line, sizeof d->line);
	memcpy(d->delim, "\n", 1);
	CO_AWAIT(f, co_reader_until(&d->r, d->delim, 1));
	d->res2 = co_result(f);
	assert_int_equal(co_reader_destroy(&d->r), 0);
	CO_END(f);
}

static void test_delimiter_need_not_outlive_the_call(void **state)
{
	struct delim_copy d;
	int sv[2];

	(void)state;
	co_test_tcp_pair(sv);
	assert_int_equal(write(sv[1], "a\nb\r\nc\n", 7), 7);
	shutdown(sv[1], SHUT_WR); /* a read that looks for another delimiter ends */
	memset(&d, 0, sizeof d);
	d.fd = sv[0];
	co_init(&d.co, delim_copy_fn);
	co_test_run1(&d.co);
	assert_int_equal(d.waited, 1);
	assert_int_equal(d.res, 5);
	assert_string_equal(d.line, "a\nb\r\n");
	assert_int_equal(d.res2, 2);
	close(sv[0]);
	close(sv[1]);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_random_reads_over_recv),
	cmocka_unit_test(test_random_reads_over_stream),
	cmocka_unit_test(test_reads_complete_in_the_call),
	cmocka_unit_test(test_in_place_and_across_buffers),
	cmocka_unit_test(test_stream_held_before_init),
	cmocka_unit_test(test_stream_closed_under_reader),
	cmocka_unit_test(test_peer_closes_mid_line),
	cmocka_unit_test(test_peer_resets_mid_line),
	cmocka_unit_test(test_line_longer_than_the_limit),
	cmocka_unit_test(test_no_delimiter_within_the_limit),
	cmocka_unit_test(test_slow_sender_time_limit),
	cmocka_unit_test(test_huge_time_limit_never_fires),
	cmocka_unit_test(test_cancel_and_busy),
	cmocka_unit_test(test_handed_out_read_refuses_a_second),
	cmocka_unit_test(test_destroy_gives_up_handed_out_read),
	cmocka_unit_test(test_no_engine),
	cmocka_unit_test(test_misuse_errors),
	cmocka_unit_test(test_allocation_fails),
	cmocka_unit_test(test_reading_allocates_nothing),
	cmocka_unit_test(test_limit_races_read),
	cmocka_unit_test(test_view_is_not_a_string),
	cmocka_unit_test(test_delimiter_need_not_outlive_the_call),
};

CO_TEST_MAIN(tests, 1)
