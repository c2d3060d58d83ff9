/* SPDX-License-Identifier: MIT */
/*
 * The coring generator of the switch benchmark, for switch.c (the default
 * label backend) and switch_labels.c (CO_USE_COMPUTED_GOTO=0): a body that
 * yields 0, 1, ... n - 1, and SWITCH_GEN_SUM(iters), which sums what it
 * yields through co_next. Included once per translation unit, after the
 * backend is chosen and SWITCH_GEN_SUM names the sum.
 */
#include <coring/co.h>

struct gen {
	co_frame co;
	long i, n, value;
};

static int gen_fn(co_frame *f)
{
	struct gen *g = (struct gen *)f;

	CO_BEGIN(f);
	for (g->i = 0; g->i < g->n; g->i++)
		CO_YIELD_VALUE(f, g->value, g->i);
	CO_END(f);
}

/* Read through a volatile so the compiler cannot inline the body into the
 * loop: the resume stays an indirect call, as a C++ resume is. */
static int (*volatile gen_body)(co_frame *) = gen_fn;

long SWITCH_GEN_SUM(long iters);
long SWITCH_GEN_SUM(long iters)
{
	struct gen g = { .n = iters };
	long sum = 0;

	co_init(&g.co, gen_body);
	while (co_next(&g.co))
		sum += g.value;
	return sum;
}
