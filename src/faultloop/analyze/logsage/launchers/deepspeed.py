"""DeepSpeed's launcher: `deepspeed` (launcher/runner.py) starts launcher/launch.py on each node
(through pdsh, whose `node01: ` prefixes framing peels), which runs one child per local rank.

launch.py polls its children; the first that ends non-zero makes it kill the rest (`Killing
subprocess P`) and log `{cmd} exits with return code = N` (v0.5.8 on); a signal to the launcher
itself is `Main process received SIGTERM, exiting` (v0.3.12 on, printed, logged from v0.6.0).
`{cmd}` is the command of the child spawned last, not of the one that failed (the variable is
left over from the spawning loop), so its `--local_rank=L` names no culprit: only the exit status
is the failed child's. runner.py exits with the status quietly.
"""

from __future__ import annotations

from faultloop.analyze.logsage.vocab import DEATH, JOB_SIGNAL, Rule

LAUNCH = ("DeepSpeed", "deepspeed/launcher/launch.py (sigkill_handler)")

# fmt: off
REPORT_ROWS: tuple[Rule, ...] = (
    Rule("deepspeed_signalled", JOB_SIGNAL, ("eceived SIG",), r"Main process received (?:SIG[A-Z0-9]+|\d+), exiting",
         origin=LAUNCH),
    Rule("deepspeed_exit", DEATH, ("exit",), r"exits with return code = (?P<code>-?\d+)", origin=LAUNCH),
)
# fmt: on
FRAMES = r"deepspeed/launcher/|/bin/deepspeed\b"
REPORT_EXCEPTIONS: tuple[str, ...] = ()
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = LAUNCH
