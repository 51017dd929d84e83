"""The launcher registry: the built-in workload under Open MPI's mpirun (plain and --tag-output)
and MPICH's mpiexec, for real on 2 simulated nodes x 2 ranks, and each launcher's report read
back into the manifest."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import SHORT_JOB_TIMING as TIMING
from faultloop.contracts import RankExit
from faultloop.core.cell import Cell
from faultloop.run.launchers import LAUNCHERS
from faultloop.run.launchers.mpiexec import BAD_TERMINATION, read_exit_codes
from faultloop.run.launchers.mpirun import read_summary
from faultloop.run.session_check import check_session, render
from job_slots import JobSlots

RANK, ITER = 1, 3
CELLS = {  # key: (launcher, fault)
    "mpirun/SIGKILL": ("mpirun", "SIGKILL"),
    "mpirun_tagged/WORKLOAD_EXC": ("mpirun_tagged", "WORKLOAD_EXC"),
    "mpiexec/SIGKILL": ("mpiexec", "SIGKILL"),
    "mpiexec/SEGFAULT": ("mpiexec", "SEGFAULT"),
}
needs_mpi = pytest.mark.skipif(
    shutil.which("mpirun.openmpi") is None or shutil.which("mpiexec.hydra") is None,
    reason="openmpi-bin and mpich are not installed (make system-deps installs them)",
)


def run_job(cell_dir: Path, launcher: str, fault: str) -> dict:
    cmd = [
        sys.executable, "-m", "faultloop.cli.main", "run-job", "--cell-dir", str(cell_dir), "--fault-type", fault,
        "--rank", str(RANK), "--iter", str(ITER), "--nodes", "2", "--gpus-per-node", "2", "--launcher", launcher,
        "--scheduler", "local", *TIMING,
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((cell_dir / "job.json").read_text())
    manifest["lines"] = (cell_dir / manifest["main_log"]).read_text(errors="replace").splitlines()
    manifest["folder"] = cell_dir
    return manifest


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory, job_slots: JobSlots) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("launchers")

    def run(key: str) -> dict:
        launcher, fault = CELLS[key]
        with job_slots.held():
            return run_job(root / key.replace("/", "_"), launcher, fault)

    with ThreadPoolExecutor(max_workers=len(CELLS)) as pool:
        return dict(zip(CELLS, pool.map(run, CELLS), strict=True))


@needs_mpi
@pytest.mark.slow
@pytest.mark.parametrize("key", CELLS)
def test_the_fault_fires_under_the_launcher_and_the_manifest_names_it(cells: dict[str, dict], key: str) -> None:
    launcher, fault = CELLS[key]
    m = cells[key]
    assert (m["launcher"], m["workload"], m["fault_type"], m["state"]) == (launcher, "cpu_gloo", fault, "FAILED")
    assert m["fault_fired"] and m["run_valid"] and m["fault_fired_iter"] >= ITER
    assert m["node_names"] == ["node0", "node1"]
    # the launcher starts the whole job itself: no srun label, no srun line
    assert not any(line.startswith(("0: ", "srun: ")) for line in m["lines"])


@needs_mpi
@pytest.mark.slow
def test_open_mpi_summarises_the_rank_that_was_killed(cells: dict[str, dict]) -> None:
    m = cells["mpirun/SIGKILL"]
    assert any(f"noticed that process rank {RANK} with PID" in line and "exited on signal 9 (Killed)" in line
               for line in m["lines"])  # fmt: skip
    assert m["rank_exits"][str(RANK)] == {"exitcode": -9, "signal": "SIGKILL", "state": "FAILED", "error": None}


@needs_mpi
@pytest.mark.slow
def test_open_mpi_tags_every_rank_line_and_names_the_rank_that_exited(cells: dict[str, dict]) -> None:
    m = cells["mpirun_tagged/WORKLOAD_EXC"]
    assert any(line.startswith(f"[1,{RANK}]<stderr>:") and "IndexError" in line for line in m["lines"])
    assert any("detected that one or more processes exited with non-zero status" in line for line in m["lines"])
    assert m["rank_exits"][str(RANK)]["exitcode"] == 1 and m["rank_exits"][str(RANK)]["state"] == "FAILED"


@needs_mpi
@pytest.mark.slow
@pytest.mark.parametrize(("key", "signal"), [("mpiexec/SIGKILL", "SIGKILL"), ("mpiexec/SEGFAULT", "SIGSEGV")])
def test_mpich_reports_a_bad_termination_and_every_ranks_exit(cells: dict[str, dict], key: str, signal: str) -> None:
    m = cells[key]
    assert any(BAD_TERMINATION in line for line in m["lines"])
    assert m["rank_exits"][str(RANK)]["signal"] == signal and m["rank_exits"][str(RANK)]["state"] == "FAILED"
    assert all(e["state"] != "UNKNOWN" for e in m["rank_exits"].values())


@needs_mpi
@pytest.mark.slow
def test_check_session_finds_each_mpis_own_lines_in_the_real_cells(cells: dict[str, dict], tmp_path: Path) -> None:
    pool = [Cell(fault, RANK, ITER, 2, launcher=launcher) for launcher, fault in CELLS.values()]
    for cell, key in zip(pool, CELLS, strict=True):
        (tmp_path / cell.name).symlink_to(cells[key]["folder"])
    result = check_session(tmp_path, pool, "cpu_gloo", "torchrun")
    assert result.passed, render(result)
    found = {c.cell.launcher + "/" + c.cell.fault_type: c.launcher_lines for c in result.cells}
    # Open MPI: either summary and the one for how the rank failed (tagged: and its tags); hydra: its
    # exit codes and, for a rank killed by a signal, its banner
    assert found == {"mpirun/SIGKILL": (2, 2), "mpirun_tagged/WORKLOAD_EXC": (3, 3), "mpiexec/SIGKILL": (2, 2),
                     "mpiexec/SEGFAULT": (2, 2)}  # fmt: skip


# What the launchers print, as this machine's Open MPI 4.1 and MPICH 4.0 hydra printed it (hydra's
# exit codes as inside a 2-node SLURM allocation: one line per node's proxy).
OPEN_MPI_EXIT = """\
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[18135,1],3]
  Exit code:    3
