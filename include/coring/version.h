/* SPDX-License-Identifier: MIT */
/*
 * coring/version.h - the version of these headers, and of the library at
 * run time:
 *
 *     #if CORING_VERSION < 200    // before 0.2.0
 *     ...
 *     if (co_version() != CORING_VERSION) // built against other headers
 */
#ifndef CORING_VERSION_H
#define CORING_VERSION_H

#define CORING_VERSION_MAJOR 0
#define CORING_VERSION_MINOR 4
#define CORING_VERSION_PATCH 0
#define CORING_VERSION_STRING "0.4.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define CORING_VERSION                                                              \
	(CORING_VERSION_MAJOR * 10000 + CORING_VERSION_MINOR * 100 + CORING_VERSION_PATCH)

/* Marks the library's public functions: the only symbols libcoring
 * exports (it is built with hidden visibility). */
#if defined(__GNUC__)
#define CO_API __attribute__((visibility("default")))
#else
#define CO_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* CORING_VERSION of the library linked at run time. */
CO_API int co_version(void);

#ifdef __cplusplus
}
#endif

#endif /* CORING_VERSION_H */
