"""Per-cell evidence: the lines of the stripped log a verdict should rest on, beside the ones the
analyzer cited, so a failing cell shows what the analyzer missed.

Computed by judge_score when it grades a cell (it has the stripped log and the verdict at hand)
and stored with the score, so the report reads only its declared inputs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from faultloop.contracts import CellEvidence, CitedLine, EvidenceLine, LogVerdict
from faultloop.core.cell import Cell
from faultloop.faults import FAULTS

EVIDENCE_LINES = 12
ERROR_WORDS = re.compile(
    r"error|fail|exception|timeout|timed out|killed|signal|abort|fatal|watchdog|exit", re.IGNORECASE
)


def rank_pattern(rank: int) -> re.Pattern[str]:
    """Lines by the rank (srun --label prefix, torch's [rankN]) or naming it (rank 3, rank=3)."""
    return re.compile(rf"^\s*{rank}:\s|\brank[\s=:\[#]*{rank}\b", re.IGNORECASE)


def _cited(verdict: LogVerdict | None) -> list[CitedLine]:
    return [CitedLine(e.line, e.kind or "?", e.rank, e.text[:300]) for e in (verdict.evidence if verdict else [])]


def cell_evidence(cell: Cell, lines: Iterable[str], verdict: LogVerdict | None) -> CellEvidence:
    """The injected rank's lines that carry the fault's signature (or an error word), then other
    signature lines, then the injected rank's last line; each marked cited or missed."""
    cited = _cited(verdict)
    cited_lines = {c.line for c in cited}
    cited_texts = {c.text.strip() for c in cited}
    by_rank = rank_pattern(cell.rank)
    fault = FAULTS.get(cell.fault_type)
    signature = re.compile(fault.evidence if fault else r"$^", re.IGNORECASE)
    strong: list[EvidenceLine] = []
    weak: list[EvidenceLine] = []
    last: EvidenceLine | None = None
    for number, text in enumerate(lines, start=1):
        text = text.rstrip("\n")
        seen = number in cited_lines or text.strip() in cited_texts  # analyzers may number lines differently
        named = bool(by_rank.search(text))
        signed = bool(signature.search(text))
        if named:
            last = EvidenceLine(number, text[:300], "last line of the injected rank", seen)
        if named and signed:
            strong.append(EvidenceLine(number, text[:300], "injected rank + fault signature", seen))
        elif signed or (named and ERROR_WORDS.search(text)):
            weak.append(
                EvidenceLine(number, text[:300], "fault signature" if signed else "injected rank + error word", seen)
            )
    expected = (strong + weak)[:EVIDENCE_LINES]
    if last and last.number not in {e.number for e in expected}:
        expected.append(last)
    return CellEvidence(cited, expected)
