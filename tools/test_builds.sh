#!/bin/sh
# make test's driver: compile and test each build directory in turn.
#   test_builds.sh JOBS BUILD_DIR...     (MESON: the meson to run)
# The first build compiles alone. While a build's tests run, the next one
# compiles beside them at the lowest priority (nice 19): the tests keep the
# CPUs they use, the compiler takes what they leave (a suite waits on
# sockets and timers, and ends with its last long tests). Its output goes
# to compile.log in its directory, shown if it fails. A failed compile or
# suite stops the run (exit 1), after the compile beside it has ended.
set -u
MESON=${MESON:-meson}
jobs=$1
shift
"$MESON" compile -C "$1" >/dev/null || { echo "make test: $1 did not compile"; exit 1; }
bg=
while [ $# -gt 0 ]; do
	d=$1
	shift
	if [ -n "$bg" ] && ! wait "$bg"; then
		cat "$d/compile.log"
		echo "make test: $d did not compile"
		exit 1
	fi
	bg=
	if [ $# -gt 0 ]; then
		nice -n 19 "$MESON" compile -C "$1" >"$1/compile.log" 2>&1 &
		bg=$!
	fi
	echo "== $d"
	if ! "$MESON" test -C "$d" --print-errorlogs --num-processes "$jobs"; then
		[ -z "$bg" ] || wait "$bg"
		echo "make test: $d failed"
		exit 1
	fi
done
echo "make test: all build configurations passed"
