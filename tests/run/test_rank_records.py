"""Each framework rank's own exit record, and the ranks that left none read from what their
launcher printed (the lines below are as deepspeed 0.19.8's launch.py, Lightning 2.6.6's process
observer and Ray Train 2.60's controller printed them here); the real jobs are in test_fw_exits.py
(Lightning's in test_fw_lightning.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from faultloop.contracts import RankExit
from faultloop.core import layout
from faultloop.marker import firing_line, stamp
from faultloop.run.launchers import LAUNCHERS
from faultloop.run.launchers.base import JobEnd, LaunchJob
from faultloop.run.launchers.rank_records import ExitRecorder, read_records, with_records
from faultloop.run.spec import JobSpec
from faultloop.run.srun import TaskExit

JOB = "local-1"


def end_of(folder: Path, lines: list[str], exits: list[TaskExit] | None = None) -> JobEnd:
    spec = JobSpec(folder, "SIGKILL", 1, 3, 1, 2)
    job = LaunchJob(spec, (), {}, 0, JOB, folder, layout.RunPaths(JOB))
    return JobEnd(job, exits or [TaskExit(0, 1, 0.0, False)], False, lines)


def record(folder: Path, rank: int, code: int | None, error: str | None = None) -> None:
    """Rank `rank`'s record as its process writes it (with this process's pid)."""
    ExitRecorder(str(folder / layout.RunPaths(JOB).rank_exit_prefix), rank).record(code, error)


def fired(rank: int, fault: str) -> str:
    return f"[{stamp()}] " + firing_line(rank, fault, 3, device="cpu", pid=4242)


def test_a_rank_records_its_first_exit_only_and_a_file_that_is_no_record_is_left_out(tmp_path: Path) -> None:
    prefix = tmp_path / "exit."
    recorder = ExitRecorder(str(prefix), 1)
    recorder.record(1, "IndexError: index 1024 is out of bounds")
    recorder.record(-15, "received SIGTERM")  # the exception's path came first
    Path(f"{prefix}0.json").write_text("not json")
    Path(f"{prefix}2.json").write_text(json.dumps({"rank": 5, "pid": 1, "exitcode": 0, "error": None, "time": 0}))
    records = read_records(prefix, 3)
    assert list(records) == [1]
    assert (records[1].exitcode, records[1].error) == (1, "IndexError: index 1024 is out of bounds")


def test_a_signal_death_after_another_ranks_failure_was_its_launchers_and_the_first_is_the_failure(
    tmp_path: Path,
) -> None:
    prefix = tmp_path / "exit."
    ExitRecorder(str(prefix), 1).record(-15, "received SIGTERM")  # the fault: SIGTERM to rank 1
    ExitRecorder(str(prefix), 0).record(-15, "received SIGTERM")  # its launcher stopping the rest
    ExitRecorder(str(prefix), 2).record(1, "RuntimeError: Connection closed by peer")
    ExitRecorder(str(prefix), 3).record(0)
    ranks = with_records({}, read_records(prefix, 4), [], 2)
    assert [ranks[r].state for r in range(4)] == ["TERMINATED", "FAILED", "FAILED", "SUCCEEDED"]
    assert (ranks[1].exitcode, ranks[1].signal) == (-15, "SIGTERM")


DEEPSPEED_LINES = [  # local rank 0 is this process: the records below are written with its pid
    f"0: [2026-12-07 19:31:12,641] [INFO] [launch.py:245:main] process {os.getpid()} spawned with command: ['python']",
    "0: [2026-12-07 19:31:12,642] [INFO] [launch.py:245:main] process 30113 spawned with command: ['python']",
    f"0: [2026-12-07 19:31:38,797] [INFO] [launch.py:253:sigkill_handler] Killing subprocess {os.getpid()}",
    "0: [2026-12-07 19:31:38,903] [INFO] [launch.py:253:sigkill_handler] Killing subprocess 30113",
    "0: [2026-12-07 19:31:38,906] [ERROR] [launch.py:259:sigkill_handler] ['python', '-u', '-m', "
    "'faultloop.cli.frameworks.deepspeed'] exits with return code = -11",
]


def test_the_deepspeed_launchers_return_code_is_the_one_rank_of_its_node_that_left_no_record(tmp_path: Path) -> None:
    record(tmp_path, 0, 1, "RuntimeError: Connection reset by peer")
    ranks = LAUNCHERS["deepspeed"].rank_exits(end_of(tmp_path, DEEPSPEED_LINES, [TaskExit(0, 245, 0.0, False)]))
    assert ranks[0] == RankExit(0, 1, None, "FAILED", "RuntimeError: Connection reset by peer")
    assert (ranks[1].exitcode, ranks[1].signal, ranks[1].state) == (-11, "SIGSEGV", "FAILED")
    assert "exits with return code = -11" in (ranks[1].error or "")
    # the code rank 0 recorded may be rank 0's: it names neither
    ambiguous = [*DEEPSPEED_LINES[:-1], DEEPSPEED_LINES[-1].replace("= -11", "= 1")]
    assert LAUNCHERS["deepspeed"].rank_exits(end_of(tmp_path, ambiguous))[1].state == "UNKNOWN"
    # without rank 0's record two ranks are unaccounted for: the code names neither
    (tmp_path / f"{layout.RunPaths(JOB).rank_exit_prefix}0.json").unlink()
    unnamed = LAUNCHERS["deepspeed"].rank_exits(end_of(tmp_path, DEEPSPEED_LINES, [TaskExit(0, 245, 0.0, False)]))
    assert [unnamed[r].state for r in (0, 1)] == ["UNKNOWN", "UNKNOWN"]


def test_lightnings_observer_names_the_child_by_local_rank_and_the_node_process_is_rank_0(tmp_path: Path) -> None:
    child = "0: [rank: 1] Child process with PID 5123 terminated with code 1. Forcefully terminating all other"
    ranks = LAUNCHERS["lightning"].rank_exits(end_of(tmp_path, [child], [TaskExit(0, -15, 0.0, False)]))
    assert (ranks[0].exitcode, ranks[0].signal, ranks[0].state) == (-15, "SIGTERM", "FAILED")
    assert (ranks[1].exitcode, ranks[1].state) == (1, "FAILED")


RAY_LINES = [
    "ray.train.WorkerGroupError: Training failed due to worker errors:",
    "[Rank 0 Error Snippet]:",
    "Traceback (most recent call last):",
    "[Rank 1 Error Snippet]:",
    "A worker health check failed.",
]


def test_ray_trains_snippet_names_the_failed_worker_and_its_sigkill_marker_gives_the_signal(tmp_path: Path) -> None:
    record(tmp_path, 0, None, "RuntimeError: Connection closed by peer")
    ranks = LAUNCHERS["ray"].rank_exits(end_of(tmp_path, RAY_LINES))
    assert ranks[0] == RankExit(0, None, None, "FAILED", "RuntimeError: Connection closed by peer")
    assert (ranks[1].exitcode, ranks[1].state) == (None, "FAILED")
    assert "A worker health check failed." in (ranks[1].error or "")
    killed = LAUNCHERS["ray"].rank_exits(end_of(tmp_path, [fired(1, "SIGKILL"), *RAY_LINES]))
    assert (killed[1].exitcode, killed[1].signal, killed[1].state) == (-9, "SIGKILL", "FAILED")
    assert "firing marker" in (killed[1].error or "") and "health check failed" in (killed[1].error or "")
    (tmp_path / f"{layout.RunPaths(JOB).rank_exit_prefix}0.json").unlink()  # rank 0 stopped in its all-reduce
    stopped = LAUNCHERS["ray"].rank_exits(end_of(tmp_path, RAY_LINES[:1] + RAY_LINES[3:]))
    assert (stopped[0].state, stopped[1].state) == ("TERMINATED", "FAILED")


def test_a_rank_with_no_record_and_no_launcher_line_stays_unknown_unless_its_fault_sigkilled_it(
    tmp_path: Path,
) -> None:
    record(tmp_path, 0, 1, "RuntimeError: Connection reset by peer")
    exits = [TaskExit(0, 1, 0.0, False)]
    assert LAUNCHERS["deepspeed"].rank_exits(end_of(tmp_path, [fired(1, "SEGFAULT")], exits))[1].state == "UNKNOWN"
    killed = LAUNCHERS["deepspeed"].rank_exits(end_of(tmp_path, [fired(1, "SIGKILL")], exits))[1]
    assert (killed.exitcode, killed.signal, killed.state) == (-9, "SIGKILL", "FAILED")


def test_the_rank_its_fault_stopped_was_ended_by_its_launcher_unless_a_record_or_a_line_says_otherwise(
    tmp_path: Path,
) -> None:
    """A stopped rank cannot fail by itself: left UNKNOWN by every report, it is TERMINATED (its
    launcher's clean-up or the job's end), with no code, which no line gives."""
    record(tmp_path, 0, 1, "RuntimeError: Timed out waiting 10000ms for recv operation to complete")
    exits = [TaskExit(0, 1, 0.0, False)]
    stopped = LAUNCHERS["deepspeed"].rank_exits(end_of(tmp_path, [fired(1, "SIGSTOP")], exits))
    assert (stopped[1].exitcode, stopped[1].signal, stopped[1].state) == (None, None, "TERMINATED")
    assert "stopped this rank (SIGSTOP)" in (stopped[1].error or "") and stopped[0].state == "FAILED"
    record(tmp_path, 1, -15, "received SIGTERM")  # continued, then it handled its launcher's SIGTERM
    assert LAUNCHERS["deepspeed"].rank_exits(end_of(tmp_path, [fired(1, "SIGSTOP")], exits))[1].exitcode == -15
    hydra = [fired(1, "SIGSTOP"), "[mpiexec@vm] Exit codes: [vm] 256,9"]  # hydra's own word over the rule
    assert LAUNCHERS["mpiexec"].rank_exits(end_of(tmp_path, hydra))[1] == RankExit(1, -9, "SIGKILL", "FAILED")
    timed_out = LAUNCHERS["mpiexec"].rank_exits(end_of(tmp_path, [fired(1, "SIGSTOP")]))
    assert (timed_out[0].state, timed_out[1].state) == ("UNKNOWN", "TERMINATED")
