"""faultloop's own flight-recorder analyzer (`faultloop.analyze.fr.analysis`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faultloop.analyze.analyzer import Answer, DumpsSource, Input, Kind, Spec
from faultloop.analyze.fr import analysis


class FaultloopFr(Kind):
    name = "faultloop_fr"
    input = Input.DUMPS
    summary = "faultloop's `fr` (`faultloop.analyze.fr`)"

    def fingerprint_settings(self, spec: Spec, config: Mapping[str, Any]) -> Any:
        return (config["gpus_per_node"], config["fr_segment_size"])

    def run(self, spec: Spec, source: Any) -> Answer:
        assert isinstance(source, DumpsSource)
        result = analysis.analyze_dir(
            source.fr_path,
            world_size=source.world_size,
            gpus_per_node=source.gpus_per_node,
            segment_size=source.segment_size,
        )
        return Answer(result.to_verdict(), result.to_table())


KIND = FaultloopFr()
