"""Per-cell evidence: the lines of the stripped log a verdict should rest on, beside the ones the
analyzer cited, so a failing cell shows what the analyzer missed.

Computed by judge_score when it grades a cell (it has the stripped log and the verdict at hand)
and stored with the score, so the report reads only its declared inputs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from faultloop.faults import FAULTS
from faultloop.plan.pool import Cell

EVIDENCE_LINES = 12
ERROR_WORDS = re.compile(
    r"error|fail|exception|timeout|timed out|killed|signal|abort|fatal|watchdog|exit", re.IGNORECASE
)


@dataclass(frozen=True)
class EvidenceLine:
    """A line of the stripped log worth a look, and whether the analyzer cited it."""

    number: int
    text: str
    why: str
    cited: bool


@dataclass(frozen=True)
class CitedLine:
    """A line the analyzer's verdict rested on (its evidence list)."""

    line: int | None
    kind: str
    rank: int | None
    text: str


@dataclass(frozen=True)
class CellEvidence:
    """What an analyzer cited on a cell, and the lines it should have looked at."""

    cited: list[CitedLine] = field(default_factory=list)
    expected: list[EvidenceLine] = field(default_factory=list)

    @property
    def missed(self) -> list[EvidenceLine]:
        return [e for e in self.expected if not e.cited]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CellEvidence:
        return cls(
            [CitedLine(**c) for c in data.get("cited", [])], [EvidenceLine(**e) for e in data.get("expected", [])]
        )


def rank_pattern(rank: int) -> re.Pattern[str]:
    """Lines by the rank (srun --label prefix, torch's [rankN]) or naming it (rank 3, rank=3)."""
    return re.compile(rf"^\s*{rank}:\s|\brank[\s=:\[#]*{rank}\b", re.IGNORECASE)


def _cited(verdict: Mapping[str, Any]) -> list[CitedLine]:
    out = []
    for e in verdict.get("evidence") or []:
        if isinstance(e, Mapping):
            line, rank = e.get("line"), e.get("rank")
            out.append(
                CitedLine(
                    line if isinstance(line, int) else None,
                    str(e.get("kind") or "?"),
                    rank if isinstance(rank, int) else None,
                    str(e.get("text") or "")[:300],
                )
            )
    return out


def cell_evidence(cell: Cell, lines: Iterable[str], verdict: Mapping[str, Any]) -> CellEvidence:
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
