/* SPDX-License-Identifier: MIT */
/* A parent awaiting a child that yields three times, again and again. */
#include "fw.h"

struct child { co_frame co; int k; };
struct parent { co_frame co; struct child kid; int runs; };

FW_BODY fw_body_child(co_frame *f)
{
	struct child *c = (struct child *)f;
	CO_BEGIN(f);
	for (c->k = 0; c->k < 3; c->k++)
		CO_YIELD(f);
	CO_END(f);
}

FW_BODY fw_body_parent(co_frame *f)
{
	struct parent *p = (struct parent *)f;
	CO_BEGIN(f);
	for (;;) {
		co_init(&p->kid.co, fw_body_child);
		CO_AWAIT_TASK(f, &p->kid.co);
		p->runs++;
	}
	CO_END(f);
}

int fw_run(long n)
{
	static struct parent p;

	co_init(&p.co, fw_body_parent);
	while (n--)
		FW_RESUME(co_resume(&p.co), &p.co);
	return p.runs & 0;
}
