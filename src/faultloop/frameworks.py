"""The framework table: every workload faultloop can run, one row each (docs/frameworks.md).

A row says how a rank of that workload starts, which launchers can start it, which faults of the
fault table it cannot host (and why), what must be importable, how it fares on CPU and how it
checkpoints. Planning reads it to refuse a cell before any job runs; run_job reads it to start
the rank module. It imports nothing heavy: the modules it names are the ones that import the
frameworks (faultloop.run.frameworks).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

DEFAULT_FRAMEWORK = "cpu_gloo"
CPU_RUNS = "runs"
NVIDIA_DEVICE = Path("/dev/nvidia0")  # where a GPU is, its driver's device file (no import of torch)
# How a missing framework is installed (pyproject.toml's extra, which `make setup` installs)
INSTALL_HINT = "pip install -e '.[frameworks]' (make setup installs it)"

# Why a framework cannot host a fault; one sentence each, shared by the rows they apply to.
_OWN_CHECKPOINT_IO = (
    "the framework writes its checkpoints through its own I/O: faultloop cannot point them at a full volume"
)
_NO_NAN_CHECK = "the framework has no NaN check: a NaN loss trains on to the end and nothing fails"


@dataclass(frozen=True)
class OwnLine:
    """A line a program prints itself (a regex of its template) and the source that prints it."""

    pattern: str
    origin: str  # the program's source file that prints it


@dataclass(frozen=True)
class Framework:
    """One workload: a real training job of one framework, injected through its own extension point."""

    name: str  # the workload name a pool row or the config names
    module: str  # the rank module: `python -m <module> <rank options>` (JobSpec.rank_argv)
    launchers: tuple[str, ...]  # the launchers it supports, its default first
    refuses: Mapping[str, str] = field(default_factory=dict)  # fault name -> why it cannot host it
    requires: tuple[str, ...] = ()  # import names that must be importable
    cpu: str = CPU_RUNS  # CPU_RUNS, or the error it fails with on CPU (it then needs a GPU)
    checkpoint: str = ""  # how it checkpoints and resumes ("": no resume)
    extension_point: str = ""  # where the fault is injected
    # Lines the framework itself prints in every job, whatever fails (regexes, searched in the main
    # log: `faultloop check-session`), each from the source file named beside it; () where it has
    # not run here (it then cannot be checked).
    own_lines: tuple[OwnLine, ...] = ()

    def missing(self) -> list[str]:
        """The required import names that are not installed (no import is run)."""
        return [name for name in self.requires if not _importable(name)]

    def refusal(self, fault: str, launcher: str) -> str | None:
        """Why a cell of this workload cannot run `fault` under `launcher`; None when it can."""
        if launcher not in self.launchers:
            supported = ", ".join(self.launchers)
            return f"workload {self.name} does not run under launcher {launcher!r} (it supports {supported})"
        if fault in self.refuses:
            return f"workload {self.name} cannot host fault {fault}: {self.refuses[fault]}"
        if missing := self.missing():
            return f"workload {self.name} needs {', '.join(missing)}, not installed: {INSTALL_HINT}"
        if self.cpu != CPU_RUNS and not has_gpu():
            return f"workload {self.name} needs a GPU, and this machine has none: on CPU it fails with {self.cpu}"
        return None


def has_gpu() -> bool:
    """Whether this machine has an NVIDIA GPU, as its driver's device file says."""
    return NVIDIA_DEVICE.exists()


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package that is missing, or broken
        return False


_MPI_AND_SLURM = ("srun", "mpirun", "mpirun_tagged", "mpiexec")

