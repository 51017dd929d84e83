"""The fault table and the restart decisions: the one source of truth for every injectable fault.

The first twelve rows are upstream's: names, enum values and expected restart decisions follow
NVRx's ``Fault`` enum and the ``_RESTART_TABLE`` of its judge, so faultloop scores are comparable
with upstream's. The rows after them are faults clusters see that upstream's injector has no
mechanism for (a desync, a dropped link, the kernel's OOM killer, NaN, a full disk). Everything
else faultloop asks about a fault (how the built-in workload injects it, the wording its
injector fires with, the signal it sends, the log lines that show it) is a field of its row.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from enum import StrEnum

RESTART = "RESTART IMMEDIATE"
STOP = "STOP - DONT RESTART IMMEDIATE"
ERRORS_NOT_FOUND = "ERRORS NOT FOUND"
NO_LOGS = "NO LOGS"
RESTART_DECISIONS = (RESTART, STOP, ERRORS_NOT_FOUND, NO_LOGS)

# Fault categories a log can support (also the logsage JSON vocabulary).
HANG = "hang"
CRASH = "crash"
EXCEPTION = "exception"
GPU_ERROR_CATEGORY = "gpu_error"
OOM = "oom"
NETWORK = "network"
EXTERNAL_SIGNAL = "external_signal"
OTHER = "other"
NONE = "none"
CATEGORIES = (HANG, CRASH, EXCEPTION, GPU_ERROR_CATEGORY, OOM, NETWORK, EXTERNAL_SIGNAL, OTHER, NONE)


class Recurrence(StrEnum):
    """What a fault does when its job restarts (resumed from its newest checkpoint): the truth a
    job's life is scored against and the built-in workload re-injects by. Read by the scorer and
    the injector only, never by an analyzer."""

    PASSES = "passes"  # gone after a restart: a dropped link, a kill from outside
    SAME_STEP = "same_step"  # comes back when the resumed job reaches the same step: the program's own
    SAME_NODE = "same_node"  # comes back on whichever rank runs on the same node, until it is drained


@dataclass(frozen=True)
class Fault:
    """One injectable fault: everything the rest of faultloop asks about it, in one row.

    Adding a fault is adding a row: the pool, planning, the built-in workload (through
    `injector`), adopt (through `fires_with`) and scoring's evidence read it here.
    """

    name: str
    value: int
    category: str
    restart: str
    rationale: str
    hangs: bool  # the injected rank stays alive without progress until someone kills it
    # The built-in workload's mechanism (the injectors of faultloop.run.workload.Trainer).
    injector: str
    # The words of the injector's fire-time line that name this fault (upstream's injector wording;
    # several faults share "sending signal=", told apart by the signal), then the rest of that line.
    fires_with: str
    detail: str = ""
    signal: signal.Signals | None = None  # the signal it sends the injected rank, if any
    # What the fault leaves in a log when it fires (never its marker lines, which are stripped):
    # the lines scoring points at as the ones an analyzer should have read.
    evidence: str = r"$^"
    upstream: bool = True  # one of NVRx's twelve (its Fault enum); False: a faultloop addition
    # What a restart does to it (stated for every row), and why.
    on_restart: Recurrence = field(kw_only=True)
    on_restart_why: str = field(kw_only=True)

    def fire_wording(self, *, device: str, pid: int) -> str:
        """The fire-time detail of the marker line, in upstream's injector wording."""
        return self.fires_with + self.detail.format(device=device, signal=self.signal, pid=pid)


_SIGNAL_SENT = "sending signal="
_SIGNAL_DETAIL = "{signal!r} to pid={pid}"
_HANG_EVIDENCE = r"watchdog|timed? ?out|timeout|stall|heartbeat"
_EXCEPTION_EVIDENCE = r"InjectedException|Traceback|Exception"


