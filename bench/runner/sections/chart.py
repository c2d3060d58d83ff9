# SPDX-License-Identifier: MIT
"""The run's files and chart: every section's CSV file, latest.txt, and
latest.png (gnuplot) from the rows of this run."""

import csv
import os
import shutil
import subprocess
import tempfile

from core import CHART_SHORT, ECHO_SHORT, TITLE
from sections import callgrind, firmware, kv
from sections.echo import RESULT_COLUMNS
from sections.fileio import FILE_ENGINES, FILEIO_COLUMNS
from sections.handoff import HANDOFF_COLUMNS


class Chart:
    """Writing the files, drawing the chart."""

    def write(self):
        for name, cols, rows in (("latest.csv", RESULT_COLUMNS, self.rows),
                                 ("fileio.csv", FILEIO_COLUMNS, self.file_rows),
                                 ("callgrind.csv", callgrind.COLUMNS, self.cg_rows),
                                 ("firmware.csv", firmware.COLUMNS, self.fw_rows),
                                 ("handoff.csv", HANDOFF_COLUMNS, self.handoff_rows),
                                 ("kv.csv", kv.COLUMNS, self.kv_rows)):
            if rows:
                with open(os.path.join(self.out_dir, name), "w", newline="") as f:
                    w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
                    w.writeheader()
                    w.writerows(rows)
        with open(os.path.join(self.out_dir, "latest.txt"), "w") as f:
            f.write("\n".join(self.lines) + "\n")

    def chart(self):
        if not (self.rows or self.file_rows or self.handoff_rows) or not shutil.which("gnuplot"):
            return None
        png = os.path.join(self.out_dir, "latest.png")
        with tempfile.TemporaryDirectory(prefix="coring-chart-") as tmp:
            bars = os.path.join(tmp, "bars.dat")
            with open(bars, "w") as f:
                for bench in ("echo", "http"):
                    rows = self.by(bench)
                    for c, z in sorted({(c, z) for c, z, _ in rows}):
                        label = f"{c}c/{z}B" if bench == "echo" else f"http/{c}c"
                        cells = [rows.get((c, z, s)) for s in CHART_SHORT]
                        f.write(f'"{label}" ' + " ".join(f"{r['rps_median'] / 1000:g}" if r else "-" for r in cells) +
                                " " + " ".join(f"{r['cpu_us_per_req']:g}" if r else "-" for r in cells) + "\n")
            curve = os.path.join(tmp, "curve.dat")
            with open(curve, "w") as f:
                rows = self.by("curve")
                for c in sorted({c for c, _, _ in rows}):
                    cells = [rows.get((c, 64, s)) for s in ECHO_SHORT]
                    f.write(f"{c} " + " ".join(f"{r['cpu_us_per_req']:g}" if r else "-" for r in cells) +
                            " " + " ".join(f"{r['p99_us']:g}" if r else "-" for r in cells) + "\n")
            files = os.path.join(tmp, "files.dat")
            with open(files, "w") as f:
                rows = {(r["test"], r["depth"], r["engine"]): r for r in self.file_rows}
                for test, d in sorted({(t, d) for t, d, _ in rows}, key=lambda k: (k[0] != "randread", k[1])):
                    label = f"rand 4K QD{d}" if test == "randread" else f"seq 128K QD{d}"
                    cells = [rows.get((test, d, e)) for e in FILE_ENGINES]
                    f.write(f'"{label}" ' + " ".join(f"{r['mb_s']:g}" if r else "-" for r in cells) +
                            " " + " ".join(f"{r['cpu_us_per_io']:g}" if r else "-" for r in cells) + "\n")

            def plot(spec):
                return f"plot {spec}" if spec else "set multiplot next"
            colors = ['"#1b9e77"', '"#66a61e"', '"#d95f02"', '"#7570b3"', '"#e7298a"']
            # the echo servers, then the peers (libuv, Asio, Go, tokio; nginx in the HTTP
            # bars, Go's net/http in Go's)
            ecolors = colors + ['"#e6ab02"', '"#a6761d"', '"#1f78b4"', '"#b15928"', '"#666666"']
            names = [TITLE[s] for s in CHART_SHORT]
            fnames = ["coring", "coring, 1 read/enter", "fio io_uring", "fio io_uring fixed", "fio psync"]

            def hist(data, first, titles, palette):
                if os.path.getsize(data) == 0:  # a section that did not run: an empty panel
                    return None
                return ", ".join(
                    f'"{data}" using {first + i}' + (":xtic(1)" if i == 0 else "") +
                    f' title "{t}" lc rgb {palette[i]}' for i, t in enumerate(titles))

            def lines(data, first):
                if os.path.getsize(data) == 0:
                    return None
                return ", ".join(f'"{data}" using 1:{first + i} with linespoints title "{t}" lw 2 '
                                 f'pt 7 lc rgb {ecolors[i]}' for i, t in enumerate(names[:len(ECHO_SHORT)]))
            script = f"""
set terminal pngcairo size 1400,1700 font ",10" noenhanced
set output "{png}"
set datafile missing "-"
set grid ytics
# the keys outside the plots, at their right: inside, they hid bars and points
set key outside right top vertical
set multiplot layout 4,2 title "coring vs epoll, raw liburing, libuv, Asio, Go, tokio, nginx; file reads vs fio; hand-off vs Go, tokio ({self.mode}, {self.now:%Y-%m-%d}, {self.pin.ncpu} CPUs)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set xtics rotate by -30
set logscale y
set ylabel "thousand requests/s (log)"
set title "echo and HTTP: requests/s (higher is better)"
{plot(hist(bars, 2, names, ecolors))}
set ylabel "server CPU us/request (log)"
set title "echo and HTTP: server CPU per request (lower is better)"
{plot(hist(bars, 2 + len(CHART_SHORT), names, ecolors))}
set style data linespoints
set xtics norotate
set logscale x
set xlabel "connections (log)"
set ylabel "server CPU us/request (log)"
set title "echo 64 B: CPU per request against connections"
{plot(lines(curve, 2))}
set logscale y
set ylabel "p99 latency us (log)"
set title "echo 64 B: p99 latency against connections"
{plot(lines(curve, 2 + len(ECHO_SHORT)))}
unset logscale x
unset xlabel
set style data histograms
set xtics rotate by -30
set ylabel "MB/s (log)"
set title "file reads: throughput (higher is better)"
{plot(hist(files, 2, fnames, colors))}
set ylabel "CPU us per I/O (log)"
set title "file reads: CPU per I/O (lower is better)"
{plot(hist(files, 7, fnames, colors))}
{self.handoff_plots(tmp)}
unset multiplot
"""
            p = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
            if p.returncode != 0:
                self.say(f"bench: gnuplot failed: {p.stderr.strip()[-1000:]}")
                return None
        return png
