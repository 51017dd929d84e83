"""Every rank's exit under the launchers that name no rank (the deepspeed launcher, Lightning's,
Ray's), for real: one job each, 1 node x 2 ranks, through run_job. A rank that raised or was
signalled leaves its own exit record; the rank a SIGKILL took leaves none, and its exit comes from
what its launcher printed or from the fault's firing marker, said so in its error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faultloop.run.launch import RunJob
from faultloop.run.spec import JobSettings, JobSpec
from job_slots import JobSlots

RANK, ITER = 1, 3
CELLS = {  # key: (workload, launcher, fault)
    "deepspeed/SIGKILL": ("deepspeed", "deepspeed", "SIGKILL"),
    "lightning/WORKLOAD_EXC": ("lightning", "lightning", "WORKLOAD_EXC"),
    "ray/SIGKILL": ("ray_train", "ray", "SIGKILL"),
}
SETTINGS = {"pg_timeout_s": 10, "stall_timeout_s": 5, "term_delay_s": 2, "iterations": 8}


@pytest.fixture(scope="module")
def exits(tmp_path_factory: pytest.TempPathFactory, job_slots: JobSlots) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("fw_exits")
    found = {}
    for key, (workload, launcher, fault) in CELLS.items():
        folder = root / key.replace("/", "_")
        settings = JobSettings(launcher=launcher, **SETTINGS)  # type: ignore[arg-type]
        with job_slots.held():
            RunJob(JobSpec(folder, fault, RANK, ITER, 1, 2, settings=settings, workload=workload)).run()
        manifest = json.loads((folder / "job.json").read_text())
        assert manifest["fault_fired"] and manifest["state"] == "FAILED", manifest
        found[key] = {int(r): e for r, e in manifest["rank_exits"].items()}
    return found


@pytest.mark.slow
@pytest.mark.parametrize("key", CELLS)
def test_no_rank_is_left_unknown(exits: dict[str, dict], key: str) -> None:
    assert [e["state"] for e in exits[key].values()] != ["UNKNOWN"] * 2
    assert all(e["state"] in ("FAILED", "TERMINATED") for e in exits[key].values()), exits[key]


@pytest.mark.slow
@pytest.mark.parametrize("key", ["deepspeed/SIGKILL", "ray/SIGKILL"])
def test_the_sigkilled_rank_is_named_with_its_signal_and_where_that_was_read(exits: dict[str, dict], key: str) -> None:
    killed = exits[key][RANK]
    assert (killed["exitcode"], killed["signal"], killed["state"]) == (-9, "SIGKILL", "FAILED")
    assert killed["error"].startswith("no exit record")


@pytest.mark.slow
def test_the_rank_that_raised_recorded_its_exception_and_status(exits: dict[str, dict]) -> None:
    raised = exits["lightning/WORKLOAD_EXC"][RANK]
    assert (raised["exitcode"], raised["state"]) == (1, "FAILED")
    assert raised["error"].startswith("IndexError: index") and "out of bounds" in raised["error"]
