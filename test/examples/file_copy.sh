#!/bin/sh
# Runs docs/examples/file_copy: copies of several sizes must be identical,
# and its errors must be reported with a non-zero exit.
set -eu
copy=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for size in 0 1 262143 262144 5242881; do
	head -c "$size" /dev/urandom >"$tmp/src"
	"$copy" "$tmp/src" "$tmp/dst"
	cmp "$tmp/src" "$tmp/dst" || { echo "FAIL: copy of $size bytes differs"; exit 1; }
	echo "ok: $size bytes"
done
# a destination that cannot be synced (fsync: EINVAL) takes a copy, as cp's
"$copy" "$tmp/src" /dev/null || { echo "FAIL: copy to /dev/null"; exit 1; }
echo "ok: copy to /dev/null"
if "$copy" "$tmp/missing" "$tmp/dst" 2>/dev/null; then echo "FAIL: missing source accepted"; exit 1; fi
# a copy onto the source itself is refused, the file left whole (as cp refuses)
cp "$tmp/src" "$tmp/keep"
if "$copy" "$tmp/src" "$tmp/src" 2>/dev/null; then echo "FAIL: copy onto itself accepted"; exit 1; fi
cmp "$tmp/src" "$tmp/keep" || { echo "FAIL: a copy onto itself changed the file"; exit 1; }
# an error is reported with its cause
if "$copy" "$tmp/src" /dev/full 2>"$tmp/err"; then echo "FAIL: full device accepted"; exit 1; fi
grep -q "No space left on device" "$tmp/err" || { echo "FAIL: /dev/full said: $(cat "$tmp/err")"; exit 1; }
if "$copy" "$tmp/src" "$tmp/no/such/dir/dst" 2>/dev/null; then echo "FAIL: bad destination accepted"; exit 1; fi
if "$copy" 2>/dev/null; then echo "FAIL: no arguments accepted"; exit 1; fi
echo "ok: errors reported"
