"""The session report: upstream's table, every analyzer side by side, pass rates, failure modes,
time to verdict, evidence and iteration history.

A report people act on: infrastructure failures never count as attribution misses, each failing
cell shows the log lines the analyzer missed beside the ones it used, every analyzer (faultloop's,
the naive baselines, a user's) is scored on the same cells so the paired counts say who is better
where, and every run is recorded per analyzer version so the loop's stop condition (two
consecutive clean versions) is checked by code, not by eye. Upstream's table, the failure
patterns and the failing pool follow the first (primary) log analyzer.
"""

from __future__ import annotations

import argparse
import base64
import html
import itertools
import math
import re
import statistics
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from faultloop import adopt, differences, layout
from faultloop.evidence import CellEvidence, CitedLine, EvidenceLine
from faultloop.faults import FAULT_NAMES, FAULTS, HANG, RESTART, STOP
from faultloop.history import Comparison, HistoryEntry, compare, read_history, record_history, stop_condition
from faultloop.pool import Cell
from faultloop.score import (
    FR_PREFIX,
    JUDGE_DIMENSIONS,
    NA,
    PASS_VALUE,
    STOP_DIMENSIONS,
    ScoreRecord,
    by_analyzer,
    read_records,
    write_failing_pool,
)

TITLE = "# Fault Injection Experiment Report"
TABLE_COLUMNS = layout.REPORT_COLUMNS
UPSTREAM_COLUMN = "upstream judge"  # adopted sessions: what upstream's LLM judge recorded for the cell
# upstream's dimensions, abbreviated for the column
UPSTREAM_SHORT = {
    "run_valid": "valid",
    "restart_correct": "restart",
    "rank_primary": "primary",
    "rank_any": "any",
    "fault_described": "described",
    "fr_rank_correct": "fr",
}
RATE_DIMENSIONS = (
    "restart_correct",
    "rank_primary",
    "rank_any",
    "fault_category_correct",
    "fault_type_correct",
    "fault_described",
    "fr_rank_correct",
)
# What tells log analyzers apart (fr_rank_correct comes from the FR analyzer, the same for all).
LOG_DIMENSIONS = RATE_DIMENSIONS[:-1]
PAIRED_DIMENSIONS = ("overall", "restart_correct", "rank_primary", "rank_any", "fault_described")
EVIDENCE_LINES = 12
LISTED_DISAGREEMENTS = 200  # the markdown lists this many; the HTML and scores.tsv have every cell
GRADE_CLASS = {
    "true": "pass",
    "rank": "pass",
    "false": "fail",
    "partial": "fail",
    "node": "fail",
    "segment": "fail",
    "no_dumps": "fail",
    "N/A": "na",
}


# ---- rates --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rate:
    passed: int
    total: int

    @property
    def value(self) -> float:
        return self.passed / self.total if self.total else math.nan

    def __str__(self) -> str:
        return f"{self.passed}/{self.total} ({100 * self.passed / self.total:.0f}%)" if self.total else "-"


def rate(rows: list[ScoreRecord], test: Callable[[ScoreRecord], bool]) -> Rate:
    scored = [r for r in rows if r.scored]
    return Rate(sum(1 for r in scored if test(r)), len(scored))


def dim_pass(d: str) -> Callable[[ScoreRecord], bool]:
    return lambda r: r.values.get(d) == PASS_VALUE[d]


def groups(rows: list[ScoreRecord]) -> dict[tuple[str, int], list[ScoreRecord]]:
    """Rows by (fault type, node count) in the fault table's order."""
    out: dict[tuple[str, int], list[ScoreRecord]] = {}
    order = {name: i for i, name in enumerate(FAULT_NAMES)}
    for r in sorted(rows, key=lambda r: (order.get(r.cell.fault_type, 99), r.cell.fault_type, r.cell.nodes)):
        out.setdefault((r.cell.fault_type, r.cell.nodes), []).append(r)
    return out


# ---- failure-mode patterns ------------------------------------------------------------------------


@dataclass(frozen=True)
class Pattern:
    name: str
    meaning: str
    fix: str
    test: Callable[[ScoreRecord], bool]


def _v(r: ScoreRecord, d: str) -> str:
    return r.values.get(d, NA)


def _restart_missed(r: ScoreRecord, expected: str) -> bool:
    """The analyzer got the restart decision wrong on a fault whose policy is `expected`."""
    fault = FAULTS.get(r.cell.fault_type)
    return _v(r, "restart_correct") == "false" and fault is not None and fault.restart == expected


def _category(r: ScoreRecord) -> str:
    fault = FAULTS.get(r.cell.fault_type)
    return fault.category if fault else ""


