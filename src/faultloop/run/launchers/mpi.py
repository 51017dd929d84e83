"""What Open MPI's mpirun and MPICH's mpiexec share: one launcher for the whole job, which on this
machine plays every node (one app context per node, MPMD `:`), and the program's name as this
machine installs it (Debian installs both MPIs side by side: `mpirun.openmpi`, `mpiexec.hydra`)."""

from __future__ import annotations

import shutil
from collections.abc import Callable

from faultloop.run.launchers.base import LaunchJob
from faultloop.run.launchers.identity import SIMULATED_LOCAL_SIZE_ENV, SIMULATED_NODE_ENV


def program(*names: str) -> str:
    """The first of `names` on PATH (the MPI's own name first), else the last (a generic name)."""
    return next((name for name in names if shutil.which(name)), names[-1])


def allocation_env(job: LaunchJob, hosts: list[str]) -> dict[str, str]:
    """The allocation's variables an MPI's launcher reads to place G ranks on each of `hosts` (Open
    MPI's `ras`, hydra's slurm resource manager), as sbatch sets them. The SLURM executor's job
    step strips them (faultloop.run.slurm), so run_job gives them back from the allocation's hosts."""
    return {
        "SLURM_JOBID": job.job_id,
        "SLURM_NODELIST": ",".join(hosts),
        "SLURM_TASKS_PER_NODE": f"{job.spec.gpus_per_node}(x{len(hosts)})",
        "SLURM_NNODES": str(len(hosts)),
    }


def app_contexts(job: LaunchJob, context: Callable[[int, dict[str, str]], list[str]]) -> list[str]:
    """Every simulated node as one app context: `context(node, env)` gives its options (its rank
    count and the env naming its node), the rank command follows; contexts are joined by `:`."""
    s = job.spec
    argv: list[str] = []
    for node in range(s.nodes):
        env = {
            "FAULTLOOP_NODE_NAME": job.node_names[node],
            SIMULATED_NODE_ENV: str(node),
            SIMULATED_LOCAL_SIZE_ENV: str(s.gpus_per_node),
        }
        argv += [*([":"] if node else []), *context(node, env), *job.rank_command]
    return argv
