# faultloop: inject known faults into distributed training jobs, run the attribution tools on
# what each job left behind, score their verdicts against the truth, and report the matrix.
# Per pool cell: run_job -> logsage, fr_analysis -> judge_score; then score
# gathers every cell into scores.tsv and aggregate_report writes the session report.


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/run_job.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/score.smk"
include: "workflow/rules/report.smk"


localrules:
    all,
    logsage,
    fr_analysis,
    judge_score,
    score,
    history,
    aggregate_report,


rule all:
    default_target: True
    input:
        rules.aggregate_report.output,
