#!/bin/sh
# make bench: runs every benchmark of the release build dir ($1), prints one
# table of coring vs epoll vs raw liburing, writes bench/results/latest.csv
# and bench/results/latest.png. QUICK=1: a short smoke-sized run (CI);
# FULL=1: longer rounds plus a soak. The method is in docs/benchmarks.md.
#
# Method, in short: each server pinned to one CPU, the load to another;
# all servers start once and stay up; per workload, a warm-up, then R short
# rounds in which the servers take turns (the order rotates every round);
# median and spread of the rounds. echo_load samples the server's CPU time
# (/proc/PID/stat) over exactly its measured window, so CPU per request is
# server CPU / requests; it also reports the busy time of the machine not
# used by the server or the load: a round where that exceeds 10% of one
# CPU is flagged noisy and repeated (twice at most; the flag is kept).
# Syscalls per request come from a separate short round under strace -c,
# never from a measured round.
set -eu
dir=${1:-build-release}
B=$dir/bench
out=bench/results
mkdir -p "$out"
tmp=$(mktemp -d)

if [ "${QUICK:-0}" = 1 ]; then
	mode=quick rounds=1 secs=0.4 warm=0.2 ssecs=0.3 conns_list="1 50 500" sizes="64 1024"
	http_conns="50" switch_iters=2000000 switch_rounds=3 mem_count=100000 xs_frames=200000
elif [ "${FULL:-0}" = 1 ]; then
	mode=full rounds=5 secs=5 warm=1 ssecs=2 conns_list="1 50 500" sizes="64 1024"
	http_conns="50 500" switch_iters=20000000 switch_rounds=11 mem_count=1000000 xs_frames=4000000
else
	mode=default rounds=3 secs=2 warm=0.5 ssecs=1 conns_list="1 50 500" sizes="64 1024"
	http_conns="50 500" switch_iters=20000000 switch_rounds=7 mem_count=1000000 xs_frames=2000000
fi

# overrides, for a custom run: ROUNDS=5 SECONDS_PER_ROUND=3 make bench
rounds=${ROUNDS:-$rounds}
secs=${SECONDS_PER_ROUND:-$secs}

# CPUs: the servers on one, the load on another; one CPU: no pinning.
ncpu=$(nproc)
if [ "$ncpu" -ge 2 ]; then
	scpu=$((ncpu - 2)) lcpu=$((ncpu - 1))
	pin_s="taskset -c $scpu" pin_l="taskset -c $lcpu"
	pin_note="servers on CPU $scpu, load on CPU $lcpu"
else
	pin_s="" pin_l=""
	pin_note="1 CPU: no pinning (server and load share it)"
fi

