"""The cpu_gloo workload under torch's real launcher: every fault, for real, on 2 nodes x 2 ranks.

Every fault runs once under the default layout (one torchrun per simulated node) and a few under
the srun layout (one process per rank); all cells run once per module, several at a time (hang
cells mostly wait on timeouts, so they overlap well on 2 cores). Each test then checks what
really happened in one of them.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import SHORT_JOB_TIMING as TIMING
from faultloop.faults import FAULT_NAMES, FAULTS
from faultloop.marker import strip_markers
from faultloop.run.launchers.srun import read_srun_report
from faultloop.run.launchers.torchrun import read_worker_events
from faultloop.run.srun import JobLog, LocalSrun, Task
from job_slots import JobSlots

NODES, PER_NODE, RANK, ITER = 2, 2, 1, 3
HANGS = [name for name in FAULT_NAMES if FAULTS[name].hangs]
SRUN_FAULTS = ["SIGKILL", "GPU_SLEEP", "WORKLOAD_EXC"]
SIGNAL_NAMES = {"SIGKILL", "SIGTERM", "SIGINT", "SIGSTOP"}  # also legitimately seen in exit reports
# torch's elastic agent logs in glog format from its own modules
TORCH_LINE = re.compile(r"^\d+: [IWE]\d{4} [\d:.]+ \d+ \S*torch/distributed/elastic/")


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

    def exit_of(self, rank: int) -> dict:
        return self.manifest["rank_exits"][str(rank)]

    def rank_lines(self, rank: int) -> list[str]:
        """A rank's own lines under the srun layout, where srun's label is the global rank."""
        return [line[len(f"{rank}: ") :] for line in self.lines if line.startswith(f"{rank}: ")]


def run_job(
    cell_dir: Path,
    *extra: str,
    fault: str = "SIGKILL",
    iter_: int = ITER,
    launcher: str = "torchrun",
    nodes: int = NODES,
) -> Cell:
    cmd = [
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
        str(iter_),
        "--nodes",
        str(nodes),
        "--gpus-per-node",
        str(PER_NODE),
        "--launcher",
        launcher,
        "--scheduler",
        "local",
        *TIMING,
        *extra,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return Cell(cell_dir, proc.returncode, proc.stderr)


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory, job_slots: JobSlots) -> dict[str, Cell]:
    """Every fault under torchrun (hangs first: they are the longest), a few under srun, and a
    cell whose fault is never reached (on one node: what it checks does not depend on the nodes,
    and half the processes start torch)."""
    root = tmp_path_factory.mktemp("cells")
    # cell dirs named the way the workflow names them: the path itself must not leak into the log
    jobs = {
        name: (root / f"n{NODES}_{name}_r{RANK}_i{ITER}", name, ITER, "torchrun", NODES)
        for name in HANGS + [n for n in FAULT_NAMES if n not in HANGS]
    }
    jobs |= {
        f"srun/{name}": (root / "srun" / f"n{NODES}_{name}_r{RANK}_i{ITER}", name, ITER, "srun", NODES)
        for name in SRUN_FAULTS
    }
    jobs["never_fires"] = (root / "never_fires", "SIGKILL", 99, "torchrun", 1)

    def run(cell_dir: Path, fault: str, iter_: int, launcher: str, nodes: int) -> Cell:
        with job_slots.held():
            return run_job(cell_dir, fault=fault, iter_=iter_, launcher=launcher, nodes=nodes)

    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = {key: pool.submit(run, *job) for key, job in jobs.items()}
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
INJECTED_RANK_DUMPS = {"SIGTERM", "SIGINT", "WORKLOAD_EXC", "ASYNC_EXC", "SIGNAL_EXC", "GPU_ERROR", "GPU_SLEEP"}
ALL_CELLS = [*FAULT_NAMES, *(f"srun/{name}" for name in SRUN_FAULTS)]


def fault_of(key: str) -> str:
    return key.removeprefix("srun/")


@pytest.mark.slow
@pytest.mark.parametrize("key", ALL_CELLS)
def test_fault_fires_and_job_fails(cells: dict[str, Cell], key: str) -> None:
    cell, fault = cells[key], fault_of(key)
    assert cell.returncode == 0, cell.stderr
    m = cell.manifest
    assert (m["state"], m["fault_type"], m["fault_rank"], m["world_size"]) == ("FAILED", fault, RANK, 4)
    assert m["launcher"] == ("srun" if key.startswith("srun/") else "torchrun")
    assert m["fault_fired"] and m["run_valid"] and m["invalid_reason"] is None
    assert m["start_time"] < m["fault_scheduled_time"] <= m["fault_fired_time"] < m["end_time"]
    assert m["node_names"] == ["node0", "node1"]
    assert sorted(m["rank_exits"]) == ["0", "1", "2", "3"]
    marker = re.compile(
        rf"^\d: \[\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{{6}}\] FAULT INJECTION: "
        rf"Rank {RANK} will inject fault {fault} at "
    )
    assert any(marker.match(line) for line in cell.lines)
    assert sum("FAULT INJECTION" in line for line in cell.lines) == 2  # scheduled + fired
    assert (cell.dir / m["launch_out"]).is_file() and (cell.dir / "tensorboard").is_dir()


@pytest.mark.slow
@pytest.mark.parametrize("fault", FAULT_NAMES)
def test_the_log_holds_torchs_own_launcher_lines(cells: dict[str, Cell], fault: str) -> None:
    """torchrun layout: every launcher line is torch's; the lines are labelled by node, as
    `srun --label` labels one task per node (srun's own report lines, as srun prints them, carry
    no label); torch's worker events are kept out of the log."""
    lines = cells[fault].lines
    assert all(re.match(r"^([01]: |srun: )", line) for line in lines)
    assert any(re.match(r"^srun: error: node[01]: task [01]: ", line) for line in lines)
    assert any(TORCH_LINE.match(line) for line in lines)
    assert any(line.endswith("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ") for line in lines)
    assert any(re.match(r"^\d: Root Cause \(first observed failure\):$", line) for line in lines)
    assert not any('"torchelastic.worker.status' in line for line in lines)


