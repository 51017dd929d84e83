"""Which rank differs: per-rank profiles of a log's lines, read where no row named a culprit.

Ranks of one job print alike; the one that does not is where to look. The rank missing from a
list every other rank is in (`ranks [0, 1, 3] reached the barrier`), the rank stuck at an earlier
step or collective sequence than all the others, the only rank that states a failure or warns at
all, the only one silent at the end while the others still print, the only one that reported
nothing of the failure while every other did: each names a culprit candidate,
inferred, never more than medium confidence (the reason says which profile singled it out).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from faultloop.analyze.logsage.facts import Facts
from faultloop.analyze.logsage.generic import warns
from faultloop.analyze.logsage.ranks import resolve_rank, seen_ranks
from faultloop.analyze.logsage.temporal import TailLine

LIST_MAX = 4096  # the most ranks a list may name to be read as one
# a list of ranks a line names: `ranks [0, 1, 3]`, `ranks: 0,1,3`, `ranks {0, 1, 3}`
RANK_LIST_RE = re.compile(r"(?i)\branks?\b[^\[\]{}()\n]{0,40}?[\[{(]?\s*((?:\d{1,6}\s*,\s*){2,}\d{1,6})\s*[\]})]?")
SILENT_LINES = 20  # the last lines of the log in which the other ranks still print


def missing_from_list(lines: Iterable[TailLine], world: int) -> tuple[int, TailLine] | None:
    """The one rank a list of all but one of the world's ranks leaves out, and the line of the list."""
    for t in lines:
        for m in RANK_LIST_RE.finditer(t.words):
            ranks = {int(r) for r in re.findall(r"\d+", m.group(1))[:LIST_MAX]}
            size = max(world, max(ranks) + 1)
            absent = set(range(size)) - ranks
            if len(absent) == 1 and len(ranks) == size - 1 and size > 2:
                return absent.pop(), t
    return None


def behind(steps: dict[int, int]) -> int | None:
    """The one rank whose last step is earlier than every other rank's, where the others agree."""
    if len(steps) < 3:
        return None
    values = sorted(set(steps.values()))
    if len(values) != 2:
        return None
    low = [r for r, s in steps.items() if s == values[0]]
    return low[0] if len(low) == 1 else None


def behind_in_sequence(facts: Facts) -> tuple[int, int, int] | None:
    """(rank, its SeqNum, the next lowest) of the one rank whose first timed-out collective comes
    earlier in the sequence than every other rank's: the others went on past it, so it stopped
    issuing collectives while they did (a one-rank path), where at least two ranks timed out."""
    first: dict[int, int] = {}
    for (seq, _, _), ranks in facts.collective_ranks.items():
        for rank in ranks:
            first[rank] = min(first.get(rank, seq), seq)
    if len(first) < 2:
        return None
    ordered = sorted(first.items(), key=lambda rs: rs[1])
    (rank, seq), (_, next_seq) = ordered[0], ordered[1]
    return (rank, seq, next_seq) if seq < next_seq else None


def only_one(ranks: Iterable[int | None], printing: set[int]) -> int | None:
    """The only rank among `ranks`, where at least one other rank printed in the log too."""
    named = {r for r in ranks if r is not None}
    if len(named) == 1 and len(printing - named) >= 1:
        return named.pop()
    return None


def only_warning(facts: Facts, lines: list[TailLine]) -> int | None:
    """The only rank whose lines warn (or worse), where other ranks print too."""
    warned = [resolve_rank(facts, t.source, t.words) for t in lines if warns(t.raw)]
    return only_one(warned, printing_ranks(facts, lines)) if None not in warned else None


def only_unreported(world: set[int], reported: set[int]) -> int | None:
    """The only rank of the world (three at least) that reported nothing of the failure while every
    other rank did: in a hang, the one rank the others waited on."""
    quiet = world - reported
    return next(iter(quiet)) if len(world) >= 3 and len(quiet) == 1 else None


def printing_ranks(facts: Facts, lines: Iterable[TailLine]) -> set[int]:
    """The ranks the census saw and those the tail's lines name."""
    tail_ranks = {r for t in lines if (r := resolve_rank(facts, t.source, "")) is not None}
    return seen_ranks(facts) | tail_ranks


def silent(facts: Facts, lines: list[TailLine]) -> int | None:
    """The only rank of the world that prints nothing in the log's last lines while every other
    rank does."""
    last = [resolve_rank(facts, t.source, "") for t in lines[-SILENT_LINES:]]
    if None in last:
        return None
    return only_unreported(printing_ranks(facts, lines), {r for r in last if r is not None})
