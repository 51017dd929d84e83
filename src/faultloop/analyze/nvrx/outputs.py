"""What NVRx's analyzers printed, read as faultloop's verdicts: the Restart Agent's
`restart_agent_response.v1`, nvrx_logsage's printout and combined_log_fr's merged answer as a
`LogVerdict` (each through `analyzer.checked`, the contract's validator), and the rows of
fr_attribution's missing-ranks table (what `run` makes an `FrVerdict` of).

Mapping (docs/analyzers.md, "NVRx's analyzers"): the Restart Agent's `decision` is the restart
decision; `primary_failure.rank` the primary rank; the ranks of its cascades and secondary failures
the secondary ranks; `failure_class`, refined by `root_fingerprint`, the category and fault type
(FAILURE_CLASSES, FINGERPRINT_FAULTS). fr_attribution's table of missing ranks gives the suspects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from faultloop.analyze import upstream_text
from faultloop.analyze.analyzer import checked
from faultloop.analyze.nvrx import COMBINED, LOGSAGE, RESTART_AGENT, RESTART_AGENT_SCHEMA
from faultloop.analyze.running import AnalyzerFailure
from faultloop.contracts import LogVerdict
from faultloop.faults import (
    CRASH,
    ERRORS_NOT_FOUND,
    EXCEPTION,
    EXTERNAL_SIGNAL,
    GPU_ERROR_CATEGORY,
    HANG,
    NETWORK,
    NONE,
    OOM,
    OTHER,
    RESTART,
    STOP,
)


class NvrxOutputError(AnalyzerFailure):
    """What an NVRx analyzer printed cannot be read as a verdict."""


# ---- the Restart Agent -> verdict.json ---------------------------------------------------------

# failure_class (NVRx's L0 registry) -> faultloop's category and, where the class alone says it,
# the fault type. Classes not listed are "other".
FAILURE_CLASSES: dict[str, tuple[str, str | None]] = {
    "gpu_hardware_fault": (GPU_ERROR_CATEGORY, "GPU_ERROR"),
    "peer_gpu_memory_access_failure": (GPU_ERROR_CATEGORY, None),
    "cuda_previous_error_cascade": (GPU_ERROR_CATEGORY, None),
    "cuda_oom": (OOM, None),
    "linux_oom_kill_confirmation": (OOM, None),
    "framework_crash": (CRASH, None),
    "observed_distributed_operation_timeout": (HANG, None),
    "nccl_cascade": (NETWORK, None),
    "infra_policy_event": (EXTERNAL_SIGNAL, None),
    "user_cancelled": (EXTERNAL_SIGNAL, None),
    "time_limit": (EXTERNAL_SIGNAL, None),
    "observed_exception": (EXCEPTION, None),
    "configuration_validation_failure": (EXCEPTION, None),
    "argument_validation_failure": (EXCEPTION, None),
    "artifact_or_path_not_found": (EXCEPTION, None),
    "checkpoint_compatibility_mismatch": (EXCEPTION, None),
    "shape_mismatch": (EXCEPTION, None),
    "filesystem_permission_denied": (EXCEPTION, None),
    "nan_or_inf": (EXCEPTION, None),
    "bad_token_or_window": (EXCEPTION, None),
    "observed_failure": (OTHER, None),
}
# root_fingerprint patterns that say more than the class: (pattern, category, fault type), first
# match wins. An illegal memory access is a GPU error whatever exception carried it.
FINGERPRINT_FAULTS: tuple[tuple[re.Pattern[str], str, str | None], ...] = (
    (re.compile(r"segmentation_fault|sigsegv"), CRASH, "SEGFAULT"),
    (re.compile(r"illegal_memory_access|acceleratorerror|xid"), GPU_ERROR_CATEGORY, "GPU_ERROR"),
    (re.compile(r"sigkill"), CRASH, "SIGKILL"),
    (re.compile(r"sigabrt|abort"), CRASH, "OS_ABORT"),
    (re.compile(r"sigterm"), EXTERNAL_SIGNAL, "SIGTERM"),
    (re.compile(r"sigint|keyboardinterrupt"), EXTERNAL_SIGNAL, "SIGINT"),
    (re.compile(r"out_of_memory|outofmemory"), OOM, None),
)
DECISIONS = {"RESTART": RESTART, "STOP": STOP}


def _rank(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def classify(failure_class: str | None, root_fingerprint: str | None) -> tuple[str, str | None]:
    """faultloop's category and fault type for a Restart Agent failure (the tables above)."""
    fingerprint = (root_fingerprint or "").lower()
    for pattern, category, fault_type in FINGERPRINT_FAULTS:
        if pattern.search(fingerprint):
            return category, fault_type
    if failure_class is None:
        return NONE, None
    return FAILURE_CLASSES.get(failure_class, (OTHER, None))


