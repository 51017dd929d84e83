"""One framework workload's job, run for real under a launcher, as run_job's environment gives it.

The framework tests start the launcher themselves (torchrun, or the framework's own launcher) with
upstream's FAULT_* contract and the run folder's FR-dump prefix, so they test the framework modules
on their own; the cells of the workflow (run_job's wiring of workloads and launchers) are tested
where run_job is.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from faultloop.core import layout
from faultloop.marker import read_marker
from faultloop.run.spec import RESUME_ENV

SRC = Path(__file__).resolve().parents[1] / "src"
JOB_TIMEOUT_S = 240


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Job:
    """A finished job: its exit status, its log (stdout and stderr as one) and its run folder."""

    folder: Path
    returncode: int
    log: str

    def fired(self) -> list[tuple[int, str, int | None]]:
        """(rank, fault, iteration) of each marker line that says the fault fired."""
        found = []
        for line in self.log.splitlines():
            marker = read_marker(line)
            if marker is not None and marker.fired:
                found.append((marker.rank, marker.fault, marker.iteration))
        return found

    def dumps(self) -> list[str]:
        return sorted(p.name for p in (self.folder / layout.FR_DUMP_PREFIX).parent.glob("_dump_*"))

    def has(self, pattern: str) -> bool:
        return re.search(pattern, self.log, re.MULTILINE) is not None


def torchrun(per_node: int, port: int) -> list[str]:
    return [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(per_node),
        "--rdzv-backend", "static", "--master-addr", "127.0.0.1", "--master-port", str(port), "--node-rank", "0",
        "--max-restarts", "0",
    ]  # fmt: skip


def run_job(
    folder: Path,
    argv: list[str],
    *,
    fault: str = "NONE",
    rank: int = 0,
    at_iter: int = 1,
    resume: Path | None = None,
    env: dict[str, str] | None = None,
) -> Job:
    """Run `argv` (a launcher and the rank module) in `folder` as run_job would, the fault given."""
    (folder / "checkpoints").mkdir(parents=True, exist_ok=True)
    job_env = dict(
        os.environ,
        FAULT_TYPE=fault,
        FAULT_RANK=str(rank),
        FAULT_AT_ITER=str(at_iter),
        FAULT_DELAY="0",
        TORCH_FR_DUMP_TEMP_FILE=str(folder / layout.FR_DUMP_PREFIX),
        PYTHONPATH=os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p),
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        **(env or {}),
    )
    job_env.pop(RESUME_ENV, None)
    if resume is not None:
        job_env[RESUME_ENV] = str(resume)
    proc = subprocess.run(
        argv, cwd=folder, env=job_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=JOB_TIMEOUT_S
    )
    log = proc.stdout.decode(errors="replace")
    (folder / "job.log").write_text(log)
    return Job(folder, proc.returncode, log)
