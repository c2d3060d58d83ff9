/* expect: CO_AWAIT_needs_a_co_frame_not_a_co_tiny
 * werror: off (a co_tiny cannot await: an error, never a crash) */
#include <coring/co.h>
struct s { co_tiny pt; co_awaiter *aw; };
static int body(struct s *s)
{
	co_tiny *f = &s->pt;
	CO_BEGIN(f);
#ifdef CO_TEST_OK
	CO_YIELD(f);
#else
	CO_AWAIT(f, s->aw);
#endif
	CO_END(f);
}
int use(struct s *s) { return body(s); }
