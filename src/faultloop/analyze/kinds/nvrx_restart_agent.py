"""NVRx's Restart Agent (`attribution/restart_agent`) from the checkout: deterministic
(`--disable-l1`) by default, its L1 model enrichment on when the analyzer has an endpoint.

Over a job's life it keeps its own history, as its design has it (RUNTIME.md): each attempt runs
with the job's id and the attempt's number as its cycle (`--job-id`, `--cycle-id`), seeded with the
attempt records the previous attempt's run wrote (`--attempt-records-json-in`), and writes them
out again (`--attempt-records-json-out`), kept beside its verdict for the next attempt. The job id
is the job's first run's id, which names no fault."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faultloop.analyze.analyzer import LogSource, Source, Spec, run_of
from faultloop.analyze.nvrx import RESTART_AGENT, outputs, tools
from faultloop.analyze.nvrx.run import NvrxLog
from faultloop.analyze.running import file_digest
from faultloop.contracts import LogVerdict
from faultloop.core import layout

ATTEMPT_RECORDS = "attempt_records.json"  # its records after this attempt, beside its verdict


def records_of(log: Path, name: str) -> Path:
    """The attempt records the analyzer `name` kept in the run whose stripped log is `log`."""
    return run_of(log) / layout.analyzer_dir(name) / ATTEMPT_RECORDS


class NvrxRestartAgent(NvrxLog):
    name = RESTART_AGENT
    summary = (
        "NVRx's Restart Agent (`attribution/restart_agent`) from your checkout (`nvrx.src`): deterministic "
        "(`--disable-l1`) by default, its L1 model enrichment on when the analyzer has an endpoint "
        "(`llm:`, else `logsage.llm`); over a job's life with its own attempt records"
    )
    history = True
    kept = (ATTEMPT_RECORDS,)

    def input_digest(self, spec: Spec, source: Source) -> str:
        assert isinstance(source, LogSource)
        seeded = records_of(source.earlier[-1], spec.name) if source.earlier else None
        parts = [source.digest(history=True), source.job, str(source.attempt), file_digest(seeded) if seeded else ""]
        return hashlib.sha256(" ".join(parts).encode()).hexdigest()[:16]

    def argv(self, python: str, log: Path, llm: Mapping[str, Any], source: LogSource, spec: Spec) -> list[str]:
        argv = tools.restart_agent_argv(python, log, llm)
        if not source.job:
            return argv  # no identity: the agent runs without history, as on a single log
        argv += ["--job-id", source.job, "--cycle-id", str(source.attempt)]
        seeded = records_of(source.earlier[-1], spec.name) if source.earlier else None
        if seeded is not None and seeded.is_file():
            argv += ["--attempt-records-json-in", str(seeded.resolve())]
        return [*argv, "--attempt-records-json-out", str((log.parent / ATTEMPT_RECORDS).resolve())]

    def keep(self, workdir: Path) -> dict[str, str]:
        records = workdir / ATTEMPT_RECORDS
        return {ATTEMPT_RECORDS: records.read_text()} if records.is_file() else {}

    def read(self, raw: str, llm: Mapping[str, Any]) -> LogVerdict:
        return outputs.restart_agent_verdict(outputs.last_json_object(raw), l1=bool(llm))


KIND = NvrxRestartAgent()
