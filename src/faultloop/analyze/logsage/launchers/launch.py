"""torch.distributed.launch, and any launcher that runs its workers with CPython's subprocess.

Since torch 1.9 torch.distributed.launch is torchrun with a deprecation warning (torchrun's rows
read it). Before, it ran one child per local rank with subprocess.Popen and raised
subprocess.CalledProcessError for the first child that failed; accelerate's simple launcher does
the same. CPython words the error `Command '[..., '--local_rank=L']' died with <Signals.SIGKILL:
9>.` or `... returned non-zero exit status N.` (Lib/subprocess.py, Python >= 3.6): the command
line names the child's local rank where the launcher passed it.
"""

from __future__ import annotations

from faultloop.analyze.logsage.vocab import DEATH, Rule

LAUNCH = ("torch", "torch/distributed/launch.py")
SUBPROCESS = ("CPython", "Lib/subprocess.py (CalledProcessError.__str__)")

# fmt: off
REPORT_ROWS: tuple[Rule, ...] = (
    Rule("launch_child_died", DEATH, ("ignal", "exit"),
         r"(?:--local[_-]rank=(?P<local>\d+).*)?(?:died with <Signals\.(?P<sig>SIG[A-Z]+)|returned non-zero exit status (?P<code>\d+))",
         origin=SUBPROCESS),
)
# fmt: on
FRAMES = r"torch/distributed/launch\.py"
REPORT_EXCEPTIONS = ("CalledProcessError",)
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = LAUNCH
