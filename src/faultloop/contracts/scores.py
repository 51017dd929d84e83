"""score.json, scores.tsv and scores.jsonl: `ScoreRecord`, one analyzer's grades on one cell, with
the evidence and the files the report shows of it. One reader, one writer and one validator each."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faultloop.contracts.grades import DIMENSIONS, Grade, Reads
from faultloop.contracts.verdicts import RecordError
from faultloop.core import atomic
from faultloop.core.cell import Cell
from faultloop.faults import expected_restart

FR_PREFIX = "fr:"  # ANALYZER of a flight-recorder analyzer's rows
# Cell status in scores.tsv. Only SCORED cells enter pass rates.
SCORED, INVALID, INFRA_FAILURE, NOT_RUN = "scored", "invalid", "infra_failure", "not_run"


@dataclass(frozen=True)
class FileLink:
    """A file of the cell a person may open from the report (path relative to the session)."""

    label: str
    path: str


@dataclass(frozen=True)
class EvidenceLine:
    """A line of the stripped log worth a look, and whether the analyzer cited it."""

    number: int
    text: str
    why: str
    cited: bool


@dataclass(frozen=True)
class CitedLine:
    """A line the analyzer's verdict rested on (its evidence list)."""

    line: int | None
    kind: str
    rank: int | None
    text: str


@dataclass(frozen=True)
class CellEvidence:
    """What an analyzer cited on a cell, and the lines it should have looked at."""

    cited: list[CitedLine] = field(default_factory=list)
    expected: list[EvidenceLine] = field(default_factory=list)

    @property
    def missed(self) -> list[EvidenceLine]:
        return [e for e in self.expected if not e.cited]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CellEvidence:
        return cls(
            [CitedLine(**c) for c in data.get("cited", [])], [EvidenceLine(**e) for e in data.get("expected", [])]
        )


@dataclass(frozen=True)
class LifeStep:
    """One attempt of a job's life as an analyzer's record grades it: what happened (from the
    run's job.json), the decision the oracle expects there and the one the analyzer gave (as the
    policy scorer reads a verdict: `restart`, `restart without <nodes>`, `stop`, `none`), their
    grades (N/A where the attempt is not graded: it completed, or failed without its fault), and
    what the decision cost along the analyzer's own path, in node-minutes (score.life)."""

    attempt: int
    state: str
    happened: str
    expected: str
    decision: str
    policy: Grade = Grade.NA
    drain: Grade = Grade.NA
    cost_node_min: float | None = 0.0
    cost_kind: str = ""  # "restart that failed again" | "stop not needed" | ""
    estimated: bool = False  # the cost is an estimate: the attempt it stands for never ran

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LifeStep:
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(
            **{**values, "policy": Grade(values.get("policy", Grade.NA)), "drain": Grade(values.get("drain", Grade.NA))}
        )


# Field and column names a release renamed, old -> new: stored scores keep being read (until the next release).
RENAMED = {"logsage_restart": "analyzer_restart"}


