"""What an analyzer is: one protocol every kind implements, log and flight-recorder alike.

A kind (one module under `analyze/kinds/`, one row of `registry.TABLE`) states
- its `name` (the config's `kind:`) and one line of `summary` (the docs' and the CLI's kind tables);
- its `input`: a cell's stripped log, its flight-recorder dumps, or other analyzers' verdicts;
- its configuration schema (`options`: the JSON-schema properties of its config entry's own
  keys; every kind also takes `timeout_s`), checked and resolved into settings by `configure`;
- what its fingerprint covers (`fingerprint`: its code and settings; a changed one re-runs it);
- how it runs and how its output becomes the typed verdict (`run`: a `LogVerdict` or an
  `FrVerdict` through the contract's validator, with its text form and what a tool printed).
A failure is raised as AnalyzerFailure; the runner records it as the analyzer's result for the cell.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import shutil
import sys
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

from faultloop.analyze.fr import dumps
from faultloop.analyze.redact import Redactor, redact_file
from faultloop.analyze.running import DEFAULT_TIMEOUT_S, AnalyzerFailure, file_digest
from faultloop.contracts import OK, FrVerdict, LogVerdict, RecordError, RunRecord
from faultloop.core import layout
from faultloop.fingerprint import code_fingerprint, source_fingerprint


class Input(StrEnum):
    """What an analyzer reads; each has its config section, folder, result files and index."""

    LOG = "log"  # the cell's main log, markers stripped -> LogVerdict (config `analyzers`)
    DUMPS = "dumps"  # the cell's flight-recorder dumps -> FrVerdict (config `fr_analyzers`)
    VERDICTS = "verdicts"  # other analyzers' verdicts of the cell -> LogVerdict, scored as a log analyzer


@dataclass(frozen=True)
class LogSource:
    """A run's stripped log; staging: where neutral copies go (no path an analyzer sees names the
    fault). A job's life: `earlier`, the stripped logs of the job's earlier attempts (oldest first;
    a kind with `history` reads them); `job` and `attempt`, the job's neutral identity (its first
    run's job id) and this attempt's number; `nodes`, this run's allocation (node index -> name),
    which a verdict's drain_nodes is checked against."""

    path: Path
    staging: Path | None = None
    earlier: tuple[Path, ...] = ()
    job: str = ""
    attempt: int = 1
    nodes: tuple[str, ...] = ()

    def digest(self, *, history: bool = False) -> str:
        """This log's digest; with history, also the earlier attempts' (where there are any)."""
        if not (history and self.earlier):
            return file_digest(self.path)
        parts = [file_digest(self.path), *(file_digest(log) for log in self.earlier)]
        return hashlib.sha256(" ".join(parts).encode()).hexdigest()[:16]


def run_of(stripped_log: Path) -> Path:
    """The run folder whose stripped log this is (layout.STRIPPED_LOG)."""
    return stripped_log.parents[len(Path(layout.STRIPPED_LOG).parts) - 1]


@dataclass(frozen=True)
class DumpsSource:
    """A cell's dump files and the job shape they are read against."""

    fr_path: str
    world_size: int | None
    gpus_per_node: int
    segment_size: int
    manifest: Path | None = None  # this run of the job (its digest is part of the input's)

    def digest(self) -> str:
        """The dump files (names and sizes) of this run of the job."""
        digest = hashlib.sha256(file_digest(self.manifest).encode() if self.manifest else b"")
        for path in dumps.find_dumps(self.fr_path):
            digest.update(f"{os.path.basename(path)}:{os.path.getsize(path)}\n".encode())
        return digest.hexdigest()[:16]


@dataclass(frozen=True)
class VerdictsSource:
    """A cell's primary log analyzer's and first FR analyzer's results, as their indexes list them."""

    cell_dir: Path
    log_run: RunRecord | None
    fr_run: RunRecord | None
    nodes: tuple[str, ...] = ()  # the run's allocation, which a merged drain_nodes is checked against

    @property
    def log_path(self) -> Path:
        name = self.log_run.analyzer if self.log_run else ""
        return layout.stored(self.cell_dir / layout.analyzer_dir(name), layout.VERDICT_JSON)

    @property
    def fr_path(self) -> Path:
        name = self.fr_run.analyzer if self.fr_run else ""
        return self.cell_dir / layout.fr_analyzer_dir(name) / layout.FR_JSON

    def digest(self) -> str:
        return hashlib.sha256(
            "".join(
                f"{run.analyzer}:{run.fingerprint}:{run.status}:{file_digest(path)}\n" if run else "-\n"
                for run, path in ((self.log_run, self.log_path), (self.fr_run, self.fr_path))
            ).encode()
        ).hexdigest()[:16]

    def log(self) -> LogVerdict | None:
        """The log verdict; None where that analyzer failed or left none."""
        return _read(self.log_run, self.log_path, LogVerdict)

    def fr(self) -> FrVerdict | None:
        return _read(self.fr_run, self.fr_path, FrVerdict)


