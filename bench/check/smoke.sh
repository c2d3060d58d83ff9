#!/bin/sh
# Smoke round of every benchmark program (make test, suite "bench"):
# each server starts on a free loopback port, serves correct bytes to
# echo_load (which checks every byte, pipelined too) and exits 0 on
# SIGTERM; the other programs run a tiny size. Numbers are not checked.
# The peers (bench/peers/: libuv, Asio, nginx) are checked where they were
# built, skipped where their library is not installed.
#   smoke.sh BENCH_BUILD_DIR
set -eu
B=$1
tmp=$(mktemp -d)
data=$B/smoke-fileio.dat # in the build dir: O_DIRECT needs a real file system
pid=
# a failed check leaves its server running: end it with the script
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$tmp" "$data"' EXIT

start() { # start NAME ARGS (NAME: a path under B): sets pid, port
	name=$1
	shift
	log=$tmp/${name##*/}
	: >"$log.out"
	"$B/$name" --port 0 "$@" >"$log.out" 2>"$log.err" &
	pid=$!
	i=0
	until port=$(sed -n 's/^port=//p' "$log.out") && [ -n "$port" ]; do
		i=$((i + 1))
		[ $i -le 200 ] && kill -0 "$pid" 2>/dev/null || { echo "FAIL: $name did not start"; cat "$log.err"; exit 1; }
		sleep 0.025
	done
}

stop() { # stop NAME SIGNAL: must exit 0 within 5 s
	kill -"$2" "$pid"
	i=0
	while kill -0 "$pid" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 200 ]; then
			kill -KILL "$pid"
			echo "FAIL: $1 did not exit on SIG$2"
			exit 1
		fi
		sleep 0.025
	done
	wait "$pid" || { rc=$?; pid=; echo "FAIL: $1 exited with $rc on SIG$2"; exit 1; }
	pid= # reaped: nothing for the exit trap to end
	echo "ok: $1 exits 0 on SIG$2"
}

load() { # load ARGS: echo_load must verify every byte
	# A count of messages per connection, not a time window: a loaded
	# machine that stalls the server longer than a window would fail a
	# correct server (--seconds only bounds the run). --churn takes a
	# window: one in which nothing completed and nothing was wrong is
	# run again, a few times.
	case " $* " in
	*" --churn "*) mode="--seconds 0.1 --warmup 0.02" tries=5 ;;
	*) mode="--count 50 --seconds 20" tries=1 ;;
	esac
	while :; do
		# shellcheck disable=SC2086
		"$B/echo/echo_load" --port "$port" $mode "$@" >"$tmp/load.out" 2>"$tmp/load.err" && break
		tries=$((tries - 1))
		if [ $tries -eq 0 ] || ! grep -q " requests=0 .* errors=0\$" "$tmp/load.out"; then
			echo "FAIL: echo_load $* against $name"; cat "$tmp/load.out" "$tmp/load.err"; exit 1
		fi
	done
	echo "ok: $name: $(cut -d' ' -f2-8 "$tmp/load.out")"
}

built() { # built NAME: 0 if the peer NAME was built, else says it is skipped
	[ -x "$B/$1" ] && return 0
	echo "skip: $1 (not built: its library is not installed; tools/deps.sh bench)"
	return 1
}

for s in echo/echo_coring echo/echo_coring_stream echo/echo_epoll echo/echo_uring echo/echo_uring_mshot \
	peers/echo_libuv peers/echo_asio; do
	built "$s" || continue
	start "$s"
	load --conns 1 --size 1
	load --conns 20 --size 1024
	load --conns 10 --size 3000 --depth 8       # pipelined, messages split by TCP
	load --conns 4 --size 60000                 # larger than every buffer
	load --conns 30 --size 200 --churn 5        # random disconnects
	stop "$s" TERM
	start "$s" --threads 2
	load --conns 20 --size 512
	stop "$s" INT
done
for s in http/http_coring http/http_coring_stream http/http_epoll; do
	start "$s"
	load --http --conns 20
	load --http --conns 5 --depth 16            # pipelined requests
	load --http --conns 4 --depth 400           # more in flight than a request buffer holds
	stop "$s" TERM
done
# nginx answers other bytes than ours (test_bench_servers checks what
# applies): here it starts with 1 and 2 workers and stops on both signals
if built peers/http_nginx; then
	start peers/http_nginx
	stop peers/http_nginx TERM
	start peers/http_nginx --threads 2
	stop peers/http_nginx INT
fi

