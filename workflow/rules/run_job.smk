# run_job: one training job per run (an attempt of a pool cell), with the cell's fault injected as
# the attempt meets it. Attempt k+1 waits for attempt k's job.json: it runs only when attempt k
# failed, resumes from its checkpoint, and leaves out a node the truth drains (faultloop.run.life).
# Not defined when re-judging stored runs (`--until score`): no training job is ever planned then.


# Retried by the submitting Snakemake only: inside a SLURM job step (remote/subprocess mode)
# rule-level retries would first re-run the job in the same allocation (3 x 3 attempts).
RUN_JOB_RETRIES = (
    0
    if workflow.remote_exec or workflow.subprocess_exec
    else config["run_job"]["infra_retries"]
)

# sbatch -p / -A / --gres / extra flags from the site file's `slurm:` section (docs/slurm.md);
# only non-empty values, so that --default-resources can supply them instead.
SLURM_SITE_RESOURCES = {
    resource: config.get("slurm", {}).get(key)
    for resource, key in (
        ("slurm_partition", "partition"),
        ("slurm_account", "account"),
        ("gres", "gres"),
    )
    if config.get("slurm", {}).get(key)
}


if not REJUDGE:

    rule run_job:
        input:
            previous=previous_run,
        output:
            manifest=run_path(layout.MANIFEST),
        log:
            rule_log("run_job"),
        retries: RUN_JOB_RETRIES
        conda:
            "../envs/faultloop.yaml"
        resources:
            **SLURM_SITE_RESOURCES,
            gpu_jobs=1,
            infra_try=lambda wildcards, attempt: attempt,
            nodes=lambda wildcards: CELL[layout.split_run(wildcards.run)[0]].nodes,
            slurm_extra=sbatch_extra,
            runtime=config["run_job"]["runtime_minutes"],
            # SLURM only (the local executor ignores these). sbatch --mem is per node. mpi makes
            # the job step run this rule's command in the batch shell, which launches the ranks
            # across the allocation with srun itself; without it the plugin wraps the rule as
            # ONE task. The plugin refuses tasks_per_node < 2 for mpi jobs, hence the max.
            mem_mb=config["run_job"]["mem_mb_per_node"],
            tasks_per_node=max(2, config["gpus_per_node"]),
            mpi="srun",
        params:
            cli=FAULTLOOP,
            infra_tries=config["run_job"]["infra_retries"] + 1,
            workload_script=WORKLOAD.script,
            cleanup=config["run_job"].get("cleanup_cmd", ""),
            launch=LAUNCH_FLAGS,
            # Changes after an infrastructure failure, so the next invocation retries this cell.
            infra_failures=lambda wildcards: infra_failures(SESSION / wildcards.run),
        shell:
            # $PPID: Snakemake, whose death stops the job (the command replaces the shell).
            "exec env {params.cli} cell run --output {output.manifest:q} --driver-pid $PPID"
            " --infra-try {resources.infra_try} --infra-tries {params.infra_tries}"
            " --workload-script {params.workload_script:q} --cleanup-cmd={params.cleanup:q}"
            " {params.launch} > {log:q} 2>&1"
