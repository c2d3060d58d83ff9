#!/bin/sh
# Compile test: compile_ok.sh SOURCE INCLUDE_DIR CC [CC_ARGS...]
# SOURCE must build and run to 0 with -Wall -Wextra -Werror, under gcc's
# default -std=gnu17 and under a strict -std=c11.
set -eu
src=$1 inc=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for std in gnu17 c11; do
	if ! "$@" -std=$std -Wall -Wextra -Werror -I"$inc" "$src" -o "$out"; then
		echo "FAIL: $src does not build under -std=$std"; exit 1
	fi
	"$out" || { echo "FAIL: $src built under -std=$std does not run to 0"; exit 1; }
	echo "ok: $src under -std=$std"
done
