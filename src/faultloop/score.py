"""Per-cell scoring: every dimension computed in code, an LLM judge only as an opt-in second opinion.

Upstream asks an LLM to grade things code can check exactly (is rank 3 the only primary rank?),
so its grades drift between runs. Here each dimension is a small pure function of the injected
truth and the analyzers' JSON; the LLM judge (``judge.mode: llm|both``) gets what upstream's judge
gets and its answer is recorded beside the code's, never trusted over a crash-free run.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faultloop import combined, layout
from faultloop import llm as llm_client
from faultloop.analyzers import OK, RunRecord, file_digest, read_index
from faultloop.evidence import CellEvidence, cell_evidence
from faultloop.faults import FAULTS, expected_restart, strip_markers
from faultloop.llm import LLMError, LLMSettings, chat_json
from faultloop.manifest import Manifest, ManifestError
from faultloop.pool import Cell, write_pool_file

NA = "N/A"
FR_PREFIX = "fr:"  # ANALYZER of a flight-recorder analyzer's rows
JUDGE_MODES = ("code", "llm", "both")
# Dimensions the LLM judge answers (upstream's set); the code also grades category and type.
JUDGE_DIMENSIONS = ("restart_correct", "rank_primary", "rank_any", "fault_described", "fr_rank_correct")
DIMENSIONS = (
    "run_valid",
    "restart_correct",
    "rank_primary",
    "rank_any",
    "fault_category_correct",
    "fault_type_correct",
    "fault_described",
    "fr_rank_correct",
)
# The value that counts as a pass; anything else (partial, node, segment, ...) is a miss.
PASS_VALUE = {d: "true" for d in DIMENSIONS} | {"fr_rank_correct": "rank"}
# Upstream's stop condition: every cell passes these four.
STOP_DIMENSIONS = ("restart_correct", "rank_primary", "fault_described", "fr_rank_correct")
LOG_TAIL_LINES = 400
# A record's links to the analyzer's own files (the report's per-cell drill-down)
LOG_FILES = (layout.LOGSAGE_JSON, layout.LOGSAGE_TEXT, layout.RAW_OUTPUT, layout.RUN_JSON, layout.ANALYZER_SCORE)
FR_FILES = (layout.FR_JSON, layout.FR_TEXT, layout.RAW_OUTPUT, layout.RUN_JSON, layout.ANALYZER_SCORE)
DUMP_LINKS = 16

# Cell status in scores.tsv. Only SCORED cells enter pass rates.
SCORED, INVALID, INFRA_FAILURE, NOT_RUN = "scored", "invalid", "infra_failure", "not_run"


@dataclass(frozen=True)
class Truth:
    """What was injected, plus the cluster shape needed to map a rank to its node and segment."""

    cell: Cell
    gpus_per_node: int = 4
    segment_size: int = 32

    @property
    def node(self) -> int:
        return self.cell.rank // self.gpus_per_node

    @property
    def segment(self) -> range:
        start = (self.cell.rank // self.segment_size) * self.segment_size
        return range(start, start + self.segment_size)


@dataclass(frozen=True)
class FileLink:
    """A file of the cell a person may open from the report (path relative to the session)."""

    label: str
    path: str


@dataclass
class ScoreRecord:
    """One analyzer's grades on one cell. A cell's score.json holds its records, scores.tsv one
    row per record (typed columns), scores.jsonl every record whole (what the report reads)."""

    cell: Cell
    analyzer: str  # a log analyzer's name, or fr:<name> for a flight-recorder analyzer
    status: str = NOT_RUN  # scored | invalid | infra_failure | not_run
    job_id: str = ""
    state: str = ""
    run_valid: str = NA
    restart_correct: str = NA
    rank_primary: str = NA
    rank_any: str = NA
    fault_category_correct: str = NA
    fault_type_correct: str = NA
    fault_described: str = NA
    fr_rank_correct: str = NA
    judge_notes: str = ""
    expected_restart: str = ""
    logsage_restart: str = ""
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
    restart_policy: str = ""  # the analyzer's own restart policy, where its verdict names one

    @property
    def values(self) -> dict[str, str]:
        return {d: getattr(self, d) for d in DIMENSIONS}

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
        """The dimensions this scored cell misses (empty for a pass or an unscored cell)."""
        if not self.scored:
            return []
        dims = dims if dims is not None else ("fr_rank_correct",) if self.is_fr else STOP_DIMENSIONS
        return [d for d in dims if getattr(self, d) != PASS_VALUE[d]]

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
        data = asdict(self)
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
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        values["cell"] = Cell.from_name(str(data["cell"]))
        values["evidence"] = CellEvidence.from_json(data["evidence"]) if data.get("evidence") else None
        values["files"] = [FileLink(**f) for f in data.get("files") or []]
        values["cell_files"] = [FileLink(**f) for f in data.get("cell_files") or []]
        return cls(**values)

    def to_row(self) -> dict[str, str]:
        """The scores.tsv row: one value per column, rank lists as space-separated numbers."""
        data = self.to_json()
        row = {c: "" for c in TSV_COLUMNS}
        row.update(
            CELL=self.cell.name,
            ANALYZER=self.analyzer,
            FAULT_TYPE=self.cell.fault_type,
            NODES=str(self.cell.nodes),
            RANK=str(self.cell.rank),
            ITER=str(self.cell.iter),
            JOB_ID=self.job_id or "-",
            STATE=self.state or "-",
            STATUS=self.status,
            reason=self.reason,
        )
        for column in TSV_COLUMNS[TSV_COLUMNS.index("run_valid") : TSV_COLUMNS.index("reason")]:
            value = data[column]
            row[column] = " ".join(map(str, value)) if isinstance(value, list) else "" if value is None else str(value)
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

        record = cls(
            cell=Cell(row["FAULT_TYPE"], int(row["RANK"]), int(row["ITER"]), int(row["NODES"])),
            analyzer=row.get("ANALYZER") or "builtin",
            status=row["STATUS"],
            job_id=row.get("JOB_ID", ""),
            state=row.get("STATE", ""),
            judge_notes=row.get("judge_notes", ""),
            expected_restart=row.get("expected_restart", ""),
            logsage_restart=row.get("logsage_restart", ""),
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
        )
        for d in DIMENSIONS:
            setattr(record, d, row.get(d) or NA)
        return record

    @classmethod
    def unscored(cls, cell: Cell, analyzer: str, status: str, state: str, reason: str, job_id: str = "") -> ScoreRecord:
        return cls(
            cell,
            analyzer,
            status=status,
            job_id=job_id,
            state=state,
            judge_notes=reason,
            invalid_reason=reason,
            expected_restart=expected_restart(cell.fault_type),
        )


def _tf(value: bool) -> str:
    return "true" if value else "false"


def _ranks(values: Iterable[Any] | None) -> list[int]:
    """Rank lists as ints; analyzers may write "3" or 3."""
    out: list[int] = []
    for v in values or []:
        try:
            out.append(int(v))
        except (TypeError, ValueError):
            continue
    return out


def grade_rank_primary(rank: int, primaries: list[int]) -> str:
    """true: the injected rank is the only primary; partial: one of several; false: not primary."""
    if rank not in primaries:
        return "false"
    return "true" if set(primaries) == {rank} else "partial"


def grade_fault_described(type_correct: bool, category_correct: bool) -> str:
    return "true" if type_correct else "partial" if category_correct else "false"


def grade_fr(truth: Truth, fr: Mapping[str, Any] | None) -> str:
    """rank / node / segment: the tightest block holding every FR suspect and the injected rank."""
    if fr is None or fr.get("no_dumps"):
        return "no_dumps"
    suspects = set(_ranks(fr.get("suspect_ranks")))
    rank = truth.cell.rank
    if not suspects:
        return "false"
    if suspects == {rank}:
        return "rank"
    if all(s // truth.gpus_per_node == truth.node for s in suspects):
        return "node"
    if all(s in truth.segment for s in suspects):
        return "segment"
    return "false"


def _notes(truth: Truth, s: ScoreRecord, logsage: Mapping[str, Any], problems: list[str]) -> str:
    """One sentence naming the gaps in order of importance, or confirming success."""
    fault = FAULTS.get(truth.cell.fault_type)
    rank = truth.cell.rank
    gaps: list[str] = list(problems)
    if s.restart_correct == "false":
        gaps.append(f"restart {s.logsage_restart or 'missing'} but expected {s.expected_restart}")
    if s.rank_primary == "partial":
        gaps.append(f"rank {rank} is one of {len(s.primary_ranks)} primary ranks {s.primary_ranks}")
    elif s.rank_any == "true" and s.rank_primary == "false":
        gaps.append(f"rank {rank} named only as secondary (primary {s.primary_ranks})")
    elif s.rank_any == "false":
        gaps.append(f"rank {rank} not named at all (primary {s.primary_ranks})")
    if s.fault_described != "true" and fault is not None:
        said = f"{logsage.get('fault_category') or 'nothing'}/{logsage.get('fault_type') or 'no type'}"
        gaps.append(f"described as {said}, injected {fault.category}/{fault.name}")
    if s.fr_rank_correct == "no_dumps":
        gaps.append("no FR dumps")
    elif s.fr_rank_correct != "rank" and "no fr.json" not in problems:
        gaps.append(f"FR {s.fr_rank_correct} (suspects {s.fr_suspects})")
    if not gaps:
        return "Correct on all dimensions."
    sentence = "; ".join(gaps)
    return sentence[0].upper() + sentence[1:] + "."


def _base(truth: Truth, job: Manifest | None) -> ScoreRecord:
    """The cell's facts, run validity, and N/A everywhere until a verdict is graded."""
    cell = truth.cell
    base = ScoreRecord(
        cell,
        "",
        status=INVALID,
        job_id=job.job_id if job else "",
        state=job.state if job else "",
        run_valid="false",
        expected_restart=expected_restart(cell.fault_type),
        gpus_per_node=truth.gpus_per_node,
        segment_size=truth.segment_size,
        fault_to_end_s=round(job.seconds_to_end, 3) if job and job.seconds_to_end is not None else None,
    )
    if job is None:
        base.invalid_reason = "no job.json (the job never ran)"
    elif not job.run_valid:
        base.invalid_reason = job.invalid_reason or "the fault never fired"
    if base.invalid_reason is not None:
        base.judge_notes = f"run_invalid: {base.invalid_reason}"
    else:
        base.run_valid, base.status = "true", SCORED
    return base


