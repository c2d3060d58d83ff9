/* SPDX-License-Identifier: MIT */
/*
 * The trace recorder (coring/trace.h, docs/tracing.md): per-thread event
 * buffers written without locks, the dump, the stream, CORING_TRACE.
 *
 * A buffer is a ring of cap events of 8 words each, written only by its
 * thread and read by dumpers on any thread, seqlock style: the writer
 * announces event h (busy = h + 1), stores its words (relaxed atomics,
 * after a release fence) and then publishes head = h + 1 (release); a
 * reader copies events below the head it loaded (acquire), then loads busy
 * after an acquire fence and keeps only the events the writer cannot have
 * been overwriting meanwhile (index >= busy - cap). When the ring is full
 * the writer overwrites the oldest event: drop-oldest, never a wait.
 *
 * Buffers outlive their threads (a context's thread ends before the
 * program stops the trace) and are kept on a registry under reg_lock,
 * which the record path takes only for a thread's first event of a
 * session. A buffer is freed only at a later co_trace_start, once its
 * thread has exited or replaced it: nothing writes to it any more, and
 * every reader holds reg_lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include <coring/loop.h>
#include <coring/trace.h>
#include "common/clock.h"
#include "trace_hooks.h"
#include "common/fault.h"

/* co_loop's hook passes its own values to co_trace_frame */
_Static_assert((int)CO_LOOP_TRACE_RESUME == (int)CO_TRACE_RESUME &&
		       (int)CO_LOOP_TRACE_YIELD == (int)CO_TRACE_YIELD &&
		       (int)CO_LOOP_TRACE_WAIT == (int)CO_TRACE_WAIT &&
		       (int)CO_LOOP_TRACE_DONE == (int)CO_TRACE_DONE,
	       "loop.h and trace.h number the frame events alike");

#ifdef CO_WITH_TRACE

#include <liburing.h>

#define WORDS 8                       /* an event is 8 uint64_t, 64 bytes */
#define CHUNK 4096u                   /* events copied per step of a dump */
#define STREAM_PERIOD_NS 20000000ull  /* the stream's writer looks every 20 ms */

enum { REC_THREAD = 1, REC_EVENTS = 2, REC_MAPS = 3, REC_END = 4 };

struct tbuf {
	struct tbuf *next;            /* registry (reg_lock) */
	_Atomic uint64_t head;        /* events ever written to the ring */
	_Atomic uint64_t busy;        /* head + 1 while an event is being written */
	_Atomic uint64_t base;        /* head when this session's first event came */
	_Atomic unsigned gen;         /* the session it records for */
	int gone;                     /* its thread exited or replaced it (reg_lock) */
	uint64_t cap;                 /* slots, a power of two (set before publication) */
	uint64_t cursor;              /* stream: next event to write (reg_lock) */
	uint64_t dropped;             /* stream: events overwritten unwritten (reg_lock) */
	unsigned index;               /* the thread's number in the session (reg_lock) */
	int tid;                      /* (reg_lock) */
	char name[16];                /* (reg_lock) */
	_Atomic int context;          /* the context the thread runs, -1: none */
	_Atomic uint64_t engine;      /* the engine it ran last */
	_Atomic uint64_t ev[];        /* cap * WORDS */
};

/* What a thread knows of its own recording. */
struct tstate {
	struct tbuf *b;               /* its buffer */
	unsigned failed;              /* session whose buffer could not be allocated */
	co_frame *cur;                /* the frame it is resuming (SUBMIT's frame) */
	co_frame *moved;              /* the frame being resumed, if it was made ready
	                                 (or moved) before its resume returned: from
	                                 then on another thread may run it */
	int context;                  /* the context index the thread runs + 1, 0: none */
	unsigned context_gen;         /* the session its CONTEXT event went to */
	uint64_t moved_at[4];         /* where it was: root fn, label, leaf fn, label */
	unsigned moved_sub;           /* and the kind of the awaiter it waits on */
};

