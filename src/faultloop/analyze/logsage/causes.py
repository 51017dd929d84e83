"""The cause a failed or stalled rank's own evidence names: its strongest line, what an exception
class or OS error means and when it came (setup or after progress), how a stalled rank could
still print."""

from __future__ import annotations

import re
from signal import Signals

from faultloop.analyze.logsage.context import DEVICE_WAIT_FRAMES
from faultloop.analyze.logsage.exits import SIGNAL_CAUSES
from faultloop.analyze.logsage.facts import Evidence, Facts
from faultloop.analyze.logsage.policy import POLICY
from faultloop.analyze.logsage.ranks import every_rank_dumped
from faultloop.analyze.logsage.records import in_collective
from faultloop.analyze.logsage.rules import (
    DETERMINISTIC,
    ERRNO_RE,
    EXCEPTION_MEANING,
    INFRASTRUCTURE,
    PASSES,
    RECURS,
    TRANSIENT,
    WORKLOAD,
)
from faultloop.analyze.logsage.timeline import named_signal, ranks_with
from faultloop.analyze.logsage.vocab import (
    DEATH,
    EXCEPTION_KIND,
    EXITED,
    FATAL,
    GPU,
    GPU_HARDWARE,
    NETWORK_KIND,
    OOM_KIND,
    SIGNAL,
    STACK_DUMP,
    STALL,
    WEAK_ORIGINS,
    Cause,
)


def crash_cause(facts: Facts, rank: int | None) -> str:
    """The fault a failed rank's own evidence names, strongest evidence first."""
    first = facts.first
    if (GPU, rank) in first or (GPU_HARDWARE, rank) in first:
        return Cause.GPU_ERROR
    if (OOM_KIND, rank) in first:
        return Cause.OOM
    if oom_killed(facts, rank):
        return Cause.HOST_OOM
    if (FATAL, rank) in first:
        return first[(FATAL, rank)].hint or Cause.CRASH
    if (EXCEPTION_KIND, rank) in first:
        return first[(EXCEPTION_KIND, rank)].hint or Cause.WORKLOAD_EXC
    if (NETWORK_KIND, rank) in first:
        return first[(NETWORK_KIND, rank)].hint or Cause.NETWORK
    ex = facts.exits.get(rank) if rank is not None else None
    if (SIGNAL, rank) in first:
        sig = named_signal(first[(SIGNAL, rank)].text)
        return SIGNAL_CAUSES.get(sig or "", Cause.EXTERNAL_SIGNAL)
    if ex and ex.signal in SIGNAL_CAUSES:
        return SIGNAL_CAUSES[ex.signal]
    for kind in (DEATH, *WEAK_ORIGINS):
        if (kind, rank) in first and first[(kind, rank)].hint in POLICY:
            return first[(kind, rank)].hint or Cause.CRASH
    if (ex and ex.exitcode) or (EXITED, rank) in first:
        return Cause.WORKLOAD_EXC  # exit status 1 and the like: the program ended on an error of its own
    return Cause.CRASH


def oom_killed(facts: Facts, rank: int | None) -> bool:
    """The kernel's OOM report names a pid, never a rank: it is this rank's where the launcher's
    pid map says so, or where this rank is the only one that died by SIGKILL on its own."""
    reports = [ev for (k, r), ev in facts.first.items() if k == OOM_KIND and r is None]
    if rank is None or not reports:
        return False
    pids = {int(m.group(1)) for ev in reports for m in _KILLED_PID_RE.finditer(ev.text)}
    if any(facts.pid_rank.get(pid) == rank for pid in pids):
        return True
    killed = [r for r, ex in facts.exits.items() if ex.signal == Signals.SIGKILL.name and not ex.stopped]
    return killed == [rank]


_KILLED_PID_RE = re.compile(r"[Kk]illed process (\d+)")


# What a remote service's HTTP status means for the request that got it, as an exception's message carries
# it (requests' raise_for_status, which huggingface_hub's HfHubHTTPError wraps: `{status} Server Error:
# {reason} for url: {url}`, `{status} Client Error: ...`; urllib's HTTPError: `HTTP Error {status}: {reason}`):
# the service's own failure (5xx: an internal error, a bad or timed-out gateway, unavailable) or a request it
# asks to repeat later (408, 429) is the service's state, which the next attempt need not meet; any other
# refusal (4xx: a wrong address, token or permission) is the job's own request, which it sends again.
HTTP_STATUS_RE = re.compile(r"\b([45]\d\d) (?:Server|Client) Error\b|\bHTTP Error ([45]\d\d):")
HTTP_TRANSIENT = frozenset({408, 429, *range(500, 600)})


