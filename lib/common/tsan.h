/* SPDX-License-Identifier: MIT */
/*
 * ThreadSanitizer and Concurrency Kit (not installed): ck_ring's atomics
 * are inline asm and volatile loads, and its multi-consumer dequeue reads a
 * slot before its CAS decides whether the read counts (a benign race by
 * design). TSan sees neither, so the few functions that call ck_ring are
 * left uninstrumented (CO_NO_TSAN), and the happens-before edge the ring
 * provides (everything before an enqueue is visible after the dequeue of
 * that entry) is stated with co__hb_release / co__hb_acquire. Without
 * TSan every macro here is nothing.
 */
#ifndef CORING_LIB_TSAN_H
#define CORING_LIB_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define CO_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CO_TSAN 1
#endif
#endif

#ifdef CO_TSAN
#include <sanitizer/tsan_interface.h>
/* Dynamic annotations of the TSan runtime (exported to shared objects, unlike
 * __tsan_ignore_thread_*); both ignore every access of the thread. */
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
#if defined(__clang__)
#define CO_NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define CO_NO_TSAN __attribute__((no_sanitize_thread))
#endif
#define co__hb_release(p) __tsan_release((void *)(p))
#define co__hb_acquire(p) __tsan_acquire((void *)(p))
/* ck_ring copies slots with memcpy, which TSan intercepts even in an
 * uninstrumented function: ignore the thread's accesses around the call. */
#define co__tsan_ignore_begin() AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define co__tsan_ignore_end() AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define co__tsan_ignore_begin() ((void)0)
#define co__tsan_ignore_end() ((void)0)
#define CO_NO_TSAN
#define co__hb_release(p) ((void)(p))
#define co__hb_acquire(p) ((void)(p))
#endif

#endif