def last_json_object(text: str) -> dict[str, Any]:
    """The Restart Agent prints one JSON object as its last non-empty stdout line."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise NvrxOutputError("the Restart Agent printed nothing on stdout")
    try:
        data = json.loads(lines[-1])
    except ValueError:
        try:
            data = json.loads(text)  # re-indented, as recorded
        except ValueError as exc:
            raise NvrxOutputError(f"the Restart Agent's last line is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise NvrxOutputError("the Restart Agent's output is not a JSON object")
    return data


def restart_agent_verdict(response: Mapping[str, Any], *, l1: bool = False) -> LogVerdict:
    """A `restart_agent_response.v1` object as a verdict. The retry policy that made the decision
    is kept (`policy`, in its `extra`), so the report can tell a policy from a miss."""
    if response.get("schema_version") != RESTART_AGENT_SCHEMA:
        schema = response.get("schema_version")
        raise NvrxOutputError(f"not a {RESTART_AGENT_SCHEMA} object (schema_version {schema!r})")
    decision = response.get("decision")
    if decision not in DECISIONS:
        raise NvrxOutputError(f"unknown decision {decision!r}")
    primary_failure = response.get("primary_failure") or {}
    primary = _rank(primary_failure.get("rank"))
    primaries = [primary] if primary is not None else []
    spread = {
        r
        for group in (response.get("cascades") or [])
        for r in (_rank(x) for x in group.get("rank_spread") or [])
        if r is not None
    } | {r for f in response.get("secondary_failures") or [] if (r := _rank(f.get("rank"))) is not None}
    failure_class = primary_failure.get("failure_class")
    fingerprint = primary_failure.get("root_fingerprint")
    category, fault_type = classify(failure_class, fingerprint)
    policy = response.get("retry_policy") or {}
    provenance = response.get("result_provenance") or {}
    basis = str(response.get("decision_basis") or policy.get("decision_basis") or "")
    return checked(
        {
            "restart": DECISIONS[decision],
            "primary_ranks": primaries,
            "secondary_ranks": sorted(spread - set(primaries)),
            "fault_category": category,
            "fault_type": fault_type,
            "explanation": str(response.get("justification") or ""),
            "detail": f"failure_class {failure_class or 'none'}; root {fingerprint or 'none'}; basis {basis or 'none'}",
            "evidence": [
                {"line": e["line"], "text": str(e.get("quote") or ""), "kind": "nvrx_evidence"}
                for e in response.get("evidence") or []
                if isinstance(e, dict) and isinstance(e.get("line"), int)
            ],
            "checkpoint_saved": False,
            "mode": f"{RESTART_AGENT}+l1" if l1 else RESTART_AGENT,
            "l1_status": str(provenance.get("l1_execution_status") or "not_run"),  # failed: deterministic answer
            "policy": {
                "decision_basis": basis,
                "rule": str(policy.get("rule") or ""),
                "policy_version": str(policy.get("policy_version") or ""),
                "retry_budget_exhausted": bool(policy.get("retry_budget_exhausted", False)),
            },
        },
        mode=RESTART_AGENT,
    )


# ---- nvrx_logsage's printout -> verdict.json ---------------------------------------------------

_DECISION_RE = re.compile("|".join(re.escape(d) for d in upstream_text.DECISIONS))


def logsage_verdict(text: str) -> LogVerdict:
    """nvrx_logsage's `--emit-stdout` payload (a Python repr holding upstream's five parts, read by
    `upstream_text`): the decision, the attribution lists and checkpoint_saved, wherever they are.
    It states no category or fault type."""
    parts = upstream_text.read(text, anywhere=True)
    if parts is None:
        raise NvrxOutputError(f"nvrx_logsage printed no decision: {text.strip()[:120]!r}")
    return checked(
        {
            "restart": parts.decision,
            "primary_ranks": parts.primary_ranks,
            "secondary_ranks": [r for r in parts.secondary_ranks if r not in parts.primary_ranks],
            "fault_category": None,
            "fault_type": None,
            "explanation": text.strip()[:2000],
            "checkpoint_saved": parts.checkpoint_saved,
            "mode": LOGSAGE,
        }
    )


# ---- fr_attribution's table -> fr.json ---------------------------------------------------------

_TABLE_HEADER_RE = re.compile(r"PGID\s*\|\s*Process Group Desc\s*\|")
_LOGGER_PREFIX_RE = re.compile(r"^(?:INFO|WARNING|DEBUG):[\w.]+:")


def fr_rows(output: str) -> list[dict[str, Any]]:
    """The rows of fr_attribution's `PGID | Process Group Desc | Op Type | Size | Dtype | Missing
    Ranks` tables: one per process group with missing ranks (repeated rows kept once)."""
    rows: list[dict[str, Any]] = []
    in_table = False
    for line in output.splitlines():
        text = _LOGGER_PREFIX_RE.sub("", line).strip()
        if _TABLE_HEADER_RE.search(text):
            in_table = True
            continue
        cells = [c.strip() for c in text.split("|")]
        if not in_table or len(cells) != 6:
            in_table = False
            continue
        row = {
            "pg_id": cells[0],
            "pg_desc": cells[1],
            "op_type": cells[2],
            "size": cells[3],
            "dtype": cells[4],
            "missing_ranks": sorted({int(r) for r in re.findall(r"\d+", cells[5])}),
        }
        if row not in rows:
            rows.append(row)
    return rows


def fr_suspects(rows: list[dict[str, Any]]) -> list[int]:
    """Every rank a table row says is missing: what a reader of fr_attribution's output takes."""
    return sorted({r for row in rows for r in row["missing_ranks"]})


# ---- combined_log_fr's merged answer -> verdict.json -------------------------------------------

_MERGED_RE = re.compile(r"attribution_result: (.*?)(?=^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):|\Z)", re.S | re.M)
_EXCLUDED_RE = re.compile(r"list of ranks to be excluded:([^\n]*)", re.I)


def combined_verdict(output: str) -> LogVerdict:
    """combined_log_fr's merged answer (its last `attribution_result` record): the ranks it would
    exclude are the primaries; the restart decision is the one the answer states, else its log
    side's (nvrx_logsage's, earlier in the printout). It states no category or fault type."""
    answers = _MERGED_RE.findall(output)
    if not answers:
        raise NvrxOutputError("combined_log_fr logged no attribution_result")
    answer = answers[-1].strip()
    excluded = _EXCLUDED_RE.search(answer)
    decision = _DECISION_RE.search(answer) or _DECISION_RE.search(output)
    return checked(
        {
            "restart": decision.group(0) if decision else ERRORS_NOT_FOUND,
            "primary_ranks": sorted({int(r) for r in re.findall(r"\d+", excluded.group(1))}) if excluded else [],
            "secondary_ranks": [],
            "fault_category": None,
            "fault_type": None,
            "explanation": answer[:2000],
            "mode": COMBINED,
        }
    )
