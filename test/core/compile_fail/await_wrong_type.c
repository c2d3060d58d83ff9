/* expect: _Generic|generic association
 * werror: off (a pointer to anything but an awaiter or a frame is an error,
 * not a warning) */
#include <coring/co.h>
struct kid { co_frame co; int v; };
struct s { co_frame co; struct kid kid; };
static int body(co_frame *f)
{
	struct s *s = (struct s *)f;
	CO_BEGIN(f);
#ifdef CO_TEST_OK
	CO_AWAIT(f, &s->kid.co);
#else
	CO_AWAIT(f, &s->kid);
#endif
	CO_END(f);
}
int use(co_frame *f) { return body(f); }
