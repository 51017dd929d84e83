"""faultloop's own log analyzer (logsage, `faultloop.analyze.logsage`): deterministic and offline; over
a job's life it decides the next attempt from the earlier attempts' logs (`logsage.life`)."""

from __future__ import annotations

from typing import Any

from faultloop.analyze.analyzer import Answer, Input, Kind, LogSource, Spec, checked, log_answer
from faultloop.analyze.logsage import Settings, life


class FaultloopLog(Kind):
    name = "faultloop"
    input = Input.LOG
    summary = "faultloop's logsage (`faultloop.analyze.logsage`), deterministic and offline"
    history = True

    def run(self, spec: Spec, source: Any) -> Answer:
        assert isinstance(source, LogSource)
        return log_answer(checked(life.analyze_life(source.path, source.earlier, Settings()).to_json()))


KIND = FaultloopLog()
