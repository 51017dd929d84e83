# run_job: one training job per pool cell, with the cell's fault injected.
# Not defined when re-judging stored runs (`--until score`): no training job is ever planned then.


if not REJUDGE:

    rule run_job:
        output:
            manifest=cell_path(layout.MANIFEST),
        log:
            rule_log("run_job"),
        retries: config["run_job"]["infra_retries"]
        conda:
            "../envs/faultloop.yaml"
        resources:
            gpu_jobs=1,
            nodes=lambda wildcards: CELL[wildcards.cell].nodes,
            runtime=config["run_job"]["runtime_minutes"],
            # SLURM only (the local executor ignores these). sbatch --mem is per node. mpi makes
            # the job step run this rule's script in the batch shell, which launches the ranks
            # across the allocation with srun itself; without it the plugin wraps the rule as
            # ONE task. The plugin refuses tasks_per_node < 2 for mpi jobs, hence the max.
            mem_mb=config["run_job"]["mem_mb_per_node"],
            tasks_per_node=max(2, config["gpus_per_node"]),
            mpi="srun",
            slurm_partition=config.get("slurm", {}).get("partition", ""),
            slurm_account=config.get("slurm", {}).get("account", ""),
            gres=config.get("slurm", {}).get("gres", ""),
            slurm_extra=config.get("slurm", {}).get("extra", ""),
        params:
            truth=truth,
            cell_dir=lambda wildcards: f"{SESSION}/{wildcards.cell}",
            session=lambda wildcards, output: str(Path(output.manifest).parent.parent),
            workload=WORKLOAD.name,
            workload_script=WORKLOAD.script,
            gpus_per_node=config["gpus_per_node"],
            fault_delay=config["fault_delay"],
            settings=config["run_job"],
            max_attempts=config["run_job"]["infra_retries"] + 1,
            # Changes after an infrastructure failure, so the next invocation retries this cell.
            infra_failures=lambda wildcards: infra_failures(SESSION / wildcards.cell),
        script:
            "../scripts/run_job.py"
