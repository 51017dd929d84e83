"""Running analyzers, log and flight-recorder alike: one timed attempt whose every failure is its
outcome, programs in their own process group, and reuse of a result whose analyzer fingerprint
and input are unchanged (its files are then left untouched)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultloop.contracts import FAILED, OK, FrVerdict, LogVerdict, RecordError, RunRecord
from faultloop.core import atomic, layout
from faultloop.signals import signal_name

DEFAULT_TIMEOUT_S = 600.0
TAIL_CHARS = 2000
MAX_OUTPUT_BYTES = 16 << 20  # the most an external analyzer's printed answer is read of
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")  # an analyzer's name: also its folder's


class AnalyzerFailure(RuntimeError):
    """An analyzer gave no usable verdict; recorded for the cell with what it printed on stderr
    and what was redacted from the text it sent to an LLM endpoint before it failed."""

    def __init__(self, message: str, stderr_tail: str = "", redactions: Mapping[str, int] | None = None) -> None:
        super().__init__(message)
        self.stderr_tail = stderr_tail
        self.redactions = dict(redactions or {})


@dataclass
class Outcome:
    """One attempt of one analyzer on one input: its verdict, or why there is none."""

    verdict: LogVerdict | FrVerdict | None
    text: str
    raw: str | None  # what an external analyzer printed
    error: str | None
    stderr_tail: str
    wall_s: float
    kept: dict[str, str] = field(default_factory=dict)  # files it keeps beside its verdict (name -> text)
    redactions: dict[str, int] = field(default_factory=dict)  # what left for an LLM redacted, by kind


Work = tuple[LogVerdict | FrVerdict, str, str | None, dict[str, str], dict[str, int]]


def timed(work: Callable[[], Work]) -> Outcome:
    """Run one analysis (verdict, text, raw output, kept files, redactions), timed; every failure
    becomes the outcome."""
    start = time.perf_counter()
    try:
        verdict, text, raw, kept, redactions = work()
    except AnalyzerFailure as exc:
        return Outcome(
            None, "", None, str(exc), exc.stderr_tail, time.perf_counter() - start, redactions=exc.redactions
        )
    except Exception as exc:
        return Outcome(
            None,
            "",
            None,
            f"crashed: {type(exc).__name__}: {exc}",
            traceback.format_exc()[-TAIL_CHARS:],
            time.perf_counter() - start,
        )
    return Outcome(verdict, text, raw, None, "", time.perf_counter() - start, kept, redactions)


def tail(path: Path, limit: int = TAIL_CHARS) -> str:
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - limit))
        return handle.read().decode("utf-8", "replace")


def run_process(
    argv: list[str], stdout: Path, stderr: Path, timeout_s: float, *, env: Mapping[str, str] | None = None
) -> int:
    """Run a program in its own process group, so that a timeout kills everything it started;
    its exit status, or AnalyzerFailure with the tail of its stderr when it runs out of time.
    env: the program's whole environment (default: this process's)."""
    with open(stdout, "wb") as so, open(stderr, "ab") as se:
        proc = subprocess.Popen(argv, stdout=so, stderr=se, stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise AnalyzerFailure(f"timed out after {timeout_s:g} s", tail(stderr)) from None


def exit_reason(status: int) -> str:
    return f"killed by {signal_name(-status)}" if status < 0 else f"exited with status {status}"


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    if path.is_file():
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()[:16]


def run_with_reuse(
    name: str,
    kind: str,
    fingerprint_: str,
    input_digest: str,
    directory: Path,
    *,
    fresh: bool,
    files: tuple[str, str],
    attempt: Callable[[], Outcome],
    kept: tuple[str, ...] = (),
) -> RunRecord:
    """Run one analyzer into its folder, or reuse its stored result (files untouched) when neither
    its fingerprint nor its input changed. files: the names of its JSON and text results; kept:
    the files it may keep beside them (a stale one is removed when it runs again)."""
    json_name, text_name = files
    if not fresh:
        try:
            record = RunRecord.read(directory / layout.RUN_JSON)
        except RecordError:
            record = None
        if record is not None:
            record.reused = True
            have_result = record.status != OK or layout.stored(directory, json_name).is_file()
            if record.fingerprint == fingerprint_ and record.input_digest == input_digest and have_result:
                return record
    outcome = attempt()
    directory.mkdir(parents=True, exist_ok=True)
    stale_names = (json_name, text_name, layout.RAW_OUTPUT, *kept, *(layout.LEGACY_NAMES.get(n, n) for n in files))
    for stale in stale_names:
        (directory / stale).unlink(missing_ok=True)
    if outcome.verdict is not None:
        outcome.verdict.write(directory / json_name)
        atomic.write_atomic(directory / text_name, outcome.text)
        for kept_name, kept_text in outcome.kept.items():
            atomic.write_atomic(directory / kept_name, kept_text)
    if outcome.raw is not None:
        atomic.write_atomic(directory / layout.RAW_OUTPUT, outcome.raw)
    record = RunRecord(
        name,
        kind,
        fingerprint_,
        input_digest,
        OK if outcome.error is None else FAILED,
        outcome.error,
        outcome.stderr_tail,
        round(outcome.wall_s, 3),
        time.time(),
        redactions=dict(sorted(outcome.redactions.items())),
    )
    record.write(directory / layout.RUN_JSON)
    return record


_JSON_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"')


def param_json(data: Any) -> str:
    """JSON for a Snakemake params string: Snakemake reads `{name}` there as a wildcard, so braces
    inside strings (a command's {log}) are written as JSON escapes, which json.loads restores."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return _JSON_STRING_RE.sub(lambda m: m.group(0).replace("{", "\\u007b").replace("}", "\\u007d"), text)
