#!/bin/sh
# What a user of the library does, on a machine with liburing and ck:
#  1. install coring (built with -Dview=false) to a prefix, build a strict
#     -std=c11 program (every header, co_statx included) through pkg-config
#     with no feature macro, and run it (the view answers -EOPNOTSUPP); every header alone under -std=c11; check that
#     libcoring exports nothing but the API and that the .pc brings no
#     stray flags;
#  2. take coring as a meson subproject of a -std=c11, warning_level=3
#     project: it must build and run with the library as its only target
#     (no test, benchmark, example or helper library), and without turning
#     warnings into errors.
# Usage: packaging.sh SOURCE_DIR
set -eu
src=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "packaging: $*" >&2; exit 1; }

cat > "$tmp/user.c" <<'C'
#include <coring/coring.h> /* first, with no feature macro: it sets what it needs */
#include <errno.h>
#include <fcntl.h>
#include <linux/stat.h> /* struct statx without _GNU_SOURCE */
#include <stdio.h>

struct probe {
	co_frame co;
	co_io io;
	struct statx stx;
	int res;
};

static int probe_fn(co_frame *f)
{
	struct probe *p = (struct probe *)f;
	CO_BEGIN(f);
	CO_AWAIT(f, co_statx(&p->io, AT_FDCWD, "/", 0, STATX_TYPE, &p->stx));
	p->res = co_result(f);
	CO_END(f);
}

int main(void)
{
	co_engine e;
	struct probe p = { .res = 1 };

	co_view v;

	if (co_version() != CORING_VERSION || co_trace_env() < 0 || co_engine_init(&e, NULL) != 0)
		return 1;
	/* installed with -Dview=false, it answers that it is not there; the
	 * subproject (the default) takes the view */
	if (co_view_available() ? co_view_engine(&v, &e, 0) != 0 || v.n != 0 :
				  co_view_engine(&v, &e, 0) != -EOPNOTSUPP)
		return 1;
	co_view_free(&v);
	co_init(&p.co, probe_fn);
	if (co_engine_spawn(&e, &p.co) || co_engine_run(&e, CO_RUN_UNTIL_IDLE) ||
	    co_engine_destroy(&e) || p.res != 0)
		return 1;
	printf("user program: ok (coring %s)\n", CORING_VERSION_STRING);
	return 0;
}
C

# 1. install to a prefix, build through pkg-config
meson setup "$tmp/build" "$src" --prefix="$tmp/prefix" --buildtype=release -Dtrace=true -Dview=false \
	-Dtests=disabled -Dbench=disabled -Dexamples=disabled > "$tmp/setup1.log" ||
	{ cat "$tmp/setup1.log"; fail "meson setup"; }
meson compile -C "$tmp/build" > "$tmp/compile1.log" || { cat "$tmp/compile1.log"; fail "compile"; }
meson install -C "$tmp/build" > "$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }
pc=$(find "$tmp/prefix" -name coring.pc | head -n 1)
so=$(find "$tmp/prefix" -name libcoring.so | head -n 1)
[ -n "$pc" ] && [ -n "$so" ] || fail "coring.pc or libcoring.so not installed"
export PKG_CONFIG_PATH="$(dirname "$pc")"
cflags=$(pkg-config --cflags coring)
libs=$(pkg-config --libs coring)
case "$cflags $libs" in
*__x86_64__*|*-lck*) fail "pkg-config brings stray flags: $cflags $libs" ;;
esac
extra=$(nm -D --defined-only "$so" | awk '$2 != "A" { print $3 }' | grep -v '^co_[a-z]' || true)
[ -z "$extra" ] || fail "exported but not API: $extra"
# the exports are exactly the CO_API functions of the installed headers,
# each with the version of lib/coring.map, and the soname carries it
api=$(cat $(find "$tmp/prefix" -path "*/include/coring/*.h") | tr '\n' ' ' |
	grep -o 'CO_API[^;(]*co_[a-z0-9_]* *(' | sed 's/.*\(co_[a-z0-9_]*\) *(/\1/' | sort -u)
exported=$(nm -D --defined-only --with-symbol-versions "$so" | awk '$2 == "T" { print $3 }' | sort)
unversioned=$(printf '%s\n' "$exported" | grep -v '@@CORING_[0-9.]*$' || true)
[ -z "$unversioned" ] || fail "exported without a version: $unversioned"
[ "$(printf '%s\n' "$exported" | sed 's/@@.*//')" = "$api" ] ||
	fail "exports and CO_API declarations differ: $(printf '%s\n' "$api" > "$tmp/api"
	printf '%s\n' "$exported" | sed 's/@@.*//' | diff "$tmp/api" - )"
soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
ver=$(sed -n 's/^#define CORING_VERSION_STRING "\([0-9]*\.[0-9]*\)\..*"/\1/p' \
	"$(find "$tmp/prefix" -path '*/include/coring/version.h')")
