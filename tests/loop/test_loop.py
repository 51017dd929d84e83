"""The loop, end to end with the local profile on a tiny pool of real jobs.

One workflow copy goes through what a user does between iterations: a full run with a broken
analyzer, re-judging without jobs, re-running only failed cells, a patch that fixes one cell and
breaks another, an infrastructure failure that is retried alone, and a crash of Snakemake itself.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest

from conftest import BIN, copy_workflow, planned, planned_outputs, snakemake
from faultloop.contracts import DIMENSIONS, Reads
from faultloop.plan.pool import load_pool

pytestmark = pytest.mark.slow

POOL = "FAULT_TYPE\tRANK\tITER\tNODES\nSIGKILL\t1\t5\t1\nWORKLOAD_EXC\t1\t5\t1\n"
CONFIG = ("pool_file=tiny.tsv", "gpus_per_node=2", "session=loop")
SESSION = Path("results/fault_injection/loop")
ANALYZER = Path("src/faultloop/analyze/logsage/policy.py")  # the file a loop iteration patches for a decision
# Patches a user might make between iterations: each mis-states one fault's restart decision.
BREAK_SIGKILL = '\nPOLICY["SIGKILL"] = Policy("crash", RESTART, "test patch")\n'
BREAK_WORKLOAD_EXC = '\nPOLICY["WORKLOAD_EXC"] = Policy("exception", RESTART, "test patch")\n'


def dry_run(workdir: Path, *args: str) -> str:
    result = snakemake(workdir, "-n", "--profile", "profiles/local", *args)
    return result.stdout + result.stderr


def scores(workdir: Path, analyzer: str = "faultloop") -> dict[str, dict[str, str]]:
    """One analyzer's rows of the session's scores.tsv, by cell."""
    with open(workdir / SESSION / "scores.tsv") as handle:
        rows = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        return {row["CELL"]: row for row in rows if row["ANALYZER"] == analyzer}


def job_ids(workdir: Path) -> dict[str, str]:
    return {p.parent.name: json.loads(p.read_text())["job_id"] for p in (workdir / SESSION).glob("n*/job.json")}


@pytest.fixture(scope="module")
def loop(tmp_path_factory) -> Path:
    """A workflow copy after its first full run, with SIGKILL's restart decision broken."""
    work = copy_workflow(tmp_path_factory.mktemp("loop"))
    (work / "tiny.tsv").write_text(POOL)
    original = (work / ANALYZER).read_text()
    (work / ANALYZER).write_text(original + BREAK_SIGKILL)
    snakemake(work, "--profile", "profiles/local", "--config", *CONFIG, timeout=900)
    return work


