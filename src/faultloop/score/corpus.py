"""`faultloop eval-logs DIR [DIR ...]`: how right a log analyzer is on labelled logs of real failures.

Each DIR, and every folder below it, holds `<case>.log` files and `labels_*.tsv` beside them
(columns: case, source, root_cause_rank, fault_class, expected_restart, justification; see
../shared/real_logs/README.md). A fault_class may list accepted alternatives, `a|b`, where the
excerpt supports both readings: either is right. The evaluation takes any analyzer, a callable
from a log path to its `LogVerdict` (the verdict.json contract), and reports, overall, by folder,
by labelled category and by launcher style: the category right, the restart decision right (cases
labelled RESTART or STOP), the culprit named as the sole primary rank (cases with a known
culprit), and how often a rank is named with high confidence where the culprit is unknown (an
overclaim). The command line is faultloop.cli.eval_logs.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultloop.contracts import LogVerdict
from faultloop.faults import ERRORS_NOT_FOUND, RESTART, STOP
from faultloop.faults import NONE as NONE_CATEGORY

# An analyzer: log path -> its verdict (the verdict.json contract).
Analyzer = Callable[[Path], LogVerdict]

# label fault_class -> the analyzer's fault_category (the corpus README's mapping)
CATEGORY_OF_CLASS: dict[str, str] = {
    "hang": "hang",
    "crash_signal": "crash",
    "python_exception": "exception",
    "gpu_error": "gpu_error",
    "oom": "oom",
    "nccl_network_error": "network",
    "external_termination": "external_signal",
    "other": "other",
    "none": "none",
}
RESTART_OF_LABEL: dict[str, str] = {"RESTART": RESTART, "STOP": STOP}
ALTERNATIVES = "|"  # fault_class "oom|crash_signal": either reading is right
ROOT_FOLDER = "."
LABEL_COLUMNS = ("case", "source", "root_cause_rank", "fault_class", "expected_restart", "justification")
HEAD_BYTES = 1 << 20  # enough of a log to tell its launcher style

# Launcher styles, told from the log's prefixes and wording; the first that matches wins.
LAUNCHER_STYLES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(rx, re.M))
    for name, rx in (
        ("slurm", r"^\s*\d+: |\bsrun: |slurmstepd|\bsubmitit\b|\bsbatch\b"),
        ("deepspeed", r"deepspeed[./]launcher|\[launch\.py:\d+:|exits with return code|^\s*\d{1,3}(?:\.\d{1,3}){3}: "),
        ("accelerate", r"accelerate/commands|/bin/accelerate\b|\baccelerate launch\b"),
        ("mpirun/horovod", r"\bmpirun\b|\bhorovodrun\b|horovod/runner|exit with status code"),
        ("torch.distributed.launch", r"torch\.distributed\.launch\b|torch/distributed/launch\.py"),
        (
            "torchrun/elastic",
            r"torch/distributed/elastic|\btorchrun\b|ChildFailedError|local_rank: \d|^\[default\d+\]:",
        ),
        ("torch [rankN] prefix", r"\[rank\d+\]:"),
    )
)
PLAIN = "plain"


class EvalError(ValueError):
    """A problem with the labelled directory, naming the file, row or field."""


@dataclass(frozen=True)
class Thresholds:
    """The acceptance bar (issue 20): rates at least (category, restart, culprit) or at most
    (high-confidence ranks where the culprit is unknown) over all cases, and a lower floor for each
    folder on its own (short excerpts from another collection must not hide behind the rest)."""

    category: float = 0.90
    restart: float = 0.90
    culprit: float = 0.85
    unknown_high: float = 0.10
    per_folder: float = 0.80


@dataclass(frozen=True)
class Case:
    """One labelled log."""

    name: str
    log: Path
    source: str
    culprit: int | None  # None: unknown
    fault_class: str  # one class, or accepted alternatives "a|b"
    expected_restart: str  # RESTART | STOP | unknown
    justification: str
    folder: str = ROOT_FOLDER  # the labels' folder, relative to the directory given

    @property
    def categories(self) -> tuple[str, ...]:
        """The analyzer categories accepted as right."""
        return tuple(CATEGORY_OF_CLASS[c] for c in self.fault_class.split(ALTERNATIVES))

    @property
    def category(self) -> str:
        return ALTERNATIVES.join(self.categories)


@dataclass
class Outcome:
    """How the analyzer did on one case; None where the label does not judge that dimension."""

    case: Case
    style: str
    got: LogVerdict | None  # None: the analyzer failed on this log (error says how)
    category_ok: bool
    restart_ok: bool | None
    culprit_ok: bool | None
    overclaim: bool | None  # a high-confidence primary rank where the culprit is unknown
    error: str = ""

    def problems(self) -> list[str]:
        got, out = self.got, []
        if got is None:
            return [f"analyzer error: {self.error}"]
        if not self.category_ok:
            out.append(f"category: expected {self.case.category}, got {got.fault_category}")
        if self.restart_ok is False:
            out.append(f"restart: expected {self.case.expected_restart}, got {got.restart}")
        if self.culprit_ok is False:
            out.append(
                f"culprit: expected [{self.case.culprit}], got {got.primary_ranks} ({got.confidence} confidence)"
            )
        if self.overclaim:
            out.append(f"culprit unknown, but named {got.primary_ranks} with high confidence")
        return out


@dataclass
class Tally:
    right: int = 0
    total: int = 0

    def add(self, ok: bool | None) -> None:
        if ok is not None:
            self.total += 1
            self.right += ok

    @property
    def rate(self) -> float | None:
        return self.right / self.total if self.total else None

    def to_json(self, counted: str = "right") -> dict[str, Any]:
        return {counted: self.right, "total": self.total, "rate": self.rate}

    def __str__(self) -> str:
        return f"{self.right}/{self.total} {self.rate:.0%}" if self.total else "-"


@dataclass
class Scores:
    """The four measures over a group of cases."""

    cases: int = 0
    category: Tally = field(default_factory=Tally)
    restart: Tally = field(default_factory=Tally)
    culprit: Tally = field(default_factory=Tally)
    unknown_high: Tally = field(default_factory=Tally)  # counts overclaims (lower is better)
    restart_recall: dict[str, Tally] = field(default_factory=dict)  # per labelled decision (RESTART, STOP)
    not_found: Tally = field(default_factory=Tally)  # failure logs answered ERRORS NOT FOUND (lower is better)
    # the reading that found each verdict (its `found_by`: a known row, generic, temporal, spatial):
    # how often each carried, and how often its category was right
    found_by: dict[str, Tally] = field(default_factory=dict)

    def add(self, o: Outcome) -> None:
        self.cases += 1
        self.category.add(o.category_ok)
        self.restart.add(o.restart_ok)
        self.culprit.add(o.culprit_ok)
        self.unknown_high.add(o.overclaim)
        if o.restart_ok is not None:
            self.restart_recall.setdefault(o.case.expected_restart, Tally()).add(o.restart_ok)
        if NONE_CATEGORY not in o.case.categories:
            self.not_found.add(o.got is not None and o.got.restart == ERRORS_NOT_FOUND)
        if o.got is not None and o.got.found_by:
            self.found_by.setdefault(o.got.found_by, Tally()).add(o.category_ok)

    def recall(self, label: str) -> Tally:
        return self.restart_recall.get(label, Tally())

    def to_json(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "category": self.category.to_json(),
            "restart": self.restart.to_json(),
            "culprit": self.culprit.to_json(),
            "unknown_culprit_high_confidence": self.unknown_high.to_json(counted="named_high"),
            "restart_recall": {label: self.recall(label).to_json() for label in RESTART_OF_LABEL},
            "errors_not_found_on_failure_logs": self.not_found.to_json(counted="not_found"),
            "found_by": {reading: tally.to_json(counted="category_right") for reading, tally in self.found_by.items()},
        }

    def readings(self) -> str:
        """How often each reading found the verdict, and its category was right: `row 340 (330
        right), generic 3 (2 right)`."""
        return ", ".join(f"{r} {t.total} ({t.right} right)" for r, t in sorted(self.found_by.items())) or "-"


@dataclass
class Evaluation:
    """Every case's outcome, and the scores they add up to."""

    outcomes: list[Outcome]

    def scores(self, key: Callable[[Outcome], str] | None = None) -> dict[str, Scores]:
        groups: dict[str, Scores] = {}
        for o in self.outcomes:
            groups.setdefault(key(o) if key else "overall", Scores()).add(o)
        return dict(sorted(groups.items())) if key else groups

    @property
    def overall(self) -> Scores:
        return self.scores()["overall"]

    def by_folder(self) -> dict[str, Scores]:
        return self.scores(lambda o: o.case.folder)

    def failures(self, bar: Thresholds) -> list[str]:
        """Which thresholds the scores miss (empty: all met): overall, then each folder's floor
        where the cases come from several folders."""
        s, out = self.overall, []
        for name, tally, floor in (
            ("category", s.category, bar.category),
            ("restart", s.restart, bar.restart),
            ("culprit", s.culprit, bar.culprit),
        ):
            if tally.rate is not None and tally.rate < floor:
                out.append(f"{name} right {tally} < {floor:.0%}")
        if s.unknown_high.rate is not None and s.unknown_high.rate > bar.unknown_high:
            out.append(f"high-confidence ranks on unknown culprits {s.unknown_high} > {bar.unknown_high:.0%}")
        folders = self.by_folder()
        for folder, fs in folders.items() if len(folders) > 1 else ():
            for name, tally in (("category", fs.category), ("restart", fs.restart), ("culprit", fs.culprit)):
                if tally.rate is not None and tally.rate < bar.per_folder:
                    out.append(f"{folder}: {name} right {tally} < {bar.per_folder:.0%}")
        return out

    def misses(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.problems()]

    def to_json(self, bar: Thresholds) -> dict[str, Any]:
        return {
            "cases": len(self.outcomes),
            "overall": self.overall.to_json(),
            "thresholds": {
                "category_min": bar.category,
                "restart_min": bar.restart,
                "culprit_min": bar.culprit,
                "unknown_culprit_high_confidence_max": bar.unknown_high,
                "per_folder_min": bar.per_folder,
            },
            "below_thresholds": self.failures(bar),
            "by_folder": {k: v.to_json() for k, v in self.by_folder().items()},
            "by_category": {k: v.to_json() for k, v in self.scores(lambda o: o.case.category).items()},
            "by_launcher": {k: v.to_json() for k, v in self.scores(lambda o: o.style).items()},
            "misses": [
                {
                    "case": o.case.name,
                    "folder": o.case.folder,
                    "launcher": o.style,
                    "problems": o.problems(),
                    "expected": {
                        "fault_category": o.case.category,
                        "restart": o.case.expected_restart,
                        "culprit": o.case.culprit,
                    },
                    "got": {
                        k: o.got.to_json().get(k) if o.got else None
                        for k in ("fault_category", "restart", "primary_ranks", "fault_type", "confidence")
                    },
                }
                for o in self.misses()
            ],
        }

    def to_text(self, bar: Thresholds, title: str) -> str:
        header = (
            f"{'':<26}{'cases':>6}  {'category':<13}{'restart':<13}{'culprit':<13}{'unknown culprit, high':<23}"
            f"{'RESTART recall':<15}{'STOP recall':<13}ERRORS NOT FOUND"
        )
        lines = [
            title,
            "",
            header,
            _row("overall", self.overall),
            f"{'threshold':<26}{'':>6}  {'>= ' + format(bar.category, '.0%'):<13}"
            f"{'>= ' + format(bar.restart, '.0%'):<13}{'>= ' + format(bar.culprit, '.0%'):<13}"
            f"<= {bar.unknown_high:.0%}",
            "",
            f"found by (the reading that found each verdict; its category right): {self.overall.readings()}",
        ]
        for heading, key in (
            ("by folder", lambda o: o.case.folder),
            ("by labelled category", lambda o: o.case.category),
            ("by launcher style", lambda o: o.style),
        ):
            lines += ["", heading] + [_row(name, s) for name, s in self.scores(key).items()]
        misses = self.misses()
        lines += ["", f"misses ({len(misses)})"]
        lines += [f"  {o.case.name:<8} [{o.style}] " + "; ".join(o.problems()) for o in misses]
        below = self.failures(bar)
        lines += ["", "below thresholds: " + "; ".join(below) if below else "all thresholds met"]
        return "\n".join(lines) + "\n"