@dataclass
class ScoreRecord:
    """One analyzer's grades on one cell. A cell's score.json holds its records, scores.tsv one
    row per record (typed columns), scores.jsonl every record whole (what the report reads)."""

    cell: Cell
    analyzer: str  # a log analyzer's name, or fr:<name> for a flight-recorder analyzer
    status: str = NOT_RUN  # scored | invalid | infra_failure | not_run
    # what ran: the run's workload and launcher (job.json), else the cell's own ("": the session's)
    workload: str = ""
    launcher: str = ""
    job_id: str = ""
    state: str = ""
    grades: dict[str, Grade] = field(default_factory=dict)  # dimension -> grade; N/A where absent
    judge_notes: str = ""
    expected_restart: str = ""
    analyzer_restart: str = ""  # the restart decision of the analyzer this record grades
    primary_ranks: list[int] = field(default_factory=list)
    secondary_ranks: list[int] = field(default_factory=list)
    fr_suspects: list[int] = field(default_factory=list)
    analyzer_version: str = ""
    gpus_per_node: int = 4
    segment_size: int = 32
    invalid_reason: str | None = None
    scored_by: str = "code"
    llm_judge: dict[str, Any] | None = None
    analyzer_error: str = ""  # why the analyzer gave no verdict for this cell
    analyzer_stderr_end: str = ""  # the last line it printed on stderr then
    fault_to_end_s: float | None = None  # how long the failure took to end the job
    analyzer_wall_s: float | None = None  # how long the analyzer took on the cell
    scored_from: str = ""  # digest of what the score was computed from (reuse key)
    evidence: CellEvidence | None = None  # log analyzers on valid runs: cited and expected lines
    files: list[FileLink] = field(default_factory=list)  # the analyzer's own files on the cell
    cell_files: list[FileLink] = field(default_factory=list)  # the run's: manifest, logs, dumps
    restart_policy: str = ""  # the analyzer's own restart policy, where its verdict names one (not in scores.tsv)
    found_by: str = ""  # the reading that found its verdict, where it says (LogVerdict.found_by; not in scores.tsv)
    # A job's life: this run's decision for the next attempt as the policy scorer reads the verdict
    # (score.life.read_decision; "" where not read), and on a cell's record every attempt's grades
    # (`life`) and the policy's cost against the oracle's in node-minutes (None: not measured)
    decision: str = ""
    life: list[LifeStep] = field(default_factory=list)
    policy_cost_node_min: float | None = None
    policy_cost_estimated: bool = False

    def grade(self, dimension: str) -> Grade:
        return self.grades.get(dimension, Grade.NA)

    @property
    def values(self) -> dict[str, Grade]:
        """Every dimension's grade, in the table's order."""
        return {d: self.grade(d) for d in DIMENSIONS.names()}

    @property
    def notes(self) -> str:
        return self.judge_notes

    @property
    def reason(self) -> str:
        return self.invalid_reason or ""

    @property
    def scored(self) -> bool:
        return self.status == SCORED

    @property
    def is_fr(self) -> bool:
        return self.analyzer.startswith(FR_PREFIX)

    def failing(self, dims: Iterable[str] | None = None) -> list[str]:
        """The dimensions this scored cell misses (empty for a pass or an unscored cell); by
        default the stop condition's, or for an FR analyzer the ones it grades."""
        if not self.scored:
            return []
        if dims is None:
            dims = DIMENSIONS.names(reads=(Reads.FR,)) if self.is_fr else DIMENSIONS.names(stop=True)
        return [d for d in dims if self.grade(d) != DIMENSIONS[d].passing]

    @property
    def passed(self) -> bool:
        return self.scored and not self.failing()

    @property
    def time_to_verdict_s(self) -> float | None:
        """From the fault firing to the analyzer's answer: the job's end, then the analysis."""
        if self.fault_to_end_s is None or self.analyzer_wall_s is None:
            return None
        return self.fault_to_end_s + self.analyzer_wall_s

    def to_json(self) -> dict[str, Any]:
        """The record whole; each dimension's grade under the dimension's name."""
        data: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if key == "grades":
                data.update(self.values)
            else:
                data[key] = value
        data["cell"] = self.cell.name
        data["fault_type"], data["rank"], data["iter"], data["nodes"] = (
            self.cell.fault_type,
            self.cell.rank,
            self.cell.iter,
            self.cell.nodes,
        )
        data["evidence"] = self.evidence.to_json() if self.evidence else None
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScoreRecord:
        """Check and build a record of score.json or scores.jsonl; RecordError says what is wrong."""
        try:
            values = {RENAMED.get(k, k): v for k, v in data.items() if RENAMED.get(k, k) in cls.__dataclass_fields__}
            values["cell"] = Cell.from_name(str(data["cell"]))
            values["grades"] = {d: Grade(data[d]) for d in DIMENSIONS.names() if d in data}
            values["evidence"] = CellEvidence.from_json(data["evidence"]) if data.get("evidence") else None
            values["files"] = [FileLink(**f) for f in data.get("files") or []]
            values["cell_files"] = [FileLink(**f) for f in data.get("cell_files") or []]
            values["life"] = [LifeStep.from_json(step) for step in data.get("life") or []]
            return cls(**values)
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordError(f"score record: {type(exc).__name__}: {exc}") from None

    def to_row(self) -> dict[str, str]:
        """The scores.tsv row: one value per column, rank lists as space-separated numbers."""
        data = self.to_json()
        row = dict(
            CELL=self.cell.name,
            ANALYZER=self.analyzer,
            FAULT_TYPE=self.cell.fault_type,
            NODES=str(self.cell.nodes),
            RANK=str(self.cell.rank),
            ITER=str(self.cell.iter),
            WORKLOAD=self.workload or "-",
            LAUNCHER=self.launcher or "-",
            JOB_ID=self.job_id or "-",
            STATE=self.state or "-",
            STATUS=self.status,
        )
        data["decisions"] = "; ".join(step.decision for step in self.life)
        data["expected_decisions"] = "; ".join(step.expected for step in self.life)
        for column in (*DIMENSIONS.names(), *TSV_DETAILS):
            value = data[column]
            row[column] = " ".join(map(str, value)) if isinstance(value, list) else "" if value is None else str(value)
        row["reason"] = self.reason
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, str]) -> ScoreRecord:
        """A scores.tsv row (no evidence, no judge record: those live in scores.jsonl)."""

        def ranks(text: str | None) -> list[int]:
            return [int(x) for x in (text or "").replace(",", " ").strip("[] ").split() if x.lstrip("-").isdigit()]

        def seconds(text: str | None) -> float | None:
            try:
                return float(text) if text else None
            except ValueError:
                return None

        def number(text: str | None, default: int) -> int:
            return int(text) if text and text.isdigit() else default

        row = {RENAMED.get(k, k): v for k, v in row.items()}
        try:
            named = Cell.from_name(row["CELL"]) if row.get("CELL") else Cell("", 0, 0, 0)
            return cls(
                cell=Cell(
                    row["FAULT_TYPE"],
                    int(row["RANK"]),
                    int(row["ITER"]),
                    int(row["NODES"]),
                    named.attempts,
                    named.workload,
                    named.launcher,
                ),
                analyzer=row.get("ANALYZER") or "builtin",
                status=row["STATUS"],
                workload=_named(row.get("WORKLOAD")),
                launcher=_named(row.get("LAUNCHER")),
                job_id=row.get("JOB_ID", ""),
                state=row.get("STATE", ""),
                grades={d: Grade(row.get(d) or Grade.NA) for d in DIMENSIONS.names()},
                judge_notes=row.get("judge_notes", ""),
                expected_restart=row.get("expected_restart", ""),
                analyzer_restart=row.get("analyzer_restart", ""),
                primary_ranks=ranks(row.get("primary_ranks")),
                secondary_ranks=ranks(row.get("secondary_ranks")),
                fr_suspects=ranks(row.get("fr_suspects")),
                analyzer_version=row.get("analyzer_version", ""),
                gpus_per_node=number(row.get("gpus_per_node"), 4),
                segment_size=number(row.get("segment_size"), 32),
                invalid_reason=row.get("reason") or None,
                scored_by=row.get("scored_by") or "code",
                analyzer_error=row.get("analyzer_error", ""),
                analyzer_stderr_end=row.get("analyzer_stderr_end", ""),
                fault_to_end_s=seconds(row.get("fault_to_end_s")),
                analyzer_wall_s=seconds(row.get("analyzer_wall_s")),
                policy_cost_node_min=seconds(row.get("policy_cost_node_min")),
                life=life_steps(row.get("decisions"), row.get("expected_decisions")),
            )
        except (KeyError, ValueError) as exc:
            raise RecordError(f"scores row: {type(exc).__name__}: {exc}") from None

    @classmethod
    def unscored(cls, cell: Cell, analyzer: str, status: str, state: str, reason: str, job_id: str = "") -> ScoreRecord:
        return cls(
            cell,
            analyzer,
            status=status,
            workload=cell.workload,
            launcher=cell.launcher,
            job_id=job_id,
            state=state,
            judge_notes=reason,
            invalid_reason=reason,
            expected_restart=expected_restart(cell.fault_type),
        )


