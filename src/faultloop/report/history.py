"""Iterations: each log analyzer's scores stored per version, the comparison with the previous
version, and upstream's stop condition (every cell passes for two consecutive versions).

The history is the report's memory across invocations (`<session>/history/<analyzer>/`), one
scores table per distinct analyzer fingerprint, newest last. Recording it is its own step (rule
history, `faultloop history`), whose declared output is the index of every entry; the report
only reads it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from faultloop.contracts import ScoreRecord, read_score_tsv, score_tsv_text
from faultloop.core import atomic
from faultloop.score.tables import by_analyzer

HISTORY_RE = re.compile(r"^(?P<n>\d+)_(?P<fp>.+)\.tsv$")
INDEX = "index.json"  # every entry of every analyzer: the history step's declared output


@dataclass(frozen=True)
class HistoryEntry:
    number: int
    fingerprint: str
    path: Path


def _safe(fingerprint: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", fingerprint) or "unknown"


def read_history(history_dir: Path) -> list[HistoryEntry]:
    entries = []
    for p in history_dir.glob("*.tsv") if history_dir.is_dir() else []:
        m = HISTORY_RE.match(p.name)
        if m:
            entries.append(HistoryEntry(int(m["n"]), m["fp"], p))
    return sorted(entries, key=lambda e: e.number)


def record_history(history_dir: Path, records: list[ScoreRecord], fingerprint: str) -> list[HistoryEntry]:
    """Store one analyzer's records under its fingerprint: one entry per distinct version, newest last.

    Re-running the report for the latest version replaces its entry; a version seen earlier (a
    reverted patch) moves to the end, since it is again the newest iteration.
    """
    fp = _safe(fingerprint)
    entries = read_history(history_dir)
    if entries and entries[-1].fingerprint == fp:
        number = entries[-1].number
    else:
        for e in entries:
            if e.fingerprint == fp:
                e.path.unlink()
        number = (entries[-1].number + 1) if entries else 1
    atomic.write_atomic(history_dir / f"{number}_{fp}.tsv", score_tsv_text(records))
    return read_history(history_dir)


def analyzer_versions(rows: list[ScoreRecord]) -> Counter[str]:
    return Counter(r.analyzer_version or "unknown" for r in rows if r.scored)


def pick_fingerprint(rows: list[ScoreRecord], given: str | None) -> str:
    """The analyzer version the scores belong to: the given one, else the scored cells' majority."""
    if given:
        return given
    versions = analyzer_versions(rows)
    return versions.most_common(1)[0][0] if versions else "unknown"


def record_histories(
    records: list[ScoreRecord], history_dir: Path, fingerprint: str | None = None
) -> dict[str, list[HistoryEntry]]:
    """Record every log analyzer's records under its version (fingerprint: the primary's, default
    its cells' majority), and write the index of every entry (`history/index.json`)."""
    histories: dict[str, list[HistoryEntry]] = {}
    for name, own in by_analyzer(records).items():
        if not own[0].is_fr:
            given = fingerprint if not histories else None
            histories[name] = record_history(history_dir / name, own, pick_fingerprint(own, given))
    index = {
        name: [{"number": e.number, "fingerprint": e.fingerprint, "file": f"{name}/{e.path.name}"} for e in entries]
        for name, entries in histories.items()
    }
    atomic.write_json_atomic(history_dir / INDEX, {"analyzers": index})
    return histories


@dataclass
class Comparison:
    """Current iteration against the previous analyzer version, cell by cell."""

    previous: HistoryEntry | None
    regressed: list[tuple[ScoreRecord, list[str]]] = field(default_factory=list)
    fixed: list[ScoreRecord] = field(default_factory=list)
    still_failing: list[ScoreRecord] = field(default_factory=list)
    new_failing: list[ScoreRecord] = field(default_factory=list)


def compare(current: list[ScoreRecord], previous_entry: HistoryEntry | None) -> Comparison:
    comp = Comparison(previous_entry)
    before = {r.cell.name: r for r in read_score_tsv(previous_entry.path)} if previous_entry else {}
    for row in current:
        if not row.scored:
            continue
        old = before.get(row.cell.name)
        if old is None or not old.scored:
            if row.failing():
                comp.new_failing.append(row)
        elif old.passed and not row.passed:
            comp.regressed.append((row, row.failing()))
        elif not old.passed and row.passed:
            comp.fixed.append(row)
        elif not row.passed:
            dims_lost = [d for d in row.failing() if d not in old.failing()]
            if dims_lost:  # failing before too, but a dimension that passed now fails
                comp.regressed.append((row, dims_lost))
            else:
                comp.still_failing.append(row)
    return comp


def all_pass(records: list[ScoreRecord]) -> bool:
    return bool(records) and all(r.passed for r in records)


def stop_condition(history: list[HistoryEntry]) -> tuple[bool, str]:
    """Upstream's stop condition: every cell passes the four dimensions for two consecutive versions."""
    if len(history) < 2:
        return False, "only one analyzer version so far; the stop condition needs two consecutive clean ones"
    last, prev = read_score_tsv(history[-1].path), read_score_tsv(history[-2].path)
    for label, rows in (("this", last), ("the previous", prev)):
        if not all_pass(rows):
            bad = [r for r in rows if not r.passed]
            return False, f"{len(bad)} of {len(rows)} cells do not pass in {label} version"
    return True, f"every cell passes in analyzer versions {history[-2].fingerprint} and {history[-1].fingerprint}"
