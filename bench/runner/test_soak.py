#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/runner/sections/soak.py's verdict (make test, suite "bench"), on
samples made up here, as docs/benchmarks.md states it (its soak section): flat while
the last third's peak RSS stays within 10 % plus 1 MiB of the middle
third's and its descriptors within 16; growing past either.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sections.soak import verdict  # noqa: E402


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def samples(rss_last, fds_last):
    """Nine samples: the first two thirds at 10,000 kB and 200
    descriptors, the last third's peak as given."""
    return [(5 * i, 10000, 200) for i in range(6)] + [(30, 10000, 200), (35, rss_last, fds_last), (40, 10000, 200)]


def main():
    for rss, fds, want in [(10000, 200, True), (12024, 200, True), (12025, 200, False),
                           (10000, 216, True), (10000, 217, False)]:
        got = verdict(samples(rss, fds))
        if got[4] != want or got[:4] != (10000, rss, 200, fds):
            fail(f"RSS 10000 -> {rss} kB, fds 200 -> {fds}: {got}, want flat={want}")
    print("ok: the soak's verdict is the one docs/benchmarks.md states")


if __name__ == "__main__":
    main()
