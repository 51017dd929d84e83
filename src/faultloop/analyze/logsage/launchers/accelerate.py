"""accelerate launch (accelerate/commands/launch.py).

Its multi-GPU, DeepSpeed and FSDP launches call torch.distributed.run in-process (torchrun's rows
read its reports); its simple launcher runs one child and raises subprocess.CalledProcessError
(launch.py's row), in every release read (v0.5.0 ... v1.14.0). What is its own: a traceback
through accelerate/commands is the launcher failing (a ValueError on its arguments, an ImportError
of a backend), not the workload.
"""

from __future__ import annotations

from faultloop.analyze.logsage.vocab import Rule

ACCELERATE = ("accelerate", "accelerate/commands/launch.py")

REPORT_ROWS: tuple[Rule, ...] = ()
FRAMES = r"accelerate/commands/|/bin/accelerate\b"
REPORT_EXCEPTIONS: tuple[str, ...] = ()
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = ACCELERATE
