"""The workflow plans what users expect, validates before running, and stays lint-clean."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from snakemake.settings.types import DAGSettings

from conftest import REPO, planned, snakemake
from faultloop.core import atomic, layout
from faultloop.core.cell import Cell
from faultloop.plan.config import parse_overrides
from faultloop.run.cell import update_tracking
from faultloop.workflow.invocation import cell_targets, forced, invoked_until, tool_config


def test_default_pool_dry_run_plans_34_cells(workflow_copy):
    result = snakemake(workflow_copy, "-n", "--profile", "profiles/local")
    counts = planned(result.stdout + result.stderr)
    assert counts["run_job"] == 34
    for rule in ("logsage", "fr_analysis", "judge_score"):
        assert counts[rule] == 34, rule
    assert counts["score"] == 1 and counts["aggregate_report"] == 1


def test_bad_pool_fails_before_any_job_naming_every_row(workflow_copy):
    pool = workflow_copy / "bad.tsv"
    pool.write_text(
        "FAULT_TYPE\tRANK\tITER\tNODES\nGPU_SLEEP\t1\t5\t2\nGPU_MELT\t1\t5\t2\nSIGKILL\t99\t5\t2\nGPU_SLEEP\t1\t5\t2\n"
    )
    result = snakemake(workflow_copy, "--profile", "profiles/local", "--config", "pool_file=bad.tsv", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "bad.tsv line 3: unknown fault type 'GPU_MELT'" in output
    assert "bad.tsv line 4: RANK 99 is out of range" in output
    assert "bad.tsv line 5: duplicate cell GPU_SLEEP:1:5:2" in output
    assert not (workflow_copy / "results").exists(), "nothing may run before the pool is valid"


def test_a_row_beyond_the_workloads_iterations_fails_before_any_job(workflow_copy):
    result = snakemake(workflow_copy, "--profile", "profiles/local", "--config", "pool=SIGKILL:1:100000:1", check=False)
    assert result.returncode != 0
    assert "pool token 1 'SIGKILL:1:100000:1': ITER 100000 is beyond cpu_gloo's 30 iterations" in result.stderr
    assert not (workflow_copy / "results").exists(), "nothing may run before the pool is valid"


def test_bad_config_value_is_named(workflow_copy):
    result = snakemake(workflow_copy, "-n", "--profile", "profiles/local", "--config", "gpus_per_node=0", check=False)
    assert result.returncode != 0
    assert "gpus_per_node" in result.stdout + result.stderr


def test_one_line_pool_and_cells_selection(workflow_copy):
    result = snakemake(
        workflow_copy,
        "-n",
        "--profile",
        "profiles/local",
        "--config",
        "pool=GPU_SLEEP:1:5:2 SIGKILL:0:5:2 SEGFAULT:0:5:1",
        "cells=n2_SIGKILL_r0_i5",
    )
    counts = planned(result.stdout + result.stderr)
    assert counts["run_job"] == 1 and counts["logsage"] == 1
    unknown = snakemake(
        workflow_copy,
        "-n",
        "--profile",
        "profiles/local",
        "--config",
        "pool=GPU_SLEEP:1:5:2",
        "cells=n9_NOPE_r0_i1",
        check=False,
    )
    assert unknown.returncode != 0 and "not in the pool: n9_NOPE_r0_i1" in unknown.stdout + unknown.stderr


def test_lint_and_snakefmt_are_clean():
    lint = snakemake(REPO, "--lint", check=False)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    import subprocess
    import sys

    fmt = subprocess.run(
        [str(Path(sys.executable).parent / "snakefmt"), "--check", "."], cwd=REPO, capture_output=True, text=True
    )
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_invoked_until_reads_the_command_line():
    assert invoked_until(["snakemake", "--until", "score", "--profile", "p"]) == {"score"}
    assert invoked_until(["snakemake", "-U", "logsage", "fr_analysis", "-n"]) == {"logsage", "fr_analysis"}
    assert invoked_until(["snakemake", "--until=judge_score"]) == {"judge_score"}
    assert invoked_until(["snakemake", "--profile", "profiles/local"]) == set()


def test_forced_reads_snakemakes_dag_settings():
    cell = "results/fault_injection/s/n1_SIGKILL_r1_i3"
    index, log = f"{cell}/analysis/analyzers.json", f"{cell}/analysis/main_workload.log"
    assert forced(DAGSettings(forcerun={"logsage"}), "logsage", index, log)
    assert forced(DAGSettings(forcerun={"fr_analysis", "logsage"}), "logsage", index)
    assert forced(DAGSettings(forcerun={index}), "logsage", index, log)
    assert forced(DAGSettings(forcerun={str(Path(index).resolve())}), "logsage", index, log)
    assert forced(DAGSettings(forceall=True), "judge_score")
    assert not forced(DAGSettings(forcerun={"judge_score"}), "logsage", index, log)
    assert not forced(DAGSettings(forcerun={index.replace("SIGKILL", "SEGFAULT")}), "logsage", index, log)
    assert not forced(DAGSettings(), "logsage", index) and not forced(None, "logsage", index)


def test_forcerun_makes_only_the_forced_cells_jobs_fresh(workflow_copy):
    """--forcerun naming one cell's file re-runs every analyzer of that cell only; naming the rule,
    of every cell."""
    pool = ("--config", "pool=SIGKILL:1:5:2 SEGFAULT:1:5:2", "session=s")
    one = f"results/fault_injection/s/n2_SIGKILL_r1_i5/{layout.FR_INDEX}"
    result = snakemake(workflow_copy, "-n", "-p", "--profile", "profiles/local", *pool, "--forcerun", one)
    fresh = dict(re.findall(r"fr-analyzers --manifest \S+/(n2_\w+)/job\.json.* --fresh (\d)", result.stdout))
    assert fresh == {"n2_SIGKILL_r1_i5": "1", "n2_SEGFAULT_r1_i5": "0"}
    result = snakemake(workflow_copy, "-n", "-p", "--profile", "profiles/local", *pool, "--forcerun", "logsage")
    assert re.findall(r"run-cell .* --fresh (\d)", result.stdout) == ["1", "1"]
    assert re.findall(r"fr-analyzers .* --fresh (\d)", result.stdout) == ["0", "0"]


def test_cell_targets_in_rejudge_mode(tmp_path):
    cells = [Cell("SIGKILL", 1, 5, 2), Cell("GPU_SLEEP", 0, 5, 2)]
    (tmp_path / cells[0].name).mkdir()
    (tmp_path / cells[0].name / "job.json").write_text("{}")
    assert cell_targets(cells, tmp_path, rejudge=False) == (cells, [])
    assert cell_targets(cells, tmp_path, rejudge=True) == ([cells[0]], [cells[1]])


def test_tool_config_drops_credentials_and_overrides_parse():
    assert tool_config({"mode": "llm", "llm": {"model": "m", "api_key_file": "/secret"}}) == {
        "llm": {"model": "m"},
        "mode": "llm",
    }
    assert parse_overrides(["gpus_per_node=2", "pool=A:1:2:3 B:1:2:3", "session="]) == {
        "gpus_per_node": 2,
        "pool": "A:1:2:3 B:1:2:3",
        "session": "",
    }


def test_tracking_tsv_upserts_rows(tmp_path):
    cell = Cell("SIGKILL", 1, 5, 2)
    update_tracking(tmp_path, cell, "local-1", tmp_path / cell.name)
    update_tracking(tmp_path, Cell("GPU_SLEEP", 0, 5, 2), "local-2", tmp_path / "n2_GPU_SLEEP_r0_i5")
    update_tracking(tmp_path, cell, "local-3", tmp_path / cell.name)
    lines = (tmp_path / "experiments.tsv").read_text().splitlines()
    assert lines[0] == "JOB_ID\tFAULT_TYPE\tRANK\tITER\tNODES\tEXPERIMENT_DIR"
    assert lines[1] == f"local-3\tSIGKILL\t1\t5\t2\t{(tmp_path / cell.name).resolve()}"
    assert len(lines) == 3


def test_unknown_config_key_fails_naming_it_and_the_nearest(workflow_copy):
    (workflow_copy / "config" / "site.yaml").write_text("run_job:\n  pg_timeout: 20\n")
    result = snakemake(workflow_copy, "-n", "--profile", "profiles/local", "--config", "gpus_per_nod=4", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "--config: 'gpus_per_nod' is not a configuration key; did you mean 'gpus_per_node'?" in output
    assert (
        "config/site.yaml: 'run_job.pg_timeout' is not a configuration key; did you mean 'run_job.pg_timeout_s'?"
        in output
    )
    assert not (workflow_copy / "results").exists()
