"""fr_analysis rule: run the flight-recorder analyzer on the cell's dumps."""

from faultloop import fr
from faultloop.workflow import logged, run_cli

with logged(snakemake.log[0]):
    run_cli(
        fr.main,
        [
            "--fr-path", snakemake.params.checkpoints,
            "--gpus-per-node", str(snakemake.params.gpus_per_node),
            "--segment-size", str(snakemake.params.segment_size),
            "--output-text", snakemake.output.text,
            "--output-json", snakemake.output.json,
        ],
    )
