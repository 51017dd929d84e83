"""The session report: upstream's table, pass rates, failure modes, evidence and iteration history.

A report people act on: infrastructure failures never count as attribution misses, each failing
cell shows the log lines the analyzer missed beside the ones it used, and every run is recorded
per analyzer version so the loop's stop condition (two consecutive clean versions) is checked by
code, not by eye.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from faultloop import layout
from faultloop.faults import FAULT_NAMES, FAULTS, HANG, RESTART, STOP
from faultloop.pool import Cell, write_pool_file
from faultloop.score import (
    DIMENSIONS,
    JUDGE_DIMENSIONS,
    NA,
    PASS_VALUE,
    SCORED,
    STOP_DIMENSIONS,
    read_scores_tsv,
)

TITLE = "# Fault Injection Experiment Report"
TABLE_COLUMNS = ("#", "FAULT_TYPE", "NODES", "RANK", "ITER", "JOB_ID", "STATE", "run_valid", "restart_correct",
                 "rank_primary", "rank_any", "fault_described", "fr_rank_correct", "judge_notes")
RATE_DIMENSIONS = ("restart_correct", "rank_primary", "rank_any", "fault_category_correct", "fault_type_correct",
                   "fault_described", "fr_rank_correct")
HISTORY_DIR = "history"
HEATMAP_PNG = "heatmap.png"
REPORT_HTML = "report.html"
JUNIT_XML = "junit.xml"
EVIDENCE_LINES = 12


@dataclass(frozen=True)
class ScoreRow:
    """One scores.tsv row, typed."""

    cell: Cell
    status: str
    job_id: str
    state: str
    values: dict[str, str]
    notes: str
    reason: str
    analyzer_version: str
    logsage_restart: str
    primary_ranks: list[int]
    secondary_ranks: list[int]
    fr_suspects: list[int]
    llm_judge: dict[str, Any] | None

    @property
    def scored(self) -> bool:
        return self.status == SCORED

    def failing(self, dims: Iterable[str] = STOP_DIMENSIONS) -> list[str]:
        """The dimensions this scored cell misses (empty for a pass or an unscored cell)."""
        if not self.scored:
            return []
        return [d for d in dims if self.values.get(d) != PASS_VALUE[d]]

    @property
    def passed(self) -> bool:
        return self.scored and not self.failing()


def _json_or(text: str, default: Any) -> Any:
    try:
        return json.loads(text) if text else default
    except ValueError:
        return default


def load_rows(path: Path) -> list[ScoreRow]:
    rows = []
    for r in read_scores_tsv(path):
        rows.append(ScoreRow(
            cell=Cell(r["FAULT_TYPE"], int(r["RANK"]), int(r["ITER"]), int(r["NODES"])),
            status=r["STATUS"], job_id=r["JOB_ID"], state=r["STATE"],
            values={d: r.get(d) or NA for d in DIMENSIONS}, notes=r.get("judge_notes", ""),
            reason=r.get("reason", ""), analyzer_version=r.get("analyzer_version", ""),
            logsage_restart=r.get("logsage_restart", ""),
            primary_ranks=_json_or(r.get("primary_ranks", ""), []),
            secondary_ranks=_json_or(r.get("secondary_ranks", ""), []),
            fr_suspects=_json_or(r.get("fr_suspects", ""), []),
            llm_judge=_json_or(r.get("llm_judge", ""), None),
        ))
    return rows


# ---- failing cells (re-run only what failed, pool presets) ---------------------------------------


def failing_cells(scores_tsv: Path, *, include_unscored: bool = False) -> list[Cell]:
    """Cells that miss any stop-condition dimension; with include_unscored also invalid, infra, not run."""
    return [r.cell for r in load_rows(Path(scores_tsv))
            if r.failing() or (include_unscored and not r.scored)]


def write_failing_pool(scores_tsv: Path, pool_path: Path, *, include_unscored: bool = False) -> list[Cell]:
    """A pool TSV (FAULT_TYPE RANK ITER NODES) of the failing cells, for the next iteration."""
    cells = failing_cells(scores_tsv, include_unscored=include_unscored)
    write_pool_file(cells, pool_path)
    return cells


# ---- history and iteration comparison -------------------------------------------------------------


@dataclass(frozen=True)
class HistoryEntry:
    number: int
    fingerprint: str
    path: Path


HISTORY_RE = re.compile(r"^(?P<n>\d+)_(?P<fp>.+)\.tsv$")


def _safe(fingerprint: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", fingerprint) or "unknown"


def read_history(history_dir: Path) -> list[HistoryEntry]:
    entries = []
    for p in history_dir.glob("*.tsv") if history_dir.is_dir() else []:
        m = HISTORY_RE.match(p.name)
        if m:
            entries.append(HistoryEntry(int(m["n"]), m["fp"], p))
    return sorted(entries, key=lambda e: e.number)


def record_history(history_dir: Path, scores_tsv: Path, fingerprint: str) -> list[HistoryEntry]:
    """Store the scores under the analyzer fingerprint: one entry per distinct version, newest last.

    Re-running the report for the latest version replaces its entry; a version seen earlier (a
    reverted patch) moves to the end, since it is again the newest iteration.
    """
    fp = _safe(fingerprint)
    entries = read_history(history_dir)
    if entries and entries[-1].fingerprint == fp:
        number = entries[-1].number
    else:
        for e in entries:
            if e.fingerprint == fp:
                e.path.unlink()
        number = (entries[-1].number + 1) if entries else 1
    history_dir.mkdir(parents=True, exist_ok=True)
    layout.write_atomic(history_dir / f"{number}_{fp}.tsv", Path(scores_tsv).read_text())
    return read_history(history_dir)


@dataclass
class Comparison:
    """Current iteration against the previous analyzer version, cell by cell."""

    previous: HistoryEntry | None
    regressed: list[tuple[ScoreRow, list[str]]] = field(default_factory=list)
    fixed: list[ScoreRow] = field(default_factory=list)
    still_failing: list[ScoreRow] = field(default_factory=list)
    new_failing: list[ScoreRow] = field(default_factory=list)


def compare(current: list[ScoreRow], previous_entry: HistoryEntry | None) -> Comparison:
    comp = Comparison(previous_entry)
    before = {r.cell.name: r for r in load_rows(previous_entry.path)} if previous_entry else {}
    for row in current:
        if not row.scored:
            continue
        old = before.get(row.cell.name)
        if old is None or not old.scored:
            if row.failing():
                comp.new_failing.append(row)
        elif old.passed and not row.passed:
            comp.regressed.append((row, row.failing()))
        elif not old.passed and row.passed:
            comp.fixed.append(row)
        elif not row.passed:
            dims_lost = [d for d in row.failing() if d not in old.failing()]
            if dims_lost:  # failing before too, but a dimension that passed now fails
                comp.regressed.append((row, dims_lost))
            else:
                comp.still_failing.append(row)
    return comp


def all_pass(rows: list[ScoreRow]) -> bool:
    return bool(rows) and all(r.passed for r in rows)


def stop_condition(history: list[HistoryEntry]) -> tuple[bool, str]:
    """Upstream's stop condition: every cell passes the four dimensions for two consecutive versions."""
    if len(history) < 2:
        return False, "only one analyzer version so far; the stop condition needs two consecutive clean ones"
    last, prev = load_rows(history[-1].path), load_rows(history[-2].path)
    for label, rows in (("this", last), ("the previous", prev)):
        if not all_pass(rows):
            bad = [r for r in rows if not r.passed]
            return False, f"{len(bad)} of {len(rows)} cells do not pass in {label} version"
    return True, f"every cell passes in analyzer versions {history[-2].fingerprint} and {history[-1].fingerprint}"


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


