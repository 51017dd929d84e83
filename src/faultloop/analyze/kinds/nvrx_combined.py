"""NVRx's combined_log_fr from the checkout: nvrx_logsage and fr_attribution merged by an LLM;
it also reads the cell's dumps, as copies the restricted reader rewrote."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faultloop.analyze.analyzer import LogSource, Spec
from faultloop.analyze.fr import dumps
from faultloop.analyze.nvrx import COMBINED, outputs, tools
from faultloop.analyze.nvrx.run import NvrxLog
from faultloop.contracts import LogVerdict


class NvrxCombined(NvrxLog):
    name = COMBINED
    summary = (
        "NVRx's `combined_log_fr` from your checkout: nvrx_logsage and fr_attribution merged by an LLM; "
        "needs an endpoint; reads the cell's dumps as sanitized copies"
    )

    def argv(self, python: str, log: Path, llm: Mapping[str, Any], source: LogSource, spec: Spec) -> list[str]:
        copies = log.parent / "dumps"
        copies.mkdir()
        folder = tools.dumps_beside(source.path)
        tools.copy_dumps(dumps.find_dumps(str(folder)) if folder else [], copies)
        return tools.combined_argv(python, log, copies, llm)

    def read(self, raw: str, llm: Mapping[str, Any]) -> LogVerdict:
        return outputs.combined_verdict(raw)


KIND = NvrxCombined()
