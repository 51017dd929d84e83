"""The faults clusters see that upstream's injector cannot make (faults.CLUSTER_FAULT_NAMES), for
real, on 2 nodes x 2 ranks: each test checks its mechanism's own evidence (the kernel's OOM-kill
count, the errno of the failed write, the peers' connection errors, the mismatched entry in the
flight-recorder dumps, the NaN check raising on one rank), then that logsage and faultloop's FR
analyzer read the run right, and that no cgroup or process outlives a cell, a failed cell or a
stopped run_job.

Every fault runs once under the torchrun layout and two under the srun layout; the cells run once
per module, several at a time.
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from conftest import SHORT_JOB_TIMING as TIMING
from faultloop.faults import CLUSTER_FAULT_NAMES, FAULTS
from faultloop.marker import strip_markers
from faultloop.run import memcg
from faultloop.run.launch import CELL_ENV
from job_slots import JobSlots

NODES, PER_NODE, RANK, ITER = 2, 2, 1, 3
WORLD = NODES * PER_NODE
SRUN_FAULTS = ["HOST_OOM", "NET_DROP"]
HAS_MEMCG = memcg.hierarchy() is not None  # HOST_OOM needs one; the other faults run anywhere
ALL_CELLS = [
    key
    for key in (*CLUSTER_FAULT_NAMES, *(f"srun/{name}" for name in SRUN_FAULTS))
    if HAS_MEMCG or not key.endswith("HOST_OOM")
]
needs_memcg = pytest.mark.skipif(not HAS_MEMCG, reason="no writable memory cgroup hierarchy")


def _argv(cell_dir: Path, fault: str, launcher: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "faultloop.cli.main",
        "run-job",
        "--cell-dir",
        str(cell_dir),
        "--fault-type",
        fault,
        "--rank",
        str(RANK),
        "--iter",
        str(ITER),
        "--nodes",
        str(NODES),
        "--gpus-per-node",
        str(PER_NODE),
        "--launcher",
        launcher,
        "--scheduler",
        "local",
        *TIMING,
        *extra,
    ]


class Cell:
    """One finished run_job: its manifest, main log and launch record."""

    def __init__(self, cell_dir: Path, proc: subprocess.CompletedProcess[str]) -> None:
        self.dir = cell_dir
        self.returncode = proc.returncode
        self.stderr = proc.stderr
        self.manifest = json.loads((cell_dir / "job.json").read_text()) if (cell_dir / "job.json").is_file() else {}

    @property
    def lines(self) -> list[str]:
        return (self.dir / self.manifest["main_log"]).read_text(errors="replace").splitlines()

    @property
    def launch_out(self) -> str:
        return (self.dir / self.manifest["launch_out"]).read_text()

    def exit_of(self, rank: int) -> dict:
        return self.manifest["rank_exits"][str(rank)]


def _run(cell_dir: Path, fault: str, launcher: str) -> Cell:
    proc = subprocess.run(_argv(cell_dir, fault, launcher), capture_output=True, text=True, timeout=300)
    return Cell(cell_dir, proc)


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory, job_slots: JobSlots) -> dict[str, Cell]:
    root = tmp_path_factory.mktemp("cluster")
    jobs = {
        key: (
            (root / "srun" if key.startswith("srun/") else root) / f"n{NODES}_{_fault(key)}_r{RANK}_i{ITER}",
            _fault(key),
            "srun" if key.startswith("srun/") else "torchrun",
        )
        for key in ALL_CELLS
    }

    def run(cell_dir: Path, fault: str, launcher: str) -> Cell:
        with job_slots.held():
            return _run(cell_dir, fault, launcher)

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {key: pool.submit(run, *job) for key, job in jobs.items()}
        return {key: fut.result() for key, fut in futures.items()}


def _fault(key: str) -> str:
    return key.removeprefix("srun/")


def _own(cell: Cell, rank: int) -> list[str]:
    """A rank's lines as torch's excepthook prefixes them (`[rankN]:`), labels peeled."""
    return [line.split(f"[rank{rank}]:", 1)[1] for line in cell.lines if f"[rank{rank}]:" in line]


def _left_behind(cell_dir: Path) -> tuple[list[Path], list[int]]:
    """The cell's memory cgroups and processes still there."""
    h = memcg.hierarchy()
    folder = memcg.cell_folder(h, cell_dir) if h else None
    cgroups = [folder] if folder is not None and folder.exists() else []
    mark = f"{CELL_ENV}={cell_dir.resolve()}".encode()
    procs = []
    for proc in psutil.process_iter():
        try:
            with open(f"/proc/{proc.pid}/environ", "rb") as handle:
                if mark in handle.read().split(b"\0"):
                    procs.append(proc.pid)
        except OSError:
            continue
    return cgroups, procs


