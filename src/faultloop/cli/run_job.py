"""`faultloop run-job`: run one cell's job with the built-in workload and write its manifest."""

from __future__ import annotations

import argparse
from pathlib import Path

from faultloop.cli.options import add_settings, settings_from
from faultloop.faults import FAULTS
from faultloop.run.launch import RunJob
from faultloop.run.spec import JobSettings, JobSpec


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="faultloop run-job", description=__doc__)
    parser.add_argument("--cell-dir", required=True, type=Path)
    parser.add_argument("--fault-type", required=True, choices=sorted(FAULTS))
    parser.add_argument("--rank", type=int, required=True, help="global rank to inject")
    parser.add_argument("--iter", type=int, required=True, help="iteration at which to inject")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--gpus-per-node", type=int, default=4, help="ranks per node")
    parser.add_argument("--fault-delay", type=float, default=0.0, help="seconds after --iter")
    add_settings(parser, JobSettings)
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.gpus_per_node < 1:
        parser.error("--nodes and --gpus-per-node must be >= 1")
    if not 0 <= args.rank < args.nodes * args.gpus_per_node:
        parser.error(f"--rank {args.rank} outside world size {args.nodes * args.gpus_per_node}")
    spec = JobSpec(
        args.cell_dir,
        args.fault_type,
        args.rank,
        args.iter,
        args.nodes,
        args.gpus_per_node,
        args.fault_delay,
        settings_from(args, JobSettings),
    )
    return RunJob(spec).run()
