"""Attribution: from the facts of a log to a cause, the ranks at fault and how sure that is.

Symptoms (a timeout, a lost peer) mark victims; origins (a rank's own error or death) mark
culprits, but only when they come before that rank's own symptoms and before the launcher began
stopping it. A rank is named only when the evidence singles it out: the first rank to report a
timeout is a victim, not a culprit, and an excerpt that shows one rank cannot say that no other
rank failed first, so the confidence says what the naming rests on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from signal import Signals

from faultloop.analyze.logsage.facts import NEVER, Evidence, Facts
from faultloop.analyze.logsage.policy import POLICY, SCHEDULER_CAUSES
from faultloop.analyze.logsage.records import in_collective
from faultloop.analyze.logsage.rules import (
    BUSY_WINDOW_LINES,
    DEVICE_WAIT_FRAMES,
    ERRNO_RE,
    EXCEPTION_MEANING,
    FIRST_SEQ,
    RECURS,
    SETUP_SEQ,
    SIGNAL_FAULT,
    STOP_SIGNALS,
    TRANSIENT,
)
from faultloop.analyze.logsage.scan import add, drop, every_rank_dumped, seen_ranks
from faultloop.analyze.logsage.vocab import (
    CUDA_HINT,
    DEATH,
    DONE,
    EXCEPTION_KIND,
    EXITED,
    FATAL,
    GPU,
    GPU_HARDWARE,
    JOB_SIGNAL,
    NETWORK_KIND,
    OOM_KIND,
    ORIGINS,
    PEER_LOST,
    SIGNAL,
    SLURM,
    STACK_DUMP,
    STALL,
    SYMPTOMS,
    TIMEOUT,
    WEAK_ORIGINS,
    Cause,
)
from faultloop.signals import signal_name

HIGH, MEDIUM, LOW = "high", "medium", "low"
_LEVELS = (LOW, MEDIUM, HIGH)
_OWN_ERRORS = (EXCEPTION_KIND, FATAL, GPU, GPU_HARDWARE, OOM_KIND, NETWORK_KIND)


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


@dataclass
class _Timeline:
    """Per rank (None: a line that names no rank): first symptom, stop by the launcher, first
    own failure before either (strong, and weak: a cut traceback or a bare exit status)."""

    symptom_at: dict[int | None, int]
    stopped_at: dict[int, int]
    origin_at: dict[int | None, Evidence]
    weak_at: dict[int | None, Evidence]

    @property
    def first_symptom(self) -> int:
        return min(self.symptom_at.values(), default=NEVER)

    @property
    def victims(self) -> set[int]:
        return {r for r in self.symptom_at if r is not None} | set(self.stopped_at)


def _ranks_with(facts: Facts, kinds: Iterable[str]) -> set[int]:
    kinds = set(kinds)
    return {r for (k, r) in facts.first if k in kinds and r is not None}


def _evidence_of(facts: Facts, *kinds: str) -> list[Evidence]:
    """The kept evidence of these kinds (every rank), in log order."""
    return sorted((ev for (k, _), ev in facts.first.items() if k in kinds), key=lambda e: e.line)


def _first_line(facts: Facts, kinds: Iterable[str]) -> int:
    return next((ev.line for ev in _evidence_of(facts, *kinds)), NEVER)


def _reinterpret(facts: Facts) -> None:
    """Read lines in the light of the others. Several ranks dying by SIGABRT with no error of their
    own were aborted by the NCCL watchdog after a stuck collective: victims of a hang. A CUDA hint
    line with no CUDA error just before it is all that is left of a cut-off GPU error."""
    aborted = [
        r
        for r, ex in facts.exits.items()
        if ex.signal == Signals.SIGABRT.name and not ex.stopped and not any((k, r) in facts.first for k in _OWN_ERRORS)
    ]
    if len(aborted) > 1:
        for r in aborted:
            death = facts.first.get((DEATH, r))
            if death:
                drop(facts, death)
                add(facts, Evidence(death.line, death.text, TIMEOUT, r, "watchdog_abort"))
    errors = [ev.line for (k, _), ev in facts.first.items() if k in (GPU, OOM_KIND, GPU_HARDWARE)]
    for (kind, rank), ev in list(facts.first.items()):
        if kind == CUDA_HINT and not any(0 <= ev.line - line <= 5 for line in errors):
            add(facts, Evidence(ev.line, ev.text, GPU, rank, ev.rule, ev.hint))


def _timeline(facts: Facts) -> _Timeline:
    symptom_at: dict[int | None, int] = {}
    for (kind, rank), ev in facts.first.items():
        if kind in SYMPTOMS:
            symptom_at[rank] = min(symptom_at.get(rank, NEVER), ev.line)
    stopped_at = {facts.pid_rank[p]: ln for p, ln in facts.closed_pids.items() if p in facts.pid_rank}
    for rank, ex in facts.exits.items():
        if ex.stopped:
            stopped_at[rank] = min(stopped_at.get(rank, NEVER), ex.line)
    first_symptom = min(symptom_at.values(), default=NEVER)
    for (kind, rank), ev in facts.first.items():  # a stop signal after others failed: the job's teardown
        if kind == SIGNAL and rank is not None and ev.line > first_symptom and _signal_name(ev.text) in STOP_SIGNALS:
            stopped_at[rank] = min(stopped_at.get(rank, NEVER), ev.line)

    def before_own_end(kinds: tuple[str, ...]) -> dict[int | None, Evidence]:
        out: dict[int | None, Evidence] = {}
        for (kind, rank), ev in facts.first.items():
            if rank is None and kind == SIGNAL and ev.line > first_symptom and _signal_name(ev.text) in STOP_SIGNALS:
                continue  # a rank-less stop signal after a rank had failed: the job's teardown
            limit = min(symptom_at.get(rank, NEVER), stopped_at.get(rank, NEVER) if rank is not None else NEVER)
            if kind in kinds and ev.line < limit and (rank not in out or ev.line < out[rank].line):
                out[rank] = ev
        return out

    return _Timeline(symptom_at, stopped_at, before_own_end(ORIGINS), before_own_end(WEAK_ORIGINS))


def attribute(facts: Facts) -> Attribution:
    """The verdict's substance: the first of DECISIONS that finds something, else a quiet end."""
    _reinterpret(facts)
    tl = _timeline(facts)
    found = next((a for decide in DECISIONS if (a := decide(facts, tl))), None) or _quiet_end(facts)
    return _with_confidence_caps(facts, found)


