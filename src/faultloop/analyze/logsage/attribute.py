"""Attribution: from the facts of a log to a cause, the ranks at fault and how sure that is.

Symptoms (a timeout, a lost peer) mark victims; origins (a rank's own error or death) mark
culprits, but only when they come before that rank's own symptoms and before the launcher began
stopping it. A rank is named only when the evidence singles it out: the first rank to report a
timeout is a victim, not a culprit, and an excerpt that shows one rank cannot say that no other
rank failed first, so the confidence says what the naming rests on.

This module holds the decisions and DECISIONS, their order; the pieces they are made of live
beside it: timeline.py (the facts per rank in time), causes.py (the cause a rank's evidence
names), culprits.py (which rank the evidence singles out), confidence.py (the finding and how
sure it is).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from faultloop.analyze.logsage import spatial
from faultloop.analyze.logsage.causes import crash_cause, hang_cause, with_meaning
from faultloop.analyze.logsage.confidence import (
    HIGH,
    LOW,
    MEDIUM,
    Attribution,
    attribution,
    crash_confidence,
    join_ranks,
    with_confidence_caps,
)
from faultloop.analyze.logsage.context import BUSY_WINDOW_LINES, FIRST_SEQ, SETUP_SEQ
from faultloop.analyze.logsage.culprits import (
    busy_rank,
    device_rank,
    first_by_failure_time,
    first_to_lose_peers,
    hang_culprits,
    odd_collective,
    odd_collective_out,
    odd_first_collective,
    store_publisher,
)
from faultloop.analyze.logsage.facts import NEVER, Evidence, Facts
from faultloop.analyze.logsage.policy import SCHEDULER_CAUSES
from faultloop.analyze.logsage.ranks import labels_are_nodes, seen_ranks
from faultloop.analyze.logsage.timeline import Timeline, evidence_of, first_line, read_timeline, reinterpret
from faultloop.analyze.logsage.vocab import (
    DONE,
    GPU_HARDWARE,
    JOB_SIGNAL,
    NETWORK_KIND,
    PEER_LOST,
    SLURM,
    TIMEOUT,
    Cause,
)
from faultloop.contracts.verdicts import SPATIAL

# The rank that runs a job's one-rank work (`if rank == 0:` saving, evaluation, logging; the main
# process of a one-rank-first section): a hang's odd rank out that is this one was most likely busy
# there, which it is again at the same step (a one-rank path recurs: STOP).
MAIN_RANK = 0


def attribute(facts: Facts) -> Attribution:
    """The verdict's substance: the first of DECISIONS that finds something, else a quiet end."""
    reinterpret(facts)
    tl = read_timeline(facts)
    found = next((a for decide in DECISIONS if (a := decide(facts, tl))), None) or _quiet_end(facts)
    return with_confidence_caps(facts, found)


def _scheduler(facts: Facts, tl: Timeline) -> Attribution | None:
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
            return attribution(found, [], everyone, keys, why, level, reason)
    return None


def _time_limit(facts: Facts, ev: Evidence) -> tuple[str, list[Evidence], str, str, str]:
    """(cause, keys, why, confidence, its reason) of a time limit, by what came before it: the
    application's `done` line (it hung on the way out), training progress (it resumes from its
    checkpoint), the launch and no progress (it never got through setup), else neither in view."""
    done = evidence_of(facts, DONE)[:1]
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


def _stopped_from_outside(facts: Facts, tl: Timeline) -> Attribution | None:
    job = {ev.hint: ev for (k, _), ev in facts.first.items() if k == SLURM}
    stop = job.get(Cause.CANCELLED) or next((ev for (k, _), ev in facts.first.items() if k == JOB_SIGNAL), None)
    first_origin = min((e.line for e in (*tl.origin_at.values(), *tl.weak_at.values())), default=NEVER)
    if stop and stop.line < min(first_origin, tl.first_symptom):
        done = evidence_of(facts, DONE)[:1]
        if done and done[0].line < stop.line:
            return attribution(
                Cause.SHUTDOWN_HANG,
                [],
                tl.victims,
                [*done, stop],
                "the application reported that training finished, then the job was stopped from outside: it hung "
                "on the way out",
                MEDIUM,
                "the stop came after the application's own 'done' line",
            )
        return attribution(
            Cause.CANCELLED,
            [],
            tl.victims | {r for r in tl.origin_at if r is not None},
            [stop],
            "the job was stopped from outside before any rank failed",
            HIGH,
            "the scheduler's or launcher's line that it was stopped, before any failure",
        )
    return None


