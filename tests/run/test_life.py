"""A job's life on the run side, without a job: which attempts run, what each resumes from, where
it runs, what it re-injects, what run_job writes for an attempt that is not needed, its sbatch
placement and its tracking row. The behaviour on real jobs: tests/run/test_life_jobs.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faultloop.contracts import Manifest
from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.faults import FAULTS, Recurrence
from faultloop.run import life
from faultloop.run.cell import CellRun, run_cell, update_tracking
from faultloop.run.spec import Injection


def job(cell: Cell, attempt: int = 1, **fields: object) -> Manifest:
    """A job.json of one attempt of `cell` (2 ranks per node) that failed with its fault fired."""
    values: dict[str, object] = {
        "job_id": f"local-{attempt}",
        "workload": "cpu_gloo",
        "fault_type": cell.fault_type,
        "fault_rank": cell.rank,
        "fault_iter": cell.iter,
        "nodes": cell.nodes,
        "gpus_per_node": 2,
        "world_size": cell.nodes * 2,
        "state": "FAILED",
        "main_log": "logs/slurm/x.0.1.main_workload.log",
        "launch_out": "logs/slurm/x.launch.out",
        "fault_fired": True,
        "run_valid": True,
        "invalid_reason": None,
        "node_names": [f"node{i}" for i in range(cell.nodes)],
        "attempt": attempt,
        "attempts": cell.attempts,
        "fault_node": f"node{cell.rank // 2}",
        "fault_fired_iter": cell.iter + 3,
    }
    return Manifest(**(values | fields))  # type: ignore[arg-type]


def stored(session: Path, cell: Cell, *jobs: Manifest) -> Path:
    """The cell's folder holding the given attempts' job.json, in order."""
    cell_dir = session / cell.name
    for attempt, manifest in enumerate(jobs, start=1):
        folder = layout.run_dir(cell_dir, attempt)
        folder.mkdir(parents=True, exist_ok=True)
        manifest.write(folder / layout.MANIFEST)
    return cell_dir


def checkpoint(run_dir: Path, iteration: int, ranks: range) -> None:
    for rank in ranks:
        path = run_dir / layout.checkpoint_dir(iteration) / layout.checkpoint_file(rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")


def plan(cell_dir: Path, attempt: int) -> life.AttemptPlan:
    return life.plan_attempt(cell_dir, attempt, gpus_per_node=2, fault_delay=1.0)


def test_every_row_states_what_a_restart_meets_and_why() -> None:
    assert all(isinstance(f.on_restart, Recurrence) and len(f.on_restart_why) > 20 for f in FAULTS.values())
    by_kind = {kind: sorted(n for n, f in FAULTS.items() if f.on_restart == kind) for kind in Recurrence}
    assert by_kind[Recurrence.SAME_NODE] == ["GPU_ERROR", "GPU_SLEEP", "HOST_OOM"]
    assert {"NET_DROP", "SIGKILL", "SIGTERM"} <= set(by_kind[Recurrence.PASSES])
    assert {"WORKLOAD_EXC", "NAN_LOSS", "STORAGE_FULL"} <= set(by_kind[Recurrence.SAME_STEP])


def test_attempt_one_is_the_cell_itself(tmp_path: Path) -> None:
    cell = Cell("GPU_ERROR", 1, 5, 2, 3)
    assert plan(tmp_path / cell.name, 1) == life.AttemptPlan(cell, 1)


@pytest.mark.parametrize(
    "state, runs, why",
    [
        ("FAILED", True, None),
        ("TIMEOUT", True, None),
        ("COMPLETED", False, "attempt 1 completed: the job's life ended there"),
        ("INFRA_FAILED", False, "attempt 1 was an infrastructure failure: the job's life ends there"),
        ("NOT_NEEDED", False, "attempt 1 was not needed: the job's life ended before it"),
    ],
)
def test_an_attempt_runs_only_after_one_that_failed(tmp_path: Path, state: str, runs: bool, why: str | None) -> None:
    cell = Cell("NET_DROP", 1, 5, 1, 2)
    cell_dir = stored(tmp_path, cell, job(cell, state=state, fault_fired=state in ("FAILED", "TIMEOUT")))
    assert plan(cell_dir, 2).not_needed == why
    assert (plan(cell_dir, 2).not_needed is None) == runs


def test_a_passing_fault_is_not_injected_again_and_drains_nothing(tmp_path: Path) -> None:
    cell = Cell("NET_DROP", 1, 5, 2, 2)
    p = plan(stored(tmp_path, cell, job(cell)), 2)
    assert (p.reinjection, p.drained, p.previous_nodes) == (None, (), ("node0", "node1"))


def test_a_same_step_fault_fires_again_at_the_step_it_fired_at(tmp_path: Path) -> None:
    cell = Cell("WORKLOAD_EXC", 3, 5, 2, 3)
    cell_dir = stored(tmp_path, cell, job(cell, fault_fired_iter=9), job(cell, 2, fault_fired_iter=9))
    assert plan(cell_dir, 2).reinjection == Injection(3, 9, 0.0)
    assert plan(cell_dir, 3).reinjection == Injection(3, 9, 0.0)
    assert plan(cell_dir, 3).drained == ()


def test_a_node_bound_fault_drains_its_node_for_good(tmp_path: Path) -> None:
    cell = Cell("GPU_ERROR", 3, 5, 2, 3)  # rank 3: node1 at 2 ranks per node
    first = job(cell)
    second = job(cell, 2, state="COMPLETED", fault_fired=False, drained_nodes=["node1"], node_names=["node0", "node2"])
    cell_dir = stored(tmp_path, cell, first, second)
    p2 = plan(cell_dir, 2)
    assert (p2.drained, p2.reinjection) == (("node1",), None)  # its node is drained: nothing to meet
    assert life.local_nodes(2, p2.previous_nodes, p2.drained) == ("node0", "node2")
    assert plan(cell_dir, 3).not_needed == "attempt 2 completed: the job's life ended there"
    assert plan(cell_dir, 3).drained == ("node1",)
    # were its node still there, it would fire on whichever rank runs on it, with its local rank
    assert life.reinjection(cell, [first], [], 1.0) == Injection(3, 5, 1.0, node="node1")


def test_a_drained_node_moves_to_the_next_spare_index() -> None:
    assert life.local_nodes(3, (), ()) == ("node0", "node1", "node2")
    assert life.local_nodes(3, ("node0", "node1", "node2"), ("node1",)) == ("node0", "node3", "node2")
    assert life.local_nodes(2, ("node2", "node1"), ("node1", "node0")) == ("node2", "node3")


def test_the_newest_checkpoint_every_rank_completed(tmp_path: Path) -> None:
    first, second = tmp_path / "c", tmp_path / "c" / "attempt_2"
    checkpoint(first, 5, range(4))
    checkpoint(first, 10, range(4))
    checkpoint(second, 15, range(3))  # rank 3 died before it saved iteration 15
    found = life.newest_checkpoint([first, second], world_size=4)
    assert found is not None and (found.iteration, found.folder) == (10, (first / layout.checkpoint_dir(10)).resolve())
    assert life.newest_checkpoint([tmp_path / "none"], world_size=4) is None


def test_a_restarted_attempt_resumes_from_the_jobs_newest_checkpoint(tmp_path: Path) -> None:
    cell = Cell("WORKLOAD_EXC", 0, 6, 1, 3)
    cell_dir = stored(tmp_path, cell, job(cell), job(cell, 2))
    checkpoint(cell_dir, 5, range(2))
    p = plan(cell_dir, 3)
    assert p.resume is not None and p.resume.iteration == 5


def test_an_attempt_not_needed_writes_its_job_json_and_runs_nothing(tmp_path: Path) -> None:
    cell = Cell("SIGKILL", 1, 5, 1, 3)
    cell_dir = stored(tmp_path, cell, job(cell), job(cell, 2, state="COMPLETED", fault_fired=False))
    output = cell_dir / "attempt_3" / layout.MANIFEST
    assert run_cell(CellRun(output, gpus_per_node=2)) == 0
    written = Manifest.read(output)
    assert (written.state, written.run_valid, written.attempt, written.attempts, written.job_id) == (
        "NOT_NEEDED",
        False,
        3,
        3,
        "",
    )
    assert written.invalid_reason == "attempt 2 completed: the job's life ended there"
    assert not (output.parent / layout.SLURM_LOGS).exists()
    assert not (tmp_path / layout.TRACKING_TSV).exists()  # no job, no tracking row


def test_sbatch_placement_keeps_the_nodes_and_excludes_the_drained(tmp_path: Path) -> None:
    cell = Cell("GPU_ERROR", 1, 5, 2, 2)
    previous = tmp_path / "job.json"
    assert life.sbatch_placement(None) == "" and life.sbatch_placement(previous) == ""  # planning: not there yet
    job(cell, node_names=["n3", "n1"], fault_node="n3").write(previous)
    assert life.sbatch_placement(previous) == "--nodelist=n1 --exclude=n3"
    job(Cell("NET_DROP", 1, 5, 2, 2), node_names=["n3", "n1"], fault_node="n3").write(previous)
    assert life.sbatch_placement(previous) == "--nodelist=n3,n1"
    job(cell, state="COMPLETED", node_names=["n3", "n1"]).write(previous)
    assert life.sbatch_placement(previous) == ""  # the attempt after it runs no job
    previous.write_text("{not json")
    assert life.sbatch_placement(previous) == ""


def test_tracking_keeps_one_row_per_job_and_upstreams_form(tmp_path: Path) -> None:
    one, lived = Cell("SIGKILL", 1, 5, 2), Cell("NET_DROP", 1, 5, 2, 2)
    update_tracking(tmp_path, one, "11", tmp_path / one.name)
    before = (tmp_path / layout.TRACKING_TSV).read_bytes()
    assert (
        before
        == (
            "JOB_ID\tFAULT_TYPE\tRANK\tITER\tNODES\tEXPERIMENT_DIR\n"
            f"11\tSIGKILL\t1\t5\t2\t{(tmp_path / one.name).resolve()}\n"
        ).encode()
    )
    update_tracking(tmp_path, lived, "12", tmp_path / lived.name)
    update_tracking(tmp_path, lived, "13", tmp_path / lived.name / "attempt_2")
    update_tracking(tmp_path, lived, "14", tmp_path / lived.name / "attempt_2")  # a re-run replaces its row
    rows = [line.split("\t") for line in (tmp_path / layout.TRACKING_TSV).read_text().splitlines()[1:]]
    assert [(r[0], r[1], r[-1]) for r in rows] == [
        ("11", "SIGKILL", str((tmp_path / one.name).resolve())),
        ("12", "NET_DROP", str((tmp_path / lived.name).resolve())),
        ("14", "NET_DROP", str((tmp_path / lived.name / "attempt_2").resolve())),
    ]


def test_old_job_json_reads_as_attempt_one_of_one(tmp_path: Path) -> None:
    data = job(Cell("SIGKILL", 1, 5, 2)).to_json()
    for name in ("attempt", "attempts", "resumed_from_iter", "drained_nodes", "fault_node", "fault_fired_iter"):
        del data[name]
    (tmp_path / "job.json").write_text(json.dumps(data))
    m = Manifest.read(tmp_path / "job.json")
    assert (m.attempt, m.attempts, m.resumed_from_iter, m.drained_nodes, m.fault_node) == (1, 1, None, [], None)


def test_a_later_attempts_analysis_lands_in_its_own_run_folder(tmp_path: Path) -> None:
    """The per-run rules' commands take a run folder: attempt 2's FR analysis is indexed there,
    and attempt 1's (the cell folder's) is left alone."""
    from faultloop.analyze import registry
    from faultloop.analyze.analyzer import Input
    from faultloop.cli import main as cli

    cell = Cell("NET_DROP", 1, 5, 1, 2)
    cell_dir = stored(tmp_path, cell, job(cell), job(cell, 2, state="COMPLETED", fault_fired=False))
    specs = registry.specs_json(
        registry.selected(
            {"fr_analyzers": {"faultloop": {"kind": "faultloop_fr"}}, "gpus_per_node": 2, "fr_segment_size": 32},
            Input.DUMPS,
        )
    )
    index = cell_dir / "attempt_2" / layout.FR_INDEX
    manifest = cell_dir / "attempt_2" / layout.MANIFEST
    assert cli.main(["fr-analyzers", "--manifest", str(manifest), "--index", str(index), "--specs", specs]) == 0
    assert index.is_file() and not (cell_dir / layout.FR_INDEX).exists()
