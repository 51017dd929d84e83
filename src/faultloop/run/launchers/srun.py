"""srun: one process per rank and no torchrun, as many Megatron sbatch scripts run.

Inside a SLURM allocation it is the real `srun --label --kill-on-bad-exit=1`; on this machine
`faultloop.run.srun.LocalSrun` does the same. Ranks' exits: the exit codes of the rank processes
(this machine), or srun's own task report (`srun: error: n1: task 3: Killed`).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable, Iterator

from faultloop.contracts import RankExit
from faultloop.run.launchers.base import JobEnd, LaunchJob
from faultloop.run.srun import Task
from faultloop.signals import exit_signal, srun_signal

# srun's own report of a task that ended badly: `srun: error: n1: tasks 2-3: Exited with exit code 1`
SRUN_TASK_RE = re.compile(r"srun: error: (\S+): tasks? ([\d,\-]+): (.*)")


def local_tasks(job: LaunchJob) -> list[Task]:
    s = job.spec
    return [
        Task(
            rank,
            list(job.rank_command),
            job.node_env(
                rank // s.gpus_per_node,
                SLURM_PROCID=str(rank),
                SLURM_LOCALID=str(rank % s.gpus_per_node),
                SLURM_NODEID=str(rank // s.gpus_per_node),
                SLURM_NTASKS=str(s.world_size),
                SLURM_NTASKS_PER_NODE=str(s.gpus_per_node),  # as srun --ntasks-per-node sets it
                SLURM_NNODES=str(s.nodes),
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(job.port),
            ),
            job.node_names[rank // s.gpus_per_node],
        )
        for rank in range(s.world_size)
    ]


def allocation_argv(job: LaunchJob, hosts: list[str]) -> list[str]:
    s = job.spec
    srun = ["srun", "--label", "--kill-on-bad-exit=1", f"--nodes={s.nodes}"]
    return [*srun, f"--ntasks={s.world_size}", f"--ntasks-per-node={s.gpus_per_node}", *job.rank_command]


def rank_exits(end: JobEnd) -> dict[int, RankExit]:
    ranks = end.all_ranks()
    if end.on_slurm:
        ranks.update(read_srun_report(end.lines))
        return ranks
    for e in end.exits:
        code = _as_returncode(e.exitcode)
        state = "SUCCEEDED" if e.exitcode == 0 else "TERMINATED" if e.stopped else "FAILED"
        ranks[e.label] = RankExit(e.label, code, exit_signal(code), state)
    return ranks


def _as_returncode(code: int) -> int:
    """Popen's code for a signal death is -signal; a shell's is 128 + signal."""
    return code - 256 if code > 128 + 64 else code


def read_srun_report(lines: Iterable[str]) -> dict[int, RankExit]:
    """Per-rank exits from srun's own report lines (`srun: error: n1: task 3: Killed`)."""
    ranks: dict[int, RankExit] = {}
    for line in lines:
        m = SRUN_TASK_RE.search(line)
        if not m:
            continue
        what = m.group(3).strip()
        sig = srun_signal(what)
        code = re.search(r"exit code (\d+)", what)
        exitcode = -signal.Signals[sig].value if sig else int(code.group(1)) if code else None
        for rank in _task_ids(m.group(2)):
            ranks.setdefault(rank, RankExit(rank, exitcode, sig, "FAILED"))
    return ranks


def _task_ids(text: str) -> Iterator[int]:
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        yield from range(int(lo), int(hi or lo) + 1)
