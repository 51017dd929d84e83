"""Which paste transformations (tests/paste_styles.py) each log survives: a markdown table per
case of the real-log corpus (../shared/real_logs, when present) and per fault of the CPU corpus.

    python benchmarks/paste_survival.py > /tmp/survival.md
"""

from __future__ import annotations

import csv
import gzip
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from faultloop.score import corpus as evallogs  # noqa: E402
from paste_styles import SURVIVES, TRANSFORMATIONS, survival  # noqa: E402

REAL_LOGS = ROOT.parent / "shared" / "real_logs"
CPU_CORPUS = ROOT / "tests" / "data" / "logs"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def main() -> int:
    names = list(TRANSFORMATIONS)
    print(_row(["case", *names]))
    print(_row(["---"] * (len(names) + 1)))
    if REAL_LOGS.is_dir():
        for case in evallogs.load_cases(REAL_LOGS):
            result = survival(case.log.read_text(errors="replace").splitlines())
            print(_row([case.name, *(result[n] for n in names)]))
    with open(CPU_CORPUS / "cpu_gloo_truth.tsv") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    by_fault: dict[str, Counter[str]] = {}
    for row in rows:
        lines = gzip.decompress((CPU_CORPUS / "cpu_gloo" / row["file"]).read_bytes()).decode().splitlines()
        for name, outcome in survival(lines).items():
            by_fault.setdefault(row["fault"], Counter())[f"{name}:{outcome}"] += 1
    print()
    print(_row(["CPU corpus fault (logs)", *names]))
    print(_row(["---"] * (len(names) + 1)))
    for fault, counts in sorted(by_fault.items()):
        total = sum(v for k, v in counts.items() if k.startswith(names[0] + ":"))
        cells = []
        for n in names:
            lost = ", ".join(
                f"{key.split(':', 1)[1]} {count}"
                for key, count in counts.items()
                if key.startswith(n + ":") and not key.endswith(SURVIVES)
            )
            cells.append(f"{counts[f'{n}:{SURVIVES}']}/{total}" + (f" ({lost})" if lost else ""))
        print(_row([f"{fault} ({total})", *cells]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
