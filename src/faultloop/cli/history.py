"""`faultloop history`: record each log analyzer's scores under its version in the session's
history/ (rule history), before the report compares versions."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from faultloop.contracts import read_score_records
from faultloop.core import layout
from faultloop.report.history import record_histories


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="faultloop history", description=__doc__)
    p.add_argument("--records", type=Path, required=True, help=f"the session's {layout.SCORE_RECORDS}")
    p.add_argument("--history-dir", type=Path, required=True, help=f"the session's {layout.HISTORY_DIR}/")
    p.add_argument("--analyzer-version", help="the primary analyzer's fingerprint (default: its cells' majority)")
    args = p.parse_args(argv)
    if not args.records.is_file():
        print(f"faultloop history: no score records {args.records}", file=sys.stderr)
        return 1
    record_histories(read_score_records(args.records), args.history_dir, args.analyzer_version)
    return 0
