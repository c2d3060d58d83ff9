/* SPDX-License-Identifier: MIT */
/*
 * A spinlock for short critical sections, and the CPU's spin-wait hint
 * (not installed; lib/common/spin.c).
 */
#ifndef CORING_LIB_SPIN_H
#define CORING_LIB_SPIN_H

#include <stdatomic.h>

static inline void co__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Held for a few dozen instructions (a list operation, a copy of one
 * channel item): spin briefly, then yield the CPU, since on a loaded
 * machine the holder may have been preempted. */
void co__spin_lock(atomic_uint *l);
void co__spin_unlock(atomic_uint *l);
/* 1 if it took the lock, 0 if the lock is held: never waits (so it may be
 * taken against a lock order). */
int co__spin_trylock(atomic_uint *l);

#endif
