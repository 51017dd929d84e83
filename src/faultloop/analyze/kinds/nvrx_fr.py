"""NVRx's fr_attribution from the checkout, on sanitized copies of the dumps, not normalised."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from faultloop.analyze.analyzer import Answer, DumpsSource, Input, Kind, Spec
from faultloop.analyze.nvrx import FR, tools
from faultloop.analyze.nvrx import run as nvrx_run
from faultloop.analyze.nvrx.tools import Checkout


class NvrxFr(Kind):
    name = FR
    input = Input.DUMPS
    summary = "NVRx's `fr_attribution` from your checkout, on sanitized copies (see \"NVRx's analyzers\")"

    def configure(self, entry: Mapping[str, Any], config: Mapping[str, Any], where: str) -> dict[str, Any]:
        return {"nvrx": asdict(tools.checkout(config, where, self.name))}

    def fingerprint_settings(self, spec: Spec, config: Mapping[str, Any]) -> Any:
        checkout = Checkout(**spec.settings["nvrx"])
        shape = (config["gpus_per_node"], config["fr_segment_size"])
        return (shape, spec.timeout_s, checkout.digest(), checkout.python)

    def run(self, spec: Spec, source: Any) -> Answer:
        assert isinstance(source, DumpsSource)
        verdict, output = nvrx_run.analyze_fr(
            source.fr_path,
            Checkout(**spec.settings["nvrx"]),
            world_size=source.world_size,
            gpus_per_node=source.gpus_per_node,
            segment_size=source.segment_size,
            timeout_s=spec.timeout_s,
        )
        return Answer(verdict, output, output)


KIND = NvrxFr()
