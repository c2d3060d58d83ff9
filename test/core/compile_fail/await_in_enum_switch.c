/* expect: not in enumerated type|case value
 * backend: switch (computed goto allows this) */
#include <coring/co.h>
enum color { RED, GREEN };
struct s { co_frame co; enum color c; };
static int body(co_frame *f)
{
	struct s *s = (struct s *)f;
	CO_BEGIN(f);
#ifdef CO_TEST_OK
	CO_YIELD(f);
#endif
	switch (s->c) {
	case RED:
#ifndef CO_TEST_OK
		CO_YIELD(f);
#endif
		break;
	case GREEN:
		break;
	}
	CO_END(f);
}
int use(co_frame *f) { return body(f); }
