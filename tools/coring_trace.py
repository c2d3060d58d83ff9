#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Read a coring trace (docs/tracing.md) and turn it into something to look at.

    coring_trace.py text TRACE                  the events, one a line
    coring_trace.py json TRACE [-o OUT]         Trace Event JSON (Perfetto, chrome://tracing)
    coring_trace.py validate JSON               every begin has its end, flows connect
    coring_trace.py dot TRACE --fn NAME [-o OUT]
                                                a coroutine function's state machine (Graphviz)
    coring_trace.py timeline TRACE -o PNG [--window MS] [--at MS]
                                                the runs per thread over time (gnuplot)

Names and lines come from the program's own files (the trace records where
they were loaded): addr2line and objdump from binutils, debug info (-g) for
file:line. Python 3 standard library only.
"""

import argparse
import bisect
import collections
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

KINDS = {1: "spawn", 2: "start", 3: "resume", 4: "yield", 5: "wait", 6: "wake", 7: "done",
         8: "transfer", 9: "steal", 10: "cancel", 11: "timeout", 12: "submit", 13: "complete",
         14: "run", 15: "context", 16: "follow"}
K = {v: k for k, v in KINDS.items()}
# the awaiter kinds of a WAIT (lib/common/awaiter.h; test/meta/trace_kinds.py keeps them in step)
AWAITERS = {0: "await", 1: "io", 2: "wait", 3: "transfer", 4: "when", 5: "limit", 6: "failed",
            7: "stream", 8: "turn"}
# io_uring opcodes (linux/io_uring.h) the library's preps use
OPCODES = {0: "nop", 1: "readv", 2: "writev", 3: "fsync", 6: "poll_add", 9: "sendmsg",
           10: "recvmsg", 11: "timeout", 13: "accept", 14: "async_cancel", 15: "link_timeout",
           16: "connect", 17: "fallocate", 18: "openat", 19: "close", 21: "statx", 22: "read",
           23: "write", 24: "fadvise", 25: "madvise", 26: "send", 27: "recv", 29: "epoll_ctl",
           30: "splice", 34: "tee", 34 + 1: "shutdown", 36: "renameat", 37: "unlinkat",
           38: "mkdirat", 39: "symlinkat", 40: "linkat", 45: "socket", 47: "send_zc",
           50: "waitid", 55: "ftruncate"}
SWITCH_LABEL = 0x5C000000  # co.h's switch backend: 0x5C000000 + __LINE__
# the macros of co.h that store a resume label
SUSPEND = re.compile(r"\bCO_(YIELD|YIELD_VALUE|AWAIT|AWAIT_UNTIL|AWAIT_TASK)\s*\(")


class TraceError(Exception):
    pass


class Event:
    __slots__ = ("t", "kind", "sub", "arg", "e", "frame", "a", "b", "c", "d", "thread", "seq")

    def __str__(self):
        return f"{self.t} {KINDS.get(self.kind, self.kind)}"


class Trace:
    """The records of a trace file."""

    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        if len(data) < 32 or data[:8] != b"CORTRACE":
            raise TraceError(f"{path}: not a coring trace")
        version, esize, order, self.pid, self.t0 = struct.unpack_from("<IIIIQ", data, 8)
        if order != 0x01020304:
            raise TraceError(f"{path}: written on a machine of the other byte order")
        if version != 1 or esize != 64:
            raise TraceError(f"{path}: version {version}, events of {esize} bytes: unknown")
        self.events, self.threads, self.maps = [], {}, []
        self.end = None
        off, seq = 32, 0
        while off + 8 <= len(data):
            rtype, size = struct.unpack_from("<II", data, off)
            off += 8
            if off + size > len(data):
                raise TraceError(f"{path}: a record runs past the end of the file")
            body = data[off:off + size]
            off += size
            if rtype == 1:
                index, tid, rec, drop = struct.unpack_from("<IiQQ", body)
                name = body[24:40].split(b"\0")[0].decode(errors="replace")
                ctx, _pad, engine = struct.unpack_from("<iIQ", body, 40)
                self.threads[index] = {"tid": tid, "recorded": rec, "dropped": drop, "name": name,
                                       "context": ctx, "engine": engine}
            elif rtype == 2:
                index, count = struct.unpack_from("<II", body)
                if size != 8 + 64 * count:
                    raise TraceError(f"{path}: an events record of the wrong size")
                for k in range(count):
                    w = struct.unpack_from("<8Q", body, 8 + 64 * k)
                    ev = Event()
                    ev.t, info, ev.e, ev.frame, ev.a, ev.b, ev.c, ev.d = w
                    ev.kind = info & 0xFF
                    ev.sub = (info >> 8) & 0xFF
                    arg = info >> 32
                    ev.arg = arg - (1 << 32) if arg >= 1 << 31 else arg
                    ev.thread = index
                    ev.seq = seq
                    seq += 1
                    self.events.append(ev)
            elif rtype == 3:
                self.maps = parse_maps(body.decode(errors="replace"))
            elif rtype == 4:
                rec, drop, lost, nthreads = struct.unpack_from("<QQQI", body)
                self.end = {"recorded": rec, "dropped": drop, "lost": lost, "threads": nthreads}
            else:
                raise TraceError(f"{path}: unknown record type {rtype}")
        if self.end is None:
            raise TraceError(f"{path}: no end record (the program did not stop the trace?)")
        # one clock for every thread: in time order, a thread's own order kept
        self.events.sort(key=lambda ev: (ev.t, ev.seq))

    def by_thread(self):
        out = collections.defaultdict(list)
        for ev in self.events:
            out[ev.thread].append(ev)
        for evs in out.values():
            evs.sort(key=lambda ev: ev.seq)
        return out


def parse_maps(text):
    maps = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        maps.append((lo, hi, int(parts[2], 16), parts[5].strip()))
    maps.sort()
    return maps


# ---- names and lines ---------------------------------------------------------

def elf_loads(path):
    """PT_LOAD segments of an ELF64 file: (offset, vaddr, filesz)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            return []
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        f.seek(phoff)
        ph = f.read(phentsize * phnum)
    loads = []
    for i in range(phnum):
        ptype, _flags, off, vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", ph, i * phentsize)
        if ptype == 1:
            loads.append((off, vaddr, filesz))
    return loads


