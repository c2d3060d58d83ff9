# SPDX-License-Identifier: MIT
"""Section "handoff": hand-off between contexts, coring
(bench/contexts/handoff.c) against two pthreads (handoff_pthread.c), Go
(handoff.go) and tokio (handoff_tokio.rs), the last two built by
bench/runner/peers.py when go and Debian's cargo and tokio are there;
handoff.csv, its table, its targets and its two chart panels."""

import os
import time

import benchlib
from benchlib import BenchError, median, spread_pct

# The hand-off section (bench/contexts/handoff.c, handoff_pthread.c, handoff.go,
# handoff_tokio.rs): the
# counts and time bound of each shape, per mode (each shape stops at its
# count or its time, whichever comes first)
HANDOFF_MODES = {
    "quick": dict(rt=20000, items=500000, ops=400000, seconds=0.2, idle_ms=100),
    "default": dict(rt=200000, items=5000000, ops=4000000, seconds=1.0, idle_ms=200),
    "full": dict(rt=500000, items=10000000, ops=10000000, seconds=2.0, idle_ms=200),
}
HANDOFF_TIMEOUT = 300   # s, one run of one program
HANDOFF_BASE = ["pingpong", "transfer", "spawn", "chan1", "chan16", "chan256", "chan16_many", "chan256_many",
                "pingpong_one", "chan16_one", "chan256_one", "mutex1", "mutex32", "idle"]
# coring's shapes again with frames that follow their waker (co_sched_roam): the
# rule Go and tokio run every shape under, compared with their same shape
HANDOFF_ROAM = ["pingpong", "spawn", "chan1", "chan16", "chan256", "mutex1", "mutex32"]
HANDOFF_SHAPES = {"coring": HANDOFF_BASE + [s + "_roam" for s in HANDOFF_ROAM],
                  "pthread": ["spin", "hop", "cond", "mutex"], "go": HANDOFF_BASE}
# tokio has no transfer (a task cannot be moved to a thread) and no channel of
# capacity 0 (Go's stand-in)
HANDOFF_SHAPES["tokio"] = [s for s in HANDOFF_BASE if s != "transfer"]
# the table's rows: shape, label, the pthread limit's shape, the condition variable's
HANDOFF_ROWS = [
    ("pingpong", "channel ping-pong, capacity 1, round trip", "spin", "cond"),
    ("transfer", "co_transfer_to 0 -> 1 -> 0 (Go: unbuffered hop)", "hop", "cond"),
    ("spawn", "co_spawn_on round trip (Go: go func; tokio: spawn)", "spin", "cond"),
    ("chan1", "channel 8 B items, capacity 1", None, None),
    ("chan16", "channel 8 B items, capacity 16", None, None),
    ("chan256", "channel 8 B items, capacity 256", None, None),
    ("chan16_many", "capacity 16, recv_many (Go, tokio: one per receive)", None, None),
    ("chan256_many", "capacity 256, recv_many (Go, tokio: one per receive)", None, None),
    ("pingpong_one", "ping-pong, one context (GOMAXPROCS=1; current_thread)", None, None),
    ("chan16_one", "capacity 16, one context (GOMAXPROCS=1; current_thread)", None, None),
    ("chan256_one", "capacity 256, one context (GOMAXPROCS=1; current_thread)", None, None),
    ("mutex1", "mutex, 1 coroutine per context", "mutex", None),
    ("mutex32", "mutex, 32 coroutines per context", "mutex", None),
    ("idle", "idle, from 1 ms after a burst", None, None),
    ("pingpong_roam", "ping-pong, frames that follow their waker (roam)", "spin", "cond"),
    ("spawn_roam", "co_spawn_on round trip, roam", "spin", "cond"),
    ("chan1_roam", "channel capacity 1, roam", None, None),
    ("chan16_roam", "channel capacity 16, roam", None, None),
    ("chan256_roam", "channel capacity 256, roam", None, None),
    ("mutex1_roam", "mutex, 1 coroutine per context, roam", "mutex", None),
    ("mutex32_roam", "mutex, 32 coroutines per context, roam", "mutex", None),
]
HANDOFF_SHORT = {"pingpong": "ping-pong", "transfer": "transfer", "spawn": "spawn_on", "chan1": "chan cap 1",
                 "chan16": "chan cap 16", "chan256": "chan cap 256", "chan16_many": "cap 16, many",
                 "chan256_many": "cap 256, many", "pingpong_one": "ping-pong 1 ctx",
                 "chan16_one": "cap 16, 1 ctx", "chan256_one": "cap 256, 1 ctx", "mutex1": "mutex 1/ctx",
                 "mutex32": "mutex 32/ctx"}
