# Configuration, the pool and the cell bookkeeping every stage shares.
import sys
from pathlib import Path

import pandas as pd

from snakemake.utils import min_version, validate

min_version("9.0")

# The workflow runs the package from this checkout, the code users patch between iterations.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

import faultloop.config as fl_config
import faultloop.fr as fl_fr
import faultloop.layout as layout
import faultloop.logsage as fl_logsage
import faultloop.report as fl_report
import faultloop.score as fl_score
from faultloop.workflow import cell_targets, infra_failures, invoked_until, tool_config

config.update(fl_config.resolve(config, workflow.config_settings.overwrite_config))
validate(config, "../schemas/config.schema.yaml")

try:
    POOL = fl_config.pool_cells(config)
    CELLS = fl_config.selected_cells(config, POOL)
except (fl_config.PoolError, fl_config.ConfigError) as error:
    raise WorkflowError(str(error)) from None

validate(
    pd.DataFrame(
        [
            {
                "FAULT_TYPE": c.fault_type,
                "RANK": c.rank,
                "ITER": c.iter,
                "NODES": c.nodes,
            }
            for c in POOL
        ]
    ),
    "../schemas/pool.schema.yaml",
)

WORKLOAD = fl_config.workload(config)
SESSION = layout.session_dir(config)
CELL = {cell.name: cell for cell in POOL}
# `--until <analysis rule>` re-judges stored runs: run_job is not defined then, so no training
# job can be planned, and cells without run artifacts are reported as not run.
REJUDGE = bool(invoked_until(sys.argv) - {"run_job"}) or bool(
    config.get("rejudge", False)
)
RUN_CELLS, NOT_RUN_CELLS = cell_targets(CELLS, SESSION, rejudge=REJUDGE)

# Fingerprints of the analysis code and settings: Snakemake does not see edits to imported
# modules, so these params make a patched analyzer re-run the analysis (never run_job).
LOGSAGE_VERSION = fl_config.source_fingerprint(
    fl_logsage, settings=tool_config(config["logsage"])
)
FR_VERSION = fl_config.source_fingerprint(
    fl_fr, settings=(config["gpus_per_node"], config["fr_segment_size"])
)
SCORE_VERSION = fl_config.source_fingerprint(
    fl_score, settings=tool_config(config["judge"])
)
REPORT_VERSION = fl_config.source_fingerprint(fl_report)


wildcard_constraints:
    cell=r"n\d+_[A-Z_]+_r\d+_i\d+",


def cell_path(name):
    """A path inside the cell directory, with the {cell} wildcard left for Snakemake."""
    return f"{SESSION}/{{cell}}/{name}"


def rule_log(rule):
    return f"{SESSION}/logs/{rule}/{{cell}}.log"


def truth(wildcards):
    """The injected truth of one cell, for the stages that need it (never the analyzers)."""
    cell = CELL[wildcards.cell]
    return {
        "fault_type": cell.fault_type,
        "rank": cell.rank,
        "iter": cell.iter,
        "nodes": cell.nodes,
    }
