"""DeepSpeed's launcher: `deepspeed` (launcher/runner.py) starts launcher/launch.py on each node
(through pdsh, whose `node01: ` prefixes framing peels), which runs one child per local rank.

launch.py polls its children; the first that ends non-zero makes it kill the rest (`Killing
subprocess P`) and log `{cmd} exits with return code = N` (v0.5.8 on); a signal to the launcher
itself is `Main process received SIGTERM, exiting` (v0.3.12 on, printed, logged from v0.6.0).
Both are preceded by `Killing subprocess P` for every child (v0.3.12 on, printed, logged from
v0.5.8 as `[launch.py:N:sigkill_handler] Killing subprocess P`): a log cut there still says that
the launcher tore its workers down, which it does when a child ends non-zero or when it is itself
signalled; the second is said below (`Main process received`, its own row), so without it a
worker died.
`{cmd}` is the command of the child spawned last, not of the one that failed (the variable is
left over from the spawning loop), so its `--local_rank=L` names no culprit: only the exit status
is the failed child's. runner.py exits with the status quietly.
"""

from __future__ import annotations

import re

from faultloop.analyze.logsage.vocab import DEATH, JOB_SIGNAL, TEARDOWN, Cause, Rule

LAUNCH = ("DeepSpeed", "deepspeed/launcher/launch.py (sigkill_handler)")

# fmt: off
REPORT_ROWS: tuple[Rule, ...] = (
    Rule("deepspeed_signalled", JOB_SIGNAL, ("eceived SIG",), r"Main process received (?:SIG[A-Z0-9]+|\d+), exiting",
         origin=LAUNCH),
    Rule("deepspeed_exit", DEATH, ("exit",), r"exits with return code = (?P<code>-?\d+)", origin=LAUNCH),
    # the teardown, one line per child in the order they were spawned (local rank 0 first): the pids'
    # local ranks; with the status line cut off, a worker died (how, the log does not say)
    Rule("deepspeed_teardown", TEARDOWN, ("Kill",), r"Killing subprocess (?P<pid>\d+)", Cause.CRASH, LAUNCH),
)
# fmt: on
# the local rank in `{cmd}` (the last child spawned): the number of children, less one
LAST_SPAWNED_RE = re.compile(r"'--local_rank=(\d+)'")
FRAMES = r"deepspeed/launcher/|/bin/deepspeed\b"
REPORT_EXCEPTIONS: tuple[str, ...] = ()
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = LAUNCH
