#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Two builds of the coring echo server, side by side: CPU per request.

    bench/runner/ab_echo.py BENCH_DIR_A BENCH_DIR_B [--conns 50] [--rounds 7]
                            [--seconds 1.0] [--server echo_coring]

Both servers start once (pinned as in make bench: servers on one CPU, the
load on another) and take turns under echo_load, the order alternating
every round; each round measures the server's CPU time over the window
divided by the requests completed in it (echo_load --server-pid). Prints
each build's median, the rounds' range, and the ratio B/A round by round:
a ratio range that straddles 1.00 is a tie. For a change to the library
measured against the library before it (docs/benchmarks.md: A/Bs).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--server", default="echo_coring")
    o = ap.parse_args()
    benchlib.raise_nofile()
    pin = benchlib.Pinning()
    servers = []
    try:
        for d in (o.a, o.b):
            port = benchlib.free_port()
            argv = pin.server + [benchlib.program(d, o.server), "--port", str(port)]
            servers.append(benchlib.Server(argv, name=d, port=port))
        cpu = [[], []]
        for r in range(o.rounds):
            order = (0, 1) if r % 2 == 0 else (1, 0)
            for i in order:
                s = servers[i]
                d = benchlib.echo_load(o.a, pin, s.port, o.conns, seconds=o.seconds,
                                       server_pid=s.pid)
                cpu[i].append(d["server_us_per_req"])
        ratios = [b / a for a, b in zip(cpu[0], cpu[1])]
        for name, v in ((o.a, cpu[0]), (o.b, cpu[1])):
            print(f"{name}: {benchlib.median(v):.3f} us/req [{min(v):.3f}-{max(v):.3f}]")
        print(f"B/A: {benchlib.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}] "
              f"({o.rounds} rounds, {o.conns} conns, {pin.note})")
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main()
