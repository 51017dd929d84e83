"""The cpu_gloo workload and run_job's launchers: every fault, for real, on 2 nodes x 2 ranks.

All cells run once per module, several at a time (hang cells mostly wait on timeouts, so they
overlap well with the others on 2 cores); each test then checks what really happened in one.
"""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from faultloop.faults import FAULT_NAMES, FAULTS, strip_markers

pytestmark = pytest.mark.slow

NODES, PER_NODE, RANK, ITER = 2, 2, 1, 3
# Short timeouts keep hang cells near 30 s; still long enough for 2 busy cores.
TIMING = ["--pg-timeout-s", "10", "--stall-timeout-s", "5", "--term-delay-s", "1",
          "--kill-grace-s", "2", "--iterations", "12", "--job-timeout-s", "200"]
HANGS = [name for name in FAULT_NAMES if FAULTS[name].hangs]
SIGNAL_NAMES = {"SIGKILL", "SIGTERM", "SIGINT", "SIGSTOP"}  # also legitimately seen in exit reports


@dataclass
class Cell:
    """One finished run_job: its exit status, manifest and log."""

    dir: Path
    returncode: int
    stderr: str

    @property
    def manifest(self) -> dict:
        return json.loads((self.dir / "job.json").read_text())

    @property
    def lines(self) -> list[str]:
        return (self.dir / self.manifest["main_log"]).read_text(errors="replace").splitlines()

    def rank_lines(self, rank: int) -> list[str]:
        return [line[len(f"{rank}: "):] for line in self.lines if line.startswith(f"{rank}: ")]

    def launcher_record(self, rank: int) -> dict:
        """The node launcher's own record of a rank (says whether the launcher stopped it)."""
        for path in (self.dir / ".launch" / self.manifest["job_id"]).glob("node*.json"):
            for r in json.loads(path.read_text())["ranks"]:
                if r["rank"] == rank:
                    return r
        raise AssertionError(f"no launcher record for rank {rank}")


def run_job(cell_dir: Path, *extra: str, fault: str = "SIGKILL", iter_: int = ITER) -> Cell:
    cmd = [sys.executable, "-m", "faultloop.cli", "run-job", "--cell-dir", str(cell_dir),
           "--fault-type", fault, "--rank", str(RANK), "--iter", str(iter_), "--nodes", str(NODES),
           "--gpus-per-node", str(PER_NODE), "--launcher", "local", *TIMING, *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return Cell(cell_dir, proc.returncode, proc.stderr)


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Cell]:
    """Every fault (hangs first: they are the longest) plus a cell whose fault is never reached."""
    root = tmp_path_factory.mktemp("cells")
    # cell dirs named the way the workflow names them: the path itself must not leak into the log
    jobs = {name: (root / f"n{NODES}_{name}_r{RANK}_i{ITER}", name, ITER)
            for name in HANGS + [n for n in FAULT_NAMES if n not in HANGS]}
    jobs["never_fires"] = (root / "never_fires", "SIGKILL", 99)
    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = {key: pool.submit(run_job, d, fault=f, iter_=i) for key, (d, f, i) in jobs.items()}
        return {key: fut.result() for key, fut in futures.items()}


# What the injected rank's exit must be, and a line only the real mechanism prints.
CRASH_EXPECT = {
    "SIGKILL": (-9, None),
    "SEGFAULT": (-11, "Fatal Python error: Segmentation fault"),
    "OS_ABORT": (-6, "Fatal Python error: Aborted"),
    "SIGTERM": (-15, "received SIGTERM"),
    "SIGINT": (-2, "KeyboardInterrupt"),
    "WORKLOAD_EXC": (1, "IndexError: index"),
    "ASYNC_EXC": (1, "RuntimeError"),
    "SIGNAL_EXC": (1, "RuntimeError: Received signal 10 (SIGUSR1)"),
    "GPU_ERROR": (1, "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"),
}
# Faults after which the injected rank still writes its own flight-recorder dump.
INJECTED_RANK_DUMPS = {"SIGTERM", "SIGINT", "WORKLOAD_EXC", "ASYNC_EXC", "SIGNAL_EXC", "GPU_ERROR",
                       "GPU_SLEEP"}


