"""The report model: the score records per analyzer with their history, and the statistics every
section is built from (pass rates, judge agreement, analyzers paired and where they disagree).

A report people act on: infrastructure failures never count as attribution misses, every
analyzer (faultloop's, the naive baselines, a user's) is scored on the same cells so the paired
counts say who is better where, and each analyzer's versions are compared through its history so
the loop's stop condition (two consecutive clean versions) is checked by code, not by eye.
Upstream's table, the failure patterns and the failing pool follow the first (primary) log
analyzer. Building the model writes nothing (`history` records the versions beforehand).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from faultloop.adopt import session as adopt
from faultloop.contracts import DIMENSIONS, ScoreRecord
from faultloop.core.cell import Cell
from faultloop.faults import FAULTS
from faultloop.report.history import (
    Comparison,
    HistoryEntry,
    compare,
    pick_fingerprint,
    read_history,
    stop_condition,
)
from faultloop.score.tables import by_analyzer

# ---- rates --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rate:
    passed: int
    total: int

    @property
    def value(self) -> float:
        return self.passed / self.total if self.total else math.nan

    def __str__(self) -> str:
        return f"{self.passed}/{self.total} ({100 * self.passed / self.total:.0f}%)" if self.total else "-"


def rate(rows: list[ScoreRecord], test: Callable[[ScoreRecord], bool]) -> Rate:
    scored = [r for r in rows if r.scored]
    return Rate(sum(1 for r in scored if test(r)), len(scored))


def dim_pass(d: str) -> Callable[[ScoreRecord], bool]:
    return lambda r: r.grade(d) == DIMENSIONS[d].passing


def groups(rows: list[ScoreRecord]) -> dict[tuple[str, int], list[ScoreRecord]]:
    """Rows by (fault type, node count) in the fault table's order."""
    out: dict[tuple[str, int], list[ScoreRecord]] = {}
    order = {name: i for i, name in enumerate(FAULTS)}
    for r in sorted(rows, key=lambda r: (order.get(r.cell.fault_type, 99), r.cell.fault_type, r.cell.nodes)):
        out.setdefault((r.cell.fault_type, r.cell.nodes), []).append(r)
    return out


# ---- judge agreement ------------------------------------------------------------------------------


def cohen_kappa(a: list[str], b: list[str]) -> float:
    """Agreement beyond chance between two raters; NaN when chance agreement is total."""
    n = len(a)
    if n == 0:
        return math.nan
    observed = sum(x == y for x, y in zip(a, b, strict=False)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb[k] for k in ca) / (n * n)
    return math.nan if expected == 1 else (observed - expected) / (1 - expected)


@dataclass(frozen=True)
class Agreement:
    dimension: str
    agree: int
    total: int
    kappa: float


def judge_agreement(rows: list[ScoreRecord]) -> tuple[list[Agreement], int]:
    """Per dimension: how often the LLM judge agrees with the code; also the count of judge failures."""
    pairs = []
    failures = 0
    for r in rows:
        if not r.scored or not r.llm_judge:
            continue
        answer = r.llm_judge.get("answer")
        if not answer:
            failures += 1
            continue
        code = r.llm_judge.get("code") or r.values
        pairs.append((code, answer))
    out = []
    for d in DIMENSIONS.names(judged=True) if pairs else ():
        a = [str(c.get(d)) for c, _ in pairs]
        b = [str(j.get(d)) for _, j in pairs]
        out.append(Agreement(d, sum(x == y for x, y in zip(a, b, strict=False)), len(pairs), cohen_kappa(a, b)))
    return out, failures


# ---- analyzers side by side -----------------------------------------------------------------------


def passes(row: ScoreRecord, dimension: str) -> bool:
    """`overall`: all four stop-condition dimensions; else the one dimension."""
    return row.passed if dimension == "overall" else row.grade(dimension) == DIMENSIONS[dimension].passing


@dataclass(frozen=True)
class Paired:
    """Two analyzers on the cells both scored: where one is right and the other wrong."""

    a: str
    b: str
    dimension: str
    a_only: int
    b_only: int
    both: int
    neither: int