def _signal_fault(
    name: str,
    value: int,
    category: str,
    restart: str,
    rationale: str,
    sig: signal.Signals,
    evidence: str,
    on_restart: Recurrence = Recurrence.PASSES,
    on_restart_why: str = "a signal sent from outside the job: the restarted job is not sent it again",
) -> Fault:
    return Fault(
        name,
        value,
        category,
        restart,
        rationale,
        sig == signal.SIGSTOP,
        "send_signal",
        _SIGNAL_SENT,
        _SIGNAL_DETAIL,
        sig,
        evidence,
        on_restart=on_restart,
        on_restart_why=on_restart_why,
    )


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault(
            "GPU_ERROR",
            1,
            GPU_ERROR_CATEGORY,
            STOP,
            "hardware GPU error",
            hangs=False,
            injector="gpu_error",
            fires_with="raising GPU error",
            detail=" on {device}",
            evidence=r"illegal memory access|CUDA error|cudaError|device-side assert|GPU error",
            on_restart=Recurrence.SAME_NODE,
            on_restart_why=(
                "the GPU itself is faulty: it fails again in whichever rank runs on it, until its node is drained"
            ),
        ),
        Fault(
            "GPU_SLEEP",
            2,
            HANG,
            RESTART,
            "transient GPU hang",
            hangs=True,
            injector="gpu_sleep",
            fires_with="GPU sleep on",
            detail=" device={device}",
            evidence=_HANG_EVIDENCE,
            on_restart=Recurrence.SAME_NODE,
            on_restart_why=(
                "a GPU that stops answering is its node's hardware or driver: it hangs again on that node "
                "until the node is drained"
            ),
        ),
        Fault(
            "WORKLOAD_EXC",
            3,
            EXCEPTION,
            STOP,
            "code bug",
            hangs=False,
            injector="shard_overrun",
            fires_with="raising workload exception",
            evidence=_EXCEPTION_EVIDENCE,
            on_restart=Recurrence.SAME_STEP,
            on_restart_why="a bug in the training code: the resumed job raises again when it reaches the same step",
        ),
        Fault(
            "ASYNC_EXC",
            4,
            EXCEPTION,
            STOP,
            "code bug",
            hangs=False,
            injector="async_raise",
            fires_with="asynchronously raising",
            detail=" exception",
            evidence=_EXCEPTION_EVIDENCE,
            on_restart=Recurrence.SAME_STEP,
            on_restart_why="the job's own code raises it: the resumed job runs that code again at the same step",
        ),
        _signal_fault(
            "SIGNAL_EXC",
            5,
            EXCEPTION,
            RESTART,
            "signal-based exception, typically recoverable",
            signal.SIGUSR1,
            r"SIGUSR1|InjectedException|Traceback",
        ),
        Fault(
            "OS_ABORT",
            6,
            CRASH,
            STOP,
            "severe fault",
            hangs=False,
            injector="abort",
            fires_with="aborting",
            evidence=r"SIGABRT|abort|signal 6\b|exit ?code[:= ]*-6\b|core dumped",
            on_restart=Recurrence.SAME_STEP,
            on_restart_why=(
                "the program aborts on its own state: the resumed job reaches the same state at the same step "
            ),
        ),
        Fault(
            "LOCK_GIL",
            7,
            HANG,
            RESTART,
            "transient GIL hang",
            hangs=True,
            injector="hold_gil",
            fires_with="locking GIL",
            evidence=_HANG_EVIDENCE + "|GIL",
            on_restart=Recurrence.PASSES,
            on_restart_why="a process that stopped making progress: a restarted process does not hold the lock",
        ),
        Fault(
            "SEGFAULT",
            8,
            CRASH,
            STOP,
            "code or memory corruption",
            hangs=False,
            injector="bad_pointer",
            fires_with="raising segmentation fault",
            evidence=r"SIGSEGV|segmentation fault|segfault|signal 11\b|exit ?code[:= ]*-11\b",
            on_restart=Recurrence.SAME_STEP,
            on_restart_why="code or memory corruption in the program: the resumed job crashes again at the same step",
        ),
        _signal_fault(
            "SIGINT",
            9,
            EXTERNAL_SIGNAL,
            RESTART,
            "external signal",
            signal.SIGINT,
            r"SIGINT|KeyboardInterrupt|signal 2\b|exit ?code[:= ]*-2\b",
        ),
        _signal_fault(
            "SIGKILL",
            10,
            CRASH,
            STOP,
            "hard kill, OOM or external pressure",
            signal.SIGKILL,
            r"SIGKILL|signal 9\b|killed|exit ?code[:= ]*-9\b",
            on_restart_why=(
                "a kill from outside the job (an operator, a preemption): the restarted job is not killed again"
            ),
        ),
        _signal_fault(
            "SIGTERM",
            11,
            EXTERNAL_SIGNAL,
            RESTART,
            "external signal",
            signal.SIGTERM,
            r"SIGTERM|signal 15\b|terminated|exit ?code[:= ]*-15\b",
        ),
        _signal_fault(
            "SIGSTOP",
            12,
            HANG,
            RESTART,
            "external signal",
            signal.SIGSTOP,
            r"SIGSTOP|stopped|watchdog|timed? ?out|timeout|stall",
            on_restart_why="a process stopped from outside the job: the restarted job is not stopped again",
        ),
        # -- faultloop's additions (upstream's injector has no mechanism for them) -------------
        Fault(
            "DESYNC",
            13,
            HANG,
            STOP,
            "ranks issued different collectives: a program-order bug recurs at the same point",
            hangs=True,
            injector="extra_collective",
            fires_with="issuing a collective the other ranks do not",
            evidence=_HANG_EVIDENCE + "|mismatch|barrier",
            upstream=False,
            on_restart=Recurrence.SAME_STEP,
            on_restart_why=(
                "a program-order bug: the resumed job issues the same mismatched collective at the same step "
            ),
        ),
        Fault(
            "NET_DROP",
            14,
            NETWORK,
            RESTART,
            "the rank's links to its peers were cut: a transient network fault a restart clears",
            hangs=False,
            injector="cut_connections",
            fires_with="shutting down connections to peers",
            evidence=r"[Cc]onnection (?:closed|reset) by peer|Broken pipe|not connected|network",
            upstream=False,
            on_restart=Recurrence.PASSES,
            on_restart_why="a dropped link: the restarted job's connections are new and the link is back",
        ),
        Fault(
            "HOST_OOM",
            15,
            OOM,
            STOP,
            "the kernel's OOM killer ended the rank: the same job runs out of memory again",
            hangs=False,
            injector="exceed_memory_limit",
            fires_with="allocating past the rank's memory cgroup limit",
            evidence=r"oom[-_]kill|[Oo]ut of memory|Killed process|SIGKILL|signal 9\b|exit ?code[:= ]*-9\b",
            upstream=False,
            on_restart=Recurrence.SAME_NODE,
            on_restart_why=(
                "the node's memory is too small for what its ranks hold: it runs out again on that node until "
                "the node is drained"
            ),
        ),
        Fault(
            "NAN_LOSS",
            16,
            EXCEPTION,
            STOP,
            "the rank's gradients became NaN: the same data and settings diverge again",
            hangs=False,
            injector="poison_gradients",
            fires_with="turning the rank's gradients into NaN",
            evidence=r"\bNaN\b|\bnan\b|Traceback",
            upstream=False,
            on_restart=Recurrence.SAME_STEP,
            on_restart_why="the same data and settings diverge again when the resumed job reaches the same step",
        ),
        Fault(
            "STORAGE_FULL",
            17,
            OTHER,
            STOP,
            "the checkpoint volume is full: it stays full until someone frees space",
            hangs=False,
            injector="fill_checkpoint_volume",
            fires_with="writing the rank's checkpoint to a full device",
            evidence=r"No space left on device|ENOSPC|Errno 28",
            upstream=False,
            on_restart=Recurrence.SAME_STEP,
            on_restart_why="the volume stays full: the resumed job's checkpoint at the same step fails again",
        ),
    )
}
# The upstream faults in table order, fixed at import; code asking about "every fault" reads FAULTS,
# which a site (or a test) may extend with a row.
FAULT_NAMES = tuple(name for name, fault in FAULTS.items() if fault.upstream)
# faultloop's own additions, in table order (config/pools/cluster.tsv runs them).
CLUSTER_FAULT_NAMES = tuple(name for name, fault in FAULTS.items() if not fault.upstream)


def expected_restart(fault_type: str) -> str:
    """Upstream's expected decision for a fault type; "unknown" for anything else."""
    fault = FAULTS.get(fault_type)
    return fault.restart if fault else "unknown"