atomic_int co__trace_on;
static _Thread_local struct tstate me __attribute__((tls_model("initial-exec")));

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t writer_cond = PTHREAD_COND_INITIALIZER;
static pthread_key_t key;             /* a thread's buffer, for thread_gone */
static int key_made;                  /* (reg_lock) */
static struct tbuf *bufs;             /* registry (reg_lock) */
static _Atomic unsigned sess_gen;     /* session number, 0: none yet */
static _Atomic uint64_t lost;         /* events no buffer could take */
static uint64_t sess_cap;             /* (reg_lock) */
static unsigned sess_threads;         /* (reg_lock) */
static uint64_t sess_t0;              /* (reg_lock) */
static int sess_fd = -1;              /* the session's file (reg_lock) */
static int sess_stream;               /* (reg_lock) */
static int sess_err;                  /* the stream's first write error (reg_lock) */
static int writer_stop;               /* (reg_lock) */
static uint64_t *sess_chunk;          /* the stream's chunk of events (reg_lock) */
static pthread_t writer;
static int stopping;                  /* a stream's stop joins its writer, reg_lock
                                         let go: a start waits (reg_lock) */
static pthread_cond_t stopped_cond = PTHREAD_COND_INITIALIZER;

/* ---- recording ----------------------------------------------------------- */

/* The thread ends: its buffer takes no more events (freed at a later
 * start). Runs on the thread itself, so it can forget the buffer too. */
static void thread_gone(void *p)
{
	struct tbuf *b = p;

	pthread_mutex_lock(&reg_lock);
	b->gone = 1;
	pthread_mutex_unlock(&reg_lock);
	if (me.b == b)
		me.b = NULL;
}

/* A thread's first event of a session: its buffer, allocated and
 * registered if need be, starting afresh. NULL: not recording (a stop
 * came first), or no memory (counted in lost). */
static struct tbuf *attach(void)
{
	struct tbuf *b;

	pthread_mutex_lock(&reg_lock);
	if (!atomic_load_explicit(&co__trace_on, memory_order_relaxed) ||
	    me.failed == atomic_load_explicit(&sess_gen, memory_order_relaxed)) {
		pthread_mutex_unlock(&reg_lock);
		return NULL;
	}
	b = me.b;
	if (b && b->cap != sess_cap) { /* another size this session */
		b->gone = 1; /* the next start frees it: the thread's end must
		                not mark it then, whether or not a new one comes */
		pthread_setspecific(key, NULL);
		b = NULL;
	}
	if (b == NULL) {
		b = co__calloc(1, sizeof *b + sess_cap * WORDS * sizeof b->ev[0]);
		if (b == NULL) {
			me.failed = atomic_load_explicit(&sess_gen, memory_order_relaxed);
			me.b = NULL;
			pthread_mutex_unlock(&reg_lock);
			return NULL;
		}
		b->cap = sess_cap;
		b->next = bufs;
		bufs = b;
		pthread_setspecific(key, b);
	}
	atomic_store_explicit(&b->base, atomic_load_explicit(&b->head, memory_order_relaxed),
			      memory_order_relaxed);
	b->cursor = atomic_load_explicit(&b->head, memory_order_relaxed);
	b->dropped = 0;
	b->index = sess_threads++;
	b->tid = gettid();
	atomic_store_explicit(&b->context, me.context - 1, memory_order_relaxed);
	atomic_store_explicit(&b->engine, 0, memory_order_relaxed);
	memset(b->name, 0, sizeof b->name);
	pthread_getname_np(pthread_self(), b->name, sizeof b->name);
	atomic_store_explicit(&b->gen, atomic_load_explicit(&sess_gen, memory_order_relaxed),
			      memory_order_release);
	me.b = b;
	pthread_mutex_unlock(&reg_lock);
	return b;
}