def exception_meaning(text: str) -> tuple[str, str, str] | None:
    """(origin, recoverability, what it means in setup) of an exception line by its OS error number
    or class (rules.EXCEPTION_MEANING), or the HTTP status a remote service answered with; None
    where neither says."""
    head = text.strip().split(":", 1)[0].rsplit(".", 1)[-1]
    head = head[head.find("(") + 1 : -1] if head.endswith(")") else head  # Ray's RayTaskError(Inner)
    errno = ERRNO_RE.search(text)
    number = int(errno.group(1)) if errno else None
    for _, numbers, origin, recoverability, in_setup in EXCEPTION_MEANING:
        if number is not None and number in numbers:
            return origin, recoverability, in_setup
    if http := HTTP_STATUS_RE.search(text):
        status = int(http.group(1) or http.group(2))
        if status in HTTP_TRANSIENT:
            return INFRASTRUCTURE, TRANSIENT, PASSES
        return WORKLOAD, DETERMINISTIC, RECURS
    for classes, _, origin, recoverability, in_setup in EXCEPTION_MEANING:
        if head in classes:
            return origin, recoverability, in_setup
    return None


def with_meaning(facts: Facts, cause: str, ev: Evidence) -> tuple[str, str]:
    """The cause a program's exception (or NCCL's setup failure) leads to once its meaning and its
    time are read. A deterministic class is the program's (the cause stays). A transient
    infrastructure class is TRANSIENT_EXC (RESTART) unless something says it happened during setup
    and the table says such an error recurs there: it was raised in setup code (SETUP_EXC already),
    or the log shows the launch and no training progress between it and the failure (SETUP_EXC,
    STOP); a made connection that broke passes even in setup. NCCL's transport, once set up before
    progress, fails after it on the network's state (NETWORK). The text names the deciding evidence."""
    if ev.kind == NETWORK_KIND and cause == Cause.NCCL_SETUP and facts.progress_line < ev.line:
        return Cause.NETWORK, (
            f"; NCCL had set up its transport before: training made progress (line {facts.progress_line}: "
            f"{facts.progress_text[:80]!r}), so what fails now is the network's state, not the job's settings"
        )
    if ev.kind != EXCEPTION_KIND or cause not in (Cause.WORKLOAD_EXC, Cause.SETUP_EXC):
        return cause, ""
    meaning = exception_meaning(ev.text)
    if cause == Cause.SETUP_EXC:
        return cause, "; it was raised in setup code (process group, rendezvous or store)"
    if not meaning:
        return cause, ""
    origin, recoverability, in_setup = meaning
    what = ev.text.split(":", 1)[0].rsplit(".", 1)[-1]
    if recoverability != TRANSIENT:
        return cause, f"; {what} is {recoverability}, the {origin}'s own"
    if facts.progress_line < ev.line:
        return Cause.TRANSIENT_EXC, (
            f"; {what} is a transient {origin} error, after training progress (line {facts.progress_line}: "
            f"{facts.progress_text[:80]!r})"
        )
    if facts.launch_line < ev.line and in_setup == RECURS:
        return Cause.SETUP_EXC, (
            f"; {what} is a transient {origin} error, but it came after the launch (line {facts.launch_line}) "
            "with no training progress between: in setup it is the job's addresses, paths and settings, which "
            "the next attempt meets again"
        )
    if facts.launch_line < ev.line:
        return Cause.TRANSIENT_EXC, (
            f"; {what} is a transient {origin} error: a connection that was made and then broke, which the next "
            "attempt makes anew, even during setup"
        )
    return Cause.TRANSIENT_EXC, f"; {what} is a transient {origin} error, and nothing says it came during setup"


def hang_cause(facts: Facts, rank: int) -> str:
    """GPU hang, held GIL or stopped process, from what the stalled rank could still print.

    A stuck kernel leaves the rank's threads alive (its Python stall watchdog reports, or its stack
    waits on the device); a held GIL freezes Python threads but faulthandler's C timer still dumps
    stacks; a stopped process prints nothing. Else: how the launcher had to end it. Where the
    prefixes do not tell whose stack dump is whose (node labels), the one dump outside any
    collective is the stalled rank's: the others all wait in one; and where the dumps interleave
    too much to be read, a header from every rank behind the label says the stalled one dumped.
    """
    frames = facts.main_stacks.get(rank)
    if frames is None:
        outside = [stack for stack in facts.loose_stacks if stack and not in_collective(stack)]
        frames = outside[0] if len(outside) == 1 else None
    if ranks_with(facts, [STALL]):  # the job has a Python stall watchdog: its silence means something
        if (STALL, rank) in facts.first:
            return Cause.GPU_SLEEP
        dumped = (STACK_DUMP, rank) in facts.first or frames or every_rank_dumped(facts, rank)
        return Cause.LOCK_GIL if dumped else Cause.SIGSTOP
    if frames and DEVICE_WAIT_FRAMES.search(frames[0]):
        return Cause.GPU_SLEEP
    if (facts.main_stacks or facts.loose_stacks) and not frames and not every_rank_dumped(facts, rank):
        return Cause.SIGSTOP  # the others dumped stacks; a stopped process cannot
    killed = {facts.pid_rank[p] for p in facts.killed_pids if p in facts.pid_rank}
    ex = facts.exits.get(rank)
    if rank in killed or (ex and ex.signal == Signals.SIGKILL.name):
        return Cause.SIGSTOP
    return (
        Cause.GPU_SLEEP if (SIGNAL, rank) in facts.first or (ex and ex.signal == Signals.SIGTERM.name) else Cause.HANG
    )
