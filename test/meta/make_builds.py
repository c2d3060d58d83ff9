#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make test's builds (the Makefile's TEST_BUILDS and their set-up) are
the ones the docs name: build (gcc), build-asan (gcc, ASan+UBSan, tracing
compiled out: tracing.md), build-tsan (clang, TSan, the switch label
backend: reliability.md, benchmarks.md), the sanitizer builds with line
tables only. Between them every test runs with gcc and with clang, with
both label backends, and with tracing in and out. Read from make's dry
run of each set-up.

    make_builds.py SRCROOT
"""

import os
import shlex
import shutil
import subprocess
import sys
import tempfile

WANT = {
    "build": {"cc": "gcc", "sanitize": None, "trace": "auto", "backend": "auto", "g1": False},
    "build-asan": {"cc": "gcc", "sanitize": "address,undefined", "trace": "false", "backend": "auto",
                   "g1": True},
    "build-tsan": {"cc": "clang", "sanitize": "thread", "trace": "auto", "backend": "switch",
                   "g1": True},
}


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def make(src, work, *args):
    p = subprocess.run(["make", "--no-print-directory", "-f", os.path.join(src, "Makefile"), "-C", work]
                       + list(args), capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"make {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout


def setup_of(src, work, build):
    """The set-up make would run for build: its settings."""
    lines = [x for x in make(src, work, "-n", f"{build}/build.ninja").splitlines() if " setup " in x]
    if len(lines) != 1:
        fail(f"{build}: no single meson setup in make's dry run: {lines}")
    words = shlex.split(lines[0].lstrip("@"))
    opts = dict(w[2:].split("=", 1) for w in words if w.startswith("-D") and "=" in w)
    cc = next((w.split("=", 1)[1] for w in words if w.startswith("CC=")), "gcc")
    return {"cc": cc, "sanitize": opts.get("b_sanitize"), "trace": opts.get("trace", "auto"),
            "backend": opts.get("label_backend", "auto"), "g1": opts.get("c_args") == "-g1",
            "extra_checks": opts.get("extra_checks", "true")}


def main():
    src = os.path.abspath(sys.argv[1])
    if shutil.which("make") is None:
        print("skip: no make")
        sys.exit(77)
    work = tempfile.mkdtemp(prefix="coring-make-builds-")
    try:
        builds = make(src, work, "--eval", "print-builds: ; @echo $(TEST_BUILDS)", "print-builds").split()
        if builds != list(WANT):
            fail(f"TEST_BUILDS is {builds}, the docs name {list(WANT)}")
        got = {b: setup_of(src, work, b) for b in builds}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for b, want in WANT.items():
        for k, v in want.items():
            if got[b][k] != v:
                fail(f"{b}: {k} is {got[b][k]!r}, the docs say {v!r}")
    # the checks that take nothing of the build run once, in the gcc build
    runs_extra = [b for b in builds if got[b]["extra_checks"] != "false"]
    if runs_extra != ["build"]:
        fail(f"-Dextra_checks in {runs_extra}, not in the gcc build alone")
    for k, need in (("cc", {"gcc", "clang"}), ("backend", {"auto", "switch"}),
                    ("trace", {"auto", "false"})):
        if {got[b][k] for b in builds} != need:
            fail(f"the builds' {k}: {sorted({got[b][k] for b in builds})}, not {sorted(need)}")
    for b in builds:
        print(f"ok: {b}: {got[b]}")


if __name__ == "__main__":
    main()
