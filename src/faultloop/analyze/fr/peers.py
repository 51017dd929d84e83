"""Flight-recorder analyzers side by side: faultloop's own (`fr`), torch's `torchfrtrace` and NVRx's
`nvrx_fr` (its fr_attribution from a checkout, run by `analyze.nvrx.run` on copies of its own).

Dumps are untrusted, and torchfrtrace reads them with a plain `pickle.load`. So it never sees
the originals: each dump is read with faultloop's restricted unpickler (`dumps.load_dump`, which
builds only plain containers) and written again into a temporary folder, which torchfrtrace reads.
Copies are normalised where torch's tool expects what gloo does not write (see `sanitize`).

torchfrtrace prints one report per collective it cannot match; its suspects are taken as a
person reading that output would: the ranks the first report names (missing ranks, else the
culprit ranks of its errors). When it cannot read the dump set (it crashes, or nothing is left
after the unsafe or broken files are dropped), that is its recorded failure for the cell.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from faultloop.analyze import limits, nvrx
from faultloop.analyze.fr import analysis, dumps
from faultloop.analyze.fr.analysis import BUILTIN
from faultloop.analyze.nvrx import run as nvrx_run
from faultloop.analyze.nvrx import tools as nvrx_tools
from faultloop.analyze.registry import package_version
from faultloop.analyze.running import (
    DEFAULT_TIMEOUT_S,
    NAME_RE,
    TAIL_CHARS,
    AnalyzerFailure,
    Outcome,
    exit_reason,
    file_digest,
    param_json,
    run_process,
    run_with_reuse,
    tail,
    timed,
)
from faultloop.contracts import FrVerdict, RunRecord, verdicts, write_index
from faultloop.fingerprint import source_fingerprint
from faultloop.plan import layout
from faultloop.plan.config import ConfigError

TORCHFRTRACE = "torchfrtrace"
FR_KINDS = (BUILTIN, TORCHFRTRACE, *nvrx.FR_KINDS)
TORCHFRTRACE_MODULE = "torch.distributed.flight_recorder.fr_trace"
PREFIX = "_dump_"
_REPORT_RE = re.compile(
    r"(?:Not all ranks joining collective, sequence number|Input/output mismatch in the "
    r"collective sequence number|Collective sequence number): (\d+)"
)
_FIELD_RE = re.compile(r"^(group info|collective|missing ranks|error msg): (.*)$")
_CULPRIT_RE = re.compile(r"Culprit rank (\d+)")
_UNDECIDED_RE = re.compile(r"missed FR dumps from ranks \(\{([\d, ]*)\}\)")
OUTPUT_CAP = 64 << 10  # torchfrtrace repeats itself per collective; the head says what it found


@dataclass(frozen=True)
class FrSpec:
    """One entry of `fr_analyzers`, resolved; travels to the fr_analysis job as JSON."""

    name: str
    kind: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    fingerprint: str = ""
    nvrx: dict[str, str] = field(default_factory=dict)  # nvrx_fr's checkout (nvrx.tools.Checkout)


def spec_from_config(name: str, entry: Mapping[str, Any] | None, config: Mapping[str, Any]) -> FrSpec:
    where = f"config key 'fr_analyzers.{name}'"
    if not NAME_RE.match(name):
        raise ConfigError(f"{where}: names are letters, digits, '_' and '-'")
    entry = dict(entry) if entry else {"kind": name}
    kind = entry.get("kind")
    if kind not in FR_KINDS:
        raise ConfigError(f"{where}: unknown kind {kind!r}; kinds are {', '.join(FR_KINDS)}")
    timeout = float(entry.get("timeout_s", DEFAULT_TIMEOUT_S))
    if timeout <= 0:
        raise ConfigError(f"{where}.timeout_s: must be positive")
    shape = (config["gpus_per_node"], config["fr_segment_size"])
    if kind == BUILTIN:
        stamp = source_fingerprint(analysis, dumps, verdicts, settings=shape)
    elif kind in nvrx.FR_KINDS:
        checkout = nvrx_tools.checkout(config, where, kind)
        settings = (shape, timeout, checkout.digest(), checkout.python)
        stamp = source_fingerprint(sys.modules[__name__], dumps, verdicts, nvrx, settings=settings)
        return FrSpec(name, kind, timeout, stamp, asdict(checkout))
    else:
        stamp = source_fingerprint(
            sys.modules[__name__], dumps, verdicts, settings=(shape, timeout, package_version("torch"))
        )
    return FrSpec(name, kind, timeout, stamp)


def selected(config: Mapping[str, Any]) -> list[FrSpec]:
    """The FR analyzers this invocation runs, in order; the first grades the log analyzers' rows."""
    entries = config.get("fr_analyzers") or {}
    if not isinstance(entries, Mapping):
        raise ConfigError("config key 'fr_analyzers': expected a mapping of named FR analyzers")
    chosen = [spec_from_config(name, entry, config) for name, entry in entries.items() if entry is not None]
    if not chosen:
        raise ConfigError("config key 'fr_analyzers': no FR analyzer selected")
    return chosen


