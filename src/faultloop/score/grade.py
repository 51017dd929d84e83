"""Grading one verdict against the injected truth, in code: one small pure function per dimension.

Upstream asks an LLM to grade things code can check exactly (is rank 3 the only primary rank?),
so its grades drift between runs. Here each dimension of `contracts.DIMENSIONS` that reads a
verdict has its grader in `GRADERS`, a function of the truth, the log verdict and the FR verdict.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from faultloop.contracts import (
    DIMENSIONS,
    FR_RANK,
    INVALID,
    SCORED,
    FrVerdict,
    Grade,
    LogVerdict,
    Manifest,
    Reads,
    ScoreRecord,
)
from faultloop.core.cell import Cell
from faultloop.faults import FAULTS, expected_restart
from faultloop.score import life

# The note of an FR row whose analyzer had dumps but refused every one; the report lists them.
REFUSED_NOTE = "No FR dump readable:"


@dataclass(frozen=True)
class Truth:
    """What was injected, plus the cluster shape needed to map a rank to its node and segment."""

    cell: Cell
    gpus_per_node: int = 4
    segment_size: int = 32

    @property
    def node(self) -> int:
        return self.cell.rank // self.gpus_per_node

    @property
    def segment(self) -> range:
        start = (self.cell.rank // self.segment_size) * self.segment_size
        return range(start, start + self.segment_size)


Grader = Callable[[Truth, LogVerdict | None, FrVerdict | None], Grade]


def grade_rank_primary(rank: int, primaries: list[int]) -> Grade:
    """true: the injected rank is the only primary; partial: one of several; false: not primary."""
    if rank not in primaries:
        return Grade.FALSE
    return Grade.TRUE if set(primaries) == {rank} else Grade.PARTIAL


def grade_fault_described(type_correct: bool, category_correct: bool) -> Grade:
    return Grade.TRUE if type_correct else Grade.PARTIAL if category_correct else Grade.FALSE


def grade_fr(truth: Truth, fr: FrVerdict | None) -> Grade:
    """rank / node / segment: the tightest block holding every FR suspect and the injected rank."""
    if fr is None or fr.no_dumps:
        return Grade.NO_DUMPS
    suspects = set(fr.suspect_ranks)
    if not suspects:
        return Grade.FALSE
    if suspects == {truth.cell.rank}:
        return Grade.RANK
    if all(s // truth.gpus_per_node == truth.node for s in suspects):
        return Grade.NODE
    if all(s in truth.segment for s in suspects):
        return Grade.SEGMENT
    return Grade.FALSE


def _category_named(truth: Truth, log: LogVerdict | None) -> bool:
    fault = FAULTS.get(truth.cell.fault_type)
    return fault is not None and log is not None and log.fault_category == fault.category


def _type_named(truth: Truth, log: LogVerdict | None) -> bool:
    fault = FAULTS.get(truth.cell.fault_type)
    return fault is not None and log is not None and log.fault_type == fault.name


def _named(truth: Truth, log: LogVerdict | None) -> bool:
    return log is not None and truth.cell.rank in (*log.primary_ranks, *log.secondary_ranks)


# Per dimension that reads a verdict: its grade of a log analyzer's verdict (with the primary FR
# analyzer's), a missing verdict graded as one that names nothing. An FR verdict that is missing
# altogether is a miss; one that found no dumps says so.
GRADERS: dict[str, Grader] = {
    "restart_correct": lambda t, log, fr: Grade.of((log.restart if log else "") == expected_restart(t.cell.fault_type)),
    "rank_primary": lambda t, log, fr: grade_rank_primary(t.cell.rank, log.primary_ranks if log else []),
    "rank_any": lambda t, log, fr: Grade.of(_named(t, log)),
    "fault_category_correct": lambda t, log, fr: Grade.of(_category_named(t, log)),
    "fault_type_correct": lambda t, log, fr: Grade.of(_type_named(t, log)),
    "fault_described": lambda t, log, fr: grade_fault_described(_type_named(t, log), _category_named(t, log)),
    FR_RANK: lambda t, log, fr: grade_fr(t, fr) if fr is not None else Grade.FALSE,
}


def restart_policy(log: LogVerdict) -> str:
    """The restart policy a verdict names of its own (its `policy`, e.g. NVRx's retry budget:
    analyze.nvrx.outputs), as `<version> <rule> (<basis>)`; empty where it names none."""
    policy = log.extra.get("policy")
    if not isinstance(policy, Mapping):
        return ""
    named = " ".join(str(policy.get(k) or "") for k in ("policy_version", "rule")).strip()
    return f"{named} ({policy.get('decision_basis') or 'no basis'})"


def _notes(truth: Truth, s: ScoreRecord, log: LogVerdict | None, problems: list[str]) -> str:
    """One sentence naming the gaps in order of importance, or confirming success."""
    fault = FAULTS.get(truth.cell.fault_type)
    rank = truth.cell.rank
    gaps: list[str] = list(problems)
    if s.grade("restart_correct") == Grade.FALSE:
        gaps.append(f"restart {s.analyzer_restart or 'missing'} but expected {s.expected_restart}")
    if s.grade("rank_primary") == Grade.PARTIAL:
        gaps.append(f"rank {rank} is one of {len(s.primary_ranks)} primary ranks {s.primary_ranks}")
    elif s.grade("rank_any") == Grade.TRUE and s.grade("rank_primary") == Grade.FALSE:
        gaps.append(f"rank {rank} named only as secondary (primary {s.primary_ranks})")
    elif s.grade("rank_any") == Grade.FALSE:
        gaps.append(f"rank {rank} not named at all (primary {s.primary_ranks})")
    if s.grade("fault_described") != Grade.TRUE and fault is not None:
        said = f"{(log.fault_category if log else None) or 'nothing'}/{(log.fault_type if log else None) or 'no type'}"
        gaps.append(f"described as {said}, injected {fault.category}/{fault.name}")
    fr_grade = s.grade(FR_RANK)
    if fr_grade == Grade.NO_DUMPS:
        gaps.append("no FR dumps")
    elif fr_grade != Grade.RANK and "no fr.json" not in problems:
        gaps.append(f"FR {fr_grade} (suspects {s.fr_suspects})")
    if not gaps:
        return "Correct on all dimensions."
    sentence = "; ".join(gaps)
    return sentence[0].upper() + sentence[1:] + "."


def _base(truth: Truth, job: Manifest | None) -> ScoreRecord:
    """The cell's facts, run validity, and N/A everywhere until a verdict is graded."""
    cell = truth.cell
    base = ScoreRecord(
        cell,
        "",
        status=INVALID,
        workload=job.workload if job else cell.workload,
        launcher=(job.launcher or "") if job else cell.launcher,
        job_id=job.job_id if job else "",
        state=job.state if job else "",
        grades={"run_valid": Grade.FALSE},
        expected_restart=expected_restart(cell.fault_type),
        gpus_per_node=truth.gpus_per_node,
        segment_size=truth.segment_size,
        fault_to_end_s=round(job.seconds_to_end, 3) if job and job.seconds_to_end is not None else None,
    )
    if job is None:
        base.invalid_reason = "no job.json (the job never ran)"
    elif not job.run_valid:
        base.invalid_reason = job.invalid_reason or "the fault never fired"
    if base.invalid_reason is not None:
        base.judge_notes = f"run_invalid: {base.invalid_reason}"
    else:
        base.grades["run_valid"], base.status = Grade.TRUE, SCORED
    return base


