"""NVRx's Restart Agent (`attribution/restart_agent`) from the checkout: deterministic
(`--disable-l1`) by default, its L1 model enrichment on when the analyzer has an endpoint."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faultloop.analyze.nvrx import RESTART_AGENT, outputs, tools
from faultloop.analyze.nvrx.run import NvrxLog
from faultloop.contracts import LogVerdict


class NvrxRestartAgent(NvrxLog):
    name = RESTART_AGENT
    summary = (
        "NVRx's Restart Agent (`attribution/restart_agent`) from your checkout (`nvrx.src`): deterministic "
        "(`--disable-l1`) by default, its L1 model enrichment on when the analyzer has an endpoint "
        "(`llm:`, else `logsage.llm`)"
    )

    def argv(self, python: str, log: Path, llm: Mapping[str, Any], source: Path) -> list[str]:
        return tools.restart_agent_argv(python, log, llm)

    def read(self, raw: str, llm: Mapping[str, Any]) -> LogVerdict:
        return outputs.restart_agent_verdict(outputs.last_json_object(raw), l1=bool(llm))


KIND = NvrxRestartAgent()
