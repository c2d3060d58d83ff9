/* SPDX-License-Identifier: MIT */
/*
 * File reads through coring, the workload fio runs beside it:
 *
 *   fileio --file PATH --rw randread|read [--bs B] [--depth N]
 *          [--seconds T] [--direct] [--submit-each]
 *
 * One engine on the calling thread and N coroutines, each with its own
 * buffer (4096-aligned) and one co_read in flight at a time: the queue
 * depth is N.
 *   randread  each coroutine reads B bytes at a random B-aligned offset of
 *             the file, again and again, for T seconds (fio --rw=randread
 *             --norandommap). A timer coroutine ends the run: it sets a
 *             flag the readers check after each read, so no clock is read
 *             per I/O; reads completing after the flag are not counted.
 *   read      the coroutines read the file once, front to back: each takes
 *             the next B-byte block (fio --rw=read); T only bounds the run.
 * --direct opens the file with O_DIRECT (no page cache). Every read must
 * return B bytes (the file is a multiple of B): anything else fails the run.
 *
 * --submit-each sets the engine's opts.submit_batch to 1: each read is
 * submitted as soon as its frame suspends (one io_uring_enter per read,
 * as fio does by default), where by default the engine submits all of a
 * loop turn's SQEs at once, at the turn's end.
 *
 * Prints one line on stdout:
 *   fileio rw=... bs=... depth=... direct=... ios=N ios_total=M seconds=S
 *          iops=... mb_s=... cpu_s=... proc_cpu_s=... cpu_us_per_io=...
 * seconds runs from the start (the timer coroutine runs first) to the end
 * of the span (the timer, or the last read of the file). cpu_s is the CPU
 * time of the engine's thread from the start to the engine's return, as
 * fio counts a job's CPU; proc_cpu_s is the whole process's (io_uring's
 * worker threads included: more than cpu_s only if reads were handed to
 * them). cpu_us_per_io is cpu_s over ios_total (ios plus the reads that
 * were in flight at the timer). The file gets fio's access-pattern hint
 * (POSIX_FADV_RANDOM or _SEQUENTIAL). Exit 0 when every read succeeded.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <coring/io.h>

struct reader {
	co_frame co;
	co_io io;
	char *buf;
	uint64_t rng, off;
};

struct timer {
	co_frame co;
	co_io io;
};

static int fd, rw_random, failed, readers_left, submit_each;
static unsigned bs;
static uint64_t blocks, next_block, ios, ios_at_stop, start, stop;
static double cpu_start, proc_start;
static double seconds = 10;
static struct timer timer;

/* The end of the measured span: the first of the timer and the last
 * reader to finish calls it. */