def _row(name: str, s: Scores) -> str:
    return (
        f"{name:<26}{s.cases:>6}  {s.category!s:<13}{s.restart!s:<13}{s.culprit!s:<13}{s.unknown_high!s:<23}"
        f"{s.recall('RESTART')!s:<15}{s.recall('STOP')!s:<13}{s.not_found.right}"
    )


def load_cases(*directories: Path) -> list[Case]:
    """The labelled cases of the directories and every folder below them, checked: every row
    names an existing log beside its labels, known fault classes, a restart label and a rank or
    `unknown`; no case is labelled twice."""
    cases: list[Case] = []
    for directory in directories:
        if not directory.is_dir():
            raise EvalError(f"{directory}: not a directory")
        # the folder's own labels first, then its subfolders'
        label_files = sorted(directory.rglob("labels_*.tsv"), key=lambda p: (len(p.relative_to(directory).parts), p))
        if not label_files:
            raise EvalError(f"{directory}: no labels_*.tsv beside the logs")
        for path in label_files:
            folder = path.parent.relative_to(directory)
            cases += _cases_of(path, (directory.name / folder if len(directories) > 1 else folder).as_posix())
    names = [c.name for c in cases]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise EvalError(f"{', '.join(map(str, directories))}: case(s) labelled twice: {', '.join(dupes)}")
    return cases


