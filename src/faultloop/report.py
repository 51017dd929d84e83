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
import html
import itertools
import json
import math
import re
import statistics
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from faultloop import layout
from faultloop.faults import FAULT_NAMES, FAULTS, HANG, RESTART, STOP
from faultloop.pool import Cell, write_pool_file
from faultloop.score import (
    DIMENSIONS,
    FR_PREFIX,
    JUDGE_DIMENSIONS,
    NA,
    PASS_VALUE,
    SCORED,
    STOP_DIMENSIONS,
    read_scores_tsv,
    write_scores_tsv,
)

TITLE = "# Fault Injection Experiment Report"
TABLE_COLUMNS = ("#", "FAULT_TYPE", "NODES", "RANK", "ITER", "JOB_ID", "STATE", "run_valid", "restart_correct",
                 "rank_primary", "rank_any", "fault_described", "fr_rank_correct", "judge_notes")
RATE_DIMENSIONS = ("restart_correct", "rank_primary", "rank_any", "fault_category_correct", "fault_type_correct",
                   "fault_described", "fr_rank_correct")
# What tells log analyzers apart (fr_rank_correct comes from the FR analyzer, the same for all).
LOG_DIMENSIONS = RATE_DIMENSIONS[:-1]
PAIRED_DIMENSIONS = ("overall", "restart_correct", "rank_primary", "rank_any", "fault_described")
HISTORY_DIR = "history"
HEATMAP_PNG = "heatmap.png"
REPORT_HTML = "report.html"
JUNIT_XML = "junit.xml"
EVIDENCE_LINES = 12
LISTED_DISAGREEMENTS = 200  # the markdown lists this many; the HTML and scores.tsv have every cell
GRADE_CLASS = {"true": "pass", "rank": "pass", "false": "fail", "partial": "fail", "node": "fail",
               "segment": "fail", "no_dumps": "fail", "N/A": "na"}


@dataclass(frozen=True)
class ScoreRow:
    """One scores.tsv row (one analyzer on one cell), typed."""

    cell: Cell
    analyzer: str
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
    analyzer_error: str = ""
    fault_to_end_s: float | None = None
    analyzer_wall_s: float | None = None

    @property
    def scored(self) -> bool:
        return self.status == SCORED

    @property
    def is_fr(self) -> bool:
        return self.analyzer.startswith(FR_PREFIX)

    def failing(self, dims: Iterable[str] | None = None) -> list[str]:
        """The dimensions this scored cell misses (empty for a pass or an unscored cell)."""
        if not self.scored:
            return []
        dims = dims if dims is not None else ("fr_rank_correct",) if self.is_fr else STOP_DIMENSIONS
        return [d for d in dims if self.values.get(d) != PASS_VALUE[d]]

    @property
    def passed(self) -> bool:
        return self.scored and not self.failing()

    @property
    def time_to_verdict_s(self) -> float | None:
        """From the fault firing to the analyzer's answer: the job's end, then the analysis."""
        if self.fault_to_end_s is None or self.analyzer_wall_s is None:
            return None
        return self.fault_to_end_s + self.analyzer_wall_s


def _json_or(text: str, default: Any) -> Any:
    try:
        return json.loads(text) if text else default
    except ValueError:
        return default


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def load_rows(path: Path) -> list[ScoreRow]:
    """scores.tsv's rows; a table from before the ANALYZER column is faultloop's own analyzer."""
    rows = []
    for r in read_scores_tsv(path):
        rows.append(ScoreRow(
            cell=Cell(r["FAULT_TYPE"], int(r["RANK"]), int(r["ITER"]), int(r["NODES"])),
            analyzer=r.get("ANALYZER") or "builtin",
            status=r["STATUS"], job_id=r["JOB_ID"], state=r["STATE"],
            values={d: r.get(d) or NA for d in DIMENSIONS}, notes=r.get("judge_notes", ""),
            reason=r.get("reason", ""), analyzer_version=r.get("analyzer_version", ""),
            logsage_restart=r.get("logsage_restart", ""),
            primary_ranks=_json_or(r.get("primary_ranks", ""), []),
            secondary_ranks=_json_or(r.get("secondary_ranks", ""), []),
            fr_suspects=_json_or(r.get("fr_suspects", ""), []),
            llm_judge=_json_or(r.get("llm_judge", ""), None),
            analyzer_error=r.get("analyzer_error", ""),
            fault_to_end_s=_float(r.get("fault_to_end_s")),
            analyzer_wall_s=_float(r.get("analyzer_wall_s")),
        ))
    return rows