"$B/coroutine/switch" --iters 100000 --rounds 1 >/dev/null && echo "ok: switch"
"$B/coroutine/memory" --count 20000 >/dev/null && echo "ok: memory"
"$B/contexts/xsubmit" --frames 20000 --producers 1,2 >/dev/null && echo "ok: xsubmit"
"$B/contexts/dispatch" --tasks 200 >/dev/null && echo "ok: dispatch"
# fileio: every read must return a full block (it fails otherwise); random
# O_DIRECT reads at depth 1 and 16, then the whole file once, buffered
dd if=/dev/urandom of="$data" bs=1M count=4 2>/dev/null
for d in 1 16; do
	"$B/files/fileio" --file "$data" --rw randread --depth "$d" --seconds 0.2 --direct >"$tmp/fio.out" ||
		{ echo "FAIL: fileio randread depth $d"; exit 1; }
done
"$B/files/fileio" --file "$data" --rw read --bs 65536 --depth 4 >"$tmp/fio.out" ||
	{ echo "FAIL: fileio read"; exit 1; }
grep -q ' ios=64 ' "$tmp/fio.out" || { echo "FAIL: fileio read: not 64 blocks"; cat "$tmp/fio.out"; exit 1; }
echo "ok: fileio"
"$B/trace/trace_cost" --resumes 64000 >"$tmp/tc.out" || { echo "FAIL: trace_cost"; exit 1; }
grep -q '^trace_cost resumes=64000 ' "$tmp/tc.out" || { echo "FAIL: trace_cost"; cat "$tmp/tc.out"; exit 1; }
echo "ok: trace_cost"
# handoff, handoff_pthread (and handoff.go when go is found): a short run
# of every shape; each shape's own check (items in order, answers, hops,
# counters) must catch the step --miscount gets wrong (exit 1, naming the
# shape); an unknown shape, a zero count and a missing value exit 2
handoff_check() { # handoff_check PROGRAM PEER SHAPES...
	prog=$1 peer=$2
	shift 2
	"$prog" --rt 2000 --items 20000 --ops 20000 --seconds 0.2 --idle-ms 10 >"$tmp/ho.out" ||
		{ echo "FAIL: $prog"; cat "$tmp/ho.out"; exit 1; }
	for s in "$@"; do
		grep -q "^handoff peer=$peer shape=$s n=[1-9][0-9]* seconds=[0-9.]* value=" "$tmp/ho.out" ||
			{ echo "FAIL: $prog: no result for $s"; cat "$tmp/ho.out"; exit 1; }
		rc=0
		"$prog" --shapes "$s" --miscount --rt 100 --items 1000 --ops 1000 >/dev/null 2>"$tmp/ho.err" || rc=$?
		[ $rc -eq 1 ] && grep -q "^handoff: $peer $s: " "$tmp/ho.err" ||
			{ echo "FAIL: $prog --miscount: $s not caught (exit $rc)"; cat "$tmp/ho.err"; exit 1; }
	done
	for bad in "--shapes nope" "--rt 0" "--seconds"; do
		rc=0
		# shellcheck disable=SC2086
		"$prog" $bad >/dev/null 2>&1 || rc=$?
		[ $rc -eq 2 ] || { echo "FAIL: $prog $bad: exit $rc, not 2"; exit 1; }
	done
	echo "ok: $(basename "$prog")"
}
shapes="pingpong transfer spawn chan1 chan16 chan256 chan16_many chan256_many pingpong_one chan16_one chan256_one mutex1 mutex32 idle"
roam="pingpong_roam spawn_roam chan1_roam chan16_roam chan256_roam mutex1_roam mutex32_roam"
# shellcheck disable=SC2086
handoff_check "$B/contexts/handoff" coring $shapes $roam
handoff_check "$B/contexts/handoff_pthread" pthread spin hop cond mutex
"$B/contexts/handoff" --shapes pingpong,mutex32 --rt 100 --ops 6400 >"$tmp/ho.out" &&
	[ "$(grep -c '^handoff ' "$tmp/ho.out")" -eq 2 ] || { echo "FAIL: handoff --shapes"; cat "$tmp/ho.out"; exit 1; }
echo "ok: handoff --shapes"
if command -v go >/dev/null; then # as bench/runner/run.py builds it: offline, in the build dir
	GOCACHE=$(cd "$B" && pwd)/go/cache GOPATH=$(cd "$B" && pwd)/go/path GOFLAGS=-mod=mod GOPROXY=off \
		GOENV=off GOTMPDIR="$tmp" go build -o "$tmp/handoff_go" "$(dirname "$0")/../contexts/handoff.go" ||
		{ echo "FAIL: go build handoff.go"; exit 1; }
	# shellcheck disable=SC2086
	handoff_check "$tmp/handoff_go" go $shapes
else
	echo "skip: go not found: handoff.go not built"
fi
echo "bench smoke: all programs passed"