static void record(int kind, unsigned sub, int arg, const void *e, const void *frame, uint64_t a,
		   uint64_t b, uint64_t c, uint64_t d)
{
	struct tbuf *t = me.b;
	_Atomic uint64_t *s;
	uint64_t h;

	if (co__unlikely(t == NULL || atomic_load_explicit(&t->gen, memory_order_relaxed) !=
					      atomic_load_explicit(&sess_gen, memory_order_relaxed))) {
		t = attach();
		if (t == NULL) {
			if (atomic_load_explicit(&co__trace_on, memory_order_relaxed))
				atomic_fetch_add_explicit(&lost, 1, memory_order_relaxed);
			return;
		}
	}
	h = atomic_load_explicit(&t->head, memory_order_relaxed); /* only we write it */
	s = &t->ev[(h & (t->cap - 1)) * WORDS];
	/* a reader that sees any of the stores below sees busy > h after its
	 * acquire fence, so it drops event h - cap, overwritten here */
	atomic_store_explicit(&t->busy, h + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&s[0], co__now_ns(), memory_order_relaxed);
	atomic_store_explicit(&s[1], (uint64_t)(kind & 0xff) | (uint64_t)(sub & 0xff) << 8 |
					     (uint64_t)(uint32_t)arg << 32,
			      memory_order_relaxed);
	atomic_store_explicit(&s[2], (uint64_t)(uintptr_t)e, memory_order_relaxed);
	atomic_store_explicit(&s[3], (uint64_t)(uintptr_t)frame, memory_order_relaxed);
	atomic_store_explicit(&s[4], a, memory_order_relaxed);
	atomic_store_explicit(&s[5], b, memory_order_relaxed);
	atomic_store_explicit(&s[6], c, memory_order_relaxed);
	atomic_store_explicit(&s[7], d, memory_order_relaxed);
	atomic_store_explicit(&t->head, h + 1, memory_order_release);
	if (co__unlikely(kind == CO_TRACE_RUN))
		atomic_store_explicit(&t->engine, (uint64_t)(uintptr_t)e, memory_order_relaxed);
}

#define P(x) ((uint64_t)(uintptr_t)(x))

void co__trace_ev(int kind, co_engine *e, const void *frame, uint64_t a, uint64_t b)
{
	record(kind, 0, 0, e, frame, a, b, 0, 0);
}

/* Where the frame this thread is resuming stands now, noted while it is
 * still ours: it has just been made ready (its wake or its transfer), so
 * another thread may run it before its resume returns here. */
static void snapshot(co_frame *f)
{
	co_frame *leaf = f->top;

	me.moved = f;
	me.moved_at[0] = P(f->fn);
	me.moved_at[1] = f->label;
	me.moved_at[2] = P(leaf->fn);
	me.moved_at[3] = leaf->label;
	me.moved_sub = leaf->u.aw && leaf->u.aw->ops ? CO__AW_KIND(leaf->u.aw->ops) : 0;
}

void co__trace_wake(co_engine *e, co_frame *f)
{
	if (f == me.cur)
		snapshot(f); /* woken inside its own suspend: a thief may take it */
	record(CO_TRACE_WAKE, 0, 0, co_engine_current(), f, P(e), P(f->fn), 0, 0);
}

/*
 * Around a resume of root f on this thread: where it resumes, where it
 * stopped. The root's fn and label and its innermost frame's (the same
 * frame unless it awaits a child). After a WAIT nothing of f is read if
 * it was made ready or moved before its resume returned: another thread
 * may run it already; the wake or the transfer noted where it was.
 */
void co__trace_frame(co_engine *e, co_frame *f, int kind)
{
	co_frame *leaf;
	unsigned sub = 0;

	switch (kind) {
	case CO_TRACE_RESUME:
		leaf = f->top;
		me.cur = f;
		me.moved = NULL;
		record(f->label == 0 && leaf == f ? CO_TRACE_START : CO_TRACE_RESUME, 0, 0, e, f,
		       P(f->fn), f->label, P(leaf->fn), leaf->label);
		return;
	case CO_TRACE_WAIT:
		me.cur = NULL;
		if (me.moved == f) {
			me.moved = NULL;
			record(CO_TRACE_WAIT, me.moved_sub, 0, e, f, me.moved_at[0], me.moved_at[1],
			       me.moved_at[2], me.moved_at[3]);
			return;
		}
		leaf = f->top;
		if (leaf->u.aw && leaf->u.aw->ops)
			sub = CO__AW_KIND(leaf->u.aw->ops);
		record(CO_TRACE_WAIT, sub, 0, e, f, P(f->fn), f->label, P(leaf->fn), leaf->label);
		return;
	case CO_TRACE_YIELD:
		me.cur = NULL;
		leaf = f->top;
		record(CO_TRACE_YIELD, 0, 0, e, f, P(f->fn), f->label, P(leaf->fn), leaf->label);
		return;
	case CO_TRACE_DONE:
		me.cur = NULL;
		record(CO_TRACE_DONE, 0, f->status, e, f, P(f->fn), 0, 0, 0);
		return;
	default:
		return;
	}
}