def test_first_run_scores_every_cell(loop):
    rows = scores(loop)
    assert rows["n1_SIGKILL_r1_i5"]["restart_correct"] == "false"
    assert rows["n1_WORKLOAD_EXC_r1_i5"]["restart_correct"] == "true"
    assert (loop / SESSION / "experiments_report.md").is_file()
    session = loop / SESSION
    suites = {s.get("name"): s for s in ElementTree.parse(session / "junit.xml").iter("testsuite")}
    logs = ["faultloop", "torchrun_root_cause", "first_error", "combined"]
    # a one-attempt cell is a life of one attempt: each log analyzer's decision graded in its `.life` suite too
    assert list(suites) == [*logs, "fr:faultloop", "fr:torchfrtrace", *(f"{name}.life" for name in logs)]
    cases = {c.get("name"): c for c in suites["faultloop"].iter("testcase")}
    assert set(cases) == {"n1_SIGKILL_r1_i5", "n1_WORKLOAD_EXC_r1_i5"}
    assert "restart_correct" in cases["n1_SIGKILL_r1_i5"].find("failure").get("message")
    assert cases["n1_WORKLOAD_EXC_r1_i5"].find("failure") is None
    assert (session / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (session / "report.html").read_text()
    assert "data:image/png;base64," in html and "<td>SIGKILL</td>" in html and "<td>WORKLOAD_EXC</td>" in html
    # The next iteration's pool preset: exactly the failing cells.
    failing = load_pool(pool_file=loop / SESSION / "failing_pool.tsv", gpus_per_node=2)
    assert [c.name for c in failing] == ["n1_SIGKILL_r1_i5"]
    tracking = (loop / SESSION / "experiments.tsv").read_text().splitlines()
    assert tracking[0].split("\t") == ["JOB_ID", "FAULT_TYPE", "RANK", "ITER", "NODES", "EXPERIMENT_DIR"]
    assert len(tracking) == 3


def test_combined_is_as_right_as_the_better_of_its_inputs(loop):
    """On real runs the combined verdict passes every dimension its log input passes, and names the
    injected rank alone wherever the FR input does (issue 21)."""
    log, fr, combined = scores(loop), scores(loop, "fr:faultloop"), scores(loop, "combined")
    assert set(combined) == set(log) == {"n1_SIGKILL_r1_i5", "n1_WORKLOAD_EXC_r1_i5"}
    for dimension in DIMENSIONS.names(reads=(Reads.LOG,)):
        for cell, row in log.items():
            if row[dimension] == DIMENSIONS[dimension].passing.value:
                assert combined[cell][dimension] == row[dimension], (cell, dimension)
    for cell, row in fr.items():
        if row["fr_rank_correct"] == DIMENSIONS["fr_rank_correct"].passing.value:
            assert combined[cell]["rank_primary"] == DIMENSIONS["rank_primary"].passing.value, cell


def report_tables(report: str) -> list[list[str]]:
    """Every table row of a markdown report (the numbers a person reads)."""
    return [line.split(" | ") for line in report.splitlines() if line.startswith("| ")]


def test_rejudging_a_stored_session_gives_the_same_report(loop):
    """Scoring and reporting again, from the stored runs alone, reproduce every table."""
    session = loop / SESSION
    before = report_tables((session / "experiments_report.md").read_text())
    ids = job_ids(loop)
    snakemake(loop, "--profile", "profiles/local", "--config", *CONFIG, "--forcerun", "judge_score")
    assert job_ids(loop) == ids
    after = report_tables((session / "experiments_report.md").read_text())
    assert after == before and len(before) > 20


def test_until_score_never_plans_a_training_job(loop):
    (loop / "tiny_plus.tsv").write_text(POOL + "GPU_SLEEP\t0\t5\t1\n")
    config = ("pool_file=tiny_plus.tsv", *CONFIG[1:])
    output = dry_run(loop, "--until", "score", "--config", *config)
    counts = planned(output) if "Job stats:" in output else {}
    assert "run_job" not in counts
    assert counts.get("score") == 1, "the new pool must be re-gathered, listing the cell that never ran"
    # Re-judging for real lists the cell without artifacts as not run.
    snakemake(loop, "--profile", "profiles/local", "--until", "score", "--config", *config)
    assert scores(loop)["n1_GPU_SLEEP_r0_i5"]["STATE"] == "NOT_RUN"
    assert not (loop / SESSION / "n1_GPU_SLEEP_r0_i5" / "job.json").exists()


def test_failed_only_reruns_exactly_the_failing_cells(loop):
    snakemake(loop, "--profile", "profiles/local", "--config", *CONFIG)  # back to the tiny pool's report
    output = dry_run(loop, "--config", *CONFIG, "cells=failed", "--forcerun", "logsage")
    counts = planned(output)
    assert counts["logsage"] == 1 and counts["judge_score"] == 1 and "run_job" not in counts
    outputs = planned_outputs(output, "logsage")
    assert any("n1_SIGKILL_r1_i5/" in o for o in outputs)
    assert not any("n1_WORKLOAD_EXC_r1_i5/" in o for o in outputs)


def test_patch_reruns_analysis_only_and_report_shows_fixed_and_regressed(loop):
    analyzer = loop / ANALYZER
    analyzer.write_text(analyzer.read_text().replace(BREAK_SIGKILL, BREAK_WORKLOAD_EXC))
    before = job_ids(loop)
    dry = planned(dry_run(loop, "--config", *CONFIG))
    assert dry["logsage"] == 2 and dry["judge_score"] == 2 and "run_job" not in dry
    snakemake(loop, "--profile", "profiles/local", "--config", *CONFIG)
    assert job_ids(loop) == before, "no training job may re-run after an analyzer patch"
    rows = scores(loop)
    assert rows["n1_SIGKILL_r1_i5"]["restart_correct"] == "true"
    assert rows["n1_WORKLOAD_EXC_r1_i5"]["restart_correct"] == "false"
    report = (loop / SESSION / "experiments_report.md").read_text()
    comparison = report.split("## Iteration comparison", 1)[1]
    regressed, fixed = comparison.find("n1_WORKLOAD_EXC_r1_i5"), comparison.find("n1_SIGKILL_r1_i5")
    assert 0 <= regressed < fixed, "the regression is shown first, then the fixed cell"
    assert "regress" in comparison[:fixed].lower() and "fixed" in comparison.lower()
    assert len(list((loop / SESSION / "history" / "faultloop").glob("*.tsv"))) == 2
    assert len(list((loop / SESSION / "history" / "first_error").glob("*.tsv"))) == 1  # unchanged analyzer


def test_infrastructure_failure_is_retried_alone_and_never_scored(loop):
    shadow = loop / "src" / "torch.py"  # the ranks cannot import torch: the job dies before its fault
    shadow.write_text("raise ImportError('libtorch_cpu.so: cannot open shared object file')\n")
    pool = POOL + "SEGFAULT\t0\t5\t1\n"
    (loop / "tiny.tsv").write_text(pool)
    before = job_ids(loop)
    try:
        snakemake(loop, "--profile", "profiles/local", "--config", *CONFIG, timeout=600)
    finally:
        shadow.unlink()
    new = "n1_SEGFAULT_r0_i5"
    row = scores(loop)[new]
    assert row["STATUS"] == "infra_failure" and row["restart_correct"] == "N/A"
    history = (loop / SESSION / new / "infra_failures.jsonl").read_text().splitlines()
    assert len(history) == 1
    report = (loop / SESSION / "experiments_report.md").read_text()
    assert new in report.split("Not scored", 1)[1]
    # The next invocation retries exactly that cell.
    dry = planned(dry_run(loop, "--config", *CONFIG))
    assert dry["run_job"] == 1
    snakemake(loop, "--profile", "profiles/local", "--config", *CONFIG, timeout=600)
    assert scores(loop)[new]["STATUS"] == "scored"
    assert {k: v for k, v in job_ids(loop).items() if k != new} == before


def run_processes(session: Path) -> list[str]:
    """Command lines of live processes started for a cell of this session."""
    mark = f"FAULTLOOP_CELL={session.resolve()}/".encode()
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if any(v.startswith(mark) for v in (proc / "environ").read_bytes().split(b"\0")):
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120])
        except OSError:
            continue
    return found


