# SPDX-License-Identifier: MIT
"""The application row of make bench (bench/runner/run.py's section "kv"): the
example key-value server (docs/examples/kv/, --threads 1) against
redis-server, both under redis-benchmark's default test list, as
docs/benchmarks.md describes.

Both servers are pinned to the servers' CPU and redis-benchmark to the
load CPU, as every other server and load of run.py. redis-server runs from
a configuration written into the build directory: no persistence (no RDB
save, no AOF), one I/O thread, loopback only. Each pipeline (none, then
-P 16) starts with a warm-up: redis-benchmark with no -t (its default
list, a few requests a test) against each server, which also gives each
test's rate, to size its runs to half a round. Then each test of the list
is a redis-benchmark run of its own, 50 connections, keys drawn from
100,000 (-r), 3-byte values; per round the servers take turns, the order
alternating every round. CPU per request is the server's CPU time (all its
threads, /proc) over the run divided by the requests it made; requests/s
and the latencies are redis-benchmark's own.

A test that fails against a server (redis-benchmark exits with an error,
says "Error", prints no result, or does not end: fewer answers than
requests) is that server's error in the table and in kv.csv, and the
section goes on with the next test. Without redis-server, kv_server runs
alone and the section says so."""

import csv
import io
import os
import subprocess

import benchlib
from benchlib import BenchError, median, ratio_range, spread_pct

COLUMNS = ["test", "pipeline", "conns", "server", "rps_median", "rps_min", "rps_max", "cpu_us_per_req",
           "cpu_us_rounds", "p50_us", "p99_us", "spread_pct", "requests", "rounds", "noisy_rounds",
           "error", "mode", "date"]
SERVERS = ["kv_server", "redis-server"]
# redis-benchmark's default test list (what it runs without -t), in its order
# and as it names each test in its --csv output
DEFAULT_LIST = ["PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "LPUSH", "RPUSH", "LPOP", "RPOP", "SADD",
                "HSET", "SPOP", "ZADD", "ZPOPMIN", "LPUSH (needed to benchmark LRANGE)",
                "LRANGE_100 (first 100 elements)", "LRANGE_300 (first 300 elements)",
                "LRANGE_500 (first 500 elements)", "LRANGE_600 (first 600 elements)", "MSET (10 keys)"]
# the pops run as many requests as the pushes before them: the list they
# pop is never empty
SIZE_AS = {"LPOP": "LPUSH", "RPOP": "RPUSH"}
PIPELINES = [1, 16]
CONNS = 50
KEYS = 100000
MIN_REQUESTS = {1: 1000, 16: 8000}  # a run's requests, at least (and the warm-up's, a test)
TIMEOUT = 30  # seconds a run may take past ten times its expected length: then it failed
TARGET = 0.80  # kv_server's CPU per request against redis-server's for SET and GET, at most


def label(title):
    """The table's name of a test of DEFAULT_LIST."""
    return "LPUSH for LRANGE" if "needed" in title else title.split(" (")[0]


def test_args(title):
    """redis-benchmark's arguments that run the test title alone. LRANGE_N
    is the command the default list sends: -t lrange_N would run its
    LPUSH (needed to benchmark LRANGE) first, inside the same run."""
    name = label(title)
    if name.startswith("LRANGE_"):
        return ["LRANGE", "mylist", "0", str(int(name[7:]) - 1)]
    return ["-t", "lpush" if "needed" in title else name.lower()]


def redis_config(out_dir, port):
    """A configuration for redis-server in the build directory."""
    path = os.path.join(out_dir, "redis-bench.conf")
    with open(path, "w") as f:
        f.write(f"port {port}\nbind 127.0.0.1\nprotected-mode yes\nsave \"\"\nappendonly no\n"
                f"daemonize no\nio-threads 1\nlogfile \"\"\nloglevel warning\n"
                f"dir {os.path.abspath(out_dir)}\n")
    return path


