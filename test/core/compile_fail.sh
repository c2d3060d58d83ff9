#!/bin/sh
# Compile-fail test: compile_fail.sh BACKEND SOURCE INCLUDE_DIR CC [CC_ARGS...]
# The source must compile with -DCO_TEST_OK (so the failure below comes from
# the misuse, not from a broken test) and must be rejected without it, with
# a diagnostic matching its "expect:" line. A source marked "backend: switch"
# is misuse only on the switch backend: with computed goto it must compile.
# "std: c99" compiles it as C99; "werror: off" drops -Werror, for misuse
# that must be a hard error, not a warning a user's build may ignore.
# "ndebug: too" checks the misuse in a release build (-DNDEBUG) as well.
set -u
backend=$1 src=$2 inc=$3
shift 3
std=$(sed -n 's/.*std: \(c[0-9]*\).*/\1/p' "$src" | head -n 1)
werror=-Werror
grep -q 'werror: off' "$src" && werror=
flags="-std=${std:-c11} -Wall -Wextra $werror -Wimplicit-fallthrough -I$inc -c -o /dev/null"
if [ "$backend" = goto ]; then flags="$flags -DCO_USE_COMPUTED_GOTO=1"
else flags="$flags -DCO_USE_COMPUTED_GOTO=0"; fi
expect=$(sed -n 's/.*expect: \(.*[^ */]\)[ */]*$/\1/p' "$src" | head -n 1)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

if ! "$@" $flags -DCO_TEST_OK "$src" >"$log" 2>&1; then
	echo "FAIL: the valid variant of $src does not compile:"; cat "$log"; exit 1
fi
if grep -q 'backend: switch' "$src" && [ "$backend" = goto ]; then
	if "$@" $flags "$src" >"$log" 2>&1; then
		echo "ok: $src compiles with computed goto, as it should"; exit 0
	fi
	echo "FAIL: $src should compile with computed goto:"; cat "$log"; exit 1
fi
if "$@" $flags "$src" >"$log" 2>&1; then
	echo "FAIL: $src compiled, but the misuse must be rejected"; exit 1
fi
if ! grep -Eq "$expect" "$log"; then
	echo "FAIL: $src was rejected, but not with /$expect/:"; cat "$log"; exit 1
fi
if grep -q 'ndebug: too' "$src"; then
	if "$@" $flags -DNDEBUG "$src" >"$log" 2>&1; then
		echo "FAIL: $src compiled with -DNDEBUG, but the misuse must be rejected there too"; exit 1
	fi
	if ! grep -Eq "$expect" "$log"; then
		echo "FAIL: $src was rejected with -DNDEBUG, but not with /$expect/:"; cat "$log"; exit 1
	fi
fi
echo "ok: $src rejected:"; grep -E "$expect" "$log" | head -n 2
