"""The frameworks preset through the whole loop: every framework under each launcher it supports,
over the faults it can host, at 1 and 2 nodes (config/pools/frameworks.tsv), and each analyzer's
pass rate per workload and launcher, with the seconds each pair's cells took.

Run by hand (hours on 2 cores for the whole preset; narrow it with the filters):
    .venv/bin/python benchmarks/bench_frameworks.py [--session fw] [--workloads lightning,deepspeed]
        [--launchers mpirun] [--faults SIGKILL] [--nodes 1]
The preset is derived from the framework table: `--write-preset` rewrites it after a row changed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from faultloop.contracts import read_score_tsv
from faultloop.core import atomic, layout
from faultloop.core.cell import Cell
from faultloop.faults import FAULTS
from faultloop.frameworks import CPU_RUNS, FRAMEWORKS
from faultloop.plan.pool import read_pool_file, write_pool_file

REPO = Path(__file__).resolve().parents[1]
PRESET = REPO / "config" / "pools" / "frameworks.tsv"


HEADER = """\
# Every framework that runs on CPU under each launcher it supports, over the faults it can host
# (upstream's twelve and the cluster five, less those its row in faultloop.frameworks refuses),
# at one and two nodes, on rank 1 at iteration 5: the matrix benchmarks/bench_frameworks.py runs
# (hours on 2 cores). Written by `benchmarks/bench_frameworks.py --write-preset`;
# tests/plan/test_matrix.py checks it against the framework table.
"""


def write_preset() -> int:
    cells = [
        Cell(fault, 1, 5, nodes, 1, framework.name, launcher)
        for framework in FRAMEWORKS.values()
        if framework.cpu == CPU_RUNS  # the preset plans on a machine without a GPU
        for launcher in framework.launchers
        for fault in FAULTS
        if fault not in framework.refuses
        for nodes in (1, 2)
    ]
    write_pool_file(cells, PRESET)
    atomic.write_atomic(PRESET, HEADER + PRESET.read_text())
    print(f"{PRESET}: {len(cells)} cells")
    return 0


def selected_rows(args: argparse.Namespace) -> list[str]:
    """The preset's rows the filters keep, as pool tokens."""
    keep = {
        "workloads": set(filter(None, args.workloads.split(","))),
        "launchers": set(filter(None, args.launchers.split(","))),
        "faults": set(filter(None, args.faults.split(","))),
        "nodes": set(filter(None, args.nodes.split(","))),
    }
    tokens = []
    for row in read_pool_file(PRESET):
        fault, rank, iter_, nodes = row.fields[:4]
        checks = (("workloads", row.workload), ("launchers", row.launcher), ("faults", fault), ("nodes", nodes))
        if all(not keep[k] or v in keep[k] for k, v in checks):
            tokens.append(f"{fault}:{rank}:{iter_}:{nodes}@{row.workload}/{row.launcher}")
    return tokens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session", default="bench_frameworks")
    for name in ("workloads", "launchers", "faults", "nodes"):
        parser.add_argument(f"--{name}", default="", help=f"comma-separated {name} to keep (default: all)")
    parser.add_argument("--write-preset", action="store_true", help="rewrite the preset from the framework table")
    args = parser.parse_args()
    if args.write_preset:
        return write_preset()
    tokens = selected_rows(args)
    with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as pool:
        pool.write("FAULT_TYPE\tRANK\tITER\tNODES\tWORKLOAD\tLAUNCHER\n")
        pool.writelines(t.replace(":", "\t").replace("@", "\t").replace("/", "\t") + "\n" for t in tokens)
    start = time.time()
    cmd = [sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--config",
           f"pool_file={pool.name}", f"session={args.session}"]  # fmt: skip
    status = subprocess.run(cmd, cwd=REPO, check=False).returncode
    wall = time.time() - start
    session = REPO / "results" / "fault_injection" / args.session
    rows = read_score_tsv(session / layout.SCORES_TSV)
    seconds: dict[tuple[str, str], list[float]] = defaultdict(list)
    for job in session.glob(f"*/{layout.MANIFEST}"):
        data = json.loads(job.read_text())
        if data.get("end_time") and data.get("start_time"):
            seconds[data["workload"], data.get("launcher", "")].append(data["end_time"] - data["start_time"])
    analyzers = list(dict.fromkeys(r.analyzer for r in rows))
    print(f"{len(tokens)} cells, snakemake exit {status}, {wall / 60:.1f} min")
    print(f"{'workload':<14} {'launcher':<14} {'cells':>5} {'s/cell':>7}  " + "  ".join(f"{a:>18}" for a in analyzers))
    for pair in sorted({(r.workload, r.launcher) for r in rows if r.scored}):
        own = [r for r in rows if (r.workload, r.launcher) == pair and r.scored]
        took = seconds.get(pair, [])
        rates = []
        for a in analyzers:
            mine = [r for r in own if r.analyzer == a]
            rates.append(f"{sum(r.passed for r in mine)}/{len(mine)}" if mine else "-")
        mean = sum(took) / len(took) if took else float("nan")
        print(f"{pair[0]:<14} {pair[1]:<14} {len(took):>5} {mean:>7.1f}  " + "  ".join(f"{x:>18}" for x in rates))
    return status


if __name__ == "__main__":
    sys.exit(main())
