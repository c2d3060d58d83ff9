/* SPDX-License-Identifier: MIT */
/*
 * A number for the calling thread that no other thread of the process has
 * had or will have (not installed; lib/common/thread_id.c). pthread_self()
 * is not that: a thread that ends may leave its pthread_t to the next one
 * created, and an engine's owner check would take the new thread for the
 * old.
 */
#ifndef CORING_LIB_THREAD_ID_H
#define CORING_LIB_THREAD_ID_H

#include <stdint.h>

/* Never 0 (0 stands for "no thread"). */
uint64_t co__thread_id(void);

#endif
