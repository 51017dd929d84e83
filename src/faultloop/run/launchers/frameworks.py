"""The launchers frameworks bring: `accelerate launch`, the `deepspeed` launcher, Lightning's own
process launcher and Ray's workers. Each starts the framework's rank module the way that
framework's users start it; a framework supports the ones its row in faultloop.frameworks names.

Where the launcher names no rank in its report, each rank's exit is its own exit record
(rank_records), else what the launcher printed about it (the deepspeed launcher's pids and return
code, Lightning's `[rank: N] Child process with PID ... terminated with code C`, Ray's `[Rank N
Error Snippet]`), else SUCCEEDED when its launcher exited 0, else UNKNOWN: the marker, not the
exit, says where the fault fired.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from faultloop.contracts import RankExit
from faultloop.run.launchers import srun
from faultloop.run.launchers.base import JobEnd, LaunchJob, by_launcher_exit, executable, exit_of
from faultloop.run.launchers.rank_records import LauncherSaid, recorded
from faultloop.run.srun import Task

# torch's failure table (torchrun's, and accelerate's, which runs torch's launcher in-process):
# `  rank      : 1 (local_rank: 1)` then `  exitcode  : -9 (pid: 1234)`
TABLE_RANK_RE = re.compile(r"\brank\s+: (\d+) \(local_rank: \d+\)")
TABLE_EXIT_RE = re.compile(r"\bexitcode\s+: (-?\d+) \(pid: \d+\)")


# srun's label of a line (the node's launcher's task id), where srun started the launchers
LABEL = r"^(?:(\d+): )?"
# deepspeed/launcher/launch.py's lines (logger `[launch.py:<line>:<function>]`)
DS_SPAWNED_RE = re.compile(LABEL + r".*\[launch\.py:\d+:main\] process (\d+) spawned with command")
DS_SUCCEEDED_RE = re.compile(LABEL + r".*\[launch\.py:\d+:main\] Process (\d+) exits successfully\.")
DS_RETURN_RE = re.compile(LABEL + r".*\[launch\.py:\d+:sigkill_handler\] .* exits with return code = (-?\d+)")
# lightning/fabric/strategies/launchers/subprocess_script.py, _ChildProcessObserver (rank: the local rank)
LIGHTNING_CHILD_RE = re.compile(LABEL + r".*\[rank: (\d+)\] Child process with PID \d+ terminated with code (-?\d+)")
# ray/train/v2/_internal/execution/worker_group/poll.py: the ranks that failed with one error
RAY_SNIPPET_RE = re.compile(r"\[Rank ([\d,]+) Error Snippet\]:")
RAY_PREFIX_RE = re.compile(r"^\([A-Za-z]+ pid=\d+\) ")  # the actor prefix Ray puts on a line it forwards


# Inside an allocation one launcher per node, started by srun; each reads its node's index from
# srun (the launcher's own node-rank option, placed first): `bash -c` runs the launcher as "$0".
PER_NODE_SHELL = 'exec "$0" {option} "$SLURM_NODEID" "$@"'


def per_node_exits(end: JobEnd) -> dict[int, RankExit]:
    g = end.job.spec.gpus_per_node
    return by_launcher_exit(end, lambda node: range(node * g, (node + 1) * g))


def whole_job_exits(end: JobEnd) -> dict[int, RankExit]:
    return by_launcher_exit(end, lambda _: range(end.job.spec.world_size))


def deepspeed_exits(end: JobEnd) -> dict[int, RankExit]:
    """Per rank: its record; else launch.py's lines: the pids it spawned (in local-rank order),
    `Process <pid> exits successfully.`, and the return code it exits with, of a rank it does not name."""
    spawned: dict[int, list[int]] = {}
    succeeded: dict[int, int] = {}
    unnamed: dict[int, int] = {}
    wording = ""
    for line in end.lines:
        if m := DS_SPAWNED_RE.search(line):
            spawned.setdefault(int(m[1] or 0), []).append(int(m[2]))
        elif m := DS_SUCCEEDED_RE.search(line):
            succeeded[int(m[2])] = 0
        elif m := DS_RETURN_RE.search(line):
            unnamed[int(m[1] or 0)] = int(m[2])
            wording = f"exits with return code = {m[2]}"
    said = LauncherSaid(spawned=spawned, by_pid=succeeded, unnamed=unnamed, wording=f"`{wording}`")
    return recorded(end, per_node_exits(end), said)


def lightning_exits(end: JobEnd) -> dict[int, RankExit]:
    """Per rank: its record; else on this machine a node's first rank is the process run_job
    started (its exit is that task's), the others Lightning's observer names by local rank;
    inside an allocation srun's task report."""
    if end.on_slurm:
        return recorded(end, srun.rank_exits(end))
    g = end.job.spec.gpus_per_node
    by_rank: dict[int, int | None] = {e.label * g: e.exitcode for e in end.exits if not e.stopped}
    for line in end.lines:
        if m := LIGHTNING_CHILD_RE.search(line):
            by_rank.setdefault(int(m[1] or 0) * g + int(m[2]), int(m[3]))
    said = LauncherSaid(by_rank=by_rank, wording="the node's process exit, or `Child process with PID ... terminated`")
    return recorded(end, per_node_exits(end), said)


def ray_exits(end: JobEnd) -> dict[int, RankExit]:
    """Per rank: its record; else a rank Ray Train's `[Rank N Error Snippet]` names (FAILED, no
    exit code: a Ray worker's process outlives its training), with the snippet's first line; a
    rank it does not name was stopped with the worker group (TERMINATED)."""
    named: dict[int, int | None] = {}
    errors: dict[int, str] = {}
    quoted: list[int] = []  # the ranks of the snippet whose first line comes next
    for line in end.lines:
        if m := RAY_SNIPPET_RE.search(line):
            quoted = [int(r) for r in m[1].split(",")]
            named.update(dict.fromkeys(quoted))
        elif quoted and (text := RAY_PREFIX_RE.sub("", line).strip()):
            errors.update({r: f"Ray Train: `[Rank {r} Error Snippet]: {text}`" for r in quoted})
            quoted = []
    said = LauncherSaid(by_rank=named, wording="Ray Train's `[Rank N Error Snippet]`", errors=errors)
    ranks = whole_job_exits(end)
    if named:  # Ray Train names every worker that failed, then stops the worker group: the rest were stopped
        why = "not named by Ray Train's worker errors: still training when Ray stopped the worker group"
        ranks.update({r: RankExit(r, None, None, "TERMINATED", why) for r in ranks if r not in named})
    return recorded(end, ranks, said)


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
    """torch's failure table names the first failed rank; the rest as their launcher exited; each
    rank's own record over both."""
    ranks = per_node_exits(end)
    ranks.update(read_failure_table(end.lines))
    return recorded(end, ranks)


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
