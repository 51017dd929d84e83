"""Open MPI's mpirun: orterun up to 4.1.x (orte/tools/orterun/help-orterun.txt), prterun from 5.0
(PRRTE's help-prun.txt, a submodule of each 5.0.x release).

A rank killed by a signal: `mpirun noticed that process rank R with PID P on node H exited on
signal 9 (Killed).` on one line (1.10 ... 5.0.5), wrapped after `exited on` from 5.0.6 (PRRTE
3.0.7), so the signal stands alone on the next line. The first rank to exit non-zero: `mpirun
detected that one or more processes exited with non-zero status, thus causing the job to be
terminated. The first process to do so was:` (wrapped after `status,` from 5.0.6), then
`Process name: [[JOBID,1],R]` (orterun) or `[prterun-HOST-PID@1,R]` (prterun, 3 spaces in) and
`Exit code: N`. MPI_Init failing is the launch environment's failure (errhandler_predefined.c).
"""

from __future__ import annotations

import re

from faultloop.analyze.logsage.vocab import DEATH, FATAL, FIRST_EXIT, Cause, Rule

ERRHANDLER = ("Open MPI", "ompi/errhandler/errhandler_predefined.c")
RUN = ("Open MPI", "orte/tools/orterun/help-orterun.txt (<= 4.1); prrte src/docs/show-help-files/help-prun.txt (5.0)")

# fmt: off
FAILURE_ROWS: tuple[Rule, ...] = (
    Rule("mpi_fatal", FATAL, ("rror",), r"\*\*\* An error occurred in MPI_", Cause.LAUNCH_ENV, ERRHANDLER),
)
REPORT_ROWS: tuple[Rule, ...] = (
    Rule("mpirun_signal", DEATH, ("ignal",),
         r"noticed that process rank (?P<rank>\d+) with PID (?:(?P<pid>\d+)|x+) on node \S+ exited on signal (?P<sig>\d+)",
         origin=RUN),
    # the report wrapped after `exited on` (5.0.6 on): the signal is read from the next line, after the scan
    Rule("mpirun_signal_wrapped", FIRST_EXIT, ("exit",),
         r"noticed that process rank (?P<rank>\d+) with PID (?:\d+|x+) on node \S+ exited on\s*$", origin=RUN),
    Rule("mpirun_first_exit", FIRST_EXIT, ("exit",),
         r"detected that one or more processes exited with non-zero status", origin=RUN),
)
# fmt: on
# the lines of a first-exit report below its header: the process's rank (the last number of its
# name) and its status; the wrapped signal report's rank (its header) and signal (the next line)
NAME_RE = re.compile(r"^\s*Process name: \[(?:\[[\d.]+,\d+\]|[^\]@\s]+@\d+),(\d+)\]")
CODE_RE = re.compile(r"^\s*Exit code:\s+(-?\d+)")
WRAPPED_RANK_RE = re.compile(REPORT_ROWS[1].pattern)
WRAPPED_SIGNAL_RE = re.compile(r"^\s*signal (\d+)\b")
FRAMES = ""
REPORT_EXCEPTIONS: tuple[str, ...] = ()
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = RUN
