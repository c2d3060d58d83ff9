/* SPDX-License-Identifier: MIT */
/*
 * coring/posix.h - the feature macro the Linux headers need. liburing.h
 * and coring's own headers use POSIX.1-2008 declarations (sigset_t,
 * AT_FDCWD, pthread types), which a strict -std=c11 or -std=c99 hides
 * unless a feature macro asks for them. Every Linux header of coring
 * includes this one first:
 *
 *   - no libc header came before it and no feature macro is set: it
 *     defines _DEFAULT_SOURCE, what glibc and musl select themselves under
 *     gcc's default -std=gnu17 (POSIX.1-2008 and the BSD and System V
 *     names), so `cc -std=c11 app.c $(pkg-config --cflags --libs coring)`
 *     works with no extra flag, and a file that includes coring first sees
 *     every declaration it would see without it (usleep, strsep,
 *     MAP_ANONYMOUS ...: test/core/compile_ok/libc_defaults.c);
 *   - a libc header came first without such a macro: too late to define
 *     one (libc has fixed what it declares), so it stops with an error
 *     that says what to add.
 *
 * The firmware headers (co.h, loop.h) do not include it.
 */
#ifndef CORING_POSIX_H
#define CORING_POSIX_H

/* _FEATURES_H: glibc's and musl's <features.h>, which every libc header
 * includes first, was read already. */
#if !defined(_FEATURES_H) && !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE) && \
	!defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE) && !defined(_BSD_SOURCE)
#define _DEFAULT_SOURCE 1
#endif

#include <signal.h>
#if defined(__GLIBC__) && (!defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L)
#error "coring: liburing needs POSIX.1-2008: include a coring header before any libc header, or compile with -D_POSIX_C_SOURCE=200809L, -D_GNU_SOURCE or -std=gnu11"
#endif

#endif /* CORING_POSIX_H */
