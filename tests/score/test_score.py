"""faultloop.score (grade, cells, judge, tables) and `faultloop score`: every dimension's edge cases, the files
scoring reads and writes, the LLM judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import cell_manifest, put_analysis
from faultloop.cli.score import main
from faultloop.contracts import (
    INFRA_FAILURE,
    INVALID,
    NOT_RUN,
    SCORED,
    FrVerdict,
    LogVerdict,
    Manifest,
    RecordError,
    ScoreRecord,
    read_score_records,
    read_score_tsv,
    write_score_tables,
)
from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.faults import RESTART, STOP
from faultloop.score.grade import Truth, grade_fr, score_cell
from faultloop.score.tables import gather
from openai_server import OpenAIServer, Reply, openai_server
from planted_secrets import assert_nothing_leaked, planted_lines

KEY = "sk-judge-SECRET-9999"


def truth(fault: str = "SIGKILL", rank: int = 1, nodes: int = 2, gpn: int = 4, seg: int = 32) -> Truth:
    return Truth(Cell(fault, rank, 5, nodes), gpn, seg)


DEFAULT_CELL = Cell("SIGKILL", 1, 5, 2)


def job(valid: bool = True, cell: Cell = DEFAULT_CELL, **kw: Any) -> Manifest:
    return cell_manifest(cell, valid=valid, **kw)


def logsage(
    restart: str = STOP,
    primary: list[int] | None = None,
    secondary: list[int] | None = None,
    category: str | None = "crash",
    ftype: str | None = "SIGKILL",
) -> dict[str, Any]:
    return {
        "restart": restart,
        "primary_ranks": [1] if primary is None else primary,
        "secondary_ranks": secondary or [],
        "fault_category": category,
        "fault_type": ftype,
        "explanation": "x",
        "evidence": [],
        "checkpoint_saved": False,
        "mode": "deterministic",
        "analyzer_version": "abc123",
    }


def fr(suspects: list[int], no_dumps: bool = False) -> dict[str, Any]:
    return {"no_dumps": no_dumps, "suspect_ranks": suspects, "scope": "rank"}


def verdict(**kw: Any) -> LogVerdict:
    """The log verdict as scoring reads it: logsage.json through the contract's reader."""
    return LogVerdict.from_json(logsage(**kw))


def fr_verdict(suspects: list[Any], no_dumps: bool = False) -> FrVerdict:
    return FrVerdict.from_json(fr(suspects, no_dumps))


def test_all_correct() -> None:
    s = score_cell(truth(), job(), verdict(), fr_verdict([1]))
    assert s.values == {
        "run_valid": "true",
        "restart_correct": "true",
        "rank_primary": "true",
        "rank_any": "true",
        "fault_category_correct": "true",
        "fault_type_correct": "true",
        "fault_described": "true",
        "fr_rank_correct": "rank",
        "policy_correct": "N/A",  # graded over the cell's life, when its runs are gathered (score.tables)
        "drain_correct": "N/A",
    }
    assert s.judge_notes == "Correct on all dimensions."
    assert (s.cell.name, s.job_id, s.state, s.analyzer_version) == ("n2_SIGKILL_r1_i5", "local-1", "FAILED", "abc123")


@pytest.mark.parametrize(
    ("rank", "primary", "secondary", "want_primary", "want_any"),
    [
        (1, [1], [], "true", "true"),
        (1, [1, 2], [], "partial", "true"),
        (1, [2, 1, 3], [0], "partial", "true"),
        (1, [1, 1], [], "true", "true"),  # a repeated rank is still the only one
        (1, [2], [1], "false", "true"),  # collateral
        (1, [2], [0, 3], "false", "false"),
        (1, [], [], "false", "false"),
        (0, [0], [1, 2], "true", "true"),  # rank 0
        (0, [1, 2, 3], [], "false", "false"),  # rank-0 hang silences others
        (7, [7], [], "true", "true"),  # last rank of 2 x 4
        (7, [6, 7], [], "partial", "true"),
    ],
)
def test_rank_dimensions(rank: int, primary: list[int], secondary: list[int], want_primary: str, want_any: str) -> None:
    s = score_cell(truth(rank=rank), job(), verdict(primary=primary, secondary=secondary), fr_verdict([rank]))
    assert (s.grade("rank_primary"), s.grade("rank_any")) == (want_primary, want_any)


