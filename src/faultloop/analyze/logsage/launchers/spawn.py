"""torch.multiprocessing.spawn (and mp.start_processes): the parent joins its children and raises
for the first that failed.

A child that raised: ProcessRaisedException, whose message is the child's traceback under a
header naming it (`-- Process N terminated with the following error:`). A child that died:
ProcessExitedException, `process N terminated with signal SIGKILL` or `... with exit code 1`.
N is the spawn index, which training scripts pass on as the rank. The wording is the same in
torch 1.10.2 ... 2.13.0 (%-formatting before 2.7, f-strings after); the exception classes since
1.8 (a plain Exception before).
"""

from __future__ import annotations

from faultloop.analyze.logsage.vocab import CHILD_ERROR, DEATH, Rule

SPAWN = ("torch", "torch/multiprocessing/spawn.py")

# fmt: off
REPORT_ROWS: tuple[Rule, ...] = (
    Rule("spawn_exited", DEATH, ("erminat",),
         r"process (?P<rank>\d+) terminated with (?:signal (?P<sig>SIG[A-Z0-9]+)|exit code (?P<code>\d+))", origin=SPAWN),
    Rule("spawn_raised", CHILD_ERROR, ("erminat",), r"-- Process (?P<rank>\d+) terminated with the following error:",
         origin=SPAWN),
)
# fmt: on
# no frames: the child's own traceback, printed under the header, runs through spawn.py's _wrap too
FRAMES = ""
REPORT_EXCEPTIONS = ("ProcessRaisedException", "ProcessExitedException")
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = SPAWN
