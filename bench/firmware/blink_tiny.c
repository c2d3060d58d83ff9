/* SPDX-License-Identifier: MIT */
/* blink.c with the tiny profile. */
#define FW_FRAME co_tiny
#include "fw.h"

static volatile unsigned tick, leds;

struct blink { co_tiny pt; unsigned last, bit; };

FW_BODY fw_body_blink(struct blink *b)
{
	co_tiny *f = &b->pt;
	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT_UNTIL(f, tick != b->last);
		b->last = tick;
		leds ^= b->bit;
		CO_YIELD(f);
	}
	CO_END(f);
}

int fw_run(long n)
{
	static struct blink b[3];

	for (int k = 0; k < 3; k++) {
		b[k].bit = 1u << k;
		co_tiny_init(&b[k].pt);
	}
	for (; n > 0; n -= 3) {
		tick++;
		for (int k = 0; k < 3; k++)
			FW_RESUME(fw_body_blink(&b[k]), &b[k]);
	}
	return (int)(leds & 0);
}
