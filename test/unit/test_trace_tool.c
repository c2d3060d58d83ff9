/* SPDX-License-Identifier: MIT */
/*
 * tools/coring_trace.py on traces made here: the state diagram of the
 * frame parser (docs/examples/frame_parser.c, built into this program with
 * the label backend meson chose for it) has the parser's suspension points
 * and no other states; the Trace Event JSON of a run with wake-ups,
 * transfers and I/O validates, and the validator rejects a slice without
 * its end and a flow without its end; the text listing names every event.
 * CORING_TOOL is the tool, CORING_FP_SOURCE the parser's source.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <coring/io.h>
#include <coring/scheduler.h>
#include <coring/stream.h>
#include <coring/trace.h>
#define CO_LOOP_TRACE(f, what) co_trace_frame((f), (what))
#include <coring/loop.h>

#include "helpers.h"
#include "frame_parser.h"

static const char *tmp(const char *name)
{
	return co_test_tmp_path("coring-tool", name);
}

/* Run the tool with args; its exit status. */
static int tool(const char *args)
{
	const char *t = getenv("CORING_TOOL");
	char cmd[1024];
	int st;

	assert_non_null(t);
	snprintf(cmd, sizeof cmd, "python3 -B '%s' %s", t, args);
	st = system(cmd);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *s;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	s = malloc((size_t)n + 1);
	assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
	s[n] = '\0';
	fclose(f);
	return s;
}

static void spit(const char *path, const char *s)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(s, 1, strlen(s), f), strlen(s));
	fclose(f);
}

#define NEED_TRACE()                    \
	do {                            \
		if (!co_trace_available()) \
			skip();         \
	} while (0)

/* ---- the frame parser's state machine ----------------------------------------- */

static void test_dot_frame_parser(void **state)
{
	const char *trace = tmp("fp.trace"), *dot = tmp("fp.dot");
	static const char *msgs[] = { "hi", "bad crc", "ok" };
	uint8_t frame[FP_MAX_PAYLOAD + 3];
	int want[64], nwant = 0, nodes = 0, start = 0, seen[64] = { 0 };
	char args[512], *src, *text, *line;
	struct fp_parser p;
	co_loop l;
	(void)state;
	NEED_TRACE();
	assert_int_equal(co_trace_start(&(co_trace_opts){ .events = 4096, .path = trace }), 0);
	fp_init(&p, NULL, NULL);
	co_loop_init(&l);
	assert_int_equal(co_loop_spawn(&l, &p.co), 0);
	/* noise, frames (one with a bad CRC), a bad length: every state */
	p.in = 0x55;
	co_loop_step(&l);
	for (unsigned i = 0; i < 3; i++) {
		unsigned k = fp_encode(frame, (const uint8_t *)msgs[i], (uint8_t)strlen(msgs[i]));
		if (i == 1)
			frame[k - 1] ^= 1;
		for (unsigned j = 0; j < k; j++) {
			p.in = frame[j];
			co_loop_step(&l);
		}
	}
	p.in = FP_SOF;
	co_loop_step(&l);
	p.in = 0;
	co_loop_step(&l);
	assert_int_equal(p.frames, 2);
	assert_int_equal(p.crc_errors, 1);
	assert_int_equal(p.len_errors, 1);
	assert_int_equal(co_trace_stop(), 0);

	snprintf(args, sizeof args, "dot '%s' --fn fp_body -o '%s'", trace, dot);
	assert_int_equal(tool(args), 0);

	/* the parser's states: the lines of its source with a suspension point */
	src = slurp(getenv("CORING_FP_SOURCE"));
	line = src;
	for (int n = 1; line && *line; n++) {
		char *end = strchr(line, '\n');
		if (end)
			*end = '\0';
		if (strstr(line, "CO_YIELD(") || strstr(line, "CO_AWAIT"))
			want[nwant++] = n;
		line = end ? end + 1 : NULL;
	}
	free(src);
	assert_true(nwant >= 5);

	text = slurp(dot);
	print_message("%s", text);
	for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *lab = strstr(line, "[label=\""), *at;
		int ln, used;

		if (lab == NULL || strstr(line, "->"))
			continue; /* not a node */
		nodes++;
		lab += 8;
		if (!strncmp(lab, "start\"", 6)) {
			start++;
			continue;
		}
		if (strncmp(lab, "frame_parser.c:", 15))
			fail_msg("a state that is not one of the parser's: %s", line);
#if CO_USE_COMPUTED_GOTO && defined(__clang__)
		/* Clang moves the label stores off their lines and merges labels:
		 * the points are the parser's, their lines inferred (docs/tracing.md) */
		continue;
#endif
		/* "frame_parser.c:22\nyield", or "frame_parser.c:22+45\nyield" for two
		 * points the compiler gave one resume label */
		for (at = lab + 15; sscanf(at, "%d%n", &ln, &used) == 1; at += used + 1) {
			int found = 0;
			for (int i = 0; i < nwant; i++)
				if (want[i] == ln) {
					seen[i]++;
					found = 1;
				}
			if (!found)
				fail_msg("state at line %d, where the parser has no suspension point", ln);
			if (at[used] != '+')
				break;
		}
		if (strncmp(at + used, "\\nyield", 7))
			fail_msg("not a yield: %s", line);
	}
	free(text);
	assert_int_equal(start, 1);