def test_rank_strings_are_accepted_and_non_ranks_refused() -> None:
    s = score_cell(truth(), job(), verdict(primary=["1"], secondary=["2"]), fr_verdict(["1"]))  # type: ignore[list-item]
    assert (s.grade("rank_primary"), s.grade("fr_rank_correct")) == ("true", "rank")
    with pytest.raises(RecordError, match="secondary_ranks holds a non-rank"):
        verdict(secondary=["x"])  # type: ignore[list-item]


def test_notes_name_the_gaps() -> None:
    s = score_cell(
        truth(rank=0),
        job(),
        verdict(restart=RESTART, primary=[2], secondary=[0], category="hang", ftype=None),
        fr_verdict([0, 1]),
    )
    assert s.judge_notes.count(".") == 1 and s.judge_notes.endswith(".")
    for part in (
        "Restart RESTART IMMEDIATE but expected STOP",
        "rank 0 named only as secondary",
        "described as hang/no type, injected crash/SIGKILL",
        "FR node",
    ):
        assert part in s.judge_notes


@pytest.mark.parametrize(
    ("fault", "category", "ftype", "cat_ok", "type_ok", "described"),
    [
        ("SIGKILL", "crash", "SIGKILL", "true", "true", "true"),
        ("SIGKILL", "crash", None, "true", "false", "partial"),
        ("SIGKILL", "crash", "SEGFAULT", "true", "false", "partial"),
        ("SIGKILL", "hang", None, "false", "false", "false"),
        ("SIGKILL", None, None, "false", "false", "false"),
        ("GPU_SLEEP", "hang", "GPU_SLEEP", "true", "true", "true"),
        ("SIGTERM", "external_signal", "SIGINT", "true", "false", "partial"),
        ("GPU_ERROR", "gpu_error", "GPU_ERROR", "true", "true", "true"),
    ],
)
def test_fault_described(
    fault: str, category: str | None, ftype: str | None, cat_ok: str, type_ok: str, described: str
) -> None:
    s = score_cell(truth(fault), job(), verdict(category=category, ftype=ftype), fr_verdict([1]))
    assert (s.grade("fault_category_correct"), s.grade("fault_type_correct"), s.grade("fault_described")) == (
        cat_ok,
        type_ok,
        described,
    )


@pytest.mark.parametrize(
    ("fault", "restart", "want"),
    [
        ("SIGKILL", STOP, "true"),
        ("SIGKILL", RESTART, "false"),
        ("GPU_ERROR", RESTART, "false"),
        ("GPU_SLEEP", RESTART, "true"),
        ("SIGTERM", STOP, "false"),
        ("SIGSTOP", "ERRORS NOT FOUND", "false"),
    ],
)
def test_restart(fault: str, restart: str, want: str) -> None:
    s = score_cell(truth(fault), job(), verdict(restart=restart), fr_verdict([1]))
    assert s.grade("restart_correct") == want
    assert s.expected_restart == (STOP if fault in ("SIGKILL", "GPU_ERROR") else RESTART)


@pytest.mark.parametrize(
    ("rank", "suspects", "want"),
    [
        (5, [5], "rank"),
        (5, [4, 7], "node"),  # node 1 = ranks 4-7, injected rank not among suspects
        (5, [4, 5, 6, 7], "node"),
        (5, [3, 5], "segment"),  # 3 is node 0: crosses the node boundary, same segment 0-31
        (5, [0, 31], "segment"),
        (5, [5, 32], "false"),  # 32 starts segment 1
        (3, [3, 4], "segment"),  # last rank of node 0 with first of node 1
        (4, [4], "rank"),
        (31, [28, 29, 30], "node"),  # last rank of segment 0
        (31, [31, 32], "false"),
        (32, [32, 35], "node"),  # first rank of segment 1
        (32, [33, 63], "segment"),
        (63, [60, 62], "node"),  # last rank of the job
        (63, [0], "false"),
        (5, [], "false"),
    ],
)
def test_fr_boundaries_gpn4_seg32(rank: int, suspects: list[int], want: str) -> None:
    assert grade_fr(truth(rank=rank, nodes=16), fr_verdict(suspects)) == want


def test_fr_no_dumps_and_missing() -> None:
    t = truth()
    assert grade_fr(t, fr_verdict([], no_dumps=True)) == "no_dumps"
    assert grade_fr(t, fr_verdict([1], no_dumps=True)) == "no_dumps"
    s = score_cell(t, job(), verdict(), None)  # analyzer never ran: a miss, not "no dumps"
    assert s.grade("fr_rank_correct") == "false" and s.judge_notes == "No fr.json."