class Resolver:
    """Run-time addresses to (function, file, line), by the maps the trace holds."""

    def __init__(self, trace):
        self.maps = trace.maps
        self.starts = [m[0] for m in self.maps]
        self.loads = {}
        self.funcs = {}    # address -> (name, file, line)
        self.labels = {}   # (fn address, label) -> (file, line, exact)
        self.disasm = {}   # (path, function) -> {label vaddr: (file, line)}
        self.sources = {}  # source file -> lines with a suspension point

    def where(self, addr):
        """(path, vaddr in that file) of a run-time address, or None."""
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0 or not (self.maps[i][0] <= addr < self.maps[i][1]):
            return None
        lo, _hi, off, path = self.maps[i]
        if not os.path.exists(path):
            return None
        if path not in self.loads:
            try:
                self.loads[path] = elf_loads(path)
            except OSError:
                self.loads[path] = []
        foff = addr - lo + off
        for poff, vaddr, size in self.loads[path]:
            if poff <= foff < poff + size:
                return path, vaddr + (foff - poff)
        return None

    def _addr2line(self, path, vaddrs):
        try:
            out = subprocess.run(["addr2line", "-f", "-e", path] + [hex(v) for v in vaddrs],
                                 capture_output=True, text=True, check=True).stdout.splitlines()
        except (OSError, subprocess.CalledProcessError):
            return [("??", "??", 0)] * len(vaddrs)
        res = []
        for k in range(len(vaddrs)):
            name = out[2 * k] if 2 * k < len(out) else "??"
            loc = out[2 * k + 1] if 2 * k + 1 < len(out) else "??:0"
            m = re.match(r"^(.*):(\d+|\?)", loc)
            file, line = (m.group(1), int(m.group(2)) if m.group(2).isdigit() else 0) if m else ("??", 0)
            res.append((name, file, line))
        return res

    def func(self, addr):
        """(name, file, line) of the function at addr."""
        if addr not in self.funcs:
            w = self.where(addr)
            if w is None:
                self.funcs[addr] = (f"0x{addr:x}", "??", 0)
            else:
                self.funcs[addr] = self._addr2line(w[0], [w[1]])[0]
        return self.funcs[addr]

    def prefetch(self, addrs):
        """Resolve many function addresses with one addr2line per file."""
        per = collections.defaultdict(list)
        for a in set(addrs) - set(self.funcs):
            w = self.where(a)
            if w is None:
                self.funcs[a] = (f"0x{a:x}", "??", 0)
            else:
                per[w[0]].append((a, w[1]))
        for path, items in per.items():
            for (a, _v), r in zip(items, self._addr2line(path, [v for _a, v in items])):
                self.funcs[a] = r

    def _label_lines(self, path, name):
        """Resume labels of function `name` in path: {vaddr: [(file, line), ...]}, from the
        instructions that store them (CO__SET, written on the suspension point's line;
        the compiler may move one to another line, and give two points whose code after
        them is the same one label)."""
        key = (path, name)
        if key in self.disasm:
            return self.disasm[key]
        found = {}
        try:
            out = subprocess.run(["objdump", "-d", "-l", "--no-show-raw-insn",
                                  f"--disassemble={name}", path],
                                 capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            out = ""
        cur = None
        inside = re.compile(r"\blea\w*\s+[-0-9a-fx]+\(%rip\),%\w+\s+#\s*(?:0x)?([0-9a-f]+)\s+<"
                            + re.escape(name) + r"\+0x")
        for line in out.splitlines():
            m = re.match(r"^(/\S+|[^\s:]+\.[ch]\w*):(\d+)", line)
            if m:
                cur = (m.group(1), int(m.group(2)))
                continue
            m = inside.search(line)
            if m and cur:
                sites = found.setdefault(int(m.group(1), 16), [])
                if cur not in sites:
                    sites.append(cur)
        self.disasm[key] = found
        return found

    def _points(self, file):
        """Lines of a source file with a suspension point (a CO_ macro that sets a label)."""
        if file not in self.sources:
            pts = set()
            try:
                with open(file, errors="replace") as f:
                    for k, line in enumerate(f, 1):
                        if SUSPEND.search(line):
                            pts.add(k)
            except OSError:
                pts = None
            self.sources[file] = pts
        return self.sources[file]

    def label(self, fn, label):
        """(file, line, exact) of a resume point of function fn; label 0 is the start.
        Switch backend: the line is in the label. Computed goto: the lines of the
        instructions that store the label, if each has a suspension point in the source
        and no other label of the function is stored on them ("22+45" when the compiler
        made two points one label: their code after them is the same); otherwise, not
        exact, the first suspension point at or before the line of the code after the
        label."""
        key = (fn, label)
        if key in self.labels:
            return self.labels[key]
        name, ffile, _fline = self.func(fn)
        if label == 0:
            res = (ffile, 0, True)
        elif SWITCH_LABEL <= label < SWITCH_LABEL + 0x1000000:
            res = (ffile, label - SWITCH_LABEL, True)
        else:
            w, res = self.where(label), None
            if w:
                lines = self._label_lines(w[0], name)
                sites = lines.get(w[1], [])
                files = {f for f, _l in sites}
                if len(files) == 1:
                    f1 = sites[0][0]
                    pts = self._points(f1)
                    mine = sorted({l for _f, l in sites})
                    others = {l for v, ss in lines.items() if v != w[1] for _f, l in ss}
                    if (pts is None or all(l in pts for l in mine)) and not others & set(mine):
                        res = (f1, "+".join(map(str, mine)), True)
                if res is None:
                    _n, f2, l2 = self._addr2line(w[0], [w[1]])[0]
                    pts = self._points(f2)
                    before = [p for p in (pts or ()) if p <= l2]
                    if before:
                        res = (f2, max(before), False)
                    elif sites:
                        res = (sites[0][0], sites[0][1], False)
                    else:
                        res = (f2, l2, False)
            if res is None:
                res = ("??", 0, False)
        self.labels[key] = res
        return res

    def point(self, fn, label):
        """'file.c:LINE' of a resume point."""
        f, line, exact = self.label(fn, label)
        if label == 0:
            return "start"
        return f"{os.path.basename(f)}:{line}" + ("" if exact else "~")


# ---- text ----------------------------------------------------------------------

def describe(ev, res, t0):
    k = KINDS.get(ev.kind, str(ev.kind))
    s = f"{(ev.t - t0) / 1000:12.3f} us  t{ev.thread:<3} {k:<9}"
    if ev.frame:
        s += f" frame 0x{ev.frame:x}"
    if ev.kind in (K["start"], K["resume"], K["yield"], K["wait"]):
        s += f" {res.func(ev.a)[0]} at {res.point(ev.c, ev.d)}"
        if ev.c != ev.a:
            s += f" (in {res.func(ev.c)[0]}, awaited at {res.point(ev.a, ev.b)})"
        if ev.kind == K["wait"]:
            s += f" on {AWAITERS.get(ev.sub, ev.sub)}"
    elif ev.kind == K["done"]:
        s += f" {res.func(ev.a)[0]} status {ev.arg}"
    elif ev.kind == K["spawn"]:
        s += f" {res.func(ev.a)[0]} to engine 0x{ev.b:x}"
    elif ev.kind == K["wake"]:
        s += f" for engine 0x{ev.a:x}"
    elif ev.kind in (K["transfer"], K["steal"], K["follow"]):
        s += f" engine 0x{ev.a:x} -> 0x{ev.b:x}"
    elif ev.kind == K["submit"]:
        s += f" {OPCODES.get(ev.sub, ev.sub)} fd {ev.arg} op 0x{ev.a:x}"
    elif ev.kind == K["complete"]:
        s += f" op 0x{ev.a:x} res {ev.arg}" + (" (its time limit)" if ev.sub == 1 else "")
    elif ev.kind == K["timeout"]:
        s += " co_timeout" if ev.b == 1 else " waiter's timer"
    elif ev.kind == K["run"]:
        s += f" engine 0x{ev.a:x} {'begins' if ev.b else 'ends'}"
    elif ev.kind == K["context"]:
        s += f" context {ev.arg} (group {ev.c})"
    return s


def cmd_text(args):
    tr = Trace(args.trace)
    res = Resolver(tr)
    res.prefetch([ev.a for ev in tr.events] + [ev.c for ev in tr.events])
    out = open(args.output, "w") if args.output else sys.stdout
    for ev in tr.events:
        print(describe(ev, res, tr.t0), file=out)
    e = tr.end
    print(f"# {e['recorded']} events recorded by {e['threads']} threads, {e['dropped']} dropped, "
          f"{e['lost']} lost", file=out)
    return 0


# ---- Trace Event JSON ------------------------------------------------------------

def track_names(tr):
    """A name per thread: its context, else the engine it ran, else its thread name."""
    out = {}
    for idx in set(ev.thread for ev in tr.events) | set(tr.threads):
        th = tr.threads.get(idx, {})
        if th.get("context", -1) >= 0:
            label = f"context {th['context']}"
        elif th.get("engine"):
            label = f"engine 0x{th['engine']:x}"
        else:
            label = th.get("name") or "thread"
        out[idx] = f"{label} (tid {th.get('tid', '?')})"
    return out


def to_json(tr, res):
    """Trace Event JSON: a track per thread (a context's or an engine's), a slice per run
    of a coroutine, flows from each wake (or transfer) to the resume it caused."""
    us = lambda t: round((t - tr.t0) / 1000.0, 3)  # noqa: E731
    pid = tr.pid
    out = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
            "args": {"name": f"coring (pid {pid})"}}]
    for idx, name in sorted(track_names(tr).items()):
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": idx,
                    "args": {"name": name}})
    res.prefetch([ev.a for ev in tr.events] + [ev.c for ev in tr.events])
    per_thread = tr.by_thread()
    # flows: the next resume of the frame after its wake or transfer
    pending, flows, nflow = {}, [], 0
    for ev in tr.events:
        if ev.kind == K["transfer"]:
            pending[ev.frame] = ("transfer", ev)
        elif ev.kind == K["wake"]:
            if ev.frame not in pending or pending[ev.frame][0] != "transfer":
                pending[ev.frame] = ("wake", ev)
        elif ev.kind in (K["start"], K["resume"]) and ev.frame in pending:
            cat, src = pending.pop(ev.frame)
            nflow += 1
            flows.append((cat, nflow, src, ev))
    starts = {id(src) for _c, _n, src, _d in flows}
    for idx, evs in sorted(per_thread.items()):
        open_b = None
        last = None
        for ev in evs:
            ts = us(ev.t)
            last = ts
            if ev.kind in (K["start"], K["resume"]):
                if open_b is not None:  # its end was lost with a dropped event
                    out.append({"ph": "E", "pid": pid, "tid": idx, "ts": ts})
                name = res.func(ev.a)[0]
                out.append({"ph": "B", "pid": pid, "tid": idx, "ts": ts, "name": name, "cat": "run",
                            "args": {"frame": f"0x{ev.frame:x}", "from": res.point(ev.c, ev.d)}})
                open_b = ev
            elif ev.kind in (K["yield"], K["wait"], K["done"]):
                if open_b is None:  # its begin was dropped (drop-oldest)
                    continue
                args = {}
                if ev.kind == K["done"]:
                    args["status"] = ev.arg
                else:
                    args["to"] = res.point(ev.c, ev.d)
                    args["how"] = "yield" if ev.kind == K["yield"] else AWAITERS.get(ev.sub, "await")
                out.append({"ph": "E", "pid": pid, "tid": idx, "ts": ts, "args": args})
                open_b = None
            elif ev.kind in (K["wake"], K["transfer"]):
                if id(ev) in starts:
                    out.append({"ph": "X", "pid": pid, "tid": idx, "ts": ts, "dur": 0,
                                "name": KINDS[ev.kind], "cat": KINDS[ev.kind],
                                "args": {"frame": f"0x{ev.frame:x}"}})
            elif ev.kind in (K["run"], K["context"]):
                continue
            else:
                args = {"frame": f"0x{ev.frame:x}"}
                if ev.kind == K["submit"]:
                    args.update(op=OPCODES.get(ev.sub, ev.sub), fd=ev.arg)
                elif ev.kind == K["complete"]:
                    args.update(res=ev.arg, deadline=ev.sub == 1)
                out.append({"ph": "i", "s": "t", "pid": pid, "tid": idx, "ts": ts,
                            "name": KINDS.get(ev.kind, "event"), "cat": "event", "args": args})
        if open_b is not None:
            out.append({"ph": "E", "pid": pid, "tid": idx, "ts": last})
    for cat, n, src, dst in flows:
        out.append({"ph": "s", "pid": pid, "tid": src.thread, "ts": us(src.t), "id": n,
                    "name": cat, "cat": cat})
        out.append({"ph": "f", "bp": "e", "pid": pid, "tid": dst.thread, "ts": us(dst.t),
                    "id": n, "name": cat, "cat": cat})
    meta = dict(tr.end)
    return {"traceEvents": out, "displayTimeUnit": "ns", "otherData": {
        "coring": f"{meta['recorded']} events, {meta['dropped']} dropped, {meta['lost']} lost"}}