pids=""
cleanup() {
	for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# start NAME ARGS...: start a server on a free port; sets $pid and $port.
start() {
	name=$1
	shift
	: >"$tmp/$name.out"
	# shellcheck disable=SC2086
	$pin_s "$B/$name" --port 0 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	pid=$!
	pids="$pids $pid"
	i=0
	until port=$(sed -n 's/^port=//p' "$tmp/$name.out") && [ -n "$port" ]; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
			echo "bench: $name did not start:" >&2
			cat "$tmp/$name.err" >&2
			exit 1
		fi
		sleep 0.05
	done
	eval "pid_$name=$pid port_$name=$port"
}

# stop NAME: SIGTERM, and the exit status must be 0.
stop() {
	eval "p=\$pid_$1"
	kill -TERM "$p"
	if ! wait "$p"; then
		echo "bench: $1 did not exit cleanly" >&2
		exit 1
	fi
}

kv() { # kv KEY LINE: the value of key=value in a summary line
	echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"
}

# strace_calls PID LOAD...: run the load with strace -c attached to the
# server; prints the server's syscall count (the load's output is in
# $tmp/sload.txt). Never mixed with a measured round.
strace_calls() {
	sp=$1
	shift
	strace -c -f -p "$sp" -o "$tmp/strace.txt" 2>/dev/null &
	spid=$!
	sleep 0.5
	"$@" >"$tmp/sload.txt" 2>/dev/null || true
	kill -INT "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	awk '$NF == "total" { print $4 }' "$tmp/strace.txt" 2>/dev/null
}

noise_limit=$(awk -v s="$secs" 'BEGIN { print 0.10 * s }')
hsecs=$(awk -v s="$secs" 'BEGIN { printf "%d", (s < 1) ? 1 : s + 0.5 }') # wrk takes whole seconds
hnoise_limit=$(awk -v s="$hsecs" 'BEGIN { print 0.10 * s }')

# ---- echo: coring vs epoll vs raw liburing ---------------------------------
echo "coring bench ($mode): $(date -u '+%Y-%m-%d %H:%M UTC'), $ncpu CPUs, $pin_note"
echo "rounds $rounds x ${secs}s after ${warm}s warm-up; strace rounds ${ssecs}s"
echo
servers="echo_coring echo_epoll echo_uring"
for s in $servers; do start "$s"; done

: >"$tmp/raw.csv"
: >"$tmp/sys.csv"
for c in $conns_list; do
	for z in $sizes; do
		w="echo ${c}c ${z}B"
		printf '%-18s' "$w" >&2
		r=1
		while [ $r -le "$rounds" ]; do
			# rotate the order every round
			case $((r % 3)) in
			1) order="echo_coring echo_epoll echo_uring" ;;
			2) order="echo_epoll echo_uring echo_coring" ;;
			*) order="echo_uring echo_coring echo_epoll" ;;
			esac
			for s in $order; do
				eval "p=\$pid_$s q=\$port_$s"
				try=0
				while :; do
					line=$($pin_l "$B/echo_load" --port "$q" --conns "$c" --size "$z" \
						--seconds "$secs" --warmup "$warm" --server-pid "$p" 2>"$tmp/load.err") || {
						echo "bench: echo_load failed against $s:" >&2
						cat "$tmp/load.err" >&2
						exit 1
					}
					other=$(kv other_cpu_s "$line")
					noisy=$(awk -v o="$other" -v l="$noise_limit" 'BEGIN { print (o > l) ? 1 : 0 }')
					[ "$noisy" = 0 ] || [ $try -ge 2 ] && break
					try=$((try + 1))
					printf 'n' >&2
				done
				echo "echo,$c,$z,$s,$r,$(kv rps "$line"),$(kv server_us_per_req "$line"),$(kv p50_us "$line"),$(kv p99_us "$line"),$(kv p999_us "$line"),$other,$noisy" >>"$tmp/raw.csv"
				printf '.' >&2
			done
			r=$((r + 1))
		done
		# syscalls per request: a separate short round under strace
		for s in $servers; do
			eval "p=\$pid_$s q=\$port_$s"
			calls=$(strace_calls "$p" $pin_l "$B/echo_load" --port "$q" --conns "$c" --size "$z" \
				--seconds "$ssecs" --warmup 0)
			echo "echo,$c,$z,$s,${calls:-0},$(kv requests "$(cat "$tmp/sload.txt")")" >>"$tmp/sys.csv"
			printf 's' >&2
		done
		echo >&2
	done
done
for s in $servers; do stop "$s"; done

