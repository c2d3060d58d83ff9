#!/bin/sh
# CORING_TRACE=file for the programs (docs/tracing.md): the example echo
# server's demo and the echo_coring bench server under echo_load write a
# trace that the tool reads and whose JSON validates; garbage in
# CORING_TRACE is a message and exit status 2, never a crash. In a build
# without tracing the programs say so (exit 2) and the test is skipped.
#   trace_env.sh TOOL ECHO_SERVER ECHO_CORING ECHO_LOAD
set -eu
tool=$1 srv=$2 coring=$3 load=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# garbage: a documented error, never a crash
for v in "" ",events=64" "$tmp/x,events=0" "$tmp/x,events=lots" "$tmp/x,what" \
	"/nonexistent-coring-dir/x"; do
	rc=0
	CORING_TRACE="$v" "$srv" --demo 1 >/dev/null 2>"$tmp/err" || rc=$?
	[ "$rc" = 2 ] || fail "CORING_TRACE='$v': exit $rc, expected 2"
	grep -q "^echo_server: CORING_TRACE: " "$tmp/err" || fail "CORING_TRACE='$v': $(cat "$tmp/err")"
done
echo "ok: garbage in CORING_TRACE is an error message and exit 2"

rc=0
CORING_TRACE="$tmp/echo.trace" "$srv" --demo 20 >/dev/null 2>"$tmp/err" || rc=$?
if [ "$rc" = 2 ] && grep -q "CORING_TRACE: Operation not supported" "$tmp/err"; then
	echo "skipped: the library is built without tracing (-Dtrace=false), and says so"
	exit 77
fi
[ "$rc" = 0 ] || fail "echo_server --demo 20 with CORING_TRACE: exit $rc: $(cat "$tmp/err")"
python3 -B "$tool" text "$tmp/echo.trace" >"$tmp/echo.txt"
n=$(grep -c " done .* conn_fn status 0" "$tmp/echo.txt" || true)
[ "$n" = 20 ] || fail "echo_server: $n connections ended in the trace, expected 20"
n=$(grep -c " done .* client_fn status 0" "$tmp/echo.txt" || true)
[ "$n" = 20 ] || fail "echo_server: $n clients ended in the trace, expected 20"
python3 -B "$tool" json "$tmp/echo.trace" -o "$tmp/echo.json"
python3 -B "$tool" validate "$tmp/echo.json" >/dev/null || fail "echo_server: the JSON does not validate"
echo "ok: echo_server --demo 20 traced: 20 connections, 20 clients, valid JSON"

# a bench server, two contexts, under load, stopped by SIGTERM
CORING_TRACE="$tmp/coring.trace,stream" "$coring" --port 0 --threads 2 >"$tmp/out" 2>"$tmp/err" &
pid=$!
i=0
until port=$(sed -n 's/^port=//p' "$tmp/out") && [ -n "$port" ]; do
	i=$((i + 1))
	[ $i -le 400 ] && kill -0 "$pid" 2>/dev/null || fail "echo_coring did not start: $(cat "$tmp/err")"
	sleep 0.025
done
"$load" --port "$port" --conns 8 --count 50 --seconds 60 --warmup 0 >"$tmp/load" 2>&1 ||
	{ kill -KILL "$pid"; fail "echo_load: $(cat "$tmp/load")"; }
kill -TERM "$pid"
wait "$pid" || fail "echo_coring exited with $? on SIGTERM"
python3 -B "$tool" text "$tmp/coring.trace" >"$tmp/coring.txt"
n=$(grep -c " done .* conn_fn status 0" "$tmp/coring.txt" || true)
[ "$n" = 8 ] || fail "echo_coring: $n connections ended in the trace, expected 8"
grep -q " context 1 " "$tmp/coring.txt" || fail "echo_coring: no second context in the trace"
python3 -B "$tool" json "$tmp/coring.trace" -o "$tmp/coring.json"
python3 -B "$tool" validate "$tmp/coring.json" >/dev/null || fail "echo_coring: the JSON does not validate"
echo "ok: echo_coring --threads 2 streamed its trace under load: 8 connections, valid JSON"
