"""faultloop.report (model, sections, render, heatmap, junit, history) and `faultloop report`: report contents checked against the scores, history, JUnit, HTML, heatmap, judge."""

from __future__ import annotations

import math
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from conftest import cell_manifest, put_analysis
from faultloop.analyze.llm import LLMSettings
from faultloop.cli import report
from faultloop.contracts import DIMENSIONS, ScoreRecord, read_score_tsv, write_cell_scores, write_score_tables
from faultloop.core import atomic, layout
from faultloop.core.cell import Cell
from faultloop.faults import FAULTS, RESTART, STOP
from faultloop.plan.pool import load_pool
from faultloop.report.heatmap import write_heatmap
from faultloop.report.model import cohen_kappa
from faultloop.score.cells import score_analyzers
from faultloop.score.grade import Truth
from faultloop.score.tables import failing_cells, write_failing_pool
from faultloop.score.tables import gather as gather_records
from openai_server import OpenAIServer, Reply, openai_server

KEY = "sk-report-SECRET-1234"
TABLE_HEADER = (
    "| # | FAULT_TYPE | NODES | RANK | ITER | JOB_ID | STATE | run_valid | restart_correct | rank_primary "
    "| rank_any | fault_described | fr_rank_correct | judge_notes |"
)


def verdict(
    restart: str,
    primary: list[int],
    secondary: list[int],
    category: str,
    ftype: str | None,
    version: str,
    evidence: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "restart": restart,
        "primary_ranks": primary,
        "secondary_ranks": secondary,
        "fault_category": category,
        "fault_type": ftype,
        "explanation": "e",
        "evidence": evidence or [],
        "checkpoint_saved": False,
        "mode": "deterministic",
        "analyzer_version": version,
    }


def good(cell: Cell, version: str) -> dict[str, Any]:
    f = FAULTS[cell.fault_type]
    return verdict(f.restart, [cell.rank], [], f.category, f.name, version)


def put_cell(
    session: Path,
    cell: Cell,
    ls: dict[str, Any] | None,
    suspects: list[int] | None,
    *,
    valid: bool = True,
    log: list[str] | None = None,
    judge: tuple[LLMSettings, str] | None = None,
    others: dict[str, dict[str, Any] | str] | None = None,
    torch: list[int] | str | None = None,
) -> None:
    """Write a cell's artifacts as run_job / logsage / fr_analysis would, then score it like judge_score.
    others: more log analyzers (name -> verdict or failure); torch: a second FR analyzer's suspects."""
    d = session / cell.name
    (d / "analysis").mkdir(parents=True, exist_ok=True)
    job = cell_manifest(
        cell,
        f"job-{cell.name}",
        valid=valid,
        invalid_reason=None if valid else "fault never fired",
        fault_fired_time=100.0,
        end_time=112.5,
    )
    job.write(d / layout.MANIFEST)
    fr = {"no_dumps": suspects is None, "suspect_ranks": suspects or []}
    torch_fr = torch if isinstance(torch, str) or torch is None else {"no_dumps": False, "suspect_ranks": torch}
    version = (ls or {}).get("analyzer_version", "v1")
    put_analysis(d, {"builtin": ls, **(others or {})}, {"builtin": fr, "torchfrtrace": torch_fr}, version=version)
    atomic.write_atomic(d / layout.STRIPPED_LOG, "\n".join(log or ["0: step 1", "1: step 1"]) + "\n")
    truth = Truth(cell, 4, 32)
    scores = score_analyzers(d, truth, job, judge_mode=judge[1] if judge else "code", llm=judge[0] if judge else None)
    write_cell_scores(scores, cell.name, d / layout.SCORE_JSON)


def gather(session: Path, cells: list[Cell]) -> Path:
    """The score rule's work: the session's scores.tsv and the records the report reads."""
    out = session / layout.SCORE_RECORDS
    write_score_tables(gather_records(session, cells), session / layout.SCORES_TSV, out)
    return out


def run_report(session: Path, records: Path, *extra: str) -> str:
    assert report.main(["--records", str(records), "--session-dir", str(session), *extra]) == 0
    return (session / layout.REPORT_MD).read_text()


