/* SPDX-License-Identifier: MIT */
/*
 * The buffered reader (coring/reader.h, docs/reader.md).
 *
 * The reader's bytes are buf[head, tail). Over co_recv every byte comes
 * into buf; over a stream the bytes are in the stream's held buffers
 * (iov[seg] from off on, then the next ones) and come into buf only when
 * a read spans two of them: a read first looks at the held buffer in
 * place (buf empty), and a view into it is the answer when the read ends
 * inside it. Otherwise it copies; a delimiter search copies what the held
 * buffer has left, and once it finds the end gives back (to the held
 * buffer) what it copied past it (back_*).
 *
 * A read tries at once, in the call; if it needs more bytes the call
 * returns the reader's child frame, which waits for a recv (or a stream
 * receive) and tries again, until the read is complete or fails. When
 * the read completes in the call, the call returns the same frame marked
 * finished with the read's value: the await then ends at once (co.h: a
 * finished child's status is the value).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <coring/reader.h>
#include "common/fault.h"

#define READER_MAGIC 0x52454144u   /* a reader set up */
#define DEFAULT_SIZE 4096

enum { OP_UNTIL = 1, OP_EXACT = 2 };

/* fin while the input has not ended */
#define NOT_ENDED 1

/* What a read returns when its arguments are wrong or another read is in
 * progress: a frame that has finished with the error. Nothing writes a
 * finished child that is awaited (co.h), so it lives in read-only memory. */
static const co_frame fail_einval = { .state = CO__ST_DONE, .status = -EINVAL };
static const co_frame fail_ebusy = { .state = CO__ST_DONE, .status = -EBUSY };

/* ---- set-up -------------------------------------------------------------------- */

static int reader_setup(co_reader *r, const co_reader_opts *o)
{
	co_reader_opts d = { 0 };
	size_t size, max;

	if (o == NULL)
		o = &d;
	if (o->size > CO_READER_MAX || o->max > CO_READER_MAX)
		return -EINVAL;
	max = o->max ? o->max : o->size ? o->size : DEFAULT_SIZE;
	size = o->size ? o->size : max < DEFAULT_SIZE ? max : DEFAULT_SIZE;
	if (size > max)
		return -EINVAL;
	memset(r, 0, sizeof *r);
	r->buf = co__malloc(size);
	if (r->buf == NULL)
		return -ENOMEM;
	r->cap = size;
	r->max = max;
	r->timeout_ns = o->timeout_ns;
	r->fd = -1;
	r->fin = NOT_ENDED;
	co_init(&r->co, NULL);
	r->co.state = CO__ST_DONE; /* no read in progress */
	r->magic = READER_MAGIC;
	return 0;
}

int co_reader_init(co_reader *r, int fd, const co_reader_opts *o)
{
	int err;

	if (r == NULL || fd < 0)
		return -EINVAL;
	if ((err = reader_setup(r, o)) < 0)
		return err;
	r->fd = fd;
	return 0;
}

int co_reader_init_stream(co_reader *r, co_stream *s, const co_reader_opts *o)
{
	const struct iovec *iov;
	unsigned n;
	int err;

	if (r == NULL || s == NULL || (iov = co_stream_iov(s, &n)) == NULL)
		return -EINVAL; /* (co_stream_iov: NULL for a stream not open) */
	if ((err = reader_setup(r, o)) < 0)
		return err;
	r->stream = s;
	r->iov = iov;
	r->niov = n;
	return 0;
}

/* A read runs: r's frame has started (or is being awaited) and has not
 * finished. */
static int reader_running(const co_reader *r)
{
	return r->co.parent != NULL || (r->co.label != 0 && !(r->co.state & CO__ST_DONE)) ||
	       (r->co.state & CO__ST_SPAWNED);
}

/* A read is in progress: from the call that handed out its frame, not
 * finished, until that frame finishes (awaited or not yet). */
static int reader_busy(const co_reader *r)
{
	return !(r->co.state & CO__ST_DONE) || reader_running(r);
}

/* A read handed out and never started is given up (its frame must not be
 * awaited after); one that runs refuses the destroy. */
int co_reader_destroy(co_reader *r)
{
	if (r == NULL || r->magic != READER_MAGIC)
		return -EINVAL;
	if (reader_running(r))
		return -EBUSY;
	free(r->buf);
	memset(r, 0, sizeof *r);
	return 0;
}