def rate(rows: list[ScoreRow], test: Callable[[ScoreRow], bool]) -> Rate:
    scored = [r for r in rows if r.scored]
    return Rate(sum(1 for r in scored if test(r)), len(scored))


def dim_pass(d: str) -> Callable[[ScoreRow], bool]:
    return lambda r: r.values.get(d) == PASS_VALUE[d]


def groups(rows: list[ScoreRow]) -> dict[tuple[str, int], list[ScoreRow]]:
    """Rows by (fault type, node count) in the fault table's order."""
    out: dict[tuple[str, int], list[ScoreRow]] = {}
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
    test: Callable[[ScoreRow], bool]


def _v(r: ScoreRow, d: str) -> str:
    return r.values.get(d, NA)


def _category(r: ScoreRow) -> str:
    fault = FAULTS.get(r.cell.fault_type)
    return fault.category if fault else ""


PATTERNS = (
    Pattern("rank_primary=false, rank_any=true",
            "rank detected but treated as collateral (named only as secondary)",
            "logsage rank attribution: promote the rank whose own lines carry the fault",
            lambda r: _v(r, "rank_primary") == "false" and _v(r, "rank_any") == "true"),
    Pattern("rank_primary=partial", "injected rank is one of several primary ranks",
            "logsage rank attribution: demote ranks that only report the symptom (timeouts, peer exits)",
            lambda r: _v(r, "rank_primary") == "partial"),
    Pattern("rank_any=false for rank-0", "rank-0 fault silences the watchdog on other ranks; no rank-0 signal",
            "logsage: explicit rank-0 heuristic (other ranks silent / waiting on rank 0)",
            lambda r: r.cell.rank == 0 and _v(r, "rank_any") == "false"),
    Pattern("rank_any=false (rank > 0)", "injected rank not named anywhere in the attribution",
            "logsage: extract ranks from watchdog / exit lines (label prefix, 'rank N')",
            lambda r: r.cell.rank != 0 and _v(r, "rank_any") == "false"),
    Pattern("fault_described=partial for crash types", "crash keywords present but fault type not named",
            "logsage rules: add SIGKILL/SEGFAULT/OS_ABORT/GPU_ERROR/exception keyword patterns",
            lambda r: _v(r, "fault_described") == "partial" and _category(r) != HANG),
    Pattern("fault_described=partial for hangs", "hang recognised but its cause not named",
            "logsage rules: tell GPU sleep, GIL lock and SIGSTOP apart (who stops logging, how)",
            lambda r: _v(r, "fault_described") == "partial" and _category(r) == HANG),
    Pattern("fault_described=false", "fault nature wrong (e.g. crash described as a collective timeout)",
            "logsage rules: check death-signal / exception lines before the timeout fallback",
            lambda r: _v(r, "fault_described") == "false"),
    Pattern("restart_correct=false for GPU_ERROR", "hardware error conflated with a recoverable hang",
            "logsage: distinguish cudaError (crash, STOP) from NCCL timeout (hang, RESTART)",
            lambda r: r.cell.fault_type == "GPU_ERROR" and _v(r, "restart_correct") == "false"),
    Pattern("restart_correct=false, expected STOP", "analyzer restarts after a crash or code bug",
            "logsage restart policy: crash / exception verdicts map to STOP",
            lambda r: r.cell.fault_type != "GPU_ERROR" and _v(r, "restart_correct") == "false"
            and FAULTS.get(r.cell.fault_type) is not None and FAULTS[r.cell.fault_type].restart == STOP),
    Pattern("restart_correct=false, expected RESTART", "analyzer stops on a transient hang or external signal",
            "logsage fast path: strengthen NCCL timeout / external signal -> RESTART IMMEDIATE",
            lambda r: _v(r, "restart_correct") == "false" and FAULTS.get(r.cell.fault_type) is not None
            and FAULTS[r.cell.fault_type].restart == RESTART),
    Pattern("fr_rank_correct=no_dumps", "NCCL watchdog did not fire before the job ended",
            "job env: adjust TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC / dump-on-timeout (not the analyzer)",
            lambda r: _v(r, "fr_rank_correct") == "no_dumps"),
    Pattern("fr_rank_correct=node", "FR isolated the injected rank's node, not the rank",
            "FR analyzer: not patched by the loop; note and escalate",
            lambda r: _v(r, "fr_rank_correct") == "node"),
    Pattern("fr_rank_correct=segment", "FR isolated the injected rank's segment, not its node or rank",
            "FR analyzer: not patched by the loop; note and escalate",
            lambda r: _v(r, "fr_rank_correct") == "segment"),
    Pattern("fr_rank_correct=false", "FR suspects lie outside the injected rank's segment (symptom rank?)",
            "FR analyzer: not patched by the loop; note and escalate",
            lambda r: _v(r, "fr_rank_correct") == "false"),
)


