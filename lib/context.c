/* SPDX-License-Identifier: MIT */
/* Contexts: a thread per engine; and moving a coroutine between them. */
#include <errno.h>
#include <string.h>

#include <coring/context.h>
#include "internal.h"

static _Thread_local co_context *co__ctx_current;

co_context *co_context_current(void)
{
	return co__ctx_current;
}

int co_context_init(co_context *c, const co_engine_opts *opts)
{
	if (c == NULL)
		return -EINVAL;
	memset(c, 0, sizeof *c);
	return co_engine_init(&c->engine, opts);
}

static void *context_main(void *arg)
{
	co_context *c = arg;

	co__ctx_current = c;
	c->ret = co_engine_run(&c->engine, c->mode);
	co__ctx_current = NULL;
	return NULL;
}

int co_context_start(co_context *c, int mode)
{
	int err;

	if (c == NULL || (mode != CO_RUN_UNTIL_IDLE && mode != CO_RUN_UNTIL_STOP))
		return -EINVAL;
	if (c->state != 0)
		return -EALREADY;
	c->mode = mode;
	err = pthread_create(&c->thread, NULL, context_main, c);
	if (err)
		return -err;
	c->state = 1;
	return 0;
}

int co_context_spawn(co_context *c, co_frame *f)
{
	if (c == NULL)
		return -EINVAL;
	return co_engine_spawn(&c->engine, f);
}

int co_context_stop(co_context *c, int cancel_io)
{
	if (c == NULL)
		return -EINVAL;
	return co_engine_stop(&c->engine, cancel_io);
}

int co_context_join(co_context *c)
{
	if (c == NULL || c->state != 1)
		return -EINVAL;
	pthread_join(c->thread, NULL);
	c->state = 2;
	return c->ret;
}

int co_context_destroy(co_context *c)
{
	if (c == NULL)
		return -EINVAL;
	if (c->state == 1)
		return -EBUSY;
	return co_engine_destroy(&c->engine);
}

/* ---- transfer ------------------------------------------------------------ */

static int transfer_suspend(co_awaiter *a, co_frame *f)
{
	co_transfer *t = (co_transfer *)a;
	co_engine *from = co_engine_current();
	co_frame *root = co_root(f);
	int err;

	if (from == NULL) {
		t->res = -ENXIO;
		return 0;
	}
	if (t->target == NULL || root->runner != &from->runner) {
		t->res = -EINVAL;
		return 0;
	}
	/* To the engine it is on: a yield to the back of its queue. */
	if (&t->target->engine == from) {
		t->res = 0;
		co_wake(root);
		return 1;
	}
	/* Elsewhere: its live count moves with it. After a successful move the
	 * target's thread may already run it: the result is written before,
	 * and nothing of the frame is touched after. */
	t->res = 0;
	err = co__engine_move(root, from, &t->target->engine);
	if (err == 0)
		return 1;
	t->res = err; /* not moved: still ours */
	return 0;
}

static int transfer_resume(co_awaiter *a, co_frame *f)
{
	(void)f;
	return ((co_transfer *)a)->res;
}

static const co_awaiter_ops transfer_ops = { NULL, transfer_suspend, transfer_resume, NULL };

co_awaiter *co_transfer_to(co_transfer *t, co_context *target)
{
	if (t == NULL)
		return NULL; /* awaiting NULL: -EINVAL */
	t->aw.ops = &transfer_ops;
	t->target = target;
	t->res = 0;
	return &t->aw;
}
