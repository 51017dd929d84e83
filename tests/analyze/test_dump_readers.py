"""Pickles that cost stack or time in C, where no check of their bytes short of simulating them
sees it coming, are refused per dump by the reader processes (`analyze/fr/readers.py`): the
dumps beside them are read, and each refusal is one line naming the file and the bound. And a
dump that would build more than its memory bound is refused with that bound."""

from __future__ import annotations

import json
import pickle
import resource
import subprocess
import sys
from pathlib import Path

from faultloop.analyze.fr import analysis as fr
from faultloop.analyze.fr import dumps, reading
from faultloop.analyze.kinds.torchfrtrace import sanitize
from fr_synth import make_dump

PROTO2 = b"\x80\x02"


def readers_cpu_s() -> float:
    """CPU seconds of this process's reaped children: the readers (load does not inflate it)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def deep_tuple_key(depth: int) -> bytes:
    """{((...(),),): None}: a dict key nested `depth` deep; hashing it recurses in C (no limit)."""
    return PROTO2 + b"}" + b")" + b"\x85" * depth + b"N" + b"s."


def shared_halves_key(levels: int) -> bytes:
    """A dict key t = (t', t') `levels` times over, each half the same object through the memo:
    a few bytes a level, 2**levels calls to hash it."""
    body = b")"
    for slot in range(levels):
        body += b"q" + bytes([slot]) + b"h" + bytes([slot]) + b"\x86"  # BINPUT, BINGET, TUPLE2
    return PROTO2 + b"}" + body + b"N" + b"s."


def colliding_keys(count: int) -> bytes:
    """A dict of `count` int keys k * (2**61 - 1), which all hash to 0: inserting is quadratic."""
    body = b"}("
    for k in range(1, count + 1):
        key = (k * ((1 << 61) - 1)).to_bytes(10, "little", signed=True)
        body += b"\x8a" + bytes([len(key)]) + key + b"N"  # LONG1, NONE
    return PROTO2 + body + b"u."


def test_dumps_that_cost_c_stack_or_time_are_refused_each_in_one_line(tmp_path: Path) -> None:
    for rank in (0, 1, 5):
        (tmp_path / f"_dump_{rank}").write_bytes(pickle.dumps(make_dump(6, 40, 1000 - (rank == 5)), protocol=2))
    hostile = {2: deep_tuple_key(300_000), 3: shared_halves_key(40), 4: colliding_keys(20_000)}
    for rank, data in hostile.items():
        (tmp_path / f"_dump_{rank}").write_bytes(data)
    bound = sum(reading.cpu_bound(len(hostile[rank])) + 1 for rank in (3, 4))  # + 1: RLIMIT_CPU's whole seconds
    before = readers_cpu_s()
    result = fr.analyze_dir(str(tmp_path), world_size=6, workers=1)  # one reader: the next goes on
    assert readers_cpu_s() - before < bound + 1  # unbounded, one ran for ever, one for about a minute
    assert result.dumps_read == [0, 1, 5] and result.suspect_ranks == [5]
    why = {s.rank: s.error for s in result.skipped_files}
    assert sorted(why) == [2, 3, 4]
    for rank, error in why.items():
        assert error.startswith(f"{tmp_path}/_dump_{rank}: refused: ") and "\n" not in error, error
    assert why[2].endswith("its reader was killed by SIGSEGV while reading it")
    assert "s of CPU time to read (its time bound)" in why[3]
    assert "s of CPU time to read (its time bound)" in why[4]
    # the copies torchfrtrace and nvrx_fr read are made by the same readers
    copies = tmp_path / "copies"
    copies.mkdir()
    ranks, skipped, _ = dumps.rewrite_dumps([str(tmp_path / f"_dump_{r}") for r in (1, 2, 5)], copies, sanitize)
    assert ranks == [1, 5] and sorted(p.name for p in copies.iterdir()) == ["_dump_1", "_dump_5"]
    assert [s.error for s in skipped] == [why[2]]


def test_a_dump_that_builds_more_than_its_memory_bound_is_refused_with_it(tmp_path: Path) -> None:
    """200,000 empty sets (one byte each, 200 bytes of memory each) in a dump's entries: a valid
    pickle the walk passes, and more than 64 bytes a byte. The bound counts new address space, so
    it is read by `faultloop fr` in a process of its own (this one has free heap to build in)."""
    sets = b"\x8f" * 200_000  # EMPTY_SET
    path = tmp_path / "_dump_0"
    path.write_bytes(b"\x80\x04}(\x8c\x07entries](" + sets + b"e\x8c\x09pg_config}u.")
    size = path.stat().st_size
    argv = [sys.executable, "-m", "faultloop.cli", "fr", "--fr-path", str(tmp_path), "--format", "json"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
    assert [s["error"] for s in json.loads(proc.stdout)["skipped_files"]] == [
        f"{path}: refused: needs more than {reading.memory_bound(size) >> 20} MiB to read "
        f"(the memory bound of a {size}-byte dump)"
    ]
    small = tmp_path / "small" / "_dump_0"
    small.parent.mkdir()
    small.write_bytes(b"\x80\x04}(\x8c\x07entries](" + sets[:1000] + b"e\x8c\x09pg_config}u.")
    assert len(dumps.load_dump(str(small))["entries"]) == 1000  # the same shape, within its bound