def pattern_hits(rows: list[ScoreRow]) -> list[tuple[Pattern, list[ScoreRow]]]:
    scored = [r for r in rows if r.scored]
    return [(p, [r for r in scored if p.test(r)]) for p in PATTERNS]


# ---- evidence -------------------------------------------------------------------------------------

# What each fault leaves in a log when it fires (never the injector's own marker lines, which are
# stripped): used only to point at lines an analyzer should have read.
SIGNATURES: dict[str, str] = {
    "GPU_ERROR": r"illegal memory access|CUDA error|cudaError|device-side assert|GPU error",
    "GPU_SLEEP": r"watchdog|timed? ?out|timeout|stall|heartbeat",
    "WORKLOAD_EXC": r"InjectedException|Traceback|Exception",
    "ASYNC_EXC": r"InjectedException|Traceback|Exception",
    "SIGNAL_EXC": r"SIGUSR1|InjectedException|Traceback",
    "OS_ABORT": r"SIGABRT|abort|signal 6\b|exit ?code[:= ]*-6\b|core dumped",
    "LOCK_GIL": r"watchdog|timed? ?out|timeout|stall|heartbeat|GIL",
    "SEGFAULT": r"SIGSEGV|segmentation fault|segfault|signal 11\b|exit ?code[:= ]*-11\b",
    "SIGINT": r"SIGINT|KeyboardInterrupt|signal 2\b|exit ?code[:= ]*-2\b",
    "SIGKILL": r"SIGKILL|signal 9\b|killed|exit ?code[:= ]*-9\b",
    "SIGTERM": r"SIGTERM|signal 15\b|terminated|exit ?code[:= ]*-15\b",
    "SIGSTOP": r"SIGSTOP|stopped|watchdog|timed? ?out|timeout|stall",
}
ERROR_WORDS = re.compile(r"error|fail|exception|timeout|timed out|killed|signal|abort|fatal|watchdog|exit",
                         re.IGNORECASE)