def cmd_json(args):
    tr = Trace(args.trace)
    doc = to_json(tr, Resolver(tr))
    with (open(args.output, "w") if args.output else sys.stdout) as out:
        json.dump(doc, out, separators=(",", ":"))
    return 0


def validate(doc):
    """Problems of a Trace Event JSON document, [] if none: every begin has its end on its
    track, in time order; every flow has one start and one end, the end not earlier, each
    inside a slice of its track."""
    errs = []
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["no traceEvents list"]
    stacks = collections.defaultdict(list)
    slices = collections.defaultdict(list)
    last_ts = {}
    flows = collections.defaultdict(dict)
    for i, ev in enumerate(doc["traceEvents"]):
        ph = ev.get("ph")
        if ph == "M":
            continue
        if not isinstance(ev.get("ts"), (int, float)) or "pid" not in ev or "tid" not in ev:
            errs.append(f"event {i}: no ts, pid or tid")
            continue
        track, ts = (ev["pid"], ev["tid"]), ev["ts"]
        if ph in ("B", "E"):
            if ts < last_ts.get(track, ts):
                errs.append(f"event {i}: goes back in time on track {track}")
            last_ts[track] = ts
            if ph == "B":
                stacks[track].append((ts, i))
            elif not stacks[track]:
                errs.append(f"event {i}: an end without a begin on track {track}")
            else:
                b, _bi = stacks[track].pop()
                slices[track].append((b, ts))
        elif ph == "X":
            if not isinstance(ev.get("dur"), (int, float)) or ev["dur"] < 0:
                errs.append(f"event {i}: a complete event without a duration")
            else:
                slices[track].append((ts, ts + ev["dur"]))
        elif ph in ("s", "f"):
            key = (ev.get("cat"), ev.get("id"))
            if ph in flows[key]:
                errs.append(f"event {i}: a second flow {ph} for id {key}")
            flows[key][ph] = (track, ts, i)
        elif ph not in ("i", "I", "C"):
            errs.append(f"event {i}: unknown phase {ph!r}")
    for track, st in stacks.items():
        for _ts, i in st:
            errs.append(f"event {i}: a begin without an end on track {track}")
    for key, fl in flows.items():
        if "s" not in fl or "f" not in fl:
            errs.append(f"flow {key}: {'no end' if 's' in fl else 'no start'}")
            continue
        (st, sts, si), (ft, fts, fi) = fl["s"], fl["f"]
        if fts < sts:
            errs.append(f"flow {key}: ends (event {fi}) before it starts (event {si})")
        for track, ts, i in ((st, sts, si), (ft, fts, fi)):
            if not any(b <= ts <= e for b, e in slices[track]):
                errs.append(f"flow {key}: event {i} is in no slice of track {track}")
    return errs