#if CO_USE_COMPUTED_GOTO && defined(__clang__)
	assert_true(nodes >= 3 && nodes <= nwant + 1);
#else
	for (int i = 0; i < nwant; i++)
		if (seen[i] != 1)
			fail_msg("line %d is in %d states", want[i], seen[i]);
	assert_true(nodes <= nwant + 1);
#endif
	unlink(trace);
	unlink(dot);
}

static int dummy_fn(co_frame *f)
{
	CO_BEGIN(f);
	CO_END(f);
}

/* An unknown function: an error, not an empty picture. */
static void test_dot_unknown_function(void **state)
{
	const char *trace = tmp("u.trace");
	char args[512];
	co_frame f;
	(void)state;
	NEED_TRACE();
	assert_int_equal(co_trace_start(&(co_trace_opts){ .events = 64, .path = trace }), 0);
	co_init(&f, dummy_fn);
	co_trace_frame(&f, CO_TRACE_RESUME);
	assert_int_equal(co_trace_stop(), 0);
	snprintf(args, sizeof args, "dot '%s' --fn no_such_coroutine -o /dev/null 2>/dev/null",
		 trace);
	assert_int_equal(tool(args), 1);
	/* and a file that is not a trace */
	spit(trace, "not a trace at all");
	snprintf(args, sizeof args, "text '%s' > /dev/null 2>&1", trace);
	assert_int_equal(tool(args), 1);
	unlink(trace);
}

/* ---- JSON ------------------------------------------------------------------------ */

struct hopper {
	co_frame co;
	co_transfer t;
	co_io io;
	co_sched *s;
	int i;
};

static int hopper_fn(co_frame *f)
{
	struct hopper *h = (struct hopper *)f;

	CO_BEGIN(f);
	for (h->i = 0; h->i < 20; h->i++) {
		CO_AWAIT(f, co_nop(&h->io));
		CO_AWAIT(f, co_transfer_to(&h->t, &h->s->ctx[(unsigned)h->i % 2]));
		CO_YIELD(f);
	}
	CO_END(f);
}

/* Replace the first occurrence of what in s (same length). */
static int patch(char *s, const char *what, const char *with)
{
	char *p = strstr(s, what);

	assert_int_equal(strlen(what), strlen(with));
	if (p == NULL)
		return 0;
	memcpy(p, with, strlen(with));
	return 1;
}

