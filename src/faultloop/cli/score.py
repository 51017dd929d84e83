"""`faultloop score --cell-dir DIR`: grade every analyzer's verdict on a cell against the truth
its job.json records, into the cell's score.json (rule judge_score)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from faultloop.cli.llm_options import add_endpoint_arguments, endpoint_from_args
from faultloop.contracts import ManifestError
from faultloop.score.cells import score_cell_dir
from faultloop.score.judge import JUDGE_MODES


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="faultloop score", description=__doc__)
    p.add_argument("--cell-dir", type=Path, required=True)
    p.add_argument("--gpus-per-node", type=int, default=4)
    p.add_argument("--segment-size", type=int, default=32)
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--judge-mode", choices=JUDGE_MODES, default="code")
    p.add_argument("--version", default="", help="fingerprint of the scoring code and settings (reuse key)")
    p.add_argument("--fresh", type=int, default=0, help="1: score every analyzer again (--forcerun)")
    add_endpoint_arguments(p, timeout_s=120.0)
    args = p.parse_args(argv)
    try:
        score_cell_dir(
            args.cell_dir,
            args.output,
            gpus_per_node=args.gpus_per_node,
            segment_size=args.segment_size,
            judge_mode=args.judge_mode,
            llm=endpoint_from_args(args) if args.judge_mode != "code" else None,
            version=args.version,
            fresh=bool(args.fresh),
        )
    except ManifestError as exc:
        print(f"faultloop score: {exc}", file=sys.stderr)
        return 2
    return 0
