"""logsage's other modes: an LLM's verdict beside the deterministic one, and NVRx's own log
analyzer (upstream) for a side-by-side comparison."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from faultloop import faults
from faultloop.analyze import llm, redact
from faultloop.analyze.logsage.confidence import LOW, MEDIUM
from faultloop.analyze.logsage.engine import Settings, Verdict, analyze_log, analyzer_fingerprint, fingerprint_settings
from faultloop.analyze.logsage.policy import POLICY
from faultloop.faults import ERRORS_NOT_FOUND, NO_LOGS, OTHER, RESTART, STOP

# -- LLM mode ------------------------------------------------------------------------------------

LLM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "restart": {"enum": [RESTART, STOP]},
        "primary_ranks": {"type": "array", "items": {"type": "integer"}},
        "secondary_ranks": {"type": "array", "items": {"type": "integer"}},
        "fault_category": {"enum": list(faults.CATEGORIES)},
        "fault_type": {"enum": [*dict.fromkeys(p.fault_type for p in POLICY.values() if p.fault_type), None]},
        "explanation": {"type": "string"},
    },
    "required": ["restart", "primary_ranks", "secondary_ranks", "fault_category", "fault_type", "explanation"],
    "additionalProperties": False,
}
LLM_SYSTEM = (
    "You attribute failures of distributed training jobs from their logs. Ranks that time out or "
    "lose a peer are victims; in a hang the culprit is the rank that did not time out; in a crash "
    "it is the first rank with its own error or death. Restart policy: hard crash, code bug, GPU "
    "error, OOM, a setup, configuration or desync problem -> STOP - DONT RESTART IMMEDIATE; transient "
    "hang, external signal, preemption, network flap -> RESTART IMMEDIATE. Answer with one JSON object "
    "matching the schema."
)
LLM_TAIL_LINES = 200


def _tail(path: Path, n: int) -> list[str]:
    """The last n lines, read from the end (bounded memory)."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - 256 * n))
        return f.read().decode("utf-8", "replace").splitlines()[-n:]


def analyze_with_llm(path: Path, settings: Settings, redactions: Counter[str] | None = None) -> Verdict:
    """The LLM's verdict given the engine's evidence and the log tail; the deterministic verdict
    stays beside it, and replaces it (with the error recorded) when the model fails. The tail is
    redacted line by line before it is quoted in JSON (a quoted password keeps its quotes there);
    redactions: where to add what was replaced, by kind."""
    redactions = Counter() if redactions is None else redactions
    det = analyze_log(path, Settings(prefilter=settings.prefilter, jobs=settings.jobs))
    version = analyzer_fingerprint(fingerprint_settings(settings))
    if det.restart in (NO_LOGS, ERRORS_NOT_FOUND):
        det.analyzer_version, det.extra = version, {"llm_error": None, "requested_mode": "llm"}
        return det
    tail = redact.Redactor()
    user = json.dumps(
        {
            "deterministic_verdict": {k: v for k, v in det.to_json().items() if k not in ("analyzer_version", "mode")},
            "log_tail": list(tail.lines(_tail(path, LLM_TAIL_LINES))),
        },
        indent=1,
    )
    redactions.update(tail.counts)
    try:
        answer = llm.chat_json(
            settings.llm, LLM_SYSTEM, user, LLM_SCHEMA, schema_name="logsage_verdict", redactions=redactions
        )
    except llm.LLMError as exc:
        det.analyzer_version = version
        det.extra = {"requested_mode": "llm", "llm_error": str(exc)}
        return det
    primary = sorted(answer["primary_ranks"])
    agrees = primary == det.primary_ranks
    verdict = Verdict(
        answer["restart"],
        primary,
        sorted(answer["secondary_ranks"]),
        answer["fault_category"],
        answer["fault_type"],
        answer["explanation"],
        f"LLM verdict ({settings.llm.model}); deterministic: {det.restart}, primary {det.primary_ranks}",
        det.evidence,
        det.checkpoint_saved,
        MEDIUM if agrees else LOW,
        "the LLM names the ranks the log's evidence names"
        if agrees
        else "the LLM's ranks differ from those the log's evidence names",
        mode="llm",
        analyzer_version=version,
    )
    verdict.extra = {"requested_mode": "llm", "llm_error": None, "deterministic": det.to_json()}
    return verdict


# -- upstream adapter ----------------------------------------------------------------------------


UPSTREAM_MODULE = "nvidia_resiliency_ext.attribution.log_analyzer.nvrx_logsage"


def run_upstream(path: Path, settings: Settings, redactions: Counter[str] | None = None) -> Verdict:
    """Run NVRx's log analyzer (the `logsage` package behind nvrx_logsage.py), when installed, for a
    side-by-side comparison. It needs its own LLM endpoint and key (its environment), and sends
    the log to it: it reads a redacted copy under the log's own name (redactions: where to add
    what was replaced). Its output is parsed for the decision, the attribution lists and
    checkpoint_saved, whatever its layout."""
    missing = [m for m in ("logsage", UPSTREAM_MODULE) if missing_module(m)]
    if missing:
        raise RuntimeError(f"upstream mode needs NVRx's log analyzer; not installed: {', '.join(missing)}")
    redactions = Counter() if redactions is None else redactions
    with tempfile.TemporaryDirectory(prefix="redacted-") as tmp:
        copy = Path(tmp) / path.name
        counts = redact.redact_file(path, copy)
        redactions.update(counts)
        proc = subprocess.run(
            [sys.executable, "-m", UPSTREAM_MODULE, "--log-path", str(copy), "--exclude_nvrx_logs", "--emit-stdout"],
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
        )
    out = proc.stdout
    decision = re.search("|".join(map(re.escape, (*faults.RESTART_DECISIONS, "LLM FAILURE"))), out)
    if proc.returncode != 0 or not decision:
        raise RuntimeError(f"upstream log analyzer failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    attr = re.search(r"Primary issues: \[([^\]]*)\],? Secondary issues: \[([^\]]*)\]", out)
    primary, secondary = ([int(x) for x in re.findall(r"\d+", g)] for g in (attr.groups() if attr else ("", "")))
    checkpoint = bool(re.search(r"checkpoint_saved\W+true", out, re.I))
    return Verdict(
        decision.group(0),
        primary,
        secondary,
        OTHER,
        None,
        out.strip()[:2000],
        "",
        [],
        checkpoint,
        LOW,
        "upstream's analyzer states no confidence",
        mode="upstream",
        analyzer_version=analyzer_fingerprint(fingerprint_settings(settings)),
    )


def missing_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except ModuleNotFoundError:  # a parent package is missing
        return True


# -- CLI -----------------------------------------------------------------------------------------