@dataclass(frozen=True)
class EvidenceLine:
    number: int
    text: str
    why: str
    cited: bool


@dataclass(frozen=True)
class CellEvidence:
    row: ScoreRow
    candidates: list[EvidenceLine]
    cited: list[dict[str, Any]]
    last_line_of_rank: EvidenceLine | None


def rank_pattern(rank: int) -> re.Pattern[str]:
    """Lines by the rank (srun --label prefix) or naming it (rank 3, rank=3, [3])."""
    return re.compile(rf"^\s*{rank}:\s|\brank[\s=:\[#]*{rank}\b", re.IGNORECASE)


def cell_evidence(session_dir: Path, row: ScoreRow) -> CellEvidence:
    """Lines of the stripped log the verdict should rest on, beside the ones it did rest on."""
    cell_dir = session_dir / row.cell.name
    logsage = _json_or(_read(cell_dir / layout.LOGSAGE_JSON), {})
    cited = [e for e in logsage.get("evidence", []) if isinstance(e, dict)]
    cited_lines = {e.get("line") for e in cited}
    cited_texts = {str(e.get("text", "")).strip() for e in cited}
    lines = _read(cell_dir / layout.STRIPPED_LOG).splitlines()
    by_rank = rank_pattern(row.cell.rank)
    signature = re.compile(SIGNATURES.get(row.cell.fault_type, r"$^"), re.IGNORECASE)
    strong, weak = [], []
    last: EvidenceLine | None = None
    for number, text in enumerate(lines, start=1):
        if text.strip() in cited_texts:
            cited_lines.add(number)  # analyzers may number lines differently; the text is the same
        named = bool(by_rank.search(text))
        signed = bool(signature.search(text))
        if named:
            last = EvidenceLine(number, text, "last line of the injected rank", number in cited_lines)
        if named and signed:
            strong.append(EvidenceLine(number, text, "injected rank + fault signature", number in cited_lines))
        elif signed or (named and ERROR_WORDS.search(text)):
            why = "fault signature" if signed else "injected rank + error word"
            weak.append(EvidenceLine(number, text, why, number in cited_lines))
    return CellEvidence(row, (strong + weak)[:EVIDENCE_LINES], cited, last)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


# ---- judge agreement ------------------------------------------------------------------------------


def cohen_kappa(a: list[str], b: list[str]) -> float:
    """Agreement beyond chance between two raters; NaN when chance agreement is total."""
    n = len(a)
    if n == 0:
        return math.nan
    observed = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb[k] for k in ca) / (n * n)
    return math.nan if expected == 1 else (observed - expected) / (1 - expected)


@dataclass(frozen=True)
class Agreement:
    dimension: str
    agree: int
    total: int
    kappa: float


