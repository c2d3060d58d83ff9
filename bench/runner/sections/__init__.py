# SPDX-License-Identifier: MIT
"""The sections of make bench (bench/runner/run.py), a module each: echo,
curve, http, kv, fileio, callgrind, other, handoff, firmware, soak (in the
order they run, core.SECTIONS), then targets and chart (the files)."""
