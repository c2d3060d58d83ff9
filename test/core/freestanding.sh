#!/bin/sh
# Freestanding checks of co.h and loop.h: freestanding.sh MODE SRCDIR
#   native     the host compiler ($CC): -std=c99 -ffreestanding -nostdlib
#              -Wpedantic for both label backends at -O0 and -O2; the objects
#              must need no symbol; on x86-64 Linux the demo links without
#              libc and must exit 0. The same source as C++11 (-Wpedantic).
#   cortex-m   arm-none-eabi-gcc for Cortex-M0+ (no compare-and-swap) and
#              Cortex-M4: the demo and the firmware example
#              (docs/examples/frame_parser.c) compile with -Wpedantic and
#              need no symbol.
#   newlib     the usual firmware link, hosted newlib-nano (--specs=nano.specs,
#              no -ffreestanding), with and without NDEBUG: no stdio, abort or
#              heap symbol may be linked in (CO_TRAP must not pull them).
#   qemu       the demo built for Cortex-M4 Thumb runs under qemu-arm and
#              must exit 0. qemu-arm's user mode emulates an A-profile CPU,
#              which has no PRIMASK, so this build defines CO_IRQ_SAVE /
#              RESTORE as no-ops (the demo takes no interrupt); the PRIMASK
#              default itself is compiled by the cortex-m mode; a misuse traps by instruction, or into
#              a user's CO_TRAP with its message (test/core/freestanding/trap.c).
#   clang      clang cross builds for thumbv6m (Cortex-M0+), thumbv7em
#              (Cortex-M4) and rv32imac: -Wpedantic -Werror, no symbol.
#   link       the demo, which calls every public entry of loop.h (the
#              queue included) and co.h, linked from co_freestanding_demo
#              with -nostdlib (no libc, no libgcc) at -Os, for Cortex-M0
#              (and at -O0), M0+, M4 (PRIMASK and CO_IRQ_BASEPRI) with
#              arm-none-eabi-gcc, and for Cortex-M0 and rv32imac with
#              clang and ld.lld: a helper call (a division, an atomic)
#              is an undefined reference and fails the link. And
#              CO_IRQ_BASEPRI where it cannot work (Cortex-M0/M0+, a value
#              of 0 or over 255) must be a compile error naming it.
# Exit 77 (skip) when the tools of a mode are absent.
set -u
mode=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
warn="-Wall -Wextra -Wpedantic -Werror -Wimplicit-fallthrough"
demo="$src/test/core/freestanding/all_macros.c"

check_no_symbols() { # NM OBJECT
	undef=$("$1" -u "$2")
	if [ -n "$undef" ]; then
		echo "FAIL: $2 needs symbols:"; echo "$undef"; fail=1
	else
		echo "ok: $(basename "$2") needs no external symbol"
	fi
}

need() { # TOOL...
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 || { echo "skip: no $t"; exit 77; }
	done
}

case $mode in
native)
	CC=${CC:-cc}
	for backend in 0 1; do
		for opt in -O0 -O2; do
			o=$tmp/all_$backend$opt.o
			$CC -std=c99 -ffreestanding -nostdlib $warn $opt -DCO_USE_COMPUTED_GOTO=$backend \
				-I"$src/include" -c "$demo" -o "$o" || { echo "FAIL: compile"; exit 1; }
			check_no_symbols nm "$o"
		done
		if [ "$(uname -m)" = x86_64 ]; then
			for lean in 0 1; do
				$CC -std=c99 -ffreestanding -nostdlib -static -O2 -DCO_USE_COMPUTED_GOTO=$backend \
					-DCO_LEAN_FRAME=$lean -DCO_FREESTANDING_START -I"$src/include" \
					-Wl,-e,co_start "$demo" -o "$tmp/demo" || { echo "FAIL: link"; exit 1; }
				if "$tmp/demo"; then
					echo "ok: libc-free program ran (backend $backend, lean frame $lean)"
				else
					echo "FAIL: libc-free program exited $? (backend $backend, lean frame $lean)"
					fail=1
				fi
			done
		fi
	done
	if command -v c++ >/dev/null 2>&1; then
		for lean in 0 1; do
			c++ -std=c++11 -x c++ $warn -DCO_LEAN_FRAME=$lean -I"$src/include" -c "$demo" \
				-o "$tmp/all_cxx.o" || { echo "FAIL: C++11 compile (lean frame $lean)"; fail=1; }
		done
		[ $fail = 0 ] && echo "ok: compiles as C++11 with -Wpedantic, both frame layouts"
	fi
	;;
