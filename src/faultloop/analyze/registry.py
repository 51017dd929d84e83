"""The table of analyzer kinds, and everything derived from it: which analyzers a configuration
selects (the `analyzers` and `fr_analyzers` entries, the `combined` switch), their config schema,
and one runner that runs a cell's analyzers of one input and writes its index.

A kind is one module under `analyze/kinds/` implementing `analyzer.Kind` and one row of `TABLE`;
nothing else names it (docs/analyzers.md, "A new kind, in Python"). A failure is that analyzer's
recorded result for the cell, never an exception for the workflow. One job per cell and input runs
all of its analyzers (one job per analyzer would multiply planning time on large pools); each
result is stored with the analyzer's fingerprint and a digest of its input, and reused while both
are unchanged, so editing one analyzer re-runs only its work.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from faultloop.analyze import limits
from faultloop.analyze.analyzer import Input, Kind, LogSource, Source, Spec, VerdictsSource
from faultloop.analyze.kinds import (
    combined,
    command,
    faultloop_fr,
    faultloop_log,
    first_error,
    llm,
    nvrx_combined,
    nvrx_fr,
    nvrx_logsage,
    nvrx_logsage_package,
    nvrx_restart_agent,
    torchfrtrace,
    torchrun_root_cause,
)
from faultloop.analyze.running import (
    DEFAULT_TIMEOUT_S,
    NAME_RE,
    AnalyzerFailure,
    Outcome,
    param_json,
    run_with_reuse,
    timed,
)
from faultloop.contracts import LogVerdict, RecordError, RunRecord, write_index
from faultloop.core import layout
from faultloop.core.errors import ConfigError

# Every kind, in the order the docs and `faultloop analyzers kinds` list them.
TABLE: tuple[Kind, ...] = (
    faultloop_log.KIND,
    llm.KIND,
    nvrx_logsage_package.KIND,
    nvrx_restart_agent.KIND,
    nvrx_logsage.KIND,
    nvrx_combined.KIND,
    command.KIND,
    torchrun_root_cause.KIND,
    first_error.KIND,
    faultloop_fr.KIND,
    torchfrtrace.KIND,
    nvrx_fr.KIND,
    combined.KIND,
)


@dataclass(frozen=True)
class Place:
    """Where an input's analyzers are configured and where their results go in a cell."""

    section: str  # the config key of their entries; a verdicts kind is switched by its name's key
    description: str
    folder: Callable[[str], str]
    files: tuple[str, str]  # the verdict and its text form
    index: str
    memory_limited: bool = False  # untrusted input (logs, dumps): each attempt in a child under `limits`


PLACES = {
    Input.LOG: Place(
        "analyzers",
        "named log analyzers (config/README.md); a null entry disables one",
        layout.analyzer_dir,
        (layout.VERDICT_JSON, layout.VERDICT_TEXT),
        layout.LOGSAGE_INDEX,
        memory_limited=True,
    ),
    Input.DUMPS: Place(
        "fr_analyzers",
        "named flight-recorder analyzers; a null entry disables one",
        layout.fr_analyzer_dir,
        (layout.FR_JSON, layout.FR_TEXT),
        layout.FR_INDEX,
        memory_limited=True,
    ),
    Input.VERDICTS: Place("", "", layout.analyzer_dir, (layout.VERDICT_JSON, layout.VERDICT_TEXT), layout.MERGED_INDEX),
}
# Kind names a release renamed, accepted until the next one with one warning line: (input, old) -> new.
DEPRECATED_KINDS = {
    (Input.LOG, "builtin"): faultloop_log.KIND.name,
    (Input.DUMPS, "builtin"): faultloop_fr.KIND.name,
    (Input.LOG, "upstream"): nvrx_logsage_package.KIND.name,
}
_warned: set[str] = set()
RESERVED_NAMES = frozenset({"fr"})  # analysis/fr/ holds the flight-recorder analyzers
TIMEOUT_OPTION = {"timeout_s": {"type": "number", "exclusiveMinimum": 0}}


def kinds(input_: Input) -> dict[str, Kind]:
    """The kinds of one input, by name."""
    return {kind.name: kind for kind in TABLE if kind.input == input_}


# ---- configuration -----------------------------------------------------------------------------


