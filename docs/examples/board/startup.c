/* SPDX-License-Identifier: MIT */
/*
 * Start-up for any Cortex-M (ARMv6-M and ARMv7-M alike): the reset
 * handler copies .data from flash and clears .bss (cortex-m.ld places
 * them), then runs main; a fault reports and stops. The vector table is
 * the board file's, which points at these.
 */
#include "board.h"

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[];
int main(void);

void board_reset(void)
{
	/* volatile: the compiler may not turn these loops into calls of
	 * memcpy and memset, which this -nostdlib link does not have */
	volatile uint32_t *d = __data_start;
	const uint32_t *s = __data_load;

	while (d < __data_end)
		*d++ = *s++;
	for (d = __bss_start; d < __bss_end; d++)
		*d = 0;
	main();
	board_exit(0);
}

/* Any fault or unexpected exception: a trap of co.h in a debug build
 * (CO_TRAP's trap instruction) lands here. */
void board_fault(void)
{
	static const char msg[] = "\nFAIL fault: a trap or an unexpected exception\n";

	for (const char *p = msg; *p; p++)
		board_putc(*p);
	board_exit(0);
}

/* Semihosting SYS_EXIT (0x18) with ADP_Stopped_ApplicationExit (0x20026),
 * or RunTimeErrorUnknown (0x20023): QEMU exits with status 0 or 1. On a
 * board without a debugger attached, BKPT faults: replace this there. */
void board_semihost_exit(int ok)
{
	register uint32_t r0 __asm__("r0") = 0x18;
	register uint32_t r1 __asm__("r1") = ok ? 0x20026 : 0x20023;

	__asm__ volatile("bkpt 0xab" : : "r"(r0), "r"(r1) : "memory");
	for (;;)
		__asm__ volatile("wfi");
}
