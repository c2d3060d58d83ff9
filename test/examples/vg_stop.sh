#!/bin/sh
# SPDX-License-Identifier: MIT
# vg_stop.sh VALGRIND [VALGRIND OPTIONS] -- PROGRAM [ARGS...]
#
# A server under valgrind, on one CPU, starts and stops on SIGTERM: PROGRAM
# must print port=P within 20 s, then get SIGTERM and exit with status 0
# within 20 s (each takes about a second; a server whose threads starve
# each other gets through only on valgrind's own time slices, after tens
# of seconds, or never). valgrind runs one thread at a time and keeps its lock
# through io_uring_enter, so an engine waiting there would keep the
# process's other threads (the one the stop needs) from ever running.
set -u
cpu=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*\([0-9]*\).*/\1/p' /proc/self/status)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
vg=$1
shift
opts=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do opts="$opts $1"; shift; done
shift
# shellcheck disable=SC2086
taskset -c "$cpu" "$vg" $opts "$@" >"$out" 2>&1 &
pid=$!
i=0
until grep -q '^port=' "$out"; do
	i=$((i + 1))
	if [ $i -gt 200 ] || ! kill -0 $pid 2>/dev/null; then
		echo "FAIL: no port= line from $*"; cat "$out"; kill -9 $pid 2>/dev/null; exit 1
	fi
	sleep 0.1
done
kill -TERM $pid
i=0
while kill -0 $pid 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 200 ]; then
		echo "FAIL: $* still runs 20 s after SIGTERM under valgrind on CPU $cpu"
		kill -9 $pid; cat "$out"; exit 1
	fi
	sleep 0.1
done
wait $pid
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: $* exited with status $rc after SIGTERM"; cat "$out"; exit 1; }
echo "ok: $(basename "$1") stopped under valgrind on CPU $cpu"
