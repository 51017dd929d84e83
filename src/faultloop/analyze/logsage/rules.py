"""logsage's tables: what log lines mean and what each diagnosed cause means. The file to patch.

HOW TO PATCH BETWEEN LOOP ITERATIONS
  * A log line is missed or misread -> edit RULES: one row per (anchor literals, regex, kind,
    hint). The anchors must be substrings of every line the regex can match; they are the
    prefilter. First matching row wins, so put specific rows above general ones. Named groups
    carry facts: rank (global), local (local rank), pid, code (exit status), sig (signal),
    tasks and what (srun), missing (ranks a barrier waited for), seq (a collective's number). A
    rank group names the line's rank where its prefix cannot (a dump file named by rank).
  * A decision is wrong for a whole cause -> edit POLICY (cause -> category, restart, why).
  * What a traceback, an exit status or a signal means -> the smaller tables at the end.
A rule fixes a class of lines (a launcher's wording, a prefix style), never one log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from faultloop.faults import CRASH, EXCEPTION, EXTERNAL_SIGNAL, FAULTS, HANG, NETWORK, NONE, OOM, OTHER, RESTART, STOP

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
# Anchors are the prefilter's literals, searched all at once: reuse the short ones below ("rror",
# "ignal", "exit", ...) rather than adding new ones. ripgrep runs a set of at most ~36 literals and
# ~240 bytes with SIMD, several times faster than a bigger one (tests hold the table to that).
RULES: tuple[Rule, ...] = (
    # -- the scheduler ended the job (these explain everything after them) --------------------
    Rule("preempted", SLURM, ("CANCELLED", "reempt"), r"CANCELLED.*DUE TO PREEMPTION|\b[Pp]reempted\b", "PREEMPTION"),
    Rule("time_limit", SLURM, ("CANCELLED",), r"CANCELLED.*DUE TO TIME LIMIT", "TIME_LIMIT"),
    Rule("node_fail", SLURM, ("NODE_FAIL", "CANCELLED", "ailure"), r"NODE_FAIL|CANCELLED.*DUE TO NODE FAIL|[Nn]ode failure",
         "NODE_FAIL"),
    Rule("cancelled", SLURM, ("CANCELLED",), r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED", "CANCELLED"),
    Rule("step_teardown", STOPPING, ("erminat", "borted"), r"Terminating StepId|forcing job termination|Job step aborted"),
    # -- hang symptoms: the rank waited for a peer that never came ---------------------------
    Rule("gloo_timeout", TIMEOUT, ("imed out",), r"Timed out waiting \d+ ?ms for (?:recv|send) operation"),
    Rule("nccl_watchdog_timeout", TIMEOUT, ("atchdog",), r"Watchdog caught collective"),  # often wrapped after it
    Rule("nccl_watchdog_stuck", TIMEOUT, ("imed out", "atchdog"),
         r"[Hh]eartbeat monitor timed out|watchdog got stuck|ProcessGroupNCCL watchdog hang", "WATCHDOG_HANG"),
    Rule("nccl_ops_timed_out", TIMEOUT, ("imed out",), r"NCCL operations have failed or timed out"),
    Rule("dist_timeout", TIMEOUT, ("rror",), r"DistBackendError.*[Tt]ime(?:d ?out)"),
    Rule("store_timeout", TIMEOUT, ("Timeout", "rror"), r"Socket Timeout|DistStoreError.*[Tt]ime"),
    Rule("monitored_barrier", TIMEOUT, ("arrier",), r"Ranks? (?P<missing>[\d, ]+) failed to pass monitoredBarrier"),
    Rule("collective_mismatch", TIMEOUT, ("rror",), r"Error: Detected mismatch between collectives", "DESYNC"),
    Rule("store_barrier", TIMEOUT, ("arrier",),
         r"Waiting in store based barrier|[Tt]imed out initializing process group in store based barrier", "SETUP_HANG"),
    # -- OOM and GPU errors (before the generic NCCL/CUDA rows) ------------------------------
    Rule("dataloader_killed", OOM_KIND, ("ignal",), r"DataLoader worker \(pid \d+\) is killed by signal: Killed"),
    Rule("cuda_oom", OOM_KIND, ("of memory", "rror"), r"(?:CUDA|HIP) out of memory|OutOfMemoryError|CUDA error: out of memory"),
    Rule("host_oom", OOM_KIND, ("oom-", "oom_", "of memory", "rror"),
         r"oom[-_]kill|Out of memory: Kill|\bMemoryError\b|[Mm]emory cgroup out of memory"),
    Rule("gpu_hardware", GPU_HARDWARE, ("Xid", "rror"),
         r"NVRM: Xid \(|[Uu]ncorrectable ECC error|ErrorECCUncorrectable|Unable to determine the device handle for GPU.*Error",
         "GPU_ERROR"),
    Rule("cuda_error", GPU, ("rror", "access"),
         r"CUDA error: \w|unhandled cuda error|AcceleratorError|[Cc]u[Dd][Nn][Nn] error|illegal memory access"
         r"|Memory access fault by GPU|device-side assert triggered", "GPU_ERROR"),
    Rule("cuda_hint", CUDA_HINT, ("rror",), r"errors might be asynchronously reported", "GPU_ERROR"),
    # -- NCCL could not set up its transport: the node's system or configuration -------------
    Rule("nccl_setup", NETWORK_KIND, ("rror",),
         r"ncclSystemError|unhandled system error|Call to ibv_\w+ failed with error|Error while creating shared memory segment",
         "NCCL_SETUP"),
    # -- peer lost: the rank's partner died or the link broke --------------------------------
    Rule("ib_error", NETWORK_KIND, ("peer",), r"NET/IB.*Got completion from peer.*(?:[Ee]rror|status=[1-9]|err [1-9])"),
    Rule("peer_closed", PEER_LOST, ("peer",), r"[Cc]onnection closed by (?:remote )?peer|reset by peer|remote peer"),
    Rule("nccl_remote", PEER_LOST, ("rror",), r"ncclRemoteError|remote process exited"),
    Rule("store_peer_lost", PEER_LOST, ("crash",), r"possible application crash on rank"),
    Rule("broken_pipe", PEER_LOST, ("rror",), r"BrokenPipeError|Broken pipe"),
    Rule("nccl_error", PEER_LOST, ("rror",), r"NCCL error"),
    # -- the job is misconfigured: every rank fails the same way -----------------------------
    Rule("config_error", FATAL, ("open file", "rror"),
         r"can't open file '[^']*': \[Errno|ModuleNotFoundError: No module named|error: unrecognized arguments", "CONFIG_ERROR"),
    # -- fatal errors (faulthandler, shells, C++ runtime) -------------------------------------
    Rule("fatal_segv", FATAL, ("rror",), r"Fatal Python error: Segmentation fault", "SEGFAULT"),
    Rule("fatal_bus", FATAL, ("rror",), r"Fatal Python error: Bus error", "SEGFAULT"),
    Rule("fatal_abort", FATAL, ("rror",), r"Fatal Python error: Aborted", "OS_ABORT"),
    Rule("fatal_other", FATAL, ("rror",), r"Fatal Python error: "),
    Rule("cpp_terminate", TERMINATE, ("erminat",), r"terminate called after throwing an instance of", "OS_ABORT"),
    Rule("srun_task", DEATH, ("rror",), r"srun: error: \S+: tasks? (?P<tasks>[\d,\-]+): (?P<what>.+)"),
    Rule("shell_segv", FATAL, ("egmentat",), r"Segmentation fault", "SEGFAULT"),
    Rule("shell_abort", FATAL, ("borted",), r"Aborted \(core dumped\)", "OS_ABORT"),
    # -- a Python traceback (classified by its exception line, read after the scan) ----------
    Rule("traceback", TRACEBACK, ("Traceback",), r"^Traceback \(most recent call last\):"),
    Rule("traceback_frame", TRACEBACK, ('File "',), r'^\s+File "[^"]*", line \d+, in '),  # an excerpt that lost the header
    # -- launchers: torchrun / elastic agent, torch.distributed.launch, DeepSpeed, mpirun, horovod
    Rule("agent_signal", JOB_SIGNAL, ("ignal",),
         r"Received \d+ death signal|SignalException: Process \d+ got signal|[Ll]auncher received a stop signal"),
    Rule("signal_received", SIGNAL, ("ignal", "eceived SIG"),
         r"\b(?:[Rr]eceived (?:signal[: ]*)?|(?:[Gg]ot|[Cc]aught) signal[: ]*)(?:SIG[A-Z0-9]+|\d+)"),
    Rule("rank_failed", DEATH, ("exit",),
         r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local>\d+)(?: \(pid: (?P<pid>\d+)\))?"),
    Rule("mpirun_signal", DEATH, ("ignal",),
         r"noticed that process rank (?P<rank>\d+) with PID (?P<pid>\d+) on node \S+ exited on signal (?P<sig>\d+)"),
    Rule("horovod_exit", DEATH, ("exit",), r"Process (?P<rank>\d+) exit with status code (?P<code>-?\d+)"),
    Rule("deepspeed_exit", DEATH, ("exit",), r"(?:--local_rank=(?P<local>\d+).*)?exits with return code = (?P<code>-?\d+)"),
    Rule("launch_child_died", DEATH, ("ignal", "exit"),
         r"(?:--local[_-]rank=(?P<local>\d+).*)?(?:died with <Signals\.(?P<sig>SIG[A-Z]+)|returned non-zero exit status (?P<code>\d+))"),
    Rule("launcher_close", CLOSED, ("ignal",), r"Sending process (?P<pid>\d+) closing signal"),
    Rule("launcher_kill", KILLED, ("exit",), r"Unable to shutdown process (?P<pid>\d+) via \d+, forcefully exiting"),
    Rule("summary_first", SUMMARY, ("ailure",), r"Root Cause \(first observed failure\)", "first"),
    Rule("summary_others", SUMMARY, ("ailure",), r"^Failures:", "others"),
    Rule("summary_record", RECORD, ("al_rank",),
         r"\brank\s*:\s*(?P<rank>\d+) \(local_rank: (?P<local>\d+)\)(?:.*?exitcode\s*:\s*(?P<code>-?\d+)(?: \(pid: (?P<pid>\d+)\))?)?"),
    Rule("summary_exit", RECORD, ("exit",), r"^\s*exitcode\s*:\s*(?P<code>-?\d+)(?: \(pid: (?P<pid>\d+)\))?"),
    # -- context ------------------------------------------------------------------------------
    Rule("stall_watchdog", STALL, ("progress",), r"no (?:training )?progress (?:for|in) \d"),
    Rule("stall_dump", STALL, ("_dump_",), r"dumped \d+ bytes to \S*_dump_(?P<rank>\d+) \(stall\)"),  # names its rank
    Rule("faulthandler_timeout", STACK_DUMP, ("Timeout",), r"^Timeout \(\d+:\d\d:\d\d"),
    Rule("nccl_progress", PROGRESS, ("atchdog", "Timeout"), r"last enqueued (?:NCCL )?work: (?P<seq>-?\d+)"),
    Rule("nccl_work", COLLECTIVE, ("SeqNum",), r"WorkNCCL\(SeqNum=\d+"),
    Rule("one_rank_work", BUSY, ("valuat", "alidat", "mAP@", "eckpoint", "okeniz"),
         r"[Ee]valuating|[Vv]alidating|\bmAP@|[Ss]aving (?:the )?checkpoint|[Ss]aving model checkpoint|[Tt]okeniz(?:ing|er)"),
    Rule("checkpoint_saved", CHECKPOINT, ("eckpoint",), r"\b[Ss]aved checkpoint|checkpoint (?:saved|written)"),
    Rule("job_done", DONE, ("is done", "completed"), r"after training is done|[Tt]raining completed"),
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
    "DESYNC": Policy(
        HANG, STOP, "ranks issued different collectives (desync): a code-path bug that recurs", blames_rank=False
    ),
    "SETUP_HANG": Policy(
        HANG,
        STOP,
        "the ranks never got through setup (rendezvous or first collective): a launch or "
        "environment problem that a restart repeats",
        blames_rank=False,
    ),
    "SHUTDOWN_HANG": Policy(HANG, STOP, "the job hung after training finished: it hangs again at the same place"),
    "SLOW_RANK": Policy(
        HANG,
        STOP,
        "one rank's work (evaluation, checkpointing, preprocessing) outlasted the "
        "collective timeout: it recurs until the timeout is raised or the work shrinks",
    ),
    "WATCHDOG_HANG": Policy(
        HANG,
        STOP,
        "a CUDA/NCCL call blocked the NCCL watchdog itself (a deadlock or a stuck "
        "teardown): it recurs with the same code and environment",
    ),
    "CONFIG_ERROR": Policy(
        OTHER,
        STOP,
        "the job is misconfigured (missing file, module or argument): a restart fails the same way",
        blames_rank=False,
    ),
    "DATA_ERROR": Policy(EXCEPTION, STOP, "reading the data failed: the same sample fails again"),
    "NCCL_SETUP": Policy(
        NETWORK,
        STOP,
        "NCCL could not set up its transport (devices, shared memory, InfiniBand): a "
        "system or configuration problem that a restart on the same nodes repeats",
        blames_rank=False,
    ),
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
EXCEPTION_CAUSES: dict[str, str] = {
    "KeyboardInterrupt": "SIGINT",
    "ModuleNotFoundError": "CONFIG_ERROR",
    "ImportError": "CONFIG_ERROR",
}
# frames of a launcher's own traceback (it reports a worker's failure; the worker's lines say why)
LAUNCHER_FRAMES = re.compile(
    r"torch/distributed/(?:run|launch)\.py|torch/distributed/launcher/|accelerate/commands/|"
    r"deepspeed/launcher/|horovod/runner/|/bin/(?:torchrun|accelerate|deepspeed|horovodrun)\b"
)
LAUNCHER_EXCEPTIONS = ("ChildFailedError", "CalledProcessError", "SignalException")
# a frame waiting in a collective: the rank is a victim, the stalled rank is elsewhere
COLLECTIVE_FRAMES = re.compile(
    r"distributed_c10d|\b(?:all_reduce|allreduce|all_gather|reduce_scatter|broadcast|"
    r"barrier|monitored_barrier|all_to_all)\b|main_process_first|wait_for_everyone"
)
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
SIGNAL_FAULT = {
    "SIGKILL": "SIGKILL",
    "SIGTERM": "SIGTERM",
    "SIGINT": "SIGINT",
    "SIGSEGV": "SEGFAULT",
    "SIGABRT": "OS_ABORT",
    "SIGBUS": "SEGFAULT",
    "SIGHUP": "SIGTERM",
}
SIGNAL_NUMBERS = {
    1: "SIGHUP",
    2: "SIGINT",
    6: "SIGABRT",
    7: "SIGBUS",
    9: "SIGKILL",
    10: "SIGUSR1",
    11: "SIGSEGV",
    12: "SIGUSR2",
    15: "SIGTERM",
    19: "SIGSTOP",
}
SRUN_WORDS = {
    "Killed": "SIGKILL",
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Terminated": "SIGTERM",
    "Interrupt": "SIGINT",
    "Bus error": "SIGBUS",
}
# signals launchers and schedulers send to stop the rest of a job: a rank ended by one after the
# stop began is a victim
STOP_SIGNALS = ("SIGTERM", "SIGKILL", "SIGHUP", "SIGINT")
