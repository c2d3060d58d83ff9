/* SPDX-License-Identifier: MIT */
/* blink.c as a local-continuation state machine (lc_baseline.h). */
#include "lc_baseline.h"
#define FW_FRAME struct lcb
#include "fw.h"

static volatile unsigned tick, leds;

struct blink { struct lcb pt; unsigned last, bit; };

__attribute__((noinline, used)) char fw_body_blink(struct blink *b)
{
	LCB_BEGIN(&b->pt);
	for (;;) {
		LCB_WAIT_UNTIL(&b->pt, tick != b->last);
		b->last = tick;
		leds ^= b->bit;
		LCB_YIELD(&b->pt);
	}
	LCB_END(&b->pt);
}

int fw_run(long n)
{
	static struct blink b[3];

	for (int k = 0; k < 3; k++) {
		b[k].bit = 1u << k;
		LCB_INIT(&b[k].pt);
	}
	for (; n > 0; n -= 3) {
		tick++;
		for (int k = 0; k < 3; k++)
			FW_RESUME(fw_body_blink(&b[k]), &b[k]);
	}
	return (int)(leds & 0);
}
