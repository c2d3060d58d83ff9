#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/runner/sections/http.py's rounds (make test, suite "bench"), with
wrk's runs, the servers and the tables stubbed out here: as
docs/benchmarks.md's method says, the servers take turns and the order
rotates every round, so that over as many rounds as servers each server
runs once in each place of the order (the drift of a round hits each
alike).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sections.http import Http  # noqa: E402


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


class Pin:
    load = []


class Server:
    def __init__(self, name):
        self.name, self.port = name, 0


class Stub(Http):
    """Http with everything but its rounds' order stubbed."""

    def __init__(self, names, rounds):
        self.names = names
        self.m = {"rounds": rounds, "secs": 1, "ssecs": 1, "http_conns": [50]}
        self.pin = Pin()
        self.runs = []

    def say(self, *a):
        pass

    def progress(self, *a):
        pass

    def have(self, *a):
        return True

    def start_all(self, which):
        return {n: Server(n) for n in self.names}

    def wrk_round(self, s, conns, secs):
        self.runs.append(s.name)
        return {}

    def strace_calls(self, *a):
        return None

    def add_row(self, *a):
        pass

    def stop(self, s):
        pass

    def echo_table(self, *a):
        return ""


def main():
    import subprocess
    real_run = subprocess.run
    subprocess.run = lambda *a, **k: None  # the warm-ups' wrk
    try:
        names = ["a", "b", "c", "d", "e"]
        h = Stub(names, len(names))
        h.http()
    finally:
        subprocess.run = real_run
    rounds = [h.runs[i:i + len(names)] for i in range(0, len(h.runs), len(names))]
    if len(rounds) != len(names) or any(sorted(r) != names for r in rounds):
        fail(f"not every server once a round: {rounds}")
    for place in range(len(names)):
        if sorted(r[place] for r in rounds) != names:
            fail(f"place {place} is not each server's once over {len(names)} rounds: {rounds}")
    print(f"ok: the HTTP rounds rotate the order: {rounds}")


if __name__ == "__main__":
    main()
