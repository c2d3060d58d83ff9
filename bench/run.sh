#!/bin/sh
# make bench: runs every benchmark of the release build dir ($1) and prints
# their tables. Later issues add the network benchmarks and the chart.
set -eu
dir=${1:-build-release}
cpu=$(($(nproc) - 1))
echo "== suspend/resume round trip (pinned to CPU $cpu; median of rounds)"
taskset -c "$cpu" "$dir/bench/switch"
echo "== sync: mutex hand-off and channel across 2 contexts, vs pthread mutex and a pipe"
"$dir/bench/sync"
