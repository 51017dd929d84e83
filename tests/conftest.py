"""Shared test helpers: run the real snakemake CLI on a throwaway copy of the workflow."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
WORKFLOW_FILES = ("Snakefile", "workflow", "config", "profiles", "src")


def copy_workflow(dest: Path) -> Path:
    """A private copy of the workflow, so tests can patch code and keep results apart."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__", "site.yaml"))
        else:
            shutil.copy2(source, dest / name)
    return dest


def snakemake(workdir: Path, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    """Run the snakemake CLI of this environment in workdir; output is captured as text."""
    env = dict(os.environ, PYTHONPATH=str(workdir / "src"))
    result = subprocess.run(
        [str(BIN / "snakemake"), *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} exited {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture
def workflow_copy(tmp_path: Path) -> Path:
    return copy_workflow(tmp_path / "wf")
