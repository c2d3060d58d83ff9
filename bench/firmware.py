#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The firmware figures of co.h on Cortex-M4: RAM, code and instructions.

    bench/firmware.py [--check] [SRC_DIR]   (default: the repository this is in)

Builds the programs of bench/firmware/ with arm-none-eabi-gcc (-mcpu=
cortex-m4 -mthumb -Os -DNDEBUG, -ffreestanding -nostdlib) for both label
backends and prints, per program:
    frame      sizeof(co_frame), or sizeof(co_tiny) for the *_tiny programs, on
               this 32-bit target: the RAM each coroutine needs beyond its
               own locals
    text       bytes of the coroutine bodies (each a function of its own)
    instr      Thumb instructions per co_resume (per call of the body, for
               the tiny profile), counted by running the
               program under qemu-arm (user mode, one instruction per
               translation block, -d exec) for two numbers of resumes and
               dividing the difference; the driver loop's own instructions
               are included, as a caller's would be.
Needs arm-none-eabi-gcc, arm-none-eabi-nm and qemu-arm (make bench installs
them); without them it says so and exits 0 (77 with --check: meson's skip).
--check (the bench_firmware test): every program builds and runs, and every
figure is a plausible count (a frame of 32 to 128 bytes, code and
instructions above zero), else exit 1.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

PROGRAMS = [("gen", "generator 0..9"), ("blink", "3 blinkers: poll, toggle, yield"),
            ("child", "parent awaits a child yielding 3x"), ("chain", "resume through a depth-8 chain"),
            ("gen_tiny", "gen, tiny profile (co_tiny)"), ("blink_tiny", "blink, tiny profile"),
            ("child_tiny", "child, tiny profile (polls the child)")]
CFLAGS = ["-mcpu=cortex-m4", "-mthumb", "-Os", "-DNDEBUG", "-std=c99", "-ffreestanding", "-nostdlib",
          "-nostartfiles", "-Wall", "-Wextra", "-Werror"]
RUNS = (300, 1500)          # resumes of the two runs whose difference is counted
TOOLS = ("arm-none-eabi-gcc", "arm-none-eabi-nm", "qemu-arm")
COLUMNS = ["program", "what", "backend", "frame", "text", "instr"]


def build(src, prog, backend, n, out):
    subprocess.run(["arm-none-eabi-gcc", *CFLAGS, f"-DCO_USE_COMPUTED_GOTO={backend}", f"-DN={n}",
                    "-I", os.path.join(src, "include"), os.path.join(src, "bench", "firmware", prog + ".c"),
                    "-o", out], check=True)


def symbol_sizes(elf):
    out = subprocess.run(["arm-none-eabi-nm", "-S", elf], check=True, capture_output=True, text=True).stdout
    sizes = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4:
            sizes[parts[3]] = int(parts[1], 16)
    return sizes


def instructions(elf, tmp):
    log = os.path.join(tmp, "exec.log")
    subprocess.run(["qemu-arm", "-singlestep", "-d", "exec,nochain", "-D", log, elf], check=False)
    with open(log, encoding="utf-8", errors="replace") as f:
        return sum(1 for line in f if line.startswith("Trace "))


def measure(src):
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for prog, what in PROGRAMS:
            for backend in (1, 0):
                counts = []
                for n in RUNS:
                    elf = os.path.join(tmp, f"{prog}{backend}_{n}.elf")
                    build(src, prog, backend, n, elf)
                    counts.append(instructions(elf, tmp))
                sizes = symbol_sizes(elf)
                text = sum(v for k, v in sizes.items() if k.startswith("fw_body_"))
                rows.append(dict(program=prog, what=what, backend="goto" if backend else "switch",
                                 frame=sizes["fw_frame_size"], text=text,
                                 instr=(counts[1] - counts[0]) / (RUNS[1] - RUNS[0])))
    return rows


def table(rows):
    lines = ["Cortex-M4 Thumb, arm-none-eabi-gcc -Os -DNDEBUG (qemu-arm counts instructions)",
             f"{'program':<8} {'what':<34} {'backend':<7} {'frame B':>7} {'text B':>6} {'instr/resume':>12}"]
    for r in rows:
        lines.append(f"{r['program']:<8} {r['what']:<34} {r['backend']:<7} {r['frame']:>7} {r['text']:>6} "
                     f"{r['instr']:>12.1f}")
    return "\n".join(lines)


def missing():
    return [t for t in TOOLS if shutil.which(t) is None]


def implausible(rows):
    return [r for r in rows if not ((r["frame"] == 4 if r["program"].endswith("_tiny") else 32 <= r["frame"] <= 128)
                                    and r["text"] > 0 and 1 <= r["instr"] < 1000)]


def main():
    args = sys.argv[1:]
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    src = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    gone = missing()
    if gone:
        print(f"firmware: skipped, missing {', '.join(gone)}")
        return 77 if check else 0
    rows = measure(src)
    print(table(rows))
    bad = implausible(rows)
    if check and (bad or len(rows) != 2 * len(PROGRAMS)):
        print(f"firmware: implausible rows: {bad}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
