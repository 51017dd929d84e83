"""aggregate_report rule: the session report, heatmap, HTML page and JUnit file."""

from faultloop import report
from faultloop.workflow import logged, run_cli

with logged(snakemake.log[0]):
    run_cli(
        report.main,
        [
            "--scores", snakemake.input.scores,
            "--session-dir", snakemake.params.session,
            "--analyzer-version", snakemake.params.analyzer_version,
            "--output", snakemake.output.report,
            "--html", snakemake.output.html,
            "--heatmap", snakemake.output.heatmap,
            "--junit", snakemake.output.junit,
        ],
    )