def score_cell(
    truth: Truth,
    job: Manifest | None,
    logsage: Mapping[str, Any] | None,
    fr: Mapping[str, Any] | None,
    *,
    failure: str | None = None,
) -> ScoreRecord:
    """Grade one log analyzer's verdict on a cell in code from run_job's manifest, the verdict and
    the primary FR analyzer's JSON (any may be absent; failure: why the analyzer gave none)."""
    cell = truth.cell
    base = _base(truth, job)
    base.analyzer_version = str((logsage or {}).get("analyzer_version") or "")
    if base.run_valid != "true":
        return base
    problems: list[str] = []
    if failure:
        base.analyzer_error = failure
        problems.append(f"analyzer failed: {failure}")
    elif logsage is None:
        problems.append("no logsage.json")
    if fr is None:
        problems.append("no fr.json")
    ls = logsage or {}
    fault = FAULTS.get(cell.fault_type)
    base.logsage_restart = str(ls.get("restart") or "")
    base.primary_ranks = _ranks(ls.get("primary_ranks"))
    base.secondary_ranks = _ranks(ls.get("secondary_ranks"))
    base.fr_suspects = sorted(set(_ranks((fr or {}).get("suspect_ranks"))))
    base.restart_correct = _tf(base.logsage_restart == base.expected_restart)
    if isinstance(policy := ls.get("policy"), Mapping):  # e.g. NVRx's retry budget (faultloop.nvrx)
        named = " ".join(str(policy.get(k) or "") for k in ("policy_version", "rule")).strip()
        base.restart_policy = f"{named} ({policy.get('decision_basis') or 'no basis'})"
    base.rank_primary = grade_rank_primary(cell.rank, base.primary_ranks)
    base.rank_any = _tf(cell.rank in base.primary_ranks or cell.rank in base.secondary_ranks)
    category_ok = fault is not None and ls.get("fault_category") == fault.category
    type_ok = fault is not None and ls.get("fault_type") == fault.name
    base.fault_category_correct = _tf(category_ok)
    base.fault_type_correct = _tf(type_ok)
    base.fault_described = grade_fault_described(type_ok, category_ok)
    base.fr_rank_correct = grade_fr(truth, fr) if fr is not None else "false"
    base.judge_notes = _notes(truth, base, ls, problems)
    return base


