"""The session's tables (rule score): every pool cell's score records gathered in pool order, and
the cells an analyzer fails on (`cells=failed`, the failing pool of the next iteration)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from faultloop.contracts import (
    INFRA_FAILURE,
    NOT_NEEDED,
    NOT_RUN,
    Manifest,
    ManifestError,
    RecordError,
    ScoreRecord,
    read_cell_scores,
    read_score_tsv,
)
from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.plan.pool import write_pool_file
from faultloop.score import life


def _stored(cell_dir: Path) -> dict[str, ScoreRecord] | None:
    try:
        return read_cell_scores(cell_dir / layout.SCORE_JSON)
    except RecordError:
        return None


def _manifest(run_dir: Path) -> Manifest | None:
    try:
        return Manifest.read(run_dir / layout.MANIFEST)
    except ManifestError:
        return None


def with_life(record: ScoreRecord, runs: list[tuple[Manifest, dict[str, ScoreRecord] | None]]) -> ScoreRecord:
    """A log analyzer's record of a cell graded over the cell's life: its decision at each attempt
    that ran (the runs' own records, in order) against the oracle (score.life)."""
    if record.is_fr or not record.scored:
        return record
    decisions = [life.decision_of(s[record.analyzer].decision) if s and record.analyzer in s else None for _, s in runs]
    graded = life.grade_life([job for job, _ in runs], decisions)
    record.grades["policy_correct"], record.grades["drain_correct"] = graded.policy, graded.drain
    record.life, record.policy_cost_estimated = graded.steps, graded.estimated
    record.policy_cost_node_min = graded.cost_node_min
    return record


def life_runs(cell_dir: Path, attempts: int) -> list[tuple[Manifest, dict[str, ScoreRecord] | None]]:
    """A cell's attempts that ran, in order, each with its run's stored score records."""
    runs = []
    for run_dir in layout.run_dirs(cell_dir, attempts):
        job = _manifest(run_dir)
        if job is None or job.state == NOT_NEEDED:
            break
        runs.append((job, _stored(run_dir)))
    return runs


def gather(session_dir: Path, cells: Iterable[Cell], analyzers: list[str] | None = None) -> list[ScoreRecord]:
    """One record per pool cell and analyzer (log analyzers, then fr:<name>), in that order:
    scored, invalid, infrastructure failure or not run; a log analyzer's graded over the cell's
    life too (`with_life`). Without a list, the analyzers the cells' scores name."""
    cells = list(cells)
    stored = {cell.name: _stored(session_dir / cell.name) for cell in cells}
    names = analyzers or list(dict.fromkeys(a for s in stored.values() if s for a in s)) or ["builtin"]
    records = []
    for cell in cells:
        cell_dir = session_dir / cell.name
        scores = stored[cell.name]
        infra = Manifest.read(cell_dir / layout.INFRA_FAILURE) if (cell_dir / layout.INFRA_FAILURE).is_file() else None
        runs = life_runs(cell_dir, cell.attempts) if scores is not None else []
        for name in names:
            # infra_failure.json is cleared when a run starts, so one that exists describes the
            # latest run: never scored, even though the chain produced a score.json for it.
            if infra is not None:
                why = infra.invalid_reason or "the job could not start"
                records.append(
                    ScoreRecord.unscored(
                        cell,
                        name,
                        INFRA_FAILURE,
                        "INFRA_FAILURE",
                        f"infrastructure ({infra.state}): {why}",
                        infra.job_id,
                    )
                )
            elif scores is not None and name in scores:
                records.append(with_life(scores[name], runs))
            elif (cell_dir / layout.MANIFEST).exists():
                records.append(ScoreRecord.unscored(cell, name, NOT_RUN, "NOT_RUN", "ran but not scored yet"))
            else:
                records.append(ScoreRecord.unscored(cell, name, NOT_RUN, "NOT_RUN", "no run artifacts"))
    return records


def by_analyzer(records: Iterable[ScoreRecord]) -> dict[str, list[ScoreRecord]]:
    """Records per analyzer, in the order the analyzers first appear (the primary first)."""
    out: dict[str, list[ScoreRecord]] = {}
    for record in records:
        out.setdefault(record.analyzer, []).append(record)
    return out


def primary_name(records: Iterable[ScoreRecord]) -> str | None:
    return next((r.analyzer for r in records if not r.is_fr), None)


def _failing(records: list[ScoreRecord], name: str | None, include_unscored: bool) -> list[Cell]:
    return [r.cell for r in records if r.analyzer == name and (r.failing() or (include_unscored and not r.scored))]


def failing_cells(scores_tsv: Path, *, analyzer: str | None = None, include_unscored: bool = False) -> list[Cell]:
    """Cells where an analyzer (default: the primary) misses a stop-condition dimension; with
    include_unscored also invalid, infra-failed and not-run cells."""
    records = read_score_tsv(Path(scores_tsv))
    name = analyzer if analyzer in {r.analyzer for r in records} else primary_name(records)
    return _failing(records, name, include_unscored)


def write_failing_pool(records: list[ScoreRecord], pool_path: Path, *, include_unscored: bool = False) -> list[Cell]:
    """A pool TSV (FAULT_TYPE RANK ITER NODES) of the primary analyzer's failing cells, for the next iteration."""
    cells = _failing(records, primary_name(records), include_unscored)
    write_pool_file(cells, pool_path)
    return cells
