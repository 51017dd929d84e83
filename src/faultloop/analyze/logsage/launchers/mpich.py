"""MPICH's mpiexec (Hydra), which Intel MPI's mpiexec.hydra is built from.

Where a rank dies by a signal, Hydra's server prints its block (src/pm/hydra/pm/pmiserv/
pmiserv_cb.c; mpiexec/pmiserv_cb.c from 4.1): `BAD TERMINATION OF ONE OF YOUR APPLICATION
PROCESSES`, `PID P RUNNING AT H`, `EXIT CODE: N` (the raw wait status where the process was not
WIFEXITED: the signal, 128 more with a core dump), and mpiexec, exiting with that status, closes
with `YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)` (strsignal's words and
the number; ui/mpich/mpiexec.c, mpiexec/mpiexec.c from 4.1), read at v3.2, v3.4, v4.0 and 4.3.
Intel MPI's block names the rank instead (`RANK R PID P RUNNING AT H`, `KILLED BY SIGNAL: 9
(Killed)`); its closing line is Hydra's. The block is found by its `RUNNING AT` line and read after
the scan: the status on the line below it (MPICH's raw wait status, Intel MPI's signal) is a
process's death by a signal. It names no culprit: the server prints the first process of a proxy
that did not exit, once all of them ended, which may be one its clean-up killed (docs/launchers.md
saw it so), so neither its pid nor Intel MPI's rank is read as the one that failed first.
"""

from __future__ import annotations

import re

from faultloop.analyze.logsage.vocab import DEATH, FIRST_EXIT, Rule

MPIEXEC = ("MPICH", "src/pm/hydra/ui/mpich/mpiexec.c (src/pm/hydra/mpiexec/mpiexec.c from 4.1)")
SERVER = ("MPICH", "src/pm/hydra/pm/pmiserv/pmiserv_cb.c (mpiexec/pmiserv_cb.c from 4.1); Intel MPI's mpiexec.hydra")

# fmt: off
REPORT_ROWS: tuple[Rule, ...] = (
    Rule("hydra_signal", DEATH, ("ignal",), r"YOUR APPLICATION TERMINATED WITH THE EXIT STRING: .*\(signal (?P<sig>\d+)\)",
         origin=MPIEXEC),
    # the block's process line, its status on the next line (read after the scan)
    Rule("hydra_bad_termination", FIRST_EXIT, ("RUNNING AT",), r"^=\s+(?:RANK \d+ )?PID \d+ RUNNING AT \S",
         origin=SERVER),
)
# fmt: on
# the block's lines: the process (Intel MPI names its rank too), then its status: MPICH's `EXIT CODE` is the raw
# wait status of a process that did not exit (the signal, 128 more with a core dump), Intel MPI's the signal
RUNNING_RE = re.compile(REPORT_ROWS[1].pattern)
STATUS_RE = re.compile(r"^=\s+(?:EXIT CODE: (?P<status>\d+)|KILLED BY SIGNAL: (?P<sig>\d+))")
FRAMES = ""
REPORT_EXCEPTIONS: tuple[str, ...] = ()
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = MPIEXEC
