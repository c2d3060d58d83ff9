/* SPDX-License-Identifier: MIT */
/* The benchmark servers' HTTP parser (bench/http/http_parse.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "http_parse.h"

/* Parse a whole request held in s. */
static int parse_str(const char *s, struct http_req *r)
{
	struct http_parser p;

	http_parser_init(&p);
	return http_parse(&p, s, strlen(s), r);
}

static void test_valid_get(void **state)
{
	struct http_req r;
	const char *s = "GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: t\r\n\r\n";
	const char *resp;
	size_t n;

	(void)state;
	assert_int_equal(parse_str(s, &r), HTTP_DONE);
	assert_int_equal(r.len, strlen(s));
	assert_int_equal(r.minor, 1);
	assert_true(r.keep_alive);
	assert_true(r.get_root);
	resp = http_response(&r, &n);
	assert_int_equal(n, strlen(HTTP_HELLO_RESPONSE));
	assert_memory_equal(resp, HTTP_HELLO_RESPONSE, n);
}

static void test_not_found_and_head(void **state)
{
	struct http_req r;
	const char *resp;
	size_t n;

	(void)state;
	assert_int_equal(parse_str("GET /x HTTP/1.1\r\nHost: x\r\n\r\n", &r), HTTP_DONE);
	assert_false(r.get_root);
	resp = http_response(&r, &n);
	assert_memory_equal(resp, "HTTP/1.1 404", 12);
	assert_int_equal(parse_str("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n", &r), HTTP_DONE);
	resp = http_response(&r, &n);
	assert_memory_equal(resp, "HTTP/1.1 200", 12);
	assert_null(strstr(resp, "Hello")); /* no body for HEAD */
	assert_int_equal(parse_str("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", &r),
			 HTTP_DONE);
	assert_int_equal(r.content_length, 3);
	assert_false(r.get_root);
}

static void test_keep_alive_rules(void **state)
{
	static const struct {
		const char *req;
		int keep;
	} cases[] = {
		{ "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1 },
		{ "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 0 },
		{ "GET / HTTP/1.1\r\nHost: x\r\nconnection: Upgrade, CLOSE\r\n\r\n", 0 },
		{ "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n", 1 },
		{ "GET / HTTP/1.0\r\n\r\n", 0 },
		{ "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", 1 },
		{ "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", 0 },
	};
	struct http_req r;
	const char *resp;
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		assert_int_equal(parse_str(cases[i].req, &r), HTTP_DONE);
		assert_int_equal(r.keep_alive, cases[i].keep);
		resp = http_response(&r, &n);
		if (!cases[i].keep)
			assert_non_null(strstr(resp, "Connection: close\r\n"));
		else if (r.minor == 0)
			assert_non_null(strstr(resp, "Connection: keep-alive\r\n"));
		else
			assert_null(strstr(resp, "Connection:"));
	}
}

static void test_malformed(void **state)
{
	static const char *const bad[] = {
		"GARBAGE\r\n\r\n",
		"GET / HTTP/1.1\r\n\r\n",                        /* no Host in 1.1 */
		"GET / HTTP/2.0\r\nHost: x\r\n\r\n",
		"GET /\r\nHost: x\r\n\r\n",
		"GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
		"G(T / HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\nHost: x\r\n\r\n",               /* bare LF */
		"GET / HTTP/1.1\r\nHost x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",  /* obs-fold */
		"GET / HTTP/1.1\r\nHost : x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\rY\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
		"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
	};
	struct http_req r;
	const char *resp;
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(parse_str(bad[i], &r), HTTP_BAD);
	}
	/* a NUL anywhere in the header */
	assert_int_equal(http_parse(&(struct http_parser){ 0 }, "GET \0/ HTTP/1.1\r\n", 17, &r), HTTP_BAD);
	resp = http_error_response(HTTP_BAD, &n);
	assert_memory_equal(resp, "HTTP/1.1 400 ", 13);
	assert_non_null(strstr(resp, "Connection: close\r\n"));
}

static void test_header_size_limit(void **state)
{
	char *big = malloc(HTTP_MAX_REQUEST + 100);
	struct http_parser p;
	struct http_req r;
	size_t n;
	int len;

	(void)state;
	len = sprintf(big, "GET / HTTP/1.1\r\nHost: x\r\nX: ");
	memset(big + len, 'a', HTTP_MAX_REQUEST + 100 - (size_t)len);
	/* below the limit: still waiting; at the limit: refused */
	http_parser_init(&p);
	assert_int_equal(http_parse(&p, big, HTTP_MAX_REQUEST - 1, &r), HTTP_NEED_MORE);
	assert_int_equal(http_parse(&p, big, HTTP_MAX_REQUEST, &r), HTTP_TOO_LARGE);
	assert_memory_equal(http_error_response(HTTP_TOO_LARGE, &n), "HTTP/1.1 431 ", 13);
	/* a header that ends exactly at the limit is fine */
	memcpy(big + HTTP_MAX_REQUEST - 4, "\r\n\r\n", 4);
	http_parser_init(&p);
	assert_int_equal(http_parse(&p, big, HTTP_MAX_REQUEST, &r), HTTP_DONE);
	assert_int_equal(r.len, HTTP_MAX_REQUEST);
	/* a body that would cross the limit is refused at once */
	http_parser_init(&p);
	assert_int_equal(parse_str("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9000\r\n\r\n", &r),
			 HTTP_TOO_LARGE);
	free(big);
}

