#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The firmware figures of co.h on Cortex-M4: RAM, code and instructions.

    bench/runner/sections/firmware.py [--check] [SRC_DIR]
                                      (default: the repository this is in)

Builds the programs of bench/firmware/ with arm-none-eabi-gcc (-mcpu=
cortex-m4 -mthumb -Os -DNDEBUG, -ffreestanding -nostdlib), coring's for both
label backends, and the same three programs written as local-continuation
state machines (lc_baseline.h: the technique of Protothreads, a 2-byte
continuation and a switch on __LINE__ cases) as the baseline. Per program:
    RAM        sizeof(co_frame), sizeof(co_tiny) or the baseline's 2-byte
               continuation on this 32-bit target: what each coroutine
               needs beyond its own locals
    text       bytes of the coroutine bodies (each a function of its own)
    total      Thumb instructions per resume (a co_resume, or a call of the
               body for the tiny profile and the baseline), the driver loop
               included: qemu-arm (user mode, one instruction per
               translation block, -d exec) runs the program for two numbers
               of resumes and the difference is divided by the difference
    loop       the driver loop's own share: the same program built with
               -DFW_DRIVER_ONLY, where each resume is a call of an empty
               function (fw.h), counted the same way, minus that function's
               own instructions
    resume     total - loop: what a resume costs (for the tiny profile and
               the baseline, the instructions inside the bodies; for a
               co_frame also co_resume, which is inlined into the loop)
    body       the instructions inside the body functions (by the symbol
               qemu names for each), per resume