@pytest.mark.slow
@pytest.mark.parametrize("key", [k for k in ALL_CELLS if fault_of(k) in CRASH_EXPECT])
def test_injected_rank_ends_as_the_fault_dictates(cells: dict[str, Cell], key: str) -> None:
    cell, fault = cells[key], fault_of(key)
    exitcode, evidence = CRASH_EXPECT[fault]
    mine = cell.exit_of(RANK)
    assert (mine["exitcode"], mine["state"]) == (exitcode, "FAILED")
    assert (mine["signal"] is None) == (exitcode >= 0)
    text = "\n".join(strip_markers(cell.lines))
    if evidence:
        assert evidence in text
    if exitcode == 1:  # the exception went through torch's excepthook: every line carries the rank
        prefix = f"{RANK}: " if key.startswith("srun/") else f"{RANK // PER_NODE}: "
        assert f"{prefix}[rank{RANK}]: Traceback (most recent call last):" in cell.lines
        if not key.startswith("srun/"):  # and torchrun's error file recorded it
            assert mine["error"] and evidence.split(":")[-1].strip() in mine["error"]
    if not key.startswith("srun/") and fault in {"SIGKILL", "SEGFAULT", "OS_ABORT", "SIGTERM"}:
        # torch's agent reports the injected rank's own death. (Its "Root Cause" is the failure with the
        # earliest timestamp in whole seconds: where the teardown of the others falls in the same second,
        # the tie names local rank 0, so which entry is the root cause is not the workload's to decide.)
        lines = cell.lines
        assert "0: Root Cause (first observed failure):" in lines
        entry = lines.index(f"0:   rank      : {RANK} (local_rank: {RANK})")
        assert lines[entry + 1].startswith(f"0:   exitcode  : {exitcode} ")