static void test_json_validates(void **state)
{
	const char *trace = tmp("j.trace"), *js = tmp("j.json"), *bad = tmp("bad.json");
	co_sched_opts o = { .contexts = 2 };
	struct hopper h[8];
	char args[512], *text;
	co_sched s;
	(void)state;
	NEED_TRACE();
	assert_int_equal(co_trace_start(&(co_trace_opts){ .events = 1 << 14, .path = trace }), 0);
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < 8; i++) {
		co_init(&h[i].co, hopper_fn);
		h[i].s = &s;
		assert_int_equal(co_sched_spawn(&s, &h[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_trace_stop(), 0);

	snprintf(args, sizeof args, "json '%s' -o '%s'", trace, js);
	assert_int_equal(tool(args), 0);
	snprintf(args, sizeof args, "validate '%s'", js);
	assert_int_equal(tool(args), 0);
	text = slurp(js);
	/* what it must hold: slices, flows of both kinds, named tracks */
	assert_non_null(strstr(text, "\"ph\":\"B\""));
	assert_non_null(strstr(text, "\"name\":\"hopper_fn\""));
	assert_non_null(strstr(text, "\"ph\":\"s\""));
	assert_non_null(strstr(text, "\"cat\":\"transfer\""));
	assert_non_null(strstr(text, "\"cat\":\"wake\""));
	assert_non_null(strstr(text, "context 1"));
	assert_non_null(strstr(text, "\"op\":\"nop\""));

	/* a slice without its end fails */
	{
		char *c = strdup(text);
		assert_true(patch(c, "\"ph\":\"E\"", "\"ph\":\"i\""));
		spit(bad, c);
		free(c);
		snprintf(args, sizeof args, "validate '%s' 2>/dev/null", bad);
		assert_int_equal(tool(args), 1);
	}
	/* a flow without its end fails */
	{
		char *c = strdup(text);
		assert_true(patch(c, "\"ph\":\"f\"", "\"ph\":\"i\""));
		spit(bad, c);
		free(c);
		assert_int_equal(tool(args), 1);
	}
	/* and not JSON at all */
	spit(bad, "{\"traceEvents\": [");
	assert_int_equal(tool(args), 1);
	free(text);
	unlink(trace);
	unlink(js);
	unlink(bad);
}

/* A frame that waits in a stream's recv (its WAIT's kind: a stream). */
struct reader {
	co_frame co;
	co_bufring ring;
	co_stream st;
	int fd, n;
};

static int reader_fn(co_frame *f)
{
	struct reader *r = (struct reader *)f;
	CO_BEGIN(f);
	co_bufring_init(&r->ring, co_engine_current(), 4, 64);
	co_stream_open(&r->st, &r->ring, r->fd);
	CO_AWAIT(f, co_stream_recv(&r->st));
	r->n = co_result(f);
	CO_AWAIT(f, co_stream_close(&r->st));
	co_bufring_destroy(&r->ring);
	CO_END(f);
}

static void test_text_lists_events(void **state)
{
	const char *trace = tmp("t.trace"), *out = tmp("t.txt");
	co_sched_opts o = { .contexts = 2 };
	struct hopper h;
	struct reader r;
	co_engine e;
	int sv[2];
	char args[512], *text;
	co_sched s;
	(void)state;
	NEED_TRACE();
	assert_int_equal(co_trace_start(&(co_trace_opts){ .events = 1 << 12, .path = trace }), 0);
	assert_int_equal(co_sched_init(&s, &o), 0);
	co_init(&h.co, hopper_fn);
	h.s = &s;
	assert_int_equal(co_sched_spawn(&s, &h.co), 0);
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	/* a wait in a stream's recv, on an engine of its own */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(co_engine_init(&e, NULL), 0);
	memset(&r, 0, sizeof r);
	r.fd = sv[0];
	co_init(&r.co, reader_fn);
	assert_int_equal(co_engine_spawn(&e, &r.co), 0);
	assert_int_equal(co_engine_tick(&e), 1); /* it waits in recv */
	assert_int_equal(write(sv[1], "x", 1), 1);
	assert_int_equal(co_engine_run(&e, CO_RUN_UNTIL_IDLE), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(co_engine_destroy(&e), 0);
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(co_trace_stop(), 0);
	snprintf(args, sizeof args, "text '%s' -o '%s'", trace, out);
	assert_int_equal(tool(args), 0);
	text = slurp(out);
	for (const char *w = "spawn\0start\0resume\0yield\0wait\0wake\0done\0transfer\0submit\0"
			     "complete\0run\0context\0hopper_fn\0test_trace_tool.c:\0nop fd\0"
			     "reader_fn\0on stream\0recv fd\0";
	     *w; w += strlen(w) + 1)
		if (strstr(text, w) == NULL)
			fail_msg("no %s in the listing", w);
	for (int k = 0; k < 10; k++) { /* every awaiter kind by its name, never a number */
		char num[16];
		snprintf(num, sizeof num, "on %d\n", k);
		if (strstr(text, num))
			fail_msg("a wait listed as \"%s\"", num);
	}
	free(text);
	unlink(trace);
	unlink(out);
}

/* The timeline: a PNG (gnuplot; skipped where it is not installed). */
static void test_timeline_draws(void **state)
{
	const char *trace = tmp("tl.trace"), *png = tmp("tl.png");
	co_sched_opts o = { .contexts = 2 };
	struct hopper h[4];
	char args[512], *img;
	co_sched s;
	(void)state;
	NEED_TRACE();
	if (system("command -v gnuplot >/dev/null 2>&1") != 0)
		skip();
	assert_int_equal(co_trace_start(&(co_trace_opts){ .events = 1 << 12, .path = trace }), 0);
	assert_int_equal(co_sched_init(&s, &o), 0);
	for (int i = 0; i < 4; i++) {
		co_init(&h[i].co, hopper_fn);
		h[i].s = &s;
		assert_int_equal(co_sched_spawn(&s, &h[i].co), 0);
	}
	assert_int_equal(co_sched_run(&s), 0);
	assert_int_equal(co_sched_destroy(&s), 0);
	assert_int_equal(co_trace_stop(), 0);
	snprintf(args, sizeof args, "timeline '%s' -o '%s'", trace, png);
	assert_int_equal(tool(args), 0);
	img = slurp(png);
	assert_memory_equal(img, "\x89PNG", 4);
	free(img);
	snprintf(args, sizeof args, "timeline '%s' -o '%s' --window 0.001 --at 1e9 2>/dev/null", trace,
		 png);
	assert_int_equal(tool(args), 1); /* nothing ran then: an error, not an empty picture */
	unlink(trace);
	unlink(png);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_dot_frame_parser),
	cmocka_unit_test(test_dot_unknown_function),
	cmocka_unit_test(test_json_validates),
	cmocka_unit_test(test_text_lists_events),
	cmocka_unit_test(test_timeline_draws),
};

CO_TEST_MAIN(tests, 1)
