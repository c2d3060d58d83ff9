#!/bin/sh
# tools/test_builds.sh (make test's driver) with a stand-in meson that
# logs what it is asked: each build is tested only after its compile ended;
# the next build compiles while the tests of the one before run, at nice
# 19 (the first alone, at the caller's); a failed compile shows its output
# and stops the run before its tests; a failed suite stops it after the
# compile beside it ended; a first compile that fails runs no test.
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
	# the next build's compile must run beside this suite: not ended
	# when it starts (compiled before), started while it runs
	next=$(sed -n "s/^NEXT $d //p" "$LOG")
	if [ -n "$next" ]; then
		! grep -q "^end compile $next$" "$LOG" || echo "SERIAL $d" >>"$LOG"
		i=0
		until grep -q "^start compile $next nice=" "$LOG"; do
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
run() { # run FAIL_COMPILE FAIL_TEST: the driver on builds a b c in $tmp
	: >"$tmp/log"
	printf 'NEXT a b\nNEXT b c\n' >>"$tmp/log"
	rm -rf "$tmp/a" "$tmp/b" "$tmp/c"
	mkdir "$tmp/a" "$tmp/b" "$tmp/c"
	(cd "$tmp" && LOG=$tmp/log MESON=$tmp/meson FAIL_COMPILE=$1 FAIL_TEST=$2 sh "$src/tools/test_builds.sh" 2 a b c >"$tmp/out" 2>&1)
}
has() { grep -q "$1" "$tmp/$2" || fail "$3: no '$1' in $2"; }
hasnt() { ! grep -q "$1" "$tmp/$2" || fail "$3: '$1' in $2"; }

run "" "" || fail "all pass: exit $?"
has "^start compile a nice=$base$" log "all pass"
has "^start compile b nice=$((base + 19 > 19 ? 19 : base + 19))$" log "all pass"
has "^start compile c nice=" log "all pass"
hasnt "EARLY\|SERIAL" log "all pass"
[ "$(grep -c '^test ' "$tmp/log")" -eq 3 ] || fail "all pass: not three suites"
has "all build configurations passed" out "all pass"

run b "" && fail "b's compile failed: exit 0"
has "compiler output of b" out "b's compile failed"
has "b did not compile" out "b's compile failed"
hasnt "^test b\|^test c\|start compile c" log "b's compile failed"

run "" a && fail "a's suite failed: exit 0"
has "^end compile b$" log "a's suite failed (the compile beside it waited for)"
hasnt "^test b" log "a's suite failed"
has "a failed" out "a's suite failed"

run a "" && fail "a's compile failed: exit 0"
hasnt "^test " log "a's compile failed"
has "a did not compile" out "a's compile failed"
echo "ok: the driver compiles beside the tests, in order, and stops on a failure"
