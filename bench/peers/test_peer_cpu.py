#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The runner measures the nginx peer like the other servers (make test,
suite "bench"): bench/runner/benchlib.py's Server, started on the launcher as
bench/runner/run.py starts it, counts the CPU of nginx's worker (a process two
levels under the launcher), so CPU per request is not the idle launcher's;
kill() leaves no nginx process behind.

    test_peer_cpu.py BUILD_DIR/bench/peers/http_nginx
(meson registers it where the nginx peer is built.) Bounded: 21,000
keep-alive requests from one client, a 30 s guard on each step.
"""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runner"))
import benchlib  # noqa: E402

REQUESTS = 20000
REQ = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def serve(port, n):
    """n keep-alive requests, 100 pipelined at a time; each answer counted
    by its body (nginx's answer ends with it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        done = 0
        while done < n:
            k = min(100, n - done)
            s.sendall(REQ * k)
            got = b""
            while got.count(b"Hello, World!") < k:
                chunk = s.recv(65536)
                if not chunk:
                    fail("nginx closed the connection")
                got += chunk
            done += k


def main():
    s = benchlib.Server([sys.argv[1], "--port", "0"], name="http_nginx")
    try:
        # warm: answered requests mean a worker runs (the launcher is up
        # once nginx's master accepts a connection, which the kernel does
        # for it before the master has forked its worker)
        serve(s.port, 1000)
        pids = s.pids()
        # the launcher, nginx's master, its worker
        if len(pids) < 3:
            fail(f"pids() sees {len(pids)} process(es), not launcher, master and worker")
        # the runner's figure read outside the worker's on both ends, so that
        # c1 - c0 >= w1 - w0 holds exactly when it counts the worker (read in
        # the other order, a clock tick between the two reads failed it)
        c0 = s.cpu_seconds()
        w0 = sum(proc_cpu(p) for p in pids[2:])
        serve(s.port, REQUESTS)
        w1 = sum(proc_cpu(p) for p in pids[2:])
        c1 = s.cpu_seconds()
        print(f"ok: {REQUESTS} requests: server CPU seen {c1 - c0:.3f} s, "
              f"of which nginx's worker {w1 - w0:.3f} s")
        if w1 - w0 <= 0:
            fail("nginx's worker used no CPU: the test measured nothing")
        # compared in clock ticks: as floats, 0.36 - 0.30 < 0.07 - 0.01
        if ticks(c1 - c0) < ticks(w1 - w0):
            fail("the runner's CPU figure leaves out nginx's worker")
    finally:
        s.kill()
    deadline = time.monotonic() + 30
    while any(benchlib.alive(p) for p in pids[1:]):
        if time.monotonic() > deadline:
            fail("nginx outlived kill()")
        time.sleep(0.05)
    print("ok: kill() ends nginx's master and worker")
    return 0


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ticks(seconds):
    return round(seconds * os.sysconf("SC_CLK_TCK"))


if __name__ == "__main__":
    sys.exit(main())
