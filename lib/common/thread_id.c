/* SPDX-License-Identifier: MIT */
/*
 * Thread numbers (lib/common/thread_id.h): each thread takes the next one
 * the first time it asks; a new thread's copy of the variable starts at 0,
 * whatever thread it follows.
 */
#include <stdatomic.h>

#include "thread_id.h"

static _Atomic uint64_t last_id;
static _Thread_local uint64_t my_id __attribute__((tls_model("initial-exec")));

uint64_t co__thread_id(void)
{
	if (my_id == 0)
		my_id = atomic_fetch_add_explicit(&last_id, 1, memory_order_relaxed) + 1;
	return my_id;
}