/* ---- what is held ---------------------------------------------------------------- */

/* Over a stream closed under the reader (the rules say to close it after
 * co_reader_destroy): the buffers the reader held went back to the ring,
 * and may be filled again or unmapped. Nothing of them is read: they count
 * as none, and a read is -EINVAL. */
static int stream_gone(const co_reader *r)
{
	return r->stream != NULL && co_stream_iov(r->stream, NULL) == NULL;
}

/* Bytes left in the held stream buffers. */
static size_t held_left(const co_reader *r)
{
	size_t n = 0;

	if (stream_gone(r))
		return 0;
	for (unsigned i = r->seg; i < r->niov; i++)
		n += r->iov[i].iov_len;
	return n - (r->seg < r->niov ? r->off : 0);
}

size_t co_reader_buffered(const co_reader *r)
{
	if (r == NULL || r->magic != READER_MAGIC)
		return 0;
	return r->tail - r->head + held_left(r);
}

const char *co_reader_peek(const co_reader *r, size_t *n)
{
	size_t k = 0;
	const char *p = NULL;

	if (r != NULL && r->magic == READER_MAGIC) {
		if (r->tail > r->head) {
			p = r->buf + r->head;
			k = r->tail - r->head;
		} else if (r->seg < r->niov && !stream_gone(r)) {
			p = (const char *)r->iov[r->seg].iov_base + r->off;
			k = r->iov[r->seg].iov_len - r->off;
		}
	}
	if (n)
		*n = k;
	return p;
}

/* Step past k bytes of the held buffer iov[seg]. */
static void held_skip(co_reader *r, size_t k)
{
	r->off += k;
	if (r->off == r->iov[r->seg].iov_len) {
		r->seg++;
		r->off = 0;
	}
}

/* ---- the buffer ------------------------------------------------------------------- */

/* Make room for need bytes from head: move the bytes to the front, grow
 * the buffer (doubling, up to max). 0 or -ENOMEM. */
static int buf_room(co_reader *r, size_t need)
{
	size_t have = r->tail - r->head;

	if (r->head > 0 && r->head + need > r->cap) {
		memmove(r->buf, r->buf + r->head, have);
		if (r->back && r->back_at >= r->head)
			r->back_at -= r->head;
		else
			r->back = 0;
		r->head = 0;
		r->tail = have;
	}
	if (need > r->cap) {
		size_t cap = r->cap * 2 > need ? r->cap * 2 : need;
		char *nb;

		if (cap > r->max && need <= r->max)
			cap = r->max;
		if ((nb = co__realloc(r->buf, cap)) == NULL)
			return -ENOMEM;
		r->buf = nb;
		r->cap = cap;
	}
	return 0;
}

/* Copy up to k bytes of the held buffer into buf (room made already);
 * remembered, so that a delimiter search can give back what it copied
 * past the end it found. Returns the bytes copied. */
static size_t held_copy(co_reader *r, size_t k)
{
	const struct iovec *v = &r->iov[r->seg];
	size_t left = v->iov_len - r->off;

	if (k > left)
		k = left;
	r->back = 1;
	r->back_seg = r->seg;
	r->back_off = r->off;
	r->back_at = r->tail;
	memcpy(r->buf + r->tail, (const char *)v->iov_base + r->off, k);
	r->tail += k;
	held_skip(r, k);
	return k;
}

/* ---- one attempt ------------------------------------------------------------------- */

/* The answer: a view of n bytes at p. */
static int view(co_reader *r, const char *p, size_t n)
{
	r->data = p;
	r->len = n;
	r->scan = 0;
	r->back = 0;
	return (int)n;
}

/* First position of the delimiter in p[0, n), or NULL. */
static const char *find(const co_reader *r, const char *p, size_t n)
{
	const char *end = p + n;
	unsigned d = r->dlen;

	while ((size_t)(end - p) >= d) {
		const char *q = memchr(p, (unsigned char)r->delim[0], (size_t)(end - p) - (d - 1));

		if (q == NULL)
			return NULL;
		if (memcmp(q, r->delim, d) == 0)
			return q;
		p = q + 1;
	}
	return NULL;
}

