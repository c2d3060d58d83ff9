/* SPDX-License-Identifier: MIT */
/*
 * The local-continuation technique of Protothreads, written here as a
 * baseline for bench/runner/sections/firmware.py (no code of that library
 * is used).
 *
 * A coroutine's whole state is a 2-byte continuation, an unsigned short.
 * The body is one `switch` on it: 0 enters at the top, and every resume
 * point is a `case __LINE__:` whose line number the body stores before it
 * returns. A body returns one of the LCB_ codes; an ended one starts over
 * when called again (its continuation goes back to 0). A local flag tells
 * a yield's first pass (return) from its resume (go on); the compiler
 * folds it away. Nothing checks a misuse: a resume point inside a user
 * switch, two on one line or a call after the end compile and misbehave.
 */
#ifndef LC_BASELINE_H
#define LC_BASELINE_H

typedef unsigned short lcb_t;

struct lcb { lcb_t lc; };

enum { LCB_WAITING = 0, LCB_YIELDED = 1, LCB_ENDED = 3 };

#define LCB_INIT(s) ((s)->lc = 0)

#define LCB_BEGIN(s)                                                       \
	{                                                                  \
		char lcb_flag = 1;                                         \
		(void)lcb_flag;                                            \
		switch ((s)->lc) {                                         \
		case 0:

/* Come back here: store the line, and let the switch find it. */
#define LCB_MARK(s)                                                        \
	(s)->lc = __LINE__;                                                \
	__attribute__((__fallthrough__));                                  \
	case __LINE__:

/* Return until cond holds; cond is evaluated now and on every resume. */
#define LCB_WAIT_UNTIL(s, cond)                                            \
	do {                                                               \
		LCB_MARK(s);                                               \
		if (!(cond))                                               \
			return LCB_WAITING;                                \
	} while (0)

/* Return once; the next call goes on after this point. */
#define LCB_YIELD(s)                                                       \
	do {                                                               \
		lcb_flag = 0;                                              \
		LCB_MARK(s);                                               \
		if (lcb_flag == 0)                                         \
			return LCB_YIELDED;                                \
	} while (0)

#define LCB_END(s)                                                         \
		}                                                          \
		lcb_flag = 0;                                              \
		LCB_INIT(s);                                               \
		return LCB_ENDED;                                          \
	}

#endif
