"""run_job's body: one run's job (an attempt of a pool cell; the built-in workload or a site's
script), its retries after infrastructure failures, and its row in upstream's tracking file."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultloop.contracts import Manifest
from faultloop.core import atomic, layout, space
from faultloop.core.cell import Cell
from faultloop.frameworks import DEFAULT_FRAMEWORK
from faultloop.marker import MARKER, names_injection
from faultloop.plan.config import BUILTIN
from faultloop.run import life, slurm
from faultloop.run.launch import RunJob
from faultloop.run.spec import JobSettings, JobSpec


@dataclass(frozen=True)
class CellRun:
    """What the run_job rule asks for one run (one attempt of a cell)."""

    manifest: Path  # <session>/<run>/job.json: where the run's manifest goes (core.layout.run_dir)
    infra_try: int = 1  # Snakemake's try of this job (its `retries:` after infrastructure failures)
    infra_tries: int = 1
    workload_script: str = BUILTIN
    gpus_per_node: int = 4
    fault_delay: float = 0.0
    cleanup_cmd: str = ""
    # The process that started this job (Snakemake): once it is gone, no job runs and a running one
    # stops (a killed Snakemake's rerun would otherwise meet this run's job in the same folder).
    driver_pid: int | None = None
    settings: JobSettings = field(default_factory=JobSettings)


def record_infra_failure(cell_dir: Path, failure: Mapping[str, Any]) -> None:
    """Add a line to the cell's infrastructure failures, rewritten whole (a full disk or a kill
    mid-write leaves the previous lines, never half of one)."""
    history = cell_dir / layout.INFRA_HISTORY
    earlier = history.read_text() if history.is_file() else ""
    atomic.write_atomic(history, earlier + json.dumps(dict(failure)) + "\n")


def _tracked_run(experiment_dir: str) -> str:
    """The run a tracking row's EXPERIMENT_DIR names: `<cell>` or `<cell>/attempt_<k>`."""
    folder = Path(experiment_dir)
    cell_dir, attempt = layout.cell_of_run(folder)
    return layout.run_name(cell_dir.name, attempt)


def update_tracking(session: Path, cell: Cell, job_id: str, run_dir: Path) -> None:
    """Upsert the run's row in upstream's experiments.tsv (locked, atomic): one row per job, its
    EXPERIMENT_DIR the run folder (the cell's folder for attempt 1, as upstream's loop writes it)."""
    session.mkdir(parents=True, exist_ok=True)
    tracking = session / layout.TRACKING_TSV
    with open(session / f".{layout.TRACKING_TSV}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows: dict[str, list[str]] = {}
        if tracking.is_file():
            for line in tracking.read_text().splitlines()[1:]:
                fields = line.split("\t")
                if len(fields) == len(layout.TRACKING_COLUMNS):
                    rows[_tracked_run(fields[-1])] = fields
        rows[_tracked_run(str(run_dir))] = [
            job_id,
            cell.fault_type,
            str(cell.rank),
            str(cell.iter),
            str(cell.nodes),
            str(run_dir.resolve()),
        ]
        lines = ["\t".join(layout.TRACKING_COLUMNS)] + ["\t".join(r) for r in rows.values()]
        atomic.write_atomic(tracking, "\n".join(lines) + "\n")


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
    fired = bool(logs) and names_injection(logs[0].read_text(errors="replace"))
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
        invalid_reason=None if fired else f"no {MARKER} marker in the main log",
        node_names=slurm.nodes() if slurm.job_id() else [],
        start_time=start,
        end_time=time.time(),
    )


