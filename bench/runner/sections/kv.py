# SPDX-License-Identifier: MIT
"""The application row of make bench (bench/runner/run.py's section "kv"): the
example key-value server (docs/examples/kv/, --threads 1) against
redis-server, both under redis-benchmark, as docs/benchmarks.md describes.

Both servers are pinned to the servers' CPU and redis-benchmark to the
load CPU, as every other server and load of run.py. redis-server runs from
a configuration written into the build directory: no persistence (no RDB
save, no AOF), one I/O thread, loopback only. Each round runs
redis-benchmark once per server and workload, 50 connections, keys drawn
from 100,000 (-r), 3-byte values, SET then GET, without pipelining and
with -P 16; the servers take turns, the order alternating every round.
CPU per request is the server's CPU time (all its threads, /proc) over
the redis-benchmark run divided by the requests it made; requests/s and
p99 are redis-benchmark's own. redis-benchmark stops at the first error
answer: any error, or a failed run, fails the section."""

import csv
import io
import os
import subprocess

import benchlib
from benchlib import BenchError, median, spread_pct

COLUMNS = ["test", "pipeline", "conns", "server", "rps_median", "cpu_us_per_req", "p50_us",
           "p99_us", "spread_pct", "requests", "rounds", "noisy_rounds", "mode", "date"]
SERVERS = ["kv_server", "redis-server"]
TESTS = ["set", "get"]
PIPELINES = [1, 16]
CONNS = 50
KEYS = 100000
# requests per second each workload runs at, about: sizes a run to the mode's seconds
RATE_GUESS = {1: 60000, 16: 400000}
TARGET = 0.80  # kv_server's CPU per request against redis-server's, at most


def redis_config(out_dir, port):
    """A configuration for redis-server in the build directory."""
    path = os.path.join(out_dir, "redis-bench.conf")
    with open(path, "w") as f:
        f.write(f"port {port}\nbind 127.0.0.1\nprotected-mode yes\nsave \"\"\nappendonly no\n"
                f"daemonize no\nio-threads 1\nlogfile \"\"\nloglevel warning\n"
                f"dir {os.path.abspath(out_dir)}\n")
    return path


def start_servers(r):
    kv = os.path.join(r.build, "docs", "examples", "kv_server")
    if not os.path.exists(kv):
        raise BenchError(f"no {kv}: build the examples (meson -Dexamples=enabled)")
    port = benchlib.free_port()
    servers = {
        "kv_server": benchlib.Server(r.pin.server + [kv, "--port", "0", "--threads", "1"],
                                     name="kv_server"),
        "redis-server": benchlib.Server(r.pin.server + ["redis-server", redis_config(r.out_dir, port)],
                                        name="redis-server", port=port),
    }
    r.servers += servers.values()
    return servers


def bench_argv(r, port, test, pipeline, n):
    return r.pin.load + ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", str(CONNS),
                         "-n", str(n), "-r", str(KEYS), "-d", "3", "-P", str(pipeline), "-t", test,
                         "--csv"]


def parse_csv(out):
    """redis-benchmark --csv: one row per test, latencies in ms."""
    rows = list(csv.DictReader(io.StringIO(out[out.index('"test"'):])))
    if len(rows) != 1:
        raise BenchError(f"redis-benchmark: unexpected output:\n{out}")
    return rows[0]


def one_round(r, s, test, pipeline, n):
    argv = bench_argv(r, s.port, test, pipeline, n)

    def measure():
        rc, out, err, _, other, srv = r.run_child(argv, 600, [s])
        if rc != 0 or "rror" in out + err or '"test"' not in out:
            raise BenchError(f"redis-benchmark against {s.name} failed ({' '.join(argv)}):\n{out}{err}")
        row = parse_csv(out)
        return {"rps": float(row["rps"]), "cpu_us": srv * 1e6 / n, "p50": float(row["p50_latency_ms"]) * 1e3,
                "p99": float(row["p99_latency_ms"]) * 1e3, "other_cpu_s": other}
    return r.retry(measure, n / RATE_GUESS[pipeline])


class Kv:
    """The kv section of make bench: kv.csv's rows (run below)."""

    def kv(self):
        self.kv_rows = run(self)


