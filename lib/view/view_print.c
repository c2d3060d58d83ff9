/* SPDX-License-Identifier: MIT */
/*
 * A view of the coroutines as text (co_view_print): a header, the frames
 * of each context counted, then the frames grouped by what they do and
 * where they stand (the largest group first, as a goroutine dump groups
 * identical stacks), and with CO_VIEW_EACH one line per frame.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <coring/view.h>
#include "view_internal.h"

#define SWITCH_LABEL 0x5C000000u /* co.h's switch backend: 0x5C000000 + __LINE__ */

/* Where fn stands at label, into buf (snprintf's contract). */
static int place(co__symbols *syms, int (*fn)(co_frame *), uintptr_t label, char *buf, size_t len)
{
	co__symbol s;
	char where[64];

	if (fn == NULL)
		return snprintf(buf, len, "(no function)");
	if (co__symbols_find(syms, (uintptr_t)fn, &s) < 0 || s.name == NULL) {
		if (s.object)
			return snprintf(buf, len, "%s+0x%" PRIxPTR, s.object, s.offset);
		return snprintf(buf, len, "0x%" PRIxPTR, (uintptr_t)fn);
	}
	if (label == 0)
		snprintf(where, sizeof where, " (not started)");
	else if (label >= SWITCH_LABEL && label < SWITCH_LABEL + 0x1000000u)
		snprintf(where, sizeof where, ":%u", (unsigned)(label - SWITCH_LABEL));
	else if (label >= s.start && label - s.start < 0x100000u)
		snprintf(where, sizeof where, "+0x%" PRIxPTR, label - s.start);
	else
		snprintf(where, sizeof where, " label 0x%" PRIxPTR, label);
	if (where[0] == ':') /* a line: file:line fn, or fn:line */
		return s.file ? snprintf(buf, len, "%s%s %s", s.file, where, s.name)
			      : snprintf(buf, len, "%s%s", s.name, where);
	return s.file ? snprintf(buf, len, "%s %s%s", s.file, s.name, where)
		      : snprintf(buf, len, "%s%s", s.name, where);
}

/* Buffered writes to a descriptor; the first error sticks. */
struct out {
	int fd, err;
	size_t n;
	char buf[4096];
};

/* A write to a pipe or socket that nobody reads raises SIGPIPE, whose
 * default action ends the process: a view printed to it answers -EPIPE
 * instead. SIGPIPE is blocked on this thread while it writes, and one that
 * its write raised is taken back before the mask is restored (one pending
 * before stays). */