def by_analyzer(rows: list[ScoreRow]) -> dict[str, list[ScoreRow]]:
    """Rows per analyzer, in the order the analyzers first appear (the primary first)."""
    out: dict[str, list[ScoreRow]] = {}
    for row in rows:
        out.setdefault(row.analyzer, []).append(row)
    return out


def primary_name(rows: list[ScoreRow]) -> str | None:
    return next((r.analyzer for r in rows if not r.is_fr), None)


# ---- failing cells (re-run only what failed, pool presets) ---------------------------------------


def failing_cells(scores_tsv: Path, *, analyzer: str | None = None, include_unscored: bool = False) -> list[Cell]:
    """Cells where an analyzer (default: the primary) misses a stop-condition dimension; with
    include_unscored also invalid, infra-failed and not-run cells."""
    rows = load_rows(Path(scores_tsv))
    name = analyzer if analyzer in {r.analyzer for r in rows} else primary_name(rows)
    return [r.cell for r in rows if r.analyzer == name and (r.failing() or (include_unscored and not r.scored))]


def write_failing_pool(scores_tsv: Path, pool_path: Path, *, include_unscored: bool = False) -> list[Cell]:
    """A pool TSV (FAULT_TYPE RANK ITER NODES) of the primary analyzer's failing cells, for the next iteration."""
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


