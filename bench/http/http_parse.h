/* SPDX-License-Identifier: MIT */
/*
 * A small HTTP/1.x request parser for the benchmark servers (http_coring,
 * http_epoll): both parse with it and answer with its responses, so they
 * differ only in their I/O model.
 *
 *     struct http_parser p;
 *     struct http_req req;
 *     http_parser_init(&p);
 *     // after each read, with buf holding the unconsumed bytes:
 *     switch (http_parse(&p, buf, len, &req)) {
 *     case HTTP_NEED_MORE: read more;
 *     case HTTP_DONE:      answer http_response(&req), drop req.len bytes,
 *                          http_parser_init(&p), parse again (pipelining);
 *     default:             answer http_error_response(status), close.
 *     }
 *
 * What it accepts: "METHOD SP target SP HTTP/1.0|HTTP/1.1 CRLF", header
 * lines "name: value CRLF" (name a token; value visible characters, spaces,
 * tabs, obs-text), an empty line, then Content-Length bytes of body. Lines
 * end with CRLF; a bare LF, a control character, an obs-fold line, a
 * missing Host in HTTP/1.1, Transfer-Encoding (not supported) or a bad or
 * conflicting Content-Length are malformed (400). A request (header and
 * body) longer than HTTP_MAX_REQUEST is refused (431). Keep-alive follows
 * RFC 9112: HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with
 * "Connection: keep-alive".
 *
 * Incremental: the parser remembers how far it scanned, so bytes arriving
 * one at a time (a slow client) cost O(1) each, and the outcome never
 * depends on how the input was split (the fuzz harness checks that).
 */
#ifndef CORING_BENCH_HTTP_PARSE_H
#define CORING_BENCH_HTTP_PARSE_H

#include <stddef.h>

#define HTTP_MAX_REQUEST 8192

enum http_status {
	HTTP_NEED_MORE = 0,      /* no complete request yet */
	HTTP_DONE = 1,           /* a request of req->len bytes is complete */
	HTTP_BAD = -400,         /* malformed: answer 400, close */
	HTTP_TOO_LARGE = -431,   /* longer than HTTP_MAX_REQUEST: 431, close */
};

struct http_req {
	size_t len;              /* bytes of the request, header and body */
	size_t header_len;       /* bytes up to and including the empty line */
	size_t content_length;
	int minor;               /* HTTP/1.<minor> */
	int keep_alive;          /* the connection stays open after the answer */
	int get_root;            /* GET or HEAD of "/" */
	int head;                /* HEAD: the answer has no body */
};

struct http_parser {
	size_t scanned;          /* private: bytes searched for the header end */
	int have_header;         /* private: req below is the validated header */
	struct http_req req;     /* private */
};

static inline void http_parser_init(struct http_parser *p)
{
	p->scanned = 0;
	p->have_header = 0;
}

/* Parse the request at the start of buf[0..len). Call it again with the
 * same buffer (grown) after HTTP_NEED_MORE; after HTTP_DONE, drop req->len
 * bytes and call http_parser_init. */
int http_parse(struct http_parser *p, const char *buf, size_t len, struct http_req *req);

/* The answer to a complete request (200 "Hello, World!" for GET /, 404
 * otherwise), with "Connection: close" or "Connection: keep-alive" as the
 * request's version needs. */
const char *http_response(const struct http_req *req, size_t *len);

/* The answer to HTTP_BAD or HTTP_TOO_LARGE (with "Connection: close"). */
const char *http_error_response(int status, size_t *len);

/*
 * The connection logic both servers share: parse the complete requests in
 * in[0..*have), append their answers to out (capacity cap, *out_len bytes
 * used), and move the bytes of an incomplete request to the front of in.
 * Returns HTTP_SERVE_OPEN (send out, read more), HTTP_SERVE_CLOSE (send
 * out, then close: "Connection: close", HTTP/1.0, or a malformed request),
 * or HTTP_SERVE_FULL (out has no room for another answer: send it, then
 * call again with nothing new read). cap must be >= HTTP_MAX_RESPONSE.
 */
enum { HTTP_SERVE_OPEN = 0, HTTP_SERVE_CLOSE = 1, HTTP_SERVE_FULL = 2 };
#define HTTP_MAX_RESPONSE 256
int http_serve(struct http_parser *p, char *in, size_t *have, char *out, size_t cap,
	       size_t *out_len);

/* The keep-alive answer to "GET / HTTP/1.1", byte for byte (the load
 * generator checks it). */
#define HTTP_HELLO_RESPONSE                                                 \
	"HTTP/1.1 200 OK\r\nServer: coring-bench\r\nContent-Type: text/plain\r\n" \
	"Content-Length: 13\r\n\r\nHello, World!"

#endif
