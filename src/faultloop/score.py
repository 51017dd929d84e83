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

from faultloop import layout
from faultloop.analyzers import OK, RunRecord, file_digest, read_index
from faultloop.faults import FAULTS, expected_restart, strip_markers
from faultloop import llm as llm_client
from faultloop.llm import LLMError, LLMSettings, chat_json
from faultloop.pool import Cell, PoolError, load_pool

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


@dataclass
class CellScore:
    """score.json: the contract in docs/architecture.md (plus the cluster shape and reason)."""

    cell: str
    fault_type: str
    rank: int
    iter: int
    nodes: int
    job_id: str
    state: str
    run_valid: str
    analyzer: str = ""  # a log analyzer's name, or fr:<name> for a flight-recorder analyzer
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
    fault_to_end_s: float | None = None  # how long the failure took to end the job
    analyzer_wall_s: float | None = None  # how long the analyzer took on the cell
    scored_from: str = ""  # digest of what the score was computed from (reuse key)

    def dimensions(self) -> dict[str, str]:
        return {d: getattr(self, d) for d in DIMENSIONS}


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


def _notes(truth: Truth, s: CellScore, logsage: Mapping[str, Any], problems: list[str]) -> str:
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


def fault_to_end(job: Mapping[str, Any] | None) -> float | None:
    """Seconds from the fault firing to the job's end: how long the failure took to surface."""
    fired, end = (job or {}).get("fault_fired_time"), (job or {}).get("end_time")
    if isinstance(fired, (int, float)) and isinstance(end, (int, float)) and end >= fired:
        return round(end - fired, 3)
    return None


def _base(truth: Truth, job: Mapping[str, Any] | None) -> CellScore:
    """The cell's facts, run validity, and N/A everywhere until a verdict is graded."""
    cell = truth.cell
    base = CellScore(
        cell=cell.name,
        fault_type=cell.fault_type,
        rank=cell.rank,
        iter=cell.iter,
        nodes=cell.nodes,
        job_id=str((job or {}).get("job_id") or ""),
        state=str((job or {}).get("state") or ""),
        run_valid="false",
        expected_restart=expected_restart(cell.fault_type),
        gpus_per_node=truth.gpus_per_node,
        segment_size=truth.segment_size,
        fault_to_end_s=fault_to_end(job),
    )
    if job is None:
        base.invalid_reason = "no job.json (the job never ran)"
    elif not job.get("run_valid"):
        base.invalid_reason = str(job.get("invalid_reason") or "the fault never fired")
    if base.invalid_reason is not None:
        base.judge_notes = f"run_invalid: {base.invalid_reason}"
    else:
        base.run_valid = "true"
    return base


def score_cell(
    truth: Truth,
    job: Mapping[str, Any] | None,
    logsage: Mapping[str, Any] | None,
    fr: Mapping[str, Any] | None,
    *,
    failure: str | None = None,
) -> CellScore:
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


def score_fr(truth: Truth, job: Mapping[str, Any] | None, fr: Mapping[str, Any] | None, *,
             failure: str | None = None) -> CellScore:
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
        base.judge_notes = (f"FR {base.fr_rank_correct} (suspects {base.fr_suspects})."
                            if base.fr_rank_correct != "no_dumps" else "No FR dumps.")
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
        line for line in strip_markers(text.splitlines())
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


def apply_judge(score: CellScore, record: dict[str, Any], mode: str) -> None:
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


def _stored_score(path: Path, key: str) -> CellScore | None:
    data = _read_json(path)
    if not data or data.get("scored_from") != key:
        return None
    return CellScore(**{k: v for k, v in data.items() if k in CellScore.__dataclass_fields__})


