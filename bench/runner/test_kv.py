#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/runner/run.py's section kv (make test, suite "bench"), QUICK:

- redis-benchmark's default list (what it runs with no -t) is the one the
  section knows (kv.DEFAULT_LIST);
- kv_server and redis-server under redis-benchmark's default list: every
  test of it, plain and -P 16, has a row of numbers for both servers in
  kv.csv and a line in the table, and the target's line judges them all;
- a server that answers one test with an error and another not at all (a
  stand-in for kv_server, this file run with --fake): those two tests are
  its errors in the rows, the table and the target, the others numbers;
- without redis-server the section says so and measures kv_server alone;
- LPOP and RPOP run as many requests as LPUSH and RPUSH before them.

    test_kv.py BUILD_DIR                        (its kv_server built)
    test_kv.py --fake [--error CMD] [--silent CMD]
        the stand-in: +OK to every command (CONFIG GET: a pair), Redis's
        unknown-command error to CMD, no answer to the other CMD

Runs go to build directories of the test's own (a link to kv_server), so a
bench running beside it cannot overwrite its files; exit 77 without
redis-benchmark.
"""

import argparse
import csv
import io
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import run  # noqa: E402
from sections import kv  # noqa: E402

RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run.py")
PIPELINES = [1, 16]  # plain and -P 16, what the section must run


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def expect(text, *words):
    for w in words:
        if w not in text:
            fail(f"{w!r} not in:\n{text}")


# ---- the stand-in -----------------------------------------------------------------
def command(buf):
    """The first whole command of buf (a RESP array or an inline line) and
    the rest of buf; (None, buf) while it is incomplete."""
    end = buf.find(b"\r\n")
    if end < 0:
        return None, buf
    if buf[:1] != b"*":
        return buf[:end].split(), buf[end + 2:]
    args, pos = [], end + 2
    for _ in range(int(buf[1:end])):
        e = buf.find(b"\r\n", pos)
        if e < 0 or len(buf) < e + 4 + int(buf[pos + 1:e]):
            return None, buf
        n = int(buf[pos + 1:e])
        args.append(buf[e + 2:e + 2 + n])
        pos = e + 4 + n
    return args, buf[pos:]


def fake(error, silent):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stopped as a server is: exit 0
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(512)
    print(f"port={ls.getsockname()[1]}", flush=True)
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ)
    pending = {}
    while True:
        for key, _ in sel.select():
            if key.fileobj is ls:
                c, _ = ls.accept()
                sel.register(c, selectors.EVENT_READ)
                pending[c] = b""
                continue
            c = key.fileobj
            try:
                data = c.recv(65536)
            except ConnectionResetError:  # redis-benchmark killed at its time limit
                data = b""
            if not data:
                sel.unregister(c)
                c.close()
                del pending[c]
                continue
            buf, out = pending[c] + data, []
            while True:
                args, buf = command(buf)
                if args is None:
                    break
                name = args[0].decode().upper() if args else ""
                if name == "CONFIG":
                    out.append(b"*2\r\n$4\r\nsave\r\n$0\r\n\r\n")
                elif name == error:
                    out.append(f"-ERR unknown command '{args[0].decode()}'\r\n".encode())
                elif name != silent:
                    out.append(b"+OK\r\n")
            pending[c] = buf
            c.sendall(b"".join(out))


# ---- the checks -------------------------------------------------------------------
def build_dir(tmp, build):
    """A build directory of the test's own: bench/ (run.py wants it) and
    kv_server linked from build."""
    os.makedirs(os.path.join(tmp, "bench"))
    os.makedirs(os.path.join(tmp, "docs", "examples"))
    os.symlink(os.path.abspath(os.path.join(build, "docs", "examples", "kv_server")),
               os.path.join(tmp, "docs", "examples", "kv_server"))
    return tmp


def numbers(row, what):
    """The row has requests/s and a CPU per request, and no error."""
    if row is None:
        fail(f"no row for {what}")
    try:
        ok = not row["error"] and float(row["rps_median"]) > 0 and float(row["cpu_us_per_req"]) >= 0
    except ValueError:
        ok = False
    if not ok:
        fail(f"{what}: not a row of numbers: {row}")


def table_line(lines, title, pipeline):
    """The table's line of a test."""
    got = [x for x in lines if x.startswith(f"{kv.label(title):<17}{pipeline:>3}")]
    if len(got) != 1:
        fail(f"{len(got)} table lines for {title} P{pipeline}:\n" + "\n".join(lines))
    return got[0]


