"""The lightning workload for real: Lightning's Trainer (DDP, gloo, CPU) under torchrun and under
Lightning's own launcher, a fault injected by its Callback, a life resumed from its own .ckpt.

The job under Lightning's own launcher runs through run_job (RunJob), so that one job serves both
the framework's checks here and the exits run_job reads from a launcher that names no rank
(tests/run/test_fw_exits.py checks the deepspeed launcher's and Ray's)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from faultloop.run.launch import RunJob
from faultloop.run.spec import JobSettings, JobSpec, flag
from framework_jobs import free_port, run_job, torchrun
from job_slots import JobSlots

pytestmark = pytest.mark.slow
MODULE = ["-m", "faultloop.cli.frameworks.lightning"]
ITERATIONS = 6
# rank 1 raises at iteration 7 of 10, after the checkpoint of step 5
OWN_RANK, OWN_ITER = 1, 7
OWN_SETTINGS = JobSettings(launcher="lightning", pg_timeout_s=10, stall_timeout_s=5, term_delay_s=2, iterations=10)


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


@pytest.fixture(scope="module")
def own_launcher(tmp_path_factory: pytest.TempPathFactory, job_slots: JobSlots) -> tuple[Path, dict, str]:
    """Attempt 1 under Lightning's own launcher, as run_job runs it: its folder, job.json and main log."""
    folder = tmp_path_factory.mktemp("lightning_own") / "attempt1"
    spec = JobSpec(folder, "WORKLOAD_EXC", OWN_RANK, OWN_ITER, 1, 2, settings=OWN_SETTINGS, workload="lightning")
    with job_slots.held():
        RunJob(spec).run()
    manifest = json.loads((folder / "job.json").read_text())
    return folder, manifest, (folder / manifest["main_log"]).read_text(errors="replace")


def test_under_its_own_launcher_every_ranks_exit_is_read_and_the_one_that_raised_says_what(own_launcher):
    """Lightning's launcher names no rank: rank 0 is run_job's task, rank 1 its child, whose end
    Lightning's observer reports; the exception comes from the rank's own exit record."""
    _, manifest, _ = own_launcher
    assert manifest["fault_fired"] and manifest["state"] == "FAILED", manifest
    exits = {int(r): e for r, e in manifest["rank_exits"].items()}
    assert all(exits[r]["state"] in ("FAILED", "TERMINATED") for r in (0, 1)), exits
    raised = exits[OWN_RANK]
    assert (raised["exitcode"], raised["state"]) == (1, "FAILED")
    assert raised["error"].startswith("IndexError: index") and "out of bounds" in raised["error"]


def test_a_resume_from_the_checkpoint_its_own_launcher_left(own_launcher, tmp_path):
    """Attempt 1 (Lightning's launcher starts rank 1 itself) left the .ckpt of step 5 before rank 1
    raised at step 7; attempt 2 resumes from it and completes."""
    first, manifest, log = own_launcher
    assert manifest["fault_fired_iter"] == OWN_ITER and manifest["fault_rank"] == OWN_RANK, manifest
    assert "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2" in log
    checkpoint = first / "checkpoints" / "model" / "iter_0000005.ckpt"
    assert checkpoint.is_file()

    second = tmp_path / "attempt2"
    second.mkdir()
    env = {"GPUS_PER_NODE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "NODE_RANK": "0"}
    resumed = run_job(second, [sys.executable, *MODULE, *rank_options(10)], resume=checkpoint, env=env)
    assert resumed.returncode == 0, resumed.log[-3000:]
    assert resumed.has(r"Restoring states from the checkpoint path at .*iter_0000005\.ckpt")
    assert resumed.fired() == []
    assert (second / "checkpoints" / "model").is_dir()
