"""The report's sections in order, and the wording of each but those the modules of their data word
themselves (`placements`, `differences`, `lives`); `render` writes them as markdown and as HTML."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable

from faultloop.adopt import session as adopt
from faultloop.contracts import (
    DIMENSIONS,
    FR_PREFIX,
    FR_RANK,
    CellEvidence,
    Reads,
    ScoreRecord,
    upstream_table_columns,
)
from faultloop.core import layout
from faultloop.report import differences, lives, placements
from faultloop.report.document import Block, Section, Table
from faultloop.report.history import analyzer_versions, pick_fingerprint
from faultloop.report.model import (
    Report,
    dim_pass,
    disagreements,
    groups,
    judge_agreement,
    median_and_worst,
    paired,
    rate,
    scored_by_cell,
)
from faultloop.report.patterns import pattern_hits
from faultloop.score.grade import REFUSED_NOTE

TITLE = "# Fault Injection Experiment Report"
UPSTREAM_COLUMN = "upstream judge"  # adopted sessions: what upstream's LLM judge recorded for the cell
LISTED_DISAGREEMENTS = 200  # the markdown lists this many; the HTML and scores.tsv have every cell


def upstream_columns() -> list[str]:
    """Upstream's table: the cell, every dimension upstream's report has, its judge's notes."""
    return upstream_table_columns()


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
            *(r.grade(d) for d in DIMENSIONS.names(upstream=True)),
            r.notes,
        ]
        if upstream:
            verdict = upstream.get(r.cell.name)
            differ = {d.dimension for d in adopt.disagreements(upstream, {r.cell.name: r.values})}
            row.append(
                " ".join(
                    f"{DIMENSIONS[d].upstream}={v}{'*' if d in differ else ''}" for d, v in verdict.dimensions().items()
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
                    [[d, str(len(judged) - per_dim[d]), str(per_dim[d])] for d in DIMENSIONS.names(upstream=True)],
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
        f"{', '.join(DIMENSIONS.names(stop=True))}; {len(apart)} not scored (listed apart, excluded from every rate).",
        f"Stop condition: {'HOLDS' if p.stop[0] else 'not met'}: {p.stop[1]}.",
    ]
    blocks: list[Block] = [lines]
    if p.comparison.regressed:
        blocks.append(
            f"**REGRESSED since the previous version: {len(p.comparison.regressed)} cell(s): "
            f"{_cells(r for r, _ in p.comparison.regressed)}**"
        )
    columns = [*upstream_columns(), UPSTREAM_COLUMN] if rep.upstream else upstream_columns()
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
    rated = DIMENSIONS.names(reads=(Reads.LOG, Reads.FR))
    rows = rep.primary.rows
    table = [
        _rate_row([fault, str(nodes)], grp, rated)
        for (fault, nodes), grp in groups(rows).items()
        if any(r.scored for r in grp)
    ]  # groups of unscored cells only: listed below, no rate
    table.append(_rate_row(["**all**", ""], rows, rated))
    legend = (
        f"A cell passes a dimension with "
        f"{', '.join(f'{d}={DIMENSIONS[d].passing}' for d in rated)}"
        "; `overall` = all four stop-condition dimensions."
    )
    apart = [r for r in rows if not r.scored]
    return [
        Section(
            "Pass rates by fault type and node count",
            [
                f"Analyzer `{rep.primary.name}`. {legend}",
                Table(["FAULT_TYPE", "NODES", "overall", *rated], table),
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
    log_dims = DIMENSIONS.names(reads=(Reads.LOG,))
    compared = DIMENSIONS.names(reads=(Reads.LOG,), upstream=True)  # upstream's, about the log verdict
    paired_dims = ["overall", *compared]
    views = rep.log_views
    failed = {n: sum(1 for r in rows if r.scored and r.analyzer_error) for n, rows in views.items()}
    rates = [
        [n, f"`{v.fingerprint}`", str(failed[n]), *_rate_row([], v.rows, log_dims)]
        for n, v in ((v.name, v) for v in rep.views)
    ]
    out = [
        Section(
            "Analyzers side by side",
            [
                "Every log analyzer on the same scored cells; a cell the analyzer failed on (crash, garbage, timeout) "
                "counts as a miss. `overall` includes fr_rank_correct of the first FR analyzer, the same for all.",
                Table(["analyzer", "version", "failed on", "overall", *log_dims], rates),
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
        pairs = paired(views, paired_dims)
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
                    Table(["A", "B", *paired_dims], table),
                ],
                level=3,
            )
        )
        differ = disagreements(views, compared)
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


def _fr_refusals(rep: Report) -> list[str | Table]:
    """Cells where an FR analyzer had dumps but refused every one (hostile or broken files)."""
    rows = [
        [name[len(FR_PREFIX) :], r.cell.name, r.notes]
        for name, view in rep.fr_views.items()
        for r in view
        if r.scored and r.notes.startswith(REFUSED_NOTE)
    ]
    if not rows:
        return []
    return [
        "Dumps present but none readable (each refused with the bound it broke; `no_dumps` above):",
        Table(["analyzer", "cell", "why"], rows),
    ]


def fr_sections(rep: Report) -> list[Section]:
    if not rep.fr_views:
        return []
    grades = DIMENSIONS[FR_RANK].grades
    table = []
    for name, rows in rep.fr_views.items():
        scored = [r for r in rows if r.scored]
        counts = Counter(r.grade(FR_RANK) for r in scored)
        failed = sum(1 for r in scored if r.analyzer_error)
        table.append(
            [
                name[len(FR_PREFIX) :],
                f"`{pick_fingerprint(rows, None)}`",
                str(failed),
                str(rate(rows, dim_pass(FR_RANK))),
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
                *_fr_refusals(rep),
            ],
        )
    ]
    if len(rep.fr_views) > 1:
        views = {n[len(FR_PREFIX) :]: rows for n, rows in rep.fr_views.items()}
        pairs = paired(views, [FR_RANK])
        differ = disagreements(views, [FR_RANK])
        index = scored_by_cell(views)
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
            median_and_worst(
                [
                    r.analyzer_wall_s
                    for r in everyone[n]
                    if r.scored and r.cell.fault_type == fault and r.analyzer_wall_s is not None
                ]
            )
            for n in names
        ]
        to_end = median_and_worst([r.fault_to_end_s for r in own if r.fault_to_end_s is not None])
        table.append([fault, str(len(own)), to_end, *walls])
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
                    f"Verdict: restart `{r.analyzer_restart or 'none'}`, primary {r.primary_ranks}, "
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


def sections(rep: Report) -> list[Section]:
    return [
        summary_section(rep),
        *iteration_sections(rep),
        *rates_sections(rep),
        *placements.placement_sections(rep),
        *side_by_side_sections(rep),
        *fr_sections(rep),
        *differences.policy_findings(rep.log_views),
        *differences.reading_findings(rep.log_views),
        *differences.combined_findings(rep.log_views, rep.fr_views),
        *lives.life_sections(rep),
        time_section(rep),
        failures_section(rep),
        patterns_section(rep),
        *evidence_sections(rep),
        *judge_section(rep),
        *upstream_judge_section(rep),
    ]