@dataclass(frozen=True)
class Disagreement:
    """A cell and dimension on which the analyzers' grades differ."""

    cell: Cell
    dimension: str
    grades: dict[str, str]  # analyzer -> its grade
    right: list[str]


def scored_by_cell(views: dict[str, list[ScoreRecord]]) -> dict[str, dict[str, ScoreRecord]]:
    return {name: {r.cell.name: r for r in rows if r.scored} for name, rows in views.items()}


def paired(views: dict[str, list[ScoreRecord]], dimensions: Iterable[str]) -> list[Paired]:
    index = scored_by_cell(views)
    out = []
    for a, b in itertools.combinations(views, 2):
        cells = [c for c in index[a] if c in index[b]]
        for d in dimensions:
            counts = Counter((passes(index[a][c], d), passes(index[b][c], d)) for c in cells)
            out.append(
                Paired(a, b, d, counts[True, False], counts[False, True], counts[True, True], counts[False, False])
            )
    return out


def disagreements(views: dict[str, list[ScoreRecord]], dimensions: Iterable[str]) -> list[Disagreement]:
    """Per cell every analyzer scored, the dimensions on which some are right and some wrong."""
    index = scored_by_cell(views)
    names = list(views)
    if len(names) < 2:
        return []
    out = []
    for cell_name, first in index[names[0]].items():
        found = [index[n].get(cell_name) for n in names]
        rows = [r for r in found if r is not None]
        if len(rows) < len(names):
            continue
        for d in dimensions:
            right = [n for n, r in zip(names, rows, strict=True) if passes(r, d)]
            if 0 < len(right) < len(names):
                out.append(
                    Disagreement(first.cell, d, {n: r.values[d] for n, r in zip(names, rows, strict=True)}, right)
                )
    return out


def median_and_worst(values: list[float]) -> str:
    """Median / worst, for people."""
    return f"{statistics.median(values):.1f} / {max(values):.1f}" if values else "-"


# ---- the report model ------------------------------------------------------------------------------


@dataclass
class AnalyzerView:
    """One log analyzer's rows with its own history, iteration comparison and stop condition."""

    name: str
    rows: list[ScoreRecord]
    fingerprint: str
    history: list[HistoryEntry]
    comparison: Comparison
    stop: tuple[bool, str]


@dataclass
class Report:
    """Everything the markdown, HTML and JUnit outputs are rendered from."""

    rows: list[ScoreRecord]
    views: list[AnalyzerView]  # the log analyzers, the primary first
    fr_views: dict[str, list[ScoreRecord]]  # the flight-recorder analyzers, fr:<name>
    upstream: dict[str, adopt.UpstreamVerdict] = field(default_factory=dict)  # adopted sessions, by cell

    @property
    def primary(self) -> AnalyzerView:
        return self.views[0]

    @property
    def log_views(self) -> dict[str, list[ScoreRecord]]:
        return {v.name: v.rows for v in self.views}


def build_report(
    rows: list[ScoreRecord],
    history_dir: Path,
    fingerprint: str | None = None,
    *,
    upstream: dict[str, adopt.UpstreamVerdict] | None = None,
) -> Report:
    """The report of the score records: per log analyzer, its history (`history_dir/<analyzer>/`,
    recorded beforehand) and the comparison with its previous version (fingerprint: the primary
    analyzer's version, default its cells' majority). upstream: an adopted session's recorded
    verdicts (its LLM judge's), shown beside the code's. Reads, never writes."""
    views: list[AnalyzerView] = []
    for name, own in by_analyzer(rows).items():
        if own[0].is_fr:
            continue
        fp = pick_fingerprint(own, fingerprint if not views else None)
        history = read_history(history_dir / name)
        previous = history[-2] if len(history) >= 2 else None
        views.append(AnalyzerView(name, own, fp, history, compare(own, previous), stop_condition(history)))
    if not views:
        views.append(AnalyzerView("builtin", [], "unknown", [], Comparison(None), (False, "no scores")))
    fr_views = {name: own for name, own in by_analyzer(rows).items() if own[0].is_fr}
    return Report(rows, views, fr_views, upstream or {})