cortex-m)
	need arm-none-eabi-gcc arm-none-eabi-nm
	for cpu in cortex-m0plus cortex-m4; do
		for backend in 0 1; do
			for f in test/core/freestanding/all_macros.c docs/examples/frame_parser.c; do
				o=$tmp/$(basename "$f" .c)_${cpu}_$backend.o
				arm-none-eabi-gcc -mcpu=$cpu -mthumb -ffreestanding -nostdlib -std=c99 -Os \
					$warn -DCO_USE_COMPUTED_GOTO=$backend -I"$src/include" \
					-I"$src/docs/examples" -c "$src/$f" -o "$o" ||
					{ echo "FAIL: compile $f for $cpu"; exit 1; }
				check_no_symbols arm-none-eabi-nm "$o"
			done
		done
	done
	arm-none-eabi-size "$tmp"/frame_parser_cortex-m4_1.o
	;;
newlib)
	need arm-none-eabi-gcc arm-none-eabi-nm
	echo 'int main(void) { return co_freestanding_demo(); }' > "$tmp/main.c"
	for nd in "" -DNDEBUG; do
		for backend in 0 1; do
			elf=$tmp/demo$nd$backend.elf
			# any diagnostic fails, linker warnings included (a nosys
			# "not implemented" warning means a syscall stub was pulled in)
			if ! arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -Os -std=c99 $warn $nd \
				-DCO_USE_COMPUTED_GOTO=$backend --specs=nano.specs --specs=nosys.specs \
				-I"$src/include" -include "$demo" "$tmp/main.c" -o "$elf" >"$tmp/log" 2>&1 ||
				[ -s "$tmp/log" ]; then
				echo "FAIL: newlib-nano link ($nd backend $backend):"; cat "$tmp/log"; exit 1
			fi
			bad=$(arm-none-eabi-nm "$elf" | grep -E ' (_?v?f?printf|_vfprintf_r|_malloc_r|malloc|_sbrk|abort|fputs|fwrite)$')
			if [ -n "$bad" ]; then
				echo "FAIL: the link pulls in ($nd backend $backend):"; echo "$bad"; fail=1
			else
				echo "ok: no stdio, abort or heap symbol ($nd backend $backend):" \
					"$(arm-none-eabi-size "$elf" | awk 'NR == 2 { print $1 " B text" }')"
			fi
		done
	done
	;;
qemu)
	need arm-none-eabi-gcc qemu-arm
	for backend in 0 1; do
		arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -std=c99 -ffreestanding -nostdlib \
			-nostartfiles -Os $warn -DCO_USE_COMPUTED_GOTO=$backend -DCO_FREESTANDING_START \
			'-DCO_IRQ_STATE=int' '-DCO_IRQ_SAVE(s)=((void)((s) = 0))' \
			'-DCO_IRQ_RESTORE(s)=((void)(s))' -I"$src/include" "$demo" -o "$tmp/demo.elf" ||
			{ echo "FAIL: compile"; exit 1; }
		if qemu-arm "$tmp/demo.elf"; then
			echo "ok: the Thumb demo ran under qemu-arm (backend $backend)"
		else
			echo "FAIL: the Thumb demo exited $? (backend $backend)"; fail=1
		fi
	done
	# a misuse caught on bare metal: the default trap is a trap instruction
	# (SIGILL under qemu: 132), a user's CO_TRAP gets the message (42),
	# and a release build does nothing (0)
	for v in default:132: custom:42:-DCUSTOM_TRAP release:0:-DNDEBUG; do
		name=${v%%:*} rest=${v#*:} want=${rest%%:*} def=${rest#*:}
		arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -std=c99 -ffreestanding -nostdlib \
			-nostartfiles -Os $warn $def -I"$src/include" "$src/test/core/freestanding/trap.c" \
			-o "$tmp/trap.elf" || { echo "FAIL: compile trap.c ($name)"; exit 1; }
		qemu-arm "$tmp/trap.elf" 2>/dev/null
		got=$?
		if [ "$got" = "$want" ]; then
			echo "ok: trap, $name: exit $got"
		else
			echo "FAIL: trap, $name: exit $got, want $want"; fail=1
		fi
	done
	;;
clang)
	need clang llvm-nm
	for t in "--target=thumbv6m-none-eabi -mcpu=cortex-m0plus" \
		"--target=thumbv7em-none-eabi -mcpu=cortex-m4" \
		"--target=riscv32-unknown-elf -march=rv32imac"; do
		for backend in 0 1; do
			o=$tmp/clang.o
			# shellcheck disable=SC2086
			clang $t -std=c99 -ffreestanding -nostdlib -Os $warn -DCO_USE_COMPUTED_GOTO=$backend \
				-I"$src/include" -c "$demo" -o "$o" || { echo "FAIL: clang $t"; exit 1; }
			echo "clang $t, backend $backend:"
			check_no_symbols llvm-nm "$o"
		done
	done
	;;
