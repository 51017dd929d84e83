"""Upstream's tracking file (experiments.tsv) of a session to adopt: the injected truth of each run."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.plan.pool import COLUMNS as POOL_COLUMNS
from faultloop.plan.pool import PoolError, RawRow, table_lines, validate

# SLURM job ids (1234, 1234_7) and faultloop's local-<hex>: nothing a file pattern would expand.
JOB_ID_RE = re.compile(r"^[\w.+-]+$")


class AdoptError(ValueError):
    """A session that cannot be adopted; the message lists every problem with its file and row."""

    def __init__(self, source: str, problems: list[str]):
        self.problems = problems
        super().__init__(f"cannot adopt {source}:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class TrackedRun:
    """One row of upstream's experiments.tsv: the injected truth and the folder of its run."""

    cell: Cell
    job_id: str
    cell_dir: Path


def experiment_dir(recorded: str, root: Path) -> Path | None:
    """The row's folder inside the session (resolved), or None when it lies outside.

    A session copied off its cluster keeps absolute paths of the old place; a path whose parent
    folder has the session's own name is read as that folder here.
    """
    path = Path(recorded)
    path = Path(os.path.normpath(path if path.is_absolute() else root / path))
    real = path.resolve() if path.exists() else path
    if real == root or root in real.parents:
        return real
    if path.parent.name == root.name:
        return root / path.name
    return None


def _tracked_row(
    fields: Mapping[str, str], where: str, root: Path, gpus_per_node: int, problems: list[str]
) -> TrackedRun | None:
    cell: Cell | None = None
    try:
        cell = validate(
            [RawRow(where, tuple(fields[c] for c in POOL_COLUMNS))], source=where, gpus_per_node=gpus_per_node
        )[0]
    except PoolError as error:
        problems.extend(error.problems)
    job_id = fields["JOB_ID"]
    if not JOB_ID_RE.match(job_id):
        problems.append(f"{where}: JOB_ID must be a job id (letters, digits, '.', '_', '+', '-'), got {job_id!r}")
    recorded = fields["EXPERIMENT_DIR"]
    folder = experiment_dir(recorded, root) if recorded else None
    if not recorded:
        problems.append(f"{where}: EXPERIMENT_DIR is empty")
    elif folder is None:
        problems.append(
            f"{where}: EXPERIMENT_DIR {recorded} is outside the session {root} "
            f"(a session copied from elsewhere must keep its folder name)"
        )
    elif cell is not None and folder != root / cell.name:
        problems.append(f"{where}: EXPERIMENT_DIR {recorded} is not this cell's folder {root / cell.name}")
    if cell is None or folder is None or not JOB_ID_RE.match(job_id):
        return None
    return TrackedRun(cell, job_id, folder)


def _fields(line: str, columns: int = 0) -> list[str]:
    """A row's tab-separated fields, stripped; blank ones past the first `columns` dropped (the
    blank columns a spreadsheet adds at a row's end)."""
    fields = [field.strip() for field in line.split("\t")]
    while len(fields) > columns and not fields[-1]:
        fields.pop()
    return fields


def read_tracking(session: Path, *, gpus_per_node: int) -> list[TrackedRun]:
    """Every run of upstream's experiments.tsv, in its order; every bad row is reported at once."""
    root = session.resolve()
    path = session / layout.TRACKING_TSV
    if not path.is_file():
        raise AdoptError(
            str(session),
            [
                f"{path}: no such tracking file (upstream's {layout.TRACKING_TSV}, "
                f"columns {' '.join(layout.TRACKING_COLUMNS)})"
            ],
        )
    try:
        lines = table_lines(path)
    except ValueError as error:
        raise AdoptError(str(session), [str(error)]) from None
    header = _fields(lines[0]) if lines else []
    missing = [c for c in layout.TRACKING_COLUMNS if c not in header]
    if missing:
        raise AdoptError(
            str(session),
            [
                f"{path} line 1: missing column(s) {', '.join(missing)}; the header must "
                f"name {' '.join(layout.TRACKING_COLUMNS)} (tab-separated), got "
                f"{lines[0] if lines else ''!r:.200}"
            ],
        )
    problems: list[str] = []
    runs: list[TrackedRun] = []
    first_seen: dict[Cell, str] = {}
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        values = _fields(line, len(header))
        if len(values) != len(header):
            problems.append(f"{where}: expected {len(header)} tab-separated fields, got {len(values)}")
            continue
        run = _tracked_row(
            dict(zip(header, values, strict=True)),
            where,
            root,
            gpus_per_node,
            problems,
        )
        if run is None:
            continue
        if run.cell in first_seen:
            problems.append(f"{where}: duplicate cell {run.cell.name} (first at {first_seen[run.cell]})")
            continue
        first_seen[run.cell] = where
        runs.append(run)
    if not runs and not problems:
        problems.append(f"{path}: no experiments (only the header)")
    if problems:
        raise AdoptError(str(session), problems)
    return runs
