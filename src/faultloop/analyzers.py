"""Named log analyzers, run side by side on every cell: faultloop's own, its LLM mode, NVRx's
analyzer, the naive baselines, and any command a user points at.

Every analyzer reads one log and answers in the logsage.json shape (docs/architecture.md). A
failure (a crash, output that is neither faultloop JSON nor upstream's five-part text, a hang past
the timeout) is that analyzer's recorded result for the cell, never an exception for the workflow.

One job per cell runs all of them (one job per analyzer would multiply planning time on large
pools). Each result is stored with the analyzer's fingerprint and a digest of the log it read;
the next run reuses a result whose fingerprint and input are unchanged and leaves its files
untouched, so editing one analyzer re-runs only that analyzer's work.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from faultloop import baselines, faults, fr, layout, logsage, nvrx
from faultloop.config import ConfigError, load, parse_overrides
from faultloop.faults import CATEGORIES, FAULTS, RESTART_DECISIONS
from faultloop.fingerprint import source_fingerprint
from faultloop.llm import LLMSettings

BUILTIN, LLM, UPSTREAM, COMMAND = "builtin", "llm", "upstream", "command"
KINDS = (BUILTIN, LLM, UPSTREAM, COMMAND, *baselines.BASELINES, *nvrx.LOG_KINDS)
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
RESERVED_NAMES = frozenset({"fr"})  # analysis/fr/ holds the flight-recorder analyzers
DEFAULT_TIMEOUT_S = 600.0
TAIL_CHARS = 2000
MAX_OUTPUT_BYTES = 16 << 20
OK, FAILED = "ok", "failed"
# Upstream's decisions plus the one its analyzer prints when its LLM fails.
DECISIONS = (*RESTART_DECISIONS, "LLM FAILURE")
_DECISION_RE = re.compile("|".join(re.escape(d) for d in DECISIONS))
_ATTRIBUTION_RE = re.compile(r"Primary issues:\s*\[([^\]]*)\],?\s*Secondary issues:\s*\[([^\]]*)\]")
_CHECKPOINT_RE = re.compile(r"checkpoint_saved\W+(true|false)", re.IGNORECASE)
UPSTREAM_DISTRIBUTION = "nvidia-resiliency-ext"


class AnalyzerFailure(RuntimeError):
    """An analyzer gave no usable verdict; recorded for the cell with what it printed on stderr."""

    def __init__(self, message: str, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.stderr_tail = stderr_tail


# ---- what an analyzer is ---------------------------------------------------------------------


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
    nvrx: dict[str, str] = field(default_factory=dict)  # an NVRx kind's nvrx.Checkout

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AnalyzerSpec:
        return cls(**{**data, "watch": tuple(data.get("watch", ()))})


@dataclass
class Outcome:
    """One attempt of one analyzer on one input: its verdict, or why there is none."""

    verdict: dict[str, Any] | None
    text: str
    raw: str | None  # what an external analyzer printed
    error: str | None
    stderr_tail: str
    wall_s: float


@dataclass
class RunRecord:
    """run.json, and one entry of a cell's index: how an analyzer's result came about."""

    analyzer: str
    kind: str
    fingerprint: str
    input_digest: str
    status: str  # ok | failed
    error: str | None
    stderr_tail: str
    wall_s: float
    finished_at: float
    reused: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


class Analyzer:
    """A resolved log analyzer: `analyze(path)` gives its verdict or raises AnalyzerFailure."""

    def __init__(self, spec: AnalyzerSpec) -> None:
        self.spec = spec

    @property
    def name(self) -> str:
        return self.spec.name

    def analyze(self, log_path: str | os.PathLike[str], *, staging: Path | None = None) -> dict[str, Any]:
        """The verdict in the logsage.json shape (the call a corpus evaluator makes); any failure
        is raised as AnalyzerFailure."""
        outcome = self.attempt(Path(log_path), staging=staging)
        if outcome.verdict is None:
            raise AnalyzerFailure(outcome.error or "no verdict", outcome.stderr_tail)
        return outcome.verdict

    def attempt(self, log_path: Path, *, staging: Path | None = None) -> Outcome:
        """Run once, timed; every failure becomes part of the outcome."""

        def work() -> tuple[dict[str, Any], str, str | None]:
            verdict, raw = self._analyze(log_path, staging)
            return verdict, verdict_text(verdict), raw

        return timed(work)

    def _analyze(self, path: Path, staging: Path | None) -> tuple[dict[str, Any], str | None]:
        kind = self.spec.kind
        if kind == BUILTIN:
            return normalize(logsage.analyze_log(path, logsage.Settings()).to_json()), None
        if kind in baselines.BASELINES:
            return normalize(baselines.BASELINES[kind](path)), None
        if kind == LLM:
            verdict = logsage.analyze_with_llm(path, logsage.Settings(mode="llm", llm=llm_settings(self.spec.llm)))
            if verdict.extra.get("llm_error"):
                # logsage falls back to its deterministic verdict; that is not the LLM's answer.
                raise AnalyzerFailure(f"LLM failed: {verdict.extra['llm_error']}")
            return normalize(verdict.to_json()), None
        with staged_log(path, staging) as neutral:
            if kind in nvrx.LOG_KINDS:
                return run_nvrx(self.spec, neutral, source=path)
            if kind == UPSTREAM:
                try:
                    return normalize(logsage.run_upstream(neutral, logsage.Settings("upstream")).to_json()), None
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    raise AnalyzerFailure(str(exc)) from None
            raw, stderr_tail = run_command(self.spec, neutral)
            try:
                return parse_output(raw), raw
            except AnalyzerFailure as exc:
                raise AnalyzerFailure(str(exc), stderr_tail) from None


def llm_settings(endpoint: Mapping[str, Any]) -> LLMSettings:
    return LLMSettings(
        base_url=str(endpoint.get("base_url", "")),
        model=str(endpoint.get("model", "")),
        api_key_file=endpoint.get("api_key_file") or None,
        timeout_s=float(endpoint.get("timeout_s", 60)),
        max_retries=int(endpoint.get("max_retries", 2)),
    )


# ---- external commands -----------------------------------------------------------------------


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


def tail(path: Path, limit: int = TAIL_CHARS) -> str:
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - limit))
        return handle.read().decode("utf-8", "replace")


def run_process(
    argv: list[str], stdout: Path, stderr: Path, timeout_s: float, *, env: Mapping[str, str] | None = None
) -> int:
    """Run a program in its own process group, so that a timeout kills everything it started;
    its exit status, or AnalyzerFailure with the tail of its stderr when it runs out of time."""
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
    return f"killed by {signal.Signals(-status).name}" if status < 0 else f"exited with status {status}"


def run_command(spec: AnalyzerSpec, log: Path) -> tuple[str, str]:
    """Run a command analyzer on the log; its output (stdout, or the {out} file) and stderr tail.

    `{log}` and `{out}` are replaced by quoted paths (the rest of the line is the user's shell).
    """
    work = log.parent
    out = work / "verdict.out"
    line = spec.command.replace("{log}", shlex.quote(str(log))).replace("{out}", shlex.quote(str(out)))
    stdout_path, stderr_path = work / "stdout", work / "stderr"
    status = run_process(["/bin/sh", "-c", line], stdout_path, stderr_path, spec.timeout_s)
    stderr_tail = tail(stderr_path)
    if status != 0:
        raise AnalyzerFailure(exit_reason(status), stderr_tail)
    source = out if "{out}" in spec.command else stdout_path
    if not source.is_file():
        raise AnalyzerFailure("wrote no {out} file", stderr_tail)
    if source.stat().st_size > MAX_OUTPUT_BYTES:
        raise AnalyzerFailure(f"output larger than {MAX_OUTPUT_BYTES >> 20} MB", stderr_tail)
    return source.read_text(errors="replace"), stderr_tail


def run_nvrx(spec: AnalyzerSpec, log: Path, *, source: Path) -> tuple[dict[str, Any], str]:
    """One of NVRx's log analyzers on the staged log, run from the user's checkout by its own
    interpreter; its verdict mapped onto ours (faultloop.nvrx) and what it printed. combined_log_fr
    also reads the cell's dumps beside the source log, as copies the restricted reader rewrote."""
    checkout = nvrx.Checkout(**spec.nvrx)
    if spec.kind == nvrx.RESTART_AGENT:
        argv = nvrx.restart_agent_argv(checkout.python, log, spec.llm)
    elif spec.kind == nvrx.LOGSAGE:
        argv = nvrx.logsage_argv(checkout.python, log, spec.llm)
    else:
        copies = log.parent / "dumps"
        copies.mkdir()
        dumps = nvrx.dumps_beside(source)
        nvrx.copy_dumps(fr.find_dumps(str(dumps)) if dumps else [], copies)
        argv = nvrx.combined_argv(checkout.python, log, copies, spec.llm)
    stdout_path, stderr_path = log.parent / "stdout", log.parent / "stderr"
    env = checkout.env(str(spec.llm.get("api_key_file") or ""))
    status = run_process(argv, stdout_path, stderr_path, spec.timeout_s, env=env)
    stderr_tail = tail(stderr_path)
    if status != 0:
        raise AnalyzerFailure(exit_reason(status), stderr_tail)
    raw = stdout_path.read_text(errors="replace")
    try:
        if spec.kind == nvrx.RESTART_AGENT:
            verdict = nvrx.restart_agent_verdict(nvrx.last_json_object(raw), l1=bool(spec.llm))
        elif spec.kind == nvrx.LOGSAGE:
            verdict = nvrx.logsage_verdict(raw)
        else:
            verdict = nvrx.combined_verdict(raw)
    except nvrx.NvrxOutputError as exc:
        raise AnalyzerFailure(str(exc), stderr_tail) from None
    return normalize(verdict), raw


def timed(work: Callable[[], tuple[dict[str, Any], str, str | None]]) -> Outcome:
    """Run one analysis (verdict, text, raw output), timed; every failure becomes the outcome."""
    start = time.perf_counter()
    try:
        verdict, text, raw = work()
    except AnalyzerFailure as exc:
        return Outcome(None, "", None, str(exc), exc.stderr_tail, time.perf_counter() - start)
    except Exception as exc:
        return Outcome(
            None,
            "",
            None,
            f"crashed: {type(exc).__name__}: {exc}",
            traceback.format_exc()[-TAIL_CHARS:],
            time.perf_counter() - start,
        )
    return Outcome(verdict, text, raw, None, "", time.perf_counter() - start)


# ---- reading verdicts ------------------------------------------------------------------------


def _rank_list(value: Any, field_name: str) -> list[int]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AnalyzerFailure(f"{field_name} is not a list: {value!r:.80}")
    ranks = []
    for item in value:
        try:
            ranks.append(int(item))
        except (TypeError, ValueError):
            raise AnalyzerFailure(f"{field_name} holds a non-rank {item!r:.40}") from None
    return ranks


def normalize(data: Mapping[str, Any]) -> dict[str, Any]:
    """A verdict in the logsage.json contract (other keys kept as given); raises AnalyzerFailure
    naming what is wrong."""
    restart = data.get("restart")
    if not isinstance(restart, str) or not restart.strip():
        raise AnalyzerFailure("the verdict has no 'restart' decision")
    category = data.get("fault_category")
    fault_type = data.get("fault_type")
    evidence = [e for e in data.get("evidence") or [] if isinstance(e, dict)]
    return {
        **data,
        "restart": restart.strip(),
        "primary_ranks": _rank_list(data.get("primary_ranks"), "primary_ranks"),
        "secondary_ranks": _rank_list(data.get("secondary_ranks"), "secondary_ranks"),
        "fault_category": category if category in CATEGORIES else None,
        "fault_type": fault_type if fault_type in FAULTS else None,
        "explanation": str(data.get("explanation") or ""),
        "detail": str(data.get("detail") or ""),
        "evidence": evidence,
        "checkpoint_saved": bool(data.get("checkpoint_saved", False)),
        "mode": str(data.get("mode") or ""),
    }


def parse_upstream_text(text: str) -> dict[str, Any]:
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
    return normalize(
        {
            "restart": _DECISION_RE.match(lines[at]).group(0),  # type: ignore[union-attr]
            "explanation": rest[0] if rest and after != 0 else "",
            "primary_ranks": primary,
            "secondary_ranks": secondary,
            "detail": rest[after + 1]
            if after is not None and after + 1 < len(rest) and not _CHECKPOINT_RE.match(rest[after + 1])
            else "",
            "checkpoint_saved": bool(checkpoint and checkpoint.group(1).lower() == "true"),
            "mode": "upstream-text",
        }
    )


def parse_output(text: str) -> dict[str, Any]:
    """A command's output: a faultloop JSON object, else upstream's text form."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError as exc:
            raise AnalyzerFailure(f"output is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise AnalyzerFailure("output JSON is not an object")
        return {**normalize(data), "mode": str(data.get("mode") or "command")}
    return parse_upstream_text(text)


def verdict_text(verdict: Mapping[str, Any]) -> str:
    """Upstream's five-part text form of a verdict (what the LLM judge reads)."""
    return logsage.Verdict(
        verdict["restart"],
        verdict["primary_ranks"],
        verdict["secondary_ranks"],
        verdict["fault_category"] or "",
        verdict["fault_type"],
        verdict["explanation"],
        verdict["detail"],
        [],
        verdict["checkpoint_saved"],
    ).to_text()


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
    own = sys.modules[__name__]
    if spec.kind == BUILTIN:
        return logsage.analyzer_fingerprint((BUILTIN, source_fingerprint(faults, own)))
    if spec.kind == LLM:
        endpoint = {k: v for k, v in sorted(spec.llm.items()) if "key" not in k}
        return logsage.analyzer_fingerprint((LLM, endpoint, source_fingerprint(faults, own)))
    if spec.kind == UPSTREAM:
        return logsage.analyzer_fingerprint((UPSTREAM, package_version(UPSTREAM_DISTRIBUTION), source_fingerprint(own)))
    if spec.kind in baselines.BASELINES:
        return source_fingerprint(baselines, faults, own, settings=spec.kind)
    if spec.kind in nvrx.LOG_KINDS:
        endpoint = {k: v for k, v in sorted(spec.llm.items()) if "key" not in k}
        checkout = nvrx.Checkout(**spec.nvrx)
        settings = (spec.kind, checkout.digest(), checkout.python, endpoint, spec.timeout_s)
        return source_fingerprint(nvrx, own, settings=settings)
    return source_fingerprint(own, settings=(spec.command, spec.timeout_s, _watched_digest(spec.watch, spec.name)))


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
        checkout = asdict(nvrx.checkout(config, where, kind))
        endpoint = nvrx.endpoint(config, entry, where, kind)
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


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    if path.is_file():
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()[:16]


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


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
) -> RunRecord:
    """Run one analyzer into its folder, or reuse its stored result (files untouched) when neither
    its fingerprint nor its input changed. files: the names of its JSON and text results."""
    json_name, text_name = files
    stored = read_json(directory / layout.RUN_JSON)
    if not fresh and isinstance(stored, dict):
        record = RunRecord.from_json({**stored, "reused": True})
        have_result = record.status != OK or (directory / json_name).is_file()
        if record.fingerprint == fingerprint_ and record.input_digest == input_digest and have_result:
            return record
    outcome = attempt()
    directory.mkdir(parents=True, exist_ok=True)
    for stale in (json_name, text_name, layout.RAW_OUTPUT):
        (directory / stale).unlink(missing_ok=True)
    if outcome.verdict is not None:
        layout.write_json_atomic(directory / json_name, outcome.verdict)
        layout.write_atomic(directory / text_name, outcome.text)
    if outcome.raw is not None:
        layout.write_atomic(directory / layout.RAW_OUTPUT, outcome.raw)
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
    )
    layout.write_json_atomic(directory / layout.RUN_JSON, record.to_json())
    return record


