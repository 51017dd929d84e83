"""logsage's tables: what log lines mean and what each diagnosed cause means. The file to patch.

HOW TO PATCH BETWEEN LOOP ITERATIONS
  * A log line is missed or misread -> edit RULES: one row per (anchor literals, regex, kind,
    hint). The anchors must be substrings of every line the regex can match; they are the
    prefilter. First matching row wins, so put specific rows above general ones. Named groups
    carry facts: rank (global), local (local rank), pid, code (exit status), sig (signal),
    tasks and what (srun), missing (ranks a barrier waited for), seq (a collective's number).
  * A decision is wrong for a whole cause -> edit POLICY (cause -> category, restart, why).
  * What a traceback, an exit status or a signal means -> the smaller tables at the end.
A rule fixes a class of lines (a launcher's wording, a prefix style), never one log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from faultloop.faults import (CRASH, EXCEPTION, EXTERNAL_SIGNAL, FAULTS, GPU_ERROR_CATEGORY, HANG, NETWORK, NONE,
                              OOM, OTHER, RESTART, STOP)

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
CUDA_HINT = "cuda_hint"  # the lines torch prints after a CUDA error; a GPU error if the error line is cut
# block openers (read after the scan)
TRACEBACK = "traceback"
STACK_DUMP = "stack_dump"
# launcher and scheduler
SUMMARY = "launcher_summary"  # a torchrun failure summary section: hint says which ("first" or "others")
RECORD = "launcher_record"  # one rank's entry in that summary
CLOSED = "launcher_closed"
KILLED = "launcher_killed"
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
WEAK_ORIGINS = (EXITED, TRACEBACK_CUT, TERMINATE)


@dataclass(frozen=True)
class Rule:
    """One log pattern: if any anchor is in the line and the regex matches, it is evidence of kind."""

    name: str
    kind: str
    anchors: tuple[str, ...]
    pattern: str
    hint: str | None = None  # a fault type or cause this line points to


# fmt: off
# RULES: the table to patch (see "HOW TO PATCH" above). kind decides the role of a line: symptom,
# origin, launcher/scheduler fact or context; hint names the fault or cause it points to.
RULES: tuple[Rule, ...] = (
    # -- the scheduler ended the job (these explain everything after them) --------------------
    Rule("preempted", SLURM, ("PREEMPTION", "preempted"), r"DUE TO PREEMPTION|\b[Pp]reempted\b", "PREEMPTION"),
    Rule("time_limit", SLURM, ("TIME LIMIT", "time limit"), r"DUE TO TIME LIMIT|[Tt]ime limit (?:of \S+ s )?reached", "TIME_LIMIT"),
    Rule("node_fail", SLURM, ("NODE_FAIL", "NODE FAIL", "ode failure"), r"NODE_FAIL|DUE TO NODE FAIL|[Nn]ode failure", "NODE_FAIL"),
    Rule("cancelled", SLURM, ("CANCELLED",), r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED", "CANCELLED"),
    Rule("step_teardown", STOPPING, ("Terminating StepId", "forcing job termination", "Job step aborted"),
         r"Terminating StepId|forcing job termination|Job step aborted"),
    # -- hang symptoms: the rank waited for a peer that never came ---------------------------
    Rule("gloo_timeout", TIMEOUT, ("Timed out waiting",), r"Timed out waiting \d+ ?ms for (?:recv|send) operation"),
    Rule("nccl_watchdog_timeout", TIMEOUT, ("Watchdog caught",), r"Watchdog caught collective"),  # often wrapped after it
    Rule("nccl_watchdog_stuck", TIMEOUT, ("eartbeat monitor timed out", "watchdog got stuck", "watchdog hang"),
         r"[Hh]eartbeat monitor timed out|watchdog got stuck|ProcessGroupNCCL watchdog hang", "WATCHDOG_HANG"),
    Rule("nccl_ops_timed_out", TIMEOUT, ("timed out",), r"NCCL operations have failed or timed out"),
    Rule("dist_timeout", TIMEOUT, ("DistBackendError",), r"DistBackendError.*[Tt]ime(?:d ?out)"),
    Rule("store_timeout", TIMEOUT, ("Socket Timeout", "DistStoreError"), r"Socket Timeout|DistStoreError.*[Tt]ime"),
    Rule("monitored_barrier", TIMEOUT, ("monitoredBarrier",), r"Ranks? (?P<missing>[\d, ]+) failed to pass monitoredBarrier"),
    Rule("collective_mismatch", TIMEOUT, ("mismatch between collectives",), r"Detected mismatch between collectives", "DESYNC"),
    Rule("store_barrier", TIMEOUT, ("store based barrier",),
         r"Waiting in store based barrier|[Tt]imed out initializing process group in store based barrier", "SETUP_HANG"),
    # -- OOM and GPU errors (before the generic NCCL/CUDA rows) ------------------------------
    Rule("dataloader_killed", OOM_KIND, ("is killed by signal: Killed",), r"DataLoader worker \(pid \d+\) is killed by signal: Killed"),
    Rule("cuda_oom", OOM_KIND, ("ut of memory", "OutOfMemory"), r"(?:CUDA|HIP) out of memory|OutOfMemoryError|CUDA error: out of memory"),
    Rule("host_oom", OOM_KIND, ("oom-kill", "oom_kill", "ut of memory", "MemoryError"),
         r"oom[-_]kill|Out of memory: Kill|\bMemoryError\b|[Mm]emory cgroup out of memory"),
    Rule("gpu_hardware", GPU_HARDWARE, ("NVRM: Xid", "ECC error", "ECCUncorrectable", "fallen off the bus", "device handle for GPU"),
         r"NVRM: Xid \(|[Uu]ncorrectable ECC error|ECCUncorrectable|fallen off the bus|Unable to determine the device handle for GPU", "GPU_ERROR"),
    Rule("cuda_error", GPU, ("CUDA error", "cuda error", "AcceleratorError", "CUDNN_STATUS", "CuDNN error", "cuDNN error",
                             "illegal memory access", "Memory access fault by GPU", "device-side assert"),
         r"CUDA error: \w|unhandled cuda error|AcceleratorError|CUDNN_STATUS_\w+|[Cc]u[Dd][Nn][Nn] error|illegal memory access"
         r"|Memory access fault by GPU|device-side assert triggered", "GPU_ERROR"),
    Rule("cuda_hint", CUDA_HINT, ("CUDA_LAUNCH_BLOCKING", "TORCH_USE_CUDA_DSA", "asynchronously reported at some other API"),
         r"CUDA_LAUNCH_BLOCKING=1|TORCH_USE_CUDA_DSA|asynchronously reported at some other API", "GPU_ERROR"),
    # -- NCCL could not set up its transport: the node's system or configuration -------------
    Rule("nccl_setup", NETWORK_KIND, ("ncclSystemError", "unhandled system error", "Call to ibv_", "shared memory segment"),
         r"ncclSystemError|unhandled system error|Call to ibv_\w+ failed|creating shared memory segment", "NCCL_SETUP"),
    # -- peer lost: the rank's partner died or the link broke --------------------------------
    Rule("peer_closed", PEER_LOST, ("by peer", "remote peer"), r"[Cc]onnection closed by (?:remote )?peer|reset by peer|remote peer"),
    Rule("nccl_remote", PEER_LOST, ("remote process", "ncclRemoteError"), r"ncclRemoteError|remote process exited"),
    Rule("store_peer_lost", PEER_LOST, ("possible application crash on rank",), r"possible application crash on rank"),
    Rule("broken_pipe", PEER_LOST, ("Broken pipe",), r"Broken pipe"),
    Rule("nccl_error", PEER_LOST, ("NCCL error",), r"NCCL error"),
    Rule("ib_error", NETWORK_KIND, ("Got completion", "retry counter"),
         r"NET/IB.*Got completion.*(?:[Ee]rror|status=[1-9])|transport retry counter exceeded"),
    # -- the job is misconfigured: every rank fails the same way -----------------------------
    Rule("config_error", FATAL, ("can't open file", "ModuleNotFoundError", "unrecognized arguments", "command not found"),
         r"can't open file '[^']*': \[Errno|ModuleNotFoundError: No module named|error: unrecognized arguments|"
         r": command not found", "CONFIG_ERROR"),
    # -- fatal errors (faulthandler, shells, C++ runtime) -------------------------------------
    Rule("fatal_segv", FATAL, ("Fatal Python error: Segm",), r"Fatal Python error: Segmentation fault", "SEGFAULT"),
    Rule("fatal_bus", FATAL, ("Fatal Python error: Bus",), r"Fatal Python error: Bus error", "SEGFAULT"),
    Rule("fatal_abort", FATAL, ("Fatal Python error: Abort",), r"Fatal Python error: Aborted", "OS_ABORT"),
    Rule("fatal_other", FATAL, ("Fatal Python error",), r"Fatal Python error: "),
    Rule("cpp_terminate", TERMINATE, ("terminate called after throwing",), r"terminate called after throwing an instance of", "OS_ABORT"),
    Rule("srun_task", DEATH, ("srun: error",), r"srun: error: \S+: tasks? (?P<tasks>[\d,\-]+): (?P<what>.+)"),
    Rule("shell_segv", FATAL, ("Segmentation fault",), r"Segmentation fault", "SEGFAULT"),
    Rule("shell_abort", FATAL, ("Aborted (core",), r"Aborted \(core dumped\)", "OS_ABORT"),
    # -- a Python traceback (classified by its exception line, read after the scan) ----------
    Rule("traceback", TRACEBACK, ("Traceback",), r"^Traceback \(most recent call last\):"),
    Rule("traceback_frame", TRACEBACK, ('File "',), r'^\s+File "[^"]*", line \d+, in '),  # an excerpt that lost the header
    # -- launchers: torchrun / elastic agent, torch.distributed.launch, DeepSpeed, mpirun, horovod
    Rule("agent_signal", JOB_SIGNAL, ("death signal", "SignalException", "received a stop signal"),
         r"Received \d+ death signal|SignalException: Process \d+ got signal|[Ll]auncher received a stop signal"),
    Rule("signal_received", SIGNAL, ("eceived SIG", "eceived signal", "got signal", "aught signal"),
         r"(?i)\b(?:received|got|caught) (?:signal[: ]*)?(SIG[A-Z0-9]+|\d+)"),
    Rule("rank_failed", DEATH, ("failed (exitcode",),
         r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local>\d+)(?: \(pid: (?P<pid>\d+)\))?"),
    Rule("mpirun_signal", DEATH, ("noticed that process rank",),
         r"noticed that process rank (?P<rank>\d+) with PID (?P<pid>\d+) on node \S+ exited on signal (?P<sig>\d+)"),
    Rule("horovod_exit", DEATH, ("exit with status code",), r"Process (?P<rank>\d+) exit with status code (?P<code>-?\d+)"),
    Rule("deepspeed_exit", DEATH, ("exits with return code",),
         r"(?:--local_rank=(?P<local>\d+).*)?exits with return code = (?P<code>-?\d+)"),
    Rule("launch_child_died", DEATH, ("died with <Signals", "non-zero exit status"),
         r"(?:--local[_-]rank=(?P<local>\d+).*)?(?:died with <Signals\.(?P<sig>SIG[A-Z]+)|returned non-zero exit status (?P<code>\d+))"),
    Rule("launcher_close", CLOSED, ("closing signal",), r"Sending process (?P<pid>\d+) closing signal"),
    Rule("launcher_kill", KILLED, ("forcefully",), r"Unable to shutdown process (?P<pid>\d+) via"),
    Rule("summary_first", SUMMARY, ("Root Cause",), r"Root Cause \(first observed failure\)", "first"),
    Rule("summary_others", SUMMARY, ("Failures:",), r"^Failures:", "others"),
    Rule("summary_record", RECORD, ("(local_rank:",),
         r"\brank\s*:\s*(?P<rank>\d+) \(local_rank: (?P<local>\d+)\)(?:.*?exitcode\s*:\s*(?P<code>-?\d+)(?: \(pid: (?P<pid>\d+)\))?)?"),
    Rule("summary_exit", RECORD, ("exitcode",), r"^\s*exitcode\s*:\s*(?P<code>-?\d+)(?: \(pid: (?P<pid>\d+)\))?"),
    # -- context ------------------------------------------------------------------------------
    Rule("stall_watchdog", STALL, ("no training progress", "no progress"), r"no (?:training )?progress (?:for|in) \d"),
    Rule("faulthandler_timeout", STACK_DUMP, ("Timeout (",), r"^Timeout \(\d+:\d\d:\d\d"),
    Rule("nccl_progress", PROGRESS, ("last enqueued",), r"last enqueued (?:NCCL )?work: (?P<seq>-?\d+)"),
    Rule("nccl_work", COLLECTIVE, ("WorkNCCL(",), r"WorkNCCL\(SeqNum=\d+"),
    Rule("one_rank_work", BUSY, ("valuating", "alidating", "mAP@", "aving checkpoint", "aving model", "aving the",
                                 "okeniz", "reprocess", "main_process_first"),
         r"[Ee]valuating|[Vv]alidating|\bmAP@|[Ss]aving (?:the )?(?:checkpoint|model)|[Tt]okeniz(?:ing|er)|[Pp]reprocess|"
         r"main_process_first"),
    Rule("checkpoint_saved", CHECKPOINT, ("aved checkpoint", "heckpoint saved", "heckpoint written"), r"(?i)\bsaved checkpoint|checkpoint (?:saved|written)"),
    Rule("job_done", DONE, ("training is done", "raining finished", "raining completed"),
         r"after training is done|[Tt]raining (?:finished|completed)"),
)
# fmt: on


@dataclass(frozen=True)
class Policy:
    """What a diagnosed cause means: its category, whether an immediate restart can help, and
    whether it is one rank's fault (job-wide causes name no primary rank)."""

    category: str
    restart: str
    why: str
    blames_rank: bool = True


