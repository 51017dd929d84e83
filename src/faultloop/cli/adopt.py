"""`faultloop adopt SESSION_DIR`: write the job.json of every run of an NVRx session, to re-judge it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from faultloop.adopt.session import AdoptError, adopt, summary


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="faultloop adopt", description=__doc__)
    parser.add_argument("session_dir", type=Path, help="the session folder holding upstream's experiments.tsv")
    parser.add_argument("--gpus-per-node", type=int, default=4, help="ranks per node of those jobs (GPUS_PER_NODE)")
    parser.add_argument("-n", "--dry-run", action="store_true", help="show what adopting finds; write nothing")
    args = parser.parse_args(argv)
    if args.gpus_per_node < 1:
        parser.error("--gpus-per-node must be at least 1")
    try:
        adoption = adopt(args.session_dir, gpus_per_node=args.gpus_per_node, write=not args.dry_run)
    except AdoptError as error:
        print(error, file=sys.stderr)
        return 1
    print(summary(adoption))
    print(
        f"\nre-judge: snakemake --profile profiles/local --until score "
        f"--config adopt={args.session_dir.resolve()} gpus_per_node={args.gpus_per_node}"
    )
    return 0
