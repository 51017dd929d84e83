"""The records that cross a process edge: each written by its writer is read back whole by its
reader, and bad input is one error naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faultloop.contracts import (
    ADOPTED_WORKLOAD,
    DIMENSIONS,
    FR_PREFIX,
    SCORED,
    FrVerdict,
    Grade,
    LogVerdict,
    Manifest,
    ManifestError,
    Reads,
    RecordError,
    RunRecord,
    ScoreRecord,
    read_cell_scores,
    read_index,
    read_score_records,
    read_score_tsv,
    tsv_columns,
    write_cell_scores,
    write_index,
    write_score_tables,
)
from faultloop.core.cell import Cell


def manifest(**fields: object) -> Manifest:
    values: dict[str, object] = {
        "job_id": "1",
        "workload": ADOPTED_WORKLOAD,
        "fault_type": "SIGKILL",
        "fault_rank": 1,
        "fault_iter": 5,
        "nodes": 2,
        "gpus_per_node": 4,
        "world_size": 8,
        "state": "UNKNOWN",
        "main_log": None,
        "launch_out": None,
        "fault_fired": False,
        "run_valid": False,
        "invalid_reason": "x",
    }
    return Manifest(**(values | fields))  # type: ignore[arg-type]


# ---- job.json -----------------------------------------------------------------------------------


def test_the_manifest_states_stay_strict():
    data = manifest().to_json()
    assert Manifest.from_json(data).state == "UNKNOWN"
    with pytest.raises(ManifestError, match="field state must be one of"):
        Manifest.from_json(dict(data, state="DONE-ISH"))


def test_a_manifest_round_trips_through_its_file(tmp_path: Path) -> None:
    written = manifest(state="FAILED", fault_fired=True, run_valid=True, invalid_reason=None, node_names=["n0", "n1"])
    written.write(tmp_path / "job.json")
    assert Manifest.read(tmp_path / "job.json") == written


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"fault_rank": "1"}, "job.json: field fault_rank must be int, got '1'"),
        ({"fault_rank": True}, "job.json: field fault_rank must be int, got True"),
        ({"run_valid": 1}, "job.json: field run_valid must be bool, got 1"),
        ({"rank_exits": {"x": {"exitcode": 1}}}, "job.json: field rank_exits: invalid literal"),
    ],
)
def test_a_mistyped_manifest_field_is_named(change: dict[str, object], message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        Manifest.from_json(manifest().to_json() | change)


def test_a_manifest_missing_fields_or_unreadable_names_the_file(tmp_path: Path) -> None:
    data = manifest().to_json()
    del data["state"], data["nodes"]
    with pytest.raises(ManifestError, match=r"job.json: missing field\(s\) nodes, state"):
        Manifest.from_json(data)
    (tmp_path / "job.json").write_text("{not json")
    with pytest.raises(ManifestError, match=f"{tmp_path / 'job.json'}: cannot read"):
        Manifest.read(tmp_path / "job.json")


# ---- logsage.json, fr.json, run.json -----------------------------------------------------------


def test_any_analyzers_verdict_is_checked_and_what_it_adds_is_kept(tmp_path: Path) -> None:
    answer = {
        "restart": " RESTART IMMEDIATE ",
        "primary_ranks": ["3"],
        "fault_category": "meltdown",
        "fault_type": "SIGKILL",
        "evidence": [{"line": 7, "text": "boom", "kind": "fatal_error", "rank": 3}, "not a line"],
        "their_own_key": {"kept": True},
    }
    verdict = LogVerdict.from_json(answer, mode="llm")
    assert (verdict.restart, verdict.primary_ranks, verdict.secondary_ranks) == ("RESTART IMMEDIATE", [3], [])
    assert verdict.fault_category is None, "an unknown category reads as none named"
    assert verdict.fault_type == "SIGKILL" and verdict.mode == "llm"
    assert [(e.line, e.rank) for e in verdict.evidence] == [(7, 3)]
    verdict.write(tmp_path / "logsage.json")
    again = LogVerdict.read(tmp_path / "logsage.json")
    assert again.extra == {"their_own_key": {"kept": True}} and again.to_json() == verdict.to_json()


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"primary_ranks": [1]}, "no 'restart' decision"),
        ({"restart": "STOP", "primary_ranks": "1"}, "primary_ranks is not a list"),
        ({"restart": "STOP", "secondary_ranks": ["one"]}, "secondary_ranks holds a non-rank"),
    ],
)
def test_a_verdict_without_a_decision_or_with_bad_ranks_is_refused_naming_its_file(
    tmp_path: Path, answer: dict[str, object], message: str
) -> None:
    path = tmp_path / "logsage.json"
    path.write_text(json.dumps(answer))
    with pytest.raises(RecordError, match=f"^{path}: .*{message}"):
        LogVerdict.read(path)


def test_an_fr_verdict_keeps_its_tools_details(tmp_path: Path) -> None:
    data = {"no_dumps": False, "suspect_ranks": [1], "scope": "rank", "tool": "builtin", "ranks_behind": {"1": 1}}
    FrVerdict.from_json(data).write(tmp_path / "fr.json")
    again = FrVerdict.read(tmp_path / "fr.json")
    assert again.suspect_ranks == [1] and again.to_json()["ranks_behind"] == {"1": 1}


def test_an_index_lists_its_run_records_in_order_and_an_absent_one_none(tmp_path: Path) -> None:
    records = [
        RunRecord("builtin", "builtin", "abc", "d1", "ok", None, "", 0.1, 1.0),
        RunRecord("mine", "command", "def", "d1", "failed", "exited with status 1", "Traceback", 0.2, 2.0, True),
    ]
    write_index(tmp_path / "analyzers.json", records)
    assert read_index(tmp_path / "analyzers.json") == records
    assert read_index(tmp_path / "absent.json") == []


def test_a_run_record_counts_its_redactions_and_an_older_one_none(tmp_path: Path) -> None:
    record = RunRecord("llm", "llm", "abc", "d1", "ok", None, "", 0.1, 1.0, redactions={"jwt": 2, "openai_key": 1})
    record.write(tmp_path / "run.json")
    assert RunRecord.read(tmp_path / "run.json") == record
    assert record.redacted() == "3 secrets redacted (jwt 2, openai_key 1)"
    older = {k: v for k, v in record.to_json().items() if k != "redactions"}  # written before the field
    assert RunRecord.from_json(older).redactions == {}
    for bad in ({"jwt": -1}, {"jwt": "2"}, ["jwt"], {"jwt": True}):
        with pytest.raises(RecordError, match="redactions is not a count per kind"):
            RunRecord.from_json({**older, "redactions": bad})


# ---- score.json, scores.tsv, scores.jsonl --------------------------------------------------------


def scored(cell: Cell, analyzer: str, grade: Grade) -> ScoreRecord:
    dimensions = DIMENSIONS.names(reads=(Reads.FR,) if analyzer.startswith(FR_PREFIX) else (Reads.RUN, Reads.LOG))
    return ScoreRecord(
        cell,
        analyzer,
        status=SCORED,
        job_id="7",
        state="FAILED",
        grades={d: grade if grade in DIMENSIONS[d].grades else DIMENSIONS[d].grades[0] for d in dimensions},
        judge_notes="tabs\tand\nnewlines are flattened",
        primary_ranks=[1, 2],
        fault_to_end_s=1.5,
    )


def test_score_tables_round_trip(tmp_path: Path) -> None:
    cell = Cell("SIGKILL", 1, 5, 2)
    records = [scored(cell, "builtin", Grade.TRUE), scored(cell, FR_PREFIX + "builtin", Grade.NODE)]
    write_cell_scores(records, cell.name, tmp_path / "score.json")
    assert [r.to_json() for r in read_cell_scores(tmp_path / "score.json").values()] == [r.to_json() for r in records]
    write_score_tables(records, tmp_path / "scores.tsv", tmp_path / "scores.jsonl")
    assert [r.to_json() for r in read_score_records(tmp_path / "scores.jsonl")] == [r.to_json() for r in records]
    header, *rows = (tmp_path / "scores.tsv").read_text().splitlines()
    assert tuple(header.split("\t")) == tsv_columns() and len(rows) == 2
    assert all(len(row.split("\t")) == len(tsv_columns()) for row in rows)
    from_tsv = read_score_tsv(tmp_path / "scores.tsv")
    assert [r.values for r in from_tsv] == [r.values for r in records]
    assert from_tsv[0].judge_notes == "tabs and newlines are flattened" and from_tsv[0].primary_ranks == [1, 2]


def test_a_score_json_without_scores_is_refused(tmp_path: Path) -> None:
    (tmp_path / "score.json").write_text('{"cell": "n2_SIGKILL_r1_i5"}')
    with pytest.raises(RecordError, match="no list of scores"):
        read_cell_scores(tmp_path / "score.json")


# ---- the dimensions -------------------------------------------------------------------------------


def test_every_dimension_can_pass_and_the_selections_agree_with_the_rows() -> None:
    for dimension in DIMENSIONS:
        assert dimension.passing in dimension.grades, dimension.name
    assert set(DIMENSIONS.names(stop=True)) <= set(DIMENSIONS.names(upstream=True))
    assert set(DIMENSIONS.names(judged=True)).isdisjoint(DIMENSIONS.names(reads=(Reads.RUN,)))
    assert DIMENSIONS.names() == tuple(
        sorted(DIMENSIONS.names(), key=lambda n: [d.name for d in DIMENSIONS].index(n))
    ), "column order is the table's"
    assert tsv_columns()[11 : 11 + len(DIMENSIONS.names())] == DIMENSIONS.names()