def _attribution(
    cause: str,
    primary: list[int],
    victims: Iterable[int],
    keys: list[Evidence],
    why: str,
    confidence: str,
    confidence_reason: str,
) -> Attribution:
    """Job-wide causes (POLICY's blames_rank false) name no primary rank: everyone reporting is
    a victim of the job's environment or configuration."""
    if cause and not POLICY[cause].blames_rank and primary:
        victims, primary = set(victims) | set(primary), []
        confidence_reason = f"{cause} is a job-wide cause: the ranks that report it are not at fault"
    return Attribution(
        cause, sorted(primary), sorted(set(victims) - set(primary)), keys, why, confidence, confidence_reason
    )


def _scheduler(facts: Facts, tl: _Timeline) -> Attribution | None:
    job = {ev.hint: ev for (k, _), ev in facts.first.items() if k == SLURM}
    everyone = set(tl.victims) | {r for r in tl.origin_at if r is not None}
    for cause in SCHEDULER_CAUSES:
        if cause in job:
            ev = job[cause]
            found, keys, why, level, reason = (
                _time_limit(facts, ev)
                if cause == Cause.TIME_LIMIT
                else (cause, [ev], f"the scheduler ended the job: {ev.text}", HIGH, "the scheduler's own line")
            )
            return _attribution(found, [], everyone, keys, why, level, reason)
    return None


