"""NVRx's nvrx_logsage from its pip package (`nvidia-resiliency-ext`, package `logsage`), with its
own endpoint; configuring it without the package is a config error. `nvrx_logsage` runs the same
analyzer from a checkout. (Kind `upstream` before this release.)"""

from __future__ import annotations

import importlib.util
import subprocess
from collections import Counter
from collections.abc import Mapping
from typing import Any

from faultloop.analyze import logsage
from faultloop.analyze.analyzer import (
    Answer,
    Input,
    Kind,
    LogSource,
    Spec,
    checked,
    log_answer,
    package_version,
    staged_log,
)
from faultloop.analyze.running import AnalyzerFailure
from faultloop.core.errors import ConfigError

DISTRIBUTION = "nvidia-resiliency-ext"


class NvrxLogsagePackage(Kind):
    name = "nvrx_logsage_package"
    input = Input.LOG
    summary = (
        "NVRx's `nvrx_logsage` from its pip package (`nvidia-resiliency-ext`, with its own endpoint), when installed; "
        "configuring it without the package is a config error. `nvrx_logsage` runs the same analyzer from a checkout"
    )

    def configure(self, entry: Mapping[str, Any], config: Mapping[str, Any], where: str) -> dict[str, Any]:
        if importlib.util.find_spec("logsage") is None:
            raise ConfigError(
                f"{where}: kind {self.name} needs NVRx's log analyzer ({DISTRIBUTION}, package `logsage`), "
                "which is not installed"
            )
        return {}

    def fingerprint_settings(self, spec: Spec, config: Mapping[str, Any]) -> Any:
        return (self.name, package_version(DISTRIBUTION))

    def run(self, spec: Spec, source: Any) -> Answer:
        assert isinstance(source, LogSource)
        redactions: Counter[str] = Counter()
        with staged_log(source) as neutral:
            try:
                verdict = logsage.run_upstream(neutral, logsage.Settings("upstream"), redactions)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                raise AnalyzerFailure(str(exc), redactions=redactions) from None
        return log_answer(checked(verdict.to_json()), redactions=redactions)


KIND = NvrxLogsagePackage()
