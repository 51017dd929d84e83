"""`faultloop report`: the session report, heatmap, HTML page and JUnit file from the score
records; by default it first records the history (`faultloop history`), which the workflow runs
as its own rule."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from faultloop.adopt import session as adopt
from faultloop.contracts import read_score_records
from faultloop.core import layout
from faultloop.report.history import record_histories
from faultloop.report.model import build_report
from faultloop.report.render import write_report
from faultloop.score.tables import write_failing_pool


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="faultloop report", description=__doc__)
    p.add_argument(
        "--records", type=Path, required=True, help=f"the session's {layout.SCORE_RECORDS} (the score rule gathers it)"
    )
    p.add_argument("--session-dir", type=Path, required=True)
    p.add_argument(
        "--upstream-verdicts",
        type=Path,
        help=f"an adopted session's {layout.UPSTREAM_VERDICTS_TSV}: upstream's judge beside the code's",
    )
    p.add_argument("--analyzer-version", help="the primary analyzer's fingerprint (default: its cells' majority)")
    p.add_argument("--report", "--output", dest="report", type=Path, help=f"default <session>/{layout.REPORT_MD}")
    p.add_argument("--heatmap", type=Path, help=f"default <session>/{layout.HEATMAP_PNG}")
    p.add_argument("--html", type=Path, help=f"default <session>/{layout.REPORT_HTML}")
    p.add_argument("--junit", type=Path, help=f"default <session>/{layout.JUNIT_XML}")
    p.add_argument("--no-history", action="store_true", help="compare with the history but do not record")
    p.add_argument("--failing-pool", type=Path, help="also write a pool TSV of the primary analyzer's failing cells")
    p.add_argument(
        "--include-unscored",
        action="store_true",
        help="with --failing-pool: add invalid, infra-failed and not-run cells",
    )
    args = p.parse_args(argv)
    if not args.records.is_file():
        print(f"faultloop report: no score records {args.records}", file=sys.stderr)
        return 1
    s = args.session_dir
    records = read_score_records(args.records)
    if not args.no_history:
        record_histories(records, s / layout.HISTORY_DIR, args.analyzer_version)
    upstream = adopt.read_verdicts(args.upstream_verdicts) if args.upstream_verdicts else None
    rep = build_report(records, s / layout.HISTORY_DIR, args.analyzer_version, upstream=upstream)
    write_report(
        rep,
        markdown=args.report or s / layout.REPORT_MD,
        html=args.html or s / layout.REPORT_HTML,
        heatmap=args.heatmap or s / layout.HEATMAP_PNG,
        junit=args.junit or s / layout.JUNIT_XML,
    )
    if args.failing_pool:
        cells = write_failing_pool(rep.primary.rows, args.failing_pool, include_unscored=args.include_unscored)
        print(f"{len(cells)} failing cells written to {args.failing_pool}")
    return 0
