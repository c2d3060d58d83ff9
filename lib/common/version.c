/* SPDX-License-Identifier: MIT */
/* The library's version at run time (coring/version.h). */
#include <coring/version.h>

int co_version(void)
{
	return CORING_VERSION;
}