FRAMEWORKS: Mapping[str, Framework] = MappingProxyType(
    {
        f.name: f
        for f in (
            Framework(
                DEFAULT_FRAMEWORK,
                "faultloop.cli.workload",
                ("torchrun", *_MPI_AND_SLURM),
                checkpoint="each rank's replica every 5 iterations: checkpoints/model/iter_<7 digits>/rank_<r>.pt",
                extension_point="the training loop's periodic work (faultloop.run.workload)",
                own_lines=(
                    OwnLine(
                        r"iteration\s+\d+/\s*\d+ \| consumed samples:", "faultloop/run/workload.py (Megatron's wording)"
                    ),
                ),
            ),
            Framework(
                "lightning",
                "faultloop.cli.frameworks.lightning",
                ("torchrun", "lightning", *_MPI_AND_SLURM),
                {"STORAGE_FULL": _OWN_CHECKPOINT_IO},
                ("lightning",),
                checkpoint="ModelCheckpoint every 5 steps: checkpoints/model/iter_<7 digits>.ckpt; fit(ckpt_path=...)",
                extension_point="a Callback's on_train_batch_start",
                own_lines=(
                    OwnLine(
                        r"Initializing distributed: GLOBAL_RANK: \d+, MEMBER: \d+/\d+",
                        "lightning/fabric/utilities/distributed.py (_init_dist_connection)",
                    ),
                    OwnLine(
                        r"All distributed processes registered\. Starting with \d+ processes",
                        "lightning/fabric/utilities/distributed.py (_init_dist_connection)",
                    ),
                ),
            ),
            Framework(
                "hf_trainer",
                "faultloop.cli.frameworks.hf_trainer",
                ("torchrun", "accelerate", *_MPI_AND_SLURM),
                {"STORAGE_FULL": _OWN_CHECKPOINT_IO, "NAN_LOSS": _NO_NAN_CHECK},
                ("transformers", "accelerate"),
                checkpoint="save_steps=5: checkpoints/model/checkpoint-<N>/; train(resume_from_checkpoint=...)",
                extension_point="a TrainerCallback's on_step_begin",
                own_lines=(OwnLine(r"\*{5} Running training \*{5}", "transformers/trainer.py (_inner_training_loop)"),),
            ),
            Framework(
                "deepspeed",
                "faultloop.cli.frameworks.deepspeed",
                ("deepspeed", "torchrun", *_MPI_AND_SLURM),
                {"STORAGE_FULL": _OWN_CHECKPOINT_IO, "NAN_LOSS": _NO_NAN_CHECK},
                ("deepspeed",),
                checkpoint="engine.save_checkpoint every 5 steps: checkpoints/model/iter_<7 digits>/; load_checkpoint",
                extension_point="before the engine's forward of each step (engine.global_steps + 1)",
                own_lines=(OwnLine(r"DeepSpeed info: version=\S+", "deepspeed/__init__.py (initialize)"),),
            ),
            Framework(
                "ray_train",
                "faultloop.cli.frameworks.ray_train",
                ("ray",),
                {"STORAGE_FULL": _OWN_CHECKPOINT_IO, "NAN_LOSS": _NO_NAN_CHECK},
                ("ray",),
                checkpoint=(
                    "rank 0 reports a Ray Train Checkpoint every 5 steps: checkpoints/model/train/iter_<7 digits>/; "
                    "restored in each worker from that Checkpoint"
                ),
                extension_point="the per-worker training loop, before each step",
                own_lines=(
                    OwnLine(
                        r"Setting up process group for: env:// \[rank=\d+, world_size=\d+\]",
                        "ray/train/torch/config.py (_setup_torch_process_group)",
                    ),
                ),
            ),
            Framework(
                "megatron_core",
                "faultloop.cli.frameworks.megatron_core",
                ("torchrun", *_MPI_AND_SLURM),
                {"STORAGE_FULL": _OWN_CHECKPOINT_IO},
                ("megatron.core",),
                cpu=(
                    "AssertionError: Torch not compiled with CUDA enabled (megatron-core's grad buffer and attention "
                    "allocate on torch.cuda.current_device())"
                ),
                extension_point="the train step, before the forward-backward",
            ),
        )
    }
)
