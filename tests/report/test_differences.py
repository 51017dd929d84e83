"""The report's findings beside the side-by-side tables: restart decisions an analyzer's own policy
makes against the restart table, and the combined verdict against the two verdicts it merged."""

from __future__ import annotations

from typing import Any

from faultloop.analyze.kinds import combined
from faultloop.contracts import DIMENSIONS, SCORED, Grade, Reads, ScoreRecord
from faultloop.core.cell import Cell
from faultloop.faults import RESTART, STOP
from faultloop.report import differences
from faultloop.report.document import Table


def record(analyzer: str, cell: Cell, grades: dict[str, Grade] | None = None, **fields: Any) -> ScoreRecord:
    """A scored record that passes every dimension but those `grades` names."""
    passing = {d.name: d.passing for d in DIMENSIONS}
    return ScoreRecord(cell, analyzer, status=SCORED, grades=passing | (grades or {}), **fields)


def test_combined_section_compares_it_with_both_inputs() -> None:
    hang, kill = Cell("GPU_SLEEP", 3, 5, 1), Cell("SIGKILL", 1, 5, 1)
    log_views = {
        "builtin": [
            record("builtin", hang, {"rank_primary": Grade.FALSE}, primary_ranks=[0]),
            record("builtin", kill, primary_ranks=[1]),
        ],
        combined.NAME: [
            record(combined.NAME, hang, primary_ranks=[3]),
            record(combined.NAME, kill, primary_ranks=[1]),
        ],
    }
    fr_views = {
        "fr:builtin": [
            record("fr:builtin", hang, fr_suspects=[3]),
            record("fr:builtin", kill, {"fr_rank_correct": Grade.NODE}, fr_suspects=[1, 2]),
        ]
    }
    (finding,) = differences.combined_findings(log_views, fr_views)
    rates, _, cells = (b for b in finding.blocks if isinstance(b, Table) or "cell(s)" in b)
    assert isinstance(rates, Table) and isinstance(cells, Table)
    assert [r[0] for r in rates.rows] == list(DIMENSIONS.names(reads=(Reads.LOG, Reads.FR)))
    rank_primary = next(r for r in rates.rows if r[0] == "rank_primary")
    assert rank_primary == ["rank_primary", "2/2", "1/2", "1/2", "yes"]
    assert next(r for r in rates.rows if r[0] == "fr_rank_correct")[2:] == ["-", "1/2", "yes"]
    assert [row[:5] for row in cells.rows] == [
        ["n1_GPU_SLEEP_r3_i5", "3", "3", "0", "3"],
        ["n1_SIGKILL_r1_i5", "1", "1", "1", "1 2"],
    ]
    assert [row[5:] for row in cells.rows] == [["true", "false"], ["true", "true"]]
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
                {"restart_correct": Grade.FALSE},
                expected_restart=STOP,
                analyzer_restart=RESTART,
                restart_policy=budget,
            )
        ],
    }
    (finding,) = differences.policy_findings(log_views)
    intro, summary, detail = finding.blocks
    assert isinstance(intro, str) and "Analyzers that name no policy of their own: builtin." in intro
    assert isinstance(summary, Table) and summary.rows == [
        ["nvrx_restart_agent", "retry_budget.v1 general_retry", "0/1", "1"]
    ]
    assert isinstance(detail, Table)
    assert detail.rows == [["nvrx_restart_agent", "n1_SIGKILL_r1_i5", STOP, RESTART, budget]]
    assert differences.policy_findings({"builtin": log_views["builtin"]}) == []


def test_restart_policy_travels_in_the_records_not_in_scores_tsv() -> None:
    row = record("nvrx_restart_agent", Cell("SIGKILL", 1, 5, 1), restart_policy="retry_budget.v1 general_retry (x)")
    assert ScoreRecord.from_json(row.to_json()).restart_policy == row.restart_policy
    assert "restart_policy" not in row.to_row()


def test_reading_section_counts_which_reading_found_each_verdict_and_how_often_it_passed() -> None:
    kill, hang, exc = Cell("SIGKILL", 1, 5, 1), Cell("GPU_SLEEP", 3, 5, 1), Cell("WORKLOAD_EXC", 0, 5, 1)
    log_views = {
        "faultloop": [
            record("faultloop", kill, found_by="row"),
            record("faultloop", exc, found_by="row"),
            record("faultloop", hang, {"rank_primary": Grade.FALSE}, found_by="temporal"),
        ],
        "first_error": [record("first_error", kill)],  # says nothing of its readings
    }
    (finding,) = differences.reading_findings(log_views)
    (table,) = [b for b in finding.blocks if isinstance(b, Table)]
    assert table.rows == [["faultloop", "row", "2", "2/2"], ["faultloop", "temporal", "1", "0/1"]]
    assert differences.reading_findings({"first_error": log_views["first_error"]}) == []
