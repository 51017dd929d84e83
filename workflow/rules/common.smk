# Configuration, the pool and the cell bookkeeping every stage shares.
import shlex
import sys
from pathlib import Path

from snakemake.utils import min_version
from snakemake_interface_executor_plugins.settings import DeploymentMethod

min_version("9.0")

# The workflow runs the package from this checkout, the code users patch between iterations.
CHECKOUT = Path(workflow.basedir).parent
sys.path.insert(0, str(CHECKOUT / "src"))

import faultloop.adopt.session as fl_adopt
import faultloop.analyze.registry as fl_analyzers
import faultloop.plan.config as fl_config
import faultloop.fingerprint as fl_fingerprint
import faultloop.report.history as fl_history
import faultloop.core.layout as layout
import faultloop.run.life as fl_life
import faultloop.run.matrix as fl_matrix
import faultloop.workflow.owner as fl_owner
import faultloop.plan.pool as fl_pool
import faultloop.contracts as fl_contracts
from faultloop.core.cell import run_name_pattern
from faultloop.core.errors import ConfigError
from faultloop.run.spec import rule_flags
from faultloop.workflow.invocation import (
    cell_targets,
    config_texts,
    forced,
    full_filesystem,
    infra_failures,
    invoked_until,
    run_targets,
    selected_cells,
    tool_config,
)

# The configuration is checked once, against faultloop's config schema (unknown keys and refused
# values, each named with the file or --config that gave it), after the --config values are typed
# by it (Snakemake hands nested ones over as strings); the pool once, by faultloop.plan.pool.
try:
    config.update(
        fl_config.resolve(
            config,
            workflow.config_settings.overwrite_config,
            workflow.configfiles,
            check=True,
            analyzer_schema=fl_analyzers.config_schema(),
            texts=config_texts(sys.argv),
        )
    )
except ConfigError as error:
    raise WorkflowError(str(error)) from None

SESSION = layout.session_dir(config)
# Who holds Snakemake's lock (faultloop.workflow.owner): a run records itself before Snakemake's
# lock check, so a lock a killed run left is cleared with one line, and a session a live run holds
# is refused. Planning (-n, --lint) and a cluster job's own Snakemake record nothing.
OWNER = None
if fl_owner.runs_jobs(sys.argv) and not (
    workflow.remote_exec or workflow.subprocess_exec
):
    try:
        OWNER = fl_owner.register(
            Path.cwd(), SESSION, say=lambda line: print(line, file=sys.stderr)
        )
    except fl_owner.SessionBusy as error:
        raise WorkflowError(str(error)) from None


onstart:
    if OWNER is not None:
        OWNER.claim_locks(
            map(str, workflow.persistence.all_inputfiles()),
            map(str, workflow.persistence.all_outputfiles()),
        )


# A failed run on a full disk ends with one line naming the session's folder (its jobs may have had
# no room to say so in their logs); every write is atomic, so what was finished stays whole.
onerror:
    full = full_filesystem(SESSION)
    if full:
        print(full, file=sys.stderr)


# Snakemake parses the Snakefile before it hands the workflow its DAG settings, so the rules an
# invocation stops at are read from its command line (faultloop.workflow.invocation.invoked_until).
UNTIL = invoked_until(sys.argv)
# An adopted NVRx session (docs/coming-from-nvrx.md) is re-judged, never run: its pool is its
# experiments.tsv, and its runs' job.json files are written by `faultloop adopt`, the explicit step
# before this workflow. Planning only reads: it refuses a session not adopted (or changed since).
ADOPT = bool(config.get("adopt"))
try:
    if ADOPT and (config.get("pool") or config.get("pool_file")):
        raise ConfigError(
            "config key 'adopt': the pool is the session's experiments.tsv; drop 'pool' and 'pool_file'"
        )
    if ADOPT:
        POOL = fl_adopt.adopted_pool(SESSION, gpus_per_node=config["gpus_per_node"])
    else:
        POOL = fl_config.pool_cells(
            config,
            fl_matrix.refuser(
                fl_config.session_workload(config), config["run_job"]["launcher"]
            ),
        )
    CELLS = selected_cells(config, POOL)
    ANALYZERS = fl_analyzers.selected(config, fl_analyzers.Input.LOG)
    FR_ANALYZERS = fl_analyzers.selected(config, fl_analyzers.Input.DUMPS)
    # faultloop's combined verdict (primary log + first FR analyzer), scored as a log analyzer.
    MERGED = fl_analyzers.selected(config, fl_analyzers.Input.VERDICTS)
except (fl_pool.PoolError, ConfigError, fl_adopt.AdoptError) as error:
    raise WorkflowError(str(error)) from None

WORKLOAD = fl_config.workload(config)
# An adopted session keeps upstream's own report untouched: faultloop's report then has
# its own name, and shows upstream's recorded verdicts beside its code scores.
UPSTREAM_REPORT = ADOPT and fl_adopt.upstream_report(SESSION) is not None
REPORT_FILE = layout.ADOPTED_REPORT_MD if UPSTREAM_REPORT else layout.REPORT_MD
UPSTREAM_VERDICTS = (
    [str(SESSION / layout.UPSTREAM_VERDICTS_TSV)]
    if ADOPT and (SESSION / layout.UPSTREAM_VERDICTS_TSV).is_file()
    else []
)
CELL = {cell.name: cell for cell in POOL}
# `--until <analysis rule>` (or an adopted session) re-judges stored runs: run_job is not defined
# then, so no training job can be planned, and cells without run artifacts are reported as not run.
REJUDGE = ADOPT or bool(UNTIL - {"run_job"}) or bool(config.get("rejudge", False))
RUN_CELLS, _not_run = cell_targets(
    CELLS, SESSION, rejudge=REJUDGE
)  # not-run cells: listed by `score`
# The runs those cells carry (a run is one attempt of a cell: the cell folder, then
# <cell>/attempt_<k>), the per-run rules' `run` wildcard values; re-judging, those stored.
RUNS = run_targets(RUN_CELLS, SESSION, rejudge=REJUDGE)

