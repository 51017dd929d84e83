"""The ray_train workload for real: Ray Train's TorchTrainer (gloo, CPU workers) on a local Ray
cluster its driver starts and stops, a fault injected in a worker's loop, a life resumed from the
Ray Train Checkpoint rank 0 reported."""

from __future__ import annotations

import sys

import pytest

from faultloop.run.frameworks.checkpoints import newest
from faultloop.run.spec import flag
from framework_jobs import run_job

pytestmark = pytest.mark.slow
DRIVER = [sys.executable, "-m", "faultloop.cli.frameworks.ray_train", flag("iterations"), "8"]
ENV = {"FAULTLOOP_WORLD_SIZE": "2"}


def test_a_workload_exception_in_a_worker_then_a_resume_from_its_checkpoint(tmp_path):
    first = tmp_path / "attempt1"
    first.mkdir()
    job = run_job(first, DRIVER, fault="WORKLOAD_EXC", rank=1, at_iter=7, env=ENV)
    assert job.returncode == 1
    assert job.fired() == [(1, "WORKLOAD_EXC", 7)]
    # Ray's own lines: the worker prefix (uncoloured, at the line's start), Ray Train's setup, its failure report
    assert job.has(r"^\(RayTrainWorker pid=\d+\) Setting up process group for: env:// \[rank=0, world_size=2\]")
    assert job.has(r"^\(RayTrainWorker pid=\d+\) IndexError: index \d+ is out of bounds")
    assert job.has(r"ray\.train\.WorkerGroupError: Training failed due to worker errors")
    assert "_dump_1" in job.dumps()
    resume = newest("ray_train", [first], world_size=2)
    assert resume is not None and resume.iteration == 5

    second = tmp_path / "attempt2"
    second.mkdir()
    resumed = run_job(second, DRIVER, resume=resume.folder, env=ENV)
    assert resumed.returncode == 0, resumed.log[-3000:]
    assert resumed.has(r"^\(RayTrainWorker pid=\d+\) resumed from the checkpoint of iteration 5")
    assert resumed.fired() == []
    assert newest("ray_train", [second], world_size=2) is None  # steps 6 to 8 save none (every 5 steps)