def score_fr(
    truth: Truth, job: Manifest | None, fr: Mapping[str, Any] | None, *, failure: str | None = None
) -> ScoreRecord:
    """Grade one flight-recorder analyzer's verdict: only fr_rank_correct applies."""
    base = _base(truth, job)
    if base.run_valid != "true":
        return base
    base.fr_suspects = sorted(set(_ranks((fr or {}).get("suspect_ranks"))))
    base.fr_rank_correct = grade_fr(truth, fr) if fr is not None else "false"
    if failure:
        base.analyzer_error = failure
        base.judge_notes = f"FR analyzer failed: {failure}."
    elif base.fr_rank_correct == "rank":
        base.judge_notes = "FR names exactly the injected rank."
    else:
        base.judge_notes = (
            f"FR {base.fr_rank_correct} (suspects {base.fr_suspects})."
            if base.fr_rank_correct != "no_dumps"
            else "No FR dumps."
        )
    return base


# ---- LLM judge -------------------------------------------------------------------------------

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "restart_correct": {"type": "string", "enum": ["true", "false", "N/A"]},
        "rank_primary": {"type": "string", "enum": ["true", "false", "partial"]},
        "rank_any": {"type": "string", "enum": ["true", "false"]},
        "fault_described": {"type": "string", "enum": ["true", "false", "partial"]},
        "fr_rank_correct": {"type": "string", "enum": ["rank", "node", "segment", "false", "no_dumps"]},
        "notes": {"type": "string"},
    },
    "required": [*JUDGE_DIMENSIONS, "notes"],
    "additionalProperties": False,
}