# The analyzers with their fingerprints (code, settings, a command analyzer's watched files),
# as one constant param per analysis rule: Snakemake does not see edits to imported modules or
# a user's script, so a changed fingerprint changes the param and re-runs the cell's analysis
# job, which re-runs only the analyzers whose fingerprint changed (never run_job).
ANALYZER_SPECS = fl_analyzers.specs_json(ANALYZERS)
FR_SPECS = fl_analyzers.specs_json(FR_ANALYZERS)
MERGED_SPECS = fl_analyzers.specs_json(MERGED)
# Every row of scores.tsv, per cell in this order: the log analyzers, the merged, then fr:<name>.
SCORED_ANALYZERS = [spec.name for spec in ANALYZERS + MERGED] + [
    fl_contracts.FR_PREFIX + spec.name for spec in FR_ANALYZERS
]
# The code judge_score and the report rules run: every module their commands import, with the
# data beside it (the report's templates), so no module can be left out of the fingerprint.
SCORE_VERSION = fl_fingerprint.code_fingerprint(
    "faultloop.cli.score",
    "faultloop.cli.analyzers",
    settings=tool_config(config["judge"]),
)
REPORT_VERSION = fl_fingerprint.code_fingerprint(
    "faultloop.cli.report", "faultloop.cli.history"
)


def fresh(rule_name, *files):
    """A resource: 1 when `--forcerun` (naming the rule or one of the run's files) or `--forceall`
    forces this run's job, so it re-runs every analyzer instead of reusing results whose
    fingerprint is unchanged. A resource, not a param: params are rerun triggers. Evaluated when
    the DAG is built, the first time Snakemake's DAG settings are there to read."""

    def of_run(wildcards):
        return int(
            forced(
                workflow.dag_settings,
                rule_name,
                *(f"{SESSION}/{wildcards.run}/{name}" for name in files),
            )
        )

    return of_run


# Per-cell rules run the faultloop CLI from this checkout: with the workflow's own Python, or under
# --use-conda with the Python of the rules' environment (workflow/envs/faultloop.yaml), so the
# package runs on that environment's pinned software. They are shell rules rather than script
# rules: Snakemake re-reads a script's source for every job while planning, which dominated
# planning time on large pools.
IN_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
FAULTLOOP = (
    f"PYTHONPATH={shlex.quote(str(CHECKOUT / 'src'))} "
    f"{'python' if IN_CONDA else shlex.quote(sys.executable)} -m faultloop.cli"
)


def llm_flags(settings):
    """Command-line flags for an LLM endpoint (the key is passed as a file path, never itself)."""
    llm = settings.get("llm", {})
    flags = [
        "--llm-base-url", llm.get("base_url", ""),
        "--llm-model", llm.get("model", ""),
        "--llm-timeout", str(llm.get("timeout_s", 60)),
        "--llm-max-retries", str(llm.get("max_retries", 2)),
    ]  # fmt: skip
    if llm.get("api_key_file"):
        flags += ["--llm-api-key-file", llm["api_key_file"]]
    return shlex.join(flags)


# The built-in workload's launcher options shared by every cell (the cell's own fault, rank,
# iteration, node count and attempts come from its run folder's name), derived from faultloop.run.spec.JobSettings. One
# string, not a function per job: input functions dominate planning time on large pools.
LAUNCH_FLAGS = shlex.join(
    [
        "--gpus-per-node", str(config["gpus_per_node"]), "--fault-delay", str(config["fault_delay"]),
        *rule_flags(config["run_job"]),
    ]
)  # fmt: skip


# The per-run rules are keyed by the run folder relative to the session: a cell's name (its
# attempt 1, upstream's folder) or <cell>/attempt_<k> (core.layout); `cells=` selects by cell name.
wildcard_constraints:
    run=run_name_pattern(),


def run_path(name):
    """A path inside a run folder, with the {run} wildcard left for Snakemake."""
    return f"{SESSION}/{{run}}/{name}"


def rule_log(rule):
    return f"{SESSION}/logs/{rule}/{{run}}.log"


# A job's life (faultloop.run.life): attempt k+1's run_job reads attempt k's job.json.
SLURM_SITE_EXTRA = config.get("slurm", {}).get("extra", "")


def previous_run(wildcards):
    """Attempt k's job.json, the input of attempt k+1 (none for attempt 1)."""
    cell, attempt = layout.split_run(wildcards.run)
    if attempt == 1:
        return []
    return [f"{SESSION}/{layout.run_name(cell, attempt - 1)}/{layout.MANIFEST}"]


def sbatch_extra(wildcards, input):
    """sbatch flags: the site's (`slurm.extra`), then the attempt's placement on the nodes its truth
    keeps (`--nodelist`, `--exclude`). Evaluated while planning (attempt k's job.json may not be
    there yet: then only the site's) and again before submission, once it is."""
    previous = input.get("previous", [])
    previous = [previous] if isinstance(previous, str) else list(previous)
    placement = fl_life.sbatch_placement(previous[0] if previous else None)
    return " ".join(f for f in (SLURM_SITE_EXTRA, placement) if f) or None
