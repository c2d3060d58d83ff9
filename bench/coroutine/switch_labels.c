/* SPDX-License-Identifier: MIT */
/*
 * The switch benchmark's generator with co.h's switch label backend
 * (resume points are cases of a switch on the frame's label), beside the
 * default backend's in switch.c: what the backend costs a resume.
 */
#define CO_USE_COMPUTED_GOTO 0
#define SWITCH_GEN_SUM coring_switch_sum
#include "switch_gen.h"
