"""Every analyzer's pass rates per workload and per launcher: faultloop's, the combined verdict,
the baselines, NVRx's where a checkout is present and the flight-recorder analyzers, on the cells
each framework ran under each launcher, so "the Restart Agent under Lightning and mpirun" reads
off one row. A cell's workload and launcher are its run's (job.json)."""

from __future__ import annotations

from collections.abc import Callable

from faultloop.contracts import ScoreRecord
from faultloop.report.model import Rate, Report, rate

UNKNOWN = "-"  # a cell that never ran: its job.json says nothing


def everyone(rep: Report) -> dict[str, list[ScoreRecord]]:
    """Every analyzer's records, the log analyzers first (the primary leads), then FR's."""
    return {**rep.log_views, **rep.fr_views}


def placement(row: ScoreRecord) -> tuple[str, str]:
    return row.workload or UNKNOWN, row.launcher or UNKNOWN


def rates_by(
    rep: Report, key: Callable[[ScoreRecord], tuple[str, ...]]
) -> tuple[list[str], dict[tuple[str, ...], dict[str, Rate]]]:
    """The analyzers, and per key value (of a scored cell) each analyzer's overall pass rate."""
    analyzers = everyone(rep)
    keys = sorted({key(r) for rows in analyzers.values() for r in rows if r.scored})
    table = {k: {name: rate([r for r in rows if key(r) == k], lambda r: r.passed) for name, rows in analyzers.items()}
             for k in keys}  # fmt: skip
    return list(analyzers), table


def by_pair(rep: Report) -> tuple[list[str], dict[tuple[str, ...], dict[str, Rate]]]:
    return rates_by(rep, placement)


def by_workload(rep: Report) -> tuple[list[str], dict[tuple[str, ...], dict[str, Rate]]]:
    return rates_by(rep, lambda r: placement(r)[:1])


def by_launcher(rep: Report) -> tuple[list[str], dict[tuple[str, ...], dict[str, Rate]]]:
    return rates_by(rep, lambda r: placement(r)[1:])
