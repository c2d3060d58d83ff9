/* SPDX-License-Identifier: MIT */
/*
 * coring/reader.h - a buffered reader over a socket: read until a
 * delimiter, or exactly n bytes, with a size limit and a time limit. It
 * reads a descriptor with co_recv into a buffer of its own, or a co_stream
 * (stream.h), whose buffers it reads in place. docs/reader.md has the
 * details.
 *
 *     struct conn { co_frame co; co_reader rd; int fd; ... };
 *
 *     co_reader_init(&c->rd, c->fd, &(co_reader_opts){ .max = 65536 });
 *     for (;;) {
 *             CO_AWAIT(f, co_reader_until(&c->rd, "\r\n", 2));
 *             if (co_result(f) <= 0)
 *                     break;              // 0: the peer closed; or an error
 *             // c->rd.data, c->rd.len: the line, "\r\n" included
 *     }
 *     co_reader_destroy(&c->rd);
 *
 * A read returns a view: rd.data and rd.len (also the await's value), valid
 * until the next read or co_reader_destroy. The view is not a C string:
 * no NUL follows it (rd.data[rd.len] is the next byte received, or past
 * the buffer), so strtol, sscanf, strlen and printf("%s") run off its
 * end; give them a copy (co_reader_copy) or its length (printf's "%.*s").
 * Over a stream the view points
 * into the stream's buffer when the bytes lie in one buffer; only bytes
 * that span two buffers are copied (into the reader's own). A read whose
 * bytes are buffered already completes in the call: it returns a finished
 * frame (co_done), and the await costs nothing more.
 *
 * Each read is a child coroutine (CO_AWAIT in C11; CO_AWAIT_TASK in C99):
 * co_timeout limits it as any child, and co_cancel ends it. The reader's
 * own limit (timeout_ns) costs less: a kernel timeout linked to each recv.
 * A read that was cancelled or ran out of time consumes nothing: the
 * bytes it had received stay buffered for the next read.
 */
#ifndef CORING_READER_H
#define CORING_READER_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include <coring/io.h>
#include <coring/stream.h>
#include <coring/timeout.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The longest delimiter. */
#define CO_READER_DELIM_MAX 16
/* The largest read (and buffer): an await's value is an int. */
#define CO_READER_MAX ((size_t)CO_IO_MAX)

typedef struct co_reader_opts {
	size_t size;          /* the buffer to start with (0: 4096, or max if
	                         smaller) */
	size_t max;           /* the most bytes one read returns, delimiter
	                         included (0: size); the buffer grows to it */
	uint64_t timeout_ns;  /* each read's time limit (0: none) */
} co_reader_opts;

/* All fields are private unless marked. */
typedef struct co_reader {
	co_frame co;                /* a read that waits: awaited as a child */
	co_io io;                   /* its recv */
	co_limit lim;               /* the time limit of a stream's receive */
	co_stream *stream;          /* NULL: the reader reads fd with co_recv */
	char *buf;                  /* the reader's own bytes: buf[head, tail) */
	size_t cap, head, tail;
	size_t scan;                /* bytes from head searched in vain */
	const struct iovec *iov;    /* the stream's buffers held, iov[seg] at off */
	size_t off;
	unsigned niov, seg;
	unsigned back_seg;          /* where the bytes copied from a stream
	                               buffer at buf[back_at] came from */
	size_t back_at, back_off;
	size_t max;                 /* public: the most bytes one read returns
	                               (1 to CO_READER_MAX); may be changed
	                               between reads */
	uint64_t timeout_ns;        /* public: each read's time limit, counted
	                               from its first wait (0: none); may be
	                               changed between reads */
	uint64_t deadline;
	const char *data;           /* read-only: the last read's bytes */
	size_t len;                 /* read-only: how many (0 after a failure) */
	size_t want;                /* exact: n */
	int fd;
	int fin;                    /* how the input ended: 0 (end of file),
	                               an error; 1 while it has not */
	int res;
	unsigned magic;
	unsigned char op, dlen, back;
	char delim[CO_READER_DELIM_MAX];
} co_reader;