HANDOFF_SHORT.update({s + "_roam": HANDOFF_SHORT[s] + ", roam" for s in HANDOFF_ROAM})
# the hand-off targets: coring's shape against a peer's, the ratio's bound
HANDOFF_GOALS = [
    ("pingpong", "go", "pingpong", "round trip coring/Go's channel round trip", "<=", 2),
    ("transfer", "go", "pingpong", "round trip coring/Go's channel round trip", "<=", 2),
    ("chan16", "go", "chan16", "items/s coring/Go", ">=", 0.5),
    ("chan256", "go", "chan256", "items/s coring/Go", ">=", 0.5),
    ("pingpong", "tokio", "pingpong", "round trip coring/tokio's channel round trip", "<=", 2),
    ("transfer", "tokio", "pingpong", "round trip coring/tokio's channel round trip", "<=", 2),
    ("chan16", "tokio", "chan16", "items/s coring/tokio", ">=", 0.5),
    ("chan256", "tokio", "chan256", "items/s coring/tokio", ">=", 0.5),
    ("mutex1", "pthread", "mutex", "ops/s coring/pthread_mutex", ">=", 0.5),
    ("mutex32", "pthread", "mutex", "ops/s coring/pthread_mutex", ">=", 0.5),
    # frames that follow their waker, against the peers' same shapes
    ("pingpong_roam", "go", "pingpong", "round trip coring/Go", "<=", 1),
    ("pingpong_roam", "tokio", "pingpong", "round trip coring/tokio", "<=", 1),
    ("spawn_roam", "go", "spawn", "round trip coring/Go", "<=", 1),
    ("spawn_roam", "tokio", "spawn", "round trip coring/tokio", "<=", 1),
    ("chan1_roam", "tokio", "chan1", "items/s coring/tokio", ">=", 1),
    ("chan1_roam", "go", "chan1", "items/s coring/Go", ">=", 0.5),
    ("chan16_roam", "go", "chan16", "items/s coring/Go", ">=", 1),
    ("chan256_roam", "go", "chan256", "items/s coring/Go", ">=", 1),
    ("mutex1_roam", "go", "mutex1", "ops/s coring/Go", ">=", 0.5),
    ("mutex32_roam", "go", "mutex32", "ops/s coring/Go", ">=", 0.5),
]


def peer_shape(shape):
    """The peers' shape shown beside coring's (a _roam row: their own)."""
    return shape[:-len("_roam")] if shape.endswith("_roam") else shape


HANDOFF_UNITS = {"ns": "us", "per_s": "M/s", "cpu_pct": "% of a CPU"}
HANDOFF_COLUMNS = ["shape", "peer", "value_median", "value_min", "value_max", "unit", "spread_pct", "n_median",
                   "rounds", "noisy_rounds", "mode", "date"]