PATTERNS = (
    Pattern(
        "rank_primary=false, rank_any=true",
        "rank detected but treated as collateral (named only as secondary)",
        "logsage rank attribution: promote the rank whose own lines carry the fault",
        lambda r: _v(r, "rank_primary") == "false" and _v(r, "rank_any") == "true",
    ),
    Pattern(
        "rank_primary=partial",
        "injected rank is one of several primary ranks",
        "logsage rank attribution: demote ranks that only report the symptom (timeouts, peer exits)",
        lambda r: _v(r, "rank_primary") == "partial",
    ),
    Pattern(
        "rank_any=false for rank-0",
        "rank-0 fault silences the watchdog on other ranks; no rank-0 signal",
        "logsage: explicit rank-0 heuristic (other ranks silent / waiting on rank 0)",
        lambda r: r.cell.rank == 0 and _v(r, "rank_any") == "false",
    ),
    Pattern(
        "rank_any=false (rank > 0)",
        "injected rank not named anywhere in the attribution",
        "logsage: extract ranks from watchdog / exit lines (label prefix, 'rank N')",
        lambda r: r.cell.rank != 0 and _v(r, "rank_any") == "false",
    ),
    Pattern(
        "fault_described=partial for crash types",
        "crash keywords present but fault type not named",
        "logsage rules: add SIGKILL/SEGFAULT/OS_ABORT/GPU_ERROR/exception keyword patterns",
        lambda r: _v(r, "fault_described") == "partial" and _category(r) != HANG,
    ),
    Pattern(
        "fault_described=partial for hangs",
        "hang recognised but its cause not named",
        "logsage rules: tell GPU sleep, GIL lock and SIGSTOP apart (who stops logging, how)",
        lambda r: _v(r, "fault_described") == "partial" and _category(r) == HANG,
    ),
    Pattern(
        "fault_described=false",
        "fault nature wrong (e.g. crash described as a collective timeout)",
        "logsage rules: check death-signal / exception lines before the timeout fallback",
        lambda r: _v(r, "fault_described") == "false",
    ),
    Pattern(
        "restart_correct=false for GPU_ERROR",
        "hardware error conflated with a recoverable hang",
        "logsage: distinguish cudaError (crash, STOP) from NCCL timeout (hang, RESTART)",
        lambda r: r.cell.fault_type == "GPU_ERROR" and _v(r, "restart_correct") == "false",
    ),
    Pattern(
        "restart_correct=false, expected STOP",
        "analyzer restarts after a crash or code bug",
        "logsage restart policy: crash / exception verdicts map to STOP",
        lambda r: r.cell.fault_type != "GPU_ERROR" and _restart_missed(r, STOP),
    ),
    Pattern(
        "restart_correct=false, expected RESTART",
        "analyzer stops on a transient hang or external signal",
        "logsage fast path: strengthen NCCL timeout / external signal -> RESTART IMMEDIATE",
        lambda r: _restart_missed(r, RESTART),
    ),
    Pattern(
        "fr_rank_correct=no_dumps",
        "NCCL watchdog did not fire before the job ended",
        "job env: adjust TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC / dump-on-timeout (not the analyzer)",
        lambda r: _v(r, "fr_rank_correct") == "no_dumps",
    ),
    Pattern(
        "fr_rank_correct=node",
        "FR isolated the injected rank's node, not the rank",
        "FR analyzer: not patched by the loop; note and escalate",
        lambda r: _v(r, "fr_rank_correct") == "node",
    ),
    Pattern(
        "fr_rank_correct=segment",
        "FR isolated the injected rank's segment, not its node or rank",
        "FR analyzer: not patched by the loop; note and escalate",
        lambda r: _v(r, "fr_rank_correct") == "segment",
    ),
    Pattern(
        "fr_rank_correct=false",
        "FR suspects lie outside the injected rank's segment (symptom rank?)",
        "FR analyzer: not patched by the loop; note and escalate",
        lambda r: _v(r, "fr_rank_correct") == "false",
    ),
)


def pattern_hits(rows: list[ScoreRecord]) -> list[tuple[Pattern, list[ScoreRecord]]]:
    scored = [r for r in rows if r.scored]
    return [(p, [r for r in scored if p.test(r)]) for p in PATTERNS]


# ---- judge agreement ------------------------------------------------------------------------------


def cohen_kappa(a: list[str], b: list[str]) -> float:
    """Agreement beyond chance between two raters; NaN when chance agreement is total."""
    n = len(a)
    if n == 0:
        return math.nan
    observed = sum(x == y for x, y in zip(a, b, strict=False)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb[k] for k in ca) / (n * n)
    return math.nan if expected == 1 else (observed - expected) / (1 - expected)


@dataclass(frozen=True)
class Agreement:
    dimension: str
    agree: int
    total: int
    kappa: float


def judge_agreement(rows: list[ScoreRecord]) -> tuple[list[Agreement], int]:
    """Per dimension: how often the LLM judge agrees with the code; also the count of judge failures."""
    pairs = []
    failures = 0
    for r in rows:
        if not r.scored or not r.llm_judge:
            continue
        answer = r.llm_judge.get("answer")
        if not answer:
            failures += 1
            continue
        code = r.llm_judge.get("code") or r.values
        pairs.append((code, answer))
    out = []
    for d in JUDGE_DIMENSIONS if pairs else ():
        a = [str(c.get(d)) for c, _ in pairs]
        b = [str(j.get(d)) for _, j in pairs]
        out.append(Agreement(d, sum(x == y for x, y in zip(a, b, strict=False)), len(pairs), cohen_kappa(a, b)))
    return out, failures


# ---- analyzers side by side -----------------------------------------------------------------------


def passes(row: ScoreRecord, dimension: str) -> bool:
    """`overall`: all four stop-condition dimensions; else the one dimension."""
    return row.passed if dimension == "overall" else row.values.get(dimension) == PASS_VALUE[dimension]


@dataclass(frozen=True)
class Paired:
    """Two analyzers on the cells both scored: where one is right and the other wrong."""

    a: str
    b: str
    dimension: str
    a_only: int
    b_only: int
    both: int
    neither: int


