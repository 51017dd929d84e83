"""`faultloop logsage --log-path LOG`: logsage's verdict on one log (deterministic, llm or upstream)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from faultloop.analyze import limits
from faultloop.analyze.logsage import prefilter
from faultloop.cli.llm_options import add_endpoint_arguments, endpoint_from_args

if TYPE_CHECKING:
    from faultloop.analyze.logsage import Verdict


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="faultloop logsage", description="Attribute a failed job from its log.")
    parser.add_argument("--log-path", required=True)
    parser.add_argument("--format", choices=("text", "json"), default="text", help="stdout format")
    parser.add_argument("--output-text", help="also write the text form here")
    parser.add_argument("--output-json", help="also write the JSON form here")
    parser.add_argument("--mode", choices=("deterministic", "llm", "upstream"), default="deterministic")
    parser.add_argument(
        "--prefilter",
        choices=("auto", "rg", "grep", "python"),
        default="auto",
        help="line prefilter: ripgrep, GNU grep or pure Python (auto: the first present)",
    )
    add_endpoint_arguments(parser, timeout_s=60.0)
    args = parser.parse_args(argv)
    path = Path(args.log_path)
    if not path.is_file():  # a typo, not a job without a log (the workflow hands over an empty log)
        print(f"faultloop logsage: no such log file: {path}", file=sys.stderr)
        return 2
    limit = limits.memory_limit()
    try:  # logs are untrusted: this process and the prefilter it starts under the limit
        with limits.held_to(limit):
            verdict = _analyze(parser, args, path)
    except MemoryError:
        print(f"faultloop logsage: {limits.over_limit(limit or 0)}", file=sys.stderr)
        return 1
    if verdict is None:
        return 2
    from faultloop.core import atomic  # (as _analyze's imports)

    atomic.emit_result(
        verdict.to_text(),
        verdict.to_json(),
        text_path=args.output_text,
        json_path=args.output_json,
        stdout_format=args.format,
    )
    return 0


def _analyze(parser: argparse.ArgumentParser, args: argparse.Namespace, path: Path) -> Verdict | None:
    """The verdict in the chosen mode; None when upstream's analyzer could not run (said on stderr).
    The deterministic mode starts the prefilter (ripgrep) first and imports the analyzer while it
    reads: on a 0.5 GB log the imports are a third of the time, which this overlaps."""
    started = prefilter.rows(path, args.prefilter) if args.mode == "deterministic" else None
    from faultloop.analyze.logsage import Settings, analyze_log, analyze_with_llm, run_upstream

    if args.mode == "llm":
        if not args.llm_base_url or not args.llm_model:
            parser.error("--mode llm needs --llm-base-url and --llm-model")
        llm_settings = endpoint_from_args(args)
        return analyze_with_llm(path, Settings(mode="llm", prefilter=args.prefilter, llm=llm_settings))
    if args.mode == "upstream":
        try:
            return run_upstream(path, Settings("upstream"))
        except RuntimeError as exc:
            print(f"faultloop logsage: {exc}", file=sys.stderr)
            return None
    return analyze_log(path, Settings(prefilter=args.prefilter), started)
