# SPDX-License-Identifier: MIT
"""Section "curve": echo 64 B against the number of connections (CPU per
request and p99), on the echo section's rounds (sections/echo.py)."""

import os

from core import ECHO_SERVERS, ECHO_SHORT, TITLE


class Curve:
    """The connection curve and its table."""

    def curve(self):
        self.say(f"== cost against load: echo 64 B at {', '.join(map(str, self.m['curve']))} connections")
        need = max(self.m["curve"]) + 64
        if self.nofile < need:
            self.say(f"bench: open-file limit {self.nofile} < {need}: curve limited")
        servers = self.start_all(ECHO_SERVERS)
        secs = self.m["curve_secs"] if "SECONDS_PER_ROUND" not in os.environ else self.m["secs"]
        for c in self.m["curve"]:
            if c + 64 > self.nofile:
                continue
            self.progress(f"{'curve %dc' % c:<18}")
            # no target reads the curve: fewer rounds (the default mode's 3)
            self.echo_workload("curve", servers, c, 64, secs, self.m["warm"], False,
                               min(self.m["rounds"], 3))
            self.progress("\n")
        for s in servers.values():
            self.stop(s)
        self.say(self.curve_table())
        self.say()

    def curve_table(self):
        rows = self.by("curve")
        servers = ECHO_SHORT
        lines = [f"{'connections':>11}  {'CPU us/req:':<11}" + "".join(f"{TITLE[s]:>10}" for s in servers) +
                 f"  {'p99 us:':<8}" + "".join(f"{TITLE[s]:>10}" for s in servers)]
        for c in sorted({c for c, _, _ in rows}):
            cpu = [rows[(c, 64, s)]["cpu_us_per_req"] if (c, 64, s) in rows else None for s in servers]
            p99 = [rows[(c, 64, s)]["p99_us"] if (c, 64, s) in rows else None for s in servers]
            noisy = sum(rows[(c, 64, s)]["noisy_rounds"] for s in servers if (c, 64, s) in rows)
            lines.append(f"{c:>11}  {'':<11}" + "".join(f"{v:>10.2f}" if v is not None else f"{'-':>10}" for v in cpu) +
                         f"  {'':<8}" + "".join(f"{v:>10.0f}" if v is not None else f"{'-':>10}" for v in p99) +
                         (f"  ({noisy} noisy)" if noisy else ""))
        return "\n".join(lines)