def run_cell(request: CellRun) -> int:
    """run_job's body: launch one run's job; retry infrastructure failures a bounded number of times.

    A job that died before its fault fired is not an attribution miss. Snakemake retries it
    (`retries:`, this run's `--infra-try`); after the last try the run is recorded as
    INFRA_FAILED so the report can list it apart, and the next invocation retries exactly it.
    Attempt k >= 2 of a job's life runs only when attempt k-1 failed (faultloop.run.life); else it
    writes a job.json saying it was not needed.
    """
    manifest_path = request.manifest
    run_dir = manifest_path.parent
    cell_dir, attempt = layout.cell_of_run(run_dir)
    cell = Cell.from_name(cell_dir.name)
    session = cell_dir.parent
    if request.driver_pid is not None and os.getppid() != request.driver_pid:
        print(f"the process that started this job (pid {request.driver_pid}) is gone: nothing run", file=sys.stderr)
        return 1
    left = space.full(run_dir)
    if left is not None:  # a job that cannot write fails as if its infrastructure had, and so would each retry
        raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} ({left})", str(run_dir))
    # A re-run replaces the previous run's artifacts; stale dumps would mislead the FR analyzer.
    for sub in (layout.SLURM_LOGS, "checkpoints"):
        shutil.rmtree(run_dir / sub, ignore_errors=True)
    (run_dir / layout.INFRA_FAILURE).unlink(missing_ok=True)
    plan = life.plan_attempt(cell_dir, attempt, gpus_per_node=request.gpus_per_node, fault_delay=request.fault_delay)
    # a cell of its own workload runs that framework; else the session's: the built-in or a site's script
    site_script = request.workload_script if request.workload_script != BUILTIN and not cell.workload else None
    if plan.not_needed is not None:
        workload = Path(site_script).name if site_script else cell.workload or DEFAULT_FRAMEWORK
        life.not_needed_manifest(plan, workload=workload, gpus_per_node=request.gpus_per_node).write(manifest_path)
        print(f"attempt {attempt} of {cell.name} runs no job: {plan.not_needed}", file=sys.stderr)
        return 0
    if site_script:
        env = {
            "FAULT_TYPE": cell.fault_type, "FAULT_RANK": str(cell.rank), "FAULT_AT_ITER": str(cell.iter),
            "FAULT_DELAY": str(request.fault_delay), "GPUS_PER_NODE": str(request.gpus_per_node),
            "EXPERIMENT_DIR": str(run_dir.resolve()), "BASE_EXPERIMENTS_DIR": str(session.parent.parent.resolve()),
        }  # fmt: skip
        manifest = run_site_workload(Path(site_script), cell, run_dir, env)
        manifest.write(manifest_path if manifest.run_valid else run_dir / layout.INFRA_FAILURE)
        status = 0 if manifest.run_valid else 1
    else:
        spec = JobSpec(
            run_dir,
            cell.fault_type,
            cell.rank,
            cell.iter,
            cell.nodes,
            request.gpus_per_node,
            request.fault_delay,
            request.settings,
            attempt=attempt,
            attempts=cell.attempts,
            node_names=life.local_nodes(cell.nodes, plan.previous_nodes, plan.drained),
            drained=plan.drained,
            resume=plan.resume,
            reinjection=plan.reinjection,
            workload=cell.workload or DEFAULT_FRAMEWORK,
            launcher=cell.launcher,
        )
        status = RunJob(spec, driver_pid=request.driver_pid).run()
    if request.cleanup_cmd:
        slurm.run_per_node(request.cleanup_cmd)  # once per node of the allocation under SLURM
    infra_path = run_dir / layout.INFRA_FAILURE
    if status != 0 and infra_path.is_file():
        failure = Manifest.read(infra_path)
        reason = failure.invalid_reason or "the job died before its fault fired"
        if request.infra_try < request.infra_tries:
            print(
                f"infrastructure failure, try {request.infra_try} of {request.infra_tries}: {reason}",
                file=sys.stderr,
            )
            return 1
        failure.state, failure.run_valid, failure.invalid_reason = "INFRA_FAILED", False, reason
        record_infra_failure(run_dir, failure.to_json())
        failure.write(manifest_path)
        print(f"infrastructure failure after {request.infra_tries} tries: {reason}", file=sys.stderr)
    elif status != 0:
        print(f"faultloop run-job exited {status}", file=sys.stderr)
        return status
    update_tracking(session, cell, Manifest.read(manifest_path).job_id, run_dir)
    return 0
