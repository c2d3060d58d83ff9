#!/bin/sh
# The board test: board_test.sh SRCDIR BOARD BACKEND BUILD MASK
#   BOARD    mps2_an386 or microbit (board_<BOARD>.c)
#   BACKEND  default (co.h's choice on bare metal: the switch backend, which
#            the firmware's first line must name), goto or switch
#   BUILD    debug or release
#   MASK     primask or basepri (CO_IRQ_BASEPRI; Cortex-M4 only)
# Builds the example with its Makefile (arm-none-eabi-gcc, -nostdlib) and
# boots it under qemu-system-arm, at most 60 s (a run takes about one). It
# passes when QEMU exits 0 (semihosting: the firmware's own verdict), the
# firmware printed PASS, and every check of main.c printed "ok".
# Exit 77 (skip) without arm-none-eabi-gcc, qemu-system-arm or make.
set -u
src=$(cd "$1" && pwd) board=$2 backend=$3 build=$4 mask=$5
for t in arm-none-eabi-gcc qemu-system-arm make timeout; do
	command -v "$t" >/dev/null 2>&1 || { echo "skip: no $t"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

set -- -s -C "$src/docs/examples/board" BOARD="$board" MASK="$mask" O="$tmp" CORING="$src/include"
[ "$backend" != default ] && set -- "$@" BACKEND="$backend"
[ "$build" = release ] && set -- "$@" NDEBUG=1
make "$@" || { echo "FAIL: build"; exit 1; }
qemu=$(make "$@" qemu-command) || { echo "FAIL: no QEMU command"; exit 1; }
# shellcheck disable=SC2086
timeout 60 $qemu >"$tmp/out" 2>&1
status=$?
cat "$tmp/out"

[ "$status" = 0 ] || { echo "FAIL: QEMU exited $status"; fail=1; }
grep -q '^PASS' "$tmp/out" || { echo "FAIL: no PASS"; fail=1; }
for c in masking items notify preemption idle timers timeout tiny; do
	grep -q "^ok   $c: " "$tmp/out" || { echo "FAIL: check $c did not pass"; fail=1; }
done
if [ "$backend" = default ] && ! grep -q '^coring board test: .*, switch backend,' "$tmp/out"; then
	echo "FAIL: the default backend on bare metal is not the switch backend"; fail=1
fi
exit $fail