def record_history(history_dir: Path, rows: list[dict[str, str]], fingerprint: str) -> list[HistoryEntry]:
    """Store one analyzer's scores.tsv rows under its fingerprint (history/<analyzer>/): one entry
    per distinct version, newest last.

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
    write_scores_tsv(rows, history_dir / f"{number}_{fp}.tsv")
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

    def expected(self) -> list[EvidenceLine]:
        """The lines a verdict should rest on (the injected rank's last line too)."""
        lines = list(self.candidates)
        last = self.last_line_of_rank
        if last and last.number not in {e.number for e in lines}:
            lines.append(last)
        return lines


def rank_pattern(rank: int) -> re.Pattern[str]:
    """Lines by the rank (srun --label prefix) or naming it (rank 3, rank=3, [3])."""
    return re.compile(rf"^\s*{rank}:\s|\brank[\s=:\[#]*{rank}\b", re.IGNORECASE)


def cell_evidence(session_dir: Path, row: ScoreRow, lines: list[str] | None = None) -> CellEvidence:
    """Lines of the stripped log the verdict should rest on, beside the ones the analyzer cited.
    lines: the cell's stripped log, when the caller has read it already."""
    cell_dir = session_dir / row.cell.name
    verdict = _json_or(_read(cell_dir / layout.analyzer_dir(row.analyzer) / layout.LOGSAGE_JSON), {})
    cited = [e for e in verdict.get("evidence", []) if isinstance(e, dict)]
    cited_lines = {e.get("line") for e in cited}
    cited_texts = {str(e.get("text", "")).strip() for e in cited}
    if lines is None:
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


# ---- analyzers side by side -----------------------------------------------------------------------


def passes(row: ScoreRow, dimension: str) -> bool:
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


def _index(views: dict[str, list[ScoreRow]]) -> dict[str, dict[str, ScoreRow]]:
    return {name: {r.cell.name: r for r in rows if r.scored} for name, rows in views.items()}


def paired(views: dict[str, list[ScoreRow]], dimensions: Iterable[str]) -> list[Paired]:
    index = _index(views)
    out = []
    for a, b in itertools.combinations(views, 2):
        cells = [c for c in index[a] if c in index[b]]
        for d in dimensions:
            counts = Counter((passes(index[a][c], d), passes(index[b][c], d)) for c in cells)
            out.append(Paired(a, b, d, counts[True, False], counts[False, True], counts[True, True],
                              counts[False, False]))
    return out


def disagreements(views: dict[str, list[ScoreRow]], dimensions: Iterable[str]) -> list[Disagreement]:
    """Per cell every analyzer scored, the dimensions on which some are right and some wrong."""
    index = _index(views)
    names = list(views)
    if len(names) < 2:
        return []
    out = []
    for cell_name, first in index[names[0]].items():
        rows = [index[n].get(cell_name) for n in names]
        if any(r is None for r in rows):
            continue
        for d in dimensions:
            right = [n for n, r in zip(names, rows) if passes(r, d)]  # type: ignore[arg-type]
            if 0 < len(right) < len(names):
                out.append(Disagreement(first.cell, d, {n: r.values[d] for n, r in zip(names, rows)}, right))  # type: ignore[union-attr]
    return out


def _seconds(values: list[float]) -> str:
    """Median / worst, for people."""
    return f"{statistics.median(values):.1f} / {max(values):.1f}" if values else "-"


# ---- the report model ------------------------------------------------------------------------------


@dataclass
class AnalyzerView:
    """One log analyzer's rows with its own history, iteration comparison and stop condition."""

    name: str
    rows: list[ScoreRow]
    fingerprint: str
    history: list[HistoryEntry]
    comparison: Comparison
    stop: tuple[bool, str]


@dataclass
class Report:
    """Everything the markdown, HTML and JUnit outputs are rendered from."""

    session_dir: Path
    rows: list[ScoreRow]
    views: list[AnalyzerView]  # the log analyzers, the primary first
    fr_views: dict[str, list[ScoreRow]]  # the flight-recorder analyzers, fr:<name>

    @property
    def primary(self) -> AnalyzerView:
        return self.views[0]

    @property
    def log_views(self) -> dict[str, list[ScoreRow]]:
        return {v.name: v.rows for v in self.views}


def analyzer_versions(rows: list[ScoreRow]) -> Counter[str]:
    return Counter(r.analyzer_version or "unknown" for r in rows if r.scored)


def pick_fingerprint(rows: list[ScoreRow], given: str | None) -> str:
    """The analyzer version the scores belong to: the given one, else the scored cells' majority."""
    if given:
        return given
    versions = analyzer_versions(rows)
    return versions.most_common(1)[0][0] if versions else "unknown"


def build_report(scores_tsv: Path, session_dir: Path, fingerprint: str | None = None,
                 *, record: bool = True) -> Report:
    """Load the scores and, per log analyzer, record its history and compare with its previous
    version (fingerprint: the primary analyzer's version, default its cells' majority)."""
    rows = load_rows(scores_tsv)
    raw = read_scores_tsv(scores_tsv)
    views = []
    for name, own in by_analyzer(rows).items():
        if own[0].is_fr:
            continue
        fp = pick_fingerprint(own, fingerprint if not views else None)
        history_dir = session_dir / HISTORY_DIR / name
        subset = [r for r in raw if (r.get("ANALYZER") or "builtin") == name]
        history = record_history(history_dir, subset, fp) if record else read_history(history_dir)
        previous = history[-2] if len(history) >= 2 else None
        views.append(AnalyzerView(name, own, fp, history, compare(own, previous), stop_condition(history)))
    if not views:
        views.append(AnalyzerView("builtin", [], "unknown", [], Comparison(None), (False, "no scores")))
    fr_views = {name: own for name, own in by_analyzer(rows).items() if own[0].is_fr}
    return Report(session_dir, rows, views, fr_views)


# ---- sections: one model, rendered as markdown and as HTML ----------------------------------------


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    graded: bool = False  # cells hold grades (true, partial, rank, ...) that the page colours


Block = Union[str, list[str], Table]  # a paragraph, a bullet list, a table


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    level: int = 2

    @property
    def anchor(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-")

    def markdown(self) -> list[str]:
        out = ["#" * self.level + " " + self.title, ""]
        for block in self.blocks:
            if isinstance(block, Table):
                out += md_table(block.header, block.rows)
            elif isinstance(block, list):
                out += [f"- {item}" for item in block]
            else:
                out.append(block)
            out.append("")
        return out


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


def _cells(rows: Iterable[ScoreRow]) -> str:
    return ", ".join(r.cell.name for r in rows) or "-"


def _code(text: str) -> str:
    return str(text).replace("`", "'").strip()[:300]


def summary_section(rep: Report) -> Section:
    p = rep.primary
    scored = [r for r in p.rows if r.scored]
    apart = [r for r in p.rows if not r.scored]
    others = [v.name for v in rep.views[1:]]
    lines = [f"Analyzers: `{p.name}` (primary: upstream's table, patterns, evidence, `cells=failed`)"
             + "".join(f", `{n}`" for n in others)
             + (f"; FR: {', '.join(f'`{n[len(FR_PREFIX):]}`' for n in rep.fr_views)}" if rep.fr_views else "")]
    number = p.history[-1].number if p.history else 1
    lines.append(f"Analyzer version: `{p.fingerprint}` (iteration {number}, history in `{HISTORY_DIR}/{p.name}/`)")
    versions = analyzer_versions(p.rows)
    if len(versions) > 1:
        mixed = ", ".join(f"`{v}` x{n}" for v, n in versions.most_common())
        lines.append(f"Warning: the scored cells come from several analyzer versions ({mixed}); re-run the analysis.")
    passed = sum(r.passed for r in scored)
    lines += [f"Cells: {len(p.rows)} in the pool, {len(scored)} scored, {passed} pass all of "
              f"{', '.join(STOP_DIMENSIONS)}; {len(apart)} not scored (listed apart, excluded from every rate).",
              f"Stop condition: {'HOLDS' if p.stop[0] else 'not met'}: {p.stop[1]}."]
    blocks: list[Block] = [lines]
    if p.comparison.regressed:
        blocks.append(f"**REGRESSED since the previous version: {len(p.comparison.regressed)} cell(s): "
                      f"{_cells(r for r, _ in p.comparison.regressed)}**")
    blocks.append(Table(list(TABLE_COLUMNS), upstream_rows(p.rows), graded=True))
    return Section(TITLE.lstrip("# "), blocks, level=1)


def iteration_sections(rep: Report) -> list[Section]:
    new = [v for v in rep.views if v.comparison.previous is None]
    intro: list[Block] = ["Each analyzer against its own previous version (history per analyzer)."]
    if new:
        intro.append("First recorded analyzer version, nothing to compare with: "
                     + ", ".join(f"{v.name} (`{v.fingerprint}`)" for v in new) + ".")
    out = [Section("Iteration comparison", intro)]
    for view in rep.views:
        comp = view.comparison
        if comp.previous is not None:
            blocks: list[Block] = [f"Against iteration {comp.previous.number} (`{comp.previous.fingerprint}`):", [
                f"Regressed ({len(comp.regressed)}): "
                + (", ".join(f"{r.cell.name} ({', '.join(f'{d}={r.values[d]}' for d in dims)})"
                             for r, dims in comp.regressed) or "-"),
                f"Fixed ({len(comp.fixed)}): {_cells(comp.fixed)}",
                f"Still failing ({len(comp.still_failing)}): {_cells(comp.still_failing)}",
                f"Failing, not scored before ({len(comp.new_failing)}): {_cells(comp.new_failing)}"]]
            out.append(Section(view.name, blocks, level=3))
    return out


def _rate_row(label: list[str], rows: list[ScoreRow], dims: Iterable[str]) -> list[str]:
    return [*label, str(rate(rows, lambda r: r.passed)), *(str(rate(rows, dim_pass(d))) for d in dims)]


def rates_sections(rep: Report) -> list[Section]:
    rows = rep.primary.rows
    table = [_rate_row([fault, str(nodes)], grp, RATE_DIMENSIONS) for (fault, nodes), grp in groups(rows).items()
             if any(r.scored for r in grp)]  # groups of unscored cells only: listed below, no rate
    table.append(_rate_row(["**all**", ""], rows, RATE_DIMENSIONS))
    legend = (f"A cell passes a dimension with "
              f"{', '.join(f'{d}={v}' for d, v in PASS_VALUE.items() if d != 'run_valid')}"
              "; `overall` = all four stop-condition dimensions.")
    apart = [r for r in rows if not r.scored]
    return [
        Section("Pass rates by fault type and node count",
                [f"Analyzer `{rep.primary.name}`. {legend}", Table(["FAULT_TYPE", "NODES", "overall", *RATE_DIMENSIONS],
                                                                  table)]),
        Section("Not scored (excluded from every rate)", [
            Table(["cell", "STATUS", "STATE", "reason"], [[r.cell.name, r.status, r.state, r.reason] for r in apart])
            if apart else "None."], level=3),
    ]


def side_by_side_sections(rep: Report) -> list[Section]:
    views = rep.log_views
    failed = {n: sum(1 for r in rows if r.scored and r.analyzer_error) for n, rows in views.items()}
    rates = [[n, f"`{v.fingerprint}`", str(failed[n]), *_rate_row([], v.rows, LOG_DIMENSIONS)]
             for n, v in ((v.name, v) for v in rep.views)]
    out = [Section("Analyzers side by side", [
        "Every log analyzer on the same scored cells; a cell the analyzer failed on (crash, garbage, timeout) "
        "counts as a miss. `overall` includes fr_rank_correct of the first FR analyzer, the same for all.",
        Table(["analyzer", "version", "failed on", "overall", *LOG_DIMENSIONS], rates)])]
    by_fault = []
    for (fault, nodes), _ in groups(rep.primary.rows).items():
        cells = [[r for r in rows if (r.cell.fault_type, r.cell.nodes) == (fault, nodes)] for rows in views.values()]
        if any(r.scored for grp in cells for r in grp):
            by_fault.append([fault, str(nodes), *(str(rate(grp, lambda r: r.passed)) for grp in cells)])
    out.append(Section("Overall pass rate per fault type", [Table(["FAULT_TYPE", "NODES", *views], by_fault)],
                       level=3))
    if len(views) > 1:
        pairs = paired(views, PAIRED_DIMENSIONS)
        table = [[a, b, *(f"{p.a_only} / {p.b_only}" for p in pairs if (p.a, p.b) == (a, b))]
                 for a, b in itertools.combinations(views, 2)]
        out.append(Section("Paired counts", [
            "On the cells both analyzers scored, per dimension: `A right, B wrong / B right, A wrong` "
            "(the cells where they agree are left out).",
            Table(["A", "B", *PAIRED_DIMENSIONS], table)], level=3))
        differ = disagreements(views, PAIRED_DIMENSIONS[1:])
        shown = differ[:LISTED_DISAGREEMENTS]
        blocks: list[Block] = [
            f"{len(differ)} cell dimension(s) where some analyzers are right and others wrong"
            + (f" (the first {len(shown)}; every cell in the HTML report)" if len(shown) < len(differ) else "") + ".",
            Table(["cell", "dimension", *views, "right"],
                  [[d.cell.name, d.dimension, *(d.grades[n] for n in views), ", ".join(d.right)] for d in shown],
                  graded=True) if shown else "None: the analyzers agree on every scored cell."]
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
        table.append([name[len(FR_PREFIX):], f"`{pick_fingerprint(rows, None)}`", str(failed),
                      str(rate(rows, dim_pass("fr_rank_correct"))), *(str(counts[g]) for g in grades)])
    out = [Section("Flight-recorder analyzers side by side", [
        "fr_rank_correct per FR analyzer on the same dumps (rank = exactly the injected rank); a dump set an "
        "analyzer could not read counts as false and is listed under analyzer failures.",
        Table(["analyzer", "version", "failed on", "rank exact", *grades], table)])]
    if len(rep.fr_views) > 1:
        views = {n[len(FR_PREFIX):]: rows for n, rows in rep.fr_views.items()}
        pairs = paired(views, ["fr_rank_correct"])
        differ = disagreements(views, ["fr_rank_correct"])
        index = _index(views)
        out.append(Section("FR paired counts and disagreements", [
            Table(["A", "B", "A right, B wrong", "B right, A wrong", "both right", "both wrong"],
                  [[p.a, p.b, str(p.a_only), str(p.b_only), str(p.both), str(p.neither)] for p in pairs]),
            Table(["cell", *(f"{n} (suspects)" for n in views), "right"],
                  [[d.cell.name, *(f"{d.grades[n]} {index[n][d.cell.name].fr_suspects}" for n in views),
                    ", ".join(d.right)] for d in differ[:LISTED_DISAGREEMENTS]])
            if differ else "The FR analyzers agree on every scored cell."], level=3))
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
        walls = [_seconds([r.analyzer_wall_s for r in everyone[n] if r.scored and r.cell.fault_type == fault
                           and r.analyzer_wall_s is not None]) for n in names]
        table.append([fault, str(len(own)), _seconds([r.fault_to_end_s for r in own if r.fault_to_end_s is not None]),
                      *walls])
    return Section("Time to verdict", [
        "Median / worst seconds per fault type: from the fault firing to the job's end (how long the failure "
        "took to surface), then each analyzer's wall time on the cell. Time to verdict = the two added "
        "(JUnit `time`).",
        Table(["FAULT_TYPE", "cells", "fault -> job end", *names], table) if table else "No scored cell."])


def _stderr_end(session: Path, row: ScoreRow) -> str:
    """The last line the failed analyzer printed on stderr (run.json keeps the tail)."""
    folder = (layout.fr_analyzer_dir(row.analyzer[len(FR_PREFIX):]) if row.is_fr
              else layout.analyzer_dir(row.analyzer))
    run = _json_or(_read(session / row.cell.name / folder / layout.RUN_JSON), {})
    lines = [line for line in str(run.get("stderr_tail") or "").splitlines() if line.strip()]
    return _code(lines[-1][-200:]) if lines else ""


def failures_section(rep: Report) -> Section:
    rows = [[r.analyzer, r.cell.name, r.analyzer_error, f"`{end}`" if (end := _stderr_end(rep.session_dir, r)) else "-"]
            for r in rep.rows if r.scored and r.analyzer_error]
    return Section("Analyzer failures", [
        "An analyzer that crashed, printed no verdict or ran out of time on a cell; its whole stderr tail is in "
        "the cell's `analysis/<analyzer>/run.json`.",
        Table(["analyzer", "cell", "error", "stderr, last line"], rows) if rows
        else "None: every analyzer gave a verdict on every scored cell."])


def patterns_section(rep: Report) -> Section:
    hits = [(p, cells) for p, cells in pattern_hits(rep.primary.rows) if cells]
    return Section("Failure-mode patterns", [
        f"Analyzer `{rep.primary.name}`.",
        Table(["pattern", "count", "cells", "meaning", "suggested fix target"],
              [[p.name, str(len(c)), _cells(c), p.meaning, p.fix] for p, c in hits]) if hits
        else "No failure pattern in the scored cells."])


def evidence_sections(rep: Report) -> list[Section]:
    failing = [r for r in rep.primary.rows if r.scored and not r.passed]
    out = [Section("Evidence for failing cells", [] if failing else ["No failing cell."])]
    for r in failing:
        ev = cell_evidence(rep.session_dir, r)
        out.append(Section(f"{r.cell.name}: {', '.join(f'{d}={r.values[d]}' for d in r.failing())}", [
            f"Verdict: restart `{r.logsage_restart or 'none'}`, primary {r.primary_ranks}, "
            f"secondary {r.secondary_ranks}, FR suspects {r.fr_suspects}. {r.notes}",
            f"Lines naming rank {r.cell.rank} or carrying the {r.cell.fault_type} signature "
            "(missed = not cited by the analyzer):",
            [f"L{e.number} [{'cited' if e.cited else 'MISSED'}; {e.why}] `{_code(e.text)}`" for e in ev.expected()]
            or ["none found in the stripped log"],
            "Lines the verdict rested on (logsage evidence):",
            [f"L{e.get('line')} [{e.get('kind', '?')}, rank {e.get('rank')}] `{_code(e.get('text', ''))}`"
             for e in ev.cited] or ["none (the analyzer cited no line)"],
        ], level=3))
    return out


def judge_section(rep: Report) -> list[Section]:
    agreement, failures = judge_agreement(rep.primary.rows)
    if not agreement and not failures:
        return []
    return [Section("LLM judge vs code", [
        Table(["dimension", "agreement", "Cohen's kappa"],
              [[a.dimension, f"{a.agree}/{a.total}", "n/a" if math.isnan(a.kappa) else f"{a.kappa:.2f}"]
               for a in agreement]),
        f"Judge failures (recorded in the cells, code scores used): {failures}"])]


def sections(rep: Report) -> list[Section]:
    return [summary_section(rep), *iteration_sections(rep), *rates_sections(rep), *side_by_side_sections(rep),
            *fr_sections(rep), time_section(rep), failures_section(rep), patterns_section(rep),
            *evidence_sections(rep), *judge_section(rep)]


def render_markdown(rep: Report) -> str:
    return "\n".join(line for s in sections(rep) for line in s.markdown()).rstrip() + "\n"


# ---- the per-cell drill-down (HTML) ---------------------------------------------------------------

LOG_FILES = (layout.LOGSAGE_JSON, layout.LOGSAGE_TEXT, layout.RAW_OUTPUT, layout.RUN_JSON, layout.ANALYZER_SCORE)
FR_FILES = (layout.FR_JSON, layout.FR_TEXT, layout.RAW_OUTPUT, layout.RUN_JSON, layout.ANALYZER_SCORE)
DUMP_LINKS = 16
# Logs above this size are not searched for missed lines in the drill-down (every cell's log would
# be read into memory); the analyzers' cited lines and the links are still shown.
DRILL_LOG_BYTES = 64 << 20


@dataclass
class AnalyzerDrill:
    """One analyzer's verdict on a cell, with the lines it cited and the ones it missed."""

    row: ScoreRow
    files: list[tuple[str, str]]  # (label, link relative to the report)
    cited: list[dict[str, Any]]
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
        return ", ".join(f"{a.row.analyzer} {'pass' if a.row.passed else 'fail'}" for a in self.analyzers
                         if a.row.scored) or self.reason


def _links(session: Path, folder: str, names: Iterable[str]) -> list[tuple[str, str]]:
    return [(name, f"{folder}/{name}") for name in names if (session / folder / name).is_file()]


def drilldown(rep: Report) -> list[CellDrill]:
    """Every cell of the pool: its run's files, and per analyzer its verdict, evidence and misses."""
    session = rep.session_dir
    everyone = {**rep.log_views, **rep.fr_views}
    index = {name: {r.cell.name: r for r in rows} for name, rows in everyone.items()}
    out = []
    for first in rep.primary.rows:
        cell = first.cell
        job = _json_or(_read(session / cell.name / layout.MANIFEST), {})
        files = [(label, f"{cell.name}/{path}") for label, path in (
            ("job.json", layout.MANIFEST), ("main log", job.get("main_log") or ""),
            ("stripped log", layout.STRIPPED_LOG)) if path and (session / cell.name / path).is_file()]
        dumps = sorted((session / cell.name / "checkpoints").glob("_dump_*"))
        files += [(d.name, f"{cell.name}/checkpoints/{d.name}") for d in dumps[:DUMP_LINKS]]
        if len(dumps) > DUMP_LINKS:
            files.append((f"{len(dumps) - DUMP_LINKS} more dumps", f"{cell.name}/checkpoints/"))
        log = session / cell.name / layout.STRIPPED_LOG
        readable = first.scored and log.is_file() and log.stat().st_size <= DRILL_LOG_BYTES
        lines = _read(log).splitlines() if readable else []
        drills = []
        for name in everyone:
            row = index[name].get(cell.name)
            if row is None:
                continue
            if row.is_fr:
                folder = f"{cell.name}/{layout.fr_analyzer_dir(name[len(FR_PREFIX):])}"
                drills.append(AnalyzerDrill(row, _links(session, folder, FR_FILES), [], []))
                continue
            folder = f"{cell.name}/{layout.analyzer_dir(name)}"
            ev = cell_evidence(session, row, lines) if row.scored else None
            drills.append(AnalyzerDrill(row, _links(session, folder, LOG_FILES), ev.cited if ev else [],
                                        [e for e in ev.expected() if not e.cited] if ev else []))
        out.append(CellDrill(cell, first.status, first.reason, files, drills))
    return out


# ---- heatmap, HTML, JUnit -----------------------------------------------------------------------


def write_heatmap(rows: list[ScoreRow], path: Path) -> None:
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
    fig, axes = plt.subplots(lines, columns, squeeze=False, layout="constrained",
                             figsize=(1.6 + columns * panel_w, 0.8 + lines * panel_h))
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="lightgrey")
    image = None
    for ax, (name, own) in zip(axes.flat, views.items()):
        grp = groups(own)
        values = [[rate(grp.get((f, n), []), lambda r: r.passed) for n in nodes] for f in faults]
        image = ax.imshow([[v.value for v in row] for row in values], cmap=cmap, vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(nodes)), [f"{n} node{'s' if n != 1 else ''}" for n in nodes], fontsize=8)
        ax.set_yticks(range(len(faults)), faults if ax in axes[:, 0] else [], fontsize=8)
        for i, row in enumerate(values):
            for j, v in enumerate(row):
                dark = v.total and not 0.2 < v.value < 0.85  # the colour map's ends are dark
                ax.text(j, i, f"{v.passed}/{v.total}" if v.total else "-", ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")
        what = "FR names the injected rank" if name.startswith(FR_PREFIX) else "all four dimensions"
        ax.set_title(f"{name}\n{what}", fontsize=9)
    for ax in list(axes.flat)[len(views):]:
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
        out.append(html.escape(text[at:m.start()]))
        out.append(f"<code>{html.escape(m.group(1))}</code>" if m.group(1) is not None
                   else f"<strong>{html.escape(m.group(2))}</strong>")
        at = m.end()
    out.append(html.escape(text[at:]))
    return "".join(out)


def render_html(rep: Report, heatmap: Path) -> str:
    import base64

    from jinja2 import Environment, PackageLoader, select_autoescape
    from markupsafe import Markup

    env = Environment(loader=PackageLoader("faultloop", "templates"), autoescape=select_autoescape(["html", "j2"]))
    env.filters["inline"] = lambda text: Markup(inline_html(str(text)))
    env.tests["table"] = lambda block: isinstance(block, Table)
    png = base64.b64encode(heatmap.read_bytes()).decode() if heatmap.exists() else ""
    return env.get_template("report.html.j2").render(
        title=TITLE.lstrip("# "), sections=sections(rep), heatmap_png=png, cells=drilldown(rep),
        grade_class=GRADE_CLASS, dimensions=LOG_DIMENSIONS,
    )


def junit_xml(rep: Report) -> str:
    """One suite per analyzer, one testcase per cell: failing dimensions as the failure, unscored
    cells skipped, time = time to verdict (fault to job end, plus the analyzer's wall time)."""
    root = ET.Element("testsuites", name="faultloop")
    totals = Counter()
    for name, rows in {**rep.log_views, **rep.fr_views}.items():
        failures = sum(1 for r in rows if r.failing())
        skipped = sum(1 for r in rows if not r.scored)
        seconds = sum(r.time_to_verdict_s or 0.0 for r in rows)
        suite = ET.SubElement(root, "testsuite", name=name, tests=str(len(rows)), failures=str(failures),
                              skipped=str(skipped), errors="0", time=f"{seconds:.3f}")
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="analyzer_version", value=pick_fingerprint(rows, None))
        for r in rows:
            case = ET.SubElement(suite, "testcase", classname=f"faultloop.{name}.{r.cell.fault_type}.n{r.cell.nodes}",
                                 name=r.cell.name, time=f"{r.time_to_verdict_s or 0.0:.3f}")
            if not r.scored:
                ET.SubElement(case, "skipped", message=f"{r.status}: {r.reason or r.notes}")
            elif r.failing():
                failure = ET.SubElement(case, "failure", type="attribution",
                                        message="; ".join(f"{d}={r.values[d]}" for d in r.failing()))
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
    p.add_argument("--scores", type=Path, required=True, help="scores.tsv from `faultloop score --gather`")
    p.add_argument("--session-dir", type=Path, required=True)
    p.add_argument("--analyzer-version", help="the primary analyzer's fingerprint (default: its cells' majority)")
    p.add_argument("--report", "--output", dest="report", type=Path, help=f"default <session>/{layout.REPORT_MD}")
    p.add_argument("--heatmap", type=Path, help=f"default <session>/{HEATMAP_PNG}")
    p.add_argument("--html", type=Path, help=f"default <session>/{REPORT_HTML}")
    p.add_argument("--junit", type=Path, help=f"default <session>/{JUNIT_XML}")
    p.add_argument("--no-history", action="store_true", help="compare with the history but do not record")
    p.add_argument("--failing-pool", type=Path, help="also write a pool TSV of the primary analyzer's failing cells")
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
    layout.write_atomic(args.junit or s / JUNIT_XML, junit_xml(rep))
    if args.failing_pool:
        cells = write_failing_pool(args.scores, args.failing_pool, include_unscored=args.include_unscored)
        print(f"{len(cells)} failing cells written to {args.failing_pool}")
    return 0
