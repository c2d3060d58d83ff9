/* SPDX-License-Identifier: MIT */
/*
 * coring/engine_types.h - what other layers hand to an engine, without
 * liburing: the target of a completion (co_io_info), a callback to run on
 * the engine's thread (co_post), a parked wait (co_stop_link). The sync
 * headers need only these; engine.h has the engine itself.
 */
#ifndef CORING_ENGINE_TYPES_H
#define CORING_ENGINE_TYPES_H

#include <coring/posix.h> /* first: the feature macro liburing needs */
#include <coring/co.h>
#include <coring/version.h>

/* libcoring is built with the full frame; a program that asked co.h for
 * the lean one would hand it frames of another layout. */
#if CO_LEAN_FRAME
#error "coring: the Linux layers need the full co_frame: do not define CO_LEAN_FRAME=1 with them"
#endif

/* Private fields that other threads touch are atomics in C. C++ code only
 * embeds the structs (it never touches private fields), so it sees plain
 * fields of the same size and alignment. */
#ifdef __cplusplus
#define CO__ATOMIC(t) t
#define CO__ALIGNAS(n) alignas(n)
#else
#include <stdatomic.h>
#define CO__ATOMIC(t) _Atomic(t)
#define CO__ALIGNAS(n) _Alignas(n)
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define CO_CACHELINE 64

typedef struct co_engine co_engine;

/* What every SQE that coring submits carries as user_data: the CQE goes to
 * cb, on the thread of engine e, which dispatches it. Lives inside the
 * awaiting frame (tinyCoro's io_info). The two low bits of user_data are a
 * tag passed to cb (e.g. "the linked timeout"). */
typedef struct co_io_info co_io_info;
struct co_io_info {
	void (*cb)(co_engine *e, co_io_info *info, int res, unsigned cqe_flags, unsigned tag);
};
#define CO_IO_TAG_MASK 3u

/*
 * A callback to run on an engine's own thread, asked for from any thread
 * with co_engine_post: how another thread gets done what only the owner
 * may do (touch its ring: remove a timer, submit a cancel). The node lives
 * in the caller's memory and must stay valid until fn has been called; fn
 * may free it.
 */
typedef struct co_post co_post;
struct co_post {
	void (*fn)(co_post *p);       /* public: set before posting */
	co_post *next;                /* private: the engine's post list */
};

/*
 * A frame parked on an engine by a primitive that can end the wait itself
 * (the sync layer's waiters): the engine keeps a list of them, so that a
 * cancel stop reaches waits that nothing else would end. All fields are
 * private; lib/ links and unlinks them.
 */
typedef struct co_stop_link co_stop_link;
struct co_stop_link {
	co_stop_link *next, *prev;    /* private: under the engine's stop lock */
	void (*cancel)(co_stop_link *p); /* private: end the wait with -ECANCELED */
	void (*give_up)(co_stop_link *p); /* private: a wait the cancel could not
	                                   end, past the stop's grace (a pool job) */
	CO__ATOMIC(unsigned) visit;   /* private: the engine is looking at it */
	unsigned char linked;         /* private: on a list (which one) */
};

#ifdef __cplusplus
}
#endif

#endif /* CORING_ENGINE_TYPES_H */