# ---- torchfrtrace --------------------------------------------------------------------------


def sanitize(dump: dict[str, Any]) -> list[str]:
    """Make a (restricted-unpickled) dump readable by torchfrtrace, in place; notes what changed.

    gloo keys its only pg_config entry '' (name and desc empty) while its entries say
    ('0', 'default_pg'); torchfrtrace looks groups up by the entries' name and stops with
    KeyError ('0', <rank>). The entry is renamed after the one group name the entries use that
    pg_config lacks; its ranks are kept. Nothing else is changed.
    """
    config = dump.setdefault("pg_config", {})
    used: dict[str, str] = {}
    for entry in dump.get("entries") or []:
        group = entry.get("process_group") if isinstance(entry, dict) else None
        if isinstance(group, (list, tuple)) and len(group) == 2:
            used.setdefault(str(group[0]), str(group[1]))
    unknown = [name for name in used if name not in config]
    if "" in config and len(unknown) == 1:
        name = unknown[0]
        config[name] = {**config.pop(""), "name": name, "desc": used[name]}
        return [f"pg_config key '' renamed to {name!r} ({used[name]}), the name its entries use"]
    return []


def _ranks(text: str) -> list[int]:
    return sorted({int(x) for x in re.findall(r"\d+", text)})


def parse_torchfrtrace(output: str) -> tuple[list[dict[str, Any]], list[int]]:
    """torchfrtrace's reports (one per unmatched collective) and the ranks it could not judge."""
    reports: list[dict[str, Any]] = []
    for line in output.splitlines():
        text = line.strip()
        if m := _REPORT_RE.search(text):
            reports.append(
                {
                    "message": text,
                    "sequence": int(m.group(1)),
                    "group": "",
                    "collective": "",
                    "missing_ranks": [],
                    "culprit_ranks": [],
                }
            )
        elif reports and (f := _FIELD_RE.match(text)):
            name, value = f.groups()
            if name == "missing ranks":
                reports[-1]["missing_ranks"] = _ranks(value)
            elif name == "error msg":
                reports[-1]["culprit_ranks"] = sorted({int(r) for r in _CULPRIT_RE.findall(value)})
            else:
                reports[-1][name.split()[0]] = value
    undecided = sorted({r for m in _UNDECIDED_RE.finditer(output) for r in _ranks(m.group(1))})
    return reports, undecided


def _torchfrtrace(folder: Path, timeout_s: float) -> str:
    """Run torch's analyzer on a folder of sanitized dumps; its combined output."""
    log = folder / "torchfrtrace.out"
    argv = [sys.executable, "-m", TORCHFRTRACE_MODULE, str(folder), "-p", PREFIX, "--allow-incomplete-ranks"]
    status = run_process(argv, log, log, timeout_s)
    if status != 0:
        raise AnalyzerFailure(f"torchfrtrace could not read the dump set ({exit_reason(status)})", tail(log))
    with open(log, "rb") as handle:
        return handle.read(OUTPUT_CAP).decode("utf-8", "replace")


