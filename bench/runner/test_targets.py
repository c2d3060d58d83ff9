#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/runner/run.py's targets for echo and file reads (make test, suite "bench"),
on rounds made up here and recorded as a run records them (add_row,
add_file_row): the echo verdict judges the default server against raw
liburing, the file verdict the default engine against fio (never the
`coring 1/enter` option, even when that one is better), and the bracket
gives the range of the ratio over the rounds, round by round.
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def echo_rounds(cpu):
    return [{"rps": 100000.0, "cpu_us": c, "p50": 50.0, "p99": 99.0, "noisy": 0} for c in cpu]


def file_rounds(iops):
    return [{"iops": float(i), "mb_s": i * 4096 / 1e6, "cpu_us": 20.0, "noisy": 0} for i in iops]


def targets(r):
    r.lines = []
    r.targets()
    return r.lines


def line(lines, start):
    got = [x for x in lines if x.startswith(start)]
    if len(got) != 1:
        fail(f"{len(got)} lines start with {start!r}:\n" + "\n".join(lines))
    return got[0]


def expect(text, *words):
    for w in words:
        if w not in text:
            fail(f"{w!r} not in: {text}")


def main():
    with tempfile.TemporaryDirectory() as build:
        os.environ.pop("ROUNDS", None)
        os.environ.pop("SECONDS_PER_ROUND", None)
        r = run.Run(build)
        r.say = lambda text="": r.lines.append(text)
        # 50 x 64 B: coring 2 % dearer in the median; the machine drifts
        # and both move with it, so round by round the ratio is 1.00 to
        # 1.02 (paired wrongly, 0.82 to 1.13)
        r.add_row("echo", 50, 64, "echo_coring", echo_rounds([6.6, 5.4, 6.12]))
        r.add_row("echo", 50, 64, "echo_uring", echo_rounds([6.6, 5.4, 6.0]))
        # 500 x 1 KiB: 0.95 in every round
        r.add_row("echo", 500, 1024, "echo_coring", echo_rounds([5.7, 5.7, 5.7]))
        r.add_row("echo", 500, 1024, "echo_uring", echo_rounds([6.0, 6.0, 6.0]))
        for a, b in (("echo_epoll", 6.0), ("echo_uring_mshot", 6.0)):
            for c, z in ((50, 64), (500, 1024)):
                r.add_row("echo", c, z, a, echo_rounds([b, b, b]))
        # depth 1: the default 0.90 of fio, the option 1.00: judged by the default
        r.add_file_row("randread", 1, 4096, "coring", file_rounds([900, 950, 850]))
        r.add_file_row("randread", 1, 4096, "coring_each", file_rounds([1000, 1000, 1000]))
        r.add_file_row("randread", 1, 4096, "fio_uring", file_rounds([1000, 1000, 1000]))
        # depth 32: the default 1.00 (the rounds 0.96-1.04), the option 0.50
        r.add_file_row("randread", 32, 4096, "coring", file_rounds([960, 1000, 1040]))
        r.add_file_row("randread", 32, 4096, "coring_each", file_rounds([500, 500, 500]))
        r.add_file_row("randread", 32, 4096, "fio_uring", file_rounds([1000, 1000, 1000]))
        lines = targets(r)

        expect(line(lines, "echo  50c   64B: CPU/req coring/raw"),
               "coring/raw 1.02 (<= 1.00: MISSED)", "[rounds' ratios 1.00-1.02]")
        expect(line(lines, "echo 500c 1024B: CPU/req coring/raw"),
               "coring/raw 0.95 (<= 1.00: met)", "[rounds' ratios 0.95-0.95]")
        expect(line(lines, "fileio QD1 "), "coring/fio io_uring 0.90 (>= 0.95: MISSED)",
               "[rounds' ratios 0.85-0.95]", "coring 1/enter: IOPS 1.00")
        expect(line(lines, "fileio QD32"), "coring/fio io_uring 1.00 (>= 0.95: met)",
               "[rounds' ratios 0.96-1.04]", "coring 1/enter: IOPS 0.50")

        # rounds that do not pair (one round each) give no bracket
        r2 = run.Run(build)
        r2.say = lambda text="": r2.lines.append(text)
        r2.add_row("echo", 50, 64, "echo_coring", echo_rounds([5.0]))
        for a in ("echo_uring", "echo_epoll", "echo_uring_mshot"):
            r2.add_row("echo", 50, 64, a, echo_rounds([6.0]))
        got = line(targets(r2), "echo  50c   64B")
        expect(got, "coring/raw 0.83 (<= 1.00: met)")
        if "rounds' ratios" in got:
            fail(f"a bracket from one round: {got}")

        # a CPU per request read 0 (a QUICK round on a busy machine: under a
        # clock tick) leaves that target without a verdict, and the run goes on
        r3 = run.Run(build)
        r3.say = lambda text="": r3.lines.append(text)
        for a, cpu in (("echo_coring", 5.0), ("echo_uring", 6.0), ("echo_epoll", 0.0),
                       ("echo_uring_mshot", 6.0), ("echo_libuv", 6.0), ("echo_go", 0.0),
                       ("echo_tokio", 6.0)):
            r3.add_row("echo", 50, 64, a, echo_rounds([cpu]))
        for a, cpu in (("http_coring", 5.0), ("http_epoll", 6.0), ("http_go", 0.0)):
            r3.add_row("http", 50, 0, a, echo_rounds([cpu]))
        got = targets(r3)
        line(got, "echo  50c   64B: no verdict: CPU/req of epoll read 0")
        line(got, "echo  50c   64B: no verdict: CPU/req of Go read 0")
        expect(line(got, "echo  50c   64B: CPU/req coring/libuv"), "coring/libuv 0.83 (<= 1.00: met)")
        line(got, "http  50c (wrk): no verdict: CPU/req of Go read 0")
        expect(line(got, "http  50c (wrk): CPU/req coring/epoll"), "0.83 (<= 0.95: met)")
        # hand-off: a _roam row of coring is judged against the peers' own shape,
        # and shown beside it in the table
        r4 = run.Run(build)
        r4.say = lambda text="": r4.lines.append(text)

        def ho(peer, shape, value, unit):
            r4.handoff_rows.append({"shape": shape, "peer": peer, "value_median": value, "unit": unit,
                                    "spread_pct": 1.0, "noisy_rounds": 0})
        ho("coring", "pingpong", 1000.0, "ns")
        ho("coring", "pingpong_roam", 200.0, "ns")
        ho("go", "pingpong", 250.0, "ns")
        ho("tokio", "pingpong", 150.0, "ns")
        ho("coring", "chan16_roam", 8e6, "per_s")
        ho("go", "chan16", 10e6, "per_s")
        got = r4.handoff_targets()
        expect(line(got, "handoff pingpong_roam: round trip coring/Go"), "0.80 (<= 1: met)")
        expect(line(got, "handoff pingpong_roam: round trip coring/tokio"), "1.33 (<= 1: MISSED)")
        expect(line(got, "handoff chan16_roam: items/s coring/Go"), "0.80 (>= 1: MISSED)")
        row = line(r4.handoff_table().splitlines(), "ping-pong, frames that follow their waker")
        expect(row, "0.2", "0.25", "0.15", "0.80", "1.33")
        # callgrind: coring's instructions per request against libuv's at 1
        # and 50 connections (met at 1, missed at 50); no libuv row at 500:
        # no line
        r5 = run.Run(build)
        r5.say = lambda text="": r5.lines.append(text)
        for server, c, ir in (("echo_coring", 1, 690.0), ("echo_libuv", 1, 841.0),
                              ("echo_coring", 50, 494.0), ("echo_libuv", 50, 396.0),
                              ("echo_coring", 500, 490.0), ("echo_uring", 500, 140.0)):
            r5.cg_rows.append({"server": server, "conns": c, "ir_per_req": ir, "data_per_req": 100.0})
        got = targets(r5)
        expect(line(got, "callgrind   1c: instructions/req coring/libuv"), "0.82 (<= 1.0: met)")
        expect(line(got, "callgrind  50c: instructions/req coring/libuv"), "1.25 (<= 1.0: MISSED)")
        if [x for x in got if x.startswith("callgrind 500c: instructions/req coring/libuv")]:
            fail("a libuv line without a libuv row")
        expect(line(got, "callgrind 500c: instructions/req coring/raw"), "3.50 (<= 1.5: MISSED)")
        # switch: the default label backend's row is judged against C++20,
        # found by its name (here after the switch labels' row, which is
        # faster and must not stand in for it); the switch labels' figure
        # follows for the record
        r6 = run.Run(build)
        r6.say = lambda text="": r6.lines.append(text)
        r6.switch_out = ("suspend/resume           ns/round  vs coring\n"
                         "coring, switch labels        2.40       0.80\n"
                         "coring (co.h)                3.00       1.00\n"
                         "C++20 coroutine (g++)        2.70       0.90\n"
                         "ucontext swapcontext       500.00     166.67\n")
        expect(line(targets(r6), "switch: coring"), "coring 3.00 ns vs C++20 2.70 ns, ratio 1.11 (<= 1: MISSED)",
               "; with switch labels 2.40 ns, 0.89")
    print("ok: echo and file targets judge the defaults, with the rounds' range; a CPU read 0 "
          "leaves its target without a verdict; hand-off _roam rows against the peers' own shapes; "
          "callgrind's instructions against libuv's; switch's default label backend against C++20")


if __name__ == "__main__":
    main()