JUDGE_SYSTEM = (
    "You grade a fault-attribution tool against the injected ground truth of a distributed "
    "training job. Answer only with a JSON object in the given schema; every value is a string."
)


@dataclass(frozen=True)
class JudgeInputs:
    """The texts upstream's judge reads: the stripped log tail and the analyzers' text output."""

    log_tail: list[str]
    logsage_text: str
    fr_text: str


def judge_prompt(truth: Truth, inputs: JudgeInputs) -> str:
    """Upstream's prompt sections: truth, expected restart, log tail, analyzer output, FR, rules."""
    cell = truth.cell
    fault = FAULTS.get(cell.fault_type)
    seg = truth.segment
    world = cell.nodes * truth.gpus_per_node
    rationale = fault.rationale if fault else "unknown fault type"
    log = "\n".join(line.rstrip("\n") for line in inputs.log_tail) or "(empty log)"
    return f"""## Ground truth
fault_type: {cell.fault_type}
injected rank: {cell.rank}
node of the injected rank: {truth.node} (rank // GPUS_PER_NODE)
segment of the injected rank: ranks {seg.start}-{min(seg.stop, world) - 1} (FR_SEGMENT_SIZE={truth.segment_size})
injection iteration: {cell.iter}
cluster: {cell.nodes} nodes x {truth.gpus_per_node} GPUs per node = {world} ranks

## Expected restart decision
{expected_restart(cell.fault_type)} ({rationale})

## Filtered raw log (last {LOG_TAIL_LINES} lines, fault-injection markers removed)
{log}

## Log analyzer output
{inputs.logsage_text.strip() or "(no output)"}

## Flight-recorder analysis (PGID | Process Group Desc | Op Type | Size | Dtype | Missing Ranks)
{inputs.fr_text.strip() or "(no output)"}

## Scoring instructions
GPUS_PER_NODE={truth.gpus_per_node}, FR_SEGMENT_SIZE={truth.segment_size}.
restart_correct: "true" if the analyzer's restart decision equals the expected one, else "false".
rank_primary: "true" if the injected rank is the only primary rank, "partial" if it is one of
several primary ranks, else "false".
rank_any: "true" if the injected rank is named anywhere in the attribution, else "false".
fault_described: "true" if the fault type is named correctly, "partial" if only its nature
(hang, crash, exception, signal, GPU error) is right, else "false".
fr_rank_correct: "rank" if the FR missing ranks are exactly the injected rank, "node" if they all
lie in the injected rank's node, "segment" if they all lie in its segment, "no_dumps" if there is
no FR data, else "false".
notes: one sentence naming the main gap or confirming success.
"""


