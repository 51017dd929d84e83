"""Adopt a session that NVIDIA's bash loop (NVRx nvrx-attr) ran, so faultloop can re-judge it.

Those runs cost GPU hours. Upstream leaves, per session, a tracking file, one folder per cell with
the job's main log and its FR dumps (names in `layout`), and a report graded by an LLM judge.
Adopting writes the manifest faultloop's chain needs, from what those artifacts show:

* the truth (fault, rank, iteration, nodes) comes only from the tracking file;
* whether the fault fired comes only from the injection markers (Megatron's `FAULT INJECTION`
  line, NVRx's injector logger), the lines every analyzer has stripped;
* the end state comes only from lines the scheduler or the launcher printed (slurmstepd, srun,
  torch's launcher) in the main log or the job's launch output: UNKNOWN where none shows it.

Upstream's recorded verdicts are kept in a small table beside faultloop's scores, so users see
where the LLM judge and the code scorer disagree. A manifest that run_job wrote is never
replaced, and upstream's report is only read.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from faultloop.adopt.tracking import AdoptError, TrackedRun, read_tracking
from faultloop.contracts import (
    ADOPTED_WORKLOAD,
    DIMENSIONS,
    UPSTREAM_NOTES_COLUMN,
    Manifest,
    ManifestError,
    upstream_table_columns,
)
from faultloop.core import atomic, layout
from faultloop.core.cell import Cell
from faultloop.faults import FAULTS
from faultloop.marker import is_marker, marker_times, read_injector_line, read_marker
from faultloop.plan.pool import COLUMNS as POOL_COLUMNS
from faultloop.plan.pool import PoolError, RawRow, validate

ADOPTED, NOT_RUN, KEPT = "adopted", "not run", "kept"


# ---- what a run's artifacts show ------------------------------------------------------------


@dataclass(frozen=True)
class EndSign:
    """A line only the scheduler or the launcher prints when a job ends a certain way."""

    state: str
    pattern: re.Pattern[str]


# The first state in this order with a matching line wins: a job SLURM cancelled ended that way,
# whatever its tasks printed while they were stopped.
END_SIGNS = (
    EndSign("TIMEOUT", re.compile(r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT \S+ DUE TO TIME LIMIT")),
    EndSign("PREEMPTED", re.compile(r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT \S+ DUE TO PREEMPTION")),
    EndSign("NODE_FAIL", re.compile(r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT \S+ DUE TO NODE FAIL")),
    EndSign("CANCELLED", re.compile(r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT \S+ \*\*\*")),
    EndSign(
        "OUT_OF_MEMORY", re.compile(r"Detected \d+ oom[-_]kill event|srun: error: \S+: tasks? [\d,\-]+: Out Of Memory")
    ),
    EndSign("FAILED", re.compile(r"srun: error: \S+: tasks? [\d,\-]+: |errors\.ChildFailedError")),
    EndSign("COMPLETED", re.compile(r"\[after training is done\]")),
)
ENDED_BADLY = ("TIMEOUT", "PREEMPTED", "NODE_FAIL", "CANCELLED", "OUT_OF_MEMORY", "FAILED")
# Lines that name the node they come from: srun's task report, slurmstepd's cancellation, torch's
# failure summary (`host : n1`), NCCL's `host:pid:tid [dev] NCCL` prefix.
NODE_RES = (
    re.compile(r"srun: error: ([^\s:]+): tasks? "),
    re.compile(r"\*\*\* (?:JOB|STEP) \S+ ON (\S+) CANCELLED"),
    re.compile(r"^(?:\s*\d+: )?\s*host\s+: (\S+)\s*$"),
    re.compile(r"^(?:\s*\d+: )?([A-Za-z][\w.-]*):\d+:\d+ \[\d+\] NCCL "),
)
SCAN_KEYS = (
    "CANCELLED",
    "oom",
    "Out Of Memory",
    "srun: error",
    "ChildFailedError",
    "after training is done",
    "host",
    "NCCL",
)


@dataclass
class Evidence:
    """What one run's files show, each fact with the first line that shows it (file:line: text)."""

    scheduled: str | None = None
    fired: str | None = None
    mismatch: str | None = None
    marker_lines: list[str] = field(default_factory=list)
    ends: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, None] = field(default_factory=dict)

    @property
    def state(self) -> tuple[str, str | None]:
        """The end state and the line that shows it; UNKNOWN (None) where no line does."""
        return next(((s.state, self.ends[s.state]) for s in END_SIGNS if s.state in self.ends), ("UNKNOWN", None))