# cause -> policy. The 12 injected faults come from faults.FAULTS (the one source of truth);
# the rest are causes real jobs show. hard crash, code bug, GPU error, OOM, a setup or
# configuration problem -> STOP; transient hang, external signal, preemption, network flap -> RESTART.
POLICY: dict[str, Policy] = {
    **{name: Policy(f.category, f.restart, f.rationale) for name, f in FAULTS.items()},
    "HANG": Policy(HANG, RESTART, "transient hang"),
    "CRASH": Policy(CRASH, STOP, "hard crash"),
    "OOM": Policy(OOM, STOP, "out of memory: the same job will run out again"),
    "NETWORK": Policy(NETWORK, RESTART, "network flap"),
    "EXTERNAL_SIGNAL": Policy(EXTERNAL_SIGNAL, RESTART, "external signal"),
    "PREEMPTION": Policy(EXTERNAL_SIGNAL, RESTART, "preempted by the scheduler", blames_rank=False),
    "CANCELLED": Policy(EXTERNAL_SIGNAL, RESTART, "cancelled by the scheduler or an operator", blames_rank=False),
    "NODE_FAIL": Policy(OTHER, RESTART, "node failure: restart on healthy nodes", blames_rank=False),
    "TIME_LIMIT": Policy(OTHER, STOP, "time limit: a restart hits it again", blames_rank=False),
    "DONE": Policy(NONE, STOP, "the application finished", blames_rank=False),
    "DESYNC": Policy(HANG, STOP, "ranks issued different collectives (desync): a code-path bug that recurs",
                     blames_rank=False),
    "SETUP_HANG": Policy(HANG, STOP, "the ranks never got through setup (rendezvous or first collective): a launch or "
                                     "environment problem that a restart repeats", blames_rank=False),
    "SHUTDOWN_HANG": Policy(HANG, STOP, "the job hung after training finished: it hangs again at the same place"),
    "SLOW_RANK": Policy(HANG, STOP, "one rank's work (evaluation, checkpointing, preprocessing) outlasted the "
                                    "collective timeout: it recurs until the timeout is raised or the work shrinks"),
    "WATCHDOG_HANG": Policy(HANG, STOP, "a CUDA/NCCL call blocked the NCCL watchdog itself (a deadlock or a stuck "
                                        "teardown): it recurs with the same code and environment"),
    "CONFIG_ERROR": Policy(OTHER, STOP, "the job is misconfigured (missing file, module or argument): a restart fails "
                                        "the same way", blames_rank=False),
    "DATA_ERROR": Policy(EXCEPTION, STOP, "reading the data failed: the same sample fails again"),
    "NCCL_SETUP": Policy(NETWORK, STOP, "NCCL could not set up its transport (devices, shared memory, InfiniBand): a "
                                        "system or configuration problem that a restart on the same nodes repeats",
                         blames_rank=False),
}