--------------------------------------------------------------------------
"""
HYDRA_SEGFAULT = """\
===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   PID 10519 RUNNING AT vm
=   EXIT CODE: 9
=   CLEANING UP REMAINING PROCESSES
=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
===================================================================================
[mpiexec@vm] Exit codes: [n1] 9,11
[n2] 0,768
YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Segmentation fault (signal 11)
"""


def test_open_mpi_summary_gives_the_first_rank_and_its_code() -> None:
    assert read_summary(OPEN_MPI_EXIT.splitlines()) == {3: RankExit(3, 3, None, "FAILED")}
    signalled = ["mpirun.openmpi noticed that process rank 2 with PID 0 on node n1 exited on signal 6 (Aborted)."]
    assert read_summary(signalled) == {2: RankExit(2, -6, "SIGABRT", "FAILED")}


def test_hydra_exit_codes_give_every_rank_and_tell_the_cleaned_up_from_the_first() -> None:
    assert read_exit_codes(HYDRA_SEGFAULT.splitlines()) == {
        0: RankExit(0, -9, "SIGKILL", "TERMINATED"),
        1: RankExit(1, -11, "SIGSEGV", "FAILED"),
        2: RankExit(2, 0, None, "SUCCEEDED"),
        3: RankExit(3, 3, None, "FAILED"),
    }
    one_host = ["[mpiexec@vm] Exit codes: [vm] 256,0", "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: x"]
    assert read_exit_codes(one_host) == {0: RankExit(0, 1, None, "FAILED"), 1: RankExit(1, 0, None, "SUCCEEDED")}


def test_every_launcher_row_states_what_the_docs_need() -> None:
    for name, row in LAUNCHERS.items():
        assert row.name == name and row.spans in ("node", "rank", "job") and row.on_rank_failure
        assert callable(row.local_tasks) and callable(row.allocation_argv) and callable(row.rank_exits)


TORCH_TABLE = """\
0: Root Cause (first observed failure):
0: [0]:
0:   time      : 2026-12-07_16:59:40
0:   host      : vm
0:   rank      : 1 (local_rank: 1)
0:   exitcode  : -9 (pid: 25690)
"""


def test_torchs_failure_table_names_the_root_cause_rank_under_accelerate() -> None:
    from faultloop.run.launchers.frameworks import read_failure_table

    assert read_failure_table(TORCH_TABLE.splitlines()) == {1: RankExit(1, -9, "SIGKILL", "FAILED")}