@pytest.mark.slow
@pytest.mark.parametrize("key", ALL_CELLS)
def test_the_fault_fires_and_nothing_is_left_behind(cells: dict[str, Cell], key: str) -> None:
    cell = cells[key]
    assert cell.returncode == 0, cell.stderr
    m = cell.manifest
    assert (m["state"], m["fault_type"], m["fault_rank"], m["fault_fired"]) == ("FAILED", _fault(key), RANK, True)
    assert _left_behind(cell.dir) == ([], [])


@pytest.mark.slow
@needs_memcg
@pytest.mark.parametrize("key", ["HOST_OOM", "srun/HOST_OOM"])
def test_host_oom_the_kernel_killed_the_rank_in_its_cgroup(cells: dict[str, Cell], key: str) -> None:
    """The cgroup's own OOM-kill count (read by run_job before removing it) and the kernel's line
    naming the killed pid, collected into the log with journald's framing."""
    cell = cells[key]
    mine = cell.exit_of(RANK)
    assert (mine["exitcode"], mine["signal"]) == (-9, "SIGKILL")
    counts = re.findall(r"memory cgroup (\d+): oom_kill (\d+), removed", cell.launch_out)
    assert len(counts) == 1 and counts[0][1] == "1", cell.launch_out
    pid = counts[0][0]
    kernel = [line for line in cell.lines if re.match(r"^\d{4}-\d\d-\d\dT[\d:.]+[+-]\d\d:\d\d \S+ kernel: ", line)]
    assert any(re.search(rf"[Mm]emory cgroup out of memory: Killed process {pid} \(python", line) for line in kernel)
    assert all(memcg.FOLDER_PREFIX in line or pid in line for line in kernel)  # only the job's own
    if not key.startswith("srun/"):  # torch's agent names the pid it lost, the same one, in its failure
        # summary (its `failed (...)` line names whichever local rank its poll found first)
        assert any(re.search(rf"exitcode\s*: -9 \(pid: {pid}\)", line) for line in cell.lines)


@pytest.mark.slow
def test_storage_full_the_checkpoint_write_failed_with_enospc(cells: dict[str, Cell]) -> None:
    cell = cells["STORAGE_FULL"]
    mine = cell.exit_of(RANK)
    assert mine["exitcode"] == 1
    assert f"OSError: [Errno {errno.ENOSPC}] {os.strerror(errno.ENOSPC)}" in mine["error"]
    assert any(f"[Errno {errno.ENOSPC}]" in line for line in _own(cell, RANK))
    others = [r for r in range(WORLD) if r != RANK]
    assert not any("Errno" in line for r in others for line in _own(cell, r))
    saved = {p.name for p in (cell.dir / "checkpoints" / "model").glob("iter_*/rank_*.pt")}
    assert {f"rank_{r:05d}.pt" for r in others} <= saved  # the others' checkpoints were written


@pytest.mark.slow
@pytest.mark.parametrize("key", ["NET_DROP", "srun/NET_DROP"])
def test_net_drop_the_peers_lost_their_connections_after_the_rank_did(cells: dict[str, Cell], key: str) -> None:
    cell = cells[key]
    gloo = re.compile(r"Connection (?:closed|reset) by peer")
    errors = {
        r: next((i for i, line in enumerate(cell.lines) if f"[rank{r}]:" in line and gloo.search(line)), None)
        for r in range(WORLD)
    }
    assert errors[RANK] is not None
    peers = [i for r, i in errors.items() if r != RANK and i is not None]
    assert peers, "no peer reported its connection error"
    assert errors[RANK] < min(peers)  # the rank whose links were cut saw it first