@dataclass(frozen=True)
class Disagreement:
    """A cell and dimension on which the analyzers' grades differ."""

    cell: Cell
    dimension: str
    grades: dict[str, str]  # analyzer -> its grade
    right: list[str]


def _index(views: dict[str, list[ScoreRecord]]) -> dict[str, dict[str, ScoreRecord]]:
    return {name: {r.cell.name: r for r in rows if r.scored} for name, rows in views.items()}


def paired(views: dict[str, list[ScoreRecord]], dimensions: Iterable[str]) -> list[Paired]:
    index = _index(views)
    out = []
    for a, b in itertools.combinations(views, 2):
        cells = [c for c in index[a] if c in index[b]]
        for d in dimensions:
            counts = Counter((passes(index[a][c], d), passes(index[b][c], d)) for c in cells)
            out.append(
                Paired(a, b, d, counts[True, False], counts[False, True], counts[True, True], counts[False, False])
            )
    return out


def disagreements(views: dict[str, list[ScoreRecord]], dimensions: Iterable[str]) -> list[Disagreement]:
    """Per cell every analyzer scored, the dimensions on which some are right and some wrong."""
    index = _index(views)
    names = list(views)
    if len(names) < 2:
        return []
    out = []
    for cell_name, first in index[names[0]].items():
        found = [index[n].get(cell_name) for n in names]
        rows = [r for r in found if r is not None]
        if len(rows) < len(names):
            continue
        for d in dimensions:
            right = [n for n, r in zip(names, rows, strict=True) if passes(r, d)]
            if 0 < len(right) < len(names):
                out.append(
                    Disagreement(first.cell, d, {n: r.values[d] for n, r in zip(names, rows, strict=True)}, right)
                )
    return out


def _seconds(values: list[float]) -> str:
    """Median / worst, for people."""
    return f"{statistics.median(values):.1f} / {max(values):.1f}" if values else "-"


# ---- the report model ------------------------------------------------------------------------------


@dataclass
class AnalyzerView:
    """One log analyzer's rows with its own history, iteration comparison and stop condition."""

    name: str
    rows: list[ScoreRecord]
    fingerprint: str
    history: list[HistoryEntry]
    comparison: Comparison
    stop: tuple[bool, str]


@dataclass
class Report:
    """Everything the markdown, HTML and JUnit outputs are rendered from."""

    session_dir: Path
    rows: list[ScoreRecord]
    views: list[AnalyzerView]  # the log analyzers, the primary first
    fr_views: dict[str, list[ScoreRecord]]  # the flight-recorder analyzers, fr:<name>
    upstream: dict[str, adopt.UpstreamVerdict] = field(default_factory=dict)  # adopted sessions, by cell

    @property
    def primary(self) -> AnalyzerView:
        return self.views[0]

    @property
    def log_views(self) -> dict[str, list[ScoreRecord]]:
        return {v.name: v.rows for v in self.views}


def analyzer_versions(rows: list[ScoreRecord]) -> Counter[str]:
    return Counter(r.analyzer_version or "unknown" for r in rows if r.scored)


def pick_fingerprint(rows: list[ScoreRecord], given: str | None) -> str:
    """The analyzer version the scores belong to: the given one, else the scored cells' majority."""
    if given:
        return given
    versions = analyzer_versions(rows)
    return versions.most_common(1)[0][0] if versions else "unknown"


def build_report(
    records_path: Path,
    session_dir: Path,
    fingerprint: str | None = None,
    *,
    record: bool = True,
    upstream: dict[str, adopt.UpstreamVerdict] | None = None,
) -> Report:
    """Load the score records and, per log analyzer, record its history and compare with its
    previous version (fingerprint: the primary analyzer's version, default its cells' majority).
    upstream: an adopted session's recorded verdicts (its LLM judge's), shown beside the code's."""
    rows = read_records(records_path)
    views: list[AnalyzerView] = []
    for name, own in by_analyzer(rows).items():
        if own[0].is_fr:
            continue
        fp = pick_fingerprint(own, fingerprint if not views else None)
        history_dir = session_dir / layout.HISTORY_DIR / name
        history = record_history(history_dir, own, fp) if record else read_history(history_dir)
        previous = history[-2] if len(history) >= 2 else None
        views.append(AnalyzerView(name, own, fp, history, compare(own, previous), stop_condition(history)))
    if not views:
        views.append(AnalyzerView("builtin", [], "unknown", [], Comparison(None), (False, "no scores")))
    fr_views = {name: own for name, own in by_analyzer(rows).items() if own[0].is_fr}
    return Report(session_dir, rows, views, fr_views, upstream or {})


# ---- sections: one model, rendered as markdown and as HTML ----------------------------------------


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    graded: bool = False  # cells hold grades (true, partial, rank, ...) that the page colours


