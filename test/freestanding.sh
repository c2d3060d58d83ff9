#!/bin/sh
# Freestanding checks of co.h: freestanding.sh native|cortex-m4 SRCDIR
#   native     x86-64 (or the host): -std=c99 -ffreestanding -nostdlib for both
#              label backends at -O0 and -O2; the objects must need no symbol;
#              on x86-64 Linux the demo links without libc and must exit 0.
#   cortex-m4  arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb: the demo and the
#              firmware example (docs/examples/frame_parser.c) must compile and
#              need no symbol. Exit 77 (skip) when the cross compiler is absent.
set -u
mode=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

check_no_symbols() { # NM OBJECT
	undef=$("$1" -u "$2")
	if [ -n "$undef" ]; then
		echo "FAIL: $2 needs symbols:"; echo "$undef"; fail=1
	else
		echo "ok: $(basename "$2") needs no external symbol"
	fi
}

case $mode in
native)
	CC=${CC:-cc}
	for backend in 0 1; do
		for opt in -O0 -O2; do
			o=$tmp/all_$backend$opt.o
			$CC -std=c99 -ffreestanding -nostdlib -Wall -Wextra -Wpedantic -Werror -Wimplicit-fallthrough \
				$opt -DCO_USE_COMPUTED_GOTO=$backend -I"$src/include" \
				-c "$src/test/freestanding/all_macros.c" -o "$o" || { echo "FAIL: compile"; exit 1; }
			check_no_symbols nm "$o"
		done
		if [ "$(uname -m)" = x86_64 ]; then
			$CC -std=c99 -ffreestanding -nostdlib -static -O2 -DCO_USE_COMPUTED_GOTO=$backend \
				-DCO_FREESTANDING_START -I"$src/include" -Wl,-e,co_start \
				"$src/test/freestanding/all_macros.c" -o "$tmp/demo" || { echo "FAIL: link"; exit 1; }
			if "$tmp/demo"; then
				echo "ok: libc-free program ran (backend $backend)"
			else
				echo "FAIL: libc-free program exited $?"; fail=1
			fi
		fi
	done
	;;
cortex-m4)
	command -v arm-none-eabi-gcc >/dev/null 2>&1 || { echo "skip: no arm-none-eabi-gcc"; exit 77; }
	for backend in 0 1; do
		for f in test/freestanding/all_macros.c docs/examples/frame_parser.c; do
			o=$tmp/$(basename "$f" .c)_$backend.o
			arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -ffreestanding -nostdlib -std=c99 -Os \
				-Wall -Wextra -Wpedantic -Werror -Wimplicit-fallthrough -DCO_USE_COMPUTED_GOTO=$backend \
				-I"$src/include" -I"$src/docs/examples" -c "$src/$f" -o "$o" || { echo "FAIL: compile $f"; exit 1; }
			check_no_symbols arm-none-eabi-nm "$o"
		done
	done
	arm-none-eabi-size "$tmp"/frame_parser_0.o
	;;
*)
	echo "usage: $0 native|cortex-m4 SRCDIR"; exit 2 ;;
esac
exit $fail
