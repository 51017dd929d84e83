"""Whether a cell's workload can run its fault under its launcher here: planning asks this of
every pool row (faultloop.plan.pool's `refuse`), so a cell that cannot run is refused, with the
reason, before any job starts."""

from __future__ import annotations

import shutil
from collections.abc import Callable

from faultloop.core.cell import Cell
from faultloop.frameworks import FRAMEWORKS
from faultloop.run.launchers import LAUNCHERS


def refuser(session_workload: str, session_launcher: str) -> Callable[[Cell], str | None]:
    """`refusal` for a session whose cells default to this workload and launcher."""
    return lambda cell: refusal(cell, session_workload, session_launcher)


def refusal(cell: Cell, session_workload: str, session_launcher: str) -> str | None:
    """Why the cell cannot run, in one line; None when it can. A session's site workload (a
    script, not a framework) is the config's business (faultloop.plan.config)."""
    name = cell.workload or session_workload
    launcher_name = cell.launcher or session_launcher
    if name not in FRAMEWORKS:
        if not cell.workload and not cell.launcher:
            return None
        if cell.workload:
            return f"unknown workload {name!r} (known: {', '.join(FRAMEWORKS)})"
        return f"the session's workload {name} is a site script: it cannot be given launcher {launcher_name!r}"
    if launcher_name not in LAUNCHERS:
        return f"unknown launcher {launcher_name!r} (known: {', '.join(LAUNCHERS)})"
    framework = FRAMEWORKS[name]
    if reason := framework.refusal(cell.fault_type, launcher_name):
        return reason
    if cell.attempts > 1 and not framework.checkpoint:
        return f"ATTEMPTS {cell.attempts}: workload {name} does not resume a restarted job from a checkpoint; use 1"
    launcher = LAUNCHERS[launcher_name]
    if launcher.programs and not any(shutil.which(program) for program in launcher.programs):
        return f"launcher {launcher_name} needs {' or '.join(launcher.programs)} on PATH: install {launcher.package}"
    return None
