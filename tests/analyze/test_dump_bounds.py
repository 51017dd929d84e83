"""Dumps are read within stated bounds: the opcode walk refuses hostile and broken pickles before
anything is built, with one line naming the file and the bound, in a child whose own accounting
shows memory flat."""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import pytest

from bounded import run_bounded
from conftest import NVRX_FR, TESTS, needs_nvrx_dumps
from faultloop.analyze.fr import analysis as fr
from faultloop.analyze.fr import dumps, pickle_bounds
from faultloop.analyze.fr.dumps import load_dump
from faultloop.analyze.kinds.torchfrtrace import sanitize

HOSTILE = TESTS / "data" / "hostile_dumps"
FLAT_KIB = 16 << 10  # growth of the child's peak RSS allowed per refused dump (16 MiB)
TIME_BOUND_S = 60  # the whole child, imports included; before the walk one dump took 33 s

_SETUP = (
    "import pickle, tempfile\n"
    "from faultloop.analyze.fr.dumps import load_dump, summarize\n"
    "warm = tempfile.NamedTemporaryFile(suffix='_dump_0', delete=False)\n"
    "warm.write(pickle.dumps({'entries': [{'a': 1}], 'pg_config': {}}, protocol=2)); warm.close()\n"
    "load_dump(warm.name)\n"
)


def hostile_files() -> list[Path]:
    return sorted(HOSTILE.glob("_dump_*")) + sorted(HOSTILE.glob("fuzz_*"))


def test_hostile_dumps_are_refused_fast_with_memory_flat() -> None:
    files = hostile_files()
    assert len(files) >= 13
    # fr's reading of each file (torchfrtrace's and nvrx_fr's copies: test_fuzz_dumps, test_analyzer_limits)
    results = run_bounded(_SETUP, "(lambda path: summarize(path, 'bounds'))", "ValueError", files, TIME_BOUND_S)
    for result in results:
        assert result.outcome.startswith("refused:"), result
        message = result.outcome.split(": ", 1)[1]
        assert "\n" not in message and message.startswith(result.path), message
        assert result.grew_kib < FLAT_KIB, result
        assert result.seconds < 0.25, result  # well under a second (22 ms the slowest, idle): a bound
    by_name = {Path(r.path).name: r.outcome for r in results}
    assert "LONG_BINPUT at byte 3: memo slot 805306368 out of bounds (at most 256 here)" in by_name["_dump_0"]
    assert "BINBYTES8 at byte 2: declared length 100000000000" in by_name["_dump_3"]
    assert "more than 1000 nested MARKs" in by_name["_dump_8"]
    assert "truncated" in by_name["_dump_10"]
    assert "nested deeper than the interpreter's recursion limit" in by_name["_dump_11"]
    assert "malformed entries" in by_name["_dump_12"]


@pytest.mark.parametrize(
    ("data", "bound"),
    [
        (b"\x80\x02]q\x00h\x01.", None),  # a GET of a slot never stored: the unpickler's own refusal
        (b"\x80\x02N" + b"r" + struct.pack("<I", 257) + b".", r"memo slot 257 out of bounds \(at most 256 here\)"),
        (b"\x80\x02N" + b"r" + struct.pack("<I", 256) + b"Nr" + struct.pack("<I", 258) + b".", "memo slot 258"),
        (b"\x80\x02N" + b"p999\n.", "PUT at byte 3: memo slot 999 out of bounds"),
        (b"\x80\x02" + b"\xff", "unknown opcode 0xff"),
        (b"\x80\x02" + b"e.", "no MARK to pop to"),
        (b"\x80\x02" + b"L12", "no end of line"),
        (b"\x80\x02" + b"N" * 50 + b".", "more than 40 objects"),
        (b"\x80\x02cposix\nsystem\n.", "refused global posix.system"),
    ],
)
def test_each_bound_names_itself(data: bytes, bound: str | None) -> None:
    if bound is None:
        pickle_bounds.check(data, max_objects=40)
        with pytest.raises(pickle.UnpicklingError):
            pickle.loads(data)
        return
    with pytest.raises(pickle_bounds.PickleBoundError, match=bound):
        pickle_bounds.check(data, max_objects=40)


def test_real_and_python_pickles_pass_the_walk(tmp_path: Path) -> None:
    """Every protocol Python writes, and torch's own (the NCCL fixtures), is within the bounds."""
    dump = {
        "version": "2.10",
        "pg_config": {"0": {"ranks": "[0, 1]"}},
        "entries": [{"a": i, "b": "x" * i, "c": i * 0.5} for i in range(300)],
    }
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        data = pickle.dumps(dump, protocol=protocol)
        pickle_bounds.check(data)
        path = tmp_path / f"_dump_{protocol}"
        path.write_bytes(data)
        assert load_dump(str(path)) == dump
    for path in sorted(NVRX_FR.glob("*/_dump_*")):
        pickle_bounds.check(path.read_bytes())


def test_a_cell_of_hostile_dumps_is_refusals_not_a_crash(tmp_path: Path) -> None:
    """fr reads the whole folder: every file is a skipped file naming its bound; no dump, no crash."""
    result = fr.analyze_dir(str(HOSTILE), world_size=13)
    assert sorted(s.rank for s in result.skipped_files) == sorted(
        int(p.name.rsplit("_", 1)[1]) for p in HOSTILE.glob("_dump_*")
    )
    assert all(s.error.startswith(str(HOSTILE)) for s in result.skipped_files)
    assert result.suspect_ranks == []


@needs_nvrx_dumps
def test_real_dumps_read_as_before() -> None:
    result = fr.analyze_dir(str(NVRX_FR / "gpu_error_2nd"))
    assert result.skipped_files == []
    assert result.suspect_ranks == [9, 14]


def test_the_copies_for_other_tools_refuse_them_too(tmp_path: Path) -> None:
    """torchfrtrace and nvrx_fr read rewritten copies: none is written of a hostile file."""
    files = [str(p) for p in sorted(HOSTILE.glob("_dump_*"))]
    ranks, skipped, _ = dumps.rewrite_dumps(files, tmp_path, sanitize)
    assert ranks == [] and not list(tmp_path.iterdir())
    assert sorted(s.file for s in skipped) == sorted(files)
    assert all(s.error.startswith(s.file + ": ") and "\n" not in s.error for s in skipped)
