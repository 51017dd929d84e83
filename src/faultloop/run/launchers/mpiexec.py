"""MPICH's mpiexec (hydra, Debian's `mpich`): one launcher for the whole job, ranks from PMI_RANK,
PMI_SIZE and MPI_LOCALRANKID; run with `-print-all-exitcodes`, as a site does to see every rank.

When a rank dies by a signal, hydra kills the others (SIGKILL) and prints its banner: `BAD
TERMINATION OF ONE OF YOUR APPLICATION PROCESSES`, `PID <pid> RUNNING AT <host>`, `EXIT CODE: 9`
(the pid is any of the dead, often a killed one), then `YOUR APPLICATION TERMINATED WITH THE
EXIT STRING: Killed (signal 9)` (the first to die). A rank that exits with a non-zero code is
not reported: hydra waits for the others and exits with the code. `-print-all-exitcodes` adds
`[mpiexec@<host>] Exit codes: [<host>] 0,768`, one line per node (`[n2] 0,0`): every rank's wait
status, in rank order.

Inside a SLURM allocation (proxies started by srun) hydra 4.0.2 prints the banner, then the other
nodes' proxies fail their clean-up (`[proxy:0:1@<host>] HYD_pmcd_pmip_control_cmd_cb
(pm/pmiserv/pmip_cb.c:899): assert (!closed) failed`, `srun: error: n2: task 1: Exited with exit
code 7`: srun's task is the proxy, not a rank) and mpiexec aborts (`one of the processes
terminated badly; aborting`) before its exit codes and exit string: no rank is named there, and
every rank's exit stays UNKNOWN.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Sequence

from faultloop.contracts import RankExit
from faultloop.run.launchers import mpi
from faultloop.run.launchers.base import JobEnd, LaunchJob
from faultloop.run.launchers.rank_records import stopped_then_ended
from faultloop.run.srun import Task
from faultloop.signals import exit_signal

NAMES = ("mpiexec.hydra", "mpiexec.mpich", "mpiexec")
OPTIONS = ("-print-all-exitcodes",)
BAD_TERMINATION = "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"
EXIT_CODES_RE = re.compile(r"^\[mpiexec@\S+\] Exit codes: (.*)$")
HOST_CODES_RE = re.compile(r"\[\S+\] ([\d,]+)")
NODE_CODES_RE = re.compile(r"^\[[^\]@\s]+\] [\d,]+\s*$")
EXIT_STRING_RE = re.compile(r"TERMINATED WITH THE EXIT STRING: .*\(signal (\d+)\)")


def local_tasks(job: LaunchJob) -> list[Task]:
    """One mpiexec playing every node: `-n G -env <name> <value>` per app context."""
    argv = [
        mpi.program(*NAMES),
        *OPTIONS,
        *mpi.app_contexts(
            job,
            lambda node, env: ["-n", str(job.spec.gpus_per_node), *(f for k, v in env.items() for f in ("-env", k, v))],
        ),
    ]
    env = dict(job.env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(job.port))
    return [Task(0, argv, env, job.node_names[0])]


def allocation_argv(job: LaunchJob, hosts: list[str]) -> list[str]:
    """mpiexec inside the allocation, G ranks per node, as in a site's sbatch script: hydra finds
    SLURM's allocation (its slurm resource manager reads SLURM_NODELIST, SLURM_NNODES and
    SLURM_TASKS_PER_NODE, given back by mpi.allocation_env) and starts one proxy per node with
    srun (its slurm launcher); without them it runs every rank on the first node. Hydra passes
    its whole environment to every rank, so the batch node's SLURMD_NODENAME is left out: each
    rank keeps the one its own node's slurmd sets, and states the node it runs on."""
    s = job.spec
    return [
        "env",
        "-u",
        "SLURMD_NODENAME",
        *(f"{k}={v}" for k, v in mpi.allocation_env(job, hosts).items()),
        mpi.program(*NAMES),
        *OPTIONS,
        "-n",
        str(s.world_size),
        "-ppn",
        str(s.gpus_per_node),
        *job.rank_command,
    ]


def rank_exits(end: JobEnd) -> dict[int, RankExit]:
    """Every rank's wait status from hydra's `Exit codes:` line; a rank killed by SIGKILL after
    another died of a different signal (hydra's clean-up) is TERMINATED, and so is the rank the
    fault stopped where hydra never printed the line (it waits for a stopped rank until the job's
    end)."""
    ranks = end.all_ranks()
    ranks.update(read_exit_codes(end.lines))
    return stopped_then_ended(ranks, end.lines)


def read_exit_codes(lines: Sequence[str]) -> dict[int, RankExit]:
    """Wait statuses in rank order: `Exit codes: [<host>] 9,11` names the first node's ranks, each
    further node's come on a line of its own (`[n2] 0,768`), as hydra prints one line per proxy."""
    statuses: list[int] = []
    first_signal: int | None = None
    reading = False
    for line in lines:
        if m := EXIT_CODES_RE.search(line):
            statuses, reading = _codes(m[1]), True
        elif reading and NODE_CODES_RE.match(line):
            statuses += _codes(line)
        else:
            reading = False
            if m := EXIT_STRING_RE.search(line):
                first_signal = int(m[1])
    found: dict[int, RankExit] = {}
    for rank, status in enumerate(statuses):
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        cleaned_up = code == -signal.SIGKILL and first_signal not in (None, signal.SIGKILL)
        state = "SUCCEEDED" if code == 0 else "TERMINATED" if cleaned_up else "FAILED"
        found[rank] = RankExit(rank, code, exit_signal(code), state)
    return found


def _codes(text: str) -> list[int]:
    return [int(code) for host in HOST_CODES_RE.findall(text) for code in host.split(",")]