# cause -> what the log shows happened (the explanation's wording)
WHAT_HAPPENED: dict[str, str] = {
    "GPU_ERROR": "hit a GPU error (CUDA error / Xid)",
    "GPU_SLEEP": "stalled outside any collective with its threads alive, as on a stuck GPU kernel, and the "
                 "others timed out waiting for it",
    "LOCK_GIL": "froze: its Python threads went silent while faulthandler still dumped its stacks (the GIL "
                "was held), and the others timed out waiting for it",
    "SIGSTOP": "went completely silent (a stopped process) and had to be killed, while the others timed out "
               "waiting for it",
    "HANG": "stopped making progress and the others timed out waiting for it",
    "WORKLOAD_EXC": "raised an exception of its own",
    "ASYNC_EXC": "was interrupted by an exception it did not raise (no message, no raise statement: raised "
                 "asynchronously from outside the code)",
    "SIGNAL_EXC": "raised an exception from a signal handler",
    "OS_ABORT": "aborted (SIGABRT)",
    "SEGFAULT": "crashed with a segmentation fault",
    "SIGKILL": "was killed by SIGKILL without a word",
    "SIGTERM": "was terminated by SIGTERM from outside",
    "SIGINT": "was interrupted by SIGINT",
    "CRASH": "died without a word",
    "OOM": "ran out of memory",
    "NETWORK": "lost connections without any rank failing on its own (network)",
    "EXTERNAL_SIGNAL": "received a signal from outside",
    "PREEMPTION": "was preempted by the scheduler",
    "CANCELLED": "was cancelled from outside",
    "NODE_FAIL": "lost a node",
    "TIME_LIMIT": "hit its time limit",
    "DONE": "finished",
    "DESYNC": "desynchronized: ranks waited in different collectives at the same sequence number",
    "SETUP_HANG": "hung before training started (rendezvous or the first collective never completed)",
    "SHUTDOWN_HANG": "hung after training had finished",
    "SLOW_RANK": "was busy with one-rank work (evaluation, checkpointing, preprocessing) while the others timed out",
    "WATCHDOG_HANG": "hung inside a CUDA/NCCL call that blocked the NCCL watchdog",
    "CONFIG_ERROR": "could not start: its configuration names a file, module or argument that is not there",
    "DATA_ERROR": "failed while reading its data",
    "NCCL_SETUP": "could not set up NCCL's transport (devices, shared memory, InfiniBand)",
}

