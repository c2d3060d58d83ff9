#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""User-space cost per request of the echo servers, under callgrind.

    bench/runner/sections/callgrind.py [--bench-dir build-release/bench]
                                       [--servers a,b] [--conns 1,50,500] [--requests N]
                                       [--functions K] [--csv FILE]

Each server runs under `valgrind --tool=callgrind --cache-sim=yes` twice
per connection count; echo_load (native, not under valgrind) sends exactly
N/4 requests in the first run and N in the second (--count: the same
number per connection, then a close). Startup, accepting and closing the
connections and the shutdown are the same in both runs, so the difference
of the two runs divided by the difference in requests is the cost of one
request: instructions (Ir), data reads + writes (Dr + Dw) and simulated
L1 data misses (D1mr + D1mw). Only user space is counted (the kernel's
TCP and io_uring work is not). Instruction counts do not depend on how busy
the machine is; how many completions a loop turn batches does, a little.
--functions K also prints, per server and connection count, the K
functions with the most instructions per request (self cost, difference
of the two runs).
"""

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile

if __name__ == "__main__":  # run on its own: benchlib from bench/runner/, not this folder
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

SERVERS = ["echo_coring", "echo_coring_stream", "echo_uring", "echo_uring_mshot", "echo_epoll", "echo_libuv"]
LABELS = {"echo_coring": "coring", "echo_coring_stream": "coring stream", "echo_uring": "raw uring",
          "echo_uring_mshot": "raw mshot", "echo_epoll": "epoll", "echo_libuv": "libuv"}
PEERS = ["echo_libuv"]  # built only where the peer's library is installed
COLUMNS = ["server", "conns", "requests", "ir_per_req", "data_per_req", "d1_miss_per_req"]


def summary(path):
    """The events and their totals of a callgrind output file."""
    events = totals = None
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("summary:") or (totals is None and line.startswith("totals:")):
                totals = [int(x) for x in line.split()[1:]]
    if not events or not totals:
        raise benchlib.BenchError(f"no totals in {path}")
    return dict(zip(events, totals))


def functions(path):
    """Self instructions per function (callgrind_annotate, inclusive off)."""
    p = subprocess.run(["callgrind_annotate", "--threshold=100", "--show=Ir", "--inclusive=no", path],
                       capture_output=True, text=True)
    out = {}
    for line in p.stdout.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+\([ \d.]+%\)\s+(\S.*?)\s*(\[.*\])?$", line)
        if m and "PROGRAM TOTALS" not in line:
            name = m.group(2)
            name = name.split(":", 1)[1] if ":" in name else name
            out[name] = out.get(name, 0) + int(m.group(1).replace(",", ""))
    return out


def one_run(bench_dir, pin, server, conns, per_conn, tmp, want_functions):
    out = os.path.join(tmp, f"{server}.{conns}.{per_conn}.cg")
    port = benchlib.free_port()
    argv = pin.server + ["valgrind", "--tool=callgrind", "--cache-sim=yes",
                         f"--callgrind-out-file={out}",
                         benchlib.program(bench_dir, server), "--port", str(port)]
    srv = benchlib.Server(argv, name=server, start_timeout=60, port=port)
    try:
        load = benchlib.echo_load(bench_dir, pin, srv.port, conns, count=per_conn, seconds=600,
                                  timeout=900)
    except benchlib.BenchError:
        srv.kill()
        raise
    srv.stop(timeout=120)
    if load.get("requests") != conns * per_conn:
        raise benchlib.BenchError(f"{server}: {load.get('requests')} requests, "
                                  f"expected {conns * per_conn}")
    res = summary(out), (functions(out) if want_functions else None)
    os.unlink(out)
    return res


def measure(bench_dir, pin, server, conns, requests, want_functions=False):
    """Per-request user-space cost of server at conns connections."""
    k2 = max(4, -(-requests // conns))
    k1 = max(1, k2 // 4)
    with tempfile.TemporaryDirectory(prefix="coring-cg-") as tmp:
        a, fa = one_run(bench_dir, pin, server, conns, k1, tmp, want_functions)
        b, fb = one_run(bench_dir, pin, server, conns, k2, tmp, want_functions)
    n = conns * (k2 - k1)

    def per(*events):
        return sum(b.get(e, 0) - a.get(e, 0) for e in events) / n

    row = {"server": server, "conns": conns, "requests": n,
           "ir_per_req": per("Ir"), "data_per_req": per("Dr", "Dw"),
           "d1_miss_per_req": per("D1mr", "D1mw")}
    if want_functions:
        row["functions"] = sorted(((fb.get(k, 0) - fa.get(k, 0)) / n, k)
                                  for k in set(fa) | set(fb))[::-1]
    return row


def table(rows):
    """The instruction-count table, a row per server, ratios to raw uring
    and to libuv."""
    conns = sorted({r["conns"] for r in rows})
    servers = [s for s in SERVERS if any(r["server"] == s for r in rows)]
    by = {(r["server"], r["conns"]): r for r in rows}
    lines = []
    cols = "".join(f"{str(c) + (' conn' if c == 1 else ' conns'):>12}" for c in conns)
    for metric, label, fmt in (("ir_per_req", "instructions", "{:.0f}"),
                               ("data_per_req", "data accesses", "{:.0f}"),
                               ("d1_miss_per_req", "L1d misses (sim.)", "{:.1f}")):
        lines.append(f"{label + ' / request':<30}" + cols)
        for s in servers:
            cells = []
            for c in conns:
                r = by.get((s, c))
                cells.append(fmt.format(r[metric]) if r else "-")
            lines.append(f"  {LABELS.get(s, s):<28}" + "".join(f"{x:>12}" for x in cells))
        for mine, raw, label in (("echo_coring", "echo_uring", "coring / raw uring"),
                                 ("echo_coring_stream", "echo_uring_mshot", "coring stream / raw mshot"),
                                 ("echo_coring", "echo_libuv", "coring / libuv")):
            # libuv's simulated L1d misses read near 0 per request: a ratio to them says nothing
            if mine in servers and raw in servers and not (raw == "echo_libuv" and metric == "d1_miss_per_req"):
                cells = []
                for c in conns:
                    a, b = by.get((mine, c)), by.get((raw, c))
                    cells.append(f"{a[metric] / b[metric]:.2f}x" if a and b and b[metric] else "-")
                lines.append(f"  {label:<28}" + "".join(f"{x:>12}" for x in cells))
    return "\n".join(lines)


class Callgrind:
    """The callgrind section of make bench: callgrind.csv's rows and their table."""

    def callgrind(self):
        self.say("== user-space cost per request (callgrind, echo 64 B; difference of two runs)")
        if not self.have("valgrind", "instruction counts"):
            return
        servers = [s for s in SERVERS if s not in PEERS or os.path.exists(benchlib.program(self.bench, s))]
        for s in PEERS:
            if s not in servers:
                self.say(f"bench: {s} not built: its row skipped (make bench builds it: tools/deps.sh bench)")
        for c in (1, 50, 500):
            self.progress(f"{'callgrind %dc' % c:<18}")
            for s in servers:
                self.cg_rows.append(measure(self.bench, self.pin, s, c, self.m["cg_requests"]))
                self.progress(".")
            self.progress("\n")
        self.say(table(self.cg_rows))
        self.say()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench-dir", default="build-release/bench")
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--conns", default="1,50,500")
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--functions", type=int, default=0)
    ap.add_argument("--csv")
    args = ap.parse_args(argv)
    pin = benchlib.Pinning()
    benchlib.raise_nofile()
    rows = []
    for c in [int(x) for x in args.conns.split(",")]:
        for s in args.servers.split(","):
            rows.append(measure(args.bench_dir, pin, s, c, args.requests, args.functions > 0))
            print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(table(rows))
    if args.functions:
        for r in rows:
            print(f"\n{r['server']}, {r['conns']} conns: instructions per request by function (self)")
            for cost, name in r["functions"][:args.functions]:
                print(f"  {cost:8.1f}  {name}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except benchlib.BenchError as e:
        print(f"callgrind: {e}", file=sys.stderr)
        sys.exit(1)
