"""Baseline: the rank of the first error-looking line (`analyze.baselines.first_error`)."""

from __future__ import annotations

from typing import Any

from faultloop.analyze import baselines
from faultloop.analyze.analyzer import Answer, Input, Kind, LogSource, Spec, log_answer


class FirstError(Kind):
    name = "first_error"
    input = Input.LOG
    summary = "baseline: the rank of the first line that looks like an error; STOP when there is one"

    def run(self, spec: Spec, source: Any) -> Answer:
        assert isinstance(source, LogSource)
        return log_answer(baselines.first_error(source.path))


KIND = FirstError()
