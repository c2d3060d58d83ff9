/* SPDX-License-Identifier: MIT */
/* The benchmark servers' HTTP/1.x request parser: see http_parse.h. */
#include <string.h>

#include "http_parse.h"

/* RFC 9110 tchar */
static int is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* field-value bytes: visible ASCII, space, tab, obs-text */
static int is_vchar_ws(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static int lower(int c)
{
	return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

static int eq_nocase(const char *a, size_t n, const char *lit)
{
	size_t m = strlen(lit);

	if (n != m)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (lower((unsigned char)a[i]) != lit[i])
			return 0;
	return 1;
}

/* Does the comma-separated list v[0..n) hold token tok (any case)? */
static int list_has(const char *v, size_t n, const char *tok)
{
	size_t i = 0;

	while (i < n) {
		size_t s, e;

		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		s = i;
		while (i < n && v[i] != ',')
			i++;
		e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e > s && eq_nocase(v + s, e - s, tok))
			return 1;
	}
	return 0;
}

/* Validate the header buf[0..hlen) (ending with CRLF CRLF) into r. */
static int parse_header(const char *buf, size_t hlen, struct http_req *r)
{
	const char *p = buf, *end = buf + hlen - 2; /* the final empty line */
	const char *m = p, *t, *eol;
	int has_host = 0, has_cl = 0, conn_close = 0, conn_keep = 0;
	size_t cl = 0;

	/* request line: method SP target SP version */
	while (p < end && is_tchar((unsigned char)*p))
		p++;
	if (p == m || p - m > 16 || p >= end || *p != ' ')
		return HTTP_BAD;
	size_t mlen = (size_t)(p - m);
	t = ++p;
	while (p < end && (unsigned char)*p > 0x20 && *p != 0x7f)
		p++;
	if (p == t || p >= end || *p != ' ')
		return HTTP_BAD;
	size_t tlen = (size_t)(p - t);
	p++;
	if (end - p < 10 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') ||
	    p[8] != '\r' || p[9] != '\n')
		return HTTP_BAD;
	r->minor = p[7] - '0';
	p += 10;

	/* header lines */
	while (p < end) {
		const char *n = p, *v, *ve;

		eol = memchr(p, '\r', (size_t)(end - p));
		if (eol == NULL || eol[1] != '\n')
			return HTTP_BAD;
		while (p < eol && is_tchar((unsigned char)*p))
			p++;
		if (p == n || p >= eol || *p != ':')
			return HTTP_BAD; /* empty name, obs-fold, space before ':' */
		size_t nlen = (size_t)(p - n);
		p++;
		while (p < eol && (*p == ' ' || *p == '\t'))
			p++;
		v = p;
		for (; p < eol; p++)
			if (!is_vchar_ws((unsigned char)*p))
				return HTTP_BAD;
		ve = eol;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		size_t vlen = (size_t)(ve - v);

		if (eq_nocase(n, nlen, "host")) {
			if (has_host++)
				return HTTP_BAD; /* RFC 9112 3.2: exactly one */
		} else if (eq_nocase(n, nlen, "connection")) {
			conn_close |= list_has(v, vlen, "close");
			conn_keep |= list_has(v, vlen, "keep-alive");
		} else if (eq_nocase(n, nlen, "content-length")) {
			size_t x = 0;
			if (vlen == 0 || vlen > 9)
				return HTTP_BAD;
			for (size_t i = 0; i < vlen; i++) {
				if (v[i] < '0' || v[i] > '9')
					return HTTP_BAD;
				x = x * 10 + (size_t)(v[i] - '0');
			}
			if (has_cl++ && x != cl)
				return HTTP_BAD;
			cl = x;
		} else if (eq_nocase(n, nlen, "transfer-encoding")) {
			return HTTP_BAD; /* chunked bodies are not supported */
		}
		p = eol + 2;
	}
	if (r->minor == 1 && !has_host)
		return HTTP_BAD;
	r->header_len = hlen;
	r->content_length = cl;
	r->len = hlen + cl;
	r->keep_alive = r->minor == 1 ? !conn_close : (conn_keep && !conn_close);
	r->head = mlen == 4 && memcmp(m, "HEAD", 4) == 0;
	r->get_root = ((mlen == 3 && memcmp(m, "GET", 3) == 0) || r->head) && tlen == 1 && *t == '/';
	return HTTP_DONE;
}

int http_parse(struct http_parser *p, const char *buf, size_t len, struct http_req *req)
{
	size_t lim = len < HTTP_MAX_REQUEST ? len : HTTP_MAX_REQUEST;

	if (!p->have_header) {
		size_t i = p->scanned, hlen = 0;
		int st;

		/* Find the empty line; a bare LF or a NUL is malformed at once. */
		for (; i < lim; i++) {
			unsigned char c = (unsigned char)buf[i];
			if (c > '\r')
				continue;
			if (c == '\n') {
				if (i == 0 || buf[i - 1] != '\r')
					return HTTP_BAD;
				if (i >= 3 && buf[i - 2] == '\n') {
					hlen = i + 1;
					break;
				}
			} else if (c == 0) {
				return HTTP_BAD;
			}
		}
		if (hlen == 0) {
			p->scanned = i;
			return lim == HTTP_MAX_REQUEST ? HTTP_TOO_LARGE : HTTP_NEED_MORE;
		}
		p->scanned = hlen;
		st = parse_header(buf, hlen, &p->req);
		if (st != HTTP_DONE)
			return st;
		if (p->req.len > HTTP_MAX_REQUEST)
			return HTTP_TOO_LARGE;
		p->have_header = 1;
	}
	if (len < p->req.len)
		return HTTP_NEED_MORE; /* the body is on its way */
	*req = p->req;
	return HTTP_DONE;
}

#define HDRS "Server: coring-bench\r\nContent-Type: text/plain\r\n"
#define HELLO "Content-Length: 13\r\n\r\nHello, World!"
#define NOTFOUND "Content-Length: 10\r\n\r\nNot Found\n"

#define R(s) { s, sizeof(s) - 1 }
#define HEAD404 "Content-Length: 10\r\n\r\n"

/* [404?][head?][connection header: 0 none, 1 close, 2 keep-alive] */
static const struct {
	const char *s;
	size_t n;
} responses[2][2][3] = {
	{ { R("HTTP/1.1 200 OK\r\n" HDRS HELLO),
	    R("HTTP/1.1 200 OK\r\n" HDRS "Connection: close\r\n" HELLO),
	    R("HTTP/1.1 200 OK\r\n" HDRS "Connection: keep-alive\r\n" HELLO) },
	  { R("HTTP/1.1 200 OK\r\n" HDRS "Content-Length: 13\r\n\r\n"),
	    R("HTTP/1.1 200 OK\r\n" HDRS "Connection: close\r\nContent-Length: 13\r\n\r\n"),
	    R("HTTP/1.1 200 OK\r\n" HDRS "Connection: keep-alive\r\nContent-Length: 13\r\n\r\n") } },
	{ { R("HTTP/1.1 404 Not Found\r\n" HDRS NOTFOUND),
	    R("HTTP/1.1 404 Not Found\r\n" HDRS "Connection: close\r\n" NOTFOUND),
	    R("HTTP/1.1 404 Not Found\r\n" HDRS "Connection: keep-alive\r\n" NOTFOUND) },
	  { R("HTTP/1.1 404 Not Found\r\n" HDRS HEAD404),
	    R("HTTP/1.1 404 Not Found\r\n" HDRS "Connection: close\r\n" HEAD404),
	    R("HTTP/1.1 404 Not Found\r\n" HDRS "Connection: keep-alive\r\n" HEAD404) } },
};

const char *http_response(const struct http_req *req, size_t *len)
{
	int conn = !req->keep_alive ? 1 : req->minor == 0 ? 2 : 0;

	*len = responses[!req->get_root][req->head][conn].n;
	return responses[!req->get_root][req->head][conn].s;
}

const char *http_error_response(int status, size_t *len)
{
	const char *s = status == HTTP_TOO_LARGE
		? "HTTP/1.1 431 Request Header Fields Too Large\r\n" HDRS
		  "Connection: close\r\nContent-Length: 0\r\n\r\n"
		: "HTTP/1.1 400 Bad Request\r\n" HDRS "Connection: close\r\nContent-Length: 0\r\n\r\n";

	*len = strlen(s);
	return s;
}

int http_serve(struct http_parser *p, char *in, size_t *have, char *out, size_t cap,
	       size_t *out_len)
{
	size_t used = 0;
	int ret = HTTP_SERVE_OPEN;

	for (;;) {
		struct http_req req;
		const char *s;
		size_t n;
		int st;

		if (cap - *out_len < HTTP_MAX_RESPONSE) {
			ret = HTTP_SERVE_FULL;
			break;
		}
		st = http_parse(p, in + used, *have - used, &req);
		if (st == HTTP_NEED_MORE)
			break;
		if (st == HTTP_DONE) {
			s = http_response(&req, &n);
			used += req.len;
			http_parser_init(p);
		} else {
			s = http_error_response(st, &n);
		}
		memcpy(out + *out_len, s, n);
		*out_len += n;
		if (st != HTTP_DONE || !req.keep_alive) {
			ret = HTTP_SERVE_CLOSE;
			break;
		}
	}
	/* Keep the unparsed bytes at the front; the parser's scan position is
	 * relative to the request start, which is now 0. */
	if (used) {
		memmove(in, in + used, *have - used);
		*have -= used;
	}
	return ret;
}