def whole_list(build):
    """run.py's kv section, QUICK: every default test, both servers, numbers."""
    with tempfile.TemporaryDirectory(prefix="coring-test-kv-") as tmp:
        b = build_dir(tmp, build)
        env = dict(os.environ, QUICK="1", BENCH_SECTIONS="kv", BENCH_RETRIES="0")
        for k in ("ROUNDS", "SECONDS_PER_ROUND"):
            env.pop(k, None)
        p = subprocess.run([sys.executable, "-B", RUN, b], env=env, capture_output=True, text=True, timeout=840)
        print(p.stdout)
        if p.returncode != 0:
            fail(f"run.py exited {p.returncode}:\n{p.stderr[-3000:]}")
        with open(os.path.join(b, "bench-results", "kv.csv")) as f:
            rows = [dict(x, pipeline=int(x["pipeline"])) for x in csv.DictReader(f)]
        lines = p.stdout.splitlines()
    servers = kv.SERVERS if shutil.which("redis-server") else ["kv_server"]
    for pipeline in PIPELINES:
        for title in kv.DEFAULT_LIST:
            for s in servers:
                numbers(kv.row_of(rows, title, pipeline, s), f"{s} {title} P{pipeline}")
            if "error" in table_line(lines, title, pipeline):
                fail(f"an error in the table for {title} P{pipeline}")
        target = [x for x in lines if x.startswith(f"kv 50c P{pipeline}: CPU/req kv_server/redis-server <= 1.00 "
                                                   f"in each of {len(kv.DEFAULT_LIST)} tests: ")]
        # no verdict with both servers run: only for a CPU time read 0 (a
        # QUICK run's window under a clock tick, on a busy machine)
        if len(target) != 1 or ("no verdict" in target[0] and servers == kv.SERVERS and
                                not ("no verdict: CPU/req of " in target[0] and " read 0 " in target[0])):
            fail(f"the target's line for P{pipeline}: {target}")
    if len(rows) != len(kv.DEFAULT_LIST) * len(PIPELINES) * len(servers):
        fail(f"{len(rows)} rows")
    return servers


def pops_match_pushes():
    """LPOP and RPOP run as many requests as LPUSH and RPUSH, which run
    before them (docs/benchmarks.md): the list they pop ("mylist") is never
    empty, however much faster the pops are."""
    for push, pop in (("LPUSH", "LPOP"), ("RPUSH", "RPOP")):
        if kv.DEFAULT_LIST.index(push) > kv.DEFAULT_LIST.index(pop):
            fail(f"{pop} runs before {push}")
        for pipeline in PIPELINES:
            rates = {push: 40000.0, pop: 90000.0}
            a, b = kv.requests(rates, push, pipeline, 1.0), kv.requests(rates, pop, pipeline, 1.0)
            if a != b or a != max(kv.MIN_REQUESTS[pipeline], 40000):
                fail(f"P{pipeline}: {push} {a} requests, {pop} {b}")


def default_list():
    """redis-benchmark with no -t, against the stand-in: its tests are
    kv.DEFAULT_LIST, in that order."""
    s = benchlib.Server([sys.executable, "-B", os.path.abspath(__file__), "--fake"], name="stand-in")
    try:
        p = subprocess.run(["redis-benchmark", "-p", str(s.port), "-c", "5", "-n", "200", "--csv"],
                           capture_output=True, text=True, timeout=120)
    finally:
        s.stop()
    got = [x["test"] for x in csv.DictReader(io.StringIO(p.stdout))]
    if got != kv.DEFAULT_LIST:
        fail(f"redis-benchmark's default list is {got}, kv.py's {kv.DEFAULT_LIST}")