def judge_agreement(rows: list[ScoreRow]) -> tuple[list[Agreement], int]:
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
        out.append(Agreement(d, sum(x == y for x, y in zip(a, b)), len(pairs), cohen_kappa(a, b)))
    return out, failures


# ---- markdown -------------------------------------------------------------------------------------


def _cell_text(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def md_table(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    header = list(header)
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_cell_text(c) for c in row) + " |" for row in rows]
    return out


def upstream_rows(rows: list[ScoreRow]) -> list[list[str]]:
    return [[str(i), r.cell.fault_type, str(r.cell.nodes), str(r.cell.rank), str(r.cell.iter), r.job_id, r.state,
             *(r.values[d] for d in TABLE_COLUMNS[7:13]), r.notes] for i, r in enumerate(rows, start=1)]


def analyzer_versions(rows: list[ScoreRow]) -> Counter[str]:
    return Counter(r.analyzer_version or "unknown" for r in rows if r.scored)


@dataclass
class Report:
    """Everything the markdown, HTML and JUnit outputs are rendered from."""

    session_dir: Path
    rows: list[ScoreRow]
    fingerprint: str
    history: list[HistoryEntry]
    comparison: Comparison
    stop: tuple[bool, str]


def _cells(rows: Iterable[ScoreRow]) -> str:
    return ", ".join(r.cell.name for r in rows) or "-"


def render_markdown(rep: Report) -> str:
    rows = rep.rows
    scored = [r for r in rows if r.scored]
    apart = [r for r in rows if not r.scored]
    comp = rep.comparison
    out = [TITLE, ""]
    versions = analyzer_versions(rows)
    number = rep.history[-1].number if rep.history else 1
    out.append(f"- Analyzer version: `{rep.fingerprint}` (iteration {number}, history in `{HISTORY_DIR}/`)")
    if len(versions) > 1:
        mixed = ", ".join(f"`{v}` x{n}" for v, n in versions.most_common())
        out.append(f"- Warning: the scored cells come from several analyzer versions ({mixed}); re-run the analysis.")
    passed = sum(r.passed for r in scored)
    out += [f"- Cells: {len(rows)} in the pool, {len(scored)} scored, {passed} pass all of "
            f"{', '.join(STOP_DIMENSIONS)}; {len(apart)} not scored (listed apart, excluded from every rate).",
            f"- Stop condition: {'HOLDS' if rep.stop[0] else 'not met'}: {rep.stop[1]}.", ""]
    if comp.regressed:
        out.append(f"**REGRESSED since the previous version: {len(comp.regressed)} cell(s): "
                   f"{_cells(r for r, _ in comp.regressed)}**")
        out.append("")
    out += md_table(TABLE_COLUMNS, upstream_rows(rows)) + [""]

    out += ["## Iteration comparison", ""]
    if comp.previous is None:
        out += ["First recorded analyzer version: nothing to compare with.", ""]
    else:
        out += [f"Against iteration {comp.previous.number} (`{comp.previous.fingerprint}`):", ""]
        out += [f"- Regressed ({len(comp.regressed)}): "
                + (", ".join(f"{r.cell.name} ({', '.join(f'{d}={r.values[d]}' for d in dims)})"
                             for r, dims in comp.regressed) or "-"),
                f"- Fixed ({len(comp.fixed)}): {_cells(comp.fixed)}",
                f"- Still failing ({len(comp.still_failing)}): {_cells(comp.still_failing)}",
                f"- Failing, not scored before ({len(comp.new_failing)}): {_cells(comp.new_failing)}", ""]

    out += ["## Pass rates by fault type and node count", "",
            f"A cell passes a dimension with {', '.join(f'{d}={v}' for d, v in PASS_VALUE.items() if d != 'run_valid')}"
            "; `overall` = all four stop-condition dimensions.", ""]
    rate_rows = []
    for (fault, nodes), grp in groups(rows).items():
        if not any(r.scored for r in grp):
            continue  # only unscored cells: listed below, no rate
        rate_rows.append([fault, nodes, str(rate(grp, lambda r: r.passed)),
                          *(str(rate(grp, dim_pass(d))) for d in RATE_DIMENSIONS)])
    rate_rows.append(["**all**", "", str(rate(rows, lambda r: r.passed)),
                      *(str(rate(rows, dim_pass(d))) for d in RATE_DIMENSIONS)])
    out += md_table(["FAULT_TYPE", "NODES", "overall", *RATE_DIMENSIONS], rate_rows) + [""]
    out += ["### Not scored (excluded from every rate)", ""]
    out += (md_table(["cell", "STATUS", "STATE", "reason"], [[r.cell.name, r.status, r.state, r.reason]
                                                             for r in apart]) if apart else ["None."])
    out.append("")

    out += ["## Failure-mode patterns", ""]
    hits = [(p, cells) for p, cells in pattern_hits(rows) if cells]
    out += (md_table(["pattern", "count", "cells", "meaning", "suggested fix target"],
                     [[p.name, len(c), _cells(c), p.meaning, p.fix] for p, c in hits]) if hits
            else ["No failure pattern in the scored cells."])
    out.append("")

    failing = [r for r in scored if not r.passed]
    out += ["## Evidence for failing cells", ""]
    if not failing:
        out += ["No failing cell.", ""]
    for r in failing:
        ev = cell_evidence(rep.session_dir, r)
        out += [f"### {r.cell.name}: {', '.join(f'{d}={r.values[d]}' for d in r.failing())}", "",
                f"Verdict: restart `{r.logsage_restart or 'none'}`, primary {r.primary_ranks}, "
                f"secondary {r.secondary_ranks}, FR suspects {r.fr_suspects}. {r.notes}", "",
                f"Lines naming rank {r.cell.rank} or carrying the {r.cell.fault_type} signature "
                "(missed = not cited by the analyzer):", ""]
        lines = list(ev.candidates)
        if ev.last_line_of_rank and ev.last_line_of_rank.number not in {e.number for e in lines}:
            lines.append(ev.last_line_of_rank)
        out += ([f"- L{e.number} [{'cited' if e.cited else 'MISSED'}; {e.why}] `{_code(e.text)}`" for e in lines]
                or ["- none found in the stripped log"])
        out += ["", "Lines the verdict rested on (logsage evidence):", ""]
        out += ([f"- L{e.get('line')} [{e.get('kind', '?')}, rank {e.get('rank')}] `{_code(e.get('text', ''))}`"
                 for e in ev.cited] or ["- none (the analyzer cited no line)"])
        out.append("")

    agreement, failures = judge_agreement(rows)
    if agreement or failures:
        out += ["## LLM judge vs code", ""]
        out += md_table(["dimension", "agreement", "Cohen's kappa"],
                        [[a.dimension, f"{a.agree}/{a.total}", "n/a" if math.isnan(a.kappa) else f"{a.kappa:.2f}"]
                         for a in agreement])
        out += ["", f"Judge failures (recorded in the cells, code scores used): {failures}", ""]
    return "\n".join(out).rstrip() + "\n"


