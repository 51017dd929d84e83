# The session report: upstream's table for the first analyzer, every analyzer side by side,
# pass rates, failure modes, time to verdict, iteration comparison.


# Each log analyzer's scores recorded under its version: history/ is the report's memory across
# invocations. Its declared output is the index of every entry (one scores table per analyzer
# version, history/<analyzer>/<n>_<fingerprint>.tsv, kept from earlier runs).
rule history:
    input:
        records=rules.score.output.records,
    output:
        index=f"{SESSION}/{layout.HISTORY_DIR}/{fl_history.INDEX}",
    log:
        f"{SESSION}/logs/history.log",
    conda:
        "../envs/faultloop.yaml"
    params:
        cli=FAULTLOOP,
        version=REPORT_VERSION,
    shell:
        "{params.cli} history --records {input.records:q}"
        ' --history-dir "$(dirname {output.index:q})" > {log:q} 2>&1'


# It reads only what it declares: the score records (per-cell evidence included, judge_score found
# it), the history and, in an adopted session, upstream's recorded verdicts.
rule aggregate_report:
    input:
        records=rules.score.output.records,
        history=rules.history.output.index,
        upstream=UPSTREAM_VERDICTS,
    output:
        report=f"{SESSION}/{REPORT_FILE}",
        html=f"{SESSION}/{layout.REPORT_HTML}",
        heatmap=f"{SESSION}/{layout.HEATMAP_PNG}",
        junit=f"{SESSION}/{layout.JUNIT_XML}",
        failing_pool=f"{SESSION}/{layout.FAILING_POOL}",
    log:
        f"{SESSION}/logs/aggregate_report.log",
    conda:
        "../envs/faultloop.yaml"
    params:
        session=lambda wildcards, output: str(Path(output.report).parent),
        gpus_per_node=config["gpus_per_node"],
        segment_size=config["fr_segment_size"],
        version=REPORT_VERSION,
    script:
        "../scripts/report.py"
