"""Regenerate logsage's accuracy corpus: real cpu_gloo jobs with every fault, markers stripped.

Under both layouts of run_job (one torchrun per node, and one process per rank as srun starts
them), for each of the 12 fault types: ranks 0, 1 and the last at 2 nodes x 2 ranks, a middle
rank at 2 nodes x 4 ranks and at 4 nodes x 2 ranks. It runs `faultloop run-job`, strips the
ground-truth markers with marker.strip_markers, and keeps only the stripped main log, gzipped,
under an opaque name. The truth goes to a separate TSV, so nothing the analyzer reads (file name
or content) gives the answer away.

    python tests/data/logs/make_cpu_gloo_corpus.py [--out tests/data/logs/cpu_gloo] [--jobs 2]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import gzip
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from faultloop.faults import FAULT_NAMES
from faultloop.marker import strip_markers
from faultloop.run.spec import LAYOUTS

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Cell:
    """One corpus job."""

    fault: str
    rank: int
    nodes: int
    gpus_per_node: int
    launcher: str

    @property
    def key(self) -> str:
        return f"{self.launcher}_n{self.nodes}g{self.gpus_per_node}_{self.fault}_r{self.rank}"


def cells() -> list[Cell]:
    out = []
    for launcher in LAYOUTS:
        for fault in FAULT_NAMES:
            out += [Cell(fault, rank, 2, 2, launcher) for rank in (0, 1, 3)]
            out += [Cell(fault, 5, 2, 4, launcher), Cell(fault, 4, 4, 2, launcher)]
    return out


def run_cell(cell: Cell, name: str, work: Path, timing: list[str]) -> list[str] | None:
    """Run one job (one retry on an infrastructure failure); its stripped main log, or None.
    The job runs in a directory named like its opaque log: paths in the log (flight-recorder
    dumps) must not carry the cell name, which is the truth."""
    for _ in range(2):
        cell_dir = work / name
        shutil.rmtree(cell_dir, ignore_errors=True)
        cmd = [
            sys.executable,
            "-m",
            "faultloop.cli",
            "run-job",
            "--cell-dir",
            str(cell_dir),
            "--fault-type",
            cell.fault,
            "--rank",
            str(cell.rank),
            "--iter",
            "3",
            "--fault-delay",
            "0",
            "--nodes",
            str(cell.nodes),
            "--gpus-per-node",
            str(cell.gpus_per_node),
            "--iterations",
            "12",
            *timing,
            "--launcher",
            cell.launcher,
            "--scheduler",
            "local",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        manifest = cell_dir / "job.json"
        if proc.returncode == 0 and manifest.exists():
            job = json.loads(manifest.read_text())
            if job.get("run_valid"):
                text = (cell_dir / job["main_log"]).read_text(errors="replace")
                shutil.rmtree(cell_dir, ignore_errors=True)
                return list(strip_markers(text.splitlines(keepends=True)))
        print(f"{cell.key}: run-job exit {proc.returncode}: {proc.stderr.strip()[-300:]}", file=sys.stderr)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests/data/logs/cpu_gloo")
    parser.add_argument("--truth", type=Path, default=ROOT / "tests/data/logs/cpu_gloo_truth.tsv")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="", help="comma-separated fault types (default: all)")
    parser.add_argument("--pg-timeout-s", default="10")
    parser.add_argument("--stall-timeout-s", default="5")
    args = parser.parse_args(argv)
    todo = [c for c in cells() if not args.only or c.fault in args.only.split(",")]
    timing = ["--pg-timeout-s", args.pg_timeout_s, "--stall-timeout-s", args.stall_timeout_s]
    args.out.mkdir(parents=True, exist_ok=True)
    rows: dict[str, Cell] = {}
    with tempfile.TemporaryDirectory(prefix="logsage-corpus-") as tmp, cf.ThreadPoolExecutor(args.jobs) as pool:
        names = {c: f"job_{cells().index(c):03d}" for c in todo}
        futures = {pool.submit(run_cell, c, names[c], Path(tmp), timing): c for c in todo}
        for n, fut in enumerate(cf.as_completed(futures), 1):
            cell = futures[fut]
            lines = fut.result()
            if lines is None:
                continue
            name = f"{names[cell]}.log.gz"
            with gzip.open(args.out / name, "wt", encoding="utf-8") as f:
                f.writelines(lines)
            rows[name] = cell
            print(f"[{n}/{len(todo)}] {cell.key} -> {name} ({len(lines)} lines)", flush=True)
    old = {}
    if args.truth.exists() and args.only:  # a partial regeneration keeps the other rows
        for line in args.truth.read_text().splitlines()[1:]:
            f, fault, rank, nodes, gpn, launcher = line.split("\t")
            old[f] = Cell(fault, int(rank), int(nodes), int(gpn), launcher)
    old.update(rows)
    text = "file\tfault\trank\tnodes\tgpus_per_node\tlauncher\n" + "".join(
        f"{name}\t{c.fault}\t{c.rank}\t{c.nodes}\t{c.gpus_per_node}\t{c.launcher}\n" for name, c in sorted(old.items())
    )
    args.truth.write_text(text)
    print(f"{len(rows)}/{len(todo)} logs written to {args.out}; truth in {args.truth}")
    return 0 if len(rows) == len(todo) else 1


if __name__ == "__main__":
    raise SystemExit(main())