def _grade(record: ScoreRecord, truth: Truth, log: LogVerdict | None, fr: FrVerdict | None, reads: set[Reads]) -> None:
    for dimension in DIMENSIONS:
        if dimension.reads in reads:
            record.grades[dimension.name] = GRADERS[dimension.name](truth, log, fr)


def score_cell(
    truth: Truth,
    job: Manifest | None,
    log: LogVerdict | None,
    fr: FrVerdict | None,
    *,
    failure: str | None = None,
) -> ScoreRecord:
    """Grade one log analyzer's verdict on a cell in code from run_job's manifest, the verdict and
    the primary FR analyzer's verdict (any may be absent; failure: why the analyzer gave none)."""
    base = _base(truth, job)
    base.analyzer_version = log.analyzer_version if log else ""
    decision, refused = life.checked_decision(log, job)
    base.decision = str(decision)
    if not base.scored:
        return base
    problems: list[str] = [refused] if refused else []
    if failure:
        base.analyzer_error = failure
        problems.append(f"analyzer failed: {failure}")
    elif log is None:
        problems.append("no verdict.json")
    if fr is None:
        problems.append("no fr.json")
    if log is not None:
        base.analyzer_restart = log.restart
        base.primary_ranks, base.secondary_ranks = list(log.primary_ranks), list(log.secondary_ranks)
        base.restart_policy = restart_policy(log)
        base.found_by = log.found_by
    base.fr_suspects = sorted(set(fr.suspect_ranks)) if fr else []
    _grade(base, truth, log, fr, {Reads.LOG, Reads.FR})
    base.judge_notes = _notes(truth, base, log, problems)
    return base


def score_fr(truth: Truth, job: Manifest | None, fr: FrVerdict | None, *, failure: str | None = None) -> ScoreRecord:
    """Grade one flight-recorder analyzer's verdict: only the dimensions that read it apply."""
    base = _base(truth, job)
    if not base.scored:
        return base
    base.fr_suspects = sorted(set(fr.suspect_ranks)) if fr else []
    _grade(base, truth, None, fr, {Reads.FR})
    fr_grade = base.grade(FR_RANK)
    if failure:
        base.analyzer_error = failure
        base.judge_notes = f"FR analyzer failed: {failure}."
    elif fr_grade == Grade.RANK:
        base.judge_notes = "FR names exactly the injected rank."
    elif fr_grade == Grade.NO_DUMPS and fr is not None and fr.skipped_files:
        first = fr.skipped_files[0]
        why = first.error.replace(first.file, os.path.basename(first.file), 1)
        base.judge_notes = f"{REFUSED_NOTE} {len(fr.skipped_files)} refused ({why})."
    elif fr_grade == Grade.NO_DUMPS:
        base.judge_notes = "No FR dumps."
    else:
        base.judge_notes = f"FR {fr_grade} (suspects {base.fr_suspects})."
    return base
