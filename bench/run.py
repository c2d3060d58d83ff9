#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make bench: every benchmark of a release build directory.

    bench/run.py [BUILD_DIR]        (default build-release)
    QUICK=1 / FULL=1                a smoke-sized run / longer rounds plus the soak
    ROUNDS=N SECONDS_PER_ROUND=S    override the round count and length
    SOAK_SECONDS=S                  soak length (FULL=1; default 180)
    BENCH_SECTIONS=echo,curve,...   run only these sections (any of: echo,
                                    curve, http, kv, fileio, callgrind, other, handoff,
                                    firmware, soak)

Prints the tables and writes, under BUILD_DIR/bench-results/ (inside the
git-ignored build directory, never in the source tree):
    latest.csv     echo, connection-curve and HTTP rows (named columns)
    fileio.csv     file reads: coring against fio
    callgrind.csv  user-space instructions per request
    firmware.csv   co.h on Cortex-M4: frame bytes, code bytes, instructions per resume
    handoff.csv    hand-off between contexts: coring, Go, two pthreads
    kv.csv         the application: kv_server against redis-server (bench/kv_bench.py)
    latest.txt     everything printed
    latest.png     the chart (gnuplot)
    soak.csv       FULL=1: the soak's RSS and descriptor samples

Method (docs/benchmarks.md has the whole of it): each server pinned to one
CPU, the load to another; all servers start once and stay up; per
workload a warm-up, then R rounds in which the servers take turns, the
order rotating every round; medians and spread of the rounds. CPU per
request is the server's CPU time over exactly the measured window divided
by the requests completed in it. A round in which other processes used
more than 10 % of one CPU is noisy: it is repeated (twice at most) and the
flag is kept; so is a round starved outright (no request completed, or
only wrk timeouts). Syscalls per request come from a separate short round under
strace, never from a measured round.
"""

import csv
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import callgrind  # noqa: E402
import firmware  # noqa: E402
import kv_bench  # noqa: E402
from benchlib import BenchError, median, spread_pct  # noqa: E402

MODES = {
    "quick": dict(rounds=1, secs=0.4, warm=0.2, ssecs=0.3, conns=[1, 50, 500], sizes=[64, 1024],
                  http_conns=[50], curve=[1, 10, 100, 1000, 10000], curve_secs=0.4,
                  cg_requests=4000, file_mib=256, file_secs=0.5, depths=[1, 32, 128],
                  switch_iters=2000000, switch_rounds=3, mem_count=100000, xs_frames=200000),
    "default": dict(rounds=5, secs=1.2, warm=0.5, ssecs=1, conns=[1, 50, 500], sizes=[64, 1024],
                    http_conns=[50, 500], curve=[1, 10, 100, 1000, 10000], curve_secs=1,
                    cg_requests=20000, file_mib=1024, file_secs=1.2, depths=[1, 32, 128],
                    switch_iters=20000000, switch_rounds=7, mem_count=1000000,
                    xs_frames=2000000),
    "full": dict(rounds=5, secs=5, warm=1, ssecs=2, conns=[1, 50, 500], sizes=[64, 1024],
                 http_conns=[50, 500], curve=[1, 10, 100, 1000, 10000], curve_secs=3,
                 cg_requests=40000, file_mib=2048, file_secs=5, depths=[1, 32, 128],
                 switch_iters=20000000, switch_rounds=11, mem_count=1000000, xs_frames=4000000),
}
SECTIONS = ["echo", "curve", "http", "kv", "fileio", "callgrind", "other", "handoff", "firmware", "soak"]
NOISE = 0.10            # other processes' CPU, in CPUs, that makes a round noisy
RETRIES = 2             # repeats of a noisy round

ECHO_SERVERS = ["echo_coring", "echo_coring_stream", "echo_epoll", "echo_uring", "echo_uring_mshot"] + \
    ["echo_libuv", "echo_asio"]
HTTP_SERVERS = ["http_coring", "http_coring_stream", "http_epoll", "http_nginx"]
SHORT = {"echo_coring": "coring", "echo_coring_stream": "stream", "echo_epoll": "epoll",
         "echo_uring": "uring", "echo_uring_mshot": "mshot", "http_coring": "coring",
         "http_coring_stream": "stream", "http_epoll": "epoll",
         "echo_libuv": "libuv", "echo_asio": "asio", "http_nginx": "nginx"}
TITLE = {"coring": "coring", "stream": "co stream", "epoll": "epoll", "uring": "raw uring",
         "mshot": "raw mshot", "libuv": "libuv", "asio": "Asio", "nginx": "nginx"}
ECHO_SHORT = ["coring", "stream", "epoll", "uring", "mshot", "libuv", "asio"]  # table and chart order
HTTP_SHORT = ["coring", "stream", "epoll", "nginx"]
CHART_SHORT = ECHO_SHORT + ["nginx"]  # the chart's bars: echo and HTTP
# The peers (bench/peers/, built where their library is installed): what
# installs them
PEERS = {"echo_libuv": "libuv1-dev", "echo_asio": "libboost-dev and g++", "http_nginx": "nginx-light"}

RESULT_COLUMNS = ["bench", "conns", "size", "server", "rps_median", "rps_min", "rps_max",
                  "spread_pct", "cpu_us_per_req", "p50_us", "p99_us", "syscalls_per_req",
                  "rounds", "noisy_rounds", "mode", "date"]
FILEIO_COLUMNS = ["test", "depth", "bs", "engine", "iops", "mb_s", "cpu_us_per_io", "spread_pct",
                  "rounds", "noisy_rounds", "mode", "date"]
# coring_each: fileio --submit-each, the engine's opts.submit_batch = 1 (one
# io_uring_enter per read as each frame suspends, as fio does; by default
# coring submits a loop turn's SQEs at once, at the turn's end)
FILE_ENGINES = ["coring", "coring_each", "fio_uring", "fio_uring_fixed", "fio_psync"]
FILE_TITLE = {"coring": "coring", "coring_each": "coring 1/enter", "fio_uring": "fio uring",
              "fio_uring_fixed": "fio fixed", "fio_psync": "fio psync"}

# The hand-off section (bench/contexts/handoff.c, handoff_pthread.c, handoff.go): the
# counts and time bound of each shape, per mode (each shape stops at its
# count or its time, whichever comes first)
HANDOFF_MODES = {
    "quick": dict(rt=20000, items=500000, ops=400000, seconds=0.2, idle_ms=100),
    "default": dict(rt=200000, items=5000000, ops=4000000, seconds=1.0, idle_ms=200),
    "full": dict(rt=500000, items=10000000, ops=10000000, seconds=2.0, idle_ms=200),
}
HANDOFF_TIMEOUT = 300   # s, one run of one program
HANDOFF_SHAPES = {"coring": ["pingpong", "transfer", "spawn", "chan1", "chan16", "chan256", "chan16_many",
                             "chan256_many", "pingpong_one",
                             "chan16_one", "chan256_one", "mutex1", "mutex32", "idle"],
                  "pthread": ["spin", "cond", "mutex"]}
HANDOFF_SHAPES["go"] = HANDOFF_SHAPES["coring"]
# the table's rows: shape, label, the pthread limit's shape, the condition variable's
HANDOFF_ROWS = [
    ("pingpong", "channel ping-pong, capacity 1, round trip", "spin", "cond"),
    ("transfer", "co_transfer_to 0 -> 1 -> 0 (Go: unbuffered hop)", "spin", "cond"),
    ("spawn", "co_spawn_on round trip (Go: go func)", "spin", "cond"),
    ("chan1", "channel 8 B items, capacity 1", None, None),
    ("chan16", "channel 8 B items, capacity 16", None, None),
    ("chan256", "channel 8 B items, capacity 256", None, None),
    ("chan16_many", "capacity 16, recv_many (Go: one per receive)", None, None),
    ("chan256_many", "capacity 256, recv_many (Go: one per receive)", None, None),
    ("pingpong_one", "ping-pong, one context (Go: GOMAXPROCS=1)", None, None),
    ("chan16_one", "capacity 16, one context (Go: GOMAXPROCS=1)", None, None),
    ("chan256_one", "capacity 256, one context (Go: GOMAXPROCS=1)", None, None),
    ("mutex1", "mutex, 1 coroutine per context", "mutex", None),
    ("mutex32", "mutex, 32 coroutines per context", "mutex", None),
    ("idle", "idle, from 1 ms after a burst", None, None),
]
HANDOFF_SHORT = {"pingpong": "ping-pong", "transfer": "transfer", "spawn": "spawn_on", "chan1": "chan cap 1",
                 "chan16": "chan cap 16", "chan256": "chan cap 256", "chan16_many": "cap 16, many",
                 "chan256_many": "cap 256, many", "pingpong_one": "ping-pong 1 ctx",
                 "chan16_one": "cap 16, 1 ctx", "chan256_one": "cap 256, 1 ctx", "mutex1": "mutex 1/ctx",
                 "mutex32": "mutex 32/ctx"}
# the hand-off targets: coring's shape against a peer's, the ratio's bound
HANDOFF_GOALS = [
    ("pingpong", "go", "pingpong", "round trip coring/Go's channel round trip", "<=", 2),
    ("transfer", "go", "pingpong", "round trip coring/Go's channel round trip", "<=", 2),
    ("chan16", "go", "chan16", "items/s coring/Go", ">=", 0.5),
    ("chan256", "go", "chan256", "items/s coring/Go", ">=", 0.5),
    ("mutex1", "pthread", "mutex", "ops/s coring/pthread_mutex", ">=", 0.5),
    ("mutex32", "pthread", "mutex", "ops/s coring/pthread_mutex", ">=", 0.5),
]
HANDOFF_UNITS = {"ns": "us", "per_s": "M/s", "cpu_pct": "% of a CPU"}
HANDOFF_COLUMNS = ["shape", "peer", "value_median", "value_min", "value_max", "unit", "spread_pct", "n_median",
                   "rounds", "noisy_rounds", "mode", "date"]


def wrk_requests(out):
    m = re.search(r"(\d+) requests in", out)
    return int(m.group(1)) if m else 0


class Run:
    """One make bench run: settings, output, results."""

    def __init__(self, build):
        self.build = build
        self.bench = os.path.join(build, "bench")
        self.out_dir = os.path.join(build, "bench-results")
        os.makedirs(self.out_dir, exist_ok=True)
        self.mode = "quick" if os.environ.get("QUICK") == "1" else \
            "full" if os.environ.get("FULL") == "1" else "default"
        self.m = dict(MODES[self.mode])
        if os.environ.get("ROUNDS"):
            self.m["rounds"] = int(os.environ["ROUNDS"])
        if os.environ.get("SECONDS_PER_ROUND"):
            self.m["secs"] = float(os.environ["SECONDS_PER_ROUND"])
        want = os.environ.get("BENCH_SECTIONS")
        self.sections = want.split(",") if want else \
            [s for s in SECTIONS if s != "soak" or self.mode == "full"]
        for s in self.sections:
            if s not in SECTIONS:
                raise BenchError(f"BENCH_SECTIONS: unknown section {s} (known: {','.join(SECTIONS)})")
        self.pin = benchlib.Pinning()
        self.nofile = benchlib.raise_nofile()
        self.now = datetime.datetime.now(datetime.timezone.utc)
        self.date = self.now.strftime("%Y-%m-%dT%H:%MZ")
        self.lines = []
        self.rows = []          # latest.csv
        self.file_rows = []     # fileio.csv
        self.cg_rows = []       # callgrind.csv
        self.fw_rows = []       # firmware.csv
        self.handoff_rows = []  # handoff.csv
        self.kv_rows = []       # kv.csv
        self.per_round = {}     # (bench, conns, size, server) or ("file", depth, engine): values by round
        self.servers = []       # started, for the cleanup
        self.said_missing = set()  # peers not built, said once
        self.hz = os.sysconf("SC_CLK_TCK")

    # ---- output -----------------------------------------------------------
    def say(self, text=""):
        print(text, flush=True)
        self.lines.append(text)

    @staticmethod
    def progress(mark):
        print(mark, end="", file=sys.stderr, flush=True)

    def have(self, tool, why):
        if shutil.which(tool):
            return True
        self.say(f"bench: {tool} not found: {why} skipped (make bench installs it: tools/deps.sh bench)")
        return False

    def start(self, name, *args):
        path = benchlib.program(self.bench, name)
        s = benchlib.Server(self.pin.server + [path, "--port", "0"] + list(args), name=name)
        self.servers.append(s)
        return s

    def start_all(self, names):
        """Start the servers named, each peer only where it was built (a
        peer not built is said once, and its columns show "-")."""
        out = {}
        for n in names:
            if n in PEERS and not os.access(benchlib.program(self.bench, n), os.X_OK):
                if n not in self.said_missing:
                    self.said_missing.add(n)
                    self.say(f"bench: {n} not built ({PEERS[n]} missing): its columns skipped "
                             f"(make bench installs it: tools/deps.sh bench)")
                continue
            out[n] = self.start(n)
        return out

    def stop(self, s):
        self.servers.remove(s)
        s.stop()

    def cleanup(self):
        for s in self.servers:
            s.kill()

    # ---- measuring helpers ---------------------------------------------------
    def busy(self):
        """Busy CPU seconds of the machine: user + nice + system + steal
        (irq and softirq left out: the pair's loopback traffic is there)."""
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return (v[0] + v[1] + v[2] + v[7]) / self.hz

    def run_child(self, argv, timeout, servers=()):
        """Run argv to its end: (returncode, stdout, stderr, its CPU seconds
        (all its processes and threads, from wait4), the CPU seconds other
        processes used meanwhile (the machine's busy time minus argv's and
        the servers'), the servers' CPU seconds meanwhile)."""
        s0 = [s.cpu_seconds() for s in servers]
        b0 = self.busy()
        with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
            p = subprocess.Popen(argv, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + timeout
            while True:
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > deadline:
                    p.kill()
                    os.wait4(p.pid, 0)
                    raise BenchError(f"{' '.join(argv)} did not finish in {timeout} s")
                time.sleep(0.01)
            p.returncode = os.waitstatus_to_exitcode(status)
            b1 = self.busy()
            s1 = [s.cpu_seconds() for s in servers]
            fo.seek(0)
            fe.seek(0)
            out, err = fo.read(), fe.read()
        child = ru.ru_utime + ru.ru_stime
        srv = sum(b - a for a, b in zip(s0, s1))
        other = max(0.0, (b1 - b0) - child - srv)
        return p.returncode, out, err, child, other, srv

    def retry(self, measure, window):
        """The one retry loop: measure() returns a dict with other_cpu_s;
        repeated while other processes used more than NOISE of a CPU over
        the window (RETRIES times at most); the last result is kept, with
        its noisy flag."""
        for attempt in range(RETRIES + 1):
            r = measure()
            r["noisy"] = int(r["other_cpu_s"] > NOISE * window)
            if not r["noisy"] or attempt == RETRIES:
                return r
            self.progress("n")

    def strace_calls(self, s, argv, requests_of):
        """Server syscalls per request (every process of server s), from a
        separate short round under strace -c; None if strace cannot attach."""
        if not shutil.which("strace"):
            return None
        with tempfile.NamedTemporaryFile("r", suffix=".strace") as f:
            st = subprocess.Popen(["strace", "-c", "-f", "-o", f.name] +
                                  [a for pid in s.pids() for a in ("-p", str(pid))],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            p = subprocess.run(argv, capture_output=True, text=True)
            st.send_signal(signal.SIGINT)
            try:
                st.wait(10)
            except subprocess.TimeoutExpired:
                st.kill()
                st.wait()
            calls = None
            for line in f.read().splitlines():
                w = line.split()
                if w and w[-1] == "total":
                    calls = int(w[3])
        n = requests_of(p.stdout) if p.returncode == 0 else 0
        return calls / n if calls and n else None

    def add_row(self, bench, conns, size, server, results, syscalls=None):
        rps = [r["rps"] for r in results]
        self.per_round[(bench, conns, size, SHORT[server])] = [r["cpu_us"] for r in results]
        self.rows.append({
            "bench": bench, "conns": conns, "size": size, "server": server,
            "rps_median": round(median(rps)), "rps_min": round(min(rps)),
            "rps_max": round(max(rps)), "spread_pct": round(spread_pct(rps), 1),
            "cpu_us_per_req": round(median([r["cpu_us"] for r in results]), 3),
            "p50_us": round(median([r["p50"] for r in results]), 1),
            "p99_us": round(median([r["p99"] for r in results]), 1),
            "syscalls_per_req": "" if syscalls is None else round(syscalls, 2),
            "rounds": len(results), "noisy_rounds": sum(r["noisy"] for r in results),
            "mode": self.mode, "date": self.date})

    # ---- echo: the matrix and the connection curve --------------------------
    def echo_round(self, s, conns, size, secs, warm):
        def measure():
            d = benchlib.echo_load(self.bench, self.pin, s.port, conns, size, secs, warm, s.pid,
                                   idle_ok=True)
            if d["requests"] == 0:  # starved by other processes: a noisy round, repeated
                return {"starved": True, "other_cpu_s": float("inf")}
            return {"rps": d["rps"], "cpu_us": d["server_us_per_req"], "p50": d["p50_us"],
                    "p99": d["p99_us"], "other_cpu_s": d["other_cpu_s"]}
        r = self.retry(measure, secs)
        if r.get("starved"):
            raise BenchError(f"{s.name}: no request completed in {RETRIES + 1} rounds of {secs} s "
                             f"({conns} x {size} B): other processes left the server or the load no CPU")
        return r

    def echo_workload(self, bench, servers, conns, size, secs, warm, with_strace, rounds=None):
        res = {n: [] for n in servers}
        for r in range(rounds or self.m["rounds"]):
            names = list(servers)
            order = names[r % len(names):] + names[:r % len(names)]  # rotate every round
            for n in order:
                res[n].append(self.echo_round(servers[n], conns, size, secs, warm))
                self.progress(".")
        for n, s in servers.items():
            calls = None
            if with_strace:
                argv = self.pin.load + [benchlib.program(self.bench, "echo_load"), "--port", str(s.port),
                                        "--conns", str(conns), "--size", str(size),
                                        "--seconds", str(self.m["ssecs"]), "--warmup", "0"]
                calls = self.strace_calls(s, argv,
                                          lambda out: benchlib.parse_kv(out).get("requests", 0))
                self.progress("s")
            self.add_row(bench, conns, size, n, res[n], calls)

    def echo(self):
        self.say("== echo: coring vs epoll vs raw liburing (simple and multishot) vs libuv and Boost.Asio")
        servers = self.start_all(ECHO_SERVERS)
        for c in self.m["conns"]:
            for z in self.m["sizes"]:
                self.progress(f"{'echo %dc %dB' % (c, z):<18}")
                self.echo_workload("echo", servers, c, z, self.m["secs"], self.m["warm"], True)
                self.progress("\n")
        for s in servers.values():
            self.stop(s)
        self.say(self.echo_table("echo"))
        self.say()

    def curve(self):
        self.say(f"== cost against load: echo 64 B at {', '.join(map(str, self.m['curve']))} connections")
        need = max(self.m["curve"]) + 64
        if self.nofile < need:
            self.say(f"bench: open-file limit {self.nofile} < {need}: curve limited")
        servers = self.start_all(ECHO_SERVERS)
        secs = self.m["curve_secs"] if "SECONDS_PER_ROUND" not in os.environ else self.m["secs"]
        for c in self.m["curve"]:
            if c + 64 > self.nofile:
                continue
            self.progress(f"{'curve %dc' % c:<18}")
            # no target reads the curve: fewer rounds (the default mode's 3)
            self.echo_workload("curve", servers, c, 64, secs, self.m["warm"], False,
                               min(self.m["rounds"], 3))
            self.progress("\n")
        for s in servers.values():
            self.stop(s)
        self.say(self.curve_table())
        self.say()

    # ---- HTTP via wrk ---------------------------------------------------------------
    def wrk_round(self, s, conns, secs):
        argv = self.pin.load + ["wrk", "-t1", f"-c{conns}", f"-d{secs}s", "--latency",
                                f"http://127.0.0.1:{s.port}/"]

        def measure():
            rc, out, err, wrk_cpu, other, srv = self.run_child(argv, secs + 60, [s])
            # only timeouts (an answer later than wrk's 2 s), no other error,
            # while other processes took the CPUs: a starved round, repeated
            if rc == 0 and "Non-2xx" not in out and other > NOISE * secs and \
                    re.search(r"Socket errors: connect 0, read 0, write 0, timeout \d+$", out, re.M):
                return {"starved": out, "other_cpu_s": float("inf")}
            if rc != 0 or "Socket errors" in out or "Non-2xx" in out:
                raise BenchError(f"wrk saw errors against {s.name}:\n{out}{err}")
            n = wrk_requests(out)
            lat = {}
            for q in ("50", "99"):
                m = re.search(rf"^\s+{q}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
                lat[q] = float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]
            rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
            return {"rps": rps, "cpu_us": srv * 1e6 / n if n else 0, "p50": lat["50"],
                    "p99": lat["99"], "other_cpu_s": other}
        r = self.retry(measure, secs)
        if r.get("starved"):
            raise BenchError(f"wrk saw timeouts against {s.name} in {RETRIES + 1} rounds while other "
                             f"processes took the CPUs:\n{r['starved']}")
        return r

    def http(self):
        self.say("== HTTP via wrk: coring vs epoll vs nginx (headline: server CPU per request)")
        if not self.have("wrk", "HTTP rows"):
            return
        servers = self.start_all(HTTP_SERVERS)
        secs = max(1, round(self.m["secs"]))  # wrk takes whole seconds
        for c in self.m["http_conns"]:
            self.progress(f"{'http %dc' % c:<18}")
            for s in servers.values():  # warm-up
                subprocess.run(self.pin.load + ["wrk", "-t1", f"-c{c}", "-d1s",
                                                f"http://127.0.0.1:{s.port}/"], capture_output=True)
            res = {n: [] for n in servers}
            for r in range(self.m["rounds"]):
                names = list(servers)
                for n in (names if r % 2 == 0 else names[::-1]):
                    res[n].append(self.wrk_round(servers[n], c, secs))
                    self.progress(".")
            for n, s in servers.items():
                argv = self.pin.load + ["wrk", "-t1", f"-c{c}", f"-d{max(1, round(self.m['ssecs']))}s",
                                        f"http://127.0.0.1:{s.port}/"]
                calls = self.strace_calls(s, argv, wrk_requests)
                self.progress("s")
                self.add_row("http", c, 0, n, res[n], calls)
            self.progress("\n")
        for s in servers.values():
            self.stop(s)
        self.say(self.echo_table("http"))
        self.say()

    # ---- the application: kv_server vs redis-server (bench/kv_bench.py) -------------------
    def kv(self):
        self.kv_rows = kv_bench.run(self)

    # ---- tables ------------------------------------------------------------------------
    def by(self, bench):
        out = {}
        for r in self.rows:
            if r["bench"] == bench:
                out[(r["conns"], r["size"], SHORT[r["server"]])] = r
        return out

    def echo_table(self, bench):
        rows = self.by(bench)
        servers = ECHO_SHORT if bench == "echo" else HTTP_SHORT
        ratios = [("coring", "epoll"), ("coring", "uring"), ("coring", "mshot"), ("stream", "uring"),
                  ("stream", "mshot"), ("coring", "libuv"), ("coring", "asio")] \
            if bench == "echo" else [("coring", "epoll"), ("stream", "epoll"), ("coring", "nginx"),
                                     ("stream", "nginx")]
        metrics = [("rps_median", "req/s", "{:.0f}"), ("cpu_us_per_req", "CPU us/req", "{:.2f}"),
                   ("syscalls_per_req", "syscalls/req", "{:.2f}"), ("p99_us", "p99 us", "{:.0f}"),
                   ("spread_pct", "spread %", "{:.1f}")]
        if bench == "http":  # the fair figure first: wrk's own CPU bounds req/s
            metrics = [metrics[1], metrics[0]] + metrics[2:]
        head = f"{'workload':<16} {'metric':<13}" + "".join(f"{TITLE[s]:>10}" for s in servers) + \
            "".join(f"{a + '/' + b:>14}" for a, b in ratios)
        lines = [head]
        keys = sorted({(c, z) for c, z, _ in rows})
        for c, z in keys:
            w = f"echo {c}c {z}B" if bench == "echo" else f"http {c}c (wrk)"
            for i, (k, label, fmt) in enumerate(metrics):
                cells = []
                vals = {}
                for s in servers:
                    r = rows.get((c, z, s))
                    v = r[k] if r else ""
                    vals[s] = v
                    cells.append(fmt.format(v) if v != "" else "-")
                rat = []
                for a, b in ratios:
                    va, vb = vals.get(a, ""), vals.get(b, "")
                    rat.append(f"{va / vb:.2f}" if va != "" and vb not in ("", 0) else "-")
                lines.append(f"{w if i == 0 else '':<16} {label:<13}" +
                             "".join(f"{x:>10}" for x in cells) + "".join(f"{x:>14}" for x in rat))
            noisy = sum(rows[(c, z, s)]["noisy_rounds"] for s in servers if (c, z, s) in rows)
            if noisy:
                lines.append(f"{'':<16} ({noisy} noisy round(s) kept after {RETRIES} repeats)")
        return "\n".join(lines)

    def curve_table(self):
        rows = self.by("curve")
        servers = ECHO_SHORT
        lines = [f"{'connections':>11}  {'CPU us/req:':<11}" + "".join(f"{TITLE[s]:>10}" for s in servers) +
                 f"  {'p99 us:':<8}" + "".join(f"{TITLE[s]:>10}" for s in servers)]
        for c in sorted({c for c, _, _ in rows}):
            cpu = [rows[(c, 64, s)]["cpu_us_per_req"] if (c, 64, s) in rows else None for s in servers]
            p99 = [rows[(c, 64, s)]["p99_us"] if (c, 64, s) in rows else None for s in servers]
            noisy = sum(rows[(c, 64, s)]["noisy_rounds"] for s in servers if (c, 64, s) in rows)
            lines.append(f"{c:>11}  {'':<11}" + "".join(f"{v:>10.2f}" if v is not None else f"{'-':>10}" for v in cpu) +
                         f"  {'':<8}" + "".join(f"{v:>10.0f}" if v is not None else f"{'-':>10}" for v in p99) +
                         (f"  ({noisy} noisy)" if noisy else ""))
        return "\n".join(lines)

    # ---- file I/O: coring against fio ---------------------------------------------------
    def data_file(self):
        path = os.path.join(self.out_dir, "fileio.dat")
        size = self.m["file_mib"] << 20
        try:
            if os.path.getsize(path) == size:
                return path
        except OSError:
            pass
        free = shutil.disk_usage(self.out_dir).free
        if free < size + (1 << 30):
            raise BenchError(f"fileio: {free >> 20} MiB free, {self.m['file_mib']} MiB file needs "
                             f"1 GiB more: run with a smaller mode (QUICK=1) or free space")
        self.say(f"(writing the {self.m['file_mib']} MiB test file {path})")
        block = os.urandom(1 << 20)
        with open(path + ".tmp", "wb") as f:
            for i in range(size >> 20):
                f.write(block[i % 4096:] + block[:i % 4096])  # no two MiB alike
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
        return path

    @staticmethod
    def evict(path):
        """Drop the file's pages from the page cache (clean pages: at once)."""
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def file_argv(self, engine, path, test, depth, bs, secs):
        if engine in ("coring", "coring_each"):
            argv = [benchlib.program(self.bench, "fileio"), "--file", path, "--bs", str(bs),
                    "--depth", str(depth), "--seconds", str(secs if test == "randread" else 600)]
            argv += ["--submit-each"] if engine == "coring_each" else []
            return argv + (["--rw", "randread", "--direct"] if test == "randread" else ["--rw", "read"])
        argv = ["fio", "--name=fileio", f"--filename={path}", f"--bs={bs}", "--output-format=json",
                "--gtod_reduce=1", "--randrepeat=0", "--norandommap"]
        if test == "randread":
            argv += ["--rw=randread", "--direct=1", "--time_based", f"--runtime={int(secs * 1000)}ms"]
        else:
            argv += ["--rw=read", "--direct=0", "--invalidate=1"]
        if engine == "fio_psync":
            return argv + ["--ioengine=psync", f"--numjobs={depth}"]
        argv += ["--ioengine=io_uring", f"--iodepth={depth}"]
        return argv + (["--fixedbufs", "--registerfiles"] if engine == "fio_uring_fixed" else [])

    def file_round(self, engine, path, test, depth, bs, secs):
        argv = self.file_argv(engine, path, test, depth, bs, secs)

        def measure():
            if test == "read":
                self.evict(path)
            rc, out, err, _, other, _ = self.run_child(argv, 900)
            if rc != 0:
                raise BenchError(f"{' '.join(argv)} failed:\n{out[-2000:]}{err[-2000:]}")
            # CPU of the threads that issue the I/O: fio's job threads (its
            # usr + sys over the job's runtime, as fio reports them), the
            # fileio engine's thread (fio's main process is left out)
            if engine in ("coring", "coring_each"):
                d = benchlib.parse_kv(out)
                ios, iops, cpu = d["ios_total"], d["iops"], d["cpu_s"]
            else:
                jobs = json.loads(out[out.index("{"):])["jobs"]
                ios = sum(j["read"]["total_ios"] for j in jobs)
                iops = sum(j["read"]["iops"] for j in jobs)
                cpu = sum((j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] / 1000 for j in jobs)
            return {"iops": iops, "mb_s": iops * bs / 1e6, "cpu_us": cpu * 1e6 / ios if ios else 0,
                    "other_cpu_s": other}
        # the window is the run's length (the whole file for reads)
        return self.retry(measure, secs if test == "randread" else 1.0)

    def fileio(self):
        self.say("== file I/O: coring (fileio: co_read from N coroutines, one engine) vs fio")
        if not self.have("fio", "file I/O rows"):
            return
        path = self.data_file()
        secs = self.m["file_secs"] if "SECONDS_PER_ROUND" not in os.environ else self.m["secs"]
        plan = [("randread", d, 4096, FILE_ENGINES) for d in self.m["depths"]]
        plan += [("read", d, 131072, ["coring", "coring_each", "fio_uring", "fio_uring_fixed"] +
                  (["fio_psync"] if d == 1 else [])) for d in (1, 8)]
        for test, depth, bs, engines in plan:
            self.progress(f"{'%s QD%d' % (test, depth):<18}")
            # an unmeasured warm-up: for the buffered reads, the whole file
            # through the page cache right before the rounds (a VM that
            # hands free memory back to its host, as this one does, makes
            # the first use of those pages slow; the rounds then reuse the
            # pages each eviction frees)
            self.evict(path)
            self.run_child(self.file_argv("coring", path, test, depth, bs, min(secs, 0.5)), 900)
            res = {e: [] for e in engines}
            for r in range(self.m["rounds"]):
                order = engines[r % len(engines):] + engines[:r % len(engines)]
                for e in order:
                    res[e].append(self.file_round(e, path, test, depth, bs, secs))
                    self.progress(".")
            for e in engines:
                self.add_file_row(test, depth, bs, e, res[e])
            self.progress("\n")
        self.say(self.file_table())
        self.say()

    def add_file_row(self, test, depth, bs, engine, results):
        """A row of fileio.csv from one engine's rounds (in round order)."""
        iops = [x["iops"] for x in results]
        if test == "randread":
            self.per_round[("file", depth, engine)] = iops
        self.file_rows.append({
            "test": test, "depth": depth, "bs": bs, "engine": engine,
            "iops": round(median(iops)), "mb_s": round(median([x["mb_s"] for x in results]), 1),
            "cpu_us_per_io": round(median([x["cpu_us"] for x in results]), 3),
            "spread_pct": round(spread_pct(iops), 1), "rounds": len(results),
            "noisy_rounds": sum(x["noisy"] for x in results), "mode": self.mode,
            "date": self.date})

    def file_table(self):
        rows = {(r["test"], r["depth"], r["engine"]): r for r in self.file_rows}
        lines = [f"{'workload':<24} {'metric':<12}" + "".join(f"{FILE_TITLE[e]:>15}" for e in FILE_ENGINES) +
                 f"{'coring/uring':>14}{'coring/fixed':>14}"]
        for test, depth in sorted({(t, d) for t, d, _ in rows}, key=lambda k: (k[0] != "randread", k[1])):
            w = f"random 4 KiB direct QD{depth}" if test == "randread" else f"seq 128 KiB buffered QD{depth}"
            for i, (k, label, fmt) in enumerate([("iops", "IOPS", "{:.0f}"), ("mb_s", "MB/s", "{:.0f}"),
                                                 ("cpu_us_per_io", "CPU us/IO", "{:.2f}"),
                                                 ("spread_pct", "spread %", "{:.1f}")]):
                if test == "randread" and k == "mb_s":
                    continue
                vals = {e: rows[(test, depth, e)][k] if (test, depth, e) in rows else None for e in FILE_ENGINES}
                rat = [f"{vals['coring'] / vals[b]:.2f}" if vals["coring"] is not None and vals[b] else "-"
                       for b in ("fio_uring", "fio_uring_fixed")]
                lines.append(f"{w if i == 0 else '':<24} {label:<12}" +
                             "".join(f"{fmt.format(v) if v is not None else '-':>15}" for v in vals.values()) +
                             "".join(f"{x:>14}" for x in rat))
            noisy = sum(rows[(test, depth, e)]["noisy_rounds"] for e in FILE_ENGINES if (test, depth, e) in rows)
            if noisy:
                lines.append(f"{'':<24} ({noisy} noisy round(s) kept after {RETRIES} repeats)")
        return "\n".join(lines)

    # ---- callgrind ----------------------------------------------------------------------
    def callgrind(self):
        self.say("== user-space cost per request (callgrind, echo 64 B; difference of two runs)")
        if not self.have("valgrind", "instruction counts"):
            return
        for c in (1, 50, 500):
            self.progress(f"{'callgrind %dc' % c:<18}")
            for s in callgrind.SERVERS:
                self.cg_rows.append(callgrind.measure(self.bench, self.pin, s, c, self.m["cg_requests"]))
                self.progress(".")
            self.progress("\n")
        self.say(callgrind.table(self.cg_rows))
        self.say()

    # ---- firmware ------------------------------------------------------------------------------
    def firmware(self):
        self.say("== co.h on Cortex-M4 (bench/firmware.py)")
        gone = firmware.missing()
        if gone:
            self.say(f"bench: {', '.join(gone)} not found: firmware skipped (tools/deps.sh bench)")
            return
        src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.fw_rows = firmware.measure(src)
        self.say(firmware.table(self.fw_rows))
        self.say(firmware.report(src, self.fw_rows)[0])
        self.say()

    # ---- the other benchmarks --------------------------------------------------------------
    def tool(self, argv, filt=None):
        p = subprocess.run(argv, capture_output=True, text=True)
        if p.returncode != 0:
            raise BenchError(f"{' '.join(argv)} failed:\n{p.stdout}{p.stderr}")
        for line in p.stdout.rstrip("\n").split("\n"):
            if filt is None or not line.startswith(filt):
                self.say(line)
        return p.stdout

    def other(self):
        m = self.m
        self.say(f"== suspend/resume round trip (pinned; median of {m['switch_rounds']} rounds)")
        self.switch_out = self.tool(self.pin.load + [benchlib.program(self.bench, "switch"), "--iters",
                                                     str(m["switch_iters"]), "--rounds", str(m["switch_rounds"])])
        self.say()
        self.say("== memory per idle coroutine")
        self.memory_out = self.tool([benchlib.program(self.bench, "memory"), "--count", str(m["mem_count"])],
                                    "memory ")
        self.say()
        # more producers than CPUs on purpose: a producer never waits for another
        self.say("== cross-thread submit: frames/s into one engine from other threads")
        self.tool([benchlib.program(self.bench, "xsubmit"), "--frames", str(m["xs_frames"]),
                   "--producers", "1,2,4,8"], "xsubmit ")
        self.say()
        self.say("== dispatch strategies (unbalanced tasks, 2 contexts)")
        self.tool([benchlib.program(self.bench, "dispatch")], "dispatch ")
        self.say()
        self.say("== sync: mutex hand-off and channel across 2 contexts, vs pthread mutex and a pipe")
        self.tool([benchlib.program(self.bench, "sync")] + (["--quick"] if self.mode == "quick" else []))
        self.say()

    # ---- hand-off between contexts: coring vs Go vs two pthreads --------------------------
    def handoff_go(self):
        """Build bench/contexts/handoff.go into the build dir (offline: its cache and
        GOPATH there, no module proxy); its path, or None without go."""
        if not self.have("go", "the Go column of the hand-off section"):
            return None
        gdir = os.path.join(os.path.abspath(self.build), "go")
        exe = benchlib.program(self.bench, "handoff_go")
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "contexts", "handoff.go")
        env = dict(os.environ, GOCACHE=os.path.join(gdir, "cache"), GOPATH=os.path.join(gdir, "path"),
                   GOFLAGS="-mod=mod", GOPROXY="off", GOENV="off")
        try:
            p = subprocess.run(["go", "build", "-o", exe, src], env=env, capture_output=True, text=True,
                               timeout=600)
        except subprocess.TimeoutExpired:
            raise BenchError("go build of bench/contexts/handoff.go did not finish in 600 s")
        if p.returncode != 0:
            raise BenchError(f"go build of bench/contexts/handoff.go failed:\n{p.stdout}{p.stderr}")
        v = subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()
        self.say(f"({v}, GOMAXPROCS=2; 1 in the one-context rows)")
        return exe

    def handoff_round(self, peer, argv):
        """One run of a hand-off program: {shape: result line}, noisy flag."""
        def measure():
            t0 = time.monotonic()
            rc, out, err, _, other, _ = self.run_child(argv, HANDOFF_TIMEOUT)
            if rc != 0:
                raise BenchError(f"{' '.join(argv)} failed ({rc}):\n{out[-2000:]}{err[-2000:]}")
            got = {}
            for line in out.splitlines():
                if line.startswith("handoff "):
                    d = benchlib.parse_kv(line)
                    got[d["shape"]] = d
            if sorted(got) != sorted(HANDOFF_SHAPES[peer]):
                raise BenchError(f"{' '.join(argv)}: shapes {sorted(got)}, expected {sorted(HANDOFF_SHAPES[peer])}")
            # others' CPU as a share of the run's wall time (window 1 below):
            # noisy above NOISE of one CPU, as every other round
            return {"shapes": got, "other_cpu_s": other / max(time.monotonic() - t0, 1e-3)}
        return self.retry(measure, 1.0)

    def handoff(self):
        hm = dict(HANDOFF_MODES[self.mode])
        if os.environ.get("SECONDS_PER_ROUND"):
            hm["seconds"] = float(os.environ["SECONDS_PER_ROUND"])
        rounds = self.m["rounds"]
        self.say(f"== hand-off between contexts: coring (a scheduler of 2 contexts) vs Go vs two pthreads "
                 f"(unpinned; median of {rounds} round(s), each shape at most {hm['seconds']:g} s)")
        args = ["--rt", str(hm["rt"]), "--items", str(hm["items"]), "--ops", str(hm["ops"]),
                "--seconds", str(hm["seconds"]), "--idle-ms", str(hm["idle_ms"])]
        progs = {"coring": [benchlib.program(self.bench, "handoff")] + args,
                 "pthread": [benchlib.program(self.bench, "handoff_pthread")] + args}
        go = self.handoff_go()
        if go:
            progs["go"] = ["env", "GOMAXPROCS=2", go] + args
        res = {p: [] for p in progs}
        self.progress(f"{'handoff':<18}")
        for r in range(rounds):
            names = list(progs)
            for p in names[r % len(names):] + names[:r % len(names)]:  # rotate every round
                res[p].append(self.handoff_round(p, progs[p]))
                self.progress(".")
        self.progress("\n")
        for peer, runs in res.items():
            for shape in HANDOFF_SHAPES[peer]:
                vals = [x["shapes"][shape]["value"] for x in runs]
                self.handoff_rows.append({
                    "shape": shape, "peer": peer, "value_median": round(median(vals), 4),
                    "value_min": round(min(vals), 4), "value_max": round(max(vals), 4),
                    "unit": runs[0]["shapes"][shape]["unit"], "spread_pct": round(spread_pct(vals), 1),
                    "n_median": round(median([x["shapes"][shape]["n"] for x in runs])),
                    "rounds": len(runs), "noisy_rounds": sum(x["noisy"] for x in runs),
                    "mode": self.mode, "date": self.date})
        self.say(self.handoff_table())
        self.say()

    def handoff_value(self, peer, shape):
        """The median in the table's unit (us, M/s, % CPU), or None."""
        for r in self.handoff_rows:
            if r["peer"] == peer and r["shape"] == shape:
                v = r["value_median"]
                return v / 1e3 if r["unit"] == "ns" else v / 1e6 if r["unit"] == "per_s" else v
        return None

    def handoff_unit(self, shape):
        """The unit coring's program printed for shape (ns, per_s, cpu_pct)."""
        return next((r["unit"] for r in self.handoff_rows if r["peer"] == "coring" and r["shape"] == shape),
                    "per_s")

    def handoff_table(self):
        cols = ["coring", "Go", "pthread limit", "pthread cond"]
        lines = [f"{'shape':<48} {'unit':<10}" + "".join(f"{c:>14}" for c in cols) +
                 f"{'coring/Go':>11}{'coring/limit':>14}{'spread %':>10}"]

        def fmt(v):
            return "-" if v is None else f"{v:.3g}" if v < 100 else f"{v:.0f}"
        for shape, label, limit, cond in HANDOFF_ROWS:
            unit = HANDOFF_UNITS[self.handoff_unit(shape)]
            c, g = self.handoff_value("coring", shape), self.handoff_value("go", shape)
            lim = self.handoff_value("pthread", limit) if limit else None
            slp = self.handoff_value("pthread", cond) if cond else None
            rat = [f"{c / b:.2f}" if c is not None and b else "-" for b in (g, lim)]
            spread = [r["spread_pct"] for r in self.handoff_rows if r["peer"] == "coring" and r["shape"] == shape]
            lines.append(f"{label:<48} {unit:<10}" + "".join(f"{fmt(v):>14}" for v in (c, g, lim, slp)) +
                         f"{rat[0]:>11}{rat[1]:>14}{spread[0] if spread else '-':>10}")
        noisy = sum(r["noisy_rounds"] for r in self.handoff_rows if r["shape"] in ("pingpong", "spin"))
        lines.append("(ratios of the figures shown: for round trips lower is better, for rates higher; "
                     "limit: two threads spinning on one cache line, or on a pthread_mutex; cond: two threads "
                     "taking turns through a condition variable; spread: coring's, (max - min) / median)")
        if noisy:
            lines.append(f"({noisy} noisy run(s) kept after {RETRIES} repeats)")
        return "\n".join(lines)

    def handoff_targets(self):
        """The hand-off targets, from this run's hand-off rows."""
        def verdict(ok):
            return "met" if ok else "MISSED"
        v = self.handoff_value
        out = []
        for shape, peer, pshape, what, op, bound in HANDOFF_GOALS:
            c, b = v("coring", shape), v(peer, pshape)
            if c is not None and b:
                ok = c / b <= bound if op == "<=" else c / b >= bound
                out.append(f"handoff {shape}: {what} {c / b:.2f} ({op} {bound}: {verdict(ok)})")
        c = v("coring", "idle")
        if c is not None:
            out.append(f"handoff idle: {c:.2f} % of a CPU from 1 ms after the last work (<= 2: {verdict(c <= 2)})")
        return out

    def handoff_plots(self, tmp):
        """Two chart panels: round trips and rates (empty without data)."""
        if not self.handoff_rows:
            return "set multiplot next\nset multiplot next"
        peers = [("coring", None), ("go", None), ("pthread", "limit"), ("pthread", "cond")]
        titles = ["coring", "Go", "2 threads: limit", "2 threads: cond. var."]
        colors = ['"#1b9e77"', '"#7570b3"', '"#d95f02"', '"#e7298a"']
        rt, rate = os.path.join(tmp, "handoff_rt.dat"), os.path.join(tmp, "handoff_rate.dat")
        with open(rt, "w") as f_rt, open(rate, "w") as f_rate:
            for shape, label, limit, cond in HANDOFF_ROWS:
                if shape == "idle":
                    continue
                which = {None: shape, "limit": limit, "cond": cond}
                cells = [self.handoff_value(p, which[k]) if which[k] else None for p, k in peers]
                f = f_rt if self.handoff_unit(shape) == "ns" else f_rate
                f.write(f'"{HANDOFF_SHORT[shape]}" ' + " ".join("-" if x is None else f"{x:g}" for x in cells) + "\n")

        def hist(data):
            return "plot " + ", ".join(f'"{data}" using {2 + i}' + (":xtic(1)" if i == 0 else "") +
                                       f' title "{t}" lc rgb {colors[i]}' for i, t in enumerate(titles))
        return f"""set offsets 1, 0, 0, 0
set ylabel "us per round trip (log)"
set title "hand-off between 2 contexts: round trips (lower is better)"
{hist(rt)}
set ylabel "million items or lock operations/s (log)"
set title "hand-off between 2 contexts: channel items/s and mutex ops/s (higher is better)"
{hist(rate)}
set offsets 0, 0, 0, 0"""

    # ---- targets -----------------------------------------------------------------------------
    def targets(self):
        def verdict(ok):
            return "met" if ok else "MISSED"
        out = []
        echo = self.by("echo")
        for c in self.m["conns"]:
            for z in self.m["sizes"]:
                g = {s: echo.get((c, z, s)) for s in ("coring", "epoll", "uring", "mshot")}
                if not all(g.values()) or c == 1:
                    continue
                cpu = {s: g[s]["cpu_us_per_req"] for s in g}
                # the default server no dearer than raw liburing (the hand-off work's line)
                r = cpu["coring"] / cpu["uring"]
                line = (f"echo {c:3d}c {z:4d}B: CPU/req coring/raw {r:.2f} (<= 1.00: {verdict(r <= 1.0)})"
                        f"{self.paired(('echo', c, z, 'coring'), ('echo', c, z, 'uring'))}, "
                        f"coring/epoll {cpu['coring'] / cpu['epoll']:.2f}, coring/mshot {cpu['coring'] / cpu['mshot']:.2f}")
                st = echo.get((c, z, "stream"))
                if st:  # coring's best: the streaming server
                    cpu["stream"] = st["cpu_us_per_req"]
                    line += (f", stream/raw {cpu['stream'] / cpu['uring']:.2f}, "
                             f"stream/mshot {cpu['stream'] / cpu['mshot']:.2f}")
                best = min(cpu["coring"], cpu.get("stream", cpu["coring"]))
                if c == 500:
                    line += (f" (coring's best <= 0.90 of raw and <= 1.00 of mshot: "
                             f"{verdict(best <= 0.9 * cpu['uring'] and best <= cpu['mshot'])})")
                out.append(line)
        http = self.by("http")
        for c in self.m["http_conns"]:
            a, b = http.get((c, 0, "coring")), http.get((c, 0, "epoll"))
            if a and b:
                r = a["cpu_us_per_req"] / b["cpu_us_per_req"]
                line = (f"http {c:3d}c (wrk): CPU/req coring/epoll {r:.2f} (<= 0.95: {verdict(r <= 0.95)}); "
                        f"req/s {a['rps_median'] / b['rps_median']:.2f}")
                st = http.get((c, 0, "stream"))
                if st:
                    line += f"; stream/epoll CPU/req {st['cpu_us_per_req'] / b['cpu_us_per_req']:.2f}"
                out.append(line)
        out += self.peer_targets(echo, http, verdict)
        cg = {(r["server"], r["conns"]): r for r in self.cg_rows}
        for c in (1, 50, 500):
            a, b = cg.get(("echo_coring", c)), cg.get(("echo_uring", c))
            if a and b:
                ri, rd = a["ir_per_req"] / b["ir_per_req"], a["data_per_req"] / b["data_per_req"]
                out.append(f"callgrind {c:3d}c: instructions/req coring/raw {ri:.2f} (<= 1.5: {verdict(ri <= 1.5)}), "
                           f"data accesses {rd:.2f} (<= 2: {verdict(rd <= 2)})")
        files = {(r["test"], r["depth"], r["engine"]): r for r in self.file_rows}
        for d in self.m["depths"]:
            a, b = files.get(("randread", d, "coring")), files.get(("randread", d, "fio_uring"))
            if a and b:
                # the defaults (no option set); coring 1/enter (opts.submit_batch = 1) beside it
                ri, rc = a["iops"] / b["iops"], a["cpu_us_per_io"] / b["cpu_us_per_io"]
                line = (f"fileio QD{d:<3}: IOPS coring/fio io_uring {ri:.2f} (>= 0.95: {verdict(ri >= 0.95)})"
                        f"{self.paired(('file', d, 'coring'), ('file', d, 'fio_uring'))}, "
                        f"CPU/IO {rc:.2f} (<= 1.10: {verdict(rc <= 1.1)})")
                each = files.get(("randread", d, "coring_each"))
                if each:
                    line += f"; coring 1/enter: IOPS {each['iops'] / b['iops']:.2f}"
                out.append(line)
        if getattr(self, "switch_out", None):
            c = re.search(r"^coring.*?([\d.]+)\s+[\d.]+\s*$", self.switch_out, re.M)
            p = re.search(r"^C\+\+20.*?([\d.]+)\s+[\d.]+\s*$", self.switch_out, re.M)
            if c and p:
                cv, pv = float(c.group(1)), float(p.group(1))
                out.append(f"switch: coring {cv:.2f} ns vs C++20 {pv:.2f} ns, ratio {cv / pv:.2f} "
                           f"(<= 1: {verdict(cv <= pv)})")
        if getattr(self, "memory_out", None):
            t = re.search(r"awaiting a timer\s+(\d+)", self.memory_out)
            e = re.search(r"awaiting an event\s+(\d+)", self.memory_out)
            if t and e:
                tv, ev = int(t.group(1)), int(e.group(1))
                out.append(f"memory: {tv} B per timer-waiting coroutine, {ev} B per event-waiting "
                           f"(<= 128: {verdict(tv <= 128 and ev <= 128)})")
        out += self.handoff_targets()
        out += kv_bench.targets(self.kv_rows)
        if out:
            self.say("== targets (goals, not tests)")
            for line in out:
                self.say(line)
            self.say()

    def paired(self, a, b):
        """The range of a/b over the rounds (a and b ran in the same rounds,
        in turn): how far one round's ratio strays from the medians'."""
        va, vb = self.per_round.get(a), self.per_round.get(b)
        if not va or not vb or len(va) != len(vb) or len(va) < 2 or not all(vb):
            return ""
        r = [x / y for x, y in zip(va, vb)]
        return f" [rounds' ratios {min(r):.2f}-{max(r):.2f}]"

    def peer_targets(self, echo, http, verdict):
        """coring against the peers: CPU per request <= 1.00x libuv and Asio
        at 50 x 64 B and 500 x 1 KiB echo, <= 0.90x nginx for HTTP."""
        out = []
        for c, z in ((50, 64), (500, 1024)):
            a = echo.get((c, z, "coring"))
            peers = {p: echo.get((c, z, p)) for p in ("libuv", "asio") if echo.get((c, z, p))}
            if a and peers:
                r = {p: a["cpu_us_per_req"] / row["cpu_us_per_req"] for p, row in peers.items()}
                out.append(f"echo {c:3d}c {z:4d}B: CPU/req " +
                           ", ".join(f"coring/{TITLE[p]} {v:.2f}" for p, v in r.items()) +
                           f" (<= 1.00: {verdict(all(v <= 1.0 for v in r.values()))})")
        for c in self.m["http_conns"]:
            a, b = http.get((c, 0, "coring")), http.get((c, 0, "nginx"))
            if a and b:
                r = a["cpu_us_per_req"] / b["cpu_us_per_req"]
                out.append(f"http {c:3d}c (wrk): CPU/req coring/nginx {r:.2f} (<= 0.90: {verdict(r <= 0.9)}); "
                           f"req/s {a['rps_median'] / b['rps_median']:.2f}")
        return out

    # ---- soak (FULL=1) -----------------------------------------------------------------------
    def soak(self):
        secs = int(os.environ.get("SOAK_SECONDS", "180"))
        self.say(f"== soak: echo_coring under echo_load with random disconnects, {secs}s")
        s = self.start("echo_coring")
        argv = self.pin.load + [benchlib.program(self.bench, "echo_load"), "--port", str(s.port), "--conns", "200",
                                "--size", "512", "--seconds", str(secs), "--warmup", "0", "--churn", "5"]
        load = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        samples = []
        t = 0
        while load.poll() is None:
            with open(f"/proc/{s.pid}/status") as f:
                rss = int(re.search(r"^VmRSS:\s+(\d+)", f.read(), re.M).group(1))
            samples.append((t, rss, len(os.listdir(f"/proc/{s.pid}/fd"))))
            for _ in range(50):
                if load.poll() is not None:
                    break
                time.sleep(0.1)
            t += 5
        out, err = load.communicate()
        if load.returncode != 0:
            raise BenchError(f"soak load failed:\n{err}")
        self.stop(s)
        path = os.path.join(self.out_dir, "soak.csv")
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t_s", "rss_kb", "fds"])
            w.writerows(samples)
        self.say(f"load: {out.strip()}")
        # flat: the last third within 10 % (RSS) and 16 descriptors of the middle third
        n = len(samples)
        mid, last = samples[n // 3:2 * n // 3] or samples, samples[2 * n // 3:] or samples
        rm, rl = max(x[1] for x in mid), max(x[1] for x in last)
        fm, fl = max(x[2] for x in mid), max(x[2] for x in last)
        flat = rl <= rm * 1.1 + 1024 and fl <= fm + 16
        self.say(f"soak: {n} samples; RSS {rm} -> {rl} kB, fds {fm} -> {fl}: {'flat' if flat else 'GROWING'}")
        self.say(f"soak samples: {path}")
        self.say()

    # ---- files and chart -------------------------------------------------------------------------
    def write(self):
        for name, cols, rows in (("latest.csv", RESULT_COLUMNS, self.rows),
                                 ("fileio.csv", FILEIO_COLUMNS, self.file_rows),
                                 ("callgrind.csv", callgrind.COLUMNS, self.cg_rows),
                                 ("firmware.csv", firmware.COLUMNS, self.fw_rows),
                                 ("handoff.csv", HANDOFF_COLUMNS, self.handoff_rows),
                                 ("kv.csv", kv_bench.COLUMNS, self.kv_rows)):
            if rows:
                with open(os.path.join(self.out_dir, name), "w", newline="") as f:
                    w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
                    w.writeheader()
                    w.writerows(rows)
        with open(os.path.join(self.out_dir, "latest.txt"), "w") as f:
            f.write("\n".join(self.lines) + "\n")

    def chart(self):
        if not (self.rows or self.file_rows or self.handoff_rows) or not shutil.which("gnuplot"):
            return None
        png = os.path.join(self.out_dir, "latest.png")
        with tempfile.TemporaryDirectory(prefix="coring-chart-") as tmp:
            bars = os.path.join(tmp, "bars.dat")
            with open(bars, "w") as f:
                for bench in ("echo", "http"):
                    rows = self.by(bench)
                    for c, z in sorted({(c, z) for c, z, _ in rows}):
                        label = f"{c}c/{z}B" if bench == "echo" else f"http/{c}c"
                        cells = [rows.get((c, z, s)) for s in CHART_SHORT]
                        f.write(f'"{label}" ' + " ".join(f"{r['rps_median'] / 1000:g}" if r else "-" for r in cells) +
                                " " + " ".join(f"{r['cpu_us_per_req']:g}" if r else "-" for r in cells) + "\n")
            curve = os.path.join(tmp, "curve.dat")
            with open(curve, "w") as f:
                rows = self.by("curve")
                for c in sorted({c for c, _, _ in rows}):
                    cells = [rows.get((c, 64, s)) for s in ECHO_SHORT]
                    f.write(f"{c} " + " ".join(f"{r['cpu_us_per_req']:g}" if r else "-" for r in cells) +
                            " " + " ".join(f"{r['p99_us']:g}" if r else "-" for r in cells) + "\n")
            files = os.path.join(tmp, "files.dat")
            with open(files, "w") as f:
                rows = {(r["test"], r["depth"], r["engine"]): r for r in self.file_rows}
                for test, d in sorted({(t, d) for t, d, _ in rows}, key=lambda k: (k[0] != "randread", k[1])):
                    label = f"rand 4K QD{d}" if test == "randread" else f"seq 128K QD{d}"
                    cells = [rows.get((test, d, e)) for e in FILE_ENGINES]
                    f.write(f'"{label}" ' + " ".join(f"{r['mb_s']:g}" if r else "-" for r in cells) +
                            " " + " ".join(f"{r['cpu_us_per_io']:g}" if r else "-" for r in cells) + "\n")

            def plot(spec):
                return f"plot {spec}" if spec else "set multiplot next"
            colors = ['"#1b9e77"', '"#66a61e"', '"#d95f02"', '"#7570b3"', '"#e7298a"']
            # the echo servers, then the peers (libuv, Asio; nginx in the HTTP bars)
            ecolors = colors + ['"#e6ab02"', '"#a6761d"', '"#666666"']
            names = [TITLE[s] for s in CHART_SHORT]
            fnames = ["coring", "coring, 1 read/enter", "fio io_uring", "fio io_uring fixed", "fio psync"]

            def hist(data, first, titles, palette):
                if os.path.getsize(data) == 0:  # a section that did not run: an empty panel
                    return None
                return ", ".join(
                    f'"{data}" using {first + i}' + (":xtic(1)" if i == 0 else "") +
                    f' title "{t}" lc rgb {palette[i]}' for i, t in enumerate(titles))

            def lines(data, first):
                if os.path.getsize(data) == 0:
                    return None
                return ", ".join(f'"{data}" using 1:{first + i} with linespoints title "{t}" lw 2 '
                                 f'pt 7 lc rgb {ecolors[i]}' for i, t in enumerate(names[:len(ECHO_SHORT)]))
            script = f"""
set terminal pngcairo size 1400,1700 font ",10" noenhanced
set output "{png}"
set datafile missing "-"
set grid ytics
set key top right
set multiplot layout 4,2 title "coring vs epoll, raw liburing, libuv, Asio, nginx; file reads vs fio; hand-off vs Go ({self.mode}, {self.now:%Y-%m-%d}, {self.pin.ncpu} CPUs)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set xtics rotate by -30
set logscale y
set ylabel "thousand requests/s (log)"
set title "echo and HTTP: requests/s (higher is better)"
{plot(hist(bars, 2, names, ecolors))}
set ylabel "server CPU us/request (log)"
set title "echo and HTTP: server CPU per request (lower is better)"
{plot(hist(bars, 2 + len(CHART_SHORT), names, ecolors))}
set style data linespoints
set key top left
set xtics norotate
set logscale x
set xlabel "connections (log)"
set ylabel "server CPU us/request (log)"
set title "echo 64 B: CPU per request against connections"
{plot(lines(curve, 2))}
set logscale y
set ylabel "p99 latency us (log)"
set title "echo 64 B: p99 latency against connections"
{plot(lines(curve, 2 + len(ECHO_SHORT)))}
unset logscale x
unset xlabel
set style data histograms
set xtics rotate by -30
set ylabel "MB/s (log)"
set title "file reads: throughput (higher is better)"
{plot(hist(files, 2, fnames, colors))}
set ylabel "CPU us per I/O (log)"
set title "file reads: CPU per I/O (lower is better)"
{plot(hist(files, 7, fnames, colors))}
{self.handoff_plots(tmp)}
unset multiplot
"""
            p = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
            if p.returncode != 0:
                self.say(f"bench: gnuplot failed: {p.stderr.strip()[-1000:]}")
                return None
        return png

    # ---- main ---------------------------------------------------------------------------------------
    def main(self):
        m = self.m
        self.say(f"coring bench ({self.mode}): {self.now:%Y-%m-%d %H:%M} UTC, {self.pin.ncpu} CPUs, {self.pin.note}")
        self.say(f"rounds {m['rounds']} x {m['secs']}s after {m['warm']}s warm-up; strace rounds {m['ssecs']}s; "
                 f"open-file limit {self.nofile}")
        self.say()
        took = []
        for section in SECTIONS:
            if section in self.sections:
                t0 = time.monotonic()
                getattr(self, section)()
                took.append(f"{section} {time.monotonic() - t0:.0f} s")
        self.targets()
        self.say(f"time per section: {', '.join(took)}")
        self.write()
        png = self.chart()
        if png:
            self.say(f"chart: {png}")
        self.say(f"tables: {os.path.join(self.out_dir, 'latest.txt')}, data: {self.out_dir}/*.csv")
        self.write()


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build-release"
    if not os.path.isdir(os.path.join(build, "bench")):
        print(f"bench: no {build}/bench: build first (make bench)", file=sys.stderr)
        return 2
    run = Run(build)
    # SIGTERM (a CI timeout, kill): end like Ctrl-C, through the cleanup
    # below, so that no server outlives the run
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        run.main()
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        run.write()
        return 1
    finally:
        run.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
