"""Baseline: what the launcher itself says (`analyze.baselines.torchrun_root_cause`)."""

from __future__ import annotations

from typing import Any

from faultloop.analyze import baselines
from faultloop.analyze.analyzer import Answer, Input, Kind, LogSource, Spec, log_answer


class TorchrunRootCause(Kind):
    name = "torchrun_root_cause"
    input = Input.LOG
    summary = (
        'baseline: torchrun\'s own "Root Cause (first observed failure)" (the earliest when several nodes print '
        "one), else the first `failed (exitcode: N) local_rank: L` line; restart STOP for any signal or non-zero "
        "exit. With `srun --label` and one torchrun per node the label is the node index."
    )

    def run(self, spec: Spec, source: Any) -> Answer:
        assert isinstance(source, LogSource)
        return log_answer(baselines.torchrun_root_cause(source.path))


KIND = TorchrunRootCause()
