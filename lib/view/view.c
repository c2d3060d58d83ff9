/* SPDX-License-Identifier: MIT */
/*
 * The view of the coroutines (coring/view.h): each engine's list of its
 * live frames (lib/engine/engine_view.c) read into records with the engine to
 * itself, then the records as text, grouped and counted as a goroutine
 * dump is. docs/view.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <coring/io.h>
#include <coring/timeout.h>
#include <coring/view.h>
#include <coring/when.h>
#include "common/awaiter.h"
#include "common/clock.h"
#include "engine/engine_internal.h"
#include "scheduler/scheduler_internal.h"
#include "view_internal.h"
#include "waiter/waiter_internal.h"

/* ---- taking the records ---------------------------------------------------------- */

/* One engine's records, filled on its thread (or while it runs nowhere);
 * freed by drop if the caller stopped waiting. */
struct take {
	co_view_frame *f;
	size_t n, cap;
	size_t unlisted;
	int context, kind, nomem;
};

/* io_uring opcodes by number (linux/io_uring.h), as the preps use them;
 * a timeout of a co_io is a co_sleep. */
static const char *const io_names[] = {
	[0] = "nop", [1] = "readv", [2] = "writev", [3] = "fsync", [4] = "read_fixed",
	[5] = "write_fixed", [6] = "poll_add", [7] = "poll_remove", [8] = "sync_file_range",
	[9] = "sendmsg", [10] = "recvmsg", [11] = "sleep", [12] = "timeout_remove",
	[13] = "accept", [14] = "async_cancel", [15] = "link_timeout", [16] = "connect",
	[17] = "fallocate", [18] = "openat", [19] = "close", [20] = "files_update",
	[21] = "statx", [22] = "read", [23] = "write", [24] = "fadvise", [25] = "madvise",
	[26] = "send", [27] = "recv", [28] = "openat2", [29] = "epoll_ctl", [30] = "splice",
	[31] = "provide_buffers", [32] = "remove_buffers", [33] = "tee", [34] = "shutdown",
	[35] = "renameat", [36] = "unlinkat", [37] = "mkdirat", [38] = "symlinkat",
	[39] = "linkat", [40] = "msg_ring", [45] = "socket", [46] = "uring_cmd",
	[47] = "send_zc", [48] = "sendmsg_zc", [50] = "waitid", [55] = "ftruncate",
};

/* What awaiter aw waits on, into r's wait and object. */
static void name_wait(co_view_frame *r, const co_awaiter *aw)
{
	if (aw == NULL || aw->ops == NULL) {
		r->wait = "await";
		return;
	}
	switch (CO__AW_KIND(aw->ops)) {
	case CO__AW_IO: {
		unsigned op = ((const co_io *)aw)->op;

		r->wait = op < sizeof io_names / sizeof io_names[0] && io_names[op] ? io_names[op] : "io";
		return;
	}
	case CO__AW_WAIT:
		r->object = ((const co_waiter *)aw)->obj;
		break;
	case CO__AW_WHEN: {
		const co_when *w = (const co_when *)aw;

		r->wait = w->one ? "spawn_on" : w->any ? "when_any" : "when_all";
		r->object = w->one ? (const void *)w->target : NULL;
		return;
	}
	case CO__AW_LIMIT: {
		const co_limit *l = (const co_limit *)aw;
		co_view_frame in;

		memset(&in, 0, sizeof in);
		name_wait(&in, l->inner);
		r->wait = "limit";
		r->inner = l->inner ? in.wait : "child";
		r->object = in.object;
		return;
	}
	default:
		break;
	}
	r->wait = aw->ops->name ? aw->ops->name : "await";
}

/* The record of live root f, which last ran in the turn of since. */
static void describe(co_view_frame *r, co_frame *f, uint64_t since, const co_frame *running)
{
	co_frame *leaf = f->top ? f->top : f;
	unsigned depth = 0;

	for (co_frame *x = leaf; x && x != f; x = x->parent)
		depth++;
	memset(r, 0, sizeof *r);
	r->frame = f;
	r->fn = f->fn;
	r->label = f->label;
	r->at_fn = leaf->fn;
	r->at_label = leaf->label;
	r->depth = depth;
	r->since_ns = co__stamp_ns(since);
	if (f == running)
		r->state = CO_VIEW_RUNNING;
	else if (CO__LOAD_RELAXED(&f->state) & CO__ST_WAITING) {
		r->state = CO_VIEW_WAITING;
		name_wait(r, leaf->u.aw);
	} else
		r->state = CO_VIEW_READY;
}

