"""faultloop's combined verdict: the primary log analyzer's and the first FR analyzer's verdicts of
a cell merged into one (which rank, which fault, restart), deterministically, scored as the log
analyzer `combined` beside the others.

The log says what happened (a death signal, an exception, a timeout) and what to do; the flight
recorder says which rank did not join the collective everyone else waited in. Merge rules, in
order (docs/analyzers.md, "The combined verdict"):

1. restart, category, fault type, evidence and checkpoint_saved are the log's: the dumps say
   nothing about them. Without a log verdict the restart is ERRORS NOT FOUND.
2. No usable FR verdict (it failed, no dumps, no suspect): the log's ranks (`log_only`).
3. The log names no primary rank: the FR suspects are the primaries (`fr_fills`).
4. The FR suspects are the log's primaries: kept (`agree`).
5. The FR suspects are some of the log's primaries: narrowed to them, the others secondary
   (`fr_narrows`).
6. FR names one rank the log did not make primary, and the log calls it a hang or does not name
   its culprit with high confidence: FR's rank is primary, the log's secondary (`fr_overrides`).
   In a hang the rank missing from the collective is the origin, while the log mostly shows its
   victims timing out; a log reader that is unsure (or states no confidence, as naive readers
   and NVRx's do) has only the first error line, often a victim's.
7. Otherwise (a crash, exception or signal the log pins on a rank with high confidence, or FR
   names several ranks): the log stands, FR's other suspects become secondary (`log_stands`).
   A rank that died leaves no dump or a stale one: FR sees it missing but cannot tell a death
   from a hang, and the log's own death line for that rank can.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faultloop import analyzers, layout
from faultloop.analyzers import OK, AnalyzerFailure, Outcome, RunRecord
from faultloop.config import ConfigError
from faultloop.faults import ERRORS_NOT_FOUND, HANG
from faultloop.fingerprint import source_fingerprint

NAME = KIND = "combined"
LOG_ONLY, FR_FILLS, AGREE, FR_NARROWS, FR_OVERRIDES, LOG_STANDS, FR_ONLY = (
    "log_only", "fr_fills", "agree", "fr_narrows", "fr_overrides", "log_stands", "fr_only",
)  # fmt: skip
HIGH = "high"  # the log analyzer's confidence that its culprit's own line shows the fault


def enabled(config: Mapping[str, Any], log_names: list[str]) -> bool:
    """Whether the invocation scores the combined verdict (`combined`, default on); its name is
    refused for a log analyzer then, since both would write analysis/combined/."""
    on = bool(config.get("combined", True))
    if on and NAME in log_names:
        raise ConfigError(f"config key 'analyzers.{NAME}': the name is the combined verdict's (or set combined: false)")
    return on


def _suspects(fr: Mapping[str, Any] | None) -> list[int]:
    if not fr or fr.get("no_dumps"):
        return []
    return sorted({int(r) for r in fr.get("suspect_ranks") or []})


def merge(log: Mapping[str, Any] | None, fr: Mapping[str, Any] | None) -> dict[str, Any]:
    """One verdict from a log verdict and an FR verdict (either may be None), by the rules above;
    `merge_rule` says which applied."""
    suspects = _suspects(fr)
    if log is None:
        if not suspects:
            raise AnalyzerFailure("neither the log analyzer nor the FR analyzer gave a verdict to merge")
        base: dict[str, Any] = {"restart": ERRORS_NOT_FOUND, "primary_ranks": [], "secondary_ranks": []}
        return _verdict(base, suspects, [], FR_ONLY, "no log verdict; the FR suspects")
    primary = sorted(set(log.get("primary_ranks") or []))
    secondary = sorted(set(log.get("secondary_ranks") or []) - set(primary))
    if not suspects:
        return _verdict(log, primary, secondary, LOG_ONLY, "no FR suspect; the log's ranks")
    if not primary:
        return _verdict(log, suspects, [r for r in secondary if r not in suspects], FR_FILLS, "the log names no rank")
    if suspects == primary:
        return _verdict(log, primary, secondary, AGREE, "log and FR name the same ranks")
    if set(suspects) < set(primary):
        rest = sorted(set(primary) - set(suspects) | set(secondary))
        return _verdict(log, suspects, rest, FR_NARROWS, "FR narrows the log's primaries")
    unsure = log.get("fault_category") == HANG or log.get("confidence") != HIGH
    if unsure and len(suspects) == 1:
        rest = sorted((set(primary) | set(secondary)) - set(suspects))
        why = "a hang" if log.get("fault_category") == HANG else "the log is not sure of its rank"
        return _verdict(log, suspects, rest, FR_OVERRIDES, f"{why}: the rank missing from the collective")
    rest = sorted((set(secondary) | set(suspects)) - set(primary))
    return _verdict(log, primary, rest, LOG_STANDS, "the log pins the fault on its rank; FR's suspects secondary")


def _verdict(log: Mapping[str, Any], primary: list[int], secondary: list[int], rule: str, why: str) -> dict[str, Any]:
    return analyzers.normalize(
        {
            **{k: log.get(k) for k in ("restart", "fault_category", "fault_type", "evidence", "checkpoint_saved")},
            "primary_ranks": primary,
            "secondary_ranks": [r for r in secondary if r not in primary],
            "explanation": f"{rule}: {why}. {log.get('explanation') or ''}".strip(),
            "detail": str(log.get("detail") or ""),
            "mode": KIND,
            "merge_rule": rule,
        }
    )


def _read_verdict(cell_dir: Path, run: RunRecord | None, folder: str, name: str) -> dict[str, Any] | None:
    if run is None or run.status != OK:
        return None
    data = analyzers.read_json(cell_dir / folder / name)
    return data if isinstance(data, dict) else None


def combine_cell(
    cell_dir: Path, log_runs: list[RunRecord], fr_runs: list[RunRecord], *, fresh: bool = False
) -> RunRecord:
    """The combined verdict of a cell into analysis/combined/ (reused, files untouched, while
    neither input changed); its run record, listed with the log analyzers'."""
    log_run = log_runs[0] if log_runs else None
    fr_run = fr_runs[0] if fr_runs else None
    inputs = [
        (run, cell_dir / folder / name)
        for run, folder, name in (
            (log_run, layout.analyzer_dir(log_run.analyzer) if log_run else "", layout.LOGSAGE_JSON),
            (fr_run, layout.fr_analyzer_dir(fr_run.analyzer) if fr_run else "", layout.FR_JSON),
        )
    ]
    digest = hashlib.sha256(
        "".join(
            f"{run.analyzer}:{run.fingerprint}:{run.status}:{analyzers.file_digest(path)}\n" if run else "-\n"
            for run, path in inputs
        ).encode()
    ).hexdigest()[:16]
    names = (log_run.analyzer if log_run else "", fr_run.analyzer if fr_run else "")

    def attempt() -> Outcome:
        def work() -> tuple[dict[str, Any], str, str | None]:
            log = _read_verdict(cell_dir, log_run, layout.analyzer_dir(names[0]), layout.LOGSAGE_JSON)
            fr = _read_verdict(cell_dir, fr_run, layout.fr_analyzer_dir(names[1]), layout.FR_JSON)
            verdict = {**merge(log, fr), "inputs": {"log": names[0], "fr": names[1]}}
            return verdict, analyzers.verdict_text(verdict), None

        return analyzers.timed(work)

    return analyzers.run_with_reuse(
        NAME,
        KIND,
        fingerprint(),
        digest,
        cell_dir / layout.analyzer_dir(NAME),
        fresh=fresh,
        files=(layout.LOGSAGE_JSON, layout.LOGSAGE_TEXT),
        attempt=attempt,
    )


def fingerprint() -> str:
    """The merge rules' code: editing them re-merges (and re-scores) every cell."""
    return source_fingerprint(sys.modules[__name__], analyzers.normalize)
