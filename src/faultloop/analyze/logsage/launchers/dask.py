"""Dask distributed: a nanny process runs each worker and restarts it when it dies.

The nanny logs the worker's end (`Worker process P was killed by signal N`, `... exited with
status N`, `... was killed by unknown signal`: nanny.py's _death_message, the same words from
1.17.1 to 2026.7.1), then `Restarting worker`. Past the memory limit it terminates the worker
itself (`Worker exceeded 95% memory budget. Restarting`, `Worker ADDR (pid=P) exceeded 95% memory
budget. Restarting...` from 2022.05.1, worker_memory.py; nanny.py before): read back from the death
line below it (that line has no anchor of the prefilter's budget), it makes the death the
worker's running out of memory, not a SIGTERM from outside. A task that raised in its worker is logged there as `Compute Failed` (worker.py, 1.22 on) over
its key and `Exception: <repr>`: the training function's own exception. A task whose every attempt
killed its worker makes the scheduler raise KilledWorker in the client (`Attempted to run task K
on N different workers, but all those workers died while running it.` from 2023.9.3, a bare tuple
before): the tasks crash their workers.
"""

from __future__ import annotations

from faultloop.analyze.logsage.vocab import DEATH, EXCEPTION_KIND, OOM_KIND, Cause, Rule

NANNY = ("Dask", "distributed/nanny.py (_death_message)")
MEMORY = ("Dask", "distributed/worker_memory.py (the nanny's memory monitor; nanny.py before 2022.05.1)")
WORKER = ("Dask", "distributed/worker.py (a task's failure: ` Compute Failed` before 2021.12, `Compute Failed` after)")

# fmt: off
REPORT_ROWS: tuple[Rule, ...] = (
    Rule("dask_worker_died", DEATH, ("ignal", "exit"),
         r"Worker process (?P<pid>\d+) (?:was killed by signal (?P<sig>\d+)|exited with status (?P<code>\d+))", origin=NANNY),
    # a task (the training function) raised in its worker: the worker logs `Compute Failed` over the task's key,
    # function or spec and `Exception: <repr>` (1.22 on; a warning, an error from 2024.6.0), the worker lives on
    Rule("dask_compute_failed", EXCEPTION_KIND, ("ailed",), r"(?:^|\s)Compute Failed\s*$", Cause.WORKLOAD_EXC, WORKER),
)
# fmt: on
# the nanny's memory kill, logged above the death of the worker it terminated
WHY_ABOVE: dict[str, Rule] = {
    "dask_worker_died": Rule(
        "dask_memory_kill",
        OOM_KIND,
        (),
        r"\bWorker (?:\S+ \(pid=(?P<pid>\d+)\) )?exceeded \d+% memory budget",
        Cause.OOM,
        MEMORY,
    ),
}
FRAMES = ""
REPORT_EXCEPTIONS: tuple[str, ...] = ()
# exception classes a launcher raises in the user's process, and the cause they mean
EXCEPTION_CAUSES: dict[str, str] = {"KilledWorker": Cause.CRASH}
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = NANNY