def _reuse_key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def score_analyzers(
    cell_dir: Path, truth: Truth, *, judge_mode: str = "code", llm: LLMSettings | None = None,
    version: str = "", fresh: bool = False,
) -> list[CellScore]:
    """Score every analyzer the cell's indexes list: the log analyzers (graded with the first FR
    analyzer's verdict, as upstream's table is), then each FR analyzer on its own. A score whose
    inputs are unchanged is reused (its file untouched); the LLM judge runs on valid runs when
    the mode asks for it."""
    job = _read_json(cell_dir / layout.MANIFEST)
    log_runs = read_index(cell_dir / layout.LOGSAGE_INDEX)
    fr_runs = read_index(cell_dir / layout.FR_INDEX)
    primary_fr = fr_runs[0] if fr_runs else None
    fr_primary = (_read_json(cell_dir / layout.fr_analyzer_dir(primary_fr.analyzer) / layout.FR_JSON)
                  if primary_fr and primary_fr.status == OK else None)
    common = (version, judge_mode, llm.model if llm else None, truth.gpus_per_node, truth.segment_size,
              file_digest(cell_dir / layout.MANIFEST), primary_fr and asdict(primary_fr) | {"reused": None})
    scores = []
    for run in log_runs:
        folder = cell_dir / layout.analyzer_dir(run.analyzer)
        key = _reuse_key(common, asdict(run) | {"reused": None})
        score = None if fresh else _stored_score(folder / layout.ANALYZER_SCORE, key)
        if score is None:
            verdict = _read_json(folder / layout.LOGSAGE_JSON) if run.status == OK else None
            score = score_cell(truth, job, verdict, fr_primary, failure=run.error if run.status != OK else None)
            _describe(score, run.analyzer, run, key)
            if judge_mode in ("llm", "both") and score.run_valid == "true":
                judge(score, cell_dir, folder, truth, judge_mode, llm, fr_primary_text=_read_text(
                    cell_dir / layout.fr_analyzer_dir(primary_fr.analyzer) / layout.FR_TEXT) if primary_fr else "")
            layout.write_json_atomic(folder / layout.ANALYZER_SCORE, asdict(score))
        scores.append(score)
    for run in fr_runs:
        folder = cell_dir / layout.fr_analyzer_dir(run.analyzer)
        key = _reuse_key(common[:-1], asdict(run) | {"reused": None})
        score = None if fresh else _stored_score(folder / layout.ANALYZER_SCORE, key)
        if score is None:
            verdict = _read_json(folder / layout.FR_JSON) if run.status == OK else None
            score = score_fr(truth, job, verdict, failure=run.error if run.status != OK else None)
            _describe(score, f"{FR_PREFIX}{run.analyzer}", run, key)
            layout.write_json_atomic(folder / layout.ANALYZER_SCORE, asdict(score))
        scores.append(score)
    return scores


def _describe(score: CellScore, name: str, run: RunRecord, key: str) -> None:
    score.analyzer, score.analyzer_version, score.scored_from = name, run.fingerprint, key
    score.analyzer_wall_s = run.wall_s


def judge(score: CellScore, cell_dir: Path, folder: Path, truth: Truth, mode: str, llm: LLMSettings | None, *,
          fr_primary_text: str) -> None:
    """Ask the LLM judge about one analyzer's verdict (what upstream's judge reads)."""
    if llm is None or not llm.base_url or not llm.model:
        apply_judge(score, {"error": "judge mode needs an LLM base_url and model"}, mode)
        return
    inputs = JudgeInputs(judge_log_tail(_read_text(cell_dir / layout.STRIPPED_LOG)),
                         _read_text(folder / layout.LOGSAGE_TEXT), fr_primary_text)
    apply_judge(score, run_judge(llm, truth, inputs), mode)


def write_scores(scores: list[CellScore], cell: str, path: Path) -> None:
    """The cell's score.json: every analyzer's score, log analyzers first."""
    layout.write_json_atomic(path, {"cell": cell, "scores": [asdict(s) for s in scores]})


# ---- gather ----------------------------------------------------------------------------------

