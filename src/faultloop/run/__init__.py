"""Running a cell: the built-in workload, its launcher (torchrun or srun layout), SLURM, the run_job step."""
