/* SPDX-License-Identifier: MIT */
/* Feeds a noisy byte stream to the frame parser, one byte at a time, and
 * prints what it found. Exit status 0 when the counts are the expected ones. */
#include <stdio.h>
#include <string.h>
#include "frame_parser.h"

static void print_frame(struct fp_parser *p, const uint8_t *payload, uint8_t len)
{
	(void)p;
	printf("frame %u bytes: %.*s\n", len, (int)len, (const char *)payload);
}

int main(void)
{
	static const char *msgs[] = { "hello", "set led 1", "status?" };
	uint8_t stream[256], frame[FP_MAX_PAYLOAD + 3];
	unsigned n = 0;
	struct fp_parser p;

	stream[n++] = 0x00; /* line noise before the first frame */
	stream[n++] = 0x13;
	for (unsigned i = 0; i < 3; i++) {
		unsigned k = fp_encode(frame, (const uint8_t *)msgs[i], (uint8_t)strlen(msgs[i]));
		if (i == 1)
			frame[k - 1] ^= 0xFF; /* corrupt the second frame's CRC */
		memcpy(stream + n, frame, k);
		n += k;
	}
	fp_init(&p, print_frame, NULL);
	for (unsigned i = 0; i < n; i++)
		fp_feed(&p, stream[i]);
	printf("frames %u, crc errors %u, dropped %u\n", (unsigned)p.frames,
	       (unsigned)p.crc_errors, (unsigned)p.dropped);
	return (p.frames == 2 && p.crc_errors == 1 && p.dropped == 2) ? 0 : 1;
}
