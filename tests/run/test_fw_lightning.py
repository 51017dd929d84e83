"""The lightning workload for real: Lightning's Trainer (DDP, gloo, CPU) under torchrun and under
Lightning's own launcher, a fault injected by its Callback, a life resumed from its own .ckpt."""

from __future__ import annotations

import sys

import pytest

from faultloop.run.spec import flag
from framework_jobs import free_port, run_job, torchrun

pytestmark = pytest.mark.slow
MODULE = ["-m", "faultloop.cli.frameworks.lightning"]
ITERATIONS = 6


def rank_options(iterations: int = ITERATIONS) -> list[str]:
    return [flag("iterations"), str(iterations)]


def test_a_workload_exception_fires_in_the_callback_at_its_iteration_and_rank(tmp_path):
    job = run_job(
        tmp_path, [*torchrun(2, free_port()), *MODULE, *rank_options()], fault="WORKLOAD_EXC", rank=1, at_iter=3
    )
    assert job.returncode != 0
    assert job.fired() == [(1, "WORKLOAD_EXC", 3)]
    # Lightning's own lines, and the exception raised inside its training step on rank 1
    assert job.has(r"^Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2")
    assert job.has(r"^\[rank1\]: IndexError: index \d+ is out of bounds")
    assert job.has(r"lightning/pytorch/loops/")
    assert "_dump_1" in job.dumps()


def test_a_sigkill_under_lightnings_own_launcher_and_a_resume_from_its_checkpoint(tmp_path):
    """Attempt 1: Lightning's launcher starts rank 1 itself; rank 1 is killed at iteration 7, after
    the checkpoint of step 5. Attempt 2 resumes from that .ckpt and completes."""
    first = tmp_path / "attempt1"
    first.mkdir()
    env = {"GPUS_PER_NODE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "NODE_RANK": "0"}
    job = run_job(first, [sys.executable, *MODULE, *rank_options(10)], fault="SIGKILL", rank=1, at_iter=7, env=env)
    assert job.returncode != 0
    assert job.fired() == [(1, "SIGKILL", 7)]
    assert job.has(r"^Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2")
    checkpoint = first / "checkpoints" / "model" / "iter_0000005.ckpt"
    assert checkpoint.is_file()

    second = tmp_path / "attempt2"
    second.mkdir()
    env["MASTER_PORT"] = str(free_port())
    resumed = run_job(second, [sys.executable, *MODULE, *rank_options(10)], resume=checkpoint, env=env)
    assert resumed.returncode == 0, resumed.log[-3000:]
    assert resumed.has(r"Restoring states from the checkpoint path at .*iter_0000005\.ckpt")
    assert resumed.fired() == []
    assert (second / "checkpoints" / "model").is_dir()
