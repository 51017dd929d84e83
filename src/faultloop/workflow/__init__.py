"""Between Snakemake and the package: what the workflow's rules and scripts call while planning and
running, testable without Snakemake. The top layer: nothing in the package imports it."""
