"""`faultloop fr-analyzers`: the fr_analysis rule, every configured FR analyzer on a cell's dumps."""

from __future__ import annotations

import argparse
from pathlib import Path

from faultloop.analyze import registry
from faultloop.analyze.analyzer import DumpsSource, Input
from faultloop.core import layout
from faultloop.core.cell import Cell


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="faultloop fr-analyzers", description=__doc__)
    parser.add_argument("--manifest", type=Path, required=True, help="the cell's job.json")
    parser.add_argument("--index", type=Path, required=True, help=f"the cell's {layout.FR_INDEX}")
    parser.add_argument("--specs", required=True, help="the FR analyzers as JSON (from the workflow)")
    parser.add_argument(
        "--world-size",
        type=int,
        default=None,
        help="ranks 0..N-1 expected (default: the cell's nodes x --gpus-per-node)",
    )
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument("--segment-size", type=int, default=32)
    parser.add_argument("--fresh", type=int, default=0, help="1: re-run every analyzer (--forcerun)")
    args = parser.parse_args(argv)
    cell_dir = registry.cell_of(Input.DUMPS, args.index)
    # From the cell's folder name (the run folder's, or its cell's for a later attempt), not a
    # per-job Snakemake param: those cost planning time.
    cell_folder, _ = layout.cell_of_run(args.manifest.parent)
    world_size = args.world_size or Cell.from_name(cell_folder.name).nodes * args.gpus_per_node
    fr_path = str(args.manifest.parent / "checkpoints")
    source = DumpsSource(fr_path, world_size, args.gpus_per_node, args.segment_size, args.manifest)
    registry.run_cell(Input.DUMPS, registry.specs_from_json(args.specs), source, cell_dir, fresh=bool(args.fresh))
    return 0