/* The line is buf[head, e): give back to the held buffer what was copied
 * past e, and take the line. */
static int until_take(co_reader *r, size_t e)
{
	size_t line = e - r->head;

	if (line > r->max)
		return -EMSGSIZE;
	if (r->back && e >= r->back_at && e < r->tail) {
		r->seg = r->back_seg;
		r->off = r->back_off + (e - r->back_at);
		r->tail = e;
	}
	r->head = e;
	return view(r, r->buf + e - line, line);
}

/* A delimiter search on the held buffer in place (buf is empty): the line
 * if it ends in it, else copy what it has into buf. */
static int until_in_place(co_reader *r)
{
	const struct iovec *v = &r->iov[r->seg];
	const char *p = (const char *)v->iov_base + r->off;
	size_t n = v->iov_len - r->off;
	const char *q = find(r, p, n);
	int err;

	if (q != NULL) {
		size_t line = (size_t)(q - p) + r->dlen;

		if (line > r->max)
			return -EMSGSIZE;
		held_skip(r, line);
		return view(r, p, line);
	}
	if (n >= r->max)
		return -EMSGSIZE; /* no delimiter in max bytes: nothing consumed */
	r->head = r->tail = 0;
	if ((err = buf_room(r, n)) < 0)
		return err;
	held_copy(r, n);
	r->scan = n >= r->dlen ? n - (r->dlen - 1u) : 0;
	return -EAGAIN;
}

static int try_until(co_reader *r)
{
	for (;;) {
		size_t have = r->tail - r->head;
		size_t from = r->scan;
		const char *q;
		int err;

		if (have == 0 && r->seg < r->niov) {
			if ((err = until_in_place(r)) != -EAGAIN)
				return err;
			continue;
		}
		q = find(r, r->buf + r->head + from, have - from);
		if (q != NULL)
			return until_take(r, (size_t)(q - r->buf) + r->dlen);
		r->scan = have >= r->dlen ? have - (r->dlen - 1u) : 0;
		if (have >= r->max)
			return -EMSGSIZE;
		if (r->seg >= r->niov)
			return -EAGAIN;
		/* copy more of the held buffer, up to max from head */
		if ((err = buf_room(r, r->max < have + r->iov[r->seg].iov_len - r->off
					       ? r->max : have + r->iov[r->seg].iov_len - r->off)) < 0)
			return err;
		held_copy(r, r->cap - r->tail < r->max - have ? r->cap - r->tail : r->max - have);
	}
}

static int try_exact(co_reader *r)
{
	size_t n = r->want, have = r->tail - r->head;
	int err;

	if (n > r->max)
		return -EMSGSIZE;
	if (have == 0 && r->seg < r->niov && r->iov[r->seg].iov_len - r->off >= n) {
		const char *p = (const char *)r->iov[r->seg].iov_base + r->off;

		held_skip(r, n);
		return view(r, p, n); /* in one held buffer: in place */
	}
	if (have < n && r->seg < r->niov && (err = buf_room(r, n)) < 0)
		return err;
	while (have < n && r->seg < r->niov)
		have += held_copy(r, n - have);
	if (have < n)
		return -EAGAIN;
	r->head += n;
	return view(r, r->buf + r->head - n, n);
}

/* The read's value when it needs more than there is: -EAGAIN while the
 * input goes on; at its end, 0 with nothing held, else -EPROTO; or the
 * error that ended it. */
static int reader_try(co_reader *r)
{
	int res = r->op == OP_UNTIL ? try_until(r) : try_exact(r);

	if (res == -EAGAIN && r->fin != NOT_ENDED)
		res = r->fin < 0 ? r->fin : r->tail > r->head ? -EPROTO : 0;
	if (res <= 0) {
		r->data = NULL;
		r->len = 0;
	}
	return res;
}

/* ---- waiting for more ---------------------------------------------------------------- */

static uint64_t after(uint64_t ns)
{
	uint64_t now = co_now_ns();

	return ns > UINT64_MAX - now ? UINT64_MAX : now + ns;
}

/* Room for the recv (over co_recv): what the read needs, at least a byte
 * more than is buffered. 0 or -ENOMEM. */
