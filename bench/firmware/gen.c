/* SPDX-License-Identifier: MIT */
/* A generator of 0..9, again and again. */
#include "fw.h"

struct gen { co_frame co; int i, value; };

FW_BODY fw_body_gen(co_frame *f)
{
	struct gen *g = (struct gen *)f;
	CO_BEGIN(f);
	for (;;)
		for (g->i = 0; g->i < 10; g->i++)
			CO_YIELD_VALUE(f, g->value, g->i);
	CO_END(f);
}

int fw_run(long n)
{
	static struct gen g;
	int sum = 0;

	co_init(&g.co, fw_body_gen);
	while (n--) {
		FW_RESUME(co_resume(&g.co), &g.co);
		sum += g.value;
	}
	return sum & 1;
}