TSV_COLUMNS = (
    "CELL", "ANALYZER", "FAULT_TYPE", "NODES", "RANK", "ITER", "JOB_ID", "STATE", "STATUS",
    *DIMENSIONS, "judge_notes", "expected_restart", "logsage_restart", "primary_ranks",
    "secondary_ranks", "fr_suspects", "analyzer_version", "analyzer_error", "fault_to_end_s",
    "analyzer_wall_s", "gpus_per_node", "segment_size", "scored_by", "llm_judge", "reason",
)  # fmt: skip


def _unscored_row(cell: Cell, analyzer: str, state: str, status: str, reason: str,
                  job_id: str = "") -> dict[str, str]:
    row = {c: "" for c in TSV_COLUMNS}
    row.update(CELL=cell.name, ANALYZER=analyzer, FAULT_TYPE=cell.fault_type, NODES=str(cell.nodes),
               RANK=str(cell.rank), ITER=str(cell.iter), JOB_ID=job_id or "-", STATE=state, STATUS=status,
               reason=reason, judge_notes=reason, expected_restart=expected_restart(cell.fault_type))
    for d in DIMENSIONS:
        row[d] = NA
    return row


def score_row(data: Mapping[str, Any]) -> dict[str, str]:
    """One analyzer's score of a cell as one scores.tsv row (lists and the judge record as JSON)."""
    valid = data.get("run_valid") == "true"
    row = {c: "" for c in TSV_COLUMNS}
    row.update(CELL=data["cell"], ANALYZER=str(data.get("analyzer") or ""), FAULT_TYPE=data["fault_type"],
               NODES=str(data["nodes"]), RANK=str(data["rank"]), ITER=str(data["iter"]),
               JOB_ID=str(data.get("job_id") or "-"), STATE=str(data.get("state") or "-"),
               STATUS=SCORED if valid else INVALID, reason=str(data.get("invalid_reason") or ""))
    for key in TSV_COLUMNS[TSV_COLUMNS.index("run_valid"):TSV_COLUMNS.index("reason")]:
        value = data.get(key)
        if value is not None:
            row[key] = json.dumps(value, separators=(",", ":")) if isinstance(value, (list, dict)) else str(value)
    return row


def _cell_scores(cell_dir: Path) -> dict[str, dict[str, Any]] | None:
    data = _read_json(cell_dir / layout.SCORE_JSON)
    if data is None or not isinstance(data.get("scores"), list):
        return None
    return {str(s.get("analyzer")): s for s in data["scores"] if isinstance(s, dict)}


def gather_rows(session_dir: Path, cells: Iterable[Cell], analyzers: list[str] | None = None) -> list[dict[str, str]]:
    """One row per pool cell and analyzer (log analyzers, then fr:<name>), in that order: scored,
    invalid, infrastructure failure or not run. Without a list, the analyzers the cells' scores name."""
    cells = list(cells)
    stored = {cell.name: _cell_scores(session_dir / cell.name) for cell in cells}
    names = analyzers or list(dict.fromkeys(a for s in stored.values() if s for a in s)) or ["builtin"]
    rows = []
    for cell in cells:
        cell_dir = session_dir / cell.name
        scores = stored[cell.name]
        infra = _read_json(cell_dir / layout.INFRA_FAILURE)
        for name in names:
            # infra_failure.json is cleared when a run starts, so one that exists describes the
            # latest run: never scored, even though the chain produced a score.json for it.
            if infra is not None:
                why = str(infra.get("invalid_reason") or "the job could not start")
                state = str(infra.get("state") or "?")
                rows.append(_unscored_row(cell, name, "INFRA_FAILURE", INFRA_FAILURE,
                                          f"infrastructure ({state}): {why}", str(infra.get("job_id") or "")))
            elif scores is not None and name in scores:
                rows.append(score_row(scores[name]))
            elif (cell_dir / layout.MANIFEST).exists():
                rows.append(_unscored_row(cell, name, "NOT_RUN", NOT_RUN, "ran but not scored yet"))
            else:
                rows.append(_unscored_row(cell, name, "NOT_RUN", NOT_RUN, "no run artifacts"))
    return rows


