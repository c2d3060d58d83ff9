/* expect: co__use_CO_macros_only_between_CO_BEGIN_and_CO_END|expected identifier or|extraneous closing brace */
#include <coring/co.h>
static int body(co_frame *f)
{
#ifdef CO_TEST_OK
	CO_BEGIN(f);
#endif
	CO_END(f);
}
int use(co_frame *f) { return body(f); }