def _named(text: str | None) -> str:
    """A WORKLOAD or LAUNCHER column: `-` where none is known."""
    return "" if text in (None, "-") else str(text)


def life_steps(decisions: str | None, expected: str | None) -> list[LifeStep]:
    """A scores.tsv row's decisions and expected decisions per attempt (`; `-separated), as steps
    without the rest (scores.jsonl has them whole)."""
    said = [d.strip() for d in (decisions or "").split(";") if d.strip()]
    wanted = [d.strip() for d in (expected or "").split(";") if d.strip()]
    return [LifeStep(k, "", "", e, d) for k, (d, e) in enumerate(zip(said, wanted, strict=False), start=1)]


# scores.tsv: the cell and its status, every dimension, then these, then the reason. `decisions`
# and `expected_decisions` are a life's per attempt, `; `-separated.
TSV_CELL = (
    "CELL", "ANALYZER", "FAULT_TYPE", "NODES", "RANK", "ITER", "WORKLOAD", "LAUNCHER", "JOB_ID", "STATE", "STATUS",
)  # fmt: skip
TSV_DETAILS = (
    "judge_notes", "expected_restart", "analyzer_restart", "primary_ranks", "secondary_ranks", "fr_suspects",
    "analyzer_version", "analyzer_error", "analyzer_stderr_end", "fault_to_end_s", "analyzer_wall_s",
    "gpus_per_node", "segment_size", "scored_by", "decisions", "expected_decisions", "policy_cost_node_min",
)  # fmt: skip


