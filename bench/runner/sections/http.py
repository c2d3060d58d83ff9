# SPDX-License-Identifier: MIT
"""Section "http": the HTTP servers (coring, epoll, nginx, Go's net/http) under wrk; the
rows go to latest.csv and the table is the echo section's
(sections/echo.py)."""

import re
import subprocess

from benchlib import BenchError
from core import HTTP_SERVERS, NOISE


def wrk_requests(out):
    m = re.search(r"(\d+) requests in", out)
    return int(m.group(1)) if m else 0


class Http:
    """The HTTP section."""

    def wrk_round(self, s, conns, secs):
        argv = self.pin.load + ["wrk", "-t1", f"-c{conns}", f"-d{secs}s", "--latency",
                                f"http://127.0.0.1:{s.port}/"]

        def measure():
            rc, out, err, wrk_cpu, other, srv = self.run_child(argv, secs + 60, [s])
            # only timeouts (an answer later than wrk's 2 s), no other error,
            # while other processes took the CPUs: a starved round, repeated
            if rc == 0 and "Non-2xx" not in out and other > NOISE * secs and \
                    re.search(r"Socket errors: connect 0, read 0, write 0, timeout \d+$", out, re.M):
                return {"starved": out, "other_cpu_s": float("inf")}
            if rc != 0 or "Socket errors" in out or "Non-2xx" in out:
                raise BenchError(f"wrk saw errors against {s.name}:\n{out}{err}")
            n = wrk_requests(out)
            lat = {}
            for q in ("50", "99"):
                m = re.search(rf"^\s+{q}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
                lat[q] = float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]
            rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
            return {"rps": rps, "cpu_us": srv * 1e6 / n if n else 0, "p50": lat["50"],
                    "p99": lat["99"], "other_cpu_s": other}
        r = self.retry(measure, secs)
        if r.get("starved"):
            raise BenchError(f"wrk saw timeouts against {s.name} in {self.retries + 1} rounds while other "
                             f"processes took the CPUs:\n{r['starved']}")
        return r

    def http(self):
        self.say("== HTTP via wrk: coring vs epoll vs nginx vs Go's net/http (headline: server CPU per request)")
        if not self.have("wrk", "HTTP rows"):
            return
        servers = self.start_all(HTTP_SERVERS)
        secs = max(1, round(self.m["secs"]))  # wrk takes whole seconds
        for c in self.m["http_conns"]:
            self.progress(f"{'http %dc' % c:<18}")
            for s in servers.values():  # warm-up
                subprocess.run(self.pin.load + ["wrk", "-t1", f"-c{c}", "-d1s",
                                                f"http://127.0.0.1:{s.port}/"], capture_output=True)
            res = {n: [] for n in servers}
            for r in range(self.m["rounds"]):
                names = list(servers)
                for n in names[r % len(names):] + names[:r % len(names)]:  # rotate every round
                    res[n].append(self.wrk_round(servers[n], c, secs))
                    self.progress(".")
            for n, s in servers.items():
                argv = self.pin.load + ["wrk", "-t1", f"-c{c}", f"-d{max(1, round(self.m['ssecs']))}s",
                                        f"http://127.0.0.1:{s.port}/"]
                calls = self.strace_calls(s, argv, wrk_requests)
                self.progress("s")
                self.add_row("http", c, 0, n, res[n], calls)
            self.progress("\n")
        for s in servers.values():
            self.stop(s)
        self.say(self.echo_table("http"))
        self.say()
