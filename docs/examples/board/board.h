/* SPDX-License-Identifier: MIT */
/*
 * What the application (main.c) needs from a board, and what the board's
 * interrupt handlers call in it. One file per board implements the board
 * side: board_mps2_an386.c (QEMU's mps2-an386, a Cortex-M4) and
 * board_microbit.c (QEMU's microbit, an nRF51: a Cortex-M0). To port the
 * example, copy the folder and write a board_<name>.c of your own: its
 * memory map, vector table, console, tick and interrupt sources.
 */
#ifndef BOARD_H
#define BOARD_H

#include <stdint.h>

/*
 * The memory map, for the linker script (cortex-m.ld reads these four
 * symbols): a board file says BOARD_MEMORY(flash origin, flash size, RAM
 * origin, RAM size) once, at file scope.
 */
#define BOARD_MEMORY(flash, flash_size, ram, ram_size)                     \
	__asm__(".globl __board_flash\n.set __board_flash, " #flash "\n"    \
		".globl __board_flash_size\n.set __board_flash_size, " #flash_size "\n" \
		".globl __board_ram\n.set __board_ram, " #ram "\n"          \
		".globl __board_ram_size\n.set __board_ram_size, " #ram_size "\n")

/* The interrupt sources the application drives (board_arm). */
enum board_source {
	BOARD_PRODUCER, /* a timer interrupt of middle priority: app_produce */
	BOARD_BURST,    /* a timer interrupt of high priority: app_burst */
};

/* Two interrupts pended by software (board_pend), for the masking test:
 * one at the priority of coring's handlers (0x80), one more urgent than
 * any of them (priority 0), which never calls coring. */
enum board_test_irq {
	BOARD_TEST_CORING,
	BOARD_TEST_FOREIGN,
};

extern const char board_name[];  /* "mps2-an386 (Cortex-M4)" */

/* Console, interrupt priorities, the tick (started, BOARD_TICK_HZ). The
 * priorities, most urgent first: foreign test 0x00, burst 0x40, producer
 * and coring test 0x80, tick 0xc0 (on cores with 2 priority bits these
 * are all distinct too). */
void board_init(void);
#define BOARD_TICK_HZ 1000

/* One interrupt of source s in `us` microseconds (1..60000); 0 stops it. */
void board_arm(enum board_source s, uint32_t us);

void board_pend(enum board_test_irq irq);

/* Is an interrupt pending (taken once the mask is lifted)? */
int board_irq_pending(void);

void board_putc(char c);

/* co_loop_idle's sleep: WFI. Called with interrupts masked; returns with
 * them still masked, after an interrupt became pending. */
void board_sleep(void *arg);

/* Stop: report ok (1) or not to the emulator (semihosting). */
__attribute__((noreturn)) void board_exit(int ok);

/* startup.c: the reset handler, the fault handler, semihosting's exit. */
void board_reset(void);
void board_fault(void);
__attribute__((noreturn)) void board_semihost_exit(int ok);
extern uint32_t __stack_top[];

/* The application's side, called by the board's handlers. */
void app_tick(void);
void app_produce(void);
void app_burst(void);
void app_test_irq(enum board_test_irq irq);

#endif
