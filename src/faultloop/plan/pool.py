"""The experiment pool: ordered cells (FAULT_TYPE, RANK, ITER, NODES[, ATTEMPTS][, WORKLOAD][,
LAUNCHER]), parsed and validated.

Two spellings are accepted, both upstream's: a TSV with the header FAULT_TYPE RANK ITER NODES,
and the one-line form ``"GPU_SLEEP:1:5:2 SIGKILL:0:5:2"``. Either may add faultloop's optional
ATTEMPTS (a fifth column, a fifth field: ``GPU_ERROR:1:5:2:3``): a cell of N attempts is one job's
life, restarted while it keeps failing; 1 when absent, so upstream's pools mean what they did.
Either may name the cell's workload and launcher (columns WORKLOAD and LAUNCHER, `-` for the
session's; a token's suffix ``SIGKILL:1:5:2@lightning/mpirun``); without them a row runs the
session's workload under its launcher. Order is priority. Every problem
in a pool is reported at once, each naming its file and line (or token), before any job runs.
A row's fields and their bounds are stated by `workflow/schemas/pool.schema.yaml`; what no schema can
state (the fault table, the rank within the job, duplicates, the workload's limits) is checked here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.faults import FAULTS
from faultloop.frameworks import DEFAULT_FRAMEWORK, FRAMEWORKS

COLUMNS = ("FAULT_TYPE", "RANK", "ITER", "NODES")
ATTEMPTS = "ATTEMPTS"  # the optional fifth column: attempts of the job's life (default 1)
WORKLOAD, LAUNCHER = "WORKLOAD", "LAUNCHER"  # optional: the cell's framework and launcher
OPTIONAL = (ATTEMPTS, WORKLOAD, LAUNCHER)  # after COLUMNS, any of them, in this order
SESSIONS = "-"  # a WORKLOAD or LAUNCHER cell that means the session's
# Why a cell's workload or launcher cannot run it (the run layer's registry answers): None when it can.
Refusal = Callable[[Cell], str | None]
SYMBOLIC_RANKS = ("mid", "last")
MAX_DIGITS = 18  # a pool's numbers: decimal digits, far below any bound of a row
INTEGER = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}")


@functools.cache
def _row_schema() -> Any:
    """The pool schema's validator, built when a pool is first checked (jsonschema and yaml are
    imported then: about 70 ms a command that never checks a pool does not pay)."""
    import jsonschema
    import yaml

    return jsonschema.Draft202012Validator(yaml.safe_load((layout.SCHEMAS / "pool.schema.yaml").read_text()))


def _schema_problems(row: dict[str, Any]) -> list[str]:
    """What the pool schema refuses in a row's parsed fields (fields not parsed yet are absent)."""
    problems = []
    for error in _row_schema().iter_errors(row):
        if error.validator == "required":
            continue
        column = ".".join(str(p) for p in error.path)
        if error.validator == "minimum":
            problems.append(f"{column} must be at least {error.validator_value}")
        else:
            problems.append(f"{column}: {error.message}")
    return problems


class PoolError(ValueError):
    """A pool with one or more invalid rows; the message lists every problem."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__(f"invalid pool {source}:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class RawRow:
    """One row as written, with where it came from (for error messages)."""

    where: str
    fields: tuple[str, ...]  # FAULT_TYPE RANK ITER NODES [ATTEMPTS]
    workload: str = ""  # as written; "": the session's
    launcher: str = ""


def table_lines(path: Path) -> list[str]:
    """A TSV's lines as a spreadsheet exports them too: a byte-order mark dropped, CRLF or CR
    line ends. ValueError naming the line of a byte that is not UTF-8, or why it is unreadable."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ValueError(f"{path}: cannot read: {error.strerror or error}") from None
    try:
        return data.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ValueError(f"{path} line {line}: not UTF-8 text (byte 0x{data[error.start]:02x})") from None


