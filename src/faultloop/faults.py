"""The fault table and the restart table: the one source of truth for the 12 upstream faults.

Names, enum values and expected restart decisions follow NVRx's ``Fault`` enum and the
``_RESTART_TABLE`` of its judge, so faultloop scores are comparable with upstream's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Fault:
    """One injectable fault: how it shows up (category) and what a restart policy should do."""

    name: str
    value: int
    category: str
    restart: str
    rationale: str
    hangs: bool  # the injected rank stays alive without progress until someone kills it


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault("GPU_ERROR", 1, GPU_ERROR_CATEGORY, STOP, "hardware GPU error", False),
        Fault("GPU_SLEEP", 2, HANG, RESTART, "transient GPU hang", True),
        Fault("WORKLOAD_EXC", 3, EXCEPTION, STOP, "code bug", False),
        Fault("ASYNC_EXC", 4, EXCEPTION, STOP, "code bug", False),
        Fault("SIGNAL_EXC", 5, EXCEPTION, RESTART, "signal-based exception, typically recoverable", False),
        Fault("OS_ABORT", 6, CRASH, STOP, "severe fault", False),
        Fault("LOCK_GIL", 7, HANG, RESTART, "transient GIL hang", True),
        Fault("SEGFAULT", 8, CRASH, STOP, "code or memory corruption", False),
        Fault("SIGINT", 9, EXTERNAL_SIGNAL, RESTART, "external signal", False),
        Fault("SIGKILL", 10, CRASH, STOP, "hard kill, OOM or external pressure", False),
        Fault("SIGTERM", 11, EXTERNAL_SIGNAL, RESTART, "external signal", False),
        Fault("SIGSTOP", 12, HANG, RESTART, "external signal", True),
    )
}
FAULT_NAMES = tuple(FAULTS)


def expected_restart(fault_type: str) -> str:
    """Upstream's expected decision for a fault type; "unknown" for anything else."""
    fault = FAULTS.get(fault_type)
    return fault.restart if fault else "unknown"


# Ground-truth lines: the scheduled marker and the fire-time line (both carry "FAULT INJECTION")
# and upstream's injector logger. Upstream's own filter; removed before any analyzer reads a log.
MARKER_RE = re.compile(r"FAULT INJECTION|nvidia_resiliency_ext\.shared_utils\.inject_fault")


def strip_markers(lines: Iterable[str]) -> Iterator[str]:
    """Yield the lines that do not reveal the injected fault."""
    return (line for line in lines if not MARKER_RE.search(line))