@pytest.mark.slow
@pytest.mark.parametrize("key", [*HANGS, "srun/GPU_SLEEP"])
def test_hung_rank_is_stopped_by_its_launcher(cells: dict[str, Cell], key: str) -> None:
    cell = cells[key]
    mine = cell.exit_of(RANK)
    # it never fails on its own: its launcher (torch's agent, or kill-on-bad-exit) stops it
    assert mine["state"] == "TERMINATED" or mine["signal"] in ("SIGTERM", "SIGKILL"), mine
    survivors = [r for r in range(4) if r != RANK]
    failed = [r for r in survivors if cell.exit_of(r)["exitcode"] == 1]
    assert failed, cell.manifest["rank_exits"]  # the others time out, or lose the peer that did
    text = "\n".join(cell.lines)
    assert "Timed out waiting" in text
    assert "WARNING: no training progress" in text
    stopped_by_torch = any("closing signal SIGTERM" in line for line in cell.lines)
    assert stopped_by_torch or key.startswith("srun/")
    if key == "srun/GPU_SLEEP":  # alive and stuck: its own watchdog reports it
        assert any("WARNING: no training progress" in line for line in cell.rank_lines(RANK))


@pytest.mark.slow
@pytest.mark.parametrize("key", ALL_CELLS)
def test_flight_recorder_dumps_from_every_survivor(cells: dict[str, Cell], key: str) -> None:
    cell, fault = cells[key], fault_of(key)
    dumps = {int(p.name.removeprefix("_dump_")) for p in (cell.dir / "checkpoints").glob("_dump_*")}
    expected = {0, 2, 3} | ({RANK} if fault in INJECTED_RANK_DUMPS else set())
    assert expected <= dumps
    assert not list((cell.dir / "checkpoints").glob(".*tmp"))  # atomic writes left no temp files
    with open(cell.dir / "checkpoints" / "_dump_0", "rb") as f:
        dump = pickle.load(f)  # torch's own format; written by us, so trusted
    assert dump["entries"] and dump["entries"][-1]["profiling_name"] == "gloo:all_reduce"
    # each entry keeps the Python stack that issued it, symbolized (the workload's no-inductor note)
    frames = [(f["name"], Path(f["filename"]).name) for f in dump["entries"][-1]["frames"]]
    assert ("all_reduce", "distributed_c10d.py") in frames and ("_all_reduce_grads", "workload.py") in frames


@pytest.mark.slow
@pytest.mark.parametrize("key", ALL_CELLS)
def test_nothing_but_markers_reveals_the_fault(cells: dict[str, Cell], key: str) -> None:
    stripped = list(strip_markers(cell_lines := cells[key].lines))
    assert len(stripped) == len(cell_lines) - 2
    text = "\n".join(stripped)
    assert not re.search(r"inject|FAULT_(TYPE|RANK|AT_ITER|DELAY)", text, re.IGNORECASE)
    for name in FAULT_NAMES:
        if name not in SIGNAL_NAMES:  # a signal's name is a fair observation (exit reports)
            assert name not in text, f"{name} leaks into the {key} log"


@pytest.mark.slow
def test_fault_beyond_the_run_completes_invalid(cells: dict[str, Cell]) -> None:
    cell = cells["never_fires"]
    assert cell.returncode == 0, cell.stderr
    m = cell.manifest
    assert (m["state"], m["fault_fired"], m["run_valid"]) == ("COMPLETED", False, False)
    assert "never fired" in m["invalid_reason"]
    assert {(e["exitcode"], e["state"]) for e in m["rank_exits"].values()} == {(0, "SUCCEEDED")}
    assert not any("FAULT INJECTION" in line for line in cell.lines)
    assert any("iteration       12/      12" in line for line in cell.lines)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["torchrun", "srun"])
