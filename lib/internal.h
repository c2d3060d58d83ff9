/* SPDX-License-Identifier: MIT */
/* Internals shared by the Linux layers (not installed). */
#ifndef CORING_INTERNAL_H
#define CORING_INTERNAL_H

#include <stddef.h>

#define co__container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#define co__likely(x) __builtin_expect(!!(x), 1)
#define co__unlikely(x) __builtin_expect(!!(x), 0)

/*
 * ThreadSanitizer and Concurrency Kit: ck_ring's atomics are inline asm and
 * volatile loads, and its multi-consumer dequeue reads a slot before its CAS decides
 * whether the read counts (a benign race by design). TSan sees neither, so
 * the few functions that call ck_ring are left uninstrumented, and the
 * happens-before edge the ring provides (everything before an enqueue is
 * visible after the dequeue of that entry) is stated with annotations.
 */
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

/* Test hook (fault injection): when set, co_engine_init calls it instead of
 * io_uring_queue_init_params, so tests can simulate ENOSYS or EPERM. */
struct io_uring;
struct io_uring_params;
extern int (*co__uring_setup_hook)(unsigned entries, struct io_uring *ring,
				   struct io_uring_params *p);

/* Engine internals used by the scheduler (lib/engine.c). */
struct co_engine;
/* The engine running on the calling thread (co_engine_current without the
 * call): hidden, so the library reads it straight from its TLS block. */
extern _Thread_local struct co_engine *co__tls_engine
	__attribute__((tls_model("initial-exec"), visibility("hidden")));
struct co_frame;
void co__engine_kick(struct co_engine *e);
int co__engine_sleeping(struct co_engine *e);
unsigned co__engine_ready(struct co_engine *e);
unsigned co__engine_live(struct co_engine *e);
unsigned co__engine_steal(struct co_engine *thief, struct co_engine *victim, unsigned max);
int co__engine_move(struct co_frame *root, struct co_engine *from, struct co_engine *target);

#endif
