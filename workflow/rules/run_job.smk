# run_job: one training job per pool cell, with the cell's fault injected.
# Not defined when re-judging stored runs (`--until score`): no training job is ever planned then.


if not REJUDGE:

    rule run_job:
        output:
            manifest=cell_path(layout.MANIFEST),
        log:
            rule_log("run_job"),
        params:
            truth=truth,
            cell_dir=lambda wildcards: f"{SESSION}/{wildcards.cell}",
            session=str(SESSION),
            workload=WORKLOAD.name,
            workload_script=WORKLOAD.script,
            gpus_per_node=config["gpus_per_node"],
            fault_delay=config["fault_delay"],
            settings=config["run_job"],
            max_attempts=config["run_job"]["infra_retries"] + 1,
            # Changes after an infrastructure failure, so the next invocation retries this cell.
            infra_failures=lambda wildcards: infra_failures(SESSION / wildcards.cell),
        retries: config["run_job"]["infra_retries"]
        resources:
            gpu_jobs=1,
            nodes=lambda wildcards: CELL[wildcards.cell].nodes,
            runtime=config["run_job"]["runtime_minutes"],
            mem_mb=lambda wildcards: CELL[wildcards.cell].nodes
            * config["run_job"]["mem_mb_per_node"],
        script:
            "../scripts/run_job.py"
