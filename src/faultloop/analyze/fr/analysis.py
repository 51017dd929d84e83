"""Flight-recorder analyzer: which ranks never joined a collective, read safely and at scale.

Dumps are untrusted files, so they are read with an unpickler that refuses every global (only
plain containers and scalars can be built). Each dump is reduced to a small per-rank summary right
after it is read (in worker processes when there are many), so memory stays bounded at tens of
thousands of ranks. The analysis matches ranks per process group by collective sequence id and
never trusts `state`, `retired` or (for gloo) `pg_status`, which do not reflect a hang there.
"""

from __future__ import annotations

import argparse
import fnmatch
import gc
import hashlib
import json
import os
import pickle
import re
import sys
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_all_start_methods, get_context
from typing import Any, NamedTuple

from faultloop.plan import layout

DEFAULT_PATTERN = "_dump_*"
# Collectives kept per (rank, group) for cross-rank comparison: enough to cover the lag of a hang
# (one to a few dozen collectives) while keeping each summary small.
TAIL = 32
# Below this many files, reading in-process is faster than starting workers.
PARALLEL_MIN_FILES = 48
CHUNK = 32
# Ranks kept as examples per (group, seq, signature); counts are exact, samples capped.
SAMPLE_CAP = 16
# Ops whose per-rank sizes legitimately differ, so only op type and dtype are compared.
_UNEVEN_OPS = ("all_to_all", "alltoall", "gather", "scatter", "allgather_v", "reduce_scatter_v")
_RANK_IN_NAME = re.compile(r"(\d+)(?:\.json)?$")
_INT = re.compile(r"-?\d+")


class Sig(NamedTuple):
    """What a collective was: op, input sizes, dtypes (ranks must agree on it at each seq id)."""

    op: str
    sizes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]


class TailEntry(NamedTuple):
    """One of a rank's last collectives in a group."""

    seq: int
    sig: Sig
    time_ns: int


class UnsafeDumpError(pickle.UnpicklingError):
    """A dump asked for a Python global: it could run code if loaded plainly."""


class _PlainUnpickler(pickle.Unpickler):
    """Builds only what pickle opcodes build without globals: dicts, lists, tuples, scalars."""

    def find_class(self, module: str, name: str) -> Any:
        raise UnsafeDumpError(f"refused global {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafeDumpError("refused persistent id")


def load_dump(path: str) -> dict[str, Any]:
    """Read one dump (torch pickle or JSON) without executing anything; errors name the file."""
    try:
        with open(path, "rb") as fh:
            head = fh.peek(1)[:1]
            if not head:
                raise ValueError(f"{path}: empty file")
            if path.endswith(".json") or head == b"{":
                dump = json.load(fh)
            else:
                # Straight from the buffered file: the C unpickler reads it as fast as
                # pickle.loads, while a BytesIO wrapper costs 2.5x. GC off: unpickling builds
                # millions of containers the cyclic GC would rescan for nothing.
                gc_was_on = gc.isenabled()
                gc.disable()
                try:
                    dump = _PlainUnpickler(fh).load()
                finally:
                    if gc_was_on:
                        gc.enable()
    except UnsafeDumpError as exc:
        raise UnsafeDumpError(f"{path}: unsafe pickle: {exc}") from None
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        IndexError,
        KeyError,
        AttributeError,
        MemoryError,
        OverflowError,
        RecursionError,
    ) as exc:
        if str(exc).startswith(path):
            raise
        raise ValueError(f"{path}: not a readable dump ({type(exc).__name__}: {exc})") from None
    is_dump = (
        isinstance(dump, dict)
        and ("entries" in dump or "pg_config" in dump)
        and isinstance(dump.get("entries", []), list)
        and isinstance(dump.get("pg_config", {}), dict)
    )
    if not is_dump:
        raise ValueError(f"{path}: not a flight-recorder dump (no entries/pg_config)")
    return dump


# ---------------------------------------------------------------- per-rank reduction (workers)


@dataclass(slots=True)
class GroupView:
    """One rank's view of one process group, reduced from its dump."""

    desc: str
    first_seq: int | None = None
    last_seq: int | None = None
    last_p2p: int | None = None
    enqueued: int | None = None  # NCCL pg_status last_enqueued_collective, None when untrusted
    ranks_key: str | None = None  # digest of the pg_config ranks text
    tail: list[TailEntry] = field(default_factory=list)


@dataclass(slots=True)
class RankSummary:
    """What the analysis needs from one dump; everything else is dropped right after reading."""

    rank: int
    file: str
    backend: str
    groups: dict[str, GroupView]
    ranks_texts: dict[str, str]  # digest -> ranks text, sent once per worker per analysis


@dataclass(slots=True)
class SkippedFile:
    """A file that could not be used (unsafe, truncated, empty, foreign); `rank` from its name."""

    file: str
    error: str
    rank: int | None = None


_sent_texts: tuple[str, set[str]] = ("", set())


