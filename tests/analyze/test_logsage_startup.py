"""logsage's start (issue 39's `make bench-logs` bound): the package imports its parts on demand, so
that `faultloop logsage` starts ripgrep before it imports the analyzer, and a prefilter started
early gives the verdict of one started by the analyzer."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from conftest import TESTS
from faultloop.analyze import logsage
from faultloop.analyze.logsage import prefilter
from faultloop.faults import NO_LOGS

DATA = TESTS / "data" / "logs"


def test_the_package_names_are_their_modules_objects() -> None:
    assert sorted(logsage._HOMES) == sorted(logsage.__all__)
    for name, home in logsage._HOMES.items():
        assert getattr(logsage, name) is getattr(importlib.import_module(f"{logsage.__name__}.{home}"), name)
    with pytest.raises(AttributeError, match="no attribute 'analyse_log'"):
        logsage.analyse_log  # noqa: B018 - a misspelt name is an error, not a module search


def test_the_command_imports_the_prefilter_without_the_analyzer() -> None:
    """What `faultloop logsage` imports before it starts ripgrep (a fresh interpreter: this one has
    the analyzer imported already)."""
    code = "import sys, faultloop.cli.logsage; print(' '.join(m for m in sys.modules if m.startswith('faultloop')))"
    loaded = set(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    )
    assert {"faultloop.cli.logsage", "faultloop.analyze.logsage.prefilter", "faultloop.analyze.logsage.rules"} <= loaded
    assert not loaded & {
        "faultloop.analyze.logsage.engine",
        "faultloop.analyze.logsage.scan",
        "faultloop.analyze.running",
        "faultloop.analyze.llm",
        "faultloop.contracts",
    }


@pytest.mark.parametrize("name", ["nccl_hang_16r.log", "slurm_oom_kill.log", "single_traceback.log"])
def test_a_prefilter_started_early_gives_the_same_verdict(name: str) -> None:
    path, settings = DATA / name, logsage.Settings()
    started = prefilter.rows(path, settings.prefilter, settings.jobs)
    assert logsage.analyze_log(path, settings, started).to_json() == logsage.analyze_log(path, settings).to_json()
    assert started.gi_frame is None, "the analyzer closes the prefilter it was handed"


def test_a_prefilter_started_on_an_empty_log_is_closed() -> None:
    path = DATA / "empty.log"
    started = prefilter.rows(path)
    assert logsage.analyze_log(path, logsage.Settings(), started).restart == NO_LOGS
    assert started.gi_frame is None