def _marker(line: str, cell: Cell) -> tuple[bool, str | None]:
    """(is a fire-time line, what in it contradicts the tracking file) for one marker line."""
    marker = read_marker(line)
    if marker is not None:
        wrong = [f"rank {marker.rank}"] if marker.rank != cell.rank else []
        wrong += [f"fault {marker.fault}"] if marker.fault != cell.fault_type else []
        return marker.fired, ", ".join(wrong) or None
    injector = read_injector_line(line)
    if injector is None:
        return False, None  # another FAULT INJECTION line: upstream's own run-valid test, scheduling only
    fault = FAULTS.get(cell.fault_type)
    expected_signal = fault.signal.name if fault is not None and fault.signal is not None else None
    if injector.fires is not None and cell.fault_type not in injector.fires:
        return True, f"an injector line of {'/'.join(injector.fires)}"
    if injector.signal and injector.signal != expected_signal:
        return True, f"signal {injector.signal}"
    if injector.fault and injector.fault != cell.fault_type:
        return injector.fires is not None, f"fault {injector.fault}"
    return injector.fires is not None, None


def scan(files: Iterable[Path], cell: Cell, cell_dir: Path) -> Evidence:
    """Read the run's files once, line by line (main logs run to gigabytes)."""
    found = Evidence()
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as handle:
            name = path.relative_to(cell_dir)
            for number, raw in enumerate(handle, start=1):
                line = raw.rstrip("\n")
                if is_marker(line):
                    where = f"{name}:{number}: {line.strip()[:200]}"
                    found.marker_lines.append(line)
                    fired, mismatch = _marker(line, cell)
                    if mismatch and found.mismatch is None:
                        found.mismatch = f"{where} (names {mismatch})"
                    if fired and found.fired is None:
                        found.fired = where
                    elif not fired and found.scheduled is None:
                        found.scheduled = where
                    continue
                if not any(key in line for key in SCAN_KEYS):
                    continue
                for sign in END_SIGNS:
                    if sign.state not in found.ends and sign.pattern.search(line):
                        found.ends[sign.state] = f"{name}:{number}: {line.strip()[:200]}"
                for node_re in NODE_RES:
                    if m := node_re.search(line):
                        found.nodes.setdefault(m[1], None)
    return found


def _step(path: Path) -> float:
    """The step of `<JOB_ID>.<step>.1.main_workload.log`, for picking the first step's log."""
    step = path.name.split(".")[1]
    return int(step) if step.isdigit() else float("inf")


@dataclass(frozen=True)
class CellAdoption:
    """What adopting found for one tracked run, and the manifest it derived (when it ran)."""

    run: TrackedRun
    status: str  # adopted | not run | kept (a job.json that run_job wrote)
    note: str
    manifest: Manifest | None = None
    dumps: int = 0
    infra: bool = False  # ended badly before its fault fired: never an attribution miss


def _is_empty(folder: Path) -> bool:
    return not any(p.is_file() for p in folder.rglob("*"))


def inspect_run(run: TrackedRun, *, gpus_per_node: int) -> CellAdoption:
    """Derive one run's manifest from its artifacts (nothing is written here)."""
    folder = run.cell_dir
    if not folder.is_dir():
        return CellAdoption(run, NOT_RUN, f"no experiment folder {folder}")
    if _is_empty(folder):
        return CellAdoption(run, NOT_RUN, f"experiment folder {folder} holds no files")
    existing = folder / layout.MANIFEST
    if existing.exists():
        try:
            manifest = Manifest.read(existing)
        except ManifestError as error:
            return CellAdoption(run, KEPT, f"left as is: {error}")
        if not manifest.adopted:
            return CellAdoption(run, KEPT, f"{layout.MANIFEST} written by faultloop's run_job: left as is", manifest)
    paths = layout.RunPaths(run.job_id)
    logs = sorted(folder.glob(paths.main_log_glob), key=_step)
    outputs = [folder / p for p in (paths.launch_out, paths.launch_err) if (folder / p).is_file()]
    found = scan([*logs[:1], *outputs], run.cell, folder)
    state, state_line = found.state
    scheduled, fired_at = marker_times(found.marker_lines, run.cell.rank)
    fired = found.fired is not None and found.mismatch is None
    notes = [f"{len(logs)} main logs, read {logs[0].name}"] if len(logs) > 1 else []
    reason = None
    if found.mismatch:
        reason = f"a marker contradicts {layout.TRACKING_TSV}: {found.mismatch}"
    elif not logs:
        reason = f"no main log {paths.main_log_glob}"
    elif found.fired is None and found.scheduled:
        reason = (
            f"the fault was scheduled ({found.scheduled}) but no line shows it fired "
            f"(upstream counted this run as valid)"
        )
    elif found.fired is None:
        reason = "no fault-injection marker in the main log"
    infra = found.fired is None and not found.mismatch and state in ENDED_BADLY
    if infra:
        reason = f"{reason}; the job ended {state} before its fault fired: an infrastructure failure"
    manifest = Manifest(
        job_id=run.job_id,
        workload=ADOPTED_WORKLOAD,
        fault_type=run.cell.fault_type,
        fault_rank=run.cell.rank,
        fault_iter=run.cell.iter,
        nodes=run.cell.nodes,
        gpus_per_node=gpus_per_node,
        world_size=run.cell.nodes * gpus_per_node,
        state=state,
        main_log=str(logs[0].relative_to(folder)) if logs else None,
        launch_out=paths.launch_out if (folder / paths.launch_out).is_file() else None,
        fault_fired=fired,
        run_valid=fired,
        invalid_reason=reason,
        node_names=list(found.nodes),
        fault_scheduled_time=scheduled,
        fault_fired_time=fired_at,
        state_evidence=state_line,
    )
    if state_line is None:
        notes.append("no line shows how the job ended")
    dumps = len(list(folder.glob(layout.FR_DUMP_PREFIX + "*")))
    return CellAdoption(run, ADOPTED, "; ".join(notes), manifest, dumps, infra)


