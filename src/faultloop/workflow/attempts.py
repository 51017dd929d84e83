"""A job's life in the workflow: the log analysis of attempt k declares the job's earlier attempts
as its inputs (rule logsage), so every attempt is analysed after the ones before it."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from faultloop.core import layout


def earlier_runs(session: Path, name: str) -> Callable[[Any], list[str]]:
    """An input function: `name` (a path inside a run folder) of the run's earlier attempts, in order."""

    def of_run(wildcards: Any) -> list[str]:
        cell, attempt = layout.split_run(wildcards.run)
        return [f"{session}/{layout.run_name(cell, k)}/{name}" for k in range(1, attempt)]

    return of_run


def earlier_flags(wildcards: Any, input: Any) -> str:
    """The earlier attempts' stripped logs (the input `earlier`) as `faultloop analyzers run-cell` flags."""
    return " ".join(f"--earlier {shlex.quote(str(log))}" for log in input.earlier)
