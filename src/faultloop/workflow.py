"""Bookkeeping the Snakemake workflow needs, kept here so it is testable without Snakemake."""

from __future__ import annotations

import contextlib
import fcntl
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from faultloop import layout
from faultloop.pool import Cell


def invoked_until(argv: list[str]) -> set[str]:
    """Rules named after ``--until``/``-U`` on the snakemake command line.

    Snakemake does not expose its DAG settings while the Snakefile is parsed, so the command
    line is read directly.
    """
    names: set[str] = set()
    taking = False
    for arg in argv:
        if arg in ("--until", "-U"):
            taking = True
        elif arg.startswith("--until="):
            names.update(arg.split("=", 1)[1].split(","))
            taking = False
        elif taking and not arg.startswith("-"):
            names.add(arg)
        else:
            taking = False
    return names


def cell_targets(cells: list[Cell], session: Path, *, rejudge: bool) -> tuple[list[Cell], list[Cell]]:
    """Split cells into those to carry through the chain and those reported as not run.

    Normally every cell is carried (run_job produces what is missing). When re-judging stored
    runs only cells whose manifest exists are carried.
    """
    if not rejudge:
        return list(cells), []
    have = [c for c in cells if (session / c.name / layout.MANIFEST).is_file()]
    return have, [c for c in cells if c not in have]


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


def record_infra_failure(cell_dir: Path, failure: Mapping[str, Any]) -> None:
    with open(cell_dir / layout.INFRA_HISTORY, "a") as handle:
        handle.write(json.dumps(dict(failure)) + "\n")


def update_tracking(session: Path, cell: Cell, job_id: str, cell_dir: Path) -> None:
    """Upsert the cell's row in upstream's experiments.tsv (locked, atomic)."""
    session.mkdir(parents=True, exist_ok=True)
    tracking = session / layout.TRACKING_TSV
    with open(session / f".{layout.TRACKING_TSV}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows: dict[str, list[str]] = {}
        if tracking.is_file():
            for line in tracking.read_text().splitlines()[1:]:
                fields = line.split("\t")
                if len(fields) == len(layout.TRACKING_COLUMNS):
                    rows[Path(fields[-1]).name] = fields
        rows[cell.name] = [job_id, cell.fault_type, str(cell.rank), str(cell.iter), str(cell.nodes), str(cell_dir)]
        lines = ["\t".join(layout.TRACKING_COLUMNS)] + ["\t".join(r) for r in rows.values()]
        layout.write_atomic(tracking, "\n".join(lines) + "\n")


@contextlib.contextmanager
def logged(log_path: str | Path) -> Iterator[None]:
    """Send stdout and stderr of a workflow script to its rule's log file."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as handle, contextlib.redirect_stdout(handle), contextlib.redirect_stderr(handle):
        yield


def run_cli(main: Callable[[list[str]], int | None], argv: list[str]) -> None:
    """Run a faultloop subcommand from a workflow script; a non-zero status fails the job."""
    print("faultloop", " ".join(argv), file=sys.stderr)
    status = int(main(argv) or 0)
    if status:
        raise SystemExit(status)


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """Snakemake-style ``key=value`` overrides (YAML values), as given to ``--config``."""
    import yaml

    overrides: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"expected key=value, got {pair!r}")
        overrides[key] = yaml.safe_load(value) if value else ""
    return overrides
