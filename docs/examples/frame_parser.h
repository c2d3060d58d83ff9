/* SPDX-License-Identifier: MIT */
/*
 * A firmware-style protocol parser written as a coroutine (coring/co.h only:
 * no libc, no heap). It is fed one byte at a time, for example from a UART
 * receive interrupt's buffer, and calls on_frame for each valid frame.
 *
 * Wire format:  0x7E | LEN (1..FP_MAX_PAYLOAD) | PAYLOAD[LEN] | CRC8
 * CRC8 is CRC-8/SMBUS (polynomial 0x07, initial value 0) over LEN and PAYLOAD.
 * Bytes before a start byte are counted as dropped; a bad length makes the
 * parser look for a start byte again, starting with the offending byte.
 */
#ifndef FRAME_PARSER_H
#define FRAME_PARSER_H

#include <stdint.h>
#include <coring/co.h>

#define FP_SOF 0x7E
#define FP_MAX_PAYLOAD 64

struct fp_parser;
typedef void fp_frame_cb(struct fp_parser *p, const uint8_t *payload, uint8_t len);

struct fp_parser {
	co_frame co;                     /* first member: the coroutine */
	uint8_t in;                      /* the byte being consumed */
	uint8_t len, pos, crc;           /* locals that live across yields */
	uint8_t payload[FP_MAX_PAYLOAD];
	fp_frame_cb *on_frame;
	void *ctx;                       /* for on_frame's use */
	uint32_t frames, crc_errors, len_errors, dropped;
};

/* Prepare p; on_frame is called from inside fp_feed for each good frame. */
void fp_init(struct fp_parser *p, fp_frame_cb *on_frame, void *ctx);

/* Consume one byte. */
void fp_feed(struct fp_parser *p, uint8_t byte);

/* CRC-8/SMBUS step, exported for encoders and tests. */
uint8_t fp_crc8(uint8_t crc, uint8_t byte);

/* Encode payload as a frame into out (room for len + 3 bytes); returns the
 * frame length, or 0 if len is 0 or above FP_MAX_PAYLOAD. */
unsigned fp_encode(uint8_t *out, const uint8_t *payload, uint8_t len);

#endif
