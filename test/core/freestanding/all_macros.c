/* SPDX-License-Identifier: MIT */
/* Every co.h macro and every loop.h call, compiled with -ffreestanding
 * -nostdlib. The object must need no symbol at all, and it links with
 * -nostdlib from co_freestanding_demo (no libgcc either). With
 * CO_FREESTANDING_START it also links with no libc and runs, on x86-64
 * Linux or as a Thumb program under qemu-arm: its exit status is
 * co_freestanding_demo()'s result (0 when every check held). */
#include <coring/co.h>
#include <coring/loop.h>

struct gen { co_frame co; int i, value; };
static int gen_fn(co_frame *f)
{
	struct gen *g = (struct gen *)f;
	CO_BEGIN(f);
	for (g->i = 1; g->i <= 4; g->i++)
		CO_YIELD_VALUE(f, g->value, g->i * 10);
	CO_END(f);
}

struct sig { co_awaiter aw; co_frame *parked; int value; };
static int sig_suspend(co_awaiter *a, co_frame *f) { ((struct sig *)a)->parked = f; return 1; }
static int sig_resume(co_awaiter *a, co_frame *f) { (void)f; return ((struct sig *)a)->value; }
static const co_awaiter_ops sig_ops = { 0, sig_suspend, sig_resume, 0, 0, "signal" };

struct child { co_frame co; int in; };
static int child_fn(co_frame *f)
{
	struct child *c = (struct child *)f;
	CO_BEGIN(f);
	CO_YIELD(f);
	CO_RETURN(f, c->in + 1);
	CO_END(f);
}

struct task { co_frame co; struct child kid; struct sig *s; volatile int *flag; int sum; };
static int task_fn(co_frame *f)
{
	struct task *t = (struct task *)f;
	CO_BEGIN(f);
	t->kid.in = 1;
	co_init(&t->kid.co, child_fn);
	CO_AWAIT_TASK(f, &t->kid.co);
	t->sum = co_result(f);
	CO_AWAIT(f, &t->s->aw);
	t->sum += co_result(f);
	CO_AWAIT_UNTIL(f, *t->flag);
	CO_END(f);
}

struct poke { co_frame co; struct sig *s; volatile int *flag; };
static int poke_fn(co_frame *f)
{
	struct poke *p = (struct poke *)f;
	CO_BEGIN(f);
	CO_YIELD(f);
	p->s->value = 40;
	co_wake(p->s->parked);
	CO_YIELD(f);
	*p->flag = 1;
	CO_END(f);
}

/* loop.h: a 16-bit clock that starts just before its wrap and advances
 * only while the loop sleeps; a sleeper, a give from "an interrupt", and
 * a take that times out. */
static volatile co_tick clock16 = 0xfff0u;
static co_tick clock_now(void) { return clock16 & 0xffffu; }
static void clock_sleep(void *arg) { ++*(int *)arg; clock16 = clock16 + 7u; }

struct timed {
	co_frame co;
	co_loop *l;
	co_notify *n;
	co_timer t;
	co_notify_wait w;
	int slept, got, timed_out;
};
static int timed_fn(co_frame *f)
{
	struct timed *d = (struct timed *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_sleep_ticks(&d->t, d->l, 20)); /* across the wrap */
	d->slept = co_result(f) == 0 && co__tick_diff(d->l, 0xfff0u + 20u, clock_now()) >= 0;
	CO_AWAIT(f, co_loop_timeout(&d->t, d->l, co_notify_take(&d->w, d->n), 30));
	d->got = co_result(f);
	CO_AWAIT(f, co_loop_timeout(&d->t, d->l, co_notify_take(&d->w, d->n), 30));
	d->timed_out = co_result(f);
	CO_END(f);
}

static int loop_demo(void)
{
	co_loop loop;
	co_notify n;
	struct timed d;
	int sleeps = 0, bad = 0, steps = 0;

	co_loop_init(&loop);
	bad |= co_loop_set_clock(&loop, clock_now, 16) != 0;
	co_notify_init(&n, 1);
	d.l = &loop;
	d.n = &n;
	d.slept = d.got = d.timed_out = 99;
	co_init(&d.co, timed_fn);
	bad |= co_loop_spawn(&loop, &d.co) != 0;
	while (loop.live && steps++ < 1000) {
		co_loop_step(&loop);
		if (d.slept != 99 && d.got == 99 && co_waiting(&d.co))
			co_notify_give(&n); /* the first take waits: "an interrupt" gives */
		co_loop_idle(&loop, clock_sleep, &sleeps);
	}
	bad |= loop.live != 0 || d.slept != 1 || d.got != 0 || d.timed_out != -ETIME;
	bad |= sleeps == 0;
	return bad;
}

/* co_isr_queue, co_cancel and co_loop_next_deadline: a consumer takes
 * seven items through a ring of three (its index wraps twice), put by
 * "an interrupt" between steps; then sleeps until cancelled. */
