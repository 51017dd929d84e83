"""Adopting an NVRx session: the tracking file, what the artifacts show, upstream's verdicts, and the
workflow re-judging an adopted session without planning a training job."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import TESTS, copy_workflow, planned, snakemake
from faultloop.adopt.session import (
    ADOPTED,
    KEPT,
    NOT_RUN,
    AdoptError,
    Disagreement,
    adopt,
    disagreements,
    parse_report,
    upstream_report,
    upstream_verdicts,
)
from faultloop.adopt.tracking import read_tracking
from faultloop.cli import main as cli
from faultloop.contracts import ADOPTED_WORKLOAD, DIMENSIONS, Manifest, ManifestError

DATA = TESTS / "data" / "logs"
HEADER = "JOB_ID\tFAULT_TYPE\tRANK\tITER\tNODES\tEXPERIMENT_DIR\n"
REPORT_HEADER = (
    "| # | FAULT_TYPE | NODES | RANK | ITER | JOB_ID | STATE | run_valid | restart_correct | rank_primary "
    "| rank_any | fault_described | fr_rank_correct | judge_notes |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
)
# A Megatron job's lines as upstream's srun --label writes them: the scheduling marker, NVRx's
# injector logger at fire time, and what the other ranks print afterwards.
SCHEDULED = "1: [2026-04-01 12:00:02.123456] FAULT INJECTION: Rank 1 will inject fault SIGKILL at 2026-04-01 12:00:17\n"
INJECTOR = (
    "1: [2026-04-01 12:00:17,200] [CRITICAL] [nvidia_resiliency_ext.shared_utils.inject_fault] "
    "sending signal=<Signals.SIGKILL: 9> to pid=4242\n"
)
TRAINING = "0: [2026-04-01 12:00:01.000000] iteration        4/      30 | lm loss: 1.0E+01\n"
SRUN_KILLED = "srun: error: gpu-03: task 1: Killed\n"


def make_session(root: Path, rows: list[str], name: str = "20260401_120000") -> Path:
    session = root / "fault_injection" / name
    session.mkdir(parents=True)
    (session / "experiments.tsv").write_text(HEADER + "".join(r + "\n" for r in rows))
    return session


def make_run(
    session: Path, cell: str, job_id: str, log: str | None, *, launch_out: str | None = None, dumps: int = 0
) -> Path:
    """A cell folder as upstream's loop leaves it."""
    folder = session / cell
    for sub in ("logs/slurm", "checkpoints", "tensorboard"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    if log is not None:
        (folder / f"logs/slurm/{job_id}.0.1.main_workload.log").write_text(log)
    if launch_out is not None:
        (folder / f"logs/slurm/{job_id}.launch.out").write_text(launch_out)
    for rank in range(dumps):
        (folder / f"checkpoints/_dump_{rank}").write_bytes(b"\x80\x04N.")
    return folder


def one_cell(
    tmp_path: Path,
    log: str | None,
    *,
    launch_out: str | None = None,
    cell: str = "n2_SIGKILL_r1_i5",
    row: str = "51234\tSIGKILL\t1\t5\t2",
) -> tuple[Path, Path]:
    session = make_session(tmp_path, [f"{row}\t{cell}"])
    return session, make_run(session, cell, "51234", log, launch_out=launch_out)


def manifest(folder: Path) -> Manifest:
    return Manifest.read(folder / "job.json")


# ---- the tracking file ------------------------------------------------------------------------


def test_every_bad_tracking_row_is_named_in_one_error(tmp_path, capsys):
    session = make_session(
        tmp_path,
        [
            "51234\tSIGKILL\t1\t5\t2\tn2_SIGKILL_r1_i5",
            "51235\tGPU_MELT\t1\t5\t2\tn2_GPU_MELT_r1_i5",
            "51236\tSEGFAULT\t99\tfive\t2\tn2_SEGFAULT_r99_i5",
            "51237\tGPU_SLEEP\t0\t5\t2\t/home/alice/elsewhere/n2_GPU_SLEEP_r0_i5",
            "51238\tSIGKILL\t1\t5\t2\tn2_SIGKILL_r1_i5",
            "5123*\tOS_ABORT\t1\t5\t2\tn2_OS_ABORT_r1_i5",
            "51240\tSIGTERM\t1\t5\t2",
            "51241\tSIGINT\t1\t5\t2\tn2_SIGTERM_r1_i5",
            "51242\tLOCK_GIL\t1\t5\t2\t../other_session/n2_LOCK_GIL_r1_i5",
        ],
    )
    make_run(session, "n2_SIGKILL_r1_i5", "51234", SCHEDULED + INJECTOR)
    with pytest.raises(AdoptError) as caught:
        adopt(session, gpus_per_node=4)
    message = str(caught.value)
    tracking = session / "experiments.tsv"
    assert message.startswith(f"cannot adopt {session}:")
    assert f"{tracking} line 3: unknown fault type 'GPU_MELT'" in message
    assert f"{tracking} line 4: ITER must be a non-negative integer, got 'five'" in message
    assert f"{tracking} line 4: RANK 99 is out of range" in message
    assert (
        f"{tracking} line 5: EXPERIMENT_DIR /home/alice/elsewhere/n2_GPU_SLEEP_r0_i5 is outside the session" in message
    )
    assert f"{tracking} line 6: duplicate cell n2_SIGKILL_r1_i5 (first at {tracking} line 2)" in message
    assert f"{tracking} line 7: JOB_ID must be a job id" in message
    assert f"{tracking} line 8: expected 6 tab-separated fields, got 5" in message
    assert f"{tracking} line 9: EXPERIMENT_DIR n2_SIGTERM_r1_i5 is not this cell's folder" in message
    assert f"{tracking} line 10: EXPERIMENT_DIR ../other_session/n2_LOCK_GIL_r1_i5 is outside the session" in message
    assert len(caught.value.problems) == 9
    assert not (session / "n2_SIGKILL_r1_i5" / "job.json").exists(), "nothing is written from a bad session"
    # The CLI: the same single message, non-zero exit.
    assert cli.main(["adopt", str(session)]) == 1
    err = capsys.readouterr().err
    assert err.count("cannot adopt") == 1 and "line 3: unknown fault type 'GPU_MELT'" in err


def test_missing_tracking_file_and_missing_columns(tmp_path):
    with pytest.raises(AdoptError, match=r"experiments.tsv: no such tracking file"):
        read_tracking(tmp_path, gpus_per_node=4)
    (tmp_path / "experiments.tsv").write_text("JOB_ID\tFAULT_TYPE\tRANK\tNODES\n51234\tSIGKILL\t1\t2\n")
    with pytest.raises(AdoptError, match=r"experiments.tsv line 1: missing column\(s\) ITER, EXPERIMENT_DIR"):
        read_tracking(tmp_path, gpus_per_node=4)
    (tmp_path / "experiments.tsv").write_text(HEADER)
    with pytest.raises(AdoptError, match="no experiments"):
        read_tracking(tmp_path, gpus_per_node=4)


def test_a_session_copied_off_its_cluster_keeps_its_rows(tmp_path):
    session = make_session(
        tmp_path,
        [
            "51234\tSIGKILL\t1\t5\t2\t/lustre/alice/nvrx-attr-experiments/fault_injection/20260401_120000/n2_SIGKILL_r1_i5",
        ],
    )
    [run] = read_tracking(session, gpus_per_node=4)
    assert run.cell_dir == session.resolve() / "n2_SIGKILL_r1_i5" and run.job_id == "51234"


# ---- what the artifacts show --------------------------------------------------------------------


def test_missing_and_empty_folders_are_listed_as_not_run(tmp_path):
    session = make_session(
        tmp_path,
        [
            "51234\tSIGKILL\t1\t5\t2\tn2_SIGKILL_r1_i5",
            "51235\tGPU_SLEEP\t0\t5\t2\tn2_GPU_SLEEP_r0_i5",
            "51236\tSEGFAULT\t1\t5\t2\tn2_SEGFAULT_r1_i5",
        ],
    )
    ran = make_run(session, "n2_SIGKILL_r1_i5", "51234", TRAINING + SCHEDULED + INJECTOR + SRUN_KILLED)
    empty = make_run(session, "n2_GPU_SLEEP_r0_i5", "51235", None)  # submitted, never started
    adoption = adopt(session, gpus_per_node=4)
    status = {c.run.cell.name: c.status for c in adoption.cells}
    assert status == {"n2_SIGKILL_r1_i5": ADOPTED, "n2_GPU_SLEEP_r0_i5": NOT_RUN, "n2_SEGFAULT_r1_i5": NOT_RUN}
    assert [c.name for c in adoption.pool] == ["n2_SIGKILL_r1_i5", "n2_GPU_SLEEP_r0_i5", "n2_SEGFAULT_r1_i5"]
    assert (ran / "job.json").is_file()
    assert list(empty.rglob("*.json")) == [] and not (session / "n2_SEGFAULT_r1_i5").exists()


def test_a_fired_fault_from_megatron_and_nvrx_markers(tmp_path):
    log = TRAINING + SCHEDULED + INJECTOR + (DATA / "nccl_sigkill_8r.log").read_text()
    session, folder = one_cell(tmp_path, log, launch_out=SRUN_KILLED)
    (folder / "checkpoints/_dump_0").write_bytes(b"x")
    adoption = adopt(session, gpus_per_node=4)
    m = manifest(folder)
    assert m.adopted and m.workload == ADOPTED_WORKLOAD
    assert (m.fault_type, m.fault_rank, m.fault_iter, m.nodes, m.world_size) == ("SIGKILL", 1, 5, 2, 8)
    assert m.fault_fired and m.run_valid and m.invalid_reason is None
    assert m.state == "FAILED" and m.state_evidence.endswith("srun: error: node-002: task 6: Killed")
    assert m.main_log == "logs/slurm/51234.0.1.main_workload.log"
    assert m.launch_out == "logs/slurm/51234.launch.out"
    assert m.fault_scheduled_time is not None
    assert m.node_names == ["node-001", "node-002", "gpu-03"]
    assert adoption.cells[0].dumps == 1 and not adoption.cells[0].infra


def test_faultloops_own_fire_line_counts_as_fired(tmp_path):
    log = (
        "0: [2026-12-01 09:08:10.435334] FAULT INJECTION: Rank 1 will inject fault SIGKILL at x\n"
        "0: [2026-12-01 09:08:10.435409] FAULT INJECTION: Rank 1 firing fault SIGKILL at iteration 5: "
        "sending signal=<Signals.SIGKILL: 9> to pid=1\n"
        "0: torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
    )
    session, folder = one_cell(tmp_path, log)
    adopt(session, gpus_per_node=4)
    m = manifest(folder)
    assert m.fault_fired and m.state == "FAILED" and "ChildFailedError" in m.state_evidence
    assert m.fault_fired_time is not None and m.fault_fired_time > m.fault_scheduled_time


def test_a_scheduled_fault_that_never_fired_is_an_infrastructure_failure(tmp_path):
    """Upstream calls such a run valid (its marker is there) and scores it as an attribution miss."""
    session, folder = one_cell(tmp_path, TRAINING + SCHEDULED, launch_out=SRUN_KILLED)
    adoption = adopt(session, gpus_per_node=4)
    m = manifest(folder)
    assert not m.fault_fired and not m.run_valid and m.state == "FAILED"
    assert "scheduled" in m.invalid_reason and "upstream counted this run as valid" in m.invalid_reason
    assert "infrastructure failure" in m.invalid_reason
    assert adoption.cells[0].infra and Manifest.read(folder / "infra_failure.json") == m


@pytest.mark.parametrize(
    "line, names",
    [
        ("1: [2026-04-01 12:00:02.123456] FAULT INJECTION: Rank 3 will inject fault SIGKILL at x\n", "rank 3"),
        ("1: [2026-04-01 12:00:02.123456] FAULT INJECTION: Rank 1 will inject fault SEGFAULT at x\n", "fault SEGFAULT"),
        ("1: [CRITICAL] [nvidia_resiliency_ext.shared_utils.inject_fault] raising segmentation fault\n", "SEGFAULT"),
        (
            "1: [CRITICAL] [nvidia_resiliency_ext.shared_utils.inject_fault] sending signal=<Signals.SIGTERM: 15> to pid=9\n",
            "signal SIGTERM",
        ),
    ],
)
def test_a_marker_that_contradicts_the_tracking_file_makes_the_run_invalid(tmp_path, line, names):
    session, folder = one_cell(tmp_path, TRAINING + line + INJECTOR, launch_out=SRUN_KILLED)
    adoption = adopt(session, gpus_per_node=4)
    m = manifest(folder)
    assert not m.run_valid and "contradicts experiments.tsv" in m.invalid_reason and names in m.invalid_reason
    assert not adoption.cells[0].infra and not (folder / "infra_failure.json").exists(), (
        "a wrong fault is no infra failure"
    )


@pytest.mark.parametrize(
    "evidence, state",
    [
        ("slurm_time_limit.log", "TIMEOUT"),
        ("slurm_preempted.log", "PREEMPTED"),
        ("slurm_cancelled.log", "CANCELLED"),
        ("slurm_oom_kill.log", "OUT_OF_MEMORY"),
        ("srun: error: gpu-03: tasks 0-7: Exited with exit code 1\n", "FAILED"),
        (
            "slurmstepd: error: *** STEP 51234.0 ON gpu-03 CANCELLED AT 2026-04-01T12:30:00 DUE TO NODE FAILURE ***\n",
            "NODE_FAIL",
        ),
    ],
)
def test_the_end_state_comes_from_the_schedulers_lines(tmp_path, evidence, state):
    text = (DATA / evidence).read_text() if evidence.endswith(".log") else evidence
    # The launch output also has srun's task errors: a cancellation still says how the job ended.
    session, folder = one_cell(tmp_path, TRAINING + SCHEDULED + INJECTOR, launch_out=text + SRUN_KILLED)
    adopt(session, gpus_per_node=4)
    m = manifest(folder)
    assert m.state == state and m.state_evidence.startswith("logs/slurm/51234.launch.out:")
    assert "gpu-03" in m.node_names or "cpu-07" in m.node_names


def test_a_completed_job_and_a_job_whose_end_nothing_shows(tmp_path):
    session, folder = one_cell(tmp_path, TRAINING + "3: [2026-04-01 12:09:00.000000] [after training is done]\n")
    adoption = adopt(session, gpus_per_node=4)
    m = manifest(folder)
    assert (
        m.state == "COMPLETED" and not m.run_valid and m.invalid_reason == "no fault-injection marker in the main log"
    )
    assert not adoption.cells[0].infra
    (folder / "logs/slurm/51234.0.1.main_workload.log").write_text(TRAINING + SCHEDULED + INJECTOR)
    adoption = adopt(session, gpus_per_node=4)
    m = manifest(folder)
    assert m.state == "UNKNOWN" and m.state_evidence is None and m.run_valid
    assert adoption.cells[0].note == "no line shows how the job ended"


def test_a_run_without_a_main_log_is_not_valid(tmp_path):
    """Upstream's April 2026 session: jobs that died at container start, only the launch output."""
    session, folder = one_cell(
        tmp_path,
        None,
        launch_out="pyxis: importing docker image ...\nsrun: error: gpu-03: task 0: Exited with exit code 1\n",
    )
    adoption = adopt(session, gpus_per_node=4)
    m = manifest(folder)
    assert m.main_log is None and not m.run_valid and m.state == "FAILED"
    assert m.invalid_reason.startswith("no main log logs/slurm/51234.*.1.main_workload.log")
    assert adoption.cells[0].infra


def test_run_jobs_manifest_is_never_replaced_and_adopting_again_rewrites_nothing(tmp_path):
    session = make_session(
        tmp_path, ["51234\tSIGKILL\t1\t5\t2\tn2_SIGKILL_r1_i5", "51235\tSEGFAULT\t1\t5\t2\tn2_SEGFAULT_r1_i5"]
    )
    ours = make_run(session, "n2_SIGKILL_r1_i5", "51234", SCHEDULED + INJECTOR)
    theirs = make_run(session, "n2_SEGFAULT_r1_i5", "51235", SCHEDULED.replace("SIGKILL", "SEGFAULT"))
    written_by_run_job = Manifest(
        job_id="51235",
        workload="cpu_gloo",
        fault_type="SEGFAULT",
        fault_rank=1,
        fault_iter=5,
        nodes=2,
        gpus_per_node=4,
        world_size=8,
        state="FAILED",
        main_log=None,
        launch_out=None,
        fault_fired=True,
        run_valid=True,
        invalid_reason=None,
    )
    written_by_run_job.write(theirs / "job.json")
    before = (theirs / "job.json").read_bytes()
    status = {c.run.cell.name: c.status for c in adopt(session, gpus_per_node=4).cells}
    assert status == {"n2_SIGKILL_r1_i5": ADOPTED, "n2_SEGFAULT_r1_i5": KEPT}
    assert (theirs / "job.json").read_bytes() == before
    stamp = (ours / "job.json").stat().st_mtime_ns
    adopt(session, gpus_per_node=4)
    assert (ours / "job.json").stat().st_mtime_ns == stamp, "an unchanged manifest is not rewritten"
    # New evidence (the launch output copied over later) refreshes an adopted manifest.
    (ours / "logs/slurm/51234.launch.out").write_text(SRUN_KILLED)
    adopt(session, gpus_per_node=4)
    assert manifest(ours).state == "FAILED"


def test_dry_run_writes_nothing(tmp_path, capsys):
    session, folder = one_cell(tmp_path, SCHEDULED + INJECTOR)
    assert cli.main(["adopt", str(session), "--dry-run", "--gpus-per-node", "4"]) == 0
    out = capsys.readouterr().out
    assert "n2_SIGKILL_r1_i5" in out and "adopted" in out and "fault fired" in out
    assert f"--until score --config adopt={session.resolve()} gpus_per_node=4" in out
    assert not (folder / "job.json").exists()


# ---- upstream's verdicts ----------------------------------------------------------------------


def verdict_row(
    i: int, fault: str, rank: int, job: str, restart: str, notes: str = "ok", *, nodes: int = 2, iter_: int = 5
) -> str:
    return (
        f"| {i} | {fault} | {nodes} | {rank} | {iter_} | {job} | FAILED | true | {restart} | true | true "
        f"| partial | rank | {notes} |\n"
    )


def test_upstream_verdicts_are_read_from_its_report(tmp_path):
    session = make_session(
        tmp_path, ["51234\tSIGKILL\t1\t5\t2\tn2_SIGKILL_r1_i5", "51235\tGPU_SLEEP\t0\t5\t2\tn2_GPU_SLEEP_r0_i5"]
    )
    make_run(session, "n2_SIGKILL_r1_i5", "51234", SCHEDULED + INJECTOR)
    report = (
        "# Fault Injection Experiment Report\n\nSession: 20260401_120000\n\n"
        + REPORT_HEADER
        + verdict_row(1, "SIGKILL", 1, "51200", "false", "first run")
        + verdict_row(2, "GPU_SLEEP", 0, "51235", "true", r"timeout \| not the sleep")
        + verdict_row(3, "SIGKILL", 1, "51234", "false", "LLM issued RESTART")
        + "\nDone.\n"
    )
    (session / "experiments_report.md").write_text(report)
    adoption = adopt(session, gpus_per_node=4)
    assert (session / "experiments_report.md").read_text() == report, "upstream's report is only read"
    verdicts = upstream_verdicts(session)
    assert verdicts == adoption.verdicts and set(verdicts) == {"n2_SIGKILL_r1_i5", "n2_GPU_SLEEP_r0_i5"}
    sigkill = verdicts["n2_SIGKILL_r1_i5"]
    assert sigkill.job_id == "51234" and sigkill.judge_notes == "LLM issued RESTART", "upstream appends: last row wins"
    assert sigkill.dimensions() == {
        "run_valid": "true",
        "restart_correct": "false",
        "rank_primary": "true",
        "rank_any": "true",
        "fault_described": "partial",
        "fr_rank_correct": "rank",
    }
    assert verdicts["n2_GPU_SLEEP_r0_i5"].judge_notes == "timeout | not the sleep"
    with open(session / "upstream_verdicts.tsv") as handle:
        assert len(list(csv.DictReader(handle, delimiter="\t"))) == 2


def test_faultloops_own_report_is_never_taken_for_upstreams(tmp_path):
    """A session adopted without upstream's report gets faultloop's under the same name later."""
    session = make_session(tmp_path, ["51234\tSIGKILL\t1\t5\t2\tn2_SIGKILL_r1_i5"])
    make_run(session, "n2_SIGKILL_r1_i5", "51234", SCHEDULED + INJECTOR)
    assert not adopt(session, gpus_per_node=4).report_found
    (session / "experiments_report.md").write_text(REPORT_HEADER + verdict_row(1, "SIGKILL", 1, "51234", "true"))
    assert upstream_report(session) is None
    again = adopt(session, gpus_per_node=4)
    assert not again.report_found and again.verdicts == {} and upstream_verdicts(session) == {}
    # With upstream's report there at the first adoption, it stays upstream's.
    other = make_session(tmp_path, ["51234\tSIGKILL\t1\t5\t2\tn2_SIGKILL_r1_i5"], name="20260402_080000")
    (other / "experiments_report.md").write_text(REPORT_HEADER + verdict_row(1, "SIGKILL", 1, "51234", "false"))
    adopt(other, gpus_per_node=4)
    assert upstream_report(other) == other / "experiments_report.md"
    assert adopt(other, gpus_per_node=4).verdicts["n2_SIGKILL_r1_i5"].grades["restart_correct"] == "false"
    (other / "adoption.json").write_text("{not json")
    with pytest.raises(AdoptError, match=r"adoption\.json: not an adoption record"):
        adopt(other, gpus_per_node=4)


def test_a_broken_report_row_is_named_with_the_tracking_problems(tmp_path):
    session = make_session(
        tmp_path, ["51234\tSIGKILL\t1\t5\t2\tn2_SIGKILL_r1_i5", "51234\tSIGKILL\t1\t5\t2\tn2_SIGKILL_r1_i5"]
    )
    (session / "experiments_report.md").write_text(
        REPORT_HEADER + "| 1 | SIGKILL | 2 | 1 | 5 | 51234 | FAILED | true |\n" + verdict_row(2, "NOPE", 1, "1", "true")
    )
    with pytest.raises(AdoptError) as caught:
        adopt(session, gpus_per_node=4)
    message = str(caught.value)
    assert "experiments.tsv line 3: duplicate cell n2_SIGKILL_r1_i5" in message
    assert "experiments_report.md line 3: expected 14 columns" in message
    assert "experiments_report.md line 4: unknown fault type 'NOPE'" in message


def test_a_report_without_upstreams_table_has_no_verdicts(tmp_path):
    path = tmp_path / "experiments_report.md"
    path.write_text(
        "# notes\n\n| FAULT_TYPE | NODES | RANK | restart_correct |\n|---|---|---|---|\n| SIGKILL | 2 | 1 | true |\n"
    )
    assert parse_report(path, gpus_per_node=4) == ({}, [])
    assert upstream_verdicts(tmp_path) == {}


def test_disagreements_per_cell_and_dimension(tmp_path):
    session = make_session(tmp_path, ["51234\tSIGKILL\t1\t5\t2\tn2_SIGKILL_r1_i5"])
    (session / "experiments_report.md").write_text(
        REPORT_HEADER + verdict_row(1, "SIGKILL", 1, "51234", "false") + verdict_row(2, "GPU_SLEEP", 0, "51235", "N/A")
    )
    verdicts = adopt(session, gpus_per_node=4).verdicts
    ours = {
        "n2_SIGKILL_r1_i5": {
            "run_valid": "true",
            "restart_correct": "true",
            "rank_primary": "True",
            "rank_any": "true",
            "fault_described": "true",
            "fr_rank_correct": "rank",
            "fault_type_correct": "true",
        },
        "n2_GPU_SLEEP_r0_i5": {
            "run_valid": "true",
            "restart_correct": "n/a",
            "rank_primary": "true",
            "rank_any": "true",
            "fault_described": "partial",
            "fr_rank_correct": "rank",
        },
        "n2_SEGFAULT_r1_i5": {"restart_correct": "false"},
    }
    assert disagreements(verdicts, ours) == [
        Disagreement("n2_SIGKILL_r1_i5", "restart_correct", "false", "true"),
        Disagreement("n2_SIGKILL_r1_i5", "fault_described", "partial", "true"),
    ]


# ---- the workflow ------------------------------------------------------------------------------


def test_workflow_fails_on_a_corrupt_tracking_file_before_planning(workflow_copy, tmp_path, capsys):
    session = make_session(
        tmp_path,
        ["51234\tSIGKILL\t1\t5\t2\tn2_SIGKILL_r1_i5", "51235\tGPU_SLEEP\tzero\t5\t2\t/elsewhere/n2_GPU_SLEEP_r0_i5"],
    )
    make_run(session, "n2_SIGKILL_r1_i5", "51234", SCHEDULED + INJECTOR)
    assert cli.main(["adopt", str(session)]) == 1
    output = capsys.readouterr().err
    assert output.count("cannot adopt") == 1
    assert f"{session}/experiments.tsv line 3: RANK must be an integer, 'mid' or 'last', got 'zero'" in output
    assert "EXPERIMENT_DIR /elsewhere/n2_GPU_SLEEP_r0_i5 is outside the session" in output
    result = snakemake(
        workflow_copy, "--profile", "profiles/local", "--until", "score", "--config", f"adopt={session}", check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "not adopted yet" in output
    assert "Job stats" not in output and not (session / "n2_SIGKILL_r1_i5" / "job.json").exists()


def test_workflow_rejudges_an_adopted_session_and_keeps_upstreams_report(workflow_copy, tmp_path):
    session = make_session(
        tmp_path, ["51234\tSIGKILL\t1\t5\t2\tn2_SIGKILL_r1_i5", "51235\tGPU_SLEEP\t0\t5\t2\tn2_GPU_SLEEP_r0_i5"]
    )
    make_run(session, "n2_SIGKILL_r1_i5", "51234", SCHEDULED + INJECTOR, launch_out=SRUN_KILLED)
    report = REPORT_HEADER + verdict_row(1, "SIGKILL", 1, "51234", "false")
    (session / "experiments_report.md").write_text(report)
    mixed = snakemake(
        workflow_copy,
        "-n",
        "--profile",
        "profiles/local",
        "--until",
        "score",
        "--config",
        f"adopt={session}",
        "pool=SIGKILL:1:5:2",
        check=False,
    )
    assert mixed.returncode != 0 and "drop 'pool' and 'pool_file'" in mixed.stdout + mixed.stderr
    adopt(session, gpus_per_node=4)
    dry = snakemake(
        workflow_copy, "-n", "--profile", "profiles/local", "--until", "score", "--config", f"adopt={session}"
    )
    counts = planned(dry.stdout + dry.stderr)
    assert "run_job" not in counts and counts["logsage"] == 1 and counts["score"] == 1
    snakemake(workflow_copy, "--profile", "profiles/local", "--until", "score", "--config", f"adopt={session}")
    with open(session / "scores.tsv") as handle:
        rows = {r["CELL"]: r for r in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)}
    assert rows["n2_SIGKILL_r1_i5"]["STATUS"] == "scored" and rows["n2_SIGKILL_r1_i5"]["JOB_ID"] == "51234"
    assert rows["n2_GPU_SLEEP_r0_i5"]["STATE"] == "NOT_RUN"
    assert (session / "experiments_report.md").read_text() == report
    again = snakemake(
        workflow_copy, "-n", "--profile", "profiles/local", "--until", "score", "--config", f"adopt={session}"
    )
    assert planned(again.stdout + again.stderr) == {"total": 0}, "re-planning re-runs no analysis"
    # The full report: upstream's own stays untouched, faultloop's has its own name and shows
    # upstream's recorded verdict beside the code's grades, a star where they differ.
    snakemake(workflow_copy, "--profile", "profiles/local", "--config", f"adopt={session}")
    assert (session / "experiments_report.md").read_text() == report
    mine = (session / "faultloop_report.md").read_text()
    header = next(line for line in mine.splitlines() if line.startswith("| # | FAULT_TYPE"))
    assert header.endswith("| judge_notes | upstream judge |")
    row = next(line for line in mine.splitlines() if line.startswith("| 1 | SIGKILL"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[14].startswith("valid=true restart=false") and "*" in cells[14], cells
    assert "## Upstream's LLM judge vs faultloop's code scorer" in mine
    assert "| n2_SIGKILL_r1_i5 | rank_primary | true | false |" in mine and "restart=false " in cells[14]


# ---- end to end: an upstream-shaped session built from real runs --------------------------------

REAL_POOL = "SIGKILL:1:3:1 WORKLOAD_EXC:1:3:1"
FAST = ("--configfile", "config/config.yaml", "config/fast.yaml")  # jobs of seconds, one node of two ranks
# What upstream's loop leaves in a cell folder; everything else is faultloop's own.
UPSTREAM_FILES = (".0.1.main_workload.log", "checkpoints/_dump_")
UPSTREAM_LAYOUT = re.compile(
    r"^(experiments\.tsv|experiments_report\.md|"
    r"n1_\w+/(logs/slurm/\d+\.0\.1\.main_workload\.log|checkpoints/_dump_\d+))$"
)


def scores_by_cell(path: Path) -> dict[str, dict[str, str]]:
    with open(path) as handle:
        return {r["CELL"]: r for r in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)}


@pytest.mark.slow
def test_an_upstream_session_built_from_real_runs_scores_like_the_original(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    snakemake(work, "--profile", "profiles/local", *FAST, "--config", f"pool={REAL_POOL}", "session=orig", timeout=900)
    original = work / "results/fault_injection/orig"
    # The same runs as upstream's loop would have left them on a cluster: SLURM job ids, only the
    # main log and the FR dumps, the tracking file with the cluster's absolute paths, and the
    # LLM judge's report.
    session = tmp_path / "nvrx-attr-experiments/fault_injection/20261201_120000"
    cluster_root = "/lustre/alice/nvrx-attr-experiments/fault_injection/20261201_120000"
    tracking = [HEADER.rstrip("\n")]
    report = ["# Fault Injection Experiment Report", "", REPORT_HEADER.rstrip("\n")]
    for i, (cell, job_id) in enumerate([("n1_SIGKILL_r1_i3", "7101"), ("n1_WORKLOAD_EXC_r1_i3", "7102")], start=1):
        ran = original / cell
        old_id = json.loads((ran / "job.json").read_text())["job_id"]
        shutil.copytree(ran, session / cell)
        for path in sorted((session / cell).rglob("*"), reverse=True):
            relative = str(path.relative_to(session / cell))
            if path.is_file() and not any(part in relative for part in UPSTREAM_FILES):
                path.unlink()
            elif path.is_dir() and relative.startswith("analysis"):
                path.rmdir()
        log = session / cell / f"logs/slurm/{old_id}.0.1.main_workload.log"
        log.rename(log.with_name(f"{job_id}.0.1.main_workload.log"))
        fault, rank = cell.split("_r")[0][3:], cell.split("_r")[1][0]
        tracking.append(f"{job_id}\t{fault}\t{rank}\t3\t1\t{cluster_root}/{cell}")
        report.append(verdict_row(i, fault, int(rank), job_id, "false", "LLM issued RESTART", nodes=1, iter_=3))
    tracking.append(f"7103\tGPU_SLEEP\t0\t3\t1\t{cluster_root}/n1_GPU_SLEEP_r0_i3")  # never started
    for sub in ("logs/slurm", "checkpoints", "tensorboard"):
        (session / "n1_GPU_SLEEP_r0_i3" / sub).mkdir(parents=True)
    (session / "experiments.tsv").write_text("\n".join(tracking) + "\n")
    (session / "experiments_report.md").write_text("\n".join(report[:3]) + "\n" + "".join(report[3:]))
    upstream_report = (session / "experiments_report.md").read_bytes()
    files = sorted(str(p.relative_to(session)) for p in session.rglob("*") if p.is_file())
    assert all(UPSTREAM_LAYOUT.match(f) for f in files), files
    assert {
        "n1_SIGKILL_r1_i3/logs/slurm/7101.0.1.main_workload.log",
        "n1_WORKLOAD_EXC_r1_i3/logs/slurm/7102.0.1.main_workload.log",
    } <= set(files)

    adopt(session, gpus_per_node=2)
    dry = snakemake(
        work, "-n", "--profile", "profiles/local", *FAST, "--until", "score", "--config", f"adopt={session}"
    )
    counts = planned(dry.stdout + dry.stderr)
    assert "run_job" not in counts and counts["logsage"] == 2 and counts["fr_analysis"] == 2
    snakemake(work, "--profile", "profiles/local", *FAST, "--until", "score", "--config", f"adopt={session}")

    before, after = scores_by_cell(original / "scores.tsv"), scores_by_cell(session / "scores.tsv")
    for cell in ("n1_SIGKILL_r1_i3", "n1_WORKLOAD_EXC_r1_i3"):
        assert after[cell]["STATUS"] == "scored" and after[cell]["STATE"] == before[cell]["STATE"] == "FAILED"
        assert {d: after[cell][d] for d in DIMENSIONS.names()} == {d: before[cell][d] for d in DIMENSIONS.names()}, cell
        assert manifest(session / cell).adopted and manifest(session / cell).fault_fired
    assert after["n1_GPU_SLEEP_r0_i3"]["STATE"] == "NOT_RUN"
    assert (session / "experiments_report.md").read_bytes() == upstream_report
    # Upstream's judge said RESTART was wrong for both: a disagreement wherever faultloop scores it right.
    verdicts = upstream_verdicts(session)
    assert {c: v.job_id for c, v in verdicts.items()} == {"n1_SIGKILL_r1_i3": "7101", "n1_WORKLOAD_EXC_r1_i3": "7102"}
    found = disagreements(verdicts, {cell: {d: row[d] for d in DIMENSIONS.names()} for cell, row in after.items()})
    for cell in verdicts:
        ours = after[cell]["restart_correct"]
        assert (Disagreement(cell, "restart_correct", "false", ours) in found) == (ours != "false")
