/* expect: expected declaration or statement at end of input|expected '}' */
#include <coring/co.h>
static int body(co_frame *f)
{
	CO_BEGIN(f);
	CO_YIELD(f);
#ifdef CO_TEST_OK
	CO_END(f);
#endif
}
int use(co_frame *f) { return body(f); }
