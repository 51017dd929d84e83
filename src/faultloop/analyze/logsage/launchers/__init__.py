"""The launcher layer: one adapter per launcher or orchestrator, the module to patch for its words.

A launcher's report of a child is that child's death record (rank, exit status or signal), and a
launcher's own failure is a launch failure, never the workload's exception. Each adapter is
written from its program's source and states the versions each wording is printed by:

  torchrun.py     torchrun / torch.distributed.elastic's agent, its summary and its rendezvous
  launch.py       torch.distributed.launch (and CPython's CalledProcessError, which accelerate raises too)
  spawn.py        torch.multiprocessing.spawn
  deepspeed.py    DeepSpeed's launcher (runner.py over pdsh, launch.py per node)
  accelerate.py   accelerate launch
  lightning.py    Lightning's subprocess launcher and signal handlers
  srun.py         SLURM's srun (its task reports and launch failures)
  open_mpi.py     Open MPI's mpirun (orterun <= 4.1, prterun 5.0)
  mpich.py        MPICH's mpiexec (Hydra), and Intel MPI's mpiexec.hydra
  kubeflow.py     Kubeflow's training operator (PyTorchJob and the other jobs' conditions)
  kubernetes.py   Kubernetes' pod and Job status (OOMKilled, Evicted, CrashLoopBackOff, BackoffLimitExceeded)
  ray.py          Ray Train, and Ray's own reports (a worker's death, the memory monitor, a node lost)
  dask.py         Dask distributed's nanny and scheduler
  horovod.py      horovodrun (Gloo and MPI) and Horovod's stall inspector
  submitit.py     submitit's handler of the scheduler's signals in a SLURM job
  torch_tests.py  torch's distributed test harness (MultiProcessTestCase): the rank it timed out on

An adapter's rows are Rule rows of the RULES vocabulary. RULES is first-match-wins, so each row
stands where it must in that order; rules.py splices an adapter's tuples at their places:
  NODE_ROWS      with the scheduler's rows, first (an orchestrator's word that a node was lost or a pod ended)
  STALL_ROWS     among the timeout rows (a launcher's word that a rank never ended: its culprit)
  VICTIM_ROWS    among the lost-peer rows (a launcher's word that a survivor lost its peers)
  FAILURE_ROWS   launch failures and task ends, before the shell's and faulthandler's wording
  REPORT_ROWS    reports of the children's ends and of signals to the launcher, after tracebacks
  WORKER_ROWS    an orchestrator's worker errors, before the plain exception line
Besides rows, an adapter names the files of its own tracebacks (FRAMES: a traceback through them
is the launcher's, reporting a child or failing itself), the exception classes with which it
reports a child (REPORT_EXCEPTIONS) and, where it has them, the functions of its own work after its
workers ended (AFTER_RUN: a traceback it logs from there is its own wait, not a worker's failure). Where a launcher words what happened on lines no anchor finds,
its adapter states how they are reached: on the later lines of an exception's message
(MESSAGE_ROWS, Ray; WHY_BELOW where the exception line stands without its traceback), or above the
line it reports a death with (WHY_ABOVE, Dask's memory kills).
"""

from __future__ import annotations

import importlib
import pkgutil
import re

from faultloop.analyze.logsage import ablation
from faultloop.analyze.logsage.launchers import dask, deepspeed, horovod, open_mpi, ray

# every module of the package is an adapter: a new one takes part once its rows are spliced into RULES
EVERY_ADAPTER = tuple(importlib.import_module(f"{__name__}.{module.name}") for module in pkgutil.iter_modules(__path__))
# the adapters of the programs this process reads (all but those left out: ablation.py)
ADAPTERS = tuple(adapter for adapter in EVERY_ADAPTER if ablation.keeps(adapter.ORIGIN))

# a frame of a launcher's own traceback (it reports a worker's failure, or fails itself)
LAUNCHER_FRAMES = re.compile("|".join(adapter.FRAMES for adapter in ADAPTERS if adapter.FRAMES) or "(?!)")
# a function of a launcher's own work after its workers ended (torchrun's exit barrier): an exception it
# logs from there is the launcher's, not a worker's failure or a hang
LAUNCHER_AFTER_RUN = re.compile("|".join(a.AFTER_RUN for a in ADAPTERS if getattr(a, "AFTER_RUN", "")) or "(?!)")
# the exception classes launchers report a child's failure with (the child's own lines say why)
LAUNCHER_EXCEPTIONS = tuple(name for adapter in ADAPTERS for name in adapter.REPORT_EXCEPTIONS)
# the classes an orchestrator reports a worker's end with, and the cause each means (Dask's KilledWorker)
EXCEPTION_CAUSES = {name: cause for a in ADAPTERS for name, cause in getattr(a, "EXCEPTION_CAUSES", {}).items()}
# the first process a launcher's multi-line report names: its name's rank (mpirun, horovodrun)
FIRST_EXIT_NAMES = tuple(adapter.NAME_RE for adapter in (open_mpi, horovod) if adapter in ADAPTERS)
# the number of children a launcher's report of a death says it spawned (DeepSpeed's command of the last one)
SPAWNED_RES = tuple(adapter.LAST_SPAWNED_RE for adapter in (deepspeed,) if adapter in ADAPTERS)
# rows read on the later lines of an exception's message, where a launcher words what happened
MESSAGE_ROWS = tuple(row for row in ray.MESSAGE_ROWS if ablation.keeps(row.origin))
# a launcher's row -> the row of a line it logs above it that says why (read back from that line)
WHY_ABOVE = {name: row for name, row in dask.WHY_ABOVE.items() if ablation.keeps(row.origin)}
# a launcher's row -> the row of a later line of the same message that says why (read on from that line)
WHY_BELOW = {name: row for name, row in ray.WHY_BELOW.items() if ablation.keeps(row.origin)}