def _time_limit(facts: Facts, ev: Evidence) -> tuple[str, list[Evidence], str, str, str]:
    """(cause, keys, why, confidence, its reason) of a time limit, by what came before it: the
    application's `done` line (it hung on the way out), training progress (it resumes from its
    checkpoint), the launch and no progress (it never got through setup), else neither in view."""
    done = _evidence_of(facts, DONE)[:1]
    if done and done[0].line < ev.line:
        return (
            Cause.SHUTDOWN_HANG,
            [*done, ev],
            "the application reported that training finished, then the job ran into its time limit: it hung on "
            "the way out",
            MEDIUM,
            "the scheduler's time-limit line after the application's own 'done' line",
        )
    if facts.progress_line < ev.line:
        return (
            Cause.TIME_LIMIT_AFTER_PROGRESS,
            [ev],
            f"the scheduler ended the job at its time limit after training made progress (line "
            f"{facts.progress_line}: {facts.progress_text[:80]!r}): {ev.text}",
            HIGH,
            "the scheduler's own line, after a progress line",
        )
    if facts.launch_line < ev.line:
        return (
            Cause.SETUP_HANG,
            [ev],
            f"the job ran into its time limit after the launch (line {facts.launch_line}) with no training "
            "progress in the log: it never got through setup",
            MEDIUM,
            "the launch's lines, no progress line, then the scheduler's time-limit line",
        )
    return Cause.TIME_LIMIT, [ev], f"the scheduler ended the job: {ev.text}", HIGH, "the scheduler's own line"


def _stopped_from_outside(facts: Facts, tl: _Timeline) -> Attribution | None:
    job = {ev.hint: ev for (k, _), ev in facts.first.items() if k == SLURM}
    stop = job.get(Cause.CANCELLED) or next((ev for (k, _), ev in facts.first.items() if k == JOB_SIGNAL), None)
    first_origin = min((e.line for e in (*tl.origin_at.values(), *tl.weak_at.values())), default=NEVER)
    if stop and stop.line < min(first_origin, tl.first_symptom):
        done = _evidence_of(facts, DONE)[:1]
        if done and done[0].line < stop.line:
            return _attribution(
                Cause.SHUTDOWN_HANG,
                [],
                tl.victims,
                [*done, stop],
                "the application reported that training finished, then the job was stopped from outside: it hung "
                "on the way out",
                MEDIUM,
                "the stop came after the application's own 'done' line",
            )
        return _attribution(
            Cause.CANCELLED,
            [],
            tl.victims | {r for r in tl.origin_at if r is not None},
            [stop],
            "the job was stopped from outside before any rank failed",
            HIGH,
            "the scheduler's or launcher's line that it was stopped, before any failure",
        )
    return None


def _gpu_hardware(facts: Facts, tl: _Timeline) -> Attribution | None:
    """A GPU hardware fault explains the job's failure wherever it sits in the log: kernel and
    driver reports (Xid, ECC, a GPU gone) arrive out of order with the job's own output."""
    hardware = _evidence_of(facts, GPU_HARDWARE)
    if not hardware:
        return None
    ranks = sorted({ev.rank for ev in hardware if ev.rank is not None})
    if ranks:
        return _attribution(
            Cause.GPU_ERROR,
            ranks,
            tl.victims,
            hardware[:3],
            f"a GPU hardware fault on rank{'s' if len(ranks) > 1 else ''} {_join(ranks)}: {hardware[0].text[:120]}",
            HIGH if len(ranks) == 1 else MEDIUM,
            "the fault report names the rank" if len(ranks) == 1 else "several ranks' GPUs faulted",
        )
    stalled = _hang_culprits(facts, tl)[0] if tl.symptom_at else []
    return _attribution(
        Cause.GPU_ERROR,
        stalled if len(stalled) == 1 else [],
        tl.victims,
        hardware[:3],
        f"a GPU hardware fault ({hardware[0].text[:120]}) that the log does not tie to a rank"
        + (f"; rank {stalled[0]} is the one the others waited for" if len(stalled) == 1 else ""),
        MEDIUM,
        "the fault report names no rank" + ("; the rank is the hang's odd one out" if len(stalled) == 1 else ""),
    )