def analyze_torchfrtrace(
    fr_path: str, *, world_size: int | None, gpus_per_node: int, segment_size: int, timeout_s: float
) -> tuple[FrVerdict, str]:
    """torchfrtrace's verdict, and its output as the text form. Its details: the reports (one per
    collective it could not match), the normalisations applied and the ranks it could not judge."""
    paths = dumps.find_dumps(fr_path)
    expected = list(range(world_size)) if world_size else []
    if not paths:
        details: dict[str, Any] = {"reports": [], "normalised": [], "ranks_undecided": []}
        verdict = FrVerdict(
            True, [], "none", TORCHFRTRACE, ranks_without_dump=expected, expected_ranks=expected, details=details
        )
        return verdict, "(no flight-recorder dumps found)\n"
    with tempfile.TemporaryDirectory(prefix="torchfrtrace-") as tmp:
        ranks, skipped, notes = dumps.rewrite_dumps(paths, Path(tmp), sanitize)
        if not ranks:
            raise AnalyzerFailure(
                f"no dump torchfrtrace may read ({len(skipped)} unsafe or unreadable)",
                "\n".join(s.error for s in skipped)[-TAIL_CHARS:],
            )
        output = _torchfrtrace(Path(tmp), timeout_s)
    reports, undecided = parse_torchfrtrace(output)
    named: list[int] = next(
        (r["missing_ranks"] or r["culprit_ranks"] for r in reports if r["missing_ranks"] or r["culprit_ranks"]), []
    )
    details = {"reports": reports, "normalised": notes, "ranks_undecided": undecided}
    verdict = analysis.peer_verdict(TORCHFRTRACE, named, ranks, expected, skipped, gpus_per_node, segment_size, details)
    return verdict, output


# ---- running a cell's FR analyzers -----------------------------------------------------------


def dumps_digest(fr_path: str, manifest: Path) -> str:
    """The FR analyzers' input: the dump files (names and sizes) of this run of the job."""
    digest = hashlib.sha256(file_digest(manifest).encode())
    for path in dumps.find_dumps(fr_path):
        digest.update(f"{os.path.basename(path)}:{os.path.getsize(path)}\n".encode())
    return digest.hexdigest()[:16]


def attempt(spec: FrSpec, fr_path: str, *, world_size: int | None, gpus_per_node: int, segment_size: int) -> Outcome:
    def work() -> tuple[FrVerdict, str, str | None]:
        if spec.kind == BUILTIN:
            result = analysis.analyze_dir(
                fr_path, world_size=world_size, gpus_per_node=gpus_per_node, segment_size=segment_size
            )
            return result.to_verdict(), result.to_table(), None
        if spec.kind in nvrx.FR_KINDS:
            verdict, output = nvrx_run.analyze_fr(
                fr_path,
                nvrx_tools.Checkout(**spec.nvrx),
                world_size=world_size,
                gpus_per_node=gpus_per_node,
                segment_size=segment_size,
                timeout_s=spec.timeout_s,
            )
            return verdict, output, output
        verdict, output = analyze_torchfrtrace(
            fr_path,
            world_size=world_size,
            gpus_per_node=gpus_per_node,
            segment_size=segment_size,
            timeout_s=spec.timeout_s,
        )
        return verdict, output, output

    return timed(work)


def analyze_cell(
    specs: list[FrSpec],
    fr_path: str,
    manifest: Path,
    index: Path,
    *,
    world_size: int | None,
    gpus_per_node: int,
    segment_size: int,
    fresh: bool = False,
) -> list[RunRecord]:
    cell_dir = manifest.parent
    digest = dumps_digest(fr_path, manifest)
    records = []
    for spec in specs:
        work = partial(
            attempt, spec, fr_path, world_size=world_size, gpus_per_node=gpus_per_node, segment_size=segment_size
        )
        record = run_with_reuse(
            spec.name,
            spec.kind,
            spec.fingerprint,
            digest,
            cell_dir / layout.fr_analyzer_dir(spec.name),
            fresh=fresh,
            files=(layout.FR_JSON, layout.FR_TEXT),
            attempt=partial(limits.run_limited, work),  # dumps are untrusted: a child under a memory limit
        )
        state = "reused" if record.reused else record.status
        print(
            f"fr {spec.name}: {state} in {record.wall_s:.2f} s" + (f": {record.error}" if record.error else ""),
            file=sys.stderr,
        )
        records.append(record)
    write_index(index, records)
    return records


def specs_json(specs: list[FrSpec]) -> str:
    return param_json([asdict(spec) for spec in specs])
