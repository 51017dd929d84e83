"""The injection marker: the ground-truth lines an injected fault leaves in the main log.

Written here (the built-in workload's two lines: the fault is scheduled, then it fires) and read
here (run_job's and adopt's fire times, adopt's check against the tracking file, the site
workload's evidence that its fault fired, and the filter that removes every such line before an
analyzer reads the log). Megatron's scheduling line and NVRx's injector logger are read too.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from faultloop.faults import FAULTS

MARKER = "FAULT INJECTION"
INJECTOR_LOGGER = "nvidia_resiliency_ext.shared_utils.inject_fault"
SCHEDULED = "will inject fault"
FIRING = "firing fault"
# The wall-clock stamp the workload puts before each of its lines (local time).
STAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f"

# Upstream's own filter: every line that reveals the injected fault.
MARKER_RE = re.compile(rf"{MARKER}|{re.escape(INJECTOR_LOGGER)}")
_DETAIL_RE = re.compile(rf"{MARKER}: Rank (\d+) ({SCHEDULED}|{FIRING}) (\w+)")
_FIRED_AT_RE = re.compile(rf"{FIRING} \w+ at iteration (\d+)")
_SCHEDULED_AT_RE = re.compile(rf"{SCHEDULED} \w+ at .*\(iteration (\d+), delay")
# A workload line as its launcher prints it: `[<stamp>] FAULT INJECTION: Rank 3 firing fault SIGKILL ...`
# after the launcher's prefix, if any (srun's label `3: `, Open MPI's `[1,3]<stdout>:`, ...)
_TIMED_RE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] " + _DETAIL_RE.pattern)
_INJECTOR_SIGNAL_RE = re.compile(r"signal=<Signals\.(\w+)")
_INJECTOR_FAULT_RE = re.compile(r"fault=<Fault\.(\w+)")


def stamp(t: float | None = None) -> str:
    """Wall-clock time in the marker format `YYYY-mm-dd HH:MM:SS.ffffff` (local time)."""
    when = dt.datetime.now() if t is None else dt.datetime.fromtimestamp(t)
    return when.strftime(STAMP_FORMAT)


def scheduled_line(rank: int, fault: str, at: float, iteration: int, delay_s: float) -> str:
    return f"{MARKER}: Rank {rank} {SCHEDULED} {fault} at {stamp(at)} (iteration {iteration}, delay {delay_s:g} s)"


def firing_line(rank: int, fault: str, iteration: int, *, device: str, pid: int) -> str:
    """The fire-time line; its detail is the fault row's injector wording."""
    wording = FAULTS[fault].fire_wording(device=device, pid=pid)
    return f"{MARKER}: Rank {rank} {FIRING} {fault} at iteration {iteration}: {wording}"


def is_marker(line: str) -> bool:
    return bool(MARKER_RE.search(line))


def strip_markers(lines: Iterable[str]) -> Iterator[str]:
    """Yield the lines that do not reveal the injected fault."""
    return (line for line in lines if not MARKER_RE.search(line))


def names_injection(text: str) -> bool:
    """Whether a log holds a marker line (a site workload's evidence that its fault fired)."""
    return MARKER in text


@dataclass(frozen=True)
class Marker:
    """What one `FAULT INJECTION: Rank R ...` line says."""

    rank: int
    fired: bool  # the fire-time line (else the scheduling line)
    fault: str
    iteration: int | None = None  # the fire-time line's iteration (the built-in workload's wording)
    scheduled_at: int | None = None  # the scheduling line's iteration, the pool's ITER (the same wording)


def read_marker(line: str) -> Marker | None:
    m = _DETAIL_RE.search(line)
    if not m:
        return None
    at = _FIRED_AT_RE.search(line) if m[2] == FIRING else None
    due = _SCHEDULED_AT_RE.search(line) if m[2] == SCHEDULED else None
    return Marker(int(m[1]), m[2] == FIRING, m[3], int(at[1]) if at else None, int(due[1]) if due else None)


@dataclass(frozen=True)
class InjectorLine:
    """What a line of NVRx's injector logger says: the faults its wording fires (None: it
    only schedules), the signal it sends and the fault it names, where it says so."""

    fires: tuple[str, ...] | None
    signal: str | None
    fault: str | None


def read_injector_line(line: str) -> InjectorLine | None:
    """None for a line that is not the injector logger's."""
    if INJECTOR_LOGGER not in line:
        return None
    fires = next((names for words, names in _fire_wordings().items() if words in line), None)
    sig = _INJECTOR_SIGNAL_RE.search(line)
    named = _INJECTOR_FAULT_RE.search(line)
    return InjectorLine(fires, sig[1] if sig else None, named[1] if named else None)


def _fire_wordings() -> dict[str, tuple[str, ...]]:
    """Injector wording -> the faults that fire with it, in the fault table's order."""
    wordings: dict[str, tuple[str, ...]] = {}
    for fault in FAULTS.values():
        wordings[fault.fires_with] = (*wordings.get(fault.fires_with, ()), fault.name)
    return wordings


def marker_times(lines: Iterable[str], rank: int) -> tuple[float | None, float | None]:
    """(scheduled, fired) times of the injected rank's marker lines."""
    scheduled = fired = None
    for line in lines:
        m = _TIMED_RE.search(line)
        if not m or int(m.group(2)) != rank:
            continue
        t = dt.datetime.strptime(m.group(1), STAMP_FORMAT).timestamp()
        if m.group(3) == SCHEDULED and scheduled is None:
            scheduled = t
        elif m.group(3) == FIRING and fired is None:
            fired = t
    return scheduled, fired
