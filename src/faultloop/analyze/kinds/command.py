"""Any executable a user points at (docs/analyzers.md, "The contract of a `command` analyzer"):
run by /bin/sh on the neutral copy of the log, its output faultloop's JSON or upstream's
five-part text; its fingerprint covers the command line, the timeout and its `watch` files."""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from faultloop.analyze import upstream_text
from faultloop.analyze.analyzer import Answer, Input, Kind, LogSource, Spec, checked, log_answer, staged_log
from faultloop.analyze.running import MAX_OUTPUT_BYTES, AnalyzerFailure, exit_reason, run_process, tail
from faultloop.contracts import LogVerdict
from faultloop.core.errors import ConfigError

NAME = "command"


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
    """Upstream's five parts (`upstream_text`), as a verdict."""
    parts = upstream_text.read(text)
    if parts is None:
        raise AnalyzerFailure(f"output is neither faultloop JSON nor upstream text: {text.strip()[:120]!r}")
    return checked(
        {
            "restart": parts.decision,
            "explanation": parts.explanation,
            "primary_ranks": parts.primary_ranks,
            "secondary_ranks": parts.secondary_ranks,
            "detail": parts.detail,
            "checkpoint_saved": parts.checkpoint_saved,
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
        return checked(data, mode=NAME)
    return parse_upstream_text(text)


def _watched_digest(paths: list[str], where: str) -> list[tuple[str, str]]:
    out = []
    for path in paths:
        try:
            out.append((path, hashlib.sha256(Path(path).read_bytes()).hexdigest()))
        except OSError as exc:
            raise ConfigError(f"{where}.watch: cannot read {path}: {exc.strerror or exc}") from None
    return out


class Command(Kind):
    name = NAME
    input = Input.LOG
    summary = "any executable, see below"
    options: ClassVar[Mapping[str, Any]] = {
        "command": {"type": "string", "description": "shell command line with {log} and optionally {out}"},
        "watch": {
            "type": "array",
            "items": {"type": "string"},
            "description": "files whose content is the analyzer's fingerprint",
        },
    }

    def configure(self, entry: Mapping[str, Any], config: Mapping[str, Any], where: str) -> dict[str, Any]:
        command = str(entry.get("command") or "")
        if "{log}" not in command:
            raise ConfigError(f"{where}.command: a command analyzer's command line must contain {{log}}")
        return {"command": command, "watch": [str(p) for p in entry.get("watch") or ()]}

    def fingerprint_settings(self, spec: Spec, config: Mapping[str, Any]) -> Any:
        where = f"config key 'analyzers.{spec.name}'"
        return (spec.settings["command"], spec.timeout_s, _watched_digest(spec.settings["watch"], where))

    def run(self, spec: Spec, source: Any) -> Answer:
        assert isinstance(source, LogSource)
        with staged_log(source) as neutral:
            raw, stderr_tail = run_command(spec.settings["command"], spec.timeout_s, neutral)
        try:
            return log_answer(parse_output(raw), raw)
        except AnalyzerFailure as exc:
            raise AnalyzerFailure(str(exc), stderr_tail) from None


KIND = Command()
