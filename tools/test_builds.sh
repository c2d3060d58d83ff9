#!/bin/sh
# make test's driver: compile and test each build directory in turn.
#   test_builds.sh JOBS BUILD_DIR...     (MESON: the meson to run)
# The first build compiles alone, at the caller's priority. Then its tests
# run while the other builds compile one after another beside them, at the
# lowest priority (nice 19): the tests keep the CPUs they use, the compiler
# takes what they leave (the suites wait on sockets, timers and servers,
# and each ends with its last long tests). A build is tested once its
# compile has ended; its output is in compile.log in its directory, shown
# if it failed. A failed compile or suite stops the run (exit 1) once the
# compile under way has ended; no other compile starts.
set -u
MESON=${MESON:-meson}
jobs=$1
shift
first=$1
"$MESON" compile -C "$first" >/dev/null || { echo "make test: $first did not compile"; exit 1; }
stop=$first/compile.stop # there: the compiles beside stop after the one under way
rm -f "$stop"
shift
for d in "$@"; do
	rm -f "$d/compile.status"
done
(
	for d in "$@"; do
		[ ! -e "$stop" ] || exit 0
		nice -n 19 "$MESON" compile -C "$d" >"$d/compile.log" 2>&1
		s=$?
		echo "$s" >"$d/compile.status.new" && mv "$d/compile.status.new" "$d/compile.status"
		[ "$s" -eq 0 ] || exit 0
	done
) &
beside=$!
end() {
	: >"$stop"
	wait "$beside"
	rm -f "$stop"
	exit 1
}
set -- "$first" "$@"
for d in "$@"; do
	if [ "$d" != "$first" ]; then
		while [ ! -e "$d/compile.status" ] && kill -0 "$beside" 2>/dev/null; do
			sleep 0.2
		done
		if [ "$(cat "$d/compile.status" 2>/dev/null)" != 0 ]; then
			cat "$d/compile.log"
			echo "make test: $d did not compile"
			end
		fi
	fi
	echo "== $d"
	if ! "$MESON" test -C "$d" --print-errorlogs --num-processes "$jobs"; then
		echo "make test: $d failed"
		end
	fi
done
wait "$beside"
echo "make test: all build configurations passed"
