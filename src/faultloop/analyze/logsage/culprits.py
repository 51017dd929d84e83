"""Culprits: which rank the evidence singles out where several ranks came to grief. The first to
fail by torchrun's clock, a hang's odd rank out (the one that never timed out, stalled outside a
collective, behind in enqueued work or named missing by a barrier), the one rank in another
collective, the rank doing one-rank work, the first to lose its connections, the rank every
waiter fetches a store key from, the rank whose GPU a rank-less failure names. Where the log
cannot tell candidates apart, none is named."""

from __future__ import annotations

from faultloop.analyze.logsage.confidence import HIGH, LOW, MEDIUM, join_ranks
from faultloop.analyze.logsage.context import STORE_FETCH_RE
from faultloop.analyze.logsage.facts import Evidence, Facts
from faultloop.analyze.logsage.ranks import labels_are_nodes, seen_ranks
from faultloop.analyze.logsage.records import in_collective
from faultloop.analyze.logsage.spatial import only_unreported
from faultloop.analyze.logsage.timeline import Timeline, first_line, ranks_with
from faultloop.analyze.logsage.vocab import (
    ORIGINS,
    PEER_LOST,
    STACK_DUMP,
    STALL,
    TIMEOUT,
)


def first_by_failure_time(facts: Facts, ranks: list[int]) -> list[int]:
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


def hang_culprits(facts: Facts, tl: Timeline) -> tuple[list[int], str, str]:
    """In a hang the victims time out; the culprit is the odd one out that did not. Several
    candidates the log cannot tell apart are not named."""
    if facts.barrier_missing:
        return (
            sorted(facts.barrier_missing),
            "ranks a barrier or a harness (monitoredBarrier, Horovod's stall inspector, torch's test harness) "
            "named as missing",
            HIGH if len(facts.barrier_missing) == 1 else MEDIUM,  # several: which one stalled first is not said
        )
    timed_out = {r for r in tl.symptom_at if r is not None}
    known = set(range(facts.world_size)) | seen_ranks(facts) | set(facts.exits) | ranks_with(facts, ORIGINS)
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
            f"{first_line(facts, [TIMEOUT])})"
        )
        if narrowed:
            return quiet, why, MEDIUM
        if inferred & set(quiet) or not facts.world_size:
            if len(timed_out) < 2:  # one victim in view says little about who else there was
                return (
                    [],
                    f"only rank {join_ranks(timed_out)} shows a timeout; the log does not show the others",
                    MEDIUM,
                )
            return quiet, why + "; the world size is inferred from the ranks in the log", MEDIUM
        return quiet, why, HIGH
    if len(quiet) > 1:
        return [], f"ranks {join_ranks(quiet)} never reported a timeout; the log does not single one out", MEDIUM
    if outside and len(outside) < len(facts.main_stacks):
        return outside, f"every rank timed out, but only {outside} stalled outside a collective (stack dumps)", MEDIUM
    if facts.enqueued and len(set(facts.enqueued.values())) > 1:
        low = min(facts.enqueued.values())
        behind = sorted(r for r, v in facts.enqueued.items() if v == low)
        return behind, f"ranks {behind} are behind the others in enqueued collectives ({low})", MEDIUM
    return [], "every rank in the log timed out; it cannot tell which one stalled", MEDIUM


def odd_collective(facts: Facts) -> tuple[int, str, str] | None:
    """(rank, its call, everyone else's) where one rank's traceback ends in another torch.distributed
    call than every other rank's (three ranks at least: of two, neither is the odd one out)."""
    return _odd_one_out(facts.waited_in)


def odd_first_collective(facts: Facts) -> tuple[int, str, str] | None:
    """(rank, its collective, everyone else's) where one rank first timed out on another collective
    than every other rank, in torch < 1.10's reports, which number none: a rank's first report is
    its oldest collective still pending, which no peer can have finished without it, so ranks
    whose first ones differ issued different collectives (the odd one took another code path)."""
    return _odd_one_out(facts.unnumbered_ops)


def _odd_one_out(calls: dict[int, str]) -> tuple[int, str, str] | None:
    """(rank, its call, everyone else's) where one rank's call differs from all the others', which
    agree (three ranks at least: of two, neither is the odd one out)."""
    if len(calls) < 3 or len(set(calls.values())) != 2:
        return None
    odd = [r for r, call in calls.items() if sum(c == call for c in calls.values()) == 1]
    if len(odd) != 1:
        return None
    rank = odd[0]
    return rank, calls[rank], next(c for r, c in calls.items() if r != rank)


def odd_collective_out(facts: Facts, desynced: dict[int, set[tuple[str, str | None]]]) -> list[int]:
    """The rank whose timed-out collective differs from all the others' at the same SeqNum, where
    the others agree on one (the desync's culprit: the rank that took another code path)."""
    for seq in sorted(desynced):
        groups = [ranks for (s, _, _), ranks in facts.collective_ranks.items() if s == seq]
        alone = [ranks for ranks in groups if len(ranks) == 1]
        if len(groups) == 2 and len(alone) == 1 and sum(map(len, groups)) >= 3:
            return sorted(alone[0])
    return []


