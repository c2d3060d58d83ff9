# SPDX-License-Identifier: MIT
"""Section "fileio": file reads through coring (bench/files/fileio.c)
against fio, random and sequential, at several queue depths; fileio.csv."""

import json
import os
import shutil

import benchlib
from benchlib import BenchError, median, spread_pct

FILEIO_COLUMNS = ["test", "depth", "bs", "engine", "iops", "mb_s", "cpu_us_per_io", "spread_pct",
                  "rounds", "noisy_rounds", "mode", "date"]
# coring_each: fileio --submit-each, the engine's opts.submit_batch = 1 (one
# io_uring_enter per read as each frame suspends, as fio does; by default
# coring submits a loop turn's SQEs at once, at the turn's end)
FILE_ENGINES = ["coring", "coring_each", "fio_uring", "fio_uring_fixed", "fio_psync"]
FILE_TITLE = {"coring": "coring", "coring_each": "coring 1/enter", "fio_uring": "fio uring",
              "fio_uring_fixed": "fio fixed", "fio_psync": "fio psync"}


class FileIO:
    """The file I/O section and its table."""

    def data_file(self):
        path = os.path.join(self.out_dir, "fileio.dat")
        size = self.m["file_mib"] << 20
        try:
            if os.path.getsize(path) == size:
                return path
        except OSError:
            pass
        free = shutil.disk_usage(self.out_dir).free
        if free < size + (1 << 30):
            raise BenchError(f"fileio: {free >> 20} MiB free, {self.m['file_mib']} MiB file needs "
                             f"1 GiB more: run with a smaller mode (QUICK=1) or free space")
        self.say(f"(writing the {self.m['file_mib']} MiB test file {path})")
        block = os.urandom(1 << 20)
        with open(path + ".tmp", "wb") as f:
            for i in range(size >> 20):
                f.write(block[i % 4096:] + block[:i % 4096])  # no two MiB alike
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
        return path

    @staticmethod
    def evict(path):
        """Drop the file's pages from the page cache (clean pages: at once)."""
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def file_argv(self, engine, path, test, depth, bs, secs):
        if engine in ("coring", "coring_each"):
            argv = [benchlib.program(self.bench, "fileio"), "--file", path, "--bs", str(bs),
                    "--depth", str(depth), "--seconds", str(secs if test == "randread" else 600)]
            argv += ["--submit-each"] if engine == "coring_each" else []
            return argv + (["--rw", "randread", "--direct"] if test == "randread" else ["--rw", "read"])
        argv = ["fio", "--name=fileio", f"--filename={path}", f"--bs={bs}", "--output-format=json",
                "--gtod_reduce=1", "--randrepeat=0", "--norandommap"]
        if test == "randread":
            argv += ["--rw=randread", "--direct=1", "--time_based", f"--runtime={int(secs * 1000)}ms"]
        else:
            argv += ["--rw=read", "--direct=0", "--invalidate=1"]
        if engine == "fio_psync":
            return argv + ["--ioengine=psync", f"--numjobs={depth}"]
        argv += ["--ioengine=io_uring", f"--iodepth={depth}"]
        return argv + (["--fixedbufs", "--registerfiles"] if engine == "fio_uring_fixed" else [])

    def file_round(self, engine, path, test, depth, bs, secs):
        argv = self.file_argv(engine, path, test, depth, bs, secs)

        def measure():
            if test == "read":
                self.evict(path)
            rc, out, err, _, other, _ = self.run_child(argv, 900)
            if rc != 0:
                raise BenchError(f"{' '.join(argv)} failed:\n{out[-2000:]}{err[-2000:]}")
            # CPU of the threads that issue the I/O: fio's job threads (its
            # usr + sys over the job's runtime, as fio reports them), the
            # fileio engine's thread (fio's main process is left out)
            if engine in ("coring", "coring_each"):
                d = benchlib.parse_kv(out)
                ios, iops, cpu = d["ios_total"], d["iops"], d["cpu_s"]
            else:
                jobs = json.loads(out[out.index("{"):])["jobs"]
                ios = sum(j["read"]["total_ios"] for j in jobs)
                iops = sum(j["read"]["iops"] for j in jobs)
                cpu = sum((j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] / 1000 for j in jobs)
            return {"iops": iops, "mb_s": iops * bs / 1e6, "cpu_us": cpu * 1e6 / ios if ios else 0,
                    "other_cpu_s": other}
        # the window is the run's length (the whole file for reads)
        return self.retry(measure, secs if test == "randread" else 1.0)

    def fileio(self):
        self.say("== file I/O: coring (fileio: co_read from N coroutines, one engine) vs fio")
        if not self.have("fio", "file I/O rows"):
            return
        path = self.data_file()
        secs = self.m["file_secs"] if "SECONDS_PER_ROUND" not in os.environ else self.m["secs"]
        plan = [("randread", d, 4096, FILE_ENGINES) for d in self.m["depths"]]
        plan += [("read", d, 131072, ["coring", "coring_each", "fio_uring", "fio_uring_fixed"] +
                  (["fio_psync"] if d == 1 else [])) for d in (1, 8)]
        for test, depth, bs, engines in plan:
            self.progress(f"{'%s QD%d' % (test, depth):<18}")
            # an unmeasured warm-up: for the buffered reads, the whole file
            # through the page cache right before the rounds (a VM that
            # hands free memory back to its host, as this one does, makes
            # the first use of those pages slow; the rounds then reuse the
            # pages each eviction frees)
            self.evict(path)
            self.run_child(self.file_argv("coring", path, test, depth, bs, min(secs, 0.5)), 900)
            res = {e: [] for e in engines}
            for r in range(self.m["rounds"]):
                order = engines[r % len(engines):] + engines[:r % len(engines)]
                for e in order:
                    res[e].append(self.file_round(e, path, test, depth, bs, secs))
                    self.progress(".")
            for e in engines:
                self.add_file_row(test, depth, bs, e, res[e])
            self.progress("\n")
        self.say(self.file_table())
        self.say()

    def add_file_row(self, test, depth, bs, engine, results):
        """A row of fileio.csv from one engine's rounds (in round order)."""
        iops = [x["iops"] for x in results]
        if test == "randread":
            self.per_round[("file", depth, engine)] = iops
        self.file_rows.append({
            "test": test, "depth": depth, "bs": bs, "engine": engine,
            "iops": round(median(iops)), "mb_s": round(median([x["mb_s"] for x in results]), 1),
            "cpu_us_per_io": round(median([x["cpu_us"] for x in results]), 3),
            "spread_pct": round(spread_pct(iops), 1), "rounds": len(results),
            "noisy_rounds": sum(x["noisy"] for x in results), "mode": self.mode,
            "date": self.date})

    def file_table(self):
        rows = {(r["test"], r["depth"], r["engine"]): r for r in self.file_rows}
        lines = [f"{'workload':<24} {'metric':<12}" + "".join(f"{FILE_TITLE[e]:>15}" for e in FILE_ENGINES) +
                 f"{'coring/uring':>14}{'coring/fixed':>14}"]
        for test, depth in sorted({(t, d) for t, d, _ in rows}, key=lambda k: (k[0] != "randread", k[1])):
            w = f"random 4 KiB direct QD{depth}" if test == "randread" else f"seq 128 KiB buffered QD{depth}"
            for i, (k, label, fmt) in enumerate([("iops", "IOPS", "{:.0f}"), ("mb_s", "MB/s", "{:.0f}"),
                                                 ("cpu_us_per_io", "CPU us/IO", "{:.2f}"),
                                                 ("spread_pct", "spread %", "{:.1f}")]):
                if test == "randread" and k == "mb_s":
                    continue
                vals = {e: rows[(test, depth, e)][k] if (test, depth, e) in rows else None for e in FILE_ENGINES}
                rat = [f"{vals['coring'] / vals[b]:.2f}" if vals["coring"] is not None and vals[b] else "-"
                       for b in ("fio_uring", "fio_uring_fixed")]
                lines.append(f"{w if i == 0 else '':<24} {label:<12}" +
                             "".join(f"{fmt.format(v) if v is not None else '-':>15}" for v in vals.values()) +
                             "".join(f"{x:>14}" for x in rat))
            noisy = sum(rows[(test, depth, e)]["noisy_rounds"] for e in FILE_ENGINES if (test, depth, e) in rows)
            if noisy:
                lines.append(f"{'':<24} ({noisy} noisy round(s) kept after {self.retries} repeats)")
        return "\n".join(lines)
