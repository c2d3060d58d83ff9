/* expect: co_tiny_suspension_point_past_line_65534
 * backend: switch (computed goto keeps a co_tiny's point as an offset)
 * ndebug: too
 * The tiny profile with the switch backend keeps a resume point's line in
 * its 16-bit label, where 0 is "not started" and 0xFFFF "finished": a
 * suspension point on line 65535 or later would restart the body (65536
 * is label 0, a silent loop), or trap as if inside a user's switch. It is
 * a compile error naming the limit; a co_frame's points, whose labels are
 * words, compile on any line. */
#include <coring/co.h>
struct t { co_tiny pt; int n; };
struct c { co_frame co; int n; };
static int tiny_body(struct t *s)
{
	co_tiny *f = &s->pt;
	CO_BEGIN(f);
	s->n++;
#ifndef CO_TEST_OK
#line 65536
#endif
	CO_YIELD(f);
	s->n++;
	CO_END(f);
}
static int frame_body(co_frame *f)
{
	struct c *c = (struct c *)f;
	CO_BEGIN(f);
#line 70000
	CO_YIELD(f);
	c->n++;
	CO_END(f);
}
int use(struct t *s, struct c *c) { return tiny_body(s) + frame_body(&c->co); }
