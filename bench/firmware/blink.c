/* SPDX-License-Identifier: MIT */
/* Three blinkers: each waits for the tick to change, toggles its LED,
 * yields. The loop advances the tick and resumes each in turn. */
#include "fw.h"

static volatile unsigned tick, leds;

struct blink { co_frame co; unsigned last, bit; };

FW_BODY fw_body_blink(co_frame *f)
{
	struct blink *b = (struct blink *)f;
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
		co_init(&b[k].co, fw_body_blink);
	}
	for (; n > 0; n -= 3) {
		tick++;
		for (int k = 0; k < 3; k++)
			FW_RESUME(co_resume(&b[k].co), &b[k].co);
	}
	return (int)(leds & 0);
}
