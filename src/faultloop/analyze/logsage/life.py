"""logsage over a job's life: the decision for the next attempt, from this attempt's log and the
job's earlier attempts (their logs, and the attempts one log holds: attempts.py), and the node to
leave out of it. The file to patch for a wrong decision over attempts, as policy.py is for one log.

How an attempt is compared with the ones before it (`decide`):
- the same root (logsage's cause) at the same place (the same last completed step; where no step
  shows, the same culprit ranks) without progress in between recurs: STOP;
- a failure of a node-bound cause (NODE_BOUND) names its node: RESTART without that node; the same
  failure at the same step on another node after that follows the job, not a node: STOP;
- the first occurrence of a failure the log does not explain (UNEXPLAINED): RESTART, to see
  whether it recurs;
- a failure after progress is a new attempt's: it is judged as a first occurrence;
- anything else: the cause's own decision (POLICY).
The verdict keeps its one-log `restart` (upstream's question, policy.py) and gains `next_attempt`
and `drain_nodes` (contracts.LogVerdict); a log whose own restarts show the same failure at the
same step in each is STOP on its own (`restart` too).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from faultloop.analyze.logsage import attempts
from faultloop.analyze.logsage.engine import CAUSE, Settings, analyze_log
from faultloop.analyze.logsage.policy import POLICY
from faultloop.analyze.logsage.vocab import Cause
from faultloop.contracts import LIFE_RECORD, RANK_HOSTS, LogVerdict
from faultloop.faults import NONE, RESTART, STOP

# Causes that stay with the node they struck, and why; the next attempt leaves that node out.
NODE_BOUND: dict[str, str] = {
    Cause.GPU_ERROR: "a GPU error stays with its device: restart without the node that holds it",
    Cause.GPU_SLEEP: "a GPU that hung stays suspect until its node is checked: restart without that node",
    Cause.HOST_OOM: "the kernel's OOM killer acted on its node's memory: restart without that node (if the "
    "same step runs out of memory on another node, it is the job's own use: stop then)",
    Cause.NODE_FAIL: "the node failed: restart on the others",
    Cause.NODE_LOST: "the node was declared dead: restart on the others",
}
# Causes whose log does not say why, and why a restart is the way to find out; a recurrence stops.
UNEXPLAINED: dict[str, str] = {
    Cause.SIGKILL: "killed without a word: an external kill passes and the job's own memory use does not, and "
    "nothing in the log tells which: restart once and see whether it comes back",
    Cause.CRASH: "a process died without a word: restart once and see whether it comes back",
    Cause.PROGRAM_ERROR: "an error the log does not explain: restart once and see whether it comes back",
}
MAX_HOSTS = 4096  # the most ranks whose host the life record keeps
FIRST, RECURS, FOLLOWS_JOB, NODE, UNEXPLAINED_FIRST, OWN, NOTHING = (
    "first_occurrence", "recurs", "follows_the_job", "node_bound", "unexplained_first", "own", "no_failure",
)  # fmt: skip


@dataclass(frozen=True)
class AttemptView:
    """What one attempt of the job shows: where it is read from, its cause ("" when it did not
    fail), its culprit ranks and their hosts (for a node-bound cause), its last completed step."""

    where: str
    cause: str
    ranks: tuple[int, ...]
    hosts: tuple[str, ...]
    last_step: int | None
    restart: str  # the attempt's own one-log decision
    rank_hosts: dict[int, str] = field(default_factory=dict, compare=False)  # read for node-bound causes

    @property
    def failed(self) -> bool:
        return bool(self.cause)

    def summary(self) -> dict[str, Any]:
        return {
            "where": self.where,
            "cause": self.cause or None,
            "ranks": list(self.ranks),
            "hosts": list(self.hosts),
            "last_step": self.last_step,
        }


@dataclass(frozen=True)
class LifeCall:
    """The decision for the next attempt: RESTART or STOP ("" when nothing failed), the hosts to
    leave out, which rule decided, why, and how many earlier attempts the failure repeats."""

    decision: str
    drain: tuple[str, ...]
    rule: str
    why: str
    repeats: int = 0


def _same_place(a: AttemptView, b: AttemptView) -> bool:
    if a.last_step is not None and b.last_step is not None:
        return a.last_step == b.last_step
    return a.last_step is None and b.last_step is None and a.ranks == b.ranks


def repeats(current: AttemptView, earlier: Sequence[AttemptView]) -> list[AttemptView]:
    """The earlier attempts the current failure repeats: newest first, the same cause at the same
    place, back to the first that differs (a progress or another failure ends the streak)."""
    out = []
    for before in reversed(earlier):
        if not (before.failed and before.cause == current.cause and _same_place(current, before)):
            break
        out.append(before)
    return out


def decide(current: AttemptView, earlier: Sequence[AttemptView]) -> LifeCall:
    """The next attempt's decision over the job's life (the module's rules, in order)."""
    if not current.failed:
        return LifeCall("", (), NOTHING, "the attempt did not fail: nothing to decide")
    streak = repeats(current, earlier)
    node_bound = current.cause in NODE_BOUND
    if streak:
        n, before = len(streak), streak[0]
        again = f"the same failure ({current.cause}) at the same place as {n} attempt{'s' if n > 1 else ''} before"
        if node_bound and current.hosts and before.hosts and not set(current.hosts) & set(before.hosts):
            return LifeCall(STOP, (), FOLLOWS_JOB, f"{again}, now on another node: it follows the job", n)
        if node_bound and current.hosts:
            return LifeCall(RESTART, current.hosts, NODE, f"{again}, on the same node: it was not left out", n)
        return LifeCall(STOP, (), RECURS, f"{again}, without progress: a restart meets it again", n)
    if node_bound and current.hosts:
        return LifeCall(RESTART, current.hosts, NODE, NODE_BOUND[current.cause])
    if current.cause in UNEXPLAINED:
        return LifeCall(RESTART, (), UNEXPLAINED_FIRST, UNEXPLAINED[current.cause])
    rule = FIRST if earlier else OWN
    return LifeCall(current.restart, (), rule, f"the cause's own decision: {POLICY[Cause(current.cause)].why}")


# -- reading attempts from logs --------------------------------------------------------------------


@contextmanager
def _segment_file(path: Path, segment: attempts.Segment) -> Iterator[Path]:
    """One attempt's part of a log as a file of its own (the analyzer reads whole files)."""
    with tempfile.TemporaryDirectory(prefix="logsage-attempt-") as tmp:
        out = Path(tmp) / "attempt.log"
        with open(path, "rb") as src, open(out, "wb") as dst:
            src.seek(segment.start)
            left = segment.end - segment.start
            while left > 0 and (block := src.read(min(left, 1 << 20))):
                dst.write(block)
                left -= len(block)
        yield out


def view(path: Path, segment: attempts.Segment, verdict: LogVerdict, where: str, prefilter: str) -> AttemptView:
    """An attempt's view from its verdict and its part of the log (its ranks' hosts where its
    cause is node-bound)."""
    cause = str(verdict.extra.get(CAUSE) or "") if verdict.restart in (RESTART, STOP) else ""
    if cause in POLICY and POLICY[Cause(cause)].category == NONE:
        cause = ""  # the job finished: nothing failed
    known = attempts.rank_hosts(path, segment, prefilter) if cause in NODE_BOUND else {}
    ranks = tuple(sorted(verdict.primary_ranks))
    hosts = tuple(sorted({known[r] for r in ranks if r in known}))
    return AttemptView(where, cause, ranks, hosts, attempts.last_step(path, segment), verdict.restart, known)


def views(path: Path, settings: Settings, where: str, whole: LogVerdict | None = None) -> list[AttemptView]:
    """Every attempt a log holds, in order (whole: the log's verdict, when already read); none of
    a log that is not there."""
    if not path.is_file():
        return []
    parts = attempts.segments(path, settings.prefilter)
    if len(parts) == 1:
        verdict = whole if whole is not None else analyze_log(path, settings)
        return [view(path, parts[0], verdict, where, settings.prefilter)]
    out = []
    for part in parts:
        with _segment_file(path, part) as one:
            alone = attempts.Segment(0, part.end - part.start, 1, part.attempt)
            named = f"{where}, attempt {part.attempt} (from line {part.first_line})"
            out.append(view(one, alone, analyze_log(one, settings), named, settings.prefilter))
    return out


def analyze_life(
    path: str | os.PathLike[str], earlier: Sequence[Path] = (), settings: Settings | None = None
) -> LogVerdict:
    """logsage's verdict on a log (analyze_log), with the decision for the job's next attempt over
    the earlier attempts' logs (oldest first) and the attempts the log itself holds."""
    settings = settings or Settings()
    path = Path(path)
    verdict = analyze_log(path, settings)
    if not path.is_file():
        return verdict
    before = [v for i, log in enumerate(earlier, start=1) for v in views(log, settings, f"attempt {i}'s log")]
    own = views(path, settings, "this log", verdict)
    last = max((i for i, v in enumerate(own) if v.failed), default=len(own) - 1)  # the latest failure
    current, in_log = own[last], own[:last]
    restart, note = verdict.restart, ""
    own_call = decide(current, in_log)
    if own_call.rule == RECURS and restart != STOP:
        restart, note = STOP, f" This log's own restarts show {own_call.why}: stop."
    call = decide(current, [*before, *in_log])
    life = {
        "decision": call.decision,
        "drain": list(call.drain),
        "rule": call.rule,
        "why": call.why,
        "repeats": call.repeats,
        "attempts": [v.summary() for v in [*before, *own]],
        # where the ranks of a node-bound failure ran: the combined verdict drains another rank's node by it
        RANK_HOSTS: {str(rank): host for rank, host in sorted(current.rank_hosts.items())[:MAX_HOSTS]},
    }
    said = f" Next attempt: {call.decision or 'none'}" + (f" without {', '.join(call.drain)}" if call.drain else "")
    return replace(
        verdict,
        restart=restart,
        explanation=verdict.explanation + note,
        detail=f"{verdict.detail}; over the job's life ({len(before) + len(own)} attempt(s)):{said} ({call.why})",
        next_attempt=call.decision,
        drain_nodes=list(call.drain),
        extra={**verdict.extra, LIFE_RECORD: life},
    )
