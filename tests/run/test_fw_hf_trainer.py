"""The hf_trainer workload for real: the Hugging Face Trainer (DDP on gloo, CPU) on a GPT-2 built
from its config under torchrun, a fault injected by its TrainerCallback, a life resumed from the
Trainer's own checkpoint-N."""

from __future__ import annotations

import re

import pytest

from faultloop.run.spec import flag
from framework_jobs import free_port, run_job, torchrun

pytestmark = pytest.mark.slow
MODULE = ["-m", "faultloop.cli.frameworks.hf_trainer"]


def test_a_workload_exception_at_its_step_then_a_resume_from_checkpoint_5(tmp_path):
    first = tmp_path / "attempt1"
    first.mkdir()
    argv = [*torchrun(2, free_port()), *MODULE, flag("iterations"), "8"]
    job = run_job(first, argv, fault="WORKLOAD_EXC", rank=1, at_iter=7)
    assert job.returncode != 0
    assert job.fired() == [(1, "WORKLOAD_EXC", 7)]
    # the Trainer's own log records, and the exception inside its step on rank 1 only
    assert job.has(r"^\{'loss': '[\d.]+', 'grad_norm': ")
    assert job.has(r"^\[rank1\]: IndexError: index \d+ is out of bounds")
    assert job.has(r"transformers/trainer\.py")
    assert not job.has(r"^\[rank0\]: IndexError")
    assert "_dump_1" in job.dumps()
    checkpoint = first / "checkpoints" / "model" / "checkpoint-5"
    assert (checkpoint / "trainer_state.json").is_file()

    second = tmp_path / "attempt2"
    second.mkdir()
    argv = [*torchrun(2, free_port()), *MODULE, flag("iterations"), "8"]
    resumed = run_job(second, argv, resume=checkpoint)
    assert resumed.returncode == 0, resumed.log[-3000:]
    assert resumed.has(r"Loading model from .*checkpoint-5\.")
    assert resumed.has(r"Resuming training from checkpoint with epoch 0 and global step 5")
    assert len(re.findall(r"^\{'loss': ", resumed.log, re.MULTILINE)) == 3  # steps 6 to 8