def _cases_of(path: Path, folder: str) -> list[Case]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f, delimiter="\t")
        missing = [c for c in LABEL_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise EvalError(f"{path}: missing column(s) {', '.join(missing)}")
        return [_case(path, row_no, row, folder) for row_no, row in enumerate(reader, start=2)]


def _case(path: Path, row_no: int, row: dict[str, str], folder: str) -> Case:
    where = f"{path}, row {row_no} ({row.get('case')})"
    log = path.parent / f"{row['case']}.log"
    if not log.is_file():
        raise EvalError(f"{where}: no log file {log}")
    unknown = [c for c in row["fault_class"].split(ALTERNATIVES) if c not in CATEGORY_OF_CLASS]
    if unknown:
        raise EvalError(
            f"{where}: field fault_class: unknown {'|'.join(unknown)!r} (known: {', '.join(CATEGORY_OF_CLASS)})"
        )
    if row["expected_restart"] not in (*RESTART_OF_LABEL, "unknown"):
        raise EvalError(f"{where}: field expected_restart: {row['expected_restart']!r} is not RESTART, STOP or unknown")
    rank = row["root_cause_rank"].strip()
    if rank != "unknown" and not rank.isdigit():
        raise EvalError(f"{where}: field root_cause_rank: {rank!r} is not a rank or unknown")
    return Case(
        row["case"],
        log,
        row["source"],
        None if rank == "unknown" else int(rank),
        row["fault_class"],
        row["expected_restart"],
        row["justification"],
        folder,
    )


def launcher_style(log: Path) -> str:
    """How the log was launched, from its prefixes and wording (for the per-style breakdown)."""
    with open(log, "rb") as f:
        text = f.read(HEAD_BYTES).decode("utf-8", "replace")
    return next((name for name, rx in LAUNCHER_STYLES if rx.search(text)), PLAIN)


def judge(case: Case, got: LogVerdict | None, error: str = "") -> Outcome:
    """One case's outcome; a failed analyzer (no verdict) gets every dimension the label judges wrong."""
    expected_restart = RESTART_OF_LABEL.get(case.expected_restart)
    if got is None:
        return Outcome(
            case=case,
            style=launcher_style(case.log),
            got=None,
            category_ok=False,
            restart_ok=None if expected_restart is None else False,
            culprit_ok=None if case.culprit is None else False,
            overclaim=None if case.culprit is not None else False,
            error=error,
        )
    primary = list(got.primary_ranks)
    return Outcome(
        case=case,
        style=launcher_style(case.log),
        got=got,
        category_ok=got.fault_category in case.categories,
        restart_ok=None if expected_restart is None else got.restart == expected_restart,
        culprit_ok=None if case.culprit is None else primary == [case.culprit],
        overclaim=(bool(primary) and got.confidence == "high") if case.culprit is None else None,
    )


def evaluate(cases: Iterable[Case], analyze: Analyzer) -> Evaluation:
    """Run the analyzer on every case and judge it. An analyzer that fails on a log gets that
    case wrong (and the error is listed), the others still run."""
    outcomes = []
    for case in cases:
        try:
            outcomes.append(judge(case, analyze(case.log)))
        except Exception as exc:
            outcomes.append(judge(case, None, f"{type(exc).__name__}: {exc}"))
    return Evaluation(outcomes)


__all__ = [
    "Analyzer",
    "Case",
    "EvalError",
    "Evaluation",
    "Outcome",
    "Thresholds",
    "evaluate",
    "judge",
    "launcher_style",
    "load_cases",
]