Then the targets, each printed met or missed by how much:
    tiny profile: RAM <= 4 B, text within 1.2x of the baseline,
               at most 17 instructions per plain resume (the generator's:
               one yield, no condition; the other two programs' resumes do
               more work and are compared with the baseline's), program by
               program and backend by backend;
    default backend: the tiny profile's text within 1.2x with
               the backend co.h picks when none is asked for (it says which:
               the switch one on bare metal);
    co_frame: RAM <= 32 B, at most 20 instructions per plain
               resume, and a resume through an await chain of depth 8
               costing what one through depth 2 (a root awaiting one
               child) does, within half an instruction: constant-cost
               awaits.
Last, the breakdown behind the figures: one resume of the generator
instruction by instruction (co_frame, co_tiny on both backends, the
baseline), and the bodies' bytes by kind (instructions, literal words,
padding).
Needs arm-none-eabi-gcc, arm-none-eabi-nm and qemu-arm (make bench installs
them); without them it says so and exits 0 (77 with --check: meson's skip).
--check (the bench_firmware test): every program builds and runs, every
figure is plausible (a co_frame of 32 to 128 bytes, a co_tiny of 4, a
continuation of 2, code and instructions above zero, the loop below the
total), and the targets that docs/firmware.md says are met are met (TARGETS_MET
below), else exit 1.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

PROGRAMS = [("gen", "generator 0..9"), ("blink", "3 blinkers: poll, toggle, yield"),
            ("child", "parent awaits a child yielding 3x"), ("chain", "resume through a depth-8 chain"),
            ("chain2", "the same chain, depth 2"),
            ("gen_tiny", "gen, tiny profile (co_tiny)"), ("blink_tiny", "blink, tiny profile"),
            ("child_tiny", "child, tiny profile (polls the child)"),
            ("gen_lc", "gen, local-continuation baseline"), ("blink_lc", "blink, baseline"),
            ("child_lc", "child, baseline (polls the child)")]
CFLAGS = ["-mcpu=cortex-m4", "-mthumb", "-Os", "-DNDEBUG", "-std=c99", "-ffreestanding", "-nostdlib",
          "-nostartfiles", "-Wall", "-Wextra", "-Werror"]
# the repository this is in: bench/runner/sections/ is three folders down
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RUNS = (300, 1500)          # resumes of the two runs whose difference is counted
TOOLS = ("arm-none-eabi-gcc", "arm-none-eabi-nm", "qemu-arm")
RAM_MAX, TEXT_RATIO_MAX, RESUME_MAX = 4, 1.2, 17           # the tiny profile's
FRAME_RAM_MAX, FRAME_RESUME_MAX, CHAIN_SLACK = 32, 20, 0.5  # co_frame's
# programs built from another's source with extra flags
VARIANTS = {"chain2": ("chain", ["-DDEPTH=2"])}
# firmware.csv (bench/runner/run.py): one row per program and backend
COLUMNS = ["program", "what", "backend", "frame", "text", "instr", "loop", "resume", "body"]
PLAIN = "gen"   # the plain resume: one yield, no condition; the 17 and the 20 apply to it
# The targets docs/firmware.md states as met, which --check enforces:
# (program, backend, target): target "ram", "text" or "resume" for the tiny
# profile against the baseline ("default": the backend co.h picks), and
# "frame_ram", "frame_resume" or "chain" for co_frame.
TARGETS_MET = ([(p, b, "ram") for p in ("gen", "blink", "child") for b in ("goto", "switch")]
               + [(p, b, "text") for p in ("gen", "blink", "child") for b in ("switch", "default")]
               + [("blink", "goto", "text")]
               + [("gen", b, "resume") for b in ("goto", "switch")]
               + [("gen", b, t) for b in ("goto", "switch") for t in ("frame_ram", "frame_resume")]
               + [("chain", b, "chain") for b in ("goto", "switch")])


def baseline(prog):
    return prog.endswith("_lc")


def build(src, prog, backend, n, out, driver_only=False):
    """backend: 1 computed goto, 0 switch, None co.h's default."""
    source, extra = VARIANTS.get(prog, (prog, []))
    subprocess.run(["arm-none-eabi-gcc", *CFLAGS, *extra, f"-DN={n}",
                    *([] if backend is None else [f"-DCO_USE_COMPUTED_GOTO={backend}"]),
                    *(["-DFW_DRIVER_ONLY"] if driver_only else []),
                    "-I", os.path.join(src, "include"), os.path.join(src, "bench", "firmware", source + ".c"),
                    "-o", out], check=True)


def default_backend(src):
    """The backend co.h picks for this target when none is asked for."""
    with tempfile.TemporaryDirectory() as tmp:
        elf = os.path.join(tmp, "default.elf")
        build(src, "gen_tiny", None, 10, elf)
        return "goto" if symbol_sizes(elf)["fw_backend"] == 2 else "switch"


def symbol_sizes(elf):
    out = subprocess.run(["arm-none-eabi-nm", "-S", elf], check=True, capture_output=True, text=True).stdout
    sizes = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4:
            sizes[parts[3]] = int(parts[1], 16)
    return sizes


def trace(elf, tmp):
    """The program's executed instructions: (address, symbol) in order."""
    log = os.path.join(tmp, "exec.log")
    subprocess.run(["qemu-arm", "-singlestep", "-d", "exec,nochain", "-D", log, elf], check=False)
    out = []
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("Trace "):
                # Trace 0: 0xHOST [FLAGS/PC/.../...] SYMBOL
                out.append((int(line.split("[", 1)[1].split("/")[1], 16), line.split()[-1]))
    return out


def instructions(elf, tmp):
    """(all instructions, those in fw_body_* functions, those in fw_nothing)"""
    t = trace(elf, tmp)
    return (len(t), sum(1 for _, s in t if s.startswith("fw_body_")),
            sum(1 for _, s in t if s == "fw_nothing"))


def disassembly(elf):
    """{address: (bytes, text, function)} for the code and literal words."""
    out = subprocess.run(["arm-none-eabi-objdump", "-d", elf], check=True, capture_output=True,
                         text=True).stdout
    code, func = {}, None
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <(\w+)>:$", line)
        if m:
            func = m.group(2)
            continue
        m = re.match(r"^\s+([0-9a-f]+):\t([0-9a-f ]+?)\s*\t(.*)$", line)
        if m and func:
            size = len(m.group(2).replace(" ", "")) // 2
            code[int(m.group(1), 16)] = (size, re.sub(r"\s+", " ", m.group(3).split("@")[0]).strip(), func)
    return code


def one_resume(src, tmp, prog, backend):
    """The instructions of one resume of the body fw_body_<name>, from one
    entry into the body to the next (so the driver loop is in it): the
    sequence most resumes of the second half of a run take."""
    elf = os.path.join(tmp, f"{prog}{backend}_one.elf")
    build(src, prog, backend, RUNS[0], elf)
    entry = {k: v for k, v in nm_addresses(elf).items() if k.startswith("fw_body_")}
    body = entry.get("fw_body_" + prog.split("_")[0]) or min(entry.values())
    t = [a for a, _ in trace(elf, tmp)]
    starts = [i for i, a in enumerate(t) if a == body]
    spans = [tuple(t[a:b]) for a, b in zip(starts, starts[1:])][len(starts) // 2:]
    common = max(set(spans), key=spans.count)
    code = disassembly(elf)
    return [(a,) + code.get(a, (0, "?", "?")) for a in common]


def nm_addresses(elf):
    out = subprocess.run(["arm-none-eabi-nm", elf], check=True, capture_output=True, text=True).stdout
    return {p[2]: int(p[0], 16) for p in (l.split() for l in out.splitlines()) if len(p) == 3}


def text_kinds(src, tmp, prog, backend):
    """Bytes of the bodies by kind: 16-bit and 32-bit instructions, literal
    words (addresses and constants kept next to the code), padding."""
    elf = os.path.join(tmp, f"{prog}{backend}_kinds.elf")
    build(src, prog, backend, RUNS[0], elf)
    k = dict(i16=0, i32=0, lit=0, pad=0, n=0)
    for size, text, func in disassembly(elf).values():
        if not func.startswith("fw_body_"):
            continue
        if text.startswith(".word"):
            k["lit"] += size
        elif text == "nop" and size == 2:
            k["pad"] += size
        else:
            k["i16" if size == 2 else "i32"] += size
            k["n"] += 1
    return k


def per_resume(src, tmp, prog, backend, driver_only):
    counts = []
    for n in RUNS:
        elf = os.path.join(tmp, f"{prog}{backend}_{n}{'_loop' if driver_only else ''}.elf")
        build(src, prog, backend, n, elf, driver_only)
        counts.append(instructions(elf, tmp))
    d = RUNS[1] - RUNS[0]
    return [(b - a) / d for a, b in zip(*counts)], elf


def measure(src):
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for prog, what in PROGRAMS:
            for backend in ((1,) if baseline(prog) else (1, 0)):
                (total, body, _), elf = per_resume(src, tmp, prog, backend, False)
                (empty, _, nothing), _ = per_resume(src, tmp, prog, backend, True)
                sizes = symbol_sizes(elf)
                text = sum(v for k, v in sizes.items() if k.startswith("fw_body_"))
                loop = empty - nothing
                rows.append(dict(program=prog, what=what,
                                 backend="-" if baseline(prog) else ("goto" if backend else "switch"),
                                 frame=sizes["fw_frame_size"], text=text, instr=total, loop=loop,
                                 resume=total - loop, body=body))
    return rows


def table(rows):
    lines = ["Cortex-M4 Thumb, arm-none-eabi-gcc -Os -DNDEBUG (qemu-arm counts instructions, per resume)",
             f"{'program':<10} {'what':<38} {'backend':<7} {'RAM B':>5} {'text B':>6} {'total':>6} "
             f"{'loop':>5} {'resume':>6} {'body':>5}"]
    for r in rows:
        lines.append(f"{r['program']:<10} {r['what']:<38} {r['backend']:<7} {r['frame']:>5} {r['text']:>6} "
                     f"{r['instr']:>6.1f} {r['loop']:>5.1f} {r['resume']:>6.1f} {r['body']:>5.1f}")
    return "\n".join(lines)


def comparisons(rows, default="switch"):
    """The tiny profile against the baseline: one entry per program and
    backend, and one for the default backend (a copy of its backend's)."""
    by = {(r["program"], r["backend"]): r for r in rows}
    out = []
    for prog in ("gen", "blink", "child"):
        base = by[(prog + "_lc", "-")]
        for backend in ("goto", "switch", "default"):
            t = by[(prog + "_tiny", default if backend == "default" else backend)]
            out.append(dict(program=prog, backend=backend, tiny=t, base=base,
                            ram_ok=t["frame"] <= RAM_MAX,
                            text_ratio=t["text"] / base["text"],
                            text_ok=t["text"] <= TEXT_RATIO_MAX * base["text"],
                            resume_ok=t["resume"] <= RESUME_MAX if prog == PLAIN else None))
    return out


def frame_targets(rows):
    """co_frame's targets: one entry per backend."""
    by = {(r["program"], r["backend"]): r for r in rows}
    out = []
    for backend in ("goto", "switch"):
        g, c8, c2 = by[(PLAIN, backend)], by[("chain", backend)], by[("chain2", backend)]
        out.append(dict(program=PLAIN, backend=backend, ram=g["frame"], resume=g["resume"],
                        chain8=c8["resume"], chain2=c2["resume"],
                        frame_ram_ok=g["frame"] <= FRAME_RAM_MAX,
                        frame_resume_ok=g["resume"] <= FRAME_RESUME_MAX,
                        chain_ok=abs(c8["resume"] - c2["resume"]) <= CHAIN_SLACK))
    return out


def frame_table(frames):
    lines = ["", f"co_frame; targets: RAM <= {FRAME_RAM_MAX} B, plain resume ({PLAIN}) <= "
             f"{FRAME_RESUME_MAX} instructions, a resume through a chain of depth 8 = depth 2 (+-{CHAIN_SLACK})"]
    for f in frames:
        ram_miss = f"{f['ram'] - FRAME_RAM_MAX} B"
        resume_miss = f"{f['resume'] - FRAME_RESUME_MAX:.1f} instructions"
        chain_miss = f"{abs(f['chain8'] - f['chain2']):.1f} instructions"
        notes = [f"RAM {f['ram']} B {verdict(f['frame_ram_ok'], ram_miss)}",
                 f"resume {f['resume']:.1f} {verdict(f['frame_resume_ok'], resume_miss)}",
                 f"depth 8 / 2: {f['chain8']:.1f} / {f['chain2']:.1f} {verdict(f['chain_ok'], chain_miss)}"]
        lines.append(f"co_frame {f['backend']:<7} " + "; ".join(notes))
    return "\n".join(lines)


def verdict(ok, missed):
    return "met" if ok else f"MISSED by {missed}"


def comparison_table(comps):
    lines = ["", "Tiny profile / local-continuation baseline; targets: RAM <= 4 B, text <= 1.2x, "
             f"resume <= 17 instructions for the plain resume ({PLAIN}); default: co.h's own choice",
             f"{'program':<7} {'backend':<7} {'RAM B':>9} {'text B':>9} {'ratio':>6} {'resume':>11} {'ratio':>6}"
             "  targets"]
    for c in comps:
        t, b = c["tiny"], c["base"]
        over = t["text"] - TEXT_RATIO_MAX * b["text"]
        ram_miss = f"{t['frame'] - RAM_MAX} B"
        text_miss = f"{over:.0f} B over 1.2x ({c['text_ratio']:.2f}x)"
        resume_miss = f"{t['resume'] - RESUME_MAX:.1f} instructions"
        notes = [f"RAM {verdict(c['ram_ok'], ram_miss)}", f"text {verdict(c['text_ok'], text_miss)}"]
        if c["resume_ok"] is not None:
            notes.append(f"resume {verdict(c['resume_ok'], resume_miss)}")
        lines.append(f"{c['program']:<7} {c['backend']:<7} {t['frame']:>4} / {b['frame']:<2} "
                     f"{t['text']:>4} / {b['text']:<3} {c['text_ratio']:>5.2f}x "
                     f"{t['resume']:>4.1f} / {b['resume']:<4.1f} {t['resume'] / b['resume']:>5.2f}x  "
                     + "; ".join(notes))
    return "\n".join(lines)


def breakdown(src):
    """Why the figures are what they are: one resume of the generator,
    instruction by instruction, for the three kinds of coroutine, and the
    bodies' bytes by kind for the tiny profile and the baseline."""
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        lines += ["", "One resume of the generator, instruction by instruction (the common one of its ten;",
                  "from an entry into the body to the next, so the driver loop's are in it)"]
        for prog, backend, what in (("gen", 1, "co_frame, goto"), ("gen_tiny", 1, "co_tiny, goto"),
                                    ("gen_tiny", 0, "co_tiny, switch"), ("gen_lc", 1, "baseline")):
            seq = one_resume(src, tmp, prog, backend)
            lines.append(f"{prog} ({what}): {len(seq)} instructions")
            for addr, _, text, func in seq:
                lines.append(f"    {func:<12} {addr:5x}  {text}")
        lines += ["", "Bytes of the bodies by kind: instructions (16-bit + 32-bit), literal words, padding"]
        for prog in ("gen", "blink", "child"):
            for p, backend, label in ((prog + "_tiny", 1, "goto"), (prog + "_tiny", 0, "switch"),
                                      (prog + "_lc", 1, "-")):
                k = text_kinds(src, tmp, p, backend)
                total = k["i16"] + k["i32"] + k["lit"] + k["pad"]
                lines.append(f"{p:<10} {label:<7} {total:>4} B: {k['n']:>3} instructions in {k['i16']:>3} + "
                             f"{k['i32']:>2} B, literal words {k['lit']:>2} B, padding {k['pad']} B")
    return "\n".join(lines)


def missing():
    return [t for t in TOOLS if shutil.which(t) is None]


def implausible(rows):
    def frame_ok(r):
        if baseline(r["program"]):
            return r["frame"] == 2
        return r["frame"] == 4 if r["program"].endswith("_tiny") else 32 <= r["frame"] <= 128
    return [r for r in rows if not (frame_ok(r) and r["text"] > 0 and 1 <= r["instr"] < 1000
                                    and 0 < r["loop"] < r["instr"] and 0 < r["body"] <= r["instr"])]


def broken_promises(comps, frames):
    """The targets listed in TARGETS_MET that the measurement does not meet."""
    by = {(c["program"], c["backend"]): c for c in comps}
    by.update({("chain", f["backend"]): f for f in frames})
    by.update({(f["program"], f["backend"], "frame"): f for f in frames})
    return [(p, b, t) for p, b, t in TARGETS_MET
            if not by[(p, b, "frame") if t.startswith("frame_") else (p, b)][t + "_ok"]]


def report(src, rows):
    """The targets' tables: the tiny profile against the baseline (with the
    default backend named) and co_frame's; and their entries."""
    default = default_backend(src)
    comps, frames = comparisons(rows, default), frame_targets(rows)
    text = (comparison_table(comps) + f"\n(default: the {default} backend, co.h's choice for this target)"
            + "\n" + frame_table(frames))
    return text, comps, frames


class Firmware:
    """The firmware section of make bench: firmware.csv's rows, the tables."""

    def firmware(self):
        self.say("== co.h on Cortex-M4 (bench/runner/sections/firmware.py)")
        gone = missing()
        if gone:
            self.say(f"bench: {', '.join(gone)} not found: firmware skipped (tools/deps.sh bench)")
            return
        src = REPO
        self.fw_rows = measure(src)
        self.say(table(self.fw_rows))
        self.say(report(src, self.fw_rows)[0])
        self.say()


def main():
    args = sys.argv[1:]
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    src = args[0] if args else REPO
    gone = missing()
    if gone:
        print(f"firmware: skipped, missing {', '.join(gone)}")
        return 77 if check else 0
    rows = measure(src)
    text, comps, frames = report(src, rows)
    print(table(rows))
    print(text)
    print(breakdown(src))
    if check:
        bad = implausible(rows)
        if bad:
            print(f"firmware: implausible rows: {bad}")
            return 1
        broken = broken_promises(comps, frames)
        if broken:
            print(f"firmware: targets that docs/firmware.md states as met are not: {broken}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