static int recv_room(co_reader *r)
{
	size_t have = r->tail - r->head;
	size_t need = r->op == OP_EXACT ? r->want : have + 1;

	if (have == 0)
		r->head = r->tail = 0;
	if (r->tail == r->cap || r->head + need > r->cap)
		return buf_room(r, need > have + 1 ? need : have + 1);
	return 0;
}

/* The await that brings more bytes, under the reader's time limit. */
static co_awaiter *reader_wait(co_reader *r)
{
	co_awaiter *aw;

	if (r->stream)
		aw = co_stream_recv(r->stream);
	else
		aw = co_recv(&r->io, r->fd, r->buf + r->tail, r->cap - r->tail, 0);
	return r->deadline ? co_timeout_at(&r->lim, aw, r->deadline) : aw;
}

/* Errors that end this read only: the input goes on. */
static int transient(int res)
{
	return res == -ECANCELED || res == -ETIME || res == -EINTR || res == -EAGAIN ||
	       res == -ENOMEM || res == -ENOBUFS || res == -ENXIO || res == -EBUSY;
}

/* A wait ended with res: take the bytes (or the end), try again. */
static int reader_got(co_reader *r, int res)
{
	if (res > 0) {
		if (r->stream) {
			r->iov = co_stream_iov(r->stream, &r->niov);
			r->seg = 0;
			r->off = 0;
		} else {
			r->tail += (size_t)res;
		}
	} else if (transient(res)) {
		r->data = NULL;
		r->len = 0;
		return res;
	} else {
		r->fin = res; /* 0: end of file; or the error that ended it */
		if (r->stream)
			r->niov = r->seg = 0; /* nothing is held after an end */
	}
	return reader_try(r);
}

/* The child: wait, take, try, until the read is answered. */
static int reader_fn(co_frame *f)
{
	co_reader *r = (co_reader *)f;

	CO_BEGIN(f);
	r->deadline = r->timeout_ns ? after(r->timeout_ns) : 0;
	for (;;) {
		if (r->stream == NULL && (r->res = recv_room(r)) < 0)
			break;
		CO_AWAIT(f, reader_wait(r));
		if ((r->res = reader_got(r, co_result(f))) != -EAGAIN)
			break;
	}
	if (r->res < 0) {
		r->data = NULL;
		r->len = 0;
	}
	CO_RETURN(f, r->res);
	CO_END(f);
}

/* Try now; hand out the frame, finished with the answer or ready to wait. */
static co_frame *reader_start(co_reader *r)
{
	int res;

	r->back = 0; /* a give-back concerns this read's copies only */
	res = reader_try(r);
	co_init(&r->co, reader_fn);
	if (res != -EAGAIN) {
		r->co.state = CO__ST_DONE;
		r->co.status = res;
	}
	return &r->co;
}

/* A read refused with -EINVAL: a reader's last result goes (len 0, as
 * after any failure), unless another read owns it now. */
static co_frame *reader_einval(co_reader *r)
{
	if (r->magic == READER_MAGIC && !reader_busy(r)) {
		r->data = NULL;
		r->len = 0;
	}
	return (co_frame *)&fail_einval;
}

/* The checks every read makes; NULL when it may go on. */
static co_frame *reader_refuse(co_reader *r)
{
	if (r->magic != READER_MAGIC)
		return (co_frame *)&fail_einval;
	if (r->max == 0 || r->max > CO_READER_MAX || stream_gone(r))
		return reader_einval(r);
	if (reader_busy(r))
		return (co_frame *)&fail_ebusy;
	return NULL;
}

co_frame *co_reader_until(co_reader *r, const void *delim, size_t dlen)
{
	co_frame *no;

	if (r == NULL)
		return NULL;
	if ((no = reader_refuse(r)) != NULL)
		return no;
	if (delim == NULL || dlen == 0 || dlen > CO_READER_DELIM_MAX)
		return reader_einval(r);
	r->op = OP_UNTIL;
	r->dlen = (unsigned char)dlen;
	memcpy(r->delim, delim, dlen);
	r->scan = 0;
	return reader_start(r);
}

co_frame *co_reader_exact(co_reader *r, size_t n)
{
	co_frame *no;

	if (r == NULL)
		return NULL;
	if ((no = reader_refuse(r)) != NULL)
		return no;
	if (n == 0)
		return reader_einval(r);
	r->op = OP_EXACT;
	r->want = n;
	return reader_start(r);
}
