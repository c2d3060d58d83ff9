/* SPDX-License-Identifier: MIT */
/*
 * protocol.c - RESP2 on the wire: the replies a command buffers on its
 * connection (sent by server.c's flusher), numbers read as Redis reads
 * them, and the requests read from coring's reader (co_reader_until for a
 * line, co_reader_exact for a bulk string): arrays of bulk strings, and
 * inline commands (a line of words, quotes as Redis takes them).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

/* ---- answers ----------------------------------------------------------------------------------- */

/* Room for n more bytes of answers; NULL (and the connection closes) when
 * memory runs out, or when the answers not sent yet would pass
 * --max-reply-buffer: then they are dropped, their memory freed, and
 * nothing more is buffered (as Redis closes a client past its output
 * buffer limit). */
char *out_room(struct conn *c, size_t n)
{
	if (c->dropped)
		return NULL;
	if (n > srv.max_reply || c->olen > srv.max_reply - n) {
		free(c->out);
		c->out = NULL;
		c->olen = c->ocap = c->mark = 0;
		c->dropped = 1;
		c->closing = 1;
		return NULL;
	}
	if (c->olen + n > c->ocap) {
		size_t cap = c->ocap ? c->ocap : 4096;
		char *p;

		while (cap < c->olen + n)
			cap *= 2;
		if (cap > srv.max_reply && c->olen + n <= srv.max_reply)
			cap = srv.max_reply;
		if ((p = realloc(c->out, cap)) == NULL) {
			c->closing = 1;
			return NULL;
		}
		c->out = p;
		c->ocap = cap;
	}
	return c->out + c->olen;
}

void out_add(struct conn *c, const char *p, size_t n)
{
	char *o = out_room(c, n);

	if (o) {
		memcpy(o, p, n);
		c->olen += n;
	}
}

/* v in decimal at p (room for 20 bytes): the length. */
size_t fmt_ll(char *p, long long v)
{
	unsigned long long u = v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v;
	char tmp[20];
	size_t n = 0, len;

	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*p++ = '-';
	len = n + (v < 0);
	while (n)
		*p++ = tmp[--n];
	return len;
}

/* A prefix character, a number and CRLF: ":42", "$5", "*3". */
void out_num(struct conn *c, char type, long long v)
{
	char *o = out_room(c, 24);

	if (o) {
		o[0] = type;
		o += 1 + fmt_ll(o + 1, v);
		o[0] = '\r';
		o[1] = '\n';
		c->olen = (size_t)(o + 2 - c->out);
	}
}

void reply_ok(struct conn *c)
{
	out_add(c, "+OK\r\n", 5);
}

void reply_nil(struct conn *c)
{
	out_add(c, "$-1\r\n", 5);
}

void reply_bulk(struct conn *c, const char *p, size_t n)
{
	out_num(c, '$', (long long)n);
	out_add(c, p, n);
	out_add(c, "\r\n", 2);
}

/* An error: "-" and the text, its line breaks made spaces (they would end
 * the answer early), as Redis does. */
void reply_error(struct conn *c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof msg)
		n = (int)sizeof msg - 1;
	for (int i = 0; i < n; i++)
		if (msg[i] == '\r' || msg[i] == '\n')
			msg[i] = ' ';
	out_add(c, "-", 1);
	out_add(c, msg, (size_t)n);
	out_add(c, "\r\n", 2);
}

/* A protocol error: answered, then the connection closes (as Redis). */
static void protocol_error(struct conn *c, const char *what)
{
	reply_error(c, "ERR Protocol error: %s", what);
	c->closing = 1;
}

/* ---- numbers as Redis reads them ------------------------------------------------------------- */

/* A decimal long long, strictly: an optional '-', no leading zero, no
 * space, no '+', in range. 1 if p[0, n) is one. */
int parse_ll(const char *p, size_t n, long long *out)
{
	unsigned long long v = 0, lim;
	int neg = 0;
	size_t i = 0;

	if (n == 0 || n > 20)
		return 0;
	if (n == 1 && p[0] == '0') {
		*out = 0;
		return 1;
	}
	if (p[0] == '-') {
		neg = 1;
		if (++i == n)
			return 0;
	}
	if (p[i] < '1' || p[i] > '9')
		return 0;
	lim = neg ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX;
	for (; i < n; i++) {
		if (p[i] < '0' || p[i] > '9' || v > (lim - (unsigned)(p[i] - '0')) / 10)
			return 0;
		v = v * 10 + (unsigned)(p[i] - '0');
	}
	*out = neg ? (long long)(0 - v) : (long long)v;
	return 1;
}

int arg_ll(const struct conn *c, unsigned i, long long *out)
{
	return parse_ll(arg_p(c, i), arg_n(c, i), out);
}

int arg_is(const struct conn *c, unsigned i, const char *word)
{
	return arg_n(c, i) == strlen(word) && strncasecmp(arg_p(c, i), word, arg_n(c, i)) == 0;
}

/* ---- reading requests ----------------------------------------------------------------------------- */

/* What the request holds once an argument of n more bytes is kept: its
 * bytes and its arguments' entries, as --max-request counts them. */
static size_t request_bytes(const struct conn *c, size_t n)
{
	return c->alen + n + (c->argc + 1) * sizeof(struct arg);
}

/* Keep n bytes at p as the next argument. 0, or -1 when the request is
 * over --max-request (or memory ran out): the connection closes. */
