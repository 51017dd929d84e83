"""`faultloop analyzers list|kinds|try|run-cell|merge`: the configured log analyzers, the table of
kinds, one analyzer on a log, a cell's log analyzers (rule logsage) and its merged verdicts
(rule judge_score, before scoring)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from faultloop.analyze import registry
from faultloop.analyze.analyzer import Input, LogSource, VerdictsSource, run_of
from faultloop.analyze.running import AnalyzerFailure
from faultloop.contracts import Manifest, ManifestError, read_index
from faultloop.core import layout
from faultloop.core.errors import ConfigError
from faultloop.plan.config import load, parse_overrides


def kinds_table() -> str:
    """The table of kinds as docs/analyzers.md shows it."""
    rows = [f"| `{kind.name}` | {kind.input} | {kind.summary} |" for kind in registry.TABLE]
    return "\n".join(["| kind | input | what it is |", "|---|---|---|", *rows]) + "\n"


def allocation(run_dir: Path) -> tuple[str, ...]:
    """The run's nodes (node index -> name) as its job.json records them, which a verdict's
    drain_nodes is checked against; none (no check) where it does not name every node."""
    try:
        job = Manifest.read(run_dir / layout.MANIFEST)
    except ManifestError:
        return ()
    return tuple(job.node_names) if len(job.node_names) == job.nodes else ()


def job_id(run_dir: Path) -> str:
    """A job's neutral identity: its first run's job id (it names no fault)."""
    try:
        return Manifest.read(run_dir / layout.MANIFEST).job_id
    except ManifestError:
        return ""


def log_source(log: Path, run_dir: Path, earlier: list[Path]) -> LogSource:
    """A run's stripped log with the job's earlier attempts (their stripped logs, oldest first)."""
    first_run = run_of(earlier[0]) if earlier else run_dir
    staging = run_dir.parent / ".staging"  # beside the runs: no path an analyzer sees names the fault
    return LogSource(log, staging, tuple(earlier), job_id(first_run), len(earlier) + 1, allocation(run_dir))


def merge(cell_dir: Path, specs_json: str, *, fresh: bool) -> None:
    """The verdicts merged from the run's first log and first FR analyzer (the combined verdict),
    listed by analysis/merged.json (empty when none is configured: nothing stale gets scored)."""
    log_runs = read_index(cell_dir / layout.LOGSAGE_INDEX)
    fr_runs = read_index(cell_dir / layout.FR_INDEX)
    source = VerdictsSource(
        cell_dir, log_runs[0] if log_runs else None, fr_runs[0] if fr_runs else None, allocation(cell_dir)
    )
    registry.run_cell(Input.VERDICTS, registry.specs_from_json(specs_json), source, cell_dir, fresh=fresh)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="faultloop analyzers", description=__doc__)
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="the analyzers a workflow run would use, with kinds and fingerprints")
    listing.add_argument("overrides", nargs="*", help="key=value config overrides, as given to --config")
    sub.add_parser("kinds", help="every kind of analyzer: its input and what it is (Markdown)")
    one = sub.add_parser("try", help="run one log analyzer on one log and print its verdict (JSON)")
    one.add_argument("name")
    one.add_argument("log", type=Path)
    one.add_argument("overrides", nargs="*")
    one.add_argument(
        "--earlier", type=Path, nargs="+", default=[], help="the job's earlier attempts' logs, oldest first"
    )
    cell = sub.add_parser("run-cell", help="the logsage rule: every log analyzer on a cell's stripped log")
    cell.add_argument("--log", type=Path, required=True)
    cell.add_argument("--index", type=Path, required=True, help=f"the cell's {layout.LOGSAGE_INDEX}")
    cell.add_argument("--specs", required=True, help="the analyzers as JSON (from the workflow)")
    cell.add_argument("--fresh", type=int, default=0, help="1: re-run every analyzer (--forcerun)")
    cell.add_argument(
        "--earlier", type=Path, action="append", default=[], help="an earlier attempt's stripped log, oldest first"
    )
    merged = sub.add_parser("merge", help="rule judge_score's first step: the combined verdict of a cell")
    merged.add_argument("--cell-dir", type=Path, required=True)
    merged.add_argument("--specs", required=True, help="the merging analyzers as JSON (from the workflow)")
    merged.add_argument("--fresh", type=int, default=0, help="1: re-merge (--forcerun)")
    args = parser.parse_args(argv)
    try:
        if args.action == "run-cell":
            run_dir = registry.cell_of(Input.LOG, args.index)
            specs = registry.specs_from_json(args.specs)
            source = log_source(args.log, run_dir, args.earlier)
            registry.run_cell(Input.LOG, specs, source, run_dir, fresh=bool(args.fresh))
            return 0
        if args.action == "merge":
            merge(args.cell_dir, args.specs, fresh=bool(args.fresh))
            return 0
        if args.action == "kinds":
            print(kinds_table(), end="")
            return 0
        config = load(parse_overrides(args.overrides))
        if args.action == "list":
            for input_ in Input:
                for spec in registry.selected(config, input_):
                    print(f"{spec.name}\t{spec.kind}\t{spec.input}\t{spec.fingerprint}")
            return 0
        verdict = registry.resolve(args.name, config).analyze(args.log, earlier=tuple(args.earlier))
        print(json.dumps(verdict.to_json(), indent=2))
        return 0
    except ConfigError as exc:
        print(f"faultloop analyzers: {exc}", file=sys.stderr)
        return 2
    except AnalyzerFailure as exc:
        print(f"faultloop analyzers: {args.name} failed: {exc}\n{exc.stderr_tail}", file=sys.stderr)
        return 1
