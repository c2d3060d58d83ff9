/* expect: CO_AWAIT_of_a_child_needs_C11_use_CO_AWAIT_TASK
 * std: c99 (before C11 CO_AWAIT cannot tell a child from an awaiter)
 * werror: off (an error, not a pointer-type warning and a crash) */
#include <coring/co.h>
struct s { co_frame co; co_frame kid; };
static int body(co_frame *f)
{
	struct s *s = (struct s *)f;
	CO_BEGIN(f);
#ifdef CO_TEST_OK
	CO_AWAIT_TASK(f, &s->kid);
#else
	CO_AWAIT(f, &s->kid);
#endif
	CO_END(f);
}
int use(co_frame *f) { return body(f); }
