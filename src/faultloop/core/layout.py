"""Every path of the artifact layout, in one place (upstream's layout plus faultloop's files)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# What a valid configuration and pool row are, the workflow's schemas state (workflow/schemas/,
# where the Snakemake workflow catalog keeps them). The package always runs from its checkout
# (the workflow puts src/ on the path; `make setup` installs it editable), so it reads them there.
CHECKOUT = Path(__file__).resolve().parents[3]
SCHEMAS = CHECKOUT / "workflow" / "schemas"

FAULT_INJECTION = "fault_injection"
TRACKING_TSV = "experiments.tsv"
TRACKING_COLUMNS = ("JOB_ID", "FAULT_TYPE", "RANK", "ITER", "NODES", "EXPERIMENT_DIR")
REPORT_MD = "experiments_report.md"
SCORES_TSV = "scores.tsv"
SCORE_RECORDS = "scores.jsonl"  # every analyzer's score record of every pool cell, whole (the report's input)
# The report's own files and its memory of earlier analyzer versions
REPORT_HTML = "report.html"
HEATMAP_PNG = "heatmap.png"
JUNIT_XML = "junit.xml"
FAILING_POOL = "failing_pool.tsv"
HISTORY_DIR = "history"
# faultloop's report in an adopted session whose experiments_report.md is upstream's own
ADOPTED_REPORT_MD = "faultloop_report.md"
# An adopted NVRx session: upstream's recorded verdict per cell, read from its experiments_report.md,
# and what the first adoption found (whether that report is upstream's rather than faultloop's).
UPSTREAM_VERDICTS_TSV = "upstream_verdicts.tsv"
ADOPTION_JSON = "adoption.json"

# Per cell, relative to the cell directory.
MANIFEST = "job.json"
INFRA_FAILURE = "infra_failure.json"
INFRA_HISTORY = "infra_failures.jsonl"
STRIPPED_LOG = "analysis/main_workload.log"
LOGSAGE_INDEX = "analysis/analyzers.json"  # the log analyzers' runs on this cell, one record each
FR_INDEX = "analysis/fr/analyzers.json"  # the same for the flight-recorder analyzers
MERGED_INDEX = "analysis/merged.json"  # the same for verdicts merged from those (combined)
SCORE_JSON = "analysis/score.json"  # every analyzer's score for the cell
# Per analyzer: analysis/<name>/ (log analyzers) and analysis/fr/<name>/ (FR analyzers) hold
VERDICT_TEXT = "verdict.txt"  # a log analyzer's verdict in upstream's five-part text form
VERDICT_JSON = "verdict.json"  # a log analyzer's verdict (docs/architecture.md)
# Their names before this release (logsage.json, logsage.txt): a stored session's are still read.
LEGACY_NAMES = {VERDICT_JSON: "logsage.json", VERDICT_TEXT: "logsage.txt"}
FR_TEXT = "fr.txt"  # upstream's FR table
FR_JSON = "fr.json"
RUN_JSON = "run.json"  # how the result came about: fingerprint, input digest, status, wall time
RAW_OUTPUT = "output.txt"  # what an external analyzer printed, as it printed it
ANALYZER_SCORE = "score.json"  # the analyzer's score (log analyzers), kept for reuse
CELL_SUBDIRS = ("logs/slurm", "checkpoints", "tensorboard")
SLURM_LOGS = "logs/slurm"
FR_DUMP_PREFIX = "checkpoints/_dump_"  # + rank: torch's TORCH_FR_DUMP_TEMP_FILE convention
# The built-in workload's model checkpoints: one folder per saved iteration (Megatron's iter_<7 digits>),
# one file per rank; a resumed attempt loads the newest folder every rank completed.
MODEL_CHECKPOINTS = "checkpoints/model"
CHECKPOINT_ITERATION_PREFIX = "iter_"


def checkpoint_dir(iteration: int) -> str:
    """An iteration's checkpoint folder inside the run folder."""
    return f"{MODEL_CHECKPOINTS}/{CHECKPOINT_ITERATION_PREFIX}{iteration:07d}"


def checkpoint_file(rank: int) -> str:
    """A rank's file inside an iteration's checkpoint folder."""
    return f"rank_{rank:05d}.pt"


