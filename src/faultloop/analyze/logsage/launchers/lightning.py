"""Lightning's launchers and signal handling (lightning/fabric/strategies/launchers,
lightning/pytorch/trainer/connectors/signal_connector.py; pytorch_lightning/ before 2.0).

Its subprocess-script launcher re-runs the script once per extra local rank and, from 2.1, watches
the children: `[rank: L] Child process with PID P terminated with code N. Forcefully terminating
all other processes to avoid zombies` (L = the child's local rank). The trainer's SIGTERM handler
logs `[rank: L] Received SIGTERM: 15` (2.0 on; L is the trainer's local rank, the global one on a
single node); SLURM's requeue signal is `handling auto-requeue signal` (1.8, 1.9) and `Handling
auto-requeue signal: N` (2.0 on).
"""

from __future__ import annotations

from faultloop.analyze.logsage.vocab import DEATH, JOB_SIGNAL, SIGNAL, Rule

SIGNALS = ("Lightning", "lightning/pytorch/trainer/connectors/signal_connector.py")
OBSERVER = ("Lightning", "lightning/fabric/strategies/launchers/subprocess_script.py (_ChildProcessObserver)")

# fmt: off
REPORT_ROWS: tuple[Rule, ...] = (
    Rule("lightning_requeue", JOB_SIGNAL, ("ignal",), r"[Hh]andling auto-requeue signal", origin=SIGNALS),
    Rule("lightning_signal", SIGNAL, ("eceived SIG",), r"\[rank: (?P<rank>\d+)\] Received SIG[A-Z0-9]+", origin=SIGNALS),
    Rule("lightning_child_died", DEATH, ("erminat",),
         r"(?:\[rank: (?P<local>\d+)\] )?Child process with PID (?P<pid>\d+) terminated with code (?P<code>-?\d+)",
         origin=OBSERVER),
)
# fmt: on
FRAMES = ""  # the launcher is the script itself: its frames are the workload's
REPORT_EXCEPTIONS: tuple[str, ...] = ()
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = OBSERVER
