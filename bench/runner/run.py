#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make bench: every benchmark of a release build directory.

    bench/runner/run.py [BUILD_DIR]   (default build-release)
    QUICK=1 / FULL=1                  a smoke-sized run / longer rounds plus the soak
    ROUNDS=N SECONDS_PER_ROUND=S      override the round count and length
    BENCH_RETRIES=N                   repeats of a noisy round (default 2)
    SOAK_SECONDS=S                    soak length (FULL=1; default 180)
    BENCH_SECTIONS=echo,curve,...     run only these sections (any of: echo,
                                      curve, http, kv, fileio, callgrind, other, handoff,
                                      firmware, soak)

Prints the tables and writes, under BUILD_DIR/bench-results/ (inside the
git-ignored build directory, never in the source tree):
    latest.csv     echo, connection-curve and HTTP rows (named columns)
    fileio.csv     file reads: coring against fio
    callgrind.csv  user-space instructions per request
    firmware.csv   co.h on Cortex-M4: frame bytes, code bytes, instructions per resume
    handoff.csv    hand-off between contexts: coring, Go, tokio, two pthreads
    kv.csv         the application: kv_server against redis-server
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

Each section is a module of sections/, named after it, with a class of the
section's methods; core.py holds what they all use; peers.py builds the Go
and tokio peers into BUILD_DIR when a section first needs them (offline;
one not built is said in one line and left out). Run below is the
sections together; it runs them in the order of core.SECTIONS, then the
targets, the files and the chart.
"""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import BenchError  # noqa: E402
from core import SECTIONS, Core  # noqa: E402
from sections.callgrind import Callgrind  # noqa: E402
from sections.chart import Chart  # noqa: E402
from sections.curve import Curve  # noqa: E402
from sections.echo import Echo  # noqa: E402
from sections.fileio import FileIO  # noqa: E402
from sections.firmware import Firmware  # noqa: E402
from sections.handoff import Handoff  # noqa: E402
from sections.http import Http  # noqa: E402
from sections.kv import Kv  # noqa: E402
from sections.other import Other  # noqa: E402
from sections.soak import Soak  # noqa: E402
from sections.targets import Targets  # noqa: E402


class Run(Core, Echo, Curve, Http, Kv, FileIO, Callgrind, Other, Handoff, Firmware, Soak, Targets, Chart):
    """One make bench run: settings, output, results."""

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
    try:
        run = Run(build)
    except BenchError as e:  # the environment's settings
        print(f"bench: {e}", file=sys.stderr)
        return 2
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