def test_fr_other_shapes() -> None:
    assert grade_fr(truth(rank=2, gpn=8, seg=16), fr_verdict([0, 7])) == "node"
    assert grade_fr(truth(rank=2, gpn=8, seg=16), fr_verdict([0, 8])) == "segment"
    assert grade_fr(truth(rank=2, gpn=8, seg=16), fr_verdict([0, 16])) == "false"


@pytest.mark.parametrize("manifest", [job(valid=False), None])
def test_invalid_run_is_all_na(manifest: Manifest | None) -> None:
    s = score_cell(truth(), manifest, verdict(), fr_verdict([1]))
    dims = s.values
    assert dims.pop("run_valid") == "false"
    assert set(dims.values()) == {"N/A"}
    assert s.judge_notes.startswith("run_invalid: ")
    assert ("fault never fired" if manifest else "no job.json") in s.judge_notes


def test_missing_logsage_is_a_miss() -> None:
    s = score_cell(truth(), job(), None, fr_verdict([1]))
    assert (s.grade("restart_correct"), s.grade("rank_primary"), s.grade("rank_any"), s.grade("fault_described")) == (
        "false",
        "false",
        "false",
        "false",
    )
    assert s.judge_notes.startswith("No verdict.json")


# ---- files, CLI, gather ------------------------------------------------------------------------


def make_cell(
    session: Path,
    cell: Cell,
    *,
    manifest: Manifest | None,
    ls: dict[str, Any] | None = None,
    frj: dict[str, Any] | None = None,
    log_lines: list[str] | None = None,
) -> Path:
    d = session / cell.name
    (d / "analysis").mkdir(parents=True)
    if manifest is not None:
        manifest.fault_type, manifest.fault_rank, manifest.fault_iter, manifest.nodes = (
            cell.fault_type,
            cell.rank,
            cell.iter,
            cell.nodes,
        )
        manifest.write(d / layout.MANIFEST)
    put_analysis(d, {"builtin": ls}, {"builtin": frj})
    (d / layout.STRIPPED_LOG).write_text("\n".join(log_lines or ["1: training step 1"]) + "\n")
    return d


def only_score(path: Path) -> dict[str, Any]:
    """The builtin analyzer's score in a cell's score.json."""
    return next(s for s in json.loads(path.read_text())["scores"] if s["analyzer"] == "builtin")


def cli_args(d: Path, out: Path, *extra: str) -> list[str]:
    """The truth comes from the cell's job.json."""
    return ["--cell-dir", str(d), "--gpus-per-node", "4", "--segment-size", "32", "--output", str(out), *extra]


def test_cli_writes_score_json(tmp_path: Path) -> None:
    cell = Cell("SIGKILL", 1, 5, 2)
    d = make_cell(tmp_path, cell, manifest=job(), ls=logsage(primary=[1, 2]), frj=fr([0, 1]))
    out = d / layout.SCORE_JSON
    assert main(cli_args(d, out)) == 0
    data = only_score(out)
    assert data["rank_primary"] == "partial" and data["fr_rank_correct"] == "node"
    assert data["llm_judge"] is None and data["scored_by"] == "code"
    assert not list(out.parent.glob(".*tmp"))  # atomic write left no temp file


