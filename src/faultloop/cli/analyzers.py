"""`faultloop analyzers list|try|run-cell`: the configured log analyzers, one on a log, a cell's run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from faultloop.analyze.registry import Analyzer, AnalyzerSpec, analyze_cell, resolve, selected
from faultloop.analyze.running import AnalyzerFailure
from faultloop.core import layout
from faultloop.core.errors import ConfigError
from faultloop.plan.config import load, parse_overrides


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="faultloop analyzers", description=__doc__)
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="the analyzers a workflow run would use, with kinds and fingerprints")
    listing.add_argument("overrides", nargs="*", help="key=value config overrides, as given to --config")
    one = sub.add_parser("try", help="run one analyzer on one log and print its verdict (JSON)")
    one.add_argument("name")
    one.add_argument("log", type=Path)
    one.add_argument("overrides", nargs="*")
    cell = sub.add_parser("run-cell", help="the logsage rule: every analyzer on a cell's stripped log")
    cell.add_argument("--log", type=Path, required=True)
    cell.add_argument("--index", type=Path, required=True, help=f"the cell's {layout.LOGSAGE_INDEX}")
    cell.add_argument("--specs", required=True, help="the analyzers as JSON (from the workflow)")
    cell.add_argument("--fresh", type=int, default=0, help="1: re-run every analyzer (--forcerun)")
    args = parser.parse_args(argv)
    try:
        if args.action == "run-cell":
            chosen = [Analyzer(AnalyzerSpec.from_json(s)) for s in json.loads(args.specs)]
            analyze_cell(chosen, args.log, args.index, fresh=bool(args.fresh))
            return 0
        config = load(parse_overrides(args.overrides))
        if args.action == "list":
            for a in selected(config):
                print(f"{a.name}\t{a.spec.kind}\t{a.spec.fingerprint}")
            return 0
        print(json.dumps(resolve(args.name, config).analyze(args.log).to_json(), indent=2))
        return 0
    except ConfigError as exc:
        print(f"faultloop analyzers: {exc}", file=sys.stderr)
        return 2
    except AnalyzerFailure as exc:
        print(f"faultloop analyzers: {args.name} failed: {exc}\n{exc.stderr_tail}", file=sys.stderr)
        return 1
