"""Between Snakemake and the package: what the workflow's rules and scripts call (which cells an
invocation carries, re-judge mode, which jobs are forced, a script's log), kept here so it is
testable without Snakemake. run_job's body is faultloop.run.cell, strip-log's faultloop.analyze.strip."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any, Protocol

from faultloop.core import layout, space
from faultloop.core.cell import Cell
from faultloop.core.errors import ConfigError, no_space
from faultloop.score.tables import failing_cells


def option_values(argv: list[str], *flags: str) -> set[str]:
    """Values given after any of flags on a command line (`--flag a b`, `--flag=a,b`)."""
    names: set[str] = set()
    taking = False
    for arg in argv:
        if arg in flags:
            taking = True
        elif arg.startswith("--") and arg.split("=", 1)[0] in flags and "=" in arg:
            names.update(arg.split("=", 1)[1].split(","))
            taking = False
        elif taking and not arg.startswith("-"):
            names.add(arg)
        else:
            taking = False
    return names


def config_texts(argv: list[str]) -> dict[str, str]:
    """The ``--config``/``-C`` values as the command line spells them (key -> text; the last one
    given wins, as in Snakemake). Snakemake reads `session=20260101_1200` as an integer; the
    configuration's check keeps the text for a key its schema wants as a string."""
    texts: dict[str, str] = {}
    taking = False
    for arg in argv:
        if arg in ("--config", "-C"):
            taking = True
            continue
        if arg.startswith("--config="):
            arg, taking = arg.removeprefix("--config="), False
        elif not taking or arg.startswith("-"):
            taking = False
            continue
        key, sep, value = arg.partition("=")
        if sep:
            texts[key] = value
    return texts


def invoked_until(argv: list[str]) -> set[str]:
    """Rules named after ``--until``/``-U`` on the snakemake command line.

    Snakemake 9 parses the Snakefile before it gives the workflow its DAG settings
    (`snakemake.api.DAGApi` includes the Snakefile, then sets `workflow.dag_settings`), and whether
    run_job is defined is decided while parsing, so the command line is read directly.
    """
    return option_values(argv, "--until", "-U")


class DagForcing(Protocol):
    """The part of Snakemake's `DAGSettings` that says which jobs are forced."""

    forceall: bool
    forcerun: AbstractSet[str]


def forced(settings: DagForcing | None, rule: str, *paths: str) -> bool:
    """Whether Snakemake's DAG settings force a job: ``--forceall``, or ``--forcerun`` naming its
    rule or one of its output paths (relative to the working directory or absolute)."""
    if settings is None:
        return False
    if settings.forceall or rule in settings.forcerun:
        return True
    wanted = {os.path.abspath(p) for p in paths}
    return any(os.path.abspath(target) in wanted for target in settings.forcerun)


def selected_cells(settings: Mapping[str, Any], cells: list[Cell]) -> list[Cell]:
    """Apply the `cells` key: all, failed (the first analyzer's failing cells in the last report's
    scores), or named cells."""
    choice = str(settings.get("cells", "all")).strip()
    if choice in ("", "all"):
        return cells
    if choice == "failed":
        scores = layout.session_dir(settings) / layout.SCORES_TSV
        if not scores.is_file():
            raise ConfigError(f"config key 'cells': 'failed' needs a previous report, and {scores} does not exist")
        primary = next((name for name, entry in (settings.get("analyzers") or {}).items() if entry is not None), None)
        failing = {c.name for c in failing_cells(scores, analyzer=primary)}
        return [c for c in cells if c.name in failing]
    wanted = choice.replace(",", " ").split()
    known = {c.name for c in cells}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise ConfigError(f"config key 'cells': not in the pool: {', '.join(unknown)}")
    return [c for c in cells if c.name in set(wanted)]


def cell_targets(cells: list[Cell], session: Path, *, rejudge: bool) -> tuple[list[Cell], list[Cell]]:
    """Split cells into those to carry through the chain and those reported as not run.

    Normally every cell is carried (run_job produces what is missing). When re-judging stored
    runs only cells whose manifest exists are carried.
    """
    if not rejudge:
        return list(cells), []
    have = [c for c in cells if (session / c.name / layout.MANIFEST).is_file()]
    return have, [c for c in cells if c not in have]


def run_targets(cells: list[Cell], session: Path, *, rejudge: bool) -> list[str]:
    """The runs (one per attempt: `<cell>`, `<cell>/attempt_<k>`) the carried cells take through
    the per-run rules; when re-judging, only the runs whose manifest is stored."""
    runs = [run for cell in cells for run in cell.runs]
    if not rejudge:
        return runs
    return [run for run in runs if (session / run / layout.MANIFEST).is_file()]


def tool_config(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings that change an analyzer's verdicts (credentials excluded)."""

    def clean(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: clean(v) for k, v in sorted(value.items()) if "key" not in k}
        return value

    return clean(settings)


def infra_failures(cell_dir: Path) -> int:
    """How many runs of this cell ended in an infrastructure failure.

    run_job's params carry this count: when a run ends in an infrastructure failure the count
    changes, so the next invocation re-runs exactly that cell (Snakemake's params trigger).
    """
    history = cell_dir / layout.INFRA_HISTORY
    return len(history.read_text().splitlines()) if history.is_file() else 0


def full_filesystem(folder: Path) -> str | None:
    """One line naming the session's folder when its filesystem is full, for a failed run's end: a
    job that hit ENOSPC there may have had no room to say so in its own log."""
    left = space.full(folder)
    if left is None:
        return None
    return (
        f"faultloop: {folder} is on a full filesystem ({left}): free space there and run the same"
        " command again; finished cells are kept"
    )


@contextlib.contextmanager
def logged(log_path: str | Path) -> Iterator[None]:
    """Send stdout and stderr of a workflow script to its rule's log file."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as handle, contextlib.redirect_stdout(handle), contextlib.redirect_stderr(handle):
        try:
            yield
        except OSError as error:
            line = no_space(error, Path(log_path).stem)
            if line is None:
                raise
            print(line, file=sys.stderr)
            raise SystemExit(1) from None


def run_cli(main: Callable[[list[str]], int | None], argv: list[str]) -> None:
    """Run a faultloop subcommand from a workflow script; a non-zero status fails the job."""
    print("faultloop", " ".join(argv), file=sys.stderr)
    status = int(main(argv) or 0)
    if status:
        raise SystemExit(status)
