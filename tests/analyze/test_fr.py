"""Flight-recorder analyzer: real NCCL fixtures, real gloo jobs, hostile files, scopes, CLI."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import NVRX_FR, needs_nvrx_dumps, run_gloo_job
from faultloop.analyze.fr import analysis as fr
from faultloop.analyze.fr.dumps import UnsafeDumpError, load_dump

ROOT = Path(__file__).resolve().parents[2]
DATA = NVRX_FR


def copy_case(case: str, dest: Path) -> Path:
    shutil.copytree(DATA / case, dest)
    for path in dest.iterdir():
        path.chmod(0o644)
    return dest


def plain_load(path: Path) -> dict[str, Any]:
    """Fixture files are our own trusted test data; the analyzer never loads this way."""
    with open(path, "rb") as fh:
        return pickle.load(fh)


# ---------------------------------------------------------------- real NCCL dumps


@needs_nvrx_dumps
@pytest.mark.parametrize("case", ["gpu_error_2nd", "lock_gil_1st"])
def test_nccl_fixtures_name_both_injected_ranks(case: str) -> None:
    truth = (DATA / case / "fault_injection.log").read_text()
    assert "Fault ranks: [9, 14]" in truth
    result = fr.analyze_dir(str(DATA / case))
    assert result.dumps_read == list(range(16))
    assert result.expected_ranks == list(range(16))
    assert result.suspect_ranks == [9, 14]
    assert result.scope == "segment"  # 9 and 14 sit on different nodes of one 32-rank segment
    assert set(result.ranks_behind) == {9, 14}
    assert result.skipped_files == [] and result.ranks_without_dump == []
    rows = {row.pg_id: row.missing_ranks for row in result.missing_ranks}
    assert rows["72"] == [9, 14] and rows["37"] == [9] and rows["38"] == [14]
    assert result.first_divergence is not None and result.first_divergence["pg_id"] == "72"
    table = result.to_table()
    assert table.splitlines()[0] == "PGID | Process Group Desc | Op Type | Size | Dtype | Missing Ranks"
    assert "72 | EXPERT_MODEL_PARALLEL_GROUP | all_to_all |" in table


@needs_nvrx_dumps
def test_lock_gil_deficit_comes_from_nccl_pg_status() -> None:
    # ranks 9 and 14 recorded no entries at all; their pg_status says where they stopped
    result = fr.analyze_dir(str(DATA / "lock_gil_1st"))
    assert result.ranks_behind == {9: 5, 14: 5}


@needs_nvrx_dumps
def test_json_dumps_are_read(tmp_path: Path) -> None:
    for path in (DATA / "gpu_error_2nd").glob("_dump_*"):
        (tmp_path / f"{path.name}.json").write_text(json.dumps(plain_load(path)))
    result = fr.analyze_dir(str(tmp_path))
    assert result.dumps_read == list(range(16))
    assert result.suspect_ranks == [9, 14]


# ---------------------------------------------------------------- hostile and broken files


class _Exploit:
    def __init__(self, sentinel: Path) -> None:
        self.sentinel = sentinel

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.system, (f"touch {self.sentinel}",)


@needs_nvrx_dumps
def test_malicious_pickle_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    dumps = copy_case("gpu_error_2nd", tmp_path / "dumps")
    sentinel = tmp_path / "pwned"
    evil = {"version": "2.9", "pg_config": {}, "entries": [_Exploit(sentinel)]}
    (dumps / "_dump_3").write_bytes(pickle.dumps(evil))
    with pytest.raises(UnsafeDumpError, match=r"_dump_3.*refused global (posix|os)\.system"):
        load_dump(str(dumps / "_dump_3"))
    result = fr.analyze_dir(str(dumps))
    assert not sentinel.exists()
    assert [s.rank for s in result.skipped_files] == [3]
    assert "unsafe pickle" in result.skipped_files[0].error
    assert 3 not in result.dumps_read and 3 not in result.ranks_without_dump
    assert result.suspect_ranks == [9, 14]


@needs_nvrx_dumps
def test_truncated_empty_and_foreign_files_are_skipped(tmp_path: Path) -> None:
    dumps = copy_case("lock_gil_1st", tmp_path / "dumps")
    data = (dumps / "_dump_2").read_bytes()
    (dumps / "_dump_2").write_bytes(data[: len(data) // 2])
    (dumps / "_dump_5").write_bytes(b"")
    (dumps / "_dump_6").write_text("Traceback (most recent call last):\n  not a dump\n")
    (dumps / "_dump_7").write_bytes(pickle.dumps(["a", "list", "not", "a", "dump"]))
    result = fr.analyze_dir(str(dumps))
    assert sorted(s.rank for s in result.skipped_files) == [2, 5, 6, 7]
    assert all(s.file in s.error for s in result.skipped_files)
    assert "empty file" in next(s.error for s in result.skipped_files if s.rank == 5)
    assert result.dumps_read == [r for r in range(16) if r not in (2, 5, 6, 7)]
    assert result.suspect_ranks == [9, 14]


def test_parallel_and_serial_reading_agree(tmp_path: Path) -> None:
    from fr_synth import generate

    generate(str(tmp_path), 96, 50, hung={37}, missing={90})
    (tmp_path / "_dump_5").write_bytes(b"\x80\x04garbage")
    serial = fr.analyze_dir(str(tmp_path), workers=1)
    parallel = fr.analyze_dir(str(tmp_path), workers=2)
    assert serial.to_verdict().to_json() == parallel.to_verdict().to_json()
    # a rank one collective behind, beside a rank that left no dump, was on its way to the
    # collective the dumpless rank never joined: the absent rank is the suspect
    assert serial.suspect_ranks == [90] and serial.secondary_ranks == [37]
    assert serial.ranks_without_dump == [90] and serial.ranks_behind == {37: 1}
    assert serial.scope == "rank"


def test_a_rank_behind_with_every_dump_present_is_the_suspect(tmp_path: Path) -> None:
    from fr_synth import generate

    generate(str(tmp_path), 96, 50, hung={37}, missing=set())
    result = fr.analyze_dir(str(tmp_path), workers=1)
    assert (result.suspect_ranks, result.scope, result.ranks_behind) == ([37], "rank", {37: 1})


def test_op_mismatch_names_the_odd_rank(tmp_path: Path) -> None:
    from fr_synth import make_dump

    for rank in range(4):
        dump = make_dump(4, 10, 500)
        if rank == 2:
            dump["entries"][-1]["input_dtypes"] = ["BFloat16"]
        (tmp_path / f"_dump_{rank}").write_bytes(pickle.dumps(dump))
    result = fr.analyze_dir(str(tmp_path))
    assert result.suspect_ranks == [2]
    assert [(m.field, m.collective_seq_id, m.ranks, m.found) for m in result.mismatches] == [
        ("dtype", 500, [2], ["BFloat16"])
    ]


@pytest.mark.parametrize("odd", [0, 1])
def test_an_even_split_is_read_against_the_groups_earlier_collectives(tmp_path: Path, odd: int) -> None:
    """Two ranks, one issuing a barrier where the other runs the all-reduce every earlier step
    ran (a desync): the split is even, so the rank that left the group's pattern is the odd one,
    whichever rank's dump is read first."""
    from fr_synth import make_dump

    for rank in range(2):
        dump = make_dump(2, 10, 500)
        if rank == odd:
            dump["entries"][-1].update(profiling_name="nccl:barrier", input_sizes=[[1]], output_sizes=[[1]])
        (tmp_path / f"_dump_{rank}").write_bytes(pickle.dumps(dump))
    result = fr.analyze_dir(str(tmp_path), workers=1)
    assert [(m.field, m.ranks, m.expected, m.found) for m in result.mismatches] == [
        ("op_type", [odd], "all_reduce", "barrier")
    ]
    assert result.suspect_ranks == [odd]


