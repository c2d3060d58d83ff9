#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tools/coring_trace.py's resume points with computed goto (make test, suite
"trace"): a label's line is that of the instruction storing it, read from
objdump's listing; two suspension points the compiler gave one label (their
code after them is the same) are one state, "parser.c:22+45"; a store on a
line without a suspension point, or on a line that stores another label too,
makes the point inexact ("~"), placed at the last suspension point at or
before addr2line's line. objdump and addr2line are stood in for by a listing
written here, so every case is exercised whatever the compiler merged.

    test_trace_labels.py TOOL
"""

import importlib.util
import os
import subprocess
import sys
import tempfile

FN = 0x4000      # the function's run-time address
LABELS = {0x5040: 0x1040, 0x5050: 0x1050, 0x5060: 0x1060, 0x5070: 0x1070}


def load(tool):
    spec = importlib.util.spec_from_file_location("coring_trace", tool)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def main():
    mod = load(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "parser.c")
        lines = [f"\tstep({n});" for n in range(1, 61)]
        for n in (22, 25, 45, 50):
            lines[n - 1] = "\tCO_YIELD(f);"
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        binary = os.path.join(tmp, "parser")
        # 0x1040: stored on 22 and 45 (one label, two points); 0x1050: on 25;
        # 0x1060: on 30, no suspension point there; 0x1070: on 50, and so is
        # 0x1050 (the compiler moved a store): neither can be told apart there
        listing = "\n".join([
            "0000000000001000 <fp_body>:",
            f"{src}:22",
            "    1000:\tlea    0x39(%rip),%rax        # 1040 <fp_body+0x40>",
            f"{src}:25",
            "    1008:\tlea    0x41(%rip),%rax        # 1050 <fp_body+0x50>",
            f"{src}:30",
            "    1010:\tlea    0x49(%rip),%rax        # 1060 <fp_body+0x60>",
            f"{src}:45",
            "    1018:\tlea    0x21(%rip),%rax        # 1040 <fp_body+0x40>",
            f"{src}:50",
            "    1020:\tlea    0x49(%rip),%rax        # 1070 <fp_body+0x70>",
            "    1028:\tlea    0x21(%rip),%rax        # 1050 <fp_body+0x50>",
            "    1030:\tlea    0x21(%rip),%rcx        # 1030 <other+0x10>",
            ""])
        after = {0x1050: 26, 0x1060: 31, 0x1070: 51}  # addr2line: the code after the label
        calls = []

        def run(argv, **_kw):
            calls.append(argv[0])
            if argv[0] == "objdump":
                if argv[-1] != binary or "--disassemble=fp_body" not in argv:
                    fail(f"objdump asked {argv}")
                out = listing
            elif argv[0] == "addr2line":
                out = "".join(f"fp_body\n{src}:{after[int(v, 16)]}\n" for v in argv[4:])
            else:
                fail(f"ran {argv}")
            return subprocess.CompletedProcess(argv, 0, out, "")

        mod.subprocess.run = run

        class Trace:
            maps = []

        res = mod.Resolver(Trace())
        res.where = lambda addr: (binary, LABELS[addr]) if addr in LABELS else None
        res.funcs[FN] = ("fp_body", src, 1)
        want = {0x5040: "parser.c:22+45", 0x5050: "parser.c:25~", 0x5060: "parser.c:25~",
                0x5070: "parser.c:50~"}
        for label, text in want.items():
            got = res.point(FN, label)
            if got != text:
                fail(f"label 0x{label:x}: {got}, want {text}")
        if res.label(FN, 0x5040) != (src, "22+45", True):
            fail(f"the merged label: {res.label(FN, 0x5040)}")
        if calls.count("objdump") != 1:
            fail(f"objdump ran {calls.count('objdump')} times for one function")
        if res.point(FN, 0) != "start":
            fail(f"label 0: {res.point(FN, 0)}")
        if res.point(FN, mod.SWITCH_LABEL + 33) != "parser.c:33":
            fail(f"a switch label: {res.point(FN, mod.SWITCH_LABEL + 33)}")
    print("ok: merged, moved, stray and switch labels")


if __name__ == "__main__":
    main()
