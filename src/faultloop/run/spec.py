"""run_job's settings and one cell's job: each setting declared once, here.

`JobSettings` states every launcher and workload knob with its type, default and meaning. The
command lines of `faultloop run-job` and `faultloop cell run` (faultloop.cli.options), the flags
the run_job rule passes (`rule_flags`, from the config's `run_job` section, whose validity the
config schema states) and the rank process's own options (`RANK_SETTINGS`) derive from it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

LAYOUTS = ("torchrun", "srun")
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
        "torchrun", "torchrun: one torch launcher per node; srun: one process per rank", choices=LAYOUTS
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
class JobSpec:
    """One cell's job: the fault, the shape, and the settings of its launch."""

    cell_dir: Path
    fault_type: str
    rank: int
    iter: int
    nodes: int
    gpus_per_node: int
    fault_delay: float = 0.0
    settings: JobSettings = field(default_factory=JobSettings)

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