def _code(text: str) -> str:
    return str(text).replace("`", "'").strip()[:300]


# ---- heatmap, HTML, JUnit -----------------------------------------------------------------------


def write_heatmap(rows: list[ScoreRow], path: Path) -> None:
    """Overall pass rate per fault type x node count; grey where no cell was scored."""
    import matplotlib  # imported on use: the workflow imports this module while planning

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grp = groups(rows)
    faults = list(dict.fromkeys(f for f, _ in grp))
    nodes = sorted({n for _, n in grp})
    values = [[rate(grp.get((f, n), []), lambda r: r.passed) for n in nodes] for f in faults]
    fig, ax = plt.subplots(figsize=(1.4 + 1.1 * max(1, len(nodes)), 1.2 + 0.45 * max(1, len(faults))))
    matrix = [[v.value for v in row] for row in values] or [[math.nan]]
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="lightgrey")
    image = ax.imshow(matrix, cmap=cmap, vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(nodes)), [f"{n} node{'s' if n != 1 else ''}" for n in nodes])
    ax.set_yticks(range(len(faults)), faults)
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            ax.text(j, i, f"{v.passed}/{v.total}" if v.total else "-", ha="center", va="center", fontsize=8)
    ax.set_title("Cells passing all four dimensions")
    fig.colorbar(image, ax=ax, fraction=0.05)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    tmp.replace(path)


