/* expect: duplicate case value|duplicate label|redefinition of label */
#include <coring/co.h>
static int body(co_frame *f)
{
	CO_BEGIN(f);
#ifdef CO_TEST_OK
	CO_YIELD(f);
	CO_YIELD(f);
#else
	CO_YIELD(f); CO_YIELD(f);
#endif
	CO_END(f);
}
int use(co_frame *f) { return body(f); }
