"""logsage's vocabulary: the kinds of evidence a line can be, the causes logsage can diagnose, and
what a rule row is. Below both the line table (rules.py) and the launcher adapters (launchers/),
which are written in it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# -- evidence kinds ------------------------------------------------------------------------------
# symptoms: the rank only suffered (a victim)
TIMEOUT = "collective_timeout"
PEER_LOST = "peer_lost"
# origins: the rank failed on its own
EXCEPTION_KIND = "exception"
FATAL = "fatal_error"
GPU = "gpu_error"
GPU_HARDWARE = "gpu_hardware"  # reported asynchronously (kernel log, driver): its place in the log says nothing
OOM_KIND = "oom"
SIGNAL = "signal_received"
DEATH = "death"  # killed by a signal, as the launcher or scheduler saw it
NETWORK_KIND = "network_error"
# weak origins: a failure whose nature the log does not show; they count only when nothing stronger does
EXITED = "exited"  # a non-zero exit status without a signal
TRACEBACK_CUT = "traceback_cut"  # a traceback whose exception line is not in the log
TERMINATE = "cpp_terminate"  # a C++ exception ended the process; its what() line says why
REPORTED = "reported_error"  # a program's plain `error:` line
DIVERGED = "diverged"  # the run goes on but learns nothing (nearly every step skipped on overflow)
CUDA_HINT = "cuda_hint"  # the lines torch prints after a CUDA error; a GPU error if the error line is cut
# block openers (read after the scan)
TRACEBACK = "traceback"
STACK_DUMP = "stack_dump"
# launcher and scheduler
FIRST_EXIT = "launcher_first_exit"  # a launcher's block naming the first process to end badly (read after the scan)
MISSING = "launcher_missing_ranks"  # a launcher's list of ranks that never joined a collective (read after the scan)
CHILD_ERROR = "child_error"  # a launcher's header over the traceback a child raised: it names the child
SUMMARY = "launcher_summary"  # a torchrun failure summary section: hint says which ("first" or "others")
RECORD = "launcher_record"  # one rank's entry in that summary
CLOSED = "launcher_closed"
KILLED = "launcher_killed"
TEARDOWN = "launcher_teardown"  # a launcher killing each worker in the order it spawned them (read after the scan)
STOPPING = "job_stopping"  # the launcher or scheduler began tearing the job down
JOB_SIGNAL = "job_signal"
SLURM = "slurm"
# context: helps tell faults apart, never an origin by itself
STALL = "stall_watchdog"
PROGRESS = "collective_progress"
COLLECTIVE = "collective"  # a collective's description (WorkNCCL(...)) on a line of its own
BUSY = "one_rank_work"  # evaluation, checkpoint writing, preprocessing: work one rank does while others wait
CHECKPOINT = "checkpoint_saved"
DONE = "job_done"

SYMPTOMS = (TIMEOUT, PEER_LOST)
ORIGINS = (EXCEPTION_KIND, FATAL, GPU, GPU_HARDWARE, OOM_KIND, SIGNAL, DEATH, NETWORK_KIND)
WEAK_ORIGINS = (EXITED, TRACEBACK_CUT, TERMINATE, REPORTED, DIVERGED)


class Cause(StrEnum):
    """Every cause logsage can diagnose: the injected faults (faults.FAULTS, same names) and the
    causes real jobs show. POLICY below says what each means."""

    GPU_ERROR = "GPU_ERROR"
    GPU_SLEEP = "GPU_SLEEP"
    WORKLOAD_EXC = "WORKLOAD_EXC"
    ASYNC_EXC = "ASYNC_EXC"
    SIGNAL_EXC = "SIGNAL_EXC"
    OS_ABORT = "OS_ABORT"
    LOCK_GIL = "LOCK_GIL"
    SEGFAULT = "SEGFAULT"
    SIGINT = "SIGINT"
    SIGKILL = "SIGKILL"
    SIGTERM = "SIGTERM"
    SIGSTOP = "SIGSTOP"
    HANG = "HANG"
    CRASH = "CRASH"
    OOM = "OOM"
    NETWORK = "NETWORK"
    EXTERNAL_SIGNAL = "EXTERNAL_SIGNAL"
    PREEMPTION = "PREEMPTION"
    CANCELLED = "CANCELLED"
    NODE_FAIL = "NODE_FAIL"
    NODE_LOST = "NODE_LOST"
    TIME_LIMIT = "TIME_LIMIT"
    TIME_LIMIT_AFTER_PROGRESS = "TIME_LIMIT_AFTER_PROGRESS"
    DONE = "DONE"
    DESYNC = "DESYNC"
    SETUP_HANG = "SETUP_HANG"
    SHUTDOWN_HANG = "SHUTDOWN_HANG"
    SLOW_RANK = "SLOW_RANK"
    WATCHDOG_HANG = "WATCHDOG_HANG"
    CONFIG_ERROR = "CONFIG_ERROR"
    LAUNCH_ENV = "LAUNCH_ENV"
    LAUNCH_ADDRESS = "LAUNCH_ADDRESS"
    RENDEZVOUS_CLOSED = "RENDEZVOUS_CLOSED"
    DATA_ERROR = "DATA_ERROR"
    NCCL_SETUP = "NCCL_SETUP"
    DIVERGED = "DIVERGED"
    PROGRAM_ERROR = "PROGRAM_ERROR"
    TRANSIENT_EXC = "TRANSIENT_EXC"
    SETUP_EXC = "SETUP_EXC"
    # causes whose evidence a rank leaves on its own (the faults of issue 26)
    NET_DROP = "NET_DROP"
    HOST_OOM = "HOST_OOM"
    NAN_LOSS = "NAN_LOSS"
    STORAGE_FULL = "STORAGE_FULL"
    STORAGE_ERROR = "STORAGE_ERROR"


# Where the lines a rule matches come from: (program, source file that prints the template).
Origin = tuple[str, str]


@dataclass(frozen=True)
class Rule:
    """One log pattern: if any anchor is in the line and the regex matches, it is evidence of kind.
    origin names the program that prints the template and the file it is printed from."""

    name: str
    kind: str
    anchors: tuple[str, ...]
    pattern: str
    hint: str | None = None  # the cause this line points to (a Cause; "first"/"others" for a summary section)
    origin: Origin = ("", "")
