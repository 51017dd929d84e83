"""The deepspeed workload for real: a DeepSpeed engine (ZeRO stage 1, CPU accelerator, gloo) under
torchrun, a rank killed at its step, a life resumed from the engine's own save_checkpoint."""

from __future__ import annotations

import pytest

from faultloop.run.spec import flag
from framework_jobs import free_port, run_job, torchrun

pytestmark = pytest.mark.slow
MODULE = ["-m", "faultloop.cli.frameworks.deepspeed"]


def test_a_sigkill_at_its_step_then_a_resume_from_the_engines_checkpoint(tmp_path):
    first = tmp_path / "attempt1"
    first.mkdir()
    argv = [*torchrun(2, free_port()), *MODULE, flag("iterations"), "10"]
    job = run_job(first, argv, fault="SIGKILL", rank=1, at_iter=7)
    assert job.returncode != 0
    assert job.fired() == [(1, "SIGKILL", 7)]
    # DeepSpeed's own lines, torchrun's report of the killed rank; the survivor, stopped by torchrun
    # (or failing first in its gloo all-reduce), leaves its FR dump. Which death torchrun's monitor
    # sees first is a race: its `failed (...)` line names that one, its failure table names both
    assert job.has(r"\[INFO\] \[.*\] DeepSpeed info: version=0\.19\.8")
    assert job.has(r"^\s*rank\s+: 1 \(local_rank: 1\)\n\s*exitcode\s+: -9 \(pid: \d+\)")
    assert job.has(r"Sending process \d+ closing signal SIGTERM")
    assert job.dumps() == ["_dump_0"]
    checkpoint = first / "checkpoints" / "model" / "iter_0000005"
    assert (checkpoint / "mp_rank_00_model_states.pt").is_file()
    assert {p.name for p in checkpoint.glob("zero_pp_rank_*_optim_states.pt")} == {
        "zero_pp_rank_0_mp_rank_00_optim_states.pt",
        "zero_pp_rank_1_mp_rank_00_optim_states.pt",
    }

    second = tmp_path / "attempt2"
    second.mkdir()
    argv = [*torchrun(2, free_port()), *MODULE, flag("iterations"), "10"]
    resumed = run_job(second, argv, resume=checkpoint)
    assert resumed.returncode == 0, resumed.log[-3000:]
    assert resumed.has(r"loading 2 zero partition checkpoints for rank 1")
    assert resumed.has(r"step=10, skipped=0")
    assert not resumed.has(r"step=5, skipped=0")  # steps 6 to 10 only
    assert (second / "checkpoints" / "model" / "iter_0000010").is_dir()