@pytest.mark.parametrize("fault", FAULT_NAMES)
def test_fault_fires_and_job_fails(cells: dict[str, Cell], fault: str) -> None:
    cell = cells[fault]
    assert cell.returncode == 0, cell.stderr
    m = cell.manifest
    assert (m["state"], m["fault_type"], m["fault_rank"], m["world_size"]) == ("FAILED", fault, RANK, 4)
    assert m["fault_fired"] and m["run_valid"] and m["invalid_reason"] is None
    assert m["start_time"] < m["fault_scheduled_time"] <= m["fault_fired_time"] < m["end_time"]
    assert m["node_names"] == ["node0", "node1"]
    assert sorted(m["rank_exits"]) == ["0", "1", "2", "3"]
    marker = re.compile(rf"^{RANK}: \[\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{{6}}\] FAULT INJECTION: "
                        rf"Rank {RANK} will inject fault {fault} at ")
    assert any(marker.match(line) for line in cell.lines)
    assert sum("FAULT INJECTION" in line for line in cell.lines) == 2  # scheduled + fired
    # the launcher's summary names the failed ranks the torchrun way
    assert any(line.endswith("Root Cause (first observed failure):") for line in cell.lines)
    assert (cell.dir / m["launch_out"]).is_file() and (cell.dir / "tensorboard").is_dir()


@pytest.mark.parametrize("fault", sorted(CRASH_EXPECT))
def test_injected_rank_ends_as_the_fault_dictates(cells: dict[str, Cell], fault: str) -> None:
    cell = cells[fault]
    exitcode, evidence = CRASH_EXPECT[fault]
    assert cell.manifest["rank_exits"][str(RANK)]["exitcode"] == exitcode
    assert not cell.launcher_record(RANK)["stopped_by_launcher"]
    mine = "\n".join(strip_markers(cell.rank_lines(RANK)))
    if evidence:
        assert evidence in mine
    if exitcode == 1:
        assert "Traceback (most recent call last):" in mine
    if fault in {"SIGKILL", "SEGFAULT", "OS_ABORT", "SIGTERM"}:
        root = cell.lines.index(next(l for l in cell.lines if "Root Cause" in l and l.startswith("0: ")))
        assert f"rank      : {RANK} (local_rank: {RANK})" in cell.lines[root + 4]
    signal_name = cell.manifest["rank_exits"][str(RANK)]["signal"]
    assert (signal_name is None) == (exitcode >= 0)


@pytest.mark.parametrize("fault", HANGS)
def test_hung_rank_is_killed_by_its_launcher(cells: dict[str, Cell], fault: str) -> None:
    cell = cells[fault]
    exits = cell.manifest["rank_exits"]
    record = cell.launcher_record(RANK)
    assert record["stopped_by_launcher"]
    # GPU_SLEEP's threads still run: SIGTERM ends it. A stopped process or a held GIL needs SIGKILL.
    assert exits[str(RANK)]["exitcode"] == (-15 if fault == "GPU_SLEEP" else -9)
    survivors = [r for r in range(4) if r != RANK]
    for r in survivors:  # each times out, or sees a peer that timed out close the connection
        assert exits[str(r)]["exitcode"] == 1
        assert any(line.startswith("RuntimeError: [") for line in cell.rank_lines(r)), f"rank {r}"
        assert any("WARNING: no training progress" in line for line in cell.rank_lines(r))
    assert any("Timed out waiting" in line for r in survivors for line in cell.rank_lines(r))
    mine = cell.rank_lines(RANK)
    if fault == "GPU_SLEEP":  # alive and stuck: its watchdog reports it
        assert any("WARNING: no training progress" in line for line in mine)
    if fault == "LOCK_GIL":  # GIL held: only faulthandler's C timer can print its stacks
        assert any(line.startswith("Timeout (0:00:05)!") for line in mine)
        assert not any("WARNING: no training progress" in line for line in mine)
    if fault == "SIGSTOP":  # stopped: nothing at all after the fault
        fired = max(i for i, line in enumerate(mine) if "FAULT INJECTION" in line)
        assert mine[fired + 1:] == []
    assert any(f"Unable to shutdown process {record['pid']}" in line for line in cell.lines) == (
        fault != "GPU_SLEEP")