def run(r):
    """The section: the rows of kv.csv (empty when the tools are missing)."""
    r.say(f"== application: kv_server (coring, 1 thread) vs redis-server under redis-benchmark, "
          f"{CONNS} connections, {KEYS} keys")
    if not (r.have("redis-server", "the application rows") and r.have("redis-benchmark", "the application rows")):
        return []
    ver = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip()
    servers = start_servers(r)
    for s in servers.values():  # warm-up: the keys in place
        rc, out, err, _, _, _ = r.run_child(bench_argv(r, s.port, "set,get", 1, 20000), 600, [s])
        if rc != 0 or "rror" in out + err:
            raise BenchError(f"redis-benchmark against {s.name} failed:\n{out}{err}")
    rows = []
    for pipeline in PIPELINES:
        for test in TESTS:
            n = max(20000, int(RATE_GUESS[pipeline] * r.m["secs"]))
            r.progress(f"{'kv %s P%d' % (test, pipeline):<18}")
            res = {name: [] for name in servers}
            for rnd in range(r.m["rounds"]):
                for name in (SERVERS if rnd % 2 == 0 else SERVERS[::-1]):
                    res[name].append(one_round(r, servers[name], test, pipeline, n))
                    r.progress(".")
            r.progress("\n")
            for name in SERVERS:
                rs = res[name]
                rps = [x["rps"] for x in rs]
                rows.append({"test": test, "pipeline": pipeline, "conns": CONNS, "server": name,
                             "rps_median": round(median(rps)),
                             "cpu_us_per_req": round(median([x["cpu_us"] for x in rs]), 3),
                             "p50_us": round(median([x["p50"] for x in rs]), 1),
                             "p99_us": round(median([x["p99"] for x in rs]), 1),
                             "spread_pct": round(spread_pct(rps), 1), "requests": n,
                             "rounds": len(rs), "noisy_rounds": sum(x["noisy"] for x in rs),
                             "mode": r.mode, "date": r.date})
    for s in servers.values():
        r.stop(s)
    if ver:
        r.say(ver)
    r.say(table(rows))
    r.say()
    return rows


def row_of(rows, test, pipeline, server):
    for x in rows:
        if x["test"] == test and x["pipeline"] == pipeline and x["server"] == server:
            return x
    return None


def table(rows):
    lines = [f"{'workload':<16} {'metric':<13}{'kv_server':>12}{'redis-server':>14}{'kv/redis':>10}"]
    for pipeline in PIPELINES:
        for test in TESTS:
            a, b = row_of(rows, test, pipeline, "kv_server"), row_of(rows, test, pipeline, "redis-server")
            if not (a and b):
                continue
            w = f"{test.upper()} {CONNS}c" + (f" -P {pipeline}" if pipeline > 1 else "")
            for i, (k, label, fmt) in enumerate([("cpu_us_per_req", "CPU us/req", "{:.2f}"),
                                                 ("rps_median", "req/s", "{:.0f}"),
                                                 ("p99_us", "p99 us", "{:.0f}"),
                                                 ("spread_pct", "spread %", "{:.1f}")]):
                ratio = f"{a[k] / b[k]:.2f}" if b[k] else "-"
                lines.append(f"{w if i == 0 else '':<16} {label:<13}{fmt.format(a[k]):>12}"
                             f"{fmt.format(b[k]):>14}{ratio:>10}")
            noisy = a["noisy_rounds"] + b["noisy_rounds"]
            if noisy:
                lines.append(f"{'':<16} ({noisy} noisy round(s) kept)")
    return "\n".join(lines)


def targets(rows):
    out = []
    for pipeline in PIPELINES:
        for test in TESTS:
            a, b = row_of(rows, test, pipeline, "kv_server"), row_of(rows, test, pipeline, "redis-server")
            if a and b and b["cpu_us_per_req"]:
                q = a["cpu_us_per_req"] / b["cpu_us_per_req"]
                out.append(f"kv {test.upper()} {CONNS}c P{pipeline}: CPU/req kv_server/redis-server {q:.2f} "
                           f"(<= {TARGET:.2f}: {'met' if q <= TARGET else 'MISSED'}); "
                           f"req/s {a['rps_median'] / b['rps_median']:.2f}")
    return out
