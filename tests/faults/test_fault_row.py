"""Adding a fault is adding a row to faults.FAULTS: pool validation, planning, the built-in
workload's injection and marker, adopt and scoring's evidence take it with no other change.

The row here is SIGHUP (a lost login session's hang-up), injected by the existing `send_signal`
mechanism; the report's acceptance of it is checked with the report's own tests.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from conftest import REPO
from faultloop.adopt.session import adopt
from faultloop.contracts import Manifest
from faultloop.core.cell import Cell, cell_name_pattern
from faultloop.faults import EXTERNAL_SIGNAL, FAULTS, RESTART, Fault, Recurrence, expected_restart
from faultloop.marker import firing_line, marker_times, read_injector_line, scheduled_line, strip_markers
from faultloop.plan import config
from faultloop.plan.pool import load_pool
from faultloop.score.evidence import cell_evidence
from faultloop.workflow.invocation import cell_targets, selected_cells

SIGHUP = Fault(
    "SIGHUP",
    13,
    EXTERNAL_SIGNAL,
    RESTART,
    "hang-up of a lost login session",
    hangs=False,
    injector="send_signal",
    fires_with="sending signal=",
    detail="{signal!r} to pid={pid}",
    signal=signal.SIGHUP,
    evidence=r"SIGHUP|hang-?up|signal 1\b",
    on_restart=Recurrence.PASSES,
    on_restart_why="a login session lost once: the restarted job's is another",
)
CELL = Cell("SIGHUP", 1, 5, 2)


@pytest.fixture(autouse=True)
def sighup_row(monkeypatch: pytest.MonkeyPatch) -> Fault:
    monkeypatch.setitem(FAULTS, SIGHUP.name, SIGHUP)
    return SIGHUP


def test_the_pool_and_planning_take_the_new_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # config.load reads config/config.yaml
    assert load_pool(pool_spec="SIGHUP:1:5:2 sighup:last:5:1", gpus_per_node=4) == [CELL, Cell("SIGHUP", 3, 5, 1)]
    settings = config.load({"pool": "SIGHUP:1:5:2 SIGKILL:0:5:2", "cells": CELL.name})
    pool = config.pool_cells(settings)
    assert selected_cells(settings, pool) == [CELL]
    assert cell_targets([CELL], tmp_path, rejudge=False) == ([CELL], [])
    assert re.fullmatch(cell_name_pattern(), CELL.name) and Cell.from_name(CELL.name) == CELL
    assert expected_restart("SIGHUP") == RESTART


def test_the_workload_injects_it_and_marks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from faultloop.run import spec, workload

    plan = spec.FaultPlan.from_env({"FAULT_TYPE": "SIGHUP", "FAULT_RANK": "1", "FAULT_AT_ITER": "5"})
    assert plan is not None and plan.fault is SIGHUP
    sent: list[signal.Signals] = []
    monkeypatch.setattr(workload, "_spawn_worker", sent.append)
    settings = workload.Settings(1, 1, 2, "127.0.0.1", 1, "node0", 30, 0.1, 15.0, 60.0, 8.0, "", False)
    trainer = workload.Trainer(settings, plan)
    trainer._housekeeping(5)  # the fault's iteration, no delay: scheduled and fired at once
    assert sent == [signal.SIGHUP]
    fired = firing_line(1, "SIGHUP", 5, device="cpu", pid=42)
    assert fired.endswith("firing fault SIGHUP at iteration 5: sending signal=<Signals.SIGHUP: 1> to pid=42")
    lines = [
        f"1: [2026-04-01 12:00:0{i}.000000] {text}"
        for i, text in enumerate([scheduled_line(1, "SIGHUP", 0, 5, 0), fired])
    ]
    assert marker_times(lines, 1)[1] is not None and not list(strip_markers(lines))


def test_adopt_reads_its_injector_line(tmp_path: Path) -> None:
    session = tmp_path / "fault_injection" / "s"
    folder = session / CELL.name / "logs" / "slurm"
    folder.mkdir(parents=True)
    (session / "experiments.tsv").write_text(
        f"JOB_ID\tFAULT_TYPE\tRANK\tITER\tNODES\tEXPERIMENT_DIR\n7\tSIGHUP\t1\t5\t2\t{session / CELL.name}\n"
    )
    injector = (
        "1: [2026-04-01 12:00:17,200] [CRITICAL] [nvidia_resiliency_ext.shared_utils.inject_fault] "
        "sending signal=<Signals.SIGHUP: 1> to pid=4242\n"
    )
    assert read_injector_line(injector).fires == ("SIGNAL_EXC", "SIGINT", "SIGKILL", "SIGTERM", "SIGSTOP", "SIGHUP")
    (folder / "7.0.1.main_workload.log").write_text(injector + "srun: error: gpu-03: task 1: Hangup\n")
    adopt(session, gpus_per_node=4)
    m = Manifest.read(session / CELL.name / "job.json")
    assert m.fault_type == "SIGHUP" and m.fault_fired and m.run_valid and m.state == "FAILED"
    (folder / "7.0.1.main_workload.log").write_text(injector.replace("SIGHUP: 1", "SIGKILL: 9"))
    adopt(session, gpus_per_node=4)
    m = Manifest.read(session / CELL.name / "job.json")
    assert not m.run_valid and "signal SIGKILL" in (m.invalid_reason or "")


def test_evidence_points_at_its_lines() -> None:
    log = ["0: iteration 4 done", "1: received SIGHUP, shutting down", "0: all good"]
    expected = cell_evidence(CELL, log, None).expected
    assert (expected[0].number, expected[0].why) == (2, "injected rank + fault signature")
