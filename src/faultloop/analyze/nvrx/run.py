"""NVRx's analyzers run from the user's checkout by its own interpreter, each in its own process
group: a log kind on the staged log answers a `LogVerdict`, nvrx_fr on sanitized copies of a
cell's dumps an `FrVerdict`. A crash, unreadable output or a timeout raises AnalyzerFailure with
the tail of what the tool printed on stderr."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faultloop.analyze.fr import analysis, dumps
from faultloop.analyze.kinds import MAX_OUTPUT_BYTES
from faultloop.analyze.nvrx import FR, LOGSAGE, RESTART_AGENT, outputs, tools
from faultloop.analyze.nvrx.tools import Checkout
from faultloop.analyze.running import TAIL_CHARS, AnalyzerFailure, exit_reason, run_process, tail
from faultloop.contracts import FrVerdict, LogVerdict

OUTPUT_CAP = 64 << 10  # fr_attribution lists every dump before its table: both ends are kept


def analyze_log(
    kind: str, checkout: Checkout, llm: Mapping[str, Any], timeout_s: float, log: Path, *, source: Path
) -> tuple[LogVerdict, str]:
    """One of NVRx's log analyzers on the staged log (`log`, under a neutral path); its verdict
    and what it printed. combined_log_fr also reads the cell's dumps beside the source log, as
    copies the restricted reader rewrote."""
    if kind == RESTART_AGENT:
        argv = tools.restart_agent_argv(checkout.python, log, llm)
    elif kind == LOGSAGE:
        argv = tools.logsage_argv(checkout.python, log, llm)
    else:
        copies = log.parent / "dumps"
        copies.mkdir()
        folder = tools.dumps_beside(source)
        tools.copy_dumps(dumps.find_dumps(str(folder)) if folder else [], copies)
        argv = tools.combined_argv(checkout.python, log, copies, llm)
    stdout_path, stderr_path = log.parent / "stdout", log.parent / "stderr"
    env = checkout.env(str(llm.get("api_key_file") or ""))
    status = run_process(argv, stdout_path, stderr_path, timeout_s, env=env)
    stderr_tail = tail(stderr_path)
    if status != 0:
        raise AnalyzerFailure(exit_reason(status), stderr_tail)
    raw = stdout_path.read_text(errors="replace")
    try:
        if kind == RESTART_AGENT:
            verdict = outputs.restart_agent_verdict(outputs.last_json_object(raw), l1=bool(llm))
        elif kind == LOGSAGE:
            verdict = outputs.logsage_verdict(raw)
        else:
            verdict = outputs.combined_verdict(raw)
    except AnalyzerFailure as exc:
        raise AnalyzerFailure(str(exc), stderr_tail) from None
    return verdict, raw


def analyze_fr(
    fr_path: str,
    checkout: Checkout,
    *,
    world_size: int | None,
    gpus_per_node: int,
    segment_size: int,
    timeout_s: float,
) -> tuple[FrVerdict, str]:
    """NVRx's fr_attribution on copies the restricted reader rewrote (it would `pickle.load` the
    originals), not normalised: what it makes of the dumps as written is what is measured (on
    gloo's it stops with KeyError '0', its recorded failure). Its details: the table's rows."""
    paths = dumps.find_dumps(fr_path)
    expected = list(range(world_size)) if world_size else []
    if not paths:
        verdict = FrVerdict(
            True, [], "none", FR, ranks_without_dump=expected, expected_ranks=expected, details={"missing_ranks": []}
        )
        return verdict, "(no flight-recorder dumps found)\n"
    with tempfile.TemporaryDirectory(prefix="nvrxfr-") as tmp:
        folder = Path(tmp) / "dumps"
        folder.mkdir()
        ranks, skipped = tools.copy_dumps(paths, folder)
        if not ranks:
            raise AnalyzerFailure(
                f"no dump fr_attribution may read ({len(skipped)} unsafe or unreadable)",
                "\n".join(s.error for s in skipped)[-TAIL_CHARS:],
            )
        log = Path(tmp) / "fr_attribution.out"
        status = run_process(tools.fr_argv(checkout.python, folder), log, log, timeout_s, env=checkout.env())
        if status != 0:
            raise AnalyzerFailure(f"fr_attribution could not read the dump set ({exit_reason(status)})", tail(log))
        if log.stat().st_size > MAX_OUTPUT_BYTES:
            raise AnalyzerFailure(f"fr_attribution printed more than {MAX_OUTPUT_BYTES >> 20} MB")
        output = log.read_text(errors="replace")
    rows = outputs.fr_rows(output)
    suspects = outputs.fr_suspects(rows)
    details = {"missing_ranks": rows}
    verdict = analysis.peer_verdict(FR, suspects, ranks, expected, skipped, gpus_per_node, segment_size, details)
    # Its table comes last, after a listing of every dump: keep both ends of a long printout.
    shown = output if len(output) <= OUTPUT_CAP else f"{output[: OUTPUT_CAP // 2]}\n...\n{output[-OUTPUT_CAP // 2 :]}"
    return verdict, shown
