"""What a decision finds (an Attribution) and how sure it is: the confidence levels, job-wide
causes that name no rank, and the caps an assumption (a local rank read as global, a log read
as one process) puts on a named rank."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from faultloop.analyze.logsage.facts import Evidence, Facts
from faultloop.analyze.logsage.policy import POLICY
from faultloop.analyze.logsage.timeline import Timeline
from faultloop.contracts.verdicts import ROW

HIGH, MEDIUM, LOW = "high", "medium", "low"


_LEVELS = (LOW, MEDIUM, HIGH)


@dataclass
class Attribution:
    """What the log says happened: the cause (a POLICY key, "" when nothing failed), the ranks at
    fault and the victims, the lines it rests on, why, and how firmly."""

    cause: str
    primary: list[int]
    secondary: list[int]
    keys: list[Evidence]
    reasoning: str
    confidence: str
    confidence_reason: str
    found_by: str = ROW  # which reading found it (contracts.verdicts.READINGS)


def attribution(
    cause: str,
    primary: list[int],
    victims: Iterable[int],
    keys: list[Evidence],
    why: str,
    confidence: str,
    confidence_reason: str,
    found_by: str = ROW,
) -> Attribution:
    """Job-wide causes (POLICY's blames_rank false) name no primary rank: everyone reporting is
    a victim of the job's environment or configuration."""
    if cause and not POLICY[cause].blames_rank and primary:
        victims, primary = set(victims) | set(primary), []
        confidence_reason = f"{cause} is a job-wide cause: the ranks that report it are not at fault"
    return Attribution(
        cause, sorted(primary), sorted(set(victims) - set(primary)), keys, why, confidence, confidence_reason, found_by
    )


def crash_confidence(
    facts: Facts, tl: Timeline, primary: list[int], ranked: dict[int, Evidence], weak: bool
) -> tuple[str, str]:
    if len(primary) > 1:
        return MEDIUM, "several ranks failed on their own at about the same time"
    if weak:
        return MEDIUM, "its failure is known only from a cut-off traceback or an exit status"
    failed_too: set[int] = set(ranked) - set(primary)
    failed_too |= {r for r in tl.weak_at if r is not None and r not in primary}
    if failed_too:
        return MEDIUM, f"rank{'s' if len(failed_too) > 1 else ''} {join_ranks(sorted(failed_too))} failed as well"
    if not (tl.victims - set(primary)):
        return MEDIUM, "only this rank's output is in the log: another rank may have failed first"
    return HIGH, "its own failure came first; the other ranks in the log only show symptoms or were stopped"


def with_confidence_caps(facts: Facts, found: Attribution) -> Attribution:
    """A rank named under an assumption (a local rank read as global, a log read as one
    process, a GPU's index read as the rank) is only as sure as that assumption, which the
    reasoning states."""
    for rank in found.primary:
        if rank in facts.assumed:
            level, reason = facts.assumed[rank]
            if _LEVELS.index(level) < _LEVELS.index(found.confidence):
                found.confidence, found.confidence_reason = level, reason
            if reason not in found.reasoning:
                found.reasoning += f" ({reason})"
    return found


def join_ranks(ranks: Iterable[int]) -> str:
    return ", ".join(map(str, ranks))