def test_gather_lists_every_state(tmp_path: Path) -> None:
    good, bad, infra, notrun, unscored = (
        Cell("SIGKILL", 1, 5, 2),
        Cell("GPU_SLEEP", 0, 5, 2),
        Cell("SIGTERM", 2, 5, 1),
        Cell("SEGFAULT", 3, 5, 1),
        Cell("OS_ABORT", 0, 5, 1),
    )
    for c, manifest in ((good, job()), (bad, job(valid=False))):
        d = make_cell(tmp_path, c, manifest=manifest, ls=logsage(), frj=fr([1]))
        main(cli_args(d, d / layout.SCORE_JSON))
    d = tmp_path / infra.name
    d.mkdir()
    job(valid=False, cell=infra, job_id="77", state="FAILED", invalid_reason="container failed to start").write(
        d / layout.INFRA_FAILURE
    )
    make_cell(tmp_path, unscored, manifest=job())
    records = gather(tmp_path, [good, bad, infra, notrun, unscored], ["builtin", "fr:builtin"])
    out, whole = tmp_path / "scores.tsv", tmp_path / "scores.jsonl"
    write_score_tables(records, out, whole)
    both = read_score_tsv(out)
    # one row per cell and analyzer, in the given order; the FR analyzer's row grades only FR
    assert [(r.cell.name, r.analyzer) for r in both[:4]] == [
        (good.name, "builtin"),
        (good.name, "fr:builtin"),
        (bad.name, "builtin"),
        (bad.name, "fr:builtin"),
    ]
    assert (both[1].grade("fr_rank_correct"), both[1].grade("restart_correct"), both[1].fr_suspects) == (
        "rank",
        "N/A",
        [1],
    )
    assert both[0].analyzer_wall_s == 0.5 and both[0].analyzer_version == "v1"
    back = [r for r in both if r.analyzer == "builtin"]
    assert [r.cell.name for r in back] == [good.name, bad.name, infra.name, notrun.name, unscored.name]
    assert [r.status for r in back] == [SCORED, INVALID, INFRA_FAILURE, NOT_RUN, NOT_RUN]
    assert [r.state for r in back] == ["FAILED", "FAILED", "INFRA_FAILURE", "NOT_RUN", "NOT_RUN"]
    assert back[0].grade("rank_primary") == "true" and back[0].primary_ranks == [1]
    assert back[1].grade("restart_correct") == "N/A" and "fault never fired" in back[1].reason
    assert back[2].job_id == "77" and "container failed to start" in back[2].reason
    assert back[4].reason == "ran but not scored yet"
    # typed columns: one value per cell, rank lists as numbers, no JSON inside the table
    header, first = out.read_text().splitlines()[:2]
    row = dict(zip(header.split("\t"), first.split("\t"), strict=False))
    assert row["primary_ranks"] == "1" and "{" not in out.read_text() and "llm_judge" not in header
    # the table and the whole records agree; only the records carry the evidence
    assert [r.to_row() for r in both] == [r.to_row() for r in read_score_records(whole)]
    assert read_score_records(whole)[0].evidence is not None and both[0].evidence is None


def test_records_round_trip_and_carry_the_evidence(tmp_path: Path) -> None:
    """What the report shows of a cell is found when it is scored: the lines the analyzer cited,
    the injected rank's lines it did not, and the cell's files."""
    cell = Cell("SEGFAULT", 1, 5, 2)
    verdict = logsage(ftype="SEGFAULT") | {
        "evidence": [{"line": 3, "kind": "fatal_error", "rank": 1, "text": "1: Fatal Python error: Segmentation fault"}]
    }
    d = make_cell(
        tmp_path,
        cell,
        manifest=job(),
        ls=verdict,
        frj=fr([1]),
        log_lines=[
            "0: iteration 4",
            "1: iteration 4",
            "1: Fatal Python error: Segmentation fault",
            "0: all fine",
            "srun: error: node0: task 1: Segmentation fault",
            "1: exited",
        ],
    )
    assert main(cli_args(d, d / layout.SCORE_JSON)) == 0
    record = ScoreRecord.from_json(only_score(d / layout.SCORE_JSON))
    assert record.to_json() == ScoreRecord.from_json(record.to_json()).to_json()
    assert record.evidence is not None
    assert [c.line for c in record.evidence.cited] == [3]
    assert [(e.number, e.cited) for e in record.evidence.expected] == [(3, True), (5, False), (6, False)]
    assert [e.number for e in record.evidence.missed] == [5, 6]
    assert {f.label for f in record.cell_files} >= {"job.json", "stripped log"}
    assert {f.label for f in record.files} >= {layout.VERDICT_JSON, layout.RUN_JSON}
    assert all((tmp_path / f.path).is_file() for f in record.files + record.cell_files)


def test_scoring_without_a_readable_manifest_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "n2_SIGKILL_r1_i5"
    d.mkdir()
    (d / layout.MANIFEST).write_text('{"job_id": "1"}')
    assert main(cli_args(d, d / layout.SCORE_JSON)) == 2
    assert "job.json: missing field(s)" in capsys.readouterr().err


# ---- LLM judge over real HTTP --------------------------------------------------------------------

ANSWER = {
    "restart_correct": "true",
    "rank_primary": "false",
    "rank_any": "true",
    "fault_described": "partial",
    "fr_rank_correct": "rank",
    "notes": "Rank 1 only secondary.",
}


