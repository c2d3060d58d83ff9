#!/bin/sh
# Runs docs/examples/pipeline: its output must be its input upper-cased
# (tr a-z A-Z), for sizes around the block size; errors must fail.
set -eu
pipe=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for size in 0 1 4095 4096 4097 65536 1048583; do
	head -c "$size" /dev/urandom | od -An -tx1 -v | head -c "$size" >"$tmp/in"
	"$pipe" "$tmp/in" "$tmp/out" >/dev/null
	tr a-z A-Z <"$tmp/in" >"$tmp/want"
	cmp "$tmp/want" "$tmp/out" || { echo "FAIL: $size bytes differ"; exit 1; }
	echo "ok: $size bytes"
done
if "$pipe" "$tmp/missing" "$tmp/out" 2>/dev/null; then echo "FAIL: missing input accepted"; exit 1; fi
if "$pipe" "$tmp/in" "$tmp/no/such/dir/out" 2>/dev/null; then echo "FAIL: bad output accepted"; exit 1; fi
if "$pipe" 2>/dev/null; then echo "FAIL: no arguments accepted"; exit 1; fi
# an output that is the input itself is refused, the input left whole
cp "$tmp/in" "$tmp/keep"
if "$pipe" "$tmp/in" "$tmp/in" 2>/dev/null; then echo "FAIL: output onto the input accepted"; exit 1; fi
cmp "$tmp/in" "$tmp/keep" || { echo "FAIL: output onto the input changed it"; exit 1; }
# a writer that fails (the last input: 1 MiB, more than the channels hold)
# stops the reader and the workers: the error, not a hang
if "$pipe" "$tmp/in" /dev/full 2>"$tmp/err"; then echo "FAIL: full device accepted"; exit 1; fi
grep -q "No space left on device" "$tmp/err" || { echo "FAIL: /dev/full said: $(cat "$tmp/err")"; exit 1; }
echo "ok: errors reported"