def _read(run: RunRecord | None, path: Path, reader: type[LogVerdict] | type[FrVerdict]) -> Any:
    if run is None or run.status != OK:
        return None
    try:
        return reader.read(path)
    except RecordError:
        return None


Source = LogSource | DumpsSource | VerdictsSource


@dataclass(frozen=True)
class Answer:
    """An analyzer's result on one input: the typed verdict, its text form, what a tool printed,
    the files it keeps beside them for the job's next attempt (name -> text: `Kind.kept`) and what
    was redacted from the text it sent to an LLM endpoint (kind -> count)."""

    verdict: LogVerdict | FrVerdict
    text: str
    raw: str | None = None
    kept: dict[str, str] = field(default_factory=dict)
    redactions: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Spec:
    """One configured analyzer, resolved; travels to the analysis job as JSON."""

    name: str
    kind: str
    input: Input
    timeout_s: float = DEFAULT_TIMEOUT_S
    settings: dict[str, Any] = field(default_factory=dict)  # what its kind's `configure` resolved
    fingerprint: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Spec:
        return cls(**{**data, "input": Input(data["input"])})


class Kind(ABC):
    """One kind of analyzer (see the module's docstring); an instance is a row of the table."""

    name: ClassVar[str]
    input: ClassVar[Input]
    summary: ClassVar[str]
    options: ClassVar[Mapping[str, Any]] = {}
    history: ClassVar[bool] = False  # reads the job's earlier attempts (LogSource.earlier)
    kept: ClassVar[tuple[str, ...]] = ()  # the files its answer keeps beside its verdict (Answer.kept)

    def configure(self, entry: Mapping[str, Any], config: Mapping[str, Any], where: str) -> dict[str, Any]:
        """The settings of a config entry (its keys other than kind and timeout_s, already known to
        be among `options`); a ConfigError naming `where` when they cannot work."""
        return {}

    def fingerprint(self, spec: Spec, config: Mapping[str, Any]) -> str:
        """What its verdicts depend on: the code its module runs (every faultloop module it imports,
        transitively, with the data beside them: `fingerprint.code_fingerprint`, never a hand list)
        and its settings (`fingerprint_settings`). A kind from outside the package is fingerprinted
        by its own module's source."""
        settings = self.fingerprint_settings(spec, config)
        module = type(self).__module__
        if module.partition(".")[0] == __name__.partition(".")[0]:
            return code_fingerprint(module, settings=settings)
        return source_fingerprint(sys.modules[module], settings=settings)

    def fingerprint_settings(self, spec: Spec, config: Mapping[str, Any]) -> Any:
        """The settings a verdict depends on (default: the kind's name and resolved settings)."""
        return (self.name, spec.settings)

    def input_digest(self, spec: Spec, source: Source) -> str:
        """What its verdict on this input depends on besides its code (a stored result is reused
        while this and the fingerprint are unchanged): the input, and with `history` the earlier
        attempts' logs."""
        if isinstance(source, LogSource):
            return source.digest(history=self.history)
        return source.digest()

    @abstractmethod
    def run(self, spec: Spec, source: Any) -> Answer:
        """The verdict on one input (of this kind's `input`); AnalyzerFailure when there is none."""


def checked(data: Mapping[str, Any], *, mode: str = "") -> LogVerdict:
    """An analyzer's answer through the contract's validator; what is wrong is the failure."""
    try:
        return LogVerdict.from_json(data, mode=mode)
    except RecordError as exc:
        raise AnalyzerFailure(str(exc)) from None


def log_answer(verdict: LogVerdict, raw: str | None = None, redactions: Mapping[str, int] | None = None) -> Answer:
    return Answer(verdict, verdict.to_text(), raw, redactions=dict(redactions or {}))


@contextlib.contextmanager
def staged_log(source: LogSource, redactor: Redactor | None = None) -> Iterator[Path]:
    """The log under a neutral name: a cell's path spells its injected fault, and analyzers that
    are not ours must not see it. A hard link where the file system allows, else a copy; for an
    analyzer that sends it to an LLM endpoint, a copy with its secrets replaced (redactor: the
    endpoint's redaction, which counts them)."""
    root = source.staging if source.staging is not None else Path(tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="analyze-", dir=root) as tmp:
        neutral = Path(tmp) / "main_workload.log"
        if source.path.is_file() and redactor is not None:
            redact_file(source.path, neutral, redactor)
        elif source.path.is_file():
            try:
                os.link(source.path, neutral)
            except OSError:
                shutil.copyfile(source.path, neutral)
        yield neutral


def package_version(distribution: str) -> str | None:
    """An installed distribution's version (part of a fingerprint), None when it is absent."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
