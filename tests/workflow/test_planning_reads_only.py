"""Planning writes nothing: a dry run, the linter and `--until score -n` leave every file as it was,
on a fresh session and on an adopted one; adopting is the explicit `faultloop adopt` step."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from conftest import cell_manifest, planned, planned_outputs, snakemake
from faultloop.cli import main as cli
from faultloop.core.cell import Cell

HEADER = "JOB_ID\tFAULT_TYPE\tRANK\tITER\tNODES\tEXPERIMENT_DIR\n"
# An NVRx session's run as upstream's loop leaves it: srun-labelled main log with Megatron's
# scheduling marker and NVRx's injector line, and srun's report of the killed task.
MAIN_LOG = (
    "0: [2026-04-01 12:00:01.000000] iteration        4/      30 | lm loss: 1.0E+01\n"
    "1: [2026-04-01 12:00:02.123456] FAULT INJECTION: Rank 1 will inject fault SIGKILL at 2026-04-01 12:00:17\n"
    "1: [2026-04-01 12:00:17,200] [CRITICAL] [nvidia_resiliency_ext.shared_utils.inject_fault] "
    "sending signal=<Signals.SIGKILL: 9> to pid=4242\n"
)
PLANNING = (
    ("-n",),
    ("--lint",),
    ("--until", "score", "-n"),
)


def tree(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under root (Snakemake's own .snakemake/ and Python's caches aside): its bytes'
    digest and its modification time."""
    return {
        str(path.relative_to(root)): (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".snakemake" not in path.parts and "__pycache__" not in path.parts
    }


def nvrx_session(root: Path) -> Path:
    session = root / "fault_injection" / "20260401_120000"
    run = session / "n2_SIGKILL_r1_i5"
    for sub in ("logs/slurm", "checkpoints", "tensorboard"):
        (run / sub).mkdir(parents=True)
    (run / "logs/slurm/51234.0.1.main_workload.log").write_text(MAIN_LOG)
    (run / "logs/slurm/51234.launch.out").write_text("srun: error: gpu-03: task 1: Killed\n")
    (session / "experiments.tsv").write_text(
        HEADER + "51234\tSIGKILL\t1\t5\t2\tn2_SIGKILL_r1_i5\n51235\tGPU_SLEEP\t0\t5\t2\tn2_GPU_SLEEP_r0_i5\n"
    )
    return session


@pytest.mark.parametrize("args", PLANNING, ids=" ".join)
def test_planning_a_fresh_session_writes_nothing(workflow_copy, args):
    before = tree(workflow_copy)
    snakemake(workflow_copy, *args, "--profile", "profiles/local", "--config", "pool=SIGKILL:1:5:2 SEGFAULT:0:5:1")
    assert tree(workflow_copy) == before
    assert not (workflow_copy / "results").exists()


def test_planning_an_adopted_session_writes_nothing(workflow_copy, tmp_path, capsys):
    session = nvrx_session(tmp_path / "nvrx")
    assert cli.main(["adopt", str(session), "--gpus-per-node", "4"]) == 0
    assert "1 run(s) adopted, 1 not run" in capsys.readouterr().out
    before = tree(tmp_path)
    for args in PLANNING:
        result = snakemake(workflow_copy, *args, "--profile", "profiles/local", "--config", f"adopt={session}")
        assert tree(tmp_path) == before, args
    counts = planned(result.stdout + result.stderr)
    assert "run_job" not in counts and counts["logsage"] == 1 and counts["score"] == 1


def test_a_session_not_adopted_is_refused_with_the_step_that_adopts_it(workflow_copy, tmp_path):
    session = nvrx_session(tmp_path / "nvrx")
    before = tree(tmp_path)
    result = snakemake(
        workflow_copy, "-n", "--until", "score", "--config", f"adopt={session}", "gpus_per_node=2", check=False
    )
    assert result.returncode != 0
    assert f"run `faultloop adopt {session} --gpus-per-node 2` first" in result.stdout + result.stderr
    assert tree(tmp_path) == before


def test_a_tracking_file_or_rank_layout_changed_since_adopting_is_refused(workflow_copy, tmp_path):
    session = nvrx_session(tmp_path / "nvrx")
    assert cli.main(["adopt", str(session), "--gpus-per-node", "4"]) == 0
    other = snakemake(workflow_copy, "-n", "--config", f"adopt={session}", "gpus_per_node=2", check=False)
    assert other.returncode != 0
    assert "adopted with --gpus-per-node 4, planned with gpus_per_node=2" in other.stdout + other.stderr
    with open(session / "experiments.tsv", "a") as tracking:
        tracking.write("51236\tSEGFAULT\t0\t5\t1\tn1_SEGFAULT_r0_i5\n")
    changed = snakemake(workflow_copy, "-n", "--config", f"adopt={session}", check=False)
    assert changed.returncode != 0 and "experiments.tsv changed since it was adopted" in changed.stdout + changed.stderr
    assert cli.main(["adopt", str(session), "--gpus-per-node", "4"]) == 0
    again = snakemake(workflow_copy, "-n", "--until", "score", "--config", f"adopt={session}")
    assert planned(again.stdout + again.stderr)["logsage"] == 1


def test_planning_a_life_writes_nothing_and_places_its_next_attempt(workflow_copy):
    """A two-attempt life whose attempt 1 is stored (its GPU error fired on n2): every run is
    planned, and on the SLURM profile attempt 2's sbatch keeps n1 and excludes n2, read from attempt
    1's job.json while planning, which writes nothing; a life not yet started plans without flags."""
    life, fresh = Cell("GPU_ERROR", 1, 5, 2, 2), Cell("NET_DROP", 1, 5, 2, 2)
    session = workflow_copy / "results" / "fault_injection" / "life"
    (session / life.name).mkdir(parents=True)
    cell_manifest(life, "51234", node_names=["n2", "n1"], fault_node="n2", attempts=2).write(
        session / life.name / "job.json"
    )
    before = tree(workflow_copy)
    pool = f"pool={life.spec} {fresh.spec}"
    result = snakemake(workflow_copy, "-n", "--profile", "profiles/slurm", "--config", pool, "session=life")
    assert tree(workflow_copy) == before
    out = result.stdout + result.stderr
    assert sorted(planned_outputs(out, "run_job")) == sorted(
        f"results/fault_injection/life/{run}/job.json" for run in [*life.runs[1:], *fresh.runs]
    )
    run_jobs = re.findall(r"rule run_job:\n(.*?)(?:\n\n|\Z)", out, flags=re.S)
    blocks = dict(re.findall(r"wildcards: run=(\S+)\n\s+resources: (.*)", "\n".join(run_jobs)))
    assert "slurm_extra=--nodelist=n1 --exclude=n2" in blocks[f"{life.name}/attempt_2"]
    assert "slurm_extra" not in blocks[f"{fresh.name}/attempt_2"] and "slurm_extra" not in blocks[fresh.name]
