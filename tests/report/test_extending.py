"""A new score dimension and a new fault row are accepted by scoring, the tables and the report
with no code change: the dimension is one more row of `contracts.DIMENSIONS` (and its grader),
the fault one more row of `faults.FAULTS`."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_report import A, B, gather, good, put_cell, run_report, verdict

from conftest import cell_manifest
from faultloop.contracts import DIMENSIONS, Dimension, FrVerdict, Grade, LogVerdict, Reads, read_score_tsv
from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.faults import FAULTS, OTHER, RESTART, STOP
from faultloop.report.model import build_report
from faultloop.report.render import render_html, render_markdown
from faultloop.score.grade import GRADERS, Truth, score_cell, score_fr
from faultloop.score.judge import judge_schema

# Does the explanation say at which iteration the fault struck? Part of the stop condition.
ITERATION = Dimension("iteration_named", Reads.LOG, (Grade.TRUE, Grade.FALSE), stop=True)


@pytest.fixture
def iteration_dimension(monkeypatch: pytest.MonkeyPatch) -> Iterator[Dimension]:
    monkeypatch.setattr(DIMENSIONS, "rows", (*DIMENSIONS.rows, ITERATION))
    monkeypatch.setitem(
        GRADERS,
        ITERATION.name,
        lambda truth, log, fr: Grade.of(log is not None and f"iteration {truth.cell.iter}" in log.explanation),
    )
    yield ITERATION


def test_a_new_dimension_is_scored_tabled_and_reported(iteration_dimension: Dimension, tmp_path: Path) -> None:
    s = tmp_path / "session"
    put_cell(s, A, good(A, "v1") | {"explanation": "rank 1 was killed at iteration 5"}, [1])
    put_cell(s, B, good(B, "v1"), [0])  # right on every other dimension, silent on the iteration
    md = run_report(s, gather(s, [A, B]))
    # scoring and the tables: its own column, read back typed
    header = (s / layout.SCORES_TSV).read_text().splitlines()[0].split("\t")
    assert header.index("iteration_named") == header.index(DIMENSIONS.rows[-2].name) + 1  # after the table's last
    rows = {(r.cell, r.analyzer): r for r in read_score_tsv(s / layout.SCORES_TSV)}
    assert rows[A, "builtin"].grade("iteration_named") == Grade.TRUE
    assert rows[B, "builtin"].grade("iteration_named") == Grade.FALSE
    assert rows[B, "fr:builtin"].grade("iteration_named") == Grade.NA  # an FR analyzer does not grade it
    # the stop condition and so the report: B now fails, on that dimension only
    assert rows[B, "builtin"].failing() == ["iteration_named"] and rows[A, "builtin"].passed
    rates = md.split("## Pass rates")[1].split("### Not scored")[0]
    assert "| FAULT_TYPE | NODES | overall | restart_correct |" in rates and "| iteration_named |" in rates
    side = md.split("## Analyzers side by side")[1]
    assert "| fault_described | iteration_named |" in side
    assert f"### {B.name}: iteration_named=false" in md
    assert "iteration_named" in md.split("Stop condition")[0]  # the summary names the stop dimensions
    suite = ET.parse(s / layout.JUNIT_XML).getroot().find("testsuite")
    assert suite is not None
    failure = next(c for c in suite.iter("testcase") if c.get("name") == B.name).find("failure")
    assert failure is not None and failure.get("message") == "iteration_named=false"
    assert "<th>iteration_named</th>" in (s / layout.REPORT_HTML).read_text()
    assert "iteration_named" in (s / layout.HISTORY_DIR / "builtin" / "1_v1.tsv").read_text().splitlines()[0]
    # upstream's judge is not asked about it (it is not one of upstream's dimensions)
    assert "iteration_named" not in judge_schema()["properties"]


def test_a_new_fault_row_is_graded_and_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Scoring and the report ask faults.FAULTS about a fault (its category, its restart policy,
    its place in the tables): a row added there is enough."""
    disk = dataclasses.replace(FAULTS["SIGKILL"], name="DISK_FULL", value=99, category=OTHER, restart=STOP)
    monkeypatch.setitem(FAULTS, disk.name, disk)
    cell, known = Cell(disk.name, 2, 5, 1), Cell("SIGKILL", 1, 5, 1)
    suspects = FrVerdict(False, [2])
    said = LogVerdict.from_json(verdict(RESTART, [2], [], OTHER, None, "v1"))
    rows = []
    for c, log in ((known, LogVerdict.from_json(good(known, "v1"))), (cell, said)):
        truth, job = Truth(c, 4, 32), cell_manifest(c)
        rows += [score_cell(truth, job, log, suspects), score_fr(truth, job, suspects)]
    for record, name in zip(rows, ["builtin", "fr:builtin"] * 2, strict=True):
        record.analyzer = name
    new = rows[2]
    assert new.expected_restart == STOP and new.grade("restart_correct") == Grade.FALSE
    assert (new.grade("fault_category_correct"), new.grade("fault_described")) == (Grade.TRUE, Grade.PARTIAL)
    rep = build_report(rows, tmp_path / layout.HISTORY_DIR)
    md = render_markdown(rep)
    rates = md.split("## Pass rates")[1].split("### Not scored")[0].splitlines()
    faults = [line.split(" | ")[0].lstrip("| ") for line in rates if line.startswith("| ") and "%" in line]
    assert faults == ["SIGKILL", "DISK_FULL", "**all**"]  # in the fault table's order, the new row last
    patterns = md.split("## Failure-mode patterns")[1].split("## Evidence")[0]
    assert f"| restart_correct=false, expected STOP | 1 | {cell.name} |" in patterns
    assert f"| fault_described=partial for crash types | 1 | {cell.name} |" in patterns  # not a hang
    assert f'id="cell-{cell.name}"' in render_html(rep, tmp_path / "no-heatmap.png")
