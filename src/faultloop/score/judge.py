"""The LLM judge: an opt-in second opinion (`judge.mode: llm|both`), asked what upstream's judge
is asked. Its answer is recorded beside the code's grades, and replaces them only in `llm` mode.
The dimensions it answers, their choices and its instructions come from `contracts.DIMENSIONS`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from faultloop.analyze.llm import LLMError, LLMSettings, chat_json
from faultloop.contracts import DIMENSIONS, Grade, ScoreRecord
from faultloop.faults import FAULTS, expected_restart
from faultloop.marker import strip_markers
from faultloop.score.grade import Truth

JUDGE_MODES = ("code", "llm", "both")
LOG_TAIL_LINES = 400
JUDGE_SYSTEM = (
    "You grade a fault-attribution tool against the injected ground truth of a distributed "
    "training job. Answer only with a JSON object in the given schema; every value is a string."
)


def judge_schema() -> dict[str, Any]:
    """One string per dimension the judge answers, from that dimension's grades, and its notes."""
    judged = [DIMENSIONS[name] for name in DIMENSIONS.names(judged=True)]
    return {
        "type": "object",
        "properties": {d.name: {"type": "string", "enum": [g.value for g in d.grades]} for d in judged}
        | {"notes": {"type": "string"}},
        "required": [*(d.name for d in judged), "notes"],
        "additionalProperties": False,
    }


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
    rules = "\n".join(f"{name}: {DIMENSIONS[name].judge_rule}" for name in DIMENSIONS.names(judged=True))
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
{rules}
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
    """Ask the LLM judge; a failure becomes {"error": ...} in the cell instead of an exception.
    What was redacted from the prompt (`analyze.redact`, by kind) is recorded beside the answer."""
    record: dict[str, Any] = {"model": settings.model, "base_url": settings.base_url}
    redactions: Counter[str] = Counter()
    try:
        record["answer"] = chat_json(
            settings,
            JUDGE_SYSTEM,
            judge_prompt(truth, inputs),
            judge_schema(),
            schema_name="fault_judge",
            redactions=redactions,
        )
    except LLMError as exc:
        record["error"] = str(exc)
    if redactions:
        record["redactions"] = dict(sorted(redactions.items()))
    return record


def apply_judge(score: ScoreRecord, record: dict[str, Any], mode: str) -> None:
    """Attach the judge's record; in `llm` mode its answer replaces the code's grades (kept aside)."""
    score.llm_judge = record
    answer = record.get("answer")
    if mode != "llm" or not answer:
        return
    judged = DIMENSIONS.names(judged=True)
    record["code"] = {d: score.grade(d) for d in judged}
    for d in judged:
        score.grades[d] = Grade(answer[d])
    score.judge_notes = answer["notes"].strip() or score.judge_notes
    score.scored_by = "llm"


def judge(score: ScoreRecord, truth: Truth, mode: str, llm: LLMSettings | None, inputs: JudgeInputs) -> None:
    """Ask the LLM judge about one analyzer's verdict (what upstream's judge reads)."""
    if llm is None or not llm.base_url or not llm.model:
        apply_judge(score, {"error": "judge mode needs an LLM base_url and model"}, mode)
        return
    apply_judge(score, run_judge(llm, truth, inputs), mode)
