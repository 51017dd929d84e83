"""Reading flight-recorder dumps safely and at scale: each pickle's opcode stream checked against
its bytes before anything is built (`pickle_bounds`: memo slots, declared lengths, nesting, object
count), a restricted unpickler that refuses every global (dumps are untrusted files: only plain
containers and scalars can be built), and each dump reduced to a small per-rank summary right
after it is read (in worker processes when there are many), so memory stays bounded at tens of
thousands of ranks.
"""

from __future__ import annotations

import fnmatch
import gc
import hashlib
import io
import json
import os
import pickle
import re
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_all_start_methods, get_context
from pathlib import Path
from typing import Any, NamedTuple

from faultloop.analyze.fr import pickle_bounds
from faultloop.contracts import SkippedFile

DEFAULT_PATTERN = "_dump_*"
# Collectives kept per (rank, group) for cross-rank comparison: enough to cover the lag of a hang
# (one to a few dozen collectives) while keeping each summary small.
TAIL = 32
# Below this many files, reading in-process is faster than starting workers.
PARALLEL_MIN_FILES = 48
CHUNK = 32
# A dump is read whole before it is checked. torch's default ring buffer (2000 entries) writes
# about 350 KB; 256 MiB is a buffer of more than a million entries.
MAX_DUMP_BYTES = 256 << 20
_RANK_IN_NAME = re.compile(r"(\d+)(?:\.json)?$")
INT_RE = re.compile(r"-?\d+")


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
    """Read one dump (torch pickle or JSON) without executing anything and within the bounds of
    `pickle_bounds` and MAX_DUMP_BYTES; every refusal is one line naming the file."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_DUMP_BYTES:
                raise ValueError(f"{path}: refused: larger than {MAX_DUMP_BYTES >> 20} MiB")
            data = fh.read(size)  # read(n) allocates n up front: the file's size, not the bound
        if not data:
            raise ValueError(f"{path}: empty file")
        if path.endswith(".json") or data[:1] == b"{":
            dump = json.loads(data)
        else:
            pickle_bounds.check(data)
            # A buffered reader over the checked bytes: the C unpickler reads it as fast as
            # pickle.loads (a bare BytesIO costs 3x). GC off: unpickling builds millions of
            # containers the cyclic GC would rescan for nothing.
            gc_was_on = gc.isenabled()
            gc.disable()
            try:
                dump = _PlainUnpickler(io.BufferedReader(io.BytesIO(data))).load()
            finally:
                if gc_was_on:
                    gc.enable()
    except pickle_bounds.UnsafePickleError as exc:
        raise UnsafeDumpError(f"{path}: unsafe pickle: {exc}") from None
    except UnsafeDumpError as exc:
        raise UnsafeDumpError(f"{path}: unsafe pickle: {exc}") from None
    except pickle_bounds.PickleBoundError as exc:
        raise ValueError(f"{path}: refused before unpickling: {exc}") from None
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        IndexError,
        KeyError,
        AttributeError,
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
    ranks_texts: dict[str, str]  # digest -> ranks text, sent once per worker per analysis


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


def _too_deep(path: str) -> str:
    """Nesting built through memo references, which the opcode walk cannot bound, meets the
    interpreter's recursion limit where the dump is read further: a refusal like the walk's."""
    return f"{path}: refused: nested deeper than the interpreter's recursion limit ({sys.getrecursionlimit()})"


def summarize(path: str, token: str) -> RankSummary:
    """Read one dump and reduce it; `token` scopes the once-per-worker ranks-text cache."""
    try:
        return _summarize(path, token)
    except RecursionError:
        raise ValueError(_too_deep(path)) from None


def _summarize(path: str, token: str) -> RankSummary:
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


def rewrite_dumps(
    paths: list[str], dest: Path, normalise: Callable[[dict[str, Any]], list[str]] | None = None
) -> tuple[list[int], list[SkippedFile], list[str]]:
    """Copies another tool may `pickle.load` (it would execute an untrusted original): each dump read
    by the restricted unpickler, optionally normalised, and pickled again as `_dump_<rank>` in
    `dest`. The ranks copied, the files left out with why, and the normalisation's notes."""
    ranks: list[int] = []
    skipped: list[SkippedFile] = []
    notes: list[str] = []
    for path in paths:
        match = _RANK_IN_NAME.search(os.path.basename(path))
        if match is None:
            skipped.append(SkippedFile(path, "no rank in the file name"))
            continue
        try:
            dump = load_dump(path)
        except (ValueError, pickle.UnpicklingError) as exc:
            skipped.append(SkippedFile(path, str(exc)))
            continue
        try:
            changes = normalise(dump) if normalise is not None else []
            copy = pickle.dumps(dump, protocol=pickle.HIGHEST_PROTOCOL)
        except RecursionError:
            skipped.append(SkippedFile(path, _too_deep(path)))
            continue
        except (TypeError, ValueError, AttributeError, KeyError) as exc:  # a dump of odd shape
            skipped.append(SkippedFile(path, f"{path}: refused: cannot be normalised ({type(exc).__name__}: {exc})"))
            continue
        notes += [f"{os.path.basename(path)}: {note}" for note in changes]
        rank = int(match.group(1))
        (dest / f"_dump_{rank}").write_bytes(copy)
        ranks.append(rank)
    return sorted(ranks), skipped, notes
