"""Every analyzer's pass rates per workload and launcher: the model, the markdown, JUnit and the
HTML page as headless Chromium renders it."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from faultloop.contracts import DIMENSIONS, Grade, ScoreRecord
from faultloop.contracts.scores import SCORED, read_score_tsv, score_tsv_text
from faultloop.core.cell import Cell
from faultloop.report import placements
from faultloop.report.model import build_report
from faultloop.report.render import write_report

# (cell, workload, launcher): what ran; per analyzer, which cells it gets right
RUNS = [
    (Cell("SIGKILL", 1, 3, 2), "cpu_gloo", "torchrun"),
    (Cell("SEGFAULT", 1, 3, 2), "cpu_gloo", "torchrun"),
    (Cell("SIGKILL", 1, 3, 2, 1, "lightning", "mpirun"), "lightning", "mpirun"),
    (Cell("WORKLOAD_EXC", 1, 3, 2, 1, "lightning", "mpirun"), "lightning", "mpirun"),
    (Cell("SIGKILL", 1, 3, 2, 1, "", "mpiexec"), "cpu_gloo", "mpiexec"),
]
RIGHT = {
    "faultloop": {0, 1, 2, 3, 4},
    "nvrx_restart_agent": {0, 2},
    "fr:builtin": {0, 1, 2},
}


def record(index: int, analyzer: str) -> ScoreRecord:
    cell, workload, launcher = RUNS[index]
    grades = {d: DIMENSIONS[d].passing for d in DIMENSIONS.names()}
    if index not in RIGHT[analyzer]:
        grades["fr_rank_correct" if analyzer.startswith("fr:") else "restart_correct"] = Grade.FALSE
    return ScoreRecord(cell, analyzer, status=SCORED, workload=workload, launcher=launcher, grades=grades)


@pytest.fixture
def report_files(tmp_path: Path) -> dict[str, Path]:
    rows = [record(i, a) for a in RIGHT for i in range(len(RUNS))]
    rep = build_report(rows, tmp_path / "history")
    files = {k: tmp_path / f"report.{k}" for k in ("md", "html", "png", "xml")}
    write_report(rep, markdown=files["md"], html=files["html"], heatmap=files["png"], junit=files["xml"])
    return files


def test_rates_per_workload_and_launcher_for_every_analyzer(tmp_path: Path) -> None:
    rep = build_report([record(i, a) for a in RIGHT for i in range(len(RUNS))], tmp_path)
    names, pairs = placements.by_pair(rep)
    assert names == ["faultloop", "nvrx_restart_agent", "fr:builtin"]
    assert {k: {n: str(r) for n, r in v.items()} for k, v in pairs.items()} == {
        ("cpu_gloo", "mpiexec"): {"faultloop": "1/1 (100%)", "nvrx_restart_agent": "0/1 (0%)", "fr:builtin": "0/1 (0%)"},
        ("cpu_gloo", "torchrun"): {"faultloop": "2/2 (100%)", "nvrx_restart_agent": "1/2 (50%)", "fr:builtin": "2/2 (100%)"},
        ("lightning", "mpirun"): {"faultloop": "2/2 (100%)", "nvrx_restart_agent": "1/2 (50%)", "fr:builtin": "1/2 (50%)"},
    }  # fmt: skip
    assert str(placements.by_launcher(rep)[1][("mpirun",)]["nvrx_restart_agent"]) == "1/2 (50%)"
    assert str(placements.by_workload(rep)[1][("cpu_gloo",)]["nvrx_restart_agent"]) == "1/3 (33%)"


def test_scores_tsv_carries_the_workload_and_launcher(tmp_path: Path) -> None:
    tsv = tmp_path / "scores.tsv"
    tsv.write_text(score_tsv_text([record(i, "faultloop") for i in range(len(RUNS))]))
    header = tsv.read_text().splitlines()[0].split("\t")
    assert header[6:8] == ["WORKLOAD", "LAUNCHER"]
    back = read_score_tsv(tsv)
    assert [(r.cell, r.workload, r.launcher) for r in back] == RUNS


def test_markdown_and_junit_show_each_analyzer_per_workload_and_launcher(report_files: dict[str, Path]) -> None:
    md = report_files["md"].read_text()
    assert "## Pass rates by workload and launcher" in md
    assert "| lightning | mpirun | 2/2 (100%) | 1/2 (50%) | 1/2 (50%) |" in md
    suites = {s.get("name"): s for s in ET.fromstring(report_files["xml"].read_text()).iter("testsuite")}
    props = {p.get("name"): p.get("value") for p in suites["nvrx_restart_agent"].iter("property")}
    assert props["pass_rate.lightning.mpirun"] == "1/2 (50%)"
    classes = {c.get("classname") for c in suites["faultloop"].iter("testcase")}
    assert "faultloop.faultloop.lightning.mpirun.SIGKILL.n2" in classes


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (make test installs it)")
def test_the_html_page_shows_the_rates_in_a_real_browser(report_files: dict[str, Path]) -> None:
    from faultloop.report import browser

    class Tables(HTMLParser):
        """The rendered page's table rows under the section of the workloads and launchers."""

        def __init__(self) -> None:
            super().__init__()
            self.section = ""
            self.rows: list[list[str]] = []
            self.cell: list[str] | None = None

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "section":
                self.section = dict(attrs).get("id") or ""
            elif tag == "tr" and self.section == "pass-rates-by-workload-and-launcher":
                self.rows.append([])
            elif tag in ("td", "th") and self.rows and self.section == "pass-rates-by-workload-and-launcher":
                self.cell = []

        def handle_data(self, data: str) -> None:
            if self.cell is not None:
                self.cell.append(data)

        def handle_endtag(self, tag: str) -> None:
            if tag in ("td", "th") and self.cell is not None:
                self.rows[-1].append(re.sub(r"\s+", " ", "".join(self.cell)).strip())
                self.cell = None

    page = Tables()
    page.feed(browser.rendered_dom(report_files["html"]))
    assert page.rows[0] == ["WORKLOAD", "LAUNCHER", "faultloop", "nvrx_restart_agent", "fr:builtin"]
    assert ["lightning", "mpirun", "2/2 (100%)", "1/2 (50%)", "1/2 (50%)"] in page.rows
