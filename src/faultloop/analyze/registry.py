"""Named log analyzers, run side by side on every cell: which are configured (the `analyzers`
config, its checks and each analyzer's fingerprint), one resolved analyzer on a log, and a cell's
analyzers run together (rule logsage).

Every analyzer reads one log and answers a `contracts.LogVerdict` (`kinds` says how each kind
does). A failure is that analyzer's recorded result for the cell, never an exception for the
workflow. One job per cell runs all of them (one job per analyzer would multiply planning time on
large pools); each result is stored with the analyzer's fingerprint and a digest of the log it
read, and reused while both are unchanged, so editing one analyzer re-runs only its work.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from faultloop import faults
from faultloop.analyze import baselines, kinds, logsage, nvrx
from faultloop.analyze.kinds import BUILTIN, COMMAND, KINDS, LLM, UPSTREAM
from faultloop.analyze.llm import LLMSettings
from faultloop.analyze.nvrx import run as nvrx_run
from faultloop.analyze.nvrx import tools as nvrx_tools
from faultloop.analyze.running import (
    DEFAULT_TIMEOUT_S,
    NAME_RE,
    AnalyzerFailure,
    Outcome,
    file_digest,
    param_json,
    run_with_reuse,
    timed,
)
from faultloop.contracts import LogVerdict, RunRecord, verdicts, write_index
from faultloop.core import layout
from faultloop.core.errors import ConfigError
from faultloop.fingerprint import source_fingerprint

RESERVED_NAMES = frozenset({"fr"})  # analysis/fr/ holds the flight-recorder analyzers
UPSTREAM_DISTRIBUTION = "nvidia-resiliency-ext"


@dataclass(frozen=True)
class AnalyzerSpec:
    """One entry of the `analyzers` config, resolved; travels to the analysis job as JSON."""

    name: str
    kind: str
    command: str = ""
    watch: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    llm: dict[str, Any] = field(default_factory=dict)  # the endpoint of an llm analyzer
    fingerprint: str = ""
    nvrx: dict[str, str] = field(default_factory=dict)  # an NVRx kind's checkout (nvrx.tools.Checkout)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AnalyzerSpec:
        return cls(**{**data, "watch": tuple(data.get("watch", ()))})


class Analyzer:
    """A resolved log analyzer: `analyze(path)` gives its verdict or raises AnalyzerFailure."""

    def __init__(self, spec: AnalyzerSpec) -> None:
        self.spec = spec

    @property
    def name(self) -> str:
        return self.spec.name

    def analyze(self, log_path: str | os.PathLike[str], *, staging: Path | None = None) -> LogVerdict:
        """The verdict (the call a corpus evaluator makes); any failure is raised as AnalyzerFailure."""
        outcome = self.attempt(Path(log_path), staging=staging)
        if not isinstance(outcome.verdict, LogVerdict):
            raise AnalyzerFailure(outcome.error or "no verdict", outcome.stderr_tail)
        return outcome.verdict

    def attempt(self, log_path: Path, *, staging: Path | None = None) -> Outcome:
        """Run once, timed; every failure becomes part of the outcome."""

        def work() -> tuple[LogVerdict, str, str | None]:
            verdict, raw = self._analyze(log_path, staging)
            return verdict, verdict.to_text(), raw

        return timed(work)

    def _analyze(self, path: Path, staging: Path | None) -> tuple[LogVerdict, str | None]:
        kind = self.spec.kind
        if kind == BUILTIN:
            return kinds.builtin(path), None
        if kind in baselines.BASELINES:
            return kinds.baseline(kind, path), None
        if kind == LLM:
            return kinds.llm(path, llm_settings(self.spec.llm)), None
        with kinds.staged_log(path, staging) as neutral:
            if kind in nvrx.LOG_KINDS:
                checkout = nvrx_tools.Checkout(**self.spec.nvrx)
                return nvrx_run.analyze_log(kind, checkout, self.spec.llm, self.spec.timeout_s, neutral, source=path)
            if kind == UPSTREAM:
                return kinds.upstream(neutral), None
            return kinds.command(self.spec.command, self.spec.timeout_s, neutral)


def llm_settings(endpoint: Mapping[str, Any]) -> LLMSettings:
    return LLMSettings(
        base_url=str(endpoint.get("base_url", "")),
        model=str(endpoint.get("model", "")),
        api_key_file=endpoint.get("api_key_file") or None,
        timeout_s=float(endpoint.get("timeout_s", 60)),
        max_retries=int(endpoint.get("max_retries", 2)),
    )


# ---- configuration ---------------------------------------------------------------------------


def _watched_digest(paths: tuple[str, ...], name: str) -> list[tuple[str, str]]:
    out = []
    for path in paths:
        try:
            out.append((path, hashlib.sha256(Path(path).read_bytes()).hexdigest()))
        except OSError as exc:
            raise ConfigError(
                f"config key 'analyzers.{name}.watch': cannot read {path}: {exc.strerror or exc}"
            ) from None
    return out


def fingerprint(spec: AnalyzerSpec) -> str:
    """What the analyzer's verdicts depend on: its code, settings, and for commands the watched files."""
    own = (kinds, verdicts)  # how answers are read and checked
    if spec.kind == BUILTIN:
        return logsage.analyzer_fingerprint((BUILTIN, source_fingerprint(faults, *own)))
    if spec.kind == LLM:
        endpoint = {k: v for k, v in sorted(spec.llm.items()) if "key" not in k}
        return logsage.analyzer_fingerprint((LLM, endpoint, source_fingerprint(faults, *own)))
    if spec.kind == UPSTREAM:
        version = package_version(UPSTREAM_DISTRIBUTION)
        return logsage.analyzer_fingerprint((UPSTREAM, version, source_fingerprint(*own)))
    if spec.kind in baselines.BASELINES:
        return source_fingerprint(baselines, faults, *own, settings=spec.kind)
    if spec.kind in nvrx.LOG_KINDS:
        endpoint = {k: v for k, v in sorted(spec.llm.items()) if "key" not in k}
        checkout = nvrx_tools.Checkout(**spec.nvrx)
        settings = (spec.kind, checkout.digest(), checkout.python, endpoint, spec.timeout_s)
        return source_fingerprint(nvrx, *own, settings=settings)
    return source_fingerprint(*own, settings=(spec.command, spec.timeout_s, _watched_digest(spec.watch, spec.name)))


