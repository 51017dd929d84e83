"""`--use-conda` runs the rules' faultloop commands in workflow/envs/faultloop.yaml's environment.

Building that environment needs conda (or mamba) and its channels (conda-forge for python and pip,
the PyTorch index for torch's CPU build). The development machines and CI reach PyPI, Debian and
npm only: no conda is installable there and no channel is reachable, so the test is skipped there
and runs wherever conda is (a site's login node).
"""

from __future__ import annotations

import shutil
import sys

import pytest

from conftest import cell_manifest, snakemake
from faultloop.core.cell import Cell

CONDA = shutil.which("mamba") or shutil.which("conda")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CONDA is None,
        reason="no conda or mamba on this machine (and no conda channel reachable to build the environment)",
    ),
]


def test_one_rule_runs_in_the_rules_environment(workflow_copy):
    cell = Cell("SIGKILL", 1, 5, 1)
    folder = workflow_copy / "results" / "fault_injection" / "conda" / cell.name
    (folder / "logs" / "slurm").mkdir(parents=True)
    (folder / "logs/slurm/local-1.0.1.main_workload.log").write_text("srun: error: node0: task 1: Killed\n")
    cell_manifest(cell, main_log="logs/slurm/local-1.0.1.main_workload.log").write(folder / "job.json")
    target = f"results/fault_injection/conda/{cell.name}/analysis/analyzers.json"
    args = ("-p", "--use-conda", "--conda-frontend", "mamba" if "mamba" in str(CONDA) else "conda", "--cores", "1")
    config = ("--config", f"pool={cell.spec}", "session=conda", "rejudge=true")
    result = snakemake(workflow_copy, *args, *config, target, timeout=3600)
    shown = result.stdout + result.stderr
    assert " python -m faultloop.cli cell strip-log" in shown and sys.executable not in shown, "the env's python"
    assert (folder / "analysis" / "analyzers.json").is_file()
