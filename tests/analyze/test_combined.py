"""faultloop's combined verdict: the merge rules, and its place among a cell's scores (merged by
the analyze layer's merge step, then scored beside the log analyzers; reused while its inputs
are unchanged)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import cell_manifest, put_analysis
from faultloop.analyze import registry
from faultloop.analyze.analyzer import Input
from faultloop.analyze.kinds import combined
from faultloop.analyze.running import AnalyzerFailure
from faultloop.cli import analyzers as analyzers_cli
from faultloop.contracts import LIFE_RECORD, RANK_HOSTS, FrVerdict, Grade, LogVerdict, Manifest
from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.core.errors import ConfigError
from faultloop.faults import ERRORS_NOT_FOUND, RESTART, STOP
from faultloop.score.cells import score_analyzers
from faultloop.score.grade import Truth


def log_json(primary: list[int], secondary: list[int] = (), category: str = "crash", **extra: Any) -> dict[str, Any]:
    return {
        "restart": STOP,
        "primary_ranks": primary,
        "secondary_ranks": list(secondary),
        "fault_category": category,
        "fault_type": "SIGKILL" if category == "crash" else "GPU_SLEEP",
        "evidence": [{"line": 3, "text": "rank 1 killed", "kind": "death_signal"}],
        **extra,
    }


def log_verdict(primary: list[int], secondary: list[int] = (), category: str = "crash", **extra: Any) -> LogVerdict:
    return LogVerdict.from_json(log_json(primary, secondary, category, **extra))


def fr_json(suspects: list[int], *, no_dumps: bool = False) -> dict[str, Any]:
    return {"no_dumps": no_dumps, "suspect_ranks": suspects, "scope": "rank"}


def fr_verdict(suspects: list[int], *, no_dumps: bool = False) -> FrVerdict:
    return FrVerdict.from_json(fr_json(suspects, no_dumps=no_dumps))


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
    log: LogVerdict, fr: FrVerdict | None, rule: str, primary: list[int], secondary: list[int]
) -> None:
    merged = combined.merge(log, fr)
    assert (merged.extra["merge_rule"], merged.primary_ranks, merged.secondary_ranks) == (rule, primary, secondary)
    # restart, fault and cited lines are always the log's
    assert (merged.restart, merged.fault_category, merged.evidence) == (log.restart, log.fault_category, log.evidence)
    assert merged.mode == combined.NAME and LogVerdict.from_json(merged.to_json()) == merged


def test_without_a_log_verdict() -> None:
    merged = combined.merge(None, fr_verdict([4]))
    assert (merged.restart, merged.primary_ranks, merged.extra["merge_rule"]) == (ERRORS_NOT_FOUND, [4], "fr_only")
    with pytest.raises(AnalyzerFailure, match="neither"):
        combined.merge(None, None)


LOG_ONLY = {"analyzers": {"faultloop": {"kind": "faultloop"}}}
TAKEN = {"analyzers": {"faultloop": {"kind": "faultloop"}, "combined": {"kind": "first_error"}}}


def test_the_name_is_reserved_while_enabled() -> None:
    assert [s.name for s in registry.selected(LOG_ONLY, Input.VERDICTS)] == ["combined"]
    assert registry.selected({**TAKEN, "combined": False}, Input.VERDICTS) == []
    with pytest.raises(ConfigError, match=r"analyzers\.combined"):
        registry.selected(TAKEN, Input.VERDICTS)


def merge_step(cell: Path, config: dict[str, Any]) -> None:
    """The analyze layer's merge step, as rule judge_score runs it before scoring."""
    analyzers_cli.merge(cell, registry.specs_json(registry.selected(config, Input.VERDICTS)), fresh=False)


@pytest.fixture
def cell(tmp_path: Path) -> Path:
    """A cell to score: a hang on rank 3 the log pins on rank 0, FR on rank 3."""
    cell_dir = tmp_path / "n1_GPU_SLEEP_r3_i5"
    cell_dir.mkdir()
    cell_manifest(Cell("GPU_SLEEP", 3, 5, 1)).write(cell_dir / layout.MANIFEST)
    (cell_dir / layout.STRIPPED_LOG).parent.mkdir(parents=True, exist_ok=True)
    (cell_dir / layout.STRIPPED_LOG).write_text("line\n" * 5)
    hang = {**log_json([0], [1, 2], category="hang"), "restart": RESTART}
    put_analysis(cell_dir, {"builtin": hang}, {"builtin": fr_json([3])})
    return cell_dir


def test_scored_beside_the_log_analyzers_and_reused(cell: Path) -> None:
    job = Manifest.read(cell / layout.MANIFEST)
    truth = Truth(Cell("GPU_SLEEP", 3, 5, 1), 4, 32)
    merge_step(cell, LOG_ONLY)
    scores = score_analyzers(cell, truth, job)
    assert [s.analyzer for s in scores] == ["builtin", "combined", "fr:builtin"]
    by_name = {s.analyzer: s for s in scores}
    assert by_name["builtin"].grade("rank_primary") == Grade.FALSE
    assert by_name["combined"].grade("rank_primary") == Grade.TRUE
    assert by_name["combined"].grade("restart_correct") == Grade.TRUE
    merged = LogVerdict.read(cell / layout.analyzer_dir("combined") / layout.VERDICT_JSON)
    assert merged.extra["merge_rule"] == combined.FR_OVERRIDES
    assert merged.extra["inputs"] == {"log": "builtin", "fr": "builtin"}
    stamp = (cell / layout.analyzer_dir("combined") / layout.RUN_JSON).stat().st_mtime_ns
    merge_step(cell, LOG_ONLY)
    score_analyzers(cell, truth, job)
    assert (cell / layout.analyzer_dir("combined") / layout.RUN_JSON).stat().st_mtime_ns == stamp  # reused
    merge_step(cell, {**LOG_ONLY, "combined": False})
    assert [s.analyzer for s in score_analyzers(cell, truth, job)] == ["builtin", "fr:builtin"]


def test_the_drain_follows_the_primaries_the_flight_recorder_named() -> None:
    """A node-bound failure's drain moves with the culprit where FR overrides the log's rank, by
    the log's record of where each rank ran; a log that drains nothing drains nothing merged."""
    hosts = {LIFE_RECORD: {RANK_HOSTS: {"1": "node0", "5": "node1"}}}
    hang = LogVerdict(RESTART, [1], [], "hang", "GPU_SLEEP", "", "", [], False, drain_nodes=["node0"], extra=hosts)
    fr = FrVerdict(False, [5])
    merged = combined.merge(hang, fr)
    assert (merged.primary_ranks, merged.drain_nodes) == ([5], ["node1"])
    assert combined.merge(hang, FrVerdict(False, [1])).drain_nodes == ["node0"]  # they agree
    unplaced = combined.merge(hang, FrVerdict(False, [7]))  # FR's rank the log does not place: the log's drain
    assert (unplaced.primary_ranks, unplaced.drain_nodes) == ([7], ["node0"])
    plain = LogVerdict(RESTART, [1], [], "hang", None, "", "", [], False, next_attempt=STOP)
    merged = combined.merge(plain, fr)
    assert (merged.drain_nodes, merged.next_attempt) == ([], STOP)
