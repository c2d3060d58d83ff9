/* SPDX-License-Identifier: MIT */
/*
 * The version macros match the project's version, and the library's; and
 * co_engine keeps the size and the public fields' places of its minor
 * version (docs/abi.md, "Structs in the caller's memory"): its read-only
 * fields first, then CO__ENGINE_PRIVATE_FIELDS.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <coring/engine.h>
#include <coring/version.h>

/* 0.4 on LP64 (x86-64, AArch64) with liburing 2.x's struct io_uring. */
#define ENGINE_SIZE_0_4 896u

int main(void)
{
	char s[32];

	snprintf(s, sizeof s, "%d.%d.%d", CORING_VERSION_MAJOR, CORING_VERSION_MINOR,
		 CORING_VERSION_PATCH);
	if (strcmp(s, CORING_VERSION_STRING) != 0 || strcmp(s, MESON_PROJECT_VERSION) != 0) {
		fprintf(stderr, "version.h says %s / %s, meson.build %s\n", s, CORING_VERSION_STRING,
			MESON_PROJECT_VERSION);
		return 1;
	}
	if (sizeof(void *) == 8 && sizeof(co_engine) != ENGINE_SIZE_0_4) {
		fprintf(stderr, "co_engine is %zu bytes, 0.4's %u\n", sizeof(co_engine), ENGINE_SIZE_0_4);
		return 1;
	}
	if (offsetof(co_engine, batch) != 0 || offsetof(co_engine, stats) >= offsetof(co_engine, runner)) {
		fprintf(stderr, "co_engine's public fields are not first\n");
		return 1;
	}
	if (co_version() != CORING_VERSION) {
		fprintf(stderr, "library %d, headers %d\n", co_version(), CORING_VERSION);
		return 1;
	}
	return 0;
}
