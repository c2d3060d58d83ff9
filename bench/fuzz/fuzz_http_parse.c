/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the benchmark servers' HTTP parser
 * (bench/http/http_parse.c). Besides crashes and sanitizer reports it checks an
 * oracle: serving the input as it would arrive in one read, byte by byte,
 * and in chunks whose sizes come from the input gives the same answers in
 * the same order and the same end (open or close); every request it
 * accepts has a length inside the input and a well-formed answer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../http/http_parse.h" /* relative: run_fuzz.sh adds no -I */

#define OUT_CAP (64 * 1024)

struct run {
	char out[OUT_CAP];
	size_t out_len;
	int closed;
};

static char in[HTTP_MAX_REQUEST];

/* Feed data in pieces (step(i) bytes each) the way a server does. */
static void serve(const uint8_t *data, size_t size, size_t (*step)(const uint8_t *, size_t, size_t),
		  struct run *r)
{
	struct http_parser p;
	size_t have = 0, pos = 0;

	http_parser_init(&p);
	r->out_len = 0;
	r->closed = 0;
	while (pos < size && !r->closed) {
		size_t n = step(data, size, pos);
		int st;

		if (n > size - pos)
			n = size - pos;
		if (n > sizeof in - have)
			n = sizeof in - have;
		memcpy(in + have, data + pos, n);
		have += n;
		pos += n;
		do {
			char out[HTTP_MAX_RESPONSE * 4];
			size_t out_len = 0;

			st = http_serve(&p, in, &have, out, sizeof out, &out_len);
			if (out_len > sizeof out || have > sizeof in)
				abort();
			if (r->out_len + out_len > OUT_CAP)
				abort(); /* can't be: one answer per request of >= 16 bytes */
			memcpy(r->out + r->out_len, out, out_len);
			r->out_len += out_len;
		} while (st == HTTP_SERVE_FULL);
		if (st == HTTP_SERVE_CLOSE)
			r->closed = 1;
		else if (have == sizeof in)
			abort(); /* a full buffer must have been refused (431) */
	}
}

static size_t whole(const uint8_t *d, size_t size, size_t pos)
{
	(void)d;
	return size - pos;
}

static size_t bytewise(const uint8_t *d, size_t size, size_t pos)
{
	(void)d;
	(void)size;
	(void)pos;
	return 1;
}

static size_t chunks(const uint8_t *d, size_t size, size_t pos)
{
	(void)size;
	return 1 + d[pos] % 97;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct run a, b, c;

	serve(data, size, whole, &a);
	serve(data, size, bytewise, &b);
	serve(data, size, chunks, &c);
	if (a.closed != b.closed || a.out_len != b.out_len || memcmp(a.out, b.out, a.out_len) ||
	    a.closed != c.closed || a.out_len != c.out_len || memcmp(a.out, c.out, a.out_len))
		abort(); /* the outcome depends on how the input was split */
	/* every answer is a status line; a close comes with an answer */
	if (a.out_len && memcmp(a.out, "HTTP/1.1 ", 9))
		abort();
	if (a.closed && a.out_len == 0)
		abort();

	/* single-request oracle: a complete request fits in the input */
	struct http_parser p;
	struct http_req req;
	size_t n = size < HTTP_MAX_REQUEST ? size : HTTP_MAX_REQUEST;
	http_parser_init(&p);
	if (http_parse(&p, (const char *)data, n, &req) == HTTP_DONE &&
	    (req.len > n || req.header_len > req.len || req.header_len < 16)) /* "G / HTTP/1.0" CRLF CRLF */
		abort();
	return 0;
}
