/* SPDX-License-Identifier: MIT */
/* Fault injection for the test build of the library (lib/common/fault.h). */
#include <stdatomic.h>

#include "fault.h"

static atomic_ulong calls[CO__FAULT_SITES];
static atomic_ulong first[CO__FAULT_SITES], last[CO__FAULT_SITES];
static atomic_int fail_with[CO__FAULT_SITES];
static void (*_Atomic point_fn[CO__POINTS])(void *arg);
static void *_Atomic point_arg[CO__POINTS];

int co__fault_hit(enum co__fault_site site)
{
	unsigned long n = atomic_fetch_add(&calls[site], 1) + 1;

	return n >= atomic_load(&first[site]) && n <= atomic_load(&last[site])
		       ? atomic_load(&fail_with[site])
		       : 0;
}

void co__fault_arm_range(enum co__fault_site site, unsigned long from, unsigned long to, int err)
{
	atomic_store(&first[site], 0);
	atomic_store(&last[site], 0);
	atomic_store(&calls[site], 0);
	atomic_store(&fail_with[site], err);
	atomic_store(&last[site], to);
	atomic_store(&first[site], from ? from : 1);
	if (from == 0)
		atomic_store(&last[site], 0);
}

void co__fault_arm(enum co__fault_site site, unsigned long nth, int err)
{
	co__fault_arm_range(site, nth, nth, err);
}

unsigned long co__fault_calls(enum co__fault_site site)
{
	return atomic_load(&calls[site]);
}

void co__fault_on_point(enum co__fault_point p, void (*fn)(void *arg), void *arg)
{
	atomic_store(&point_fn[p], NULL);
	atomic_store(&point_arg[p], arg);
	atomic_store(&point_fn[p], fn);
}

void co__fault_point(enum co__fault_point p)
{
	void (*fn)(void *arg) = atomic_load(&point_fn[p]);

	if (fn)
		fn(atomic_load(&point_arg[p]));
}