/*
 * Set up r to read the socket fd with co_recv. It allocates its buffer of
 * o->size bytes here (o NULL: the defaults); the buffer grows, up to
 * o->max, when a read needs more. The reader does not own fd (it never
 * closes it). Errors: -EINVAL (NULL r, a negative fd, size or max above
 * CO_READER_MAX, size above max), -ENOMEM. r need not be zeroed first, and
 * so init cannot tell a reader that is set up from memory never set up
 * (reading its mark would read memory not yet written): on a live reader
 * (not destroyed) it is undefined (its buffer and a read in progress are
 * lost under it); co_reader_destroy it first. The same for
 * co_reader_init_stream.
 */
CO_API int co_reader_init(co_reader *r, int fd, const co_reader_opts *o);

/*
 * Set up r to read the open stream s: every receive of s is the reader's
 * from now on (buffers s holds already are read first). Calls on r follow
 * the stream's rule: from a frame of its ring's engine. Errors: -EINVAL
 * (NULL, s not open, sizes as above), -ENOMEM. r does not close s.
 */
CO_API int co_reader_init_stream(co_reader *r, co_stream *s, const co_reader_opts *o);

/* Free r's buffer (not the descriptor, not the stream). -EINVAL (NULL,
 * not set up, destroyed), -EBUSY (a read's frame runs: started or being
 * awaited); nothing changes on an error. A read handed out and never
 * started is given up: its frame must not be awaited after. */
CO_API int co_reader_destroy(co_reader *r);

/*
 * Read up to and including the first occurrence of the delimiter (1 to
 * CO_READER_DELIM_MAX bytes, copied: it need not outlive the call). The
 * await's value, also in r->len, and the bytes in r->data:
 *   > 0          the bytes read, delimiter included;
 *   0            the input ended (end of file) with nothing buffered;
 *   -EPROTO      the input ended inside the read: the bytes stay buffered
 *                (co_reader_buffered), and the next read gets -EPROTO too;
 *   -EMSGSIZE    no delimiter within r->max bytes: nothing is consumed,
 *                so the next read of the same kind gets it again;
 *   -ETIME       the reader's time limit (or a co_timeout) ran out first;
 *   -ECANCELED   co_cancel, or the engine's cancel stop;
 *   -ENOMEM      the buffer could not grow;
 *   the error that ended the input (-ECONNRESET ...), once the bytes
 *   before it have been read; -EINVAL (a reader not set up, a NULL or
 *   empty delimiter, one too long, r->max out of range); -EBUSY (a read
 *   is in progress on r: its frame handed out and not finished, awaited
 *   or not yet); co_recv's or co_stream_recv's other errors
 *   (-ENXIO: no engine runs here). A NULL r returns NULL (-EINVAL).
 * After -ETIME, -ECANCELED or -ENOMEM the reader goes on: nothing was lost.
 */
CO_API co_frame *co_reader_until(co_reader *r, const void *delim, size_t dlen);

/* Read exactly n bytes (1 to r->max): values as co_reader_until's, with
 * -EMSGSIZE for n above r->max (nothing consumed) and -EINVAL for 0. */
CO_API co_frame *co_reader_exact(co_reader *r, size_t n);

/* The bytes r holds that no read has returned yet (0 for NULL). */
CO_API size_t co_reader_buffered(const co_reader *r);

/* The first of those bytes, without consuming them: a pointer to *n
 * contiguous ones (*n may be less than co_reader_buffered), or NULL with
 * *n = 0 when none is held. Valid until the next read. */
CO_API const char *co_reader_peek(const co_reader *r, size_t *n);

/*
 * The last read's bytes as a C string: copied into buf with a NUL after
 * them (the view itself has none). Returns their length (0 after a read
 * that failed), or -EMSGSIZE when buf cannot hold them and the NUL (buf
 * gets "": never a string cut short), -EINVAL for a NULL r or buf, or a
 * size of 0. A byte 0 inside the view ends the string there for C's
 * string functions; the length returned still counts every byte.
 */
static inline int co_reader_copy(const co_reader *r, char *buf, size_t size)
{
	if (r == NULL || buf == NULL || size == 0)
		return -EINVAL;
	if (r->len >= size) {
		buf[0] = '\0';
		return -EMSGSIZE;
	}
	if (r->len)
		memcpy(buf, r->data, r->len);
	buf[r->len] = '\0';
	return (int)r->len;
}

#ifdef __cplusplus
}
#endif

#endif /* CORING_READER_H */
