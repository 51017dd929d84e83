"""SLURM's srun: it launches the tasks of a step and reports how each ended.

`srun: error: HOST: task(s) LIST: HOW` (launch_slurm.c in 17.11 ... 22.05, src/srun/launch.c
from 23.02; the same words throughout): HOW is `Exited with exit code N`, strsignal()'s name of
the signal (`Killed`, `Segmentation fault`, with ` (core dumped)` where a core was written) or
`Out Of Memory`; a task is a rank unless one torchrun runs per node (scan reads which).
Its own failures end the step before any task ran: `Unable to create step for job J`, `Task
launch for StepId=J.S failed on node H` (`J.S` before 20.11), `Application launch failed`,
`Unable to allocate resources` (src/srun/allocate.c; libsrun/ before 20.11). The scheduler's
own lines (slurmstepd's CANCELLED, node failures, srun's teardown) stay in RULES' scheduler rows.
"""

from __future__ import annotations

from faultloop.analyze.logsage.vocab import DEATH, FATAL, Cause, Rule

TASKS = ("SLURM", "src/srun/launch.c (launch_slurm.c before 23.02)")
STEP = ("SLURM", "src/srun/launch.c, src/srun/allocate.c, src/api/step_launch.c")

# fmt: off
FAILURE_ROWS: tuple[Rule, ...] = (
    Rule("srun_launch_failed", FATAL, ("rror",),
         r"srun: error: (?:Unable to create step for job \d+|Task launch for \S+ failed on node|Application launch failed"
         r"|Unable to allocate resources)", Cause.LAUNCH_ENV, STEP),
    Rule("srun_task", DEATH, ("rror",), r"srun: error: \S+: tasks? (?P<tasks>[\d,\-]+): (?P<what>.+)", origin=TASKS),
)
# fmt: on
FRAMES = ""
REPORT_EXCEPTIONS: tuple[str, ...] = ()
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = TASKS