/* Frames on the later list (yields) wait for the engine's next turn. */
static void mark_yields(struct take *t, co_engine *e, size_t first, const size_t *rec_of)
{
	for (co_frame *y = e->later_head; y; y = y->next)
		if (y->view_slot != 0 && y->view_slot < e->view_n && rec_of[y->view_slot] != SIZE_MAX)
			t->f[first + rec_of[y->view_slot]].state = CO_VIEW_NEXT_TURN;
}

/* On the engine's thread (co__engine_view_visit): its list into t. */
static void take_fn(co_engine *e, void *arg)
{
	struct take *t = arg;
	const co_frame *running = co__tls_engine == e ? e->running : NULL;
	size_t listed = 0, first = t->n, *rec_of = malloc(e->view_n * sizeof *rec_of);
	unsigned live;

	if (t->context < 0) /* co_view_engine: the engine may be a context's */
		co__sched_context_of(e, &t->context, &t->kind);
	for (unsigned i = 1; i < e->view_n && !t->nomem; i++) {
		co_frame *f = e->view[i].f;

		if (rec_of)
			rec_of[i] = SIZE_MAX;
		if (f == NULL)
			continue;
		listed++;
		if (CO__LOAD_RELAXED(&f->state) & CO__ST_DONE)
			continue; /* finished: its finish waits for a cancel request */
		if (t->n == t->cap) {
			size_t cap = t->cap ? 2 * t->cap : 64;
			co_view_frame *g = realloc(t->f, cap * sizeof *g);

			if (g == NULL) {
				t->nomem = 1;
				break;
			}
			t->f = g;
			t->cap = cap;
		}
		if (rec_of)
			rec_of[i] = t->n - first;
		describe(&t->f[t->n], f, e->view[i].since, running);
		t->f[t->n].context = t->context;
		t->f[t->n].kind = t->kind;
		t->n++;
	}
	if (rec_of && !t->nomem)
		mark_yields(t, e, first, rec_of);
	free(rec_of);
	live = co__engine_live(e);
	t->unlisted = live > listed ? live - listed : 0;
}

/* The caller stopped waiting: the engine frees what it filled. */
static void take_drop(void *arg)
{
	struct take *t = arg;

	free(t->f);
	free(t);
}

static int by_frame(const void *x, const void *y)
{
	const co_view_frame *a = *(const co_view_frame *const *)x, *b = *(const co_view_frame *const *)y;

	if (a->frame != b->frame)
		return (uintptr_t)a->frame < (uintptr_t)b->frame ? -1 : 1;
	return a < b ? -1 : a > b; /* the first read first */
}

/* A frame that moved from a context read earlier to one read later is in
 * both lists: keep its first record. */
int co__view_drop_twice_seen(co_view *v)
{
	const co_view_frame **idx;
	size_t n = 0;

	if (v->n < 2)
		return 0;
	idx = malloc(v->n * sizeof *idx);
	if (idx == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++)
		idx[i] = &v->frames[i];
	qsort(idx, v->n, sizeof *idx, by_frame);
	for (size_t i = 1, kept = 0; i < v->n; i++) {
		if (idx[i]->frame == idx[kept]->frame)
			((co_view_frame *)(uintptr_t)idx[i])->frame = NULL; /* marked */
		else
			kept = i;
	}
	free(idx);
	for (size_t i = 0; i < v->n; i++)
		if (v->frames[i].frame != NULL)
			v->frames[n++] = v->frames[i];
	v->n = n;
	return 0;
}

/* One engine to read: its records (t) and its request (r). */
struct pending {
	co_engine *e;
	int context, kind;
	struct take *t;
	struct co__view_req *r;
	int err;
};