def write_index(path: Path, records: list[RunRecord]) -> None:
    layout.write_json_atomic(path, {"analyzers": [r.to_json() for r in records]})


def read_index(path: Path) -> list[RunRecord]:
    data = read_json(path)
    entries = data.get("analyzers", []) if isinstance(data, dict) else []
    return [RunRecord.from_json(e) for e in entries if isinstance(e, dict)]


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


# ---- CLI -------------------------------------------------------------------------------------


_JSON_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"')


def param_json(data: Any) -> str:
    """JSON for a Snakemake params string: Snakemake reads `{name}` there as a wildcard, so braces
    inside strings (a command's {log}) are written as JSON escapes, which json.loads restores."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return _JSON_STRING_RE.sub(lambda m: m.group(0).replace("{", "\\u007b").replace("}", "\\u007d"), text)


def specs_json(analyzers: list[Analyzer]) -> str:
    """The analysis job's argument (and Snakemake param: any fingerprint change re-runs the job)."""
    return param_json([a.spec.to_json() for a in analyzers])


def main(argv: list[str]) -> int:
    """`faultloop analyzers list|try|run-cell`: the configured log analyzers, one on a log, a cell's run."""
    parser = argparse.ArgumentParser(prog="faultloop analyzers", description=main.__doc__)
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="the analyzers a workflow run would use, with kinds and fingerprints")
    listing.add_argument("overrides", nargs="*", help="key=value config overrides, as given to --config")
    one = sub.add_parser("try", help="run one analyzer on one log and print its verdict (JSON)")
    one.add_argument("name")
    one.add_argument("log", type=Path)
    one.add_argument("overrides", nargs="*")
    cell = sub.add_parser("run-cell", help="the logsage rule: every analyzer on a cell's stripped log")
    cell.add_argument("--log", type=Path, required=True)
    cell.add_argument("--index", type=Path, required=True, help=f"the cell's {layout.LOGSAGE_INDEX}")
    cell.add_argument("--specs", required=True, help="the analyzers as JSON (from the workflow)")
    cell.add_argument("--fresh", type=int, default=0, help="1: re-run every analyzer (--forcerun)")
    args = parser.parse_args(argv)
    try:
        if args.action == "run-cell":
            chosen = [Analyzer(AnalyzerSpec.from_json(s)) for s in json.loads(args.specs)]
            analyze_cell(chosen, args.log, args.index, fresh=bool(args.fresh))
            return 0
        config = load(parse_overrides(args.overrides))
        if args.action == "list":
            for a in selected(config):
                print(f"{a.name}\t{a.spec.kind}\t{a.spec.fingerprint}")
            return 0
        print(json.dumps(resolve(args.name, config).analyze(args.log), indent=2))
        return 0
    except ConfigError as exc:
        print(f"faultloop analyzers: {exc}", file=sys.stderr)
        return 2
    except AnalyzerFailure as exc:
        print(f"faultloop analyzers: {args.name} failed: {exc}\n{exc.stderr_tail}", file=sys.stderr)
        return 1
