/* SPDX-License-Identifier: MIT */
/* CO_TEST_SANITIZED: 1 in a build with ASan or TSan (gcc's and clang's ways
 * of saying so), whose checks make each copy and each atomic many times
 * slower: a test that only needs many rounds may run fewer there. */
#ifndef CORING_TEST_SANITIZED_H
#define CORING_TEST_SANITIZED_H

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define CO_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define CO_TEST_SANITIZED 1
#endif
#endif
#ifndef CO_TEST_SANITIZED
#define CO_TEST_SANITIZED 0
#endif

#endif
