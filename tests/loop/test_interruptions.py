"""What a run promises when it is interrupted (README.md, "When a run is interrupted"), with the real
snakemake CLI on real jobs of seconds (config/fast.yaml) in one copy of the workflow: a full disk
stops a run with one line and keeps what was finished; two sessions run side by side on one results
root; a session a live run holds refuses a second run, `--until score` included; ten seeded kills
(the chaos harness, benchmarks/chaos.py) lose, corrupt and re-run nothing, compared with the clean
run of the same pool the side-by-side test made."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BIN, REPO, copy_workflow, snakemake
from faultloop.contracts import Manifest
from faultloop.contracts.scores import read_score_tsv
from faultloop.core import layout

pytestmark = pytest.mark.slow

# the pool the chaos harness interrupts, the side-by-side test's first session (its clean run):
# HOST_OOM's cell puts its ranks in memory cgroups, which must go too
CHAOS_POOL = "WORKLOAD_EXC:0:3:1 HOST_OOM:1:3:1"
CLEAN = "one"
FAILURES = ("lost", "corrupt", "rerun", "refused", "left", "differ")


def command(session: str, pool: str) -> list[str]:
    return [
        "--profile", "profiles/local", "--configfile", "config/config.yaml", "config/fast.yaml",
        "--config", f"pool={pool}", f"session={session}",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return copy_workflow(tmp_path_factory.mktemp("interrupted"))


def identity(path: Path) -> tuple[int, int, str]:
    return path.stat().st_ino, path.stat().st_mtime_ns, Manifest.read(path).job_id


def fill(ballast: Path) -> None:
    """Write until the filesystem has no block left."""
    with open(ballast, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * (64 << 10))
        except OSError as error:
            assert error.errno == errno.ENOSPC


@pytest.fixture
def small_disk(work):
    """The results root on a 24 MiB tmpfs, made and removed here (root only)."""
    results = work / "results"
    results.mkdir(exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(results)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"a small filesystem cannot be mounted here ({mounted.stderr.strip()}): needs root")
    try:
        yield results
    finally:
        subprocess.run(["umount", "-l", str(results)], check=True)


def test_a_full_disk_stops_the_run_with_one_line_and_keeps_what_was_finished(work, small_disk):
    first = "WORKLOAD_EXC:0:3:1"
    snakemake(work, *command("disk", first), timeout=600)
    session = small_disk / "fault_injection" / "disk"
    kept = {name: (session / name).read_bytes() for name in (layout.REPORT_MD, layout.SCORES_TSV, layout.TRACKING_TSV)}
    finished = identity(session / "n1_WORKLOAD_EXC_r0_i3" / layout.MANIFEST)
    # The disk fills mid-run: once the next cell's job has started, a ballast takes what is left.
    pool = f"{first} SIGKILL:1:3:1"
    running = subprocess.Popen(
        [str(BIN / "snakemake"), *command("disk", pool)],
        cwd=work,
        env=dict(os.environ, PYTHONPATH=str(work / "src")),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ballast = small_disk / "ballast"
    try:
        started = session / "n1_SIGKILL_r1_i3" / "logs" / "slurm"
        deadline = time.monotonic() + 300
        while not any(started.glob("*.main_workload.log")) and time.monotonic() < deadline:
            assert running.poll() is None, running.communicate()
            time.sleep(0.1)
        fill(ballast)
        out, err = running.communicate(timeout=600)
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
    full = subprocess.CompletedProcess(running.args, running.returncode, out, err)
    said = full.stdout + full.stderr
    assert full.returncode != 0
    lines = [line for line in said.splitlines() if "is on a full filesystem" in line]
    assert len(lines) == 1 and str(session.relative_to(work)) in lines[0], said[-3000:]
    assert "Traceback" not in said, said[-3000:]
    # Whatever had been finished is whole: the report, the scores and the tracking file are the
    # previous ones, or new ones written whole (no write left half a file or a temporary behind).
    for name, before in kept.items():
        now = (session / name).read_bytes()
        assert now == before or now.startswith(before.split(b"\n", 1)[0]), f"{name} is not whole"
    assert {r.cell.name for r in read_score_tsv(session / layout.SCORES_TSV)} >= {"n1_WORKLOAD_EXC_r0_i3"}
    tracked = (session / layout.TRACKING_TSV).read_text().splitlines()
    assert tracked[0].startswith("JOB_ID") and all(len(row.split("\t")) == 6 for row in tracked)
    assert not [p for p in session.rglob(".*.tmp")], "a write left its temporary file"
    # Space freed, the same command completes without redoing the finished cell.
    ballast.unlink()
    snakemake(work, *command("disk", pool), timeout=600)
    assert identity(session / "n1_WORKLOAD_EXC_r0_i3" / layout.MANIFEST) == finished
    rows = read_score_tsv(session / layout.SCORES_TSV)
    assert {r.cell.name for r in rows} == {"n1_WORKLOAD_EXC_r0_i3", "n1_SIGKILL_r1_i3"}
    assert all(r.status == "scored" for r in rows)


def test_two_sessions_run_side_by_side_and_a_busy_session_refuses_a_second_run(work):
    one = subprocess.Popen(
        [str(BIN / "snakemake"), *command(CLEAN, CHAOS_POOL)],
        cwd=work,
        env=dict(os.environ, PYTHONPATH=str(work / "src")),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        records = work / ".snakemake" / "faultloop-owners"
        deadline = time.monotonic() + 120
        while not list(records.glob("*.locks")) and time.monotonic() < deadline:  # Snakemake has locked
            assert one.poll() is None, one.stdout.read() if one.stdout else ""
            time.sleep(0.2)
        # The same session while it runs: refused with one line, also to re-judge it.
        for extra in ((), ("--until", "score")):
            busy = snakemake(work, *command(CLEAN, CHAOS_POOL), *extra, check=False)
            assert busy.returncode != 0
            refusal = [line for line in busy.stderr.splitlines() if "is being run by Snakemake pid" in line]
            assert len(refusal) == 1 and f"pid {one.pid} " in refusal[0], busy.stderr[-2000:]
        # Planning it is allowed, and writes nothing.
        snakemake(work, "-n", *command(CLEAN, CHAOS_POOL))
        # Another session, meanwhile, runs to its end.
        two = snakemake(work, *command("two", "SEGFAULT:0:3:1"), timeout=600)
        assert "cleared Snakemake's lock" not in two.stderr
        assert one.poll() is None or one.returncode == 0
        out = one.communicate(timeout=600)[0]
        assert one.returncode == 0, out[-3000:]
    finally:
        if one.poll() is None:
            one.kill()
            one.wait()
    root = work / "results" / "fault_injection"
    for name, cells in ((CLEAN, {"n1_HOST_OOM_r1_i3", "n1_WORKLOAD_EXC_r0_i3"}), ("two", {"n1_SEGFAULT_r0_i3"})):
        rows = read_score_tsv(root / name / layout.SCORES_TSV)
        assert {r.cell.name for r in rows} == cells and all(r.status == "scored" for r in rows)
        tracked = (root / name / layout.TRACKING_TSV).read_text().splitlines()[1:]
        assert {Path(row.split("\t")[-1]).name for row in tracked} == cells
        assert all(f"/fault_injection/{name}/" in row for row in tracked)
    # Nothing of either run remains: no lock, no owner record.
    assert not list((work / ".snakemake").glob("locks/*"))
    assert not list((work / ".snakemake" / "faultloop-owners").glob("*"))
    # Each run's jobs wrote in its own session only (Snakemake names every job's output).
    assert "fault_injection/two/" not in out and f"fault_injection/{CLEAN}/" not in two.stdout + two.stderr


def test_ten_seeded_interruptions_lose_corrupt_and_rerun_nothing(work, tmp_path):
    """Ten seeded interruptions of Snakemake, a launcher, a rank or an analysis job (kill -9, SIGTERM,
    Ctrl-C's SIGINT), each followed by a plain rerun, lose, corrupt and re-run nothing, leave nothing
    behind and score as the clean run does: session `one`, which the side-by-side test ran (the
    harness runs it where this test runs alone). The benchmark runs fifty (benchmarks/README.md)."""
    record = tmp_path / "chaos.json"
    command = [
        sys.executable, str(REPO / "benchmarks" / "chaos.py"), "--interruptions", "10", "--seed", "4",
        "--pool", CHAOS_POOL, "--clean", CLEAN, "--max-delay-s", "3",
        "--workdir", str(work), "--json", str(record),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=1200)
    said = result.stdout + result.stderr[-5000:]
    assert record.is_file(), said
    counts = json.loads(record.read_text())
    assert counts["interruptions"] >= 10, said
    assert {k: counts[k] for k in FAILURES} == dict.fromkeys(FAILURES, 0), said
    assert result.returncode == 0, said
    assert "lost 0, corrupt 0, re-run 0, refused 0, left 0, differ 0" in result.stdout
    # Seed 4 draws every kind of target and every signal (the draws do not depend on timing);
    # each was a real signal to a real process, and plain reruns followed.
    assert {e["target"] for e in counts["log"]} == {"snakemake", "launcher", "rank", "analysis"}
    assert {e["signal"] for e in counts["log"]} == {"SIGKILL", "SIGTERM", "SIGINT"}
    assert counts["runs"] > counts["rounds"] and all(event["pid"] > 0 for event in counts["log"])
