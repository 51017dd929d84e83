"""The analyzers' copy of a cell's main log holds no ground truth."""

from __future__ import annotations

from faultloop.analyze.strip import strip_log
from faultloop.contracts import Manifest


def test_strip_log_removes_markers_and_experiment_names(tmp_path):
    cell = tmp_path / "n2_SIGKILL_r1_i5"
    (cell / "logs/slurm").mkdir(parents=True)
    (cell / "logs/slurm/7.0.1.main_workload.log").write_text(
        "0: iteration 4/ 30 | lm loss: 1.0\n"
        "1: [2026-11-30 20:21:45.652328] FAULT INJECTION: Rank 1 will inject fault SIGKILL at 20:21:45\n"
        "1: nvidia_resiliency_ext.shared_utils.inject_fault CRITICAL sending signal\n"
        f"0: saving checkpoint to {cell}/checkpoints/iter_5\n"
        "2: RuntimeError: Connection closed by peer\n"
    )
    Manifest(
        job_id="7",
        workload="cpu_gloo",
        fault_type="SIGKILL",
        fault_rank=1,
        fault_iter=5,
        nodes=2,
        gpus_per_node=2,
        world_size=4,
        state="FAILED",
        main_log="logs/slurm/7.0.1.main_workload.log",
        launch_out=None,
        fault_fired=True,
        run_valid=True,
        invalid_reason=None,
    ).write(cell / "job.json")
    assert strip_log(cell / "job.json", cell / "out.log") == 3
    text = (cell / "out.log").read_text()
    assert "FAULT INJECTION" not in text and "inject_fault" not in text
    assert "SIGKILL" not in text and "r1_i5" not in text
    assert f"{tmp_path}/experiment/checkpoints/iter_5" in text and "Connection closed by peer" in text
