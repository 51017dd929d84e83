"""Log and FR analyzers run under a memory limit per process: going over is the analyzer's
recorded failure for the cell, and a cell whose dumps are all hostile still completes, scores and
reports why FR had nothing."""

from __future__ import annotations

import json
import os
import pickle
import resource
import shutil
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from conftest import NVRX_FR, TESTS, cell_manifest, needs_nvrx_dumps
from faultloop.analyze import limits, registry
from faultloop.analyze.analyzer import DumpsSource, Input, LogSource, Spec
from faultloop.analyze.running import Outcome, timed
from faultloop.cli import report
from faultloop.contracts import (
    FAILED,
    OK,
    FrVerdict,
    RunRecord,
    read_index,
    write_cell_scores,
    write_score_tables,
)
from faultloop.core import atomic, layout
from faultloop.core.cell import Cell
from faultloop.score.cells import score_analyzers
from faultloop.score.grade import Truth
from faultloop.score.tables import gather
from fr_synth import make_dump

HOSTILE = TESTS / "data" / "hostile_dumps"
SPECS = [Spec("builtin", "faultloop_fr", Input.DUMPS), Spec("torchfrtrace", "torchfrtrace", Input.DUMPS, timeout_s=120)]


def _verdict() -> tuple[FrVerdict, str, None, dict[str, str], dict[str, int]]:
    return FrVerdict(False, [3]), "text", None, {}, {}


def test_an_attempt_within_the_limit_returns_its_verdict() -> None:
    outcome = limits.run_limited(lambda: timed(_verdict), 4 << 30)
    assert outcome.error is None and outcome.verdict == FrVerdict(False, [3])


def test_going_over_the_limit_is_a_recorded_failure() -> None:
    def greedy() -> tuple[FrVerdict, str, None, dict[str, str]]:
        hoard = bytearray(2 << 30)  # 2 GiB against a 1 GiB limit
        return FrVerdict(False, [len(hoard)]), "", None, {}

    outcome = limits.run_limited(lambda: timed(greedy), 1 << 30)
    assert outcome.verdict is None
    assert outcome.error == "crashed: MemoryError: : went over its memory limit of 1 GiB (FAULTLOOP_ANALYZER_MEMORY_GB)"


def test_a_child_that_dies_is_a_recorded_failure() -> None:
    def dies() -> Outcome:
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")

    outcome = limits.run_limited(dies, 4 << 30)
    assert outcome.verdict is None
    assert outcome.error == "its process killed by SIGKILL before it answered (memory limit 4 GiB)"