def read_pool_file(path: str | Path) -> list[RawRow]:
    """Read a pool TSV. Blank lines and ``#`` comments are ignored; the header is required.
    Fields are separated by tabs or spaces, so a spreadsheet's blank trailing columns are none."""
    path = Path(path)
    if not path.is_file():
        raise PoolError(str(path), [f"{path}: no such pool file"])
    rows: list[RawRow] = []
    header: tuple[str, ...] | None = None
    problems: list[str] = []
    try:
        lines = table_lines(path)
    except ValueError as error:
        raise PoolError(str(path), [str(error)]) from None
    for number, line in enumerate(lines, start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        fields = tuple(text.split())
        if header is None:
            header = tuple(f.upper() for f in fields)
            extra = header[len(COLUMNS) :]
            if header[: len(COLUMNS)] != COLUMNS or list(extra) != [c for c in OPTIONAL if c in extra]:
                problems.append(
                    f"{path} line {number}: header must be {' '.join(COLUMNS)}, optionally followed by any of "
                    f"{' '.join(OPTIONAL)} in this order (tab-separated), got {text!r}"
                )
            continue
        where = f"{path} line {number}"
        if len(fields) != len(header):
            problems.append(f"{where}: expected {len(header)} fields ({' '.join(header)}), got {len(fields)}")
            continue
        named = dict(zip(header, fields, strict=True))
        numbers = fields[: len(COLUMNS)] + ((named[ATTEMPTS],) if ATTEMPTS in named else ())
        workload, launcher = ("" if named.get(c, SESSIONS) == SESSIONS else named[c] for c in (WORKLOAD, LAUNCHER))
        rows.append(RawRow(where, numbers, workload, launcher))
    if problems:
        raise PoolError(str(path), problems)
    return rows


def parse_pool_spec(spec: str) -> list[RawRow]:
    """Parse upstream's one-line pool: space-separated FAULT:RANK:ITER:NODES[:ATTEMPTS] tokens,
    each optionally followed by @WORKLOAD[/LAUNCHER]."""
    rows = []
    for i, token in enumerate(spec.split(), start=1):
        head, _, tail = token.partition("@")
        workload, _, launcher = tail.partition("/")
        rows.append(RawRow(f"pool token {i} {token!r}", tuple(head.split(":")), workload, launcher))
    return rows


def validate(
    rows: list[RawRow],
    *,
    source: str,
    gpus_per_node: int,
    min_nodes: int = 1,
    workload: str = "the workload",
    iterations: int | None = None,
    injects: frozenset[str] | None = None,
    max_attempts: int | None = None,
    resumes: bool = True,
    default_workload: str = DEFAULT_FRAMEWORK,
    default_launcher: str = "torchrun",
    refuse: Refusal | None = None,
) -> list[Cell]:
    """Turn raw rows into cells, collecting every problem before raising.

    `iterations`: how many iterations the workload's job runs, when known (the built-in
    workload's run_job.iterations): a row injecting later can only end "fault never fired".
    `injects`: the faults the workload can inject, when not every row of the table (a site
    workload: upstream's faults and those its registry entry declares).
    `workload`, `min_nodes`, `injects` and `resumes` are the session workload's: a row naming a
    framework of its own (WORKLOAD, `@...`) has that framework's limits, which `refuse` states
    with every other reason the cell's workload or launcher cannot run it. A row's workload or
    launcher equal to the session's (`default_workload`, `default_launcher`) is the session's, so
    the cell keeps upstream's name; a framework named without a launcher runs under the session's
    launcher where it supports it, else under its own default."""
    problems: list[str] = []
    cells: list[Cell] = []
    first_seen: dict[Cell, str] = {}
    if not rows:
        raise PoolError(source, [f"{source}: the pool is empty"])
    for row in rows:
        if len(row.fields) not in (len(COLUMNS), len(COLUMNS) + 1):
            problems.append(
                f"{row.where}: expected {len(COLUMNS)} fields ({' '.join(COLUMNS)}) or {len(COLUMNS) + 1} "
                f"(with {ATTEMPTS}), got {len(row.fields)}"
            )
            continue
        fault, rank_text, iter_text, nodes_text = row.fields[: len(COLUMNS)]
        attempts_text = row.fields[len(COLUMNS)] if len(row.fields) > len(COLUMNS) else "1"
        row_problems: list[str] = []
        fault = fault.upper()
        own_workload, own_launcher = _placement(row, default_workload, default_launcher)
        own = bool(own_workload)  # the row's own framework: its limits are refuse's
        row_problems += _schema_problems({k: v for k, v in ((WORKLOAD, own_workload), (LAUNCHER, own_launcher)) if v})
        if fault not in FAULTS:
            row_problems.append(f"unknown fault type {row.fields[0]!r:.40} (known: {', '.join(FAULTS)})")
        elif injects is not None and not own and fault not in injects:
            row_problems.append(
                f"{workload} does not inject {fault}: declare it under workloads.{workload}.faults once its script "
                f"injects it (docs/slurm.md)"
            )
        numbers: dict[str, int] = {}
        for column, text in (("ITER", iter_text), ("NODES", nodes_text), (ATTEMPTS, attempts_text)):
            if not INTEGER.fullmatch(text):
                kind = "a positive" if column == ATTEMPTS else "a non-negative"
                size = f" of at most {MAX_DIGITS} digits" if text.isascii() and text.isdigit() else ""
                row_problems.append(f"{column} must be {kind} integer{size}, got {text!r:.40}")
            else:
                numbers[column] = int(text)
        bounds = _schema_problems(numbers)
        row_problems += bounds
        if max_attempts is not None and numbers.get(ATTEMPTS, 1) > max_attempts:
            row_problems.append(
                f"{ATTEMPTS} {numbers[ATTEMPTS]} is above the configured maximum of {max_attempts} (max_attempts)"
            )
        elif not resumes and not own and numbers.get(ATTEMPTS, 1) > 1:
            row_problems.append(
                f"{ATTEMPTS} {numbers[ATTEMPTS]}: {workload} does not resume a restarted job from its checkpoint "
                f"(the built-in workload does); use 1"
            )
        nodes_valid = "NODES" in numbers and not any(b.startswith("NODES") for b in bounds)
        if nodes_valid and not own and numbers["NODES"] < min_nodes:
            row_problems.append(f"NODES {numbers['NODES']} is below {workload}'s minimum of {min_nodes}")
        if iterations is not None and numbers.get("ITER", 0) > iterations:
            row_problems.append(
                f"ITER {numbers['ITER']} is beyond {workload}'s {iterations} iterations (run_job.iterations): "
                f"the fault could never fire"
            )
        rank: int | None = None
        if nodes_valid:
            world = numbers["NODES"] * gpus_per_node
            if rank_text.lower() in SYMBOLIC_RANKS:
                rank = world // 2 if rank_text.lower() == "mid" else world - 1
            elif INTEGER.fullmatch(rank_text):
                rank = int(rank_text)
                if rank >= world:
                    row_problems.append(
                        f"RANK {rank} is out of range for {numbers['NODES']} nodes x {gpus_per_node} GPUs "
                        f"(ranks 0-{world - 1})"
                    )
            else:
                row_problems.append(f"RANK must be an integer, 'mid' or 'last', got {rank_text!r:.40}")
        elif not (INTEGER.fullmatch(rank_text) or rank_text.lower() in SYMBOLIC_RANKS):
            row_problems.append(f"RANK must be an integer, 'mid' or 'last', got {rank_text!r:.40}")
        if row_problems or rank is None or ATTEMPTS not in numbers:
            problems.extend(f"{row.where}: {p}" for p in row_problems)
            continue
        cell = Cell(
            fault, rank, numbers["ITER"], numbers["NODES"], numbers.get(ATTEMPTS, 1), own_workload, own_launcher
        )
        if refuse is not None and (reason := refuse(cell)):
            problems.append(f"{row.where}: {reason}")
            continue
        if cell in first_seen:
            problems.append(f"{row.where}: duplicate cell {cell.spec} (first at {first_seen[cell]})")
            continue
        first_seen[cell] = row.where
        cells.append(cell)
    if problems:
        raise PoolError(source, problems)
    return cells


def _placement(row: RawRow, default_workload: str, default_launcher: str) -> tuple[str, str]:
    """The row's workload and launcher as its cell holds them: "" for the session's."""
    workload = "" if row.workload == default_workload else row.workload
    launcher = row.launcher
    framework = FRAMEWORKS.get(workload)
    if not launcher and framework is not None and default_launcher not in framework.launchers:
        launcher = framework.launchers[0]  # its own default: the session's cannot start it
    return workload, "" if launcher == default_launcher else launcher


def load_pool(
    *,
    pool_file: str | Path | None = None,
    pool_spec: str | None = None,
    gpus_per_node: int,
    min_nodes: int = 1,
    workload: str = "the workload",
    iterations: int | None = None,
    injects: frozenset[str] | None = None,
    max_attempts: int | None = None,
    resumes: bool = True,
    default_workload: str = DEFAULT_FRAMEWORK,
    default_launcher: str = "torchrun",
    refuse: Refusal | None = None,
) -> list[Cell]:
    """Load the pool from the one-line spec if given, else from the TSV file."""
    if pool_spec and pool_spec.strip():
        rows, source = parse_pool_spec(pool_spec), "given with --config pool=..."
    elif pool_file:
        rows, source = read_pool_file(pool_file), str(pool_file)
    else:
        raise PoolError("(none)", ["no pool given: set pool_file or pool"])
    return validate(
        rows,
        source=source,
        gpus_per_node=gpus_per_node,
        min_nodes=min_nodes,
        workload=workload,
        iterations=iterations,
        injects=injects,
        max_attempts=max_attempts,
        resumes=resumes,
        default_workload=default_workload,
        default_launcher=default_launcher,
        refuse=refuse,
    )


def write_pool_file(cells: list[Cell], path: str | Path) -> None:
    """Write cells as a pool TSV (same format read_pool_file reads): upstream's four columns, and
    ATTEMPTS, WORKLOAD, LAUNCHER only where a cell has more than one attempt, its own workload,
    its own launcher."""
    lives = any(c.attempts > 1 for c in cells)
    workloads = any(c.workload for c in cells)
    launchers = any(c.launcher for c in cells)
    columns = (*COLUMNS, *((ATTEMPTS,) if lives else ()), *((WORKLOAD,) if workloads else ()))
    columns += (LAUNCHER,) if launchers else ()
    lines = ["\t".join(columns)] + [
        "\t".join(
            map(
                str,
                (
                    c.fault_type, c.rank, c.iter, c.nodes,
                    *((c.attempts,) if lives else ()),
                    *((c.workload or SESSIONS,) if workloads else ()),
                    *((c.launcher or SESSIONS,) if launchers else ()),
                ),
            )
        )
        for c in cells
    ]  # fmt: skip
    Path(path).write_text("\n".join(lines) + "\n")
