"""Scoring a job's life: each analyzer's decision for the next attempt, at every attempt, against
the oracle of the fault's recurrence, the node it drains, and what its policy costs in node-minutes.

The oracle (the fault's row, `faults.Fault.on_restart`) at an attempt that failed by its fault:
a fault that passes -> restart; one that recurs at the same step -> stop; one that recurs on the
same node until it is drained -> restart without that node (the run's `fault_node`). An attempt
that completed asks for no decision; one that failed without its fault firing is not graded.

A verdict is read as a decision (`read_decision`): drain_nodes non-empty -> restart without those
nodes (whatever `restart` says: a STOP for a GPU error means "not on this hardware"); else its
`next_attempt` where it states one, else its `restart`: RESTART -> restart, STOP -> stop; anything
else (no verdict, ERRORS NOT FOUND, NO LOGS) -> none, which a scheduler cannot act on.

- policy_correct: right at every graded attempt: stop where the oracle stops; a restart where the
  fault passes (with or without a drain: a needless drain is drain_correct's miss); a restart
  without the fault's node where the fault is the node's.
- drain_correct: at every graded attempt, the nodes drained are exactly the oracle's (the fault's
  node when it is the node's, none otherwise).
- the policy's cost, in node-minutes (an attempt's nodes x its measured minutes, from its job.json's
  start and end times), along the analyzer's own path (it ends at its first stop): a restart that
  fails again costs the attempt that fails (the next attempt as measured; where none was run, as
  the failing attempt itself measured, an estimate); a stop the oracle would not make costs the
  attempt the job still needed (the next attempt as measured, else the same estimate), left
  undone until someone restarts the job. A restart that keeps the fault's node costs one failing
  attempt (estimated: the life ran without that node) and ends the path (what would follow was
  not run). The oracle's own cost is zero by this measure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from faultloop.contracts import Grade, LifeStep, LogVerdict, Manifest, RecordError
from faultloop.faults import FAULTS, RESTART, STOP, Recurrence

FAILED_STATES = ("FAILED", "TIMEOUT")  # a job that failed: its next attempt is a decision
STOP_NOT_NEEDED, FAILED_AGAIN = "stop not needed", "restart that failed again"  # what a step's cost is


class Call(StrEnum):
    """A decision for the next attempt, as the policy scorer reads it."""

    RESTART = "restart"
    RESTART_WITHOUT = "restart without"
    STOP = "stop"
    NONE = "none"


@dataclass(frozen=True)
class Decision:
    call: Call
    drain: tuple[str, ...] = ()

    @property
    def restarts(self) -> bool:
        return self.call in (Call.RESTART, Call.RESTART_WITHOUT)

    def __str__(self) -> str:
        return f"{self.call} {' '.join(self.drain)}" if self.drain else str(self.call)

    @classmethod
    def parse(cls, text: str) -> Decision:
        """The decision a record stored (its str)."""
        text = text.strip()
        if text.startswith(Call.RESTART_WITHOUT):
            return cls(Call.RESTART_WITHOUT, tuple(text[len(Call.RESTART_WITHOUT) :].split()))
        return cls(Call(text)) if text in Call.__members__.values() else cls(Call.NONE)


def allocation(job: Manifest | None) -> tuple[str, ...]:
    """A run's nodes by index, where its job.json names every one (else none: no check)."""
    return tuple(job.node_names) if job is not None and len(job.node_names) == job.nodes else ()


def read_decision(verdict: LogVerdict | None, nodes: Sequence[str]) -> Decision:
    """A verdict as a decision for the next attempt (the module's reading). nodes: the run's
    allocation, which the drained nodes are named by (RecordError for a node it does not have)."""
    if verdict is None:
        return Decision(Call.NONE)
    drained = verdict.drained(nodes) if nodes else [str(n) for n in verdict.drain_nodes]
    if drained:
        return Decision(Call.RESTART_WITHOUT, tuple(drained))
    said = verdict.next_attempt or verdict.restart
    return Decision(Call.RESTART if said == RESTART else Call.STOP if said == STOP else Call.NONE)


def oracle(job: Manifest) -> Decision | None:
    """The decision the truth expects after this attempt; None where none is graded."""
    fault = FAULTS.get(job.fault_type)
    if fault is None or job.state not in FAILED_STATES or not job.fault_fired:
        return None
    if fault.on_restart == Recurrence.PASSES:
        return Decision(Call.RESTART)
    if fault.on_restart == Recurrence.SAME_STEP:
        return Decision(Call.STOP)
    return Decision(Call.RESTART_WITHOUT, (job.fault_node,)) if job.fault_node else None