def _crash(facts: Facts, tl: _Timeline) -> Attribution | None:
    first_timeout = _first_line(facts, [TIMEOUT])
    origins = {r: e for r, e in tl.origin_at.items() if e.line < first_timeout}
    weak = not origins
    if weak:  # only a cut traceback or an exit status: it must come before any symptom at all
        origins = {r: e for r, e in tl.weak_at.items() if e.line < tl.first_symptom}
    if not origins:
        return None
    ranked = {r: e for r, e in origins.items() if r is not None}
    if not ranked:
        ev = origins[None]
        cause, meaning = _with_meaning(facts, _crash_cause(facts, None), ev)
        return _attribution(
            cause,
            [],
            tl.victims,
            [ev],
            f"a failure that names no rank ({ev.rule}, line {ev.line}){meaning}",
            MEDIUM,
            "the failing line carries no rank prefix in a log of several processes",
        )
    early = sorted(r for r, e in ranked.items() if e.line < tl.first_symptom)
    primary = _first_by_failure_time(facts, early) if len(early) > 1 else [min(ranked, key=lambda r: ranked[r].line)]
    keys = [ranked[r] for r in primary]
    cause, meaning = _with_meaning(facts, _crash_cause(facts, primary[0]), keys[0])
    others = (tl.victims | set(ranked)) - set(primary)
    why = (
        f"rank{'s' if len(primary) > 1 else ''} {_join(primary)} failed on {'their' if len(primary) > 1 else 'its'} "
        f"own first ({keys[0].rule}, line {keys[0].line}) while the other ranks only show symptoms or were "
        f"stopped by the launcher{meaning}"
    )
    return _attribution(cause, primary, others, keys, why, *_crash_confidence(facts, tl, primary, ranked, weak))


def exception_meaning(text: str) -> tuple[str, str, str] | None:
    """(origin, recoverability, what it means in setup) of an exception line by its class or OS
    error number (rules.EXCEPTION_MEANING), None where the table does not say."""
    head = text.strip().split(":", 1)[0].rsplit(".", 1)[-1]
    head = head[head.find("(") + 1 : -1] if head.endswith(")") else head  # Ray's RayTaskError(Inner)
    errno = ERRNO_RE.search(text)
    number = int(errno.group(1)) if errno else None
    for _, numbers, origin, recoverability, in_setup in EXCEPTION_MEANING:
        if number is not None and number in numbers:
            return origin, recoverability, in_setup
    for classes, _, origin, recoverability, in_setup in EXCEPTION_MEANING:
        if head in classes:
            return origin, recoverability, in_setup
    return None


def _with_meaning(facts: Facts, cause: str, ev: Evidence) -> tuple[str, str]:
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


def _first_by_failure_time(facts: Facts, ranks: list[int]) -> list[int]:
    """Of ranks that all failed before any symptom, those torchrun's summaries time first (several
    agents each report their own workers: their sections' order says nothing, their times do);
    where the times do not tell them apart, the ranks its `Root Cause (first observed failure)`
    section names."""
    times = {r: facts.failure_time[r] for r in ranks if r in facts.failure_time}
    if times:  # a rank timed later than another is not first; an untimed one may be
        first = min(times.values())
        ranks = [r for r in ranks if times.get(r, first) == first]
    named = [r for r in ranks if r in facts.root_cause]  # where times do not tell, torchrun's own word
    return named if named and len(ranks) > 1 else ranks


def _crash_confidence(
    facts: Facts, tl: _Timeline, primary: list[int], ranked: dict[int, Evidence], weak: bool
) -> tuple[str, str]:
    if len(primary) > 1:
        return MEDIUM, "several ranks failed on their own at about the same time"
    if weak:
        return MEDIUM, "its failure is known only from a cut-off traceback or an exit status"
    failed_too: set[int] = set(ranked) - set(primary)
    failed_too |= {r for r in tl.weak_at if r is not None and r not in primary}
    if failed_too:
        return MEDIUM, f"rank{'s' if len(failed_too) > 1 else ''} {_join(sorted(failed_too))} failed as well"
    if not (tl.victims - set(primary)):
        return MEDIUM, "only this rank's output is in the log: another rank may have failed first"
    return HIGH, "its own failure came first; the other ranks in the log only show symptoms or were stopped"


