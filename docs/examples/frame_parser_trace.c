/* SPDX-License-Identifier: MIT */
/*
 * The frame parser on a bare-metal style run loop (co_loop), traced: each
 * byte is handed to the parser by one co_loop_step, and loop.h's trace
 * hook records every resume and suspension with coring's recorder. Run it
 * with CORING_TRACE=file to get the trace the state diagram of
 * docs/tracing.md is drawn from:
 *
 *   CORING_TRACE=fp.trace frame_parser_trace
 *   tools/coring_trace.py dot fp.trace --fn fp_body | dot -Tpng -o fp.png
 *
 * The stream: line noise, good frames, a frame with a bad CRC and one with
 * a bad length. Exit status 0 when the parser's counts are the expected
 * ones (with or without the trace).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <coring/trace.h>
#define CO_LOOP_TRACE(f, what) co_trace_frame((f), (what))
#include <coring/loop.h>

#include "frame_parser.h"

int main(void)
{
	static const char *msgs[] = { "hello", "set led 1", "status?", "ok", "reboot" };
	uint8_t stream[512], frame[FP_MAX_PAYLOAD + 3];
	unsigned n = 0;
	struct fp_parser p;
	co_loop loop;
	int err = co_trace_env();

	if (err < 0) {
		fprintf(stderr, "frame_parser_trace: CORING_TRACE: %s\n", strerror(-err));
		return 2;
	}
	stream[n++] = 0x00; /* line noise before the first frame */
	stream[n++] = 0x13;
	for (unsigned i = 0; i < 5; i++) {
		unsigned k = fp_encode(frame, (const uint8_t *)msgs[i], (uint8_t)strlen(msgs[i]));
		if (i == 1)
			frame[k - 1] ^= 0xFF; /* a bad CRC */
		memcpy(stream + n, frame, k);
		n += k;
		if (i == 2) { /* a start byte with a bad length */
			stream[n++] = FP_SOF;
			stream[n++] = 0;
		}
	}
	fp_init(&p, NULL, NULL);
	co_loop_init(&loop);
	co_loop_spawn(&loop, &p.co);
	for (unsigned i = 0; i < n; i++) {
		p.in = stream[i];
		co_loop_step(&loop); /* one resume: the parser takes the byte */
	}
	printf("frames %u, crc errors %u, length errors %u, dropped %u\n", (unsigned)p.frames,
	       (unsigned)p.crc_errors, (unsigned)p.len_errors, (unsigned)p.dropped);
	if (err == 1 && (err = co_trace_stop()) < 0) {
		fprintf(stderr, "frame_parser_trace: writing the trace: %s\n", strerror(-err));
		return 2;
	}
	return (p.frames == 4 && p.crc_errors == 1 && p.len_errors == 1 && p.dropped == 3) ? 0 : 1;
}
