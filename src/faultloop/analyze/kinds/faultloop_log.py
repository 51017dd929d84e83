"""faultloop's own log analyzer (logsage, `faultloop.analyze.logsage`): deterministic and offline."""

from __future__ import annotations

from typing import Any

from faultloop.analyze import logsage
from faultloop.analyze.analyzer import Answer, Input, Kind, LogSource, Spec, checked, log_answer


class FaultloopLog(Kind):
    name = "faultloop"
    input = Input.LOG
    summary = "faultloop's logsage (`faultloop.analyze.logsage`), deterministic and offline"

    def run(self, spec: Spec, source: Any) -> Answer:
        assert isinstance(source, LogSource)
        return log_answer(checked(logsage.analyze_log(source.path, logsage.Settings()).to_json()))


KIND = FaultloopLog()
