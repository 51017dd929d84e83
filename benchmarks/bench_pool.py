"""The main job end to end: a whole pool through `snakemake --profile profiles/local`, timed, with
the machine's memory in use sampled twice a second (the peak above the idle baseline is what the
pool costs, every training job, launcher and analyzer included).

Run by hand on an otherwise idle machine (the default pool takes about 35 minutes on 2 cores):
    .venv/bin/python benchmarks/bench_pool.py [--pool-file config/pool.tsv] [-- --config run_job=...]
It runs in a fresh session folder under a temporary directory and prints one table row per
pool, then the accuracy of the session's report (restart, sole primary, fault type, FR exact).
The CPU columns sum every process the pool started (Snakemake, launchers, ranks, analyzers):
divided by the machine's cores, that is the shortest the pool could take on them with every
core busy all the time, whatever the scheduling.
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]


class MemorySampler(threading.Thread):
    """Peak of the machine's memory in use (total - available) while the pool runs."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.baseline = self.used()
        self.peak = self.baseline
        self.halt = threading.Event()

    @staticmethod
    def used() -> int:
        vm = psutil.virtual_memory()
        return vm.total - vm.available

    def run(self) -> None:
        while not self.halt.wait(0.5):
            self.peak = max(self.peak, self.used())


def rate(rows: list[dict[str, str]], column: str, passing: str = "true") -> str:
    scored = [r for r in rows if r["STATUS"] == "scored"]
    hits = sum(r[column] == passing for r in scored)
    return f"{hits}/{len(scored)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool-file", default="config/pool.tsv")
    parser.add_argument("extra", nargs="*", help="snakemake options after --")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_pool_") as tmp:
        session = "bench"
        cmd = [
            str(Path(sys.executable).with_name("snakemake")),
            "--profile",
            "profiles/local",
            "--config",
            f"pool_file={args.pool_file}",
            f"base_experiments_dir={tmp}",
            f"session={session}",
            *args.extra,
        ]
        sampler = MemorySampler()
        sampler.start()
        start = time.monotonic()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.monotonic() - start
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        sampler.halt.set()
        sampler.join()
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
            return proc.returncode
        with open(Path(tmp) / "fault_injection" / session / "scores.tsv") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    first = rows[0].get("ANALYZER")
    rows = [r for r in rows if r.get("ANALYZER", first) == first]  # the first analyzer's rows
    peak_gib = (sampler.peak - sampler.baseline) / 2**30
    cores = os.cpu_count() or 1
    print(
        f"| pool | cells | wall (min) | CPU, all processes (min) | CPU / {cores} cores (min) | cores busy | "
        "memory peak above idle (GiB) | valid | restart | sole primary | fault type | FR exact rank |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {args.pool_file} | {len(rows)} | {wall / 60:.1f} | {cpu / 60:.1f} | {cpu / cores / 60:.1f} | "
        f"{cpu / cores / wall:.0%} | {peak_gib:.1f} | {rate(rows, 'run_valid')} | "
        f"{rate(rows, 'restart_correct')} | {rate(rows, 'rank_primary')} | {rate(rows, 'fault_type_correct')} | "
        f"{rate(rows, 'fr_rank_correct', 'rank')} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
