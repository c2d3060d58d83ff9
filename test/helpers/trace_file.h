/* SPDX-License-Identifier: MIT */
/*
 * A reader of the trace file format of docs/tracing.md, for the tests: it
 * checks the layout as it reads (a malformed file fails the test) and
 * gives the events, each with its thread's number, in file order (a
 * thread's events are in the order it recorded them).
 */
#ifndef CORING_TEST_TRACE_FILE_H
#define CORING_TEST_TRACE_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <coring/trace.h>

struct tev {
	uint64_t t, e, frame, a, b, c, d;
	unsigned kind, sub, thread;
	int arg;
	size_t seq;                   /* place in the file */
};

struct tthread {
	unsigned index;
	int tid;
	uint64_t recorded, dropped;
	char name[16];
	int context;
	uint64_t engine;
};

struct tfile {
	struct tev *ev;
	size_t n;
	struct tthread th[256];
	unsigned nth;                 /* thread records (the last of each index) */
	uint64_t recorded, dropped, lost;
	unsigned threads;
	int has_end, has_maps;
	uint64_t t0;
};

static inline void tfile_free(struct tfile *tf)
{
	free(tf->ev);
	memset(tf, 0, sizeof *tf);
}

/* Read path into tf; 0, or -1 if the file is malformed (what is wrong is
 * printed). */
static inline int tfile_read(const char *path, struct tfile *tf)
{
	FILE *fp = fopen(path, "rb");
	struct {
		char magic[8];
		uint32_t version, event_size, order, pid;
		uint64_t t0;
	} h;
	size_t room = 0;

	memset(tf, 0, sizeof *tf);
	if (fp == NULL) {
		printf("trace_file: cannot open %s\n", path);
		return -1;
	}
	if (fread(&h, sizeof h, 1, fp) != 1 || memcmp(h.magic, "CORTRACE", 8) || h.version != 1 ||
	    h.event_size != 64 || h.order != 0x01020304u) {
		printf("trace_file: bad header\n");
		fclose(fp);
		return -1;
	}
	tf->t0 = h.t0;
	for (;;) {
		uint32_t rh[2];
		unsigned char *p;

		if (fread(rh, sizeof rh, 1, fp) != 1)
			break;
		if (tf->has_end) {
			printf("trace_file: a record after the end\n");
			goto bad;
		}
		p = malloc(rh[1] ? rh[1] : 1);
		if (p == NULL || fread(p, 1, rh[1], fp) != rh[1]) {
			printf("trace_file: short record\n");
			free(p);
			goto bad;
		}
		if (rh[0] == 1) { /* THREAD */
			struct tthread t;
			unsigned i;

			if (rh[1] != 56) {
				free(p);
				goto bad;
			}
			memcpy(&t.index, p, 4);
			memcpy(&t.tid, p + 4, 4);
			memcpy(&t.recorded, p + 8, 8);
			memcpy(&t.dropped, p + 16, 8);
			memcpy(t.name, p + 24, 16);
			memcpy(&t.context, p + 40, 4);
			memcpy(&t.engine, p + 48, 8);
			for (i = 0; i < tf->nth && tf->th[i].index != t.index; i++)
				;
			if (i == tf->nth && tf->nth < 256)
				tf->nth++;
			if (i < 256)
				tf->th[i] = t;
		} else if (rh[0] == 2) { /* EVENTS */
			uint32_t idx, cnt;

			memcpy(&idx, p, 4);
			memcpy(&cnt, p + 4, 4);
			if (rh[1] != 8 + (uint64_t)cnt * 64) {
				printf("trace_file: events record of %u bytes for %u events\n", rh[1], cnt);
				free(p);
				goto bad;
			}
			for (uint32_t k = 0; k < cnt; k++) {
				uint64_t w[8];
				struct tev *v;

				if (tf->n == room) {
					room = room ? 2 * room : 1024;
					tf->ev = realloc(tf->ev, room * sizeof *tf->ev);
				}
				memcpy(w, p + 8 + k * 64, 64);
				v = &tf->ev[tf->n++];
				v->t = w[0];
				v->kind = (unsigned)(w[1] & 0xff);
				v->sub = (unsigned)((w[1] >> 8) & 0xff);
				v->arg = (int)(int32_t)(uint32_t)(w[1] >> 32);
				v->e = w[2];
				v->frame = w[3];
				v->a = w[4];
				v->b = w[5];
				v->c = w[6];
				v->d = w[7];
				v->thread = idx;
			}
		} else if (rh[0] == 3) { /* MAPS */
			tf->has_maps = 1;
		} else if (rh[0] == 4) { /* END */
			uint32_t thr;

			if (rh[1] != 32) {
				free(p);
				goto bad;
			}
			memcpy(&tf->recorded, p, 8);
			memcpy(&tf->dropped, p + 8, 8);
			memcpy(&tf->lost, p + 16, 8);
			memcpy(&thr, p + 24, 4);
			tf->threads = thr;
			tf->has_end = 1;
		} else {
			printf("trace_file: unknown record %u\n", rh[0]);
			free(p);
			goto bad;
		}
		free(p);
	}
	fclose(fp);
	if (!tf->has_end) {
		printf("trace_file: no end record\n");
		return -1;
	}
	return 0;
bad:
	fclose(fp);
	return -1;
}

#endif