static void flush(struct out *o)
{
	size_t done = 0;
	sigset_t pipe_only, old, pending;
	int had;

	sigemptyset(&pipe_only);
	sigaddset(&pipe_only, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
	had = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
	while (o->err == 0 && done < o->n) {
		ssize_t w = write(o->fd, o->buf + done, o->n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			o->err = w < 0 ? -errno : -EIO;
		else
			done += (size_t)w;
	}
	if (o->err == -EPIPE && !had) {
		struct timespec now = { 0, 0 };

		while (sigtimedwait(&pipe_only, NULL, &now) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	o->n = 0;
}

static void __attribute__((format(printf, 2, 3))) outf(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->n, sizeof o->buf - o->n, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n >= sizeof o->buf - o->n) { /* no room: flush, then again */
		flush(o);
		va_start(ap, fmt);
		n = vsnprintf(o->buf, sizeof o->buf, fmt, ap);
		va_end(ap);
		if (n >= (int)sizeof o->buf)
			n = (int)sizeof o->buf - 1; /* one line longer than the buffer: cut */
	}
	if (n > 0)
		o->n += (size_t)n;
}

/* A duration, as a person reads it. */
static const char *dur(char *b, size_t len, uint64_t ns)
{
	if (ns < 1000000ull)
		snprintf(b, len, "<1 ms");
	else if (ns < 1000000000ull)
		snprintf(b, len, "%" PRIu64 " ms", ns / (uint64_t)1000000);
	else if (ns < 60 * 1000000000ull)
		snprintf(b, len, "%.1f s", (double)ns / 1e9);
	else if (ns < 3600 * 1000000000ull)
		snprintf(b, len, "%" PRIu64 " min", ns / ((uint64_t)60 * 1000000000));
	else
		snprintf(b, len, "%.1f h", (double)ns / 3.6e12);
	return b;
}

static int str_cmp(const char *a, const char *b)
{
	return a == b ? 0 : a == NULL ? -1 : b == NULL ? 1 : strcmp(a, b);
}

/* The grouping key: state, wait, place, root function. */
static int key_cmp(const co_view_frame *a, const co_view_frame *b)
{
	int c;

	if (a->state != b->state)
		return a->state < b->state ? -1 : 1;
	if ((c = str_cmp(a->wait, b->wait)) != 0 || (c = str_cmp(a->inner, b->inner)) != 0)
		return c;
	if (a->at_fn != b->at_fn)
		return (uintptr_t)a->at_fn < (uintptr_t)b->at_fn ? -1 : 1;
	if (a->at_label != b->at_label)
		return a->at_label < b->at_label ? -1 : 1;
	if (a->fn != b->fn)
		return (uintptr_t)a->fn < (uintptr_t)b->fn ? -1 : 1;
	return 0;
}

static int by_key(const void *x, const void *y)
{
	return key_cmp(*(const co_view_frame *const *)x, *(const co_view_frame *const *)y);
}

struct group {
	const co_view_frame *first;
	size_t count;
	const void *object;           /* theirs if all share it, else NULL */
	size_t objects;               /* 1 when they share one */
	int cmin, cmax, kmin, kmax;
	uint64_t oldest, newest;      /* since_ns */
};

static int by_size(const void *x, const void *y)
{
	const struct group *a = x, *b = y;

	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	return a->oldest < b->oldest ? -1 : a->oldest > b->oldest;
}

/* Sort the records by key and cut them into groups (*ng of them). */
static struct group *make_groups(const co_view *v, const co_view_frame **idx, size_t *ng)
{
	struct group *g = malloc((v->n ? v->n : 1) * sizeof *g);
	size_t n = 0;

	if (g == NULL)
		return NULL;
	qsort(idx, v->n, sizeof *idx, by_key);
	for (size_t i = 0; i < v->n; i++) {
		const co_view_frame *f = idx[i];
		struct group *cur = n ? &g[n - 1] : NULL;

		if (cur == NULL || key_cmp(cur->first, f) != 0) {
			cur = &g[n++];
			*cur = (struct group){ f, 0, f->object, 1, f->context, f->context,
					       f->kind, f->kind, f->since_ns, f->since_ns };
		} else if (f->object != cur->object) {
			cur->object = NULL;
			cur->objects++;
		}
		cur->count++;
		cur->cmin = f->context < cur->cmin ? f->context : cur->cmin;
		cur->cmax = f->context > cur->cmax ? f->context : cur->cmax;
		cur->kmin = f->kind < cur->kmin ? f->kind : cur->kmin;
		cur->kmax = f->kind > cur->kmax ? f->kind : cur->kmax;
		cur->oldest = f->since_ns < cur->oldest ? f->since_ns : cur->oldest;
		cur->newest = f->since_ns > cur->newest ? f->since_ns : cur->newest;
	}
	qsort(g, n, sizeof *g, by_size);
	*ng = n;
	return g;
}

static const char *state_name(int s)
{
	return s == CO_VIEW_WAITING ? "waiting" : s == CO_VIEW_RUNNING ? "running"
	     : s == CO_VIEW_NEXT_TURN ? "ready at the next turn" : "ready";
}

/* "waiting on limit (recv)" */
static void what(struct out *o, const co_view_frame *f)
{
	outf(o, "%s", state_name(f->state));
	if (f->state == CO_VIEW_WAITING)
		outf(o, f->inner ? " on %s (%s)" : " on %s", f->wait ? f->wait : "await", f->inner);
}

static void range(struct out *o, const char *one, const char *many, int lo, int hi)
{
	if (lo == hi)
		outf(o, "%s %d", one, lo);
	else
		outf(o, "%s %d-%d", many, lo, hi);
}

static void print_group(struct out *o, co__symbols *syms, const co_view *v, const struct group *g)
{
	const co_view_frame *f = g->first;
	char b1[32], b2[32], p[256];

	outf(o, "%zu ", g->count);
	what(o, f);
	if (f->state == CO_VIEW_WAITING && g->object)
		outf(o, " %p", g->object);
	else if (f->state == CO_VIEW_WAITING && g->objects > 1)
		outf(o, " (%zu objects)", g->objects);
	outf(o, ", %s", dur(b1, sizeof b1, v->at_ns > g->newest ? v->at_ns - g->newest : 0));
	if (g->count > 1 && g->newest != g->oldest)
		outf(o, " (the longest %s)", dur(b2, sizeof b2, v->at_ns > g->oldest ? v->at_ns - g->oldest : 0));
	place(syms, f->at_fn, f->at_label, p, sizeof p);
	outf(o, "\n    at %s\n", p);
	if (f->depth) {
		place(syms, f->fn, f->label, p, sizeof p);
		outf(o, "    in %s, %u level%s down\n", p, f->depth, f->depth == 1 ? "" : "s");
	}
	if (g->cmin < 0)
		outf(o, "    on a lone engine\n");
	else {
		outf(o, "    on ");
		range(o, "context", "contexts", g->cmin, g->cmax);
		outf(o, ", ");
		range(o, "kind", "kinds", g->kmin, g->kmax);
		outf(o, "\n");
	}
}

static void print_frame(struct out *o, co__symbols *syms, const co_view *v, const co_view_frame *f)
{
	char b[32], p[256];

	outf(o, "frame %p: ", (const void *)f->frame);
	what(o, f);
	if (f->state == CO_VIEW_WAITING && f->object)
		outf(o, " %p", f->object);
	place(syms, f->at_fn, f->at_label, p, sizeof p);
	outf(o, ", %s, at %s", dur(b, sizeof b, v->at_ns > f->since_ns ? v->at_ns - f->since_ns : 0), p);
	if (f->context >= 0)
		outf(o, ", context %d (kind %d)", f->context, f->kind);
	outf(o, "\n");
}

/* The header, each context's count (records come context by context),
 * then how many of the contexts that answered have no frame: a view keeps
 * no list of the contexts it read, only their counts. */
static void print_head(struct out *o, const co_view *v)
{
	unsigned with_frames = 0, idle;

	outf(o, "coring view: %zu frame%s on %u context%s", v->n, v->n == 1 ? "" : "s", v->contexts,
	     v->contexts == 1 ? "" : "s");
	if (v->unanswered)
		outf(o, "; %u did not answer (their frames are not here)", v->unanswered);
	if (v->unlisted)
		outf(o, "; %zu frame%s in no list", v->unlisted, v->unlisted == 1 ? "" : "s");
	outf(o, "\n");
	for (size_t i = 0, j; i < v->n; i = j) {
		for (j = i; j < v->n && v->frames[j].context == v->frames[i].context; j++)
			;
		with_frames++;
		if (v->frames[i].context >= 0)
			outf(o, "  context %d (kind %d): %zu frame%s\n", v->frames[i].context,
			     v->frames[i].kind, j - i, j - i == 1 ? "" : "s");
	}
	if (v->contexts >= v->unanswered && v->contexts - v->unanswered > with_frames) {
		idle = v->contexts - v->unanswered - with_frames;
		outf(o, "  %u context%s without frames\n", idle, idle == 1 ? "" : "s");
	}
}

int co_view_print(const co_view *v, int fd, unsigned flags)
{
	const co_view_frame **idx;
	struct group *g;
	struct out o;
	co__symbols syms;
	size_t ng = 0;

	if (v == NULL || fd < 0 || (flags & ~(unsigned)CO_VIEW_EACH) || (v->n && v->frames == NULL))
		return -EINVAL;
	idx = malloc((v->n ? v->n : 1) * sizeof *idx);
	if (idx == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++)
		idx[i] = &v->frames[i];
	g = make_groups(v, idx, &ng);
	if (g == NULL) {
		free(idx);
		return -ENOMEM;
	}
	o.fd = fd;
	o.err = 0;
	o.n = 0;
	co__symbols_init(&syms);
	print_head(&o, v);
	for (size_t i = 0; i < ng; i++)
		print_group(&o, &syms, v, &g[i]);
	if (flags & CO_VIEW_EACH)
		for (size_t i = 0; i < v->n; i++)
			print_frame(&o, &syms, v, &v->frames[i]);
	flush(&o);
	co__symbols_fini(&syms);
	free(g);
	free(idx);
	return o.err;
}

int co_view_place(const co_view_frame *f, char *buf, size_t len)
{
	co__symbols syms;
	int n;

	if (f == NULL || (buf == NULL && len > 0))
		return -EINVAL;
	co__symbols_init(&syms);
	n = place(&syms, f->at_fn, f->at_label, buf, len);
	co__symbols_fini(&syms);
	return n;
}
