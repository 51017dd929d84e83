"""NVRx's nvrx_logsage from the checkout; needs an endpoint and the `logsage` package in
`nvrx.python`'s environment. Its printout holds upstream's five parts (`upstream_text`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faultloop.analyze.analyzer import LogSource, Spec
from faultloop.analyze.nvrx import LOGSAGE, outputs, tools
from faultloop.analyze.nvrx.run import NvrxLog
from faultloop.contracts import LogVerdict


class NvrxLogsage(NvrxLog):
    name = LOGSAGE
    summary = (
        "NVRx's `nvrx_logsage` from your checkout; needs an endpoint (refused at config time without one) "
        "and the `logsage` package in `nvrx.python`'s environment"
    )

    def argv(self, python: str, log: Path, llm: Mapping[str, Any], source: LogSource, spec: Spec) -> list[str]:
        return tools.logsage_argv(python, log, llm)

    def read(self, raw: str, llm: Mapping[str, Any]) -> LogVerdict:
        return outputs.logsage_verdict(raw)


KIND = NvrxLogsage()