def judge_log_tail(text: str) -> list[str]:
    """The log upstream's judge reads: markers stripped, exclude_nvrx_logs applied, last 400 lines."""
    lines = [
        line
        for line in strip_markers(text.splitlines())
        if "nvidia_resiliency_ext" not in line and ("[workload:" not in line or "Cycle:" in line)
    ]
    return lines[-LOG_TAIL_LINES:]


def run_judge(settings: LLMSettings, truth: Truth, inputs: JudgeInputs) -> dict[str, Any]:
    """Ask the LLM judge; a failure becomes {"error": ...} in the cell instead of an exception."""
    record: dict[str, Any] = {"model": settings.model, "base_url": settings.base_url}
    try:
        record["answer"] = chat_json(
            settings, JUDGE_SYSTEM, judge_prompt(truth, inputs), JUDGE_SCHEMA, schema_name="fault_judge"
        )
    except LLMError as exc:
        record["error"] = str(exc)
    return record


def apply_judge(score: ScoreRecord, record: dict[str, Any], mode: str) -> None:
    """Attach the judge's record; in `llm` mode its answer replaces the code's grades (kept aside)."""
    score.llm_judge = record
    answer = record.get("answer")
    if mode != "llm" or not answer:
        return
    record["code"] = {d: getattr(score, d) for d in JUDGE_DIMENSIONS}
    for d in JUDGE_DIMENSIONS:
        setattr(score, d, answer[d])
    score.judge_notes = answer["notes"].strip() or score.judge_notes
    score.scored_by = "llm"


# ---- files -----------------------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _stored_score(path: Path, key: str) -> ScoreRecord | None:
    data = _read_json(path)
    if not data or data.get("scored_from") != key:
        return None
    try:
        return ScoreRecord.from_json(data)
    except (KeyError, TypeError, ValueError):
        return None


def _reuse_key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _links(cell_dir: Path, folder: str, names: Iterable[str]) -> list[FileLink]:
    """The files of a cell that exist, as links relative to the session."""
    return [
        FileLink(label, f"{cell_dir.name}/{folder}{name}")
        for label, name in ((n.rsplit("/", 1)[-1], n) for n in names)
        if name and (cell_dir / folder / name).is_file()
    ]


def cell_files(cell_dir: Path, job: Manifest | None) -> list[FileLink]:
    """The run's files a person opens first: manifest, main log, stripped log, the first dumps."""
    links = [
        FileLink(label, f"{cell_dir.name}/{path}")
        for label, path in (
            (layout.MANIFEST, layout.MANIFEST),
            ("main log", job.main_log if job else ""),
            ("stripped log", layout.STRIPPED_LOG),
        )
        if path and (cell_dir / path).is_file()
    ]
    dumps = sorted((cell_dir / layout.FR_DUMP_PREFIX).parent.glob("_dump_*"))
    links += [
        FileLink(d.name, f"{cell_dir.name}/{layout.FR_DUMP_PREFIX.rsplit('/', 1)[0]}/{d.name}")
        for d in dumps[:DUMP_LINKS]
    ]
    if len(dumps) > DUMP_LINKS:
        links.append(
            FileLink(
                f"{len(dumps) - DUMP_LINKS} more dumps", f"{cell_dir.name}/{layout.FR_DUMP_PREFIX.rsplit('/', 1)[0]}/"
            )
        )
    return links