def busy_rank(facts: Facts, tl: Timeline, busy: Evidence, stalled: list[int]) -> tuple[list[int], str, str] | None:
    """The rank doing one-rank work: the one that printed it (unless it timed out itself: then
    its work was done and held nobody up), else the hang's odd one out, else rank 0 (where
    evaluation, checkpoint writing and preprocessing run by convention). Work no rank is named
    for is rank 0's by that convention: where rank 0 timed out, it was done."""
    timed_out = {r for r in tl.symptom_at if r is not None}
    if busy.rank is not None:
        return (
            None
            if busy.rank in timed_out
            else ([busy.rank], MEDIUM, f"rank {busy.rank} printed it and never timed out")
        )
    if 0 in timed_out:  # by convention rank 0's work: it waited after it, so it was done
        return None
    if len(stalled) == 1:
        return stalled, MEDIUM, f"rank {stalled[0]} is the only rank that did not time out"
    return [0], LOW, "rank 0 did not time out, and one-rank work runs on rank 0 by convention"


def first_to_lose_peers(facts: Facts, tl: Timeline) -> int | None:
    """The rank whose connections failed first: it reported a lost peer while the job was still
    making progress (before any stall report, stack dump or timeout: a job stuck first loses
    connections as its ranks give up) and before any other rank reported anything, ended or was stopped (a
    peer that had died or failed first would show before it); other ranks came to grief after
    it, and no rank died by a signal of its own."""
    lost = sorted((ev.line, r) for (k, r), ev in facts.first.items() if k == PEER_LOST and r is not None)
    if not lost or any(ex.signal and not ex.stopped for ex in facts.exits.values()):
        return None
    line, rank = lost[0]
    if silent_in_a_hang(facts, tl, rank) is not None:
        return None
    others = [ln for r, ln in tl.symptom_at.items() if r is not None and r != rank]
    others += [ln for r, ln in tl.stopped_at.items() if r != rank]
    others += [ex.line for r, ex in facts.exits.items() if r != rank]
    stalled = first_line(facts, [STALL, STACK_DUMP, TIMEOUT])  # its own timeout too: then it waited, not lost
    # other ranks in view that came to grief after it (a lone reporter in an excerpt says nothing)
    return rank if others and line < min(others) and line < min(facts.stop_line, stalled) else None


def silent_in_a_hang(facts: Facts, tl: Timeline, lost_by: int) -> int | None:
    """The rank that said nothing while every other rank of the world timed out or lost a peer,
    where ranks other than `lost_by` timed out: then `lost_by`'s lost connection is a peer that
    gave up after its own timeout closing it (printed first by the order the ranks' reports reached
    the log, not by when they happened), and the silent rank is the one they all waited on."""
    said = {r for r in (*tl.symptom_at, *tl.origin_at, *tl.weak_at) if r is not None}
    timed_out = {r for (kind, r) in facts.first if kind == TIMEOUT and r is not None}
    if not timed_out - {lost_by}:
        return None
    known = set(range(facts.world_size)) | seen_ranks(facts) | said
    return only_unreported(set(range(max(known) + 1)), said)  # ranks below a rank in the log exist


def store_publisher(facts: Facts) -> tuple[int, str] | None:
    """(rank, why) of the rank every waiter fetches its communicator's id from, where they timed out
    fetching it (context.STORE_FETCH_RE): a group's rank 0 publishes the id of each of its
    communicators on the store, the lower rank of a point-to-point pair the pair's; a publisher
    that never published it never got there. Named only for the default group (a waiter's rank in
    its message is its rank in the log, where the log says), where every waiter names the same
    publisher and the publisher is not among them."""
    waiters: set[int] = set()
    publishers: set[int] = set()
    for (kind, rank), ev in facts.first.items():
        if kind != TIMEOUT or not (fetch := STORE_FETCH_RE.search(ev.text)):
            continue
        waiter = int(fetch.group(1))
        if rank is not None and rank != waiter:
            return None  # a subgroup's ranks: its rank 0 is not the job's
        waiters.add(waiter)
        publishers.add(int(fetch.group(2) or 0))
    if len(publishers) != 1 or publishers & waiters:
        return None
    rank = publishers.pop()
    return rank, (
        f"rank{'s' if len(waiters) > 1 else ''} {join_ranks(sorted(waiters))} timed out fetching the "
        f"communicator's id that rank {rank} publishes on the store: rank {rank} never got there"
    )


def device_rank(facts: Facts) -> tuple[int, str] | None:
    """(rank, the assumption) of the process whose GPU the rank-less failures name (torch's
    `device='cuda:1'`, context.DEVICE_NAMED_RE): one GPU per process, a GPU's index is its process's
    local rank, which is the rank on one node. Only where the log shows one node (no node labels,
    one host at most) and the failures name one GPU that the world size, where known, allows."""
    gpus = {
        facts.named_device[ev.line]
        for (_, rank), ev in facts.first.items()
        if rank is None and ev.line in facts.named_device
    }
    if len(gpus) != 1 or len(facts.hosts) > 1 or labels_are_nodes(facts):
        return None
    gpu = gpus.pop()
    if facts.world_size and gpu >= facts.world_size:
        return None
    return (
        gpu,
        f"the failure names GPU {gpu} (cuda:{gpu}), read as local rank {gpu} and so rank {gpu} (one node assumed)",
    )
