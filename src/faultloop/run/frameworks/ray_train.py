"""The `ray_train` workload: Ray Train's TorchTrainer with CPU workers on a local Ray cluster.

This module is the job's driver, started once (the `ray` launcher): it starts a local Ray cluster
(`ray.init` with one CPU per worker, no dashboard, a bounded object store), runs the TorchTrainer
(gloo) and stops the cluster. Ray starts the workers and forwards their output to the driver, each
line prefixed `(RayTrainWorker pid=...)`. Each worker's loop is a rank: the fault is injected before
its step, the model is Ray's DDP (`prepare_model`), and every CHECKPOINT_EVERY steps rank 0 reports
a Ray Train `Checkpoint` (`iter_<7 digits>` in the run's checkpoints/model/train/); a restarted
attempt's workers restore it from that `Checkpoint` (Ray Train 2.60 deprecates the trainer's
`resume_from_checkpoint`: a new run is handed the checkpoint through its loop's config).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from faultloop.run.spec import RANK_NODE_RE

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # offline: nothing is reported anywhere
# worker lines prefixed `(RayTrainWorker pid=...)` without terminal colour codes, as a log file shows them
os.environ.setdefault("RAY_COLOR_PREFIX", "0")
# Ray's driver folds worker lines that differ only in their numbers into one (`[repeated 7x across
# cluster]`), every other rank's statement of its node with them, which the manifest's fault node
# is read from: those lines alone are let through whole (Ray reads this when it is imported).
os.environ.setdefault("RAY_DEDUP_LOGS_ALLOW_REGEX", RANK_NODE_RE.pattern)

import ray
import ray.train
import torch
from ray.train.torch import TorchConfig, TorchTrainer, prepare_model

from faultloop.core import layout
from faultloop.frameworks import FRAMEWORKS
from faultloop.run.frameworks.rank import (
    BATCH,
    CHECKPOINT_EVERY,
    FEATURES,
    checkpoint_root,
    dumped_on_failure,
    exit_recorded,
    process_group_timeout,
    start_rank,
)
from faultloop.run.launchers.identity import RankIdentity
from faultloop.run.launchers.rank_records import RANK_EXIT_ENV
from faultloop.run.spec import FAULT_NODE_ENV, RESUME_ENV, JobSettings

NAME = "ray_train"
HIDDEN = 64
WORLD_SIZE_ENV = "FAULTLOOP_WORLD_SIZE"  # the ray launcher's worker count (nodes x ranks per node)
OBJECT_STORE_BYTES = 80 << 20  # Ray's floor is 75 MB; the job passes no objects through it
STATE_FILE = "state.pt"
# What the workers need of the driver's environment (Ray's runtime_env passes it on)
PASSED_ENV = ("FAULT_TYPE", "FAULT_RANK", "FAULT_AT_ITER", "FAULT_DELAY", "GPUS_PER_NODE", FAULT_NODE_ENV,
              "TORCH_FR_DUMP_TEMP_FILE", "TORCH_FR_BUFFER_SIZE", "FAULTLOOP_NODE_NAME", "PYTHONPATH",
              "OMP_NUM_THREADS", "FAULTLOOP_CELL", RANK_EXIT_ENV)  # fmt: skip


def train_loop(config: dict[str, Any]) -> None:
    """One Ray Train worker: a rank of the job. Its exit record has no exit code: Ray's worker
    process outlives the training function (Ray reports the exception)."""
    with exit_recorded(exception_code=None):
        _train_worker(config)


def _train_worker(config: dict[str, Any]) -> None:
    job: JobSettings = config["job"]
    context = ray.train.get_context()
    identity = RankIdentity(
        source="ray",
        rank=context.get_world_rank(),
        world_size=context.get_world_size(),
        local_rank=context.get_local_rank(),
        node_rank=context.get_node_rank(),
        local_world_size=context.get_local_world_size(),
        master_addr=os.environ.get("MASTER_ADDR", "127.0.0.1"),
        master_port=int(os.environ.get("MASTER_PORT") or 0),
    )
    rank = start_rank(job, FRAMEWORKS[NAME].refuses.get, identity)
    model = prepare_model(
        torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, FEATURES))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    first = 1
    if resume := config["resume"]:
        with ray.train.Checkpoint(resume).as_directory() as folder:
            state = torch.load(Path(folder) / STATE_FILE, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        first = int(state["iteration"]) + 1
        if identity.rank == 0:
            print(f"resumed from the checkpoint of iteration {state['iteration']}", flush=True)
    world = identity.world_size
    with dumped_on_failure(rank):
        for it in range(first, job.iterations + 1):
            rank.hook.at_iteration(it)
            x, y = rank.step_data(torch.arange(BATCH) + (it * world + identity.rank) * BATCH)
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            metrics = {"iteration": it, "loss": loss.item()}
            if it % CHECKPOINT_EVERY:
                continue
            with tempfile.TemporaryDirectory() as folder:
                checkpoint = None
                if identity.rank == 0:
                    state = {"iteration": it, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
                    torch.save(state, Path(folder) / STATE_FILE)
                    checkpoint = ray.train.Checkpoint.from_directory(folder)
                ray.train.report(
                    metrics, checkpoint=checkpoint, checkpoint_dir_name=Path(layout.checkpoint_dir(it)).name
                )


def train(job: JobSettings) -> None:
    """The job's driver: a local Ray cluster, the TorchTrainer, the cluster stopped however it ends.
    A worker's failure ends `fit` with Ray's TrainingFailedError (exit status 1)."""
    world = int(os.environ.get(WORLD_SIZE_ENV) or os.environ.get("WORLD_SIZE") or 2)
    root = checkpoint_root(os.environ)
    passed = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    ray.init(
        num_cpus=world + 1,  # the workers, and the train controller beside them
        include_dashboard=False,
        object_store_memory=OBJECT_STORE_BYTES,
        runtime_env={"env_vars": passed},
    )
    try:
        trainer = TorchTrainer(
            train_loop,
            train_loop_config={"job": job, "resume": os.environ.get(RESUME_ENV, "")},
            scaling_config=ray.train.ScalingConfig(num_workers=world, use_gpu=False),
            torch_config=TorchConfig(backend="gloo", timeout_s=int(process_group_timeout(job).total_seconds())),
            run_config=ray.train.RunConfig(
                name="train",
                storage_path=str(root) if root else tempfile.mkdtemp(prefix="ray-train-"),
                failure_config=ray.train.FailureConfig(max_failures=0),
            ),
        )
        trainer.fit()
    finally:
        ray.shutdown()
