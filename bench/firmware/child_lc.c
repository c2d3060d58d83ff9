/* SPDX-License-Identifier: MIT */
/* child.c as local-continuation state machines (lc_baseline.h): the
 * parent calls the child until it has ended. */
#include "lc_baseline.h"
#define FW_FRAME struct lcb
#include "fw.h"

struct child { struct lcb pt; int k; };
struct parent { struct lcb pt; struct child kid; int runs; };

__attribute__((noinline, used)) char fw_body_child(struct child *c)
{
	LCB_BEGIN(&c->pt);
	for (c->k = 0; c->k < 3; c->k++)
		LCB_YIELD(&c->pt);
	LCB_END(&c->pt);
}

__attribute__((noinline, used)) char fw_body_parent(struct parent *p)
{
	LCB_BEGIN(&p->pt);
	for (;;) {
		LCB_INIT(&p->kid.pt);
		LCB_WAIT_UNTIL(&p->pt, fw_body_child(&p->kid) == LCB_ENDED);
		p->runs++;
	}
	LCB_END(&p->pt);
}

int fw_run(long n)
{
	static struct parent p;

	LCB_INIT(&p.pt);
	while (n--)
		FW_RESUME(fw_body_parent(&p), &p);
	return p.runs & 0;
}
