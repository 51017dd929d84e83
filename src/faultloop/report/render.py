"""The report's files: markdown and HTML (Jinja templates, package data) from one section model,
the HTML's per-cell drill-down, the heatmap and the JUnit file."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from faultloop.contracts import DIMENSIONS, CellEvidence, CitedLine, EvidenceLine, Grade, Reads, ScoreRecord
from faultloop.core import atomic
from faultloop.core.cell import Cell
from faultloop.report import lives
from faultloop.report.document import Table
from faultloop.report.heatmap import write_heatmap
from faultloop.report.junit import junit_xml
from faultloop.report.model import Report
from faultloop.report.sections import TITLE, sections


def md_cell_text(text: object) -> str:
    """A table cell's text in markdown: its pipes escaped, on one line."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _templates(*, autoescape: bool) -> Environment:
    """The report's Jinja templates (package data), with the filters and tests they share."""
    env = Environment(
        loader=PackageLoader("faultloop.report", "templates"),
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=select_autoescape(["html", "j2"]) if autoescape else False,
    )
    env.filters["inline"] = lambda text: Markup(inline_html(str(text)))
    env.filters["md_cell"] = md_cell_text
    env.filters["mark_class"] = lives.mark_class
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
        grade_class=grade_classes(),
        dimensions=DIMENSIONS.names(reads=(Reads.LOG, Reads.LIFE)),
        fr_dimensions=DIMENSIONS.names(reads=(Reads.FR,)),
    )


def grade_classes() -> dict[Grade, str]:
    """The page's colour of each grade: pass where some dimension passes with it, na, else fail."""
    passing = {d.passing for d in DIMENSIONS}
    return {g: "pass" if g in passing else "na" if g == Grade.NA else "fail" for g in Grade}


def write_report(rep: Report, *, markdown: Path, html: Path, heatmap: Path, junit: Path) -> None:
    """Every file of the report: the heatmap first (the HTML page embeds it)."""
    write_heatmap(rep.rows, heatmap)
    atomic.write_atomic(markdown, render_markdown(rep))
    atomic.write_atomic(html, render_html(rep, heatmap))
    atomic.write_atomic(junit, junit_xml(rep))
