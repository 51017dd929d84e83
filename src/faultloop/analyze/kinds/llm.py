"""logsage's LLM mode on an OpenAI-compatible endpoint (the entry's `llm:`, else `logsage.llm`).
When the model fails, that is the analyzer's recorded failure, not logsage's deterministic fallback."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from faultloop.analyze import logsage
from faultloop.analyze.analyzer import Answer, Input, Kind, LogSource, Spec, checked, log_answer
from faultloop.analyze.llm import LLM_OPTION, endpoint_settings, keyless
from faultloop.analyze.running import AnalyzerFailure
from faultloop.core.errors import ConfigError


def endpoint_of(entry: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """The entry's endpoint over logsage.llm's."""
    return {**(config.get("logsage") or {}).get("llm", {}), **(entry.get("llm") or {})}


class Llm(Kind):
    name = "llm"
    input = Input.LOG
    summary = (
        "logsage's LLM mode (an OpenAI-compatible endpoint: the analyzer's `llm:` or `logsage.llm`); "
        "when the model fails, that is a recorded failure, not the deterministic fallback"
    )
    options = LLM_OPTION

    def configure(self, entry: Mapping[str, Any], config: Mapping[str, Any], where: str) -> dict[str, Any]:
        endpoint = endpoint_of(entry, config)
        if not endpoint.get("base_url") or not endpoint.get("model"):
            raise ConfigError(f"{where}: an llm analyzer needs llm.base_url and llm.model (its own or logsage.llm's)")
        return {"llm": endpoint}

    def fingerprint_settings(self, spec: Spec, config: Mapping[str, Any]) -> Any:
        return (self.name, keyless(spec.settings["llm"]))

    def run(self, spec: Spec, source: Any) -> Answer:
        assert isinstance(source, LogSource)
        settings = logsage.Settings(mode="llm", llm=endpoint_settings(spec.settings["llm"]))
        redactions: Counter[str] = Counter()
        verdict = logsage.analyze_with_llm(source.path, settings, redactions)
        if verdict.extra.get("llm_error"):
            # logsage falls back to its deterministic verdict; that is not the LLM's answer.
            raise AnalyzerFailure(f"LLM failed: {verdict.extra['llm_error']}", redactions=redactions)
        return log_answer(checked(verdict.to_json()), redactions=redactions)


KIND = Llm()