void co__trace_transfer(co_frame *root, co_engine *from, co_engine *to)
{
	snapshot(root);
	record(CO_TRACE_TRANSFER, 0, 0, from, root, P(from), P(to), me.moved_at[2], me.moved_at[3]);
}

void co__trace_submit(const struct io_uring_sqe *sqe)
{
	record(CO_TRACE_SUBMIT, sqe->opcode, sqe->fd, co_engine_current(), me.cur,
	       sqe->user_data & ~(uint64_t)CO_IO_TAG_MASK, sqe->user_data & CO_IO_TAG_MASK, 0, 0);
}

void co__trace_complete(co_frame *leaf, const void *info, int res, unsigned tag)
{
	record(CO_TRACE_COMPLETE, tag, res, co_engine_current(), leaf ? co_root(leaf) : NULL, P(info), 0,
	       0, 0);
}

void co__trace_context(const void *c, unsigned index, unsigned kind)
{
	me.context = (int)index + 1; /* for its thread record too */
	if (me.b)
		atomic_store_explicit(&me.b->context, (int)index, memory_order_relaxed);
	record(CO_TRACE_CONTEXT, 0, (int)index, co_engine_current(), NULL, P(c), index, kind, 0);
	me.context_gen = atomic_load_explicit(&sess_gen, memory_order_relaxed);
}

/* A manual context has no thread of its own: the thread that ticks it is
 * its track, named after it from its first tick in a session. */
void co__trace_tick_context(const void *c, unsigned index, unsigned kind)
{
	if (me.context != (int)index + 1 ||
	    me.context_gen != atomic_load_explicit(&sess_gen, memory_order_relaxed))
		co__trace_context(c, index, kind);
}

void co_trace_frame(co_frame *f, int kind)
{
	if (f == NULL || !atomic_load_explicit(&co__trace_on, memory_order_relaxed))
		return;
	co__trace_frame(NULL, f, kind);
}

/* ---- writing ------------------------------------------------------------- */

struct out {
	int fd;
	int err;                      /* the first write error */
};

static void out_put(struct out *o, const void *p, size_t n)
{
	const char *c = p;

	while (n && !o->err) {
		ssize_t w = write(o->fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			o->err = w < 0 ? -errno : -EIO;
			return;
		}
		c += w;
		n -= (size_t)w;
	}
}

static void out_rec(struct out *o, uint32_t type, const void *p, uint32_t n)
{
	uint32_t h[2] = { type, n };

	out_put(o, h, sizeof h);
	out_put(o, p, n);
}

static void out_header(struct out *o)
{
	struct {
		char magic[8];
		uint32_t version, event_size, order, pid;
		uint64_t t0;
	} h = { "CORTRACE", 1, WORDS * 8, 0x01020304u, (uint32_t)getpid(), sess_t0 };

	out_put(o, &h, sizeof h);
}

/* /proc/self/maps as it is now: where the program and its libraries are
 * loaded, so that the tool can name functions and resume points. */
