/* SPDX-License-Identifier: MIT */
/*
 * The tests' entry point (test/helpers co_test_main): a case that calls
 * skip() exits 77, which meson reports as SKIP; a case that passes exits
 * 0; a case that fails exits nonzero and not 77. The `helpers_skip` tests
 * run this program and check each exit status.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "helpers.h"

static void test_skips(void **state)
{
	(void)state;
	skip();
}

static void test_passes(void **state)
{
	(void)state;
}

static void test_fails(void **state)
{
	(void)state;
	fail_msg("failing on purpose");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_skips),
		cmocka_unit_test(test_passes),
		cmocka_unit_test(test_fails),
	};
	return co_test_main(argc, argv, tests, sizeof tests / sizeof tests[0], 0);
}
