/* SPDX-License-Identifier: MIT */
/* A detected misuse on bare metal (resuming a finished coroutine, debug
 * build): with the default CO_TRAP a trap instruction, with
 * -DCUSTOM_TRAP the user's fault handler, which gets the message. Built
 * for Cortex-M4 Thumb and run under qemu-arm by freestanding.sh (qemu). */
#ifdef CUSTOM_TRAP
__attribute__((noreturn)) void fault_handler(const char *msg);
#define CO_TRAP(msg) fault_handler(msg)
#endif
#include <coring/co.h>

__attribute__((noreturn)) static void sys_exit(long code)
{
	register long r0 __asm__("r0") = code;
	register long r7 __asm__("r7") = 1; /* exit */
	__asm__ volatile("svc 0" : : "r"(r0), "r"(r7) : "memory");
	for (;;)
		;
}

#ifdef CUSTOM_TRAP
void fault_handler(const char *msg)
{
	const char *want = "co_resume: frame already finished";
	int i = 0;

	while (want[i] && msg[i] == want[i])
		i++;
	sys_exit(want[i] == 0 ? 42 : 43); /* 42: the message named the misuse */
}
#endif

struct once { co_frame co; };
static int once_fn(co_frame *f)
{
	CO_BEGIN(f);
	CO_YIELD(f);
	CO_END(f);
}

__attribute__((noreturn)) void _start(void);
void _start(void)
{
	struct once o;

	co_init(&o.co, once_fn);
	while (co_resume(&o.co) != CO_DONE)
		;
	co_resume(&o.co); /* finished: a debug build traps here */
	sys_exit(0);
}
