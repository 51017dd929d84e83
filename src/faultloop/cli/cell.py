"""`faultloop cell run|strip-log`: the per-cell workflow steps (run by Snakemake's rules)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from faultloop.analyze.strip import strip_log
from faultloop.cli.options import add_settings, settings_from
from faultloop.plan.config import BUILTIN
from faultloop.run.cell import CellRun, run_cell
from faultloop.run.spec import JobSettings


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="faultloop cell", description=__doc__)
    sub = parser.add_subparsers(dest="step", required=True)
    run = sub.add_parser("run", help="run_job: launch a run's job (one attempt of a cell) and write its manifest")
    run.add_argument(
        "--output",
        required=True,
        type=Path,
        help="the run's job.json: <session>/n<N>_<FAULT>_r<R>_i<I>[_a<A>]/job.json, or .../attempt_<k>/job.json",
    )
    run.add_argument("--infra-try", type=int, default=1, help="this try after infrastructure failures (Snakemake's)")
    run.add_argument("--infra-tries", type=int, default=1, help="tries before the run is recorded INFRA_FAILED")
    run.add_argument("--workload-script", default=BUILTIN)
    run.add_argument("--gpus-per-node", type=int, default=4)
    run.add_argument("--fault-delay", type=float, default=0.0)
    run.add_argument("--cleanup-cmd", default="")
    run.add_argument(
        "--driver-pid",
        type=int,
        help="the process that started this job (the rule passes Snakemake's, $PPID): the job stops when it"
        " is gone; default: this process's parent when it starts",
    )
    add_settings(run, JobSettings)
    strip = sub.add_parser("strip-log", help="write the analyzers' copy of the main log, markers removed")
    strip.add_argument("--manifest", type=Path, required=True)
    strip.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.step == "strip-log":
        strip_log(args.manifest, args.output)
        return 0
    return run_cell(
        CellRun(
            manifest=args.output,
            infra_try=args.infra_try,
            infra_tries=args.infra_tries,
            workload_script=args.workload_script,
            gpus_per_node=args.gpus_per_node,
            fault_delay=args.fault_delay,
            cleanup_cmd=args.cleanup_cmd,
            driver_pid=args.driver_pid or os.getppid(),
            settings=settings_from(args, JobSettings),
        )
    )
