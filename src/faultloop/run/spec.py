"""run_job's settings and one cell's job: each setting declared once, here.

`JobSettings` states every launcher and workload knob with its type, default and meaning. The
command lines of `faultloop run-job` and `faultloop cell run` (faultloop.cli.options), the flags
the run_job rule passes (`rule_flags`, from the config's `run_job` section, whose validity the
config schema states) and the rank process's own options (`RANK_SETTINGS`) derive from it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from faultloop.faults import FAULTS, Fault
from faultloop.frameworks import DEFAULT_FRAMEWORK

# The launchers a session may default to (each a row of faultloop.run.launchers.LAUNCHERS; a
# framework's own launcher is named per cell, in the pool).
LAYOUTS = ("torchrun", "srun", "mpirun", "mpirun_tagged", "mpiexec")
# What run_job tells the rank processes beyond upstream's FAULT_* variables: the checkpoint folder
# a restarted job resumes from, and the node whose rank injects a node-bound fault.
RESUME_ENV = "FAULTLOOP_RESUME_FROM"
FAULT_NODE_ENV = "FAULT_NODE"


def rank_node_line(rank: int, world_size: int, local_rank: int, node: str) -> str:
    """How each rank of the built-in workload states its node at start (run_job reads it back)."""
    return f"> rank {rank}/{world_size} (local rank {local_rank}) on {node}: "


RANK_NODE_RE = re.compile(r"> rank (\d+)/\d+ \(local rank \d+\) on (\S+?): ")
SCHEDULERS = ("auto", "local", "slurm")


def _setting(
    default: Any, help_: str, *, choices: tuple[str, ...] = (), config: bool = True, rank: bool = False
) -> Any:
    """A setting's default and metadata: its help, its choices, whether the config's `run_job`
    section sets it (else only the command line does) and whether the rank process takes it."""
    return field(default=default, metadata={"help": help_, "choices": choices, "config": config, "rank": rank})


@dataclass(frozen=True)
class JobSettings:
    """How run_job launches the built-in workload (the config's `run_job` section, config/README.md)."""

    launcher: str = _setting(
        "torchrun",
        "the session's launcher: torchrun (one per node), srun (one process per rank), mpirun, mpirun_tagged "
        "(Open MPI) or mpiexec (MPICH), one for the whole job",
        choices=LAYOUTS,
    )
    iterations: int = _setting(30, "training iterations of the job", rank=True)
    pg_timeout_s: float = _setting(15.0, "collective timeout", rank=True)
    stall_timeout_s: float = _setting(8.0, "no progress for this long: ranks log stacks and dump FR", rank=True)
    kill_grace_s: float = _setting(3.0, "kill-on-bad-exit: SIGTERM to SIGKILL (SLURM's KillWait)")
    shutdown_timeout_s: float = _setting(30.0, "torchrun --shutdown-timeout: SIGTERM to SIGKILL of its workers")
    job_timeout_s: float = _setting(600.0, "the job's time limit")
    scheduler: str = _setting(
        "auto", "auto: the real srun inside a SLURM allocation, else this machine", choices=SCHEDULERS, config=False
    )
    iter_time_s: float = _setting(0.1, "the shortest iteration", config=False, rank=True)
    init_timeout_s: float = _setting(0.0, "rendezvous timeout (0: 60 s + 3 s per rank)", config=False, rank=True)
    term_delay_s: float = _setting(
        2.0, "kill-on-bad-exit: after a task failed, the others get SIGTERM this much later", config=False
    )
    python: str = _setting(sys.executable, "interpreter for the launchers and ranks", config=False)


CONFIG_SETTINGS = tuple(f.name for f in fields(JobSettings) if f.metadata["config"])
RANK_SETTINGS = tuple(f.name for f in fields(JobSettings) if f.metadata["rank"])


def flag(name: str) -> str:
    """A setting's command-line flag: iter_time_s -> --iter-time-s."""
    return "--" + name.replace("_", "-")


def rule_flags(run_job: Mapping[str, Any]) -> list[str]:
    """The run_job rule's launcher flags: each setting the config's `run_job` section gives."""
    return [part for name in CONFIG_SETTINGS if name in run_job for part in (flag(name), str(run_job[name]))]


@dataclass(frozen=True)
class Injection:
    """The fault one attempt injects, in upstream's env contract (FAULT_RANK, FAULT_AT_ITER,
    FAULT_DELAY): scheduled at the first iteration >= `at_iter` the job runs, fired `delay_s`
    later. With `node`, the rank on that node whose local rank is `rank`'s fires it instead (a
    node-bound fault re-injected on whichever rank runs there)."""

    rank: int
    at_iter: int
    delay_s: float
    node: str | None = None


@dataclass(frozen=True)
class Resume:
    """The checkpoint an attempt resumes from: its iteration folder (one file per rank) and step."""

    folder: Path
    iteration: int


@dataclass(frozen=True)
class JobSpec:
    """One run's job: the cell's fault and shape, the settings of its launch and, in a job's life,
    which attempt it is, on which nodes, from which checkpoint and with which injection."""

    cell_dir: Path  # the run folder (a cell's folder for attempt 1)
    fault_type: str
    rank: int
    iter: int
    nodes: int
    gpus_per_node: int
    fault_delay: float = 0.0
    settings: JobSettings = field(default_factory=JobSettings)
    attempt: int = 1
    attempts: int = 1
    # names of node index 0..nodes-1 on this machine (node<i> unless a drained node's ranks moved to a spare)
    node_names: tuple[str, ...] = ()
    drained: tuple[str, ...] = ()  # node names left out of this attempt
    resume: Resume | None = None
    # attempt >= 2: what it injects (None: nothing, a fault that passes or whose node was drained)
    reinjection: Injection | None = None
    workload: str = DEFAULT_FRAMEWORK  # a row of faultloop.frameworks.FRAMEWORKS
    launcher: str = ""  # the cell's launcher (faultloop.run.launchers.LAUNCHERS); "": the session's

    @property
    def launcher_name(self) -> str:
        return self.launcher or self.settings.launcher

    @property
    def injection(self) -> Injection | None:
        """What this attempt injects: the cell's fault at attempt 1, else its re-injection."""
        if self.attempt == 1:
            return Injection(self.rank, self.iter, self.fault_delay)
        return self.reinjection

    @property
    def local_node_names(self) -> list[str]:
        return list(self.node_names) or [f"node{i}" for i in range(self.nodes)]

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def init_timeout_s(self) -> float:
        """The rendezvous timeout the ranks get: the setting, or 60 s + 3 s per rank."""
        return self.settings.init_timeout_s or 60.0 + 3.0 * self.world_size

    def rank_argv(self) -> list[str]:
        """The rank process's options (faultloop.cli.workload)."""
        values = {name: getattr(self.settings, name) for name in RANK_SETTINGS}
        values["init_timeout_s"] = self.init_timeout_s
        return [part for name, value in values.items() for part in (flag(name), str(value))]


@dataclass(frozen=True)
class FaultPlan:
    """The injected fault as upstream's env contract states it; only the target rank acts: the
    rank FAULT_RANK, or with FAULT_NODE the rank on that node with FAULT_RANK's local rank."""

    fault: Fault
    rank: int
    at_iter: int
    delay_s: float
    node: str | None = None
    gpus_per_node: int = 1

    @property
    def name(self) -> str:
        return self.fault.name

    def targets(self, rank: int, local_rank: int, node: str) -> bool:
        if self.node is None:
            return rank == self.rank
        return node == self.node and local_rank == self.rank % self.gpus_per_node

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> FaultPlan | None:
        name = env.get("FAULT_TYPE", "").strip()
        if not name or name == "NONE":
            return None
        if name not in FAULTS:
            raise ValueError(f"unknown FAULT_TYPE {name!r}")
        return cls(
            FAULTS[name],
            int(env.get("FAULT_RANK", "0")),
            int(env.get("FAULT_AT_ITER", "1")),
            float(env.get("FAULT_DELAY", "0") or 0),
            env.get(FAULT_NODE_ENV) or None,
            int(env.get("GPUS_PER_NODE") or 1),
        )