def _gpu_hardware(facts: Facts, tl: Timeline) -> Attribution | None:
    """A GPU hardware fault explains the job's failure wherever it sits in the log: kernel and
    driver reports (Xid, ECC, a GPU gone) arrive out of order with the job's own output."""
    hardware = evidence_of(facts, GPU_HARDWARE)
    if not hardware:
        return None
    ranks = sorted({ev.rank for ev in hardware if ev.rank is not None})
    if ranks:
        return attribution(
            Cause.GPU_ERROR,
            ranks,
            tl.victims,
            hardware[:3],
            f"a GPU hardware fault on rank{'s' if len(ranks) > 1 else ''} {join_ranks(ranks)}: "
            f"{hardware[0].text[:120]}",
            HIGH if len(ranks) == 1 else MEDIUM,
            "the fault report names the rank" if len(ranks) == 1 else "several ranks' GPUs faulted",
        )
    stalled = hang_culprits(facts, tl)[0] if tl.symptom_at else []
    return attribution(
        Cause.GPU_ERROR,
        stalled if len(stalled) == 1 else [],
        tl.victims,
        hardware[:3],
        f"a GPU hardware fault ({hardware[0].text[:120]}) that the log does not tie to a rank"
        + (f"; rank {stalled[0]} is the one the others waited for" if len(stalled) == 1 else ""),
        MEDIUM,
        "the fault report names no rank" + ("; the rank is the hang's odd one out" if len(stalled) == 1 else ""),
    )


# torch's dynamic rendezvous (dynamic_rendezvous.py, _keep_alive): `... has failed to send a keep-alive heartbeat
# to the rendezvous 'R' due to an error of type E.` E is RendezvousConnectionError where the backend (its store,
# on the node that hosts it) could not be reached, RendezvousTimeoutError where the keep-alive operation ran past
# its own deadline with the backend in reach (_KeepAliveOp, ERROR_TIMEOUT): a slow or stalled host, not a lost one
OWN_STALL_RE = re.compile(r"due to an error of type (?:\w+\.)*RendezvousTimeoutError")


def _node_lost(facts: Facts, tl: Timeline) -> Attribution | None:
    """NODE_FAIL: a launcher's agent lost the rest of the job mid-run (its keep-alive to the
    rendezvous, sent only once the rendezvous completed and its workers ran, failed: the node that
    hosts the rendezvous, or the way to it, was lost) before any rank failed on its own. A node that
    died mid-run is the infrastructure's, which a restart on healthy nodes passes (RESTART); what
    the survivors report after it is its consequence. A keep-alive that ran past its own deadline
    (OWN_STALL_RE) lost nothing: its own node stalled, and where a rank failed on its own, even
    after it, that failure decides."""
    lost = [ev for ev in evidence_of(facts, PEER_LOST) if ev.hint == Cause.NODE_FAIL]
    first_origin = min((e.line for e in (*tl.origin_at.values(), *tl.weak_at.values())), default=NEVER)
    if not lost or lost[0].line > first_origin:
        return None
    if first_origin < NEVER and all(OWN_STALL_RE.search(ev.text) for ev in lost):
        return None  # its own node stalled: what its ranks did decides
    return attribution(
        Cause.NODE_FAIL,
        [],
        tl.victims,
        lost[:3],
        f"a node was lost while the job ran (line {lost[0].line}: {lost[0].text[:120]}) before any rank failed "
        "on its own",
        MEDIUM,
        "an agent lost its rendezvous with the other nodes mid-run; the log does not say which node died",
    )


