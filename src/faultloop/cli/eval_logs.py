"""`faultloop eval-logs DIR [DIR ...] [--analyzer NAME] [--ablate PROGRAM ...]`: a log analyzer graded on
labelled logs of real failures (faultloop.score.corpus), overall, by folder, category and launcher
style; with `--ablate`, logsage without the tables of the programs named (logsage.ablation)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from faultloop.analyze import registry as analyzers
from faultloop.analyze.analyzer import Input
from faultloop.analyze.logsage import ablation, rules
from faultloop.core.errors import ConfigError
from faultloop.plan import config
from faultloop.score import corpus


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="faultloop eval-logs", description="Score a log analyzer on labelled logs of real failures."
    )
    parser.add_argument(
        "directories",
        nargs="*",
        type=Path,
        help="folders of <case>.log files with labels_*.tsv beside them (their subfolders are read too)",
    )
    parser.add_argument(
        "--analyzer",
        default="faultloop",
        help="a configured analyzer's name (config/config.yaml, the site file) or a log kind: "
        f"{', '.join(analyzers.kinds(Input.LOG))} (default: faultloop, faultloop's logsage)",
    )
    parser.add_argument(
        "--ablate",
        action="append",
        default=[],
        metavar="PROGRAM",
        help="leave out every row, launcher adapter and catalog entry of this program (repeatable; "
        "`--ablate list` prints the names): how logsage reads a program it has never met",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--check", action="store_true", help="exit 1 when a score is below its threshold")
    args = parser.parse_args(argv)
    if "list" in args.ablate:
        print("\n".join(rules.programs()))
        return 0
    if not args.directories:
        parser.error("the following arguments are required: directories")
    unknown = sorted(set(args.ablate) - set(rules.programs()))
    if unknown:
        print(
            f"faultloop eval-logs: --ablate: unknown program(s) {', '.join(unknown)} (--ablate list)", file=sys.stderr
        )
        return 2
    if frozenset(args.ablate) != ablation.LEFT_OUT:
        # the tables are filtered where they are built: grade in a process that builds them so
        env = {**os.environ, ablation.ENV: ",".join(sorted(args.ablate))}
        return subprocess.run([sys.executable, "-m", "faultloop.cli", "eval-logs", *argv], env=env).returncode
    try:
        cases = corpus.load_cases(*args.directories)
        settings = config.load({}) if Path("config/config.yaml").is_file() else {}
        analyzer = analyzers.resolve(args.analyzer, settings)
    except (corpus.EvalError, ConfigError) as exc:
        print(f"faultloop eval-logs: {exc}", file=sys.stderr)
        return 2
    evaluation = corpus.evaluate(cases, analyzer.analyze)
    bar = corpus.Thresholds()
    if args.format == "json":
        print(json.dumps(evaluation.to_json(bar), indent=1))
    else:
        where = ", ".join(map(str, args.directories))
        print(evaluation.to_text(bar, f"{args.analyzer} on {len(cases)} labelled logs in {where}"), end="")
    return 1 if args.check and evaluation.failures(bar) else 0
