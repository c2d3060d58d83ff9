/* expect: exceeds maximum value|case label value|overflow
 * backend: switch (computed goto allows this)
 * ndebug: too
 * The tiny profile: the same compile error as a co_frame (its cases are
 * line numbers shifted up 16 bits, out of a char's range). */
#include <coring/co.h>
struct s { co_tiny pt; unsigned char c; };
static int body(struct s *s)
{
	co_tiny *f = &s->pt;
	CO_BEGIN(f);
#ifdef CO_TEST_OK
	CO_YIELD(f);
#endif
	switch (s->c) {
	case 'a':
#ifndef CO_TEST_OK
		CO_YIELD(f);
#endif
		break;
	default:
		break;
	}
	CO_END(f);
}
int use(struct s *s) { return body(s); }
