#!/bin/sh
# Draws the pictures of docs/tracing.md from fresh traces:
#   docs/img/frame_parser_states.png  the frame parser's state machine (co_loop run)
#   docs/img/echo_conn_states.png     the example echo server's connection, under load
#   docs/img/echo_timeline.png        echo_coring on two contexts, under load
#   sh tools/trace_pictures.sh [BUILD [TRACE_BUILD]]
# BUILD has the examples and echo_load with tracing (the default build dir);
# TRACE_BUILD has the bench servers, optimised, with tracing:
#   meson setup build-trace --buildtype=release -Dtests=disabled -Dtrace=true
# Needs graphviz and gnuplot (sh tools/deps.sh docs).
set -eu
B=${1:-build}
T=${2:-build-trace}
out=docs/img
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tool="python3 -B tools/coring_trace.py"
mkdir -p "$out"

wait_port() { # wait_port FILE SED-EXPR PID: the port the server printed
	i=0
	until port=$(sed -n "$2" "$1") && [ -n "$port" ]; do
		i=$((i + 1))
		[ $i -le 400 ] && kill -0 "$3" 2>/dev/null || { echo "server did not start" >&2; exit 1; }
		sleep 0.025
	done
}

# 1. the frame parser, fed a noisy stream through co_loop
CORING_TRACE="$tmp/fp.trace" "$B/docs/examples/frame_parser_trace" >/dev/null
$tool dot "$tmp/fp.trace" --fn fp_body -o "$tmp/fp.dot"
dot -Tpng -Gdpi=80 "$tmp/fp.dot" -o "$out/frame_parser_states.png"

# 2. the example echo server: 50 connections for half a second, every event kept
CORING_TRACE="$tmp/echo.trace,stream" "$B/docs/examples/echo_server" --port 0 2>"$tmp/echo.err" &
pid=$!
wait_port "$tmp/echo.err" 's/.*127.0.0.1:\([0-9]*\).*/\1/p' $pid
"$B/bench/echo/echo_load" --port "$port" --conns 50 --seconds 0.5 --warmup 0.1 >/dev/null
kill -TERM $pid
wait $pid
$tool dot "$tmp/echo.trace" --fn conn_fn -o "$tmp/echo.dot"
dot -Tpng -Gdpi=80 "$tmp/echo.dot" -o "$out/echo_conn_states.png"

# 3. echo_coring on two contexts under the same load, every event kept
CORING_TRACE="$tmp/load.trace,stream" "$T/bench/echo/echo_coring" --port 0 --threads 2 >"$tmp/load.out" 2>/dev/null &
pid=$!
wait_port "$tmp/load.out" 's/^port=//p' $pid
"$B/bench/echo/echo_load" --port "$port" --conns 50 --seconds 0.5 --warmup 0.1 >/dev/null
kill -TERM $pid
wait $pid
$tool timeline "$tmp/load.trace" -o "$out/echo_timeline.png" --window 1 \
	--title "echo_coring, 2 contexts, 50 connections (release build with -Dtrace=true)"
$tool json "$tmp/load.trace" -o "$tmp/load.json"
$tool validate "$tmp/load.json"
echo "trace_pictures: $out/frame_parser_states.png $out/echo_conn_states.png $out/echo_timeline.png"
