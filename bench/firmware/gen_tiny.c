/* SPDX-License-Identifier: MIT */
/* gen.c with the tiny profile: a generator of 0..9, the body called
 * directly. */
#define FW_FRAME co_tiny
#include "fw.h"

struct gen { co_tiny pt; int i, value; };

FW_BODY fw_body_gen(struct gen *g)
{
	co_tiny *f = &g->pt;
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

	co_tiny_init(&g.pt);
	while (n--) {
		FW_RESUME(fw_body_gen(&g), &g);
		sum += g.value;
	}
	return sum & 1;
}
