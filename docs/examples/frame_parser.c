/* SPDX-License-Identifier: MIT */
#include "frame_parser.h"

uint8_t fp_crc8(uint8_t crc, uint8_t byte)
{
	crc ^= byte;
	for (int i = 0; i < 8; i++)
		crc = (uint8_t)((crc & 0x80) ? (crc << 1) ^ 0x07 : crc << 1);
	return crc;
}

/* Every resume delivers exactly one byte in p->in; CO_YIELD waits for the
 * next one. The protocol reads top to bottom, like blocking code. */
static int fp_body(co_frame *f)
{
	struct fp_parser *p = (struct fp_parser *)f;

	CO_BEGIN(f);
	for (;;) {
		if (p->in != FP_SOF) {
			p->dropped++;
			CO_YIELD(f);
			continue;
		}
		CO_YIELD(f);
		p->len = p->in;
		if (p->len == 0 || p->len > FP_MAX_PAYLOAD) {
			p->len_errors++;
			continue; /* re-examine this byte as a possible start */
		}
		p->crc = fp_crc8(0, p->len);
		for (p->pos = 0; p->pos < p->len; p->pos++) {
			CO_YIELD(f);
			p->payload[p->pos] = p->in;
			p->crc = fp_crc8(p->crc, p->in);
		}
		CO_YIELD(f);
		if (p->in == p->crc) {
			p->frames++;
			if (p->on_frame)
				p->on_frame(p, p->payload, p->len);
		} else {
			p->crc_errors++;
		}
		CO_YIELD(f);
	}
	CO_END(f);
}

void fp_init(struct fp_parser *p, fp_frame_cb *on_frame, void *ctx)
{
	co_init(&p->co, fp_body);
	p->in = 0;
	p->len = p->pos = p->crc = 0;
	p->on_frame = on_frame;
	p->ctx = ctx;
	p->frames = p->crc_errors = p->len_errors = p->dropped = 0;
}

void fp_feed(struct fp_parser *p, uint8_t byte)
{
	p->in = byte;
	co_resume(&p->co);
}

unsigned fp_encode(uint8_t *out, const uint8_t *payload, uint8_t len)
{
	uint8_t crc;

	if (len == 0 || len > FP_MAX_PAYLOAD)
		return 0;
	out[0] = FP_SOF;
	out[1] = len;
	crc = fp_crc8(0, len);
	for (unsigned i = 0; i < len; i++) {
		out[2 + i] = payload[i];
		crc = fp_crc8(crc, payload[i]);
	}
	out[2 + len] = crc;
	return len + 3u;
}
