"""A stored session re-judged gives the scores, report and JUnit file it gave before this code.

`tests/data/stored_session/session/` holds what the analysis rules of a real local run (one
SIGKILL and one GPU_SLEEP cell) left for scoring: each cell's job.json, stripped log, indexes,
verdicts and run records. `expected/` holds scores.tsv, experiments_report.md and junit.xml as
the code before the analyzer table (commit 34c5b11: score.cells merging the combined verdict
itself) re-judged it. The steps below are rule judge_score's (the merge step, then scoring), rule
score's and rule aggregate_report's; only fingerprints (code hashes) and renamed names may differ."""

from __future__ import annotations

import re
import shutil
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import TESTS
from faultloop.analyze import registry, running
from faultloop.analyze.analyzer import Input
from faultloop.cli import analyzers as analyzers_cli
from faultloop.cli import report as report_cli
from faultloop.contracts import RENAMED, read_score_tsv, write_score_tables
from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.score.cells import score_cell_dir
from faultloop.score.tables import gather

STORED = TESTS / "data" / "stored_session"
FINGERPRINT_RE = re.compile(r"\b[0-9a-f]{12}\b")


def normalised(path: Path) -> list[str]:
    text = FINGERPRINT_RE.sub("<fingerprint>", path.read_text())
    for old, new in RENAMED.items():
        text = text.replace(old, new)
    return text.splitlines()


def test_a_stored_session_rejudged_gives_the_same_scores_report_and_junit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The merge step's wall time is measured; the stored expectation has it at 0.0 s.
    monkeypatch.setattr(running, "time", SimpleNamespace(perf_counter=lambda: 0.0, time=time.time))
    session = tmp_path / "session"
    shutil.copytree(STORED / "session", session)
    cells = sorted(p.name for p in session.iterdir() if p.is_dir())
    config = {"analyzers": {"faultloop": {"kind": "faultloop"}}}
    merged = registry.specs_json(registry.selected(config, Input.VERDICTS))
    for name in cells:
        assert analyzers_cli.main(["merge", "--cell-dir", str(session / name), "--specs", merged]) == 0
        score_cell_dir(session / name, session / name / layout.SCORE_JSON, gpus_per_node=4, segment_size=32)
    # the names the session was run with (faultloop's analyzer was named builtin then)
    names = ["builtin", "torchrun_root_cause", "first_error", "combined", "fr:builtin", "fr:torchfrtrace"]
    records = gather(session, [Cell.from_name(c) for c in cells], names)
    write_score_tables(records, session / layout.SCORES_TSV, session / layout.SCORE_RECORDS)
    assert (
        report_cli.main(
            ["--records", str(session / layout.SCORE_RECORDS), "--session-dir", str(session), "--no-history"]
        )
        == 0
    )
    # every column scores.tsv had stays as it was; the columns of a job's life, its workload and launcher are new
    before, after = normalised(STORED / "expected" / layout.SCORES_TSV), normalised(session / layout.SCORES_TSV)
    columns = before[0].split("\t")
    kept = [dict(zip(after[0].split("\t"), row.split("\t"), strict=True)) for row in after[1:]]
    assert [[row[c] for c in columns] for row in kept] == [row.split("\t") for row in before[1:]]
    assert set(after[0].split("\t")) - set(columns) == {
        "policy_correct", "drain_correct", "decisions", "expected_decisions", "policy_cost_node_min",
        "WORKLOAD", "LAUNCHER",
    }  # fmt: skip
    # the report holds everything it held, in order (the life's sections are added); the JUnit file
    # every suite it had, as it was, and one suite more per log analyzer over the cells' lives
    assert in_order(normalised(STORED / "expected" / layout.REPORT_MD), normalised(session / layout.REPORT_MD))
    old, new = (suites(path / layout.JUNIT_XML) for path in (STORED / "expected", session))
    assert {name: new[name] for name in old} == old
    assert set(new) - set(old) == {f"{n}.life" for n in ["builtin", "torchrun_root_cause", "first_error", "combined"]}
    # the stored verdicts predate lives: faultloop's STOP for a kill that passes is its policy's miss;
    # the GPU hang's job.json names no fault node, so its life is not graded
    life = {(row["CELL"], row["ANALYZER"]): row for row in kept}
    sigkill = life["n1_SIGKILL_r1_i5", "builtin"]
    assert (sigkill["policy_correct"], sigkill["decisions"], sigkill["expected_decisions"]) == (
        "false",
        "stop",
        "restart",
    )
    assert life["n2_GPU_SLEEP_r0_i5", "builtin"]["policy_correct"] == "N/A"


def suites(junit: Path) -> dict[str, str]:
    """A JUnit file's suites by name, each as its text (fingerprints normalised)."""
    root = ET.fromstring(FINGERPRINT_RE.sub("FINGERPRINT", junit.read_text()))
    return {suite.get("name", ""): ET.tostring(suite, encoding="unicode").strip() for suite in root.iter("testsuite")}


def in_order(lines: list[str], within: list[str]) -> bool:
    """Whether `lines` all appear in `within`, in their order."""
    rest = iter(within)
    return all(line in rest for line in lines)


def test_stored_scores_are_read_under_their_renamed_names() -> None:
    rows = read_score_tsv(STORED / "expected" / layout.SCORES_TSV)  # written before logsage_restart was renamed
    assert {r.analyzer_restart for r in rows if not r.is_fr} == {"STOP - DONT RESTART IMMEDIATE", "RESTART IMMEDIATE"}
