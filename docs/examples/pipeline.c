/* SPDX-License-Identifier: MIT */
/*
 * A pipeline across two contexts: a reader coroutine cuts the input file
 * into blocks and sends them down a channel; worker coroutines (on both
 * contexts) upper-case each block and pass it on; a writer coroutine
 * writes every block at its offset. A wait group tells the closer when
 * the last worker is done, so the writer sees the end of the stream.
 *
 *   pipeline IN OUT        (OUT = IN with a-z turned into A-Z; OUT may not
 *                          be IN itself: refused)
 *
 *   reader --in--> worker x4 --out--> writer
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <coring/channel.h>
#include <coring/io.h>
#include <coring/scheduler.h>
#include <coring/trace.h>

#define BLOCK 4096
#define WORKERS 4
#define DEPTH 8 /* blocks buffered in each channel */

struct block {
	uint64_t seq;
	unsigned len;
	char data[BLOCK];
};

struct pipeline {
	int in_fd, out_fd;
	co_chan in, out;           /* reader -> workers -> writer */
	co_waitgroup working;      /* workers still running */
	atomic_int error;          /* the first error, or 0 */
	uint64_t blocks;           /* written by the writer */
};

static void fail(struct pipeline *p, int err)
{
	int zero = 0;

	atomic_compare_exchange_strong(&p->error, &zero, err);
	/* Stop everyone: blocked parties wake with -EPIPE and leave. */
	co_chan_close(&p->in);
	co_chan_close(&p->out);
}

struct reader {
	co_frame co;
	co_waiter w;
	co_io_all x;
	struct pipeline *p;
	struct block b;
};

static int reader_fn(co_frame *f)
{
	struct reader *r = (struct reader *)f;
	CO_BEGIN(f);
	for (r->b.seq = 0;; r->b.seq++) {
		CO_AWAIT(f, co_read_all(&r->x, r->p->in_fd, r->b.data, BLOCK, r->b.seq * BLOCK));
		if (co_result(f) < 0) {
			fail(r->p, co_result(f));
			break;
		}
		if (co_result(f) == 0)
			break; /* end of file */
		r->b.len = (unsigned)co_result(f);
		CO_AWAIT(f, co_chan_send(&r->w, &r->p->in, &r->b));
		if (co_result(f) < 0 || r->b.len < BLOCK)
			break; /* closed after an error, or the last (short) block */
	}
	co_chan_close(&r->p->in); /* workers drain what is left, then stop */
	CO_END(f);
}

struct worker {
	co_frame co;
	co_waiter w;
	struct pipeline *p;
	struct block b;
};

static int worker_fn(co_frame *f)
{
	struct worker *k = (struct worker *)f;
	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_chan_recv(&k->w, &k->p->in, &k->b));
		if (co_result(f) < 0)
			break; /* -EPIPE: closed and drained */
		for (unsigned i = 0; i < k->b.len; i++)
			if (k->b.data[i] >= 'a' && k->b.data[i] <= 'z')
				k->b.data[i] = (char)(k->b.data[i] - 'a' + 'A');
		CO_AWAIT(f, co_chan_send(&k->w, &k->p->out, &k->b));
		if (co_result(f) < 0)
			break; /* the writer failed */
	}
	co_waitgroup_done(&k->p->working);
	CO_END(f);
}

/* Closes `out` once every worker is done, so the writer sees the end. */
struct closer {
	co_frame co;
	co_waiter w;
	struct pipeline *p;
};

static int closer_fn(co_frame *f)
{
	struct closer *c = (struct closer *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_waitgroup_wait(&c->w, &c->p->working));
	co_chan_close(&c->p->out);
	CO_END(f);
}

struct writer {
	co_frame co;
	co_waiter w;
	co_io_all x;
	struct pipeline *p;
	struct block b;
};

static int writer_fn(co_frame *f)
{
	struct writer *wr = (struct writer *)f;
	CO_BEGIN(f);
	for (;;) {
		CO_AWAIT(f, co_chan_recv(&wr->w, &wr->p->out, &wr->b));
		if (co_result(f) < 0)
			break; /* -EPIPE: every block is written */
		CO_AWAIT(f, co_write_all(&wr->x, wr->p->out_fd, wr->b.data, wr->b.len,
					      wr->b.seq * BLOCK));
		if (co_result(f) < 0) {
			fail(wr->p, co_result(f));
			break;
		}
		wr->p->blocks++;
	}
	CO_END(f);
}

int main(int argc, char **argv)
{
	static struct pipeline p;
	static struct reader rd;
	static struct worker wk[WORKERS];
	static struct closer cl;
	static struct writer wr;
	struct stat in_st, out_st;
	co_sched s;
	int err;
	int trace_err;

	if ((trace_err = co_trace_env()) < 0) { /* CORING_TRACE=file (docs/tracing.md) */
		fprintf(stderr, "pipeline: CORING_TRACE: %s\n", strerror(-trace_err));
		return 2;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: pipeline IN OUT\n");
		return 2;
	}
	p.in_fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (p.in_fd < 0) {
		perror(argv[1]);
		return 1;
	}
	/* truncated only once it is known not to be the input */
	p.out_fd = open(argv[2], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (p.out_fd < 0 || fstat(p.in_fd, &in_st) < 0 || fstat(p.out_fd, &out_st) < 0) {
		perror(argv[2]);
		return 1;
	}
	if (in_st.st_dev == out_st.st_dev && in_st.st_ino == out_st.st_ino) {
		fprintf(stderr, "pipeline: %s and %s are the same file\n", argv[1], argv[2]);
		return 1;
	}
	if (S_ISREG(out_st.st_mode) && ftruncate(p.out_fd, 0) < 0) {
		perror(argv[2]);
		return 1;
	}
	if (co_chan_init(&p.in, sizeof(struct block), DEPTH, NULL) < 0 ||
	    co_chan_init(&p.out, sizeof(struct block), DEPTH, NULL) < 0 ||
	    co_waitgroup_init(&p.working) < 0 || co_waitgroup_add(&p.working, WORKERS) < 0 ||
	    co_sched_init(&s, &(co_sched_opts){ .contexts = 2 }) < 0) {
		fprintf(stderr, "pipeline: cannot set up\n");
		return 1;
	}
	/* reader on context 0, writer on 1, workers on both */
	rd.p = wr.p = cl.p = &p;
	co_init(&rd.co, reader_fn);
	co_init(&wr.co, writer_fn);
	co_init(&cl.co, closer_fn);
	co_sched_spawn_to(&s, 0, &rd.co);
	co_sched_spawn_to(&s, 1, &wr.co);
	co_sched_spawn_to(&s, 0, &cl.co);
	for (unsigned i = 0; i < WORKERS; i++) {
		wk[i].p = &p;
		co_init(&wk[i].co, worker_fn);
		co_sched_spawn_to(&s, i % 2, &wk[i].co);
	}
	err = co_sched_run(&s);
	if (err == 0)
		err = atomic_load(&p.error);
	co_sched_destroy(&s);
	co_chan_destroy(&p.in);
	co_chan_destroy(&p.out);
	close(p.in_fd);
	if (close(p.out_fd) < 0 && err == 0)
		err = -errno;
	if (err) {
		fprintf(stderr, "pipeline: %s\n", strerror(-err));
		return 1;
	}
	printf("pipeline: %llu blocks\n", (unsigned long long)p.blocks);
	return 0;
}
