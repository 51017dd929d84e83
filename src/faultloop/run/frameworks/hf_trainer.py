"""The `hf_trainer` workload: the Hugging Face Trainer on a tiny GPT-2 built from its config.

No weights, tokenizer or data set are downloaded (HF_HUB_OFFLINE=1): a one-layer GPT2Model from a
GPT2Config regresses the rank's shard rows (given as `inputs_embeds`), its batch read inside the
forward. The ranks are torch's (torchrun, `accelerate launch`, or any launcher `rank_identity`
reads); the Trainer sets up DDP on gloo itself (`ddp_backend="gloo"`, `use_cpu=True`). A
TrainerCallback injects the fault at `on_step_begin`; the Trainer saves `checkpoint-<N>/` every
CHECKPOINT_EVERY steps and a restarted attempt resumes with `train(resume_from_checkpoint=...)`.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is fetched from a hub, ever

import torch
from torch.distributed.elastic.multiprocessing.errors import record
from transformers import GPT2Config, GPT2Model, Trainer, TrainerCallback, TrainingArguments

from faultloop.frameworks import FRAMEWORKS
from faultloop.run.frameworks.rank import (
    BATCH,
    CHECKPOINT_EVERY,
    FEATURES,
    Rank,
    checkpoint_root,
    dumped_on_failure,
    process_group_timeout,
    start_rank,
)
from faultloop.run.spec import RESUME_ENV, JobSettings

NAME = "hf_trainer"


class ShardRegression(torch.nn.Module):
    """A one-layer GPT-2 over the step's shard rows (one sequence of BATCH positions): mean squared
    error against the rows' targets, returned as the Trainer expects a model's loss."""

    def __init__(self, rank: Rank) -> None:
        super().__init__()
        self.rank = rank
        config = GPT2Config(
            n_embd=FEATURES, n_layer=1, n_head=2, n_positions=BATCH, vocab_size=8, bos_token_id=0, eos_token_id=0
        )
        self.backbone = GPT2Model(config)

    def forward(self, sample_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        x, y = self.rank.step_data(sample_ids)
        hidden = self.backbone(inputs_embeds=x.unsqueeze(0)).last_hidden_state.squeeze(0)
        return {"loss": torch.nn.functional.mse_loss(hidden, y)}


class SampleRecords(torch.utils.data.Dataset[dict[str, int]]):
    """Sample ids as the Trainer's default collator takes them: one record per sample."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, int]:
        return {"sample_ids": index}


class InjectFault(TrainerCallback):
    """Fires the cell's fault before the step it is due at trains."""

    def __init__(self, rank: Rank) -> None:
        self.rank = rank

    def on_step_begin(self, args: TrainingArguments, state: Any, control: Any, **kwargs: Any) -> None:
        self.rank.hook.at_iteration(state.global_step + 1)


@record
def train(job: JobSettings) -> None:
    """One rank's Trainer job."""
    rank = start_rank(job, FRAMEWORKS[NAME].refuses.get)
    root = checkpoint_root(os.environ)
    args = TrainingArguments(
        output_dir=str(root) if root else os.devnull,
        max_steps=job.iterations,
        per_device_train_batch_size=BATCH,
        learning_rate=1e-3,
        save_strategy="steps" if root else "no",
        save_steps=CHECKPOINT_EVERY,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        ddp_backend="gloo",
        ddp_timeout=int(process_group_timeout(job).total_seconds()),
        disable_tqdm=True,
        log_level="info",  # the main process's run banner and resume lines, as a launched job shows them
        dataloader_num_workers=0,
    )
    trainer = Trainer(
        model=ShardRegression(rank),
        args=args,
        train_dataset=SampleRecords(BATCH * rank.ctx.world_size * 1000),
        callbacks=[InjectFault(rank)],
    )
    with dumped_on_failure(rank):
        trainer.train(resume_from_checkpoint=os.environ.get(RESUME_ENV) or None)
