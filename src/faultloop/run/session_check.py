"""Whether a session ran as its pool says (`faultloop check-session`, docs/frameworks.md).

For every cell of the pool: its job ran (job.json); its workload and launcher are the pool's; its
fault fired on the planned rank, at the planned iteration (scheduled at ITER, fired at or after
it, as job.json and the marker lines agree), on the planned node; and its main log holds the lines
the framework prints in every job and the lines the launcher prints on the job's outcome, as
their rows state them (`faultloop.frameworks.FRAMEWORKS`, `faultloop.run.launchers.LAUNCHERS`).
A life of several attempts is checked on its first attempt, the one its pool row plans. It only
reads, and reads a log a bounded line at a time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from faultloop.contracts import Manifest, ManifestError
from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.frameworks import FRAMEWORKS
from faultloop.marker import is_marker, read_marker
from faultloop.run.launchers import LAUNCHERS
from faultloop.run.launchers.base import LauncherLine, Outcome, job_outcomes

LINE_LIMIT = 64 * 1024  # characters read of one log line at a time (a longer one is read in pieces)


@dataclass
class CellCheck:
    """One cell's findings: each check's result and, for every one that failed, why."""

    cell: Cell
    workload: str
    launcher: str
    ran: bool = False
    fired: bool = False
    placed: bool = False  # fired at its iteration, on its rank and its node
    framework_lines: tuple[int, int] = (0, 0)  # (found, stated)
    launcher_lines: tuple[int, int] = (0, 0)  # (found, expected on this outcome)
    problems: list[str] = field(default_factory=list)
    infra: str | None = None  # why its job could not start, where an infrastructure failure is recorded
    notes: list[str] = field(default_factory=list)  # what passed only as a row states it (a launcher's silence)

    @property
    def passed(self) -> bool:
        return self.ran and not self.problems


@dataclass(frozen=True)
class SessionCheck:
    session: Path
    cells: tuple[CellCheck, ...]

    @property
    def missing(self) -> list[CellCheck]:
        return [c for c in self.cells if not c.ran]

    @property
    def failing(self) -> list[CellCheck]:
        return [c for c in self.cells if c.ran and c.problems]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.cells)


def check_session(session: Path, cells: Sequence[Cell], session_workload: str, session_launcher: str) -> SessionCheck:
    """Every pool cell of the session checked, in pool order."""
    return SessionCheck(session, tuple(check_cell(session, c, session_workload, session_launcher) for c in cells))


def check_cell(session: Path, cell: Cell, session_workload: str, session_launcher: str) -> CellCheck:
    check = CellCheck(cell, cell.workload or session_workload, cell.launcher or session_launcher)
    folder = session / cell.name
    if not (folder / layout.MANIFEST).is_file():
        infra = folder / layout.INFRA_FAILURE
        check.infra = _reason(infra) if infra.is_file() else None
        check.problems.append("not run: " + ("an infrastructure failure, retried" if check.infra else "no job.json"))
        return check
    try:
        job = Manifest.read(folder / layout.MANIFEST)
    except ManifestError as error:
        check.problems.append(str(error))
        return check
    if job.state == "INFRA_FAILED":  # every try failed before the fault: the next run of the workflow retries it
        check.infra = job.invalid_reason or "no reason recorded"
        check.problems.append("not run: an infrastructure failure after every try")
        return check
    check.ran = True
    planned = (cell.fault_type, cell.rank, cell.iter, cell.nodes, check.workload, check.launcher)
    recorded = (job.fault_type, job.fault_rank, job.fault_iter, job.nodes, job.workload, job.launcher)
    names = ("fault", "rank", "iteration", "nodes", "workload", "launcher")
    for name, want, got in zip(names, planned, recorded, strict=True):
        if want != got:
            check.problems.append(f"job.json's {name} is {got!r}, the pool's {want!r}")
    check.fired = job.fault_fired
    if not job.fault_fired:
        check.problems.append(f"the fault never fired ({job.invalid_reason or job.state})")
    if job.main_log is None or not (folder / job.main_log).is_file():
        check.problems.append(f"no main log ({job.main_log or 'job.json names none'})")
        return check
    _check_log(check, job, folder / job.main_log)
    return check


def _check_log(check: CellCheck, job: Manifest, log: Path) -> None:
    """The marker lines against job.json and the pool; the framework's and launcher's own lines."""
    cell = check.cell
    framework = FRAMEWORKS.get(job.workload)
    launcher = LAUNCHERS.get(job.launcher)
    stated = [re.compile(line.pattern) for line in framework.own_lines] if framework else []
    outcomes = job_outcomes(job.state, job.rank_exits)
    expected = launcher.expected_lines(outcomes) if launcher else []
    wanted: list[tuple[LauncherLine, list[re.Pattern[str]]]] = [
        (line, [re.compile(p) for p in line.patterns]) for line in expected
    ]
    seen_stated = [False] * len(stated)
    seen_wanted = [False] * len(wanted)
    scheduled_at: int | None = None
    fired_at: list[int | None] = []
    for line in _lines(log):
        if is_marker(line):
            marker = read_marker(line)
            if marker and marker.rank == cell.rank and marker.fault == cell.fault_type:
                if marker.fired:
                    fired_at.append(marker.iteration)
                elif scheduled_at is None:
                    scheduled_at = marker.scheduled_at
            continue
        for i, pattern in enumerate(stated):
            seen_stated[i] = seen_stated[i] or bool(pattern.search(line))
        for i, (_, patterns) in enumerate(wanted):
            seen_wanted[i] = seen_wanted[i] or any(p.search(line) for p in patterns)
    check.placed = _placed(check, job, scheduled_at, fired_at)
    check.framework_lines = (sum(seen_stated), len(stated))
    check.launcher_lines = (sum(seen_wanted), len(wanted))
    if framework is not None and not stated:
        check.problems.append(f"workload {job.workload} states no line of its own (faultloop.frameworks)")
    for own, seen in zip(framework.own_lines if framework else (), seen_stated, strict=True):
        if not seen:
            check.problems.append(f"no line of {job.workload}'s own: /{own.pattern}/ ({own.origin})")
    if launcher is not None and not wanted and launcher.expected_lines(frozenset(Outcome)):
        if silence := [why for outcome, why in launcher.silent.items() if outcome in outcomes]:
            check.notes.append(f"launcher {job.launcher} on {job.state}: {silence[0]}")
        else:
            check.problems.append(f"launcher {job.launcher} states no line of its own when a job ends {job.state}")
    for (said, _), seen in zip(wanted, seen_wanted, strict=True):
        if not seen:
            shown = " or ".join(f"/{p}/" for p in said.patterns)
            check.problems.append(
                f"no line of launcher {job.launcher}'s own on {said.when.value} ({job.state}): {shown} ({said.origin})"
            )


def _placed(check: CellCheck, job: Manifest, scheduled_at: int | None, fired_at: list[int | None]) -> bool:
    """Whether the fault fired on its rank, at its iteration and on its node; problems noted."""
    cell, before = check.cell, len(check.problems)
    if scheduled_at != cell.iter:
        said = "no scheduling line" if scheduled_at is None else f"scheduled at iteration {scheduled_at}"
        check.problems.append(f"rank {cell.rank}'s marker: {said}, the pool's iteration {cell.iter}")
    if not fired_at:
        check.problems.append(f"no firing line of {cell.fault_type} from rank {cell.rank} in the log")
    elif job.fault_fired_iter not in fired_at:
        check.problems.append(
            f"job.json says the fault fired at iteration {job.fault_fired_iter}, "
            f"rank {cell.rank}'s marker at {fired_at[0]}"
        )
    if job.fault_fired_iter is not None and job.fault_fired_iter < cell.iter:
        check.problems.append(f"fired at iteration {job.fault_fired_iter}, before the pool's {cell.iter}")
    node = cell.rank // job.gpus_per_node
    planned = job.node_names[node] if len(job.node_names) == cell.nodes else None
    if planned is None:
        check.problems.append(f"job.json names {len(job.node_names)} nodes, the pool's {cell.nodes}")
    elif job.fault_node != planned:
        check.problems.append(f"the fault fired on {job.fault_node}, rank {cell.rank}'s node is {planned}")
    return len(check.problems) == before


def _lines(path: Path) -> Iterator[str]:
    with path.open(errors="replace") as log:
        yield from iter(lambda: log.readline(LINE_LIMIT), "")


def _reason(infra: Path) -> str:
    try:
        return Manifest.read(infra).invalid_reason or "no reason recorded"
    except ManifestError as error:
        return str(error)


def render(result: SessionCheck) -> str:
    """A table per workload x launcher, then every cell that failed with why, then the count."""
    groups: dict[tuple[str, str], list[CellCheck]] = {}
    for c in result.cells:
        groups.setdefault((c.workload, c.launcher), []).append(c)
    out = [
        f"session {result.session}",
        "",
        "| workload | launcher | cells | ran | fired | at iter/rank/node | framework lines | launcher lines | pass |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (workload, launcher), checks in groups.items():
        ran = [c for c in checks if c.ran]
        out.append(
            f"| {workload} | {launcher} | {len(checks)} | {len(ran)} | {sum(c.fired for c in ran)} "
            f"| {sum(c.placed for c in ran)} | {_ratio(c.framework_lines for c in ran)} "
            f"| {_ratio(c.launcher_lines for c in ran)} | {sum(c.passed for c in checks)} |"
        )
    if result.failing:
        out += ["", f"failing cells ({len(result.failing)}):"]
        out += [f"- {c.cell.name}: " + "; ".join(c.problems) for c in result.failing]
    if infra := [c for c in result.missing if c.infra]:
        out += ["", f"not run, infrastructure failures ({len(infra)}; the workflow retries them):"]
        out += [f"- {c.cell.name}: {c.infra}" for c in infra]
    if noted := [c for c in result.cells if c.notes]:
        out += ["", f"passed as their rows state ({len(noted)}):"]
        out += [f"- {c.cell.name}: " + "; ".join(c.notes) for c in noted]
    passed = sum(c.passed for c in result.cells)
    out += [
        "",
        f"{len(result.cells)} cells: {passed} pass, {len(result.failing)} fail, {len(result.missing)} not run",
    ]
    return "\n".join(out)


def _ratio(pairs: Iterator[tuple[int, int]] | Sequence[tuple[int, int]]) -> str:
    """`found/expected` lines summed over cells."""
    found = expected = 0
    for f, e in pairs:
        found, expected = found + f, expected + e
    return f"{found}/{expected}"
