/* SPDX-License-Identifier: MIT */
/*
 * The library's clock (not installed): CLOCK_MONOTONIC in nanoseconds,
 * and the sums of a time with it. Every sum saturates: a time the clock
 * cannot add without wrapping (a duration near UINT64_MAX) is UINT64_MAX,
 * which every layer reads as "never", never as a moment already past.
 * No type of any layer lives here; any file of lib/ may use it.
 */
#ifndef CORING_LIB_CLOCK_H
#define CORING_LIB_CLOCK_H

#include <stdint.h>
#include <time.h>
#include <linux/time_types.h>

#define CO__NS_PER_S 1000000000ull

/* Now, on CLOCK_MONOTONIC (co_now_ns, exported by clock.c, is this). */
static inline uint64_t co__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * CO__NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Now, on CLOCK_MONOTONIC_COARSE: the kernel's last clock tick (a few ms
 * behind at most). */
static inline uint64_t co__now_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * CO__NS_PER_S + (uint64_t)ts.tv_nsec;
}

/*
 * Stamps: the cheapest reading of a clock that runs on (lib/common/clock.c), for
 * the engine's note of when each loop turn began (the view of the
 * coroutines reads them). The CPU's counter where it keeps time (x86-64:
 * the kernel's clocksource is the tsc, or the CPU's flags say its counter
 * is invariant and known reliable, as a hypervisor's kvm-clock guest's do;
 * arm64's virtual counter): one instruction; elsewhere
 * CLOCK_MONOTONIC_COARSE. co__stamp_init decides, once (co__stamp_pick);
 * co__stamp_ns turns a stamp into CLOCK_MONOTONIC ns.
 */
enum { CO__STAMP_COARSE = 0, CO__STAMP_TSC = 1, CO__STAMP_CNTVCT = 2 };
extern int co__stamp_kind;
void co__stamp_init(void);
uint64_t co__stamp_ns(uint64_t stamp);
/* x86-64's choice from the current clocksource's name and the first
 * "flags" line of /proc/cpuinfo (either may be NULL: not readable). */
int co__stamp_pick(const char *clocksource, const char *cpu_flags);

static inline uint64_t co__stamp(void)
{
#if defined(__x86_64__)
	if (__builtin_expect(co__stamp_kind == CO__STAMP_TSC, 1)) {
		unsigned lo, hi;

		__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
		return ((uint64_t)hi << 32) | lo;
	}
#elif defined(__aarch64__)
	if (__builtin_expect(co__stamp_kind == CO__STAMP_CNTVCT, 1)) {
		uint64_t v;

		__asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
		return v;
	}
#endif
	return co__now_coarse_ns();
}

/* t + ns, or UINT64_MAX where the sum would wrap. */
static inline uint64_t co__time_add(uint64_t t, uint64_t ns)
{
	return ns > UINT64_MAX - t ? UINT64_MAX : t + ns;
}

/* The CLOCK_MONOTONIC time ns from now (UINT64_MAX: never). */
static inline uint64_t co__deadline_after(uint64_t ns)
{
	return co__time_add(co__now_ns(), ns);
}

/* ns as the kernel's timespec (io_uring timeouts, waits). Any uint64_t
 * goes: the kernel clamps seconds past its range (292 years) to "never". */
static inline void co__ns_to_ts(struct __kernel_timespec *ts, uint64_t ns)
{
	ts->tv_sec = (long long)(ns / CO__NS_PER_S);
	ts->tv_nsec = (long long)(ns % CO__NS_PER_S);
}

#endif
