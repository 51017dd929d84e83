"""MPICH's mpiexec (Hydra), which Intel MPI's mpiexec.hydra is built from.

Where a rank dies by a signal, Hydra's server prints its block (src/pm/hydra/pm/pmiserv/
pmiserv_cb.c; mpiexec/pmiserv_cb.c from 4.1): `BAD TERMINATION OF ONE OF YOUR APPLICATION
PROCESSES`, `PID P RUNNING AT H`, `EXIT CODE: N` (the raw wait status where the process was not
WIFEXITED: the signal, 128 more with a core dump), and mpiexec, exiting with that status, closes
with `YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)` (strsignal's words and
the number; ui/mpich/mpiexec.c, mpiexec/mpiexec.c from 4.1), read at v3.2, v3.4, v4.0 and 4.3.
Intel MPI's block names the rank instead (`RANK R PID P RUNNING AT H`, `KILLED BY SIGNAL: 9
(Killed)`); its closing line is Hydra's. The block's upper-case lines carry no anchor of the
prefilter's: the closing line reads the death, the rank is not named there.
"""

from __future__ import annotations

from faultloop.analyze.logsage.vocab import DEATH, Rule

MPIEXEC = ("MPICH", "src/pm/hydra/ui/mpich/mpiexec.c (src/pm/hydra/mpiexec/mpiexec.c from 4.1)")

# fmt: off
REPORT_ROWS: tuple[Rule, ...] = (
    Rule("hydra_signal", DEATH, ("ignal",), r"YOUR APPLICATION TERMINATED WITH THE EXIT STRING: .*\(signal (?P<sig>\d+)\)",
         origin=MPIEXEC),
)
# fmt: on
FRAMES = ""
REPORT_EXCEPTIONS: tuple[str, ...] = ()
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = MPIEXEC
