"""The `lightning` workload: PyTorch Lightning's Trainer, DDP on gloo and the CPU accelerator.

Under torchrun, srun or an MPI launcher Lightning finds the ranks in torch's env (torchelastic's
variables, which `rank_identity` exports where the launcher did not); started once per node
without them (the `lightning` launcher: NODE_RANK, MASTER_ADDR, MASTER_PORT), Lightning's own
subprocess launcher starts the node's other ranks by running this command again. A Callback injects
the fault before its iteration trains; Lightning's ModelCheckpoint saves `iter_<step>.ckpt` every
CHECKPOINT_EVERY steps, and a restarted attempt resumes with `fit(ckpt_path=...)`. NaN is caught by
Lightning's own `detect_anomaly` (torch's anomaly mode): backward fails where the NaN appears.
"""

from __future__ import annotations

import os
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy
from torch.distributed.elastic.multiprocessing.errors import record

from faultloop.frameworks import FRAMEWORKS
from faultloop.run.frameworks.rank import (
    BATCH,
    CHECKPOINT_EVERY,
    FEATURES,
    Rank,
    SampleIds,
    checkpoint_root,
    dumped_on_failure,
    process_group_timeout,
    start_rank,
)
from faultloop.run.launchers.identity import IdentityError, RankIdentity, rank_identity
from faultloop.run.spec import RESUME_ENV, JobSettings

NAME = "lightning"
HIDDEN = 64


class Regression(L.LightningModule):
    """A 2-layer MLP regressing the shard's targets; the step reads its rows from the shard."""

    def __init__(self, ranks: RankHolder) -> None:
        super().__init__()
        self.ranks = ranks
        self.net = torch.nn.Sequential(
            torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, FEATURES)
        )

    def training_step(self, sample_ids: torch.Tensor, batch_idx: int) -> torch.Tensor:
        x, y = self.ranks.rank.step_data(sample_ids)
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=1e-2)

    def train_dataloader(self) -> torch.utils.data.DataLoader[Any]:
        return torch.utils.data.DataLoader(SampleIds(BATCH * self.trainer.world_size * 1000), batch_size=BATCH)


class RankHolder(Callback):
    """Starts faultloop's side of the rank once Lightning knows which rank this process is (it may
    have started it itself), and injects the fault before each iteration trains."""

    def __init__(self, job: JobSettings) -> None:
        self.job = job
        self._rank: Rank | None = None

    @property
    def rank(self) -> Rank:
        assert self._rank is not None, "setup ran first"
        return self._rank

    def current(self) -> Rank | None:
        return self._rank

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        strategy = trainer.strategy
        assert isinstance(strategy, DDPStrategy) and strategy.cluster_environment is not None
        env = strategy.cluster_environment
        identity = RankIdentity(
            source=type(env).__name__,
            rank=trainer.global_rank,
            world_size=trainer.world_size,
            local_rank=trainer.local_rank,
            node_rank=trainer.node_rank,
            local_world_size=trainer.num_devices,
            master_addr=env.main_address,
            master_port=env.main_port,
        )
        self._rank = start_rank(self.job, FRAMEWORKS[NAME].refuses.get, identity)

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self.rank.hook.at_iteration(trainer.global_step + 1)


def _shape() -> tuple[int, int]:
    """(devices per node, nodes). A launcher's ranks: from its identity, torchelastic's variables
    exported so that Lightning takes them. Lightning launching its own ranks (no launcher's
    variables): from GPUS_PER_NODE and WORLD_SIZE as run_job sets them."""
    try:
        identity = rank_identity()
    except IdentityError:
        per_node = int(os.environ.get("GPUS_PER_NODE") or 1)
        return per_node, int(os.environ.get("WORLD_SIZE") or per_node) // per_node
    return identity.local_world_size, identity.world_size // identity.local_world_size


@record
def train(job: JobSettings) -> None:
    """One rank's (under Lightning's own launcher, one node's) Lightning job."""
    devices, nodes = _shape()
    holder = RankHolder(job)
    checkpoints = checkpoint_root(os.environ)
    callbacks: list[Callback] = [holder]
    if checkpoints is not None:
        callbacks.append(
            ModelCheckpoint(
                dirpath=checkpoints,
                filename="iter_{step:07d}",
                every_n_train_steps=CHECKPOINT_EVERY,
                save_top_k=-1,
                auto_insert_metric_name=False,
            )
        )
    trainer = L.Trainer(
        accelerator="cpu",
        devices=devices,
        num_nodes=nodes,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=process_group_timeout(job)),
        max_steps=job.iterations,
        callbacks=callbacks,
        enable_checkpointing=checkpoints is not None,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        detect_anomaly=True,
        log_every_n_steps=1,
    )
    resume = os.environ.get(RESUME_ENV) or None
    with dumped_on_failure(holder.current):
        trainer.fit(Regression(holder), ckpt_path=resume)
