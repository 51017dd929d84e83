"""What the side-by-side tables do not say: where an analyzer's restart decisions differ from the
restart table by its own policy (a design, not a miss), which reading of a log found each verdict,
and where faultloop's combined verdict differs from the two verdicts it merged: each finding is one
of the report's sections."""

from __future__ import annotations

from collections.abc import Callable

from faultloop.analyze.kinds import combined
from faultloop.contracts import DIMENSIONS, FR_RANK, Grade, Reads, ScoreRecord
from faultloop.contracts.verdicts import READINGS
from faultloop.report.document import Section, Table

RESTART = "restart_correct"


# ---- restart decisions by policy -------------------------------------------------------------


def policy_findings(log_views: dict[str, list[ScoreRecord]]) -> list[Section]:
    """Per analyzer whose verdicts name a restart policy of their own (NVRx's Restart Agent: a
    retry budget), the cells where its decision differs from the restart table, and why."""
    with_policy = {n: rows for n, rows in log_views.items() if any(r.scored and r.restart_policy for r in rows)}
    if not with_policy:
        return []
    summary, detail = [], []
    for name, rows in with_policy.items():
        scored = [r for r in rows if r.scored]
        by_design = [r for r in scored if r.grade(RESTART) == Grade.FALSE and r.restart_policy]
        policies = sorted({r.restart_policy.split(" (")[0] for r in scored if r.restart_policy})
        right = sum(1 for r in scored if r.grade(RESTART) == DIMENSIONS[RESTART].passing)
        summary.append([name, ", ".join(policies), f"{right}/{len(scored)}", str(len(by_design))])
        detail += [
            [name, r.cell.name, r.expected_restart, r.analyzer_restart or "-", r.restart_policy] for r in by_design
        ]
    others = [n for n in log_views if n not in with_policy]
    return [
        Section(
            "Restart decisions by policy",
            [
                "restart_correct grades every analyzer against the restart table (upstream's). An analyzer "
                "whose verdicts name a policy of their own decides differently by design where that policy "
                "says so: NVRx's Restart Agent spends a retry budget, so with no history the first occurrence "
                "of nearly any failure is RESTART. Those cells stay misses in every rate; they are listed here "
                "so a policy is not read as a misattribution."
                + (f" Analyzers that name no policy of their own: {', '.join(others)}." if others else ""),
                Table(["analyzer", "policy", "restart_correct (table)", "differ by policy"], summary),
                Table(["analyzer", "cell", "table says", "decided", "its policy's reason"], detail)
                if detail
                else "No decision differs from the table.",
            ],
        )
    ]


# ---- which reading found each verdict ----------------------------------------------------------


def reading_findings(log_views: dict[str, list[ScoreRecord]]) -> list[Section]:
    """Per analyzer whose verdicts say which reading found them (faultloop's: a known row, the
    generic reading, where the log stops, which rank differs), how often each carried and how often
    its verdict passed every dimension."""
    said = {n: [r for r in rows if r.scored and r.found_by] for n, rows in log_views.items()}
    said = {n: rows for n, rows in said.items() if rows}
    if not said:
        return []
    table = []
    for name, rows in said.items():
        for reading in READINGS:
            mine = [r for r in rows if r.found_by == reading]
            if mine:
                table.append([name, reading, str(len(mine)), f"{sum(1 for r in mine if r.passed)}/{len(mine)}"])
    return [
        Section(
            "Which reading found each verdict",
            [
                "faultloop's log analyzer reads a log with its rows of known templates first; where they find "
                "nothing it falls back on the generic reading (a severity and failure words, an exit status or "
                "a signal in any wording), on where the log stops (retries that never succeeded, a stall, threads "
                "waiting), and on which rank differs from the others. A verdict a fallback found is inferred, "
                "with low or medium confidence.",
                Table(["analyzer", "reading", "verdicts", "passed"], table),
            ],
        )
    ]


# ---- the combined verdict against its inputs --------------------------------------------------


def _dimensions() -> tuple[str, ...]:
    """The dimensions compared: every one that grades a log or an FR verdict, in column order."""
    return DIMENSIONS.names(reads=(Reads.LOG, Reads.FR))