def write_scores_tsv(rows: list[dict[str, str]], path: Path) -> None:
    """scores.tsv: tab-separated, one header line; tabs and newlines in text are flattened."""
    clean = [{k: " ".join(str(v).split()) for k, v in row.items()} for row in rows]
    lines = ["\t".join(TSV_COLUMNS)] + ["\t".join(r.get(c, "") for c in TSV_COLUMNS) for r in clean]
    layout.write_atomic(path, "\n".join(lines) + "\n")


def read_scores_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def discover_cells(session_dir: Path) -> list[Cell]:
    """Cells with a folder in the session (used when no pool is given)."""
    cells = []
    for child in sorted(session_dir.iterdir()) if session_dir.is_dir() else []:
        try:
            cells.append(Cell.from_name(child.name))
        except ValueError:
            continue
    return cells


# ---- CLI -------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="faultloop score",
        description="Score one cell (--cell-dir ...) or gather a session's score.json files into "
        "scores.tsv (--gather --session-dir ...).",
    )
    p.add_argument("--gather", action="store_true", help="gather score.json files into scores.tsv")
    p.add_argument("--session-dir", type=Path)
    p.add_argument("--pool-file", help="pool TSV whose cells to list (default: the session's cell folders)")
    p.add_argument("--pool", help="one-line pool 'FAULT:RANK:ITER:NODES ...' (wins over --pool-file)")
    p.add_argument("--cell-dir", type=Path)
    p.add_argument("--cell", help="the truth as a cell name n<N>_<FAULT>_r<R>_i<I> (instead of the four flags)")
    p.add_argument("--fault-type")
    p.add_argument("--rank", type=int)
    p.add_argument("--iter", type=int)
    p.add_argument("--nodes", type=int)
    p.add_argument("--gpus-per-node", type=int, default=4)
    p.add_argument("--segment-size", type=int, default=32)
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--judge-mode", choices=JUDGE_MODES, default="code")
    p.add_argument("--version", default="", help="fingerprint of the scoring code and settings (reuse key)")
    p.add_argument("--fresh", type=int, default=0, help="1: score every analyzer again (--forcerun)")
    p.add_argument("--analyzers", nargs="*", help="with --gather: the analyzers' rows to list, in order")
    llm_client.add_cli_arguments(p, timeout_s=120.0)
    return p


def main(argv: list[str]) -> int:
    """`faultloop score`: write one cell's score.json, or the session's scores.tsv with --gather."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.gather:
        if args.session_dir is None:
            parser.error("--gather needs --session-dir")
        try:
            if args.pool or args.pool_file:
                cells = load_pool(pool_file=args.pool_file or None, pool_spec=args.pool,
                                  gpus_per_node=args.gpus_per_node)
            else:
                cells = discover_cells(args.session_dir)
        except PoolError as exc:
            print(exc, file=sys.stderr)
            return 1
        write_scores_tsv(gather_rows(args.session_dir, cells, args.analyzers), args.output)
        return 0
    if args.cell:
        try:
            named = Cell.from_name(args.cell)
        except ValueError as error:
            parser.error(str(error))
        args.fault_type, args.rank, args.iter, args.nodes = named.fault_type, named.rank, named.iter, named.nodes
    missing = [f for f in ("cell_dir", "fault_type", "rank", "iter", "nodes") if getattr(args, f) is None]
    if missing:
        parser.error("scoring a cell needs " + ", ".join("--" + m.replace("_", "-") for m in missing))
    truth = Truth(Cell(args.fault_type, args.rank, args.iter, args.nodes), args.gpus_per_node, args.segment_size)
    llm = None
    if args.judge_mode != "code":
        llm = llm_client.settings_from_args(args)
    scores = score_analyzers(args.cell_dir, truth, judge_mode=args.judge_mode, llm=llm, version=args.version,
                             fresh=bool(args.fresh))
    write_scores(scores, truth.cell.name, args.output)
    return 0