# ---------------------------------------------------------------- scope, no dumps, CLI


@pytest.mark.parametrize(
    ("ranks", "scope"),
    [
        ([], "none"),
        ([5], "rank"),
        ([4, 7], "node"),
        ([3, 4], "segment"),
        ([0, 31], "segment"),
        ([31, 32], "job"),
        ([7, 7], "rank"),
    ],
)
def test_scope_boundaries(ranks: list[int], scope: str) -> None:
    assert fr.scope_of(ranks, gpus_per_node=4, segment_size=32) == scope


def test_scope_uses_given_node_and_segment_sizes() -> None:
    assert fr.scope_of([4, 7], gpus_per_node=2, segment_size=8) == "segment"
    assert fr.scope_of([9, 14], gpus_per_node=8, segment_size=32) == "node"


def test_no_dumps_is_a_result(tmp_path: Path) -> None:
    result = fr.analyze_dir(str(tmp_path), world_size=4)
    assert result.no_dumps and result.scope == "none" and result.suspect_ranks == []
    assert result.ranks_without_dump == [0, 1, 2, 3]
    out = subprocess.run(
        [sys.executable, "-m", "faultloop.cli.main", "fr", "--fr-path", str(tmp_path / "_dump_"), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["no_dumps"] is True  # a folder without dumps is a result, not an error


@pytest.mark.parametrize("name", ["checkpoints", "a_file"])
def test_a_missing_folder_or_a_file_is_refused_in_one_line(tmp_path: Path, name: str) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    path = tmp_path / name
    out = subprocess.run(
        [sys.executable, "-m", "faultloop.cli.main", "fr", "--fr-path", str(path)], capture_output=True, text=True
    )
    assert out.returncode == 2 and out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert line.startswith("faultloop fr: ") and str(path) in line


@needs_nvrx_dumps
def test_cli_prefix_path_and_outputs(tmp_path: Path) -> None:
    out_json, out_text = tmp_path / "a" / "fr.json", tmp_path / "a" / "fr.txt"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "faultloop.cli.main",
            "fr",
            "--fr-path",
            str(DATA / "gpu_error_2nd" / "_dump_"),
            "--gpus-per-node",
            "8",
            "--output-json",
            str(out_json),
            "--output-text",
            str(out_text),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout == out_text.read_text()
    data = json.loads(out_json.read_text())
    assert data["suspect_ranks"] == [9, 14] and data["scope"] == "node"
    assert data["ranks_behind"] == {"9": 11, "14": 11}
    for key in (
        "no_dumps",
        "dumps_read",
        "ranks_without_dump",
        "skipped_files",
        "expected_ranks",
        "missing_ranks",
        "first_divergence",
    ):
        assert key in data
    assert sorted(os.listdir(tmp_path / "a")) == ["fr.json", "fr.txt"]  # no temp files left


# ---------------------------------------------------------------- real gloo jobs


@pytest.mark.slow
def test_gloo_hang_names_the_stalled_rank(gloo_hang: Path) -> None:
    dumps = sorted(p.name for p in gloo_hang.glob("_dump_*"))
    assert dumps == ["_dump_0", "_dump_1", "_dump_2", "_dump_3"]
    raw = plain_load(gloo_hang / "_dump_1")
    assert "" in raw["pg_config"]  # the gloo key mismatch the analyzer must bridge
    assert all(e["retired"] for e in raw["entries"])  # gloo's state lies; only seq ids tell
    result = fr.analyze_dir(str(gloo_hang))
    assert result.backend == "gloo"
    assert result.expected_ranks == [0, 1, 2, 3]
    assert result.suspect_ranks == [1] and result.scope == "rank"
    assert result.ranks_behind == {1: 1}
    assert [row.missing_ranks for row in result.missing_ranks] == [[1]]


@pytest.mark.slow
def test_gloo_crash_absence_of_dump_is_evidence(tmp_path: Path) -> None:
    run_gloo_job(tmp_path, "crash")
    assert not (tmp_path / "_dump_1").exists()
    result = fr.analyze_dir(str(tmp_path))
    assert result.dumps_read == [0, 2, 3]
    assert result.ranks_without_dump == [1]
    assert result.suspect_ranks == [1] and result.scope == "rank"
