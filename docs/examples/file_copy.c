/* SPDX-License-Identifier: MIT */
/*
 * cp with coring: SLOTS coroutines each copy one chunk at a time, so up
 * to SLOTS reads (or writes) are in flight at once.
 *
 *   file_copy SRC DST      (DST may not be SRC itself: refused, as cp does)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <coring/io.h>
#include <coring/trace.h>

#define SLOTS 4
#define CHUNK (256 * 1024)

struct job {              /* shared by the slots; one engine thread: no locks */
	int in, out;
	uint64_t size, next;
	int error;
};

struct slot {
	co_frame co;
	co_io_all x;
	struct job *job;
	uint64_t off;
	size_t len;
	char buf[CHUNK];
};

static int slot_fn(co_frame *f)
{
	struct slot *s = (struct slot *)f;

	CO_BEGIN(f);
	while (s->job->error == 0 && s->job->next < s->job->size) {
		s->off = s->job->next; /* claim the next chunk */
		s->len = s->job->size - s->off < CHUNK ? (size_t)(s->job->size - s->off) : CHUNK;
		s->job->next += s->len;
		CO_AWAIT(f, co_read_all(&s->x, s->job->in, s->buf, s->len, s->off));
		if ((size_t)co_result(f) != s->len) { /* error, or the file shrank */
			s->job->error = co_result(f) < 0 ? co_result(f) : -EIO;
			break;
		}
		CO_AWAIT(f, co_write_all(&s->x, s->job->out, s->buf, s->len, s->off));
		if (co_result(f) < 0)
			s->job->error = co_result(f);
	}
	CO_END(f);
}

int main(int argc, char **argv)
{
	struct job job = { 0 };
	struct slot *slots;
	struct stat st, dst;
	co_engine e;
	int err;
	int trace_err;

	if ((trace_err = co_trace_env()) < 0) { /* CORING_TRACE=file (docs/tracing.md) */
		fprintf(stderr, "file_copy: CORING_TRACE: %s\n", strerror(-trace_err));
		return 2;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: file_copy SRC DST\n");
		return 2;
	}
	job.in = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (job.in < 0 || fstat(job.in, &st) < 0) {
		perror(argv[1]);
		return 1;
	}
	/* truncated only once it is known not to be the source (as cp refuses
	 * to copy a file onto itself) */
	job.out = open(argv[2], O_WRONLY | O_CREAT | O_CLOEXEC, st.st_mode & 0777);
	if (job.out < 0 || fstat(job.out, &dst) < 0) {
		perror(argv[2]);
		return 1;
	}
	if (dst.st_dev == st.st_dev && dst.st_ino == st.st_ino) {
		fprintf(stderr, "file_copy: %s and %s are the same file\n", argv[1], argv[2]);
		return 1;
	}
	if (S_ISREG(dst.st_mode) && ftruncate(job.out, 0) < 0) {
		perror(argv[2]);
		return 1;
	}
	job.size = (uint64_t)st.st_size;
	slots = calloc(SLOTS, sizeof *slots);
	if (slots == NULL || (err = co_engine_init(&e, NULL)) < 0) {
		fprintf(stderr, "file_copy: cannot set up the engine\n");
		return 1;
	}
	for (int i = 0; i < SLOTS; i++) {
		slots[i].job = &job;
		co_init(&slots[i].co, slot_fn);
		co_engine_spawn(&e, &slots[i].co);
	}
	err = co_engine_run(&e, CO_RUN_UNTIL_IDLE);
	co_engine_destroy(&e);
	free(slots);
	if (err == 0)
		err = job.error;
	/* a destination that cannot be synced (/dev/null, a pipe: EINVAL)
	 * takes the copy as it is, as cp's would */
	if (err == 0 && fsync(job.out) < 0 && errno != EINVAL && errno != EROFS)
		err = -errno;
	close(job.in);
	if (close(job.out) < 0 && err == 0)
		err = -errno;
	if (err) {
		fprintf(stderr, "file_copy: %s\n", strerror(-err));
		return 1;
	}
	return 0;
}
