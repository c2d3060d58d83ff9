#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/runner/benchlib.py's Server (make test, suite "bench"): whatever way a
server ends (stopped, killed, failing to start, exiting with an error), its
directory for stdout and stderr is removed, and an error message still
quotes the server's stderr. Each server is a shell that ends within 30 s
on its own. The servers' directories go to a directory of the test's own
(tempfile.tempdir), so a bench running beside it cannot be taken for a
leak; it is removed at the end.
"""

import glob
import os
import shutil
import signal
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def dirs():
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "coring-bench-*")))


def check_left(before):
    left = dirs() - before
    if left:
        fail(f"directories left behind: {sorted(left)}")


def expect_error(start, words, before):
    try:
        start()
    except benchlib.BenchError as e:
        if words not in str(e):
            fail(f"the error does not quote the server's stderr ({words!r}): {e}")
        check_left(before)  # while the half-built server is still referenced
        return
    fail("no error")


def main():
    own = tempfile.mkdtemp(prefix="coring-bench-test-")
    tempfile.tempdir = own  # benchlib's TemporaryDirectory goes here
    try:
        run()
    finally:
        tempfile.tempdir = None
        shutil.rmtree(own, ignore_errors=True)


def run():
    before = dirs()
    kept = []  # referenced to the end: a directory must go with the server, not the object

    # stopped: exit status 0
    # (each fake server says its port last: by then its trap is set, and a
    # SIGTERM sent as soon as the port is read finds it)
    kept.append(benchlib.Server(["sh", "-c", "trap 'kill $!; exit 0' TERM; "
                                 "sleep 30 & echo port=1; wait"], name="stopped"))
    kept[-1].stop()
    # killed
    kept.append(benchlib.Server(["sh", "-c", "echo port=1; exec sleep 30"], name="killed"))
    kept[-1].kill()
    # never says its port: the start fails, quoting stderr
    expect_error(lambda: benchlib.Server(["sh", "-c", "echo no port >&2; exit 3"],
                                        name="unstarted", start_timeout=5), "no port", before)
    # exits 4 on SIGTERM: the stop fails, quoting stderr
    kept.append(benchlib.Server(["sh", "-c", "trap 'kill $!; exit 4' TERM; echo bad stop >&2; "
                                 "sleep 30 & echo port=1; wait"], name="failing"))
    expect_error(kept[-1].stop, "bad stop", before)
    # a signal while a server starts (the runner stopped from outside): the
    # half-started server goes, though nobody holds its object yet
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        benchlib.Server(["sh", "-c", "exec sleep 30"], name="interrupted", start_timeout=20)
        fail("the start was not interrupted")
    except KeyboardInterrupt:
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    left = [x for x in benchlib.process_tree(os.getpid())[1:] if benchlib.alive(x)]
    if left:
        fail(f"a server interrupted while it started is still running: {left}")
    check_left(before)
    print("ok: no directory left, errors quote stderr, an interrupted start leaves nothing")


if __name__ == "__main__":
    main()
