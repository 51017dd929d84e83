"""The readings under the tables, taken where the rows and shapes found nothing (engine.py): a log
of programs no row knows still says what happened to an operator who has never met them.

In order: the generic reading (generic.py: a failure statement by its severity and its words, an
exit status or a signal in any wording), then where the log stops (temporal.py: retries that never
succeeded, a stall report, threads waiting). The rank each names is its line's, else the rank that
differs from the others (spatial.py). Every finding here is inferred: low confidence, or medium
where a spatial profile singles a rank out, and the reason says which reading found it.
"""

from __future__ import annotations

from pathlib import Path

from faultloop.analyze.logsage import generic, healthy, reading, spatial, temporal
from faultloop.analyze.logsage.confidence import LOW, MEDIUM, Attribution, attribution
from faultloop.analyze.logsage.facts import NEVER, Evidence, Facts
from faultloop.analyze.logsage.generic import Statement
from faultloop.analyze.logsage.policy import POLICY
from faultloop.analyze.logsage.ranks import resolve_rank
from faultloop.analyze.logsage.temporal import Ending, TailLine
from faultloop.analyze.logsage.vocab import DEATH, REPORTED, Cause
from faultloop.contracts.verdicts import GENERIC, TEMPORAL

MAX_STATEMENTS = 256  # statements kept from the tail (the first ones: where the failure began)
_SEVERITY_ORDER = (generic.FATAL, generic.ENDED, generic.ERROR)


def read_under(path: Path, facts: Facts) -> Attribution | None:
    """The first reading under the tables that finds a failure, None where none does."""
    lines = temporal.tail(path)
    said = statements(lines)
    if said:
        return _generic(facts, lines, said)
    if (end := temporal.ending(lines)) is not None:
        return _ending(facts, lines, end)
    return None


def statements(lines: list[TailLine]) -> list[tuple[TailLine, Statement]]:
    """The failure statements among the lines (generic.statement) that no row or shape reads (a
    known template, failure or not, is the rows' to judge: the rows found nothing here) and that a
    healthy run does not print too (healthy.printed), the first MAX_STATEMENTS. A severity stamped
    on every line (generic.stamped) says nothing: then only exit statuses and signals count."""
    out = []
    by_severity = not generic.stamped([(t.raw, t.words) for t in lines])
    for t in lines:
        said = generic.statement(t.raw, t.words, by_severity)
        if said is not None and not healthy.printed(t.words) and reading.read(t.raw).found is None:
            out.append((t, said))
            if len(out) >= MAX_STATEMENTS:
                break
    return out


def _generic(facts: Facts, lines: list[TailLine], said: list[tuple[TailLine, Statement]]) -> Attribution:
    """The failure the first statement of a named category states (an operator's first look: the
    earliest line that says what kind of failure), else the first of the strongest severity."""
    specific = [(t, s) for t, s in said if s.category != generic.PROGRAM]
    t, s = (specific or sorted(said, key=lambda ts: _SEVERITY_ORDER.index(ts[1].severity)))[0]
    cause = _in_stage(s.cause, facts, lines, t.line)
    rank = resolve_rank(facts, t.source, t.words)
    ranks = [r for tl, _ in said if (r := resolve_rank(facts, tl.source, tl.words)) is not None]
    printing = spatial.printing_ranks(facts, lines)
    level, reason = (
        LOW,
        (
            "logsage's generic reading: no row knows this wording; the line states a failure by "
            + (
                f"its {s.severity} severity and the word {s.failed!r}"
                if s.severity != generic.ENDED
                else f"{s.failed!r}"
            )
            + f" ({s.category})"
        ),
    )
    if rank is not None and spatial.only_one(ranks, printing) == rank:
        level, reason = MEDIUM, reason + f"; rank {rank} is the only rank that states a failure"
    kind = DEATH if s.severity == generic.ENDED else REPORTED
    key = Evidence(t.line, t.words.strip(), kind, rank, f"generic_{s.category.replace(' ', '_')}", cause)
    why = f"a failure statement no row knows ({s.category}, line {t.line}): {t.words.strip()[:160]}"
    others = set(ranks) - {rank} if rank is not None else set(ranks)
    return attribution(cause, [rank] if rank is not None else [], others, [key], why, level, reason, GENERIC)


def _in_stage(cause: str, facts: Facts, lines: list[TailLine], line: int) -> str:
    """A network failure before any training progress is setup's (an endpoint that could not be
    reached while the job set up is unreachable on the next attempt too: NCCL_SETUP's STOP)."""
    if cause == Cause.NETWORK and facts.progress_line == NEVER and temporal.stage(lines, line) == temporal.INIT:
        return Cause.NCCL_SETUP
    return cause


def _ending(facts: Facts, lines: list[TailLine], end: Ending) -> Attribution:
    """A hang where the log stops: retried connections that never came up, a stall, threads waiting."""
    stage = temporal.stage(lines, end.lines[0].line)
    in_setup = stage == temporal.INIT and facts.progress_line == NEVER
    if end.how == "retries" and end.network:
        cause = Cause.NCCL_SETUP if in_setup else Cause.NETWORK
    else:
        cause = Cause.SETUP_HANG if in_setup else Cause.HANG
    steps = temporal.progress(facts, lines)
    world = max(facts.world_size, len(spatial.printing_ranks(facts, lines)))
    culprit: tuple[int, str] | None = None
    if (missing := spatial.missing_from_list(lines, world)) is not None:
        culprit = (
            missing[0],
            f"rank {missing[0]} is the one rank a list of the others leaves out (line {missing[1].line})",
        )
    elif (late := spatial.behind(steps)) is not None:
        culprit = late, f"rank {late} stopped at an earlier step ({steps[late]}) than every other rank"
    elif (quiet := spatial.silent(facts, lines)) is not None:
        culprit = quiet, f"rank {quiet} is the only rank silent at the end while the others still print"
    elif (warned := spatial.only_warning(facts, lines)) is not None:
        culprit = warned, f"rank {warned} is the only rank that warns"
    if not POLICY[cause].blames_rank:
        culprit = None
    keys = [
        Evidence(t.line, t.words.strip(), REPORTED, resolve_rank(facts, t.source, t.words), f"ending_{end.how}", cause)
        for t in end.lines
    ]
    what = {"retries": "retries that never succeeded", "stall": "a stall report", "waiting": "threads waiting"}[end.how]
    why = f"the log ends in {what} (line {end.lines[0].line}, stage {stage}): {end.lines[0].words.strip()[:160]}"
    reason = f"logsage's temporal reading: where the log stops ({what}, stage {stage})"
    if culprit:
        why += f"; {culprit[1]}"
        reason += f"; {culprit[1]} (spatial, inferred)"
    victims = {k.rank for k in keys if k.rank is not None}
    return attribution(cause, [culprit[0]] if culprit else [], victims, keys, why, LOW, reason, TEMPORAL)
