/* SPDX-License-Identifier: MIT */
/*
 * Board: BBC micro:bit, an nRF51822 (a Cortex-M0 at 16 MHz: no
 * LDREX/STREX, so loop.h takes its critical-section paths; no SysTick), as
 * QEMU emulates it (qemu-system-arm -M microbit). Everything the example
 * needs of the board is in this file:
 *   cpu: cortex-m0
 *   qemu: microbit
 * (the Makefile reads the two lines above). The console is UART0, the tick
 * TIMER0, the two interrupt sources TIMER1 and TIMER2, the two test
 * interrupts SWI0 and SWI1 (pended by software).
 */
#include "board.h"

BOARD_MEMORY(0x00000000, 0x40000, 0x20000000, 0x4000);

const char board_name[] = "microbit (nRF51, Cortex-M0)";

#define REG(addr) (*(volatile uint32_t *)(addr))

/* System control space (ARMv6-M: word accesses only) */
#define ICSR REG(0xE000ED04)
#define ICSR_ISRPENDING (1u << 22)
#define NVIC_ISER REG(0xE000E100)
#define NVIC_ISPR REG(0xE000E200)
#define NVIC_IPR(n) REG(0xE000E400 + 4 * ((n) / 4))

/* nRF51 peripherals */
#define UART0(off) REG(0x40002000 + (off))
#define TIMER(n, off) REG(0x40008000 + 0x1000 * (n) + (off))
#define TIMER_START 0x000
#define TIMER_STOP 0x004
#define TIMER_CLEAR 0x00C
#define TIMER_COMPARE0 0x140
#define TIMER_SHORTS 0x200
#define TIMER_INTENSET 0x304
#define TIMER_BITMODE 0x508
#define TIMER_PRESCALER 0x510
#define TIMER_CC0 0x540

enum { IRQ_TIMER0 = 8, IRQ_TIMER1 = 9, IRQ_TIMER2 = 10, IRQ_SWI0 = 20, IRQ_SWI1 = 21 };

/* ARMv6-M implements the top 2 bits of each 8-bit priority field. */
static void set_priority(unsigned irq, uint32_t prio)
{
	unsigned shift = 8 * (irq % 4);

	NVIC_IPR(irq) = (NVIC_IPR(irq) & ~(0xffu << shift)) | (prio << shift);
}

/* A 1 MHz timer (16 MHz / 2^4) that clears itself on compare 0. */
static void timer_setup(unsigned n, uint32_t shorts)
{
	TIMER(n, TIMER_STOP) = 1;
	TIMER(n, TIMER_PRESCALER) = 4;
	TIMER(n, TIMER_BITMODE) = 0; /* 16 bits */
	TIMER(n, TIMER_SHORTS) = shorts;
	TIMER(n, TIMER_INTENSET) = 1u << 16; /* COMPARE0 */
}

void board_init(void)
{
	UART0(0x500) = 4;          /* ENABLE */
	UART0(0x50C) = 24;         /* PSELTXD: the micro:bit's USB serial pin */
	UART0(0x524) = 0x01D7E000; /* BAUDRATE: 115200 */
	UART0(0x008) = 1;          /* TASKS_STARTTX */

	set_priority(IRQ_SWI1, 0x00);   /* foreign test */
	set_priority(IRQ_TIMER2, 0x40); /* burst */
	set_priority(IRQ_TIMER1, 0x80); /* producer */
	set_priority(IRQ_SWI0, 0x80);   /* coring test */
	set_priority(IRQ_TIMER0, 0xc0); /* the tick */
	NVIC_ISER = (1u << IRQ_TIMER0) | (1u << IRQ_TIMER1) | (1u << IRQ_TIMER2) |
		    (1u << IRQ_SWI0) | (1u << IRQ_SWI1);

	timer_setup(0, 1u << 0); /* COMPARE0_CLEAR: a period */
	TIMER(0, TIMER_CC0) = 1000000 / BOARD_TICK_HZ;
	TIMER(0, TIMER_START) = 1;
	timer_setup(1, (1u << 0) | (1u << 8)); /* and COMPARE0_STOP: once */
	timer_setup(2, (1u << 0) | (1u << 8));
}

void board_arm(enum board_source s, uint32_t us)
{
	unsigned n = s == BOARD_PRODUCER ? 1 : 2;

	TIMER(n, TIMER_STOP) = 1;
	TIMER(n, TIMER_CLEAR) = 1;
	if (us == 0)
		return;
	TIMER(n, TIMER_CC0) = us;
	TIMER(n, TIMER_START) = 1;
}

void board_pend(enum board_test_irq irq)
{
	NVIC_ISPR = 1u << (irq == BOARD_TEST_CORING ? IRQ_SWI0 : IRQ_SWI1);
	__asm__ volatile("dsb\n\tisb" : : : "memory");
}

int board_irq_pending(void)
{
	return (ICSR & ICSR_ISRPENDING) != 0;
}

void board_putc(char c)
{
	UART0(0x51C) = (uint8_t)c; /* TXD */
	for (int i = 0; i < 100000 && !UART0(0x11C); i++) /* EVENTS_TXDRDY */
		;
	UART0(0x11C) = 0;
}

void board_sleep(void *arg)
{
	(void)arg;
	__asm__ volatile("dsb\n\twfi" : : : "memory");
}

void board_exit(int ok)
{
	board_semihost_exit(ok);
}

static void timer_handler(unsigned n)
{
	TIMER(n, TIMER_COMPARE0) = 0;
	(void)TIMER(n, TIMER_COMPARE0); /* the write lands before the return */
}

static void timer0_handler(void)
{
	timer_handler(0);
	app_tick();
}

static void timer1_handler(void)
{
	timer_handler(1);
	app_produce();
}

static void timer2_handler(void)
{
	timer_handler(2);
	app_burst();
}

static void swi0_handler(void)
{
	app_test_irq(BOARD_TEST_CORING);
}

static void swi1_handler(void)
{
	app_test_irq(BOARD_TEST_FOREIGN);
}

/* The vector table: the initial stack pointer, then the 15 system
 * exceptions, then the nRF51's 32 interrupt lines. */
#define F board_fault
__attribute__((section(".vectors"), used)) static void (*const vectors[16 + 32])(void) = {
	(void (*)(void))__stack_top, board_reset, F, F, F, F, F, F, F, F, F, F, F, F, F, F,
	F, F, F, F, F, F, F, F, timer0_handler, timer1_handler, timer2_handler, F, F, F, F, F,
	F, F, F, F, swi0_handler, swi1_handler, F, F, F, F, F, F, F, F, F, F,
};