A = Cell("SIGKILL", 1, 5, 2)
B = Cell("GPU_SLEEP", 0, 5, 2)
C = Cell("GPU_ERROR", 1, 5, 2)
D = Cell("SIGTERM", 2, 5, 1)
E = Cell("SEGFAULT", 3, 5, 1)
F = Cell("SIGKILL", 0, 5, 2)
GPU_ERROR_LOG = [
    "0: [iter 4] loss 1.0",
    "1: [iter 4] loss 1.0",
    "1: RuntimeError: CUDA error: an illegal memory access was encountered",
    "0: [rank0] watchdog caught collective operation timeout: WorkNCCL(SeqNum=17, OpType=ALLREDUCE)",
    "0: process exited",
]


@pytest.fixture
def session(tmp_path: Path) -> tuple[Path, Path]:
    s = tmp_path / "session"
    put_cell(s, A, good(A, "v1"), [1])
    put_cell(s, B, verdict(RESTART, [1], [0], "hang", "GPU_SLEEP", "v1"), [0, 1])
    put_cell(
        s,
        C,
        verdict(
            RESTART,
            [0],
            [],
            "gpu_error",
            None,
            "v1",
            evidence=[{"line": 4, "text": GPU_ERROR_LOG[3], "kind": "collective_timeout", "rank": 0}],
        ),
        None,
        log=GPU_ERROR_LOG,
    )
    (s / D.name).mkdir()
    cell_manifest(D, "99", valid=False, invalid_reason="srun: container start failed").write(
        s / D.name / layout.INFRA_FAILURE
    )
    put_cell(s, F, good(F, "v1"), [0], valid=False)
    return s, gather(s, [A, B, C, D, E, F])


def test_report_markdown(session: tuple[Path, Path]) -> None:
    s, tsv = session
    md = run_report(s, tsv)
    lines = md.splitlines()
    assert lines[0] == "# Fault Injection Experiment Report"
    assert "Analyzer version: `v1`" in md
    start = lines.index(TABLE_HEADER)
    table = [line.split(" | ") for line in lines[start + 2 : start + 8]]
    assert [row[0].lstrip("| ") for row in table] == ["1", "2", "3", "4", "5", "6"]
    assert [row[1] for row in table] == ["SIGKILL", "GPU_SLEEP", "GPU_ERROR", "SIGTERM", "SEGFAULT", "SIGKILL"]
    assert table[0][5:13] == [f"job-{A.name}", "FAILED", "true", "true", "true", "true", "true", "rank"]
    assert table[1][7:13] == ["true", "true", "false", "true", "true", "node"]
    assert table[2][7:13] == ["true", "false", "false", "false", "partial", "no_dumps"]
    assert table[3][5:8] == ["99", "INFRA_FAILURE", "N/A"]
    assert table[4][5:7] == ["-", "NOT_RUN"]
    assert table[5][7:9] == ["false", "N/A"]
    assert "3 scored, 1 pass all of" in md and "3 not scored" in md
    # rates: invalid F, infra D and not-run E never enter a rate
    rates_part = md.split("## Pass rates")[1].split("### Not scored")[0].splitlines()
    rates = {
        line.split(" | ")[0].lstrip("| ") + "/" + line.split(" | ")[1]: line.split(" | ")
        for line in rates_part
        if line.startswith("| ") and "%" in line
    }
    assert rates["SIGKILL/2"][2] == "1/1 (100%)"
    assert rates["GPU_SLEEP/2"][2:4] == ["0/1 (0%)", "1/1 (100%)"]  # overall, restart_correct
    assert rates["**all**/"][2] == "1/3 (33%)" and rates["**all**/"][3] == "2/3 (67%)"
    assert "SIGTERM/1" not in rates and "SEGFAULT/1" not in rates
    not_scored = md.split("### Not scored")[1].split("## Failure-mode patterns")[0]
    assert all(c.name in not_scored for c in (D, E, F)) and "srun: container start failed" in not_scored
    patterns = md.split("## Failure-mode patterns")[1].split("## Evidence")[0]
    assert f"| rank_primary=false, rank_any=true | 1 | {B.name} |" in patterns
    assert f"| restart_correct=false for GPU_ERROR | 1 | {C.name} |" in patterns
    assert f"| fr_rank_correct=no_dumps | 1 | {C.name} |" in patterns
    assert f"| fault_described=partial for crash types | 1 | {C.name} |" in patterns
    assert "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC" in patterns
    assert "rank_any=false for rank-0" not in patterns  # B's rank 0 was named (as secondary)
    evidence = md.split("## Evidence for failing cells")[1]
    assert A.name not in evidence and B.name in evidence
    c_part = evidence.split(f"### {C.name}")[1]
    assert "L3 [MISSED; injected rank + fault signature] `1: RuntimeError: CUDA error: an illegal memory" in c_part
    assert "L4 [collective_timeout, rank 0] `0: [rank0] watchdog caught" in c_part
    assert "Verdict: restart `RESTART IMMEDIATE`, primary [0]" in c_part
    assert "Stop condition: not met" in md and "First recorded analyzer version" in md
    assert [p.name for p in (s / "history" / "builtin").iterdir()] == ["1_v1.tsv"]


