# The session report: upstream's table for the first analyzer, every analyzer side by side,
# pass rates, failure modes, time to verdict, iteration comparison.


rule aggregate_report:
    input:
        scores=rules.score.output.tsv,
    output:
        report=f"{SESSION}/{layout.REPORT_MD}",
        html=f"{SESSION}/report.html",
        heatmap=f"{SESSION}/heatmap.png",
        junit=f"{SESSION}/junit.xml",
        failing_pool=f"{SESSION}/failing_pool.tsv",
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
