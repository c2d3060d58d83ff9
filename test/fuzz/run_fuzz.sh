#!/bin/sh
# Builds a libFuzzer harness with clang (ASan+UBSan) and runs it for a
# bounded time on a copy of its seed corpus; any crash fails the test.
#   run_fuzz.sh NAME SRCROOT CORPUS_DIR HARNESS.c [EXTRA_SOURCES...]
# FUZZ_SECONDS (default 20) bounds the run. Exit 77 (skip) without clang.
set -eu
name=$1 root=$2 seeds=$3 harness=$4
shift 4
command -v clang >/dev/null 2>&1 || { echo "skip: no clang"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-I"$root/include" -I"$root/docs/examples" "$harness" "$@" -o "$tmp/fuzz"
mkdir "$tmp/corpus"
cp "$seeds"/* "$tmp/corpus/" 2>/dev/null || true
"$tmp/fuzz" -max_total_time="${FUZZ_SECONDS:-20}" -max_len=4096 -print_final_stats=1 \
	"$tmp/corpus" 2>"$tmp/log" || { tail -n 40 "$tmp/log"; exit 1; }
grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$tmp/log"
echo "ok: $name fuzzed without a crash"