def test_bad_interpreter_is_an_infra_failure(tmp_path: Path, launcher: str) -> None:
    cell = run_job(tmp_path / "cell", "--python", str(tmp_path / "no-such-python"), launcher=launcher)
    assert cell.returncode != 0
    assert not (cell.dir / "job.json").exists()
    record = json.loads((cell.dir / "infra_failure.json").read_text())
    assert record["run_valid"] is False and record["fault_fired"] is False
    assert "before the fault fired" in record["invalid_reason"]
    assert "no-such-python" in record["invalid_reason"]
    assert "infrastructure failure" in cell.stderr and len(cell.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_broken_import_is_an_infra_failure_and_a_retry_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    assert record["state"] == "FAILED"


# The analyzers on these same real runs (no extra jobs): FR names the exact injected rank for
# every hang and for crashes whose culprit left no dump, and says why (the rank a collective behind,
# the rank without a dump); logsage gets every cell right.
@pytest.mark.slow
@pytest.mark.parametrize("key", [*HANGS, "SIGKILL", "SEGFAULT", "OS_ABORT", "srun/GPU_SLEEP", "srun/SIGKILL"])
def test_fr_names_the_injected_rank(cells, key):
    from faultloop.analyze.fr.analysis import analyze_dir

    result = analyze_dir(str(cells[key].dir / "checkpoints"), world_size=NODES * PER_NODE, gpus_per_node=PER_NODE)
    assert result.suspect_ranks == [RANK], (key, result.to_verdict().to_json())
    assert result.scope == "rank"
    if fault_of(key) == "GPU_SLEEP":  # alive and stuck: its dump is read, one collective behind the others'
        assert result.dumps_read == [0, 1, 2, 3] and result.ranks_behind == {RANK: 1}
    if fault_of(key) == "SIGKILL":
        assert result.ranks_without_dump == [RANK]


@pytest.mark.slow
@pytest.mark.parametrize("key", ALL_CELLS)
def test_logsage_attributes_the_stripped_log(cells, key):
    from faultloop.analyze.logsage import analyze_log

    verdict = analyze_log(list(strip_markers(cells[key].lines)))
    fault = fault_of(key)
    assert verdict.primary_ranks == [RANK], (key, verdict.to_json())
    assert verdict.restart == FAULTS[fault].restart
    assert verdict.fault_type == fault


# -- the srun stand-in and the launcher reports, without torch --------------------------------


def test_a_straggler_still_holding_the_pipe_after_the_job_prints_nothing(tmp_path: Path) -> None:
    """A task's grandchild (a stopped or slow helper) can hold its pipe past the pump's wait: what
    it prints once the job's files are closed is dropped, not raised in the pump's thread."""
    log, events = tmp_path / "main.log", tmp_path / "events.jsonl"
    tasks = [Task(0, ["bash", "-c", "(sleep 7; echo late) & echo early"], {})]
    caught: list[threading.ExceptHookArgs] = []
    hook, threading.excepthook = threading.excepthook, caught.append
    try:
        with open(log, "wb") as out, open(events, "wb") as ev:
            exits, _ = LocalSrun(JobLog(out, ev), term_delay_s=0.5, kill_wait_s=1.0).run(tasks, time.time() + 60)
        time.sleep(4)  # the grandchild prints after the files closed
    finally:
        threading.excepthook = hook
    assert [e.exitcode for e in exits] == [0]
    assert log.read_text().splitlines() == ["0: early"]
    assert not caught, [str(c.exc_value) for c in caught]


def test_local_srun_labels_lines_and_stops_the_others_after_a_bad_exit(tmp_path: Path) -> None:
    log, events = tmp_path / "main.log", tmp_path / "events.jsonl"
    tasks = [
        Task(0, ["bash", "-c", "echo hello; sleep 30; echo never"], {}),
        Task(1, ["bash", "-c", 'echo bye; echo \'{"name": "torchelastic.worker.status.FAILED"}\'; exit 3'], {}),
        Task(2, ["bash", "-c", "trap '' TERM; echo stubborn; sleep 30"], {}),
    ]
    with open(log, "wb") as out, open(events, "wb") as ev:
        start = time.monotonic()
        exits, timed_out = LocalSrun(JobLog(out, ev), term_delay_s=0.5, kill_wait_s=1.0, step_id="7.0").run(
            tasks, time.time() + 60
        )
        took = time.monotonic() - start
    assert not timed_out and took < 15
    assert [(e.label, e.exitcode, e.stopped) for e in exits] == [(0, -15, True), (1, 3, False), (2, -9, True)]
    lines = log.read_text().splitlines()
    assert sorted(line for line in lines if not line.startswith("srun")) == ["0: hello", "1: bye", "2: stubborn"]
    # srun's own report: each bad exit in its words, then the step teardown kill-on-bad-exit starts
    report = [line for line in lines if line.startswith("srun")]
    assert report == [
        "srun: error: node0: task 1: Exited with exit code 3",
        "srun: launch/slurm: _step_signal: Terminating StepId=7.0",
        "srun: error: node0: task 0: Terminated",
        "srun: error: node0: task 2: Killed",
    ]
    assert read_srun_report(lines).keys() == {0, 1, 2}
    assert events.read_text() == '{"name": "torchelastic.worker.status.FAILED"}\n'


def test_local_srun_time_limit(tmp_path: Path) -> None:
    with open(tmp_path / "log", "wb") as out, open(tmp_path / "ev", "wb") as ev:
        exits, timed_out = LocalSrun(JobLog(out, ev), 0.5, 1.0).run([Task(0, ["sleep", "30"], {})], time.time() + 1)
    assert timed_out and exits[0].exitcode == -15 and exits[0].stopped


def test_worker_events_give_every_rank_its_exit(tmp_path: Path) -> None:
    def event(rank: int, state: str, code: int | None, error: str | None) -> str:
        raw = json.dumps({"message": {"message": error, "extraInfo": {}}}) if error else None
        meta = {
            "global_rank": rank,
            "state": state,
            "raw_error": raw,
            "metadata": json.dumps({"exit_code": [code], "worker_pid": [100 + rank]}),
        }
        return json.dumps({"name": f"torchelastic.worker.status.{state}", "source": "WORKER", "metadata": meta})

    agent = json.dumps(
        {
            "name": "torchelastic.worker.status.SUCCEEDED",
            "source": "AGENT",
            "metadata": {"global_rank": None, "state": "SUCCEEDED"},
        }
    )
    path = tmp_path / "events.jsonl"
    path.write_text(
        "\n".join(
            [
                event(0, "FAILED", 1, "RuntimeError: boom"),
                event(1, "FAILED", -9, None),
                event(2, "TERMINATED", None, None),
                event(3, "SUCCEEDED", None, None),
                agent,
                "not json",
            ]
        )
        + "\n"
    )
    ranks = read_worker_events(path)
    assert [(r.rank, r.exitcode, r.signal, r.state, r.error) for r in ranks.values()] == [
        (0, 1, None, "FAILED", "RuntimeError: boom"),
        (1, -9, "SIGKILL", "FAILED", None),
        (2, None, None, "TERMINATED", None),
        (3, 0, None, "SUCCEEDED", None),
    ]


def test_srun_task_report_gives_rank_exits() -> None:
    ranks = read_srun_report(
        ["srun: error: n1: task 1: Killed", "3: some output", "srun: error: n2: tasks 2-3: Exited with exit code 1"]
    )
    assert {r: (e.exitcode, e.signal) for r, e in ranks.items()} == {1: (-9, "SIGKILL"), 2: (1, None), 3: (1, None)}


def test_events_cut_by_the_real_srun_are_joined_again(tmp_path: Path) -> None:
    """srun cuts lines over 1 KiB into labelled pieces; other tasks' lines may come between."""
    event = json.dumps({"name": "torchelastic.worker.status.FAILED", "source": "WORKER", "detail": "x" * 2500})
    pieces = [event[i : i + 1024] for i in range(0, len(event), 1024)]
    srun_out = [
        f"0: {pieces[0]}",
        "1: a line of node 1",
        f"0: {pieces[1]}",
        f"0: {pieces[2]}",
        "srun: error: n1: task 0: Exited with exit code 1",
        '1: {"name": "torchelastic.unfinished',
    ]
    log, events = tmp_path / "main.log", tmp_path / "events.jsonl"
    with open(log, "wb") as out, open(events, "wb") as ev:
        joblog = JobLog(out, ev)
        joblog.pump(io.BytesIO("".join(f"{line}\n" for line in srun_out).encode()), None).join()
    assert events.read_text().splitlines() == [event]
    assert log.read_text().splitlines() == [
        "1: a line of node 1",
        "srun: error: n1: task 0: Exited with exit code 1",
        '1: {"name": "torchelastic.unfinished',
    ]


def test_tasks_start_with_default_signals_even_from_a_background_shell(tmp_path: Path) -> None:
    """A shell that starts a job in the background ignores SIGINT, and exec would pass that on: a
    rank would then shrug off an injected SIGINT. Tasks start as slurmstepd starts them."""
    import signal

    probe = [sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGINT))"]
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with open(tmp_path / "log", "wb") as out, open(tmp_path / "ev", "wb") as ev:
            LocalSrun(JobLog(out, ev), 0.5, 1.0).run([Task(0, probe, {})], time.time() + 60)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (tmp_path / "log").read_text() == "0: <built-in function default_int_handler>\n"