def _crash(facts: Facts, tl: Timeline) -> Attribution | None:
    first_timeout = first_line(facts, [TIMEOUT])
    origins = {r: e for r, e in tl.origin_at.items() if e.line < first_timeout}
    weak = not origins
    if weak:  # only a cut traceback or an exit status: it must come before any symptom at all
        origins = {r: e for r, e in tl.weak_at.items() if e.line < tl.first_symptom}
    if not origins:
        return None
    ranked = {r: e for r, e in origins.items() if r is not None}
    if not ranked:
        ev = origins[None]
        cause, meaning = with_meaning(facts, crash_cause(facts, None), ev)
        owner = device_rank(facts)
        return attribution(
            cause,
            [owner[0]] if owner else [],
            tl.victims,
            [ev],
            f"a failure that names no rank ({ev.rule}, line {ev.line}){meaning}" + (f"; {owner[1]}" if owner else ""),
            MEDIUM,
            owner[1] if owner else "the failing line carries no rank prefix in a log of several processes",
        )
    early = sorted(r for r, e in ranked.items() if e.line < tl.first_symptom)
    primary = first_by_failure_time(facts, early) if len(early) > 1 else [min(ranked, key=lambda r: ranked[r].line)]
    keys = [ranked[r] for r in primary]
    cause, meaning = with_meaning(facts, crash_cause(facts, primary[0]), keys[0])
    others = (tl.victims | set(ranked)) - set(primary)
    why = (
        f"rank{'s' if len(primary) > 1 else ''} {join_ranks(primary)} failed on "
        f"{'their' if len(primary) > 1 else 'its'} own first ({keys[0].rule}, line {keys[0].line}) while the other "
        f"ranks only show symptoms or were stopped by the launcher{meaning}"
    )
    return attribution(cause, primary, others, keys, why, *crash_confidence(facts, tl, primary, ranked, weak))


