/* SPDX-License-Identifier: MIT */
/*
 * The library's clock: co_now_ns, the public one (coring/io.h), and the
 * stamps (lib/common/clock.h): which counter, decided once per process, and the
 * conversion of a stamp to CLOCK_MONOTONIC nanoseconds.
 *
 * x86-64: the time-stamp counter, only where the kernel itself keeps time
 * with it (the current clocksource is "tsc": the kernel has found it
 * constant, not stopping, and in step across CPUs). Its rate is measured
 * against CLOCK_MONOTONIC between the first co__stamp_init and each
 * conversion: the error is the two clocks' read time over that interval.
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

static int kernel_clock_is_tsc(void)
{
	char name[32] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");

	if (f == NULL)
		return 0;
	if (fgets(name, sizeof name, f) == NULL)
		name[0] = 0;
	fclose(f);
	return strcmp(name, "tsc\n") == 0;
}

static void decide(void)
{
#if defined(__x86_64__)
	if (kernel_clock_is_tsc())
		co__stamp_kind = CO__STAMP_TSC;
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