def spec_from_config(input_: Input, name: str, entry: Mapping[str, Any] | None, config: Mapping[str, Any]) -> Spec:
    """Validate one entry of the input's config section; errors name the key. A name that is a
    kind needs no entry."""
    section = PLACES[input_].section
    where = f"config key '{section}.{name}'"
    reserved = RESERVED_NAMES if input_ == Input.LOG else frozenset()
    if not NAME_RE.match(name) or name in reserved:
        besides = f" (not {', '.join(sorted(reserved))})" if reserved else ""
        raise ConfigError(f"{where}: analyzer names are letters, digits, '_' and '-'{besides}")
    entry = dict(entry) if entry else {"kind": name}
    entry["kind"] = current_kind(input_, entry.get("kind"), where)
    available = kinds(input_)
    kind = available.get(entry.get("kind"))  # type: ignore[arg-type]
    if kind is None:
        hint = "" if entry.get("kind") else f" (define it under `{section}` in the config or site file)"
        raise ConfigError(f"{where}: unknown kind {entry.get('kind')!r}; kinds are {', '.join(available)}{hint}")
    timeout = float(entry.get("timeout_s", DEFAULT_TIMEOUT_S))
    if timeout <= 0:
        raise ConfigError(f"{where}.timeout_s: must be positive")
    foreign = sorted(set(entry) - {"kind"} - set(TIMEOUT_OPTION) - set(kind.options))
    if foreign:
        allowed = ", ".join([*kind.options, *TIMEOUT_OPTION])
        raise ConfigError(f"{where}: {', '.join(map(repr, foreign))}: not an option of kind {kind.name} ({allowed})")
    return fingerprinted(Spec(name, kind.name, input_, timeout, kind.configure(entry, config, where)), config)


def current_kind(input_: Input, kind: Any, where: str) -> Any:
    """The kind's name now; a deprecated one is accepted with one warning line per process."""
    new = DEPRECATED_KINDS.get((input_, kind)) if isinstance(kind, str) else None
    if new is None:
        return kind
    message = f"faultloop: {where}: kind '{kind}' is deprecated, use '{new}' (accepted until the next release)"
    if message not in _warned:
        _warned.add(message)
        print(message, file=sys.stderr)
    return new


def fingerprinted(spec: Spec, config: Mapping[str, Any]) -> Spec:
    return replace(spec, fingerprint=kinds(spec.input)[spec.kind].fingerprint(spec, config))


def selected(config: Mapping[str, Any], input_: Input) -> list[Spec]:
    """The analyzers of one input this invocation runs, in order; the first log analyzer is the
    report's primary, the first FR analyzer grades the log analyzers' fr_rank_correct. Verdict
    kinds run where their config switch (the key of their name, default on) is on."""
    if input_ == Input.VERDICTS:
        log_names = {spec.name for spec in selected(config, Input.LOG)}
        chosen = [Spec(kind.name, kind.name, input_) for kind in kinds(input_).values() if config.get(kind.name, True)]
        for spec in chosen:
            if spec.name in log_names:
                raise ConfigError(
                    f"config key 'analyzers.{spec.name}': the name is the {spec.name} verdict's "
                    f"(or set {spec.name}: false)"
                )
        return [fingerprinted(spec, config) for spec in chosen]
    section = PLACES[input_].section
    entries = config.get(section) or {}
    if not isinstance(entries, Mapping):
        raise ConfigError(f"config key '{section}': expected a mapping of named analyzers")
    specs = [spec_from_config(input_, name, entry, config) for name, entry in entries.items() if entry is not None]
    if not specs:
        raise ConfigError(f"config key '{section}': no analyzer selected")
    return specs


def resolve(name: str, config: Mapping[str, Any]) -> Analyzer:
    """One log analyzer by name, as the configuration defines it (usable without Snakemake)."""
    entry = (config.get(PLACES[Input.LOG].section) or {}).get(name)
    return Analyzer(spec_from_config(Input.LOG, name, entry, config))


