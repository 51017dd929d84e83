"""Every analyzer's pass rates per workload and per launcher: faultloop's, the combined verdict,
the baselines, NVRx's where a checkout is present and the flight-recorder analyzers, on the cells
each framework ran under each launcher, so "the Restart Agent under Lightning and mpirun" reads
off one row. A cell's workload and launcher are its run's (job.json). Their sections are worded here."""

from __future__ import annotations

from collections.abc import Callable

from faultloop.contracts import ScoreRecord
from faultloop.report.document import Section, Table
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


def placement_sections(rep: Report) -> list[Section]:
    """Every analyzer's overall pass rate per workload and launcher, then per workload, per launcher."""
    names, pairs = by_pair(rep)
    grouped = [
        ("workload", "WORKLOAD", by_workload(rep)[1]),
        ("launcher", "LAUNCHER", by_launcher(rep)[1]),
    ]
    return [
        Section(
            "Pass rates by workload and launcher",
            [
                "Each analyzer's `overall` pass rate on the cells each workload ran under each launcher "
                "(the run's job.json; scored cells only).",
                Table(
                    ["WORKLOAD", "LAUNCHER", *names],
                    [[*key, *(str(rates[n]) for n in names)] for key, rates in pairs.items()],
                ),
            ],
        ),
        *(
            Section(
                f"By {what}",
                [Table([column, *names], [[*key, *(str(r[n]) for n in names)] for key, r in table.items()])],
                level=3,
            )
            for what, column, table in grouped
        ),
    ]
