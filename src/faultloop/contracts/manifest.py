"""job.json: what run_job records about one cell's job, the only input about the run that
scoring trusts. One type reads, writes and checks it, for the built-in workload, site workloads
and adopted sessions alike.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from faultloop.core import atomic, layout

# run_job's states (NOT_NEEDED: an attempt of a job's life that ran no job because the attempt
# before it completed, or ended the life otherwise), then the end states an adopted run's
# artifacts can show (SLURM's names), and UNKNOWN for an adopted run whose end no artifact shows.
NOT_NEEDED = "NOT_NEEDED"
STATES = (
    "COMPLETED",
    "FAILED",
    "TIMEOUT",
    "INFRA_FAILED",
    NOT_NEEDED,
    "CANCELLED",
    "PREEMPTED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "UNKNOWN",
)
# The workload of a manifest `faultloop adopt` derived from another tool's run (never run_job's).
ADOPTED_WORKLOAD = "adopted-nvrx"
RANK_STATES = ("SUCCEEDED", "FAILED", "TERMINATED", "UNKNOWN")


class ManifestError(ValueError):
    """A job.json that cannot be used, naming the file and the field."""


@dataclass(frozen=True)
class RankExit:
    """How one rank ended, as its launcher reported it."""

    rank: int
    exitcode: int | None = None
    signal: str | None = None
    state: str = "UNKNOWN"  # SUCCEEDED | FAILED | TERMINATED (stopped by its launcher) | UNKNOWN
    error: str | None = None  # the rank's own recorded error (torchrun error file), if any


@dataclass
class Manifest:
    """job.json (docs/architecture.md); infra_failure.json has the same fields."""

    job_id: str
    workload: str
    fault_type: str
    fault_rank: int
    fault_iter: int
    nodes: int
    gpus_per_node: int
    world_size: int
    state: str
    main_log: str | None
    launch_out: str | None
    fault_fired: bool
    run_valid: bool
    invalid_reason: str | None
    launcher: str = ""
    node_names: list[str] = field(default_factory=list)
    rank_exits: list[RankExit] = field(default_factory=list)
    start_time: float | None = None
    fault_scheduled_time: float | None = None
    fault_fired_time: float | None = None
    end_time: float | None = None
    state_evidence: str | None = None  # adopted runs: the log line that shows the end state
    # A job's life (docs/architecture.md, job.json): which attempt of how many this run is, the
    # checkpoint step it resumed from (None: it started from scratch), the node names left out of
    # its allocation, the node the injected rank ran on and the iteration its fault fired at.
    attempt: int = 1
    attempts: int = 1
    resumed_from_iter: int | None = None
    drained_nodes: list[str] = field(default_factory=list)
    fault_node: str | None = None
    fault_fired_iter: int | None = None

    @property
    def adopted(self) -> bool:
        """Derived by `faultloop adopt` from an NVRx session, not written by run_job."""
        return self.workload == ADOPTED_WORKLOAD

    def rank_exit(self, rank: int) -> RankExit | None:
        return next((e for e in self.rank_exits if e.rank == rank), None)

    @property
    def seconds_to_end(self) -> float | None:
        """From the fault firing to the job's end: how long the failure took to surface."""
        if self.fault_fired_time is None or self.end_time is None:
            return None
        return max(0.0, self.end_time - self.fault_fired_time)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["rank_exits"] = {str(e.rank): {k: v for k, v in asdict(e).items() if k != "rank"} for e in self.rank_exits}
        return data

    def write(self, path: Path) -> None:
        atomic.write_json_atomic(path, self.to_json())

    @classmethod
    def from_json(cls, data: Any, source: str = layout.MANIFEST) -> Manifest:
        """Check and build; a missing or mistyped field is one error naming the file and field."""
        if not isinstance(data, dict):
            raise ManifestError(f"{source}: not a JSON object")
        known = {f.name for f in fields(cls)}
        required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
        missing = sorted(required - set(data))
        if missing:
            raise ManifestError(f"{source}: missing field(s) {', '.join(missing)}")
        values = {k: v for k, v in data.items() if k in known}
        exits = values.get("rank_exits") or {}
        try:
            values["rank_exits"] = [
                RankExit(rank=int(r), **{k: v for k, v in e.items() if k in _EXIT_FIELDS})
                for r, e in (exits.items() if isinstance(exits, dict) else [])
            ]
        except (TypeError, ValueError, AttributeError) as exc:
            raise ManifestError(f"{source}: field rank_exits: {exc}") from None
        for name, kind in (
            ("fault_rank", int),
            ("fault_iter", int),
            ("nodes", int),
            ("gpus_per_node", int),
            ("world_size", int),
            ("fault_fired", bool),
            ("run_valid", bool),
        ):
            # JSON's true is a Python int too: a count or a rank must be a number, not a flag
            if not isinstance(values[name], kind) or (kind is int and isinstance(values[name], bool)):
                raise ManifestError(f"{source}: field {name} must be {kind.__name__}, got {values[name]!r}")
        for name in ("attempt", "attempts"):
            value = values.get(name, 1)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ManifestError(f"{source}: field {name} must be a positive int, got {value!r}")
        if values.get("attempt", 1) > values.get("attempts", 1):
            raise ManifestError(
                f"{source}: field attempt {values.get('attempt')} is beyond attempts {values.get('attempts', 1)}"
            )
        for name in ("resumed_from_iter", "fault_fired_iter"):
            value = values.get(name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ManifestError(f"{source}: field {name} must be a non-negative int or null, got {value!r}")
        for name in ("drained_nodes", "node_names"):
            value = values.get(name, [])
            if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
                raise ManifestError(f"{source}: field {name} must be a list of node names, got {value!r}")
        if values.get("fault_node") is not None and not isinstance(values["fault_node"], str):
            raise ManifestError(f"{source}: field fault_node must be a node name or null, got {values['fault_node']!r}")
        if values["state"] not in STATES:
            raise ManifestError(f"{source}: field state must be one of {', '.join(STATES)}, got {values['state']!r}")
        return cls(**values)

    @classmethod
    def read(cls, path: Path) -> Manifest:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ManifestError(f"{path}: cannot read: {exc}") from None
        return cls.from_json(data, str(path))


_EXIT_FIELDS = {f.name for f in fields(RankExit)} - {"rank"}