def cmd_validate(args):
    try:
        with open(args.json) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"validate: {args.json}: {e}", file=sys.stderr)
        return 1
    errs = validate(doc)
    for e in errs[:50]:
        print(f"validate: {e}", file=sys.stderr)
    if errs:
        print(f"validate: {len(errs)} problems", file=sys.stderr)
        return 1
    n = sum(1 for ev in doc["traceEvents"] if ev.get("ph") == "B")
    nf = sum(1 for ev in doc["traceEvents"] if ev.get("ph") == "s")
    print(f"validate: ok: {n} slices closed, {nf} flows connected")
    return 0


# ---- the state machine as DOT -------------------------------------------------------

def fmt_ns(ns):
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= div:
            return f"{ns / div:.3g} {unit}"
    return f"{ns:.0f} ns"


def state_machine(tr, res, name):
    """For coroutine function `name`: its states (suspension points, and start and done) and
    the transitions the trace shows between them, each with a count and the time spent
    running it; each state with the time spent suspended there."""
    res.prefetch([ev.a for ev in tr.events] + [ev.c for ev in tr.events])
    fns = {a for a in set(ev.a for ev in tr.events) | set(ev.c for ev in tr.events)
           if a and res.func(a)[0] == name}
    if not fns:
        raise TraceError(f"no coroutine function {name} in the trace")
    nodes = collections.OrderedDict()
    edges = collections.defaultdict(lambda: [0, 0])
    waits = collections.defaultdict(int)
    per_frame = collections.defaultdict(list)
    for ev in tr.events:
        if ev.frame and ev.kind in (K["start"], K["resume"], K["yield"], K["wait"], K["done"]):
            per_frame[ev.frame].append(ev)

    def mine(ev):
        """The state of `name` in a start/resume/suspend event: (fn, label), or None."""
        if ev.c in fns:
            return (ev.c, ev.d)
        if ev.a in fns:
            return (ev.a, ev.b)  # the root awaits a child: it is at that await
        return None

    for evs in per_frame.values():
        prev = None          # the state the frame left (its last suspension point)
        since = None         # when it resumed from prev
        parked = None        # when it suspended at prev
        for ev in evs:
            if ev.kind == K["start"]:
                st = mine(ev)
                prev, since, parked = (("start", 0) if st else None), ev.t, None
                if prev:
                    nodes.setdefault(prev, "start")
                continue
            if ev.kind == K["resume"]:
                if prev is not None and parked is not None:
                    waits[prev] += ev.t - parked
                since = ev.t
                if prev is None:
                    st = mine(ev)
                    prev = st
                continue
            if ev.kind == K["done"]:
                st = ("done", 0) if ev.a in fns else None
            else:
                st = mine(ev)
                if st is not None:
                    how = "yield" if ev.kind == K["yield"] else AWAITERS.get(ev.sub, "await")
                    if st[0] == ev.a and ev.c != ev.a:
                        how = f"await {res.func(ev.c)[0]}"
                    nodes.setdefault(st, how)
            if st is None:
                continue
            if st == ("done", 0):
                nodes.setdefault(st, "done")
            if prev is not None:
                e = edges[(prev, st)]
                e[0] += 1
                e[1] += ev.t - since if since is not None else 0
            prev, parked = st, ev.t
    return nodes, edges, waits