def section(tmp, titles, error=None, silent=None, path=None):
    """The kv section run here with the stand-in in kv_server's place: its
    rows and the lines it said (the targets' with them)."""
    os.environ["QUICK"] = "1"
    os.environ["BENCH_RETRIES"] = "0"  # the rows' shape is checked, not their figures
    r = run.Run(tmp)
    r.say = lambda text="": r.lines.append(text)
    argv = [sys.executable, "-B", os.path.abspath(__file__), "--fake"] + \
        (["--error", error] if error else []) + (["--silent", silent] if silent else [])
    old = os.environ["PATH"]
    try:
        if path is not None:
            os.environ["PATH"] = path
        rows = kv.run(r, titles, argv, timeout=3)
    finally:
        os.environ["PATH"] = old
        r.cleanup()
    lines = "\n".join(r.lines).splitlines() + kv.targets(rows)
    print("\n".join(lines))
    return rows, lines


def errors_shown(build):
    """An error answer and a test left unanswered: errors, not numbers."""
    titles = ["SET", "LPUSH", "RPOP", "GET"]
    with tempfile.TemporaryDirectory(prefix="coring-test-kv-") as tmp:
        rows, lines = section(tmp, titles, error="LPUSH", silent="RPOP")
    for pipeline in PIPELINES:
        for title in titles:
            numbers(kv.row_of(rows, title, pipeline, "redis-server"), f"redis-server {title} P{pipeline}")
        for title in ("SET", "GET"):
            numbers(kv.row_of(rows, title, pipeline, "kv_server"), f"the stand-in's {title} P{pipeline}")
        for title, why in (("LPUSH", "ERR unknown command 'LPUSH'"), ("RPOP", "no end in")):
            row = kv.row_of(rows, title, pipeline, "kv_server")
            if not row or why not in row["error"] or row.get("rps_median", "") != "":
                fail(f"the stand-in's {title} P{pipeline}: not its error ({why}): {row}")
            expect(table_line(lines, title, pipeline), " error ")
            said = [x for x in lines if x.startswith(f"  kv_server {title} P{pipeline}: ")]
            if len(said) != 1 or why not in said[0]:
                fail(f"the stand-in's {title} P{pipeline}: not among the errors listed: {said}")
        expect("\n".join(lines), f"kv 50c P{pipeline}: CPU/req kv_server/redis-server <= 1.00 in each of 4 tests: "
               f"MISSED: error in kv_server LPUSH, kv_server RPOP")


def without_redis():
    """No redis-server on PATH: said, kv_server's column alone, no verdict."""
    with tempfile.TemporaryDirectory(prefix="coring-test-kv-") as tmp:
        bin_dir = os.path.join(tmp, "bin")
        os.makedirs(bin_dir)
        for tool in ("redis-benchmark", "taskset"):
            os.symlink(shutil.which(tool), os.path.join(bin_dir, tool))
        rows, lines = section(tmp, ["SET"], path=bin_dir)
    expect("\n".join(lines), "bench: redis-server not found: its column of the application rows skipped")
    for pipeline in PIPELINES:
        numbers(kv.row_of(rows, "SET", pipeline, "kv_server"), f"the stand-in's SET P{pipeline}")
        if kv.row_of(rows, "SET", pipeline, "redis-server"):
            fail("a redis-server row without redis-server")
        expect(table_line(lines, "SET", pipeline), "  -  ")
        expect("\n".join(lines), f"kv 50c P{pipeline}: CPU/req kv_server/redis-server <= 1.00 in each of 1 tests: "
               "no verdict: redis-server not run")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?")
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--error")
    ap.add_argument("--silent")
    a = ap.parse_args()
    if a.fake:
        return fake(a.error, a.silent)
    if not shutil.which("redis-benchmark") or not shutil.which("taskset"):
        print("SKIP: no redis-benchmark (redis-tools)")
        return 77
    pops_match_pushes()
    default_list()
    servers = whole_list(a.build)
    if "redis-server" in servers:
        errors_shown(a.build)
    without_redis()
    print(f"ok: {len(kv.DEFAULT_LIST)} default tests x {len(PIPELINES)} pipelines with numbers for "
          f"{' and '.join(servers)}; an error answer and a test unanswered shown as errors; without "
          f"redis-server said, kv_server alone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
