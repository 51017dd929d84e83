"""What every launcher module gives run_job: the job's processes on this machine or inside a
SLURM allocation, and how each rank ended, read from what the launcher reports."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from faultloop.contracts import RankExit
from faultloop.core import layout
from faultloop.run.spec import JobSpec
from faultloop.run.srun import Task, TaskExit
from faultloop.signals import exit_signal

# How this machine plays one node of a job under a launcher that spans nodes itself (an MPI's
# mpirun): the node's name, its index and its ranks per node (faultloop.run.launchers.identity).
NODE_NAME_ENV = "FAULTLOOP_NODE_NAME"


@dataclass(frozen=True)
class LaunchJob:
    """One run's job as a launcher sees it: the rank command (the workload's module and options),
    its environment, the rendezvous port and where its files go."""

    spec: JobSpec
    rank_command: tuple[str, ...]  # python -m <module> <rank options>
    env: Mapping[str, str]
    port: int
    job_id: str
    cell: Path
    paths: layout.RunPaths

    @property
    def python(self) -> str:
        return self.spec.settings.python

    @property
    def node_names(self) -> list[str]:
        return self.spec.local_node_names

    def node_env(self, node: int, **extra: str) -> dict[str, str]:
        """The environment of node `node`'s processes on this machine."""
        return dict(self.env, **{NODE_NAME_ENV: self.node_names[node]}, **extra)


@dataclass(frozen=True)
class JobEnd:
    """What the launcher left when the job ended: the exits of the processes run_job started (the
    launchers themselves) and the main log."""

    job: LaunchJob
    exits: Sequence[TaskExit]
    on_slurm: bool
    lines: Sequence[str]

    def all_ranks(self, state: str = "UNKNOWN") -> dict[int, RankExit]:
        return {r: RankExit(rank=r, state=state) for r in range(self.job.spec.world_size)}


class Outcome(Enum):
    """How a job went, as far as what its launcher prints depends on it (`job_outcomes`)."""

    STARTED = "every job"
    FAILED = "a rank failed and the launcher ended the job itself"
    BY_EXIT_CODES = "every rank that failed exited with a code"
    BY_A_SIGNAL = "a rank failed by a signal"
    BY_SIGNALS_ONLY = "every rank that failed died by a signal"
    ENDED = "the launcher ended by itself (the job did not run to its limit)"
    STOPPED = "the job ran to its limit and run_job stopped the launcher"
    SOMETIMES = "sometimes, on an order of events the job's record does not show (never required)"


@dataclass(frozen=True)
class LauncherLine:
    """What a launcher prints itself on an outcome: one of `patterns` (regexes of its templates)."""

    when: Outcome
    patterns: tuple[str, ...]
    origin: str  # the program and the source that prints it


def job_outcomes(state: str, rank_exits: Iterable[RankExit]) -> frozenset[Outcome]:
    """The outcomes a job's record (its state and each rank's exit) shows. The ranks that failed
    are those not stopped by their launcher (FAILED, not TERMINATED)."""
    failed = [e for e in rank_exits if e.state == "FAILED"]
    by_code = any(e.exitcode is not None and e.exitcode > 0 for e in failed)
    by_signal = any(e.signal is not None for e in failed)
    found = {Outcome.STARTED}
    if state == "TIMEOUT":
        return frozenset({*found, Outcome.STOPPED})
    found.add(Outcome.ENDED)
    if state != "COMPLETED":
        found.add(Outcome.FAILED)
        found.update({Outcome.BY_EXIT_CODES} if by_code and not by_signal else ())
        found.update({Outcome.BY_A_SIGNAL} if by_signal else ())
        found.update({Outcome.BY_SIGNALS_ONLY} if by_signal and not by_code else ())
    return frozenset(found)


@dataclass(frozen=True)
class Launcher:
    """One launcher: a row of `faultloop.run.launchers.LAUNCHERS`."""

    name: str
    program: str  # what runs the ranks
    package: str  # where the program comes from
    spans: str  # "node": one launcher per node; "rank": one process per rank; "job": one for the whole job
    identity: str  # the identity.SOURCES row its ranks read
    on_rank_failure: str  # what it prints when a rank fails (docs; the analyzers' business)
    local_tasks: Callable[[LaunchJob], list[Task]]  # the job's processes on this machine
    allocation_argv: Callable[[LaunchJob, list[str]], list[str]]  # the command inside a SLURM allocation
    rank_exits: Callable[[JobEnd], dict[int, RankExit]]
    srun_lines: bool = True  # its processes run as srun tasks (labelled lines, srun's error lines)
    programs: tuple[str, ...] = ()  # executables it needs on PATH (refused at planning when absent)
    # What it prints itself, per outcome (`faultloop check-session` looks for them in the main log)
    own_lines: tuple[LauncherLine, ...] = ()
    # The outcomes it prints nothing of its own on, and why (a launcher otherwise silent is checked)
    silent: Mapping[Outcome, str] = field(default_factory=dict)

    def expected_lines(self, outcomes: frozenset[Outcome]) -> list[LauncherLine]:
        """Its lines a job of these outcomes must show (SOMETIMES lines never are)."""
        return [line for line in self.own_lines if line.when in outcomes and line.when is not Outcome.SOMETIMES]


def exit_of(rank: int, code: int | None, state: str, error: str | None = None) -> RankExit:
    """A rank's exit from a code as Popen (-n) or a launcher's report (n > 128: signal n - 128) gives it."""
    if code is not None and 128 < code < 128 + signal.NSIG:
        code = 128 - code
    return RankExit(rank, code, exit_signal(code), state, error)


def by_launcher_exit(end: JobEnd, ranks_of: Callable[[int], range]) -> dict[int, RankExit]:
    """Ranks' exits where the launcher names no rank: SUCCEEDED where the launcher that started
    them (`ranks_of(label)`) exited 0, UNKNOWN elsewhere."""
    ranks = end.all_ranks()
    for e in end.exits:
        if e.exitcode == 0:
            ranks.update({r: RankExit(r, 0, None, "SUCCEEDED") for r in ranks_of(e.label)})
    return ranks


def executable(job: LaunchJob, name: str) -> str:
    """A launcher installed beside the job's Python (a framework's console script)."""
    return str(Path(job.python).parent / name)