static void end_span(void)
{
	if (!stop) {
		ios_at_stop = ios;
		stop = co_now_ns();
	}
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* CPU seconds of the calling thread (who, RUSAGE_THREAD: what fio
 * reports for a job) or of the whole process (RUSAGE_SELF: io_uring's
 * worker threads too). */
static double cpu_of(int who)
{
	struct rusage ru;

	getrusage(who, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int reader_fn(co_frame *f)
{
	struct reader *r = (struct reader *)f;

	CO_BEGIN(f);
	while (!stop) {
		if (rw_random) {
			r->off = (xorshift(&r->rng) % blocks) * bs;
		} else {
			if (next_block == blocks)
				break;
			r->off = next_block++ * bs;
		}
		CO_AWAIT(f, co_read(&r->io, fd, r->buf, bs, r->off));
		if (co_result(f) != (int)bs) {
			if (!stop && failed++ < 5)
				fprintf(stderr, "fileio: read at %llu: %s\n", (unsigned long long)r->off,
					co_result(f) < 0 ? strerror(-co_result(f)) : "short read");
			if (!stop)
				break;
		}
		ios++;
	}
	if (--readers_left == 0 && !stop) { /* read: the whole file is read */
		end_span();
		co_cancel(&timer.co);
	}
	CO_END(f);
}

static int timer_fn(co_frame *f)
{
	struct timer *t = (struct timer *)f;

	CO_BEGIN(f);
	/* spawned first, so it runs before the first read is submitted */
	cpu_start = cpu_of(RUSAGE_THREAD);
	proc_start = cpu_of(RUSAGE_SELF);
	start = co_now_ns();
	CO_AWAIT(f, co_sleep(&t->io, (uint64_t)(seconds * 1e9)));
	end_span();
	CO_END(f);
}


static void usage(void)
{
	fprintf(stderr, "usage: fileio --file PATH --rw randread|read [--bs B] [--depth N] "
			"[--seconds T] [--direct] [--submit-each]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *path = NULL, *rw = NULL;
	int depth = 1, direct = 0, err;
	struct reader *rs;
	struct stat st;
	co_engine e;
	co_engine_opts eo = { 0 };
	double c1, p1;

	bs = 4096;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--direct")) {
			direct = 1;
			continue;
		}
		if (!strcmp(argv[i], "--submit-each")) {
			submit_each = 1;
			continue;
		}
		if (i + 1 >= argc)
			usage();
		if (!strcmp(argv[i], "--file"))
			path = argv[++i];
		else if (!strcmp(argv[i], "--rw"))
			rw = argv[++i];
		else if (!strcmp(argv[i], "--bs"))
			bs = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--depth"))
			depth = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[++i]);
		else
			usage();
	}
	if (path == NULL || rw == NULL || (strcmp(rw, "randread") && strcmp(rw, "read")) ||
	    bs < 512 || bs > (1u << 24) || bs % 512 || depth < 1 || depth > 4096 || seconds <= 0)
		usage();
	rw_random = !strcmp(rw, "randread");
	fd = open(path, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "fileio: %s: %s\n", path, strerror(errno));
		return 1;
	}
	/* the access pattern, as fio announces it (its fadvise_hint) */
	posix_fadvise(fd, 0, 0, rw_random ? POSIX_FADV_RANDOM : POSIX_FADV_SEQUENTIAL);
	blocks = (uint64_t)st.st_size / bs;
	if (blocks == 0 || (uint64_t)st.st_size % bs) {
		fprintf(stderr, "fileio: %s: size %lld is not a multiple of %u\n", path,
			(long long)st.st_size, bs);
		return 1;
	}
	eo.sq_entries = (unsigned)depth < 64 ? 64 : (unsigned)depth * 2;
	eo.submit_batch = submit_each ? 1 : 0;
	if ((err = co_engine_init(&e, &eo)) < 0) {
		fprintf(stderr, "fileio: engine: %s\n", strerror(-err));
		return 1;
	}
	co_init(&timer.co, timer_fn);
	co_engine_spawn(&e, &timer.co);
	rs = calloc((size_t)depth, sizeof *rs);
	readers_left = depth;
	for (int i = 0; i < depth; i++) {
		rs[i].buf = aligned_alloc(4096, (bs + 4095) / 4096 * 4096);
		if (rs[i].buf == NULL) {
			fprintf(stderr, "fileio: out of memory\n");
			return 1;
		}
		memset(rs[i].buf, 0, bs); /* fault the pages in before the clock */
		rs[i].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1) ^ (uint64_t)getpid();
		co_init(&rs[i].co, reader_fn);
		co_engine_spawn(&e, &rs[i].co);
	}
	err = co_engine_run(&e, CO_RUN_UNTIL_IDLE);
	c1 = cpu_of(RUSAGE_THREAD);
	p1 = cpu_of(RUSAGE_SELF);
	if (err < 0) {
		fprintf(stderr, "fileio: engine run: %s\n", strerror(-err));
		return 1;
	}
	double secs = (double)(stop - start) / 1e9;
	printf("fileio rw=%s bs=%u depth=%d direct=%d ios=%llu ios_total=%llu seconds=%.3f iops=%.0f "
	       "mb_s=%.1f cpu_s=%.3f proc_cpu_s=%.3f cpu_us_per_io=%.3f\n", rw, bs, depth, direct,
	       (unsigned long long)ios_at_stop, (unsigned long long)ios, secs,
	       (double)ios_at_stop / secs,
	       (double)ios_at_stop * bs / secs / 1e6, c1 - cpu_start, p1 - proc_start,
	       ios ? (c1 - cpu_start) * 1e6 / (double)ios : 0.0);
	for (int i = 0; i < depth; i++)
		free(rs[i].buf);
	free(rs);
	co_engine_destroy(&e);
	close(fd);
	return failed || ios_at_stop == 0 ? 1 : 0;
}
