/* SPDX-License-Identifier: MIT */
/*
 * The poll slip of a channel end (lib/sync/channel.c). Before it parks, an
 * end polls the other side's index (co__engine_poll); the slip is how many
 * pauses it waits before its first look. Every look pulls the line the
 * other end writes back from its CPU and stalls that writer's next locked
 * instruction, so an end that looks at every item it waits for runs both
 * ends in lockstep at one line transfer per item.
 *
 * The rule, after each poll that found n items (or free slots) after
 * waited pauses (0: found nothing):
 * - found nothing, or a capacity below 2 (it never holds two): no slip;
 * - found half the capacity or more: the other side had time to fill (or
 *   drain) half the ring, so both ends took turns instead of running
 *   together: halve the slip;
 * - found 2 or more, or found it within SLIP_QUICK pauses (the other side
 *   streams): slip more, 2 s + 1, up to the capacity (at least SLIP_MIN_TOP,
 *   at most SLIP_TOP pauses), so the other writes several items between
 *   two looks;
 * - waited long for one item (a round trip: the other was not streaming):
 *   halve the slip.
 * The top follows the capacity: at 256, a top of 16 pauses let the
 * consumer look every ten items or so, and both ends ran slower
 * (docs/benchmarks.md); at 16, a top of 256 made the producer wait with
 * the ring empty.
 */
#ifndef CORING_LIB_SYNC_SLIP_H
#define CORING_LIB_SYNC_SLIP_H

#define SLIP_QUICK 4u
#define SLIP_MIN_TOP 16u
#define SLIP_TOP 256u

/* The slip after a poll of an end of a channel of capacity cap. */
static inline unsigned co__slip_next(unsigned cap, unsigned slip, unsigned waited, unsigned n)
{
	unsigned top = cap < SLIP_MIN_TOP ? SLIP_MIN_TOP : cap < SLIP_TOP ? cap : SLIP_TOP;

	if (waited == 0 || cap < 2)
		return 0;
	if (n >= 2 && n >= cap / 2)
		return slip / 2;
	if (n >= 2 || waited <= SLIP_QUICK)
		return 2 * slip + 1 < top ? 2 * slip + 1 : top;
	return slip / 2;
}

#endif