# ---- HTTP via wrk: coring vs epoll --------------------------------------------
cpu_of() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
busy_of() { awk '/^cpu / { print $2 + $3 + $4 + $9 }' /proc/stat; }
# CPU seconds of the shell's finished children (wrk): `times` must run in
# this shell, not in a $(...) subshell, whose counters start at zero
child_cpu() {
	times >"$tmp/times"
	awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$tmp/times"
}
hz=$(getconf CLK_TCK)
if command -v wrk >/dev/null 2>&1; then
	hservers="http_coring http_epoll"
	for s in $hservers; do start "$s"; done
	for c in $http_conns; do
		w="http ${c}c"
		printf '%-18s' "$w" >&2
		for s in $hservers; do # warm-up
			eval "q=\$port_$s"
			$pin_l wrk -t1 -c"$c" -d1s "http://127.0.0.1:$q/" >/dev/null 2>&1 || true
		done
		r=1
		while [ $r -le "$rounds" ]; do
			order=$hservers
			[ $((r % 2)) = 0 ] && order="http_epoll http_coring"
			for s in $order; do
				eval "p=\$pid_$s q=\$port_$s"
				try=0
				while :; do
					child_cpu >"$tmp/k0"
					c0=$(cpu_of "$p") b0=$(busy_of) k0=$(cat "$tmp/k0")
					$pin_l wrk -t1 -c"$c" -d"${hsecs}s" --latency "http://127.0.0.1:$q/" >"$tmp/wrk.txt" 2>&1
					child_cpu >"$tmp/k1"
					c1=$(cpu_of "$p") b1=$(busy_of) k1=$(cat "$tmp/k1")
					res=$(awk -v c0="$c0" -v c1="$c1" -v b0="$b0" -v b1="$b1" -v k0="$k0" -v k1="$k1" \
						-v hz="$hz" -v lim="$hnoise_limit" '
						function us(v) { return v ~ /ms$/ ? v * 1000 : v ~ /us$/ ? v + 0 : v ~ /s$/ ? v * 1e6 : v }
						/requests in/ { n = $1 }
						/Requests\/sec/ { rps = $2 }
						/^ +50%/ { p50 = us($2) } /^ +99%/ { p99 = us($2) }
						/Non-2xx|Socket errors/ { bad = 1 }
						END {
							other = ((b1 - b0) - (c1 - c0)) / hz - (k1 - k0)
							if (other < 0) other = 0
							per = 0
							if (n > 0) per = (c1 - c0) / hz * 1e6 / n
							noisy = 0
							if (other > lim) noisy = 1
							printf "%.0f,%.3f,%.1f,%.1f,,%.3f,%d,%d\n", rps, per, p50, p99, other, noisy, bad
						}' "$tmp/wrk.txt")
					case $res in *,1) echo "bench: wrk saw errors against $s:" >&2; cat "$tmp/wrk.txt" >&2; exit 1 ;; esac
					res=${res%,*}
					noisy=${res##*,}
					[ "$noisy" = 0 ] || [ $try -ge 2 ] && break
					try=$((try + 1))
					printf 'n' >&2
				done
				echo "http,$c,0,$s,$r,$res" >>"$tmp/raw.csv"
				printf '.' >&2
			done
			r=$((r + 1))
		done
		for s in $hservers; do
			eval "p=\$pid_$s q=\$port_$s"
			calls=$(strace_calls "$p" $pin_l wrk -t1 -c"$c" \
				-d"$(awk -v s="$ssecs" 'BEGIN { printf "%d", (s < 1) ? 1 : s }')s" "http://127.0.0.1:$q/")
			n=$(awk '/requests in/ { print $1 }' "$tmp/sload.txt")
			echo "http,$c,0,$s,${calls:-0},${n:-0}" >>"$tmp/sys.csv"
			printf 's' >&2
		done
		echo >&2
	done
	for s in $hservers; do stop "$s"; done
else
	echo "bench: wrk not found: HTTP rows skipped (apt-get install wrk)" >&2
fi

# ---- aggregate: median and spread per (workload, server) ------------------------
csv=$out/latest.csv
awk -F, -v rounds="$rounds" -v when="$(date -u '+%Y-%m-%dT%H:%MZ')" -v mode="$mode" '
function median(list, n,    a, i, j, t) {
	split(list, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
FNR == NR { sys[$1 "," $2 "," $3 "," $4] = ($5 > 0 && $6 > 0) ? $5 / $6 : ""; next } # strace unavailable: "-"
{
	k = $1 "," $2 "," $3 "," $4
	if (!(k in n)) order[++nk] = k
	n[k]++
	rps[k] = rps[k] " " $6; cpu[k] = cpu[k] " " $7; p50[k] = p50[k] " " $8; p99[k] = p99[k] " " $9
	noisy[k] += $12
	if (!(k in mn) || $6 < mn[k]) mn[k] = $6
	if (!(k in mx) || $6 > mx[k]) mx[k] = $6
}
END {
	print "bench,conns,size,server,rps_median,rps_min,rps_max,spread_pct,cpu_us_per_req,p50_us,p99_us,syscalls_per_req,rounds,noisy_rounds,mode,date"
	for (i = 1; i <= nk; i++) {
		k = order[i]; m = median(rps[k], n[k])
		printf "%s,%.0f,%.0f,%.0f,%.1f,%.3f,%.1f,%.1f,%s,%d,%d,%s,%s\n", k, m, mn[k], mx[k],
			m ? (mx[k] - mn[k]) * 100 / m : 0, median(cpu[k], n[k]), median(p50[k], n[k]),
			median(p99[k], n[k]), (sys[k] == "") ? "" : sprintf("%.2f", sys[k]), n[k], noisy[k], mode, when
	}
}' "$tmp/sys.csv" "$tmp/raw.csv" >"$csv"

# ---- the table --------------------------------------------------------------------
awk -F, '
NR == 1 { next }
{
	w = ($1 == "echo") ? sprintf("echo %dc %dB", $2, $3) : sprintf("http %dc (wrk)", $2)
	s = $4; sub(/^(echo|http)_/, "", s)
	if (!(w in seen)) { seen[w] = 1; ws[++nw] = w }
	rps[w, s] = $5; cpu[w, s] = $9; p99[w, s] = $11; sys[w, s] = $12; sp[w, s] = $8; nz[w, s] += $14
}
function cell(v) { return (v == "") ? "-" : v }
function ratio(a, b) { return (a == "" || b == "" || b == 0) ? "-" : sprintf("%.2f", a / b) }
function row(w, label, arr, fmt,    c, e, u) {
	c = ((w, "coring") in arr) ? arr[w, "coring"] : ""; e = ((w, "epoll") in arr) ? arr[w, "epoll"] : ""
	u = ((w, "uring") in arr) ? arr[w, "uring"] : ""
	printf "%-16s %-13s %10s %10s %10s %13s %11s\n", (label == "req/s") ? w : "", label,
		cell(c == "" ? "" : sprintf(fmt, c)), cell(e == "" ? "" : sprintf(fmt, e)),
		cell(u == "" ? "" : sprintf(fmt, u)), ratio(c, e), ratio(c, u)
}
END {
	printf "%-16s %-13s %10s %10s %10s %13s %11s\n", "workload", "metric", "coring", "epoll", "raw uring", "coring/epoll", "coring/raw"
	for (i = 1; i <= nw; i++) {
		w = ws[i]
		row(w, "req/s", rps, "%.0f"); row(w, "CPU us/req", cpu, "%.2f")
		row(w, "syscalls/req", sys, "%.2f"); row(w, "p99 us", p99, "%.0f")
		row(w, "spread %", sp, "%.1f")
		noisy = nz[w, "coring"] + nz[w, "epoll"] + nz[w, "uring"]
		if (noisy) printf "%-16s (%d noisy round(s) kept after 2 repeats)\n", "", noisy
	}
}' "$csv" | tee "$out/latest.txt"

# ---- the chart ------------------------------------------------------------------------
if command -v gnuplot >/dev/null 2>&1; then
	awk -F, 'NR > 1 {
		w = ($1 == "echo") ? sprintf("%dc/%dB", $2, $3) : sprintf("http/%dc", $2)
		s = $4; sub(/^(echo|http)_/, "", s)
		if (!(w in seen)) { seen[w] = 1; ws[++nw] = w }
		r[w, s] = $5 / 1000; c[w, s] = $9
	} END {
		for (i = 1; i <= nw; i++) { w = ws[i]
			printf "\"%s\" %s %s %s %s %s %s\n", w,
				((w, "coring") in r) ? r[w, "coring"] : "-", ((w, "epoll") in r) ? r[w, "epoll"] : "-",
				((w, "uring") in r) ? r[w, "uring"] : "-", ((w, "coring") in c) ? c[w, "coring"] : "-",
				((w, "epoll") in c) ? c[w, "epoll"] : "-", ((w, "uring") in c) ? c[w, "uring"] : "-" }
	}' "$csv" >"$tmp/chart.dat"
	gnuplot <<EOF 2>"$tmp/gnuplot.err" || { echo "bench: gnuplot failed:" >&2; cat "$tmp/gnuplot.err" >&2; }
set terminal pngcairo size 1100,720 font ",10"
set output "$out/latest.png"
set datafile missing "-"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key outside right top vertical
set logscale y
set xtics rotate by -25
set multiplot layout 2,1 title "coring vs epoll vs raw liburing ($mode, $(date -u '+%Y-%m-%d'), $ncpu CPUs)"
set ylabel "thousand requests/s (log; higher is better)"
plot "$tmp/chart.dat" using 2:xtic(1) title "coring" lc rgb "#1b9e77", \
     "" using 3 title "epoll" lc rgb "#d95f02", "" using 4 title "raw liburing" lc rgb "#7570b3"
set ylabel "server CPU us/request (log; lower is better)"
plot "$tmp/chart.dat" using 5:xtic(1) title "coring" lc rgb "#1b9e77", \
     "" using 6 title "epoll" lc rgb "#d95f02", "" using 7 title "raw liburing" lc rgb "#7570b3"
unset multiplot
EOF
	[ -f "$out/latest.png" ] && echo "chart: $out/latest.png"
fi
echo "table: $out/latest.txt, data: $csv"

# ---- the other benchmarks ----------------------------------------------------------
echo
echo "== suspend/resume round trip (pinned; median of $switch_rounds rounds)"
$pin_l "$B/switch" --iters "$switch_iters" --rounds "$switch_rounds" | tee "$tmp/switch.txt"
echo
echo "== memory per idle coroutine"
"$B/memory" --count "$mem_count" | grep -v '^memory ' | tee "$tmp/memory.txt"
echo
# more producers than CPUs on purpose: a producer never waits for another
plist="1,2,4,8"
echo "== cross-thread submit: frames/s into one engine from other threads"
"$B/xsubmit" --frames "$xs_frames" --producers "$plist" | grep -v '^xsubmit '
echo
echo "== dispatch strategies (unbalanced tasks, 2 contexts)"
"$B/dispatch" | grep -v '^dispatch '
echo
echo "== sync: mutex hand-off and channel across 2 contexts, vs pthread mutex and a pipe"
if [ "$mode" = quick ]; then "$B/sync" --quick; else "$B/sync"; fi

# ---- targets ---------------------------------------------------------------------
echo
echo "== targets (goals, not tests)"
awk -F, '
NR == 1 { next }
$1 == "echo" { s = $4; sub(/^echo_/, "", s); rps[$2, $3, s] = $5; cpu[$2, $3, s] = $9 }
$1 == "http" { s = $4; sub(/^http_/, "", s); h[$2, s] = $5 }
function verdict(ok) { return ok ? "met" : "MISSED" }
END {
	for (k in cpu) { split(k, a, SUBSEP); if (a[3] != "coring" || a[1] == 1) continue
		c = a[1]; z = a[2]
		r1 = cpu[c, z, "coring"] / cpu[c, z, "epoll"]; r2 = rps[c, z, "coring"] / rps[c, z, "epoll"]
		r3 = rps[c, z, "coring"] / rps[c, z, "uring"]; r4 = cpu[c, z, "coring"] / cpu[c, z, "uring"]
		printf "echo %3dc %4dB: CPU/req coring/epoll %.2f (<= 0.80: %s); req/s coring/epoll %.2f (>= 1: %s); coring/raw req/s %.2f, CPU/req %.2f (within 5%%: %s)\n",
			c, z, r1, verdict(r1 <= 0.8), r2, verdict(r2 >= 1), r3, r4, verdict(r3 >= 0.95 && r4 <= 1.05)
	}
	for (k in h) { split(k, a, SUBSEP); if (a[2] != "coring") continue
		r = h[a[1], "coring"] / h[a[1], "epoll"]
		printf "http %3dc (wrk): req/s coring/epoll %.2f (>= 1.10: %s)\n", a[1], r, verdict(r >= 1.1)
	}
}' "$csv" | sort
awk '/^coring/ { c = $(NF - 1) } /^C\+\+20/ { p = $(NF - 1) }
	END { if (c && p) printf "switch: coring %.2f ns vs C++20 %.2f ns, ratio %.2f (<= 1: %s)\n", c, p, c / p, (c <= p) ? "met" : "MISSED" }' "$tmp/switch.txt"
awk '/awaiting a timer/ { t = $4 } /awaiting an event/ { e = $4 }
	END { printf "memory: %d B per timer-waiting coroutine, %d B per event-waiting (<= 128: %s)\n", t, e, (t <= 128 && e <= 128) ? "met" : "MISSED" }' "$tmp/memory.txt"

# ---- soak (FULL=1) ------------------------------------------------------------------
if [ "$mode" = full ]; then
	soak_secs=${SOAK_SECONDS:-180}
	echo
	echo "== soak: echo_coring under echo_load with random disconnects, ${soak_secs}s"
	start echo_coring
	$pin_l "$B/echo_load" --port "$port_echo_coring" --conns 200 --size 512 --seconds "$soak_secs" \
		--warmup 0 --churn 5 >"$tmp/soak.out" 2>"$tmp/soak.err" &
	lpid=$!
	echo "t_s,rss_kb,fds" >"$out/soak.csv"
	t=0
	while kill -0 "$lpid" 2>/dev/null; do
		rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid_echo_coring/status")
		fds=$(ls "/proc/$pid_echo_coring/fd" | wc -l)
		echo "$t,$rss,$fds" >>"$out/soak.csv"
		sleep 5
		t=$((t + 5))
	done
	wait "$lpid" || { echo "bench: soak load failed:" >&2; cat "$tmp/soak.err" >&2; exit 1; }
	stop echo_coring
	echo "load: $(cat "$tmp/soak.out")"
	# flat: after the first minute's growth, the last third stays within 10%
	# (RSS) and within the connection count (fds) of the middle third
	awk -F, 'NR > 1 { t[++n] = $1; r[n] = $2; f[n] = $3 }
	END {
		a = int(n / 3) + 1; b = int(2 * n / 3)
		for (i = a; i <= b; i++) { if (r[i] > rm) rm = r[i]; if (f[i] > fm) fm = f[i] }
		for (i = b + 1; i <= n; i++) { if (r[i] > rl) rl = r[i]; if (f[i] > fl) fl = f[i] }
		printf "soak: %d samples; RSS %d -> %d kB, fds %d -> %d: %s\n", n, rm, rl, fm, fl,
			(rl <= rm * 1.1 + 1024 && fl <= fm + 16) ? "flat" : "GROWING"
	}' "$out/soak.csv"
	echo "soak samples: $out/soak.csv"
fi
