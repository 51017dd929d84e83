"""The deterministic analyzer: a log in, a Verdict (`contracts.LogVerdict`, logsage.json) out.

The log is streamed: the prefilter picks the few lines worth a look, the scan classifies them,
multi-line records are read afterwards at their byte offsets, and attribution decides. State is
bounded (per-rank first evidence, capped lists), so memory stays flat whatever the log size.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faultloop.analyze.logsage import culprits, fallback, prefilter, ranks, records, scan, shapes
from faultloop.analyze.logsage.attribute import attribute
from faultloop.analyze.logsage.facts import MAX_EVIDENCE, Evidence, Facts
from faultloop.analyze.logsage.policy import POLICY
from faultloop.analyze.logsage.vocab import CHECKPOINT, TRACEBACK_CUT
from faultloop.contracts import LogVerdict as Verdict  # the logsage.json contract
from faultloop.contracts.verdicts import GENERIC, ROW
from faultloop.faults import ERRORS_NOT_FOUND, NO_LOGS, NONE, RESTART
from faultloop.fingerprint import source_fingerprint

PACKAGE = __name__.rpartition(".")[0]
CAUSE = "cause"  # the verdict's key (in its extra) for logsage's diagnosed cause, a POLICY key


@dataclass(frozen=True)
class Settings:
    """How to analyze: the mode, the LLM endpoint for llm mode, and which prefilter reads the log."""

    mode: str = "deterministic"
    prefilter: str = "auto"  # auto (rg, else grep, else Python) | rg | grep | python
    jobs: int = 0  # parallel grep ranges for big logs; 0: one per CPU, at most 4
    llm: Any = None  # faultloop.analyze.llm.LLMSettings in llm mode


@functools.lru_cache(maxsize=16)
def analyzer_fingerprint(settings: Any = None) -> str:
    """A short hash of the whole logsage package's source and the settings: changes whenever the
    rules (or any other part of the analyzer) do. Read once per process and settings: the code that
    runs is the code imported (and hashing the package took a tenth of a small log's analysis)."""
    return source_fingerprint(sys.modules[PACKAGE], settings=settings)


def fingerprint_settings(settings: Settings) -> tuple[Any, ...]:
    endpoint = settings.llm
    return (settings.mode, getattr(endpoint, "model", None), getattr(endpoint, "base_url", None))


def analyze_log(
    path_or_lines: str | os.PathLike[str] | Iterable[str],
    settings: Settings | None = None,
    started: Generator[prefilter.Block] | None = None,
) -> Verdict:
    """Attribute a job from its log: a path (streamed) or lines (spooled to a temporary file).
    `started`: the path's prefilter, already reading (`prefilter.rows(path, settings.prefilter,
    settings.jobs)`, started before this module was imported: `faultloop logsage`); closed here."""
    settings = settings or Settings()
    if isinstance(path_or_lines, (str, os.PathLike)):
        verdict = _analyze_path(Path(path_or_lines), settings, started)
    else:
        with tempfile.NamedTemporaryFile("w", suffix=".log", encoding="utf-8", delete=False) as tmp:
            for line in path_or_lines:
                tmp.write(line if line.endswith("\n") else line + "\n")
        try:
            verdict = _analyze_path(Path(tmp.name), settings, None)
        finally:
            os.unlink(tmp.name)
    verdict.analyzer_version = analyzer_fingerprint(fingerprint_settings(settings))
    return verdict


def _analyze_path(path: Path, settings: Settings, started: Generator[prefilter.Block] | None) -> Verdict:
    if not path.is_file() or not _has_text(path):
        if started is not None:
            started.close()
        return Verdict(
            NO_LOGS,
            [],
            [],
            NONE,
            None,
            f"no log to analyze at {path}" if not path.is_file() else "the log is empty",
            "",
            [],
            False,
            "high",
            "there is no log text",
        )
    facts = Facts()
    # running: it reads while the census does
    rows = started if started is not None else prefilter.rows(path, settings.prefilter, settings.jobs)
    try:
        ranks.census(path, facts)
        scan.scan(path, facts, settings.prefilter, settings.jobs, rows)
    finally:
        rows.close()
    scan.resolve_deaths(facts)
    records.read_blocks(path, facts)
    ranks.single_process(facts, culprits.device_rank(facts))
    found = attribute(facts)
    if not found.cause:  # the rows found nothing: the readings under them (generic, temporal, spatial)
        found = fallback.read_under(path, facts) or found
    elif found.keys and all(k.kind == TRACEBACK_CUT and _unnamed(facts, k.rank) for k in found.keys):
        # the rows found only a traceback cut off before its exception line, of a process the log does not
        # name: a failure statement before it (the generic reading's) says what failed, and where
        under = fallback.read_under(path, facts)
        if under is not None and under.keys and under.keys[0].line < found.keys[0].line:
            found = under
    elif found.found_by == ROW and found.keys and found.keys[0].rule in shapes.SHAPE_NAMES:
        found.found_by = GENERIC  # its line was read by the shape of what programs say, not by a row
    checkpoint = any(k == CHECKPOINT for k, _ in facts.first)
    if not found.cause:
        return Verdict(
            ERRORS_NOT_FOUND,
            [],
            [],
            NONE,
            None,
            "No errors found in the log.",
            found.reasoning,
            facts.evidence[:10],
            checkpoint,
            found.confidence,
            found.confidence_reason,
        )
    cause, primary, secondary, keys = found.cause, found.primary, found.secondary, found.keys
    policy = POLICY[cause]
    fault_type = policy.fault_type
    who = (
        (f"Ranks {', '.join(map(str, primary))} each" if len(primary) > 1 else f"Rank {primary[0]}")
        if primary
        else "The job"
    )
    victims = (
        f" {len(secondary)} other rank{'s only show' if len(secondary) != 1 else ' only shows'} symptoms."
        if secondary
        else ""
    )
    explanation = (
        f"{who} {policy.happened or cause.lower()} ({fault_type or cause}, {policy.category})."
        f"{victims} {'Restart' if policy.restart == RESTART else 'Do not restart'}: {policy.why}."
    )
    detail = found.reasoning + (f"; first evidence line {keys[0].line}: {keys[0].text[:200]}" if keys else "")
    if checkpoint:
        detail += "; a checkpoint was saved (reported, decision kept)"
    return Verdict(
        policy.restart,
        primary,
        secondary,
        policy.category,
        fault_type,
        explanation,
        detail,
        _ordered_evidence(keys, facts.evidence),
        checkpoint,
        found.confidence,
        found.confidence_reason,
        found_by=found.found_by,
        extra={CAUSE: str(cause)},  # the cause a job's life compares attempts by (logsage.life)
    )


def _has_text(path: Path) -> bool:
    """Whether the file has anything but whitespace (an empty log is NO LOGS, like upstream's)."""
    with open(path, "rb") as f:
        while block := f.read(1 << 16):
            if block.strip():
                return True
    return False


def _ordered_evidence(keys: list[Evidence], rest: list[Evidence]) -> list[Evidence]:
    """The lines behind the decision first, then the rest in log order (capped)."""
    seen = {id(e) for e in keys}
    return keys + sorted((e for e in rest if id(e) not in seen), key=lambda e: e.line)[: MAX_EVIDENCE - len(keys)]


def _unnamed(facts: Facts, rank: int | None) -> bool:
    """Whether the log names no process for this rank: none, or the one process of a log without
    rank prefixes (ranks.single_process)."""
    return rank is None or facts.assumed.get(rank, ("", ""))[1] == ranks.ONE_PROCESS