link)
	need arm-none-eabi-gcc
	for cpu in cortex-m0 cortex-m0plus cortex-m4 cortex-m4:-DCO_IRQ_BASEPRI=0x40; do
		# -O0 keeps every call; the cores share the code, so once is enough
		opts=-Os
		[ "$cpu" = cortex-m0 ] && opts="-O0 -Os"
		for backend in 0 1; do
			for opt in $opts; do
				# shellcheck disable=SC2086
				if arm-none-eabi-gcc -mcpu=${cpu%%:*} -mthumb -std=c99 -ffreestanding -nostdlib \
					-nostartfiles $opt $warn -DCO_USE_COMPUTED_GOTO=$backend \
					$(case $cpu in *:*) echo "${cpu#*:}" ;; esac) -I"$src/include" \
					-Wl,-e,co_freestanding_demo "$demo" -o "$tmp/link.elf" 2>"$tmp/log"; then
					echo "ok: $cpu backend $backend $opt links with -nostdlib"
				else
					echo "FAIL: $cpu backend $backend $opt:"; cat "$tmp/log"; fail=1
				fi
			done
		done
	done
	# CO_IRQ_BASEPRI where it cannot work does not compile: a core without
	# BASEPRI, a value that would mask nothing or does not fit
	for bad in cortex-m0:0x40 cortex-m0plus:0x40 cortex-m4:0 cortex-m4:256; do
		if arm-none-eabi-gcc -mcpu=${bad%%:*} -mthumb -std=c99 -ffreestanding \
			-DCO_IRQ_BASEPRI=${bad#*:} -I"$src/include" -c "$demo" -o "$tmp/bad.o" 2>"$tmp/log"; then
			echo "FAIL: CO_IRQ_BASEPRI=${bad#*:} compiled for ${bad%%:*}"; fail=1
		elif grep -q 'CO_IRQ_BASEPRI' "$tmp/log"; then
			echo "ok: CO_IRQ_BASEPRI=${bad#*:} for ${bad%%:*} is a compile error naming it"
		else
			echo "FAIL: CO_IRQ_BASEPRI=${bad#*:} for ${bad%%:*} failed otherwise:"; cat "$tmp/log"; fail=1
		fi
	done
	if command -v clang >/dev/null 2>&1 && command -v ld.lld >/dev/null 2>&1; then
		for t in "--target=thumbv6m-none-eabi -mcpu=cortex-m0" \
			"--target=riscv32-unknown-elf -march=rv32imac -mabi=ilp32"; do
			for opt in -O0 -Os; do
				# shellcheck disable=SC2086
				if clang $t -std=c99 -ffreestanding -nostdlib -fuse-ld=lld $opt $warn \
					-I"$src/include" -Wl,-e,co_freestanding_demo "$demo" -o "$tmp/link.elf" \
					2>"$tmp/log"; then
					echo "ok: clang $t $opt links with -nostdlib"
				else
					echo "FAIL: clang $t $opt:"; cat "$tmp/log"; fail=1
				fi
			done
		done
	else
		echo "FAIL: no clang or ld.lld for the rv32imac link (tools/deps.sh test)"; fail=1
	fi
	;;
*)
	echo "usage: $0 native|cortex-m|newlib|qemu|clang|link SRCDIR"; exit 2 ;;
esac
exit $fail
