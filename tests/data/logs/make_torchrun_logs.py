"""Regenerate logsage's fixtures of torch's real launcher: tests/data/logs/torch213_2nodes_*.log.

Two `python -m torch.distributed.run` agents (two simulated nodes, two gloo ranks each, static
rendezvous on this machine), their output labelled `<node>: ` as `srun --label` does with one
torchrun per node. Rank 1 faults at iteration 4 (SIGKILL, an exception, SIGSTOP, a segfault);
everything else is torch's own wording. Paths are rewritten to /opt/venv and /job.

    python tests/data/logs/make_torchrun_logs.py [--out tests/data/logs]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FAULTS = {"sigkill": "sigkill", "exception": "exc", "sigstop": "sigstop", "segfault": "segv"}
TRAIN = """
import ctypes, datetime, os, signal, sys, time
import torch, torch.distributed as dist
mode = sys.argv[1]
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=6))
rank, world = dist.get_rank(), dist.get_world_size()
print(f"rank {rank}/{world} ready", flush=True)
t = torch.ones(1000)
for it in range(1, 40):
    if rank == 1 and it == 4:
        if mode == "sigkill": os.kill(os.getpid(), signal.SIGKILL)
        if mode == "exc": raise ValueError("bad value in batch 4")
        if mode == "sigstop": os.kill(os.getpid(), signal.SIGSTOP)
        if mode == "segv": ctypes.string_at(0)
    dist.all_reduce(t)
    if rank == world - 1: print(f"iteration {it} loss 0.5", flush=True)
    time.sleep(0.3)
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run(mode: str, workdir: Path) -> str:
    """Both agents' output, each line labelled with its node, in arrival order."""
    (workdir / "train.py").write_text(TRAIN)
    port, env = free_port(), {**os.environ, "OMP_NUM_THREADS": "1"}
    read_fd, write_fd = os.pipe()
    agents = []
    for node in (0, 1):
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "2",
            "--node-rank",
            str(node),
            "--nproc-per-node",
            "2",
            "--rdzv-backend",
            "static",
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(port),
            "--max-restarts",
            "0",
            "--monitor-interval",
            "0.5",
            "train.py",
            mode,
        ]
        agent = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        labeller = subprocess.Popen(["sed", "-u", f"s/^/{node}: /"], stdin=agent.stdout, stdout=write_fd)
        agents += [agent, labeller]
    os.close(write_fd)
    with os.fdopen(read_fd) as out:
        text = out.read()
    for proc in agents:
        proc.wait(timeout=300)
    return re.sub(re.escape(str(workdir)), "/job", text.replace(sys.prefix, "/opt/venv"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests/data/logs")
    args = parser.parse_args(argv)
    for name, mode in FAULTS.items():
        with tempfile.TemporaryDirectory(prefix="torchrun-log-") as tmp:
            (args.out / f"torch213_2nodes_{name}.log").write_text(run(mode, Path(tmp)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