def config_schema() -> dict[str, Any]:
    """The config schema's analyzer keys, from the table (workflow/schemas/config.schema.yaml
    holds the same, checked by a test; the workflow validates against this)."""
    schema: dict[str, Any] = {}
    for input_, place in PLACES.items():
        if not place.section:
            for kind in kinds(input_).values():
                schema[kind.name] = {"type": "boolean", "description": kind.summary}
            continue
        options: dict[str, Any] = {}
        deprecated = [old for (of, old) in DEPRECATED_KINDS if of == input_]
        for kind in kinds(input_).values():
            options.update(kind.options)
        schema[place.section] = {
            "type": "object",
            "description": place.description,
            "propertyNames": {"pattern": NAME_RE.pattern},
            "additionalProperties": {
                "oneOf": [
                    {"type": "null"},
                    {
                        "type": "object",
                        "properties": {"kind": {"enum": [*kinds(input_), *deprecated]}, **options, **TIMEOUT_OPTION},
                        "required": ["kind"],
                        "additionalProperties": False,
                    },
                ]
            },
        }
    return schema


def specs_json(specs: list[Spec]) -> str:
    """An analysis job's argument (and Snakemake param: any fingerprint change re-runs the job)."""
    return param_json([spec.to_json() for spec in specs])


def specs_from_json(text: str) -> list[Spec]:
    return [Spec.from_json(data) for data in json.loads(text)]


# ---- running -----------------------------------------------------------------------------------


def attempt(spec: Spec, source: Source) -> Outcome:
    """Run one analyzer once on its input, timed; every failure becomes part of the outcome. A log
    verdict that names a node the run does not have (drain_nodes) is refused: that is its failure."""
    kind = kinds(spec.input)[spec.kind]

    def work() -> tuple[Any, str, str | None, dict[str, str], dict[str, int]]:
        answer = kind.run(spec, source)
        nodes = source.nodes if isinstance(source, LogSource | VerdictsSource) else ()
        if isinstance(answer.verdict, LogVerdict) and nodes:
            try:
                answer.verdict.drained(nodes)
            except RecordError as exc:
                place = PLACES[spec.input]
                raise AnalyzerFailure(f"{place.folder(spec.name)}/{place.files[0]}: {exc}") from None
        return answer.verdict, answer.text, answer.raw, answer.kept, answer.redactions

    return timed(work)


class Analyzer:
    """A resolved log analyzer outside the workflow: `analyze(path)` gives its verdict (the call
    a corpus evaluator makes) or raises AnalyzerFailure."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec

    @property
    def name(self) -> str:
        return self.spec.name

    def attempt(self, log_path: str | Path, *, staging: Path | None = None, earlier: tuple[Path, ...] = ()) -> Outcome:
        return attempt(self.spec, LogSource(Path(log_path), staging, earlier))

    def analyze(
        self, log_path: str | Path, *, staging: Path | None = None, earlier: tuple[Path, ...] = ()
    ) -> LogVerdict:
        """Its verdict on a log; earlier: the logs of the job's earlier attempts, oldest first."""
        outcome = self.attempt(log_path, staging=staging, earlier=earlier)
        if not isinstance(outcome.verdict, LogVerdict):
            raise AnalyzerFailure(outcome.error or "no verdict", outcome.stderr_tail)
        return outcome.verdict


def cell_of(input_: Input, index: Path) -> Path:
    """The cell folder of an input's index file."""
    return index.parents[len(Path(PLACES[input_].index).parts) - 1]


def run_cell(
    input_: Input, specs: list[Spec], source: Source, cell_dir: Path, *, fresh: bool = False
) -> list[RunRecord]:
    """A cell's analyzers of one input, each into its folder (or its stored result reused), and
    the input's index that lists what each one's result is (written even when it lists none)."""
    records = []
    for spec in specs:
        place = PLACES[spec.input]
        work = partial(attempt, spec, source)
        record = run_with_reuse(
            spec.name,
            spec.kind,
            spec.fingerprint,
            kinds(spec.input)[spec.kind].input_digest(spec, source),
            cell_dir / place.folder(spec.name),
            fresh=fresh,
            files=place.files,
            attempt=partial(limits.run_limited, work) if place.memory_limited else work,
            kept=kinds(spec.input)[spec.kind].kept,
        )
        state = "reused" if record.reused else record.status
        error = f": {record.error}" if record.error else ""
        redacted = f"; {record.redacted()}" if record.redactions else ""
        print(f"{spec.name} ({spec.kind}): {state} in {record.wall_s:.2f} s{redacted}{error}", file=sys.stderr)
        records.append(record)
    write_index(cell_dir / PLACES[input_].index, records)
    return records
