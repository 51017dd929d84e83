"""Seconds to plan (dry run) pools of 1,000 and 10,000 cells with the local profile.

Target: under 60 s for 10,000 cells on 2 cores with the default analyzers (three log analyzers,
two FR analyzers). Two peers, measured in the same run:
- the same pool with one analyzer of each (`analyzers=builtin fr_analyzers=builtin`): the ratio is
  what running every analyzer costs the planner (one analysis job per cell runs them all, so it
  should stay near 1);
- Snakemake's floor for the same DAG: a Snakefile with faultloop's rules, files and wildcards but
  nothing else (no config, params, resources or real commands). The ratio is what faultloop's
  own rule definitions cost on top of Snakemake's per-job work, which no rule change removes.
The pool is synthetic (every fault type at many ranks and iterations on 8 nodes); planning cost
does not depend on which cells they are.

    python benchmarks/bench_plan.py [--sizes 1000 10000]
"""

from __future__ import annotations

import argparse
import itertools
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.faults import FAULT_NAMES
from faultloop.plan.pool import write_pool_file

REPO = Path(__file__).resolve().parents[1]


def synthetic_pool(size: int) -> list[Cell]:
    combos = itertools.product(range(1, 10_000), range(32), FAULT_NAMES)
    return [Cell(fault, rank, iteration, 8) for iteration, rank, fault in itertools.islice(combos, size)]


ONE_ANALYZER = ("analyzers=builtin", "fr_analyzers=builtin")

# The floor peer: faultloop's DAG (four jobs per run, the same declared files and the two gather
# rules) with trivial shell bodies; its cells are pool.tsv's rows, named as faultloop names them.
FLOOR_SNAKEFILE = f"""
import csv
from pathlib import Path

CELLS = [
    "n{{3}}_{{0}}_r{{1}}_i{{2}}".format(*row)
    for row in csv.reader(Path("pool.tsv").read_text().splitlines()[1:], delimiter="\\t")
]
S = "results/floor"

rule all:
    input: f"{{S}}/report.md"

rule run_job:
    output: f"{{S}}/{{{{run}}}}/{layout.MANIFEST}"
    log: f"{{S}}/logs/run_job/{{{{run}}}}.log"
    shell: "touch {{output}} {{log}}"

rule logsage:
    input: rules.run_job.output
    output: f"{{S}}/{{{{run}}}}/{layout.STRIPPED_LOG}", f"{{S}}/{{{{run}}}}/{layout.LOGSAGE_INDEX}"
    log: f"{{S}}/logs/logsage/{{{{run}}}}.log"
    shell: "touch {{output}} {{log}}"

rule fr_analysis:
    input: rules.run_job.output
    output: f"{{S}}/{{{{run}}}}/{layout.FR_INDEX}"
    log: f"{{S}}/logs/fr_analysis/{{{{run}}}}.log"
    shell: "touch {{output}} {{log}}"

rule judge_score:
    input: rules.run_job.output, rules.logsage.output, rules.fr_analysis.output
    output: f"{{S}}/{{{{run}}}}/{layout.SCORE_JSON}"
    log: f"{{S}}/logs/judge_score/{{{{run}}}}.log"
    shell: "touch {{output}} {{log}}"

rule score:
    input: expand(rules.judge_score.output, run=CELLS)
    output: f"{{S}}/scores.tsv"
    shell: "touch {{output}}"

rule report:
    input: rules.score.output
    output: f"{{S}}/report.md"
    shell: "touch {{output}}"
"""


def plan_seconds(size: int, *config: str, floor: bool = False) -> tuple[float, float, int]:
    """Wall and CPU seconds of a dry run, and the run_job jobs it planned."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in ("workflow", "config", "profiles", "src"):
            src = REPO / name
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, work / name)
        if floor:
            (work / "Snakefile").write_text(FLOOR_SNAKEFILE)
        write_pool_file(synthetic_pool(size), work / "pool.tsv")
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        result = subprocess.run(
            [
                str(Path(sys.executable).parent / "snakemake"),
                "-n",
                "--quiet",
                "rules",
                "reason",
                "host",
                "--profile",
                "profiles/local",
                "--config",
                "pool_file=pool.tsv",
                *config,
            ],
            cwd=work,
            capture_output=True,
            text=True,
        )
        elapsed = time.perf_counter() - start
        cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
        if result.returncode != 0:
            raise SystemExit(result.stderr[-2000:])
        output = (result.stdout + result.stderr).split("Job stats:", 1)[1]
        jobs = int(next(line.split()[-1] for line in output.splitlines() if line.startswith("run_job ")))
        return elapsed, cpu, jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    args = parser.parse_args()
    print(
        "| cells | run_job planned | default analyzers: wall (s) | CPU (s) | one analyzer each: wall (s) "
        "| CPU (s) | ratio (CPU) | Snakemake floor: wall (s) | CPU (s) | ratio to floor (CPU) | target |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        seconds, cpu, jobs = plan_seconds(size)
        one_seconds, one_cpu, _ = plan_seconds(size, *ONE_ANALYZER)
        floor_seconds, floor_cpu, floor_jobs = plan_seconds(size, floor=True)
        if floor_jobs != jobs:
            raise SystemExit(f"the floor planned {floor_jobs} run_job jobs, faultloop {jobs}")
        print(
            f"| {size} | {jobs} | {seconds:.1f} | {cpu:.1f} | {one_seconds:.1f} | {one_cpu:.1f} | "
            f"{cpu / one_cpu:.2f} | {floor_seconds:.1f} | {floor_cpu:.1f} | {cpu / floor_cpu:.2f} | "
            f"{'< 60 s' if size >= 10000 else ''} |"
        )


if __name__ == "__main__":
    main()
