"""`faultloop check-session`'s tables: which launcher lines a job's outcome calls for, and that
each stated line matches what the program printed in a real cell here. The checker itself runs on
real cells in tests/run/test_fw_exits.py and tests/run/test_launchers.py."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from conftest import cell_manifest
from faultloop.contracts import RankExit
from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.frameworks import FRAMEWORKS
from faultloop.marker import read_marker, scheduled_line
from faultloop.run.launchers import LAUNCHERS
from faultloop.run.launchers.base import Outcome, job_outcomes
from faultloop.run.session_check import check_session, render

FAILED_BY_CODE = RankExit(1, 1, None, "FAILED")
FAILED_BY_SIGKILL = RankExit(1, -9, "SIGKILL", "FAILED")
STOPPED_BY_LAUNCHER = RankExit(0, -15, "SIGTERM", "TERMINATED")


@pytest.mark.parametrize(
    ("state", "exits", "outcomes"),
    [
        ("COMPLETED", [], {Outcome.STARTED, Outcome.ENDED}),
        ("TIMEOUT", [FAILED_BY_CODE], {Outcome.STARTED, Outcome.STOPPED}),
        (
            "FAILED",
            [FAILED_BY_CODE, STOPPED_BY_LAUNCHER],
            {Outcome.STARTED, Outcome.ENDED, Outcome.FAILED, Outcome.BY_EXIT_CODES},
        ),
        (
            "FAILED",
            [FAILED_BY_SIGKILL, STOPPED_BY_LAUNCHER],
            {Outcome.STARTED, Outcome.ENDED, Outcome.FAILED, Outcome.BY_A_SIGNAL, Outcome.BY_SIGNALS_ONLY},
        ),
        (
            "FAILED",
            [FAILED_BY_SIGKILL, RankExit(0, 1, None, "FAILED")],
            {Outcome.STARTED, Outcome.ENDED, Outcome.FAILED, Outcome.BY_A_SIGNAL},
        ),
        ("FAILED", [RankExit(1, None, None, "UNKNOWN")], {Outcome.STARTED, Outcome.ENDED, Outcome.FAILED}),
    ],
)
def test_a_jobs_record_gives_its_outcomes(state: str, exits: list[RankExit], outcomes: set[Outcome]) -> None:
    assert job_outcomes(state, exits) == outcomes


def patterns(launcher: str, exits: list[RankExit], state: str = "FAILED") -> list[tuple[str, ...]]:
    return [line.patterns for line in LAUNCHERS[launcher].expected_lines(job_outcomes(state, exits))]


def test_open_mpi_is_expected_to_print_the_summary_for_how_the_first_rank_failed() -> None:
    by_code, by_signal, mixed = (patterns("mpirun", e) for e in ([FAILED_BY_CODE], [FAILED_BY_SIGKILL],
                                                                  [FAILED_BY_CODE, FAILED_BY_SIGKILL]))  # fmt: skip
    assert len(by_code) == 2 and all(any(re.search(p, OPEN_MPI["exit"]) for p in ps) for ps in by_code)
    assert not any(re.search(p, OPEN_MPI["signal"]) for p in by_code[1])
    assert all(any(re.search(p, OPEN_MPI["signal"]) for p in ps) for ps in by_signal)
    assert len(mixed) == 1  # either summary: the record does not say which rank failed first
    assert patterns("mpirun", [], "COMPLETED") == []


def test_hydra_is_expected_to_report_a_signal_only_and_its_silence_at_the_job_limit_is_stated() -> None:
    assert len(patterns("mpiexec", [FAILED_BY_CODE])) == 1  # the exit codes; no banner for an exit code
    assert len(patterns("mpiexec", [FAILED_BY_SIGKILL])) == 2
    assert patterns("mpiexec", [], "TIMEOUT") == [] and Outcome.STOPPED in LAUNCHERS["mpiexec"].silent


def test_lightnings_observer_line_is_never_required() -> None:
    every = frozenset(Outcome)
    assert LAUNCHERS["lightning"].own_lines and LAUNCHERS["lightning"].expected_lines(every) == []


# Lines each program printed in a real cell on this machine (the preset session fw, the SIGSTOP cells);
# Lightning's observer line is its source's wording (it printed in none of those cells)
OPEN_MPI = {
    "exit": "Primary job  terminated normally, but 1 process returned",
    "signal": "mpirun.openmpi noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).",
}
TORCH = [
    "0: E1207 21:39:41.690000 10582 .venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/"
    "api.py:1002] failed (exitcode: -9) local_rank: 1 (pid: 10592) of binary: /work/main/.venv/bin/python",
    "0: W1207 20:29:19.904000 28498 torch/distributed/elastic/agent/server/api.py:753] Received 15 death signal, "
    "shutting down workers",
]
PRINTED = {
    "torchrun": TORCH,
    "srun": ["srun: error: node0: task 1: Exited with exit code 1"],
    "mpirun": list(OPEN_MPI.values()),
    "mpirun_tagged": [*OPEN_MPI.values(), "[1,3]<stderr>:Initializing distributed: GLOBAL_RANK: 3, MEMBER: 4/4"],
    "mpiexec": [
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
        "[mpiexec@vm] Exit codes: [vm] 9,15,9,9,9,9,9,9",
    ],
    "accelerate": [
        "0: The following values were not passed to `accelerate launch` and had defaults used instead:",
        *TORCH,
    ],
    "deepspeed": [
        "1: [2026-12-07 20:40:38,110] [INFO] [launch.py:245:main] process 6936 spawned with command: ['python']",
        "0: [2026-12-07 20:42:03,050] [INFO] [launch.py:253:sigkill_handler] Killing subprocess 6997",
    ],
    "ray": [
        "2026-12-07 20:28:44,029\tINFO worker.py:2038 -- Started a local Ray instance.",
        "(RayTrainWorker pid=31252) Setting up process group for: env:// [rank=0, world_size=8]",
        "(TrainController pid=30113) Error: Training failed due to worker errors:",
    ],
    "lightning": [
        "0: [rank: 1] Child process with PID 4242 terminated with code 1. Forcefully terminating all other "
        "processes to avoid zombies 🧟"
    ],
}
FRAMEWORK_PRINTED = {
    "cpu_gloo": ["1: [2026-12-07 20:37:11.221139] iteration        1/      30 | consumed samples:          256 |"],
    "lightning": [
        "0: Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/8",
        "0: All distributed processes registered. Starting with 8 processes",
    ],
    "hf_trainer": ["0: [transformers] ***** Running training *****"],
    "deepspeed": [
        "0: [2026-12-07 21:40:22,059] [INFO] [logging.py:123:log_dist] [Rank 0] DeepSpeed info: version=0.19.8, "
        "git-hash=unknown, git-branch=unknown"
    ],
    "ray_train": ["(RayTrainWorker pid=31252) Setting up process group for: env:// [rank=0, world_size=8]"],
}


@pytest.mark.parametrize("name", list(LAUNCHERS))
def test_every_line_a_launcher_states_matches_what_it_printed_here(name: str) -> None:
    for line in LAUNCHERS[name].own_lines:
        assert line.origin and line.patterns
        assert any(re.search(p, printed) for p in line.patterns for printed in PRINTED[name]), line


@pytest.mark.parametrize("name", [n for n, f in FRAMEWORKS.items() if f.own_lines])
def test_every_line_a_framework_states_matches_what_it_printed_here(name: str) -> None:
    for line in FRAMEWORKS[name].own_lines:
        assert line.origin and any(re.search(line.pattern, printed) for printed in FRAMEWORK_PRINTED[name]), line


def test_every_framework_that_runs_here_states_its_own_lines() -> None:
    assert all(f.own_lines for f in FRAMEWORKS.values() if f.cpu == "runs")


def test_the_scheduling_marker_gives_the_planned_iteration() -> None:
    marker = read_marker("0: [stamp] " + scheduled_line(1, "SIGKILL", time.time(), 5, 1.0))
    assert marker is not None and (marker.rank, marker.fired, marker.scheduled_at) == (1, False, 5)


def test_a_cell_whose_every_try_failed_before_its_fault_is_not_run_and_says_why(tmp_path: Path) -> None:
    """run_job's record after the last infrastructure try (the workflow's next run retries it), and
    a cell between tries (only infra_failure.json): neither ran, each listed with its reason."""
    last, between, absent = Cell("SIGKILL", 1, 5, 2), Cell("SIGTERM", 1, 5, 2), Cell("SEGFAULT", 1, 5, 2)
    reason = "job failed before the fault fired (task 1 ended with exit code 1: DistStoreError: wait timeout)"
    for cell, name in ((last, layout.MANIFEST), (between, layout.INFRA_FAILURE)):
        (tmp_path / cell.name).mkdir()
        record = cell_manifest(cell, valid=False, state="INFRA_FAILED", invalid_reason=reason)
        record.write(tmp_path / cell.name / name)
    result = check_session(tmp_path, [last, between, absent], "cpu_gloo", "torchrun")
    assert not result.passed and not result.failing and len(result.missing) == 3
    assert [c.infra for c in result.missing] == [reason, reason, None]
    text = render(result)
    assert f"- {last.name}: {reason}" in text and absent.name not in text
    assert text.endswith("3 cells: 0 pass, 0 fail, 3 not run")