Block = str | list[str] | Table  # a paragraph, a bullet list, a table


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    level: int = 2

    @property
    def anchor(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-")


def _cell_text(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def upstream_rows(rows: list[ScoreRecord], upstream: dict[str, adopt.UpstreamVerdict]) -> list[list[str]]:
    """Upstream's table; in an adopted session, one more column: upstream's own judge's verdict,
    a star where it differs from the code's grade."""
    out = []
    for i, r in enumerate(rows, start=1):
        row = [
            str(i),
            r.cell.fault_type,
            str(r.cell.nodes),
            str(r.cell.rank),
            str(r.cell.iter),
            r.job_id or "-",
            r.state,
            *(r.values[d] for d in TABLE_COLUMNS[7:13]),
            r.notes,
        ]
        if upstream:
            verdict = upstream.get(r.cell.name)
            differ = {d.dimension for d in adopt.disagreements(upstream, {r.cell.name: r.values})}
            row.append(
                " ".join(
                    f"{UPSTREAM_SHORT[d]}={v}{'*' if d in differ else ''}" for d, v in verdict.dimensions().items()
                )
                if verdict
                else "-"
            )
        out.append(row)
    return out


def upstream_judge_section(rep: Report) -> list[Section]:
    """An adopted session: where upstream's LLM judge and faultloop's code scorer disagree."""
    if not rep.upstream:
        return []
    mine = {r.cell.name: r.values for r in rep.primary.rows if r.scored}
    differ = adopt.disagreements(rep.upstream, mine)
    judged = [c for c in mine if c in rep.upstream]
    per_dim = Counter(d.dimension for d in differ)
    return [
        Section(
            "Upstream's LLM judge vs faultloop's code scorer",
            [
                f"Upstream's report recorded a verdict for {len(judged)} of the {len(mine)} scored cells "
                f"(analyzer `{rep.primary.name}`); the `{UPSTREAM_COLUMN}` column of the table above shows it, a star "
                "where it differs from the code's grade.",
                Table(
                    ["dimension", "agree", "differ"],
                    [[d, str(len(judged) - per_dim[d]), str(per_dim[d])] for d in UPSTREAM_SHORT],
                ),
                Table(
                    ["cell", "dimension", "upstream's judge", "faultloop's code"],
                    [[d.cell, d.dimension, d.upstream, d.faultloop] for d in differ[:LISTED_DISAGREEMENTS]],
                )
                if differ
                else "They agree on every cell and dimension.",
            ],
        )
    ]


def _cells(rows: Iterable[ScoreRecord]) -> str:
    return ", ".join(r.cell.name for r in rows) or "-"


def _code(text: str) -> str:
    return str(text).replace("`", "'").strip()[:300]


def summary_section(rep: Report) -> Section:
    p = rep.primary
    scored = [r for r in p.rows if r.scored]
    apart = [r for r in p.rows if not r.scored]
    others = [v.name for v in rep.views[1:]]
    lines = [
        f"Analyzers: `{p.name}` (primary: upstream's table, patterns, evidence, `cells=failed`)"
        + "".join(f", `{n}`" for n in others)
        + (f"; FR: {', '.join(f'`{n[len(FR_PREFIX) :]}`' for n in rep.fr_views)}" if rep.fr_views else "")
    ]
    number = p.history[-1].number if p.history else 1
    lines.append(
        f"Analyzer version: `{p.fingerprint}` (iteration {number}, history in `{layout.HISTORY_DIR}/{p.name}/`)"
    )
    versions = analyzer_versions(p.rows)
    if len(versions) > 1:
        mixed = ", ".join(f"`{v}` x{n}" for v, n in versions.most_common())
        lines.append(f"Warning: the scored cells come from several analyzer versions ({mixed}); re-run the analysis.")
    passed = sum(r.passed for r in scored)
    lines += [
        f"Cells: {len(p.rows)} in the pool, {len(scored)} scored, {passed} pass all of "
        f"{', '.join(STOP_DIMENSIONS)}; {len(apart)} not scored (listed apart, excluded from every rate).",
        f"Stop condition: {'HOLDS' if p.stop[0] else 'not met'}: {p.stop[1]}.",
    ]
    blocks: list[Block] = [lines]
    if p.comparison.regressed:
        blocks.append(
            f"**REGRESSED since the previous version: {len(p.comparison.regressed)} cell(s): "
            f"{_cells(r for r, _ in p.comparison.regressed)}**"
        )
    columns = [*TABLE_COLUMNS, UPSTREAM_COLUMN] if rep.upstream else list(TABLE_COLUMNS)
    blocks.append(Table(columns, upstream_rows(p.rows, rep.upstream), graded=True))
    return Section(TITLE.lstrip("# "), blocks, level=1)


def iteration_sections(rep: Report) -> list[Section]:
    new = [v for v in rep.views if v.comparison.previous is None]
    intro: list[Block] = ["Each analyzer against its own previous version (history per analyzer)."]
    if new:
        intro.append(
            "First recorded analyzer version, nothing to compare with: "
            + ", ".join(f"{v.name} (`{v.fingerprint}`)" for v in new)
            + "."
        )
    out = [Section("Iteration comparison", intro)]
    for view in rep.views:
        comp = view.comparison
        if comp.previous is not None:
            blocks: list[Block] = [
                f"Against iteration {comp.previous.number} (`{comp.previous.fingerprint}`):",
                [
                    f"Regressed ({len(comp.regressed)}): "
                    + (
                        ", ".join(
                            f"{r.cell.name} ({', '.join(f'{d}={r.values[d]}' for d in dims)})"
                            for r, dims in comp.regressed
                        )
                        or "-"
                    ),
                    f"Fixed ({len(comp.fixed)}): {_cells(comp.fixed)}",
                    f"Still failing ({len(comp.still_failing)}): {_cells(comp.still_failing)}",
                    f"Failing, not scored before ({len(comp.new_failing)}): {_cells(comp.new_failing)}",
                ],
            ]
            out.append(Section(view.name, blocks, level=3))
    return out


def _rate_row(label: list[str], rows: list[ScoreRecord], dims: Iterable[str]) -> list[str]:
    return [*label, str(rate(rows, lambda r: r.passed)), *(str(rate(rows, dim_pass(d))) for d in dims)]


def rates_sections(rep: Report) -> list[Section]:
    rows = rep.primary.rows
    table = [
        _rate_row([fault, str(nodes)], grp, RATE_DIMENSIONS)
        for (fault, nodes), grp in groups(rows).items()
        if any(r.scored for r in grp)
    ]  # groups of unscored cells only: listed below, no rate
    table.append(_rate_row(["**all**", ""], rows, RATE_DIMENSIONS))
    legend = (
        f"A cell passes a dimension with "
        f"{', '.join(f'{d}={v}' for d, v in PASS_VALUE.items() if d != 'run_valid')}"
        "; `overall` = all four stop-condition dimensions."
    )
    apart = [r for r in rows if not r.scored]
    return [
        Section(
            "Pass rates by fault type and node count",
            [
                f"Analyzer `{rep.primary.name}`. {legend}",
                Table(["FAULT_TYPE", "NODES", "overall", *RATE_DIMENSIONS], table),
            ],
        ),
        Section(
            "Not scored (excluded from every rate)",
            [
                Table(
                    ["cell", "STATUS", "STATE", "reason"], [[r.cell.name, r.status, r.state, r.reason] for r in apart]
                )
                if apart
                else "None."
            ],
            level=3,
        ),
    ]


def side_by_side_sections(rep: Report) -> list[Section]:
    views = rep.log_views
    failed = {n: sum(1 for r in rows if r.scored and r.analyzer_error) for n, rows in views.items()}
    rates = [
        [n, f"`{v.fingerprint}`", str(failed[n]), *_rate_row([], v.rows, LOG_DIMENSIONS)]
        for n, v in ((v.name, v) for v in rep.views)
    ]
    out = [
        Section(
            "Analyzers side by side",
            [
                "Every log analyzer on the same scored cells; a cell the analyzer failed on (crash, garbage, timeout) "
                "counts as a miss. `overall` includes fr_rank_correct of the first FR analyzer, the same for all.",
                Table(["analyzer", "version", "failed on", "overall", *LOG_DIMENSIONS], rates),
            ],
        )
    ]
    by_fault = []
    for (fault, nodes), _ in groups(rep.primary.rows).items():
        cells = [[r for r in rows if (r.cell.fault_type, r.cell.nodes) == (fault, nodes)] for rows in views.values()]
        if any(r.scored for grp in cells for r in grp):
            by_fault.append([fault, str(nodes), *(str(rate(grp, lambda r: r.passed)) for grp in cells)])
    out.append(Section("Overall pass rate per fault type", [Table(["FAULT_TYPE", "NODES", *views], by_fault)], level=3))
    if len(views) > 1:
        pairs = paired(views, PAIRED_DIMENSIONS)
        table = [
            [a, b, *(f"{p.a_only} / {p.b_only}" for p in pairs if (p.a, p.b) == (a, b))]
            for a, b in itertools.combinations(views, 2)
        ]
        out.append(
            Section(
                "Paired counts",
                [
                    "On the cells both analyzers scored, per dimension: `A right, B wrong / B right, A wrong` "
                    "(the cells where they agree are left out).",
                    Table(["A", "B", *PAIRED_DIMENSIONS], table),
                ],
                level=3,
            )
        )
        differ = disagreements(views, PAIRED_DIMENSIONS[1:])
        shown = differ[:LISTED_DISAGREEMENTS]
        blocks: list[Block] = [
            f"{len(differ)} cell dimension(s) where some analyzers are right and others wrong"
            + (f" (the first {len(shown)}; every cell in the HTML report)" if len(shown) < len(differ) else "")
            + ".",
            Table(
                ["cell", "dimension", *views, "right"],
                [[d.cell.name, d.dimension, *(d.grades[n] for n in views), ", ".join(d.right)] for d in shown],
                graded=True,
            )
            if shown
            else "None: the analyzers agree on every scored cell.",
        ]
        out.append(Section("Where the analyzers disagree", blocks, level=3))
    return out


def fr_sections(rep: Report) -> list[Section]:
    if not rep.fr_views:
        return []
    grades = ("rank", "node", "segment", "false", "no_dumps")
    table = []
    for name, rows in rep.fr_views.items():
        scored = [r for r in rows if r.scored]
        counts = Counter(r.values["fr_rank_correct"] for r in scored)
        failed = sum(1 for r in scored if r.analyzer_error)
        table.append(
            [
                name[len(FR_PREFIX) :],
                f"`{pick_fingerprint(rows, None)}`",
                str(failed),
                str(rate(rows, dim_pass("fr_rank_correct"))),
                *(str(counts[g]) for g in grades),
            ]
        )
    out = [
        Section(
            "Flight-recorder analyzers side by side",
            [
                "fr_rank_correct per FR analyzer on the same dumps (rank = exactly the injected rank); a dump set an "
                "analyzer could not read counts as false and is listed under analyzer failures.",
                Table(["analyzer", "version", "failed on", "rank exact", *grades], table),
            ],
        )
    ]
    if len(rep.fr_views) > 1:
        views = {n[len(FR_PREFIX) :]: rows for n, rows in rep.fr_views.items()}
        pairs = paired(views, ["fr_rank_correct"])
        differ = disagreements(views, ["fr_rank_correct"])
        index = _index(views)
        out.append(
            Section(
                "FR paired counts and disagreements",
                [
                    Table(
                        ["A", "B", "A right, B wrong", "B right, A wrong", "both right", "both wrong"],
                        [[p.a, p.b, str(p.a_only), str(p.b_only), str(p.both), str(p.neither)] for p in pairs],
                    ),
                    Table(
                        ["cell", *(f"{n} (suspects)" for n in views), "right"],
                        [
                            [
                                d.cell.name,
                                *(f"{d.grades[n]} {index[n][d.cell.name].fr_suspects}" for n in views),
                                ", ".join(d.right),
                            ]
                            for d in differ[:LISTED_DISAGREEMENTS]
                        ],
                    )
                    if differ
                    else "The FR analyzers agree on every scored cell.",
                ],
                level=3,
            )
        )
    return out


def time_section(rep: Report) -> Section:
    names = [*rep.log_views, *rep.fr_views]
    everyone = {**rep.log_views, **rep.fr_views}
    table = []
    faults = list(dict.fromkeys(f for f, _ in groups(rep.primary.rows)))
    for fault in faults:
        own = [r for r in rep.primary.rows if r.scored and r.cell.fault_type == fault]
        if not own:
            continue
        walls = [
            _seconds(
                [
                    r.analyzer_wall_s
                    for r in everyone[n]
                    if r.scored and r.cell.fault_type == fault and r.analyzer_wall_s is not None
                ]
            )
            for n in names
        ]
        table.append(
            [fault, str(len(own)), _seconds([r.fault_to_end_s for r in own if r.fault_to_end_s is not None]), *walls]
        )
    return Section(
        "Time to verdict",
        [
            "Median / worst seconds per fault type: from the fault firing to the job's end (how long the failure "
            "took to surface), then each analyzer's wall time on the cell. Time to verdict = the two added "
            "(JUnit `time`).",
            Table(["FAULT_TYPE", "cells", "fault -> job end", *names], table) if table else "No scored cell.",
        ],
    )


def failures_section(rep: Report) -> Section:
    rows = [
        [
            r.analyzer,
            r.cell.name,
            r.analyzer_error,
            f"`{_code(r.analyzer_stderr_end)}`" if r.analyzer_stderr_end else "-",
        ]
        for r in rep.rows
        if r.scored and r.analyzer_error
    ]
    return Section(
        "Analyzer failures",
        [
            "An analyzer that crashed, printed no verdict or ran out of time on a cell; its whole stderr tail is in "
            "the cell's `analysis/<analyzer>/run.json`.",
            Table(["analyzer", "cell", "error", "stderr, last line"], rows)
            if rows
            else "None: every analyzer gave a verdict on every scored cell.",
        ],
    )


def patterns_section(rep: Report) -> Section:
    hits = [(p, cells) for p, cells in pattern_hits(rep.primary.rows) if cells]
    return Section(
        "Failure-mode patterns",
        [
            f"Analyzer `{rep.primary.name}`.",
            Table(
                ["pattern", "count", "cells", "meaning", "suggested fix target"],
                [[p.name, str(len(c)), _cells(c), p.meaning, p.fix] for p, c in hits],
            )
            if hits
            else "No failure pattern in the scored cells.",
        ],
    )


def evidence_sections(rep: Report) -> list[Section]:
    failing = [r for r in rep.primary.rows if r.scored and not r.passed]
    out = [Section("Evidence for failing cells", [] if failing else ["No failing cell."])]
    for r in failing:
        ev = r.evidence or CellEvidence()
        out.append(
            Section(
                f"{r.cell.name}: {', '.join(f'{d}={r.values[d]}' for d in r.failing())}",
                [
                    f"Verdict: restart `{r.logsage_restart or 'none'}`, primary {r.primary_ranks}, "
                    f"secondary {r.secondary_ranks}, FR suspects {r.fr_suspects}. {r.notes}",
                    f"Lines naming rank {r.cell.rank} or carrying the {r.cell.fault_type} signature "
                    "(missed = not cited by the analyzer):",
                    [
                        f"L{e.number} [{'cited' if e.cited else 'MISSED'}; {e.why}] `{_code(e.text)}`"
                        for e in ev.expected
                    ]
                    or ["none found in the stripped log"],
                    "Lines the verdict rested on (logsage evidence):",
                    [f"L{e.line} [{e.kind}, rank {e.rank}] `{_code(e.text)}`" for e in ev.cited]
                    or ["none (the analyzer cited no line)"],
                ],
                level=3,
            )
        )
    return out


def judge_section(rep: Report) -> list[Section]:
    agreement, failures = judge_agreement(rep.primary.rows)
    if not agreement and not failures:
        return []
    return [
        Section(
            "LLM judge vs code",
            [
                Table(
                    ["dimension", "agreement", "Cohen's kappa"],
                    [
                        [a.dimension, f"{a.agree}/{a.total}", "n/a" if math.isnan(a.kappa) else f"{a.kappa:.2f}"]
                        for a in agreement
                    ],
                ),
                f"Judge failures (recorded in the cells, code scores used): {failures}",
            ],
        )
    ]


def difference_sections(rep: Report) -> list[Section]:
    """Restart decisions by policy, and the combined verdict against its inputs (faultloop.differences)."""
    findings = differences.policy_findings(rep.log_views) + differences.combined_findings(rep.log_views, rep.fr_views)
    return [
        Section(
            f.title,
            [Table(b.header, b.rows, b.graded) if isinstance(b, differences.FindingTable) else b for b in f.blocks],
            f.level,
        )
        for f in findings
    ]


def sections(rep: Report) -> list[Section]:
    return [
        summary_section(rep),
        *iteration_sections(rep),
        *rates_sections(rep),
        *side_by_side_sections(rep),
        *fr_sections(rep),
        *difference_sections(rep),
        time_section(rep),
        failures_section(rep),
        patterns_section(rep),
        *evidence_sections(rep),
        *judge_section(rep),
        *upstream_judge_section(rep),
    ]


def _templates(*, autoescape: bool) -> Environment:
    """The report's Jinja templates (package data), with the filters and tests they share."""
    env = Environment(
        loader=PackageLoader("faultloop", "templates"),
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=select_autoescape(["html", "j2"]) if autoescape else False,
    )
    env.filters["inline"] = lambda text: Markup(inline_html(str(text)))
    env.filters["md_cell"] = _cell_text
    env.tests["table"] = lambda block: isinstance(block, Table)
    return env


def render_markdown(rep: Report) -> str:
    text = _templates(autoescape=False).get_template("report.md.j2").render(sections=sections(rep))
    return text.rstrip() + "\n"


# ---- the per-cell drill-down (HTML) ---------------------------------------------------------------


@dataclass
class AnalyzerDrill:
    """One analyzer's verdict on a cell, with the lines it cited and the ones it missed."""

    row: ScoreRecord
    files: list[tuple[str, str]]  # (label, link relative to the report)
    cited: list[CitedLine]
    missed: list[EvidenceLine]


@dataclass
class CellDrill:
    cell: Cell
    status: str
    reason: str
    files: list[tuple[str, str]]
    analyzers: list[AnalyzerDrill]

    @property
    def summary(self) -> str:
        return (
            ", ".join(f"{a.row.analyzer} {'pass' if a.row.passed else 'fail'}" for a in self.analyzers if a.row.scored)
            or self.reason
        )


def drilldown(rep: Report) -> list[CellDrill]:
    """Every cell of the pool: its run's files, and per analyzer its verdict, evidence and misses
    (all of it in the score records: judge_score found them)."""
    everyone = {**rep.log_views, **rep.fr_views}
    index = {name: {r.cell.name: r for r in rows} for name, rows in everyone.items()}
    out = []
    for first in rep.primary.rows:
        drills = []
        for name in everyone:
            row = index[name].get(first.cell.name)
            if row is None:
                continue
            ev = row.evidence or CellEvidence()
            drills.append(AnalyzerDrill(row, [(f.label, f.path) for f in row.files], ev.cited, ev.missed))
        out.append(
            CellDrill(first.cell, first.status, first.reason, [(f.label, f.path) for f in first.cell_files], drills)
        )
    return out


# ---- heatmap, HTML, JUnit -----------------------------------------------------------------------


def write_heatmap(rows: list[ScoreRecord], path: Path) -> None:
    """One panel per analyzer: cells passing (log analyzers: all four dimensions; FR analyzers: the
    exact rank) per fault type x node count; grey where no cell was scored. Sized from the pool's
    shape, so any number of fault types, node counts and analyzers stays readable."""
    import matplotlib  # imported on use: the workflow imports this module while planning

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    views = by_analyzer(rows) or {"builtin": []}
    everything = groups(rows)
    faults = list(dict.fromkeys(f for f, _ in everything)) or ["-"]
    nodes = sorted({n for _, n in everything}) or [0]
    columns = min(len(views), 3)
    lines = math.ceil(len(views) / columns)
    panel_w, panel_h = 1.2 + 0.8 * len(nodes), 0.9 + 0.36 * len(faults)
    fig, axes = plt.subplots(
        lines, columns, squeeze=False, layout="constrained", figsize=(1.6 + columns * panel_w, 0.8 + lines * panel_h)
    )
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="lightgrey")
    image = None
    for ax, (name, own) in zip(axes.flat, views.items(), strict=False):
        grp = groups(own)
        values = [[rate(grp.get((f, n), []), lambda r: r.passed) for n in nodes] for f in faults]
        image = ax.imshow([[v.value for v in row] for row in values], cmap=cmap, vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(nodes)), [f"{n} node{'s' if n != 1 else ''}" for n in nodes], fontsize=8)
        ax.set_yticks(range(len(faults)), faults if ax in axes[:, 0] else [], fontsize=8)
        for i, row in enumerate(values):
            for j, v in enumerate(row):
                dark = v.total and not 0.2 < v.value < 0.85  # the colour map's ends are dark
                ax.text(
                    j,
                    i,
                    f"{v.passed}/{v.total}" if v.total else "-",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if dark else "black",
                )
        what = "FR names the injected rank" if name.startswith(FR_PREFIX) else "all four dimensions"
        ax.set_title(f"{name}\n{what}", fontsize=9)
    for ax in list(axes.flat)[len(views) :]:
        ax.set_visible(False)
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label="share of scored cells passing")
    fig.suptitle("Cells passing, per fault type and node count", fontsize=11)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    tmp.replace(path)


