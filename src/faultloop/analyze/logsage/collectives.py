"""Timed-out collectives, counted across ranks: which SeqNum, op and size each rank's watchdog
reported (ranks that disagree at one SeqNum desynchronized), the earliest SeqNum, and the group's
size where a gather states it. Shared by the scan (a line read in full) and the flood memo (a
repeat counted without being read)."""

from __future__ import annotations

from faultloop.analyze.logsage.context import DEFAULT_GROUP_RE, GATHERS, SCATTERS, WORK_RE
from faultloop.analyze.logsage.facts import MAX_EVIDENCE, Facts


def collective(facts: Facts, text: str, rank: int | None) -> None:
    """Which collective a rank timed out on: ranks that disagree at one SeqNum desynchronized."""
    work = WORK_RE.search(text)
    if work:
        count_collective(facts, work.group(1, 2, 3, 4), text, rank)


def count_collective(facts: Facts, work: tuple[str, ...], text: str, rank: int | None, start: int = 0) -> None:
    """One timed-out collective: WORK_RE's groups (SeqNum, op, NumelIn, NumelOut; an absent one
    None or '') read from `text[start:]` (a flood's line is cut behind its prefixes only where a
    gather's words are read)."""
    number, op, numel_in, numel_out = work
    if not number:  # torch < 1.10 numbers no collective: each rank's first timed-out one is compared
        if rank is not None and len(facts.unnumbered_ops) < MAX_EVIDENCE:
            facts.unnumbered_ops.setdefault(rank, op)
        return
    seq, size = int(number), numel_in or None
    if len(facts.collectives) < MAX_EVIDENCE:
        facts.collectives.setdefault(seq, set()).add((op, size))
        if rank is not None:
            facts.collective_ranks.setdefault((seq, op, size), set()).add(rank)
    if facts.first_seq is None or seq < facts.first_seq:
        facts.first_seq = seq
    if op in GATHERS or op in SCATTERS:  # only these state the group's size
        facts.world_size = max(facts.world_size, _group_size(op, int(numel_in or 0), int(numel_out or 0), text[start:]))


def _group_size(op: str, numel_in: int, numel_out: int, text: str) -> int:
    """The default group's size, where a timed-out gather or reduce-scatter of it states its
    input and output sizes (0 where it does not)."""
    if not (numel_in and numel_out and DEFAULT_GROUP_RE.search(text)):
        return 0
    big, small = (numel_out, numel_in) if op in GATHERS else (numel_in, numel_out)
    return big // small if big % small == 0 else 0
