"""aggregate_report rule: the session report, heatmap, HTML page, JUnit file and failing pool."""

from faultloop import report
from faultloop.workflow import logged, run_cli

with logged(snakemake.log[0]):
    run_cli(
        report.main,
        [
            "--scores", snakemake.input.scores,
            "--session-dir", snakemake.params.session,
            "--output", snakemake.output.report,
            "--html", snakemake.output.html,
            "--heatmap", snakemake.output.heatmap,
            "--junit", snakemake.output.junit,
            # The next iteration's pool: `--config pool_file=<session>/failing_pool.tsv`.
            "--failing-pool", snakemake.output.failing_pool,
        ],
    )
