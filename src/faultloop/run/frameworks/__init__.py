"""The framework workloads: one module per framework (lightning, hf_trainer, deepspeed, ray_train,
megatron_core), each a real training job of that framework on gloo, injected from the framework's
own extension point (`rank`: what they share). The table of them is `faultloop.frameworks`, in the
lowest layer so that planning can refuse a cell by it."""

from faultloop.frameworks import FRAMEWORKS, Framework

__all__ = ["FRAMEWORKS", "Framework"]
