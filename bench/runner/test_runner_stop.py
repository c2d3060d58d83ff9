#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/runner/run.py stopped from outside (make test, suite "bench"): SIGTERM
or SIGINT while the echo servers are up ends the run with every server it
started stopped, none left running, and a peer's build under way stopped
with it, leaving nothing in the run's $TMPDIR. The build is a stand-in
`go` first on the PATH that makes its work directory where go does
($GOTMPDIR, else $TMPDIR) and never ends: the stop always lands in it.

    test_runner_stop.py BUILD_DIR   (its bench programs built)
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
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


STANDIN_GO = """#!/bin/sh
[ "$1" = version ] && { echo "go version stand-in"; exit 0; }
echo $$ >>"$STANDIN_PIDS"
mkdir "${GOTMPDIR:-$TMPDIR}/go-build-standin" || exit 1
exec sleep 600
"""


def stop_once(build, sig, tmp, standin):
    pids = os.path.join(standin, "pids")
    env = dict(os.environ, QUICK="1", BENCH_SECTIONS="echo", TMPDIR=tmp, STANDIN_PIDS=pids,
               PATH=standin + os.pathsep + os.environ["PATH"])
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
    try:
        with open(pids) as f:
            builds = [int(x) for x in f.read().split()]
    except OSError:
        fail(f"no go build under way at signal {sig} (the stand-in never ran)")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(benchlib.alive(x) for x in builds):
        time.sleep(0.05)
    if any(benchlib.alive(x) for x in builds):
        fail(f"the go build left running after signal {sig}")
    if os.listdir(tmp):
        fail(f"left in run.py's TMPDIR after signal {sig}: {sorted(os.listdir(tmp))}")
    return len(servers)


def main():
    build = sys.argv[1]
    for sig in (signal.SIGTERM, signal.SIGINT):
        tmp = tempfile.mkdtemp(prefix="coring-stop-")
        standin = tempfile.mkdtemp(prefix="coring-stop-go-")
        try:
            go = os.path.join(standin, "go")
            with open(go, "w") as f:
                f.write(STANDIN_GO)
            os.chmod(go, 0o755)
            n = stop_once(build, sig, tmp, standin)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(standin, ignore_errors=True)
        print(f"ok: signal {sig}: the {n} echo servers and the go build under way stopped "
              f"with the run, its TMPDIR empty")


if __name__ == "__main__":
    main()