class Handoff:
    """The hand-off section: the runs, the table, the targets, the chart's panels."""

    def handoff_round(self, peer, argv):
        """One run of a hand-off program: {shape: result line}, noisy flag."""
        def measure():
            t0 = time.monotonic()
            rc, out, err, _, other, _ = self.run_child(argv, HANDOFF_TIMEOUT)
            if rc != 0:
                raise BenchError(f"{' '.join(argv)} failed ({rc}):\n{out[-2000:]}{err[-2000:]}")
            got = {}
            for line in out.splitlines():
                if line.startswith("handoff "):
                    d = benchlib.parse_kv(line)
                    got[d["shape"]] = d
            if sorted(got) != sorted(HANDOFF_SHAPES[peer]):
                raise BenchError(f"{' '.join(argv)}: shapes {sorted(got)}, expected {sorted(HANDOFF_SHAPES[peer])}")
            # others' CPU as a share of the run's wall time (window 1 below):
            # noisy above NOISE of one CPU, as every other round
            return {"shapes": got, "other_cpu_s": other / max(time.monotonic() - t0, 1e-3)}
        return self.retry(measure, 1.0)

    def handoff(self):
        hm = dict(HANDOFF_MODES[self.mode])
        if os.environ.get("SECONDS_PER_ROUND"):
            hm["seconds"] = float(os.environ["SECONDS_PER_ROUND"])
        rounds = self.m["rounds"]
        self.say(f"== hand-off between contexts: coring (a scheduler of 2 contexts) vs Go vs tokio vs two "
                 f"pthreads (unpinned; median of {rounds} round(s), each shape at most {hm['seconds']:g} s)")
        args = ["--rt", str(hm["rt"]), "--items", str(hm["items"]), "--ops", str(hm["ops"]),
                "--seconds", str(hm["seconds"]), "--idle-ms", str(hm["idle_ms"])]
        progs = {"coring": [benchlib.program(self.bench, "handoff")] + args,
                 "pthread": [benchlib.program(self.bench, "handoff_pthread")] + args}
        # the peers built here (bench/runner/peers.py); one not built: said, its column "-"
        go = self.peer_program("handoff_go")
        if go:
            self.say("(Go: GOMAXPROCS=2; 1 in the one-context rows)")
            progs["go"] = ["env", "GOMAXPROCS=2", go] + args
        tokio = self.peer_program("handoff_tokio")
        if tokio:
            self.say("(tokio: a multi-thread runtime of 2 workers; the current-thread runtime in the "
                     "one-context rows)")
            progs["tokio"] = [tokio] + args
        res = {p: [] for p in progs}
        self.progress(f"{'handoff':<18}")
        for r in range(rounds):
            names = list(progs)
            for p in names[r % len(names):] + names[:r % len(names)]:  # rotate every round
                res[p].append(self.handoff_round(p, progs[p]))
                self.progress(".")
        self.progress("\n")
        for peer, runs in res.items():
            for shape in HANDOFF_SHAPES[peer]:
                vals = [x["shapes"][shape]["value"] for x in runs]
                self.handoff_rows.append({
                    "shape": shape, "peer": peer, "value_median": round(median(vals), 4),
                    "value_min": round(min(vals), 4), "value_max": round(max(vals), 4),
                    "unit": runs[0]["shapes"][shape]["unit"], "spread_pct": round(spread_pct(vals), 1),
                    "n_median": round(median([x["shapes"][shape]["n"] for x in runs])),
                    "rounds": len(runs), "noisy_rounds": sum(x["noisy"] for x in runs),
                    "mode": self.mode, "date": self.date})
        self.say(self.handoff_table())
        self.say()

    def handoff_value(self, peer, shape):
        """The median in the table's unit (us, M/s, % CPU), or None."""
        for r in self.handoff_rows:
            if r["peer"] == peer and r["shape"] == shape:
                v = r["value_median"]
                return v / 1e3 if r["unit"] == "ns" else v / 1e6 if r["unit"] == "per_s" else v
        return None

    def handoff_unit(self, shape):
        """The unit coring's program printed for shape (ns, per_s, cpu_pct)."""
        return next((r["unit"] for r in self.handoff_rows if r["peer"] == "coring" and r["shape"] == shape),
                    "per_s")

    def handoff_table(self):
        cols = ["coring", "Go", "tokio", "pthread limit", "pthread cond"]
        lines = [f"{'shape':<56} {'unit':<10}" + "".join(f"{c:>14}" for c in cols) +
                 f"{'coring/Go':>11}{'coring/tokio':>14}{'coring/limit':>14}{'spread %':>10}"]

        def fmt(v):
            return "-" if v is None else f"{v:.3g}" if v < 100 else f"{v:.0f}"
        for shape, label, limit, cond in HANDOFF_ROWS:
            unit = HANDOFF_UNITS[self.handoff_unit(shape)]
            c, g = self.handoff_value("coring", shape), self.handoff_value("go", peer_shape(shape))
            t = self.handoff_value("tokio", peer_shape(shape))
            lim = self.handoff_value("pthread", limit) if limit else None
            slp = self.handoff_value("pthread", cond) if cond else None
            rat = [f"{c / b:.2f}" if c is not None and b else "-" for b in (g, t, lim)]
            spread = [r["spread_pct"] for r in self.handoff_rows if r["peer"] == "coring" and r["shape"] == shape]
            lines.append(f"{label:<56} {unit:<10}" + "".join(f"{fmt(v):>14}" for v in (c, g, t, lim, slp)) +
                         f"{rat[0]:>11}{rat[1]:>14}{rat[2]:>14}{spread[0] if spread else '-':>10}")
        noisy = sum(r["noisy_rounds"] for r in self.handoff_rows if r["shape"] in ("pingpong", "spin"))
        lines.append("(ratios of the figures shown: for round trips lower is better, for rates higher; "
                     "limit: two threads spinning on one cache line (for the transfer, with 128 bytes that move to the "
                     "other thread at each turn), or on a pthread_mutex; cond: two threads "
                     "taking turns through a condition variable; spread: coring's, (max - min) / median)")
        if noisy:
            lines.append(f"({noisy} noisy run(s) kept after {self.retries} repeats)")
        return "\n".join(lines)

    def handoff_targets(self):
        """The hand-off targets, from this run's hand-off rows."""
        def verdict(ok):
            return "met" if ok else "MISSED"
        v = self.handoff_value
        out = []
        for shape, peer, pshape, what, op, bound in HANDOFF_GOALS:
            c, b = v("coring", shape), v(peer, pshape)
            if c is not None and b:
                ok = c / b <= bound if op == "<=" else c / b >= bound
                out.append(f"handoff {shape}: {what} {c / b:.2f} ({op} {bound}: {verdict(ok)})")
        c = v("coring", "idle")
        if c is not None:
            out.append(f"handoff idle: {c:.2f} % of a CPU from 1 ms after the last work (<= 2: {verdict(c <= 2)})")
        return out

    def handoff_plots(self, tmp):
        """Two chart panels: round trips and rates (empty without data)."""
        if not self.handoff_rows:
            return "set multiplot next\nset multiplot next"
        peers = [("coring", None), ("go", None), ("tokio", None), ("pthread", "limit"), ("pthread", "cond")]
        titles = ["coring", "Go", "tokio", "2 threads: limit", "2 threads: cond. var."]
        colors = ['"#1b9e77"', '"#7570b3"', '"#a6761d"', '"#d95f02"', '"#e7298a"']
        rt, rate = os.path.join(tmp, "handoff_rt.dat"), os.path.join(tmp, "handoff_rate.dat")
        with open(rt, "w") as f_rt, open(rate, "w") as f_rate:
            for shape, label, limit, cond in HANDOFF_ROWS:
                if shape == "idle":
                    continue
                which = {None: shape, "limit": limit, "cond": cond}
                cells = [self.handoff_value(p, which[k] if p == "coring" or k else peer_shape(shape))
                         if which[k] else None for p, k in peers]
                f = f_rt if self.handoff_unit(shape) == "ns" else f_rate
                f.write(f'"{HANDOFF_SHORT[shape]}" ' + " ".join("-" if x is None else f"{x:g}" for x in cells) + "\n")

        def hist(data):
            return "plot " + ", ".join(f'"{data}" using {2 + i}' + (":xtic(1)" if i == 0 else "") +
                                       f' title "{t}" lc rgb {colors[i]}' for i, t in enumerate(titles))
        return f"""set ylabel "us per round trip (log)"
set title "hand-off between 2 contexts: round trips (lower is better)"
{hist(rt)}
set xtics rotate by -60
set ylabel "million items or lock operations/s (log)"
set title "hand-off between 2 contexts: channel items/s and mutex ops/s (higher is better)"
{hist(rate)}"""