def _hang(facts: Facts, tl: _Timeline) -> Attribution | None:
    first_timeout = _first_line(facts, [TIMEOUT])
    if first_timeout == NEVER:
        return None
    timeouts = _evidence_of(facts, TIMEOUT)
    keys, hints = timeouts[:3], {ev.hint for ev in timeouts if ev.hint}
    desynced = {seq: ops for seq, ops in facts.collectives.items() if len(ops) > 1}
    if Cause.DESYNC in hints or desynced:
        what = (
            "; ".join(
                f"SeqNum {seq}: " + ", ".join(sorted(f"{op}({n or '?'})" for op, n in ops))
                for seq, ops in sorted(desynced.items())[:2]
            )
            or "a collective mismatch was reported"
        )
        odd = _odd_collective_out(facts, desynced)
        return _attribution(
            Cause.DESYNC,
            odd,
            tl.victims,
            keys,
            f"ranks waited in different collectives ({what})"
            + (f"; rank {odd[0]} alone issued its collective, every other rank another one" if odd else ""),
            MEDIUM,
            "the one rank whose collective differs from all the others'"
            if odd
            else "the timed-out collectives disagree; no rank is singled out",
        )
    if odd_call := _odd_collective(facts):
        rank, mine, theirs = odd_call
        return _attribution(
            Cause.DESYNC,
            [rank],
            tl.victims,
            keys,
            f"rank {rank} waited in {mine} while every other rank waited in {theirs}",
            HIGH,
            "the only rank whose traceback ends in another collective than the others'",
        )
    if len(set(facts.waited_in.values())) > 1:
        return _attribution(
            Cause.DESYNC,
            [],
            tl.victims,
            keys,
            "ranks waited in different collectives: " + ", ".join(sorted(set(facts.waited_in.values()))),
            MEDIUM,
            "the ranks' tracebacks end in different collectives; none is the odd one out",
        )
    if (link := _link_down(facts, tl)) is not None:
        return link
    early = facts.first_seq is not None and (
        facts.first_seq <= FIRST_SEQ or (facts.first_seq <= SETUP_SEQ and facts.progress_line > first_timeout)
    )
    if Cause.SETUP_HANG in hints or early:
        waiting = {r for r in tl.symptom_at if r is not None}
        absent = sorted(set(range(facts.world_size)) - waiting) if len(waiting) > 1 else []
        if len(absent) == 1:
            return _attribution(
                Cause.SETUP_HANG,
                absent,
                tl.victims,
                keys,
                f"ranks {_join(sorted(waiting))} waited in setup (rendezvous, store barrier or first collective) and "
                f"rank {absent[0]} of {facts.world_size} never joined",
                MEDIUM,
                "the one member of the world the waiting ranks do not include",
            )
        return _attribution(
            Cause.SETUP_HANG,
            [],
            tl.victims,
            keys,
            "the ranks timed out in the rendezvous or on the first collective",
            MEDIUM,
            "no rank had finished setting up; the log does not say which one never joined",
        )
    primary, why, level = _hang_culprits(facts, tl)
    level_reason = why
    cause: str
    busy = facts.last_busy
    if _first_line(facts, [DONE]) < first_timeout:
        cause = Cause.SHUTDOWN_HANG
        why = "the application reported that training finished before the timeouts; " + why
    elif busy and first_timeout - busy.line <= BUSY_WINDOW_LINES and (slow := _busy_rank(facts, tl, busy, primary)):
        primary, level, level_reason = slow
        cause = Cause.SLOW_RANK
        why = f"one-rank work ({busy.text[:80]!r}, line {busy.line}) ran while the others timed out; {level_reason}"
        keys = [busy, *keys]
    elif Cause.WATCHDOG_HANG in hints:
        cause = Cause.WATCHDOG_HANG
    else:
        cause = _hang_cause(facts, primary[0]) if len(primary) == 1 else Cause.HANG
    return _attribution(cause, primary, tl.victims, keys, why, level, level_reason)


def _odd_collective(facts: Facts) -> tuple[int, str, str] | None:
    """(rank, its call, everyone else's) where one rank's traceback ends in another torch.distributed
    call than every other rank's (three ranks at least: of two, neither is the odd one out)."""
    calls = facts.waited_in
    if len(calls) < 3 or len(set(calls.values())) != 2:
        return None
    odd = [r for r, call in calls.items() if sum(c == call for c in calls.values()) == 1]
    if len(odd) != 1:
        return None
    rank = odd[0]
    return rank, calls[rank], next(c for r, c in calls.items() if r != rank)