# ---- upstream's recorded verdicts -----------------------------------------------------------

# upstream_verdicts.tsv: the cell, its run, upstream's judge's grade of every dimension upstream's
# report has (the dimension table's, compared cell by cell with faultloop's), its notes.
VERDICT_RUN_COLUMNS = ("CELL", "JOB_ID", "STATE")


def verdict_columns() -> list[str]:
    return [*VERDICT_RUN_COLUMNS, *DIMENSIONS.names(upstream=True), UPSTREAM_NOTES_COLUMN]


@dataclass(frozen=True)
class UpstreamVerdict:
    """One cell's row of upstream's report table: what its LLM judge recorded."""

    cell: str
    job_id: str
    state: str
    grades: dict[str, str]  # by dimension, as upstream's judge wrote it
    judge_notes: str

    def dimensions(self) -> dict[str, str]:
        return dict(self.grades)

    def row(self) -> list[str]:
        """Its upstream_verdicts.tsv row (whitespace in text flattened)."""
        values = [
            self.cell,
            self.job_id,
            self.state,
            *(self.grades.get(d, "") for d in DIMENSIONS.names(upstream=True)),
        ]
        return [" ".join(v.split()) for v in [*values, self.judge_notes]]


def _table_cells(line: str) -> list[str]:
    """A markdown table row's cells (`\\|` is a pipe inside a cell)."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [" ".join(c.replace("\\|", "|").split()) for c in re.split(r"(?<!\\)\|", body)]


def parse_report(path: Path, *, gpus_per_node: int) -> tuple[dict[str, UpstreamVerdict], list[str]]:
    """Upstream's verdict rows by cell, and the problems of rows that cannot be read.

    Upstream appends a row per analyzed job, so a cell's later row wins.
    """
    verdicts: dict[str, UpstreamVerdict] = {}
    problems: list[str] = []
    columns = upstream_table_columns()
    width = len(columns)
    in_table = False
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        if not line.lstrip().startswith("|"):
            in_table = False
            continue
        cells = _table_cells(line)
        if cells == columns:
            in_table = True
            continue
        if not in_table or all(re.fullmatch(r":?-+:?", c) for c in cells):
            continue
        where = f"{path} line {number}"
        if len(cells) < width:
            problems.append(f"{where}: expected {width} columns ({' | '.join(columns)}), got {len(cells)}")
            continue
        row = dict(zip(columns, [*cells[: width - 1], "|".join(cells[width - 1 :])], strict=False))
        try:
            cell = validate(
                [RawRow(where, tuple(row[c] for c in POOL_COLUMNS))], source=where, gpus_per_node=gpus_per_node
            )[0]
        except PoolError as error:
            problems.extend(error.problems)
            continue
        verdicts[cell.name] = UpstreamVerdict(
            cell.name,
            row["JOB_ID"],
            row["STATE"],
            {d: row[d] for d in DIMENSIONS.names(upstream=True)},
            row[UPSTREAM_NOTES_COLUMN],
        )
    return verdicts, problems


def write_verdicts(verdicts: Mapping[str, UpstreamVerdict], path: Path) -> None:
    """The session's upstream_verdicts.tsv: tab-separated, whitespace in text flattened."""
    rows = [verdict_columns(), *(v.row() for v in verdicts.values())]
    atomic.write_atomic(path, "\n".join("\t".join(r) for r in rows) + "\n")


