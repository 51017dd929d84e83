"""The launchers frameworks bring: `accelerate launch`, the `deepspeed` launcher, Lightning's own
process launcher and Ray's workers. Each starts the framework's rank module the way that
framework's users start it; a framework supports the ones its row in faultloop.frameworks names.

Where the launcher names no rank in its report, a rank's exit is SUCCEEDED when its launcher
exited 0, else UNKNOWN: the marker, not the exit, says where the fault fired.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from faultloop.contracts import RankExit
from faultloop.run.launchers import srun
from faultloop.run.launchers.base import JobEnd, LaunchJob, by_launcher_exit, executable, exit_of
from faultloop.run.srun import Task

# torch's failure table (torchrun's, and accelerate's, which runs torch's launcher in-process):
# `  rank      : 1 (local_rank: 1)` then `  exitcode  : -9 (pid: 1234)`
TABLE_RANK_RE = re.compile(r"\brank\s+: (\d+) \(local_rank: \d+\)")
TABLE_EXIT_RE = re.compile(r"\bexitcode\s+: (-?\d+) \(pid: \d+\)")


# Inside an allocation one launcher per node, started by srun; each reads its node's index from
# srun (the launcher's own node-rank option, placed first): `bash -c` runs the launcher as "$0".
PER_NODE_SHELL = 'exec "$0" {option} "$SLURM_NODEID" "$@"'


def per_node_exits(end: JobEnd) -> dict[int, RankExit]:
    g = end.job.spec.gpus_per_node
    return by_launcher_exit(end, lambda node: range(node * g, (node + 1) * g))


def whole_job_exits(end: JobEnd) -> dict[int, RankExit]:
    return by_launcher_exit(end, lambda _: range(end.job.spec.world_size))


# -- accelerate launch: one per node, torch's elastic launcher in-process ----------------------


def accelerate_options(job: LaunchJob, master: str, rendezvous: str) -> list[str]:
    """`accelerate launch`'s options after its machine rank, the module and its options."""
    s = job.spec
    return [
        "--multi_gpu",
        "--num_machines",
        str(s.nodes),
        "--num_processes",
        str(s.world_size),
        "--main_process_ip",
        master,
        "--main_process_port",
        str(job.port),
        "--rdzv_backend",
        rendezvous,
        "--max_restarts",
        "0",
        "--module",
        *job.rank_command[2:],  # the module and its options
    ]


def accelerate_tasks(job: LaunchJob) -> list[Task]:
    return [
        Task(
            node,
            [
                executable(job, "accelerate"),
                "launch",
                "--machine_rank",
                str(node),
                *accelerate_options(job, "127.0.0.1", "static"),
            ],
            job.node_env(node),
            job.node_names[node],
        )
        for node in range(job.spec.nodes)
    ]


def accelerate_allocation(job: LaunchJob, hosts: list[str]) -> list[str]:
    s = job.spec
    srun_ = ["srun", "--label", "--kill-on-bad-exit=1", f"--nodes={s.nodes}", f"--ntasks={s.nodes}"]
    shell = PER_NODE_SHELL.format(option="launch --machine_rank")
    options = accelerate_options(job, hosts[0], "c10d")
    return [*srun_, "--ntasks-per-node=1", "bash", "-c", shell, executable(job, "accelerate"), *options]


def accelerate_exits(end: JobEnd) -> dict[int, RankExit]:
    """torch's failure table names the first failed rank; the rest as their launcher exited."""
    ranks = per_node_exits(end)
    ranks.update(read_failure_table(end.lines))
    return ranks


def read_failure_table(lines: Sequence[str]) -> dict[int, RankExit]:
    found: dict[int, RankExit] = {}
    rank: int | None = None
    for line in lines:
        if m := TABLE_RANK_RE.search(line):
            rank = int(m[1])
        elif rank is not None and (m := TABLE_EXIT_RE.search(line)):
            found.setdefault(rank, exit_of(rank, int(m[1]), "FAILED"))
            rank = None
    return found


# -- the deepspeed launcher: one per node, without ssh (each node started on its own) -----------


def deepspeed_options(job: LaunchJob, master: str) -> list[str]:
    """The deepspeed launcher's options after its node rank, the module and its options."""
    return [
        "--hostfile",
        str(job.cell / "hostfile"),
        "--no_ssh",
        "--master_addr",
        master,
        "--master_port",
        str(job.port),
        "--no_local_rank",
        "--module",
        *job.rank_command[2:],
    ]


def _write_hostfile(job: LaunchJob, hosts: list[str]) -> None:
    """DeepSpeed's hostfile: every node and its slots (its world, read by each node's launcher)."""
    (job.cell / "hostfile").write_text("".join(f"{h} slots={job.spec.gpus_per_node}\n" for h in hosts))


def deepspeed_tasks(job: LaunchJob) -> list[Task]:
    _write_hostfile(job, job.node_names)
    return [
        Task(
            node,
            [executable(job, "deepspeed"), "--node_rank", str(node), *deepspeed_options(job, "127.0.0.1")],
            job.node_env(node),
            job.node_names[node],
        )
        for node in range(job.spec.nodes)
    ]


def deepspeed_allocation(job: LaunchJob, hosts: list[str]) -> list[str]:
    _write_hostfile(job, hosts)
    s = job.spec
    srun_ = ["srun", "--label", "--kill-on-bad-exit=1", f"--nodes={s.nodes}", f"--ntasks={s.nodes}"]
    shell = PER_NODE_SHELL.format(option="--node_rank")
    return [
        *srun_,
        "--ntasks-per-node=1",
        "bash",
        "-c",
        shell,
        executable(job, "deepspeed"),
        *deepspeed_options(job, hosts[0]),
    ]


# -- Lightning's own launcher: one process per node, which starts the node's other ranks -------


def lightning_tasks(job: LaunchJob) -> list[Task]:
    s = job.spec
    return [
        Task(
            node,
            list(job.rank_command),
            job.node_env(
                node,
                NODE_RANK=str(node),
                WORLD_SIZE=str(s.world_size),
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(job.port),
            ),
            job.node_names[node],
        )
        for node in range(s.nodes)
    ]


def lightning_allocation(job: LaunchJob, hosts: list[str]) -> list[str]:
    """Inside an allocation Lightning takes SLURM's ranks (its SLURMEnvironment): srun per rank."""
    return srun.allocation_argv(job, hosts)


# -- Ray: one driver for the whole job; Ray Train starts the workers on a local Ray cluster ------


def ray_tasks(job: LaunchJob) -> list[Task]:
    env = job.node_env(0, FAULTLOOP_WORLD_SIZE=str(job.spec.world_size), MASTER_ADDR="127.0.0.1")
    return [Task(0, list(job.rank_command), env, job.node_names[0])]


def ray_allocation(job: LaunchJob, hosts: list[str]) -> list[str]:
    """The driver on the allocation's first node (its Ray cluster is that node's)."""
    return ["env", f"FAULTLOOP_WORLD_SIZE={job.spec.world_size}", *job.rank_command]