@pytest.mark.parametrize("fault", FAULT_NAMES)
def test_flight_recorder_dumps_from_every_survivor(cells: dict[str, Cell], fault: str) -> None:
    cell = cells[fault]
    dumps = {int(p.name.removeprefix("_dump_")) for p in (cell.dir / "checkpoints").glob("_dump_*")}
    expected = {0, 2, 3} | ({RANK} if fault in INJECTED_RANK_DUMPS else set())
    assert expected <= dumps
    assert not list((cell.dir / "checkpoints").glob(".*tmp"))  # atomic writes left no temp files
    with open(cell.dir / "checkpoints" / "_dump_0", "rb") as f:
        dump = pickle.load(f)  # torch's own format; written by us, so trusted
    assert dump["entries"] and dump["entries"][-1]["profiling_name"] == "gloo:all_reduce"


@pytest.mark.parametrize("fault", FAULT_NAMES)
def test_nothing_but_markers_reveals_the_fault(cells: dict[str, Cell], fault: str) -> None:
    stripped = list(strip_markers(cell_lines := cells[fault].lines))
    assert len(stripped) == len(cell_lines) - 2
    text = "\n".join(stripped)
    assert not re.search(r"inject|FAULT_(TYPE|RANK|AT_ITER|DELAY)", text, re.IGNORECASE)
    for name in FAULT_NAMES:
        if name not in SIGNAL_NAMES:  # a signal's name is a fair observation (exit reports)
            assert name not in text, f"{name} leaks into the {fault} log"


def test_fault_beyond_the_run_completes_invalid(cells: dict[str, Cell]) -> None:
    cell = cells["never_fires"]
    assert cell.returncode == 0, cell.stderr
    m = cell.manifest
    assert (m["state"], m["fault_fired"], m["run_valid"]) == ("COMPLETED", False, False)
    assert "never fired" in m["invalid_reason"]
    assert {e["exitcode"] for e in m["rank_exits"].values()} == {0}
    assert not any("FAULT INJECTION" in line for line in cell.lines)
    assert any("iteration       12/      12" in line for line in cell.lines)


def test_bad_interpreter_is_an_infra_failure(tmp_path: Path) -> None:
    cell = run_job(tmp_path / "cell", "--python", str(tmp_path / "no-such-python"))
    assert cell.returncode != 0
    assert not (cell.dir / "job.json").exists()
    record = json.loads((cell.dir / "infra_failure.json").read_text())
    assert record["run_valid"] is False and record["fault_fired"] is False
    assert "before the fault fired" in record["invalid_reason"]
    assert "no-such-python" in record["invalid_reason"]
    assert "infrastructure failure" in cell.stderr and len(cell.stderr.strip().splitlines()) == 1


def test_broken_import_is_an_infra_failure_and_a_retry_cleans_up(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "torch.py").write_text("raise ImportError('libtorch_cpu.so: cannot open shared object file')\n")
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    cell_dir = tmp_path / "cell"
    (cell_dir / "checkpoints").mkdir(parents=True)
    (cell_dir / "checkpoints" / "_dump_0").write_bytes(b"stale")
    (cell_dir / "job.json").write_text("{}")
    cell = run_job(cell_dir)
    assert cell.returncode != 0
    assert not (cell_dir / "job.json").exists() and not (cell_dir / "checkpoints" / "_dump_0").exists()
    record = json.loads((cell_dir / "infra_failure.json").read_text())
    assert "libtorch_cpu.so" in record["invalid_reason"]
    assert record["state"] == "FAILED" and record["rank_exits"]["0"]["exitcode"] == 1


# The analyzers on these same real runs (no extra jobs): FR names the exact injected rank for
# every hang and for crashes whose culprit left no dump; logsage gets every cell right.
@pytest.mark.parametrize("fault", HANGS + ["SIGKILL", "SEGFAULT", "OS_ABORT"])
def test_fr_names_the_injected_rank(cells, fault):
    from faultloop.fr import analyze_dir

    result = analyze_dir(str(cells[fault].dir / "checkpoints"), world_size=NODES * PER_NODE, gpus_per_node=PER_NODE)
    assert result.suspect_ranks == [RANK], (fault, result.to_json())
    assert result.scope == "rank"


@pytest.mark.parametrize("fault", FAULT_NAMES)
def test_logsage_attributes_the_stripped_log(cells, fault):
    from faultloop.logsage import analyze_log

    verdict = analyze_log(list(strip_markers(cells[fault].lines)))
    assert verdict.primary_ranks == [RANK], (fault, verdict.to_json())
    assert verdict.restart == FAULTS[fault].restart
    assert verdict.fault_type == fault
