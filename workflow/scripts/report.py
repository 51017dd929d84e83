"""aggregate_report rule: the session report, heatmap, HTML page, JUnit file and failing pool."""

from faultloop.plan.invocation import logged, run_cli
from faultloop.report import model as report

with logged(snakemake.log[0]):
    run_cli(
        report.main,
        [
            "--records",
            snakemake.input.records,
            "--session-dir",
            snakemake.params.session,
            *(["--upstream-verdicts", *snakemake.input.upstream] if snakemake.input.upstream else []),
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