def _stderr_end(run: RunRecord) -> str:
    lines = [line for line in run.stderr_tail.splitlines() if line.strip()]
    return lines[-1][-200:] if lines and run.status != OK else ""


def score_analyzers(
    cell_dir: Path,
    truth: Truth,
    job: Manifest | None,
    *,
    judge_mode: str = "code",
    llm: LLMSettings | None = None,
    version: str = "",
    fresh: bool = False,
    combine: bool = False,
) -> list[ScoreRecord]:
    """Score every analyzer the cell's indexes list: the log analyzers (graded with the first FR
    analyzer's verdict, as upstream's table is), then each FR analyzer on its own. A score whose
    inputs are unchanged is reused (its file untouched); the LLM judge runs on valid runs when
    the mode asks for it. Each record carries what the report shows of the cell: the analyzer's
    cited and missed lines and the files to open. With combine, faultloop's combined verdict
    (faultloop.combined) is merged first and scored after the log analyzers."""
    log_runs = read_index(cell_dir / layout.LOGSAGE_INDEX)
    fr_runs = read_index(cell_dir / layout.FR_INDEX)
    if combine:
        log_runs.append(combined.combine_cell(cell_dir, log_runs, fr_runs, fresh=fresh))
    primary_fr = fr_runs[0] if fr_runs else None
    fr_primary = (
        _read_json(cell_dir / layout.fr_analyzer_dir(primary_fr.analyzer) / layout.FR_JSON)
        if primary_fr and primary_fr.status == OK
        else None
    )
    common = (
        version,
        judge_mode,
        llm.model if llm else None,
        truth.gpus_per_node,
        truth.segment_size,
        file_digest(cell_dir / layout.MANIFEST),
        file_digest(cell_dir / layout.STRIPPED_LOG),
        primary_fr and asdict(primary_fr) | {"reused": None},
    )
    files = cell_files(cell_dir, job)
    log_lines: list[str] | None = None
    scores = []
    for run in log_runs:
        folder = layout.analyzer_dir(run.analyzer)
        key = _reuse_key(common, asdict(run) | {"reused": None})
        score = None if fresh else _stored_score(cell_dir / folder / layout.ANALYZER_SCORE, key)
        if score is None:
            verdict = _read_json(cell_dir / folder / layout.LOGSAGE_JSON) if run.status == OK else None
            score = score_cell(truth, job, verdict, fr_primary, failure=run.error if run.status != OK else None)
            _describe(score, run.analyzer, run, key)
            if score.scored:
                if log_lines is None:
                    log_lines = _read_text(cell_dir / layout.STRIPPED_LOG).splitlines()
                score.evidence = cell_evidence(truth.cell, log_lines, verdict or {})
            score.files, score.cell_files = _links(cell_dir, f"{folder}/", LOG_FILES), files
            if judge_mode in ("llm", "both") and score.scored:
                judge(
                    score,
                    cell_dir,
                    cell_dir / folder,
                    truth,
                    judge_mode,
                    llm,
                    fr_primary_text=_read_text(cell_dir / layout.fr_analyzer_dir(primary_fr.analyzer) / layout.FR_TEXT)
                    if primary_fr
                    else "",
                )
            layout.write_json_atomic(cell_dir / folder / layout.ANALYZER_SCORE, score.to_json())
        scores.append(score)
    for run in fr_runs:
        folder = layout.fr_analyzer_dir(run.analyzer)
        key = _reuse_key(common[:-1], asdict(run) | {"reused": None})
        score = None if fresh else _stored_score(cell_dir / folder / layout.ANALYZER_SCORE, key)
        if score is None:
            verdict = _read_json(cell_dir / folder / layout.FR_JSON) if run.status == OK else None
            score = score_fr(truth, job, verdict, failure=run.error if run.status != OK else None)
            _describe(score, f"{FR_PREFIX}{run.analyzer}", run, key)
            score.files, score.cell_files = _links(cell_dir, f"{folder}/", FR_FILES), files
            layout.write_json_atomic(cell_dir / folder / layout.ANALYZER_SCORE, score.to_json())
        scores.append(score)
    return scores