def _rank_from_name(path: str) -> int | None:
    match = _RANK_IN_NAME.search(os.path.basename(path))
    return int(match.group(1)) if match else None


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _sig_of(entry: dict[str, Any], intern: dict[Sig, Sig]) -> Sig:
    name = str(entry.get("profiling_name", ""))
    op = name.split(":", 1)[1] if ":" in name else name
    sizes = tuple(tuple(int(d) for d in s) for s in entry.get("input_sizes") or ())
    dtypes = tuple(str(d) for d in entry.get("input_dtypes") or ())
    sig = Sig(op, sizes, dtypes)
    return intern.setdefault(sig, sig)


def summarize(path: str, token: str) -> RankSummary:
    """Read one dump and reduce it; `token` scopes the once-per-worker ranks-text cache."""
    global _sent_texts
    if _sent_texts[0] != token:
        _sent_texts = (token, set())
    sent = _sent_texts[1]
    dump = load_dump(path)
    rank = _rank_from_name(path)
    if rank is None:
        rank = _as_int(dump.get("rank"))
    if rank is None:
        raise ValueError(f"{path}: no rank in file name or dump")
    entries = dump.get("entries") or []
    names = [str(e.get("profiling_name", "")) for e in entries[:1] if isinstance(e, dict)]
    backend = (
        names[0].split(":", 1)[0] if names and ":" in names[0] else ("nccl" if "nccl_version" in dump else "unknown")
    )

    config: dict[str, Any] = dump.get("pg_config") or {}
    texts: dict[str, str] = {}
    groups: dict[str, GroupView] = {}

    def ranks_key(cfg: Any) -> str | None:
        if not isinstance(cfg, dict):
            return None
        text = str(cfg.get("ranks", ""))
        if not _INT.search(text):
            return None
        key = hashlib.blake2b(text.encode(), digest_size=12).hexdigest()
        if key not in sent:
            sent.add(key)
            texts[key] = text
        return key

    for name, cfg in config.items():
        if name == "":
            continue  # gloo writes its config under '' while entries say '0': resolved below
        desc = str(cfg.get("desc", "")) if isinstance(cfg, dict) else ""
        groups[str(name)] = GroupView(desc=desc, ranks_key=ranks_key(cfg))

    try:
        index_to_name = _reduce_entries(entries, config, groups, ranks_key)
    except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
        raise ValueError(f"{path}: malformed entries ({type(exc).__name__}: {exc})") from None

    if backend != "gloo":
        _apply_nccl_status(dump.get("pg_status"), list(config), index_to_name, groups)
    return RankSummary(rank, path, backend, groups, texts)


def _reduce_entries(
    entries: list[Any], config: dict[str, Any], groups: dict[str, GroupView], ranks_key: Any
) -> dict[str, str]:
    """Fold a rank's entries into per-group views; returns the pg index -> name pairs seen.

    Written as comprehensions and builtins over plain columns because this runs for every entry
    of every rank (65 M entries at 32k ranks x 2000) and must stay close to unpickling speed.
    """
    names = [e["process_group"][0] for e in entries]
    p2p_flags = [bool(e["is_p2p"]) for e in entries]
    index_to_name = {str(i): n for i, n in set(zip([e["pg_id"] for e in entries], names, strict=False))}
    descs = {}
    for e, n in zip(entries, names, strict=False):
        if n not in descs:
            descs[n] = str(e["process_group"][1]) if len(e["process_group"]) > 1 else ""
    coll: dict[str, list[int]] = {}
    p2p: dict[str, list[int]] = {}
    if len(descs) == 1 and not any(p2p_flags):  # the common case: one group, collectives only
        coll[names[0]] = [e["collective_seq_id"] for e in entries]
    else:
        for e, n, is_p2p in zip(entries, names, p2p_flags, strict=False):
            if is_p2p:
                p2p.setdefault(n, []).append(e["p2p_seq_id"])
            else:
                coll.setdefault(n, []).append(e["collective_seq_id"])
    for name, desc in descs.items():
        view = groups.get(name)
        if view is None:
            view = groups[name] = GroupView(desc=desc)
            if "" in config and (name == "0" or desc == "default_pg"):
                view.ranks_key = ranks_key(config[""])
        if not view.desc:
            view.desc = desc
        if name in coll:
            seqs = coll[name]
            view.first_seq, view.last_seq = int(min(seqs)), int(max(seqs))
        if name in p2p:
            view.last_p2p = int(max(p2p[name]))
    # the last TAIL collectives of each group, newest first, for cross-rank comparison
    need = {n: min(TAIL, len(v)) for n, v in coll.items()}
    left = sum(need.values())
    intern: dict[Sig, Sig] = {}
    for e, n, is_p2p in zip(reversed(entries), reversed(names), reversed(p2p_flags), strict=False):
        if left == 0:
            break
        if is_p2p or need[n] == 0:
            continue
        need[n] -= 1
        left -= 1
        groups[n].tail.append(
            TailEntry(int(e["collective_seq_id"]), _sig_of(e, intern), _as_int(e.get("time_created_ns")) or 0)
        )
    return index_to_name


