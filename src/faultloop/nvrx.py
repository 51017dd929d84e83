"""NVRx's own analyzers, run from a user's checkout: what to run and how to read what it printed.

NVIDIA's nvidia-resiliency-ext (NVRx) is not on the package index in a version with its
`attribution/` package, and its code is never copied here: users point faultloop at their checkout
(`nvrx.src`, default the `NVRX_SRC` environment variable) and at the interpreter that has its
dependencies (`nvrx.python`, default `NVRX_PYTHON`, else the project's). This module holds the
kinds, their settings, the command lines, the sanitized dump copies NVRx's tools read, and the
tables that map NVRx's outputs onto faultloop's verdict contracts (logsage.json, fr.json); running
them is the analyzers' and frpeers' business. It imports nothing above `config` and `fr`, so both
can use it.

Mapping (docs/analyzers.md, "NVRx's analyzers"): the Restart Agent's `decision` is the restart
decision; `primary_failure.rank` the primary rank; the ranks of its cascades and secondary failures
the secondary ranks; `failure_class`, refined by `root_fingerprint`, the category and fault type
(FAILURE_CLASSES, FINGERPRINT_FAULTS). fr_attribution's table of missing ranks gives the suspects.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faultloop import fr, layout
from faultloop.config import ConfigError
from faultloop.faults import (
    CRASH,
    EXCEPTION,
    EXTERNAL_SIGNAL,
    GPU_ERROR_CATEGORY,
    HANG,
    NETWORK,
    OOM,
    OTHER,
    RESTART,
    RESTART_DECISIONS,
    STOP,
)

RESTART_AGENT, LOGSAGE, COMBINED, FR = "nvrx_restart_agent", "nvrx_logsage", "nvrx_combined", "nvrx_fr"
LOG_KINDS = (RESTART_AGENT, LOGSAGE, COMBINED)
FR_KINDS = (FR,)
# Kinds that cannot run without an OpenAI-compatible endpoint (the Restart Agent only uses one
# for its optional L1 stage).
NEEDS_ENDPOINT = (LOGSAGE, COMBINED)
PACKAGE = "nvidia_resiliency_ext"
MODULES = {
    RESTART_AGENT: f"{PACKAGE}.attribution.restart_agent.cli",
    LOGSAGE: f"{PACKAGE}.attribution.log_analyzer.nvrx_logsage",
    COMBINED: f"{PACKAGE}.attribution.combined_log_fr.combined_log_fr",
    FR: f"{PACKAGE}.attribution.trace_analyzer.fr_attribution",
}
DUMP_PATTERN = "_dump_*"
SRC_ENV, PYTHON_ENV = "NVRX_SRC", "NVRX_PYTHON"
KEY_FILE_ENV = "LLM_API_KEY_FILE"  # how NVRx's analyzers find their key (never the key itself)
RESTART_AGENT_SCHEMA = "restart_agent_response.v1"


class NvrxOutputError(ValueError):
    """What an NVRx analyzer printed cannot be read as a verdict."""


@dataclass(frozen=True)
class Checkout:
    """Where NVRx's code is and which interpreter runs it."""

    src: str
    python: str

    def env(self, key_file: str = "") -> dict[str, str]:
        """The environment of an NVRx process: its checkout first on the path, its key file."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (self.src, env.get("PYTHONPATH", "")) if p)
        env.pop("LLM_API_KEY", None)  # only the configured key file, never a key from our environment
        if key_file:
            env[KEY_FILE_ENV] = os.path.expanduser(key_file)
        return env

    def digest(self) -> str:
        """NVRx's attribution code as it is now: a patched checkout re-runs its analyzers."""
        digest = hashlib.sha256()
        root = Path(self.src) / PACKAGE / "attribution"
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
        return digest.hexdigest()[:16]


