"""NVRx's analyzers run from the user's checkout by its own interpreter, each in its own process
group: a log kind (`NvrxLog`, one subclass per kind under `analyze/kinds/`) on the staged log
answers a `LogVerdict`, nvrx_fr on sanitized copies of a cell's dumps an `FrVerdict`. A crash,
unreadable output or a timeout raises AnalyzerFailure with the tail of what the tool printed on
stderr."""

from __future__ import annotations

import tempfile
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from faultloop.analyze.analyzer import Answer, Input, Kind, LogSource, Spec, staged_log
from faultloop.analyze.fr import analysis, dumps
from faultloop.analyze.llm import LLM_OPTION, LLMError, endpoint_settings, keyless, outgoing, read_api_key
from faultloop.analyze.nvrx import FR, outputs, tools
from faultloop.analyze.nvrx.tools import Checkout
from faultloop.analyze.redact import Redactor
from faultloop.analyze.running import (
    MAX_OUTPUT_BYTES,
    TAIL_CHARS,
    AnalyzerFailure,
    exit_reason,
    run_process,
    tail,
)
from faultloop.contracts import FrVerdict, LogVerdict

OUTPUT_CAP = 64 << 10  # fr_attribution lists every dump before its table: both ends are kept


def outgoing_redactor(endpoint: Mapping[str, Any]) -> Redactor:
    """The redaction of a log NVRx sends to the endpoint, its key file's key among the secrets."""
    try:
        return outgoing(read_api_key(endpoint_settings(dict(endpoint))))
    except LLMError as exc:
        raise AnalyzerFailure(str(exc)) from None


class NvrxLog(Kind):
    """One of NVRx's log analyzers, run from the checkout on the staged log (a neutral path); a kind
    states its command line and how its printout becomes a verdict."""

    input = Input.LOG
    options = LLM_OPTION

    def configure(self, entry: Mapping[str, Any], config: Mapping[str, Any], where: str) -> dict[str, Any]:
        return {
            "nvrx": asdict(tools.checkout(config, where, self.name)),
            "llm": tools.endpoint(config, entry, where, self.name),
        }

    def fingerprint_settings(self, spec: Spec, config: Mapping[str, Any]) -> Any:
        checkout = Checkout(**spec.settings["nvrx"])
        return (self.name, checkout.digest(), checkout.python, keyless(spec.settings["llm"]), spec.timeout_s)

    @abstractmethod
    def argv(self, python: str, log: Path, llm: Mapping[str, Any], source: LogSource, spec: Spec) -> list[str]:
        """NVRx's command line on the staged log, in its staging folder (source: the run's log, for
        what lies beside it, and the job's earlier attempts)."""

    def keep(self, workdir: Path) -> dict[str, str]:
        """The files of the staging folder its answer keeps beside the verdict (Kind.kept)."""
        return {}

    @abstractmethod
    def read(self, raw: str, llm: Mapping[str, Any]) -> LogVerdict:
        """What it printed on stdout, as a verdict (NvrxOutputError when it cannot be read)."""

    def run(self, spec: Spec, source: Any) -> Answer:
        assert isinstance(source, LogSource)
        checkout, llm = Checkout(**spec.settings["nvrx"]), spec.settings["llm"]
        # With an endpoint, NVRx sends the log to it: it reads a copy with the secrets replaced.
        redactor = outgoing_redactor(llm) if llm else None
        with staged_log(source, redactor) as log:
            argv = self.argv(checkout.python, log, llm, source, spec)
            stdout_path, stderr_path = log.parent / "stdout", log.parent / "stderr"
            env = checkout.env(str(llm.get("api_key_file") or ""))
            status = run_process(argv, stdout_path, stderr_path, spec.timeout_s, env=env)
            stderr_tail = tail(stderr_path)
            redactions = dict(redactor.counts) if redactor else {}
            if status != 0:
                raise AnalyzerFailure(exit_reason(status), stderr_tail, redactions)
            raw = stdout_path.read_text(errors="replace")
            kept = self.keep(log.parent)
        try:
            verdict = self.read(raw, llm)
        except AnalyzerFailure as exc:
            raise AnalyzerFailure(str(exc), stderr_tail, redactions) from None
        return Answer(verdict, verdict.to_text(), raw, kept, redactions)


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
