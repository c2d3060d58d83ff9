/* SPDX-License-Identifier: MIT */
/*
 * What the firmware benchmark programs share (bench/firmware.py builds
 * them for Cortex-M4 Thumb, -Os -DNDEBUG, and runs them under qemu-arm):
 * FW_BODY marks a coroutine body, kept a function of its own so that its
 * size can be read off the symbol table; fw_frame_size is the size of the
 * frame (FW_FRAME: co_frame, or co_tiny for the tiny profile) as a symbol
 * size; the program resumes its coroutine N times (-DN=...)
 * and exits through the Linux system call, so qemu-arm's user mode runs it
 * and counts its instructions.
 */
#ifndef FW_H
#define FW_H

#include <coring/co.h>

#define FW_BODY __attribute__((noinline, used)) int

#ifndef FW_FRAME
#define FW_FRAME co_frame
#endif
char fw_frame_size[sizeof(FW_FRAME)];

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
