"""torch's own flight-recorder analyzer (`python -m torch.distributed.flight_recorder.fr_trace`).

Dumps are untrusted, and torchfrtrace reads them with a plain `pickle.load`. So it never sees
the originals: each dump is read within its bounds by faultloop's restricted unpickler
(`dumps.rewrite_dumps`, which builds only plain containers) and written again into a temporary
folder, which torchfrtrace reads.
Copies are normalised where torch's tool expects what gloo does not write (see `sanitize`).

torchfrtrace prints one report per collective it cannot match; its suspects are taken as a
person reading that output would: the ranks the first report names (missing ranks, else the
culprit ranks of its errors). When it cannot read the dump set (it crashes, or nothing is left
after the unsafe or broken files are dropped), that is its recorded failure for the cell.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faultloop.analyze.analyzer import Answer, DumpsSource, Input, Kind, Spec, package_version
from faultloop.analyze.fr import analysis, dumps
from faultloop.analyze.running import TAIL_CHARS, AnalyzerFailure, exit_reason, run_process, tail
from faultloop.contracts import FrVerdict

TORCHFRTRACE = "torchfrtrace"
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


class Torchfrtrace(Kind):
    name = TORCHFRTRACE
    input = Input.DUMPS
    summary = "torch's own `python -m torch.distributed.flight_recorder.fr_trace`, on sanitized dump copies (see below)"

    def fingerprint_settings(self, spec: Spec, config: Mapping[str, Any]) -> Any:
        return ((config["gpus_per_node"], config["fr_segment_size"]), spec.timeout_s, package_version("torch"))

    def run(self, spec: Spec, source: Any) -> Answer:
        assert isinstance(source, DumpsSource)
        verdict, output = analyze_torchfrtrace(
            source.fr_path,
            world_size=source.world_size,
            gpus_per_node=source.gpus_per_node,
            segment_size=source.segment_size,
            timeout_s=spec.timeout_s,
        )
        return Answer(verdict, output, output)


KIND = Torchfrtrace()
