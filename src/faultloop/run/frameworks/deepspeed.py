"""The `deepspeed` workload: a DeepSpeed engine (ZeRO stage 1) on its CPU accelerator with gloo.

DS_ACCELERATOR=cpu selects DeepSpeed's CPU accelerator (no compiled ops: the optimizer is torch's
AdamW, which ZeRO wraps and partitions). The ranks are the deepspeed launcher's or torchrun's (any
launcher `rank_identity` reads); `deepspeed.init_distributed` sets up gloo. The fault is injected
before the engine's forward of each step (the step being `engine.global_steps + 1`); the engine
saves its checkpoint (`save_checkpoint`, tag `iter_<7 digits>`) every CHECKPOINT_EVERY steps and a
restarted attempt resumes with `load_checkpoint`.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("DS_ACCELERATOR", "cpu")  # before deepspeed picks an accelerator

import deepspeed
import torch
from deepspeed.utils.logging import set_log_level_from_string
from torch.distributed.elastic.multiprocessing.errors import record

from faultloop.core import layout
from faultloop.frameworks import FRAMEWORKS
from faultloop.run.frameworks.rank import (
    BATCH,
    CHECKPOINT_EVERY,
    FEATURES,
    checkpoint_root,
    dumped_on_failure,
    process_group_timeout,
    start_rank,
)
from faultloop.run.spec import RESUME_ENV, JobSettings

NAME = "deepspeed"
HIDDEN = 64
SHM_COMM_OP = "deepspeed_shm_comm"  # ShareMemCommBuilder.NAME
CONFIG = {
    "train_micro_batch_size_per_gpu": BATCH,
    "gradient_accumulation_steps": 1,
    "zero_optimization": {"stage": 1},
    "steps_per_print": 1,
    "wall_clock_breakdown": False,
}


def _without_shm_all_reduce() -> None:
    """DeepSpeed's CPU accelerator JIT-compiles a shared-memory all-reduce op the first time a
    process group starts on a machine (minutes of C++ on two cores, and a killed build's lock makes
    every later job wait forever): it is marked unavailable, as DeepSpeed marks it where no compiler
    is, so the collectives go through gloo like every other workload's. DeepSpeed keeps its probe's
    table in the module for such edits to persist."""
    deepspeed.ops.__compatible_ops__[SHM_COMM_OP] = False


@record
def train(job: JobSettings) -> None:
    """One rank's DeepSpeed job."""
    rank = start_rank(job, FRAMEWORKS[NAME].refuses.get)
    _without_shm_all_reduce()
    set_log_level_from_string("info")  # the engine's config and step lines, as a job that reports progress shows
    deepspeed.init_distributed(dist_backend="gloo", timeout=process_group_timeout(job))
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, FEATURES))
    engine, _, _, _ = deepspeed.initialize(
        model=model, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3), config=CONFIG
    )
    root = checkpoint_root(os.environ)
    with dumped_on_failure(rank):
        if resume := os.environ.get(RESUME_ENV):
            engine.load_checkpoint(str(Path(resume).parent), tag=Path(resume).name)
        world = rank.ctx.world_size
        for it in range(engine.global_steps + 1, job.iterations + 1):
            rank.hook.at_iteration(it)
            sample_ids = torch.arange(BATCH) + (it * world + rank.ctx.rank) * BATCH
            x, y = rank.step_data(sample_ids)
            loss = torch.nn.functional.mse_loss(engine(x), y)
            engine.backward(loss)
            engine.step()
            if root is not None and it % CHECKPOINT_EVERY == 0:
                tag = Path(layout.checkpoint_dir(it)).name
                engine.save_checkpoint(str(root), tag=tag)
