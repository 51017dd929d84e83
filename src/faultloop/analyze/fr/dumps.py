"""Flight-recorder dumps reduced to what the analysis needs: each dump read within its bounds
(`reading`: no code runs, memory and size bounded, the restricted unpickler) in reader processes
that bound its CPU time (`readers`), and reduced there to a small per-rank summary right after
it is read, so memory stays bounded at tens of thousands of ranks. The columns the reduction
hashes or compares must hold scalars (the structural check of what was built).
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import pickle
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import NoneType
from typing import Any, NamedTuple

from faultloop.analyze.fr import readers
from faultloop.analyze.fr.reading import UnsafeDumpError as UnsafeDumpError
from faultloop.analyze.fr.reading import load_dump as load_dump
from faultloop.analyze.fr.reading import read_dump
from faultloop.contracts import SkippedFile

DEFAULT_PATTERN = "_dump_*"
# Collectives kept per (rank, group) for cross-rank comparison: enough to cover the lag of a hang
# (one to a few dozen collectives) while keeping each summary small.
TAIL = 32
_RANK_IN_NAME = re.compile(r"(\d+)(?:\.json)?$")
INT_RE = re.compile(r"-?\d+")
# What the columns the reduction hashes or compares may hold: scalars, whose hash and comparison
# cost no recursion (a tuple's hash recurses through its items, in C, with no depth limit).
_SCALARS = frozenset({str, int, float, bool, NoneType, bytes})


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


# ---- per-rank reduction (workers) ---------------------------------------------------------


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
    ranks_texts: dict[str, str]  # digest -> ranks text, sent once per reader per analysis


_sent_texts: tuple[str, set[str]] = ("", set())


def _rank_from_name(path: str) -> int | None:
    match = _RANK_IN_NAME.search(os.path.basename(path))
    return int(match.group(1)) if match else None


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _sig_of(entry: dict[str, Any], intern: dict[Sig, Sig]) -> Sig:
    name = str(entry.get("profiling_name", ""))
    op = name.split(":", 1)[1] if ":" in name else name
    sizes = tuple(tuple(int(d) for d in s) for s in entry.get("input_sizes") or ())
    dtypes = tuple(str(d) for d in entry.get("input_dtypes") or ())
    sig = Sig(op, sizes, dtypes)
    return intern.setdefault(sig, sig)


def summarize(path: str, token: str) -> RankSummary:
    """Read one dump and reduce it (under its memory bound); `token` scopes the once-per-reader
    ranks-text cache."""
    return read_dump(path, partial(_summarize, path, token))


def _summarize(path: str, token: str, dump: dict[str, Any]) -> RankSummary:
    global _sent_texts
    if _sent_texts[0] != token:
        _sent_texts = (token, set())
    sent = _sent_texts[1]
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
        if not INT_RE.search(text):
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
    except (KeyError, TypeError, IndexError, AttributeError, ValueError, OverflowError) as exc:
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
    names = _scalars([e["process_group"][0] for e in entries], "process group names")
    p2p_flags = [bool(e["is_p2p"]) for e in entries]
    pg_ids = _scalars([e["pg_id"] for e in entries], "pg_id")
    index_to_name = {str(i): n for i, n in set(zip(pg_ids, names, strict=False))}
    descs = {}
    for n in dict.fromkeys(names):  # each group's desc from its first entry
        group = entries[names.index(n)]["process_group"]
        descs[n] = str(group[1]) if len(group) > 1 else ""
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
            seqs = _scalars(coll[name], "collective_seq_id")
            view.first_seq, view.last_seq = int(min(seqs)), int(max(seqs))
        if name in p2p:
            view.last_p2p = int(max(_scalars(p2p[name], "p2p_seq_id")))
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


def _scalars(column: list[Any], what: str) -> list[Any]:
    """The column, if it holds only scalars: it is about to be hashed or compared (a C-speed check)."""
    if not set(map(type, column)) <= _SCALARS:
        raise TypeError(f"{what} must be scalars")
    return column


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


def _summary_or_refusal(token: str, path: str) -> RankSummary | SkippedFile:
    try:
        return summarize(path, token)
    except (OSError, ValueError, pickle.UnpicklingError) as exc:
        return SkippedFile(path, str(exc), _rank_from_name(path))


def _refusal(path: str, why: str) -> SkippedFile:
    return SkippedFile(path, why, _rank_from_name(path))


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


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


def read_all(paths: list[str], workers: int | None) -> Iterator[RankSummary | SkippedFile]:
    """Each dump's summary, or why it was skipped, in the order of `paths` (`readers`)."""
    token = os.urandom(8).hex()
    read = partial(_summary_or_refusal, token)
    yield from readers.read_each(paths, read, _refusal, usable_cores() if workers is None else workers)


def rewrite_dumps(
    paths: list[str],
    dest: Path,
    normalise: Callable[[dict[str, Any]], list[str]] | None = None,
    workers: int | None = None,
) -> tuple[list[int], list[SkippedFile], list[str]]:
    """Copies another tool may `pickle.load` (it would execute an untrusted original): each dump read
    within its bounds by the restricted unpickler, optionally normalised, and pickled again as
    `_dump_<rank>` in `dest`, in reader processes like `read_all`. The ranks copied, the files
    left out with why, and the normalisation's notes."""
    ranks: list[int] = []
    skipped: list[SkippedFile] = []
    notes: list[str] = []
    copy = partial(_copy, dest, normalise)
    for item in readers.read_each(paths, copy, _refusal, usable_cores() if workers is None else workers):
        if isinstance(item, SkippedFile):
            skipped.append(item)
        else:
            ranks.append(item[0])
            notes += item[1]
    return sorted(ranks), skipped, notes


def _copy(
    dest: Path, normalise: Callable[[dict[str, Any]], list[str]] | None, path: str
) -> tuple[int, list[str]] | SkippedFile:
    """One dump's copy in `dest` (in a reader): its rank and the normalisation's notes."""
    match = _RANK_IN_NAME.search(os.path.basename(path))
    if match is None:
        return SkippedFile(path, "no rank in the file name")

    def normalised(dump: dict[str, Any]) -> tuple[list[str], bytes]:
        try:
            changes = normalise(dump) if normalise is not None else []
            return changes, pickle.dumps(dump, protocol=pickle.HIGHEST_PROTOCOL)
        except (TypeError, ValueError, AttributeError, KeyError) as exc:  # a dump of odd shape
            raise ValueError(f"{path}: refused: cannot be normalised ({type(exc).__name__}: {exc})") from None

    try:
        changes, data = read_dump(path, normalised)
    except (OSError, ValueError, pickle.UnpicklingError) as exc:
        return SkippedFile(path, str(exc))
    rank = int(match.group(1))
    (dest / f"_dump_{rank}").write_bytes(data)
    return rank, [f"{os.path.basename(path)}: {note}" for note in changes]
