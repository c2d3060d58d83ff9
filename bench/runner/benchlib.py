# SPDX-License-Identifier: MIT
"""What the benchmark scripts share (Python 3 standard library only):
CPU pinning, the open-file limit, starting and stopping a server, running
echo_load and reading its key=value line, and median/spread."""

import os
import resource
import signal
import socket
import subprocess
import tempfile
import time


class BenchError(Exception):
    """A benchmark step failed: the runner stops and prints this."""


# The folder of bench/ whose meson.build lists each program: where it is
# built, under the build dir's bench/ (the Go and tokio peers, echo_go,
# http_go, echo_tokio, handoff_go, handoff_tokio: where bench/runner/peers.py
# builds them, beside their sources' folder)
FOLDERS = {"echo": ["echo_coring", "echo_coring_stream", "echo_epoll", "echo_uring", "echo_uring_mshot",
                    "echo_load"],
           "http": ["http_coring", "http_coring_stream", "http_epoll"],
           "files": ["fileio"],
           "contexts": ["handoff", "handoff_pthread", "handoff_go", "handoff_tokio", "sync", "xsubmit", "dispatch"],
           "coroutine": ["switch", "memory"],
           "trace": ["trace_cost"],
           "peers": ["echo_libuv", "echo_asio", "http_nginx", "echo_go", "http_go", "echo_tokio"]}
FOLDER = {name: folder for folder, names in FOLDERS.items() for name in names}


def program(bench_dir, name):
    """The path of the bench program name in bench_dir, a build dir's bench/."""
    return os.path.join(bench_dir, FOLDER[name], name)


def raise_nofile(want=None):
    """Raise this process's open-file limit (inherited by the servers and
    load generators it starts) to want, or to the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if want is None or hard == resource.RLIM_INFINITY else min(want, hard)
    if want is None and hard == resource.RLIM_INFINITY:
        target = 1 << 20
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


class Pinning:
    """Servers on one CPU, the load on another (the last two CPUs); with one
    CPU, no pinning."""

    def __init__(self):
        n = os.cpu_count() or 1
        self.ncpu = n
        if n >= 2:
            self.server_cpu, self.load_cpu = n - 2, n - 1
            self.server = ["taskset", "-c", str(n - 2)]
            self.load = ["taskset", "-c", str(n - 1)]
            self.note = f"servers on CPU {n - 2}, load on CPU {n - 1}"
        else:
            self.server_cpu = self.load_cpu = None
            self.server, self.load = [], []
            self.note = "1 CPU: no pinning (server and load share it)"


def free_port():
    """A loopback TCP port free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A benchmark server started on a free loopback port ("port=P" on its
    stdout). stop() sends SIGTERM and requires exit status 0.

    With port (the server was told --port PORT), the server is up once a
    connection to it succeeds: under valgrind a coring thread waiting in
    io_uring_enter holds valgrind's one lock until a completion arrives, so
    the server's main thread may not get to print before a client
    connects."""

    def __init__(self, argv, name=None, start_timeout=30.0, port=None):
        self.name = name or os.path.basename(argv[-1] if argv[0] == "taskset" else argv[0])
        self.tmp = tempfile.TemporaryDirectory(prefix="coring-bench-")
        self.err_text = None
        self.out_path = os.path.join(self.tmp.name, "out")
        self.err_path = os.path.join(self.tmp.name, "err")
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        self.pid = self.proc.pid
        self.port = None
        try:
            self._wait_up(port, start_timeout)
        except BaseException:
            # a signal (KeyboardInterrupt, the runner's SIGTERM) while the
            # server starts: nobody holds this object yet to stop it
            self.kill()
            raise

    def _wait_up(self, port, start_timeout):
        deadline = time.monotonic() + start_timeout
        while self.port is None:
            if port is not None:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    self.port = port
                    break
                except OSError:
                    pass
            with open(self.out_path) as f:
                for line in f:
                    if line.startswith("port="):
                        self.port = int(line[5:])
            if self.port is not None:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise BenchError(f"{self.name} did not start: {self.stderr()}")
            time.sleep(0.02)

    def stderr(self):
        """The end of the server's stderr (kept once its directory is gone)."""
        if self.err_text is not None:
            return self.err_text
        try:
            with open(self.err_path) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def _cleanup(self):
        """Keep the end of stderr for messages, remove the directory."""
        if self.err_text is None:
            self.err_text = self.stderr()
        self.tmp.cleanup()

    def pids(self):
        """The server's process and every process under it (the nginx peer:
        its launcher, master and workers)."""
        return process_tree(self.pid)

    def cpu_seconds(self):
        """utime + stime of the server, all threads of all its processes
        (/proc/PID/stat of each of pids())."""
        ticks = 0
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def stop(self, timeout=60.0):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise BenchError(f"{self.name} did not exit on SIGTERM")
        self._cleanup()
        if rc != 0:
            raise BenchError(f"{self.name} exited with status {rc}: {self.stderr()}")

    def kill(self):
        if self.proc.poll() is None:
            for pid in self.pids()[1:]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            self.proc.kill()
            self.proc.wait()
        self._cleanup()


def process_tree(root):
    """root and every process under it, from /proc/PID/task/TID/children."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:  # gone meanwhile, or a kernel without the file
            pass
    return out


def alive(pid):
    """Running: a zombie, or a pid gone, is not."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def parse_kv(line):
    """The key=value words of a summary line, numbers converted."""
    out = {}
    for word in line.split():
        if "=" in word:
            k, v = word.split("=", 1)
            try:
                out[k] = float(v) if any(c in v for c in ".e") else int(v)
            except ValueError:
                out[k] = v
    return out


def echo_load(bench_dir, pin, port, conns, size=64, seconds=1.0, warmup=0.5, server_pid=None,
              count=None, extra=(), timeout=None, idle_ok=False):
    """Run echo_load once; its summary as a dict. Fails on any error; with
    idle_ok, a window in which no request completed (and nothing was
    wrong) is returned (requests=0) instead: on a machine busy with other
    work the caller may repeat it."""
    argv = pin.load + [program(bench_dir, "echo_load"), "--port", str(port),
                       "--conns", str(conns), "--size", str(size), "--seconds", str(seconds),
                       "--warmup", str(warmup)] + list(extra)
    if server_pid:
        argv += ["--server-pid", str(server_pid)]
    if count:
        argv += ["--count", str(count)]
    limit = timeout if timeout is not None else seconds + warmup + 60
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        raise BenchError(f"echo_load {' '.join(argv[len(pin.load):])} hung")
    d = parse_kv(p.stdout)
    if p.returncode != 0 and idle_ok and d.get("requests") == 0 and d.get("errors") == 0 and \
            not count:
        return d
    if p.returncode != 0:
        raise BenchError(f"echo_load failed ({' '.join(argv[len(pin.load):])}): "
                         f"{p.stderr.strip()[-2000:]}")
    return d


def median(values):
    v = sorted(values)
    n = len(v)
    if n == 0:
        return None
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def ratio_range(a, b):
    """The lowest and highest a[i] / b[i] (a and b measured in the same
    rounds, in turn): how far one round's ratio strays from the medians';
    None where the rounds do not pair (fewer than two, a b of 0)."""
    if not a or not b or len(a) != len(b) or len(a) < 2 or not all(b):
        return None
    r = [x / y for x, y in zip(a, b)]
    return min(r), max(r)


def spread_pct(values):
    m = median(values)
    return (max(values) - min(values)) * 100 / m if m else 0.0
