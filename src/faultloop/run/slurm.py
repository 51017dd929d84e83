"""What code running inside a run_job allocation needs from SLURM.

snakemake-executor-plugin-slurm's job step removes every SLURM_* variable except SLURM_JOB_ID (and
a few identity ones) before it runs the rule, so SLURM_JOB_NODELIST and SLURM_NNODES are gone
there, and a bare `srun --ntasks-per-node=1` then runs on ONE node. These helpers ask the
controller instead and always give srun an explicit geometry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping


def job_id() -> str | None:
    """The allocation this process runs in, or None outside SLURM."""
    return os.environ.get("SLURM_JOB_ID") or None


def hostnames(nodelist: str) -> list[str]:
    """`n[1-2],m3` -> ['n1', 'n2', 'm3'] (scontrol's own expansion)."""
    out = subprocess.run(
        ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True, timeout=30
    )
    return out.stdout.split()


def nodes(job: str | None = None) -> list[str]:
    """Node names of the allocation, in SLURM's order (the first one hosts the rendezvous)."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST")
    if not nodelist:
        job = job or job_id()
        if not job:
            raise RuntimeError("not inside a SLURM allocation (no SLURM_JOB_ID)")
        out = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%N"], capture_output=True, text=True, check=True, timeout=30
        )
        nodelist = out.stdout.strip()
    return hostnames(nodelist)


def per_node_srun(n_nodes: int) -> list[str]:
    """srun prefix that starts exactly one task on each of the allocation's nodes."""
    return ["srun", f"--nodes={n_nodes}", f"--ntasks={n_nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=0"]


def run_per_node(command: str, env: Mapping[str, str] | None = None, timeout: float | None = None) -> int:
    """Run a shell command once per node of the allocation (`srun --label`), or here outside SLURM.

    For upstream's CONTAINER_CLEANUP_CMD: a failure is reported, never raised.
    """
    full_env = {**os.environ, **(env or {})}
    if job_id() and shutil.which("srun"):
        argv = [*per_node_srun(len(nodes())), "--label", "bash", "-c", command]
    else:
        argv = ["bash", "-c", command]
    try:
        return subprocess.run(argv, env=full_env, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        return 124
