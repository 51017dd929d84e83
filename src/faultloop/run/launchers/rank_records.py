"""Each framework rank's own exit record, for the launchers whose report names no rank (the
`deepspeed` launcher, Lightning's, Ray's) or only the first (accelerate's torch table, Open MPI).

A framework rank writes one small JSON file as it ends (`ExitRecorder`, atomically, first exit
path wins): its pid, the status its process leaves with (0, 1 for an exception, -N for a shutdown
signal it handled; None for a Ray worker, whose process outlives its training) and its error.
A rank killed by a signal it cannot handle (SIGKILL, SIGSEGV, SIGABRT) writes nothing: its exit
is taken from what its launcher printed where that names it (`LauncherSaid`), else, where the
fault's firing marker says that fault SIGKILLed the rank, FAILED by SIGKILL, else it stays
UNKNOWN; such an exit's error says where it was read. The rank the fault stopped (SIGSTOP) that
left no record and that no launcher line names is TERMINATED: its launcher's clean-up, or the
job's end, ended it. A rank that died by a signal after another
rank had failed was stopped by its launcher (TERMINATED), as torchrun's events say; the first
failure is the earliest non-zero record, or the fault's firing marker where the rank it fired on
left no record.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from faultloop.contracts import RankExit
from faultloop.core.atomic import write_atomic
from faultloop.faults import FAULTS
from faultloop.marker import marker_times, read_marker
from faultloop.run.launchers.base import JobEnd
from faultloop.signals import exit_signal

# The path prefix of this run's exit records (+ `<rank>.json`), set by run_job for every rank.
RANK_EXIT_ENV = "FAULTLOOP_RANK_EXIT"
RECORD_MAX_BYTES = 64 << 10  # a record is a few hundred bytes; a larger file is not one
ERROR_MAX_CHARS = 500


@dataclass(frozen=True)
class ExitRecord:
    """How one rank's process ended, as the rank itself wrote it."""

    rank: int
    pid: int
    exitcode: int | None
    error: str | None
    time: float


class ExitRecorder:
    """Writes this rank's exit record once: the first exit path (an exception, a signal, the
    end of training) is the one the process takes."""

    def __init__(self, prefix: str | None, rank: int) -> None:
        self.path = Path(f"{prefix}{rank}.json") if prefix else None
        self.rank = rank
        self._written = False

    def record(self, exitcode: int | None, error: str | None = None) -> None:
        if self.path is None or self._written:
            return
        self._written = True
        entry = ExitRecord(self.rank, os.getpid(), exitcode, error[:ERROR_MAX_CHARS] if error else None, time.time())
        try:
            write_atomic(self.path, json.dumps(asdict(entry)) + "\n")
        except OSError:  # a full disk must not mask how the rank ended; its exit stays the launcher's
            pass