def _describe(score: ScoreRecord, name: str, run: RunRecord, key: str) -> None:
    score.analyzer, score.analyzer_version, score.scored_from = name, run.fingerprint, key
    score.analyzer_wall_s, score.analyzer_stderr_end = run.wall_s, _stderr_end(run)


def judge(
    score: ScoreRecord,
    cell_dir: Path,
    folder: Path,
    truth: Truth,
    mode: str,
    llm: LLMSettings | None,
    *,
    fr_primary_text: str,
) -> None:
    """Ask the LLM judge about one analyzer's verdict (what upstream's judge reads)."""
    if llm is None or not llm.base_url or not llm.model:
        apply_judge(score, {"error": "judge mode needs an LLM base_url and model"}, mode)
        return
    inputs = JudgeInputs(
        judge_log_tail(_read_text(cell_dir / layout.STRIPPED_LOG)),
        _read_text(folder / layout.LOGSAGE_TEXT),
        fr_primary_text,
    )
    apply_judge(score, run_judge(llm, truth, inputs), mode)


def write_scores(scores: list[ScoreRecord], cell: str, path: Path) -> None:
    """The cell's score.json: every analyzer's score, log analyzers first."""
    layout.write_json_atomic(path, {"cell": cell, "scores": [s.to_json() for s in scores]})


def read_cell_scores(cell_dir: Path) -> dict[str, ScoreRecord] | None:
    """A cell's score.json by analyzer, None when it has none (or an unreadable one)."""
    data = _read_json(cell_dir / layout.SCORE_JSON)
    if data is None or not isinstance(data.get("scores"), list):
        return None
    try:
        return {s.analyzer: s for s in (ScoreRecord.from_json(d) for d in data["scores"] if isinstance(d, dict))}
    except (KeyError, TypeError, ValueError):
        return None


# ---- the session's tables --------------------------------------------------------------------

TSV_COLUMNS = (
    "CELL", "ANALYZER", "FAULT_TYPE", "NODES", "RANK", "ITER", "JOB_ID", "STATE", "STATUS",
    *DIMENSIONS, "judge_notes", "expected_restart", "logsage_restart", "primary_ranks",
    "secondary_ranks", "fr_suspects", "analyzer_version", "analyzer_error", "analyzer_stderr_end",
    "fault_to_end_s", "analyzer_wall_s", "gpus_per_node", "segment_size", "scored_by", "reason",
)  # fmt: skip


def gather(session_dir: Path, cells: Iterable[Cell], analyzers: list[str] | None = None) -> list[ScoreRecord]:
    """One record per pool cell and analyzer (log analyzers, then fr:<name>), in that order:
    scored, invalid, infrastructure failure or not run. Without a list, the analyzers the cells'
    scores name."""
    cells = list(cells)
    stored = {cell.name: read_cell_scores(session_dir / cell.name) for cell in cells}
    names = analyzers or list(dict.fromkeys(a for s in stored.values() if s for a in s)) or ["builtin"]
    records = []
    for cell in cells:
        cell_dir = session_dir / cell.name
        scores = stored[cell.name]
        infra = Manifest.read(cell_dir / layout.INFRA_FAILURE) if (cell_dir / layout.INFRA_FAILURE).is_file() else None
        for name in names:
            # infra_failure.json is cleared when a run starts, so one that exists describes the
            # latest run: never scored, even though the chain produced a score.json for it.
            if infra is not None:
                why = infra.invalid_reason or "the job could not start"
                records.append(
                    ScoreRecord.unscored(
                        cell,
                        name,
                        INFRA_FAILURE,
                        "INFRA_FAILURE",
                        f"infrastructure ({infra.state}): {why}",
                        infra.job_id,
                    )
                )
            elif scores is not None and name in scores:
                records.append(scores[name])
            elif (cell_dir / layout.MANIFEST).exists():
                records.append(ScoreRecord.unscored(cell, name, NOT_RUN, "NOT_RUN", "ran but not scored yet"))
            else:
                records.append(ScoreRecord.unscored(cell, name, NOT_RUN, "NOT_RUN", "no run artifacts"))
    return records


