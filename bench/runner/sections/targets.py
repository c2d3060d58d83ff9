# SPDX-License-Identifier: MIT
"""The targets (goals, not tests), after every section ran: each compares
coring with a baseline or a peer from this run's rows."""

import re

from benchlib import ratio_range
from core import TITLE
from sections import kv


class Targets:
    """The targets' lines."""

    def targets(self):
        def verdict(ok):
            return "met" if ok else "MISSED"
        out = []
        echo = self.by("echo")
        for c in self.m["conns"]:
            for z in self.m["sizes"]:
                g = {s: echo.get((c, z, s)) for s in ("coring", "epoll", "uring", "mshot")}
                if not all(g.values()) or c == 1:
                    continue
                cpu = {s: g[s]["cpu_us_per_req"] for s in g}
                if not all(cpu.values()):
                    out.append(self.no_cpu(f"echo {c:3d}c {z:4d}B", cpu))
                    continue
                # the default server no dearer than raw liburing (the hand-off work's line)
                r = cpu["coring"] / cpu["uring"]
                line = (f"echo {c:3d}c {z:4d}B: CPU/req coring/raw {r:.2f} (<= 1.00: {verdict(r <= 1.0)})"
                        f"{self.paired(('echo', c, z, 'coring'), ('echo', c, z, 'uring'))}, "
                        f"coring/epoll {cpu['coring'] / cpu['epoll']:.2f}, coring/mshot {cpu['coring'] / cpu['mshot']:.2f}")
                st = echo.get((c, z, "stream"))
                if st and st["cpu_us_per_req"]:  # coring's best: the streaming server
                    cpu["stream"] = st["cpu_us_per_req"]
                    line += (f", stream/raw {cpu['stream'] / cpu['uring']:.2f}, "
                             f"stream/mshot {cpu['stream'] / cpu['mshot']:.2f}")
                best = min(cpu["coring"], cpu.get("stream", cpu["coring"]))
                if c == 500:
                    line += (f" (coring's best <= 0.90 of raw and <= 1.00 of mshot: "
                             f"{verdict(best <= 0.9 * cpu['uring'] and best <= cpu['mshot'])})")
                out.append(line)
        http = self.by("http")
        for c in self.m["http_conns"]:
            a, b = http.get((c, 0, "coring")), http.get((c, 0, "epoll"))
            if a and b and not (a["cpu_us_per_req"] and b["cpu_us_per_req"]):
                out.append(self.no_cpu(f"http {c:3d}c (wrk)", {"coring": a["cpu_us_per_req"],
                                                              "epoll": b["cpu_us_per_req"]}))
            elif a and b:
                r = a["cpu_us_per_req"] / b["cpu_us_per_req"]
                line = (f"http {c:3d}c (wrk): CPU/req coring/epoll {r:.2f} (<= 0.95: {verdict(r <= 0.95)}); "
                        f"req/s {a['rps_median'] / b['rps_median']:.2f}")
                st = http.get((c, 0, "stream"))
                if st and st["cpu_us_per_req"]:
                    line += f"; stream/epoll CPU/req {st['cpu_us_per_req'] / b['cpu_us_per_req']:.2f}"
                out.append(line)
        out += self.peer_targets(echo, http, verdict)
        cg = {(r["server"], r["conns"]): r for r in self.cg_rows}
        for c in (1, 50, 500):
            a, b = cg.get(("echo_coring", c)), cg.get(("echo_uring", c))
            if a and b:
                ri, rd = a["ir_per_req"] / b["ir_per_req"], a["data_per_req"] / b["data_per_req"]
                out.append(f"callgrind {c:3d}c: instructions/req coring/raw {ri:.2f} (<= 1.5: {verdict(ri <= 1.5)}), "
                           f"data accesses {rd:.2f} (<= 2: {verdict(rd <= 2)})")
        for c in (1, 50):  # a runtime a user would pick instead, at one connection and at many
            a, b = cg.get(("echo_coring", c)), cg.get(("echo_libuv", c))
            if a and b:
                ru = a["ir_per_req"] / b["ir_per_req"]
                out.append(f"callgrind {c:3d}c: instructions/req coring/libuv {ru:.2f} (<= 1.0: {verdict(ru <= 1.0)})")
        files = {(r["test"], r["depth"], r["engine"]): r for r in self.file_rows}
        for d in self.m["depths"]:
            a, b = files.get(("randread", d, "coring")), files.get(("randread", d, "fio_uring"))
            if a and b:
                # the defaults (no option set); coring 1/enter (opts.submit_batch = 1) beside it
                ri, rc = a["iops"] / b["iops"], a["cpu_us_per_io"] / b["cpu_us_per_io"]
                line = (f"fileio QD{d:<3}: IOPS coring/fio io_uring {ri:.2f} (>= 0.95: {verdict(ri >= 0.95)})"
                        f"{self.paired(('file', d, 'coring'), ('file', d, 'fio_uring'))}, "
                        f"CPU/IO {rc:.2f} (<= 1.10: {verdict(rc <= 1.1)})")
                each = files.get(("randread", d, "coring_each"))
                if each:
                    line += f"; coring 1/enter: IOPS {each['iops'] / b['iops']:.2f}"
                out.append(line)
        if getattr(self, "switch_out", None):
            c = re.search(r"^coring \(co\.h\).*?([\d.]+)\s+[\d.]+\s*$", self.switch_out, re.M)
            w = re.search(r"^coring, switch labels.*?([\d.]+)\s+[\d.]+\s*$", self.switch_out, re.M)
            p = re.search(r"^C\+\+20.*?([\d.]+)\s+[\d.]+\s*$", self.switch_out, re.M)
            if c and p:
                cv, pv = float(c.group(1)), float(p.group(1))
                line = (f"switch: coring {cv:.2f} ns vs C++20 {pv:.2f} ns, ratio {cv / pv:.2f} "
                        f"(<= 1: {verdict(cv <= pv)})")
                if w:  # the switch label backend, for the record (no target of its own)
                    line += f"; with switch labels {float(w.group(1)):.2f} ns, {float(w.group(1)) / pv:.2f}"
                out.append(line)
        if getattr(self, "memory_out", None):
            t = re.search(r"awaiting a timer\s+(\d+)", self.memory_out)
            e = re.search(r"awaiting an event\s+(\d+)", self.memory_out)
            if t and e:
                tv, ev = int(t.group(1)), int(e.group(1))
                out.append(f"memory: {tv} B per timer-waiting coroutine, {ev} B per event-waiting "
                           f"(<= 128: {verdict(tv <= 128 and ev <= 128)})")
        out += self.handoff_targets()
        out += kv.targets(self.kv_rows)
        if out:
            self.say("== targets (goals, not tests)")
            for line in out:
                self.say(line)
            self.say()

    @staticmethod
    def no_cpu(what, cpu):
        """The line of a target left without a verdict: a server's CPU per
        request read 0 (less than a clock tick over its window: on a machine
        this busy, a QUICK round's window is too short to judge)."""
        zero = ", ".join(s for s, v in cpu.items() if not v)
        return f"{what}: no verdict: CPU/req of {zero} read 0 (under a clock tick in the window)"

    def paired(self, a, b):
        """The range of a/b over the rounds (a and b ran in the same rounds,
        in turn): how far one round's ratio strays from the medians'."""
        r = ratio_range(self.per_round.get(a), self.per_round.get(b))
        return f" [rounds' ratios {r[0]:.2f}-{r[1]:.2f}]" if r else ""

    def peer_targets(self, echo, http, verdict):
        """coring against the peers: CPU per request <= 1.00x libuv and Asio,
        and (a line of their own) Go's net and tokio, at 50 x 64 B and
        500 x 1 KiB echo; <= 0.90x nginx, and Go's net/http, for HTTP."""
        out = []
        for c, z in ((50, 64), (500, 1024)):
            a = echo.get((c, z, "coring"))
            for group in (("libuv", "asio"), ("go", "tokio")):
                peers = {p: echo.get((c, z, p)) for p in group if echo.get((c, z, p))}
                zero = {TITLE[p]: 0 for p, row in peers.items() if not row["cpu_us_per_req"]}
                if a and not a["cpu_us_per_req"]:
                    zero["coring"] = 0
                if a and peers and zero:
                    out.append(self.no_cpu(f"echo {c:3d}c {z:4d}B", zero))
                elif a and peers:
                    r = {p: a["cpu_us_per_req"] / row["cpu_us_per_req"] for p, row in peers.items()}
                    out.append(f"echo {c:3d}c {z:4d}B: CPU/req " +
                               ", ".join(f"coring/{TITLE[p]} {v:.2f}" for p, v in r.items()) +
                               f" (<= 1.00: {verdict(all(v <= 1.0 for v in r.values()))})")
        for c in self.m["http_conns"]:
            for peer in ("nginx", "go"):
                a, b = http.get((c, 0, "coring")), http.get((c, 0, peer))
                if a and b and not (a["cpu_us_per_req"] and b["cpu_us_per_req"]):
                    out.append(self.no_cpu(f"http {c:3d}c (wrk)", {"coring": a["cpu_us_per_req"],
                                                                  TITLE[peer]: b["cpu_us_per_req"]}))
                elif a and b:
                    r = a["cpu_us_per_req"] / b["cpu_us_per_req"]
                    out.append(f"http {c:3d}c (wrk): CPU/req coring/{TITLE[peer]} {r:.2f} "
                               f"(<= 0.90: {verdict(r <= 0.9)}); req/s {a['rps_median'] / b['rps_median']:.2f}")
        return out
