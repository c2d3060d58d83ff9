/* SPDX-License-Identifier: MIT */
/*
 * What the firmware benchmark programs share
 * (bench/runner/sections/firmware.py builds them for Cortex-M4 Thumb, -Os
 * -DNDEBUG, and runs them under qemu-arm):
 * FW_BODY marks a coroutine body, kept a function of its own so that its
 * size can be read off the symbol table; fw_frame_size is the size of the
 * frame (FW_FRAME: co_frame, or co_tiny for the tiny profile) as a symbol
 * size, fw_backend's the label backend; the program resumes its coroutine
 * N times (-DN=...)
 * and exits through the Linux system call, so qemu-arm's user mode runs it
 * and counts its instructions.
 *
 * FW_RESUME(call, obj) is each resume of the driver loop. Built with
 * -DFW_DRIVER_ONLY it calls fw_nothing(obj) instead, an empty function the
 * compiler may not see through: the same loop without the coroutine, so
 * that the loop's own instructions can be told from the resume's.
 */
#ifndef FW_H
#define FW_H

#include <coring/co.h>

#define FW_BODY __attribute__((noinline, used)) int

#ifdef FW_DRIVER_ONLY
__attribute__((noinline, used)) int fw_nothing(void *obj);
int fw_nothing(void *obj)
{
	__asm__ volatile("" : : "r"(obj) : "memory");
	return 0;
}
#define FW_RESUME(call, obj) fw_nothing(obj)
#else
#define FW_RESUME(call, obj) (call)
#endif

#ifndef FW_FRAME
#define FW_FRAME co_frame
#endif
char fw_frame_size[sizeof(FW_FRAME)];
/* The label backend co.h chose (1 byte: switch, 2: computed goto). */
char fw_backend[CO_USE_COMPUTED_GOTO + 1];

int fw_run(long n);

__attribute__((noreturn)) void _start(void);
void _start(void)
{
	register long r0 __asm__("r0") = fw_run(N);
	register long r7 __asm__("r7") = 1; /* exit */
	__asm__ volatile("svc 0" : : "r"(r0), "r"(r7) : "memory");
	for (;;)
		;
}

#endif