def tsv_text(records: Iterable[ScoreRecord]) -> str:
    """scores.tsv's text: tab-separated, one header line, tabs and newlines in text flattened."""
    rows = [{k: " ".join(str(v).split()) for k, v in r.to_row().items()} for r in records]
    return "\n".join(["\t".join(TSV_COLUMNS)] + ["\t".join(row[c] for c in TSV_COLUMNS) for row in rows]) + "\n"


def write_tables(records: list[ScoreRecord], tsv: Path, jsonl: Path) -> None:
    """scores.tsv and scores.jsonl (every record whole)."""
    layout.write_atomic(tsv, tsv_text(records))
    layout.write_atomic(jsonl, "".join(json.dumps(r.to_json(), separators=(",", ":")) + "\n" for r in records))


def read_scores_tsv(path: Path) -> list[ScoreRecord]:
    with open(path, newline="") as handle:
        return [ScoreRecord.from_row(row) for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)]


def read_records(path: Path) -> list[ScoreRecord]:
    with open(path) as handle:
        return [ScoreRecord.from_json(json.loads(line)) for line in handle if line.strip()]


def by_analyzer(records: Iterable[ScoreRecord]) -> dict[str, list[ScoreRecord]]:
    """Records per analyzer, in the order the analyzers first appear (the primary first)."""
    out: dict[str, list[ScoreRecord]] = {}
    for record in records:
        out.setdefault(record.analyzer, []).append(record)
    return out


def primary_name(records: Iterable[ScoreRecord]) -> str | None:
    return next((r.analyzer for r in records if not r.is_fr), None)


def failing_cells(scores_tsv: Path, *, analyzer: str | None = None, include_unscored: bool = False) -> list[Cell]:
    """Cells where an analyzer (default: the primary) misses a stop-condition dimension; with
    include_unscored also invalid, infra-failed and not-run cells."""
    records = read_scores_tsv(Path(scores_tsv))
    name = analyzer if analyzer in {r.analyzer for r in records} else primary_name(records)
    return [r.cell for r in records if r.analyzer == name and (r.failing() or (include_unscored and not r.scored))]


def write_failing_pool(records: list[ScoreRecord], pool_path: Path, *, include_unscored: bool = False) -> list[Cell]:
    """A pool TSV (FAULT_TYPE RANK ITER NODES) of the primary analyzer's failing cells, for the next iteration."""
    name = primary_name(records)
    cells = [r.cell for r in records if r.analyzer == name and (r.failing() or (include_unscored and not r.scored))]
    write_pool_file(cells, pool_path)
    return cells


# ---- CLI -------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    """`faultloop score --cell-dir DIR`: grade every analyzer's verdict on a cell against the truth
    its job.json records, into the cell's score.json."""
    p = argparse.ArgumentParser(prog="faultloop score", description=main.__doc__)
    p.add_argument("--cell-dir", type=Path, required=True)
    p.add_argument("--gpus-per-node", type=int, default=4)
    p.add_argument("--segment-size", type=int, default=32)
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--judge-mode", choices=JUDGE_MODES, default="code")
    p.add_argument("--version", default="", help="fingerprint of the scoring code and settings (reuse key)")
    p.add_argument("--fresh", type=int, default=0, help="1: score every analyzer again (--forcerun)")
    p.add_argument("--combined", type=int, default=0, help="1: merge and score the combined verdict")
    llm_client.add_cli_arguments(p, timeout_s=120.0)
    args = p.parse_args(argv)
    try:
        job = Manifest.read(args.cell_dir / layout.MANIFEST)
    except ManifestError as exc:
        print(f"faultloop score: {exc}", file=sys.stderr)
        return 2
    truth = Truth(
        Cell(job.fault_type, job.fault_rank, job.fault_iter, job.nodes), args.gpus_per_node, args.segment_size
    )
    llm = llm_client.settings_from_args(args) if args.judge_mode != "code" else None
    scores = score_analyzers(
        args.cell_dir,
        truth,
        job,
        judge_mode=args.judge_mode,
        llm=llm,
        version=args.version,
        fresh=bool(args.fresh),
        combine=bool(args.combined),
    )
    write_scores(scores, truth.cell.name, args.output)
    return 0
