"""`faultloop pool`: validate a pool and list its cells, in priority order."""

from __future__ import annotations

import argparse
import sys

from faultloop.frameworks import DEFAULT_FRAMEWORK
from faultloop.plan.pool import PoolError, load_pool
from faultloop.run.matrix import refuser


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="faultloop pool", description=__doc__)
    parser.add_argument(
        "pool_file", nargs="?", help="pool TSV (FAULT_TYPE RANK ITER NODES, optionally ATTEMPTS WORKLOAD LAUNCHER)"
    )
    parser.add_argument(
        "--pool",
        help="one-line pool: 'GPU_SLEEP:1:5:2 SIGKILL:0:5:2@lightning/mpirun', "
        "FAULT:RANK:ITER:NODES[:ATTEMPTS][@WORKLOAD[/LAUNCHER]]",
    )
    parser.add_argument("--launcher", default="torchrun", help="the session's launcher (run_job.launcher)")
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument("--min-nodes", type=int, default=1)
    parser.add_argument(
        "--iterations", type=int, help="the job's iterations (run_job.iterations): a row injecting later is refused"
    )
    parser.add_argument(
        "--max-attempts", type=int, help="the most attempts a row may ask for (the config's max_attempts)"
    )
    args = parser.parse_args(argv)
    try:
        cells = load_pool(
            pool_file=args.pool_file,
            pool_spec=args.pool,
            gpus_per_node=args.gpus_per_node,
            min_nodes=args.min_nodes,
            iterations=args.iterations,
            max_attempts=args.max_attempts,
            default_launcher=args.launcher,
            refuse=refuser(DEFAULT_FRAMEWORK, args.launcher),
        )
    except PoolError as error:
        print(error, file=sys.stderr)
        return 1
    for cell in cells:
        print(f"{cell.spec}\t{cell.name}")
    print(f"{len(cells)} cells", file=sys.stderr)
    return 0
