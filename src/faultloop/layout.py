"""Every path of the artifact layout, in one place (upstream's layout plus faultloop's files)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping

FAULT_INJECTION = "fault_injection"
TRACKING_TSV = "experiments.tsv"
TRACKING_COLUMNS = ("JOB_ID", "FAULT_TYPE", "RANK", "ITER", "NODES", "EXPERIMENT_DIR")
REPORT_MD = "experiments_report.md"
SCORES_TSV = "scores.tsv"

# Per cell, relative to the cell directory.
MANIFEST = "job.json"
INFRA_FAILURE = "infra_failure.json"
INFRA_HISTORY = "infra_failures.jsonl"
STRIPPED_LOG = "analysis/main_workload.log"
LOGSAGE_INDEX = "analysis/analyzers.json"  # the log analyzers' runs on this cell, one record each
FR_INDEX = "analysis/fr/analyzers.json"  # the same for the flight-recorder analyzers
SCORE_JSON = "analysis/score.json"  # every analyzer's score for the cell
# Per analyzer: analysis/<name>/ (log analyzers) and analysis/fr/<name>/ (FR analyzers) hold
LOGSAGE_TEXT = "logsage.txt"  # upstream's five-part text form
LOGSAGE_JSON = "logsage.json"  # the verdict (docs/architecture.md)
FR_TEXT = "fr.txt"  # upstream's FR table
FR_JSON = "fr.json"
RUN_JSON = "run.json"  # how the result came about: fingerprint, input digest, status, wall time
RAW_OUTPUT = "output.txt"  # what an external analyzer printed, as it printed it
ANALYZER_SCORE = "score.json"  # the analyzer's score (log analyzers), kept for reuse
CELL_SUBDIRS = ("logs/slurm", "checkpoints", "tensorboard")
FR_DIR = "analysis/fr"


def analyzer_dir(name: str) -> str:
    """A log analyzer's folder inside the cell directory."""
    return f"analysis/{name}"


def fr_analyzer_dir(name: str) -> str:
    """A flight-recorder analyzer's folder inside the cell directory."""
    return f"{FR_DIR}/{name}"


UMASK = os.umask(0o022)
os.umask(UMASK)


def session_dir(config: Mapping[str, Any]) -> Path:
    """`<base_experiments_dir>/fault_injection/<session>`."""
    return Path(config["base_experiments_dir"]) / FAULT_INJECTION / str(config["session"])


def write_atomic(path: str | Path, text: str) -> None:
    """Write a file so readers never see half of it (temp file in the same folder, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~UMASK)  # mkstemp's 0600 would hide results from the team
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def emit_result(text: str, data: Any, *, text_path: str | None, json_path: str | None, stdout_format: str) -> None:
    """An analyzer's two output forms: write each where asked (atomically), print the chosen one."""
    as_json = json.dumps(data, indent=2) + "\n"
    if text_path:
        write_atomic(text_path, text)
    if json_path:
        write_atomic(json_path, as_json)
    sys.stdout.write(as_json if stdout_format == "json" else text)
