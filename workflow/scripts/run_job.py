"""run_job rule: launch the cell's training job, retrying infrastructure failures.

A job that died before its fault fired is not an attribution miss. Snakemake retries it
(`retries:`); after the last attempt the cell is recorded as INFRA_FAILED so the session's
report can list it apart, and the next invocation retries exactly that cell.
"""

import json
import shutil
from pathlib import Path

from faultloop import launch, layout
from faultloop.pool import Cell
from faultloop.workflow import logged, record_infra_failure, update_tracking

params = snakemake.params
cell = Cell(**{"fault_type": params.truth["fault_type"], "rank": params.truth["rank"],
               "iter": params.truth["iter"], "nodes": params.truth["nodes"]})
cell_dir = Path(params.cell_dir)
settings = params.settings

with logged(snakemake.log[0]):
    # A re-run replaces the previous run's artifacts; stale dumps would mislead the FR analyzer.
    for sub in ("logs/slurm", "checkpoints"):
        shutil.rmtree(cell_dir / sub, ignore_errors=True)
    (cell_dir / layout.INFRA_FAILURE).unlink(missing_ok=True)
    argv = [
        "--cell-dir", str(cell_dir),
        "--fault-type", cell.fault_type,
        "--rank", str(cell.rank),
        "--iter", str(cell.iter),
        "--nodes", str(cell.nodes),
        "--gpus-per-node", str(params.gpus_per_node),
        "--fault-delay", str(params.fault_delay),
        "--workload", params.workload,
        "--workload-script", params.workload_script,
        "--iterations", str(settings["iterations"]),
        "--pg-timeout-s", str(settings["pg_timeout_s"]),
        "--stall-timeout-s", str(settings["stall_timeout_s"]),
        "--kill-grace-s", str(settings["kill_grace_s"]),
        "--job-timeout-s", str(settings["job_timeout_s"]),
        "--base-experiments-dir", str(Path(params.session).parent.parent),
    ]
    if settings.get("cleanup_cmd"):
        argv += ["--cleanup-cmd", settings["cleanup_cmd"]]
    print("faultloop run-job", " ".join(argv))
    status = int(launch.main(argv) or 0)
    infra_path = cell_dir / layout.INFRA_FAILURE
    if status != 0 and infra_path.is_file():
        failure = json.loads(infra_path.read_text())
        reason = failure.get("invalid_reason") or "the job died before its fault fired"
        if snakemake.attempt < params.max_attempts:
            raise SystemExit(
                f"infrastructure failure, attempt {snakemake.attempt} of {params.max_attempts}: {reason}"
            )
        failure.update(state="INFRA_FAILED", run_valid=False, invalid_reason=reason)
        record_infra_failure(cell_dir, failure)
        layout.write_json_atomic(snakemake.output.manifest, failure)
        print(f"infrastructure failure after {params.max_attempts} attempts: {reason}")
    elif status != 0:
        raise SystemExit(f"faultloop run-job exited {status}; see {snakemake.log[0]}")
    manifest = json.loads(Path(snakemake.output.manifest).read_text())
    update_tracking(Path(params.session), cell, str(manifest.get("job_id", "")), cell_dir)
