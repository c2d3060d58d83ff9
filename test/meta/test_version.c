/* SPDX-License-Identifier: MIT */
/* The version macros match the project's version, and the library's. */
#include <stdio.h>
#include <string.h>

#include <coring/version.h>

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
	if (co_version() != CORING_VERSION) {
		fprintf(stderr, "library %d, headers %d\n", co_version(), CORING_VERSION);
		return 1;
	}
	return 0;
}