def _apply_nccl_status(
    status: Any, config_names: list[str], index_to_name: dict[str, str], groups: dict[str, GroupView]
) -> None:
    """Use NCCL's pg_status for groups where a rank recorded nothing in its ring buffer.

    pg_status is keyed by the local pg index, pg_config by the global pg name; both count up in
    creation order, so the i-th index (ascending) is the i-th name (numerically ascending). That
    mapping is used only if it agrees with every (index, name) pair the entries show. For gloo this
    is never called: gloo counts a hung collective as completed.
    """
    if not isinstance(status, dict) or len(status) != len(config_names):
        return
    try:
        indices = sorted(status, key=int)
        config_names = sorted(config_names, key=int)
    except (TypeError, ValueError):
        return
    mapping = dict(zip(map(str, indices), config_names, strict=False))
    if any(mapping.get(idx) != name for idx, name in index_to_name.items()):
        return
    for idx, name in mapping.items():
        view = groups.get(name)
        info = status.get(idx) if idx in status else status.get(int(idx))
        if view is not None and view.last_seq is None and view.last_p2p is None and isinstance(info, dict):
            view.enqueued = _as_int(info.get("last_enqueued_collective"))


def _summarize_chunk(paths: list[str], token: str) -> list[RankSummary | SkippedFile]:
    out: list[RankSummary | SkippedFile] = []
    for path in paths:
        try:
            out.append(summarize(path, token))
        except (OSError, ValueError, pickle.UnpicklingError) as exc:
            out.append(SkippedFile(path, str(exc), _rank_from_name(path)))
    return out


# ---------------------------------------------------------------- results


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
    """The fr.json contract (docs/architecture.md) plus diagnostic extras."""

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

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ranks_behind"] = {str(k): v for k, v in sorted(self.ranks_behind.items())}
        data["p2p_behind"] = {str(k): v for k, v in sorted(self.p2p_behind.items())}
        return data

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


# ---------------------------------------------------------------- merge + analysis (parent)


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
            self.texts.setdefault(key, [int(x) for x in _INT.findall(text)])
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


def _group_mismatches(name: str, group: _Group) -> list[Mismatch]:
    """Ranks whose collective at a sequence id differs from the majority's in op, dtype or size."""
    found = []
    for seq in sorted(group.sigs):
        bucket = group.sigs[seq]
        if len(bucket) < 2:
            continue
        ref = _majority(bucket)
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


# ---------------------------------------------------------------- discovery + entry points


def find_dumps(fr_path: str, pattern: str = DEFAULT_PATTERN) -> list[str]:
    """Dump files under a directory, or matching a prefix path like upstream's `DIR/_dump_`."""
    if os.path.isdir(fr_path):
        directory = fr_path
    else:
        directory, prefix = os.path.split(fr_path)
        directory = directory or "."
        pattern = prefix + "*"
    if not os.path.isdir(directory):
        return []
    return sorted(
        os.path.join(directory, name)
        for name in os.listdir(directory)
        if fnmatch.fnmatch(name, pattern) and os.path.isfile(os.path.join(directory, name))
    )


def _read_all(paths: list[str], workers: int | None) -> Iterator[RankSummary | SkippedFile]:
    token = os.urandom(8).hex()
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if workers <= 1 or len(paths) < PARALLEL_MIN_FILES:
        yield from _summarize_chunk(paths, token)
        return
    chunks = [paths[i : i + CHUNK] for i in range(0, len(paths), CHUNK)]
    # fork: workers start in milliseconds and need no importable __main__ (forkserver/spawn
    # re-run the caller's main module); they only run the pure reduction above.
    method = "fork" if "fork" in get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context(method)) as pool:
        for chunk in pool.map(_summarize_chunk, chunks, [token] * len(chunks)):
            yield from chunk


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
    for item in _read_all(list(paths), workers):
        merger.add(item)
    return _analyze(merger, world_size, gpus_per_node, segment_size)


def analyze_dir(fr_path: str, pattern: str = DEFAULT_PATTERN, **kwargs: Any) -> FrResult:
    return analyze(find_dumps(fr_path, pattern), **kwargs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="faultloop fr", description=__doc__.splitlines()[0])
    parser.add_argument("--fr-path", required=True, help="dump directory, or a prefix path like DIR/_dump_")
    parser.add_argument("-p", "--pattern", default=DEFAULT_PATTERN, help="file name glob (default %(default)s)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument("--segment-size", type=int, default=32)
    parser.add_argument("--world-size", type=int, default=None, help="expected ranks 0..N-1 (else from pg_config)")
    parser.add_argument("--workers", type=int, default=None, help="reader processes (default: usable cores)")
    parser.add_argument("--output-json", help="also write fr.json here (atomically)")
    parser.add_argument("--output-text", help="also write the table here (atomically)")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.fr_path) and not os.path.isdir(os.path.dirname(args.fr_path) or "."):
        print(f"faultloop fr: no such dump folder: {args.fr_path}", file=sys.stderr)
        return 2
    result = analyze_dir(
        args.fr_path,
        args.pattern,
        world_size=args.world_size,
        gpus_per_node=args.gpus_per_node,
        segment_size=args.segment_size,
        workers=args.workers,
    )
    layout.emit_result(
        result.to_table(),
        result.to_json(),
        text_path=args.output_text,
        json_path=args.output_json,
        stdout_format=args.format,
    )
    return 0
