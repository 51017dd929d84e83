"""Memory cgroups for the HOST_OOM fault, and the kernel's own lines for a job's window.

A rank that injects HOST_OOM moves itself into a child memory cgroup of the cell's cgroup folder
(`cell_folder`, passed to the ranks in MEMCG_ENV), with a limit a little above what it uses
there, and allocates past it: the kernel's OOM killer ends it, as it ends a job step that outgrows
SLURM's task cgroup. The folder sits under the memory cgroup run_job itself runs in (cgroup v1's
memory hierarchy where it is mounted, else the unified v2 hierarchy), so nothing outside the
caller's own cgroup is touched; run_job removes it after every attempt (`remove_folder`), also
after a failed or interrupted one (the next attempt's preparation removes what a killed run left).

`kernel_lines` reads the kernel's ring buffer (/dev/kmsg) for a time window and keeps the lines
about the cell's own cgroups and the processes killed in them: what a job epilog or a site's log
collector adds to a job's output, framed as `journalctl -k -o short-iso` prints them.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import os
import re
import signal
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MEMCG_ENV = "FAULTLOOP_MEMCG"  # the cell's cgroup folder (absolute path), for the ranks
V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")
KMSG = "/dev/kmsg"
FOLDER_PREFIX = "job_"
_PID_IN_KERNEL_LINE = re.compile(r"\bpid=(\d+)|[Kk]illed process (\d+)|reaped process (\d+)")


@dataclass(frozen=True)
class Hierarchy:
    """A mounted memory cgroup hierarchy: where, and which version's file names it uses."""

    root: Path
    v2: bool

    @property
    def limit_file(self) -> str:
        return "memory.max" if self.v2 else "memory.limit_in_bytes"

    @property
    def usage_file(self) -> str:
        return "memory.current" if self.v2 else "memory.usage_in_bytes"

    @property
    def events_file(self) -> str:
        """The file whose `oom_kill N` line counts the cgroup's OOM kills."""
        return "memory.events" if self.v2 else "memory.oom_control"


def hierarchy() -> Hierarchy | None:
    """cgroup v1's memory hierarchy where it is mounted (writable), else a v2 hierarchy with the
    memory controller; None where neither is (no OOM fault can be injected there)."""
    if (V1_ROOT / "memory.limit_in_bytes").is_file() and os.access(V1_ROOT, os.W_OK):
        return Hierarchy(V1_ROOT, v2=False)
    controllers = V2_ROOT / "cgroup.controllers"
    if controllers.is_file() and "memory" in controllers.read_text().split() and os.access(V2_ROOT, os.W_OK):
        return Hierarchy(V2_ROOT, v2=True)
    return None


def own_cgroup(h: Hierarchy, pid: int | str = "self") -> Path:
    """The cgroup a process is in, on this hierarchy (/proc/PID/cgroup)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (h.v2 and controllers == "") or (not h.v2 and "memory" in controllers.split(",")):
            return h.root / path.lstrip("/")
    return h.root


def cell_folder(h: Hierarchy, cell_dir: Path) -> Path:
    """The cell's cgroup folder: under the caller's own cgroup, named by the cell's path (one
    per cell, the same for every attempt, so a later attempt finds what a killed one left)."""
    digest = hashlib.sha256(str(cell_dir.resolve()).encode()).hexdigest()[:12]
    return own_cgroup(h) / f"{FOLDER_PREFIX}{digest}"


def confine(folder: Path, headroom_bytes: int) -> Path:
    """Move this process into a new child cgroup of `folder` whose limit is its use there plus
    `headroom_bytes`; the child's path."""
    h = hierarchy()
    if h is None:
        raise OSError(errno.ENOTSUP, "no writable memory cgroup hierarchy")
    child = folder / str(os.getpid())
    child.mkdir(parents=True, exist_ok=True)
    if h.v2:  # v2 keeps processes in leaves only: the folder hands the memory controller down
        (folder / "cgroup.subtree_control").write_text("+memory")
    (child / "cgroup.procs").write_text(str(os.getpid()))
    usage = int((child / h.usage_file).read_text())
    (child / h.limit_file).write_text(str(usage + headroom_bytes))
    return child


def oom_kills(h: Hierarchy, cgroup: Path) -> int:
    """The kernel's count of OOM kills in a cgroup (`oom_kill` of memory.oom_control / memory.events)."""
    for line in (cgroup / h.events_file).read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return int(value)
    return 0


def remove_folder(folder: Path, wait_s: float = 5.0) -> list[tuple[str, int]]:
    """Remove a cell's cgroup folder, deepest first; a process still in it is killed first (a
    leftover of the attempt). The OOM-kill count of each child removed, by name."""
    h = hierarchy()
    if h is None or not folder.is_dir():
        return []
    counts: list[tuple[str, int]] = []
    for cgroup in [*sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)), folder]:
        if cgroup != folder:
            counts.append((cgroup.name, oom_kills(h, cgroup)))
        deadline = time.monotonic() + wait_s
        while True:
            for pid in (cgroup / "cgroup.procs").read_text().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                cgroup.rmdir()
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    return counts


def _kmsg_records() -> Iterator[tuple[float, str]]:
    """(seconds since boot, message) of every record in the kernel's ring buffer."""
    fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
    try:
        os.lseek(fd, 0, os.SEEK_DATA)  # from the oldest record kept
        while True:
            try:
                raw = os.read(fd, 8192)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # a record was overwritten while reading: go on
                    continue
                raise
            head, _, rest = raw.decode(errors="replace").partition(";")
            fields = head.split(",")
            if len(fields) >= 3:
                yield int(fields[2]) / 1e6, rest.split("\n", 1)[0]
    finally:
        os.close(fd)


def kernel_lines(folder: Path, start_monotonic: float, end_monotonic: float) -> list[str]:
    """The kernel's lines of the window about the cell's cgroups and the processes killed in them,
    framed as journald prints the kernel's log; [] where the ring buffer cannot be read."""
    token = folder.name
    try:
        window = [(t, m) for t, m in _kmsg_records() if start_monotonic - 1 <= t <= end_monotonic + 1]
    except OSError:
        return []
    pids = {
        next(g for g in m.groups() if g)
        for _, text in window
        if token in text
        for m in _PID_IN_KERNEL_LINE.finditer(text)
    }
    offset = time.time() - time.monotonic()
    host = socket.gethostname()
    kept = []
    for t, text in window:
        named = {next(g for g in m.groups() if g) for m in _PID_IN_KERNEL_LINE.finditer(text)}
        if token in text or named & pids:
            when = dt.datetime.fromtimestamp(offset + t, dt.UTC).astimezone()
            kept.append(f"{when.isoformat(timespec='microseconds')} {host} kernel: {text}")
    return kept
