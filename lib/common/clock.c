/* SPDX-License-Identifier: MIT */
/*
 * The library's clock: co_now_ns, the public one (coring/io.h), and the
 * stamps (lib/common/clock.h): which counter, decided once per process, and the
 * conversion of a stamp to CLOCK_MONOTONIC nanoseconds.
 *
 * x86-64: the time-stamp counter, where the kernel itself keeps time with
 * it (the current clocksource is "tsc": the kernel has found it constant,
 * not stopping, and in step across CPUs), or where the CPU's flags say the
 * same (constant_tsc, nonstop_tsc, and tsc_reliable, which a hypervisor
 * sets for a guest whose kernel then keeps time with kvm-clock, itself
 * read from the counter). Its rate is measured against CLOCK_MONOTONIC
 * between the first co__stamp_init and each conversion: the error is the
 * two clocks' read time over that interval.
 * arm64: the architected virtual counter, whose rate the CPU states
 * (cntfrq_el0). Anything else: CLOCK_MONOTONIC_COARSE, already in ns.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "coring/io.h"

int co__stamp_kind = CO__STAMP_COARSE;
static uint64_t base_stamp, base_ns, freq;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Is word one of the blank-separated words of line? */
static int has_word(const char *line, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = line; (p = strstr(p, word)) != NULL; p += n)
		if ((p == line || p[-1] == ' ' || p[-1] == '\t') &&
		    (p[n] == '\0' || p[n] == ' ' || p[n] == '\t' || p[n] == '\n'))
			return 1;
	return 0;
}

int co__stamp_pick(const char *clocksource, const char *cpu_flags)
{
	if (clocksource != NULL && strcmp(clocksource, "tsc\n") == 0)
		return CO__STAMP_TSC;
	if (cpu_flags != NULL && has_word(cpu_flags, "constant_tsc") &&
	    has_word(cpu_flags, "nonstop_tsc") && has_word(cpu_flags, "tsc_reliable"))
		return CO__STAMP_TSC;
	return CO__STAMP_COARSE;
}

#if defined(__x86_64__)
/* The first line of path that starts with prefix (all of it if prefix is
 * ""), into buf; NULL if there is none or it cannot be read. */
static char *read_line(const char *path, const char *prefix, char *buf, int len)
{
	FILE *f = fopen(path, "re");
	char *got = NULL;

	if (f == NULL)
		return NULL;
	while (fgets(buf, len, f) != NULL)
		if (strncmp(buf, prefix, strlen(prefix)) == 0) {
			got = buf;
			break;
		}
	fclose(f);
	return got;
}
#endif

static void decide(void)
{
#if defined(__x86_64__)
	char name[32], flags[4096];

	co__stamp_kind = co__stamp_pick(
		read_line("/sys/devices/system/clocksource/clocksource0/current_clocksource", "",
			  name, sizeof name),
		read_line("/proc/cpuinfo", "flags", flags, sizeof flags));
#elif defined(__aarch64__)
	__asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(freq));
	if (freq != 0)
		co__stamp_kind = CO__STAMP_CNTVCT;
#endif
	base_ns = co__now_ns();
	base_stamp = co__stamp();
}

void co__stamp_init(void)
{
	pthread_once(&once, decide);
}

uint64_t co__stamp_ns(uint64_t stamp)
{
	uint64_t now_stamp, now_ns, ticks;

	co__stamp_init();
	if (co__stamp_kind == CO__STAMP_COARSE)
		return stamp;
	now_ns = co__now_ns();
	now_stamp = co__stamp();
	ticks = now_stamp > stamp ? now_stamp - stamp : 0; /* ago */
	if (co__stamp_kind == CO__STAMP_CNTVCT)
		return now_ns - (uint64_t)((double)ticks * 1e9 / (double)freq);
	if (now_stamp <= base_stamp)
		return now_ns;
	return now_ns - (uint64_t)((double)ticks * (double)(now_ns - base_ns) /
				   (double)(now_stamp - base_stamp));
}

uint64_t co_now_ns(void)
{
	return co__now_ns();
}