static int out_maps(struct out *o)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	char *text = NULL, *grown;
	size_t n = 0, room = 0;
	ssize_t r;
	int err = 0;

	if (fd < 0)
		return 0; /* no /proc: a file without names (the tool shows addresses) */
	for (;;) {
		if (room - n < 4096) {
			grown = co__realloc(text, room + 65536);
			if (grown == NULL) {
				err = -ENOMEM;
				break;
			}
			text = grown;
			room += 65536;
		}
		r = read(fd, text + n, room - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			err = -errno;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	/* a list cut short would name functions wrongly: none, and the error
	 * for the caller (the file goes on: the end record follows) */
	if (err == 0 && text)
		out_rec(o, REC_MAPS, text, (uint32_t)n);
	free(text);
	return err;
}


/*
 * Write b's events from index `from` up to the head it has now, a chunk at
 * a time, keeping what was not overwritten while it was copied. Returns
 * the index after the last event looked at; *skipped counts those lost.
 * tmp holds CHUNK events.
 */
static uint64_t out_events(struct out *o, struct tbuf *b, uint64_t from, uint64_t *skipped,
			   uint64_t *tmp)
{
	uint64_t head = atomic_load_explicit(&b->head, memory_order_acquire);
	uint64_t base = atomic_load_explicit(&b->base, memory_order_relaxed);
	uint64_t lo = from > base ? from : base;

	if (head - lo > b->cap) {
		*skipped += head - b->cap - lo;
		lo = head - b->cap;
	}
	while (lo < head && !o->err) {
		uint64_t n = head - lo < CHUNK ? head - lo : CHUNK, h2, ok, skip = 0;

		for (uint64_t i = 0; i < n; i++) {
			_Atomic uint64_t *s = &b->ev[((lo + i) & (b->cap - 1)) * WORDS];
			for (unsigned w = 0; w < WORDS; w++)
				tmp[i * WORDS + w] = atomic_load_explicit(&s[w], memory_order_relaxed);
		}
		atomic_thread_fence(memory_order_acquire);
		h2 = atomic_load_explicit(&b->busy, memory_order_relaxed);
		/* the writer may be overwriting event h2 - 1 - cap, and has
		 * overwritten every one before it */
		ok = h2 >= b->cap ? h2 - b->cap : 0;
		if (ok > lo)
			skip = ok - lo < n ? ok - lo : n;
		*skipped += skip;
		if (n > skip) {
			uint32_t rec[4] = { REC_EVENTS, (uint32_t)(8 + (n - skip) * WORDS * 8), b->index,
					    (uint32_t)(n - skip) };

			out_put(o, rec, sizeof rec);
			out_put(o, &tmp[skip * WORDS], (size_t)(n - skip) * WORDS * 8);
		}
		lo += n;
	}
	return head;
}

/* A thread's record: its number, id, name and counts so far. */
static void out_thread(struct out *o, struct tbuf *b, uint64_t recorded, uint64_t dropped)
{
	struct {
		uint32_t index;
		int32_t tid;
		uint64_t recorded, dropped;
		char name[16];
		int32_t context;
		uint32_t pad;
		uint64_t engine;
	} t = { b->index, b->tid, recorded, dropped, { 0 },
		atomic_load_explicit(&b->context, memory_order_relaxed), 0,
		atomic_load_explicit(&b->engine, memory_order_relaxed) };

	memcpy(t.name, b->name, sizeof t.name);
	out_rec(o, REC_THREAD, &t, sizeof t);
}

static int in_session(struct tbuf *b)
{
	unsigned g = atomic_load_explicit(&sess_gen, memory_order_relaxed);

	return g != 0 && atomic_load_explicit(&b->gen, memory_order_acquire) == g;
}

/* Events recorded by b this session (up to head), and how many of them
 * the ring no longer holds, or (streaming) lost before they were written. */
static void buf_counts(struct tbuf *b, uint64_t *recorded, uint64_t *dropped)
{
	uint64_t head = atomic_load_explicit(&b->head, memory_order_acquire);
	uint64_t base = atomic_load_explicit(&b->base, memory_order_relaxed);
	uint64_t from = sess_stream && b->cursor > base ? b->cursor : base;

	*recorded = head - base;
	*dropped = (sess_stream ? b->dropped : 0) + (head - from > b->cap ? head - from - b->cap : 0);
}

static void out_end(struct out *o)
{
	struct {
		uint64_t recorded, dropped, lost;
		uint32_t threads, pad;
	} e = { 0, 0, atomic_load_explicit(&lost, memory_order_relaxed), 0, 0 };

	for (struct tbuf *b = bufs; b; b = b->next) {
		uint64_t r, d;

		if (!in_session(b))
			continue;
		buf_counts(b, &r, &d);
		e.recorded += r;
		e.dropped += d;
		e.threads++;
	}
	out_rec(o, REC_END, &e, sizeof e);
}

/* The mappings and the end record: a file the tool reads, without names
 * if the list could not be made (its error then, unless a write's came
 * first). */
static void out_tail(struct out *o)
{
	int err = out_maps(o);

	out_end(o);
	if (o->err == 0)
		o->err = err;
}

/* The whole file at once (co_trace_dump, or a stop without the stream),
 * under reg_lock: header, each thread's events and record, maps, end. */
static void out_snapshot(struct out *o)
{
	uint64_t *tmp = co__malloc(CHUNK * WORDS * 8);

	if (tmp == NULL) {
		o->err = -ENOMEM;
		return;
	}
	out_header(o);
	for (struct tbuf *b = bufs; b; b = b->next) {
		uint64_t skipped = 0, head;

		if (!in_session(b))
			continue;
		head = out_events(o, b, 0, &skipped, tmp);
		out_thread(o, b, head - atomic_load_explicit(&b->base, memory_order_relaxed), skipped);
	}
	out_tail(o);
	free(tmp);
}

/* The stream's step, under reg_lock: what each thread recorded since the
 * last step, through the session's chunk (sess_chunk: taken at the start,
 * so that no pass, the stop's last one included, can lack memory). */
static void stream_pass(struct out *o)
{
	uint64_t *tmp = sess_chunk;

	for (struct tbuf *b = bufs; b; b = b->next) {
		uint64_t skipped = 0, head;

		if (!in_session(b))
			continue;
		head = out_events(o, b, b->cursor, &skipped, tmp);
		if (head == b->cursor && skipped == 0)
			continue;
		b->cursor = head;
		b->dropped += skipped;
		out_thread(o, b, head - atomic_load_explicit(&b->base, memory_order_relaxed),
			   b->dropped);
	}
}

static void *stream_main(void *arg)
{
	struct out o = { sess_fd, 0 };

	(void)arg;
	pthread_mutex_lock(&reg_lock);
	while (!writer_stop) {
		struct timespec ts;
		uint64_t at;

		stream_pass(&o);
		if (o.err && !sess_err)
			sess_err = o.err;
		clock_gettime(CLOCK_REALTIME, &ts);
		at = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + STREAM_PERIOD_NS;
		ts.tv_sec = (time_t)(at / 1000000000ull);
		ts.tv_nsec = (long)(at % 1000000000ull);
		pthread_cond_timedwait(&writer_cond, &reg_lock, &ts);
	}
	pthread_mutex_unlock(&reg_lock);
	return NULL;
}

/* ---- the API ------------------------------------------------------------- */

int co_trace_available(void)
{
	return 1;
}

static uint64_t pow2_at_least(uint64_t n)
{
	uint64_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

int co_trace_start(const co_trace_opts *opts)
{
	co_trace_opts o = { .events = CO_TRACE_DEFAULT_EVENTS };
	struct tbuf **pp;
	int fd = -1, err;

	if (opts)
		o = *opts;
	if (o.events == 0 || o.events > CO_TRACE_MAX_EVENTS || (o.stream && o.path == NULL))
		return -EINVAL;
	pthread_mutex_lock(&reg_lock);
	/* a stop that writes its stream's file ends first: it still uses the
	 * session's writer, file and chunk */
	while (stopping) {
		co__fault_point(CO__POINT_TRACE_START_WAITS);
		pthread_cond_wait(&stopped_cond, &reg_lock);
	}
	if (atomic_load_explicit(&co__trace_on, memory_order_relaxed)) {
		pthread_mutex_unlock(&reg_lock);
		return -EALREADY;
	}
	/* The key that tells a buffer its thread ended, made by the first
	 * start that gets one: with none left (PTHREAD_KEYS_MAX) a buffer
	 * would be filed under another library's key. */
	if (!key_made) {
		err = pthread_key_create(&key, thread_gone);
		if (err) {
			pthread_mutex_unlock(&reg_lock);
			return -err;
		}
		key_made = 1;
	}
	if (o.path) {
		fd = open(o.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			err = -errno;
			pthread_mutex_unlock(&reg_lock);
			return err;
		}
	}
	/* The last session as it is: a start that fails puts it back, so that
	 * co_trace_dump still writes its events (trace is off meanwhile, and
	 * the dump waits for reg_lock). */
	uint64_t was_lost = atomic_load_explicit(&lost, memory_order_relaxed);
	uint64_t was_cap = sess_cap, was_t0 = sess_t0;
	unsigned was_threads = sess_threads;
	int was_err = sess_err;

	atomic_fetch_add_explicit(&sess_gen, 1, memory_order_relaxed);
	atomic_store_explicit(&lost, 0, memory_order_relaxed);
	sess_cap = pow2_at_least(o.events);
	sess_threads = 0;
	sess_t0 = co__now_ns();
	sess_fd = fd;
	sess_stream = o.stream != 0;
	sess_err = 0;
	writer_stop = 0;
	if (sess_stream) {
		struct out out = { fd, 0 };
		sigset_t all, old;

		out_header(&out);
		/* the writer takes no signal: a program that blocks SIGTERM to
		 * read it from a signalfd (after this call) must get it */
		sigfillset(&all);
		sess_chunk = out.err ? NULL : co__malloc(CHUNK * WORDS * 8);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		err = out.err	       ? out.err
		      : !sess_chunk ? -ENOMEM
				     : -co__thread_create(&writer, stream_main, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (err) {
			free(sess_chunk);
			sess_chunk = NULL;
			close(fd);
			atomic_fetch_sub_explicit(&sess_gen, 1, memory_order_relaxed);
			atomic_store_explicit(&lost, was_lost, memory_order_relaxed);
			sess_cap = was_cap;
			sess_threads = was_threads;
			sess_t0 = was_t0;
			sess_fd = -1;
			sess_stream = 0;
			sess_err = was_err;
			pthread_mutex_unlock(&reg_lock);
			return err;
		}
	}
	/* buffers nothing writes to any more: the last session's, done with */
	for (pp = &bufs; *pp;) {
		struct tbuf *b = *pp;

		if (b->gone) {
			*pp = b->next;
			free(b);
		} else {
			pp = &b->next;
		}
	}
	atomic_store_explicit(&co__trace_on, 1, memory_order_seq_cst);
	pthread_mutex_unlock(&reg_lock);
	return 0;
}

int co_trace_stop(void)
{
	struct out o = { -1, 0 };

	pthread_mutex_lock(&reg_lock);
	if (!atomic_load_explicit(&co__trace_on, memory_order_relaxed)) {
		pthread_mutex_unlock(&reg_lock);
		return -EALREADY;
	}
	atomic_store_explicit(&co__trace_on, 0, memory_order_seq_cst);
	if (sess_stream) {
		writer_stop = 1;
		stopping = 1;
		pthread_cond_signal(&writer_cond);
		pthread_mutex_unlock(&reg_lock);
		co__fault_point(CO__POINT_TRACE_STOPPING); /* tests: a start comes now */
		pthread_join(writer, NULL);
		pthread_mutex_lock(&reg_lock);
		o.fd = sess_fd;
		o.err = sess_err;
		stream_pass(&o);
		free(sess_chunk);
		sess_chunk = NULL;
		out_tail(&o);
		stopping = 0;
		pthread_cond_broadcast(&stopped_cond);
	} else if (sess_fd >= 0) {
		o.fd = sess_fd;
		out_snapshot(&o);
	}
	if (sess_fd >= 0 && close(sess_fd) < 0 && !o.err)
		o.err = -errno;
	sess_fd = -1;
	pthread_mutex_unlock(&reg_lock);
	return o.err;
}

int co_trace_dump(const char *path)
{
	struct out o = { -1, 0 };
	struct stat st;
	int regular;

	if (path == NULL)
		return -EINVAL;
	o.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (o.fd < 0)
		return -errno;
	pthread_mutex_lock(&reg_lock);
	out_snapshot(&o);
	pthread_mutex_unlock(&reg_lock);
	/* a partial file goes; a device or a pipe given as the path stays */
	regular = fstat(o.fd, &st) == 0 && S_ISREG(st.st_mode);
	if (close(o.fd) < 0 && !o.err)
		o.err = -errno;
	if (o.err && regular)
		unlink(path);
	return o.err;
}

void co_trace_stats_get(co_trace_stats *st)
{
	if (st == NULL)
		return;
	memset(st, 0, sizeof *st);
	pthread_mutex_lock(&reg_lock);
	for (struct tbuf *b = bufs; b; b = b->next) {
		uint64_t r, d;

		if (!in_session(b))
			continue;
		buf_counts(b, &r, &d);
		st->recorded += r;
		st->dropped += d;
		st->threads++;
	}
	st->lost = atomic_load_explicit(&lost, memory_order_relaxed);
	st->recording = atomic_load_explicit(&co__trace_on, memory_order_relaxed);
	pthread_mutex_unlock(&reg_lock);
}

/* ---- CORING_TRACE --------------------------------------------------------- */

static void stop_at_exit(void)
{
	co_trace_stop(); /* -EALREADY if the program stopped it */
}

int co_trace_env(void)
{
	const char *v = getenv("CORING_TRACE");
	co_trace_opts o = { .events = CO_TRACE_DEFAULT_EVENTS };
	static atomic_int registered; /* two threads' co_trace_env may both succeed (a stop between) */
	char *path, *opt, *next;
	int err;

	if (v == NULL)
		return 0;
	path = strdup(v);
	if (path == NULL)
		return -ENOMEM;
	err = 0;
	opt = strchr(path, ',');
	if (opt)
		*opt++ = '\0';
	/* each option between two commas: an empty one is an error too */
	for (; opt && !err; opt = next) {
		next = strchr(opt, ',');
		if (next)
			*next++ = '\0';
		if (!strcmp(opt, "stream")) {
			o.stream = 1;
		} else if (!strncmp(opt, "events=", 7)) {
			char *end;
			unsigned long long n;

			errno = 0;
			n = strtoull(opt + 7, &end, 10);
			/* digits only: strtoull would take blanks and a sign */
			if (opt[7] < '0' || opt[7] > '9' || errno || *end || n == 0 ||
			    n > CO_TRACE_MAX_EVENTS)
				err = -EINVAL;
			else
				o.events = (unsigned)n;
		} else {
			err = -EINVAL;
		}
	}
	if (!err && path[0] == '\0')
		err = -EINVAL;
	o.path = path;
	if (!err)
		err = co_trace_start(&o);
	free(path);
	if (err)
		return err;
	co__fault_point(CO__POINT_TRACE_ENV); /* tests: another thread's co_trace_env comes now */
	if (!atomic_exchange_explicit(&registered, 1, memory_order_relaxed))
		atexit(stop_at_exit);
	return 1;
}

#else /* built without tracing: the API answers that it is not there */

int co_trace_available(void)
{
	return 0;
}

int co_trace_start(const co_trace_opts *opts)
{
	(void)opts;
	return -EOPNOTSUPP;
}

int co_trace_stop(void)
{
	return -EOPNOTSUPP;
}

int co_trace_dump(const char *path)
{
	(void)path;
	return -EOPNOTSUPP;
}

void co_trace_stats_get(co_trace_stats *st)
{
	if (st)
		memset(st, 0, sizeof *st);
}

int co_trace_env(void)
{
	return getenv("CORING_TRACE") ? -EOPNOTSUPP : 0;
}

void co_trace_frame(co_frame *f, int kind)
{
	(void)f;
	(void)kind;
}

#endif