def _desync(facts: Facts, tl: Timeline) -> Attribution | None:
    """DESYNC: the ranks that timed out were in different collectives, as their reports show (at one
    SeqNum, on the first one they timed out on where torch numbers none, a reported mismatch, the
    call their tracebacks end in); the one rank whose collective differs from all the others' took
    another code path, which it takes again (STOP)."""
    timeouts = evidence_of(facts, TIMEOUT)
    if not timeouts:
        return None
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
        odd = odd_collective_out(facts, desynced)
        return attribution(
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
    for calls, odd_call, alone, apart in (
        (
            facts.waited_in,
            odd_collective(facts),
            "the only rank whose traceback ends in another collective than the others'",
            "the ranks' tracebacks end in different collectives; none is the odd one out",
        ),
        (
            facts.unnumbered_ops,
            odd_first_collective(facts),
            "the only rank that first timed out on another collective than the others (torch < 1.10 numbers none)",
            "the ranks first timed out on different collectives; none is the odd one out",
        ),
    ):
        if odd_call:
            rank, mine, theirs = odd_call
            return attribution(
                Cause.DESYNC,
                [rank],
                tl.victims,
                keys,
                f"rank {rank} waited in {mine} while every other rank waited in {theirs}",
                HIGH if calls is facts.waited_in else MEDIUM,
                alone,
            )
        if len(set(calls.values())) > 1:
            return attribution(
                Cause.DESYNC,
                [],
                tl.victims,
                keys,
                "ranks waited in different collectives: " + ", ".join(sorted(set(calls.values()))),
                MEDIUM,
                apart,
            )
    return None


def _one_rank_first(facts: Facts, tl: Timeline) -> Attribution | None:
    """SLOW_RANK: ranks timed out waiting inside a one-rank-first section (context.MAIN_FIRST_FRAMES:
    the main process runs the block while the others wait at its barrier), so the main rank's
    one-rank work outlasted the timeout, which it does again at the same place (a one-rank path
    visible in the log recurs: STOP). The main rank is rank 0 where the log shows one node (a
    section may be each node's own) and rank 0 did not time out itself."""
    timeouts = evidence_of(facts, TIMEOUT)
    if not facts.main_first or not timeouts:
        return None
    timed_out = {r for r in tl.symptom_at if r is not None}
    if 0 in timed_out | facts.main_first:
        return None  # the main rank waited too: its section was done
    one_node = len(facts.hosts) < 2 and not labels_are_nodes(facts)
    waiters = sorted(r for r in facts.main_first if r is not None)
    who = f"rank{'s' if len(waiters) > 1 else ''} {join_ranks(waiters)}" if waiters else "a rank"
    return attribution(
        Cause.SLOW_RANK,
        [0] if one_node else [],
        tl.victims,
        timeouts[:3],
        f"{who} timed out waiting inside a one-rank-first section (the main process runs it first while the "
        "others wait at its barrier): the main rank's one-rank work outlasted the timeout",
        MEDIUM,
        "the waiters' tracebacks pass through a one-rank-first section; the main process is rank 0"
        + ("" if one_node else ", or each node's local rank 0: the log shows several nodes"),
    )


def _hang(facts: Facts, tl: Timeline) -> Attribution | None:
    first_timeout = first_line(facts, [TIMEOUT])
    if first_timeout == NEVER:
        return None
    timeouts = evidence_of(facts, TIMEOUT)
    keys, hints = timeouts[:3], {ev.hint for ev in timeouts if ev.hint}
    if (link := _link_down(facts, tl)) is not None:
        return link
    early = facts.first_seq is not None and (
        facts.first_seq <= FIRST_SEQ or (facts.first_seq <= SETUP_SEQ and facts.progress_line > first_timeout)
    )
    if Cause.SETUP_HANG in hints or early:
        waiting = {r for r in tl.symptom_at if r is not None}
        absent = sorted(set(range(facts.world_size)) - waiting) if len(waiting) > 1 else []
        if len(absent) == 1:
            return attribution(
                Cause.SETUP_HANG,
                absent,
                tl.victims,
                keys,
                f"ranks {join_ranks(sorted(waiting))} waited in setup (rendezvous, store barrier or first collective) "
                f"and rank {absent[0]} of {facts.world_size} never joined",
                MEDIUM,
                "the one member of the world the waiting ranks do not include",
            )
        if publisher := store_publisher(facts):
            rank, why = publisher
            return attribution(Cause.SETUP_HANG, [rank], tl.victims, keys, why, MEDIUM, why)
        return attribution(
            Cause.SETUP_HANG,
            [],
            tl.victims,
            keys,
            "the ranks timed out in the rendezvous or on the first collective",
            MEDIUM,
            "no rank had finished setting up; the log does not say which one never joined",
        )
    primary, why, level = hang_culprits(facts, tl)
    level_reason = why
    cause: str
    busy = facts.last_busy
    if first_line(facts, [DONE]) < first_timeout:
        cause = Cause.SHUTDOWN_HANG
        why = "the application reported that training finished before the timeouts; " + why
    elif busy and first_timeout - busy.line <= BUSY_WINDOW_LINES and (slow := busy_rank(facts, tl, busy, primary)):
        primary, level, level_reason = slow
        cause = Cause.SLOW_RANK
        why = f"one-rank work ({busy.text[:80]!r}, line {busy.line}) ran while the others timed out; {level_reason}"
        keys = [busy, *keys]
    elif Cause.WATCHDOG_HANG in hints:
        cause = Cause.WATCHDOG_HANG
    elif not primary and (behind := spatial.behind_in_sequence(facts)) is not None:
        rank, seq, next_seq = behind
        reason = (
            f"rank {rank} timed out on collective SeqNum {seq} while every other rank had gone on to "
            f"{next_seq} or later: it stopped issuing collectives while they did (one-rank work, inferred)"
        )
        return attribution(Cause.SLOW_RANK, [rank], tl.victims, keys, reason, MEDIUM, reason, SPATIAL)
    else:
        cause = hang_cause(facts, primary[0]) if len(primary) == 1 else Cause.HANG
        if cause == Cause.HANG and primary == [MAIN_RANK] and not facts.barrier_missing:
            cause = Cause.SLOW_RANK
            why += (
                f"; rank {MAIN_RANK} is the main rank, where one-rank work (saving, evaluating, logging) runs, and "
                "nothing says it stalled otherwise (no stall report, stack dump or kill): one-rank work, inferred"
            )
    return attribution(cause, primary, tl.victims, keys, why, level, level_reason)


def _peer_lost(facts: Facts, tl: Timeline) -> Attribution | None:
    if not tl.symptom_at:
        return None
    victims = tl.victims
    keys = evidence_of(facts, PEER_LOST)[:3]
    silent = sorted(
        r
        for r, ex in facts.exits.items()
        if r not in tl.symptom_at and r not in tl.stopped_at and (ex.signal or ex.first) and not ex.stopped
    )
    if silent:
        rank = silent[0]
        ended = facts.exits[rank].signal or f"exit code {facts.exits[rank].exitcode}"
        return attribution(
            crash_cause(facts, rank),
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
        return attribution(
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
    cause = next((ev.hint for ev in evidence_of(facts, NETWORK_KIND) if ev.hint), Cause.NETWORK)
    return attribution(
        cause,
        [],
        victims,
        keys,
        "connections broke but no rank failed on its own",
        MEDIUM,
        "ranks lost their peers; the log does not show which peer went first",
    )


def _link_down(facts: Facts, tl: Timeline) -> Attribution | None:
    """NET_DROP where one rank lost its connections before anything else happened (a peer that
    timed out later waited for it: the lost link explains the timeouts too)."""
    first = first_to_lose_peers(facts, tl)
    if first is None:
        return None
    return attribution(
        Cause.NET_DROP,
        [first],
        tl.victims - {first},
        evidence_of(facts, PEER_LOST)[:3],
        f"rank {first} lost its connections before any other rank had failed, lost a peer, timed out or been stopped",
        MEDIUM,
        "it reported the lost connection first; no peer had died or failed before it",
    )


def _quiet_end(facts: Facts) -> Attribution:
    done = evidence_of(facts, DONE)
    if done:
        return attribution(
            Cause.DONE,
            [],
            [],
            done[:1],
            "the application reported that training finished",
            HIGH,
            "the application's own line",
        )
    return attribution("", [], [], [], "no errors found", LOW, "no failure lines found (an excerpt may have cut them)")


# The order in which decisions are taken: the first that finds something decides. Each names the
# causes it can give; what a cause means (category, restart, wording) is policy.POLICY.
DECISIONS: tuple[Callable[[Facts, Timeline], Attribution | None], ...] = (
    _scheduler,  # 1. the scheduler ended the job (preemption, node failure, time limit: after training
    #              progress TIME_LIMIT_AFTER_PROGRESS, after the launch with no progress SETUP_HANG;
    #              SHUTDOWN_HANG when the application had said it was done)
    _stopped_from_outside,  # 2. CANCELLED: it was stopped from outside before any rank failed
    _gpu_hardware,  # 3. GPU_ERROR: a GPU hardware fault (kernel or driver report) anywhere in the log
    _node_lost,  # 4. NODE_FAIL: a launcher's agent lost the rest of the job mid-run before any rank failed
    #              on its own (a node that died mid-run passes: RESTART)
    _crash,  # 5. a crash: some rank failed on its own before anyone timed out -> the earliest such
    #          rank and its evidence's cause (a cut-off traceback, a bare exit status, a plain
    #          `error:` line or a diverged run counts only if nothing stronger does); an error's
    #          meaning and time decide its restart (a configuration or usage error, or an unreachable
    #          endpoint during setup, recurs: STOP); a failure that names no rank but its GPU names
    #          the rank driving it on one node
    _desync,  # 6. DESYNC: ranks timed out in different collectives -> the one rank whose collective
    #           differs from all the others' (a desync visible in the log recurs: STOP)
    _one_rank_first,  # 7. SLOW_RANK: ranks timed out waiting inside a one-rank-first section -> the main
    #                   rank's one-rank work (a one-rank path visible in the log recurs: STOP)
    _hang,  # 8. a hang: ranks timed out first -> SETUP_HANG (the rank every waiter fetches the
    #         communicator's id from, or the one member the waiters lack), SHUTDOWN_HANG, SLOW_RANK
    #         (one busy rank: a one-rank path recurs, STOP), WATCHDOG_HANG, the odd rank out's
    #         GPU_SLEEP / LOCK_GIL / SIGSTOP (SLOW_RANK where it is MAIN_RANK and nothing says how it
    #         stalled: the main rank's one-rank work), SLOW_RANK where no rank stands out but one timed out
    #         earlier in the collective sequence than every other (spatial.py), or HANG with no
    #         culprit (RESTART)
    _peer_lost,  # 9. peers were lost and nobody failed visibly -> a rank that died silently, else NETWORK
)
# 10. otherwise (_quiet_end): DONE when the application finished, else no errors found
