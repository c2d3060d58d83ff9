# SPDX-License-Identifier: MIT
"""Section "other": the programs that print their own tables: the
suspend/resume round trip (switch), memory per idle coroutine (memory),
cross-thread submit (xsubmit), the dispatch strategies (dispatch) and the
sync primitives across contexts (sync)."""

import subprocess

import benchlib
from benchlib import BenchError


class Other:
    """The other benchmarks: each program's own lines, as it prints them."""

    def tool(self, argv, filt=None):
        p = subprocess.run(argv, capture_output=True, text=True)
        if p.returncode != 0:
            raise BenchError(f"{' '.join(argv)} failed:\n{p.stdout}{p.stderr}")
        for line in p.stdout.rstrip("\n").split("\n"):
            if filt is None or not line.startswith(filt):
                self.say(line)
        return p.stdout

    def other(self):
        m = self.m
        self.say(f"== suspend/resume round trip (pinned; median of {m['switch_rounds']} rounds)")
        self.switch_out = self.tool(self.pin.load + [benchlib.program(self.bench, "switch"), "--iters",
                                                     str(m["switch_iters"]), "--rounds", str(m["switch_rounds"])])
        self.say()
        self.say("== memory per idle coroutine")
        self.memory_out = self.tool([benchlib.program(self.bench, "memory"), "--count", str(m["mem_count"])],
                                    "memory ")
        self.say()
        # more producers than CPUs on purpose: a producer never waits for another
        self.say("== cross-thread submit: frames/s into one engine from other threads")
        self.tool([benchlib.program(self.bench, "xsubmit"), "--frames", str(m["xs_frames"]),
                   "--producers", "1,2,4,8"], "xsubmit ")
        self.say()
        self.say("== dispatch strategies (unbalanced tasks, 2 contexts)")
        self.tool([benchlib.program(self.bench, "dispatch")], "dispatch ")
        self.say()
        self.say("== sync: mutex hand-off and channel across 2 contexts, vs pthread mutex and a pipe")
        self.tool([benchlib.program(self.bench, "sync")] + (["--quick"] if self.mode == "quick" else []))
        self.say()