def judged(
    server: OpenAIServer,
    tmp_path: Path,
    mode: str,
    manifest: Manifest | None = None,
    timeout: str = "3",
    printed: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The score of a cell judged over HTTP; printed: lines the log prints near its end."""
    cell = Cell("SIGKILL", 1, 5, 2)
    key_file = tmp_path / "key.txt"
    key_file.write_text(KEY)
    lines = [f"{i % 8}: line {i}" for i in range(500)]
    lines[480:480] = printed
    lines.insert(450, "1: [2026] FAULT INJECTION: Rank 1 will inject fault SIGKILL at 5")
    lines.insert(451, "1: [workload:1] nvrx bookkeeping")  # upstream's exclude_nvrx_logs drops these
    lines.insert(452, "1: [workload:1] Cycle: 3 kept")
    d = make_cell(tmp_path, cell, manifest=manifest or job(), ls=logsage(), frj=fr([1]), log_lines=lines)
    out = d / layout.SCORE_JSON
    assert (
        main(
            cli_args(
                d,
                out,
                "--judge-mode",
                mode,
                "--llm-base-url",
                server.base_url,
                "--llm-model",
                "judge-m",
                "--llm-api-key-file",
                str(key_file),
                "--llm-timeout",
                timeout,
                "--llm-max-retries",
                "1",
            )
        )
        == 0
    )
    assert KEY not in out.read_text()
    return only_score(out)


def test_judge_both_keeps_code_grades(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.script(Reply.json(ANSWER))
    data = judged(openai_server, tmp_path, "both")
    assert data["llm_judge"]["answer"] == ANSWER and data["llm_judge"]["model"] == "judge-m"
    assert data["rank_primary"] == "true" and data["scored_by"] == "code"  # code grades stay
    (req,) = openai_server.requests
    prompt = req.body["messages"][1]["content"]
    assert "fault_type: SIGKILL" in prompt and "injected rank: 1" in prompt
    assert "node of the injected rank: 0" in prompt and "ranks 0-7" in prompt
    assert "STOP - DONT RESTART IMMEDIATE (hard kill, OOM or external pressure)" in prompt
    assert "line 499" in prompt and "line 101\n" in prompt and "line 100\n" not in prompt  # last 400 lines
    assert "FAULT INJECTION" not in prompt
    assert "nvrx bookkeeping" not in prompt and "Cycle: 3 kept" in prompt
    assert "Attribution: Primary issues: [1]" in prompt and "default_pg | allreduce" in prompt
    assert "GPUS_PER_NODE=4, FR_SEGMENT_SIZE=32" in prompt
    assert req.body["response_format"]["json_schema"]["strict"] is True
    assert KEY.encode() not in req.raw


def test_judge_llm_mode_replaces_grades(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.script(Reply.json(ANSWER))
    data = judged(openai_server, tmp_path, "llm")
    assert data["scored_by"] == "llm" and data["rank_primary"] == "false" and data["fault_described"] == "partial"
    assert data["judge_notes"] == "Rank 1 only secondary."
    assert data["llm_judge"]["code"]["rank_primary"] == "true"


@pytest.mark.parametrize(
    ("replies", "needle"),
    [
        ([Reply("not json"), Reply('{"restart_correct": "maybe"}')], "after 2 attempts"),
        ([Reply.json(ANSWER, delay_s=2.5), Reply.json(ANSWER, delay_s=2.5)], "timed out"),
        ([Reply("down", status=500), Reply("down", status=502)], "HTTP 502"),
        ([Reply(f"invalid key {KEY}", status=401)], "HTTP 401"),
    ],
)
def test_judge_failure_is_recorded(
    openai_server: OpenAIServer, tmp_path: Path, replies: list[Reply], needle: str
) -> None:
    openai_server.script(*replies)
    data = judged(openai_server, tmp_path, "llm", timeout="0.5")
    assert needle in data["llm_judge"]["error"] and "answer" not in data["llm_judge"]
    assert data["scored_by"] == "code" and data["rank_primary"] == "true"  # code grades survive


def test_judge_is_sent_no_secret_the_log_prints(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.script(Reply.json(ANSWER))
    data = judged(openai_server, tmp_path, "both", printed=(*planted_lines(KEY), f"1: echo {KEY}"))
    assert_nothing_leaked(openai_server, KEY)
    (req,) = openai_server.requests
    assert KEY.encode() not in req.raw and "line 499" in req.body["messages"][1]["content"]
    counts = data["llm_judge"]["redactions"]
    assert counts["endpoint_key"] == 2 and counts["private_key"] == 1 and counts["url_password"] == 2


def test_judge_not_called_for_invalid_run(openai_server: OpenAIServer, tmp_path: Path) -> None:
    data = judged(openai_server, tmp_path, "both", manifest=job(valid=False))
    assert openai_server.requests == [] and data["llm_judge"] is None and data["rank_primary"] == "N/A"
