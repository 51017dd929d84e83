"""Where each workload's own checkpoints are, and which of them are complete: what a restarted
attempt of a job's life may resume from (run/life.newest_checkpoint takes the newest).

Each workload saves into the run folder's checkpoints/model/ in its framework's own format; a
checkpoint counts once every file its framework writes for it is there. Reads the folder only:
nothing here imports a framework.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

from faultloop.core import layout
from faultloop.frameworks import DEFAULT_FRAMEWORK
from faultloop.run.spec import Resume

_ITERATION_DIR = re.compile(rf"{layout.CHECKPOINT_ITERATION_PREFIX}(\d+)$")
_LIGHTNING_FILE = re.compile(rf"{layout.CHECKPOINT_ITERATION_PREFIX}(\d+)\.ckpt$")
_TRAINER_DIR = re.compile(r"checkpoint-(\d+)$")
RAY_RUN_NAME = "train"  # the ray_train workload's RunConfig name: its checkpoints are in checkpoints/model/train/
RAY_STATE_FILE = "state.pt"


def _numbered(root: Path, pattern: re.Pattern[str]) -> Iterator[tuple[Path, int]]:
    for path in root.iterdir() if root.is_dir() else ():
        if match := pattern.match(path.name):
            yield path, int(match[1])


def _built_in(root: Path, world_size: int) -> Iterator[Resume]:
    """One file per rank in iter_<7 digits>/ (the built-in workload's Checkpointer)."""
    for folder, iteration in _numbered(root, _ITERATION_DIR):
        if all((folder / layout.checkpoint_file(rank)).is_file() for rank in range(world_size)):
            yield Resume(folder.resolve(), iteration)


def _lightning(root: Path, world_size: int) -> Iterator[Resume]:
    """ModelCheckpoint's iter_<step>.ckpt, one file that rank 0 writes for the job."""
    for path, iteration in _numbered(root, _LIGHTNING_FILE):
        if path.is_file() and path.stat().st_size > 0:
            yield Resume(path.resolve(), iteration)


def _hf_trainer(root: Path, world_size: int) -> Iterator[Resume]:
    """The Trainer's checkpoint-<N>/: trainer_state.json is written after the model and optimizer."""
    for folder, iteration in _numbered(root, _TRAINER_DIR):
        if (folder / "trainer_state.json").is_file():
            yield Resume(folder.resolve(), iteration)


def _deepspeed(root: Path, world_size: int) -> Iterator[Resume]:
    """save_checkpoint's tag folder: the model states and every rank's ZeRO optimizer partition."""
    for folder, iteration in _numbered(root, _ITERATION_DIR):
        files = ["mp_rank_00_model_states.pt"] + [
            f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt" for rank in range(world_size)
        ]
        if all((folder / name).is_file() for name in files):
            yield Resume(folder.resolve(), iteration)


def _ray_train(root: Path, world_size: int) -> Iterator[Resume]:
    """Ray Train's persisted Checkpoint folders (checkpoint_dir_name iter_<7 digits>) of the run."""
    for folder, iteration in _numbered(root / RAY_RUN_NAME, _ITERATION_DIR):
        if (folder / RAY_STATE_FILE).is_file():
            yield Resume(folder.resolve(), iteration)


SAVED: dict[str, Callable[[Path, int], Iterator[Resume]]] = {
    DEFAULT_FRAMEWORK: _built_in,
    "lightning": _lightning,
    "hf_trainer": _hf_trainer,
    "deepspeed": _deepspeed,
    "ray_train": _ray_train,
}


def newest(workload: str, run_dirs: list[Path], world_size: int) -> Resume | None:
    """The newest complete checkpoint of `workload` across a job's earlier runs; None when there is
    none (or the workload does not resume)."""
    found = SAVED.get(workload)
    if found is None:
        return None
    saved = [resume for run in run_dirs for resume in found(run / layout.MODEL_CHECKPOINTS, world_size)]
    return max(saved, key=lambda resume: resume.iteration, default=None)