def to_dot(tr, res, name):
    nodes, edges, waits = state_machine(tr, res, name)
    ids = {}
    lines = [f'digraph "{name}" {{', '  rankdir=TB;',
             '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontname="Helvetica"];',
             '  edge [fontname="Helvetica", fontsize=10];',
             f'  label="{name}: states and observed transitions (count, time running)";',
             '  labelloc=t;']
    for k, (st, how) in enumerate(nodes.items()):
        ids[st] = f"s{k}"
        if st[0] in ("start", "done"):
            lines.append(f'  s{k} [label="{st[0]}", shape=ellipse, fillcolor="#dddddd"];')
            continue
        label = f"{res.point(*st)}\\n{how}"
        if waits.get(st):
            label += f"\\nsuspended {fmt_ns(waits[st])} in all"
        lines.append(f'  s{k} [label="{label}"];')
    for (a, b), (n, ns) in edges.items():
        avg = fmt_ns(ns / n) if n else "0"
        lines.append(f'  {ids[a]} -> {ids[b]} [label="{n}x, {avg} avg"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def cmd_dot(args):
    tr = Trace(args.trace)
    text = to_dot(tr, Resolver(tr), args.fn_name)
    with (open(args.output, "w") if args.output else sys.stdout) as out:
        out.write(text)
    return 0


# ---- a timeline picture ------------------------------------------------------------

def cmd_timeline(args):
    tr = Trace(args.trace)
    res = Resolver(tr)
    res.prefetch([ev.a for ev in tr.events])
    names = track_names(tr)
    rows = {idx: k for k, idx in enumerate(sorted(names))}
    runs, funcs = [], {}
    wakes = []
    for idx, evs in tr.by_thread().items():
        cur = None
        for ev in evs:
            if ev.kind in (K["start"], K["resume"]):
                cur = ev
            elif ev.kind in (K["yield"], K["wait"], K["done"]) and cur is not None:
                fn = res.func(cur.a)[0]
                funcs.setdefault(fn, len(funcs) + 1)
                runs.append((rows[idx], (cur.t - tr.t0) / 1e6, (ev.t - tr.t0) / 1e6, funcs[fn]))
                cur = None
            elif ev.kind == K["complete"]:
                wakes.append((rows[idx], (ev.t - tr.t0) / 1e6))
    if not runs:
        raise TraceError("no coroutine ran in this trace")
    lo, hi = min(r[1] for r in runs), max(r[2] for r in runs)
    if args.window:
        if args.at is None:
            # the busiest stretch: the window with runs on the most threads, and
            # then the most runs (a full ring keeps only its thread's newest events)
            per = collections.defaultdict(list)
            for r in runs:
                per[r[0]].append(r[1])
            for v in per.values():
                v.sort()
            starts = sorted(r[1] for r in runs)
            best, at = (-1, -1), lo
            for t in starts[::max(1, len(starts) // 4000)]:
                counts = [bisect.bisect_right(v, t + args.window) - bisect.bisect_left(v, t)
                          for v in per.values()]
                score = (sum(1 for c in counts if c), sum(counts))
                if score > best:
                    best, at = score, t
        else:
            at = args.at
        lo, hi = at, at + args.window
    with tempfile.TemporaryDirectory(prefix="coring-timeline-") as tmp:
        shown = {}  # function -> its data file, for those with runs in the window
        for fn, k in sorted(funcs.items(), key=lambda x: x[1]):
            mine = [r for r in runs if r[3] == k and r[2] >= lo and r[1] <= hi]
            if mine:
                shown[fn] = os.path.join(tmp, f"runs{k}.dat")
                with open(shown[fn], "w") as f:
                    for row, a, b, _k in mine:
                        f.write(f"{a:.6f} {b:.6f} {row}\n")
        cqe = os.path.join(tmp, "cqes.dat")
        with open(cqe, "w") as f:
            for row, t in wakes:
                if lo <= t <= hi:
                    f.write(f"{t:.6f} {row}\n")
        ytics = ", ".join(f'"{names[idx]}" {k}' for idx, k in rows.items())
        plots = []
        for fn, path in shown.items():
            plots.append(f"'{path}' using 1:3:1:2:($3-0.35):($3+0.35) "
                         f"with boxxyerror lc {funcs[fn]} title '{fn}'")
        if not plots:
            raise TraceError("no coroutine ran in that window")
        if os.path.getsize(cqe):
            plots.append(f"'{cqe}' using 1:($2+0.42) with points pt 7 ps 0.3 lc rgb '#444444' "
                         "title 'I/O completion'")
        e = tr.end
        script = f"""
set terminal pngcairo size {args.width},{120 + 70 * len(rows)} font 'Sans,10' noenhanced
set output '{os.path.abspath(args.output)}'
set title "{args.title or 'coring: coroutine runs per thread'} ({e['recorded']} events, {e['dropped']} dropped)"
set xlabel 'time since the trace began (ms)'
set xrange [{lo}:{hi}]
set yrange [-0.7:{len(rows) - 0.3 + 0.5}]
set ytics ({ytics})
set style fill solid 0.85 noborder
set key outside bottom center horizontal
set grid xtics
plot {', '.join(plots)}
"""
        p = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
        if p.returncode != 0:
            raise TraceError(f"gnuplot: {p.stderr.strip()}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("text", help="the events, one a line")
    p.add_argument("trace")
    p.add_argument("-o", "--output")
    p.set_defaults(func=cmd_text)
    p = sub.add_parser("json", help="Trace Event JSON for Perfetto")
    p.add_argument("trace")
    p.add_argument("-o", "--output")
    p.set_defaults(func=cmd_json)
    p = sub.add_parser("validate", help="check a Trace Event JSON file")
    p.add_argument("json")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("dot", help="a coroutine function's state machine")
    p.add_argument("trace")
    p.add_argument("--fn", required=True, dest="fn_name")
    p.add_argument("-o", "--output")
    p.set_defaults(func=cmd_dot)
    p = sub.add_parser("timeline", help="a PNG of the runs per thread (gnuplot)")
    p.add_argument("trace")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--window", type=float, help="milliseconds to show (default: all)")
    p.add_argument("--at", type=float,
                   help="where the window begins, ms (default: where the most runs are)")
    p.add_argument("--width", type=int, default=1200)
    p.add_argument("--title")
    p.set_defaults(func=cmd_timeline)
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except (TraceError, OSError) as e:
        print(f"coring_trace: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
