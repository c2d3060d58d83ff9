/* A user's translation unit under a strict -std=c11 with no feature macro:
 * liburing cannot be declared, and coring says what to add.
 * expect: coring: liburing needs POSIX.1-2008 */
#ifdef CO_TEST_OK
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdio.h> /* a libc header first, as most files have */
#include <coring/co.h>
#include <coring/engine.h>
#include <coring/io.h>
#include <coring/context.h>
#include <coring/scheduler.h>
#include <coring/coring.h>

int main(void)
{
	printf("%d\n", co_engine_current() != NULL);
	return 0;
}
