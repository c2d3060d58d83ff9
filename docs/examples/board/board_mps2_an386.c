/* SPDX-License-Identifier: MIT */
/*
 * Board: ARM MPS2 with the AN386 image, a Cortex-M4 at 25 MHz, as QEMU
 * emulates it (qemu-system-arm -M mps2-an386). Everything the example
 * needs of the board is in this file:
 *   cpu: cortex-m4
 *   qemu: mps2-an386
 * (the Makefile reads the two lines above). The console is UART0, the tick
 * SysTick, the two interrupt sources the APB timers 0 and 1, the two test
 * interrupts IRQ 30 and 31 (unused lines, pended by software).
 */
#include "board.h"

BOARD_MEMORY(0x00000000, 0x40000, 0x20000000, 0x10000);

const char board_name[] = "mps2-an386 (Cortex-M4)";

#define REG(addr) (*(volatile uint32_t *)(addr))
#define REG8(addr) (*(volatile uint8_t *)(addr))

#define CPU_HZ 25000000u

/* System control space */
#define ICSR REG(0xE000ED04)
#define ICSR_ISRPENDING (1u << 22)
#define SHPR3_SYSTICK REG8(0xE000ED23)
#define SYST_CSR REG(0xE000E010)
#define SYST_RVR REG(0xE000E014)
#define SYST_CVR REG(0xE000E018)
#define NVIC_ISER REG(0xE000E100)
#define NVIC_ISPR REG(0xE000E200)
#define NVIC_IPR(n) REG8(0xE000E400 + (n))

/* CMSDK APB timers (PCLK = CPU_HZ) and UART0 */
#define TIMER(n, off) REG(0x40000000 + 0x1000 * (n) + (off))
#define TIMER_CTRL 0x00
#define TIMER_VALUE 0x04
#define TIMER_RELOAD 0x08
#define TIMER_INTCLEAR 0x0C
#define UART0(off) REG(0x40004000 + (off))

enum { IRQ_TIMER0 = 8, IRQ_TIMER1 = 9, IRQ_TEST_CORING = 30, IRQ_TEST_FOREIGN = 31 };

void board_init(void)
{
	UART0(0x10) = 16; /* BAUDDIV: the smallest allowed */
	UART0(0x08) = 1;  /* CTRL: TX enable */

	NVIC_IPR(IRQ_TEST_FOREIGN) = 0x00;
	NVIC_IPR(IRQ_TIMER1) = 0x40;       /* burst */
	NVIC_IPR(IRQ_TIMER0) = 0x80;       /* producer */
	NVIC_IPR(IRQ_TEST_CORING) = 0x80;
	SHPR3_SYSTICK = 0xc0;              /* the tick */
	NVIC_ISER = (1u << IRQ_TIMER0) | (1u << IRQ_TIMER1) | (1u << IRQ_TEST_CORING) |
		    (1u << IRQ_TEST_FOREIGN);

	SYST_RVR = CPU_HZ / BOARD_TICK_HZ - 1;
	SYST_CVR = 0;
	SYST_CSR = 7; /* processor clock, interrupt, enable */
}

void board_arm(enum board_source s, uint32_t us)
{
	int n = s == BOARD_PRODUCER ? 0 : 1;

	TIMER(n, TIMER_CTRL) = 0;
	if (us == 0)
		return;
	TIMER(n, TIMER_RELOAD) = us * (CPU_HZ / 1000000u);
	TIMER(n, TIMER_VALUE) = us * (CPU_HZ / 1000000u);
	TIMER(n, TIMER_CTRL) = 1 | 8; /* enable, interrupt */
}

void board_pend(enum board_test_irq irq)
{
	NVIC_ISPR = 1u << (irq == BOARD_TEST_CORING ? IRQ_TEST_CORING : IRQ_TEST_FOREIGN);
	__asm__ volatile("dsb\n\tisb" : : : "memory");
}

int board_irq_pending(void)
{
	return (ICSR & ICSR_ISRPENDING) != 0;
}

void board_putc(char c)
{
	while (UART0(0x04) & 1) /* STATE: TX buffer full */
		;
	UART0(0x00) = (uint8_t)c;
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

static void systick_handler(void)
{
	app_tick();
}

static void timer0_handler(void)
{
	TIMER(0, TIMER_INTCLEAR) = 1;
	app_produce();
}

static void timer1_handler(void)
{
	TIMER(1, TIMER_INTCLEAR) = 1;
	app_burst();
}

static void test_coring_handler(void)
{
	app_test_irq(BOARD_TEST_CORING);
}

static void test_foreign_handler(void)
{
	app_test_irq(BOARD_TEST_FOREIGN);
}

/* The vector table: the initial stack pointer, then the 15 system
 * exceptions (SysTick last), then the 32 interrupt lines. */
#define F board_fault
__attribute__((section(".vectors"), used)) static void (*const vectors[16 + 32])(void) = {
	(void (*)(void))__stack_top, board_reset, F, F, F, F, F, F, F, F, F, F, F, F, F,
	systick_handler,
	F, F, F, F, F, F, F, F, timer0_handler, timer1_handler, F, F, F, F, F, F, /* IRQ 0-15 */
	F, F, F, F, F, F, F, F, F, F, F, F, F, F,                                /* IRQ 16-29 */
	test_coring_handler, test_foreign_handler,                               /* IRQ 30, 31 */
};
