/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the firmware example's frame parser
 * (docs/examples/frame_parser.c). Besides crashes and sanitizer reports it
 * checks an oracle: every frame the parser delivers must appear, encoded,
 * in the input, and its counters must account for every start byte.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "frame_parser.h"

struct seen {
	const uint8_t *data;
	size_t size;
	unsigned frames;
};

static int contains(const uint8_t *hay, size_t n, const uint8_t *needle, size_t m)
{
	for (size_t i = 0; i + m <= n; i++)
		if (memcmp(hay + i, needle, m) == 0)
			return 1;
	return 0;
}

static void check_frame(struct fp_parser *p, const uint8_t *payload, uint8_t len)
{
	struct seen *s = p->ctx;
	uint8_t enc[FP_MAX_PAYLOAD + 3];
	unsigned n = fp_encode(enc, payload, len);

	if (n == 0 || !contains(s->data, s->size, enc, n))
		abort(); /* a frame that is not in the input */
	s->frames++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fp_parser p;
	struct seen s = { data, size, 0 };
	size_t sof = 0;

	fp_init(&p, check_frame, &s);
	for (size_t i = 0; i < size; i++) {
		sof += data[i] == FP_SOF;
		fp_feed(&p, data[i]);
	}
	if (s.frames != p.frames || p.dropped > size)
		abort();
	/* each good frame, CRC error or length error began at a start byte */
	if ((size_t)p.frames + p.crc_errors + p.len_errors > sof)
		abort();
	return 0;
}
