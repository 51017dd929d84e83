# The session report: upstream's table for the first analyzer, every analyzer side by side,
# pass rates, failure modes, time to verdict, iteration comparison.


# It reads only what it declares: the score records (per-cell evidence included, judge_score found
# it) and, in an adopted session, upstream's recorded verdicts; its history/ is its own memory.
rule aggregate_report:
    input:
        records=rules.score.output.records,
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
