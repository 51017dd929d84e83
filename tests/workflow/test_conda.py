"""`--use-conda` runs the rules' faultloop commands in workflow/envs/faultloop.yaml's environment,
which pins what pyproject.toml pins.

Building that environment needs conda (or mamba) and its channels (conda-forge for python and pip,
the PyTorch index for torch's CPU build). The development machines and CI reach PyPI, Debian and
npm only: no conda is installable there and no channel is reachable, so the test that builds it is
skipped there and runs wherever conda is (a site's login node). The pins are compared everywhere.
"""

from __future__ import annotations

import shutil
import sys
import tomllib

import pytest
import yaml

from conftest import REPO, cell_manifest, snakemake
from faultloop.core.cell import Cell

CONDA = shutil.which("mamba") or shutil.which("conda")


def test_the_environment_pins_torch_and_the_frameworks_as_pyproject_does():
    """The env's pip list is pyproject's `workload` extra (CPU torch) and its `frameworks` extra,
    pin for pin, plus this checkout; pyproject.toml is where a pin changes first."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    env = yaml.safe_load((REPO / "workflow" / "envs" / "faultloop.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    requirements = [line for line in pip if not line.startswith("-")]
    assert requirements == [*extras["workload"], *extras["frameworks"]]
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in pip, "torch's CPU build"
    assert pip[-1] == "-e ../..", "the package from this checkout, after what it needs"


@pytest.mark.slow
@pytest.mark.skipif(
    CONDA is None,
    reason="no conda or mamba on this machine (and no conda channel reachable to build the environment)",
)
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
