"""Flight-recorder analyzer: which ranks never joined a collective.

Each dump is read and reduced by `dumps`; the analysis merges the per-rank summaries, matches
ranks per process group by collective sequence id and never trusts `state`, `retired` or (for
gloo) `pg_status`, which do not reflect a hang there. Its answer is a `contracts.FrVerdict`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from faultloop.analyze.fr.dumps import (
    DEFAULT_PATTERN,
    INT_RE,
    TAIL,
    GroupView,
    RankSummary,
    Sig,
    find_dumps,
    read_all,
)
from faultloop.contracts import FrVerdict, SkippedFile

BUILTIN = "builtin"  # the tool name in fr.json
# Ranks kept as examples per (group, seq, signature); counts are exact, samples capped.
SAMPLE_CAP = 16
# Ops whose per-rank sizes legitimately differ, so only op type and dtype are compared.
_UNEVEN_OPS = ("all_to_all", "alltoall", "gather", "scatter", "allgather_v", "reduce_scatter_v")


@dataclass(slots=True)
class MissingRow:
    """One upstream table row: a group's latest collective and the ranks that did not enter it."""

    pg_id: str
    pg_desc: str
    op_type: str
    size: list[list[int]]
    dtype: list[str]
    collective_seq_id: int
    missing_ranks: list[int]


@dataclass(slots=True)
class Mismatch:
    """Ranks whose collective at the same seq differs from the majority's (op, size or dtype)."""

    pg_id: str
    pg_desc: str
    collective_seq_id: int
    field: str
    expected: Any
    found: Any
    ranks: list[int]


@dataclass(slots=True)
class FrResult:
    """What the analysis found: the fr.json verdict (`to_verdict`) plus diagnostic extras."""

    no_dumps: bool
    dumps_read: list[int]
    ranks_without_dump: list[int]
    skipped_files: list[SkippedFile]
    expected_ranks: list[int]
    missing_ranks: list[MissingRow]
    ranks_behind: dict[int, int]
    first_divergence: dict[str, Any] | None
    suspect_ranks: list[int]
    scope: str
    secondary_ranks: list[int] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    p2p_behind: dict[int, int] = field(default_factory=dict)
    backend: str = "unknown"
    gpus_per_node: int = 4
    segment_size: int = 32

    def to_verdict(self) -> FrVerdict:
        """The fr.json contract; what only this analyzer finds is kept as its details."""
        common = {f: getattr(self, f) for f in _VERDICT_FIELDS}
        details = {k: v for k, v in asdict(self).items() if k not in _VERDICT_FIELDS}
        details["ranks_behind"] = {str(k): v for k, v in sorted(self.ranks_behind.items())}
        details["p2p_behind"] = {str(k): v for k, v in sorted(self.p2p_behind.items())}
        return FrVerdict(**common, tool=BUILTIN, details=details)

    def to_table(self) -> str:
        """Upstream's table, one row per process group with missing ranks, then the verdict."""
        lines = ["PGID | Process Group Desc | Op Type | Size | Dtype | Missing Ranks"]
        for row in self.missing_ranks:
            lines.append(
                f"{row.pg_id} | {row.pg_desc} | {row.op_type} | {row.size} | {row.dtype} | "
                f"{_ranks_text(row.missing_ranks)}"
            )
        if self.no_dumps:
            lines.append("(no flight-recorder dumps found)")
        lines.append("")
        lines.append(f"Suspect ranks: {self.suspect_ranks} (scope: {self.scope})")
        if self.ranks_without_dump:
            lines.append(f"Ranks without dump: {_ranks_text(self.ranks_without_dump)}")
        if self.ranks_behind:
            lines.append(
                "Ranks behind (seq deficit): " + ", ".join(f"{r}:{d}" for r, d in sorted(self.ranks_behind.items()))
            )
        if self.first_divergence:
            fd = self.first_divergence
            lines.append(
                f"First divergence: pg {fd['pg_id']} ({fd['pg_desc']}) seq {fd['collective_seq_id']} {fd['op_type']}"
            )
        for mm in self.mismatches:
            lines.append(
                f"Mismatch: pg {mm.pg_id} seq {mm.collective_seq_id} {mm.field}: ranks "
                f"{_ranks_text(mm.ranks)} have {mm.found}, others {mm.expected}"
            )
        for skipped in self.skipped_files:
            lines.append(f"Skipped {skipped.file}: {skipped.error}")
        return "\n".join(lines) + "\n"


