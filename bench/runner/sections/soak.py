# SPDX-License-Identifier: MIT
"""Section "soak" (FULL=1): echo_coring under echo_load with random
disconnects; its RSS and descriptors sampled into soak.csv, which must
stay flat."""

import csv
import os
import re
import subprocess
import time

import benchlib
from benchlib import BenchError


def verdict(samples):
    """Whether the (t_s, rss_kb, fds) samples stayed flat: the last third's
    peak RSS within 10 % plus 1 MiB of the middle third's, its peak of
    descriptors within 16 of the middle third's. (RSS middle, RSS last, fds
    middle, fds last, flat)."""
    n = len(samples)
    mid, last = samples[n // 3:2 * n // 3] or samples, samples[2 * n // 3:] or samples
    rm, rl = max(x[1] for x in mid), max(x[1] for x in last)
    fm, fl = max(x[2] for x in mid), max(x[2] for x in last)
    return rm, rl, fm, fl, rl <= rm * 1.1 + 1024 and fl <= fm + 16


class Soak:
    """The soak."""

    def soak(self):
        secs = int(os.environ.get("SOAK_SECONDS", "180"))
        self.say(f"== soak: echo_coring under echo_load with random disconnects, {secs}s")
        s = self.start("echo_coring")
        argv = self.pin.load + [benchlib.program(self.bench, "echo_load"), "--port", str(s.port), "--conns", "200",
                                "--size", "512", "--seconds", str(secs), "--warmup", "0", "--churn", "5"]
        load = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        samples = []
        t = 0
        while load.poll() is None:
            with open(f"/proc/{s.pid}/status") as f:
                rss = int(re.search(r"^VmRSS:\s+(\d+)", f.read(), re.M).group(1))
            samples.append((t, rss, len(os.listdir(f"/proc/{s.pid}/fd"))))
            for _ in range(50):
                if load.poll() is not None:
                    break
                time.sleep(0.1)
            t += 5
        out, err = load.communicate()
        if load.returncode != 0:
            raise BenchError(f"soak load failed:\n{err}")
        self.stop(s)
        path = os.path.join(self.out_dir, "soak.csv")
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t_s", "rss_kb", "fds"])
            w.writerows(samples)
        self.say(f"load: {out.strip()}")
        rm, rl, fm, fl, flat = verdict(samples)
        self.say(f"soak: {len(samples)} samples; RSS {rm} -> {rl} kB, fds {fm} -> {fl}: "
                 f"{'flat' if flat else 'GROWING'}")
        self.say(f"soak samples: {path}")
        self.say()