def start_servers(r, kv_argv=None):
    """kv_server (or what kv_argv runs in its place), and redis-server where
    it is installed (if not, said, and its column is left out)."""
    if kv_argv is None:
        kv = os.path.join(r.build, "docs", "examples", "kv_server")
        if not os.path.exists(kv):
            raise BenchError(f"no {kv}: build the examples (meson -Dexamples=enabled)")
        kv_argv = [kv, "--port", "0", "--threads", "1"]
    servers = {"kv_server": benchlib.Server(r.pin.server + kv_argv, name="kv_server")}
    r.servers.append(servers["kv_server"])
    if r.have("redis-server", "its column of the application rows"):
        port = benchlib.free_port()
        servers["redis-server"] = benchlib.Server(r.pin.server + ["redis-server", redis_config(r.out_dir, port)],
                                                  name="redis-server", port=port)
        r.servers.append(servers["redis-server"])
    return servers


def bench_argv(r, port, pipeline, n, args):
    return r.pin.load + ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", str(CONNS),
                         "-n", str(n), "-r", str(KEYS), "-d", "3", "-P", str(pipeline), "--csv"] + args


def run_bench(r, s, argv, timeout):
    """One redis-benchmark run against server s: (its --csv rows, the
    server's CPU seconds, other processes' CPU seconds, the error or None).
    The rows are there up to the error, if any."""
    try:
        rc, out, err, _, other, srv = r.run_child(argv, timeout, [s])
    except BenchError:  # killed at the time limit
        return [], 0.0, 0.0, f"no end in {timeout:.0f} s (fewer answers than requests)"
    rows = list(csv.DictReader(io.StringIO(out[out.index('"test"'):]))) if '"test"' in out else []
    said = [x.strip() for x in (err + out).splitlines() if "rror" in x]
    if said or rc != 0:
        return rows, srv, other, said[0] if said else f"exit status {rc}: {(err + out).strip()[-200:]}"
    return rows, srv, other, None


def one_round(r, s, title, pipeline, n, window, timeout):
    argv = bench_argv(r, s.port, pipeline, n, test_args(title))

    def measure():
        rows, srv, other, error = run_bench(r, s, argv, timeout)
        if error is None and len(rows) != 1:
            error = f"no result: {rows}"
        if error:
            return {"error": error, "other_cpu_s": 0.0}
        row = rows[0]
        return {"rps": float(row["rps"]), "cpu_us": srv * 1e6 / n, "p50": float(row["p50_latency_ms"]) * 1e3,
                "p99": float(row["p99_latency_ms"]) * 1e3, "other_cpu_s": other}
    return r.retry(measure, window)


def warm_up(r, servers, pipeline, timeout):
    """redis-benchmark's default list against each server, a few requests a
    test: the data in place, and each test's rate (the slower server's).
    The list redis-benchmark ran must be DEFAULT_LIST; a server's failing
    warm-up is left to its test's runs to show."""
    rates = {}
    for name in SERVERS:
        if name not in servers:
            continue
        rows, _, _, error = run_bench(r, servers[name], bench_argv(r, servers[name].port, pipeline,
                                                                   MIN_REQUESTS[pipeline], []), 10 * timeout)
        titles = [x["test"] for x in rows]
        if error is None and titles != DEFAULT_LIST:
            raise BenchError(f"redis-benchmark's default list is not the one kv.py knows:\n{titles}")
        for x in rows:
            rates[x["test"]] = min(rates.get(x["test"], float("inf")), float(x["rps"]))
    return rates


def requests(rates, title, pipeline, secs):
    """A test's requests per run: its rate times secs (a pop: its push's)."""
    return max(MIN_REQUESTS[pipeline], int(rates.get(SIZE_AS.get(title, title), 0) * secs))