_VERDICT_FIELDS = (
    "no_dumps",
    "suspect_ranks",
    "scope",
    "dumps_read",
    "ranks_without_dump",
    "skipped_files",
    "expected_ranks",
    "secondary_ranks",
)


def _ranks_text(ranks: list[int], cap: int = 64) -> str:
    shown = ", ".join(map(str, ranks[:cap]))
    return "{" + shown + (f", ... ({len(ranks)} ranks)" if len(ranks) > cap else "") + "}"


def scope_of(ranks: Iterable[int], gpus_per_node: int, segment_size: int) -> str:
    """Narrowest unit holding every suspect: one rank, one node, one segment, or the job."""
    ranks = sorted(set(ranks))
    if not ranks:
        return "none"
    if len(ranks) == 1:
        return "rank"
    if gpus_per_node > 0 and len({r // gpus_per_node for r in ranks}) == 1:
        return "node"
    if segment_size > 0 and len({r // segment_size for r in ranks}) == 1:
        return "segment"
    return "job"


def peer_verdict(
    tool: str,
    suspects: list[int],
    read: list[int],
    expected: list[int],
    skipped: list[SkippedFile],
    gpus_per_node: int,
    segment_size: int,
    details: dict[str, Any],
) -> FrVerdict:
    """Another tool's suspects (torchfrtrace's, NVRx's) as an fr.json verdict, scoped the way ours
    is, with the ranks of the copies it read and the expected ranks that left none."""
    return FrVerdict(
        False,
        suspects,
        scope_of(suspects, gpus_per_node, segment_size),
        tool,
        dumps_read=read,
        ranks_without_dump=[r for r in expected if r not in set(read)],
        skipped_files=skipped,
        expected_ranks=expected,
        details=details,
    )


# ---- merge + analysis ----------------------------------------------------------------------


class SeqView(NamedTuple):
    """Where one rank stands in one process group: its recorded collective window."""

    first: int | None
    last: int | None
    last_p2p: int | None
    enqueued: int | None  # NCCL pg_status, only where the ring buffer holds nothing for the group

    @property
    def known_last(self) -> int | None:
        return self.last if self.last is not None else self.enqueued


@dataclass(slots=True)
class _SigCount:
    """How many ranks ran one signature at one sequence id, and some of them by name."""

    count: int
    sample: list[int]


@dataclass(slots=True)
class _Group:
    desc: str
    ranks_key: str | None = None
    views: dict[int, SeqView] = field(default_factory=dict)
    sigs: dict[int, dict[Sig, _SigCount]] = field(default_factory=dict)  # seq -> signature -> ranks
    times: dict[int, int] = field(default_factory=dict)  # seq -> earliest time_created_ns
    max_seq: int = -1


class _Merger:
    """Folds rank summaries into per-group state as they arrive; holds nothing per entry."""

    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {}
        self.texts: dict[str, list[int]] = {}
        self.read: dict[int, str] = {}
        self.skipped: list[SkippedFile] = []
        self.backends: set[str] = set()

    def add(self, item: RankSummary | SkippedFile) -> None:
        if isinstance(item, SkippedFile):
            self.skipped.append(item)
            return
        if item.rank in self.read:
            self.skipped.append(
                SkippedFile(
                    item.file, f"duplicate dump for rank {item.rank} (already read {self.read[item.rank]})", item.rank
                )
            )
            return
        self.read[item.rank] = item.file
        self.backends.add(item.backend)
        for key, text in item.ranks_texts.items():
            self.texts.setdefault(key, [int(x) for x in INT_RE.findall(text)])
        for name, view in item.groups.items():
            self._add_view(item.rank, name, view)

    def _add_view(self, rank: int, name: str, view: GroupView) -> None:
        group = self.groups.get(name)
        if group is None:
            group = self.groups[name] = _Group(view.desc)
        if not group.desc:
            group.desc = view.desc
        if group.ranks_key is None and view.ranks_key is not None:
            group.ranks_key = view.ranks_key
        group.views[rank] = SeqView(view.first_seq, view.last_seq, view.last_p2p, view.enqueued)
        for entry in view.tail:
            bucket = group.sigs.setdefault(entry.seq, {})
            slot = bucket.get(entry.sig)
            if slot is None:
                bucket[entry.sig] = _SigCount(1, [rank])
            else:
                slot.count += 1
                if len(slot.sample) < SAMPLE_CAP:
                    slot.sample.append(rank)
            if entry.time_ns and (entry.seq not in group.times or entry.time_ns < group.times[entry.seq]):
                group.times[entry.seq] = entry.time_ns
            group.max_seq = max(group.max_seq, entry.seq)
        if len(group.sigs) > 4 * TAIL:  # keep only the recent window: memory stays bounded
            floor = group.max_seq - 2 * TAIL
            for seq in [s for s in group.sigs if s < floor]:
                del group.sigs[seq]
                group.times.pop(seq, None)


def _sig_json(sig: Sig | None) -> tuple[str, list[list[int]], list[str]]:
    if sig is None:
        return "", [], []
    return sig.op, [list(s) for s in sig.sizes], list(sig.dtypes)


def _majority(bucket: dict[Sig, _SigCount]) -> Sig:
    return max(bucket, key=lambda s: bucket[s].count)


class _Divergence(NamedTuple):
    """Where a group's ranks first parted: ordered by time, then by how many ranks were missing."""

    time_ns: int
    minus_ranks: int
    pg_id: str
    seq: int
    ranks: list[int]


@dataclass
class _GroupLag:
    """One group's sequence lag: its upstream table row and what it says about each rank."""

    row: MissingRow
    behind: dict[int, int]  # rank -> collectives behind the group's front (known ranks only)
    waiting: set[int]  # ranks ahead of the slowest known rank: they wait on it
    divergence: _Divergence


@dataclass
class _Findings:
    """What every group says, merged: the inputs of the suspect ranking."""

    rows: list[MissingRow] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    behind: dict[int, int] = field(default_factory=dict)
    p2p_behind: dict[int, int] = field(default_factory=dict)
    lag_groups: dict[int, int] = field(default_factory=dict)  # rank -> groups where it lags
    waiting: set[int] = field(default_factory=set)
    divergences: list[_Divergence] = field(default_factory=list)

    def add_lag(self, lag: _GroupLag) -> None:
        self.rows.append(lag.row)
        self.waiting |= lag.waiting
        self.divergences.append(lag.divergence)
        for rank in lag.row.missing_ranks:
            self.lag_groups[rank] = self.lag_groups.get(rank, 0) + 1
        for rank, deficit in lag.behind.items():
            self.behind[rank] = max(self.behind.get(rank, 0), deficit)

    def add_p2p(self, behind: dict[int, int]) -> None:
        for rank, deficit in behind.items():
            self.p2p_behind[rank] = max(self.p2p_behind.get(rank, 0), deficit)


def _members(name: str, group: _Group, merger: _Merger, expected: set[int]) -> set[int]:
    members = set(merger.texts.get(group.ranks_key or "", ()))
    if not members:
        members = set(group.views)
        if group.desc == "default_pg" or name == "0":  # gloo: the default group spans the job
            members |= expected
    return members


def _group_lag(name: str, group: _Group, members: set[int], read: set[int], skipped: set[int]) -> _GroupLag | None:
    """The ranks behind this group's front; None when every member is level (or none recorded).

    A rank without a dump stands nowhere known (None); a read rank that never entered the group
    within its window stands before the window (-1).
    """
    lasts: dict[int, int | None] = {}
    for rank in members - skipped:
        if rank not in read:
            lasts[rank] = None
            continue
        view = group.views.get(rank)
        known = view.known_last if view else None
        lasts[rank] = known if known is not None else -1
    # The front comes from recorded entries only: pg_status merely fills in ranks whose ring
    # buffer holds nothing for this group (its counters mix in p2p ops).
    recorded = [v.last for r, v in group.views.items() if v.last is not None and r in lasts]
    if not recorded:
        return None
    front = max(recorded)
    firsts = [v.first for r, v in group.views.items() if v.first is not None and r in lasts]
    window_start = min(firsts) if firsts else front
    lagging = {r: v for r, v in lasts.items() if v is None or v < front}
    if not lagging:
        return None
    low = min((v for v in lagging.values() if v is not None and v >= 0), default=None)
    waiting = {r for r, v in lasts.items() if v is not None and v >= 0 and (low is None or v > low)}
    behind = {r: front - v if v >= 0 else front - window_start + 1 for r, v in lagging.items() if v is not None}
    op, size, dtype = _sig_json(_majority(group.sigs[front]) if front in group.sigs else None)
    row = MissingRow(name, group.desc, op, size, dtype, front, sorted(lagging))
    seq = low + 1 if low is not None else window_start if -1 in lagging.values() else front
    first_missing = sorted(r for r, v in lagging.items() if v is None or v < seq)
    divergence = _Divergence(group.times.get(seq, 1 << 62), -len(first_missing), name, seq, first_missing)
    return _GroupLag(row, behind, waiting, divergence)


def _p2p_lag(group: _Group) -> dict[int, int]:
    """Ranks behind in point-to-point ops (weaker: p2p counters only align in symmetric pipelines)."""
    p2p = {r: v.last_p2p for r, v in group.views.items() if v.last_p2p is not None}
    if len(p2p) < 2:
        return {}
    top = max(p2p.values())
    return {rank: top - last for rank, last in p2p.items() if last < top}


def _reference(group: _Group, seq: int, bucket: dict[Sig, _SigCount]) -> Sig:
    """The collective the ranks should have run at `seq`: the majority's. Where the ranks split
    evenly (two ranks, or halves), the one the group ran at the nearest earlier sequence id where
    its ranks agreed: a desync is a rank leaving the pattern the others keep. torch's fr_trace
    instead measures every rank against the first rank it reads, so a desync of that rank blames
    all the others (a limitation its own code notes)."""
    top = max(slot.count for slot in bucket.values())
    tied = [sig for sig, slot in bucket.items() if slot.count == top]
    if len(tied) > 1:
        for earlier in sorted((s for s in group.sigs if s < seq), reverse=True):
            agreed = group.sigs[earlier]
            if len(agreed) == 1:
                (sig,) = agreed
                if sig in tied:
                    return sig
                break
    return tied[0]


def _group_mismatches(name: str, group: _Group) -> list[Mismatch]:
    """Ranks whose collective at a sequence id differs from the reference (`_reference`) in op,
    dtype or size."""
    found = []
    for seq in sorted(group.sigs):
        bucket = group.sigs[seq]
        if len(bucket) < 2:
            continue
        ref = _reference(group, seq, bucket)
        for sig, slot in bucket.items():
            if sig == ref:
                continue
            field_name = "op_type" if sig.op != ref.op else "dtype" if sig.dtypes != ref.dtypes else "size"
            if field_name == "size" and any(k in ref.op for k in _UNEVEN_OPS):
                continue
            index = {"op_type": 0, "size": 1, "dtype": 2}[field_name]
            found.append(
                Mismatch(
                    name, group.desc, seq, field_name, _sig_json(ref)[index], _sig_json(sig)[index], sorted(slot.sample)
                )
            )
    return found


def _suspects(found: _Findings, read: set[int], without_dump: set[int]) -> tuple[list[int], list[int]]:
    """(suspects, strongest first; secondary ranks): laggards nobody waits on, odd signatures,
    and ranks that left no dump where most did."""
    mismatch_ranks: dict[int, int] = {}
    for mm in found.mismatches:
        for rank in mm.ranks:
            mismatch_ranks[rank] = mismatch_ranks.get(rank, 0) + 1
    # A missing dump is evidence only against ranks that did dump (the CPU crash case); when
    # most or all ranks left none, absence says nothing about who failed first.
    absent = without_dump if read and len(without_dump) < len(read) else set()
    lagging_all = set(found.lag_groups) - (without_dump - absent)
    # Beside a rank that died without a dump, a rank one collective behind was still on its way
    # to the collective the dead rank never joined when the launcher stopped the job.
    in_transit = {r for r in lagging_all if found.behind.get(r) == 1} if absent else set()
    primary = (lagging_all - found.waiting - in_transit) | set(mismatch_ranks) | absent
    if not primary and lagging_all:  # every laggard waits on another (a cycle): keep the worst
        worst = max(found.behind.get(r, 0) for r in lagging_all)
        primary = {r for r in lagging_all if found.behind.get(r, 0) == worst}
    if not primary and found.p2p_behind:
        primary = set(found.p2p_behind)

    def strength(rank: int) -> tuple[int, int, int, int]:
        return (-mismatch_ranks.get(rank, 0), -found.lag_groups.get(rank, 0), -found.behind.get(rank, 0), rank)

    return sorted(primary, key=strength), sorted(((lagging_all & found.waiting) | in_transit) - primary)


def _first_divergence(found: _Findings, merger: _Merger) -> dict[str, Any] | None:
    if found.divergences:
        first = min(found.divergences)
        group = merger.groups[first.pg_id]
        sig = _majority(group.sigs[first.seq]) if first.seq in group.sigs else None
        return {
            "pg_id": first.pg_id,
            "pg_desc": group.desc,
            "collective_seq_id": first.seq,
            "op_type": _sig_json(sig)[0],
            "ranks": first.ranks,
        }
    if found.mismatches:
        mm = min(found.mismatches, key=lambda m: (m.collective_seq_id, m.pg_id))
        sig = _majority(merger.groups[mm.pg_id].sigs[mm.collective_seq_id])
        return {
            "pg_id": mm.pg_id,
            "pg_desc": mm.pg_desc,
            "collective_seq_id": mm.collective_seq_id,
            "op_type": sig.op,
            "ranks": mm.ranks,
        }
    return None


def _analyze(merger: _Merger, world_size: int | None, gpus_per_node: int, segment_size: int) -> FrResult:
    read = set(merger.read)
    skipped = {s.rank for s in merger.skipped if s.rank is not None} - read
    expected: set[int] = read | skipped
    for group in merger.groups.values():
        if group.ranks_key in merger.texts:
            expected.update(merger.texts[group.ranks_key])
    if world_size:
        expected.update(range(world_size))
    without_dump = expected - read - skipped

    found = _Findings()
    for name, group in merger.groups.items():
        lag = _group_lag(name, group, _members(name, group, merger, expected), read, skipped)
        if lag is not None:
            found.add_lag(lag)
        found.add_p2p(_p2p_lag(group))
        found.mismatches += _group_mismatches(name, group)
    suspects, secondary = _suspects(found, read, without_dump)
    backends = merger.backends - {"unknown"}
    return FrResult(
        no_dumps=not read,
        dumps_read=sorted(read),
        ranks_without_dump=sorted(without_dump),
        skipped_files=sorted(merger.skipped, key=lambda s: s.file),
        expected_ranks=sorted(expected),
        missing_ranks=sorted(found.rows, key=lambda r: (len(r.pg_id), r.pg_id)),
        ranks_behind=found.behind,
        first_divergence=_first_divergence(found, merger),
        suspect_ranks=suspects,
        scope=scope_of(suspects, gpus_per_node, segment_size),
        secondary_ranks=secondary,
        mismatches=found.mismatches,
        p2p_behind=found.p2p_behind,
        backend=",".join(sorted(backends)) or "unknown",
        gpus_per_node=gpus_per_node,
        segment_size=segment_size,
    )


def analyze(
    paths: Iterable[str],
    *,
    world_size: int | None = None,
    gpus_per_node: int = 4,
    segment_size: int = 32,
    workers: int | None = None,
) -> FrResult:
    """Analyze the given dump files (one per rank); unreadable files are skipped and reported."""
    merger = _Merger()
    for item in read_all(list(paths), workers):
        merger.add(item)
    return _analyze(merger, world_size, gpus_per_node, segment_size)


def analyze_dir(fr_path: str, pattern: str = DEFAULT_PATTERN, **kwargs: Any) -> FrResult:
    return analyze(find_dumps(fr_path, pattern), **kwargs)