def package_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def spec_from_config(name: str, entry: Mapping[str, Any] | None, config: Mapping[str, Any]) -> AnalyzerSpec:
    """Validate one `analyzers` entry; errors name the key. A name that is a kind needs no entry."""
    where = f"config key 'analyzers.{name}'"
    if not NAME_RE.match(name) or name in RESERVED_NAMES:
        raise ConfigError(f"{where}: analyzer names are letters, digits, '_' and '-' (not {sorted(RESERVED_NAMES)})")
    entry = dict(entry) if entry else {"kind": name}
    kind = entry.get("kind")
    if kind not in KINDS:
        hint = "" if entry.get("kind") else " (define it under `analyzers` in the config or site file)"
        raise ConfigError(f"{where}: unknown kind {kind!r}; kinds are {', '.join(KINDS)}{hint}")
    timeout = float(entry.get("timeout_s", DEFAULT_TIMEOUT_S))
    if timeout <= 0:
        raise ConfigError(f"{where}.timeout_s: must be positive")
    command, watch, endpoint = str(entry.get("command") or ""), tuple(entry.get("watch") or ()), {}
    if kind == COMMAND and "{log}" not in command:
        raise ConfigError(f"{where}.command: a command analyzer's command line must contain {{log}}")
    if kind != COMMAND and (command or watch):
        raise ConfigError(f"{where}: 'command' and 'watch' are for kind command only")
    if kind == LLM:
        endpoint = {**config.get("logsage", {}).get("llm", {}), **(entry.get("llm") or {})}
        if not endpoint.get("base_url") or not endpoint.get("model"):
            raise ConfigError(f"{where}: an llm analyzer needs llm.base_url and llm.model (its own or logsage.llm's)")
    if kind == UPSTREAM and importlib.util.find_spec("logsage") is None:
        raise ConfigError(
            f"{where}: kind upstream needs NVRx's log analyzer ({UPSTREAM_DISTRIBUTION}, "
            "package `logsage`), which is not installed"
        )
    checkout: dict[str, str] = {}
    if kind in nvrx.LOG_KINDS:
        checkout = asdict(nvrx_tools.checkout(config, where, kind))
        endpoint = nvrx_tools.endpoint(config, entry, where, kind)
    spec = AnalyzerSpec(name, kind, command, watch, timeout, endpoint, nvrx=checkout)
    return replace(spec, fingerprint=fingerprint(spec))


def selected(config: Mapping[str, Any]) -> list[Analyzer]:
    """The analyzers this invocation runs, in order; the first is the report's primary."""
    entries = config.get("analyzers") or {}
    if not isinstance(entries, Mapping):
        raise ConfigError("config key 'analyzers': expected a mapping of named analyzers")
    chosen = [Analyzer(spec_from_config(name, entry, config)) for name, entry in entries.items() if entry is not None]
    if not chosen:
        raise ConfigError("config key 'analyzers': no log analyzer selected")
    return chosen


def resolve(name: str, config: Mapping[str, Any]) -> Analyzer:
    """One analyzer by name, as the configuration defines it (usable without Snakemake)."""
    return Analyzer(spec_from_config(name, (config.get("analyzers") or {}).get(name), config))


# ---- running a cell's analyzers, reusing unchanged results -------------------------------------


def analyze_cell(analyzers: list[Analyzer], log: Path, index: Path, *, fresh: bool = False) -> list[RunRecord]:
    """Every analyzer on a cell's stripped log; index lists what each one's result is."""
    cell_dir = index.parent.parent
    digest = file_digest(log)
    staging = cell_dir.parent / ".staging"  # beside the cells: no path an analyzer sees names the fault
    records = []
    for analyzer in analyzers:
        spec = analyzer.spec
        record = run_with_reuse(
            spec.name,
            spec.kind,
            spec.fingerprint,
            digest,
            cell_dir / layout.analyzer_dir(spec.name),
            fresh=fresh,
            files=(layout.LOGSAGE_JSON, layout.LOGSAGE_TEXT),
            attempt=partial(analyzer.attempt, log, staging=staging),
        )
        state = "reused" if record.reused else record.status
        print(
            f"{spec.name} ({spec.kind}): {state} in {record.wall_s:.2f} s"
            + (f": {record.error}" if record.error else ""),
            file=sys.stderr,
        )
        records.append(record)
    write_index(index, records)
    return records


def specs_json(analyzers: list[Analyzer]) -> str:
    """The analysis job's argument (and Snakemake param: any fingerprint change re-runs the job)."""
    return param_json([a.spec.to_json() for a in analyzers])
