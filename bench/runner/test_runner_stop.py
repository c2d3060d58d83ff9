#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/runner/run.py stopped from outside (make test, suite "bench"): SIGTERM
or SIGINT while the echo servers are up ends the run with every server it
started stopped, none left running.

    test_runner_stop.py BUILD_DIR   (its bench programs built)
"""

import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run.py")


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def names(pids):
    got = []
    for p in pids:
        try:
            with open(f"/proc/{p}/comm") as f:
                got.append(f.read().strip())
        except OSError:
            pass
    return got


def echo_processes(pid):
    """The processes under pid named echo_*: the servers (and a load)."""
    return [x for x in benchlib.process_tree(pid)[1:] if names([x]) and names([x])[0].startswith("echo")]


def stop_once(build, sig):
    env = dict(os.environ, QUICK="1", BENCH_SECTIONS="echo")
    p = subprocess.Popen([sys.executable, "-B", RUN, build], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    # the first workload's progress line comes once every server is up
    deadline = time.monotonic() + 60
    servers = []
    while time.monotonic() < deadline:
        servers = echo_processes(p.pid)
        if len(servers) >= 5:
            break
        time.sleep(0.05)
    if len(servers) < 5:
        p.kill()
        fail(f"run.py started {len(servers)} echo servers in 60 s: {names(benchlib.process_tree(p.pid)[1:])}")
    time.sleep(0.3)
    servers = echo_processes(p.pid)
    p.send_signal(sig)
    try:
        p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        fail(f"run.py did not end within 60 s of signal {sig}")
    if p.returncode == 0:
        fail(f"run.py exited 0 after signal {sig}")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(benchlib.alive(x) for x in servers):
        time.sleep(0.05)
    left = [x for x in servers if benchlib.alive(x)]
    if left:
        for x in left:
            os.kill(x, signal.SIGKILL)
        fail(f"servers left running after signal {sig}: {names(left)}")
    return len(servers)


def main():
    build = sys.argv[1]
    for sig in (signal.SIGTERM, signal.SIGINT):
        n = stop_once(build, sig)
        print(f"ok: signal {sig}: the {n} echo servers stopped with the run")


if __name__ == "__main__":
    main()
