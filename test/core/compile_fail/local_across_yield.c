/* expect: uninitiali[sz]ed
 * A C local read after a suspension point: on resume the body jumps past
 * its assignment, and -Wall (-Werror) says so, with either compiler and
 * either backend. The fix is a field of the coroutine's struct. */
#include <coring/co.h>
struct s { co_frame co; int x; };
static int body(co_frame *f)
{
	struct s *s = (struct s *)f;
	int x;
	CO_BEGIN(f);
#ifdef CO_TEST_OK
	s->x = 5;
	CO_YIELD(f);
	x = s->x;
#else
	x = 5;
	CO_YIELD(f);
#endif
	f->result = x;
	CO_END(f);
}
int use(co_frame *f) { return body(f); }
