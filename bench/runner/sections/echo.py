# SPDX-License-Identifier: MIT
"""Section "echo": the echo servers (coring, epoll, raw liburing, the
peers: libuv, Asio, Go, tokio) under echo_load, every connection count and message size of the
mode; and the rows of latest.csv that the echo, curve and HTTP sections
record, with their table."""

import benchlib
from benchlib import BenchError, median, spread_pct
from core import ECHO_SERVERS, ECHO_SHORT, HTTP_SHORT, SHORT, TITLE

RESULT_COLUMNS = ["bench", "conns", "size", "server", "rps_median", "rps_min", "rps_max",
                  "spread_pct", "cpu_us_per_req", "p50_us", "p99_us", "syscalls_per_req",
                  "rounds", "noisy_rounds", "mode", "date"]


class Echo:
    """The echo section, and latest.csv's rows and table."""

    def add_row(self, bench, conns, size, server, results, syscalls=None):
        rps = [r["rps"] for r in results]
        self.per_round[(bench, conns, size, SHORT[server])] = [r["cpu_us"] for r in results]
        self.rows.append({
            "bench": bench, "conns": conns, "size": size, "server": server,
            "rps_median": round(median(rps)), "rps_min": round(min(rps)),
            "rps_max": round(max(rps)), "spread_pct": round(spread_pct(rps), 1),
            "cpu_us_per_req": round(median([r["cpu_us"] for r in results]), 3),
            "p50_us": round(median([r["p50"] for r in results]), 1),
            "p99_us": round(median([r["p99"] for r in results]), 1),
            "syscalls_per_req": "" if syscalls is None else round(syscalls, 2),
            "rounds": len(results), "noisy_rounds": sum(r["noisy"] for r in results),
            "mode": self.mode, "date": self.date})

    # ---- echo: the matrix ---------------------------------------------------
    def echo_round(self, s, conns, size, secs, warm):
        def measure():
            d = benchlib.echo_load(self.bench, self.pin, s.port, conns, size, secs, warm, s.pid,
                                   idle_ok=True)
            if d["requests"] == 0:  # starved by other processes: a noisy round, repeated
                return {"starved": True, "other_cpu_s": float("inf")}
            return {"rps": d["rps"], "cpu_us": d["server_us_per_req"], "p50": d["p50_us"],
                    "p99": d["p99_us"], "other_cpu_s": d["other_cpu_s"]}
        r = self.retry(measure, secs)
        if r.get("starved"):
            raise BenchError(f"{s.name}: no request completed in {self.retries + 1} rounds of {secs} s "
                             f"({conns} x {size} B): other processes left the server or the load no CPU")
        return r

    def echo_workload(self, bench, servers, conns, size, secs, warm, with_strace, rounds=None):
        res = {n: [] for n in servers}
        for r in range(rounds or self.m["rounds"]):
            names = list(servers)
            order = names[r % len(names):] + names[:r % len(names)]  # rotate every round
            for n in order:
                res[n].append(self.echo_round(servers[n], conns, size, secs, warm))
                self.progress(".")
        for n, s in servers.items():
            calls = None
            if with_strace:
                argv = self.pin.load + [benchlib.program(self.bench, "echo_load"), "--port", str(s.port),
                                        "--conns", str(conns), "--size", str(size),
                                        "--seconds", str(self.m["ssecs"]), "--warmup", "0"]
                calls = self.strace_calls(s, argv,
                                          lambda out: benchlib.parse_kv(out).get("requests", 0))
                self.progress("s")
            self.add_row(bench, conns, size, n, res[n], calls)

    def echo(self):
        self.say("== echo: coring vs epoll vs raw liburing (simple and multishot) vs libuv, Boost.Asio, "
                 "Go's net and tokio")
        servers = self.start_all(ECHO_SERVERS)
        for c in self.m["conns"]:
            for z in self.m["sizes"]:
                self.progress(f"{'echo %dc %dB' % (c, z):<18}")
                self.echo_workload("echo", servers, c, z, self.m["secs"], self.m["warm"], True)
                self.progress("\n")
        for s in servers.values():
            self.stop(s)
        self.say(self.echo_table("echo"))
        self.say()

    # ---- tables ------------------------------------------------------------------------
    def by(self, bench):
        out = {}
        for r in self.rows:
            if r["bench"] == bench:
                out[(r["conns"], r["size"], SHORT[r["server"]])] = r
        return out

    def echo_table(self, bench):
        rows = self.by(bench)
        servers = ECHO_SHORT if bench == "echo" else HTTP_SHORT
        ratios = [("coring", "epoll"), ("coring", "uring"), ("coring", "mshot"), ("stream", "uring"),
                  ("stream", "mshot"), ("coring", "libuv"), ("coring", "asio"), ("coring", "go"),
                  ("coring", "tokio")] \
            if bench == "echo" else [("coring", "epoll"), ("stream", "epoll"), ("coring", "nginx"),
                                     ("stream", "nginx"), ("coring", "go")]
        metrics = [("rps_median", "req/s", "{:.0f}"), ("cpu_us_per_req", "CPU us/req", "{:.2f}"),
                   ("syscalls_per_req", "syscalls/req", "{:.2f}"), ("p99_us", "p99 us", "{:.0f}"),
                   ("spread_pct", "spread %", "{:.1f}")]
        if bench == "http":  # the fair figure first: wrk's own CPU bounds req/s
            metrics = [metrics[1], metrics[0]] + metrics[2:]
        head = f"{'workload':<16} {'metric':<13}" + "".join(f"{TITLE[s]:>10}" for s in servers) + \
            "".join(f"{a + '/' + b:>14}" for a, b in ratios)
        lines = [head]
        keys = sorted({(c, z) for c, z, _ in rows})
        for c, z in keys:
            w = f"echo {c}c {z}B" if bench == "echo" else f"http {c}c (wrk)"
            for i, (k, label, fmt) in enumerate(metrics):
                cells = []
                vals = {}
                for s in servers:
                    r = rows.get((c, z, s))
                    v = r[k] if r else ""
                    vals[s] = v
                    cells.append(fmt.format(v) if v != "" else "-")
                rat = []
                for a, b in ratios:
                    va, vb = vals.get(a, ""), vals.get(b, "")
                    rat.append(f"{va / vb:.2f}" if va != "" and vb not in ("", 0) else "-")
                lines.append(f"{w if i == 0 else '':<16} {label:<13}" +
                             "".join(f"{x:>10}" for x in cells) + "".join(f"{x:>14}" for x in rat))
            noisy = sum(rows[(c, z, s)]["noisy_rounds"] for s in servers if (c, z, s) in rows)
            if noisy:
                lines.append(f"{'':<16} ({noisy} noisy round(s) kept after {self.retries} repeats)")
        return "\n".join(lines)
