"""Glue between Snakemake and the package: what the workflow's rules and scripts call (which cells
an invocation carries, re-judge mode, the tracking file, run_job's and strip-log's bodies), kept
here so it is testable without Snakemake."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from faultloop.contracts import Manifest
from faultloop.faults import strip_markers
from faultloop.plan import layout
from faultloop.plan.config import ConfigError
from faultloop.plan.pool import CELL_NAME_PATTERN, Cell
from faultloop.run import launch, slurm
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


def invoked_until(argv: list[str]) -> set[str]:
    """Rules named after ``--until``/``-U`` on the snakemake command line.

    Snakemake does not expose its DAG settings while the Snakefile is parsed, so the command
    line is read directly.
    """
    return option_values(argv, "--until", "-U")


def forced(argv: list[str], rule: str, *files: str) -> bool:
    """Whether the snakemake command line forces a rule's jobs: ``--forceall``/``-F``, or
    ``--forcerun``/``-R`` naming the rule or one of its output files."""
    if "--forceall" in argv or "-F" in argv:
        return True
    targets = option_values(argv, "--forcerun", "-R")
    return rule in targets or any(t.endswith(f) for t in targets for f in files)


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
        rows[cell.name] = [
            job_id,
            cell.fault_type,
            str(cell.rank),
            str(cell.iter),
            str(cell.nodes),
            str(cell_dir.resolve()),
        ]
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


CELL_DIR_RE = re.compile(CELL_NAME_PATTERN)


def strip_log(manifest_path: Path, output: Path) -> int:
    """Write the analyzers' copy of a cell's main log with every ground-truth line removed."""
    main_log = Manifest.read(manifest_path).main_log
    source = manifest_path.parent / main_log if main_log else None
    lines: list[str] = []
    if source is None or not source.is_file():
        print(f"no main log for this run ({source}); the analyzers get an empty log", file=sys.stderr)
    else:
        with open(source, errors="replace") as handle:
            # Experiment folder names (n2_SIGKILL_r1_i5) spell out the truth: a workload that
            # prints its paths (Megatron prints its arguments) must not give the answer away.
            lines = [CELL_DIR_RE.sub("experiment", line) for line in strip_markers(handle)]
    layout.write_atomic(output, "".join(lines))
    print(f"{source}: kept {len(lines)} lines", file=sys.stderr)
    return len(lines)


def run_site_workload(script: Path, cell: Cell, cell_dir: Path, env: Mapping[str, str]) -> Manifest:
    """Run a site's workload script with upstream's job contract and describe the run.

    The script writes the main log where upstream does (layout.RunPaths.main_log_glob), FR dumps under
    checkpoints/, and the FAULT INJECTION marker; the marker is the evidence the fault fired.
    """
    job_id = slurm.job_id() or f"local-{uuid.uuid4().hex[:8]}"
    paths = layout.RunPaths(job_id)
    for sub in layout.CELL_SUBDIRS:
        (cell_dir / sub).mkdir(parents=True, exist_ok=True)
    start = time.time()
    with open(cell_dir / paths.launch_out, "w") as out:
        status = subprocess.run(
            ["bash", str(script)], env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        ).returncode
    logs = sorted(cell_dir.glob(paths.main_log_glob))
    fired = bool(logs) and "FAULT INJECTION" in logs[0].read_text(errors="replace")
    gpus = int(env["GPUS_PER_NODE"])
    return Manifest(
        job_id=job_id,
        workload=script.name,
        fault_type=cell.fault_type,
        fault_rank=cell.rank,
        fault_iter=cell.iter,
        nodes=cell.nodes,
        gpus_per_node=gpus,
        world_size=cell.nodes * gpus,
        state="COMPLETED" if status == 0 else "FAILED",
        main_log=str(logs[0].relative_to(cell_dir)) if logs else None,
        launch_out=paths.launch_out,
        fault_fired=fired,
        run_valid=fired,
        invalid_reason=None if fired else "no FAULT INJECTION marker in the main log",
        node_names=slurm.nodes() if slurm.job_id() else [],
        start_time=start,
        end_time=time.time(),
    )


def run_cell(args: argparse.Namespace) -> int:
    """run_job's body: launch one cell's job; retry infrastructure failures a bounded number of times.

    A job that died before its fault fired is not an attribution miss. Snakemake retries it
    (`retries:`, this run's `--attempt`); after the last attempt the cell is recorded as
    INFRA_FAILED so the report can list it apart, and the next invocation retries exactly it.
    """
    manifest_path = Path(args.output)
    cell_dir = manifest_path.parent
    cell = Cell.from_name(cell_dir.name)
    session = cell_dir.parent
    # A re-run replaces the previous run's artifacts; stale dumps would mislead the FR analyzer.
    for sub in (layout.SLURM_LOGS, "checkpoints"):
        shutil.rmtree(cell_dir / sub, ignore_errors=True)
    (cell_dir / layout.INFRA_FAILURE).unlink(missing_ok=True)
    if args.workload_script != "builtin":
        env = {
            "FAULT_TYPE": cell.fault_type, "FAULT_RANK": str(cell.rank), "FAULT_AT_ITER": str(cell.iter),
            "FAULT_DELAY": str(args.fault_delay), "GPUS_PER_NODE": str(args.gpus_per_node),
            "EXPERIMENT_DIR": str(cell_dir.resolve()), "BASE_EXPERIMENTS_DIR": str(session.parent.parent.resolve()),
        }  # fmt: skip
        manifest = run_site_workload(Path(args.workload_script), cell, cell_dir, env)
        manifest.write(manifest_path if manifest.run_valid else cell_dir / layout.INFRA_FAILURE)
        status = 0 if manifest.run_valid else 1
    else:
        spec = launch.spec_from_args(
            args, cell_dir, cell.fault_type, cell.rank, cell.iter, cell.nodes, args.gpus_per_node, args.fault_delay
        )
        status = launch.RunJob(spec).run()
    if args.cleanup_cmd:
        slurm.run_per_node(args.cleanup_cmd)  # once per node of the allocation under SLURM
    infra_path = cell_dir / layout.INFRA_FAILURE
    if status != 0 and infra_path.is_file():
        failure = Manifest.read(infra_path)
        reason = failure.invalid_reason or "the job died before its fault fired"
        if args.attempt < args.max_attempts:
            print(f"infrastructure failure, attempt {args.attempt} of {args.max_attempts}: {reason}", file=sys.stderr)
            return 1
        failure.state, failure.run_valid, failure.invalid_reason = "INFRA_FAILED", False, reason
        record_infra_failure(cell_dir, failure.to_json())
        failure.write(manifest_path)
        print(f"infrastructure failure after {args.max_attempts} attempts: {reason}", file=sys.stderr)
    elif status != 0:
        print(f"faultloop run-job exited {status}", file=sys.stderr)
        return status
    update_tracking(session, cell, Manifest.read(manifest_path).job_id, cell_dir)
    return 0


def main(argv: list[str]) -> int:
    """`faultloop cell run|strip-log`: the per-cell workflow steps (run by Snakemake's rules)."""
    parser = argparse.ArgumentParser(prog="faultloop cell", description=main.__doc__)
    sub = parser.add_subparsers(dest="step", required=True)
    run = sub.add_parser("run", help="run_job: launch the cell's job and write its manifest")
    run.add_argument("--output", required=True, help="the cell's job.json: <session>/n<N>_<FAULT>_r<R>_i<I>/job.json")
    run.add_argument("--attempt", type=int, default=1)
    run.add_argument("--max-attempts", type=int, default=1)
    run.add_argument("--workload-script", default="builtin")
    run.add_argument("--gpus-per-node", type=int, default=4)
    run.add_argument("--fault-delay", type=float, default=0.0)
    run.add_argument("--cleanup-cmd", default="")
    launch.add_job_args(run)
    strip = sub.add_parser("strip-log", help="write the analyzers' copy of the main log, markers removed")
    strip.add_argument("--manifest", type=Path, required=True)
    strip.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.step == "strip-log":
        strip_log(args.manifest, args.output)
        return 0
    return run_cell(args)