def render_html(rep: Report, heatmap: Path) -> str:
    env = Environment(loader=PackageLoader("faultloop", "templates"), autoescape=select_autoescape(["html", "j2"]))
    png = base64.b64encode(heatmap.read_bytes()).decode() if heatmap.exists() else ""
    return env.get_template("report.html.j2").render(
        title=TITLE.lstrip("# "), rep=rep, columns=TABLE_COLUMNS, table=upstream_rows(rep.rows),
        heatmap_png=png, passed=sum(r.passed for r in rep.rows),
        scored=sum(r.scored for r in rep.rows),
    )


def junit_xml(rows: list[ScoreRow], fingerprint: str) -> str:
    """One testcase per cell: failing dimensions as the failure, unscored cells skipped."""
    suite = ET.Element("testsuite", name="faultloop", tests=str(len(rows)),
                       failures=str(sum(1 for r in rows if r.failing())),
                       skipped=str(sum(1 for r in rows if not r.scored)), errors="0")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="analyzer_version", value=fingerprint)
    for r in rows:
        case = ET.SubElement(suite, "testcase", classname=f"faultloop.{r.cell.fault_type}.n{r.cell.nodes}",
                             name=r.cell.name, time="0")
        if not r.scored:
            ET.SubElement(case, "skipped", message=f"{r.status}: {r.reason or r.notes}")
        elif r.failing():
            failure = ET.SubElement(case, "failure", type="attribution",
                                    message="; ".join(f"{d}={r.values[d]}" for d in r.failing()))
            failure.text = r.notes
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


# ---- main ---------------------------------------------------------------------------------------


def pick_fingerprint(rows: list[ScoreRow], given: str | None) -> str:
    """The analyzer version the scores belong to: the given one, else the scored cells' majority."""
    if given:
        return given
    versions = analyzer_versions(rows)
    return versions.most_common(1)[0][0] if versions else "unknown"


def build_report(scores_tsv: Path, session_dir: Path, fingerprint: str | None = None,
                 *, record: bool = True) -> Report:
    rows = load_rows(scores_tsv)
    fp = pick_fingerprint(rows, fingerprint)
    history_dir = session_dir / HISTORY_DIR
    history = record_history(history_dir, scores_tsv, fp) if record else read_history(history_dir)
    previous = history[-2] if len(history) >= 2 else None
    return Report(session_dir, rows, fp, history, compare(rows, previous), stop_condition(history))


def main(argv: list[str]) -> int:
    """`faultloop report`: write the session report, heatmap, HTML, JUnit and history entry."""
    p = argparse.ArgumentParser(prog="faultloop report", description=main.__doc__)
    p.add_argument("--scores", type=Path, required=True, help="scores.tsv from `faultloop score --gather`")
    p.add_argument("--session-dir", type=Path, required=True)
    p.add_argument("--analyzer-version", help="analyzer fingerprint (default: the scored cells' majority)")
    p.add_argument("--report", "--output", dest="report", type=Path, help=f"default <session>/{layout.REPORT_MD}")
    p.add_argument("--heatmap", type=Path, help=f"default <session>/{HEATMAP_PNG}")
    p.add_argument("--html", type=Path, help=f"default <session>/{REPORT_HTML}")
    p.add_argument("--junit", type=Path, help=f"default <session>/{JUNIT_XML}")
    p.add_argument("--no-history", action="store_true", help="compare with the history but do not record")
    p.add_argument("--failing-pool", type=Path, help="also write a pool TSV of the failing cells here")
    p.add_argument("--include-unscored", action="store_true",
                   help="with --failing-pool: add invalid, infra-failed and not-run cells")
    args = p.parse_args(argv)
    if not args.scores.is_file():
        print(f"faultloop report: no scores file {args.scores}", file=sys.stderr)
        return 1
    s = args.session_dir
    rep = build_report(args.scores, s, args.analyzer_version, record=not args.no_history)
    heatmap = args.heatmap or s / HEATMAP_PNG
    write_heatmap(rep.rows, heatmap)
    layout.write_atomic(args.report or s / layout.REPORT_MD, render_markdown(rep))
    layout.write_atomic(args.html or s / REPORT_HTML, render_html(rep, heatmap))
    layout.write_atomic(args.junit or s / JUNIT_XML, junit_xml(rep.rows, rep.fingerprint))
    if args.failing_pool:
        cells = write_failing_pool(args.scores, args.failing_pool, include_unscored=args.include_unscored)
        print(f"{len(cells)} failing cells written to {args.failing_pool}")
    return 0