def test_a_command_run_in_this_process_gives_the_address_space_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`faultloop logsage` and `fr` hold their process to the limit while they read; called in
    another program's process (this test's), they leave it as it was, so what it starts later (a
    browser reserving tens of GiB of address space) is not held to an analyzer's limit."""
    from faultloop.cli import fr as fr_cli
    from faultloop.cli import logsage as logsage_cli

    monkeypatch.setenv(limits.ENV, "0.5")
    before = resource.getrlimit(resource.RLIMIT_AS)
    log = tmp_path / "job.log"
    log.write_text("[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert logsage_cli.main(["--log-path", str(log), "--format", "json"]) == 0
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    (tmp_path / "dumps").mkdir()
    for rank in range(2):
        (tmp_path / "dumps" / f"_dump_{rank}").write_bytes(pickle.dumps(make_dump(2, 4, 10 + rank), protocol=2))
    assert fr_cli.main(["--fr-path", str(tmp_path / "dumps"), "--world-size", "2", "--format", "json"]) == 0
    assert resource.getrlimit(resource.RLIMIT_AS) == before


def test_the_limit_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(limits.ENV, "2.5")
    assert limits.memory_limit() == int(2.5 * (1 << 30))
    monkeypatch.setenv(limits.ENV, "0")
    assert limits.memory_limit() is None
    monkeypatch.setenv(limits.ENV, "lots")
    with pytest.raises(ValueError, match="FAULTLOOP_ANALYZER_MEMORY_GB='lots'"):
        limits.memory_limit()
    monkeypatch.delenv(limits.ENV)
    assert 0 < (limits.memory_limit() or 0) <= limits.DEFAULT_BYTES


@needs_nvrx_dumps
def test_an_fr_analyzer_over_the_limit_fails_for_the_cell_only(tmp_path: Path) -> None:
    """The fr_analysis rule's command under a 300 MiB limit: torchfrtrace (importing torch maps
    more) is a recorded failure naming the limit, the builtin reader still names ranks 9 and 14."""
    cell = Cell("GPU_ERROR", 9, 5, 4)
    d = tmp_path / cell.name
    shutil.copytree(NVRX_FR / "gpu_error_2nd", d / "checkpoints")
    cell_manifest(cell).write(d / layout.MANIFEST)
    specs = registry.specs_json(SPECS)
    argv = ["--manifest", str(d / layout.MANIFEST), "--index", str(d / layout.FR_INDEX), "--specs", specs]
    env = {**os.environ, limits.ENV: str(300 / 1024)}
    proc = subprocess.run(
        [sys.executable, "-m", "faultloop.cli", "fr-analyzers", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    builtin, torch = (
        RunRecord.read(d / "analysis" / "fr" / name / layout.RUN_JSON) for name in ("builtin", "torchfrtrace")
    )
    assert builtin.status == OK
    assert FrVerdict.read(d / "analysis" / "fr" / "builtin" / layout.FR_JSON).suspect_ranks == [9, 14]
    assert torch.status == FAILED
    assert torch.error == (
        "torchfrtrace could not read the dump set (exited with status 1): "
        "went over its memory limit of 0.292969 GiB (FAULTLOOP_ANALYZER_MEMORY_GB)"
    )


def test_a_cell_of_hostile_dumps_completes_and_the_report_says_why(tmp_path: Path) -> None:
    session = tmp_path / "session"
    cell = Cell("SIGKILL", 1, 5, 1)
    d = session / cell.name
    shutil.copytree(HOSTILE, d / "checkpoints")
    job = cell_manifest(cell, "job-1", fault_fired_time=100.0, end_time=110.0)
    job.write(d / layout.MANIFEST)
    atomic.write_atomic(d / layout.STRIPPED_LOG, "0: step 1\n1: step 1\nsrun: error: node-001: task 1: Killed\n")
    # the log analyzers as the logsage rule runs them (each in its child under the memory limit)
    kinds = {"builtin": "faultloop", "first_error": "first_error"}
    log_specs = [registry.spec_from_config(Input.LOG, name, {"kind": kind}, {}) for name, kind in kinds.items()]
    log_source = LogSource(d / layout.STRIPPED_LOG, session / ".staging")
    assert [r.status for r in registry.run_cell(Input.LOG, log_specs, log_source, d)] == [OK, OK]

    source = DumpsSource(str(d / "checkpoints"), 4, 4, 32, d / layout.MANIFEST)
    records = registry.run_cell(Input.DUMPS, SPECS, source, d)
    builtin, torch = records
    assert builtin.status == OK  # refusals are its answer: no dump readable
    fr = FrVerdict.read(d / "analysis" / "fr" / "builtin" / layout.FR_JSON)
    assert fr.no_dumps and len(fr.skipped_files) == len(list(HOSTILE.glob("_dump_*")))
    assert torch.status == FAILED and torch.error.startswith("no dump torchfrtrace may read (13 unsafe or unreadable)")

    scores = score_analyzers(d, Truth(cell, 4, 32), job, judge_mode="code", llm=None)
    write_cell_scores(scores, cell.name, d / layout.SCORE_JSON)
    by_name = {s.analyzer: s for s in scores}
    assert by_name["builtin"].grade("rank_primary") == "true"  # the log analyzers and scoring go on
    assert by_name["fr:builtin"].judge_notes.startswith(
        "No FR dump readable: 13 refused (_dump_0: refused before unpickling: LONG_BINPUT"
    )
    assert by_name["fr:torchfrtrace"].analyzer_error.startswith("no dump torchfrtrace may read")

    records_path = session / layout.SCORE_RECORDS
    write_score_tables(gather(session, [cell]), session / layout.SCORES_TSV, records_path)
    assert report.main(["--records", str(records_path), "--session-dir", str(session)]) == 0
    md = (session / layout.REPORT_MD).read_text()
    assert "Dumps present but none readable" in md
    assert "refused before unpickling: LONG_BINPUT" in md  # the first refused dump's bound
    assert "no dump torchfrtrace may read (13 unsafe or unreadable)" in md  # under analyzer failures


def test_a_log_analyzer_over_the_limit_fails_for_the_cell_only(tmp_path: Path) -> None:
    """The logsage rule's command under a 0.5 GiB limit: a command analyzer that takes 2 GiB is a
    recorded failure naming the limit, faultloop's logsage beside it still reads the log."""
    cell_dir = tmp_path / "cell"
    log = cell_dir / layout.STRIPPED_LOG
    atomic.write_atomic(log, "0: step 1\n1: step 1\n0: RuntimeError: CUDA error: an illegal memory access\n")
    greedy = {"kind": "command", "command": f"{sys.executable} -c 'bytearray(2 << 30)' {{log}}"}
    specs = [registry.spec_from_config(Input.LOG, "faultloop", None, {})]
    specs.append(registry.spec_from_config(Input.LOG, "greedy", greedy, {}))
    index = cell_dir / layout.LOGSAGE_INDEX
    argv = ["run-cell", "--log", str(log), "--index", str(index), "--specs", registry.specs_json(specs)]
    proc = subprocess.run(
        [sys.executable, "-m", "faultloop.cli", "analyzers", *argv],
        env={**os.environ, limits.ENV: "0.5"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    records = {record.analyzer: record for record in read_index(index)}
    assert records["faultloop"].status == OK, records["faultloop"].error
    assert records["greedy"].status == FAILED
    assert records["greedy"].error == (
        "exited with status 1: went over its memory limit of 0.5 GiB (FAULTLOOP_ANALYZER_MEMORY_GB)"
    )
    assert "MemoryError" in records["greedy"].stderr_tail


def test_faultloop_logsage_holds_itself_to_the_limit(tmp_path: Path) -> None:
    """The command line reads a log in its own process, under the limit like fr: 0.1 GiB is room
    enough (logsage streams), 0.02 GiB is not, and it says so in one line."""
    log = tmp_path / "job.log"
    log.write_text("0: step 1\n" * 100_000 + "0: RuntimeError: CUDA error: an illegal memory access\n")
    argv = [sys.executable, "-m", "faultloop.cli", "logsage", "--log-path", str(log), "--format", "json"]

    def run(gib: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, env={**os.environ, limits.ENV: gib}, capture_output=True, text=True, timeout=120)

    within = run("0.1")
    assert within.returncode == 0, within.stderr
    assert json.loads(within.stdout)["primary_ranks"] == [0]
    over = run("0.02")
    assert over.returncode == 1
    assert over.stderr == "faultloop logsage: went over its memory limit of 0.02 GiB (FAULTLOOP_ANALYZER_MEMORY_GB)\n"


def test_faultloop_fr_holds_itself_to_the_limit(tmp_path: Path) -> None:
    """The command line reads dumps in its own process: over the limit it says so in one line."""
    (tmp_path / "_dump_0").write_bytes(pickle.dumps(make_dump(2, 100_000, 200_000), protocol=2))  # 230 MB to read
    argv = [sys.executable, "-m", "faultloop.cli", "fr", "--fr-path", str(tmp_path), "--format", "json"]

    def run(gib: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, env={**os.environ, limits.ENV: gib}, capture_output=True, text=True, timeout=300)

    over = run("0.1")
    assert over.returncode == 1
    assert over.stderr == "faultloop fr: went over its memory limit of 0.1 GiB (FAULTLOOP_ANALYZER_MEMORY_GB)\n"
    assert run("0").returncode == 0
