#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/runner/run.py's noisy rounds (make test, suite "bench"): a round in
which other processes used more than NOISE of a CPU over its window is
measured again, RETRIES times at most (BENCH_RETRIES=N: N times), and the
last measurement is kept with its noisy flag; a BENCH_RETRIES that is not
a count stops run.py with exit 2 and says so.
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import core  # noqa: E402
import run  # noqa: E402
from benchlib import BenchError  # noqa: E402


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def rounds(r, others):
    """retry over a window of 1 s whose measurements saw others[i] CPU-seconds
    of other processes: (calls made, the result kept)."""
    calls = []
    r.progress = lambda text: None  # the "n" a repeat prints

    def measure():
        calls.append(1)
        return {"other_cpu_s": others[min(len(calls), len(others)) - 1], "k": len(calls)}
    got = r.retry(measure, 1.0)
    return len(calls), got


def main():
    noisy, quiet = core.NOISE * 2, core.NOISE / 2
    with tempfile.TemporaryDirectory() as build:
        os.environ.pop("BENCH_RETRIES", None)
        r = run.Run(build)
        if r.retries != core.RETRIES or core.RETRIES != 2:
            fail(f"default retries {r.retries}, RETRIES {core.RETRIES}")
        for others, calls, flag in (([quiet], 1, 0), ([noisy, quiet], 2, 0), ([noisy], 3, 1)):
            n, got = rounds(r, others)
            if n != calls or got["noisy"] != flag or got["k"] != calls:
                fail(f"others {others}: {n} calls, kept {got}; want {calls} calls, the last kept, noisy {flag}")
        for v, calls in (("0", 1), ("5", 6)):
            os.environ["BENCH_RETRIES"] = v
            r = run.Run(build)
            n, got = rounds(r, [noisy])
            if n != calls or got["noisy"] != 1:
                fail(f"BENCH_RETRIES={v}: {n} calls, kept {got}; want {calls}")
        for v in ("-1", "x", "", "1.5"):
            os.environ["BENCH_RETRIES"] = v
            try:
                run.Run(build)
                fail(f"BENCH_RETRIES={v!r} accepted")
            except BenchError as e:
                if f"BENCH_RETRIES={v}: not a count" not in str(e):
                    fail(f"BENCH_RETRIES={v!r}: {e}")
        os.makedirs(os.path.join(build, "bench"))
        p = subprocess.run([sys.executable, "-B", os.path.join(HERE, "run.py"), build],
                           env=dict(os.environ, BENCH_RETRIES="x"), capture_output=True, text=True,
                           timeout=60)
        if p.returncode != 2 or "bench: BENCH_RETRIES=x: not a count" not in p.stderr:
            fail(f"run.py with BENCH_RETRIES=x: exit {p.returncode}, stderr {p.stderr!r}")
    print("ok: a noisy round repeated RETRIES times at most, the last kept; BENCH_RETRIES honoured "
          "and checked")


if __name__ == "__main__":
    main()