[ "$soname" = "libcoring.so.$ver" ] || fail "soname $soname, expected libcoring.so.$ver"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Wpedantic -Werror $cflags "$tmp/user.c" -o "$tmp/user" $libs \
	-Wl,-rpath,"$(dirname "$so")" || fail "a strict C11 program does not build"
"$tmp/user" || fail "the installed library does not run"
nm "$so" | grep -q co__view_add && fail "built with -Dview=false, the list is still there"
# the installed trace tool reads what the program recorded
CORING_TRACE="$tmp/user.trace" "$tmp/user" > /dev/null || fail "the program does not run traced"
"$tmp/prefix/bin/coring-trace" text "$tmp/user.trace" > "$tmp/trace.txt" ||
	fail "the installed coring-trace does not read a trace"
grep -q "probe_fn" "$tmp/trace.txt" || { cat "$tmp/trace.txt"; fail "coring-trace: no probe_fn in the trace"; }
# every installed header on its own, first in a strict C11 file with no
# feature macro; and after a libc header without one, the error that says
# what to add (not an error deep inside liburing.h)
for h in $(find "$tmp/prefix" -path "*/include/coring/*.h"); do
	name=$(basename "$h")
	printf '#include <coring/%s>\nint main(void) { return 0; }\n' "$name" > "$tmp/one.c"
	# shellcheck disable=SC2086
	cc -std=c11 -Wall -Wextra -Wpedantic -Werror $cflags -c "$tmp/one.c" -o "$tmp/one.o" ||
		fail "coring/$name alone does not build under -std=c11"
done
# the library is built with the full frame: asking co.h for the lean one
# with a Linux header is coring's error, not a silent mismatch
printf '#include <coring/engine.h>\nint main(void) { return 0; }\n' > "$tmp/lean.c"
# shellcheck disable=SC2086
if cc -std=c11 -DCO_LEAN_FRAME=1 $cflags -c "$tmp/lean.c" -o "$tmp/lean.o" 2> "$tmp/lean.log"; then
	fail "a lean co_frame with coring/engine.h built"
fi
grep -q "the Linux layers need the full co_frame" "$tmp/lean.log" ||
	{ cat "$tmp/lean.log"; fail "a lean co_frame with coring/engine.h: not coring's error"; }
# the sync headers need no liburing (coring/engine_types.h, not engine.h)
printf '#include <coring/sync.h>\n#include <coring/channel.h>\n#include <coring/when.h>\n' > "$tmp/sync.c"
# shellcheck disable=SC2086
if cc -std=c11 $cflags -H -fsyntax-only "$tmp/sync.c" 2>&1 | grep -q liburing; then
	fail "the sync headers include liburing.h"
fi
printf '#include <stdio.h>\n#include <coring/engine.h>\nint main(void) { return 0; }\n' > "$tmp/late.c"
# shellcheck disable=SC2086
if cc -std=c11 $cflags -c "$tmp/late.c" -o "$tmp/late.o" 2> "$tmp/late.log"; then
	fail "coring/engine.h after a libc header with no feature macro built: its check is gone"
fi
grep -q "coring: liburing needs POSIX.1-2008" "$tmp/late.log" ||
	{ cat "$tmp/late.log"; fail "coring/engine.h after a libc header: not coring's error"; }
unset PKG_CONFIG_PATH

# 2. a meson subproject
mkdir -p "$tmp/proj/subprojects"
ln -s "$src" "$tmp/proj/subprojects/coring"
cp "$tmp/user.c" "$tmp/proj/user.c"
cat > "$tmp/proj/meson.build" <<'M'
project('user', 'c', default_options: ['c_std=c11', 'warning_level=3'])
coring_dep = subproject('coring').get_variable('coring_dep')
executable('user', 'user.c', dependencies: coring_dep)
M
meson setup "$tmp/proj/build" "$tmp/proj" > "$tmp/setup2.log" ||
	{ cat "$tmp/setup2.log"; fail "subproject setup"; }
# only the library and the user's program: no test, benchmark or example,
# no static library of their own
others=$(meson introspect --targets "$tmp/proj/build" |
	python3 -c 'import json, sys; print(" ".join(t["name"] for t in json.load(sys.stdin)
	                                        if t["name"] not in ("coring", "user")))')
[ -z "$others" ] || fail "the subproject builds more than the library: $others"

grep -q "werror *: *true\|-Werror" "$tmp/proj/build/build.ninja" && fail "the subproject turns warnings into errors"
meson compile -C "$tmp/proj/build" > "$tmp/compile2.log" || { cat "$tmp/compile2.log"; fail "subproject compile"; }
"$tmp/proj/build/user" || fail "the subproject's program does not run"
echo "packaging: ok"