def checkout(config: Mapping[str, Any], where: str, kind: str) -> Checkout:
    """The configured checkout (`nvrx.src`, else $NVRX_SRC) and interpreter (`nvrx.python`, else
    $NVRX_PYTHON, else this one); a ConfigError of one line naming what to point it at."""
    section = config.get("nvrx") or {}
    src = str(section.get("src") or os.environ.get(SRC_ENV, "")).strip()
    python = str(section.get("python") or os.environ.get(PYTHON_ENV, "") or sys.executable).strip()
    if not src:
        raise ConfigError(
            f"{where}: kind {kind} runs NVRx from a checkout: set nvrx.src (or {SRC_ENV}) to its src/ folder"
        )
    if not (Path(src) / PACKAGE / "attribution").is_dir():
        raise ConfigError(f"{where}: nvrx.src {src!r} is not an NVRx checkout's src/ (no {PACKAGE}/attribution/ in it)")
    if not os.access(python, os.X_OK):
        raise ConfigError(f"{where}: nvrx.python {python!r} is not an executable interpreter")
    return Checkout(str(Path(src).resolve()), python)


def endpoint(config: Mapping[str, Any], entry: Mapping[str, Any], where: str, kind: str) -> dict[str, Any]:
    """The analyzer's OpenAI-compatible endpoint (its own `llm`, else `logsage.llm`); refused in
    one line when a kind that needs one has none. Empty for the Restart Agent without one."""
    merged = {**(config.get("logsage") or {}).get("llm", {}), **(entry.get("llm") or {})}
    configured = bool(merged.get("base_url") and merged.get("model"))
    if kind in NEEDS_ENDPOINT and not configured:
        raise ConfigError(
            f"{where}: kind {kind} needs an LLM endpoint: set llm.base_url and llm.model (or logsage.llm's)"
        )
    return merged if configured else {}


# ---- command lines ----------------------------------------------------------------------------


def restart_agent_argv(python: str, log: Path, llm: Mapping[str, Any]) -> list[str]:
    """Deterministic (L0A-L4, `--disable-l1`) without an endpoint; with one, L1 enrichment on.
    The agent refuses a relative log path."""
    argv = [python, "-m", MODULES[RESTART_AGENT], str(log.resolve())]
    if not llm:
        return [*argv, "--disable-l1"]
    argv += ["--enable-l1", "--llm-base-url", str(llm["base_url"]), "--llm-model", str(llm["model"])]
    if llm.get("api_key_file"):
        argv += ["--llm-api-key-file", os.path.expanduser(str(llm["api_key_file"]))]
    return [*argv, "--llm-timeout-seconds", str(float(llm.get("timeout_s", 60)))]


def logsage_argv(python: str, log: Path, llm: Mapping[str, Any]) -> list[str]:
    return [
        python, "-m", MODULES[LOGSAGE], "--log-path", str(log.resolve()), "-m", str(llm["model"]),
        "-b", str(llm["base_url"]), "--exclude_nvrx_logs", "--emit-stdout",
    ]  # fmt: skip


def fr_argv(python: str, folder: Path) -> list[str]:
    return [python, "-m", MODULES[FR], "--fr-path", str(folder.resolve()), "-p", DUMP_PATTERN]


# combined_log_fr only logs its merged answer, at INFO, without configuring logging: the runner turns
# INFO records on (on stdout, in logging's default format) and then runs the module as its own main.
COMBINED_RUNNER = (
    "import logging, runpy, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout); "
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)"
)


def combined_argv(python: str, log: Path, dumps: Path, llm: Mapping[str, Any]) -> list[str]:
    return [
        python, "-c", COMBINED_RUNNER, MODULES[COMBINED], "--log-path", str(log.resolve()),
        "--fr-path", str(dumps.resolve()), "-m", str(llm["model"]), "-b", str(llm["base_url"]), "--exclude_nvrx_logs",
    ]  # fmt: skip


def dumps_beside(log: Path) -> Path | None:
    """A cell's dump folder, for the cell's stripped log (elsewhere, e.g. a corpus log: None)."""
    if not log.as_posix().endswith(layout.STRIPPED_LOG):
        return None
    cell_dir = log.parents[len(Path(layout.STRIPPED_LOG).parts) - 1]
    return cell_dir / Path(layout.FR_DUMP_PREFIX).parent