def upstream_verdicts(session_dir: Path) -> dict[str, UpstreamVerdict]:
    """Upstream's recorded verdict per cell of an adopted session ({} when it has none)."""
    path = Path(session_dir) / layout.UPSTREAM_VERDICTS_TSV
    return read_verdicts(path) if path.is_file() else {}


def read_verdicts(path: Path) -> dict[str, UpstreamVerdict]:
    """An upstream_verdicts.tsv that adopt wrote, by cell."""
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    dimensions = DIMENSIONS.names(upstream=True)
    return {
        r["CELL"]: UpstreamVerdict(
            r["CELL"],
            r.get("JOB_ID") or "",
            r.get("STATE") or "",
            {d: r.get(d) or "" for d in dimensions},
            r.get(UPSTREAM_NOTES_COLUMN) or "",
        )
        for r in rows
    }


@dataclass(frozen=True)
class Disagreement:
    """One cell and dimension where upstream's LLM judge and faultloop's code scores differ."""

    cell: str
    dimension: str
    upstream: str
    faultloop: str


def _same(a: str, b: str) -> bool:
    return a.strip().lower() == b.strip().lower()


def disagreements(
    upstream: Mapping[str, UpstreamVerdict], faultloop: Mapping[str, Mapping[str, str]]
) -> list[Disagreement]:
    """Per cell (faultloop's order) and dimension, where the two verdicts differ.

    `faultloop` maps a cell name to its score dimensions (`ScoreRecord.values`);
    cells that only one side judged are left out.
    """
    found = []
    for cell, scores in faultloop.items():
        verdict = upstream.get(cell)
        if verdict is None:
            continue
        for dimension, theirs in verdict.dimensions().items():
            ours = scores.get(dimension)
            if ours is not None and not _same(theirs, ours):
                found.append(Disagreement(cell, dimension, theirs, ours))
    return found


# ---- adopting a session ---------------------------------------------------------------------


@dataclass(frozen=True)
class AdoptionRecord:
    """What `faultloop adopt` found, kept so that planning only reads. faultloop's own report
    takes the name of upstream's, so later adoptions need `upstream_report` (from the first
    adoption) to tell upstream's report from it; the tracking file's digest and `gpus_per_node`
    let planning refuse a session whose tracking file or rank layout changed since it was adopted."""

    upstream_report: bool
    tracking_sha256: str = ""
    gpus_per_node: int = 0

    @classmethod
    def read(cls, session: Path) -> AdoptionRecord | None:
        path = session / layout.ADOPTION_JSON
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
            return cls(
                upstream_report=data["upstream_report"] is True,
                tracking_sha256=str(data.get("tracking_sha256", "")),
                gpus_per_node=int(data.get("gpus_per_node", 0)),
            )
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise AdoptError(
                str(session), [f"{path}: not an adoption record ({error}); remove it to adopt afresh"]
            ) from None

    def write(self, session: Path) -> None:
        if AdoptionRecord.read(session) != self:
            atomic.write_json_atomic(session / layout.ADOPTION_JSON, asdict(self))


def tracking_digest(session: Path) -> str:
    """The tracking file's sha256 (empty when there is none)."""
    path = session / layout.TRACKING_TSV
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def adopted_pool(session: Path, *, gpus_per_node: int) -> list[Cell]:
    """The pool of a session `faultloop adopt` has adopted, read without writing anything: what
    planning uses. A session never adopted, or whose tracking file or ranks per node changed since,
    is refused with the command that adopts it."""
    record = AdoptionRecord.read(session)
    again = f"run `faultloop adopt {session} --gpus-per-node {gpus_per_node}` first"
    if record is None:
        raise AdoptError(str(session), [f"not adopted yet ({layout.ADOPTION_JSON} is missing): {again}"])
    if record.tracking_sha256 != tracking_digest(session):
        raise AdoptError(str(session), [f"{layout.TRACKING_TSV} changed since it was adopted: {again}"])
    if record.gpus_per_node != gpus_per_node:
        raise AdoptError(
            str(session),
            [
                f"adopted with --gpus-per-node {record.gpus_per_node}, planned with gpus_per_node={gpus_per_node}: "
                + again
            ],
        )
    return [run.cell for run in read_tracking(session, gpus_per_node=gpus_per_node)]


