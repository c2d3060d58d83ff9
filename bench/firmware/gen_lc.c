/* SPDX-License-Identifier: MIT */
/* gen.c as a local-continuation state machine (lc_baseline.h). */
#include "lc_baseline.h"
#define FW_FRAME struct lcb
#include "fw.h"

struct gen { struct lcb pt; int i, value; };

__attribute__((noinline, used)) char fw_body_gen(struct gen *g)
{
	LCB_BEGIN(&g->pt);
	for (;;)
		for (g->i = 0; g->i < 10; g->i++) {
			g->value = g->i;
			LCB_YIELD(&g->pt);
		}
	LCB_END(&g->pt);
}

int fw_run(long n)
{
	static struct gen g;
	int sum = 0;

	LCB_INIT(&g.pt);
	while (n--) {
		FW_RESUME(fw_body_gen(&g), &g);
		sum += g.value;
	}
	return sum & 1;
}