def copy_dumps(paths: list[str], dest: Path) -> tuple[list[int], list[dict[str, str]]]:
    """Copies an NVRx tool may read (it would `pickle.load` the originals): each dump read by
    faultloop's restricted unpickler and pickled again as `_dump_<rank>`, not normalised. The
    ranks copied, and the files left out with why."""
    ranks, skipped = [], []
    for path in paths:
        match = re.search(r"(\d+)(?:\.json)?$", os.path.basename(path))
        if match is None:
            skipped.append({"file": path, "error": "no rank in the file name"})
            continue
        try:
            dump = fr.load_dump(path)
        except (ValueError, pickle.UnpicklingError) as exc:
            skipped.append({"file": path, "error": str(exc)})
            continue
        rank = int(match.group(1))
        (dest / f"_dump_{rank}").write_bytes(pickle.dumps(dump, protocol=pickle.HIGHEST_PROTOCOL))
        ranks.append(rank)
    return sorted(ranks), skipped


# ---- the Restart Agent -> logsage.json ---------------------------------------------------------

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
        return "none", None
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


def restart_agent_verdict(response: Mapping[str, Any], *, l1: bool = False) -> dict[str, Any]:
    """A `restart_agent_response.v1` object as a verdict in the logsage.json shape. The retry
    policy that made the decision is kept (`policy`), so the report can tell a policy from a miss."""
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
    return {
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
    }


# ---- nvrx_logsage's printout -> logsage.json ---------------------------------------------------

_DECISION_RE = re.compile("|".join(re.escape(d) for d in (*RESTART_DECISIONS, "LLM FAILURE")))
_ATTRIBUTION_RE = re.compile(
    r"Primary issues:\s*\[([^\]]*)\],?\s*Secondary issues:\s*\[([^\]]*)\]"
    r"|primary_issues=\[([^\]]*)\],\s*secondary_issues=\[([^\]]*)\]"  # its result's repr
)
_CHECKPOINT_RE = re.compile(r"checkpoint_saved\W+(true|false)|checkpoint_saved_flag=(1|0)", re.IGNORECASE)


def logsage_verdict(text: str) -> dict[str, Any]:
    """nvrx_logsage's `--emit-stdout` payload (a Python repr holding upstream's five parts): the
    decision, the attribution lists and checkpoint_saved, wherever they are. It states no
    category or fault type."""
    decision = _DECISION_RE.search(text)
    if decision is None:
        raise NvrxOutputError(f"nvrx_logsage printed no decision: {text.strip()[:120]!r}")
    attribution = _ATTRIBUTION_RE.search(text)
    groups = [g for g in attribution.groups() if g is not None] if attribution else ["", ""]
    primary, secondary = ([int(x) for x in re.findall(r"\d+", group)] for group in groups[:2])
    checkpoint = _CHECKPOINT_RE.search(text)
    saved = bool(checkpoint and (checkpoint.group(1) or checkpoint.group(2) or "").lower() in ("true", "1"))
    return {
        "restart": decision.group(0),
        "primary_ranks": primary,
        "secondary_ranks": [r for r in secondary if r not in primary],
        "fault_category": None,
        "fault_type": None,
        "explanation": text.strip()[:2000],
        "checkpoint_saved": saved,
        "mode": LOGSAGE,
    }


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


# ---- combined_log_fr's merged answer -> logsage.json -------------------------------------------

_MERGED_RE = re.compile(r"attribution_result: (.*?)(?=^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):|\Z)", re.S | re.M)
_EXCLUDED_RE = re.compile(r"list of ranks to be excluded:([^\n]*)", re.I)


def combined_verdict(output: str) -> dict[str, Any]:
    """combined_log_fr's merged answer (its last `attribution_result` record): the ranks it would
    exclude are the primaries; the restart decision is the one the answer states, else its log
    side's (nvrx_logsage's, earlier in the printout). It states no category or fault type."""
    answers = _MERGED_RE.findall(output)
    if not answers:
        raise NvrxOutputError("combined_log_fr logged no attribution_result")
    answer = answers[-1].strip()
    excluded = _EXCLUDED_RE.search(answer)
    decision = _DECISION_RE.search(answer) or _DECISION_RE.search(output)
    return {
        "restart": decision.group(0) if decision else "ERRORS NOT FOUND",
        "primary_ranks": sorted({int(r) for r in re.findall(r"\d+", excluded.group(1))}) if excluded else [],
        "secondary_ranks": [],
        "fault_category": None,
        "fault_type": None,
        "explanation": answer[:2000],
        "mode": COMBINED,
    }
