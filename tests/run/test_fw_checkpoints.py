"""Which of a workload's own checkpoints a restarted attempt resumes from: the newest complete one
across the job's earlier runs, in that framework's format (files laid out as each framework writes them)."""

from __future__ import annotations

from pathlib import Path

from faultloop.run import life
from faultloop.run.frameworks.checkpoints import newest


def touch(path: Path, data: bytes = b"x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_lightning_takes_the_newest_ckpt_file_across_runs_and_skips_an_empty_one(tmp_path):
    first, second = tmp_path / "attempt_1", tmp_path / "attempt_2"
    touch(first / "checkpoints/model/iter_0000005.ckpt")
    newest_file = touch(second / "checkpoints/model/iter_0000010.ckpt")
    touch(second / "checkpoints/model/iter_0000015.ckpt", b"")  # cut off while written
    found = newest("lightning", [first, second], world_size=2)
    assert found is not None and (found.folder, found.iteration) == (newest_file.resolve(), 10)


def test_hf_trainer_needs_the_trainer_state_written_last(tmp_path):
    touch(tmp_path / "checkpoints/model/checkpoint-5/trainer_state.json")
    touch(tmp_path / "checkpoints/model/checkpoint-10/model.safetensors")
    found = newest("hf_trainer", [tmp_path], world_size=2)
    assert found is not None and found.iteration == 5 and found.folder.name == "checkpoint-5"


def test_deepspeed_needs_every_ranks_zero_partition(tmp_path):
    for it, ranks in ((5, (0, 1)), (10, (0,))):
        folder = tmp_path / f"checkpoints/model/iter_{it:07d}"
        touch(folder / "mp_rank_00_model_states.pt")
        for rank in ranks:
            touch(folder / f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt")
    found = newest("deepspeed", [tmp_path], world_size=2)
    assert found is not None and found.iteration == 5
    assert newest("deepspeed", [tmp_path], world_size=3) is None


def test_the_built_in_workload_and_life_read_the_same_table(tmp_path):
    for rank in range(2):
        touch(tmp_path / f"checkpoints/model/iter_0000005/rank_{rank:05d}.pt")
    assert life.newest_checkpoint([tmp_path], world_size=2).iteration == 5
    assert life.newest_checkpoint([tmp_path], world_size=2, workload="lightning") is None
    assert newest("megatron_core", [tmp_path], world_size=2) is None  # no resume: none taken