def _odd_collective_out(facts: Facts, desynced: dict[int, set[tuple[str, str | None]]]) -> list[int]:
    """The rank whose timed-out collective differs from all the others' at the same SeqNum, where
    the others agree on one (the desync's culprit: the rank that took another code path)."""
    for seq in sorted(desynced):
        groups = [ranks for (s, _, _), ranks in facts.collective_ranks.items() if s == seq]
        alone = [ranks for ranks in groups if len(ranks) == 1]
        if len(groups) == 2 and len(alone) == 1 and sum(map(len, groups)) >= 3:
            return sorted(alone[0])
    return []


def _busy_rank(facts: Facts, tl: _Timeline, busy: Evidence, stalled: list[int]) -> tuple[list[int], str, str] | None:
    """The rank doing one-rank work: the one that printed it (unless it timed out itself: then
    its work was done and held nobody up), else the hang's odd one out, else rank 0 (where
    evaluation, checkpoint writing and preprocessing run by convention)."""
    timed_out = {r for r in tl.symptom_at if r is not None}
    if busy.rank is not None:
        return (
            None
            if busy.rank in timed_out
            else ([busy.rank], MEDIUM, f"rank {busy.rank} printed it and never timed out")
        )
    if len(stalled) == 1:
        return stalled, MEDIUM, f"rank {stalled[0]} is the only rank that did not time out"
    if 0 not in timed_out:
        return [0], LOW, "rank 0 did not time out, and one-rank work runs on rank 0 by convention"
    return None


def _hang_culprits(facts: Facts, tl: _Timeline) -> tuple[list[int], str, str]:
    """In a hang the victims time out; the culprit is the odd one out that did not. Several
    candidates the log cannot tell apart are not named."""
    if facts.barrier_missing:
        return (
            sorted(facts.barrier_missing),
            "ranks a barrier (monitoredBarrier, Horovod's stall inspector) named as missing",
            HIGH if len(facts.barrier_missing) == 1 else MEDIUM,  # several: which one stalled first is not said
        )
    timed_out = {r for r in tl.symptom_at if r is not None}
    known = set(range(facts.world_size)) | seen_ranks(facts) | set(facts.exits) | _ranks_with(facts, ORIGINS)
    inferred = set(range(max(known | timed_out, default=-1) + 1)) - known  # ranks below a seen rank exist
    quiet = sorted((known | inferred) - timed_out)
    outside = sorted(r for r, frames in facts.main_stacks.items() if frames and not in_collective(frames))
    narrowed = False
    if len(quiet) > 1:  # narrow: stuck outside a collective, else stopped by the launcher
        stopped = {facts.pid_rank[p] for p in facts.closed_pids if p in facts.pid_rank}
        narrowed_to = [r for r in quiet if r in outside] or [r for r in quiet if r in stopped]
        narrowed, quiet = bool(narrowed_to), narrowed_to or quiet
    if len(quiet) == 1:
        why = (
            f"rank {quiet[0]} never timed out while the others did (first timeout at line "
            f"{_first_line(facts, [TIMEOUT])})"
        )
        if narrowed:
            return quiet, why, MEDIUM
        if inferred & set(quiet) or not facts.world_size:
            if len(timed_out) < 2:  # one victim in view says little about who else there was
                return [], f"only rank {_join(timed_out)} shows a timeout; the log does not show the others", MEDIUM
            return quiet, why + "; the world size is inferred from the ranks in the log", MEDIUM
        return quiet, why, HIGH
    if len(quiet) > 1:
        return [], f"ranks {_join(quiet)} never reported a timeout; the log does not single one out", MEDIUM
    if outside and len(outside) < len(facts.main_stacks):
        return outside, f"every rank timed out, but only {outside} stalled outside a collective (stack dumps)", MEDIUM
    if facts.enqueued and len(set(facts.enqueued.values())) > 1:
        low = min(facts.enqueued.values())
        behind = sorted(r for r, v in facts.enqueued.items() if v == low)
        return behind, f"ranks {behind} are behind the others in enqueued collectives ({low})", MEDIUM
    return [], "every rank in the log timed out; it cannot tell which one stalled", MEDIUM


def _hang_cause(facts: Facts, rank: int) -> str:
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
    if _ranks_with(facts, [STALL]):  # the job has a Python stall watchdog: its silence means something
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


