# The attribution tools, per run (one attempt of a cell): every configured log analyzer (rule
# logsage) and every flight-recorder analyzer (rule fr_analysis), one job per run each; results land under
# analysis/<analyzer>/ and analysis/fr/<analyzer>/, listed by the cell's index file. Their inputs
# never carry the injected truth: the log analyzers read the main log with every injection marker
# stripped (kept as an output for the scorer and the report), the FR analyzers only the dumps.
# Over a job's life the log analysis of attempt k declares the earlier attempts as inputs: their
# stripped logs, in order, and their indexes (the kinds that keep records of their own, NVRx's
# Restart Agent, read them from there); kinds without history run per attempt as before.


from faultloop.workflow.attempts import earlier_flags, earlier_runs


rule logsage:
    input:
        manifest=run_path(layout.MANIFEST),
        earlier=earlier_runs(SESSION, layout.STRIPPED_LOG),
        earlier_indexes=earlier_runs(SESSION, layout.LOGSAGE_INDEX),
    output:
        log=run_path(layout.STRIPPED_LOG),
        index=run_path(layout.LOGSAGE_INDEX),
    log:
        rule_log("logsage"),
    conda:
        "../envs/faultloop.yaml"
    resources:
        fresh=fresh("logsage", layout.LOGSAGE_INDEX, layout.STRIPPED_LOG),
    params:
        cli=FAULTLOOP,
        analyzers=ANALYZER_SPECS,
        earlier=earlier_flags,
    shell:
        "({params.cli} cell strip-log --manifest {input.manifest:q} --output {output.log:q}"
        " && {params.cli} analyzers run-cell --log {output.log:q} --index {output.index:q}"
        " --specs {params.analyzers:q} --fresh {resources.fresh} {params.earlier}) > {log:q} 2>&1"


rule fr_analysis:
    input:
        manifest=run_path(layout.MANIFEST),
    output:
        index=run_path(layout.FR_INDEX),
    log:
        rule_log("fr_analysis"),
    conda:
        "../envs/faultloop.yaml"
    resources:
        fresh=fresh("fr_analysis", layout.FR_INDEX),
    params:
        cli=FAULTLOOP,
        analyzers=FR_SPECS,
        gpus_per_node=config["gpus_per_node"],
        segment_size=config["fr_segment_size"],
    shell:
        "{params.cli} fr-analyzers --manifest {input.manifest:q} --index {output.index:q}"
        " --specs {params.analyzers:q}"
        " --gpus-per-node {params.gpus_per_node} --segment-size {params.segment_size}"
        " --fresh {resources.fresh} > {log:q} 2>&1"
