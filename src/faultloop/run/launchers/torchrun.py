"""torchrun (`python -m torch.distributed.run`): one torch launcher per node.

Every launcher line in the log (worker start, failures, SIGTERMs, the failure summary) is torch's
own. Static rendezvous on this machine, c10d rendezvous under SLURM. Ranks' exits come from
torch's worker events (`--event-log-handler console`, kept apart from the main log by JobLog).
"""

from __future__ import annotations

import json
from pathlib import Path

from faultloop.contracts import RankExit
from faultloop.run.launchers.base import JobEnd, LaunchJob
from faultloop.run.srun import Task
from faultloop.signals import exit_signal


def argv(job: LaunchJob, rendezvous: list[str]) -> list[str]:
    """One node's torchrun, its workers the rank command's module."""
    s = job.spec
    return [
        job.python,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        str(s.nodes),
        "--nproc-per-node",
        str(s.gpus_per_node),
        *rendezvous,
        "--max-restarts",
        "0",
        "--shutdown-timeout",
        str(int(s.settings.shutdown_timeout_s)),
        "--event-log-handler",
        "console",
        *job.rank_command[1:],  # torchrun runs its workers with its own interpreter
    ]


def local_tasks(job: LaunchJob) -> list[Task]:
    rdzv = ["--rdzv-backend", "static", "--master-addr", "127.0.0.1", "--master-port", str(job.port)]
    return [
        Task(
            node,
            argv(job, [*rdzv, "--node-rank", str(node)]),
            job.node_env(node, TORCHELASTIC_ERROR_FILE=str(job.cell / job.paths.torchrun_error(node))),
            job.node_names[node],
        )
        for node in range(job.spec.nodes)
    ]


def allocation_argv(job: LaunchJob, hosts: list[str]) -> list[str]:
    """One torchrun per node of the allocation, started by srun."""
    s = job.spec
    rdzv = ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{hosts[0]}:{job.port}", "--rdzv-id", job.job_id]
    srun = ["srun", "--label", "--kill-on-bad-exit=1", f"--nodes={s.nodes}", f"--ntasks={s.nodes}"]
    return [*srun, "--ntasks-per-node=1", *argv(job, rdzv)]


def rank_exits(end: JobEnd) -> dict[int, RankExit]:
    """torch's worker events; a node launcher stopped before torch reported its workers leaves
    them TERMINATED."""
    s = end.job.spec
    ranks = end.all_ranks()
    ranks.update(read_worker_events(end.job.cell / end.job.paths.events))
    for e in end.exits:
        if e.stopped and not end.on_slurm:
            for r in range(e.label * s.gpus_per_node, (e.label + 1) * s.gpus_per_node):
                if ranks[r].state == "UNKNOWN":
                    ranks[r] = RankExit(rank=r, state="TERMINATED")
    return ranks


def read_worker_events(path: Path) -> dict[int, RankExit]:
    """Per-rank exits from torch's worker events (`torchelastic.worker.status.<STATE>`, source
    WORKER): FAILED with the exit code and the worker's recorded error, SUCCEEDED, or TERMINATED
    (stopped by its agent after another worker failed)."""
    ranks: dict[int, RankExit] = {}
    for line in path.read_text(errors="replace").splitlines() if path.is_file() else []:
        try:
            event = json.loads(line)
            meta = event["metadata"]
            if event.get("source") != "WORKER" or meta.get("global_rank") is None:
                continue
            state = str(meta.get("state"))
            if state not in ("FAILED", "SUCCEEDED", "TERMINATED"):
                continue
            detail = json.loads(meta.get("metadata") or "{}")
            code = (detail.get("exit_code") or [None])[0]
            error = json.loads(meta["raw_error"]).get("message") if meta.get("raw_error") else None
            message = error.get("message") if isinstance(error, dict) else None
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        rank = int(meta["global_rank"])
        ranks[rank] = RankExit(rank, code if state != "SUCCEEDED" else 0, exit_signal(code), state, message)
    return ranks
