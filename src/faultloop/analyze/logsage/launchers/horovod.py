"""Horovod: horovodrun runs its workers with Gloo (runner/gloo_run.py) or through mpirun
(runner/mpi_run.py; horovod/run/ before 0.20), and its core reports stalls (common/stall_inspector.cc).

gloo_run prints `Process R exit with status code N.` for each worker that ended non-zero (0.17.0
on) and raises `RuntimeError: Horovod detected that one or more processes exited with non-zero
status, ... The first process to do so was:` over `Process name: R` and `Exit code: N` (0.19.0 on;
R is the slot's index, its rank; the elastic driver (0.20.0 on) names `host[local]`, a local rank on a
host, which says no global rank). N is a shell's status: 137 is a death by SIGKILL. mpi_run's
function mode raises `mpirun failed with exit code N` (0.19.0 on); mpirun's own report says who.
The survivors of a failed rank raise `Horovod has been shut down. This was caused by an exception
on one of the ranks ...` (common.h, 0.13.6 on): victims.
The stall inspector, after a tensor waited 60 s (HOROVOD_STALL_CHECK_TIME_SECONDS) for some ranks,
warns `One or more tensors were submitted to be reduced, gathered or broadcasted by subset of
ranks and are waiting for remainder of ranks for more than N seconds.` and lists the ranks that
never submitted, one a line (`R: [tensor, ...]`, `R!: [...]` for those past the shutdown time),
under `Missing ranks:` (0.20.1 on) or `Stalled ranks:` (0.16.2 to 0.20.0); from 0.13.6 to 0.16.1 each
stalled tensor's line ends `[missing ranks: R, R]`, and from 0.9.0 to 0.13.5, `Stalled ops: T [ready ranks:
R, R], ...` names the ranks that did submit, on one line: the missing ones are the others (those below the
highest ready rank, where the log states no world size). The ranks it names are the culprits.
"""

from __future__ import annotations

import re

from faultloop.analyze.logsage.vocab import DEATH, MISSING, PEER_LOST, TIMEOUT, Rule

GLOO_RUN = ("Horovod", "horovod/runner/gloo_run.py (horovod/run/ before 0.20)")
MPI_RUN = ("Horovod", "horovod/runner/mpi_run.py")
COMMON = ("Horovod", "horovod/common/common.h (SHUT_DOWN_ERROR)")
STALL = ("Horovod", "horovod/common/stall_inspector.cc (operations.cc before 0.17)")
STALL_READY = (
    "Horovod",
    "horovod/common/operations.cc (tensorflow/mpi_ops.cc before 0.12): the ranks ready, 0.9.0-0.13.5",
)

# fmt: off
# among the lost-peer rows, before the plain NCCL error
VICTIM_ROWS: tuple[Rule, ...] = (
    Rule("horovod_shut_down", PEER_LOST, ("rror",), r"Error: Horovod has been shut down\. This was caused by an exception",
         origin=COMMON),
)
REPORT_ROWS: tuple[Rule, ...] = (
    Rule("horovod_exit", DEATH, ("exit",), r"Process (?P<rank>\d+) exit with status code (?P<code>-?\d+)", origin=GLOO_RUN),
    Rule("horovod_mpirun_failed", DEATH, ("exit",), r"mpirun failed with exit code (?P<code>\d+)", origin=MPI_RUN),
    Rule("horovod_missing_ranks", MISSING, ("ranks:",), r"^(?:Missing|Stalled) ranks:\s*$", origin=STALL),
    Rule("horovod_stalled_op", TIMEOUT, ("ranks:",), r"\[missing ranks: (?P<missing>\d+(?:, \d+)*)\]", origin=STALL),
    Rule("horovod_stalled_ready", TIMEOUT, ("ranks:",), r"\[ready ranks: (?P<ready>\d+(?:, \d+)*)\]", origin=STALL_READY),
)
# fmt: on
# the first process's name in gloo_run's first-exit report: the slot's index, its rank; or the elastic
# driver's `host[local]` (no rank: group 1 stays empty)
NAME_RE = re.compile(r"^\s*Process name: (?:(\d+)|\S+\[\d+\])\s*$")
# one line of the stall inspector's list: a rank that never submitted (`!`: past the shutdown time)
MISSING_RANK_RE = re.compile(r"^\s*(\d+)!?: \[")
FRAMES = r"horovod/runner/|horovod/run/|/bin/horovodrun\b"
REPORT_EXCEPTIONS: tuple[str, ...] = ()
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = MPI_RUN
