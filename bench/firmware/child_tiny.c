/* SPDX-License-Identifier: MIT */
/* child.c with the tiny profile: the parent polls the child's body until
 * it is done (a co_tiny cannot CO_AWAIT). */
#define FW_FRAME co_tiny
#include "fw.h"

struct child { co_tiny pt; int k; };
struct parent { co_tiny pt; struct child kid; int runs; };

FW_BODY fw_body_child(struct child *c)
{
	co_tiny *f = &c->pt;
	CO_BEGIN(f);
	for (c->k = 0; c->k < 3; c->k++)
		CO_YIELD(f);
	CO_END(f);
}

FW_BODY fw_body_parent(struct parent *p)
{
	co_tiny *f = &p->pt;
	CO_BEGIN(f);
	for (;;) {
		co_tiny_init(&p->kid.pt);
		CO_AWAIT_UNTIL(f, fw_body_child(&p->kid) == CO_DONE);
		p->runs++;
	}
	CO_END(f);
}

int fw_run(long n)
{
	static struct parent p;

	co_tiny_init(&p.pt);
	while (n--)
		FW_RESUME(fw_body_parent(&p), &p);
	return p.runs & 0;
}