@dataclass(frozen=True)
class RunPaths:
    """A job's files inside its cell, named by the job id as upstream names them."""

    job_id: str

    @property
    def main_log(self) -> str:
        return f"{SLURM_LOGS}/{self.job_id}.0.1.main_workload.log"

    @property
    def main_log_glob(self) -> str:
        """Upstream's pattern for the main log: any step of the job (`<JOB_ID>.*.1.main_workload.log`)."""
        return f"{SLURM_LOGS}/{self.job_id}.*.1.main_workload.log"

    @property
    def launch_out(self) -> str:
        return f"{SLURM_LOGS}/{self.job_id}.launch.out"

    @property
    def launch_err(self) -> str:
        """sbatch --error of upstream's manual runs; srun's own errors can land here."""
        return f"{SLURM_LOGS}/{self.job_id}.launch.err"

    @property
    def events(self) -> str:
        """torch's worker events (torchrun --event-log-handler console), kept out of the main log."""
        return f"{SLURM_LOGS}/{self.job_id}.torchelastic_events.jsonl"

    @property
    def rank_exit_prefix(self) -> str:
        """Each framework rank's exit record, `<prefix><rank>.json` (run/launchers/rank_records)."""
        return f"{SLURM_LOGS}/{self.job_id}.rank_exit."

    def torchrun_error(self, node: int) -> str:
        """A node's torchrun error file (TORCHELASTIC_ERROR_FILE): its root-cause worker's error."""
        return f"{SLURM_LOGS}/{self.job_id}.node{node}.torchrun_error.json"


FR_DIR = "analysis/fr"

# A job's life: a *run* is one attempt of a cell. Attempt 1 is the cell folder itself, exactly
# upstream's layout (so one-attempt cells and stored, adopted and upstream sessions are unchanged);
# attempt k >= 2 is <cell>/attempt_<k>/, with the same per-run layout inside (job.json, logs/slurm/,
# checkpoints/, analysis/, ...). Every per-run path above is relative to the run folder.
ATTEMPT_PREFIX = "attempt_"


def run_name(cell: str, attempt: int) -> str:
    """A run relative to the session (the workflow's `run` wildcard): the cell's name for attempt 1,
    `<cell>/attempt_<k>` for attempt k."""
    if attempt < 1:
        raise ValueError(f"attempt must be at least 1, got {attempt}")
    return cell if attempt == 1 else f"{cell}/{ATTEMPT_PREFIX}{attempt}"


def run_names(cell: str, attempts: int) -> list[str]:
    """Every run of a cell of `attempts` attempts, in order."""
    return [run_name(cell, k) for k in range(1, attempts + 1)]


def run_dir(cell_dir: Path, attempt: int) -> Path:
    """The folder of attempt `attempt` of the cell in `cell_dir`."""
    return cell_dir if attempt == 1 else cell_dir / f"{ATTEMPT_PREFIX}{attempt}"


def run_dirs(cell_dir: Path, attempts: int) -> list[Path]:
    """Every run folder of a cell of `attempts` attempts, in order."""
    return [run_dir(cell_dir, k) for k in range(1, attempts + 1)]


def split_run(run: str) -> tuple[str, int]:
    """A run's cell name and attempt: `n2_X_r1_i5_a2/attempt_2` -> (`n2_X_r1_i5_a2`, 2)."""
    cell, _, rest = run.partition("/")
    if not rest:
        return cell, 1
    if not rest.startswith(ATTEMPT_PREFIX) or not rest[len(ATTEMPT_PREFIX) :].isdigit():
        raise ValueError(f"not a run: {run!r} (expected <cell> or <cell>/{ATTEMPT_PREFIX}<k>)")
    attempt = int(rest[len(ATTEMPT_PREFIX) :])
    if attempt < 2 or str(attempt) != rest[len(ATTEMPT_PREFIX) :]:
        raise ValueError(f"not a run: {run!r} (attempt 1 is the cell folder itself; k >= 2 without leading zeros)")
    return cell, attempt


def cell_of_run(run_folder: Path) -> tuple[Path, int]:
    """The cell folder a run folder belongs to, and the run's attempt."""
    name = run_folder.name
    if name.startswith(ATTEMPT_PREFIX) and name[len(ATTEMPT_PREFIX) :].isdigit():
        _, attempt = split_run(f"{run_folder.parent.name}/{name}")
        return run_folder.parent, attempt
    return run_folder, 1


def analyzer_dir(name: str) -> str:
    """A log analyzer's folder inside the cell directory."""
    return f"analysis/{name}"


def fr_analyzer_dir(name: str) -> str:
    """A flight-recorder analyzer's folder inside the cell directory."""
    return f"{FR_DIR}/{name}"


def session_dir(config: Mapping[str, Any]) -> Path:
    """`<base_experiments_dir>/fault_injection/<session>`, or the adopted NVRx session (`adopt`)."""
    if config.get("adopt"):
        return Path(config["adopt"])
    return Path(config["base_experiments_dir"]) / FAULT_INJECTION / str(config["session"])


def stored(directory: Path, name: str) -> Path:
    """A result file of an analyzer's folder; under its legacy name where only that one exists."""
    path = directory / name
    legacy = LEGACY_NAMES.get(name)
    if legacy and not path.exists() and (directory / legacy).exists():
        return directory / legacy
    return path
