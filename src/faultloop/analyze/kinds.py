"""How each kind of log analyzer reads a log and answers a `LogVerdict`: faultloop's logsage
(`builtin`), its LLM mode (`llm`), NVRx's analyzer (`upstream`), the naive baselines, and any
command a user points at (`command`), whose output is faultloop JSON or upstream's text form.
NVRx's analyzers run from a checkout are kinds too; they are run and read in `analyze.nvrx`.
A failure (a crash, output that is neither form, a hang past the timeout) raises AnalyzerFailure."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from faultloop.analyze import baselines, logsage, nvrx
from faultloop.analyze.llm import LLMSettings
from faultloop.analyze.running import AnalyzerFailure, exit_reason, run_process, tail
from faultloop.contracts import LogVerdict, RecordError
from faultloop.faults import RESTART_DECISIONS

BUILTIN, LLM, UPSTREAM, COMMAND = "builtin", "llm", "upstream", "command"
KINDS = (BUILTIN, LLM, UPSTREAM, COMMAND, *baselines.BASELINES, *nvrx.LOG_KINDS)  # NVRx's: analyze.nvrx
MAX_OUTPUT_BYTES = 16 << 20
# Upstream's decisions plus the one its analyzer prints when its LLM fails.
DECISIONS = (*RESTART_DECISIONS, "LLM FAILURE")
_DECISION_RE = re.compile("|".join(re.escape(d) for d in DECISIONS))
_ATTRIBUTION_RE = re.compile(r"Primary issues:\s*\[([^\]]*)\],?\s*Secondary issues:\s*\[([^\]]*)\]")
_CHECKPOINT_RE = re.compile(r"checkpoint_saved\W+(?:(?P<saved>true)|false)", re.IGNORECASE)


def checked(data: Mapping[str, Any], *, mode: str = "") -> LogVerdict:
    """An analyzer's answer through the contract's validator; what is wrong is the failure."""
    try:
        return LogVerdict.from_json(data, mode=mode)
    except RecordError as exc:
        raise AnalyzerFailure(str(exc)) from None


def builtin(path: Path) -> LogVerdict:
    return checked(logsage.analyze_log(path, logsage.Settings()).to_json())


def baseline(kind: str, path: Path) -> LogVerdict:
    return baselines.BASELINES[kind](path)


def llm(path: Path, endpoint: LLMSettings) -> LogVerdict:
    verdict = logsage.analyze_with_llm(path, logsage.Settings(mode="llm", llm=endpoint))
    if verdict.extra.get("llm_error"):
        # logsage falls back to its deterministic verdict; that is not the LLM's answer.
        raise AnalyzerFailure(f"LLM failed: {verdict.extra['llm_error']}")
    return checked(verdict.to_json())


def upstream(neutral: Path) -> LogVerdict:
    try:
        return checked(logsage.run_upstream(neutral, logsage.Settings("upstream")).to_json())
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        raise AnalyzerFailure(str(exc)) from None


@contextlib.contextmanager
def staged_log(path: Path, staging: Path | None) -> Iterator[Path]:
    """The log under a neutral name: a cell's path spells its injected fault, and analyzers that
    are not ours must not see it. A hard link where the file system allows, else a copy."""
    root = staging if staging is not None else Path(tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="analyze-", dir=root) as tmp:
        neutral = Path(tmp) / "main_workload.log"
        if path.is_file():
            try:
                os.link(path, neutral)
            except OSError:
                shutil.copyfile(path, neutral)
        yield neutral


def run_command(command: str, timeout_s: float, log: Path) -> tuple[str, str]:
    """Run a command analyzer on the log; its output (stdout, or the {out} file) and stderr tail.

    `{log}` and `{out}` are replaced by quoted paths (the rest of the line is the user's shell).
    """
    work = log.parent
    out = work / "verdict.out"
    line = command.replace("{log}", shlex.quote(str(log))).replace("{out}", shlex.quote(str(out)))
    stdout_path, stderr_path = work / "stdout", work / "stderr"
    status = run_process(["/bin/sh", "-c", line], stdout_path, stderr_path, timeout_s)
    stderr_tail = tail(stderr_path)
    if status != 0:
        raise AnalyzerFailure(exit_reason(status), stderr_tail)
    source = out if "{out}" in command else stdout_path
    if not source.is_file():
        raise AnalyzerFailure("wrote no {out} file", stderr_tail)
    if source.stat().st_size > MAX_OUTPUT_BYTES:
        raise AnalyzerFailure(f"output larger than {MAX_OUTPUT_BYTES >> 20} MB", stderr_tail)
    return source.read_text(errors="replace"), stderr_tail


def parse_upstream_text(text: str) -> LogVerdict:
    """Upstream's five parts: restart line, explanation, `Attribution: Primary issues: [...],
    Secondary issues: [...]`, detail, checkpoint_saved. Only the decision is required."""
    lines = [line.strip() for line in text.splitlines()]
    at = next((i for i, line in enumerate(lines) if _DECISION_RE.match(line)), None)
    if at is None:
        raise AnalyzerFailure(f"output is neither faultloop JSON nor upstream text: {text.strip()[:120]!r}")
    rest = [line for line in lines[at + 1 :] if line]
    attribution = _ATTRIBUTION_RE.search(text)
    primary, secondary = (
        [int(x) for x in re.findall(r"-?\d+", group)] for group in (attribution.groups() if attribution else ("", ""))
    )
    after = next((i for i, line in enumerate(rest) if "Primary issues:" in line), None)
    checkpoint = _CHECKPOINT_RE.search(text)
    return checked(
        {
            "restart": _DECISION_RE.match(lines[at]).group(0),  # type: ignore[union-attr]
            "explanation": rest[0] if rest and after != 0 else "",
            "primary_ranks": primary,
            "secondary_ranks": secondary,
            "detail": rest[after + 1]
            if after is not None and after + 1 < len(rest) and not _CHECKPOINT_RE.match(rest[after + 1])
            else "",
            "checkpoint_saved": bool(checkpoint and checkpoint["saved"]),
            "mode": "upstream-text",
        }
    )


def parse_output(text: str) -> LogVerdict:
    """A command's output: a faultloop JSON object, else upstream's text form."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError as exc:
            raise AnalyzerFailure(f"output is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise AnalyzerFailure("output JSON is not an object")
        return checked(data, mode=COMMAND)
    return parse_upstream_text(text)


def command(command_line: str, timeout_s: float, neutral: Path) -> tuple[LogVerdict, str]:
    """A command analyzer's verdict and what it printed."""
    raw, stderr_tail = run_command(command_line, timeout_s, neutral)
    try:
        return parse_output(raw), raw
    except AnalyzerFailure as exc:
        raise AnalyzerFailure(str(exc), stderr_tail) from None