/* Byte by byte: NEED_MORE until the last byte, then the same result as in
 * one piece. */
static void test_byte_by_byte(void **state)
{
	const char *s = "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
	size_t n = strlen(s);
	struct http_parser p;
	struct http_req r, whole;

	(void)state;
	assert_int_equal(parse_str(s, &whole), HTTP_DONE);
	http_parser_init(&p);
	for (size_t i = 1; i < n; i++)
		assert_int_equal(http_parse(&p, s, i, &r), HTTP_NEED_MORE);
	assert_int_equal(http_parse(&p, s, n, &r), HTTP_DONE);
	assert_int_equal(r.len, whole.len);
	assert_int_equal(r.keep_alive, whole.keep_alive);
	assert_int_equal(r.header_len, whole.header_len);
	/* malformed input is found at the same byte either way */
	http_parser_init(&p);
	assert_int_equal(http_parse(&p, "GET / HTTP/1.1\r", 15, &r), HTTP_NEED_MORE);
	assert_int_equal(http_parse(&p, "GET / HTTP/1.1\r\nX\n", 18, &r), HTTP_BAD);
}

/* http_serve: pipelined requests answered in order, the rest kept. */
static void test_serve_pipelined(void **state)
{
	char in[HTTP_MAX_REQUEST], out[4096];
	const char *reqs = "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
			   "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HT";
	size_t have = strlen(reqs), out_len = 0, hl = strlen(HTTP_HELLO_RESPONSE);
	struct http_parser p;

	(void)state;
	memcpy(in, reqs, have);
	http_parser_init(&p);
	assert_int_equal(http_serve(&p, in, &have, out, sizeof out, &out_len), HTTP_SERVE_OPEN);
	assert_memory_equal(out, HTTP_HELLO_RESPONSE, hl);
	assert_memory_equal(out + hl, "HTTP/1.1 404", 12);
	assert_memory_equal(out + out_len - hl, HTTP_HELLO_RESPONSE, hl);
	assert_int_equal(have, 8);
	assert_memory_equal(in, "GET / HT", 8);
	/* the rest arrives */
	memcpy(in + have, "TP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET", 41);
	have += 41;
	out_len = 0;
	assert_int_equal(http_serve(&p, in, &have, out, sizeof out, &out_len), HTTP_SERVE_CLOSE);
	assert_non_null(strstr(out, "Connection: close"));
}

/* http_serve: a malformed request after a good one: answer both, close. */
static void test_serve_bad_after_good(void **state)
{
	char in[256], out[1024];
	const char *reqs = "GET / HTTP/1.1\r\nHost: x\r\n\r\nBAD\r\n\r\n";
	size_t have = strlen(reqs), out_len = 0, hl = strlen(HTTP_HELLO_RESPONSE);
	struct http_parser p;

	(void)state;
	memcpy(in, reqs, have);
	http_parser_init(&p);
	assert_int_equal(http_serve(&p, in, &have, out, sizeof out, &out_len), HTTP_SERVE_CLOSE);
	assert_memory_equal(out, HTTP_HELLO_RESPONSE, hl);
	assert_memory_equal(out + hl, "HTTP/1.1 400", 12);
}

/* http_serve: an out buffer too small for all answers says FULL, and the
 * next call goes on where it stopped. */
static void test_serve_full(void **state)
{
	char in[HTTP_MAX_REQUEST], out[HTTP_MAX_RESPONSE * 2];
	const char *one = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	size_t have = 0, out_len = 0, total = 0, n1 = strlen(one), hl = strlen(HTTP_HELLO_RESPONSE);
	struct http_parser p;
	int st;

	(void)state;
	for (int i = 0; i < 20; i++, have += n1)
		memcpy(in + have, one, n1);
	http_parser_init(&p);
	do {
		out_len = 0;
		st = http_serve(&p, in, &have, out, sizeof out, &out_len);
		for (size_t off = 0; off < out_len; off += hl)
			assert_memory_equal(out + off, HTTP_HELLO_RESPONSE, hl);
		total += out_len / hl;
	} while (st == HTTP_SERVE_FULL);
	assert_int_equal(st, HTTP_SERVE_OPEN);
	assert_int_equal(total, 20);
	assert_int_equal(have, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_get),
		cmocka_unit_test(test_not_found_and_head),
		cmocka_unit_test(test_keep_alive_rules),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_header_size_limit),
		cmocka_unit_test(test_byte_by_byte),
		cmocka_unit_test(test_serve_pipelined),
		cmocka_unit_test(test_serve_bad_after_good),
		cmocka_unit_test(test_serve_full),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
