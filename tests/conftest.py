"""Shared test helpers: run the real snakemake CLI on a throwaway copy of the workflow."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from faultloop.analyze.running import Outcome, run_with_reuse
from faultloop.contracts import FrVerdict, LogVerdict, Manifest, write_index
from faultloop.core import layout
from faultloop.core.cell import Cell
from job_slots import job_slots
from scheduling import pytest_collection_modifyitems
from slurm_fixture import slurm_cluster

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
BIN = Path(sys.executable).parent
# Third-party data (NVRx's NCCL dumps, logs pasted into public issue threads) is read from
# ../shared beside the checkout, never copied in; tests that need it skip where it is absent.
SHARED = REPO.parent / "shared"
NVRX_FR = SHARED / "fixtures" / "nvrx_fr"
REAL_LOGS = SHARED / "real_logs"
REAL_LOGS_HO = SHARED / "real_logs_ho"  # the corpus's second folder (labels_ho.tsv)
REAL_LOGS_B = SHARED / "real_logs_b"  # the third (labels_r4.tsv, labels_r5.tsv)
REAL_LOGS_C = SHARED / "real_logs_c"  # the fourth: two blind collections (labels_r6.tsv, labels_r7*.tsv)
# the folders the metamorphic and shape tests hold their verdicts on (real_logs_c not yet: three of its
# cases change behind the generated `words in front`, as before issue 39)
REAL_LOG_FOLDERS = tuple(folder for folder in (REAL_LOGS, REAL_LOGS_HO, REAL_LOGS_B) if folder.is_dir())
# the whole corpus eval-logs grades (379 logs): the floors, the not-found logs, the ablations
REAL_LOG_CORPUS = tuple(folder for folder in (*REAL_LOG_FOLDERS, REAL_LOGS_C) if folder.is_dir())
needs_nvrx_dumps = pytest.mark.skipif(
    not NVRX_FR.is_dir(),
    reason=f"NVRx flight-recorder fixtures not found at "
    f"{NVRX_FR} (third-party data kept outside the repo, in ../shared)",
)
needs_real_logs = pytest.mark.skipif(
    not REAL_LOGS.is_dir(),
    reason=f"real-log corpus not found at {REAL_LOGS} (third-party data kept outside the repo, in ../shared)",
)
WORKFLOW_FILES = ("workflow", "config", "profiles", "src")


def copy_workflow(dest: Path) -> Path:
    """A private copy of the workflow, so tests can patch code and keep results apart."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__", "site.yaml"))
        else:
            shutil.copy2(source, dest / name)
    return dest


def snakemake(workdir: Path, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    """Run the snakemake CLI of this environment in workdir; output is captured as text."""
    env = dict(os.environ, PYTHONPATH=str(workdir / "src"))
    result = subprocess.run(
        [str(BIN / "snakemake"), *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} exited {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture
def workflow_copy(tmp_path: Path) -> Path:
    return copy_workflow(tmp_path / "wf")


def run_gloo_job(out: Path, mode: str) -> None:
    """tests/fr_gloo_job.py: a real 4-rank gloo job whose rank 1 hangs or crashes, dumping to out."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    subprocess.run(
        [sys.executable, str(TESTS / "fr_gloo_job.py"), str(out), mode, str(port)],
        check=True,
        timeout=300,
        capture_output=True,
    )


@pytest.fixture(scope="session")
def gloo_hang(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real gloo dumps of a hang (rank 1 stalls), read-only: one job serves every test of a test process
    (of an xdist worker) that reads them."""
    out = tmp_path_factory.mktemp("gloo_hang")
    run_gloo_job(out, "hang")
    return out


def cell_manifest(cell: Cell, job_id: str = "local-1", *, valid: bool = True, **fields: Any) -> Manifest:
    """A finished cpu_gloo job's job.json for a pool cell (4 ranks per node, FAILED); an invalid
    run's fault never fired unless `fields` says otherwise."""
    return Manifest(
        **{
            "job_id": job_id,
            "workload": "cpu_gloo",
            "fault_type": cell.fault_type,
            "fault_rank": cell.rank,
            "fault_iter": cell.iter,
            "nodes": cell.nodes,
            "gpus_per_node": 4,
            "world_size": 4 * cell.nodes,
            "state": "FAILED",
            "main_log": None,
            "launch_out": None,
            "fault_fired": valid,
            "run_valid": valid,
            "invalid_reason": None if valid else "fault never fired: job finished at iteration 3",
            **fields,
        }
    )


def put_analysis(
    cell_dir: Path,
    log: dict[str, dict | str | None],
    fr: dict[str, dict | str | None],
    *,
    version: str = "v1",
    wall_s: float = 0.5,
) -> None:
    """Store analyzer results in a cell as the logsage and fr_analysis rules do (their own writer):
    name -> verdict (a dict), failure (a message) or nothing (None: the analyzer is not listed)."""

    def store(results: dict, folder: str, files: tuple[str, str], index: str) -> None:
        records = []
        for name, result in results.items():
            if result is None:
                continue
            if isinstance(result, str):
                outcome = Outcome(None, "", None, result, "stderr tail", wall_s)
            elif "restart" in result:
                verdict = LogVerdict.from_json(result)
                outcome = Outcome(verdict, verdict.to_text(), None, None, "", wall_s)
            else:
                text = (
                    "PGID | Process Group Desc | Op Type | Size | Dtype | Missing Ranks\n"
                    f"0 | default_pg | allreduce | [[4]] | [Float] | {result.get('suspect_ranks')}\n"
                )
                outcome = Outcome(FrVerdict.from_json(result), text, None, None, "", wall_s)
            records.append(
                run_with_reuse(
                    name,
                    "test",
                    version,
                    "digest",
                    cell_dir / folder / name,
                    fresh=True,
                    files=files,
                    attempt=lambda o=outcome: o,
                )
            )
        write_index(cell_dir / index, records)

    store(log, "analysis", (layout.VERDICT_JSON, layout.VERDICT_TEXT), layout.LOGSAGE_INDEX)
    store(fr, "analysis/fr", (layout.FR_JSON, layout.FR_TEXT), layout.FR_INDEX)


def planned(output: str) -> dict[str, int]:
    """Job counts from snakemake's dry-run 'Job stats' table."""
    stats = output.split("Job stats:", 1)[1]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M)}


def planned_outputs(output: str, rule: str) -> list[str]:
    """Output paths of the jobs of one rule in a dry run's listing."""
    outputs, current = [], None
    for line in output.splitlines():
        if line.startswith("rule ") or line.startswith("localrule "):
            current = line.split()[1].rstrip(":")
        elif current == rule and line.strip().startswith("output:"):
            outputs.extend(path.strip() for path in line.split(":", 1)[1].split(","))
    return outputs


# run_job's flags for the real-job tests: short timeouts keep hang cells near 30 s, still long
# enough for 2 busy cores.
SHORT_JOB_TIMING = [
    "--pg-timeout-s",
    "10",
    "--stall-timeout-s",
    "5",
    "--term-delay-s",
    "2",
    "--kill-grace-s",
    "2",
    "--iterations",
    "12",
    "--job-timeout-s",
    "200",
]
