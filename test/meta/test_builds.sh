#!/bin/sh
# tools/test_builds.sh (make test's driver) on four builds a b c d with a
# stand-in meson that logs what it is asked: a compiles alone, at the
# caller's priority; the others one after another beside a's tests, at
# nice 19 (c's compile starts while a's tests run); each build is tested
# only after its compile ended. A failed compile shows its output and
# stops the run before its tests, and no compile after it starts; a failed
# suite stops the run once the compile under way has ended, and no other
# starts; a first compile that fails runs no test.
#   test_builds.sh SRCROOT
set -u
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "--- log:"; cat "$tmp/log"; echo "--- output:"; cat "$tmp/out"; exit 1; }
cat >"$tmp/meson" <<'FAKE'
#!/bin/sh
# meson compile|test -C DIR ...: logged in $LOG; FAIL_COMPILE / FAIL_TEST name a DIR
what=$1 d=$3
if [ "$what" = compile ]; then
	echo "start compile $d nice=$(nice)" >>"$LOG"
	echo "compiler output of $d"
	sleep 0.6
	echo "end compile $d" >>"$LOG"
	[ "$d" != "${FAIL_COMPILE:-}" ]
else
	grep -q "^end compile $d$" "$LOG" || echo "EARLY test $d" >>"$LOG"
	echo "test $d" >>"$LOG"
	# a's tests: c's compile must start beside them (b's, then c's)
	if [ "$d" = a ] && [ -z "${FAIL_COMPILE:-}" ]; then
		i=0
		until grep -q "^start compile c nice=" "$LOG"; do
			i=$((i + 1))
			[ $i -le 200 ] || { echo "SERIAL $d" >>"$LOG"; break; }
			sleep 0.05
		done
	fi
	[ "$d" != "${FAIL_TEST:-}" ]
fi
FAKE
chmod +x "$tmp/meson"
base=$(nice)
low=$((base + 19 > 19 ? 19 : base + 19))
run() { # run FAIL_COMPILE FAIL_TEST: the driver on builds a b c d in $tmp
	: >"$tmp/log"
	rm -rf "$tmp/a" "$tmp/b" "$tmp/c" "$tmp/d"
	mkdir "$tmp/a" "$tmp/b" "$tmp/c" "$tmp/d"
	(cd "$tmp" && LOG=$tmp/log MESON=$tmp/meson FAIL_COMPILE=$1 FAIL_TEST=$2 sh "$src/tools/test_builds.sh" 2 a b c d >"$tmp/out" 2>&1)
}
has() { grep -q "$1" "$tmp/$2" || fail "$3: no '$1' in $2"; }
hasnt() { ! grep -q "$1" "$tmp/$2" || fail "$3: '$1' in $2"; }

run "" "" || fail "all pass: exit $?"
has "^start compile a nice=$base$" log "all pass"
for d in b c d; do
	has "^start compile $d nice=$low$" log "all pass"
done
hasnt "EARLY\|SERIAL" log "all pass"
[ "$(grep '^test ' "$tmp/log" | tr '\n' ' ')" = "test a test b test c test d " ] || fail "all pass: not four suites in order"
has "all build configurations passed" out "all pass"

run c "" && fail "c's compile failed: exit 0"
has "compiler output of c" out "c's compile failed"
has "c did not compile" out "c's compile failed"
hasnt "^test c\|^test d\|start compile d" log "c's compile failed"

run "" a && fail "a's suite failed: exit 0"
has "^end compile c$" log "a's suite failed (the compile under way waited for)"
hasnt "^test b\|start compile d" log "a's suite failed"
has "a failed" out "a's suite failed"

run a "" && fail "a's compile failed: exit 0"
hasnt "^test \|start compile b" log "a's compile failed"
has "a did not compile" out "a's compile failed"
echo "ok: the driver compiles beside the tests, in order, and stops on a failure"