static int arg_add(struct conn *c, const char *p, size_t n)
{
	if (request_bytes(c, n) > srv.max_request)
		return -1;
	if (c->argc == c->argcap) {
		unsigned cap = c->argcap ? c->argcap * 2 : 8;
		struct arg *a = realloc(c->args, cap * sizeof *a);

		if (a == NULL)
			return -1;
		c->args = a;
		c->argcap = cap;
	}
	if (c->abuf == NULL || c->alen + n > c->acap) {
		size_t cap = c->acap ? c->acap : 256;
		char *b;

		while (cap < c->alen + n)
			cap *= 2;
		if ((b = realloc(c->abuf, cap)) == NULL)
			return -1;
		c->abuf = b;
		c->acap = cap;
	}
	memcpy(c->abuf + c->alen, p, n);
	c->args[c->argc++] = (struct arg){ c->alen, n };
	c->alen += n;
	return 0;
}

static int is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

static int hex(char ch)
{
	return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
		: ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* One quoted word of an inline command, from p[*i] (the quote): its bytes
 * into w (*wn), escapes as Redis reads them ("\n", "\x41"; '\'' only in
 * single quotes). 0, or -1 for unbalanced quotes. */
static int quoted_word(const char *p, size_t n, size_t *i, char *w, size_t *wn)
{
	char q = p[(*i)++];

	for (; *i < n; (*i)++) {
		char ch = p[*i];

		if (ch == q) { /* the closing quote must end the word */
			(*i)++;
			return *i < n && !is_space(p[*i]) ? -1 : 0;
		}
		if (ch == '\\' && *i + 1 < n) {
			char e = p[++*i];

			if (q == '\'') {
				if (e != '\'')
					w[(*wn)++] = '\\';
				ch = e;
			} else if (e == 'x' && *i + 2 < n && hex(p[*i + 1]) >= 0 && hex(p[*i + 2]) >= 0) {
				ch = (char)(hex(p[*i + 1]) * 16 + hex(p[*i + 2]));
				*i += 2;
			} else {
				ch = e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e == 'b' ? '\b'
				     : e == 'a' ? '\a' : e;
			}
		}
		w[(*wn)++] = ch;
	}
	return -1;
}

/* An inline command: words separated by spaces, quotes as above. */
static int parse_inline(struct conn *c, const char *p, size_t n)
{
	char *w = malloc(n + 1);
	size_t i = 0;
	int err = 0;

	if (w == NULL)
		return -1;
	while (err == 0) {
		size_t wn = 0;

		while (i < n && is_space(p[i]))
			i++;
		if (i == n)
			break;
		if (p[i] == '"' || p[i] == '\'') {
			if (quoted_word(p, n, &i, w, &wn) < 0) {
				protocol_error(c, "unbalanced quotes in request");
				err = 1;
				break;
			}
		} else {
			while (i < n && !is_space(p[i]))
				w[wn++] = p[i++];
		}
		if (arg_add(c, w, wn) < 0)
			err = -1;
	}
	free(w);
	return err;
}

/*
 * Take one read's bytes (line or bulk string) into the request: 1 when a
 * command is complete, 0 when more is to be read, -1 to close (a protocol
 * error answered, or a request too large).
 */
int request_take(struct conn *c, const char *p, size_t n)
{
	long long v;

	if (c->state == ST_BULK) {
		if (arg_add(c, p, c->blen) < 0)
			return -1;
		c->state = (long long)c->argc == c->nargs ? ST_HEAD : ST_BULKLEN;
		return c->state == ST_HEAD;
	}
	n -= n >= 2 && p[n - 2] == '\r' ? 2 : 1; /* the line without its end */
	if (c->state == ST_BULKLEN) {
		if (p[0] != '$') {
			reply_error(c, "ERR Protocol error: expected '$', got '%c'", n ? p[0] : ' ');
			c->closing = 1;
			return -1;
		}
		if (!parse_ll(p + 1, n - 1, &v) || v < 0 || (size_t)v > srv.max_bulk ||
		    (size_t)v > srv.max_request) {
			protocol_error(c, "invalid bulk length");
			return -1;
		}
		/* checked before its bytes are read, not after: a string that
		 * would take the request past --max-request closes it now */
		if (request_bytes(c, (size_t)v) > srv.max_request)
			return -1;
		c->blen = (size_t)v;
		c->state = ST_BULK;
		return 0;
	}
	if (n > 0 && p[0] == '*') {
		if (!parse_ll(p + 1, n - 1, &v) || v > ARGS_MAX ||
		    (v > 0 && request_bytes(c, 0) + ((size_t)v - 1) * sizeof(struct arg) > srv.max_request)) {
			protocol_error(c, "invalid multibulk length");
			return -1;
		}
		c->nargs = v;
		c->state = v > 0 ? ST_BULKLEN : ST_HEAD; /* *0, *-1: nothing to do */
		return 0;
	}
	if (parse_inline(c, p, n))
		return -1;
	return c->argc > 0; /* an empty line: nothing to do */
}

/* The next read of the request. */
co_frame *request_read(struct conn *c)
{
	if (c->state == ST_BULK) {
		c->rd.max = c->blen + 2;
		return co_reader_exact(&c->rd, c->blen + 2);
	}
	c->rd.max = LINE_MAX_BYTES + 2;
	return co_reader_until(&c->rd, "\n", 1);
}

/* A read failed: answer a line too long as Redis does; the connection
 * closes in every case (0, -EPROTO: the peer is gone, or the sweeper or
 * the stop shut the connection). */
void request_failed(struct conn *c, int err)
{
	size_t n;
	const char *p = co_reader_peek(&c->rd, &n);

	if (err != -EMSGSIZE)
		return;
	if (c->state == ST_BULKLEN)
		protocol_error(c, "too big bulk count string");
	else if (n > 0 && p[0] == '*')
		protocol_error(c, "too big mbulk count string");
	else
		protocol_error(c, "too big inline request");
}

