"""A real job's life through the workflow: the acceptance pool's three lives (tests/data/stored_life,
real runs of the built-in workload) re-judged by Snakemake: each attempt's analysis declares the
earlier attempts, faultloop's analyzer and the combined verdict decide over them, and scores.tsv,
the report, JUnit and the HTML page (in headless chromium) hold the job's life."""

from __future__ import annotations

import csv
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import TESTS, copy_workflow, snakemake
from faultloop.analyze import nvrx
from faultloop.contracts import LogVerdict
from faultloop.core import layout

pytestmark = pytest.mark.slow

STORED = TESTS / "data" / "stored_life"
POOL = "NET_DROP:1:5:2:2 GPU_ERROR:1:5:2:2 WORKLOAD_EXC:0:5:1:2"
NET, GPU, EXC = "n2_NET_DROP_r1_i5_a2", "n2_GPU_ERROR_r1_i5_a2", "n1_WORKLOAD_EXC_r0_i5_a2"
NVRX = bool(os.environ.get(nvrx.SRC_ENV))  # NVRx's Restart Agent beside, where a checkout is named


@pytest.fixture(scope="module")
def life(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = copy_workflow(tmp_path_factory.mktemp("life") / "wf")
    session = work / "results" / "fault_injection" / "life"
    shutil.copytree(STORED, session, ignore=shutil.ignore_patterns("README.md"))
    analyzers = "faultloop,torchrun_root_cause,first_error" + (f",{nvrx.RESTART_AGENT}" if NVRX else "")
    config = (f"pool={POOL}", "session=life", "rejudge=True", f"analyzers={analyzers}")
    snakemake(work, "--profile", "profiles/local", "--config", *config, timeout=900)
    return session


def rows(session: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(session / layout.SCORES_TSV) as handle:
        return {(r["CELL"], r["ANALYZER"]): r for r in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)}


def test_faultloop_and_the_combined_verdict_are_right_over_every_life(life: Path) -> None:
    scores = rows(life)
    for analyzer in ("faultloop", "combined"):
        for cell in (NET, GPU, EXC):
            row = scores[cell, analyzer]
            assert (row["policy_correct"], row["drain_correct"]) == ("true", "true"), (cell, analyzer)
            assert row["policy_cost_node_min"] == "0.0"
    assert scores[GPU, "faultloop"]["decisions"].startswith("restart without node0;")
    assert scores[GPU, "faultloop"]["expected_decisions"] == "restart without node0; -"
    assert scores[EXC, "faultloop"]["decisions"] == scores[EXC, "faultloop"]["expected_decisions"] == "stop; stop"
    # the baseline stops where the link passes and where the GPU's node could be left out: its cost
    # is the attempt the job still needed, as attempt 2 measured it (2 nodes x its minutes)
    naive = scores[NET, "torchrun_root_cause"]
    assert (naive["policy_correct"], naive["drain_correct"]) == ("false", "true")
    assert float(naive["policy_cost_node_min"]) > 1.0
    assert scores[GPU, "torchrun_root_cause"]["drain_correct"] == "false"
    assert scores[NET, "fr:faultloop"]["policy_correct"] == "N/A"  # an FR analyzer decides nothing


def test_each_attempts_analysis_read_the_earlier_attempts(life: Path) -> None:
    second = LogVerdict.read(life / EXC / "attempt_2" / layout.analyzer_dir("faultloop") / layout.VERDICT_JSON)
    record = second.extra["life"]
    assert [a["where"] for a in record["attempts"]] == ["attempt 1's log", "this log"]
    assert (record["rule"], record["repeats"], second.next_attempt) == ("recurs", 1, "STOP - DONT RESTART IMMEDIATE")
    first = LogVerdict.read(life / GPU / layout.analyzer_dir("faultloop") / layout.VERDICT_JSON)
    assert (first.restart, first.next_attempt, first.drain_nodes) == (
        "STOP - DONT RESTART IMMEDIATE",
        "RESTART IMMEDIATE",
        ["node0"],
    )


def test_the_report_and_junit_hold_the_life(life: Path) -> None:
    md = (life / layout.REPORT_MD).read_text()
    policies = md.split("## A job's life: restart policies")[1].split("### Each cell's life")[0]
    assert "| faultloop | 3/3 (100%) | 3/3 (100%) | 0.00 | 0 (0.00) | 0 (0.00) |" in policies
    cells = md.split("### Each cell's life")[1].split("\n## ")[0]
    assert f"| {GPU} | 1 | GPU_ERROR fired on node0" in cells
    assert "| restart without node0 | restart without node0 ✓ |" in cells
    assert "resumed at iteration" in cells and "without node0, the fault did not come back, COMPLETED" in cells
    suites = {s.get("name"): s for s in ET.parse(life / layout.JUNIT_XML).getroot().iter("testsuite")}
    assert suites["faultloop.life"].get("failures") == "0" and suites["torchrun_root_cause.life"].get("failures") == "2"


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (make test installs it)")
def test_the_life_tables_render_in_a_real_browser(life: Path) -> None:
    from faultloop.report import browser

    dom = browser.rendered_dom(life / layout.REPORT_HTML)
    assert "A job's life: restart policies" in dom and "Each cell's life" in dom
    assert "restart without node0 ✓" in dom and "policy cost" in dom
    assert 'class="life-row" data-analyzer="faultloop"' in dom


@pytest.mark.skipif(not NVRX, reason="no NVRx checkout: set NVRX_SRC (and NVRX_PYTHON) to score its Restart Agent")
def test_nvrx_restart_agent_is_scored_over_the_same_lives(life: Path) -> None:
    scores = rows(life)
    agent = {cell: scores[cell, nvrx.RESTART_AGENT] for cell in (NET, GPU, EXC)}
    assert agent[NET]["policy_correct"] == "true"  # its retry budget restarts the first occurrence
    assert agent[GPU]["drain_correct"] == "false"  # it names no node (its design defers isolation)
    assert agent[EXC]["policy_correct"] == "false"  # ... and restarts the first exception too
    records = life / GPU / "attempt_2" / layout.analyzer_dir(nvrx.RESTART_AGENT) / "attempt_records.json"
    assert records.is_file()