def test_junit_html_heatmap(session: tuple[Path, Path]) -> None:
    s, tsv = session
    run_report(s, tsv)
    root = ET.parse(s / "junit.xml").getroot()
    suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
    assert root.tag == "testsuites" and list(suites) == ["builtin", "fr:builtin", "builtin.life"]
    suite = suites["builtin"]
    assert suite.get("tests") == "6"
    assert (suite.get("failures"), suite.get("skipped")) == ("2", "3")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert list(cases) == [c.name for c in (A, B, C, D, E, F)]
    assert len(cases[A.name]) == 0
    assert cases[A.name].get("time") == "13.000"  # 12.5 s from the fault to the job's end + 0.5 s analysis
    assert cases[B.name].find("failure").get("message") == "rank_primary=false; fr_rank_correct=node"
    assert cases[C.name].find("failure").get("message") == (
        "restart_correct=false; rank_primary=false; fault_described=partial; fr_rank_correct=no_dumps"
    )
    assert "container start failed" in cases[D.name].find("skipped").get("message")
    assert cases[E.name].find("skipped").get("message").startswith("not_run")
    assert suite.find("properties/property").get("value") == "v1"
    html = (s / "report.html").read_text()
    assert html.count('<details class="cell"') == 6
    assert all(c.name.split("_")[1] in html for c in (A, B, C)) and "data:image/png;base64," in html
    assert (s / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_failing_cells_and_pool(session: tuple[Path, Path], tmp_path: Path) -> None:
    s, records = session
    tsv = s / layout.SCORES_TSV
    assert failing_cells(tsv) == [B, C]
    assert failing_cells(tsv, include_unscored=True) == [B, C, D, E, F]
    pool = tmp_path / "failed.tsv"
    assert write_failing_pool(read_score_tsv(tsv), pool) == [B, C]
    assert load_pool(pool_file=pool, gpus_per_node=4) == [B, C]
    pool2 = tmp_path / "failed2.tsv"
    run_report(s, records, "--failing-pool", str(pool2))
    assert pool2.read_text().splitlines()[0] == "FAULT_TYPE\tRANK\tITER\tNODES"


def test_iterations_fixed_regressed_stop(tmp_path: Path) -> None:
    s = tmp_path / "s"
    x, y, z = Cell("SIGKILL", 1, 5, 2), Cell("GPU_SLEEP", 3, 5, 1), Cell("SIGTERM", 0, 5, 1)
    bad_y = verdict(STOP, [3], [], "hang", "GPU_SLEEP", "v1")

    def iteration(version: str, x_ok: bool, y_ok: bool, z_ok: bool) -> str:
        for cell, ok in ((x, x_ok), (y, y_ok), (z, z_ok)):
            ls = good(cell, version) if ok else dict(bad_y, analyzer_version=version, primary_ranks=[cell.rank])
            put_cell(s, cell, ls, [cell.rank])
        return run_report(s, gather(s, [x, y, z]))

    iteration("v1", True, False, False)
    md = iteration("v1", True, False, False)  # same version again: replaces, adds nothing
    assert sorted(p.name for p in (s / "history" / "builtin").iterdir()) == ["1_v1.tsv"]
    md = iteration("v2", False, True, False)
    assert sorted(p.name for p in (s / "history" / "builtin").iterdir()) == ["1_v1.tsv", "2_v2.tsv"]
    comp = md.split("## Iteration comparison")[1].split("## Pass rates")[0]
    assert "Against iteration 1 (`v1`)" in comp
    assert f"- Regressed (1): {x.name} (fault_described=false)" in comp
    assert f"- Fixed (1): {y.name}" in comp and f"- Still failing (1): {z.name}" in comp
    assert comp.index("Regressed") < comp.index("Fixed")
    assert md.index(f"**REGRESSED since the previous version: 1 cell(s): {x.name}**") < md.index(TABLE_HEADER)
    assert "Stop condition: not met" in md
    md = iteration("v3", True, True, True)
    assert "Stop condition: not met" in md and "do not pass in the previous version" in md
    assert f"- Fixed (2): {x.name}, {z.name}" in md and "- Regressed (0): -" in md
    md = iteration("v4", True, True, True)
    assert "Stop condition: HOLDS: every cell passes in analyzer versions v3 and v4" in md
    html = (s / "report.html").read_text()
    assert "HOLDS" in html
    # a reverted analyzer (v1 again) becomes the newest iteration, still one entry per version
    iteration("v1", True, False, False)
    assert sorted(p.name for p in (s / "history" / "builtin").iterdir()) == [
        "2_v2.tsv",
        "3_v3.tsv",
        "4_v4.tsv",
        "5_v1.tsv",
    ]


def test_stop_condition_needs_every_cell_scored(tmp_path: Path) -> None:
    s = tmp_path / "s"
    x, missing = Cell("SIGKILL", 1, 5, 2), Cell("SIGINT", 1, 5, 2)
    for version in ("v1", "v2"):
        put_cell(s, x, good(x, version), [1])
        md = run_report(s, gather(s, [x, missing]))
    assert "Stop condition: not met: 1 of 2 cells do not pass in this version" in md


def test_mixed_analyzer_versions_warned(tmp_path: Path) -> None:
    s = tmp_path / "s"
    x, y = Cell("SIGKILL", 1, 5, 2), Cell("SIGINT", 1, 5, 2)
    put_cell(s, x, good(x, "old"), [1])
    put_cell(s, y, good(y, "new"), [1])
    tsv = gather(s, [x, y])
    md = run_report(s, tsv, "--analyzer-version", "new")
    assert "Analyzer version: `new`" in md and "several analyzer versions" in md
    assert [p.name for p in (s / "history" / "builtin").iterdir()] == ["1_new.tsv"]
    # the workflow names the markdown with --output
    assert report.main(["--records", str(tsv), "--session-dir", str(s), "--output", str(tmp_path / "r.md")]) == 0
    assert (tmp_path / "r.md").read_text().startswith("# Fault Injection Experiment Report\n")


def test_cohen_kappa() -> None:
    assert cohen_kappa(["t", "t", "f", "f"], ["t", "f", "f", "f"]) == pytest.approx(0.5)
    assert cohen_kappa(["a", "b"], ["a", "b"]) == pytest.approx(1.0)
    assert cohen_kappa(["a", "b"], ["b", "a"]) == pytest.approx(-1.0)
    assert math.isnan(cohen_kappa(["a", "a"], ["a", "a"]))


def test_judge_agreement_over_http(openai_server: OpenAIServer, tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    llm = LLMSettings(
        base_url=openai_server.base_url, model="judge", api_key_file=str(key_file), timeout_s=0.5, max_retries=0
    )
    s = tmp_path / "s"
    cells = [Cell("SIGKILL", r, 5, 2) for r in range(5)]
    agree = {
        "restart_correct": "true",
        "rank_primary": "true",
        "rank_any": "true",
        "fault_described": "true",
        "fr_rank_correct": "rank",
        "notes": "ok",
    }
    openai_server.script(
        Reply.json(agree),
        Reply.json(agree),
        Reply.json(dict(agree, rank_primary="false", fault_described="partial")),
        Reply("not json"),
        Reply(f"bad key {KEY}", status=401),
    )
    for i, cell in enumerate(cells):
        ls = good(cell, "v1") if i != 2 else verdict(STOP, [cell.rank], [], "crash", None, "v1")
        put_cell(s, cell, ls, [cell.rank], judge=(llm, "both"))
    md = run_report(s, gather(s, cells))
    judge = md.split("## LLM judge vs code")[1]
    # code: cell 2 has fault_described=partial, rank_primary=true; the judge said false/partial there
    assert "| restart_correct | 3/3 | n/a |" in judge
    assert "| rank_primary | 2/3 | 0.00 |" in judge
    assert "| fault_described | 3/3 | 1.00 |" in judge
    assert "Judge failures (recorded in the cells, code scores used): 2" in judge
    assert len(openai_server.requests) == 5
    for path in s.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


# ---- analyzers side by side -------------------------------------------------------------------------


@pytest.fixture
def compared(tmp_path: Path) -> tuple[Path, Path]:
    """Three log analyzers (one fails on a cell) and two FR analyzers (one fails on a cell)."""
    s = tmp_path / "session"
    wrong_rank = verdict(STOP, [3], [], "crash", "SIGKILL", "t1")
    put_cell(
        s,
        A,
        good(A, "v1"),
        [1],
        torch=[],
        others={"torchrun_root_cause": good(A, "t1"), "mine": "exited with status 1"},
    )
    put_cell(
        s,
        B,
        good(B, "v1"),
        [0],
        torch=[0],
        others={
            "torchrun_root_cause": dict(wrong_rank, restart=RESTART, fault_category="hang", fault_type="GPU_SLEEP"),
            "mine": good(B, "m1"),
        },
    )
    put_cell(
        s,
        C,
        good(C, "v1"),
        [1],
        log=GPU_ERROR_LOG,
        torch="torchfrtrace could not read the dump set",
        others={"torchrun_root_cause": good(C, "t1"), "mine": dict(good(C, "m1"), restart=RESTART)},
    )
    (s / D.name).mkdir()
    cell_manifest(D, "99", valid=False, invalid_reason="no node").write(s / D.name / layout.INFRA_FAILURE)
    records = s / layout.SCORE_RECORDS
    names = ["builtin", "torchrun_root_cause", "mine", "fr:builtin", "fr:torchfrtrace"]
    write_score_tables(gather_records(s, [A, B, C, D], names), s / layout.SCORES_TSV, records)
    return s, records


def section(md: str, title: str) -> str:
    return md.split(f"{title}\n", 1)[1].split("\n## ", 1)[0]


def test_side_by_side_sections(compared: tuple[Path, Path]) -> None:
    s, tsv = compared
    md = run_report(s, tsv)
    assert (
        "Analyzers: `builtin` (primary" in md and "`torchrun_root_cause`, `mine`; FR: `builtin`, `torchfrtrace`" in md
    )
    table = md.split(TABLE_HEADER)[1].split("\n\n")[0]
    assert table.count("\n| ") == 4  # upstream's table: the primary analyzer only, one row per cell
    side = section(md, "## Analyzers side by side")
    rows = {
        line.split(" | ")[0].lstrip("| "): line.split(" | ")
        for line in side.splitlines()
        if line.startswith("| ") and "`" in line
    }
    assert rows["builtin"][2:5] == ["0", "3/3 (100%)", "3/3 (100%)"]  # failed on, overall, restart_correct
    assert rows["torchrun_root_cause"][2:6] == ["0", "2/3 (67%)", "3/3 (100%)", "2/3 (67%)"]
    assert rows["mine"][2:5] == ["1", "1/3 (33%)", "1/3 (33%)"]
    paired = side.split("### Paired counts")[1].split("###")[0]
    assert "| A | B | overall | restart_correct | rank_primary | rank_any | fault_described |" in paired
    assert "| builtin | torchrun_root_cause | 1 / 0 | 0 / 0 | 1 / 0 | 1 / 0 | 0 / 0 |" in paired
    assert "| torchrun_root_cause | mine | 2 / 1 | 2 / 0 | 1 / 1 | 1 / 1 | 1 / 0 |" in paired
    differ = side.split("### Where the analyzers disagree")[1]
    assert f"| {B.name} | rank_primary | true | false | true | builtin, mine |" in differ
    assert f"| {C.name} | restart_correct | true | true | false | builtin, torchrun_root_cause |" in differ
    fr = section(md, "## Flight-recorder analyzers side by side")
    assert "| builtin | `v1` | 0 | 3/3 (100%) | 3 | 0 | 0 | 0 | 0 |" in fr
    assert "| torchfrtrace | `v1` | 1 | 1/3 (33%) | 1 | 0 | 0 | 2 | 0 |" in fr
    assert "| builtin | torchfrtrace | 2 | 0 | 1 | 0 |" in fr
    assert f"| {A.name} | rank [1] | false [] | builtin |" in fr
    times = section(md, "## Time to verdict")
    assert "| FAULT_TYPE | cells | fault -> job end | builtin | torchrun_root_cause | mine | fr:builtin |" in times
    assert "| SIGKILL | 1 | 12.5 / 12.5 | 0.5 / 0.5 |" in times
    failures = section(md, "## Analyzer failures")
    assert f"| mine | {A.name} | analyzer failed: exited with status 1 |" not in failures  # the error, as recorded
    assert f"| mine | {A.name} | exited with status 1 | `stderr tail` |" in failures
    assert f"| fr:torchfrtrace | {C.name} | torchfrtrace could not read the dump set | `stderr tail` |" in failures
    assert D.name not in failures  # not scored: never an analyzer failure
    table = s / layout.SCORES_TSV
    assert failing_cells(table) == []  # the primary passes everywhere
    assert failing_cells(table, analyzer="mine") == [A, C]
    assert failing_cells(table, analyzer="fr:torchfrtrace") == [A, C]
    assert [p.parent.name for p in sorted((s / "history").glob("*/*.tsv"))] == [
        "builtin",
        "mine",
        "torchrun_root_cause",
    ]


def test_junit_suite_per_analyzer(compared: tuple[Path, Path]) -> None:
    s, tsv = compared
    run_report(s, tsv)
    root = ET.parse(s / "junit.xml").getroot()
    suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
    lives = ["builtin.life", "torchrun_root_cause.life", "mine.life"]
    assert list(suites) == ["builtin", "torchrun_root_cause", "mine", "fr:builtin", "fr:torchfrtrace", *lives]
    # each life suite: A's life graded (SIGKILL passes: restart), B and C not (their job.json names no
    # fault node, so the truth's drain is unknown), D an infrastructure failure
    assert root.get("tests") == str(20 + 3 * 4) and root.get("skipped") == str(5 + 3 * 3)
    assert (suites["mine"].get("failures"), suites["fr:torchfrtrace"].get("failures")) == ("2", "2")
    for life in lives:
        (case,) = (c for c in suites[life].iter("testcase") if c.find("failure") is not None)
        assert case.get("name") == A.name  # a STOP (or no verdict) where the kill passes
        assert case.find("failure").get("message") == "policy_correct=false; drain_correct=true"
        assert case.find("failure").text.startswith("attempt 1: ")
    mine = {c.get("name"): c for c in suites["mine"].iter("testcase")}
    assert "analyzer failed: exited with status 1" in mine[A.name].find("failure").text.lower()
    assert mine[B.name].get("time") == "13.000" and mine[D.name].find("skipped") is not None
    assert suites["builtin"].get("time") == "39.000"


def test_heatmap_fits_any_pool_shape(tmp_path: Path) -> None:
    from PIL import Image

    cells = [Cell(fault, 0, 5, nodes) for fault in FAULTS for nodes in (1, 2, 4, 8, 16)]
    grades = {d.name: d.passing for d in DIMENSIONS}
    rows = [
        ScoreRecord(c, name, "scored", "j", "FAILED", grades) for name in ("builtin", "a", "b", "fr:x") for c in cells
    ]
    wide, small = tmp_path / "wide.png", tmp_path / "small.png"
    write_heatmap(rows, wide)
    write_heatmap(rows[:1], small)
    big, little = Image.open(wide).convert("L"), Image.open(small).convert("L")
    assert big.width > 2 * little.width and big.height > 2 * little.height  # grows with the pool's shape
    for image in (big, little):
        top = [image.getpixel((x, y)) for y in range(image.height // 12) for x in range(image.width)]
        assert min(top) < 100, "the title is drawn at the top"
        assert min(image.getpixel((x, 0)) for x in range(image.width)) > 200, "nothing is cut at the top edge"


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (make test installs it)")
def test_html_report_in_a_real_browser(compared: tuple[Path, Path], tmp_path: Path) -> None:
    from PIL import Image

    from faultloop.report import browser

    s, tsv = compared
    md = run_report(s, tsv)
    dom = browser.rendered_dom(s / "report.html")
    from html.parser import HTMLParser

    class Page(HTMLParser):
        """The rendered page's sections, drill-down cells and their analyzer rows."""

        def __init__(self) -> None:
            super().__init__()
            self.sections: list[str] = []
            self.cells: dict[str, list[str]] = {}
            self.cell: str | None = None
            self.images = 0

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = dict(attrs)
            if tag == "section":
                self.sections.append(a.get("id") or "")
            elif tag == "details" and a.get("class") == "cell":
                self.cell = (a.get("id") or "").removeprefix("cell-")
                self.cells[self.cell] = []
            elif tag == "tr" and a.get("class") == "analyzer-row" and self.cell:
                self.cells[self.cell].append(a.get("data-analyzer") or "")
            elif tag == "img" and (a.get("src") or "").startswith("data:image/png;base64,"):
                self.images += 1

    page = Page()
    page.feed(dom)
    # everything the markdown has, as sections of the page
    md_titles = [line.lstrip("# ") for line in md.splitlines() if line.startswith("## ")]
    for title in md_titles:
        assert re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") in page.sections, title
    assert "cells" in page.sections and page.images == 1
    assert list(page.cells) == [A.name, B.name, C.name, D.name]
    assert page.cells[A.name] == ["builtin", "torchrun_root_cause", "mine", "fr:builtin", "fr:torchfrtrace"]
    drill = dom.split(f'id="cell-{C.name}"')[1].split("</details>")[0]
    assert "torchrun_root_cause</strong>: cited 0 line(s), missed" in drill
    assert "[missed; injected rank + fault signature] 1: RuntimeError: CUDA error" in drill
    assert (
        f'href="{C.name}/analysis/mine/verdict.json"' in drill
        and f'href="{C.name}/analysis/main_workload.log"' in drill
    )
    assert "torchfrtrace could not read the dump set" in drill
    # the picture: the heatmap's colours are on screen, the top of the page is not blank
    png = tmp_path / "page.png"
    browser.screenshot(s / "report.html", png, width=1200, height=1600)
    shot = Image.open(png).convert("RGB")
    colours = shot.getcolors(maxcolors=1 << 20) or []
    assert any(r > 150 and g < 80 and b < 80 for _, (r, g, b) in colours), "red heatmap cells are rendered"
    assert any(g > 100 and r < 80 for _, (r, g, b) in colours), "green heatmap cells are rendered"


def test_the_report_reads_only_the_score_records(compared: tuple[Path, Path], tmp_path: Path) -> None:
    """aggregate_report declares scores.jsonl (and upstream's verdicts in an adopted session): the
    same report comes out of a folder holding nothing but that file, no cell folder at all."""
    s, records = compared
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(records, bare / layout.SCORE_RECORDS)
    outputs = {}
    for session in (s, bare):
        args = ["--records", str(session / layout.SCORE_RECORDS), "--session-dir", str(session), "--no-history"]
        assert report.main(args) == 0
        outputs[session] = [(session / name).read_text() for name in (layout.REPORT_MD, layout.JUNIT_XML)]
        outputs[session].append(
            re.sub(r'src="data:image/png;base64,[^"]*"', "", (session / layout.REPORT_HTML).read_text())
        )
    assert outputs[s] == outputs[bare]
    assert 'class="lines missed"' in outputs[bare][2]  # the evidence came along with the records
    assert [p.name for p in bare.iterdir() if p.is_dir()] == []  # and no cell folder was needed
