"""The `megatron_core` workload: a tiny GPT from megatron-core, the closest to the built-in.

megatron-core's own pieces: `parallel_state` (tensor and pipeline parallel size 1, data parallel
over every rank), a one-layer `GPTModel` from the local transformer spec (megatron-core's own
attention and MLP: no TransformerEngine, no apex) and megatron-core's `DistributedDataParallel`,
whose gradient reduction checks for NaN (`check_for_nan_in_grad`). The shard's rows enter as the
decoder's input (`decoder_input`); the fault is injected before each train step's
forward-backward; the last rank prints Megatron's iteration line.

It needs CUDA: megatron-core's grad buffer and its attention's global memory buffer allocate on
`torch.cuda.current_device()`, which on this CPU build raises `AssertionError: Torch not compiled
with CUDA enabled` (faultloop.frameworks states it in the row's `cpu`, and planning refuses the
workload where no GPU is). On a GPU cluster each rank takes its local GPU and NCCL.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from megatron.core import parallel_state
from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.transformer.transformer_config import TransformerConfig
from torch.distributed.elastic.multiprocessing.errors import record

from faultloop.frameworks import FRAMEWORKS
from faultloop.run.frameworks.rank import BATCH, FEATURES, dumped_on_failure, process_group_timeout, start_rank
from faultloop.run.spec import JobSettings

NAME = "megatron_core"


def build_model() -> DistributedDataParallel:
    """A one-layer GPT whose vocabulary is the shard's features (its logits regress the targets),
    wrapped in megatron-core's DDP with its NaN check."""
    config = TransformerConfig(num_layers=1, hidden_size=FEATURES, num_attention_heads=2, params_dtype=torch.float32)
    model = GPTModel(
        config=config, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=FEATURES, max_sequence_length=BATCH
    )
    model.cuda(torch.cuda.current_device())
    return DistributedDataParallel(config, DistributedDataParallelConfig(check_for_nan_in_grad=True), model)


@record
def train(job: JobSettings) -> None:
    """One rank's megatron-core job."""
    rank = start_rank(job, FRAMEWORKS[NAME].refuses.get)
    if torch.cuda.is_available():
        torch.cuda.set_device(rank.ctx.local_rank % torch.cuda.device_count())
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", timeout=process_group_timeout(job))
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1)
    with dumped_on_failure(rank):
        model = build_model()
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
        device = torch.device("cuda", torch.cuda.current_device())
        positions = torch.arange(BATCH, device=device).unsqueeze(0)
        mask = torch.tril(torch.ones(1, 1, BATCH, BATCH, device=device)) < 0.5  # True: masked (causal)
        world = rank.ctx.world_size
        for it in range(1, job.iterations + 1):
            rank.hook.at_iteration(it)
            x, y = rank.step_data(torch.arange(BATCH) + (it * world + rank.ctx.rank) * BATCH)
            model.zero_grad_buffer()
            optimizer.zero_grad()
            logits = model(
                input_ids=None, position_ids=positions, attention_mask=mask, decoder_input=x.to(device).unsqueeze(1)
            )
            loss = torch.nn.functional.mse_loss(logits.reshape(BATCH, FEATURES), y.to(device))
            loss.backward()
            model.finish_grad_sync()
            optimizer.step()
            if rank.ctx.rank == world - 1:
                print(f" iteration {it:8d}/{job.iterations:8d} | lm loss: {float(loss):.6E} |", flush=True)
    dist.destroy_process_group()
