"""submitit (facebookincubator/submitit): runs a Python function as a SLURM job and handles the
scheduler's signals in the job itself (submitit/core/job_environment.py, SignalHandler).

It ignores SIGTERM and SIGCONT and logs `Bypassing signal SIGTERM` (the signal's number before 1.4.0):
SLURM began stopping the job. On its requeue signal (SIGUSR2; SIGUSR1 before 1.5) it logs `Caught
signal SIGUSR2 on HOST: this job is preempted.` or `... this job is timed-out.`, the case read from
the time the job ran against its requested limit (1.0.0 ... 1.5.4 read): the scheduler's preemption
(RULES' `preempted` row reads it) or its time limit. The signals are the scheduler's, never a crash.
"""

from __future__ import annotations

from faultloop.analyze.logsage.vocab import JOB_SIGNAL, SLURM, Cause, Rule

HANDLER = ("submitit", "submitit/core/job_environment.py (SignalHandler.bypass, checkpoint_and_try_requeue)")

# fmt: off
REPORT_ROWS: tuple[Rule, ...] = (
    Rule("submitit_timed_out", SLURM, ("ignal",), r"Caught signal (?:SIG[A-Z0-9]+|\d+) on \S+: this job is timed-out",
         Cause.TIME_LIMIT, HANDLER),
    Rule("submitit_bypassed", JOB_SIGNAL, ("ignal",), r"Bypassing signal (?:SIG[A-Z0-9]+|\d+)", origin=HANDLER),
)
# fmt: on
FRAMES = r"submitit/core/"
REPORT_EXCEPTIONS: tuple[str, ...] = ()
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = HANDLER
