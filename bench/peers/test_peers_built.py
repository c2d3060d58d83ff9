#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The peers the runner builds (make test, suite "bench"): bench/runner/peers.py
builds Go's (echo_go, http_go, handoff_go) and tokio's (echo_tokio,
handoff_tokio) into the build dir, offline, writing nothing to $HOME (run
here with an empty one) nor to the source tree; each one built then
behaves as the runner needs:
  - the echo servers: "port=P" on --port 0, every byte back over many
    connections, --threads 2, SIGTERM and SIGINT end them with status 0;
  - http_go: GET / answered 200 "Hello, World!" text/plain, keep-alive and
    pipelined, another path 404, a header not finished within
    --header-timeout closed, SIGINT ends it with status 0;
  - the hand-off programs: every shape the runner expects of them printed,
    each shape's own check catching --miscount (exit 1, naming the shape),
    a bad command line exit 2.
A peer whose tools or crates are not installed is skipped (said); none
installed: exit 77 (meson's skip).

    test_peers_built.py BUILD_DIR
"""

import os
import socket
import subprocess
import sys
import multiprocessing
import tempfile
import threading

RUNNER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runner")
sys.path.insert(0, RUNNER)
import benchlib  # noqa: E402
import peers  # noqa: E402
from sections.handoff import HANDOFF_SHAPES  # noqa: E402

GUARD = 30  # s, every socket operation


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def recv_exact(s, n):
    got = b""
    while len(got) < n:
        chunk = s.recv(65536)
        if not chunk:
            fail(f"connection closed after {len(got)} of {n} bytes")
        got += chunk
    return got


def echo_client(port, size, rounds, errors):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=GUARD) as s:
            for i in range(rounds):
                msg = bytes((i + k) & 0xFF for k in range(size))
                s.sendall(msg)
                if recv_exact(s, size) != msg:
                    errors.append("an answer differs from what was sent")
                    return
    except OSError as e:
        errors.append(str(e))


def check_echo(exe, name):
    for extra in ([], ["--threads", "2"]):
        s = benchlib.Server([exe, "--port", "0"] + extra, name=name)
        try:
            errors = []
            echo_client(s.port, 100000, 3, errors)  # more than a buffer: several reads
            ts = [threading.Thread(target=echo_client, args=(s.port, 64, 200, errors)) for _ in range(50)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(GUARD)
            if errors:
                fail(f"{name} {' '.join(extra)}: {errors[0]}")
        except BaseException:
            s.kill()
            raise
        s.stop()  # SIGTERM: status 0 required
    # SIGINT with a client still connected
    s = benchlib.Server([exe, "--port", "0"], name=name)
    c = socket.create_connection(("127.0.0.1", s.port), timeout=GUARD)
    s.proc.send_signal(2)
    rc = s.proc.wait(GUARD)
    c.close()
    s.kill()
    if rc != 0:
        fail(f"{name}: SIGINT: status {rc}")
    p = subprocess.run([exe, "--port"], capture_output=True, timeout=GUARD)
    if p.returncode != 2:
        fail(f"{name} --port (no value): status {p.returncode}, not 2")
    print(f"ok: {name}: echoes over 51 connections, --threads 2, SIGTERM and SIGINT end it")


def read_answer(f):
    """One HTTP answer from f, the connection's buffered reader: (status,
    headers lower-cased, body)."""
    status = int(f.readline().split()[1])
    hdrs = {}
    while True:
        line = f.readline().decode()
        if line in ("\r\n", ""):
            break
        k, v = line.split(":", 1)
        hdrs[k.strip().lower()] = v.strip()
    n = int(hdrs.get("content-length", "0"))
    body = f.read(n)
    if len(body) != n:
        fail("connection closed inside an answer")
    return status, hdrs, body


def closed_within(s, secs):
    s.settimeout(secs)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def check_http(exe, name):
    s = benchlib.Server([exe, "--port", "0", "--header-timeout", "300"], name=name)
    try:
        with socket.create_connection(("127.0.0.1", s.port), timeout=GUARD) as c:
            f = c.makefile("rb")
            c.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            st, h, body = read_answer(f)
            if st != 200 or body != b"Hello, World!" or h.get("content-type") != "text/plain":
                fail(f"{name}: GET / answered {st} {h} {body!r}")
            c.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n" * 100)  # pipelined, same connection
            for _ in range(100):
                if read_answer(f)[2] != b"Hello, World!":
                    fail(f"{name}: a pipelined answer is not Hello, World!")
            c.sendall(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
            if read_answer(f)[0] != 404:
                fail(f"{name}: GET /x not 404")
        with socket.create_connection(("127.0.0.1", s.port), timeout=GUARD) as mute:
            mute.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n")  # never finished
            if not closed_within(mute, 10):
                fail(f"{name}: an unfinished header outlived --header-timeout 300")
        s.proc.send_signal(2)
        rc = s.proc.wait(GUARD)
    finally:
        s.kill()
    if rc != 0:
        fail(f"{name}: SIGINT: status {rc}")
    print(f"ok: {name}: 200 Hello, World! text/plain, keep-alive, pipelined, 404, header timeout, SIGINT")


def check_handoff(exe, peer):
    shapes = HANDOFF_SHAPES[peer]
    p = subprocess.run([exe, "--rt", "2000", "--items", "20000", "--ops", "20000", "--seconds", "0.2",
                        "--idle-ms", "10"], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        fail(f"{exe}: status {p.returncode}: {p.stderr[-1000:]}")
    got = {benchlib.parse_kv(x).get("shape") for x in p.stdout.splitlines() if x.startswith(f"handoff peer={peer} ")}
    if got != set(shapes):
        fail(f"{exe}: shapes {sorted(got)}, the runner expects {sorted(shapes)}")
    for sh in shapes:
        p = subprocess.run([exe, "--shapes", sh, "--miscount", "--rt", "100", "--items", "1000", "--ops", "1000"],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 1 or not p.stderr.startswith(f"handoff: {peer} {sh}: "):
            fail(f"{exe} --miscount: {sh} not caught (status {p.returncode}): {p.stderr[-500:]}")
    for bad in (["--shapes", "nope"], ["--rt", "0"], ["--seconds"]):
        p = subprocess.run([exe] + bad, capture_output=True, timeout=60)
        if p.returncode != 2:
            fail(f"{exe} {' '.join(bad)}: status {p.returncode}, not 2")
    print(f"ok: {os.path.basename(exe)}: {len(shapes)} shapes, each check catches --miscount")


def main():
    build = os.path.abspath(sys.argv[1])
    home = tempfile.TemporaryDirectory(prefix="coring-peers-home-")
    os.environ["HOME"] = home.name  # the builds must write nothing there
    checks = {"echo_go": check_echo, "echo_tokio": check_echo, "http_go": check_http,
              "handoff_go": lambda exe, _: check_handoff(exe, "go"),
              "handoff_tokio": lambda exe, _: check_handoff(exe, "tokio")}
    # BENCH_PEERS=0: nothing built, said why
    with tempfile.TemporaryDirectory(prefix="coring-peers-none-") as none:
        os.environ["BENCH_PEERS"] = "0"
        exe, why = peers.build(none, "handoff_go")
        del os.environ["BENCH_PEERS"]
        if exe is not None or "BENCH_PEERS=0" not in (why or "") or os.listdir(none):
            fail(f"BENCH_PEERS=0 still built: {exe} {why} {os.listdir(none)}")
    tested = 0
    for name, check in checks.items():
        why = peers.missing(name)
        if why:
            print(f"skip: {name}: {why}")
            continue
        exe, why = peers.build(build, name)
        if exe is None:
            fail(f"{name} not built though its tools are there: {why}")
        if not exe.startswith(build + os.sep):
            fail(f"{name} built outside the build dir: {exe}")
        check(exe, name)
        tested += 1
    # builds side by side in one build dir (meson runs the tests that need a
    # peer at once): each waits for the other and finds its peer built
    can = [n for n in checks if not peers.missing(n)]
    if can:
        with multiprocessing.Pool(4) as pool:
            got = pool.starmap(peers.build, [(build, n) for n in can * 2])
        bad = [(n, why) for n, (exe, why) in zip(can * 2, got) if exe is None]
        if bad:
            fail(f"builds side by side failed: {bad}")
    left = [os.path.join(d, f) for d, _, fs in os.walk(home.name) for f in fs]
    if left:
        fail(f"the builds wrote to $HOME: {left[:5]}")
    src = os.path.dirname(RUNNER)
    for junk in ("peers/Cargo.lock", "peers/Cargo.toml", "peers/target", "contexts/target"):
        if os.path.exists(os.path.join(src, junk)):
            fail(f"the builds wrote bench/{junk} into the source tree")
    if tested == 0:
        print("skip: no Go or tokio peer can be built here (tools/deps.sh bench installs them)")
        return 77
    print(f"ok: {tested} peer(s) built offline inside the build dir, nothing written to $HOME")
    return 0


if __name__ == "__main__":
    sys.exit(main())
