"""faultloop's combined verdict: the merge rules, its place among a cell's scores, and the report's
sections on it and on restart policies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import cell_manifest, put_analysis
from faultloop import analyzers, combined, differences, layout
from faultloop.analyzers import AnalyzerFailure
from faultloop.config import ConfigError
from faultloop.faults import ERRORS_NOT_FOUND, RESTART, STOP
from faultloop.manifest import Manifest
from faultloop.pool import Cell
from faultloop.score import ScoreRecord, Truth, score_analyzers


def log_verdict(primary: list[int], secondary: list[int] = (), category: str = "crash", **extra: Any) -> dict[str, Any]:
    return analyzers.normalize(
        {
            "restart": STOP,
            "primary_ranks": primary,
            "secondary_ranks": list(secondary),
            "fault_category": category,
            "fault_type": "SIGKILL" if category == "crash" else "GPU_SLEEP",
            "evidence": [{"line": 3, "text": "rank 1 killed", "kind": "death_signal"}],
            **extra,
        }
    )


def fr_verdict(suspects: list[int], *, no_dumps: bool = False) -> dict[str, Any]:
    return {"no_dumps": no_dumps, "suspect_ranks": suspects, "scope": "rank"}


@pytest.mark.parametrize(
    ("log", "fr", "rule", "primary", "secondary"),
    [
        (log_verdict([1], [0]), None, combined.LOG_ONLY, [1], [0]),
        (log_verdict([1]), fr_verdict([], no_dumps=True), combined.LOG_ONLY, [1], []),
        (log_verdict([]), fr_verdict([2]), combined.FR_FILLS, [2], []),
        (log_verdict([2]), fr_verdict([2]), combined.AGREE, [2], []),
        (log_verdict([1, 2, 3]), fr_verdict([2]), combined.FR_NARROWS, [2], [1, 3]),
        (log_verdict([0], [1, 2], category="hang"), fr_verdict([3]), combined.FR_OVERRIDES, [3], [0, 1, 2]),
        (log_verdict([1], category="crash", confidence="high"), fr_verdict([3]), combined.LOG_STANDS, [1], [3]),
        (log_verdict([1], category="crash", confidence="medium"), fr_verdict([3]), combined.FR_OVERRIDES, [3], [1]),
        (log_verdict([1], category="exception"), fr_verdict([3]), combined.FR_OVERRIDES, [3], [1]),  # no confidence
        (log_verdict([0], category="hang"), fr_verdict([3, 5]), combined.LOG_STANDS, [0], [3, 5]),
    ],
)
def test_merge_rules(
    log: dict[str, Any], fr: dict[str, Any] | None, rule: str, primary: list[int], secondary: list[int]
) -> None:
    merged = combined.merge(log, fr)
    assert (merged["merge_rule"], merged["primary_ranks"], merged["secondary_ranks"]) == (rule, primary, secondary)
    # restart, fault and cited lines are always the log's
    assert (merged["restart"], merged["fault_category"], merged["evidence"]) == (
        log["restart"],
        log["fault_category"],
        log["evidence"],
    )


def test_without_a_log_verdict() -> None:
    merged = combined.merge(None, fr_verdict([4]))
    assert (merged["restart"], merged["primary_ranks"], merged["merge_rule"]) == (ERRORS_NOT_FOUND, [4], "fr_only")
    with pytest.raises(AnalyzerFailure, match="neither"):
        combined.merge(None, None)


def test_the_name_is_reserved_while_enabled() -> None:
    assert combined.enabled({}, ["builtin"]) is True
    assert combined.enabled({"combined": False}, ["combined"]) is False
    with pytest.raises(ConfigError, match=r"analyzers\.combined"):
        combined.enabled({"combined": True}, ["builtin", "combined"])


@pytest.fixture
def cell(tmp_path: Path) -> Path:
    """A cell to score: a hang on rank 3 the log pins on rank 0, FR on rank 3."""
    cell_dir = tmp_path / "n1_GPU_SLEEP_r3_i5"
    cell_dir.mkdir()
    cell_manifest(Cell("GPU_SLEEP", 3, 5, 1)).write(cell_dir / layout.MANIFEST)
    (cell_dir / layout.STRIPPED_LOG).parent.mkdir(parents=True, exist_ok=True)
    (cell_dir / layout.STRIPPED_LOG).write_text("line\n" * 5)
    hang = {**log_verdict([0], [1, 2], category="hang"), "restart": RESTART}
    put_analysis(cell_dir, {"builtin": hang}, {"builtin": fr_verdict([3])})
    return cell_dir


def test_scored_beside_the_log_analyzers_and_reused(cell: Path) -> None:
    job = Manifest.read(cell / layout.MANIFEST)
    truth = Truth(Cell("GPU_SLEEP", 3, 5, 1), 4, 32)
    scores = score_analyzers(cell, truth, job, combine=True)
    assert [s.analyzer for s in scores] == ["builtin", "combined", "fr:builtin"]
    by_name = {s.analyzer: s for s in scores}
    assert by_name["builtin"].rank_primary == "false"
    assert by_name["combined"].rank_primary == "true" and by_name["combined"].restart_correct == "true"
    merged = json.loads((cell / layout.analyzer_dir("combined") / layout.LOGSAGE_JSON).read_text())
    assert merged["merge_rule"] == combined.FR_OVERRIDES and merged["inputs"] == {
        "log": "builtin",
        "fr": "builtin",
    }
    stamp = (cell / layout.analyzer_dir("combined") / layout.RUN_JSON).stat().st_mtime_ns
    score_analyzers(cell, truth, job, combine=True)
    assert (cell / layout.analyzer_dir("combined") / layout.RUN_JSON).stat().st_mtime_ns == stamp  # reused
    assert [s.analyzer for s in score_analyzers(cell, truth, job)] == ["builtin", "fr:builtin"]


def record(analyzer: str, cell: Cell, **values: Any) -> ScoreRecord:
    base = {d: "true" for d in ("restart_correct", "rank_primary", "rank_any", "fault_described")}
    base |= {"fault_category_correct": "true", "fault_type_correct": "true", "fr_rank_correct": "rank"}
    return ScoreRecord(cell, analyzer, status="scored", run_valid="true", **(base | values))


def test_combined_section_compares_it_with_both_inputs() -> None:
    hang, kill = Cell("GPU_SLEEP", 3, 5, 1), Cell("SIGKILL", 1, 5, 1)
    log_views = {
        "builtin": [
            record("builtin", hang, rank_primary="false", rank_any="true", primary_ranks=[0]),
            record("builtin", kill, primary_ranks=[1]),
        ],
        "combined": [record("combined", hang, primary_ranks=[3]), record("combined", kill, primary_ranks=[1])],
    }
    fr_views = {
        "fr:builtin": [
            record("fr:builtin", hang, fr_suspects=[3]),
            record("fr:builtin", kill, fr_suspects=[1, 2], fr_rank_correct="node"),
        ]
    }
    (finding,) = differences.combined_findings(log_views, fr_views)
    rates, _, cells = (b for b in finding.blocks if isinstance(b, differences.FindingTable) or "cell(s)" in b)
    assert isinstance(rates, differences.FindingTable) and isinstance(cells, differences.FindingTable)
    rank_primary = next(r for r in rates.rows if r[0] == "rank_primary")
    assert rank_primary == ["rank_primary", "2/2", "1/2", "1/2", "yes"]
    assert next(r for r in rates.rows if r[0] == "fr_rank_correct")[2:] == ["-", "1/2", "yes"]
    assert [row[:5] for row in cells.rows] == [
        ["n1_GPU_SLEEP_r3_i5", "3", "3", "0", "3"],
        ["n1_SIGKILL_r1_i5", "1", "1", "1", "1 2"],
    ]
    assert differences.combined_findings({"builtin": log_views["builtin"]}, fr_views) == []


def test_policy_section_lists_decisions_that_follow_the_analyzers_own_policy() -> None:
    kill = Cell("SIGKILL", 1, 5, 1)
    budget = "retry_budget.v1 general_retry (general_retry_available)"
    log_views = {
        "builtin": [record("builtin", kill)],
        "nvrx_restart_agent": [
            record(
                "nvrx_restart_agent",
                kill,
                restart_correct="false",
                expected_restart=STOP,
                logsage_restart=RESTART,
                restart_policy=budget,
            )
        ],
    }
    (finding,) = differences.policy_findings(log_views)
    intro, summary, detail = finding.blocks
    assert isinstance(intro, str) and "Analyzers that name no policy of their own: builtin." in intro
    assert isinstance(summary, differences.FindingTable) and summary.rows == [
        ["nvrx_restart_agent", "retry_budget.v1 general_retry", "0/1", "1"]
    ]
    assert isinstance(detail, differences.FindingTable)
    assert detail.rows == [["nvrx_restart_agent", "n1_SIGKILL_r1_i5", STOP, RESTART, budget]]
    assert differences.policy_findings({"builtin": log_views["builtin"]}) == []