_INLINE_RE = re.compile(r"`([^`]*)`|\*\*(.+?)\*\*")


def inline_html(text: str) -> str:
    """The markdown text's inline marks (`code`, **bold**) as HTML; everything else escaped."""
    out, at = [], 0
    for m in _INLINE_RE.finditer(text):
        out.append(html.escape(text[at : m.start()]))
        out.append(
            f"<code>{html.escape(m.group(1))}</code>"
            if m.group(1) is not None
            else f"<strong>{html.escape(m.group(2))}</strong>"
        )
        at = m.end()
    out.append(html.escape(text[at:]))
    return "".join(out)


def render_html(rep: Report, heatmap: Path) -> str:
    env = _templates(autoescape=True)
    png = base64.b64encode(heatmap.read_bytes()).decode() if heatmap.exists() else ""
    return env.get_template("report.html.j2").render(
        title=TITLE.lstrip("# "),
        sections=sections(rep),
        heatmap_png=png,
        cells=drilldown(rep),
        grade_class=GRADE_CLASS,
        dimensions=LOG_DIMENSIONS,
    )


def junit_xml(rep: Report) -> str:
    """One suite per analyzer, one testcase per cell: failing dimensions as the failure, unscored
    cells skipped, time = time to verdict (fault to job end, plus the analyzer's wall time)."""
    root = ET.Element("testsuites", name="faultloop")
    totals: Counter[str] = Counter()
    for name, rows in {**rep.log_views, **rep.fr_views}.items():
        failures = sum(1 for r in rows if r.failing())
        skipped = sum(1 for r in rows if not r.scored)
        seconds = sum(r.time_to_verdict_s or 0.0 for r in rows)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=name,
            tests=str(len(rows)),
            failures=str(failures),
            skipped=str(skipped),
            errors="0",
            time=f"{seconds:.3f}",
        )
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="analyzer_version", value=pick_fingerprint(rows, None))
        for r in rows:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"faultloop.{name}.{r.cell.fault_type}.n{r.cell.nodes}",
                name=r.cell.name,
                time=f"{r.time_to_verdict_s or 0.0:.3f}",
            )
            if not r.scored:
                ET.SubElement(case, "skipped", message=f"{r.status}: {r.reason or r.notes}")
            elif r.failing():
                failure = ET.SubElement(
                    case, "failure", type="attribution", message="; ".join(f"{d}={r.values[d]}" for d in r.failing())
                )
                failure.text = r.notes
        totals.update(tests=len(rows), failures=failures, skipped=skipped)
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("skipped", str(totals["skipped"]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# ---- main ---------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    """`faultloop report`: write the session report, heatmap, HTML, JUnit and history entries."""
    p = argparse.ArgumentParser(prog="faultloop report", description=main.__doc__)
    p.add_argument(
        "--records", type=Path, required=True, help=f"the session's {layout.SCORE_RECORDS} (the score rule gathers it)"
    )
    p.add_argument("--session-dir", type=Path, required=True)
    p.add_argument(
        "--upstream-verdicts",
        type=Path,
        help=f"an adopted session's {layout.UPSTREAM_VERDICTS_TSV}: upstream's judge beside the code's",
    )
    p.add_argument("--analyzer-version", help="the primary analyzer's fingerprint (default: its cells' majority)")
    p.add_argument("--report", "--output", dest="report", type=Path, help=f"default <session>/{layout.REPORT_MD}")
    p.add_argument("--heatmap", type=Path, help=f"default <session>/{layout.HEATMAP_PNG}")
    p.add_argument("--html", type=Path, help=f"default <session>/{layout.REPORT_HTML}")
    p.add_argument("--junit", type=Path, help=f"default <session>/{layout.JUNIT_XML}")
    p.add_argument("--no-history", action="store_true", help="compare with the history but do not record")
    p.add_argument("--failing-pool", type=Path, help="also write a pool TSV of the primary analyzer's failing cells")
    p.add_argument(
        "--include-unscored",
        action="store_true",
        help="with --failing-pool: add invalid, infra-failed and not-run cells",
    )
    args = p.parse_args(argv)
    if not args.records.is_file():
        print(f"faultloop report: no score records {args.records}", file=sys.stderr)
        return 1
    s = args.session_dir
    upstream = adopt.read_verdicts(args.upstream_verdicts) if args.upstream_verdicts else None
    rep = build_report(args.records, s, args.analyzer_version, record=not args.no_history, upstream=upstream)
    heatmap = args.heatmap or s / layout.HEATMAP_PNG
    write_heatmap(rep.rows, heatmap)
    layout.write_atomic(args.report or s / layout.REPORT_MD, render_markdown(rep))
    layout.write_atomic(args.html or s / layout.REPORT_HTML, render_html(rep, heatmap))
    layout.write_atomic(args.junit or s / layout.JUNIT_XML, junit_xml(rep))
    if args.failing_pool:
        cells = write_failing_pool(rep.primary.rows, args.failing_pool, include_unscored=args.include_unscored)
        print(f"{len(cells)} failing cells written to {args.failing_pool}")
    return 0
