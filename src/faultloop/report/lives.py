"""The report's sections on a job's life: each analyzer's restart policy over the attempts of every
cell (policy_correct, drain_correct, the policy's cost in node-minutes against the oracle), and a
job's-life table per cell: each attempt, what happened, the decision the truth expects, each
analyzer's decision, and who called for the next attempt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from faultloop.contracts import DIMENSIONS, Grade, LifeStep, Reads, ScoreRecord
from faultloop.report.document import Section, Table
from faultloop.report.model import Report, dim_pass, rate

LIFE_DIMENSIONS = DIMENSIONS.names(reads=(Reads.LIFE,))
TRUTH = "truth"  # who calls for an attempt: the oracle's decision, beside the analyzers'
RIGHT, WRONG = "✓", "✗"


@dataclass(frozen=True)
class PolicyCost:
    """An analyzer's policy cost over the cells it was graded on: the total, and its two kinds."""

    total: float | None
    failed_again: tuple[int, float]  # restarts that failed again: how many, node-minutes
    not_needed: tuple[int, float]  # stops that were not needed
    estimated: bool
    unmeasured: int  # cells whose cost is unknown (their times are not recorded)


def policy_cost(rows: Sequence[ScoreRecord]) -> PolicyCost:
    graded = [r for r in rows if r.scored and r.grade("policy_correct") != Grade.NA]
    steps = [s for r in graded for s in r.life if s.cost_kind and s.cost_node_min is not None]
    measured = [r.policy_cost_node_min for r in graded if r.policy_cost_node_min is not None]

    def kind(name: str) -> tuple[int, float]:
        chosen = [s.cost_node_min or 0.0 for s in steps if s.cost_kind == name]
        return len(chosen), round(sum(chosen), 3)

    return PolicyCost(
        round(sum(measured), 3) if graded else None,
        kind("restart that failed again"),
        kind("stop not needed"),
        any(r.policy_cost_estimated for r in graded),
        len(graded) - len(measured),
    )


def minutes(value: float | None, estimated: bool = False) -> str:
    return "-" if value is None else f"{'~' if estimated else ''}{value:.2f}"


def policy_table(rep: Report) -> tuple[list[str], list[list[str]]]:
    """Per log analyzer: its life grades' pass rates and its policy's cost (node-minutes)."""
    header = ["analyzer", *LIFE_DIMENSIONS, "policy cost (node-min)", "restarts that failed again", "stops not needed"]
    rows = []
    for view in rep.views:
        graded = [r for r in view.rows if r.grade("policy_correct") != Grade.NA]
        cost = policy_cost(view.rows)
        rows.append(
            [
                view.name,
                *(str(rate(graded, dim_pass(d))) for d in LIFE_DIMENSIONS),
                minutes(cost.total, cost.estimated) + (f" ({cost.unmeasured} unmeasured)" if cost.unmeasured else ""),
                f"{cost.failed_again[0]} ({minutes(cost.failed_again[1])})",
                f"{cost.not_needed[0]} ({minutes(cost.not_needed[1])})",
            ]
        )
    return header, rows


def mark_class(value: str) -> str:
    """The page's colour of a decision marked right or wrong (a table cell of the life table)."""
    return "fail" if WRONG in value else "pass" if RIGHT in value else ""


def _mark(step: LifeStep) -> str:
    if step.policy == Grade.NA:
        return step.decision
    marks = RIGHT if step.policy == Grade.TRUE else WRONG
    drain = "" if step.drain == Grade.TRUE else f" (drain {WRONG})"
    return f"{step.decision} {marks}{drain}"


def called_for(step_before: dict[str, LifeStep]) -> str:
    """Who called for the attempt after these steps: the truth where its decision restarts, and
    every analyzer whose decision there restarts."""
    return ", ".join(name for name, step in step_before.items() if step.decision.startswith("restart")) or "-"


def life_rows(rep: Report) -> list[list[str]]:
    """The job's-life table: per cell and attempt, what happened, what the truth expects, each
    analyzer's decision (✓/✗ against the truth) and who called for that attempt; per cell, each
    analyzer's policy cost."""
    names = [v.name for v in rep.views]
    index = {v.name: {r.cell.name: r for r in v.rows if r.scored and r.life} for v in rep.views}
    out: list[list[str]] = []
    for first in rep.primary.rows:
        records = {n: index[n].get(first.cell.name) for n in names}
        lives = {n: r.life for n, r in records.items() if r is not None}
        if not lives:
            continue
        steps = max(lives.values(), key=len)
        for k, step in enumerate(steps):
            decided = {n: life[k] for n, life in lives.items() if k < len(life)}
            before = {n: life[k - 1] for n, life in lives.items() if 0 < k <= len(life)}
            if k:
                before = {TRUTH: LifeStep(k, "", "", steps[k - 1].expected, steps[k - 1].expected), **before}
            out.append(
                [
                    first.cell.name if k == 0 else "",
                    str(step.attempt),
                    step.happened,
                    step.expected,
                    *(_mark(decided[n]) if n in decided else "-" for n in names),
                    called_for(before) if k else "-",
                ]
            )
        out.append(
            [
                "",
                "policy cost",
                "node-minutes against the truth's",
                "0",
                *(
                    minutes(r.policy_cost_node_min, r.policy_cost_estimated) if r is not None else "-"
                    for r in records.values()
                ),
                "",
            ]
        )
    return out


def life_header(rep: Report) -> list[str]:
    return ["cell", "attempt", "what happened", "truth expects", *(v.name for v in rep.views), "called for by"]


def life_sections(rep: Report) -> list[Section]:
    """Restart policies over a job's life (report.lives): per analyzer, then per cell and attempt."""
    rows = life_rows(rep)
    if not rows:
        return []
    header, policies = policy_table(rep)
    return [
        Section(
            "A job's life: restart policies",
            [
                "Each analyzer's decision for the next attempt at every attempt that failed by its fault, against "
                "the truth's: restart where the fault passes, stop where it recurs at the same step, restart "
                "without its node where it stays with the node (a drain reads as a restart without those nodes). "
                "`policy_correct`: right at every attempt; `drain_correct`: it drains exactly the truth's nodes. "
                "The policy cost is in node-minutes (an attempt's nodes x its measured minutes), along the "
                "analyzer's own path: a restart that fails again costs the attempt that fails, a stop the truth "
                "would not make costs the attempt the job still needed; `~` marks an estimate, where that attempt "
                'never ran (docs/analyzers.md, "A job\'s life").',
                Table(header, policies),
            ],
        ),
        Section(
            "Each cell's life",
            [
                f"Per attempt: what happened, the decision the truth expects, each analyzer's ({RIGHT} right, "
                f"{WRONG} wrong), and who called for the attempt (the truth's decision and the analyzers "
                "that said restart at the attempt before; every failed attempt is followed by the next while the "
                "cell has attempts left, whatever they said). Then each analyzer's policy cost on the cell.",
                Table(life_header(rep), rows, graded=True),
            ],
            level=3,
        ),
    ]
