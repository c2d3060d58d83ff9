# SPDX-License-Identifier: MIT
"""The runner's core (bench/runner/run.py): the modes, the sections in the
order they run, the servers' names, and the part of a run every section
uses: its settings, its output, the servers it started, and the measuring
helpers (the CPU the machine and a child used, the retry of a noisy round,
syscalls per request under strace)."""

import datetime
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import benchlib
import peers
from benchlib import BenchError

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
RETRIES = 2             # repeats of a noisy round (BENCH_RETRIES=N: N instead)

ECHO_SERVERS = ["echo_coring", "echo_coring_stream", "echo_epoll", "echo_uring", "echo_uring_mshot"] + \
    ["echo_libuv", "echo_asio", "echo_go", "echo_tokio"]
HTTP_SERVERS = ["http_coring", "http_coring_stream", "http_epoll", "http_nginx", "http_go"]
SHORT = {"echo_coring": "coring", "echo_coring_stream": "stream", "echo_epoll": "epoll",
         "echo_uring": "uring", "echo_uring_mshot": "mshot", "http_coring": "coring",
         "http_coring_stream": "stream", "http_epoll": "epoll",
         "echo_libuv": "libuv", "echo_asio": "asio", "http_nginx": "nginx",
         "echo_go": "go", "http_go": "go", "echo_tokio": "tokio"}
TITLE = {"coring": "coring", "stream": "co stream", "epoll": "epoll", "uring": "raw uring",
         "mshot": "raw mshot", "libuv": "libuv", "asio": "Asio", "nginx": "nginx", "go": "Go",
         "tokio": "tokio"}
ECHO_SHORT = ["coring", "stream", "epoll", "uring", "mshot", "libuv", "asio", "go", "tokio"]  # table and chart order
HTTP_SHORT = ["coring", "stream", "epoll", "nginx", "go"]
CHART_SHORT = ECHO_SHORT + ["nginx"]  # the chart's bars: echo and HTTP (Go's HTTP server in Go's bar)
# The peers (bench/peers/, built where their library is installed): what
# installs them. meson builds the C and C++ ones; the runner builds Go's and
# tokio's (bench/runner/peers.py) when a section first needs them.
PEERS = {"echo_libuv": "libuv1-dev", "echo_asio": "libboost-dev and g++", "http_nginx": "nginx-light",
         "echo_go": "golang-go", "http_go": "golang-go", "echo_tokio": "cargo and librust-tokio-dev"}


class Core:
    """One make bench run's settings, output and servers; the sections
    (bench/runner/sections/) are the rest of the run (run.py's Run)."""

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
        self.retries = RETRIES
        if "BENCH_RETRIES" in os.environ:
            v = os.environ["BENCH_RETRIES"]
            if not v.isdigit():
                raise BenchError(f"BENCH_RETRIES={v}: not a count of repeats (0, 1, 2 ...)")
            self.retries = int(v)
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
        self.peer_builds = {}      # the runner-built peers (peers.py): name -> path, or None
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
            if peers.built_here(n):
                if self.peer_program(n):
                    out[n] = self.start(n)
                continue
            if n in PEERS and not os.access(benchlib.program(self.bench, n), os.X_OK):
                if n not in self.said_missing:
                    self.said_missing.add(n)
                    self.say(f"bench: {n} not built ({PEERS[n]} missing): its columns skipped "
                             f"(make bench installs it: tools/deps.sh bench)")
                continue
            out[n] = self.start(n)
        return out

    def peer_program(self, name):
        """A Go or tokio peer (bench/runner/peers.py), built into the build
        dir the first time the run needs it: its path, or None. Either way
        said once: what built it, or in one line why it could not be built
        (then its columns show "-" and the section goes on)."""
        if name in self.peer_builds:
            return self.peer_builds[name]
        kind = "tokio" if "tokio" in name else "Go"
        what = "cargo and librust-tokio-dev" if kind == "tokio" else "golang-go"
        self.progress(f"(building {name})\n")
        path, why = peers.build(self.build, name)
        self.peer_builds[name] = path
        if path is None:
            self.say(f"bench: {name} not built ({why}): its columns skipped "
                     f"(make bench installs {what}: tools/deps.sh bench)")
        elif kind not in self.said_missing:
            self.said_missing.add(kind)
            self.say(f"({kind} peers: {peers.versions(self.build, name)})")
        return path

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
        the window (self.retries times at most); the last result is kept,
        with its noisy flag."""
        for attempt in range(self.retries + 1):
            r = measure()
            r["noisy"] = int(r["other_cpu_s"] > NOISE * window)
            if not r["noisy"] or attempt == self.retries:
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
