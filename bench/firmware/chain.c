/* SPDX-License-Identifier: MIT */
/* An await chain of depth 8 (or -DDEPTH=n): each level awaits the next;
 * the leaf yields for ever, so every resume goes through the whole
 * chain's root. */
#include "fw.h"

#ifndef DEPTH
#define DEPTH 8
#endif

struct level { co_frame co; struct level *next; };

FW_BODY fw_body_level(co_frame *f)
{
	struct level *l = (struct level *)f;
	CO_BEGIN(f);
	if (l->next == 0)
		for (;;)
			CO_YIELD(f);
	co_init(&l->next->co, fw_body_level);
	CO_AWAIT_TASK(f, &l->next->co);
	CO_END(f);
}

int fw_run(long n)
{
	static struct level lv[DEPTH];

	for (int i = 0; i + 1 < DEPTH; i++)
		lv[i].next = &lv[i + 1];
	co_init(&lv[0].co, fw_body_level);
	while (n--)
		FW_RESUME(co_resume(&lv[0].co), &lv[0].co);
	return 0;
}