def test_killed_snakemake_loses_no_finished_cell(loop):
    (loop / "kill.tsv").write_text(
        "FAULT_TYPE\tRANK\tITER\tNODES\nWORKLOAD_EXC\t0\t3\t1\nSIGTERM\t1\t3\t1\nSIGKILL\t0\t3\t1\n"
    )
    # jobs of seconds (config/fast.yaml): what is checked is what the kill leaves, not the jobs
    config = (
        "--configfile", "config/config.yaml", "config/fast.yaml", "--config", "pool_file=kill.tsv", "session=kill",
    )  # fmt: skip
    session = loop / "results/fault_injection/kill"
    proc = subprocess.Popen(
        [str(BIN / "snakemake"), "--profile", "profiles/local", *config],
        cwd=loop,
        env=dict(os.environ, PYTHONPATH=str(loop / "src")),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and not list(session.glob("n*/analysis/score.json")):
        assert proc.poll() is None, "snakemake ended before the kill"
        time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)  # Snakemake dies mid-run, like a crash
    proc.wait()
    # Nothing of that run outlives it: every process of a cell's job carries its cell in the
    # environment (launchers, torchrun, ranks), so none can hide in another session.
    alive = run_processes(session)
    for _ in range(50):
        if not alive:
            break
        time.sleep(0.1)
        alive = run_processes(session)
    assert not alive, f"processes of the killed run still alive 5 s later: {alive}"
    finished = {p.parent.parent.name for p in session.glob("n*/analysis/score.json")}
    assert finished, "a cell should have finished before the kill"
    assert len(finished) < 3, "the kill should land mid-run"
    before = {name: json.loads((session / name / "job.json").read_text())["job_id"] for name in finished}
    # Snakemake's lock outlives a SIGKILL; planning reads past it, and the plain rerun clears it
    # with one line (its owner, faultloop.workflow.owner's record, is provably dead).
    assert list((loop / ".snakemake/locks").glob("*.lock"))
    dry = dry_run(loop, *config)
    resubmitted = planned_outputs(dry, "run_job")
    assert not [o for o in resubmitted if any(f"/{name}/" in o for name in finished)]
    rerun = snakemake(loop, "--profile", "profiles/local", *config, timeout=600)
    cleared = [line for line in rerun.stderr.splitlines() if "cleared Snakemake's lock" in line]
    assert len(cleared) == 1 and f"pid {proc.pid} " in cleared[0], rerun.stderr[-2000:]
    after = {name: json.loads((session / name / "job.json").read_text())["job_id"] for name in finished}
    assert after == before, "finished cells keep their runs"
    rows = list(csv.DictReader(open(session / "scores.tsv"), delimiter="\t", quoting=csv.QUOTE_NONE))
    # 3 cells x 4 analyzers (fast.yaml's faultloop and first_error, the combined verdict, FR faultloop)
    assert len(rows) == 3 * 4 and all(r["STATUS"] == "scored" for r in rows)
