"""logsage's cause table: what each diagnosed cause means (its category, whether an immediate restart
can help and why, the wording of what happened, the injected fault it is, whether it blames a
rank). The file to patch when a decision is wrong for a whole cause; the lines that lead to a
cause are rules.RULES."""

from __future__ import annotations

from dataclasses import dataclass

from faultloop.analyze.logsage.vocab import Cause
from faultloop.faults import (
    CRASH,
    EXCEPTION,
    EXTERNAL_SIGNAL,
    GPU_ERROR_CATEGORY,
    HANG,
    NETWORK,
    NONE,
    OOM,
    OTHER,
    RESTART,
    STOP,
)


@dataclass(frozen=True)
class Policy:
    """What a diagnosed cause means: its category, whether an immediate restart can help and why,
    what the log shows happened (the explanation's wording), the injected fault it is (None for
    a cause no fault injects), and whether it is one rank's fault (job-wide causes name no primary
    rank)."""

    category: str
    restart: str
    why: str
    happened: str = ""
    fault_type: str | None = None
    blames_rank: bool = True


# POLICY, the cause table: cause -> policy, logsage's own reasoning for every cause it diagnoses.
# A hard crash, a code bug, a GPU error, OOM, a setup or configuration problem -> STOP (the next
# attempt meets the same code, device or settings); a transient hang, an external signal,
# preemption, a network flap -> RESTART (nothing in the job itself failed). The causes named after
# injected faults carry that name as their fault type; NVRx's judge has a restart table for those
# twelve (a fact logsage may cite, not a source it reads): tests/analyze/test_logsage.py compares
# the two and documents where they differ on purpose (UPSTREAM_DIFFERENCES below: none today).
POLICY: dict[str, Policy] = {
    Cause.GPU_ERROR: Policy(
        GPU_ERROR_CATEGORY,
        STOP,
        "a GPU error leaves the device or the kernel that hit it as it was: the next attempt meets it again",
        "hit a GPU error (CUDA error / Xid)",
        "GPU_ERROR",
    ),
    Cause.GPU_SLEEP: Policy(
        HANG,
        RESTART,
        "a GPU that stalled and recovered on its own: nothing in the job is broken",
        "stalled outside any collective with its threads alive, as on a stuck GPU kernel, and the others timed "
        "out waiting for it",
        "GPU_SLEEP",
    ),
    Cause.WORKLOAD_EXC: Policy(
        EXCEPTION,
        STOP,
        "the program raised on its own code path: the same code raises again",
        "raised an exception of its own",
        "WORKLOAD_EXC",
    ),
    Cause.ASYNC_EXC: Policy(
        EXCEPTION,
        STOP,
        "an exception injected into a running thread is a bug of the code that injects it: it recurs",
        "was interrupted by an exception it did not raise (no message, no raise statement: raised "
        "asynchronously from outside the code)",
        "ASYNC_EXC",
    ),
    Cause.SIGNAL_EXC: Policy(
        EXCEPTION,
        RESTART,
        "the exception came from a signal handler, so from a signal sent from outside: the next attempt is not sent it",
        "raised an exception from a signal handler",
        "SIGNAL_EXC",
    ),
    Cause.OS_ABORT: Policy(
        CRASH,
        STOP,
        "the process aborted itself on a failed check: the same check fails again",
        "aborted (SIGABRT)",
        "OS_ABORT",
    ),
    Cause.LOCK_GIL: Policy(
        HANG,
        RESTART,
        "a thread held the GIL and froze the process without failing: a stall the next attempt need not meet",
        "froze: its Python threads went silent while faulthandler still dumped its stacks (the GIL was held), "
        "and the others timed out waiting for it",
        "LOCK_GIL",
    ),
    Cause.SEGFAULT: Policy(
        CRASH,
        STOP,
        "a segmentation fault is corrupted memory or a bad pointer in the code: it recurs",
        "crashed with a segmentation fault",
        "SEGFAULT",
    ),
    Cause.SIGINT: Policy(
        EXTERNAL_SIGNAL,
        RESTART,
        "interrupted from outside: the job itself did not fail",
        "was interrupted by SIGINT",
        "SIGINT",
    ),
    Cause.SIGKILL: Policy(
        CRASH,
        STOP,
        "killed without a word: most often the host's OOM killer or memory pressure, which the same job meets again",
        "was killed by SIGKILL without a word",
        "SIGKILL",
    ),
    Cause.SIGTERM: Policy(
        EXTERNAL_SIGNAL,
        RESTART,
        "terminated from outside: the job itself did not fail",
        "was terminated by SIGTERM from outside",
        "SIGTERM",
    ),
    Cause.SIGSTOP: Policy(
        HANG,
        RESTART,
        "a process stopped from outside: the job itself did not fail",
        "went completely silent (a stopped process) and had to be killed, while the others timed out waiting for it",
        "SIGSTOP",
    ),
    Cause.HANG: Policy(
        HANG, RESTART, "transient hang", "stopped making progress and the others timed out waiting for it"
    ),
    Cause.CRASH: Policy(CRASH, STOP, "hard crash", "died without a word"),
    Cause.OOM: Policy(OOM, STOP, "out of memory: the same job will run out again", "ran out of memory"),
    Cause.NETWORK: Policy(
        NETWORK,
        RESTART,
        "a connection that had been made broke, was cut or failed under it (infrastructure, transient): the next "
        "attempt gets new connections, possibly on other nodes",
        "lost connections, or had messages cut, without any rank failing on its own (network)",
        blames_rank=False,
    ),
    Cause.EXTERNAL_SIGNAL: Policy(EXTERNAL_SIGNAL, RESTART, "external signal", "received a signal from outside"),
    Cause.PREEMPTION: Policy(
        EXTERNAL_SIGNAL, RESTART, "preempted by the scheduler", "was preempted by the scheduler", blames_rank=False
    ),
    Cause.CANCELLED: Policy(
        EXTERNAL_SIGNAL,
        RESTART,
        "cancelled by the scheduler or an operator",
        "was cancelled from outside",
        blames_rank=False,
    ),
    Cause.NODE_FAIL: Policy(OTHER, RESTART, "node failure: restart on healthy nodes", "lost a node", blames_rank=False),
    Cause.NODE_LOST: Policy(
        EXTERNAL_SIGNAL,
        RESTART,
        "the cluster declared a node under the job dead (Ray's GCS: it stopped answering the health checks, as a "
        "terminated, preempted or unreachable host does): its processes were ended from outside the job, and a "
        "restart runs on the nodes that are there",
        "lost a node: the cluster declared it dead",
        blames_rank=False,
    ),
    Cause.TIME_LIMIT: Policy(
        EXTERNAL_SIGNAL,  # the scheduler ended it, as after progress: what is in view decides the restart only
        STOP,
        "time limit, and the log shows no training progress: nothing says a new allocation gets further",
        "hit its time limit",
        blames_rank=False,
    ),
    Cause.TIME_LIMIT_AFTER_PROGRESS: Policy(
        EXTERNAL_SIGNAL,
        RESTART,
        "the scheduler ended a job that was making progress at its wall-clock limit (SIGTERM, then SIGKILL): "
        "resubmitted, it gets a new allocation and goes on from its last checkpoint",
        "was ended by the scheduler at its time limit while training made progress",
        blames_rank=False,
    ),
    Cause.DONE: Policy(NONE, STOP, "the application finished", "finished", blames_rank=False),
    Cause.DESYNC: Policy(
        HANG,
        STOP,
        "ranks issued different collectives (desync): a code-path bug that recurs",
        "desynchronized: ranks waited in different collectives at the same sequence number",
        "DESYNC",
    ),
    Cause.SETUP_HANG: Policy(
        HANG,
        STOP,
        "the ranks never got through setup (rendezvous or first collective): a launch or environment problem "
        "that a restart repeats",
        "hung before training started (rendezvous or the first collective never completed)",
    ),
    Cause.SHUTDOWN_HANG: Policy(
        HANG,
        STOP,
        "the job hung after training finished: it hangs again at the same place",
        "hung after training had finished",
    ),
    Cause.SLOW_RANK: Policy(
        HANG,
        STOP,
        "one rank's work (evaluation, checkpointing, preprocessing) outlasted the collective timeout: it "
        "recurs at the same step until the timeout is raised or the work shrinks",
        "was busy with one-rank work (evaluation, checkpointing, preprocessing) while the others timed out",
    ),
    Cause.WATCHDOG_HANG: Policy(
        HANG,
        STOP,
        "a CUDA/NCCL call blocked the NCCL watchdog itself (a deadlock or a stuck teardown): it recurs with the "
        "same code and environment",
        "hung inside a CUDA/NCCL call that blocked the NCCL watchdog",
    ),
    Cause.CONFIG_ERROR: Policy(
        OTHER,
        STOP,
        "the job is misconfigured (a missing file, module or argument, a setting no device or library can honour): "
        "a restart fails the same way",
        "could not start: its configuration names a file, module, argument or setting that is not there or cannot "
        "be used",
        blames_rank=False,
    ),
    Cause.LAUNCH_ENV: Policy(
        OTHER,
        STOP,
        "the launcher failed before its workers ran (MPI could not initialize, the elastic agent could not "
        "rendezvous with its peers): a restart with the same settings fails the same way",
        "could not set up its launch (MPI initialization or the elastic agent's rendezvous)",
        blames_rank=False,
    ),
    Cause.LAUNCH_ADDRESS: Policy(
        OTHER,
        STOP,
        "the address, port or host name the launch chose cannot be used (a port taken, privileged or not the node's, "
        "a host name that does not resolve): the next attempt with the same settings meets it again",
        "could not set up its rendezvous: the address, port or host name its launch chose cannot be used",
        blames_rank=False,
    ),
    Cause.RENDEZVOUS_CLOSED: Policy(
        OTHER,
        RESTART,
        "another agent closed the rendezvous as its run ended (torch's elastic agent closes it on shutdown, and a "
        "late joiner gets RendezvousClosedError): this agent's failure follows a peer's end, and a relaunch opens a "
        "new rendezvous",
        "found the rendezvous closed by another agent whose run had ended",
        blames_rank=False,
    ),
    Cause.DATA_ERROR: Policy(
        EXCEPTION, STOP, "reading the data failed: the same sample fails again", "failed while reading its data"
    ),
    Cause.NCCL_SETUP: Policy(
        NETWORK,
        STOP,
        "NCCL could not set up its transport (interfaces, addresses, devices, shared memory, InfiniBand) before "
        "training made progress: a system or configuration problem that a restart on the same nodes repeats",
        "could not set up NCCL's transport (interfaces, peer connections, devices, shared memory, InfiniBand)",
        blames_rank=False,
    ),
    Cause.DIVERGED: Policy(
        OTHER,
        STOP,
        "nearly every step overflowed and was skipped: the same settings diverge again",
        "ran on without learning: nearly every step was skipped on overflow",
        blames_rank=False,
    ),
    Cause.TRANSIENT_EXC: Policy(
        EXCEPTION,
        RESTART,
        "an I/O, network, storage or timeout error of the job's infrastructure that nothing ties to the job's "
        "settings (after training progress, or a made connection that broke): the next attempt need not meet it",
        "failed on a transient I/O, network or timeout error of its infrastructure",
    ),
    Cause.SETUP_EXC: Policy(
        EXCEPTION,
        STOP,
        "it failed while the job was still setting up (process group, rendezvous, store) before training made "
        "progress: the next attempt meets the same addresses, ports and settings",
        "failed while setting up, before training made any progress",
    ),
    Cause.PROGRAM_ERROR: Policy(
        OTHER,
        STOP,
        "a program reported an error the log does not explain further: a plain restart is not known to help",
        "reported an error",
    ),
    Cause.NET_DROP: Policy(
        NETWORK,
        RESTART,
        "the rank's connections failed before any peer had failed: a network fault a restart clears",
        "lost its connections to its peers first, before any peer had failed or lost anything",
        "NET_DROP",
    ),
    Cause.HOST_OOM: Policy(
        OOM,
        STOP,
        "the kernel's OOM killer ended the rank: the same job runs out of host memory again",
        "was killed by the kernel's OOM killer",
        "HOST_OOM",
    ),
    Cause.NAN_LOSS: Policy(
        EXCEPTION,
        STOP,
        "the rank's gradients became NaN: the same data and settings diverge again",
        "found NaN in its own gradients before the data-parallel all-reduce",
        "NAN_LOSS",
    ),
    Cause.STORAGE_FULL: Policy(
        OTHER,
        STOP,
        "a write failed with no space left on the device: the volume stays full until someone frees space",
        "could not write: no space left on the device",
        "STORAGE_FULL",
    ),
    Cause.STORAGE_ERROR: Policy(
        OTHER,
        RESTART,
        "a checkpoint write failed with an I/O error of the storage (EIO, EREMOTEIO): a shared filesystem's failed "
        "RPC or server, which clears, as rules.EXCEPTION_MEANING reads the same errnos from any exception after "
        "progress; the next attempt resumes from the last checkpoint written (a full volume is STORAGE_FULL: STOP)",
        "could not write a checkpoint: the storage failed the write with an I/O error",
        blames_rank=False,
    ),
}
# Where logsage's restart for an injected fault's cause differs from NVRx's restart table on
# purpose: cause -> why (tests/analyze/test_logsage.py holds the two tables to this list).
UPSTREAM_DIFFERENCES: dict[str, str] = {}


# The scheduler's causes, by precedence: the first one in the log's scheduler lines decides.
SCHEDULER_CAUSES = (Cause.PREEMPTION, Cause.NODE_FAIL, Cause.NODE_LOST, Cause.TIME_LIMIT)