def read_records(prefix: Path, world_size: int) -> dict[int, ExitRecord]:
    """The records the ranks left; one that is not a record (too large, not JSON, a rank
    outside the job) is left out: that rank's exit is then the launcher's."""
    found: dict[int, ExitRecord] = {}
    for rank in range(world_size):
        path = Path(f"{prefix}{rank}.json")
        try:
            if path.stat().st_size > RECORD_MAX_BYTES:
                continue
            raw = json.loads(path.read_text())
            entry = ExitRecord(
                rank=int(raw["rank"]),
                pid=int(raw["pid"]),
                exitcode=None if raw["exitcode"] is None else int(raw["exitcode"]),
                error=None if raw["error"] is None else str(raw["error"]),
                time=float(raw["time"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if entry.rank == rank:
            found[rank] = entry
    return found


@dataclass(frozen=True)
class LauncherSaid:
    """What a launcher printed about ranks that left no record: the exit codes it reported by
    rank, per node the pids it started in local-rank order, the codes it reported by pid, and a
    code it reported without naming the process."""

    by_rank: Mapping[int, int | None] = field(default_factory=dict)  # rank -> exit code
    spawned: Mapping[int, Sequence[int]] = field(default_factory=dict)  # node -> pids, local rank order
    by_pid: Mapping[int, int] = field(default_factory=dict)  # pid -> exit code
    unnamed: Mapping[int, int] = field(default_factory=dict)  # node -> an exit code naming no process
    wording: str = ""  # the launcher's line, quoted in the exit's error
    errors: Mapping[int, str] = field(default_factory=dict)  # rank -> the error the launcher quoted


def recorded(end: JobEnd, said: dict[int, RankExit], launcher: LauncherSaid | None = None) -> dict[int, RankExit]:
    """The launcher's own reading `said`, each rank's exit record over it, then what the launcher
    printed about the ranks that left none."""
    job = end.job
    records = read_records(job.cell / job.paths.rank_exit_prefix, job.spec.world_size)
    return with_records(said, records, end.lines, job.spec.gpus_per_node, launcher)


def first_failure(records: Mapping[int, ExitRecord], lines: Sequence[str]) -> tuple[int | None, float | None]:
    """The rank that failed first and when: the fault's rank at its firing marker where it left no
    record (a rank killed outright), else the earliest non-zero record."""
    fired = next((m.rank for line in lines if (m := read_marker(line)) and m.fired), None)
    if fired is not None and fired not in records:
        _, at = marker_times(lines, fired)
        if at is not None:
            return fired, at
    failed = [r for r in records.values() if r.exitcode != 0]
    first = min(failed, key=lambda r: r.time, default=None)
    return (first.rank, first.time) if first else (None, None)


def with_records(
    said: dict[int, RankExit],
    records: Mapping[int, ExitRecord],
    lines: Sequence[str],
    ranks_per_node: int,
    launcher: LauncherSaid | None = None,
) -> dict[int, RankExit]:
    """Each rank's exit: its own record; else what its launcher printed about its pid or, when it
    is the one rank of its node left unaccounted for, about its node; else `said` (the launcher's
    own reading)."""
    first, failed_at = first_failure(records, lines)
    ranks = dict(said)
    for rank, entry in records.items():
        code = entry.exitcode
        if code == 0:
            state = "SUCCEEDED"
        elif code is not None and code < 0 and rank != first and failed_at is not None and entry.time > failed_at:
            state = "TERMINATED"  # a shutdown signal after another rank failed: its launcher's
        else:
            state = "FAILED"
        ranks[rank] = RankExit(rank, code, exit_signal(code), state, entry.error)
    if launcher is not None:
        ranks.update(_from_launcher(ranks, records, launcher, ranks_per_node))
    killed = _fault_signalled(lines, signal.SIGKILL)
    if killed is not None and killed not in records and ranks.get(killed, RankExit(killed)).exitcode is None:
        said_of_it = ranks.get(killed, RankExit(killed)).error
        why = "no exit record (SIGKILL cannot be caught); the fault's firing marker says it sent SIGKILL to this rank"
        why = f"{why}; {said_of_it}" if said_of_it else why
        ranks[killed] = RankExit(killed, -signal.SIGKILL, "SIGKILL", "FAILED", why)
    return stopped_then_ended(ranks, lines, records)


def stopped_then_ended(
    ranks: dict[int, RankExit], lines: Sequence[str], records: Mapping[int, ExitRecord] | None = None
) -> dict[int, RankExit]:
    """The rank its fault stopped (SIGSTOP), left UNKNOWN by the launcher's report and by its own
    record, is TERMINATED: it could not fail by itself, and it ended when its launcher's clean-up
    (or the job's end) signalled it; which signal, no line says, so its code stays unknown."""
    stopped = _fault_signalled(lines, signal.SIGSTOP)
    if stopped is None or stopped in (records or {}) or ranks.get(stopped, RankExit(stopped)).state != "UNKNOWN":
        return ranks
    why = (
        "no exit record and no launcher line names it; the fault's firing marker says it stopped this rank "
        "(SIGSTOP), so its launcher's clean-up or the job's end ended it"
    )
    return {**ranks, stopped: RankExit(stopped, None, None, "TERMINATED", why)}


def _fault_signalled(lines: Sequence[str], sig: signal.Signals) -> int | None:
    """The rank the fault's firing marker names, where that fault sends it `sig` (nothing else
    says how a rank killed or stopped by it ended when its launcher names no rank)."""
    for line in lines:
        if (m := read_marker(line)) and m.fired and m.fault in FAULTS:
            return m.rank if FAULTS[m.fault].signal == sig else None
    return None


def _from_launcher(
    ranks: Mapping[int, RankExit], records: Mapping[int, ExitRecord], said: LauncherSaid, per_node: int
) -> dict[int, RankExit]:
    """Ranks without a record whose exit the launcher's lines give: by rank, by pid (spawn order
    gives a pid's local rank), or a code it printed for its node when exactly one rank there is
    unaccounted for."""
    recorded_pids = {r.pid for r in records.values()}
    found = {
        r: _reported(r, code, said.errors.get(r, said.wording)) for r, code in said.by_rank.items() if r not in records
    }
    for node, pids in said.spawned.items():
        for local, pid in enumerate(pids):
            rank = node * per_node + local
            if rank not in records and pid in said.by_pid:
                found[rank] = _reported(rank, said.by_pid[pid], said.wording)
    for node, code in said.unnamed.items():
        open_ranks = [
            r
            for r in range(node * per_node, (node + 1) * per_node)
            if r not in records and r not in found and ranks.get(r, RankExit(r)).state in ("UNKNOWN", "FAILED")
        ]
        spawned_unrecorded = [p for p in said.spawned.get(node, ()) if p not in recorded_pids]
        # a code one of the node's recorded ranks exited with may be that rank's: it names no one
        theirs = any(e.exitcode == code for r, e in records.items() if r // per_node == node)
        if len(open_ranks) == 1 and len(spawned_unrecorded) <= 1 and not theirs:
            found[open_ranks[0]] = _reported(open_ranks[0], code, said.wording)
    return found


def _reported(rank: int, code: int | None, wording: str) -> RankExit:
    why = f"no exit record (a rank killed outright writes none); its launcher reported: {wording}"
    return RankExit(rank, code, exit_signal(code), "SUCCEEDED" if code == 0 else "FAILED", why)