struct consumer {
	co_frame co;
	co_loop *l;
	co_isr_queue *q;
	co_isr_queue_wait w;
	co_timer t;
	int got[7], n, slept;
};
static int consumer_fn(co_frame *f)
{
	struct consumer *c = (struct consumer *)f;
	CO_BEGIN(f);
	for (c->n = 0; c->n < 7; c->n++) {
		CO_AWAIT(f, co_isr_queue_take(&c->w, c->q));
		if (co_result(f) != 0)
			CO_RETURN(f, 1);
		c->got[c->n] = *(int *)c->w.item;
	}
	co_shield(f);
	co_unshield(f);
	CO_AWAIT(f, co_sleep_ticks(&c->t, c->l, 1000));
	c->slept = co_result(f);
	CO_RETURN(f, co_cancelled(f) ? 5 : 6);
	CO_END(f);
}

static int queue_demo(void)
{
	static int items[7] = { 10, 11, 12, 13, 14, 15, 16 };
	void *slots[3];
	co_isr_queue q;
	co_loop loop;
	struct consumer c;
	co_tick deadline = 0;
	int bad = 0, put = 0, steps = 0;

	co_loop_init(&loop);
	bad |= co_loop_set_clock(&loop, clock_now, 16) != 0;
	bad |= co_isr_queue_init(&q, slots, 3) != 0;
	c.l = &loop;
	c.q = &q;
	c.n = 0;
	c.slept = 99;
	co_init(&c.co, consumer_fn);
	bad |= co_loop_spawn(&loop, &c.co) != 0;
	while (c.n < 7 && steps++ < 100) {
		/* "an interrupt": two items at a time, one refused when full */
		for (int k = 0; k < 2 && put < 7; k++)
			put += co_isr_queue_put(&q, &items[put]);
		co_loop_step(&loop);
	}
	co_loop_step(&loop); /* the consumer starts its sleep */
	bad |= co_loop_next_deadline(&loop, &deadline) != 1 || deadline != (co_tick)(clock_now() + 1000);
	bad |= co_cancel(&c.co) != 0;
	bad |= co_loop_run(&loop) != 0 || !co_done(&c.co) || co_status(&c.co) != 5;
	bad |= c.slept != -ECANCELED || co_loop_next_deadline(&loop, &deadline) != 0;
	for (int k = 0; k < 7; k++)
		bad |= c.got[k] != 10 + k;
	return bad;
}

/* The tiny profile: a 4-byte co_tiny, the body called directly. */
struct tiny_gen { co_tiny pt; int i, value; };
static int tiny_gen_fn(struct tiny_gen *g)
{
	co_tiny *f = &g->pt;
	CO_BEGIN(f);
	for (g->i = 1; g->i <= 4; g->i++)
		CO_YIELD_VALUE(f, g->value, g->i);
	CO_AWAIT_UNTIL(f, g->i > 4);
	CO_RETURN(f, 3);
	CO_END(f);
}

static int tiny_demo(void)
{
	struct tiny_gen g;
	int sum = 0;

	co_tiny_init(&g.pt);
	while (tiny_gen_fn(&g) == CO_YIELDED)
		sum += g.value;
	return sum != 10 || !co_tiny_done(&g.pt) || g.pt.status != 3 || sizeof(co_tiny) != 4;
}

int co_freestanding_demo(void);
int co_freestanding_demo(void)
{
	struct gen g;
	struct sig s;
	struct task t;
	struct poke p;
	co_loop loop;
	volatile int flag = 0;
	int total = 0, bad = 0;

	co_init(&g.co, gen_fn);
	while (co_next(&g.co))
		total += g.value;
	bad |= total != 100;

	s.aw.ops = &sig_ops;
	s.parked = 0;
	s.value = 0;
	t.s = p.s = &s;
	t.flag = p.flag = &flag;
	co_init(&t.co, task_fn);
	co_init(&p.co, poke_fn);
	co_loop_init(&loop);
	bad |= co_loop_spawn(&loop, &t.co) != 0;
	bad |= co_loop_spawn(&loop, &p.co) != 0;
	bad |= co_loop_run(&loop) != 0;
	bad |= t.sum != 42;
	return bad | (loop_demo() << 1) | (tiny_demo() << 2) | (queue_demo() << 3);
}

#if defined(CO_FREESTANDING_START) && defined(__x86_64__) && defined(__linux__)
__attribute__((force_align_arg_pointer, noreturn)) void co_start(void);
void co_start(void)
{
	long status = co_freestanding_demo();
	__asm__ volatile("syscall" : : "a"(60L), "D"(status) : "rcx", "r11", "memory");
	__builtin_unreachable();
}
#elif defined(CO_FREESTANDING_START) && defined(__arm__)
/* Thumb under qemu-arm (user mode): exit through the Linux system call. */
__attribute__((noreturn)) void _start(void);
void _start(void)
{
	register long r0 __asm__("r0") = co_freestanding_demo();
	register long r7 __asm__("r7") = 1; /* exit */
	__asm__ volatile("svc 0" : : "r"(r0), "r"(r7) : "memory");
	for (;;)
		;
}
#endif
