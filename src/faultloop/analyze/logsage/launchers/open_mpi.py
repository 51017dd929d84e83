"""Open MPI's mpirun: orterun up to 4.1.x (orte/tools/orterun/help-orterun.txt), prterun from 5.0
(PRRTE's help-prun.txt, a submodule of each 5.0.x release).

A rank killed by a signal: `mpirun noticed that process rank R with PID P on node H exited on
signal 9 (Killed).` on one line (1.10 ... 5.0.5), wrapped after `exited on` from 5.0.6 (PRRTE
3.0.7), so the signal stands alone on the next line. The first rank to exit non-zero: `mpirun
detected that one or more processes exited with non-zero status, thus causing the job to be
terminated. The first process to do so was:` (wrapped after `status,` from 5.0.6), then
`Process name: [[JOBID,1],R]` (orterun) or `[prterun-HOST-PID@1,R]` (prterun, 3 spaces in) and
`Exit code: N`. A rank that ended without MPI_Finalize: `mpirun has exited due to process rank R
with PID P on\nnode H exiting improperly.` (its rank, no status). The job aborted on a non-zero
status: `Primary job  terminated normally, but 1 process returned\na non-zero exit code. Per
user-direction, the job has been aborted.` (orte/mca/errmgr/base/help-errmgr-base.txt, <= 4.1), a
header over the first-exit block. A daemon lost: `ORTE has lost communication with a remote
daemon.` (its node went away), or `An ORTE daemon has unexpectedly failed after launch and before
communicating back to mpirun.` (a launch that could not reach a node, errmgr's help, 1.10 ... 4.1).
MPI_Init failing is the launch environment's failure (errhandler_predefined.c).
"""

from __future__ import annotations

import re

from faultloop.analyze.logsage.vocab import DEATH, FATAL, FIRST_EXIT, PEER_LOST, STOPPING, Cause, Rule

ERRHANDLER = ("Open MPI", "ompi/errhandler/errhandler_predefined.c")
RUN = ("Open MPI", "orte/tools/orterun/help-orterun.txt (<= 4.1); prrte src/docs/show-help-files/help-prun.txt (5.0)")
ERRMGR = ("Open MPI", "orte/mca/errmgr/base/help-errmgr-base.txt (<= 4.1)")

# fmt: off
FAILURE_ROWS: tuple[Rule, ...] = (
    Rule("mpi_fatal", FATAL, ("rror",), r"\*\*\* An error occurred in MPI_", Cause.LAUNCH_ENV, ERRHANDLER),
    Rule("orte_daemon_failed", FATAL, ("ailed",), r"An ORTE daemon has unexpectedly failed after launch", Cause.LAUNCH_ENV,
         ERRMGR),
)
# among the lost-peer rows: a daemon, and the node it ran on, went away mid-run
VICTIM_ROWS: tuple[Rule, ...] = (
    Rule("orte_lost_daemon", PEER_LOST, ("lost",), r"ORTE has lost communication with a remote daemon", Cause.NODE_FAIL,
         ERRMGR),
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
    # a rank that ended (status 0) without MPI_Finalize while the others ran: it died without a word
    Rule("mpirun_exit_improper", DEATH, ("exit",), r"has exited due to process rank (?P<rank>\d+) with PID (?:\d+|x+) on",
         Cause.CRASH, RUN),
    Rule("mpirun_aborted", STOPPING, ("erminat",), r"job +\S* ?terminated normally, but \d+ process(?:es)? returned",
         origin=ERRMGR),
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