def tsv_columns() -> tuple[str, ...]:
    return (*TSV_CELL, *DIMENSIONS.names(), *TSV_DETAILS, "reason")


def write_cell_scores(scores: list[ScoreRecord], cell: str, path: Path) -> None:
    """A cell's score.json: every analyzer's score, log analyzers first."""
    atomic.write_json_atomic(path, {"cell": cell, "scores": [s.to_json() for s in scores]})


def read_cell_scores(path: Path) -> dict[str, ScoreRecord]:
    """A cell's score.json by analyzer; RecordError when it is absent or unusable."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: cannot read: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("scores"), list):
        raise RecordError(f"{path}: no list of scores")
    return {s.analyzer: s for s in (ScoreRecord.from_json(d) for d in data["scores"] if isinstance(d, dict))}


def score_tsv_text(records: Iterable[ScoreRecord]) -> str:
    """scores.tsv's text: tab-separated, one header line, tabs and newlines in text flattened."""
    columns = tsv_columns()
    rows = [{k: " ".join(str(v).split()) for k, v in r.to_row().items()} for r in records]
    return "\n".join(["\t".join(columns)] + ["\t".join(row[c] for c in columns) for row in rows]) + "\n"


def read_score_tsv(path: Path) -> list[ScoreRecord]:
    with open(path, newline="") as handle:
        return [ScoreRecord.from_row(row) for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)]


def write_score_tables(records: list[ScoreRecord], tsv: Path, jsonl: Path) -> None:
    """scores.tsv and scores.jsonl (every record whole)."""
    atomic.write_atomic(tsv, score_tsv_text(records))
    atomic.write_atomic(jsonl, "".join(json.dumps(r.to_json(), separators=(",", ":")) + "\n" for r in records))


def read_score_records(path: Path) -> list[ScoreRecord]:
    with open(path) as handle:
        return [ScoreRecord.from_json(json.loads(line)) for line in handle if line.strip()]