@pytest.mark.slow
def test_desync_the_flight_recorder_shows_the_odd_collective(cells: dict[str, Cell]) -> None:
    from faultloop.analyze.fr.analysis import analyze_dir

    cell = cells["DESYNC"]
    last: dict[int, tuple[int, str]] = {}
    for r in range(WORLD):
        with open(cell.dir / "checkpoints" / f"_dump_{r}", "rb") as f:
            dump = pickle.load(f)  # torch's own format; written by us, so trusted
        entry = dump["entries"][-1]
        last[r] = (entry["collective_seq_id"], entry["profiling_name"])
    assert len({seq for seq, _ in last.values()}) == 1  # every rank stuck at the same sequence id
    assert last[RANK][1] == "gloo:barrier"
    assert {name for r, (_, name) in last.items() if r != RANK} == {"gloo:all_reduce"}
    result = analyze_dir(str(cell.dir / "checkpoints"), world_size=WORLD, gpus_per_node=PER_NODE)
    assert result.suspect_ranks == [RANK] and result.scope == "rank"
    assert [(mm.field, mm.found, mm.ranks) for mm in result.mismatches] == [("op_type", "barrier", [RANK])]


@pytest.mark.slow
def test_nan_loss_the_check_raises_on_the_rank_alone(cells: dict[str, Cell]) -> None:
    cell = cells["NAN_LOSS"]
    nan = re.compile(r"AssertionError: Rank (\d+): found NaN in local grad norm")
    raised = {int(m.group(1)) for line in cell.lines if (m := nan.search(line))}
    assert raised == {RANK}
    assert any(nan.search(line) for line in _own(cell, RANK))
    assert cell.exit_of(RANK)["exitcode"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("key", ALL_CELLS)
def test_logsage_reads_restart_culprit_and_category(cells: dict[str, Cell], key: str) -> None:
    from faultloop.analyze.logsage import analyze_log

    fault = FAULTS[_fault(key)]
    verdict = analyze_log(list(strip_markers(cells[key].lines)))
    assert (verdict.restart, verdict.primary_ranks, verdict.fault_category) == (
        fault.restart,
        [RANK],
        fault.category,
    ), verdict.to_json()


@pytest.mark.slow
@pytest.mark.parametrize("key", ALL_CELLS)
def test_nothing_but_markers_reveals_the_fault(cells: dict[str, Cell], key: str) -> None:
    text = "\n".join(strip_markers(cells[key].lines))
    assert not re.search(r"inject|FAULT_(TYPE|RANK|AT_ITER|DELAY)|faultloop_", text, re.IGNORECASE)
    assert not [name for name in FAULTS if name in text and name not in {"SIGKILL", "SIGTERM", "SIGINT", "SIGSTOP"}]


# -- what a stopped or failed run_job leaves ----------------------------------------------------


@pytest.mark.slow
@needs_memcg
def test_a_stopped_run_job_removes_the_cells_cgroups_and_processes(tmp_path: Path) -> None:
    """SIGTERM to run_job (what the workflow sends when it is stopped) while the OOM-killed
    rank's cgroup is still there: run_job removes it and its tasks end with it."""
    cell_dir = tmp_path / "cell"
    folder = memcg.cell_folder(memcg.hierarchy(), cell_dir)  # type: ignore[arg-type]
    proc = subprocess.Popen(_argv(cell_dir, "HOST_OOM", "torchrun"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (folder.is_dir() and any(p.is_dir() for p in folder.iterdir())):
        assert proc.poll() is None and time.monotonic() < deadline, "the rank never entered its cgroup"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    time.sleep(1.0)  # tasks end by their parent-death signal
    assert _left_behind(cell_dir) == ([], [])


@pytest.mark.slow
@needs_memcg
def test_an_attempt_removes_what_a_killed_one_left(tmp_path: Path) -> None:
    """A run_job killed outright (SIGKILL) leaves its cgroup folder; the next attempt at the cell
    removes it, even one that fails before the job starts (an infrastructure failure)."""
    cell_dir = tmp_path / "cell"
    folder = memcg.cell_folder(memcg.hierarchy(), cell_dir)  # type: ignore[arg-type]
    (folder / "4242").mkdir(parents=True)
    proc = subprocess.run(
        _argv(cell_dir, "HOST_OOM", "srun", "--python", str(tmp_path / "no-such-python")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and (cell_dir / "infra_failure.json").is_file()
    assert _left_behind(cell_dir) == ([], [])