def happened(job: Manifest) -> str:
    """What an attempt did, for people: where it resumed, without which nodes, how it ended."""
    parts = [f"resumed at iteration {job.resumed_from_iter}"] if job.resumed_from_iter is not None else []
    if job.drained_nodes:
        parts.append(f"without {', '.join(job.drained_nodes)}")
    if job.fault_fired:
        where = f" on {job.fault_node}" if job.fault_node else ""
        step = f" at iteration {job.fault_fired_iter}" if job.fault_fired_iter is not None else ""
        parts.append(f"{job.fault_type} fired{where}{step}")
    elif job.attempt > 1 and job.state == "COMPLETED":
        parts.append("the fault did not come back")
    parts.append(job.state)
    return ", ".join(parts)


def node_minutes(job: Manifest) -> float | None:
    """The attempt's nodes x its measured minutes; None where its times are not recorded."""
    if job.start_time is None or job.end_time is None:
        return None
    return job.nodes * max(0.0, job.end_time - job.start_time) / 60.0


def policy_ok(decision: Decision, expected: Decision) -> bool:
    if expected.call == Call.STOP:
        return decision.call == Call.STOP
    if expected.call == Call.RESTART:
        return decision.restarts
    return decision.call == Call.RESTART_WITHOUT and set(expected.drain) <= set(decision.drain)


@dataclass(frozen=True)
class LifeGrade:
    """An analyzer's life on a cell: its steps, both grades and its policy's cost."""

    steps: list[LifeStep]
    policy: Grade
    drain: Grade
    cost_node_min: float | None
    estimated: bool


def _cost(jobs: Sequence[Manifest], k: int) -> tuple[float | None, bool]:
    """What the attempt after attempt k (0-based index) costs: measured where it ran, else attempt
    k's own measure (an estimate)."""
    if k + 1 < len(jobs):
        return node_minutes(jobs[k + 1]), False
    return node_minutes(jobs[k]), True


def grade_life(jobs: Sequence[Manifest], decisions: Sequence[Decision | None]) -> LifeGrade:
    """Grade an analyzer's decisions (None: not read) at the attempts that ran, in order (NOT_NEEDED
    runs left out), against the oracle; its cost along its own path (the module's rules)."""
    steps: list[LifeStep] = []
    cost: float | None = 0.0
    estimated, on_path = False, True
    for k, (job, decision) in enumerate(zip(jobs, decisions, strict=True)):
        expected = oracle(job)
        if expected is None or decision is None:
            said = str(decision) if decision is not None else "-"
            steps.append(LifeStep(job.attempt, job.state, happened(job), str(expected or "-"), said))
            on_path = on_path and job.state in FAILED_STATES and decision is not None and decision.restarts
            continue
        right = policy_ok(decision, expected)
        kind, guess = "", False
        spent: float | None = 0.0
        if on_path and not decision.restarts and expected.restarts:
            kind, (spent, guess) = STOP_NOT_NEEDED, _cost(jobs, k)
        elif on_path and decision.restarts and not right:
            kind = FAILED_AGAIN
            spent, guess = _cost(jobs, k) if expected.call == Call.STOP else (node_minutes(job), True)
        step_cost = None if spent is None else round(spent, 3)
        drain = Grade.of(set(decision.drain) == set(expected.drain))
        steps.append(
            LifeStep(
                job.attempt,
                job.state,
                happened(job),
                str(expected),
                str(decision),
                Grade.of(right),
                drain,
                step_cost,
                kind,
                guess,
            )
        )
        if kind:
            cost = None if cost is None or step_cost is None else cost + step_cost
            estimated |= guess
        # its path ends at a stop, and where a restart keeps the fault's node (what follows was not run)
        on_path = on_path and decision.restarts and (right or expected.call != Call.RESTART_WITHOUT)
    graded = [s for s in steps if s.policy != Grade.NA]
    if not graded:
        return LifeGrade(steps, Grade.NA, Grade.NA, None, False)
    return LifeGrade(
        steps,
        Grade.of(all(s.policy == Grade.TRUE for s in graded)),
        Grade.of(all(s.drain == Grade.TRUE for s in graded)),
        None if cost is None else round(cost, 3),
        estimated,
    )


def decision_of(stored: str) -> Decision | None:
    """A run record's stored decision; None where it was not read (a record before lives)."""
    return Decision.parse(stored) if stored else None


def checked_decision(verdict: LogVerdict | None, job: Manifest | None) -> tuple[Decision, str]:
    """A run's decision and, where its verdict names a node the run does not have, why it reads as
    none."""
    try:
        return read_decision(verdict, allocation(job)), ""
    except RecordError as exc:
        return Decision(Call.NONE), str(exc)
