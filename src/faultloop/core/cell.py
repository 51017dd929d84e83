"""The cell: one experiment of a pool, a `Cell` inside every process and its name (upstream's
experiment folder) at the process edges."""

from __future__ import annotations

import re
from dataclasses import dataclass

from faultloop.faults import FAULTS


def cell_name_pattern() -> str:
    """A cell's name, upstream's experiment folder: n<NODES>_<FAULT>_r<RANK>_i<ITER>, FAULT a row of
    the fault table (as it is when asked: the Snakemake wildcard, masking names in logs)."""
    return rf"n\d+_(?:{'|'.join(map(re.escape, FAULTS))})_r\d+_i\d+"


def _cell_name_re() -> re.Pattern[str]:
    faults = "|".join(map(re.escape, FAULTS))
    return re.compile(rf"^n(?P<nodes>\d+)_(?P<fault>{faults})_r(?P<rank>\d+)_i(?P<iter>\d+)$")


@dataclass(frozen=True, order=True)
class Cell:
    """One experiment: inject FAULT_TYPE on global RANK at iteration ITER in a NODES-node job."""

    fault_type: str
    rank: int
    iter: int
    nodes: int

    @property
    def name(self) -> str:
        """Upstream's experiment folder name, also the Snakemake wildcard."""
        return f"n{self.nodes}_{self.fault_type}_r{self.rank}_i{self.iter}"

    @property
    def spec(self) -> str:
        return f"{self.fault_type}:{self.rank}:{self.iter}:{self.nodes}"

    @classmethod
    def from_name(cls, name: str) -> Cell:
        match = _cell_name_re().match(name)
        if not match:
            raise ValueError(f"not a cell name: {name!r} (expected n<N>_<FAULT>_r<R>_i<I>)")
        return cls(match["fault"], int(match["rank"]), int(match["iter"]), int(match["nodes"]))
