/* expect: co__use_CO_macros_only_between_CO_BEGIN_and_CO_END */
#include <coring/co.h>
static int body(co_frame *f)
{
#ifdef CO_TEST_OK
	CO_BEGIN(f);
#endif
	CO_YIELD(f);
#ifdef CO_TEST_OK
	CO_END(f);
#else
	return 0;
#endif
}
int use(co_frame *f) { return body(f); }