def summary(title, pipeline, server, rs, n, r):
    """The kv.csv row of a test against a server, from its rounds (the last
    one an error, or none)."""
    row = {"test": title, "pipeline": pipeline, "conns": CONNS, "server": server, "requests": n,
           "rounds": len(rs), "noisy_rounds": sum(x["noisy"] for x in rs), "mode": r.mode, "date": r.date}
    if rs and "error" in rs[-1]:
        return dict(row, error=rs[-1]["error"])
    rps, cpu = [x["rps"] for x in rs], [x["cpu_us"] for x in rs]
    return dict(row, rps_median=round(median(rps)), rps_min=round(min(rps)), rps_max=round(max(rps)),
                cpu_us_per_req=round(median(cpu), 3), cpu_us_rounds=" ".join(f"{c:.3f}" for c in cpu),
                p50_us=round(median([x["p50"] for x in rs]), 1), p99_us=round(median([x["p99"] for x in rs]), 1),
                spread_pct=round(spread_pct(rps), 1), error="")


class Kv:
    """The kv section of make bench: kv.csv's rows (run below)."""

    def kv(self):
        run(self)


def run(r, titles=DEFAULT_LIST, kv_argv=None, timeout=TIMEOUT):
    """The section: the rows of kv.csv, also kept as r.kv_rows (none when
    redis-benchmark is missing). The runner's tests (test_kv.py) pass the
    rest: titles, the tests of DEFAULT_LIST to run; kv_argv, what runs in
    kv_server's place; timeout, in place of TIMEOUT."""
    r.say(f"== application: kv_server (coring, 1 thread) vs redis-server under redis-benchmark's default "
          f"tests, {CONNS} connections, {KEYS} keys")
    if not r.have("redis-benchmark", "the application rows"):
        return []
    servers = start_servers(r, kv_argv)
    secs = r.m["secs"] / 2  # half a round a run: the list is 20 tests, twice
    rows = []
    for pipeline in PIPELINES:
        rates = warm_up(r, servers, pipeline, timeout)
        for title in titles:
            n = requests(rates, title, pipeline, secs)
            window = n / rates.get(title, n / secs)
            r.progress(f"{'kv %s P%d' % (label(title), pipeline):<24}")
            res = {name: [] for name in servers}
            for rnd in range(r.m["rounds"]):
                for name in (SERVERS if rnd % 2 == 0 else SERVERS[::-1]):
                    # a server's test stops at its first error
                    if name in servers and not (res[name] and "error" in res[name][-1]):
                        res[name].append(one_round(r, servers[name], title, pipeline, n, window,
                                                   timeout + 10 * window))
                        r.progress(".")
            r.progress("\n")
            rows += [summary(title, pipeline, name, res[name], n, r) for name in servers]
    if "redis-server" in servers:
        r.say(subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip())
    r.say(table(rows, titles))
    r.say()
    r.kv_rows = rows  # kept when a server's stop fails below
    for s in servers.values():
        r.stop(s)
    return rows


def row_of(rows, test, pipeline, server):
    for x in rows:
        if x["test"] == test and x["pipeline"] == pipeline and x["server"] == server:
            return x
    return None


def pair(rows, title, pipeline):
    """kv_server's and redis-server's rows of a test (None where not run)."""
    return row_of(rows, title, pipeline, "kv_server"), row_of(rows, title, pipeline, "redis-server")


def cpu_rounds(row):
    return [float(c) for c in row["cpu_us_rounds"].split()]


def ratios(a, b, key):
    """a's key over b's, and the range of a/b over the rounds (CPU only:
    the servers ran in the same rounds, in turn): "0.93 [0.90-0.97]", or
    "-" where either failed, was not run, or read 0."""
    if not (a and b) or a["error"] or b["error"] or not b[key]:
        return "-"
    rng = ratio_range(cpu_rounds(a), cpu_rounds(b)) if key == "cpu_us_per_req" else None
    return f"{a[key] / b[key]:.2f}" + (f" [{rng[0]:.2f}-{rng[1]:.2f}]" if rng else "")


