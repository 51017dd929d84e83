"""Owner records of Snakemake's lock (faultloop.workflow.owner), with real processes: a lock whose
owner was killed is cleared with one line; a live owner's lock and session stay refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from faultloop.workflow import owner
from faultloop.workflow.owner import LOCKS, OWNERS, SessionBusy, clear_stale, register, runs_jobs

# A stand-in for one Snakemake run: it records itself, writes a lock file as Snakemake 9 does
# (snakemake.persistence.file._write_locks), claims it, says so and waits to be killed.
HOLDER = """
import sys, time
from pathlib import Path
from faultloop.workflow.owner import LOCKS, register
workdir, session, index = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
registration = register(workdir, session)
(workdir / LOCKS).mkdir(parents=True, exist_ok=True)
(workdir / LOCKS / f"{index}.output.lock").write_text(f"{session}/scores.tsv\\n")
registration.claim_locks([], [f"{session}/scores.tsv"])
print("locked", flush=True)
time.sleep(600)
"""


def hold(workdir: Path, session: str, index: int = 0) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(workdir), str(workdir / session), str(index)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert proc.stdout is not None
    if proc.stdout.readline() != "locked\n":
        kill(proc)
        raise AssertionError("the holder did not lock")
    return proc


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_a_killed_owners_lock_is_cleared_with_one_line(tmp_path):
    proc = hold(tmp_path, "s1")
    kill(proc)
    lines: list[str] = []
    assert clear_stale(tmp_path, say=lines.append) == []
    assert len(lines) == 1 and f"left by Snakemake pid {proc.pid}" in lines[0] and "0.output.lock" in lines[0]
    assert not list((tmp_path / LOCKS).iterdir()) and not list((tmp_path / OWNERS).iterdir())


def test_a_live_owner_keeps_its_lock_and_its_session(tmp_path):
    proc = hold(tmp_path, "s1")
    try:
        lines: list[str] = []
        with pytest.raises(SessionBusy, match=rf"session .*s1 is being run by Snakemake pid {proc.pid}"):
            register(tmp_path, tmp_path / "s1", say=lines.append)
        assert lines == [] and (tmp_path / LOCKS / "0.output.lock").is_file()
        # Another session runs beside it; the live lock is still there after.
        other = register(tmp_path, tmp_path / "s2", say=lines.append)
        assert lines == [] and (tmp_path / LOCKS / "0.output.lock").is_file()
        other.release()
    finally:
        kill(proc)


def test_only_the_dead_owners_locks_go_while_another_run_lives(tmp_path):
    live, dead = hold(tmp_path, "live", 0), hold(tmp_path, "dead", 1)
    try:
        kill(dead)
        lines: list[str] = []
        assert [o.pid for o in clear_stale(tmp_path, say=lines.append)] == [live.pid]
        assert len(lines) == 1 and "1.output.lock" in lines[0]
        assert sorted(p.name for p in (tmp_path / LOCKS).iterdir()) == ["0.output.lock"]
    finally:
        kill(live)


def test_a_lock_file_reused_since_is_not_the_dead_owners(tmp_path):
    """A finished run removes the whole lock folder and a new run may take the same name: the dead
    record's claim names another file then (another inode), which stays."""
    kill(hold(tmp_path, "s1"))
    lock = tmp_path / LOCKS / "0.output.lock"
    lock.unlink()
    live = hold(tmp_path, "s2", 1)
    try:
        lock.write_text("results/s2/report.md\n")  # as if the live run had written it
        lines: list[str] = []
        clear_stale(tmp_path, say=lines.append)
        assert lines == [] and lock.is_file()
    finally:
        kill(live)


def test_orphan_locks_go_only_when_no_run_can_own_them(tmp_path):
    proc = hold(tmp_path, "s1", 1)
    (tmp_path / LOCKS / "0.input.lock").write_text("config/pool.tsv\n")  # a lock no record claims
    try:
        lines: list[str] = []
        clear_stale(tmp_path, say=lines.append)
        assert lines == [] and (tmp_path / LOCKS / "0.input.lock").is_file()
    finally:
        kill(proc)
    lines = []
    clear_stale(tmp_path, say=lines.append)
    assert len(lines) == 2 and "no Snakemake is running" in lines[1]
    assert not list((tmp_path / LOCKS).iterdir())


def test_a_free_record_whose_pid_lives_as_that_process_is_kept(tmp_path):
    """A record is dead only when its pid is gone or is another process now: this process's own
    pid and start time, with no flock, are not proof."""
    (tmp_path / OWNERS).mkdir(parents=True)
    record = owner.Owner(
        os.getpid(), owner.socket.gethostname(), owner.boot_id(), owner.start_ticks(os.getpid()) or 0, 0.0, "s"
    )
    (tmp_path / OWNERS / "x.json").write_text(json.dumps(record.__dict__))
    assert clear_stale(tmp_path, say=print) == [record]
    other_host = {**record.__dict__, "host": "elsewhere", "pid": 1}
    (tmp_path / OWNERS / "x.json").write_text(json.dumps(other_host))
    assert [o.host for o in clear_stale(tmp_path, say=print)] == ["elsewhere"]


@pytest.mark.parametrize(
    ("argv", "runs"),
    [
        (["snakemake", "--profile", "profiles/local"], True),
        (["snakemake", "-n", "--profile", "profiles/local"], False),
        (["snakemake", "-np"], False),
        (["snakemake", "--lint"], False),
        (["snakemake", "--unlock"], False),
        (["snakemake", "--until", "score"], True),
        (["snakemake", "--dry-run=true"], False),
        (["snakemake", "-j4", "--cores", "2"], True),
    ],
)
def test_only_command_lines_that_run_jobs_record_an_owner(argv, runs):
    assert runs_jobs(argv) is runs
