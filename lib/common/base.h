/* SPDX-License-Identifier: MIT */
/*
 * What every file of lib/ may use, whatever its layer (not installed):
 * compiler hints and container_of. No type of any layer lives here.
 */
#ifndef CORING_LIB_BASE_H
#define CORING_LIB_BASE_H

#include <stddef.h>

#define co__container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#define co__likely(x) __builtin_expect(!!(x), 1)
#define co__unlikely(x) __builtin_expect(!!(x), 0)
/* For the loop's small helpers, which the compiler would otherwise call
 * out of line once they grew past its inlining budget. */
#define co__inline inline __attribute__((always_inline))

#endif