def _peer_lost(facts: Facts, tl: _Timeline) -> Attribution | None:
    if not tl.symptom_at:
        return None
    victims = tl.victims
    keys = _evidence_of(facts, PEER_LOST)[:3]
    silent = sorted(
        r
        for r, ex in facts.exits.items()
        if r not in tl.symptom_at and r not in tl.stopped_at and (ex.signal or ex.first) and not ex.stopped
    )
    if silent:
        rank = silent[0]
        ended = facts.exits[rank].signal or f"exit code {facts.exits[rank].exitcode}"
        return _attribution(
            _crash_cause(facts, rank),
            [rank],
            victims - {rank},
            keys,
            f"rank {rank} ended ({ended}) by its launcher's word while its peers lost their connection to it",
            HIGH if len(silent) == 1 else MEDIUM,
            "the launcher's record of its end" if len(silent) == 1 else "several ranks ended by their launchers' word",
        )
    known = set(range(facts.world_size)) | seen_ranks(facts)
    world = known | set(range(max(known | victims, default=-1) + 1))
    failed = {r for r in (*tl.origin_at, *tl.weak_at) if r is not None}
    quiet = sorted(world - victims - failed)
    in_view = world == known or len(victims) > 1  # an inferred world needs more than one victim in view
    if len(quiet) == 1 and not failed and in_view:  # no exit record: the one rank that lost no peer is the lost peer
        # nothing printed at all (no traceback, no fatal-error dump, no signal message): how SIGKILL ends a process
        return _attribution(
            Cause.SIGKILL,
            quiet,
            victims,
            keys,
            f"rank {quiet[0]} is the only rank that did not lose a peer: it died without a word",
            HIGH if facts.world_size and quiet[0] < facts.world_size and world == known else MEDIUM,
            "the only rank that did not report a lost peer"
            + ("" if facts.world_size and world == known else "; the world size is inferred"),
        )
    if (link := _link_down(facts, tl)) is not None:
        return link
    cause = next((ev.hint for ev in _evidence_of(facts, NETWORK_KIND) if ev.hint), Cause.NETWORK)
    return _attribution(
        cause,
        [],
        victims,
        keys,
        "connections broke but no rank failed on its own",
        MEDIUM,
        "ranks lost their peers; the log does not show which peer went first",
    )


def _link_down(facts: Facts, tl: _Timeline) -> Attribution | None:
    """NET_DROP where one rank lost its connections before anything else happened (a peer that
    timed out later waited for it: the lost link explains the timeouts too)."""
    first = _first_to_lose_peers(facts, tl)
    if first is None:
        return None
    return _attribution(
        Cause.NET_DROP,
        [first],
        tl.victims - {first},
        _evidence_of(facts, PEER_LOST)[:3],
        f"rank {first} lost its connections before any other rank had failed, lost a peer, timed out or been stopped",
        MEDIUM,
        "it reported the lost connection first; no peer had died or failed before it",
    )


def _first_to_lose_peers(facts: Facts, tl: _Timeline) -> int | None:
    """The rank whose connections failed first: it reported a lost peer while the job was still
    making progress (before any stall report, stack dump or timeout: a job stuck first loses
    connections as its ranks give up) and before any other rank reported anything, ended or was stopped (a
    peer that had died or failed first would show before it); other ranks came to grief after
    it, and no rank died by a signal of its own."""
    lost = sorted((ev.line, r) for (k, r), ev in facts.first.items() if k == PEER_LOST and r is not None)
    if not lost or any(ex.signal and not ex.stopped for ex in facts.exits.values()):
        return None
    line, rank = lost[0]
    others = [ln for r, ln in tl.symptom_at.items() if r is not None and r != rank]
    others += [ln for r, ln in tl.stopped_at.items() if r != rank]
    others += [ex.line for r, ex in facts.exits.items() if r != rank]
    stalled = _first_line(facts, [STALL, STACK_DUMP, TIMEOUT])  # its own timeout too: then it waited, not lost
    # other ranks in view that came to grief after it (a lone reporter in an excerpt says nothing)
    return rank if others and line < min(others) and line < min(facts.stop_line, stalled) else None


