"""Open MPI's mpirun (Debian's `openmpi-bin`): one launcher for the whole job, ranks from
OMPI_COMM_WORLD_*; `mpirun_tagged` adds `--tag-output` (every line `[jobid,rank]<stdout>:`).

When a rank fails, Open MPI aborts the job and prints its summary of that rank between dashed
rules: `mpirun detected that one or more processes exited with non-zero status ... Process name:
[[1234,1],1] Exit code: 3`, or `mpirun noticed that process rank 1 with PID 0 on node n1 exited
on signal 9 (Killed).` Only the first rank to fail is named: the others are left UNKNOWN, but
where a framework rank wrote its own exit record.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from faultloop.contracts import RankExit
from faultloop.run.launchers import mpi
from faultloop.run.launchers.base import JobEnd, LaunchJob, exit_of
from faultloop.run.launchers.rank_records import recorded
from faultloop.run.srun import Task

NAMES = ("mpirun.openmpi", "mpirun")
# Open MPI refuses root without these (CI runs as root); a site's own user needs neither.
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
PROCESS_NAME_RE = re.compile(r"^\s*Process name:\s*\[\[\d+,\d+\],(\d+)\]")
EXIT_CODE_RE = re.compile(r"^\s*Exit code:\s*(-?\d+)")
SIGNALLED_RE = re.compile(r"noticed that process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)")


def _options(tagged: bool) -> list[str]:
    return ["--tag-output"] if tagged else []


def local_tasks(job: LaunchJob, tagged: bool = False) -> list[Task]:
    """One mpirun playing every node: `-np G -x <the node's env>` per app context."""
    argv = [
        mpi.program(*NAMES),
        *_options(tagged),
        "--oversubscribe",  # this machine's cores are fewer than the job's ranks
        *mpi.app_contexts(
            job,
            lambda node, env: [
                "-np",
                str(job.spec.gpus_per_node),
                *(p for k, v in env.items() for p in ("-x", f"{k}={v}")),
            ],
        ),
    ]
    env = dict(job.env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(job.port), **ROOT_ENV)
    return [Task(0, argv, env, job.node_names[0])]


def allocation_argv(job: LaunchJob, hosts: list[str], tagged: bool = False) -> list[str]:
    """mpirun inside the allocation, G ranks per node: it reads SLURM's allocation (its `ras`
    component, from mpi.allocation_env) and starts its daemons with srun (its `plm` component), as
    in a site's sbatch script; ROOT_ENV as this machine's tasks get it."""
    s = job.spec
    return [
        "env",
        *(f"{k}={v}" for k, v in {**mpi.allocation_env(job, hosts), **ROOT_ENV}.items()),
        mpi.program(*NAMES),
        *_options(tagged),
        "-np",
        str(s.world_size),
        "--map-by",
        f"ppr:{s.gpus_per_node}:node",
        *(p for name in ("MASTER_ADDR", "MASTER_PORT") for p in ("-x", name)),
        *job.rank_command,
    ]


def rank_exits(end: JobEnd) -> dict[int, RankExit]:
    """All SUCCEEDED when mpirun exited 0; else the rank its summary names, and each framework
    rank's own exit record (rank_records; the built-in workload writes none)."""
    if all(e.exitcode == 0 for e in end.exits):
        return {r: RankExit(r, 0, None, "SUCCEEDED") for r in range(end.job.spec.world_size)}
    ranks = end.all_ranks()
    ranks.update(read_summary(end.lines))
    return recorded(end, ranks)


def read_summary(lines: Sequence[str]) -> dict[int, RankExit]:
    """The rank Open MPI's abort summary names, with its exit code or signal."""
    found: dict[int, RankExit] = {}
    named: int | None = None
    for line in lines:
        if m := SIGNALLED_RE.search(line):
            rank = int(m[1])
            found.setdefault(rank, exit_of(rank, -int(m[2]), "FAILED"))
        elif m := PROCESS_NAME_RE.search(line):
            named = int(m[1])
        elif named is not None and (m := EXIT_CODE_RE.search(line)):
            found.setdefault(named, exit_of(named, int(m[1]), "FAILED"))
            named = None
    return found
