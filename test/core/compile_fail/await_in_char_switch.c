/* expect: exceeds maximum value|case label value|overflow
 * backend: switch (computed goto allows this) */
#include <coring/co.h>
struct s { co_frame co; unsigned char c; };
static int body(co_frame *f)
{
	struct s *s = (struct s *)f;
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
int use(co_frame *f) { return body(f); }
