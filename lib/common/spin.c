/* SPDX-License-Identifier: MIT */
/* The spinlock of lib/common/spin.h. */
#include <sched.h>

#include "spin.h"

void co__spin_lock(atomic_uint *l)
{
	unsigned spins = 0;

	for (;;) {
		/* acquire: pairs with the release in co__spin_unlock */
		if (!atomic_exchange_explicit(l, 1, memory_order_acquire))
			return;
		while (atomic_load_explicit(l, memory_order_relaxed)) {
			if (++spins < 128)
				co__cpu_relax();
			else
				sched_yield();
		}
	}
}

int co__spin_trylock(atomic_uint *l)
{
	return !atomic_load_explicit(l, memory_order_relaxed) &&
	       !atomic_exchange_explicit(l, 1, memory_order_acquire);
}

void co__spin_unlock(atomic_uint *l)
{
	atomic_store_explicit(l, 0, memory_order_release); /* pairs with co__spin_lock */
}
