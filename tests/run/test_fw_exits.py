"""Every rank's exit under the launchers that name no rank (the deepspeed launcher, Lightning's,
Ray's), for real: one job each, 1 node x 2 ranks, through run_job. A rank that raised or was
signalled leaves its own exit record; the rank a SIGKILL took leaves none, and its exit comes from
what its launcher printed or from the fault's firing marker, said so in its error; the rank a
SIGSTOP stopped leaves none either, and its launcher's clean-up ended it (TERMINATED). And a hung
rank holds the others for the collective timeout, not the rendezvous's. (Lightning's job here is
checked by faultloop check-session; tests/run/test_fw_lightning.py resumes another, under the same
launcher.)"""

from __future__ import annotations

import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from faultloop.core.cell import Cell
from faultloop.run.launch import RunJob
from faultloop.run.session_check import check_session, render
from faultloop.run.spec import JobSettings, JobSpec
from job_slots import JobSlots

RANK, ITER = 1, 3
CELLS = {  # key: (workload, launcher, fault)
    "deepspeed/SIGKILL": ("deepspeed", "deepspeed", "SIGKILL"),
    "lightning/WORKLOAD_EXC": ("lightning", "lightning", "WORKLOAD_EXC"),
    "ray/SIGKILL": ("ray_train", "ray", "SIGKILL"),
    "deepspeed/SIGSTOP": ("deepspeed", "deepspeed", "SIGSTOP"),
}
SETTINGS = {"pg_timeout_s": 10, "stall_timeout_s": 5, "term_delay_s": 2, "iterations": 8}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the cells' run folders, one per CELLS key."""
    return tmp_path_factory.mktemp("fw_exits")


def run_folder(root: Path, key: str) -> Path:
    return root / key.replace("/", "_")


@pytest.fixture(scope="module")
def jobs(root: Path, job_slots: JobSlots) -> dict[str, tuple[dict[int, dict], str]]:
    """Each cell's rank exits (job.json) and main log. Ray's cell runs alone (a loaded machine can
    keep its local cluster from starting in time), then the others side by side (the hang mostly
    waits on its timeout)."""

    def run(key: str) -> tuple[dict[int, dict], str]:
        workload, launcher, fault = CELLS[key]
        folder = run_folder(root, key)
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
@pytest.mark.parametrize("key", CELLS)
def test_no_rank_is_left_unknown(exits: dict[str, dict], key: str) -> None:
    assert all(exits[key][r]["state"] in ("FAILED", "TERMINATED") for r in (0, 1)), exits[key]


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


@pytest.mark.slow
def test_a_hung_rank_holds_the_others_for_the_collective_timeout_not_the_rendezvous_one(jobs) -> None:
    """The process groups start with the rendezvous's timeout (66 s here; DeepSpeed's own
    data-parallel group with gloo's 30 minutes); from the first step on a collective waits
    pg_timeout_s, as the built-in workload's do."""
    ranks, log = jobs["deepspeed/SIGSTOP"]
    timed_out = f"Timed out waiting {int(SETTINGS['pg_timeout_s'] * 1000)}ms for"
    assert re.search(timed_out + r" (recv|send) operation to complete", log), log[-3000:]
    assert timed_out in ranks[0]["error"], ranks


@pytest.mark.slow
def test_the_stopped_rank_was_ended_by_its_launchers_clean_up(exits: dict[str, dict]) -> None:
    """DeepSpeed's launch.py kills every local rank once rank 0 failed (`Killing subprocess`): the
    stopped rank wrote no record and no line gives its code."""
    stopped = exits["deepspeed/SIGSTOP"][RANK]
    assert (stopped["exitcode"], stopped["state"]) == (None, "TERMINATED"), stopped
    assert "stopped this rank (SIGSTOP)" in stopped["error"]


def pool_cell(key: str) -> Cell:
    workload, launcher, fault = CELLS[key]
    return Cell(fault, RANK, ITER, 1, workload=workload, launcher=launcher)


def as_session(root: Path, session: Path, keys: list[str], *, copy: bool = False) -> Path:
    """The run folders as a session's cells, named as the pool names them (linked, or copied to doctor)."""
    session.mkdir(parents=True)
    for key in keys:
        if copy:
            shutil.copytree(run_folder(root, key), session / pool_cell(key).name)
        else:
            (session / pool_cell(key).name).symlink_to(run_folder(root, key))
    return session


@pytest.mark.slow
def test_check_session_passes_the_real_cells_of_every_launcher_a_framework_brings(jobs, root, tmp_path) -> None:
    session = as_session(root, tmp_path / "fw", list(CELLS))
    result = check_session(session, [pool_cell(key) for key in CELLS], "cpu_gloo", "torchrun")
    assert result.passed, render(result)
    by_name = {c.cell.name: c for c in result.cells}
    ray = by_name[pool_cell("ray/SIGKILL").name]
    assert ray.framework_lines == (1, 1) and ray.launcher_lines == (3, 3)  # Ray's own lines, the prefix among them
    assert by_name[pool_cell("deepspeed/SIGKILL").name].launcher_lines == (2, 2)  # spawned, then sigkill_handler


@pytest.mark.slow
def test_check_session_rejects_a_doctored_cell_and_counts_one_not_run(jobs, root, tmp_path) -> None:
    keys = ["deepspeed/SIGKILL", "lightning/WORKLOAD_EXC"]
    session = as_session(root, tmp_path / "doctored", keys, copy=True)
    deepspeed, lightning = (session / pool_cell(key).name for key in keys)
    log = deepspeed / json.loads((deepspeed / "job.json").read_text())["main_log"]
    log.write_text("".join(line for line in log.read_text().splitlines(keepends=True) if "[launch.py" not in line))
    manifest = json.loads((lightning / "job.json").read_text())
    (lightning / "job.json").write_text(json.dumps(dict(manifest, fault_fired_iter=ITER - 1)))
    pool = [pool_cell(key) for key in (*keys, "ray/SIGKILL")]  # the ray cell is not in this session
    result = check_session(session, pool, "cpu_gloo", "torchrun")
    assert not result.passed and [c.cell for c in result.missing] == [pool_cell("ray/SIGKILL")]
    problems = {c.cell.name: " ".join(c.problems) for c in result.failing}
    assert "no line of launcher deepspeed's own" in problems[deepspeed.name] and "[launch" in problems[deepspeed.name]
    assert f"fired at iteration {ITER - 1}, before the pool's {ITER}" in problems[lightning.name]
    assert "1 fail" not in render(result) and render(result).endswith("3 cells: 0 pass, 2 fail, 1 not run")