def _quiet_end(facts: Facts) -> Attribution:
    done = _evidence_of(facts, DONE)
    if done:
        return _attribution(
            Cause.DONE,
            [],
            [],
            done[:1],
            "the application reported that training finished",
            HIGH,
            "the application's own line",
        )
    return _attribution("", [], [], [], "no errors found", LOW, "no failure lines found (an excerpt may have cut them)")


def _crash_cause(facts: Facts, rank: int | None) -> str:
    """The fault a failed rank's own evidence names, strongest evidence first."""
    first = facts.first
    if (GPU, rank) in first or (GPU_HARDWARE, rank) in first:
        return Cause.GPU_ERROR
    if (OOM_KIND, rank) in first:
        return Cause.OOM
    if _oom_killed(facts, rank):
        return Cause.HOST_OOM
    if (FATAL, rank) in first:
        return first[(FATAL, rank)].hint or Cause.CRASH
    if (EXCEPTION_KIND, rank) in first:
        return first[(EXCEPTION_KIND, rank)].hint or Cause.WORKLOAD_EXC
    if (NETWORK_KIND, rank) in first:
        return first[(NETWORK_KIND, rank)].hint or Cause.NETWORK
    ex = facts.exits.get(rank) if rank is not None else None
    if (SIGNAL, rank) in first:
        sig = _signal_name(first[(SIGNAL, rank)].text)
        return SIGNAL_FAULT.get(sig or "", Cause.EXTERNAL_SIGNAL)
    if ex and ex.signal in SIGNAL_FAULT:
        return SIGNAL_FAULT[ex.signal]
    for kind in (DEATH, *WEAK_ORIGINS):
        if (kind, rank) in first and first[(kind, rank)].hint in POLICY:
            return first[(kind, rank)].hint or Cause.CRASH
    if (ex and ex.exitcode) or (EXITED, rank) in first:
        return Cause.WORKLOAD_EXC  # exit status 1 and the like: the program ended on an error of its own
    return Cause.CRASH


def _oom_killed(facts: Facts, rank: int | None) -> bool:
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


def _signal_name(text: str) -> str | None:
    m = re.search(r"\bSIG[A-Z0-9]+\b", text)
    if m:
        return m.group(0)
    m = re.search(r"signal[: ]*(\d+)", text, re.I)
    return signal_name(int(m.group(1))) if m else None


def _with_confidence_caps(facts: Facts, found: Attribution) -> Attribution:
    """A rank named under an assumption (a local rank read as global, a log read as one
    process) is only as sure as that assumption."""
    for rank in found.primary:
        if rank in facts.assumed:
            level, reason = facts.assumed[rank]
            if _LEVELS.index(level) < _LEVELS.index(found.confidence):
                found.confidence, found.confidence_reason = level, reason
    return found


def _join(ranks: Iterable[int]) -> str:
    return ", ".join(map(str, ranks))


# The order in which decisions are taken: the first that finds something decides. Each names the
# causes it can give; what a cause means (category, restart, wording) is policy.POLICY.
DECISIONS: tuple[Callable[[Facts, _Timeline], Attribution | None], ...] = (
    _scheduler,  # 1. the scheduler ended the job (preemption, node failure, time limit: after training
    #              progress TIME_LIMIT_AFTER_PROGRESS, after the launch with no progress SETUP_HANG;
    #              SHUTDOWN_HANG when the application had said it was done)
    _stopped_from_outside,  # 2. CANCELLED: it was stopped from outside before any rank failed
    _gpu_hardware,  # 3. GPU_ERROR: a GPU hardware fault (kernel or driver report) anywhere in the log
    _crash,  # 4. a crash: some rank failed on its own before anyone timed out -> the earliest such
    #          rank and its evidence's cause (a cut-off traceback, a bare exit status, a plain
    #          `error:` line or a diverged run counts only if nothing stronger does)
    _hang,  # 5. a hang: ranks timed out first -> DESYNC, SETUP_HANG, SHUTDOWN_HANG, SLOW_RANK (one
    #         busy rank: STOP), WATCHDOG_HANG, the odd rank out's GPU_SLEEP / LOCK_GIL / SIGSTOP, or
    #         HANG with no culprit (RESTART)
    _peer_lost,  # 6. peers were lost and nobody failed visibly -> a rank that died silently, else NETWORK
)
# 7. otherwise (_quiet_end): DONE when the application finished, else no errors found
