"""aggregate_report rule: the session report, heatmap, HTML page, JUnit file and failing pool,
from the score records and the history the history rule recorded."""

from faultloop.cli import report
from faultloop.workflow.invocation import logged, run_cli

with logged(snakemake.log[0]):
    run_cli(
        report.main,
        [
            "--records",
            snakemake.input.records,
            "--session-dir",
            snakemake.params.session,
            *(["--upstream-verdicts", *snakemake.input.upstream] if snakemake.input.upstream else []),
            # history/ is rule history's output: read here, never written
            "--no-history",
            "--output",
            snakemake.output.report,
            "--html",
            snakemake.output.html,
            "--heatmap",
            snakemake.output.heatmap,
            "--junit",
            snakemake.output.junit,
            # The next iteration's pool: `--config pool_file=<session>/failing_pool.tsv`.
            "--failing-pool",
            snakemake.output.failing_pool,
        ],
    )