def _log_pass(row: ScoreRecord, dimension: str) -> bool:
    return row.grade(dimension) == DIMENSIONS[dimension].passing


def _fr_pass(row: ScoreRecord, dimension: str) -> bool | None:
    """An FR verdict on the dimensions it speaks to: naming the rank, and fr_rank_correct."""
    if dimension == "rank_primary":
        return row.fr_suspects == [row.cell.rank]
    if dimension == "rank_any":
        return row.cell.rank in row.fr_suspects
    if dimension == FR_RANK:
        return row.grade(FR_RANK) == DIMENSIONS[FR_RANK].passing
    return None


def combined_findings(log_views: dict[str, list[ScoreRecord]], fr_views: dict[str, list[ScoreRecord]]) -> list[Section]:
    """The combined verdict beside the primary log analyzer and the first FR analyzer it merged:
    pass counts per dimension on the cells all three scored, whether it is at least as right as
    the better input on each, and every cell where its ranks differ from either input's."""
    if combined.NAME not in log_views or not fr_views:
        return []
    log_name = next(iter(log_views))
    fr_name = next(iter(fr_views))
    index: dict[str, dict[str, ScoreRecord]] = {
        name: {r.cell.name: r for r in rows if r.scored}
        for name, rows in (
            (combined.NAME, log_views[combined.NAME]),
            (log_name, log_views[log_name]),
            (fr_name, fr_views[fr_name]),
        )
    }
    cells = [c for c in index[combined.NAME] if c in index[log_name] and c in index[fr_name]]

    def count(name: str, dimension: str, test: Callable[[ScoreRecord, str], bool | None]) -> int | None:
        results = [test(index[name][c], dimension) for c in cells]
        return None if any(r is None for r in results) else sum(1 for r in results if r)

    table = []
    for d in _dimensions():
        mine = count(combined.NAME, d, _log_pass) or 0
        log = count(log_name, d, _log_pass) if d != FR_RANK else None
        fr = count(fr_name, d, _fr_pass)
        best = max(v for v in (log, fr, 0) if v is not None)
        table.append(
            [
                d,
                f"{mine}/{len(cells)}",
                *(f"{v}/{len(cells)}" if v is not None else "-" for v in (log, fr)),
                "yes" if mine >= best else "**no**",
            ]
        )
    differ = []
    for c in cells:
        merged, log_row, fr_row = (index[n][c] for n in (combined.NAME, log_name, fr_name))
        suspects = fr_row.fr_suspects
        if merged.primary_ranks != log_row.primary_ranks or (suspects and merged.primary_ranks != suspects):
            differ.append(
                [
                    c,
                    str(merged.cell.rank),
                    *(_ranks(ranks) for ranks in (merged.primary_ranks, log_row.primary_ranks, suspects)),
                    merged.grade("rank_primary"),
                    log_row.grade("rank_primary"),
                ]
            )
    return [
        Section(
            "The combined verdict against its inputs",
            [
                f"`{combined.NAME}` merges `{log_name}` (the primary log analyzer) and `{fr_name}` (the first FR "
                "analyzer) by fixed rules (docs/analyzers.md). Passes on the "
                f"{len(cells)} cells all three scored; an FR verdict speaks to the rank dimensions only "
                "(rank_primary: its suspects are exactly the injected rank).",
                Table(["dimension", combined.NAME, log_name, fr_name, "as right as the better"], table),
                f"{len(differ)} cell(s) where the combined primaries differ from the log's primaries or the FR "
                "suspects.",
                Table(
                    [
                        "cell",
                        "injected",
                        f"{combined.NAME} primary",
                        f"{log_name} primary",
                        f"{fr_name} suspects",
                        f"{combined.NAME} rank_primary",
                        f"{log_name} rank_primary",
                    ],
                    differ,
                    graded=True,
                )
                if differ
                else "None: it names what both inputs name on every cell.",
            ],
        )
    ]


def _ranks(ranks: list[int]) -> str:
    return " ".join(map(str, ranks)) or "-"
