"""A job's life on real jobs: for each behaviour a fault can have on restart, under both launcher
layouts, attempt 2 resumes from the checkpoint attempt 1 left and meets the fault as its row says.

Every life runs through `faultloop cell run` (run_job's body) once per module, the six lives at the
same time: a fault that passes (SIGKILL) and one that recurs at its step (WORKLOAD_EXC) on 1 node x 2
ranks, a node-bound one (GPU_ERROR) on 2 nodes x 1 rank, whose node the truth drains; one more job
shows that same fault firing again on its node when the node stays (on another rank, its node moved
to index 0). Each test then checks one thing in them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from faultloop.contracts import Manifest
from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.faults import FAULTS, Recurrence
from faultloop.run import life
from faultloop.run.launch import RunJob
from faultloop.run.spec import Injection, JobSettings, JobSpec

pytestmark = pytest.mark.slow

ITER = 6  # checkpoints every 5 iterations: attempt 1 leaves iteration 5's
ITERATIONS = 8
SETTINGS = dict(
    iterations=ITERATIONS,
    pg_timeout_s=10.0,
    stall_timeout_s=5.0,
    term_delay_s=2.0,
    kill_grace_s=2.0,
    shutdown_timeout_s=5.0,
    job_timeout_s=200.0,
    scheduler="local",
)
LAUNCHERS = ("torchrun", "srun")
# one cell per behaviour: (cell, ranks per node)
LIVES = {
    Recurrence.PASSES: (Cell("SIGKILL", 1, ITER, 1, 2), 2),
    Recurrence.SAME_STEP: (Cell("WORKLOAD_EXC", 1, ITER, 1, 2), 2),
    Recurrence.SAME_NODE: (Cell("GPU_ERROR", 1, ITER, 2, 2), 1),
}
LOADING = " loading checkpoint from checkpoints/model at iteration 5"
LOADED = "  successfully loaded checkpoint from checkpoints/model [ t 0, p 0 ] at iteration 5"


@dataclass
class Run:
    folder: Path

    @property
    def manifest(self) -> Manifest:
        return Manifest.read(self.folder / layout.MANIFEST)

    @property
    def lines(self) -> list[str]:
        main_log = self.manifest.main_log
        assert main_log, self.manifest
        return (self.folder / main_log).read_text(errors="replace").splitlines()

    def nodes_stated(self) -> dict[int, str]:
        return {int(m[1]): m[2] for line in self.lines if (m := re.search(r"> rank (\d+)/\d+ .* on (\S+): ", line))}


def settings(launcher: str) -> JobSettings:
    return JobSettings(launcher=launcher, **SETTINGS)  # type: ignore[arg-type]


def live(session: Path, cell: Cell, per_node: int, launcher: str) -> list[Run]:
    """Every attempt of the cell, one after the other, as run_job runs them."""
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in SETTINGS.items()]
    runs = []
    for run in cell.runs:
        folder = session / run
        proc = subprocess.run(
            [sys.executable, "-m", "faultloop.cli.main", "cell", "run", "--output", str(folder / layout.MANIFEST),
             "--gpus-per-node", str(per_node), "--fault-delay", "0", "--launcher", launcher, *flags],
            capture_output=True, text=True, timeout=400,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(Run(folder))
    return runs


def undrained(session: Path, launcher: str, first: Run) -> Run:
    """Attempt 2 of the node-bound life had its node stayed, at index 0: the job as run_job would
    start it, but with nothing drained."""
    cell, per_node = LIVES[Recurrence.SAME_NODE]
    plan = life.plan_attempt(session / cell.name, 2, gpus_per_node=per_node, fault_delay=0.0)
    node = first.manifest.fault_node
    assert node == "node1" and plan.resume is not None
    folder = session / "undrained"
    spec = JobSpec(
        folder, cell.fault_type, cell.rank, cell.iter, cell.nodes, per_node, 0.0, settings(launcher),
        attempt=2, attempts=2, node_names=("node1", "node0"), resume=plan.resume,
        reinjection=life.reinjection(cell, [first.manifest], [], 0.0),
    )  # fmt: skip
    assert spec.reinjection == Injection(cell.rank, cell.iter, 0.0, node="node1")
    RunJob(spec).run()
    return Run(folder)


@pytest.fixture(scope="module")
def lives(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[Recurrence, str], list[Run]]:
    root = tmp_path_factory.mktemp("lives")
    with ThreadPoolExecutor(max_workers=len(LIVES) * len(LAUNCHERS)) as pool:
        futures = {
            (kind, launcher): pool.submit(live, root / launcher, cell, per_node, launcher)
            for kind, (cell, per_node) in LIVES.items()
            for launcher in LAUNCHERS
        }
        runs = {key: future.result() for key, future in futures.items()}
        extra = {
            launcher: pool.submit(undrained, root / launcher, launcher, runs[(Recurrence.SAME_NODE, launcher)][0])
            for launcher in LAUNCHERS
        }
        for launcher, future in extra.items():
            runs[(Recurrence.SAME_NODE, f"{launcher} undrained")] = [future.result()]
    return runs


CASES = [(kind, launcher) for kind in LIVES for launcher in LAUNCHERS]


@pytest.mark.parametrize("kind, launcher", CASES)
def test_attempt_two_resumes_from_attempt_ones_checkpoint(lives, kind: Recurrence, launcher: str) -> None:
    first, second = lives[(kind, launcher)]
    m1, m2 = first.manifest, second.manifest
    assert (m1.attempt, m1.state, m1.fault_fired, m1.fault_fired_iter, m1.resumed_from_iter) == (
        1,
        "FAILED",
        True,
        6,
        None,
    )
    assert (m2.attempt, m2.attempts, m2.resumed_from_iter, m2.launcher) == (2, 2, 5, launcher)
    assert LOADING in "\n".join(second.lines) and LOADED in "\n".join(second.lines)
    iterations = [int(m[1]) for line in second.lines if (m := re.search(r"iteration +(\d+)/ +\d+ \|", line))]
    assert iterations == (list(range(6, ITERATIONS + 1)) if m2.state == "COMPLETED" else [])


@pytest.mark.parametrize("kind, launcher", CASES)
def test_the_fault_recurs_or_not_as_its_row_says(lives, kind: Recurrence, launcher: str) -> None:
    first, second = lives[(kind, launcher)]
    m1, m2 = first.manifest, second.manifest
    assert FAULTS[m1.fault_type].on_restart == kind
    marked = [line for line in second.lines if "FAULT INJECTION" in line]
    if kind == Recurrence.SAME_STEP:  # again, at the step it fired at
        assert (m2.state, m2.fault_fired, m2.fault_fired_iter, m2.run_valid) == ("FAILED", True, 6, True)
        assert any(f"firing fault {m1.fault_type} at iteration 6" in line for line in marked)
        assert any("IndexError: index" in line for line in second.lines)
    else:  # gone: a fault that passed, a node-bound one whose node was drained
        assert (m2.state, m2.fault_fired, m2.run_valid, m2.invalid_reason) == ("COMPLETED", False, True, None)
        assert marked == [] and any("finished 8 iterations" in line for line in second.lines)
    expected_drain = ["node1"] if kind == Recurrence.SAME_NODE else []
    assert m2.drained_nodes == expected_drain


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_drained_nodes_ranks_run_on_a_spare_node(lives, launcher: str) -> None:
    first, second = lives[(Recurrence.SAME_NODE, launcher)]
    assert first.manifest.node_names == ["node0", "node1"] and first.nodes_stated() == {0: "node0", 1: "node1"}
    assert second.manifest.node_names == ["node0", "node2"] and second.nodes_stated() == {0: "node0", 1: "node2"}


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_node_bound_fault_fires_again_on_whichever_rank_runs_on_its_node(lives, launcher: str) -> None:
    (run,) = lives[(Recurrence.SAME_NODE, f"{launcher} undrained")]
    m = run.manifest
    assert run.nodes_stated() == {0: "node1", 1: "node0"}
    assert (m.state, m.fault_fired, m.fault_rank, m.fault_node, m.resumed_from_iter) == ("FAILED", True, 0, "node1", 5)
    assert any("FAULT INJECTION: Rank 0 firing fault GPU_ERROR" in line for line in run.lines)
    assert any("CUDA error: an illegal memory access was encountered" in line for line in run.lines)


def test_the_resumed_parameters_are_the_checkpoints(lives) -> None:
    """The loss attempt 2 prints at iteration 6 is the one iteration 5's checkpoint gives on
    iteration 6's data, and not the one the initial weights give."""
    import torch

    from faultloop.run.workload import Settings, Trainer

    first, second = lives[(Recurrence.PASSES, "torchrun")]
    printed = next(m[1] for line in second.lines if (m := re.search(r"iteration +6/.*\| lm loss: (\S+) \|", line)))
    checkpoint = first.folder / layout.checkpoint_dir(5)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the ranks run
    try:
        losses = {}
        for restored in (True, False):
            per_rank = []
            for rank in range(2):
                trainer = Trainer(Settings(rank, rank, 2, "", 0, "node0", ITERATIONS, 0.1, 10, 10, 5, "", False), None)
                if restored:
                    trainer.checkpoint.load(checkpoint, trainer.params)
                x, y = trainer._next_batch(6)
                per_rank.append(trainer._forward_backward(x, y))
            losses[restored] = f"{float((per_rank[0] + per_rank[1]) / 2):.6E}"
    finally:
        torch.set_num_threads(threads)
    assert printed == losses[True] != losses[False]
