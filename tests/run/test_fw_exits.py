"""Every rank's exit under the launchers that name no rank (the deepspeed launcher, Ray's), for
real: one job each, 1 node x 2 ranks, through run_job. The rank a SIGKILL took leaves no exit
record, and its exit comes from what its launcher printed or from the fault's firing marker, said
so in its error. And a hung rank holds the others for the collective timeout, not the
rendezvous's. (Lightning's own launcher: its job, through run_job too, is the one
tests/run/test_fw_lightning.py resumes, and its exits, a rank that raised among them, are checked
there.)"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from faultloop.run.launch import RunJob
from faultloop.run.spec import JobSettings, JobSpec
from job_slots import JobSlots

RANK, ITER = 1, 3
CELLS = {  # key: (workload, launcher, fault)
    "deepspeed/SIGKILL": ("deepspeed", "deepspeed", "SIGKILL"),
    "ray/SIGKILL": ("ray_train", "ray", "SIGKILL"),
    "deepspeed/SIGSTOP": ("deepspeed", "deepspeed", "SIGSTOP"),
}
NAMED = [key for key in CELLS if key != "deepspeed/SIGSTOP"]  # a stopped rank is killed by the cleanup: unknown
SETTINGS = {"pg_timeout_s": 10, "stall_timeout_s": 5, "term_delay_s": 2, "iterations": 8}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory, job_slots: JobSlots) -> dict[str, tuple[dict[int, dict], str]]:
    """Each cell's rank exits (job.json) and main log. Ray's cell runs alone (a loaded machine can
    keep its local cluster from starting in time), then the deepspeed cells side by side (the hang
    mostly waits on its timeout)."""
    root = tmp_path_factory.mktemp("fw_exits")

    def run(key: str) -> tuple[dict[int, dict], str]:
        workload, launcher, fault = CELLS[key]
        folder = root / key.replace("/", "_")
        settings = JobSettings(launcher=launcher, **SETTINGS)  # type: ignore[arg-type]
        with job_slots.held():
            RunJob(JobSpec(folder, fault, RANK, ITER, 1, 2, settings=settings, workload=workload)).run()
        manifest = json.loads((folder / "job.json").read_text())
        assert manifest["fault_fired"] and manifest["state"] == "FAILED", manifest
        log = (folder / manifest["main_log"]).read_text(errors="replace")
        return {int(r): e for r, e in manifest["rank_exits"].items()}, log

    found = {"ray/SIGKILL": run("ray/SIGKILL")}
    side_by_side = [key for key in CELLS if key not in found]
    with ThreadPoolExecutor(max_workers=len(side_by_side)) as pool:
        return found | dict(zip(side_by_side, pool.map(run, side_by_side), strict=True))


@pytest.fixture(scope="module")
def exits(jobs: dict[str, tuple[dict[int, dict], str]]) -> dict[str, dict[int, dict]]:
    return {key: ranks for key, (ranks, _) in jobs.items()}


@pytest.mark.slow
@pytest.mark.parametrize("key", NAMED)
def test_no_rank_is_left_unknown(exits: dict[str, dict], key: str) -> None:
    assert all(exits[key][r]["state"] in ("FAILED", "TERMINATED") for r in (0, 1)), exits[key]


@pytest.mark.slow
@pytest.mark.parametrize("key", ["deepspeed/SIGKILL", "ray/SIGKILL"])
def test_the_sigkilled_rank_is_named_with_its_signal_and_where_that_was_read(exits: dict[str, dict], key: str) -> None:
    killed = exits[key][RANK]
    assert (killed["exitcode"], killed["signal"], killed["state"]) == (-9, "SIGKILL", "FAILED")
    assert killed["error"].startswith("no exit record")


@pytest.mark.slow
def test_a_hung_rank_holds_the_others_for_the_collective_timeout_not_the_rendezvous_one(jobs) -> None:
    """The process groups start with the rendezvous's timeout (66 s here; DeepSpeed's own
    data-parallel group with gloo's 30 minutes); from the first step on a collective waits
    pg_timeout_s, as the built-in workload's do."""
    ranks, log = jobs["deepspeed/SIGSTOP"]
    timed_out = f"Timed out waiting {int(SETTINGS['pg_timeout_s'] * 1000)}ms for"
    assert re.search(timed_out + r" (recv|send) operation to complete", log), log[-3000:]
    assert timed_out in ranks[0]["error"], ranks
