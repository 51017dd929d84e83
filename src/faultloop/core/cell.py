"""The cell: one experiment of a pool, a `Cell` inside every process and its name (upstream's
experiment folder) at the process edges. A cell of several attempts is one job's life; a cell of
a workload or launcher other than the session's says which in its name."""

from __future__ import annotations

import re
from dataclasses import dataclass

from faultloop.core import layout
from faultloop.faults import FAULTS

# An attempts suffix only where a cell has more than one (`_a2`, `_a12`): a one-attempt cell keeps
# upstream's name, and every cell has exactly one name.
_MANY = r"[2-9]|[1-9]\d+"  # a count of at least 2, without leading zeros
# A workload or launcher name (faultloop.frameworks, faultloop.run.launchers): lower case, digits and
# underscores. In a cell's name after `_w-` and `_l-`: no fault, count or such name holds a `-`.
NAME = r"[a-z][a-z0-9_]*"
_SUFFIX = rf"(?:_w-{NAME})?(?:_l-{NAME})?"


def cell_name_pattern() -> str:
    """A cell's name, upstream's experiment folder: n<NODES>_<FAULT>_r<RANK>_i<ITER>, FAULT a row of
    the fault table (as it is when asked: the Snakemake wildcard, masking names in logs),
    _a<ATTEMPTS> when the cell is a life of more than one attempt, _w-<WORKLOAD> and _l-<LAUNCHER>
    when they are not the session's."""
    return rf"n\d+_(?:{'|'.join(map(re.escape, FAULTS))})_r\d+_i\d+(?:_a(?:{_MANY}))?{_SUFFIX}"


def run_name_pattern() -> str:
    """A run relative to the session (the workflow's `run` wildcard): a cell's name, or
    `<cell>/attempt_<k>` for its attempt k >= 2 (core.layout)."""
    return rf"{cell_name_pattern()}(?:/{layout.ATTEMPT_PREFIX}(?:{_MANY}))?"


def _cell_name_re() -> re.Pattern[str]:
    faults = "|".join(map(re.escape, FAULTS))
    return re.compile(
        rf"^n(?P<nodes>\d+)_(?P<fault>{faults})_r(?P<rank>\d+)_i(?P<iter>\d+)(?:_a(?P<attempts>{_MANY}))?"
        rf"(?:_w-(?P<workload>{NAME}))?(?:_l-(?P<launcher>{NAME}))?$"
    )


@dataclass(frozen=True, order=True)
class Cell:
    """One experiment: inject FAULT_TYPE on global RANK at iteration ITER in a NODES-node job of
    WORKLOAD under LAUNCHER ("": the session's), and restart it while it keeps failing, up to
    ATTEMPTS attempts in all (a job's life)."""

    fault_type: str
    rank: int
    iter: int
    nodes: int
    attempts: int = 1
    workload: str = ""  # a row of faultloop.frameworks.FRAMEWORKS; "": the session's workload
    launcher: str = ""  # a row of faultloop.run.launchers.LAUNCHERS; "": the session's (run_job.launcher)

    @property
    def name(self) -> str:
        """Upstream's experiment folder name (with `_a<ATTEMPTS>` for a life of several attempts,
        `_w-<WORKLOAD>`, `_l-<LAUNCHER>` where not the session's)."""
        base = f"n{self.nodes}_{self.fault_type}_r{self.rank}_i{self.iter}"
        base = base if self.attempts == 1 else f"{base}_a{self.attempts}"
        return (
            base + (f"_w-{self.workload}" if self.workload else "") + (f"_l-{self.launcher}" if self.launcher else "")
        )

    @property
    def spec(self) -> str:
        """The pool token: FAULT:RANK:ITER:NODES, :ATTEMPTS when more than one, @WORKLOAD[/LAUNCHER]
        where not the session's (`@/mpirun`: the session's workload under mpirun)."""
        base = f"{self.fault_type}:{self.rank}:{self.iter}:{self.nodes}"
        base = base if self.attempts == 1 else f"{base}:{self.attempts}"
        if not (self.workload or self.launcher):
            return base
        return f"{base}@{self.workload}" + (f"/{self.launcher}" if self.launcher else "")

    @property
    def runs(self) -> list[str]:
        """Its runs relative to the session, one per attempt (core.layout.run_name)."""
        return layout.run_names(self.name, self.attempts)

    @classmethod
    def from_name(cls, name: str) -> Cell:
        match = _cell_name_re().match(name)
        if not match:
            raise ValueError(
                f"not a cell name: {name!r} (expected n<N>_<FAULT>_r<R>_i<I>, optionally followed by _a<ATTEMPTS>, "
                "_w-<WORKLOAD>, _l-<LAUNCHER>)"
            )
        return cls(
            match["fault"],
            int(match["rank"]),
            int(match["iter"]),
            int(match["nodes"]),
            int(match["attempts"] or 1),
            match["workload"] or "",
            match["launcher"] or "",
        )