# -- what a traceback says ------------------------------------------------------------------------
# exception class (last dotted part) -> cause, where the class says more than "the program raised"
EXCEPTION_CAUSES: dict[str, str] = {"KeyboardInterrupt": "SIGINT", "ModuleNotFoundError": "CONFIG_ERROR",
                                    "ImportError": "CONFIG_ERROR"}
# frames of a launcher's own traceback (it reports a worker's failure; the worker's lines say why)
LAUNCHER_FRAMES = re.compile(r"torch/distributed/(?:run|launch)\.py|torch/distributed/launcher/|accelerate/commands/|"
                             r"deepspeed/launcher/|horovod/runner/|/bin/(?:torchrun|accelerate|deepspeed|horovodrun)\b")
LAUNCHER_EXCEPTIONS = ("ChildFailedError", "CalledProcessError", "SignalException")
# a frame waiting in a collective: the rank is a victim, the stalled rank is elsewhere
COLLECTIVE_FRAMES = re.compile(r"distributed_c10d|\b(?:all_reduce|allreduce|all_gather|reduce_scatter|broadcast|"
                               r"barrier|monitored_barrier|all_to_all)\b|main_process_first|wait_for_everyone")
# a frame reading data: an exception there is a data error
DATA_FRAMES = re.compile(r"torch/utils/data/|__getitem__|(?i:data_?loader)")
# a frame waiting on the device: a stalled rank stuck there hangs on the GPU
DEVICE_WAIT_FRAMES = re.compile(r"synchroni[sz]e|cuda|wait_stream|\bEvent\b|_sleep")
# a timed-out collective as NCCL describes it; ranks that disagree at one SeqNum desynchronized
WORK_RE = re.compile(r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+)(?:, NumelIn=(\d+))?")
FIRST_SEQ = 1  # a timeout at or below this collective number: the job never got going
BUSY_WINDOW_LINES = 200  # one-rank work this close before the first timeout explains it

# -- exit statuses and signals ---------------------------------------------------------------------
# exit statuses that name a signal death: negative (Python's Popen), 128+n (shells), srun words
SIGNAL_FAULT = {"SIGKILL": "SIGKILL", "SIGTERM": "SIGTERM", "SIGINT": "SIGINT", "SIGSEGV": "SEGFAULT",
                "SIGABRT": "OS_ABORT", "SIGBUS": "SEGFAULT", "SIGHUP": "SIGTERM"}
SIGNAL_NUMBERS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 10: "SIGUSR1",
                  11: "SIGSEGV", 12: "SIGUSR2", 15: "SIGTERM", 19: "SIGSTOP"}
SRUN_WORDS = {"Killed": "SIGKILL", "Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Terminated": "SIGTERM",
              "Interrupt": "SIGINT", "Bus error": "SIGBUS"}
# signals launchers and schedulers send to stop the rest of a job: a rank ended by one after the
# stop began is a victim
STOP_SIGNALS = ("SIGTERM", "SIGKILL", "SIGHUP", "SIGINT")