/* Move t's records into v. 0, or -ENOMEM. */
static int add_records(co_view *v, struct take *t)
{
	co_view_frame *all;

	if (t->nomem)
		return -ENOMEM;
	if (t->n > 0) {
		all = realloc(v->frames, (v->n + t->n) * sizeof *all);
		if (all == NULL)
			return -ENOMEM;
		memcpy(all + v->n, t->f, t->n * sizeof *all);
		v->frames = all;
		v->n += t->n;
	}
	v->contexts++;
	v->unlisted += t->unlisted;
	return 0;
}

/* Ask every engine of p first, then wait for each until deadline: a
 * context that does not answer costs the wait once, not once each. */
static int take_engines(co_view *v, struct pending *p, unsigned n, uint64_t deadline)
{
	int err = 0;

	for (unsigned i = 0; i < n; i++) {
		p[i].t = calloc(1, sizeof *p[i].t);
		if (p[i].t == NULL) {
			p[i].err = -ENOMEM;
			continue;
		}
		p[i].t->context = p[i].context;
		p[i].t->kind = p[i].kind;
		p[i].err = co__engine_view_begin(p[i].e, take_fn, take_drop, p[i].t, &p[i].r);
	}
	for (unsigned i = 0; i < n; i++) {
		if (p[i].err == 0)
			p[i].err = co__engine_view_end(p[i].r, deadline);
		if (p[i].err == -ETIMEDOUT || p[i].err == -EINPROGRESS) {
			v->contexts++;
			v->unanswered++;
			if (p[i].err == -EINPROGRESS)
				continue; /* t is the engine's now: it frees it */
		}
		if (p[i].err == 0)
			p[i].err = add_records(v, p[i].t);
		if (p[i].err == -ENOMEM)
			err = -ENOMEM;
		if (p[i].t)
			take_drop(p[i].t); /* -EINVAL: destroyed meanwhile, left out */
	}
	return err < 0 ? err : co__view_drop_twice_seen(v);
}

struct sched_arg {
	co_view *v;
	uint64_t deadline;
};

static int take_contexts(co_context *ctx, unsigned n, void *arg)
{
	struct sched_arg *a = arg;
	struct pending *p = calloc(n ? n : 1, sizeof *p);
	int err;

	if (p == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		p[i].e = &ctx[i].engine;
		p[i].context = (int)ctx[i].index;
		p[i].kind = (int)ctx[i].kind;
	}
	err = take_engines(a->v, p, n, a->deadline);
	free(p);
	return err;
}

static int view_begin(co_view *v)
{
	if (v == NULL)
		return -EINVAL;
	memset(v, 0, sizeof *v);
	return 0;
}

/* The frames' waits are measured to the end of the taking. */
static int view_end(co_view *v, int err)
{
	if (err < 0)
		co_view_free(v);
	else
		v->at_ns = co__now_ns();
	return err;
}

int co_view_available(void)
{
#ifdef CO_WITH_VIEW
	return 1;
#else
	return 0;
#endif
}

int co_view_sched(co_view *v, co_sched *s, uint64_t wait_ns)
{
	struct sched_arg a = { v, co__deadline_after(wait_ns) };
	int err = view_begin(v);

	if (err < 0)
		return err;
	if (!co_view_available())
		return -EOPNOTSUPP;
	if (s == NULL)
		return -EINVAL;
	return view_end(v, co__sched_contexts(s, take_contexts, &a));
}

int co_view_engine(co_view *v, co_engine *e, uint64_t wait_ns)
{
	int err = view_begin(v);
	struct pending p = { .e = e, .context = -1 };

	if (err < 0)
		return err;
	if (!co_view_available())
		return -EOPNOTSUPP;
	if (e == NULL || co_engine_state(e) == CO_ENGINE_DEAD)
		return -EINVAL;
	err = take_engines(v, &p, 1, co__deadline_after(wait_ns));
	if (err == 0 && p.err == -EINVAL)
		err = -EINVAL; /* destroyed meanwhile */
	return view_end(v, err);
}

void co_view_free(co_view *v)
{
	if (v == NULL)
		return;
	free(v->frames);
	memset(v, 0, sizeof *v);
}