def table(rows, titles=DEFAULT_LIST):
    """One line a test and pipeline: CPU per request and requests/s of both
    servers, kv/redis (CPU: with the range of the rounds' ratios); "error"
    where a test failed (the errors are listed below), "-" where not run."""
    def cell(x, key, fmt):
        return "-" if x is None else "error" if x["error"] else fmt.format(x[key])
    lines = [f"{'':<20}{'CPU us/req':<39}{'req/s':<10}",
             f"{'test':<17}{'P':>3}{'kv_server':>11}{'redis':>8}  {'kv/redis [rounds]':<18}"
             f"{'kv_server':>11}{'redis':>9}{'kv/redis':>10}"]
    errors, noisy = [], 0
    for pipeline in PIPELINES:
        for title in titles:
            a, b = pair(rows, title, pipeline)
            if not (a or b):
                continue
            lines.append(f"{label(title):<17}{pipeline:>3}{cell(a, 'cpu_us_per_req', '{:.2f}'):>11}"
                         f"{cell(b, 'cpu_us_per_req', '{:.2f}'):>8}  {ratios(a, b, 'cpu_us_per_req'):<18}"
                         f"{cell(a, 'rps_median', '{:.0f}'):>11}{cell(b, 'rps_median', '{:.0f}'):>9}"
                         f"{ratios(a, b, 'rps_median'):>10}")
            for x in (a, b):
                if x and x["error"]:
                    errors.append(f"  {x['server']} {label(title)} P{pipeline}: {x['error']}")
                noisy += x["noisy_rounds"] if x else 0
    if noisy:
        lines.append(f"({noisy} noisy round(s) kept)")
    if errors:
        lines += ["errors:"] + errors
    return "\n".join(lines)


def targets(rows):
    out = []
    for pipeline in PIPELINES:
        # the first application round's target, SET and GET
        for test in ("SET", "GET"):
            a, b = pair(rows, test, pipeline)
            if a and b and not (a["error"] or b["error"]) and a["cpu_us_per_req"] and b["cpu_us_per_req"]:
                q = a["cpu_us_per_req"] / b["cpu_us_per_req"]
                out.append(f"kv {test} {CONNS}c P{pipeline}: CPU/req kv_server/redis-server {q:.2f} "
                           f"(<= {TARGET:.2f}: {'met' if q <= TARGET else 'MISSED'}); "
                           f"req/s {a['rps_median'] / b['rps_median']:.2f}")
        out += every_test_target(rows, pipeline)
    return out


def every_test_target(rows, pipeline):
    """The line of the target kv_server's CPU per request <= redis-server's in
    every test of the list: met, MISSED (the tests over, each with its
    rounds' range; any error), or no verdict (a server not run, a CPU
    per request read 0)."""
    pairs = [(title, *pair(rows, title, pipeline)) for title in DEFAULT_LIST]
    pairs = [p for p in pairs if p[1] or p[2]]
    if not pairs:
        return []
    what = f"kv {CONNS}c P{pipeline}: CPU/req kv_server/redis-server <= 1.00 in each of {len(pairs)} tests"
    failed = [f"{x['server']} {label(t)}" for t, a, b in pairs for x in (a, b) if x and x["error"]]
    if failed:
        return [f"{what}: MISSED: error in {', '.join(failed)}"]
    if any(b is None for _, _, b in pairs):
        return [f"{what}: no verdict: redis-server not run"]
    zero = [label(t) for t, a, b in pairs if not (a["cpu_us_per_req"] and b["cpu_us_per_req"])]
    if zero:
        return [f"{what}: no verdict: CPU/req of {', '.join(zero)} read 0 (under a clock tick in the window)"]
    q = {t: a["cpu_us_per_req"] / b["cpu_us_per_req"] for t, a, b in pairs}
    over = [f"{label(t)} {ratios(a, b, 'cpu_us_per_req')}" for t, a, b in pairs if q[t] > 1.0]
    top = max(q, key=q.get)
    if over:
        return [f"{what}: MISSED in {', '.join(over)}"]
    return [f"{what}: met (highest {label(top)} {ratios(*pair(rows, top, pipeline), 'cpu_us_per_req')})"]