def upstream_report(session: Path) -> Path | None:
    """The session's report file if it is upstream's: it was there when the session was
    first adopted (or it is being adopted now)."""
    report = session / layout.REPORT_MD
    if not report.is_file():
        return None
    record = AdoptionRecord.read(session)
    return report if record is None or record.upstream_report else None


@dataclass(frozen=True)
class Adoption:
    """A session's runs as adopting found them, and upstream's verdicts."""

    session: Path
    cells: list[CellAdoption]
    verdicts: dict[str, UpstreamVerdict]
    report_found: bool
    gpus_per_node: int

    @property
    def pool(self) -> list[Cell]:
        return [c.run.cell for c in self.cells]


def adopt(session: Path, *, gpus_per_node: int, write: bool = True) -> Adoption:
    """Read and check the whole session first (one error listing every bad row), then write."""
    runs: list[TrackedRun] = []
    problems: list[str] = []
    try:
        runs = read_tracking(session, gpus_per_node=gpus_per_node)
    except AdoptError as error:
        problems += error.problems
    report = upstream_report(session)
    verdicts: dict[str, UpstreamVerdict] = {}
    if report is not None:
        verdicts, report_problems = parse_report(report, gpus_per_node=gpus_per_node)
        problems += report_problems
    if problems:
        raise AdoptError(str(session), problems)
    adoption = Adoption(
        session,
        [inspect_run(r, gpus_per_node=gpus_per_node) for r in runs],
        verdicts,
        report is not None,
        gpus_per_node,
    )
    if write:
        write_adoption(adoption)
    return adoption


def _write_manifest(manifest: Manifest, path: Path) -> None:
    """Write only what changed: a rewritten job.json would make Snakemake re-run the analysis."""
    try:
        if Manifest.read(path) == manifest:
            return
    except ManifestError:
        pass
    manifest.write(path)


def write_adoption(adoption: Adoption) -> None:
    for c in adoption.cells:
        if c.status != ADOPTED or c.manifest is None:
            continue
        _write_manifest(c.manifest, c.run.cell_dir / layout.MANIFEST)
        infra = c.run.cell_dir / layout.INFRA_FAILURE
        if c.infra:
            _write_manifest(c.manifest, infra)
        elif infra.is_file():
            infra.unlink()  # an earlier adoption's: this cell now shows a fired fault or no bad end
    first = AdoptionRecord.read(adoption.session)
    AdoptionRecord(
        upstream_report=adoption.report_found if first is None else first.upstream_report,
        tracking_sha256=tracking_digest(adoption.session),
        gpus_per_node=adoption.gpus_per_node,
    ).write(adoption.session)
    if adoption.report_found and upstream_verdicts(adoption.session) != adoption.verdicts:
        write_verdicts(adoption.verdicts, adoption.session / layout.UPSTREAM_VERDICTS_TSV)


def summary(adoption: Adoption) -> str:
    """What adopting found, cell by cell, for people."""
    counts = {s: sum(c.status == s for c in adoption.cells) for s in (ADOPTED, NOT_RUN, KEPT)}
    lines = [f"{adoption.session}: {counts[ADOPTED]} run(s) adopted, {counts[NOT_RUN]} not run, {counts[KEPT]} kept"]
    width = max(len(c.run.cell.name) for c in adoption.cells)
    for c in adoption.cells:
        m = c.manifest
        if c.status == ADOPTED and m is not None:
            said = "fault fired" if m.fault_fired else f"not valid: {m.invalid_reason}"
            shown_by = f" (shown by {m.state_evidence.split(': ', 1)[0]})" if m.state_evidence else ""
            detail = f"{m.state}{shown_by}; {said}; {c.dumps} FR dump(s)" + (f"; {c.note}" if c.note else "")
            detail += "; infrastructure failure, never scored" if c.infra else ""
        else:
            detail = c.note
        lines.append(f"  {c.run.cell.name:<{width}}  {c.status:<8} {detail}")
    for c in adoption.cells:
        verdict = adoption.verdicts.get(c.run.cell.name)
        if verdict is not None and verdict.job_id != c.run.job_id:
            lines.append(
                f"  {c.run.cell.name}: upstream's verdict is for job {verdict.job_id}, "
                f"the tracked run is job {c.run.job_id}"
            )
    if adoption.report_found:
        lines.append(
            f"upstream's {layout.REPORT_MD}: verdicts for {len(adoption.verdicts)} cell(s), "
            f"kept in {layout.UPSTREAM_VERDICTS_TSV} (the report itself is left untouched)"
        )
    return "\n".join(lines)
